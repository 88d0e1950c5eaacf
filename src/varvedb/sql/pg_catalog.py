r"""pg_catalog's relations that drivers read to look types up (pg_type and
pg_namespace), that applications read to check for pgvector (pg_extension) and
that psql's \d, \dt, \di, \l, \du and \df read (pg_class, pg_am, pg_index,
pg_database, pg_roles, pg_proc), as rows SQL reads like a table's (`FROM
pg_type t WHERE t.oid = to_regtype($1)`), made from query/pg_types.py's and
query/pg_procs.py's tables and the database's collections and indexes when a
statement reads them. As in PostgreSQL, pg_catalog is searched before any
other schema: an unqualified pg_type is the catalog's.

Relations' OIDs are stable while the catalog is: a collection's is made from
its catalog id (TABLE_OID_BASE + 1 000 a collection), its indexes' follow it
(its id key, `{table}_pkey` mostly: Schema.key_name, first), so a client may read an OID in one
statement and use it in the next, as psql's \d does."""
from __future__ import annotations

import os
from dataclasses import dataclass, fields
from decimal import Decimal

import numpy as np

from ..errors import SqlError
from ..query.arrays import OidVector, SpaceVector
from ..query.expr import Val, object_array
from ..query.literals import value_text
from ..query.pg_procs import OPERATORS, PROCS
from ..query.pg_types import OIDS, PG_CATALOG, PUBLIC, TYPES
from ..schema import DIMS_OPS, HNSW, array_element, check_op, fit_index, index_shape
from .settings import setting_text
from .ddl import OPCLASSES, SQL_TYPES, index_names
from .index_exprs import FLIPPED, index_texts

# fixed-width types' typlen; every other type is variable-length (-1)
_LENGTHS = {"bool": 1, "char": 1, "int2": 2, "int4": 4, "oid": 4, "float4": 4, "int8": 8,
            "float8": 8, "timestamp": 8, "timestamptz": 8, "regtype": 4}


def _ints(values) -> Val:
    a = np.array(values, np.int64)
    return Val("int", a, np.zeros(len(a), bool))


def _texts(values) -> Val:
    return Val("text", object_array(list(values)), np.zeros(len(values), bool))


def _nulls(n: int) -> Val:
    return Val("null", None, np.ones(n, bool))


def _bools(values) -> Val:
    a = np.array(values, bool)
    return Val("bool", a, np.zeros(len(a), bool))


# name -> (its column names, a function of the context making its columns' values);
# the names are known without a database, as a query is compiled (sql/select.py)
RELATIONS: dict[str, tuple[tuple[str, ...], object]] = {}


def _relation(name: str, *columns: str):
    """Registers a pg_catalog relation: its column names and the function of its rows."""
    def register(rows):
        RELATIONS[name] = (columns, rows)
        return rows
    return register


@_relation("pg_type", "oid", "typname", "typnamespace", "typlen", "typbyval", "typtype",
           "typdelim", "typelem", "typarray", "typbasetype", "typrelid", "typnotnull", "typtypmod",
           "typndims", "typcollation", "typowner", "typacl")
def _pg_type(ctx) -> list[Val]:
    ts = sorted(TYPES.values(), key=lambda t: t.oid)
    k = len(ts)
    lengths = [_LENGTHS.get(t.name, -1) for t in ts]
    return [_ints([t.oid for t in ts]), _texts([t.name for t in ts]),
            _ints([t.namespace for t in ts]), _ints(lengths),
            _bools([0 < n <= 8 for n in lengths]), _texts(["b"] * k),
            _texts([","] * k), _ints([t.element for t in ts]),
            _ints([t.array for t in ts]), _ints([0] * k), _ints([0] * k),
            _bools([False] * k), _ints([-1] * k), _ints([0] * k),
            _ints([100 if t.name in ("text", "varchar", "bpchar") else 0 for t in ts]),
            _ints([OWNER] * k), _nulls(k)]


@_relation("pg_namespace", "oid", "nspname", "nspowner", "nspacl")
def _pg_namespace(ctx) -> list[Val]:
    return [_ints([PG_CATALOG, PUBLIC]), _texts(["pg_catalog", "public"]),
            _ints([OWNER, OWNER]), _nulls(2)]


# the extensions a pgvector application checks for: the dialect varvedb speaks is
# pgvector's, checked against this version by the differential suite
PGVECTOR_VERSION = "0.8.6"


# (oid, name, schema, version, comment) of each extension, as PostgreSQL's are
_EXTENSIONS = [(13000, "plpgsql", PG_CATALOG, "1.0", "PL/pgSQL procedural language"),
               (16384, "vector", PUBLIC, PGVECTOR_VERSION,
                "vector data type and ivfflat and hnsw access methods")]


@_relation("pg_extension", "oid", "extname", "extnamespace", "extversion")
def _pg_extension(ctx) -> list[Val]:
    return [_ints([e[0] for e in _EXTENSIONS]), _texts([e[1] for e in _EXTENSIONS]),
            _ints([e[2] for e in _EXTENSIONS]), _texts([e[3] for e in _EXTENSIONS])]


# a function of rows, as PostgreSQL's is (psql's \dx joins it)
@_relation("pg_available_extensions", "name", "default_version", "comment")
def _pg_available_extensions(ctx) -> list[Val]:
    return [_texts([e[1] for e in _EXTENSIONS]), _texts([e[3] for e in _EXTENSIONS]),
            _texts([e[4] for e in _EXTENSIONS])]


