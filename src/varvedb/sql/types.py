"""SQL types: PostgreSQL's type names onto schema kinds (their values' text
forms are query/literals.py's), and their modifiers (vector(n), varchar(n))
checked as PostgreSQL and pgvector check them, with their limits.

Every integer type is stored as int64 and every float type as float64: a
value PostgreSQL would reject as out of range for int4 or float4 is kept.
vector(n) is a float32 vector, halfvec(n) a float16 one, bit(n) n bits (a
vector field of dtype bit, read in SQL as a vector of 0/1 values);
sparsevec(n) a sparse vector field (sparse.py), its dimension n or any.
"""
from __future__ import annotations

import re

from pglast import ast

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
    "bytea": "bytes",
    "vector": "vector", "halfvec": "vector", "bit": "vector", "sparsevec": "sparsevec",
    # an OID shown as its type's, relation's or schema's name (query/pg_types.py,
    # sql/pg_catalog.py): a cast only, never stored
    "regtype": "regtype", "regclass": "regclass", "regnamespace": "regnamespace",
    "oid": "int",
}
SERIAL = ("serial", "bigserial", "smallserial", "serial4", "serial8")


def type_of(tn: ast.TypeName) -> tuple[str, str, tuple[int, ...]]:
    """(kind, the type's own name, its modifiers) of a pglast TypeName."""
    kind, name = type_kind([s.sval for s in tn.names])
    mods = tuple(_modifier(m) for m in tn.typmods or ())
    if mods:
        check = _MODIFIERS.get(name)
        if check is None:
            raise SqlError("42601", f'type modifier is not allowed for type "{name}"')
        check(name, mods)
    return kind, name, mods


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
_POSTGRES_ONLY = {"uuid", "date", "time", "timetz", "interval", "money", "inet",
                  "cidr", "macaddr", "point", "line", "box", "polygon", "circle", "xml",
                  "varbit", "tsvector", "tsquery", "int4range"}


# ---- type modifiers: what each type's typmodin accepts --------------------------------

_INT4 = re.compile(r"\s*[+-]?\d+\s*")


def _modifier(node) -> int:
    """A modifier as an int4, read as PostgreSQL reads it: an integer, or the text of a
    constant or a name through int4's input function."""
    if isinstance(node, ast.A_Const) and not node.isnull:
        v = node.val
        if isinstance(v, ast.Integer):
            return v.ival
        text = v.fval if isinstance(v, ast.Float) else \
            v.sval if isinstance(v, ast.String) else None
    elif isinstance(node, ast.ColumnRef) and len(node.fields) == 1 and \
            isinstance(node.fields[0], ast.String):
        text = node.fields[0].sval
    else:
        text = None
    if text is None:
        raise SqlError("42601", "type modifiers must be simple constants or identifiers")
    if not _INT4.fullmatch(text):
        raise SqlError("22P02", f'invalid input syntax for type integer: "{text}"')
    if not -2 ** 31 <= int(text) < 2 ** 31:
        raise SqlError("22003", f'value "{text}" is out of range for type integer')
    return int(text)


def _one_in(what: str, low: int, high: int, shown: dict | None = None):
    def check(name: str, mods: tuple) -> None:
        if len(mods) != 1:
            raise SqlError("22023", "invalid type modifier")
        name = (shown or {}).get(name, name)
        if mods[0] < low:
            raise SqlError("22023", f"{what} for type {name} must be at least {low}")
        if mods[0] > high:
            raise SqlError("22023", f"{what} for type {name} cannot exceed {high}")
    return check


def _numeric(name: str, mods: tuple) -> None:
    if len(mods) > 2:
        raise SqlError("22023", "invalid NUMERIC type modifier")
    if not 1 <= mods[0] <= 1000:
        raise SqlError("22023", f"NUMERIC precision {mods[0]} must be between 1 and 1000")
    if len(mods) == 2 and not -1000 <= mods[1] <= 1000:
        raise SqlError("22023", f"NUMERIC scale {mods[1]} must be between -1000 and 1000")


def _timestamp(name: str, mods: tuple) -> None:
    if len(mods) != 1:
        raise SqlError("22023", "invalid type modifier")
    if mods[0] < 0:         # above 6 PostgreSQL warns and keeps microseconds, as here
        zone = " WITH TIME ZONE" if name == "timestamptz" else ""
        raise SqlError("22023", f"TIMESTAMP({mods[0]}){zone} precision must not be negative")


_MAX_VECTOR_DIM = 16000             # pgvector's VECTOR_MAX_DIM and HALFVEC_MAX_DIM
_MAX_LENGTH = 10485760              # PostgreSQL's MaxAttrSize: varchar(n), char(n)
_MODIFIERS = {
    "vector": _one_in("dimensions", 1, _MAX_VECTOR_DIM),
    "halfvec": _one_in("dimensions", 1, _MAX_VECTOR_DIM),
    "bit": _one_in("length", 1, _MAX_LENGTH * 8),
    "sparsevec": _one_in("dimensions", 1, 1_000_000_000),      # SPARSEVEC_MAX_DIM
    "varchar": _one_in("length", 1, _MAX_LENGTH),
    "bpchar": _one_in("length", 1, _MAX_LENGTH, {"bpchar": "char"}),
    "numeric": _numeric,
    "timestamp": _timestamp,
    "timestamptz": _timestamp,
}


def array_element(kind: str, name: str, mods: tuple) -> str | None:
    """The element type a column or a cast of `name[]` keeps (schema.Field.array_of:
    "int", "float", "bool", "text", "vector(3)", "halfvec", "sparsevec(5)"); None for an
    element type no array column holds (bit, json, timestamp, the catalog's)."""
    if kind in ("int", "float", "bool", "text") and name not in ("oid", "regtype"):
        return kind
    if name in ("vector", "halfvec", "sparsevec"):
        return f"{name}({mods[0]})" if mods else name
    return None
