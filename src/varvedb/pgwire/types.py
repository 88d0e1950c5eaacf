"""Column types on the wire: each result column's type OID and its values' bytes
(query/pg_binary.py's column_oid and encoder, which a binary COPY TO writes
with too), the struct code of a fixed-width binary column, and a parameter's
bytes back into the Python value `db.sql()` takes. The OIDs are
query/pg_types.py's.
"""
from __future__ import annotations

import json
import struct
from decimal import Decimal, InvalidOperation

from ..errors import SqlError
from ..query.arrays import split_text
from ..bytea import parse_bytea
from ..query.pg_binary import column_oid, encoder, receive  # noqa: F401 (the wire's)
from ..query.pg_types import (ARRAYS, BIT, BOOL, BPCHAR, BYTEA, CHAR, ELEMENTS, FLOAT4,  # noqa: F401
                              FLOAT8, HALFVEC, INT2, INT4, INT8, JSON, JSONB, NAME, NUMERIC, OID,
                              SPARSEVEC, TEXT, TIMESTAMP, TIMESTAMPTZ, UNKNOWN, VARBIT, VARCHAR,
                              VECTOR)

_FIXED = {INT8: "q", INT4: "i", INT2: "h", FLOAT8: "d", FLOAT4: "f"}


def fixed_code(oid: int, binary: bool) -> str | None:
    """The struct code of a binary column of fixed width (messages.FixedRows)."""
    return _FIXED.get(oid) if binary else None


# ---- parameters ----------------------------------------------------------------

def decode_param(data: bytes | None, oid: int, binary: bool):
    """A Bind parameter as the Python value db.sql() takes (None: NULL)."""
    if data is None:
        return None
    try:
        if binary:
            return receive(data, oid)
        text = data.decode()
    except (UnicodeDecodeError, struct.error, ValueError) as e:
        raise SqlError("22P03", f"incorrect binary data format in bind parameter "
                                f"(type OID {oid}): {e}") from None
    return _parse_text(text, oid)


def _parse_text(text: str, oid: int):
    """A text-format parameter of type `oid`; an unspecified type (0, unknown, text)
    stays a string, which the statement casts where it is used (as PostgreSQL
    infers an unknown literal's type)."""
    try:
        if oid in (INT2, INT4, INT8, OID):
            return int(text)
        if oid in (FLOAT4, FLOAT8):
            return float(text)
        if oid == NUMERIC:
            d = Decimal(text)
            return int(d) if d == d.to_integral_value() and d.is_finite() else float(d)
        if oid == BOOL:
            t = text.strip().lower()
            if t in ("t", "true", "yes", "on", "1", "y"):
                return True
            if t in ("f", "false", "no", "off", "0", "n"):
                return False
            raise ValueError(text)
        if oid in (JSON, JSONB):
            return json.loads(text)
        if oid in (TIMESTAMPTZ, TIMESTAMP):
            return text            # the statement parses it as a timestamp literal
        if oid == BYTEA:
            return parse_bytea(text)
        if oid in ELEMENTS:
            return _parse_array(text, ELEMENTS[oid])
    except (ValueError, InvalidOperation, json.JSONDecodeError):
        raise SqlError("22P02", f"invalid input syntax for type OID {oid}: "
                                f"{text[:60]!r}") from None
    return text


def _parse_array(text: str, element: int) -> list:
    """A one-dimensional array literal {a,b,"c d",NULL} (query/arrays.split_text)."""
    if element in (VECTOR, HALFVEC):       # elements are '[..]': no commas to split inside
        text = text.strip()
        if not (text.startswith("{") and text.endswith("}")):
            raise ValueError(text)
        return [_parse_text(x.strip('"'), element) for x in _split_vectors(text[1:-1])]
    return [None if x is None else _parse_text(x, element) for x in split_text(text)]


def _split_vectors(body: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(body[start:i].strip())
            start = i + 1
    if body.strip():
        out.append(body[start:].strip())
    return out
