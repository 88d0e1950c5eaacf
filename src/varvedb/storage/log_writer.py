"""Writing the log: append, commit, fsync, and the one failure rule.

One `LogWriter` per open database file (file.py). Writers append frames at
`end`; a transaction's frames are buffered and written as they pass
FLUSH_BYTES, so a bulk load never holds a second copy of its data. `commit`
writes the commit frame; `sync_to` makes it durable. Group commit: `sync_to`
lets one thread's fdatasync cover every commit written before it began, so
threads committing together share one fsync. A read-only connection has a
LogWriter too: it never writes, and holds where its replay reached (`adopt`).

Appends that grow the file make fdatasync also journal the new size; small
commits therefore land in a zero-filled region kept ahead of `end`
(PREFILL_BYTES), so their fdatasync flushes data only. The reader
(log_reader.py) reads a zero header as the end of the log.

Every change to the file goes through a `FileIO` (storage/fileio.py). The one
rule of the writer (`_failed`): a write or sync that fails puts the file back
at the last commit that can still be acknowledged — the last commit written,
when a write fails; the last one synced, when a sync fails — by zeroing
everything after it, resets `end`, the pending frames and the synced offset,
and raises `StorageError`; the connection writes again once the cause is
gone. The file never shrinks: a rollback zeroes its dead tail instead of
truncating it, so a reader that mapped the file never touches a page past its
end. A sync failure bumps `generation`; a commit written before it is never
acknowledged after it.

Positions, always `synced_end <= commit_end <= end`:
* `commit_end` — the end of the last commit frame (or checkpoint) written;
* `synced_end` — the end of the last commit known durable;
* `dirty_end` — nothing at or past it has been written since it was zeroed.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptFileError, StorageError, TransactionAbortedError
from . import format as F
from . import log_reader
from .file import DatabaseFile, nbytes

FLUSH_BYTES = 16 << 20
BIG_FRAME = 1 << 20
PREFILL_BYTES = 1 << 20
_PADDING = bytes(F.ALIGN)


@dataclass(slots=True)
class _PendingFrame:
    kind: int
    parts: list
    length: int
    digest: bytes


class LogWriter:
    """The frame log of one open file: positions, pending frames, durability."""

    def __init__(self, file: DatabaseFile, durability: str = "commit", batch_ms: float = 50.0):
        self.file = file
        self.io = file.io
        self.path = file.path
        self.readonly = file.readonly
        self.durability = durability
        self.batch_ms = batch_ms
        self._lock = threading.Lock()         # the file's positions and pending frames
        self._sync_lock = threading.Lock()
        self._pending: list[_PendingFrame] = []
        self._pending_bytes = 0               # their bytes in the file (headers, padding)
        self._tx_frames: list[bytes] = []     # digests of this transaction's frames
        self._tx_generation = 0
        self._timer: threading.Timer | None = None
        self._last_sync = time.monotonic()
        self.generation = 0                   # bumped by each failed sync
        self.failure: StorageError | None = None  # a background sync's, until taken
        self.broken: StorageError | None = None   # set when even undoing a failure failed
        self.allocated = self.io.size()
        self.adopt(F.LOG_START, 0, F.genesis_chain(file.file_id))

    @classmethod
    def open(cls, path: str, readonly: bool = False, durability: str = "commit",
             batch_ms: float = 50.0) -> "LogWriter":
        """Open (and for writing, lock) the file at path and its log."""
        return cls(DatabaseFile(path, readonly), durability, batch_ms)

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

    def cut_tail(self, buf) -> None:
        """Zero what a crash may have torn: whatever follows the last whole commit
        in buf (unless it is zero already), and a superblock slot whose checksum
        fails (a slot write cut short; the other slot holds the previous one).

        A torn tail is only ever the last, unacknowledged transaction: its
        frames, at most its own commit frame (version + 1). Commits of a later
        version past `end`, or data past what buf holds, are history the read
        did not reach (a hole read as the log's end, damage): CorruptFileError,
        and nothing is zeroed."""
        with self._lock:
            self.allocated = self.io.size()
            size = len(buf) if buf is not None else 0
            tail = memoryview(buf)[self.end:] if buf is not None else b""
            torn = self.file.torn_slots()
            if torn or (len(tail) and np.frombuffer(tail, np.uint8).any()):
                # (from end on: newest_beyond looks past the offset it is given)
                beyond = log_reader.newest_beyond(buf, self.end - 1) if len(tail) else 0
                if beyond > self.version + 1 or self.file.data_end() > max(size, self.end):
                    raise CorruptFileError(
                        f"{self.path}: the log read ends at version {self.version} (offset "
                        f"{self.end}), but " + (f"a commit of version {beyond} lies past it"
                                                if beyond > self.version + 1 else
                                                f"the file holds data past the {size} bytes "
                                                "read") + ": not a torn tail, so nothing is "
                        "cut; run `varvedb verify` for a report")
                self.dirty_end = max(self.allocated, self.end + len(tail))
                self._undo_to(self.end, torn)

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
            offset = self.end + self._pending_bytes
            digest = F.frame_hash(kind, length, parts)
            # parts may be the caller's arrays: a small frame is copied now, a large
            # one written now, so nothing the caller changes later reaches the file.
            if length < BIG_FRAME and (len(parts) != 1 or type(parts[0]) is not bytes):
                parts = [b"".join(parts)]
            self._queue(_PendingFrame(kind, parts, length, digest))
            self._tx_frames.append(digest)
            if self._pending_bytes >= FLUSH_BYTES or length >= BIG_FRAME:
                self._flush()
            return offset + F.FRAME_HEADER_SIZE

    def _queue(self, frame: _PendingFrame) -> None:
        self._pending.append(frame)
        self._pending_bytes += F.FRAME_HEADER_SIZE + F.pad(frame.length)

    def _drop_pending(self) -> None:
        self._pending = []
        self._pending_bytes = 0

    def _flush(self) -> None:
        """Write the pending frames at `end`: a few small ones (a commit's) as one
        buffer, so a one-row commit is one short write; larger ones from their
        own parts, never copied."""
        pending, size = self._pending, self._pending_bytes
        self._drop_pending()
        bufs: list
        if size < BIG_FRAME:
            out = []             # headers, payloads, padding: joined once
            for fr in pending:
                out.append(F.pack_frame_header(fr.kind, fr.length, fr.digest))
                for part in fr.parts:
                    out.append(part if type(part) is bytes else memoryview(part).cast("B"))
                gap = -fr.length % F.ALIGN
                if gap:
                    out.append(_PADDING[:gap])
            bufs = [b"".join(out)]
        else:
            bufs = []
            for fr in pending:
                bufs.append(F.pack_frame_header(fr.kind, fr.length, fr.digest))
                bufs.extend(fr.parts)
                gap = F.pad(fr.length) - fr.length
                if gap:
                    bufs.append(bytes(gap))
        try:
            self.end = self._write(bufs, self.end)
        except OSError as e:
            raise self._failed(e, "write", self.commit_end) from e

    def _write(self, bufs: list, pos: int) -> int:
        """Write bufs into the log at pos; returns the end position."""
        self.dirty_end = max(self.dirty_end, pos + nbytes(bufs))
        return self.file.write_all(bufs, pos)

    def commit(self, rows_changed: int, timestamp_us: int | None = None, branch: int = 0
               ) -> tuple[F.CommitRecord, int, int]:
        """Write the open transaction's frames and its commit frame (not yet synced),
        made on `branch` (0: main).

        Returns (record, end, generation): pass end and generation to `sync_to`,
        which refuses a commit that a failed sync has undone meanwhile."""
        with self._lock:
            self._check_tx()
            ts = time.time_ns() // 1000 if timestamp_us is None else timestamp_us
            digest = hashlib.sha256(b"".join(self._tx_frames)).digest()
            version = self.version + 1
            rec = F.CommitRecord(version, ts, len(self._tx_frames), rows_changed, digest,
                                 self.chain, F.chain_hash(self.chain, digest, version, ts,
                                                          branch), branch)
            return rec, *self._write_commit(rec)

    def commit_shipped(self, rec: F.CommitRecord) -> tuple[int, int]:
        """Write a commit frame another file's writer made (a read replica copying
        its leader: storage/shipping.py) for the frames appended since `begin`,
        once it is checked to follow this log: the next version, this log's chain
        hash before it, the digest of those frames, its own chain hash. Raises
        CorruptFileError otherwise (the caller rolls back). Returns (end,
        generation) for `sync_to`."""
        with self._lock:
            self._check_tx()
            digest = hashlib.sha256(b"".join(self._tx_frames)).digest()
            if (rec.version != self.version + 1 or rec.prev_chain != self.chain
                    or rec.n_frames != len(self._tx_frames) or rec.digest != digest
                    or rec.chain != F.chain_hash(self.chain, digest, rec.version,
                                                 rec.timestamp_us, rec.branch)):
                raise CorruptFileError(
                    f"{self.path}: the shipped commit of version {rec.version} does not "
                    f"follow this file's version {self.version} (its digest or chain hash "
                    "differs)")
            return self._write_commit(rec)

    def _write_commit(self, rec: F.CommitRecord) -> tuple[int, int]:
        payload = F.pack_commit(rec)
        self._queue(_PendingFrame(F.Kind.COMMIT, [payload], len(payload),
                                  F.frame_hash(F.Kind.COMMIT, len(payload), [payload])))
        self._tx_frames = []
        self._flush()
        self.version, self.chain = rec.version, rec.chain
        self.commit_end = self.end
        self._head = (self.end, rec.version, rec.chain)
        self._prefill()
        return self.end, self.generation

    def rollback(self) -> None:
        """Forget the open transaction; zero any of its frames already written.

        Zeroed, not truncated: a reader may have mapped them, and stale frame
        headers left beyond a later, shorter commit would be read as part of it."""
        with self._lock:
            self._drop_pending()
            self._tx_frames = []
            if self.end != self.commit_end:
                try:
                    self._undo_to(self.commit_end)
                except StorageError:
                    pass   # broken is set: every later write says so

    def mark(self) -> tuple[int, int]:
        """Where the open transaction's frames end now, for `rollback_to`."""
        with self._lock:
            return self.end + self._pending_bytes, len(self._tx_frames)

    def rollback_to(self, mark: tuple[int, int]) -> None:
        """Forget the frames the open transaction appended since `mark` (zeroing
        any written, as `rollback` does); the ones before it stay."""
        at, n_frames = mark
        with self._lock:
            self._check_tx()
            if self.end < at:       # not flushed since: they are the newest pending
                while self._pending_bytes > at - self.end:
                    fr = self._pending.pop()
                    self._pending_bytes -= F.FRAME_HEADER_SIZE + F.pad(fr.length)
            else:
                self._drop_pending()
                if self.end > at:
                    commit_end = self.commit_end
                    self._undo_to(at)          # StorageError: this file writes no more
                    self.commit_end = commit_end
            del self._tx_frames[n_frames:]

    def write_checkpoint(self, parts: list, length: int, version: int) -> int:
        """Append a checkpoint frame, sync it, and point a superblock at it.

        All or nothing: on any failure the frame and the slot are zeroed, the
        superblock in memory is unchanged and StorageError is raised."""
        with self._lock:
            self._check_usable()
            if self._pending or self._tx_frames:
                raise TransactionAbortedError("a checkpoint cannot be written inside a "
                                              "transaction")
            if version != self.version:     # a sync failed after the state was taken
                raise StorageError(f"{self.path}: a sync failed while the checkpoint was "
                                   f"made, and the file is back at version {self.version}: "
                                   "no checkpoint was written")
            offset = self.end
            digest = F.frame_hash(F.Kind.CHECKPOINT, length, parts)
            self._queue(_PendingFrame(F.Kind.CHECKPOINT, parts, length, digest))
            seq = self.file.next_seq()
            slot_written = False
            try:
                self._flush()
                self.io.fdatasync()
                sb = F.Superblock(seq, offset, version, self.end, self.chain)
                slot_written = True
                self.file.write_slot(sb)
                self.io.fdatasync()
            except StorageError:
                raise
            except OSError as e:
                slots = (self.file.slot_of(seq),) if slot_written else ()
                raise self._failed(e, "checkpoint", self.commit_end, slots) from e
            self.file.use_superblock(sb)
            self.commit_end = self.synced_end = self.end
            self._head = self._synced_head = (self.end, self.version, self.chain)
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
                self._write([bytes(new - start)], start)
            except OSError:
                return
            self.allocated = new

    # ---- failure -------------------------------------------------------------

    def _failed(self, err: OSError, what: str, to: int, slots: tuple = ()) -> StorageError:
        """The one rule: after a failed write or sync, put the file back at `to`
        (the last commit that can still be acknowledged). Called with the lock held."""
        self._drop_pending()
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
                self.file.zero_slot(off)
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

    def durable_head(self) -> tuple[int, int, bytes]:
        """(end, version, chain) of the newest commit that is durable, syncing the
        ones written but not yet synced first (any durability mode): the prefix
        of the file up to `end` is whole and nothing a failure undoes reaches it."""
        with self._sync_lock:
            if not self.readonly and self._head[0] > self.synced_end:
                self._sync()
            return self._synced_head if not self.readonly else self._head

    def _schedule_sync(self) -> None:
        if self._timer is not None and self._timer.is_alive():
            return
        self._timer = threading.Timer(self.batch_ms / 1000, self._timed_sync)
        self._timer.daemon = True
        self._timer.start()

    def _timed_sync(self) -> None:
        with self._sync_lock:
            if self.file.closed:
                return
            try:
                self._sync()
            except StorageError as e:
                self.failure = e     # the engine reports it at its next call

    def close(self, sync: bool = True) -> None:
        """The final sync (unless durability is off, or `sync` is False: a file a
        vacuum replaced, whose every commit its successor holds, synced), then
        close the file."""
        if self.file.closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        with self._sync_lock:
            try:
                if (sync and not self.readonly and self.durability != "off"
                        and self.broken is None):
                    self.io.fdatasync()
            except OSError as e:
                raise StorageError(f"{self.path}: the final sync failed ({e.strerror or e})",
                                   e) from e
            finally:
                self.file.close()
