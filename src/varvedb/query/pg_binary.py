"""PostgreSQL's binary forms, read: a Bind parameter's bytes (pgwire) and a
binary COPY's fields (sql/dml.py) into the Python values db.sql() takes.
pgvector's vector and halfvec: int16 dim, int16 0, then dim big-endian float4
(halfvec: float2); bit: int32 bit count, then the bits, first bit high;
sparsevec: int32 dim, nnz, 0, then nnz int32 0-based indices and nnz float4."""
from __future__ import annotations

import datetime as _dt
import json
import struct

import numpy as np

from ..errors import SqlError
from ..sparse import SparseVector
from .pg_types import (BIT, BOOL, BPCHAR, BYTEA, ELEMENTS, FLOAT4, FLOAT8, HALFVEC, INT2, INT4,
                       INT8, JSON, JSONB, NAME, OID, SPARSEVEC, TEXT, TIMESTAMP, TIMESTAMPTZ,
                       UNKNOWN, VARBIT, VARCHAR, VECTOR)

EPOCH = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)
_I16, _I32, _I64 = struct.Struct("!h"), struct.Struct("!i"), struct.Struct("!q")
_F4, _F8 = struct.Struct("!f"), struct.Struct("!d")


def receive(data: bytes, oid: int):
    """A value in PostgreSQL's binary form of type `oid` as the Python value db.sql()
    takes; ValueError (or struct.error) where the bytes are not one."""
    n = len(data)
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
    if oid in (VECTOR, HALFVEC) and n >= 4:
        dim, _ = struct.unpack_from("!hh", data)
        width = 2 if oid == HALFVEC else 4
        if dim < 0 or n != 4 + width * dim:
            raise ValueError(f"{n} bytes for a vector of {dim} dimensions")
        return np.frombuffer(data, ">f2" if width == 2 else ">f4", dim, 4).astype(np.float32)
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