@_relation("pg_description", "objoid", "classoid", "objsubid", "description")
def _pg_description(ctx) -> list[Val]:
    """The extensions' comments (no other object has one)."""
    n = len(_EXTENSIONS)
    return [_ints([e[0] for e in _EXTENSIONS]), _ints([CATALOG_OIDS["pg_extension"]] * n),
            _ints([0] * n), _texts([e[4] for e in _EXTENSIONS])]


# access methods: PostgreSQL's own OIDs for its built-in ones; pgvector's (and
# varvedb's ivfpq) above 16384, as an extension's
ACCESS_METHODS = {"heap": (2, "t"), "btree": (403, "i"), "hash": (405, "i"),
                  "gin": (2742, "i"), "hnsw": (16410, "i"), "ivfflat": (16411, "i"),
                  "ivfpq": (16412, "i")}
TABLE_OID_BASE = 1_000_000
OWNER = 10                  # pg_get_userbyid answers "varvedb" for it


@_relation("pg_am", "oid", "amname", "amtype")
def _pg_am(ctx) -> list[Val]:
    names = list(ACCESS_METHODS)
    return [_ints([ACCESS_METHODS[n][0] for n in names]), _texts(names),
            _texts([ACCESS_METHODS[n][1] for n in names])]


@dataclass(frozen=True)
class Relation:
    """A collection ('r'), one of its indexes ('i') or its serial id's sequence
    ('S'), as pg_class, pg_index, pg_constraint and pg_sequence show it."""
    oid: int
    name: str
    kind: str
    method: str                 # an ACCESS_METHODS name ('' for a sequence: none)
    table_oid: int              # its own for a collection
    primary: bool = False       # the id key's index
    table: str = ""             # an index's collection, column and operator class
    column: str = ""
    opclass: str = ""
    options: str = ""           # a vector index's WITH (...) parameters, as text
    expr: str = ""              # an expression index's expression, as SQL writes it
    where: str = ""             # a partial index's predicate, as SQL writes it

    def indexdef(self) -> str:
        """pg_get_indexdef's text."""
        ops = f" {self.opclass}" if self.opclass else ""
        with_ = f" WITH ({self.options})" if self.options else ""
        where = f" WHERE ({self.where})" if self.where else ""
        key = f"({self.expr})" if self.expr else self.column
        return (f"CREATE {'UNIQUE ' if self.primary else ''}INDEX {self.name} ON "
                f"public.{self.table} USING {self.method} ({key}{ops}){with_}{where}")


# a serial id's sequence's OID: its table's + this
SEQUENCE_OFFSET = 998


def _serial(schema) -> bool:
    """Whether a collection's id is a serial one (given by a sequence where a row
    names none, as bigserial's is in PostgreSQL)."""
    return not schema.id_hidden and not schema.id_required and schema.id_kind == "int"


def _relations(ctx) -> list[Relation]:
    """Every collection, index and sequence, collections in catalog order, each
    followed by its indexes (its id key's first), then its id's sequence."""
    engine = ctx.engine
    by_table: dict[str, list] = {}
    for index, (table, field) in index_names(engine).items():
        by_table.setdefault(table, []).append((index, field))
    out = []
    for tname, cid in sorted(engine.names.items(), key=lambda kv: kv[1]):
        oid = TABLE_OID_BASE + 1000 * cid
        out.append(Relation(oid, tname, "r", "heap", oid))
        schema = engine.tables[cid].schema
        if not schema.id_hidden:        # a table declared without a key has none
            out.append(Relation(oid + 1, schema.key_name(tname), "i", "btree", oid, True,
                                tname, "id"))
        columns = schema.fields
        for k, (index, field) in enumerate(sorted(by_table.get(tname, ())), 2):
            f = columns[field]
            spec = f.vector_spec(index)
            method, opclass = _method(f, spec)
            out.append(Relation(oid + k, index, "i", method, oid, False, tname, field, opclass,
                                _options(f, spec), *index_texts(field, f, spec)))
        if _serial(schema):
            out.append(Relation(oid + SEQUENCE_OFFSET, f"{tname}_id_seq", "S", "", oid,
                                table=tname, column="id"))
    return out


def _index_of(t, r: Relation):
    """The vector index (the engine's) an index relation is: its column's own or
    one of its further ones; None: it is no vector index."""
    f = t.schema.fields.get(r.column)
    if f is None or f.vector_index is None:
        return None
    further = f.vector_spec(r.name) is not f.vector_index
    return t.vector_index_of(r.column, r.name if further else "")


def _method(f, vx) -> tuple[str, str]:
    """An indexed field's access method and operator class (vx: the vector index's
    spec, None: its scalar index's)."""
    if vx is None:
        return ("hash" if f.index == "hash" else "btree"), ""
    method = "hnsw" if isinstance(vx, HNSW) else "ivfflat" if vx.pq_m is None else "ivfpq"
    want = (vx.metric or f.metric, index_shape(vx, f.dtype, f.dim)[0])
    return method, next((name for name, got in OPCLASSES.items() if got == want), "")


# CREATE INDEX's WITH parameters (sql/ddl.py), in the order they are shown
_OPTIONS = ("m", "ef_construction", "quantize", "pq_m", "lists", "rerank")


