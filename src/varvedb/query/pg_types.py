"""PostgreSQL's types as varvedb's SQL names them: OID, name, array type and
display name of each. One table serves the wire protocol's type OIDs
(pgwire/types.py), SQL's pg_catalog relations (sql/pg_catalog.py), the
`::regtype` cast and `to_regtype()`.

pgvector's types have no fixed OIDs in PostgreSQL (an extension's are given at
CREATE EXTENSION); varvedb's are fixed, above 16384 as an extension's would
be, in the `public` namespace as pgvector's usually are.
"""
from __future__ import annotations

from dataclasses import dataclass

PG_CATALOG, PUBLIC = 11, 2200          # the namespaces' OIDs, as in PostgreSQL
NAMESPACES = {PG_CATALOG: "pg_catalog", PUBLIC: "public"}


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str            # typname
    regtype: str         # as oid::regtype::text shows it
    array: int = 0       # typarray (0: none)
    element: int = 0     # typelem (an array type's element; 0: none)
    namespace: int = PG_CATALOG

    @property
    def namespace_name(self) -> str:
        return "public" if self.namespace == PUBLIC else "pg_catalog"


# (typname, OID, its array type's OID, regtype's name)
_SCALARS = [
    ("bool", 16, 1000, "boolean"), ("bytea", 17, 1001, "bytea"), ("char", 18, 1002, '"char"'),
    ("name", 19, 1003, "name"), ("int8", 20, 1016, "bigint"), ("int2", 21, 1005, "smallint"),
    ("int4", 23, 1007, "integer"), ("text", 25, 1009, "text"), ("oid", 26, 1028, "oid"),
    ("json", 114, 199, "json"), ("float4", 700, 1021, "real"),
    ("float8", 701, 1022, "double precision"), ("unknown", 705, 0, "unknown"),
    ("bpchar", 1042, 1014, "character"), ("varchar", 1043, 1015, "character varying"),
    ("timestamp", 1114, 1115, "timestamp without time zone"),
    ("timestamptz", 1184, 1185, "timestamp with time zone"), ("bit", 1560, 1561, "bit"),
    ("varbit", 1562, 1563, "bit varying"), ("numeric", 1700, 1231, "numeric"),
    ("regtype", 2206, 2211, "regtype"), ("jsonb", 3802, 3807, "jsonb"),
    ("vector", 16385, 16395, "vector"), ("halfvec", 16386, 16396, "halfvec"),
    ("sparsevec", 16387, 16397, "sparsevec"),
]


def _table() -> dict[int, PgType]:
    out = {}
    for name, oid, array, regtype in _SCALARS:
        ns = PUBLIC if oid >= 16384 else PG_CATALOG
        out[oid] = PgType(oid, name, regtype, array, 0, ns)
        if array:
            out[array] = PgType(array, "_" + name, regtype + "[]", 0, oid, ns)
    return out


TYPES: dict[int, PgType] = _table()
OIDS: dict[str, int] = {t.name: t.oid for t in TYPES.values()}     # typname -> OID
ARRAYS = {t.oid: t.array for t in TYPES.values() if t.array}      # element -> array type
ELEMENTS = {a: e for e, a in ARRAYS.items()}                       # array type -> element

# the OIDs the wire protocol and the binary forms name
(BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID, JSON, FLOAT4, FLOAT8, UNKNOWN, VARCHAR,
 BPCHAR, TIMESTAMP, TIMESTAMPTZ, NUMERIC, JSONB, BIT, VARBIT, VECTOR, HALFVEC, SPARSEVEC) = (
    OIDS[n] for n in ("bool", "bytea", "char", "name", "int8", "int2", "int4", "text", "oid",
                      "json", "float4", "float8", "unknown", "varchar", "bpchar", "timestamp",
                      "timestamptz", "numeric", "jsonb", "bit", "varbit", "vector", "halfvec",
                      "sparsevec"))

_BY_NAME: dict[str, PgType] = {}
for _t in TYPES.values():
    _BY_NAME[_t.name] = _BY_NAME[f"{_t.namespace_name}.{_t.name}"] = _t
    _BY_NAME.setdefault(_t.regtype, _t)
    if _t.element:
        _BY_NAME.setdefault(TYPES[_t.element].name + "[]", _t)
_BY_NAME.update({"int": TYPES[23], "integer": TYPES[23], "smallint": TYPES[21],
                 "bigint": TYPES[20], "boolean": TYPES[16], "real": TYPES[700],
                 "double precision": TYPES[701]})


def to_regtype(name) -> PgType | None:
    """PostgreSQL's to_regtype(name): the type a name (schema-qualified or not, an
    array as name[], a quoted name) denotes, or None."""
    if not isinstance(name, str):
        return None
    return _BY_NAME.get(name.strip().replace('"', "").lower())
