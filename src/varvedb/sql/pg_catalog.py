r"""pg_catalog's relations that drivers read to look types up (pg_type and
pg_namespace), that applications read to check for pgvector (pg_extension) and
that psql's \d, \dt and \di read (pg_class, pg_am, pg_index), as rows SQL
reads like a table's (`FROM pg_type t WHERE t.oid = to_regtype($1)`), made
from query/pg_types.py's table and the database's collections and indexes when
a statement reads them. As in PostgreSQL, pg_catalog is searched before any
other schema: an unqualified pg_type is the catalog's.

Relations' OIDs are stable while the catalog is: a collection's is made from
its catalog id (TABLE_OID_BASE + 1 000 a collection), its indexes' follow it
(its id key, `{table}_pkey`, first), so a client may read an OID in one
statement and use it in the next, as psql's \d does."""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..query.expr import Val, object_array
from ..query.literals import value_text
from ..query.pg_types import OIDS, PG_CATALOG, PUBLIC, TYPES
from ..schema import HNSW, fit_index
from .ddl import OPCLASSES, SQL_TYPES, index_names

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


def _pg_type(ctx) -> tuple[list[str], list[Val]]:
    ts = sorted(TYPES.values(), key=lambda t: t.oid)
    lengths = [_LENGTHS.get(t.name, -1) for t in ts]
    return (["oid", "typname", "typnamespace", "typlen", "typbyval", "typtype",
             "typdelim", "typelem", "typarray", "typbasetype", "typrelid", "typnotnull",
             "typtypmod", "typndims", "typcollation"],
            [_ints([t.oid for t in ts]), _texts([t.name for t in ts]),
             _ints([t.namespace for t in ts]), _ints(lengths),
             _bools([0 < n <= 8 for n in lengths]), _texts(["b"] * len(ts)),
             _texts([","] * len(ts)), _ints([t.element for t in ts]),
             _ints([t.array for t in ts]), _ints([0] * len(ts)), _ints([0] * len(ts)),
             _bools([False] * len(ts)), _ints([-1] * len(ts)), _ints([0] * len(ts)),
             _ints([100 if t.name in ("text", "varchar", "bpchar") else 0 for t in ts])])


def _pg_namespace(ctx) -> tuple[list[str], list[Val]]:
    return (["oid", "nspname", "nspowner"],
            [_ints([PG_CATALOG, PUBLIC]), _texts(["pg_catalog", "public"]), _ints([10, 10])])


# the extensions a pgvector application checks for: the dialect varvedb speaks is
# pgvector's, checked against this version by the differential suite
PGVECTOR_VERSION = "0.8.6"


# (oid, name, schema, version, comment) of each extension, as PostgreSQL's are
_EXTENSIONS = [(13000, "plpgsql", PG_CATALOG, "1.0", "PL/pgSQL procedural language"),
               (16384, "vector", PUBLIC, PGVECTOR_VERSION,
                "vector data type and ivfflat and hnsw access methods")]


def _pg_extension(ctx) -> tuple[list[str], list[Val]]:
    return (["oid", "extname", "extnamespace", "extversion"],
            [_ints([e[0] for e in _EXTENSIONS]), _texts([e[1] for e in _EXTENSIONS]),
             _ints([e[2] for e in _EXTENSIONS]), _texts([e[3] for e in _EXTENSIONS])])


def _pg_available_extensions(ctx) -> tuple[list[str], list[Val]]:
    return (["name", "default_version", "comment"],
            [_texts([e[1] for e in _EXTENSIONS]), _texts([e[3] for e in _EXTENSIONS]),
             _texts([e[4] for e in _EXTENSIONS])])


def _pg_description(ctx) -> tuple[list[str], list[Val]]:
    """The extensions' comments (no other object has one)."""
    n = len(_EXTENSIONS)
    return (["objoid", "classoid", "objsubid", "description"],
            [_ints([e[0] for e in _EXTENSIONS]), _ints([CATALOG_OIDS["pg_extension"]] * n),
             _ints([0] * n), _texts([e[4] for e in _EXTENSIONS])])