def _options(f, spec) -> str:
    """Vector field `f`'s index `spec`'s parameters as PostgreSQL shows them
    (`m='8'`): those that differ from their defaults, the quantizer from the one
    the default picks for this field (which parameters CREATE INDEX named is not
    kept)."""
    if spec is None:
        return ""
    defaults = {f.name: f.default for f in fields(spec)}
    if isinstance(spec, HNSW):
        defaults["quantize"] = fit_index(HNSW(), f.dtype, f.dim).quantize
    return ", ".join(f"{name}='{_option(getattr(spec, name))}'" for name in _OPTIONS
                     if name in defaults and getattr(spec, name) != defaults[name])


def _option(value) -> str:
    return "none" if value is None else str(value)     # (CREATE INDEX's spelling of None)


class Catalog:
    """What expressions read of the catalog (query/expr.py's ::regclass,
    pg_get_indexdef, pg_get_constraintdef): the relations, made when first asked."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._by_oid = None

    def _relations(self) -> dict[int, Relation]:
        if self._by_oid is None:
            self._by_oid = {r.oid: r for r in _relations(self.ctx)}
        return self._by_oid

    def relation_names(self) -> dict[int, str]:
        """Every relation's name by OID: the collections', their indexes' and
        pg_catalog's own (`'pg_catalog.pg_extension'::regclass`)."""
        names = {oid: name for name, oid in CATALOG_OIDS.items()}
        names.update((oid, r.name) for oid, r in self._relations().items())
        return names

    def indexdef(self, oid: int, column: int = 0, pretty=None) -> str | None:
        """pg_get_indexdef(index [, column, pretty]): its definition, or (column
        1) its one key's — an expression's in parentheses, as PostgreSQL's — ('' past
        its one column, NULL for no index)."""
        r = self._relations().get(oid)
        if r is None or r.kind != "i":
            return None
        if column == 0:
            return r.indexdef()
        return "" if column != 1 else f"({r.expr})" if r.expr else r.column

    def setting(self, name: str, missing_ok=False) -> str | None:
        """current_setting(name [, missing_ok]): SHOW's value; an unknown name is 42704
        (NULL when missing_ok)."""
        value = setting_text(name, self.ctx.session)
        if value is None and missing_ok not in (True, "true", "t", "on"):
            raise SqlError("42704", f'unrecognized configuration parameter "{name}"')
        return value

    def serial_sequence(self, table: str, column: str) -> str | None:
        """pg_get_serial_sequence(table, column): a serial id's sequence, schema-qualified
        (NULL for a column without one); an unknown table is 42P01, as PostgreSQL's."""
        name = table.strip().replace('"', "").removeprefix("public.")
        found = [r for r in self._relations().values() if r.kind in "rS"
                 and (r.name == name or r.table == name)]
        if not found:
            raise SqlError("42P01", f'relation "{table}" does not exist')
        seq = next((r for r in found if r.kind == "S" and r.column == column), None)
        return None if seq is None else f"public.{seq.name}"

    def constraintdef(self, oid: int, pretty=None) -> str | None:
        """The id key's constraint, or a field's CHECK."""
        r = self._relations().get(oid - CONSTRAINT_OFFSET + 1)
        if r is not None and r.primary:
            return "PRIMARY KEY (id)"
        found = next((c for c in _checks(self.ctx) if c[0] == oid), None)
        return None if found is None else check_text(found[4], bool(pretty))

    # ---- sizes: the bytes of the arrays a relation holds in memory (a mapped file's
    # pages counted), as pg_relation_size and its kin report a relation's disk pages

    def _sizes(self, oid: int) -> tuple[int, int] | None:
        """(its own bytes, its indexes' bytes) of a collection (its rows' versions
        and columns; its id key, vector, scalar and full-text indexes) or of one
        index (its own; none); a sequence holds none; None: no such relation."""
        r = self._relations().get(oid)
        if r is None:
            return None
        if r.kind == "S":
            return 0, 0
        t = self.ctx.engine.table(r.table if r.kind == "i" else r.name)
        if r.kind == "r":
            parts = t.memory_bytes()
            key = 0 if t.schema.id_hidden else t.id_bytes()
            return parts["rows"] + parts["columns"], key + parts["vector_indexes"] + \
                parts["text_indexes"] + parts["scalar_indexes"]
        if r.primary:
            return t.id_bytes(), 0
        ix = _index_of(t, r) or t.indexes.get(r.column)
        return (0 if ix is None else ix.nbytes()), 0

    def relation_size(self, oid: int, fork: str = "main") -> int | None:
        """pg_relation_size(relation [, fork]): its own bytes ('main'; the other
        forks hold none here)."""
        if fork not in _FORKS:
            raise SqlError("22023", f'invalid fork name "{fork}"')
        got = self._sizes(oid)
        return None if got is None else got[0] if fork == "main" else 0

    def table_size(self, oid: int) -> int | None:
        """pg_table_size(relation): its own bytes (no TOAST here)."""
        got = self._sizes(oid)
        return None if got is None else got[0]

    def indexes_size(self, oid: int) -> int | None:
        """pg_indexes_size(relation): its indexes' bytes (an index has none)."""
        got = self._sizes(oid)
        return None if got is None else got[1]

    def total_size(self, oid: int) -> int | None:
        """pg_total_relation_size(relation): its own and its indexes' bytes."""
        got = self._sizes(oid)
        return None if got is None else got[0] + got[1]


_FORKS = ("main", "fsm", "vm", "init")


