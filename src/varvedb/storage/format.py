"""The bytes on disk: header, superblock slots, frame headers, commit frames.

`docs/file-format.md` is the description this module follows; change both
together. Everything is little-endian. Invariants:

* the log starts at LOG_START and every frame starts at a multiple of ALIGN,
  so an array placed at an aligned offset inside a payload is aligned in the
  file too (numpy views over the mapped file need no copy);
* a frame header carries its own CRC, so a torn or overwritten header is told
  apart from a valid one without reading the payload;
* a frame's SHA-256 covers its kind, length and payload; a commit's digest is
  the SHA-256 of its frames' hashes, and its chain hash links it to the
  previous commit, so one changed byte anywhere breaks `verify()`: in the log,
  its frame's hash (or, re-hashed, the chain, which an anchor pins); in a
  checkpoint, its frame's hash, or, re-hashed, verify's replay. A checkpoint
  frame is outside the chain: it is a cache of the log's state, written after
  the commits it covers and named by a superblock nothing chains either. So
  `verify` replays the log to the version of each checkpoint a superblock names
  and compares the state it holds (rows, values, versions, history, branches:
  `engine/checkpoint.differs`) with the replay's. Chaining a checkpoint's digest
  into the log instead (a frame of the next commit) would leave the newest
  checkpoint, with no commit after it, unproved; replaying proves every one.
"""
from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass

MAGIC = b"VARVEDB\x00"
# 2: anchor commits and BASE frames (a vacuumed file); 3: branch commits and BRANCH
# frames; 4: SET_CHECK frames; 5: bytes fields and a field's further vector indexes
# (its spec's more_indexes, DROP_INDEX naming one); 6: check conditions that name their
# constraint ([op, value, name]); 7: check conditions that hold their place in a
# constraint over several fields ([op, value, name, position]); 8: check conditions
# that keep how they were written (schema.WRITTEN_OPS: `0 < price`,
# `vector_dims(e::vector) = 3`, a constant wider than 64 bits as its digits); 9: a
# schema's `key`, its primary key's name where that is not `{table}_pkey`. Older
# formats are read; a file is written in the newest.
FORMAT_VERSION = 9
ALIGN = 64
HEADER_SIZE = 64
SLOT_OFFSETS = (1024, 2048)
SLOT_SIZE = 128
LOG_START = 4096

# header: magic, format version, flags, file id, created (unix us), crc32
_HEADER = struct.Struct("<8sII16sq")
# frame header: magic, kind, flags, payload length, payload sha256, header crc32
FRAME_MAGIC = 0x4D524656  # "VFRM"
_FRAME = struct.Struct("<IHHQ32s")
FRAME_HEADER_SIZE = 64
# superblock slot: seq, checkpoint offset, checkpoint version, log end, chain
_SLOT = struct.Struct("<QQQQ32s")
# commit payload: version, timestamp us, frame count, rows changed, digest, prev chain, chain
# [, branch id (u32): only on a branch other than main, whose commits end here]
_COMMIT = struct.Struct("<QqIQ32s32s32s")
COMMIT_SIZE = _COMMIT.size
_BRANCH = struct.Struct("<I")
_CRC = struct.Struct("<I")
_FRAME_TAIL = struct.Struct(f"<I{FRAME_HEADER_SIZE - _FRAME.size - 4}x")   # crc, zeros
_HASHED_LENGTH = struct.Struct("<HQ")
_VERSION_TIME = struct.Struct("<Qq")


class Kind:
    """Frame kinds. A frame of an unknown kind makes the file unreadable."""
    COMMIT = 1
    CHECKPOINT = 2
    ANCHOR = 3          # a vacuumed file's first commit: its chain hash is taken as given
    CREATE_COLLECTION = 10
    DROP_COLLECTION = 11
    INSERT = 12
    DELETE = 13
    CREATE_INDEX = 14
    ADD_COLUMN = 15
    DROP_COLUMN = 16
    RENAME_COLUMN = 17
    CREATE_SCALAR_INDEX = 18
    DROP_INDEX = 19
    BASE = 20           # in an anchor commit: how the log numbers the rows it kept
    BRANCH = 21         # a branch created or dropped
    SET_CHECK = 22      # a field's CHECK conditions replaced (SQL's ALTER TABLE ADD CHECK)


def pad(n: int, align: int = ALIGN) -> int:
    return (n + align - 1) // align * align


def pack_header(file_id: bytes, created_us: int, version: int = FORMAT_VERSION) -> bytes:
    body = _HEADER.pack(MAGIC, version, 0, file_id, created_us)
    return (body + struct.pack("<I", zlib.crc32(body))).ljust(HEADER_SIZE, b"\0")


@dataclass
class Header:
    format_version: int
    file_id: bytes
    created_us: int