# access methods: PostgreSQL's own OIDs for its built-in ones; pgvector's (and
# varvedb's ivfpq) above 16384, as an extension's
ACCESS_METHODS = {"heap": (2, "t"), "btree": (403, "i"), "hash": (405, "i"),
                  "gin": (2742, "i"), "hnsw": (16410, "i"), "ivfflat": (16411, "i"),
                  "ivfpq": (16412, "i")}
TABLE_OID_BASE = 1_000_000
OWNER = 10                  # pg_get_userbyid answers "varvedb" for it


def _pg_am(ctx) -> tuple[list[str], list[Val]]:
    names = list(ACCESS_METHODS)
    return (["oid", "amname", "amtype"],
            [_ints([ACCESS_METHODS[n][0] for n in names]), _texts(names),
             _texts([ACCESS_METHODS[n][1] for n in names])])


@dataclass(frozen=True)
class Relation:
    """A collection ('r') or one of its indexes ('i'), as pg_class, pg_index and
    pg_constraint show it."""
    oid: int
    name: str
    kind: str
    method: str                 # an ACCESS_METHODS name
    table_oid: int              # its own for a collection
    primary: bool = False       # the id key's index
    table: str = ""             # an index's collection, column and operator class
    column: str = ""
    opclass: str = ""
    options: str = ""           # a vector index's WITH (...) parameters, as text

    def indexdef(self) -> str:
        """pg_get_indexdef's text."""
        ops = f" {self.opclass}" if self.opclass else ""
        with_ = f" WITH ({self.options})" if self.options else ""
        return (f"CREATE {'UNIQUE ' if self.primary else ''}INDEX {self.name} ON "
                f"public.{self.table} USING {self.method} ({self.column}{ops}){with_}")


def _relations(ctx) -> list[Relation]:
    """Every collection and index, collections in catalog order, each followed by
    its indexes (its id key's first)."""
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
            out.append(Relation(oid + 1, f"{tname}_pkey", "i", "btree", oid, True, tname,
                                "id"))
        columns = schema.fields
        for k, (index, field) in enumerate(sorted(by_table.get(tname, ())), 2):
            method, opclass = _method(columns[field])
            out.append(Relation(oid + k, index, "i", method, oid, False, tname, field, opclass,
                                _options(columns[field])))
    return out


def _method(f) -> tuple[str, str]:
    """An indexed field's access method and operator class."""
    vx = f.vector_index
    if vx is None:
        return ("hash" if f.index == "hash" else "btree"), ""
    method = "hnsw" if isinstance(vx, HNSW) else "ivfflat" if vx.pq_m is None else "ivfpq"
    want = (vx.metric or f.metric, f.dtype)
    return method, next((name for name, got in OPCLASSES.items() if got == want), "")


# CREATE INDEX's WITH parameters (sql/ddl.py), in the order they are shown
_OPTIONS = ("m", "ef_construction", "quantize", "pq_m", "lists", "rerank")


def _options(f) -> str:
    """Vector field `f`'s index's parameters as PostgreSQL shows them (`m='8'`): those
    that differ from their defaults, the quantizer from the one the default picks for
    this field (which parameters CREATE INDEX named is not kept)."""
    spec = f.vector_index
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
        1) its one column's."""
        r = self._relations().get(oid)
        if r is None or r.kind != "i" or column not in (0, 1):
            return None
        return r.indexdef() if column == 0 else r.column

    def constraintdef(self, oid: int, pretty=None) -> str | None:
        """The id key's constraint (pg_constraint's only kind of row here)."""
        r = self._relations().get(oid - CONSTRAINT_OFFSET + 1)
        return "PRIMARY KEY (id)" if r is not None and r.primary else None


def _pg_class(ctx) -> tuple[list[str], list[Val]]:
    rels = _relations(ctx)
    n = len(rels)
    return (["oid", "relname", "relnamespace", "relkind", "relowner", "relam",
             "relhasindex", "relpersistence", "relispartition", "reltablespace",
             "reltoastrelid", "reloftype", "relchecks", "relhasrules", "relhastriggers",
             "relrowsecurity", "relforcerowsecurity", "relreplident", "relpartbound",
             "reloptions"],
            [_ints([r.oid for r in rels]), _texts([r.name for r in rels]),
             _ints([PUBLIC] * n), _texts([r.kind for r in rels]), _ints([OWNER] * n),
             _ints([ACCESS_METHODS[r.method][0] for r in rels]),
             _bools([r.kind == "r" for r in rels]),     # a collection: its id key's index
             _texts(["p"] * n), _bools([False] * n), _ints([0] * n), _ints([0] * n),
             _ints([0] * n), _ints([0] * n), _bools([False] * n), _bools([False] * n),
             _bools([False] * n), _bools([False] * n), _texts(["d"] * n), _nulls(n),
             _nulls(n)])


