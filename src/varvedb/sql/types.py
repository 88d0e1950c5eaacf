"""SQL types: PostgreSQL's type names onto schema kinds (their values' text
forms are query/literals.py's).

Every integer type is stored as int64 and every float type as float64: a
value PostgreSQL would reject as out of range for int4 or float4 is kept.
vector(n) is a float32 vector, halfvec(n) a float16 one, bit(n) n bits (a
vector field of dtype bit, read in SQL as a vector of 0/1 values).
"""
from __future__ import annotations

from ..errors import NotSupportedError, SqlError

# PostgreSQL's names (pglast gives the internal ones: int8, float4, ...) -> schema kind
TYPE_KINDS = {
    "int2": "int", "int4": "int", "int8": "int", "smallint": "int", "integer": "int",
    "int": "int", "bigint": "int", "serial": "int", "bigserial": "int", "smallserial": "int",
    "serial4": "int", "serial8": "int",
    "float4": "float", "float8": "float", "real": "float", "double precision": "float",
    "float": "float", "numeric": "float", "decimal": "float",
    "bool": "bool", "boolean": "bool",
    "text": "text", "varchar": "text", "bpchar": "text", "char": "text",
    "character varying": "text",
    "json": "json", "jsonb": "json",
    "timestamp": "timestamp", "timestamptz": "timestamp",
    "vector": "vector", "halfvec": "vector", "bit": "vector",
}
SERIAL = ("serial", "bigserial", "smallserial", "serial4", "serial8")


def type_kind(names: list[str]) -> tuple[str, str]:
    """(kind, the type's own name) of a pglast TypeName's name list."""
    name = names[-1].lower()
    if names[0].lower() == "pg_catalog" or len(names) == 1:
        kind = TYPE_KINDS.get(name)
        if kind is not None:
            return kind, name
    if name in TYPE_KINDS:
        return TYPE_KINDS[name], name
    if name in _POSTGRES_ONLY:
        raise NotSupportedError(f'type "{name}" is not supported')
    raise SqlError("42704", f'type "{".".join(names)}" does not exist')


# PostgreSQL types varvedb does not store (0A000, where any other name is 42704)
_POSTGRES_ONLY = {"uuid", "bytea", "date", "time", "timetz", "interval", "money", "inet",
                  "cidr", "macaddr", "point", "line", "box", "polygon", "circle", "xml",
                  "varbit", "tsvector", "tsquery", "oid", "int4range", "sparsevec"}