def unpack_header(buf: bytes) -> Header | None:
    """The header, or None when the magic is wrong. Raises ValueError on a bad crc."""
    if len(buf) < _HEADER.size + 4 or buf[:8] != MAGIC:
        return None
    body = buf[:_HEADER.size]
    (crc,) = struct.unpack_from("<I", buf, _HEADER.size)
    if zlib.crc32(body) != crc:
        raise ValueError("header checksum mismatch")
    _, fmt, _flags, file_id, created = _HEADER.unpack(body)
    return Header(fmt, file_id, created)


@dataclass
class Superblock:
    seq: int
    checkpoint_offset: int   # 0 = no checkpoint
    checkpoint_version: int
    log_end: int             # end of the log covered by the checkpoint
    chain: bytes             # chain hash at checkpoint_version


def pack_slot(sb: Superblock) -> bytes:
    body = _SLOT.pack(sb.seq, sb.checkpoint_offset, sb.checkpoint_version, sb.log_end, sb.chain)
    return (body + struct.pack("<I", zlib.crc32(body))).ljust(SLOT_SIZE, b"\0")


def unpack_slot(buf: bytes) -> Superblock | None:
    """The slot, or None when it is torn, empty or could not have been written."""
    body = buf[:_SLOT.size]
    (crc,) = struct.unpack_from("<I", buf, _SLOT.size)
    if zlib.crc32(body) != crc or body == bytes(len(body)):
        return None
    sb = Superblock(*_SLOT.unpack(body))
    # seq grows by one per checkpoint, so a huge one is crafted; the next
    # checkpoint's seq + 1 must still fit its u64. (What the slot points at
    # is checked by the checkpoint's loader.)
    return sb if sb.seq < 1 << 63 else None


def frame_hash(kind: int, length: int, parts) -> bytes:
    h = hashlib.sha256(_HASHED_LENGTH.pack(kind, length))
    for p in parts:
        h.update(p)
    return h.digest()


def pack_frame_header(kind: int, length: int, digest: bytes) -> bytes:
    body = _FRAME.pack(FRAME_MAGIC, kind, 0, length, digest)
    return body + _FRAME_TAIL.pack(zlib.crc32(body))


@dataclass
class FrameHeader:
    kind: int
    length: int
    digest: bytes


def unpack_frame_header(buf) -> FrameHeader | None:
    """The frame header at the start of buf, or None if it is not a valid one."""
    if len(buf) < FRAME_HEADER_SIZE:
        return None
    body = bytes(buf[:_FRAME.size])
    magic, kind, _flags, length, digest = _FRAME.unpack(body)
    if magic != FRAME_MAGIC:
        return None
    (crc,) = struct.unpack_from("<I", buf, _FRAME.size)
    if zlib.crc32(body) != crc or any(buf[_FRAME.size + 4:FRAME_HEADER_SIZE]):
        return None  # the reserved tail must be zero: every header byte is checked
    return FrameHeader(kind, length, digest)


@dataclass
class CommitRecord:
    version: int
    timestamp_us: int
    n_frames: int
    rows_changed: int
    digest: bytes
    prev_chain: bytes
    chain: bytes
    branch: int = 0          # the branch the commit was made on; 0 is main


def chain_hash(prev_chain: bytes, digest: bytes, version: int, timestamp_us: int,
               branch: int = 0) -> bytes:
    # a main commit hashes as in format 1, so older files keep their chain hashes
    tail = _BRANCH.pack(branch) if branch else b""
    return hashlib.sha256(b"".join((prev_chain, digest,
                                    _VERSION_TIME.pack(version, timestamp_us), tail))).digest()


def pack_commit(c: CommitRecord) -> bytes:
    body = _COMMIT.pack(c.version, c.timestamp_us, c.n_frames, c.rows_changed,
                        c.digest, c.prev_chain, c.chain)
    return body + _BRANCH.pack(c.branch) if c.branch else body


def unpack_commit(buf) -> CommitRecord:
    rec = CommitRecord(*_COMMIT.unpack(bytes(buf[:_COMMIT.size])))
    if len(buf) >= COMMIT_SIZE + _BRANCH.size:
        (rec.branch,) = _BRANCH.unpack(bytes(buf[COMMIT_SIZE:COMMIT_SIZE + _BRANCH.size]))
    return rec


def genesis_chain(file_id: bytes) -> bytes:
    """The chain hash 'before' version 1, seeded from the file id."""
    return hashlib.sha256(b"varvedb genesis" + file_id).digest()


def code_width(dim: int) -> int:
    """Bytes per row of an HNSW graph's int8 codes (`<cid>.vx.<f>.g.codes`): dim
    rounded up to whole 64-byte cache lines (a short row is one line, and the
    walk's vectorised loop has no remainder)."""
    return -(-int(dim) // 64) * 64
