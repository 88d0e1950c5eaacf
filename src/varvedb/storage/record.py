"""The payload codec: a msgpack header plus named numpy arrays, each aligned.

Layout of an encoded record (offsets relative to the payload start, which is
64-byte aligned in the file):

    u32 meta_length | meta (msgpack map) | zero pad to 64 | array 0 | pad | array 1 | ...

`meta["_arrays"]` lists [name, dtype, shape] for each array, in order; each
starts at the next 64-byte boundary after the one before. Arrays are
written from their own buffers (no concatenated copy of the payload is made),
so a bulk insert costs one copy of its data: the kernel's write. Decoding
returns numpy views over the given buffer, never copies.
"""
from __future__ import annotations

import struct

import msgspec
import numpy as np

from .format import pad

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def encode(meta: dict, arrays: dict[str, np.ndarray] | None = None
           ) -> tuple[list, int, dict[str, int]]:
    """Encode to (parts, length, offsets): bytes-like parts, their total length,
    and where each array starts relative to the record."""
    contig = {}
    for name, a in (arrays or {}).items():
        a = np.ascontiguousarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        contig[name] = a
    head = _encoder.encode({**meta, "_arrays": [[n, a.dtype.str, list(a.shape)]
                                                 for n, a in contig.items()]})
    pos = pad(4 + len(head))
    parts: list = [(struct.pack("<I", len(head)) + head).ljust(pos, b"\0")]
    offsets = {}
    for name, a in contig.items():
        offsets[name] = pos
        if a.nbytes:
            parts.append(memoryview(a.reshape(-1)).cast("B"))
        end = pad(pos + a.nbytes)
        if end > pos + a.nbytes:
            parts.append(bytes(end - pos - a.nbytes))
        pos = end
    return parts, pos, offsets


def decode(buf) -> tuple[dict, dict[str, np.ndarray], dict[str, int]]:
    """Decode a record: (meta without '_arrays', {name: read-only view}, offsets)."""
    (mlen,) = struct.unpack_from("<I", buf, 0)
    meta = _decoder.decode(bytes(buf[4:4 + mlen]))
    arrays, offsets = {}, {}
    pos = pad(4 + mlen)
    for name, dtype, shape in meta.pop("_arrays"):
        dt = np.dtype(dtype)
        count = int(np.prod(shape)) if shape else 1
        arrays[name] = np.frombuffer(buf, dtype=dt, count=count, offset=pos).reshape(shape)
        offsets[name] = pos
        pos = pad(pos + count * dt.itemsize)
    return meta, arrays, offsets