@_relation("pg_class", "oid", "relname", "relnamespace", "relkind", "relowner", "relam",
           "relhasindex", "relpersistence", "relispartition", "reltablespace", "reltoastrelid",
           "reloftype", "relchecks", "relhasrules", "relhastriggers", "relrowsecurity",
           "relforcerowsecurity", "relreplident", "relpartbound", "reloptions", "relacl")
def _pg_class(ctx) -> list[Val]:
    rels = _relations(ctx)
    n = len(rels)
    return [_ints([r.oid for r in rels]), _texts([r.name for r in rels]),
            _ints([PUBLIC] * n), _texts([r.kind for r in rels]), _ints([OWNER] * n),
            _ints([ACCESS_METHODS[r.method][0] if r.method else 0 for r in rels]),
            _bools([r.kind == "r" for r in rels]),     # a collection: its id key's index
            _texts(["p"] * n), _bools([False] * n), _ints([0] * n), _ints([0] * n),
            _ints([0] * n), _ints([_relchecks(ctx, r) for r in rels]),
            _bools([False] * n), _bools([False] * n),
            _bools([False] * n), _bools([False] * n), _texts(["d"] * n), _nulls(n),
            _reloptions(rels), _nulls(n)]     # no access lists: the owner's defaults


def _relchecks(ctx, r: Relation) -> int:
    """pg_class.relchecks: a collection's CHECK constraints (psql's \\d asks for them
    where it counts some)."""
    return len(ctx.engine.table(r.name).schema.constraints(r.name)) if r.kind == "r" else 0


def _reloptions(rels: list[Relation]) -> Val:
    """A vector index's parameters as pg_class.reloptions' `{m=8}` (those pg_get_indexdef
    shows: the ones that differ from their defaults); NULL where it has none."""
    out = [[o.replace("'", "") for o in r.options.split(", ")] if r.options else None
           for r in rels]
    return Val("array", object_array(out), np.array([x is None for x in out], bool))


# pgvector's phase while its graph takes the table's rows
BUILD_PHASE = "building index: loading tuples"


@_relation("pg_stat_progress_create_index", "pid", "datid", "datname", "relid", "index_relid",
           "command", "phase", "lockers_total", "lockers_done", "current_locker_pid",
           "blocks_total", "blocks_done", "tuples_total", "tuples_done", "partitions_total",
           "partitions_done")
def _pg_stat_progress_create_index(ctx) -> list[Val]:
    """A row for each vector index still taking committed rows (a CREATE INDEX over
    a table's rows, or rows committed faster than the maintainer links them):
    blocks and tuples both count row versions, done the linked ones. None once
    every index has caught up, as PostgreSQL shows none once its builds are done."""
    rows = []
    for r in _relations(ctx):
        if r.kind != "i" or r.method not in ("hnsw", "ivfflat", "ivfpq"):
            continue
        t = ctx.engine.table(r.table)
        vi = _index_of(t, r)
        total = t.committed_n
        if vi is not None and vi.indexed < total:
            rows.append((r, total, vi.indexed))
    k = len(rows)
    total, done = [x[1] for x in rows], [x[2] for x in rows]
    return [_ints([os.getpid()] * k), _ints([DATABASE_OID] * k), _texts(["varvedb"] * k),
            _ints([x[0].table_oid for x in rows]), _ints([x[0].oid for x in rows]),
            _texts(["CREATE INDEX"] * k), _texts([BUILD_PHASE] * k), _ints([0] * k),
            _ints([0] * k), _ints([0] * k), _ints(total), _ints(done), _ints(total),
            _ints(done), _ints([0] * k), _ints([0] * k)]


# pg_opclass: the default operator classes of the types a btree or hash index here
# takes (PostgreSQL's OIDs), and pgvector's of each vector method at OIDs of an
# extension's (OPCLASS_OID_BASE + 100 a method + its place in OPCLASSES); of those only
# ivfflat's vector_l2_ops is a default, as pgvector declares them
_SCALAR_OPCLASSES = {
    ("btree", "int8"): (3124, "int8_ops"), ("btree", "float8"): (3123, "float8_ops"),
    ("btree", "text"): (3126, "text_ops"), ("btree", "timestamptz"): (3127, "timestamptz_ops"),
    ("btree", "bool"): (10003, "bool_ops"), ("hash", "int8"): (10021, "int8_ops"),
    ("hash", "float8"): (10014, "float8_ops"), ("hash", "text"): (10037, "text_ops"),
    ("hash", "timestamptz"): (10040, "timestamptz_ops"), ("hash", "bool"): (10048, "bool_ops")}
_VECTOR_METHODS = ("ivfflat", "hnsw", "ivfpq")
OPCLASS_OID_BASE = 16600


# pgvector's operator classes: those an index here is built with, and its sparsevec and
# bit_jaccard ones (no index here takes them: CREATE INDEX refuses them) for hnsw only,
# as its l1 ones are
_PGVECTOR_OPCLASSES = (*OPCLASSES, "sparsevec_l2_ops", "sparsevec_ip_ops",
                       "sparsevec_cosine_ops", "sparsevec_l1_ops", "bit_jaccard_ops")
_HNSW_ONLY = frozenset(n for n in _PGVECTOR_OPCLASSES
                       if n.endswith("_l1_ops") or n.startswith("sparsevec") or "jaccard" in n)


