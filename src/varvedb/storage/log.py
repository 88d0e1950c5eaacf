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

Every change to the file goes through a `FileIO` (storage/fileio.py). The one
rule of the writer: a write or sync that fails puts the file back at the last
commit that can still be acknowledged — the last commit written, when a write
fails; the last one synced, when a sync fails — by zeroing everything after
it, resets `end`, the pending frames and the synced offset, and raises
`StorageError`; the connection writes again once the cause is gone. The file
never shrinks: a rollback zeroes its dead tail instead of truncating it, so a
reader that mapped the file never touches a page past its end. A sync failure
bumps `generation`; a commit written before it is never acknowledged after it.

Positions, always `synced_end <= commit_end <= end`:
* `commit_end` — the end of the last commit frame (or checkpoint) written;
* `synced_end` — the end of the last commit known durable;
* `dirty_end` — nothing at or past it has been written since it was zeroed.

Recovery (`scan`) walks frames by their headers and checks every commit's
digest and chain hash. Where the walk stops with no valid commit frame beyond,
the tail was torn and is zeroed on the next write; a stop with valid commits
beyond means history is damaged and open refuses the file. A checkpoint frame
a superblock points at is stepped over even when its header is damaged: a
damaged checkpoint costs only the shortcut.
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
                      StorageError, TransactionAbortedError, WriterLockedError)
