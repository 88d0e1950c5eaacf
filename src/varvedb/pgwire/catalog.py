"""What drivers ask the server about itself: the type catalog a client looks
pgvector's types up in, and the session set-up statements drivers send.

varvedb has no pg_catalog tables and its SQL has no joins, but drivers send a
handful of fixed catalog queries (psycopg's and pgvector-python's type lookup,
asyncpg's type introspection, its JIT switch and its pool's reset). Each is
recognised by its parse-tree fingerprint (pglast's, which ignores constants,
spacing and case), never by running it, and answered from the protocol's own
type table (types.py): the same OIDs the result columns carry. A statement not
in the table runs as SQL. The fingerprints are of the texts the named clients
send; the tests run those clients, so a client that changes its query shows up
there.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pglast.parser import ParseError, fingerprint

from ..results import SqlResult
from ..sql import run_each
from . import types as T


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str            # typname
    regtype: str         # as oid::regtype::text shows it
    array: int = 0       # typarray (0: none)
    element: int = 0     # typelem (an array type's element)
    namespace: str = "pg_catalog"


def _types() -> dict[int, PgType]:
    scalars = [
        (T.BOOL, "bool", "boolean"), (T.BYTEA, "bytea", "bytea"), (T.NAME, "name", "name"),
        (T.INT8, "int8", "bigint"), (T.INT2, "int2", "smallint"), (T.INT4, "int4", "integer"),
        (T.TEXT, "text", "text"), (T.OID, "oid", "oid"), (T.CHAR, "char", '"char"'),
        (T.JSON, "json", "json"), (T.FLOAT4, "float4", "real"),
        (T.FLOAT8, "float8", "double precision"), (T.VARCHAR, "varchar", "character varying"),
        (T.BPCHAR, "bpchar", "character"), (T.TIMESTAMP, "timestamp",
                                            "timestamp without time zone"),
        (T.TIMESTAMPTZ, "timestamptz", "timestamp with time zone"),
        (T.NUMERIC, "numeric", "numeric"), (T.JSONB, "jsonb", "jsonb"), (T.BIT, "bit", "bit"),
        (T.VARBIT, "varbit", "bit varying"),
        (T.VECTOR, "vector", "vector"), (T.HALFVEC, "halfvec", "halfvec"),
        (T.SPARSEVEC, "sparsevec", "sparsevec")]
    out = {}
    for oid, name, regtype in scalars:
        ns = "public" if oid >= 16384 else "pg_catalog"     # an extension's types
        array = T.ARRAYS.get(oid, 0)
        out[oid] = PgType(oid, name, regtype, array, 0, ns)
        if array:
            out[array] = PgType(array, "_" + name, regtype + "[]", 0, oid, ns)
    return out


TYPES = _types()
_BY_NAME = {}
for _t in TYPES.values():
    _BY_NAME[_t.name] = _BY_NAME[_t.namespace + "." + _t.name] = _t
    _BY_NAME.setdefault(_t.regtype, _t)
    if _t.element:
        _BY_NAME.setdefault(TYPES[_t.element].name + "[]", _t)


def to_regtype(name) -> PgType | None:
    """PostgreSQL's to_regtype(name): the type a name (schema-qualified or not, an
    array as name[]) denotes, or None."""
    if not isinstance(name, str):
        return None
    return _BY_NAME.get(name.strip().strip('"').lower())


# ---- the statements ---------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    """A recognised statement: its parameters' type OIDs and its results
    (params None: only the columns, for a Describe before Bind)."""
    param_oids: tuple[int, ...]
    run: Callable[[list | None, object], list[SqlResult]]


def _rows(columns: list[tuple[str, str]], rows: list[tuple]) -> SqlResult:
    return SqlResult([c for c, _ in columns], rows, f"SELECT {len(rows)}",
                     kinds=[k for _, k in columns])


def _type_info(params, session) -> list[SqlResult]:
    """psycopg's TypeInfo.fetch (pgvector.psycopg.register_vector uses it)."""
    t = to_regtype(params[0]) if params else None
    rows = [] if t is None else [(t.name, t.oid, t.array, t.regtype, ",")]
    return [_rows([("name", "name"), ("oid", "oid"), ("array_oid", "oid"),
                   ("regtype", "text"), ("delimiter", "char")], rows)]