def _opclass_oid(method: str, opclass: str) -> int:
    return OPCLASS_OID_BASE + 100 * _VECTOR_METHODS.index(method) + \
        _PGVECTOR_OPCLASSES.index(opclass)


@_relation("pg_opclass", "oid", "opcmethod", "opcname", "opcnamespace", "opcowner",
           "opcfamily", "opcintype", "opcdefault", "opckeytype")
def _pg_opclass(ctx) -> list[Val]:
    rows = [(oid, method, name, PG_CATALOG, OIDS[t], True)
            for (method, t), (oid, name) in _SCALAR_OPCLASSES.items()]
    rows += [(_opclass_oid(method, name), method, name, PUBLIC, OIDS[name.split("_")[0]],
              (method, name) == ("ivfflat", "vector_l2_ops"))
             for method in _VECTOR_METHODS for name in _PGVECTOR_OPCLASSES
             if method == "hnsw" or name not in _HNSW_ONLY]
    rows.sort()
    n = len(rows)
    return [_ints([r[0] for r in rows]), _ints([ACCESS_METHODS[r[1]][0] for r in rows]),
            _texts([r[2] for r in rows]), _ints([r[3] for r in rows]), _ints([OWNER] * n),
            _ints([0] * n), _ints([r[4] for r in rows]), _bools([r[5] for r in rows]),
            _ints([0] * n)]


def _index_column(r: Relation, cols: dict) -> tuple[int, int, int]:
    """(attnum in its table, operator class OID, collation OID) of index r's one column."""
    attnum, f, schema = cols[(r.table_oid, r.column)]
    if r.opclass:
        return attnum, _opclass_oid(r.method, r.opclass), 0
    type_name = TYPES[_type_and_mod(f, schema)[0]].name
    type_name = "text" if type_name == "varchar" else type_name
    found = _SCALAR_OPCLASSES.get((r.method, type_name))
    return attnum, found[0] if found else 0, 100 if type_name == "text" else 0


def _vectors(rows: list, kind=SpaceVector) -> Val:
    """A column of int2vectors (or oidvectors), its type known on zero rows too."""
    return Val("array", object_array([kind(r) for r in rows]), np.zeros(len(rows), bool),
               kind.TYPE)


@_relation("pg_index", "indexrelid", "indrelid", "indnatts", "indnkeyatts", "indisunique",
           "indisprimary", "indisclustered", "indisvalid", "indisreplident", "indpred",
           "indimmediate", "indnullsnotdistinct", "indkey", "indclass", "indcollation",
           "indoption", "indexprs", "indisexclusion", "indisready", "indislive")
def _pg_index(ctx) -> list[Val]:
    """Each index: one column (indkey: its attnum, int2vector), its operator class
    (indclass) and collation; no expression or predicate."""
    rels = [r for r in _relations(ctx) if r.kind == "i"]
    cols = {(c[0], c[2]): (c[1], c[3], c[4]) for c in _columns(ctx)}
    keys = [_index_column(r, cols) for r in rels]
    n = len(rels)
    return [_ints([r.oid for r in rels]), _ints([r.table_oid for r in rels]), _ints([1] * n),
            _ints([1] * n),
            _bools([r.primary for r in rels]), _bools([r.primary for r in rels]),
            _bools([False] * n), _bools([True] * n), _bools([False] * n),
            _maybe_texts([f"({r.where})" if r.where else None for r in rels]),
            _bools([True] * n), _bools([False] * n),
            _vectors([[0 if r.expr else k[0]] for r, k in zip(rels, keys)]),   # 0: an expression
            _vectors([[k[1]] for k in keys], OidVector),
            _vectors([[k[2]] for k in keys], OidVector),
            _vectors([[0]] * n), _maybe_texts([r.expr or None for r in rels]),
            _bools([False] * n), _bools([True] * n), _bools([True] * n)]


def _maybe_texts(values: list) -> Val:
    """A text column, NULL where None (indexprs and indpred: an expression index's
    expression, a partial one's predicate, as pg_get_expr shows them)."""
    nulls = np.array([v is None for v in values], bool)
    return Val("text", object_array(["" if v is None else v for v in values]), nulls)


# a collection's id key constraint's OID: its table's + this (its indexes take + 1, + 2 ...)
CONSTRAINT_OFFSET = 999


@_relation("pg_constraint", "oid", "conname", "connamespace", "contype", "condeferrable",
           "condeferred", "convalidated", "conrelid", "conindid", "confrelid", "conparentid",
           "connoinherit", "conislocal", "coninhcount", "conperiod", "conkey")
def _pg_constraint(ctx) -> list[Val]:
    """The id key of each collection that declares one, and each CHECK constraint
    (its conditions AND-ed, under its name; conkey: the columns it reads)."""
    rows = [(r.table_oid + CONSTRAINT_OFFSET, r.name, "p", r.table_oid, r.oid, [1])
            for r in _relations(ctx) if r.primary]     # the id: column 1
    rows += [(oid, name, "c", table_oid, 0, attnums)
             for oid, name, table_oid, attnums, _ in _checks(ctx)]
    n = len(rows)
    return [_ints([r[0] for r in rows]), _texts([r[1] for r in rows]), _ints([PUBLIC] * n),
            _texts([r[2] for r in rows]), _bools([False] * n), _bools([False] * n),
            _bools([True] * n), _ints([r[3] for r in rows]), _ints([r[4] for r in rows]),
            _ints([0] * n), _ints([0] * n), _bools([True] * n), _bools([True] * n),
            _ints([0] * n), _bools([False] * n),
            Val("array", object_array([r[5] for r in rows]), np.zeros(n, bool))]


