"""The payload codec: a msgpack header plus named numpy arrays, each aligned.

Layout of an encoded record (offsets relative to the payload start, which is
64-byte aligned in the file):

    u32 meta_length | meta (msgpack map) | zero pad to 64 | array 0 | pad | array 1 | ...

`meta["_arrays"]` lists [name, dtype, shape, offset] for each array. Arrays are
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
    arrays = arrays or {}
    descs = []
    offsets = []
    # Meta length depends on the offsets it lists, so fix offsets from a
    # generous estimate of the meta's size and reserve that space.
    probe = _encoder.encode({**meta, "_arrays": [[n, a.dtype.str, list(a.shape), 2**62]
                                                  for n, a in arrays.items()]})
    pos = pad(4 + len(probe))
    contig = {}
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        contig[name] = a
        descs.append([name, a.dtype.str, list(a.shape), pos])
        offsets.append(pos)
        pos = pad(pos + a.nbytes)
    head = _encoder.encode({**meta, "_arrays": descs})
    assert 4 + len(head) <= pad(4 + len(probe))
    first = struct.pack("<I", len(head)) + head
    parts: list = [first.ljust(pad(4 + len(probe)), b"\0")]
    cur = len(parts[0])
    for (name, a), off in zip(contig.items(), offsets):
        assert cur == off
        if a.nbytes:
            parts.append(memoryview(a.reshape(-1)).cast("B"))
        cur += a.nbytes
        gap = pad(cur) - cur
        if gap:
            parts.append(bytes(gap))
            cur += gap
    return parts, cur, dict(zip(contig, offsets))


def decode(buf) -> tuple[dict, dict[str, np.ndarray], dict[str, int]]:
    """Decode a record: (meta without '_arrays', {name: read-only view}, offsets)."""
    (mlen,) = struct.unpack_from("<I", buf, 0)
    meta = _decoder.decode(bytes(buf[4:4 + mlen]))
    arrays, offsets = {}, {}
    for name, dtype, shape, off in meta.pop("_arrays"):
        count = int(np.prod(shape)) if shape else 1
        arrays[name] = np.frombuffer(buf, dtype=np.dtype(dtype), count=count,
                                     offset=off).reshape(shape)
        offsets[name] = off
    return meta, arrays, offsets


