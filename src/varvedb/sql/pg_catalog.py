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

import numpy as np

from ..query.expr import Val, object_array
from ..query.pg_types import PG_CATALOG, PUBLIC, TYPES
from ..schema import HNSW
from .ddl import index_names

# fixed-width types' typlen; every other type is variable-length (-1)
_LENGTHS = {"bool": 1, "char": 1, "int2": 2, "int4": 4, "oid": 4, "float4": 4, "int8": 8,
            "float8": 8, "timestamp": 8, "timestamptz": 8, "regtype": 4}


def _ints(values) -> Val:
    a = np.array(values, np.int64)
    return Val("int", a, np.zeros(len(a), bool))


def _texts(values) -> Val:
    return Val("text", object_array(list(values)), np.zeros(len(values), bool))


def _bools(values) -> Val:
    a = np.array(values, bool)
    return Val("bool", a, np.zeros(len(a), bool))


def _pg_type(ctx) -> tuple[list[str], list[Val]]:
    ts = sorted(TYPES.values(), key=lambda t: t.oid)
    lengths = [_LENGTHS.get(t.name, -1) for t in ts]
    return (["oid", "typname", "typnamespace", "typlen", "typbyval", "typtype",
             "typdelim", "typelem", "typarray", "typbasetype", "typrelid", "typnotnull",
             "typtypmod", "typndims"],
            [_ints([t.oid for t in ts]), _texts([t.name for t in ts]),
             _ints([t.namespace for t in ts]), _ints(lengths),
             _bools([0 < n <= 8 for n in lengths]), _texts(["b"] * len(ts)),
             _texts([","] * len(ts)), _ints([t.element for t in ts]),
             _ints([t.array for t in ts]), _ints([0] * len(ts)), _ints([0] * len(ts)),
             _bools([False] * len(ts)), _ints([-1] * len(ts)), _ints([0] * len(ts))])


def _pg_namespace(ctx) -> tuple[list[str], list[Val]]:
    return (["oid", "nspname", "nspowner"],
            [_ints([PG_CATALOG, PUBLIC]), _texts(["pg_catalog", "public"]), _ints([10, 10])])


# the extensions a pgvector application checks for: the dialect varvedb speaks is
# pgvector's, checked against this version by the differential suite
PGVECTOR_VERSION = "0.8.6"


def _pg_extension(ctx) -> tuple[list[str], list[Val]]:
    return (["oid", "extname", "extnamespace", "extversion"],
            [_ints([13000, 16384]), _texts(["plpgsql", "vector"]),
             _ints([PG_CATALOG, PUBLIC]), _texts(["1.0", PGVECTOR_VERSION])])


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


def _relations(ctx) -> list[tuple]:
    """(oid, name, kind 'r'/'i', access method, table oid, unique, primary) of every
    collection and index, collections in catalog order."""
    engine = ctx.engine
    by_table: dict[str, list] = {}
    for index, (table, field) in index_names(engine).items():
        by_table.setdefault(table, []).append((index, field))
    out = []
    for tname, cid in sorted(engine.names.items(), key=lambda kv: kv[1]):
        oid = TABLE_OID_BASE + 1000 * cid
        out.append((oid, tname, "r", "heap", oid, False, False))
        out.append((oid + 1, f"{tname}_pkey", "i", "btree", oid, True, True))
        fields = engine.tables[cid].schema.fields
        for k, (index, field) in enumerate(sorted(by_table.get(tname, ())), 2):
            out.append((oid + k, index, "i", _method(fields[field]), oid, False, False))
    return out


def _method(f) -> str:
    vx = f.vector_index
    if vx is None:
        return "hash" if f.index == "hash" else "btree"
    if isinstance(vx, HNSW):
        return "hnsw"
    return "ivfflat" if vx.pq_m is None else "ivfpq"


def _pg_class(ctx) -> tuple[list[str], list[Val]]:
    rels = _relations(ctx)
    n = len(rels)
    return (["oid", "relname", "relnamespace", "relkind", "relowner", "relam",
             "relhasindex", "relpersistence", "relispartition", "reltablespace",
             "reltoastrelid", "reloftype", "relchecks", "relhasrules", "relhastriggers",
             "relrowsecurity", "relforcerowsecurity", "relreplident"],
            [_ints([r[0] for r in rels]), _texts([r[1] for r in rels]),
             _ints([PUBLIC] * n), _texts([r[2] for r in rels]), _ints([OWNER] * n),
             _ints([ACCESS_METHODS[r[3]][0] for r in rels]),
             _bools([r[2] == "r" for r in rels]),     # a collection: its id key's index
             _texts(["p"] * n), _bools([False] * n), _ints([0] * n), _ints([0] * n),
             _ints([0] * n), _ints([0] * n), _bools([False] * n), _bools([False] * n),
             _bools([False] * n), _bools([False] * n), _texts(["d"] * n)])


def _pg_index(ctx) -> tuple[list[str], list[Val]]:
    rels = [r for r in _relations(ctx) if r[2] == "i"]
    n = len(rels)
    return (["indexrelid", "indrelid", "indnatts", "indisunique", "indisprimary",
             "indisclustered", "indisvalid", "indisreplident"],
            [_ints([r[0] for r in rels]), _ints([r[4] for r in rels]), _ints([1] * n),
             _bools([r[5] for r in rels]), _bools([r[6] for r in rels]),
             _bools([False] * n), _bools([True] * n), _bools([False] * n)])


RELATIONS = {"pg_type": _pg_type, "pg_namespace": _pg_namespace,
             "pg_extension": _pg_extension, "pg_am": _pg_am, "pg_class": _pg_class,
             "pg_index": _pg_index}


def relation_rows(name: str, ctx) -> tuple[list[str], list[Val]]:
    """(column names, columns) of a pg_catalog relation, as `ctx`'s database has it."""
    return RELATIONS[name](ctx)