# a CHECK constraint's OID: its table's + this + its place among the table's, by name
CHECK_OFFSET = 500


def _checks(ctx) -> list[tuple]:
    """(OID, name, table OID, attnums, (field, op, value, the field's kind) conditions)
    of each CHECK constraint."""
    out = []
    for tname, cid in sorted(ctx.engine.names.items(), key=lambda kv: kv[1]):
        table_oid = TABLE_OID_BASE + 1000 * cid
        schema = ctx.engine.tables[cid].schema
        attnum = {name: k for k, name in enumerate(schema.columns, 1)}
        for k, (name, conds) in enumerate(schema.constraints(tname).items()):
            if k < SEQUENCE_OFFSET - CHECK_OFFSET:
                out.append((table_oid + CHECK_OFFSET + k, name, table_oid,
                            sorted({attnum[c[0]] for c in conds}),
                            [(*c, schema.fields[c[0]].kind) for c in conds]))
    return out


def check_text(conditions, pretty: bool = False) -> str:
    """pg_get_constraintdef's text of a CHECK constraint, its (field, op, value, kind)
    conditions AND-ed: CHECK ((n > 0)), or pretty (psql's \\d) CHECK (n > 0); each as
    it was written (schema.WRITTEN_OPS: CHECK ((0 < n)), vector_dims((e)::vector))."""
    parts = [_condition_text(*c, pretty) for c in conditions]
    if pretty:
        return f"CHECK ({' AND '.join(parts)})"
    parts = [f"({p})" for p in parts]
    return f"CHECK ({parts[0]})" if len(parts) == 1 else f"CHECK (({' AND '.join(parts)}))"


def _condition_text(name: str, op: str, value, kind: str, pretty: bool) -> str:
    """One condition of a CHECK as PostgreSQL deparses it, unparenthesized."""
    if value is None:
        return f"{name} {op.upper()}"
    op, cast, reversed_, wide = check_op(op)
    if wide and kind == "int":  # an integer wider than 64 bits: compared as numeric
        cast = "numeric"
    if op in DIMS_OPS:
        name, op = f"vector_dims({name if cast is None else _cast(name, cast, pretty)})", \
            op.split()[1]
    elif cast is not None:
        name = _cast(name, cast, pretty)
    constant = _check_constant(value, pretty) if not wide else f"'{value}'::numeric" \
        if kind == "int" else _cast(f"'{value}'::numeric", "double precision", pretty)
    return f"{constant} {FLIPPED[op]} {name}" if reversed_ else f"{name} {op} {constant}"


def _cast(name: str, to: str, pretty: bool) -> str:
    """A column cast as PostgreSQL deparses it: (x)::numeric, or pretty x::numeric."""
    return f"{name}::{to}" if pretty else f"({name})::{to}"


