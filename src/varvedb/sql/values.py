"""SQL types and values: PostgreSQL type names onto schema kinds, and the
text input form of each kind (what a quoted literal, a COPY field or a
string parameter means once its column's type is known).

Every integer type is stored as int64 and every float type as float64: a
value PostgreSQL would reject as out of range for int4 or float4 is kept.
vector(n) is a float32 vector, halfvec(n) a float16 one.
"""
from __future__ import annotations

import datetime as _dt
import json
import re

import numpy as np

from ..errors import NotSupportedError, SqlError
from ..schema import to_micros

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
    "vector": "vector", "halfvec": "vector",
}
SERIAL = ("serial", "bigserial", "smallserial", "serial4", "serial8")

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}
_VECTOR = re.compile(r"^\s*\[(.*)\]\s*$", re.S)


def type_kind(names: list[str]) -> tuple[str, str]:
    """(kind, the type's own name) of a pglast TypeName's name list."""
    name = names[-1].lower()
    if names[0].lower() == "pg_catalog" or len(names) == 1:
        kind = TYPE_KINDS.get(name)
        if kind is not None:
            return kind, name
    if name in TYPE_KINDS:
        return TYPE_KINDS[name], name
    raise NotSupportedError(f'type "{".".join(names)}" is not supported')


def parse_input(kind: str, text: str):
    """The value a string stands for in a column of `kind` (PostgreSQL's input
    functions); SqlError 22P02 (or 22007/22008 for times) when it is not one."""
    if not isinstance(text, str):
        return text
    s = text.strip()
    try:
        if kind == "int":
            return int(s)
        if kind == "float":
            low = s.lower()
            if low in ("nan", "infinity", "-infinity", "inf", "-inf"):
                return float(low.replace("infinity", "inf"))
            return float(s)
        if kind == "bool":
            low = s.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError
        if kind == "text":
            return text
        if kind == "json":
            return json.loads(text)
        if kind == "vector":
            return parse_vector(text)
        if kind == "timestamp":
            return parse_timestamp(s)
    except SqlError:
        raise
    except (ValueError, OverflowError):
        pass
    raise SqlError("22P02", f'invalid input syntax for type {_PG_NAMES[kind]}: "{text}"')


_PG_NAMES = {"int": "bigint", "float": "double precision", "bool": "boolean", "text": "text",
             "json": "json", "vector": "vector", "timestamp": "timestamp"}


def parse_vector(text: str) -> np.ndarray:
    """pgvector's text form '[1,2,3]' as a float32 array."""
    m = _VECTOR.match(text)
    if m is None:
        raise SqlError("22P02", f'invalid input syntax for type vector: "{text}"')
    body = m.group(1).strip()
    if not body:
        raise SqlError("22000", "vector must have at least 1 dimension")
    try:
        a = np.array([float(x) for x in body.split(",")], np.float32)
    except ValueError:
        raise SqlError("22P02", f'invalid input syntax for type vector: "{text}"') from None
    if not np.isfinite(a).all():
        raise SqlError("22000", "NaN not allowed in vector" if np.isnan(a).any()
                       else "infinite value not allowed in vector")
    return a


def parse_timestamp(s: str) -> int:
    """'2026-11-30 12:00:00+00' (ISO 8601; no zone: UTC) as microseconds."""
    t = s.replace(" ", "T", 1) if re.match(r"^\d{4}-\d\d-\d\d \d", s) else s
    if re.search(r"[+-]\d\d$", t):
        t += ":00"
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    try:
        d = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise SqlError("22007", f'invalid input syntax for type timestamp: "{s}"') from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return to_micros("timestamp", d)