def _pg_index(ctx) -> tuple[list[str], list[Val]]:
    rels = [r for r in _relations(ctx) if r.kind == "i"]
    n = len(rels)
    return (["indexrelid", "indrelid", "indnatts", "indnkeyatts", "indisunique",
             "indisprimary", "indisclustered", "indisvalid", "indisreplident", "indpred",
             "indimmediate", "indnullsnotdistinct"],
            [_ints([r.oid for r in rels]), _ints([r.table_oid for r in rels]), _ints([1] * n),
             _ints([1] * n),
             _bools([r.primary for r in rels]), _bools([r.primary for r in rels]),
             _bools([False] * n), _bools([True] * n), _bools([False] * n), _nulls(n),
             _bools([True] * n), _bools([False] * n)])


# a collection's id key constraint's OID: its table's + this (its indexes take + 1, + 2 ...)
CONSTRAINT_OFFSET = 999


def _pg_constraint(ctx) -> tuple[list[str], list[Val]]:
    """The id key of each collection that declares one (its only constraint: SQL's
    CREATE TABLE takes no other)."""
    keys = [r for r in _relations(ctx) if r.primary]
    n = len(keys)
    return (["oid", "conname", "connamespace", "contype", "condeferrable", "condeferred",
             "convalidated", "conrelid", "conindid", "confrelid", "conparentid",
             "connoinherit", "conislocal", "coninhcount", "conperiod", "conkey"],
            [_ints([r.table_oid + CONSTRAINT_OFFSET for r in keys]),
             _texts([r.name for r in keys]), _ints([PUBLIC] * n), _texts(["p"] * n),
             _bools([False] * n), _bools([False] * n), _bools([True] * n),
             _ints([r.table_oid for r in keys]), _ints([r.oid for r in keys]), _ints([0] * n),
             _ints([0] * n), _bools([True] * n), _bools([True] * n), _ints([0] * n),
             _bools([False] * n),
             Val("array", object_array([[1]] * n), np.zeros(n, bool))])   # the id: column 1


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
               "json": "jsonb", "timestamp": "timestamptz"}
_VECTOR_TYPES = {"f32": "vector", "f16": "halfvec", "bit": "bit", "int8": "vector"}


def _type_and_mod(f, schema) -> tuple[int, int]:
    """A column's type OID and typmod (vector(n): n, varchar(n): n + 4, as PostgreSQL's)."""
    if f is None:
        return OIDS["int8" if schema.id_kind == "int" else "text"], -1
    if f.kind == "vector":
        return OIDS[SQL_TYPES[f.dtype]], f.dim
    if f.kind == "text" and f.max_length is not None:
        return OIDS["varchar"], f.max_length + 4
    return OIDS[_KIND_TYPES[f.kind]], -1


def _default(f, schema, table: str) -> str | None:
    """A column's default as pg_get_expr shows it."""
    if f is None:
        return None if schema.id_required or schema.id_kind != "int" \
            else f"nextval('{table}_id_seq'::regclass)"
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
_STORAGE = {"text": "x", "varchar": "x", "jsonb": "x", "bit": "x", "vector": "e",
            "halfvec": "e"}


