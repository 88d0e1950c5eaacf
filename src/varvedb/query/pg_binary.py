"""PostgreSQL's binary forms, read: a Bind parameter's bytes (pgwire) and a
binary COPY's fields (sql/dml.py) into the Python values db.sql() takes; and
written: a result column's type OID (column_oid) and its values' bytes, text
or binary (encoder), for the wire's results and a binary COPY TO.
pgvector's vector and halfvec: int16 dim, int16 0, then dim big-endian float4
(halfvec: float2); bit: int32 bit count, then the bits, first bit high;
sparsevec: int32 dim, nnz, 0, then nnz int32 0-based indices and nnz float4."""
from __future__ import annotations

import datetime as _dt
import json
import struct
from functools import partial
from operator import is_not, itemgetter

import numpy as np

from ..errors import SqlError
from ..sparse import SparseVector
from ..schema import array_element
from .literals import value_text
from .pg_types import (ARRAYS, BIT, BOOL, BPCHAR, BYTEA, CHAR, ELEMENTS, FLOAT4, FLOAT8, HALFVEC,
                       INT2, INT4, INT8, JSON, JSONB, NAME, NUMERIC, OID, OIDS, SPARSEVEC, TEXT,
                       TIMESTAMP, TIMESTAMPTZ, UNKNOWN, VARBIT, VARCHAR, VECTOR)

EPOCH = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)
_I16, _I32, _I64 = struct.Struct("!h"), struct.Struct("!i"), struct.Struct("!q")
_F4, _F8 = struct.Struct("!f"), struct.Struct("!d")


def receive(data: bytes, oid: int):
    """A value in PostgreSQL's binary form of type `oid` as the Python value db.sql()
    takes; ValueError (or struct.error) where the bytes are not one."""
    n = len(data)
    if oid == VECTOR and n >= 4:       # a search's query vector: looked at first
        return _vector(data, n, 4)
    if oid == INT8 and n == 8:
        return _I64.unpack(data)[0]
    if oid == INT4 and n == 4:
        return _I32.unpack(data)[0]
    if oid == INT2 and n == 2:
        return _I16.unpack(data)[0]
    if oid == FLOAT8 and n == 8:
        return _F8.unpack(data)[0]
    if oid == FLOAT4 and n == 4:
        return _F4.unpack(data)[0]
    if oid == BOOL and n == 1:
        return data != b"\0"
    if oid in (TEXT, VARCHAR, NAME, BPCHAR, UNKNOWN, 0):
        return data.decode()
    if oid == BYTEA:
        return bytes(data)
    if oid == JSONB and n >= 1 and data[0] == 1:
        return _json(data[1:])
    if oid == JSON:
        return _json(data)
    if oid in (TIMESTAMPTZ, TIMESTAMP) and n == 8:
        try:
            return EPOCH + _dt.timedelta(microseconds=_I64.unpack(data)[0])
        except OverflowError:       # (PostgreSQL's range is wider than datetime's)
            raise ValueError("timestamp out of range") from None
    if oid == OID and n == 4:
        return struct.unpack("!I", data)[0]
    if oid in ELEMENTS and n >= 12:
        return _receive_array(data, ELEMENTS[oid])
    if oid == HALFVEC and n >= 4:
        return _vector(data, n, 2)
    if oid == SPARSEVEC and n >= 12:
        dim, nnz, _ = struct.unpack_from("!iii", data)
        if nnz < 0 or n != 12 + 8 * nnz:
            raise ValueError(f"{n} bytes for a sparsevec of {nnz} elements")
        vals = np.frombuffer(data, ">f4", nnz, 12 + 4 * nnz)
        if (vals == 0).any():       # (text input drops a zero; pgvector's recv refuses one)
            raise SqlError("22000", "binary representation of sparsevec cannot contain "
                                    "zero values")
        return SparseVector.checked(dim, np.frombuffer(data, ">i4", nnz, 12), vals)
    if oid in (BIT, VARBIT) and n >= 4:
        (bits,) = _I32.unpack_from(data)
        if bits < 0 or n != 4 + (bits + 7) // 8:
            raise ValueError(f"{n} bytes for a bit string of {bits} bits")
        return np.unpackbits(np.frombuffer(data, np.uint8, offset=4))[:bits].astype(bool)
    raise ValueError(f"binary input of type OID {oid} is not supported ({n} bytes)")


