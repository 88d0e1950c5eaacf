"""Column types on the wire: each result column's type OID, its values as text
or binary, and a parameter's bytes back into the Python value `db.sql()` takes.

Text is PostgreSQL's output form (query/literals.value_text, the one COPY TO
STDOUT writes). Binary is PostgreSQL's send form for the types that have one
here, and pgvector's for vector and halfvec: int16 dim, int16 0, then dim
big-endian float4 (halfvec: float2). The OIDs are query/pg_types.py's.
"""
from __future__ import annotations

import datetime as _dt
import json
import struct
from decimal import Decimal, InvalidOperation
from functools import partial
from operator import is_not, itemgetter

import numpy as np

from ..errors import SqlError
from ..query.arrays import split_text
from ..query.literals import value_text
from ..schema import array_element
from ..sparse import SparseVector
from ..query.pg_binary import EPOCH, receive
from ..query.pg_types import OIDS
from ..query.pg_types import (ARRAYS, BIT, BOOL, BPCHAR, BYTEA, CHAR, ELEMENTS, FLOAT4,  # noqa: F401
                              FLOAT8, HALFVEC, INT2, INT4, INT8, JSON, JSONB, NAME, NUMERIC, OID,
                              SPARSEVEC, TEXT, TIMESTAMP, TIMESTAMPTZ, UNKNOWN, VARBIT, VARCHAR,
                              VECTOR)

KIND_OIDS = {"int": INT8, "float": FLOAT8, "bool": BOOL, "text": TEXT, "json": JSONB,
             "timestamp": TIMESTAMPTZ, "vector": VECTOR, "sparsevec": SPARSEVEC,
             # the catalog's columns (catalog.py), which no SQL statement has
             "oid": OID, "name": NAME, "char": CHAR, "int4": INT4,
             "oid[]": ARRAYS[OID], "text[]": ARRAYS[TEXT]}

_I16, _I32, _I64 = struct.Struct("!h"), struct.Struct("!i"), struct.Struct("!q")
_F4, _F8 = struct.Struct("!f"), struct.Struct("!d")
_INT8_RANGE = (-(1 << 63), (1 << 63) - 1)


# the catalog's int2vector and oidvector (query/arrays.py's SpaceVector, OidVector)
SPACE_VECTORS = {"int2vector": 22, "oidvector": 30}
# an array column's type by its first element's Python type (text[] where none says)
_ELEMENT_OIDS = {bool: BOOL, int: INT8, float: FLOAT8, str: TEXT}
_ELEMENT_TYPES = {"bool": "bool", "int": "int8", "float": "float8", "text": "text"}


def column_oid(kind: str | None, rows: list, i: int, element: str | None = None) -> int:
    """The type OID of result column `i` of `kind` (None: unknown, sent as text);
    a vector column is halfvec when its values are float16 and bit when they are
    bool, and an int column numeric when a value is past int64 (an exact sum); an
    array column is its elements' array type (int8[], text[], ...), or int2vector /
    oidvector for the catalog's; an array column's, its declared element type's
    (`element`: schema.Field.array_of)."""
    if kind == "array" and element is not None:
        elem_kind, vtype, _ = array_element(element)
        return ARRAYS[OIDS[vtype or _ELEMENT_TYPES[elem_kind]]]
    if kind == "array":
        return _array_oid(rows, i)
    oid = KIND_OIDS.get(kind, TEXT)
    if oid == VECTOR:
        for r in rows:
            v = r[i]
            if v is not None:
                return _VECTOR_OIDS.get(getattr(v, "dtype", None), VECTOR)
    elif oid == INT8 and rows and _past_int8(rows, i):
        return NUMERIC
    return oid


def _past_int8(rows: list, i: int) -> bool:
    """Does column `i` hold an int past int64? Its least and greatest values are
    looked at first (C's loops, not one Python step a row); only a column whose
    bounds are past int64 (or that min and max cannot order) is looked at a value
    at a time."""
    values = list(filter(_NOT_NULL, map(itemgetter(i), rows)))
    try:
        if not values or _INT8_RANGE[0] <= min(values) and max(values) <= _INT8_RANGE[1]:
            return False
    except TypeError:
        pass
    lo, hi = _INT8_RANGE
    return any(type(v) is int and not lo <= v <= hi for v in values)