def _check_constant(v, pretty: bool) -> str:
    """A CHECK's constant as PostgreSQL deparses the literal it was written as: text
    'x'::text, a negative or bigint number quoted and cast, a float column's cast to
    double precision (from an integer literal where it is whole, else numeric's)."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'::text"
    if isinstance(v, float) and not (v.is_integer() and abs(v) < 2 ** 63):
        text = format(Decimal(repr(v)), "f")
        inner = text if text[0].isdigit() and "." in text else f"'{text}'::numeric"
    else:
        n = int(v)
        inner = str(n) if 0 <= n < 2 ** 31 else \
            f"'{n}'::{'integer' if -2 ** 31 <= n < 2 ** 31 else 'bigint'}"
    if isinstance(v, float):
        return f"{inner}::double precision" if pretty else f"({inner})::double precision"
    return inner


@_relation("pg_sequence", "seqrelid", "seqtypid", "seqstart", "seqincrement", "seqmax",
           "seqmin", "seqcache", "seqcycle")
def _pg_sequence(ctx) -> list[Val]:
    """Each serial id's sequence: bigint's, from 1 by 1 (varvedb's ids are int8)."""
    seqs = [r for r in _relations(ctx) if r.kind == "S"]
    n = len(seqs)
    return [_ints([r.oid for r in seqs]), _ints([OIDS["int8"]] * n), _ints([1] * n),
            _ints([1] * n), _ints([(1 << 63) - 1] * n), _ints([1] * n), _ints([1] * n),
            _bools([False] * n)]


@_relation("pg_depend", "classid", "objid", "objsubid", "refclassid", "refobjid",
           "refobjsubid", "deptype")
def _pg_depend(ctx) -> list[Val]:
    """The one kind of dependency psql asks about: a sequence owned by its table's
    id column (column 1; deptype 'a', automatic, as a serial's)."""
    seqs = [r for r in _relations(ctx) if r.kind == "S"]
    n = len(seqs)
    return [_ints([CATALOG_OIDS["pg_class"]] * n), _ints([r.oid for r in seqs]), _ints([0] * n),
            _ints([CATALOG_OIDS["pg_class"]] * n), _ints([r.table_oid for r in seqs]),
            _ints([1] * n), _texts(["a"] * n)]


def _columns(ctx, indexes: bool = False) -> list[tuple]:
    """(relation oid, attnum, name, Field or None for the id, the schema, table name,
    index method or '') of every collection's columns, in order: its id (unless
    hidden), then its fields; with `indexes`, each index's one column after them."""
    out = []
    for tname, cid in sorted(ctx.engine.names.items(), key=lambda kv: kv[1]):
        schema = ctx.engine.tables[cid].schema
        oid = TABLE_OID_BASE + 1000 * cid
        cols = ([] if schema.id_hidden else [("id", None)]) + list(schema.fields.items())
        out.extend((oid, num, name, f, schema, tname, "")
                   for num, (name, f) in enumerate(cols, 1))
    if indexes:
        found = {(c[5], c[2]): c for c in out}
        out += [(r.oid, 1) + found[(r.table, r.column)][2:6] + (r.method,)
                for r in _relations(ctx) if r.kind == "i"]
    return out


_KIND_TYPES = {"int": "int8", "float": "float8", "bool": "bool", "text": "text",
               "json": "jsonb", "timestamp": "timestamptz", "bytes": "bytea"}
_VECTOR_TYPES = {"f32": "vector", "f16": "halfvec", "bit": "bit", "int8": "vector"}


def _type_and_mod(f, schema) -> tuple[int, int]:
    """A column's type OID and typmod (vector(n): n, varchar(n): n + 4, as PostgreSQL's;
    an array's, its element's: vector(3)[] is 3)."""
    if f is None:
        return OIDS["int8" if schema.id_kind == "int" else "text"], -1
    if f.array_of is not None:
        kind, vtype, dim = array_element(f.array_of)
        return OIDS["_" + (vtype or _KIND_TYPES[kind])], -1 if dim is None else dim
    if f.kind == "vector":
        return OIDS[SQL_TYPES[f.dtype]], f.dim
    if f.kind == "sparsevec":
        return OIDS["sparsevec"], f.dim or -1
    if f.kind == "text" and f.max_length is not None:
        return OIDS["varchar"], f.max_length + 4
    return OIDS[_KIND_TYPES[f.kind]], -1


def _default(f, schema, table: str) -> str | None:
    """A column's default as pg_get_expr shows it."""
    if f is None:
        return f"nextval('{table}_id_seq'::regclass)" if _serial(schema) else None
    v = f.default
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    text = value_text(v, f.kind)
    if isinstance(v, (int, float)):
        # as the constant PostgreSQL keeps: a plain number, or a quoted one of the
        # type it has (a negative number: int4's or numeric's, a large one int8's)
        if 0 <= v < 1 << 31:
            return text
        cast = "numeric" if isinstance(v, float) else \
            "integer" if -(1 << 31) <= v < 1 << 31 else "bigint"
        return f"'{text}'::{cast}"
    return "'" + text.replace("'", "''") + "'::" + TYPES[_type_and_mod(f, schema)[0]].regtype


# attstorage of the variable-length types (pgvector's keep their values out of line
# uncompressed, 'e'); every other type's is plain, 'p'
_STORAGE = {"text": "x", "varchar": "x", "jsonb": "x", "bytea": "x", "bit": "x", "vector": "e",
            "halfvec": "e", "sparsevec": "e"}


@_relation("pg_attribute", "attrelid", "attname", "atttypid", "atttypmod", "attnum", "attnotnull",
           "atthasdef", "attisdropped", "attcollation", "attidentity", "attgenerated",
           "attstorage", "attcompression", "attstattarget", "attlen", "attndims", "attacl")
def _pg_attribute(ctx) -> list[Val]:
    cols = _columns(ctx, indexes=True)
    n = len(cols)
    # a hash index keeps its column's 4-byte hash codes: its attribute is int4
    types = [(OIDS["int4"], -1) if c[6] == "hash" else _type_and_mod(c[3], c[4]) for c in cols]
    texts = [TYPES[t].name in ("text", "varchar") for t, _ in types]
    return [_ints([c[0] for c in cols]), _texts([c[2] for c in cols]),
            _ints([t for t, _ in types]), _ints([m for _, m in types]),
            _ints([c[1] for c in cols]),
            _bools([c[3] is None or c[3].not_null for c in cols]),
            _bools([not c[6] and _default(c[3], c[4], c[5]) is not None for c in cols]),
            _bools([False] * n), _ints([100 if t else 0 for t in texts]),
            _texts([""] * n), _texts([""] * n),
            _texts(["x" if TYPES[t].element else _STORAGE.get(TYPES[t].name, "p")
                    for t, _ in types]),
            _texts([""] * n), _ints([-1] * n),
            _ints([_LENGTHS.get(TYPES[t].name, -1) for t, _ in types]),
            _ints([1 if TYPES[t].element else 0 for t, _ in types]),     # attndims
            _nulls(n)]


@_relation("pg_attrdef", "oid", "adrelid", "adnum", "adbin")
def _pg_attrdef(ctx) -> list[Val]:
    """Each column's default, its expression's text as adbin (pg_get_expr shows it)."""
    rows = [(c[0], c[1], _default(c[3], c[4], c[5])) for c in _columns(ctx)]
    rows = [r for r in rows if r[2] is not None]
    return [_ints([r[0] + 900 + r[1] for r in rows]), _ints([r[0] for r in rows]),
            _ints([r[1] for r in rows]), _texts([r[2] for r in rows])]


@_relation("pg_collation", "oid", "collname", "collnamespace")
def _pg_collation(ctx) -> list[Val]:
    return [_ints([100, 950, 951]), _texts(["default", "C", "POSIX"]), _ints([PG_CATALOG] * 3)]


_ROLE_FLAGS = ("rolsuper", "rolinherit", "rolcreaterole", "rolcreatedb", "rolcanlogin",
               "rolreplication", "rolbypassrls")


@_relation("pg_roles", "oid", "rolname", *_ROLE_FLAGS, "rolconnlimit", "rolvaliduntil")
def _pg_roles(ctx) -> list[Val]:
    """The one role: the owner of everything, as current_user names it, with every
    attribute (a client with the token may do anything), no connection limit."""
    return [_ints([OWNER]), _texts(["varvedb"]), *(_bools([True]) for _ in _ROLE_FLAGS),
            _ints([-1]), _nulls(1)]


DATABASE_OID = 5


@_relation("pg_database", "oid", "datname", "datdba", "encoding", "datlocprovider",
           "datistemplate", "datallowconn", "datconnlimit", "datcollate", "datctype",
           "daticulocale", "daticurules", "datacl", "dattablespace")
def _pg_database(ctx) -> list[Val]:
    """The one database, as current_database() names it: UTF-8 text sorted by
    code point (the C collation's order), with no access list (its owner's default)."""
    return [_ints([DATABASE_OID]), _texts(["varvedb"]), _ints([OWNER]), _ints([6]),
            _texts(["c"]), _bools([False]), _bools([True]), _ints([-1]), _texts(["C"]),
            _texts(["C"]), _nulls(1), _nulls(1), _nulls(1), _ints([DEFAULT_TABLESPACE])]


DEFAULT_TABLESPACE = 1663


@_relation("pg_tablespace", "oid", "spcname", "spcowner", "spcacl", "spcoptions")
def _pg_tablespace(ctx) -> list[Val]:
    """PostgreSQL's default tablespace, the one every relation is in (the database's file)."""
    return [_ints([DEFAULT_TABLESPACE]), _texts(["pg_default"]), _ints([OWNER]), _nulls(1),
            _nulls(1)]


@_relation("pg_proc", "oid", "proname", "pronamespace", "proowner", "prokind", "proretset",
           "pronargs", "prorettype", "proargtypes")
def _pg_proc(ctx) -> list[Val]:
    procs = list(PROCS.values())
    n = len(procs)
    return [_ints([p.oid for p in procs]), _texts([p.name for p in procs]),
            _ints([p.namespace for p in procs]), _ints([OWNER] * n),
            _texts([p.kind for p in procs]), _bools([False] * n),
            _ints([len(p.args) for p in procs]), _ints([p.result_oid for p in procs]),
            Val("array", object_array([p.arg_oids for p in procs]), np.zeros(n, bool))]


@_relation("pg_operator", "oid", "oprname", "oprnamespace", "oprowner", "oprkind", "oprleft",
           "oprright", "oprresult", "oprcode")
def _pg_operator(ctx) -> list[Val]:
    ops = list(OPERATORS.values())
    n = len(ops)
    return [_ints([o.oid for o in ops]), _texts([o.name for o in ops]),
            _ints([o.namespace for o in ops]), _ints([OWNER] * n), _texts(["b"] * n),
            _ints([OIDS[o.left] for o in ops]), _ints([OIDS[o.right] for o in ops]),
            _ints([OIDS[o.result] for o in ops]), _ints([0] * n)]


def _empty(name: str, *columns: str) -> None:
    """A relation varvedb has no rows for (no inheritance, policies, extended
    statistics or publications): its columns, untyped (NULL) as they hold nothing."""
    _relation(name, *columns)(lambda ctx: [_nulls(0) for _ in columns])


_empty("pg_enum", "oid", "enumtypid", "enumsortorder", "enumlabel")
_empty("pg_inherits", "inhrelid", "inhparent", "inhseqno", "inhdetachpending")
_empty("pg_policy", "oid", "polname", "polrelid", "polcmd", "polpermissive", "polroles",
       "polqual", "polwithcheck")
_empty("pg_statistic_ext", "oid", "stxrelid", "stxname", "stxnamespace", "stxkind",
       "stxstattarget")
_empty("pg_publication", "oid", "pubname", "puballtables")
_empty("pg_publication_namespace", "oid", "pnpubid", "pnnspid")
_empty("pg_publication_rel", "oid", "prpubid", "prrelid", "prqual", "prattrs")

# pg_catalog's relations' OIDs, PostgreSQL's
CATALOG_OIDS = {"pg_type": 1247, "pg_attribute": 1249, "pg_proc": 1255, "pg_class": 1259,
                "pg_operator": 2617, "pg_opclass": 2616,
                "pg_database": 1262, "pg_namespace": 2615, "pg_sequence": 2224,
                "pg_tablespace": 1213, "pg_enum": 3501,
                "pg_depend": 2608,
                "pg_am": 2601, "pg_attrdef": 2604, "pg_constraint": 2606, "pg_description": 2609,
                "pg_index": 2610, "pg_inherits": 2611, "pg_extension": 3079,
                "pg_policy": 3256, "pg_statistic_ext": 3381, "pg_collation": 3456,
                "pg_publication": 6104, "pg_publication_rel": 6106,
                "pg_publication_namespace": 6237}


def relation_rows(name: str, ctx) -> tuple[list[str], list[Val]]:
    """(column names, columns) of a pg_catalog relation, as `ctx`'s database has it."""
    columns, rows = RELATIONS[name]
    return list(columns), rows(ctx)
