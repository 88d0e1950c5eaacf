"""How many bytes an Arrow IPC body becomes once decoded, found before decoding it.

The body cap (--max-body-mb) bounds the bytes sent, but an IPC stream's buffers
may be compressed (zstd, lz4: 13 kB of zeros decoded to 400 MB) and a dictionary
column expands at dictionary_decode (a 0.9 MB string referenced by 300 rows:
270 MB). So routes._arrow_columns first sums what each batch's buffers hold
decoded, from the messages' metadata (read without decompressing anything),
and what each dictionary column adds once decoded, and refuses a body past the
cap (RequestTooLargeError, 413) before either is built.

The metadata is a flatbuffer (Arrow's format/Message.fbs); read here are only
Message.header_type and header, DictionaryBatch.data, and RecordBatch.buffers
and compression: a compressed buffer begins with its decoded length (int64, -1
where it was left uncompressed).
"""
from __future__ import annotations

import struct

from .. import errors as E

_RECORD_BATCH, _DICTIONARY_BATCH = 3, 2      # Message.header_type's values


def stream_bytes(raw: bytes, limit: int) -> int:
    """The bytes the record and dictionary batches of the IPC stream `raw` hold
    once decoded; RequestTooLargeError past `limit`, RequestError where its
    framing or metadata is malformed. The framing is read here too, not by
    pyarrow's MessageReader, which does not verify a message's flatbuffer (a
    crafted one crashed the process)."""
    view, at, total = memoryview(raw), 0, 0
    try:
        while at < len(view):
            length = struct.unpack_from("<i", view, at)[0]
            at += 4
            if length == -1:          # the continuation marker, then the length
                length = struct.unpack_from("<i", view, at)[0]
                at += 4
            if length == 0:           # the end of the stream
                break
            if length < 0:
                raise ValueError("a negative metadata length")
            meta = view[at:at + length]
            at += length
            body_length = _body_length(meta)
            body, at = view[at:at + body_length], at + body_length
            total += _batch_bytes(meta, body)
            check(total, limit)
    except (struct.error, ValueError, IndexError) as e:
        raise E.RequestError(f"the body is not an Arrow IPC stream: {e}") from None
    return total


def dictionary_growth(arr) -> int:
    """The bytes a dictionary-encoded column `arr` adds at dictionary_decode: its
    values once repeated for each row, less the indices they replace (scalar
    values only: routes._arrow_taken takes no dictionary of nested values)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    typ = arr.type.value_type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        lengths = pc.binary_length(arr.dictionary).cast(pa.int64())
        data = pc.sum(pc.take(lengths, arr.indices)).as_py() or 0
        per_row = 8 if pa.types.is_large_string(typ) else 4      # its offsets
    else:
        data, per_row = 0, max(typ.bit_width, 8) // 8
    return max(0, data + len(arr) * per_row - arr.indices.nbytes)


def check(total: int, limit: int) -> None:
    """RequestTooLargeError where `total` decoded bytes are past `limit`."""
    if total > limit:
        raise E.RequestTooLargeError(
            f"the Arrow body decodes to over {limit:,} bytes, this server's body cap "
            "(its buffers are compressed or dictionary-encoded): send it in parts")


def _body_length(meta) -> int:
    """Message.bodyLength: the bytes of body after the metadata."""
    at = _field(meta, _table(meta, _at(meta, 0)), 3)
    length = 0 if at is None else struct.unpack_from("<q", meta, at)[0]
    if length < 0:
        raise ValueError("a negative body length")
    return length


def _batch_bytes(meta, body) -> int:
    message = _table(meta, _at(meta, 0))
    kind, header = _field(meta, message, 1), _field(meta, message, 2)
    if kind is None or header is None or meta[kind] not in (_RECORD_BATCH,
                                                            _DICTIONARY_BATCH):
        return 0
    batch = _table(meta, _at(meta, header))
    if meta[kind] == _DICTIONARY_BATCH:       # its data is a RecordBatch
        data = _field(meta, batch, 1)
        if data is None:
            return 0
        batch = _table(meta, _at(meta, data))
    buffers = _field(meta, batch, 2)
    if buffers is None:
        return 0
    compressed = _field(meta, batch, 3) is not None
    vector = _at(meta, buffers)
    total = 0
    for k in range(_u32(meta, vector)):
        offset, length = struct.unpack_from("<qq", meta, vector + 4 + 16 * k)
        if offset < 0 or length < 0:
            raise ValueError("a buffer of negative offset or length")
        if compressed and length >= 8:
            decoded = struct.unpack_from("<q", body, offset)[0]
            total += length if decoded == -1 else decoded
        else:
            total += length
    return total


def _u32(buf, at: int) -> int:
    if at < 0:      # struct reads a negative offset from the end
        raise ValueError("an offset outside the metadata")
    return struct.unpack_from("<I", buf, at)[0]


def _at(buf, at: int) -> int:
    """Where the offset (uoffset_t) stored at `at` points."""
    return at + _u32(buf, at)


def _table(buf, at: int) -> tuple[int, int, int]:
    """(position, its vtable's position, the vtable's size) of the table at `at`."""
    vtable = at - struct.unpack_from("<i", buf, at)[0]
    if vtable < 0:
        raise ValueError("a vtable outside the metadata")
    return at, vtable, struct.unpack_from("<H", buf, vtable)[0]


def _field(buf, table: tuple[int, int, int], i: int) -> int | None:
    """Where field `i` of `table` is, or None where it is absent."""
    at, vtable, size = table
    if 4 + 2 * i + 2 > size:
        return None
    offset = struct.unpack_from("<H", buf, vtable + 4 + 2 * i)[0]
    return None if offset == 0 else at + offset