_NOT_NULL = partial(is_not, None)


def _array_oid(rows: list, i: int) -> int:
    for r in rows:
        arr = r[i]
        if arr is None:
            continue
        if hasattr(arr, "TYPE"):
            return SPACE_VECTORS[arr.TYPE]
        for x in arr:
            if x is None:
                continue
            if isinstance(x, np.ndarray):        # a vector, halfvec or bit string
                return ARRAYS[_VECTOR_OIDS.get(x.dtype, VECTOR)]
            if isinstance(x, SparseVector):
                return ARRAYS[SPARSEVEC]
            return ARRAYS.get(_ELEMENT_OIDS.get(type(x), TEXT), ARRAYS[TEXT])
    return ARRAYS[TEXT]


def encode_text(v, kind: str | None) -> bytes | None:
    text = value_text(v, kind)
    return None if text is None else text.encode()


def encoder(oid: int, kind: str | None, binary: bool):
    """A function of a value giving its bytes on the wire (None: NULL)."""
    if not binary:
        return lambda v: encode_text(v, kind)
    send = _SEND.get(oid)
    if send is None:
        raise SqlError("0A000", f"binary output of type OID {oid} is not supported; "
                                "ask for text")
    return lambda v: None if v is None else send(v)


_VECTOR_OIDS = {np.dtype(np.float16): HALFVEC, np.dtype(np.bool_): BIT}
_FIXED = {INT8: "q", INT4: "i", INT2: "h", FLOAT8: "d", FLOAT4: "f"}


def fixed_code(oid: int, binary: bool) -> str | None:
    """The struct code of a binary column of fixed width (messages.FixedRows)."""
    return _FIXED.get(oid) if binary else None


def _send_vector(v) -> bytes:
    a = np.asarray(v)
    dt = ">f2" if a.dtype == np.float16 else ">f4"
    return struct.pack("!hh", a.shape[0], 0) + a.astype(dt).tobytes()


def _send_bit(v) -> bytes:
    """PostgreSQL's binary bit string: its length in bits, then the bits packed
    high bit first."""
    a = np.asarray(v, np.bool_)
    return _I32.pack(a.shape[0]) + np.packbits(a).tobytes()


def _send_sparse(v) -> bytes:
    """pgvector's binary sparsevec: int32 dim, nnz, 0, then the 0-based indices
    (int32) and the values (float4)."""
    return (struct.pack("!iii", v.dim, len(v.indices), 0) + v.indices.astype(">i4").tobytes()
            + v.values.astype(">f4").tobytes())


def _send_timestamp(v) -> bytes:
    delta = v - EPOCH
    return _I64.pack((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


_SEND = {
    INT8: lambda v: _I64.pack(int(v)), INT4: lambda v: _I32.pack(int(v)),
    INT2: lambda v: _I16.pack(int(v)), FLOAT8: lambda v: _F8.pack(float(v)),
    FLOAT4: lambda v: _F4.pack(float(v)), BOOL: lambda v: b"\1" if v else b"\0",
    TEXT: lambda v: value_text(v).encode(), VARCHAR: lambda v: value_text(v).encode(),
    JSONB: lambda v: b"\1" + value_text(v, "json").encode(),
    JSON: lambda v: value_text(v, "json").encode(),
    TIMESTAMPTZ: _send_timestamp, VECTOR: _send_vector, HALFVEC: _send_vector, BIT: _send_bit,
    SPARSEVEC: _send_sparse,
    BYTEA: bytes, OID: lambda v: struct.pack("!I", int(v)), NAME: lambda v: str(v).encode(),
    CHAR: lambda v: str(v).encode(),
}


def _send_array(element: int):
    """PostgreSQL's binary array: one dimension, lower bound 1."""
    send = _SEND[element]

    def array(v) -> bytes:
        items = list(v)
        out = [struct.pack("!iiiii", 1, any(x is None for x in items), element, len(items), 1)]
        for x in items:
            if x is None:
                out.append(_I32.pack(-1))
            else:
                b = send(x)
                out.append(_I32.pack(len(b)) + b)
        return b"".join(out)
    return array


_SEND.update({a: _send_array(e) for e, a in ARRAYS.items() if e in _SEND})


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
            if text.startswith("\\x"):
                return bytes.fromhex(text[2:])
            raise ValueError("bytea in escape format")
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