def _type_by_name(params, session) -> list[SqlResult]:
    """asyncpg's set_type_codec (pgvector.asyncpg.register_vector uses it)."""
    t = _BY_NAME.get(f"{params[1]}.{params[0]}") if params else None
    rows = [] if t is None else [(t.oid, t.element, "b")]
    return [_rows([("oid", "oid"), ("elemtype", "oid"), ("kind", "char")], rows)]


_INTRO_COLUMNS = [("oid", "oid"), ("ns", "name"), ("name", "name"), ("kind", "char"),
                  ("basetype", "oid"), ("elemtype", "oid"), ("elemdelim", "char"),
                  ("range_subtype", "oid"), ("attrtypoids", "oid[]"), ("attrnames", "text[]"),
                  ("depth", "int4"), ("basetype_name", "text"), ("elemtype_name", "text"),
                  ("range_subtype_name", "text")]


def _introspect(params, session) -> list[SqlResult]:
    """asyncpg's type introspection: each asked type, then the element types of
    the arrays among them (deepest first, as its recursive query orders them)."""
    rows, seen = [], set()
    level = [o for o in (params[0] or ()) if o in TYPES] if params else []
    depth = 0
    while level:
        for oid in level:
            t = TYPES[oid]
            if (oid, depth) in seen:
                continue
            seen.add((oid, depth))
            e = TYPES.get(t.element)
            rows.append((t.oid, t.namespace, t.name, "b", None, t.element,
                         "," if e else None, None, None, None, depth, None,
                         e.regtype if e else None, None))
        level = [TYPES[o].element for o in level if TYPES[o].element]
        depth += 1
    rows.sort(key=lambda r: -r[10])
    return [_rows(_INTRO_COLUMNS, rows)]


def _jit_off(params, session) -> list[SqlResult]:
    """asyncpg turns JIT off around its introspection: there is none to turn."""
    return [_rows([("cur", "text"), ("new", "text")], [("off", "off")] if params is not None
                  else [])]


def _jit_back(params, session) -> list[SqlResult]:
    return [_rows([("set_config", "text")], [(params[0],)] if params else [])]


def _pool_reset(params, session) -> list[SqlResult]:
    """asyncpg's pool resets a connection it takes back: no advisory locks,
    cursors or listeners exist here; RESET ALL is the session's."""
    return [_rows([("pg_advisory_unlock_all", "text")], [("",)]),
            SqlResult([], [], "CLOSE CURSOR ALL"), SqlResult([], [], "UNLISTEN"),
            *run_each(session, "RESET ALL")]


# fingerprint -> answer; each line names the client that sends it
_ANSWERS = {
    "6178778be89cfaae": Answer((T.TEXT,), _type_info),     # psycopg 3, server >= 9.4
    "814df340f168a622": Answer((T.TEXT,), _type_info),     # psycopg 3, older servers
    "2cfc0883a975dbe1": Answer((T.NAME, T.NAME), _type_by_name),   # asyncpg
    "c81b7fbf8e0595e3": Answer((T.ARRAYS[T.OID],), _introspect),    # asyncpg, server >= 14
    "294df0c7a39fc6ff": Answer((T.ARRAYS[T.OID],), _introspect),    # asyncpg, server < 14
    "bc96818896c15d7a": Answer((), _jit_off),                       # asyncpg
    "39b91759afd4bb88": Answer((T.TEXT,), _jit_back),               # asyncpg
    "4d532b0003a15448": Answer((), _pool_reset),                    # asyncpg's pool
}
# words every recognised text holds; a text without them is not fingerprinted
_MARKS = ("pg_type", "set_config", "pg_advisory_unlock_all")
_seen: dict[str, Answer | None] = {}


def answer_for(text: str) -> Answer | None:
    """The catalog's answer to a statement text, or None: run it as SQL."""
    if not any(m in text for m in _MARKS):
        return None
    got = _seen.get(text, False)
    if got is False:
        try:
            got = _ANSWERS.get(fingerprint(text))
        except ParseError:
            got = None
        if len(_seen) < 256:       # drivers send few distinct texts
            _seen[text] = got
    return got
