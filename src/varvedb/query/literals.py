"""The text input form of each kind: what a quoted literal, a COPY field or a
string parameter means once the type it meets is known (PostgreSQL's input
functions, for the kinds varvedb stores)."""
from __future__ import annotations

import datetime as _dt
import json
import re

import numpy as np

from ..errors import SqlError
from ..schema import to_micros

_TRUE = {"t", "true", "y", "yes", "on", "1"}
_FALSE = {"f", "false", "n", "no", "off", "0"}
_VECTOR = re.compile(r"^\s*\[(.*)\]\s*$", re.S)
_BITS = re.compile(r"^\s*[01]+\s*$")


def parse_input(kind: str, text: str):
    """The value a string stands for in a column of `kind` (PostgreSQL's input
    functions); SqlError 22P02 (or 22007/22008 for times) when it is not one."""
    if not isinstance(text, str):
        return text
    s = text.strip()
    try:
        if kind == "int":
            value = int(s)
            if not -(1 << 63) <= value < (1 << 63):
                raise SqlError("22003", f'value "{s}" is out of range for type bigint')
            return value
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
    """pgvector's text form '[1,2,3]' as a float32 array; a bit string's form
    '0101' (PostgreSQL's bit(n)) as its bits, 0.0 and 1.0."""
    m = _VECTOR.match(text)
    if m is None and _BITS.match(text):
        return np.frombuffer(text.strip().encode(), np.uint8).astype(np.float32) - ord("0")
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
