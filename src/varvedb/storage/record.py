"""The payload codec: a msgpack header plus named numpy arrays, each aligned.

Layout of an encoded record (offsets relative to the payload start, which is
64-byte aligned in the file):

    u32 meta_length | meta (msgpack map) | zero pad to 64 | array 0 | pad | array 1 | ...

`meta["_arrays"]` lists [name, dtype, shape] for each array, in order; each
starts at the next 64-byte boundary after the one before. Arrays are
written from their own buffers (no concatenated copy of the payload is made),
so a bulk insert costs one copy of its data: the kernel's write. Decoding
returns numpy views over the given buffer, never copies.

Compressed records (`encode(..., packed=...)`: a vacuum's base, checkpoints):
the meta, and the arrays `packed` names, may be stored as zstd frames where
that pays (a tenth smaller or more). Bit 31 of the meta length then says the
meta is compressed, and a compressed array's entry is [name, dtype, shape,
stored bytes]. Decoding returns those as new read-only arrays (no offset: they
are not views of the file); vectors are never packed, so they stay mappable.
A compressed part is a zstd frame that declares its content size, followed by
zero padding up to its stored length. The parts of an S-byte payload must not
declare more than MAX_RATIO * S bytes in all, checked before each is
decompressed, so a crafted frame costs memory in proportion to its own size
(zstd's format alone reaches ~32 768 times: an 8 KiB frame of 256 MiB of
msgpack nils made a 2 GiB list). Where zstd does better than MAX_RATIO (a run
of one value), the writer pads the part to 1/MAX_RATIO of its size, so each
part keeps the bound (a file written before, up to 32 768 times per part,
still reads where its record as a whole keeps it: its ids and vectors count).

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
import zstandard

from ..errors import CorruptFileError, OptionError
from .format import ALIGN, pad

# a record's compressed parts decode to at most this many times its bytes: what a
# frame may cost in memory per byte (a msgpack meta's objects take up to ~72 bytes
# per byte decoded on top)
MAX_RATIO = 64
ZSTD_LEVEL = 3
PACKED_META = 1 << 31
SMALL_RECORD = 64 << 10   # bytes: a record this small is encoded into one buffer
MAX_DIMS = 8          # varvedb writes arrays of 1 or 2 dimensions (3: format-3 HNSW upper links)
# the dtypes `encode` writes (all little-endian or byte-sized); anything else
# (objects, strings, structured, big-endian) is refused before numpy sees it
DTYPES = {d: np.dtype(d) for d in ("<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1",
                                   "<f8", "<f4", "<f2", "|b1")}


def _no_ext(code: int, data: memoryview):
    raise CorruptFileError(f"record meta holds a msgpack extension type ({code})")


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ext_hook=_no_ext)


def encode(meta: dict, arrays: dict[str, np.ndarray] | None = None, packed=None
           ) -> tuple[list, int, dict[str, int]]:
    """Encode to (parts, length, offsets): bytes-like parts, their total length,
    and where each raw array starts relative to the record. `packed`: None, or
    a predicate on array names: the meta and those arrays are compressed where
    it pays (no offset is given for a compressed array)."""
    head = None
    if packed is None:
        small, head = _encode_small(meta, arrays or {})
        if small is not None:
            return small
    contig, stored = {}, {}
    for name, a in (arrays or {}).items():
        a = np.ascontiguousarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        contig[name] = a
        if packed is not None and packed(name) and a.nbytes >= 256:
            z = _pack(memoryview(a.reshape(-1)).cast("B"))
            if z is not None:
                stored[name] = z
    specs = [[n, _dtype_str(a.dtype), list(a.shape)] + ([len(stored[n])] if n in stored else [])
             for n, a in contig.items()]
    if head is None:     # (unpacked, the small path's head is this one)
        head = _encoder.encode({**meta, "_arrays": specs})
    word = len(head)
    if word >= PACKED_META:    # bit 31 is the compression flag
        raise OptionError(f"one write's text and json come to {word:,} bytes encoded; at "
                          "most 2 GiB fit one frame: write them in smaller batches")
    if packed is not None and len(head) >= 256 and (z := _pack(head)) is not None:
        head, word = z, len(z) | PACKED_META
    pos = pad(4 + len(head))
    blocks = []              # (position, bytes) of each array
    offsets = {}
    for name, a in contig.items():
        data = stored.get(name)
        if data is None:
            offsets[name] = pos
            data = memoryview(a.reshape(-1)).cast("B") if a.nbytes else b""
        if len(data):
            blocks.append((pos, data))
        pos = pad(pos + len(data))
    if pos <= SMALL_RECORD:
        return [_one_buffer(word, head, blocks, pos)], pos, offsets
    parts: list = [(struct.pack("<I", word) + head).ljust(pad(4 + len(head)), b"\0")]
    at = len(parts[0])
    for start, data in blocks:
        if start > at:
            parts.append(bytes(start - at))
        parts.append(data)
        at = start + len(data)
    if pos > at:
        parts.append(bytes(pos - at))
    return parts, pos, offsets


def _encode_small(meta: dict, arrays: dict) -> tuple:
    """(encode's result, head) for a record of uncompressed arrays that fits
    SMALL_RECORD (a one-row insert), made with as few calls as the layout
    allows: the same bytes as the general path, as one bytes object. (None,
    head or None) where the general path must write it (large arrays, a byte
    order to convert); the meta's encoding, when made, is handed on to it."""
    specs, out, rel = [], [], {}
    at = 0                   # where the next array lies, after the head
    strs = _DTYPE_STRS
    for name, a in arrays.items():
        dt = a.dtype
        s = strs.get(dt)     # (a known dtype is one of little-endian order: cached below)
        if s is None:
            if dt.byteorder == ">":
                return None, None
            s = _dtype_str(dt)
        nb = a.nbytes
        if at + nb > SMALL_RECORD:
            return None, None
        # a 0-d array is written as one of shape (1,), as ascontiguousarray makes it
        # (a tuple: msgpack writes it as the list the general path gives)
        specs.append((name, s, a.shape or (1,)))
        rel[name] = at
        if nb:
            # each array starts aligned and is padded to the next alignment: its
            # place does not depend on the head's length, only its offset does
            out.append(a.tobytes())          # C order, as ascontiguousarray
            gap = -nb % ALIGN
            if gap:
                out.append(_ZEROS[:gap])
            at += nb + gap
    head = _encoder.encode({**meta, "_arrays": specs})
    word = len(head)
    pos = (4 + word + ALIGN - 1) & -ALIGN
    if pos + at > SMALL_RECORD:
        return None, head
    return ([b"".join((_U32.pack(word), head, _ZEROS[:pos - 4 - word], *out))], pos + at,
            {name: pos + r for name, r in rel.items()}), head


_ZEROS = bytes(ALIGN)
_U32 = struct.Struct("<I")


def _dtype_str(dt: np.dtype) -> str:
    # dtype.str builds its string anew at each call; a one-row insert names five
    s = _DTYPE_STRS.get(dt)
    if s is None:
        s = _DTYPE_STRS[dt] = dt.str
    return s


_DTYPE_STRS: dict = {}


def _one_buffer(word: int, head: bytes, blocks: list, length: int) -> bytes:
    """A small record as one bytes object (a one-row insert: one copy of its
    values, which the log writer then takes as it is)."""
    buf = bytearray(length)   # zeros: the padding
    struct.pack_into("<I", buf, 0, word)
    buf[4:4 + len(head)] = head
    for start, data in blocks:
        buf[start:start + len(data)] = data
    return bytes(buf)


def _pack(raw) -> bytes | None:
    """raw as a zstd frame zero-padded to 1/MAX_RATIO of raw's size, or None where
    that does not pay."""
    z = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True).compress(raw)
    n = len(raw)
    return z.ljust(-(-n // MAX_RATIO), b"\0") if len(z) * 10 <= n * 9 else None


def _unpack(data, expect: int | None, limit: int, what: str) -> bytes:
    """A zstd frame's bytes (zero padding may follow it in `data`), refused unless it
    declares its size, that size is at most `limit` and `expect` (when given), and
    it decodes to exactly that: nothing larger is allocated."""
    data = bytes(data)
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        size = -1
    if size < 0 or size > limit or (expect is not None and size != expect):
        raise CorruptFileError(f"compressed {what} of {len(data)} bytes says it holds "
                               + ("no size" if size < 0 else f"{size} bytes")
                               + (f", not {expect}" if expect is not None else
                                  f"; the record allows {limit} more"))
    try:
        out = zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    except zstandard.ZstdError as e:
        raise CorruptFileError(f"compressed {what} does not decode: {e}") from None
    if len(out) != size:
        raise CorruptFileError(f"compressed {what} decodes to {len(out)} bytes, not {size}")
    return out


def decode(buf) -> tuple[dict, dict[str, np.ndarray], dict[str, int]]:
    """Decode a record: (meta without '_arrays', {name: read-only view}, offsets).

    Raises CorruptFileError when the payload is not a well-formed record."""
    size = len(buf)
    if size < 4:
        raise CorruptFileError(f"record of {size} bytes has no meta length")
    (word,) = struct.unpack_from("<I", buf, 0)
    mlen = word & ~PACKED_META
    # The meta's only bound is the payload: an insert's text and json values
    # and a checkpoint's dictionaries live there, so a legitimate one can be
    # hundreds of MiB (the writer does not split a bulk insert). Decoding costs
    # memory proportional to it, never more than a constant times the file.
    if mlen > size - 4:
        raise CorruptFileError(f"record meta length {mlen} exceeds the payload ({size} bytes)")
    head = buf[4:4 + mlen]
    budget = MAX_RATIO * size     # what the compressed parts may decode to, in all
    if word & PACKED_META:
        head = _unpack(head, None, budget, "record meta")
        budget -= len(head)
    try:
        meta = _decoder.decode(head)
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
        name, dt, shape, zlen = _array_spec(spec)
        if name in arrays:
            raise CorruptFileError(f"record lists array {name!r} twice")
        count = 1
        for d in shape:
            count *= d
        nbytes = count * dt.itemsize   # Python ints: no overflow
        stored = nbytes if zlen is None else zlen
        if pos + stored > size:
            raise CorruptFileError(f"array {name!r} of shape {tuple(shape)} ({stored} bytes at "
                                   f"{pos}) lies past the end of the {size}-byte record")
        if zlen is None:
            arrays[name] = np.frombuffer(buf, dtype=dt, count=count, offset=pos).reshape(shape)
            offsets[name] = pos
        else:
            raw = _unpack(buf[pos:pos + zlen], nbytes, budget, f"array {name!r}")
            budget -= nbytes
            arrays[name] = np.frombuffer(raw, dtype=dt, count=count).reshape(shape)
        pos = pad(pos + stored)
    return meta, arrays, offsets


def _array_spec(spec) -> tuple[str, np.dtype, list[int], int | None]:
    """(name, dtype, shape, stored bytes if compressed) of one `_arrays` entry,
    or CorruptFileError."""
    if not (isinstance(spec, list) and len(spec) in (3, 4) and isinstance(spec[0], str)
            and isinstance(spec[1], str) and isinstance(spec[2], list)
            and (len(spec) == 3 or type(spec[3]) is int and spec[3] > 0)):
        raise CorruptFileError(f"malformed array entry {_show(spec)} in a record")
    name, dtype, shape = spec[:3]
    zlen = spec[3] if len(spec) == 4 else None
    dt = DTYPES.get(dtype)
    if dt is None:
        raise CorruptFileError(f"array {name!r} has dtype {dtype!r}, not one varvedb writes")
    if len(shape) > MAX_DIMS or not all(type(d) is int and d >= 0 for d in shape):
        raise CorruptFileError(f"array {name!r} has shape {_show(shape)}")
    return name, dt, shape, zlen


def _show(x) -> str:
    return _REPR.repr(x)   # bounded depth and length: x comes from a file


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 40, 40