def _vector(data: bytes, n: int, width: int):
    """A vector's (width 4) or halfvec's (2) binary form as float32."""
    dim, _ = _VECTOR_HEAD.unpack_from(data)
    if dim < 0 or n != 4 + width * dim:
        raise ValueError(f"{n} bytes for a vector of {dim} dimensions")
    return np.frombuffer(data, ">f4" if width == 4 else ">f2", dim, 4).astype(np.float32)


_VECTOR_HEAD = struct.Struct("!hh")


def _receive_array(data: bytes, element: int) -> list:
    """A one-dimensional binary array (an empty one has no dimension)."""
    ndim, _, elem = struct.unpack_from("!iii", data)
    if ndim == 0 and len(data) == 12:
        return []
    if ndim != 1 or elem != element:
        raise ValueError(f"an array of {ndim} dimensions of type OID {elem}")
    count, _ = struct.unpack_from("!ii", data, 12)
    at, out = 20, []
    for _ in range(count):
        (size,) = _I32.unpack_from(data, at)
        at += 4
        if size < 0:
            out.append(None)
            continue
        if at + size > len(data):
            raise ValueError("an array element runs past its message")
        out.append(receive(data[at:at + size], element))
        at += size
    if at != len(data):
        raise ValueError("bytes after an array's last element")
    return out


def _json(data: bytes):
    try:
        return json.loads(data.decode())
    except RecursionError:      # nested past Python's stack: refused as bad bytes
        raise ValueError("json nested too deeply") from None


# ---- written: a result column's type and its values' bytes (the wire's binary
# results, a binary COPY TO)

KIND_OIDS = {"int": INT8, "float": FLOAT8, "bool": BOOL, "text": TEXT, "json": JSONB,
             "timestamp": TIMESTAMPTZ, "vector": VECTOR, "sparsevec": SPARSEVEC, "bytes": BYTEA,
             # the catalog's columns (catalog.py), which no SQL statement has
             "oid": OID, "name": NAME, "char": CHAR, "int4": INT4,
             "oid[]": ARRAYS[OID], "text[]": ARRAYS[TEXT]}

_INT8_RANGE = (-(1 << 63), (1 << 63) - 1)


# the catalog's int2vector and oidvector (query/arrays.py's SpaceVector, OidVector)
SPACE_VECTORS = {"int2vector": 22, "oidvector": 30}
# an array column's type by its first element's Python type (text[] where none says)
_ELEMENT_OIDS = {bool: BOOL, int: INT8, float: FLOAT8, str: TEXT, bytes: BYTEA}
_ELEMENT_TYPES = {"bool": "bool", "int": "int8", "float": "float8", "text": "text"}


def column_oid(kind: str | None, rows: list, i: int, element: str | None = None) -> int:
    """The type OID of result column `i` of `kind` (None: unknown, sent as text);
    a vector column is its declared type (`element`: vector, halfvec or bit), else
    halfvec when its values are float16 and bit when they are bool; an int column numeric when a value is past int64 (an exact sum); an
    array column is its elements' array type (int8[], text[], ...), or int2vector /
    oidvector for the catalog's; an array column's, its declared element type's
    (`element`: schema.Field.array_of, or int2vector / oidvector: a catalog column's)."""
    if kind == "array" and element in SPACE_VECTORS:
        return SPACE_VECTORS[element]
    if kind == "array" and element is not None:
        elem_kind, vtype, _ = array_element(element)
        return ARRAYS[OIDS[vtype or _ELEMENT_TYPES[elem_kind]]]
    if kind == "array":
        return _array_oid(rows, i)
    if kind == "vector" and element is not None:
        return OIDS[element]
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
