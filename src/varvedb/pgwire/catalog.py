"""asyncpg's own catalog statements, which varvedb's SQL cannot run yet.

SQL answers the catalog lookups that read one relation (sql/pg_catalog.py:
pg_type and pg_namespace, `to_regtype()`, `::regtype`: psycopg's TypeInfo and
pgvector.psycopg's register_vector run as SQL). asyncpg's join pg_type with
pg_namespace (and its introspection adds a recursive CTE over pg_range,
pg_attribute and pg_class), and SQL has no joins. Until it has, those few
fixed statements (its type lookup, its introspection, its JIT switch and its
pool's reset) are recognised by their parse-tree fingerprint (pglast's, which
ignores constants, spacing and case) and answered from the same type table
(query/pg_types.py). A variant of them that is not the text asyncpg sends runs
as SQL and fails. The tests run asyncpg, so a release that changes its queries
shows up there.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pglast.parser import ParseError, fingerprint

from ..query.pg_types import TYPES
from ..results import SqlResult
from ..sql import run_each
from . import types as T


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


def _type_by_name(params, session) -> list[SqlResult]:
    """asyncpg's set_type_codec (pgvector.asyncpg.register_vector uses it)."""
    t = None
    if params:
        t = next((t for t in TYPES.values() if t.name == params[0]
                  and t.namespace_name == params[1]), None)
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
            rows.append((t.oid, t.namespace_name, t.name, "b", None, t.element,
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
