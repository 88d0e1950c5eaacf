"""The append-only log: create/open, the write lock, appending, commit, fsync, recovery.

One `LogFile` per open database file. Writers append frames at `end`; a
transaction's frames are buffered and written as they pass FLUSH_BYTES, so
a bulk load never holds a second copy of its data. `commit` writes the commit
frame; `sync_to` makes it durable. Group commit: `sync_to` lets one thread's
fdatasync cover every commit written before it began, so threads committing
together share one fsync.

Appends that grow the file make fdatasync also journal the new size; small
commits therefore land in a zero-filled region kept ahead of `end`
(PREFILL_BYTES), so their fdatasync flushes data only. The walker reads a
zero header as the end of the log.

Recovery (`scan`) walks frames by their headers and checks every commit's
digest and chain hash. Where the walk stops with no valid commit frame beyond,
the tail was torn and is cut on the next write; a stop with valid commits
beyond means history is damaged and open refuses the file.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import mmap
import os
import threading
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from ..errors import (CorruptFileError, FileMissingError, FormatVersionError, NotAVarveFileError,
                      WriterLockedError)
from . import format as F

FLUSH_BYTES = 16 << 20
BIG_FRAME = 1 << 20
PREFILL_BYTES = 1 << 20
_MAX_IOV = 512


@dataclass
class FrameRef:
    kind: int
    offset: int       # start of the frame header
    length: int       # payload bytes
    digest: bytes
    payload_ok: bool = True

    @property
    def payload_offset(self) -> int:
        return self.offset + F.FRAME_HEADER_SIZE


@dataclass
class LoggedCommit:
    record: F.CommitRecord
    frames: list[FrameRef]
    offset: int       # start of the commit frame
    end: int          # first byte after it


@dataclass
class ScanResult:
    commits: list[LoggedCommit]
    end: int                       # end of the last whole commit
    stop_offset: int               # where the walk stopped
    stop_reason: str               # "end", "torn", or a description of damage
    damaged: bool = False          # valid commits exist beyond the stop
    checkpoints: list[FrameRef] = field(default_factory=list)   # checkpoint frames passed


@dataclass
class _PendingFrame:
    kind: int
    parts: list
    length: int
    digest: bytes


class LogFile:
    """One open database file: header, superblock slots and the frame log."""

    def __init__(self, path: str, readonly: bool = False, durability: str = "commit",
                 batch_ms: float = 50.0):
        self.path = path
        self.readonly = readonly
        self.durability = durability
        self.batch_ms = batch_ms
        self._write_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._pending: list[_PendingFrame] = []
        self._pending_bytes = 0
        self._tx_frames: list[bytes] = []     # digests of this transaction's frames
        self._tx_start = 0
        self._timer: threading.Timer | None = None
        self._last_sync = time.monotonic()
        self._open_file()

    # ---- opening -----------------------------------------------------------

    def _open_file(self) -> None:
        flags = os.O_RDONLY if self.readonly else os.O_RDWR | os.O_CREAT
        try:
            self.fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        except FileNotFoundError:
            raise FileMissingError(f"{self.path} does not exist; a read-only connection "
                                   "opens an existing file") from None
        try:
            if not self.readonly:
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise WriterLockedError(
                            f"{self.path} is open for writing by another connection; "
                            "open it with readonly=True to read it") from None
                    raise
            size = os.fstat(self.fd).st_size
            if size == 0 and not self.readonly:
                self._create()
                size = os.fstat(self.fd).st_size
            head = os.pread(self.fd, F.HEADER_SIZE, 0)
            try:
                header = F.unpack_header(head)
            except ValueError:
                raise NotAVarveFileError(f"{self.path}: the header is damaged") from None
            if header is None:
                raise NotAVarveFileError(f"{self.path} is not a varvedb file")
            if header.format_version > F.FORMAT_VERSION:
                raise FormatVersionError(
                    f"{self.path} has format version {header.format_version}; this varvedb "
                    f"reads up to {F.FORMAT_VERSION}: upgrade varvedb")
            if size < F.LOG_START:
                raise CorruptFileError(f"{self.path} is shorter than its header block")
            self.file_id = header.file_id
            self.created_us = header.created_us
            self.superblock = self._read_superblock()
        except BaseException:
            os.close(self.fd)
            raise
        self.end = F.LOG_START
        self.allocated = os.fstat(self.fd).st_size
        self.synced_end = self.end
        self.version = 0
        self.chain = F.genesis_chain(self.file_id)

    def _create(self) -> None:
        now = time.time_ns() // 1000
        block = bytearray(F.LOG_START)
        block[:F.HEADER_SIZE] = F.pack_header(uuid.uuid4().bytes, now)
        os.pwrite(self.fd, bytes(block), 0)
        os.fsync(self.fd)
        _fsync_dir(self.path)

    def _read_superblock(self) -> F.Superblock | None:
        best = None
        for off in F.SLOT_OFFSETS:
            sb = F.unpack_slot(os.pread(self.fd, F.SLOT_SIZE, off))
            if sb and (best is None or sb.seq > best.seq):
                best = sb
        return best

    def map(self) -> mmap.mmap | None:
        """A read-only map of the whole file as it is now (None if empty).

        MAP_POPULATE maps every page up front: one call instead of a page
        fault per 4 KiB on first touch, which costs more than the read itself."""
        size = os.fstat(self.fd).st_size
        if not size:
            return None
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(self.fd, size, flags=flags, prot=mmap.PROT_READ)

    # ---- walking -----------------------------------------------------------

    def scan(self, buf, start: int, version: int, chain: bytes,
             check_payload: bool = True) -> ScanResult:
        """Walk the log in buf from start, after the commit (version, chain)."""
        commits: list[LoggedCommit] = []
        pending: list[FrameRef] = []
        checkpoints: list[FrameRef] = []
        pos = last_end = start
        size = len(buf)
        reason = "end"
        while True:
            hdr = F.unpack_frame_header(buf[pos:pos + F.FRAME_HEADER_SIZE])
            if hdr is None:
                reason = "end" if _is_zero(buf, pos, size) else "bad frame header"
                break
            body = pos + F.FRAME_HEADER_SIZE
            if body + hdr.length > size:
                reason = "truncated frame"
                break
            ref = FrameRef(hdr.kind, pos, hdr.length, hdr.digest)
            if hdr.kind == F.Kind.COMMIT:
                rec, ok = self._check_commit(buf, ref, pending, version, chain)
                if not ok:
                    reason = "bad commit frame"
                    break
                version, chain = rec.version, rec.chain
                last_end = F.pad(body + hdr.length)
                commits.append(LoggedCommit(rec, pending, pos, last_end))
                pending = []
            else:
                if check_payload or hdr.kind == F.Kind.CHECKPOINT:
                    got = F.frame_hash(hdr.kind, hdr.length, [buf[body:body + hdr.length]])
                    # the padding after the payload is not hashed, so check it is zero
                    ref.payload_ok = got == hdr.digest and not any(
                        buf[body + hdr.length:min(size, F.pad(body + hdr.length))])
                if hdr.kind == F.Kind.CHECKPOINT:
                    checkpoints.append(ref)
                else:
                    pending.append(ref)
            pos = F.pad(body + hdr.length)
            if pos >= size:
                reason = "end"
                break
        if pending and reason == "end":
            reason = "torn"  # frames of a transaction that never committed
        # A commit beyond the stop that is not the next version cannot be a
        # torn last transaction: history itself is damaged. So is a committed
        # frame whose payload no longer matches its hash, unless it belongs to
        # the last commit (a write the crash tore before it was acknowledged).
        damaged = self._commit_beyond(buf, pos, version + 2) or any(
            not f.payload_ok for c in commits[:-1] for f in c.frames)
        return ScanResult(commits, last_end, pos, reason, damaged, checkpoints)

    def _check_commit(self, buf, ref: FrameRef, pending, version, chain):
        body = buf[ref.payload_offset:ref.payload_offset + ref.length]
        if F.frame_hash(ref.kind, ref.length, [body]) != ref.digest:
            return None, False
        rec = F.unpack_commit(body)
        digest = hashlib.sha256(b"".join(f.digest for f in pending)).digest()
        ok = (rec.version == version + 1 and rec.prev_chain == chain
              and rec.n_frames == len(pending) and rec.digest == digest
              and rec.chain == F.chain_hash(chain, digest, rec.version, rec.timestamp_us))
        return rec, ok

    def _commit_beyond(self, buf, pos: int, min_version: int) -> bool:
        """Is there a well-formed commit of min_version or later anywhere after pos?"""
        start = F.pad(pos + 1)
        n = (len(buf) - start) // F.ALIGN
        if n <= 0:
            return False
        words = np.frombuffer(buf, dtype="<u4", count=n * 16, offset=start)[::16]
        for i in np.flatnonzero(words == F.FRAME_MAGIC):
            off = start + int(i) * F.ALIGN
            hdr = F.unpack_frame_header(buf[off:off + F.FRAME_HEADER_SIZE])
            body = off + F.FRAME_HEADER_SIZE
            if (hdr is not None and hdr.kind == F.Kind.COMMIT
                    and body + hdr.length <= len(buf)
                    and F.unpack_commit(buf[body:body + hdr.length]).version >= min_version):
                return True
        return False

    def adopt(self, end: int, version: int, chain: bytes) -> None:
        """Take (end, version, chain) from a scan as the current state of the log."""
        self.end = self.synced_end = self._tx_start = end
        self.version = version
        self.chain = chain

    def cut_tail(self) -> None:
        """Drop whatever follows the last whole commit (a torn transaction)."""
        size = os.fstat(self.fd).st_size
        if size > self.end:
            os.ftruncate(self.fd, self.end)
            os.fsync(self.fd)
        self.allocated = self.end

    # ---- writing -----------------------------------------------------------

    def append(self, kind: int, parts: list, length: int) -> int:
        """Add a frame to the open transaction (written once FLUSH_BYTES pile up).

        Returns the file offset its payload will have."""
        offset = self.end + sum(F.FRAME_HEADER_SIZE + F.pad(f.length) for f in self._pending)
        digest = F.frame_hash(kind, length, parts)
        # parts may be the caller's arrays: a small frame is copied now, a large
        # one written now, so nothing the caller changes later reaches the file.
        if length < BIG_FRAME:
            parts = [b"".join(parts)]
        self._pending.append(_PendingFrame(kind, parts, length, digest))
        self._tx_frames.append(digest)
        self._pending_bytes += length
        if self._pending_bytes >= FLUSH_BYTES or length >= BIG_FRAME:
            self._flush()
        return offset + F.FRAME_HEADER_SIZE

    def _flush(self) -> None:
        bufs: list = []
        for fr in self._pending:
            bufs.append(F.pack_frame_header(fr.kind, fr.length, fr.digest))
            bufs.extend(fr.parts)
            gap = F.pad(fr.length) - fr.length
            if gap:
                bufs.append(bytes(gap))
        self._pending = []
        self._pending_bytes = 0
        self._write(bufs)

    def _write(self, bufs: list) -> None:
        for i in range(0, len(bufs), _MAX_IOV):
            chunk = bufs[i:i + _MAX_IOV]
            want = sum(len(b) if isinstance(b, bytes) else b.nbytes for b in chunk)
            done = os.pwritev(self.fd, chunk, self.end)
            if done != want:  # short write: finish it byte by byte
                rest = b"".join(bytes(b) for b in chunk)[done:]
                while rest:
                    k = os.pwrite(self.fd, rest, self.end + done)
                    done += k
                    rest = rest[k:]
            self.end += want

    def commit(self, rows_changed: int, timestamp_us: int | None = None) -> F.CommitRecord:
        """Write the open transaction's frames and its commit frame (not yet synced)."""
        ts = time.time_ns() // 1000 if timestamp_us is None else timestamp_us
        digest = hashlib.sha256(b"".join(self._tx_frames)).digest()
        version = self.version + 1
        rec = F.CommitRecord(version, ts, len(self._tx_frames), rows_changed, digest,
                             self.chain, F.chain_hash(self.chain, digest, version, ts))
        payload = F.pack_commit(rec)
        self._pending.append(_PendingFrame(F.Kind.COMMIT, [payload], len(payload),
                                           F.frame_hash(F.Kind.COMMIT, len(payload), [payload])))
        self._flush()
        self.version, self.chain = version, rec.chain
        self._tx_frames = []
        self._tx_start = self.end
        self._prefill()
        return rec

    def rollback(self) -> None:
        """Forget the open transaction; cut any of its frames already written."""
        self._pending = []
        self._pending_bytes = 0
        self._tx_frames = []
        if self.end != self._tx_start:
            # Truncate rather than mark: stale frame headers left beyond a
            # later, shorter commit would be read as part of it.
            os.ftruncate(self.fd, self._tx_start)
            self.end = self.allocated = self._tx_start

    def write_checkpoint(self, parts: list, length: int, version: int) -> int:
        """Append a checkpoint frame, sync it, and point a superblock at it."""
        assert not self._pending and not self._tx_frames
        offset = self.end
        digest = F.frame_hash(F.Kind.CHECKPOINT, length, parts)
        self._pending.append(_PendingFrame(F.Kind.CHECKPOINT, parts, length, digest))
        self._flush()
        self._tx_start = self.end
        os.fdatasync(self.fd)
        seq = (self.superblock.seq + 1) if self.superblock else 1
        sb = F.Superblock(seq, offset, version, self.end, self.chain)
        os.pwrite(self.fd, F.pack_slot(sb), F.SLOT_OFFSETS[seq % 2])
        os.fdatasync(self.fd)
        self.superblock = sb
        self.synced_end = self.end
        self._prefill()
        return offset

    def _prefill(self) -> None:
        # Keep a zeroed region ahead of `end` so small commits overwrite
        # allocated blocks and their fdatasync does not journal a new size.
        if self.allocated - self.end >= PREFILL_BYTES // 4:
            return
        new = F.pad(self.end + PREFILL_BYTES, PREFILL_BYTES)
        if new > self.allocated:
            start = max(self.allocated, self.end)
            os.pwrite(self.fd, bytes(new - start), start)
            self.allocated = new

    # ---- durability --------------------------------------------------------

    def sync_to(self, offset: int) -> None:
        """Return once every byte before offset is durable (per the durability mode)."""
        if self.durability == "off":
            return
        if self.durability == "batch":
            if time.monotonic() - self._last_sync < self.batch_ms / 1000:
                self._schedule_sync()
                return
        with self._sync_lock:
            if self.synced_end >= offset:
                return  # another thread's fsync covered this commit
            target = self.end
            os.fdatasync(self.fd)
            self.synced_end = max(self.synced_end, target)
            self._last_sync = time.monotonic()

    def _schedule_sync(self) -> None:
        if self._timer is not None and self._timer.is_alive():
            return
        self._timer = threading.Timer(self.batch_ms / 1000, self._timed_sync)
        self._timer.daemon = True
        self._timer.start()

    def _timed_sync(self) -> None:
        with self._sync_lock:
            if self.fd < 0:
                return
            target = self.end
            os.fdatasync(self.fd)
            self.synced_end = max(self.synced_end, target)
            self._last_sync = time.monotonic()

    def close(self) -> None:
        if self.fd < 0:
            return
        if self._timer is not None:
            self._timer.cancel()
        with self._sync_lock:
            if not self.readonly and self.durability != "off":
                os.fdatasync(self.fd)
            os.close(self.fd)
            self.fd = -1


def _is_zero(buf, pos: int, size: int) -> bool:
    chunk = buf[pos:min(size, pos + F.FRAME_HEADER_SIZE)]
    return not any(chunk)


def _fsync_dir(path: str) -> None:
    d = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(d)
    finally:
        os.close(d)
