"""pg_catalog's relations that drivers read to look types up (pg_type and
pg_namespace) and that applications read to check for pgvector (pg_extension),
as rows SQL reads like a table's (`FROM pg_type t WHERE t.oid =
to_regtype($1)`), made from query/pg_types.py's table when a statement reads
them. As in PostgreSQL, pg_catalog is searched before any other schema: an
unqualified pg_type is the catalog's."""
from __future__ import annotations

import numpy as np

from ..query.expr import Val, object_array
from ..query.pg_types import PG_CATALOG, PUBLIC, TYPES

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


def _pg_type() -> tuple[list[str], list[Val]]:
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


def _pg_namespace() -> tuple[list[str], list[Val]]:
    return (["oid", "nspname", "nspowner"],
            [_ints([PG_CATALOG, PUBLIC]), _texts(["pg_catalog", "public"]), _ints([10, 10])])


# the extensions a pgvector application checks for: the dialect varvedb speaks is
# pgvector's, checked against this version by the differential suite
PGVECTOR_VERSION = "0.8.6"


def _pg_extension() -> tuple[list[str], list[Val]]:
    return (["oid", "extname", "extnamespace", "extversion"],
            [_ints([13000, 16384]), _texts(["plpgsql", "vector"]),
             _ints([PG_CATALOG, PUBLIC]), _texts(["1.0", PGVECTOR_VERSION])])


RELATIONS = {"pg_type": _pg_type, "pg_namespace": _pg_namespace, "pg_extension": _pg_extension}


def relation_rows(name: str) -> tuple[list[str], list[Val]]:
    """(column names, columns) of a pg_catalog relation."""
    return RELATIONS[name]()
