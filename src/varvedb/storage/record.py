"""The payload codec: a msgpack header plus named numpy arrays, each aligned.

Layout of an encoded record (offsets relative to the payload start, which is
64-byte aligned in the file):

    u32 meta_length | meta (msgpack map) | zero pad to 64 | array 0 | pad | array 1 | ...

`meta["_arrays"]` lists [name, dtype, shape] for each array, in order; each
starts at the next 64-byte boundary after the one before. Arrays are
written from their own buffers (no concatenated copy of the payload is made),
so a bulk insert costs one copy of its data: the kernel's write. Decoding
returns numpy views over the given buffer, never copies.

Decoding trusts nothing: a payload whose hash checked may still come from a
buggy or hostile writer. `decode` raises CorruptFileError unless the meta
length fits the payload, the meta is a msgpack map with string
keys and no extension types, `_arrays` is a list of [name, dtype, shape] with
distinct string names, a dtype from DTYPES and a shape of non-negative ints,
and every array lies inside the payload. Sizes are computed with Python ints
(no overflow), and nothing is allocated before these checks pass: each array
is a view of at most the payload's bytes.
"""
from __future__ import annotations

import reprlib
import struct

import msgspec
import numpy as np

from ..errors import CorruptFileError
from .format import pad

MAX_DIMS = 8          # varvedb writes arrays of 1 or 2 dimensions (3 for HNSW upper links)
# the dtypes `encode` writes (all little-endian or byte-sized); anything else
# (objects, strings, structured, big-endian) is refused before numpy sees it
DTYPES = {d: np.dtype(d) for d in ("<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1",
                                   "<f8", "<f4", "<f2", "|b1")}


def _no_ext(code: int, data: memoryview):
    raise CorruptFileError(f"record meta holds a msgpack extension type ({code})")


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ext_hook=_no_ext)


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
    """Decode a record: (meta without '_arrays', {name: read-only view}, offsets).

    Raises CorruptFileError when the payload is not a well-formed record."""
    size = len(buf)
    if size < 4:
        raise CorruptFileError(f"record of {size} bytes has no meta length")
    (mlen,) = struct.unpack_from("<I", buf, 0)
    # The meta's only bound is the payload: an insert's text and json values
    # and a checkpoint's dictionaries live there, so a legitimate one can be
    # hundreds of MiB (the writer does not split a bulk insert). Decoding costs
    # memory proportional to it, never more than a constant times the file.
    if mlen > size - 4:
        raise CorruptFileError(f"record meta length {mlen} exceeds the payload ({size} bytes)")
    try:
        meta = _decoder.decode(buf[4:4 + mlen])
    except (msgspec.DecodeError, RecursionError) as e:
        # RecursionError: a deeply nested meta (varvedb's are a few levels deep)
        raise CorruptFileError(f"record meta does not decode: {e}") from None
    if not isinstance(meta, dict) or not all(isinstance(k, str) for k in meta):
        raise CorruptFileError("record meta is not a map of string keys")
    specs = meta.pop("_arrays", None)
    if not isinstance(specs, list):
        raise CorruptFileError("record meta has no '_arrays' list")
    arrays, offsets = {}, {}
    pos = pad(4 + mlen)
    for spec in specs:
        name, dt, shape = _array_spec(spec)
        if name in arrays:
            raise CorruptFileError(f"record lists array {name!r} twice")
        count = 1
        for d in shape:
            count *= d
        nbytes = count * dt.itemsize   # Python ints: no overflow
        if pos + nbytes > size:
            raise CorruptFileError(f"array {name!r} of shape {tuple(shape)} ({nbytes} bytes at "
                                   f"{pos}) lies past the end of the {size}-byte record")
        arrays[name] = np.frombuffer(buf, dtype=dt, count=count, offset=pos).reshape(shape)
        offsets[name] = pos
        pos = pad(pos + nbytes)
    return meta, arrays, offsets


def _array_spec(spec) -> tuple[str, np.dtype, list[int]]:
    """(name, dtype, shape) of one `_arrays` entry, or CorruptFileError."""
    if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], str)
            and isinstance(spec[1], str) and isinstance(spec[2], list)):
        raise CorruptFileError(f"malformed array entry {_show(spec)} in a record")
    name, dtype, shape = spec
    dt = DTYPES.get(dtype)
    if dt is None:
        raise CorruptFileError(f"array {name!r} has dtype {dtype!r}, not one varvedb writes")
    if len(shape) > MAX_DIMS or not all(type(d) is int and d >= 0 for d in shape):
        raise CorruptFileError(f"array {name!r} has shape {_show(shape)}")
    return name, dt, shape


def _show(x) -> str:
    return _REPR.repr(x)   # bounded depth and length: x comes from a file


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40