def _pg_attribute(ctx) -> tuple[list[str], list[Val]]:
    cols = _columns(ctx, indexes=True)
    n = len(cols)
    # a hash index keeps its column's 4-byte hash codes: its attribute is int4
    types = [(OIDS["int4"], -1) if c[6] == "hash" else _type_and_mod(c[3], c[4]) for c in cols]
    texts = [TYPES[t].name in ("text", "varchar") for t, _ in types]
    return (["attrelid", "attname", "atttypid", "atttypmod", "attnum", "attnotnull",
             "atthasdef", "attisdropped", "attcollation", "attidentity", "attgenerated",
             "attstorage", "attcompression", "attstattarget", "attlen", "attndims"],
            [_ints([c[0] for c in cols]), _texts([c[2] for c in cols]),
             _ints([t for t, _ in types]), _ints([m for _, m in types]),
             _ints([c[1] for c in cols]),
             _bools([c[3] is None or c[3].not_null for c in cols]),
             _bools([not c[6] and _default(c[3], c[4], c[5]) is not None for c in cols]),
             _bools([False] * n), _ints([100 if t else 0 for t in texts]),
             _texts([""] * n), _texts([""] * n),
             _texts([_STORAGE.get(TYPES[t].name, "p") for t, _ in types]),
             _texts([""] * n), _ints([-1] * n),
             _ints([_LENGTHS.get(TYPES[t].name, -1) for t, _ in types]), _ints([0] * n)])


def _pg_attrdef(ctx) -> tuple[list[str], list[Val]]:
    """Each column's default, its expression's text as adbin (pg_get_expr shows it)."""
    rows = [(c[0], c[1], _default(c[3], c[4], c[5])) for c in _columns(ctx)]
    rows = [r for r in rows if r[2] is not None]
    return (["oid", "adrelid", "adnum", "adbin"],
            [_ints([r[0] + 900 + r[1] for r in rows]), _ints([r[0] for r in rows]),
             _ints([r[1] for r in rows]), _texts([r[2] for r in rows])])


def _pg_collation(ctx) -> tuple[list[str], list[Val]]:
    return (["oid", "collname", "collnamespace"],
            [_ints([100, 950, 951]), _texts(["default", "C", "POSIX"]), _ints([PG_CATALOG] * 3)])


def _pg_roles(ctx) -> tuple[list[str], list[Val]]:
    return (["oid", "rolname", "rolsuper"], [_ints([OWNER]), _texts(["varvedb"]), _bools([True])])


def _empty(*columns: str):
    """A relation varvedb has no rows for (no inheritance, policies, extended
    statistics or publications): its columns, untyped (NULL) as they hold nothing."""
    def rows(ctx) -> tuple[list[str], list[Val]]:
        return (list(columns), [_nulls(0) for _ in columns])
    return rows


# pg_catalog's relations' OIDs, PostgreSQL's
CATALOG_OIDS = {"pg_type": 1247, "pg_attribute": 1249, "pg_class": 1259, "pg_namespace": 2615,
                "pg_am": 2601, "pg_attrdef": 2604, "pg_constraint": 2606, "pg_description": 2609,
                "pg_index": 2610, "pg_inherits": 2611, "pg_extension": 3079,
                "pg_policy": 3256, "pg_statistic_ext": 3381, "pg_collation": 3456,
                "pg_publication": 6104, "pg_publication_rel": 6106,
                "pg_publication_namespace": 6237}

RELATIONS = {"pg_type": _pg_type, "pg_namespace": _pg_namespace,
             "pg_extension": _pg_extension, "pg_am": _pg_am, "pg_class": _pg_class,
             "pg_index": _pg_index, "pg_attribute": _pg_attribute, "pg_attrdef": _pg_attrdef,
             "pg_constraint": _pg_constraint, "pg_collation": _pg_collation,
             "pg_roles": _pg_roles, "pg_description": _pg_description,
             # a function of rows, as PostgreSQL's is (psql's \dx joins it)
             "pg_available_extensions": _pg_available_extensions,
             "pg_inherits": _empty("inhrelid", "inhparent", "inhseqno", "inhdetachpending"),
             "pg_policy": _empty("oid", "polname", "polrelid", "polcmd", "polpermissive",
                                 "polroles", "polqual", "polwithcheck"),
             "pg_statistic_ext": _empty("oid", "stxrelid", "stxname", "stxnamespace",
                                        "stxkind", "stxstattarget"),
             "pg_publication": _empty("oid", "pubname", "puballtables"),
             "pg_publication_namespace": _empty("oid", "pnpubid", "pnnspid"),
             "pg_publication_rel": _empty("oid", "prpubid", "prrelid", "prqual", "prattrs")}


def relation_rows(name: str, ctx) -> tuple[list[str], list[Val]]:
    """(column names, columns) of a pg_catalog relation, as `ctx`'s database has it."""
    return RELATIONS[name](ctx)