from . import fileio
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
        self._lock = threading.Lock()         # the file's positions and pending frames
        self._sync_lock = threading.Lock()
        self._pending: list[_PendingFrame] = []
        self._pending_bytes = 0
        self._tx_frames: list[bytes] = []     # digests of this transaction's frames
        self._tx_generation = 0
        self._timer: threading.Timer | None = None
        self._last_sync = time.monotonic()
        self.generation = 0                   # bumped by each failed sync
        self.failure: StorageError | None = None  # a background sync's, until taken
        self.broken: StorageError | None = None   # set when even undoing a failure failed
        self._open_file()

    # ---- opening -----------------------------------------------------------

    def _open_file(self) -> None:
        flags = os.O_RDONLY if self.readonly else os.O_RDWR | os.O_CREAT
        try:
            fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        except FileNotFoundError:
            raise FileMissingError(f"{self.path} does not exist; a read-only connection "
                                   "opens an existing file") from None
        self.fd = fd
        self.io = fileio.open_file(fd, self.path)
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
            self.superblocks = self._read_superblocks()
        except BaseException:
            self.io.close()
            raise
        self.allocated = size
        self.adopt(F.LOG_START, 0, F.genesis_chain(self.file_id))

    def writer_active(self) -> bool:
        """Does a writer hold this file's write lock right now? (Asks without waiting.)"""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True
            raise
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        return False

    @property
    def superblock(self) -> F.Superblock | None:
        """The newest valid superblock (None before the first checkpoint)."""
        return self.superblocks[0] if self.superblocks else None

    def _create(self) -> None:
        now = time.time_ns() // 1000
        block = bytearray(F.LOG_START)
        block[:F.HEADER_SIZE] = F.pack_header(uuid.uuid4().bytes, now)
        try:
            self._write_all([bytes(block)], 0)
            self.io.fsync()
            _fsync_dir(self.path)
        except OSError as e:
            raise StorageError(f"{self.path}: could not create the file: {e}", e) from e

    def _read_superblocks(self) -> list[F.Superblock]:
        """Valid superblocks, newest first (the raw slots are kept for verify)."""
        self.raw_slots = {off: os.pread(self.fd, F.SLOT_SIZE, off) for off in F.SLOT_OFFSETS}
        slots = [F.unpack_slot(raw) for raw in self.raw_slots.values()]
        return sorted((sb for sb in slots if sb), key=lambda sb: -sb.seq)

    def map(self) -> mmap.mmap | None:
        """A read-only map of the file's data as it is now (None if empty).

        The file never shrinks, and a dead tail is a punched hole; nothing past
        the first hole was written since, so the map stops there (a hole reads
        as zeros: the end of the log) instead of populating gigabytes of it.
        MAP_POPULATE maps every page up front: one call instead of a page
        fault per 4 KiB on first touch, which costs more than the read itself."""
        size = os.fstat(self.fd).st_size
        if not size:
            return None
        try:
            size = min(size, max(os.lseek(self.fd, 0, os.SEEK_HOLE), F.LOG_START))
        except (OSError, AttributeError):   # no SEEK_HOLE here: map it all
            pass
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(self.fd, size, flags=flags, prot=mmap.PROT_READ)

    # ---- walking -----------------------------------------------------------

    def scan(self, buf, start: int, version: int, chain: bytes,
             check_payload: bool = True) -> ScanResult:
        """Walk the log in buf from start, after the commit (version, chain)."""
        commits: list[LoggedCommit] = []
        pending: list[FrameRef] = []
        checkpoints: list[FrameRef] = []
        # checkpoints the superblocks vouch for: stepped over even if their header is damaged
        known = {sb.checkpoint_offset: sb.log_end for sb in self.superblocks
                 if sb.checkpoint_offset >= start and sb.log_end > sb.checkpoint_offset}
        pos = last_end = start
        size = len(buf)
        reason = "end"
        while True:
            hdr = F.unpack_frame_header(buf[pos:pos + F.FRAME_HEADER_SIZE])
            if hdr is None:
                if pos in known and known[pos] <= size:
                    checkpoints.append(FrameRef(F.Kind.CHECKPOINT, pos,
                                                known[pos] - pos - F.FRAME_HEADER_SIZE,
                                                b"", payload_ok=False))
                    pos = known[pos]
                    if pos >= size:
                        break
                    continue
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
                    if not pending and ref.payload_ok:   # whole: the log goes on after it
                        last_end = F.pad(body + hdr.length)
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
        damaged = self.commit_beyond(buf, pos, version + 2) or any(
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

    def commit_beyond(self, buf, pos: int, min_version: int) -> bool:
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

    def adopt(self, end: int, version: int, chain: bytes, commit_at: int | None = None
              ) -> None:
        """Take (end, version, chain) from a scan as the current state of the log:
        everything up to `end` is whole. `commit_at` is the offset of that commit's
        frame (None: the state is a checkpoint's, which is durable)."""
        self.commit_at = commit_at
        with self._lock:
            self.end = self.commit_end = self.synced_end = self.dirty_end = end
            self.version = version
            self.chain = chain
            self._head = self._synced_head = (end, version, chain)

    def still_holds(self, buf) -> bool:
        """Is the last commit this reader replayed still in the file? A writer
        whose sync failed zeroes commits other processes may already have read."""
        off = self.commit_at
        if off is None:
            return True
        hdr = F.unpack_frame_header(buf[off:off + F.FRAME_HEADER_SIZE])
        body = off + F.FRAME_HEADER_SIZE
        if hdr is None or hdr.kind != F.Kind.COMMIT or body + hdr.length > len(buf):
            return False
        payload = buf[body:body + hdr.length]
        if F.frame_hash(hdr.kind, hdr.length, [payload]) != hdr.digest:
            return False
        rec = F.unpack_commit(payload)
        return rec.version == self.version and rec.chain == self.chain

    def cut_tail(self, buf) -> None:
        """Zero what a crash may have torn: whatever follows the last whole commit
        in buf (unless it is zero already), and a superblock slot whose checksum
        fails (a slot write cut short; the other slot holds the previous one)."""
        with self._lock:
            self.allocated = self.io.size()
            tail = memoryview(buf)[self.end:] if buf is not None else b""
            torn = [off for off in F.SLOT_OFFSETS
                    if any(raw := os.pread(self.fd, F.SLOT_SIZE, off)) and not F.unpack_slot(raw)]
            if torn or (len(tail) and np.frombuffer(tail, np.uint8).any()):
                self.dirty_end = max(self.allocated, self.end + len(tail))
                self._undo_to(self.end, tuple(torn))

    # ---- writing -----------------------------------------------------------

    def begin(self) -> None:
        """A transaction starts: a sync failure from now on aborts it."""
        self._check_usable()
        self._tx_generation = self.generation

    def append(self, kind: int, parts: list, length: int) -> int:
        """Add a frame to the open transaction (written once FLUSH_BYTES pile up).

        Returns the file offset its payload will have."""
        with self._lock:
            self._check_tx()
            offset = self.end + sum(F.FRAME_HEADER_SIZE + F.pad(f.length)
                                    for f in self._pending)
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
        try:
            self.end = self._write_all(bufs, self.end)
        except OSError as e:
            raise self._failed(e, "write", self.commit_end) from e

    def _write_all(self, bufs: list, pos: int) -> int:
        """Write bufs at pos, finishing short writes; returns the end position."""
        for i in range(0, len(bufs), _MAX_IOV):
            chunk = bufs[i:i + _MAX_IOV]
            want = sum(len(b) if isinstance(b, bytes) else b.nbytes for b in chunk)
            if pos >= F.LOG_START:   # the header block is no part of the log's tail
                self.dirty_end = max(self.dirty_end, pos + want)
            done = self.io.pwritev(chunk, pos)
            if done != want:  # short write: finish it
                rest = memoryview(b"".join(bytes(b) for b in chunk))[done:]
                while rest:
                    k = self.io.pwrite(rest, pos + done)
                    if k <= 0:
                        raise OSError(errno.EIO, "write made no progress", self.path)
                    done += k
                    rest = rest[k:]
            pos += want
        return pos

    def commit(self, rows_changed: int, timestamp_us: int | None = None
               ) -> tuple[F.CommitRecord, int, int]:
        """Write the open transaction's frames and its commit frame (not yet synced).

        Returns (record, end, generation): pass end and generation to `sync_to`,
        which refuses a commit that a failed sync has undone meanwhile."""
        with self._lock:
            self._check_tx()
            ts = time.time_ns() // 1000 if timestamp_us is None else timestamp_us
            digest = hashlib.sha256(b"".join(self._tx_frames)).digest()
            version = self.version + 1
            rec = F.CommitRecord(version, ts, len(self._tx_frames), rows_changed, digest,
                                 self.chain, F.chain_hash(self.chain, digest, version, ts))
            payload = F.pack_commit(rec)
            self._pending.append(_PendingFrame(F.Kind.COMMIT, [payload], len(payload),
                                               F.frame_hash(F.Kind.COMMIT, len(payload),
                                                            [payload])))
            self._tx_frames = []
            self._flush()
            self.version, self.chain = version, rec.chain
            self.commit_end = self.end
            self._head = (self.end, version, rec.chain)
            self._prefill()
            return rec, self.end, self.generation

    def rollback(self) -> None:
        """Forget the open transaction; zero any of its frames already written.

        Zeroed, not truncated: a reader may have mapped them, and stale frame
        headers left beyond a later, shorter commit would be read as part of it."""
        with self._lock:
            self._pending = []
            self._pending_bytes = 0
            self._tx_frames = []
            if self.end != self.commit_end:
                try:
                    self._undo_to(self.commit_end)
                except StorageError:
                    pass   # broken is set: every later write says so

    def write_checkpoint(self, parts: list, length: int, version: int) -> int:
        """Append a checkpoint frame, sync it, and point a superblock at it.

        All or nothing: on any failure the frame and the slot are zeroed, the
        superblock in memory is unchanged and StorageError is raised."""
        with self._lock:
            self._check_usable()
            if self._pending or self._tx_frames:
                raise TransactionAbortedError("a checkpoint cannot be written inside a "
                                              "transaction")
            offset = self.end
            digest = F.frame_hash(F.Kind.CHECKPOINT, length, parts)
            self._pending.append(_PendingFrame(F.Kind.CHECKPOINT, parts, length, digest))
            seq = (self.superblock.seq + 1) if self.superblock else 1
            slot = F.SLOT_OFFSETS[seq % 2]
            slot_written = False
            try:
                self._flush()
                self.io.fdatasync()
                sb = F.Superblock(seq, offset, version, self.end, self.chain)
                slot_written = True
                self._write_all([F.pack_slot(sb)], slot)
                self.io.fdatasync()
            except StorageError:
                raise
            except OSError as e:
                raise self._failed(e, "checkpoint", self.commit_end,
                                   (slot,) if slot_written else ()) from e
            self.superblocks = [sb] + [s for s in self.superblocks if s.seq != sb.seq][:1]
            self.commit_end = self.synced_end = self.end
            self._head = (self.end, self.version, self.chain)
            self._prefill()
            return offset

    def _prefill(self) -> None:
        # Keep a zeroed region ahead of `end` so small commits overwrite
        # allocated blocks and their fdatasync does not journal a new size.
        # Only a shortcut: a full disk just goes without it.
        if self.allocated - self.end >= PREFILL_BYTES // 4:
            return
        new = F.pad(self.end + PREFILL_BYTES, PREFILL_BYTES)
        start = max(self.allocated, self.end)
        if new > start:
            try:
                self._write_all([bytes(new - start)], start)
            except OSError:
                return
            self.allocated = new

    # ---- failure -------------------------------------------------------------

    def _failed(self, err: OSError, what: str, to: int, slots: tuple = ()) -> StorageError:
        """The one rule: after a failed write or sync, put the file back at `to`
        (the last commit that can still be acknowledged). Called with the lock held."""
        self._pending = []
        self._pending_bytes = 0
        self._tx_frames = []
        self._tx_generation = -1      # the open transaction, if any, cannot commit
        exc = StorageError(f"{self.path}: {what} failed ({err.strerror or err}); the file is "
                           f"back at version {self._version_at(to)}", err)
        try:
            self._undo_to(to, slots)
        except StorageError as broken:
            return broken
        return exc

    def _undo_to(self, to: int, slots: tuple = ()) -> None:
        """Zero [to, dirty_end) and the given superblock slots; reset the positions."""
        try:
            for off in slots:
                self._write_all([bytes(F.SLOT_SIZE)], off)
            self.io.zero(to, self.dirty_end - to)
        except OSError as e:
            self.broken = StorageError(
                f"{self.path}: a failed write could not be undone ({e.strerror or e}); "
                "this connection writes no more: reopen the file", e)
            raise self.broken from e
        try:
            self.io.fdatasync()
        except OSError:
            pass   # only to hasten it: the next commit's fdatasync makes the zeros durable
        self.end = self.commit_end = self.dirty_end = to
        self.allocated = min(self.allocated, to)
        if self.synced_end > to:
            self.synced_end = to
        if self._head[0] > to:
            self._head = self._synced_head
            self.version, self.chain = self._head[1], self._head[2]

    def _version_at(self, to: int) -> int:
        return self._head[1] if self._head[0] <= to else self._synced_head[1]

    def _check_usable(self) -> None:
        if self.broken is not None:
            raise self.broken

    def _check_tx(self) -> None:
        self._check_usable()
        if self._tx_generation != self.generation:
            raise TransactionAbortedError(
                "a write or sync of this file failed during the transaction and its "
                "writes were undone: roll it back")

    # ---- durability --------------------------------------------------------

    def sync_to(self, offset: int, generation: int) -> None:
        """Return once every byte before offset is durable (per the durability mode).

        Raises StorageError when the commit ending at offset was written in an
        earlier generation: a failed sync has undone it."""
        if generation != self.generation:
            raise StorageError(f"{self.path}: an earlier sync failed and this commit "
                               "was undone with it")
        if self.durability == "off":
            return
        if self.durability == "batch":
            if time.monotonic() - self._last_sync < self.batch_ms / 1000:
                self._schedule_sync()
                return
        with self._sync_lock:
            if generation != self.generation:
                raise StorageError(f"{self.path}: an earlier sync failed and this commit "
                                   "was undone with it")
            if self.synced_end >= offset:
                return  # another thread's fsync covered this commit
            self._sync()

    def _sync(self) -> None:
        """fdatasync, covering every commit written before it starts (sync lock held)."""
        head = self._head
        try:
            self.io.fdatasync()
        except OSError as e:
            with self._lock:
                self.generation += 1
                raise self._failed(e, "sync", self.synced_end) from e
        if head[0] > self.synced_end:
            self.synced_end = head[0]
            self._synced_head = head
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
            try:
                self._sync()
            except StorageError as e:
                self.failure = e     # the engine reports it at its next call

    def close(self) -> None:
        if self.fd < 0:
            return
        if self._timer is not None:
            self._timer.cancel()
        with self._sync_lock:
            try:
                if not self.readonly and self.durability != "off" and self.broken is None:
                    self.io.fdatasync()
            except OSError as e:
                raise StorageError(f"{self.path}: the final sync failed ({e.strerror or e})",
                                   e) from e
            finally:
                self.io.close()
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
