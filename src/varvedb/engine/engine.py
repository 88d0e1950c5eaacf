"""The engine: one database's tables, its log, its transactions and its versions.

Write path, top to bottom: an API call builds frames (kind, meta, arrays) →
`write` appends each to the log and applies it to the tables, tagged with the
transaction's pending version → `commit` writes the commit frame, releases
the writer lock, waits until the log is durable (sharing fsyncs with other
committers), publishes the version to readers and returns. New rows of an
indexed field are linked into its graph afterwards, by the maintainer
(maintainer.py); searches find them by exact scan until then.

Read path: a reader takes `read_version()` — the published version, or the
pending one for the thread that owns the open transaction — and evaluates
visibility masks against it. Nothing a reader touches is modified in place
except `died` stamps of versions newer than any it can see.

Failure: a write that fails inside a transaction undoes the transaction in
memory at once (the log has already put the file back at the last commit) and
marks it aborted: its later writes and its commit raise
TransactionAbortedError. A failed sync undoes every commit after the last
durable one, in the file and — by reloading the state from the file — in
memory, so the connection is again exactly what a fresh open would see.

Open: load the newest checkpoint a superblock points at, then replay the
commits after it; a checkpoint that fails to load (or whose log does not
follow from it) is only a shortcut lost: the older one, then the whole log,
is tried instead. A read-only connection never writes and `refresh()` replays
commits other processes have added since.
"""
from __future__ import annotations

import datetime
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..errors import (ClosedError, CorruptFileError, FieldTypeError, IndexMaintenanceError,
                      NotFoundError, OptionError, ReadOnlyError, SchemaError, StorageError,
                      TransactionAbortedError, TransactionError, VersionNotFoundError)
from ..schema import Schema, to_micros
from ..storage import format as F
from ..storage import record
from ..storage.log import LogFile, LoggedCommit
from . import checkpoint, frames
from .maintainer import Maintainer
from .table import Table

CLOSE_CHECKPOINT_BYTES = 4 << 20   # close() checkpoints when more log than this would replay


@dataclass
class Commit:
    """One entry of the history: a version and what made it."""
    version: int
    timestamp_us: int
    chain: bytes
    rows_changed: int


class Transaction:
    """The open write transaction of an Engine (at most one at a time)."""

    def __init__(self, engine: "Engine", version: int):
        self.engine = engine
        self.version = version
        self.owner = threading.get_ident()
        self.rows_changed = 0
        self.frames = 0
        self.tables: set[int] = set()
        self.done = False
        self.aborted = False       # a write failed: undone in memory, cannot commit


class Engine:
    def __init__(self, path: str | None, readonly: bool = False, durability: str = "commit",
                 batch_ms: float = 50.0):
        if durability not in ("commit", "batch", "off"):
            raise OptionError(f"durability is 'commit', 'batch' or 'off', not {durability!r}")
        if isinstance(batch_ms, bool) or not isinstance(batch_ms, (int, float)) or batch_ms < 0:
            raise OptionError(f"batch_ms is a non-negative number of milliseconds, "
                              f"not {batch_ms!r}")
        self.path = path
        self.readonly = readonly
        self.tables: dict[int, Table] = {}
        self.names: dict[str, int] = {}
        self.history: list[Commit] = []
        self.visible = 0                       # newest version readers may see
        self.written = 0                       # newest version in the log
        self._tx: Transaction | None = None
        self._writer = threading.RLock()       # held for a whole transaction
        self._publish = threading.Lock()
        self._closed = False
        self._map = None
        self._generation = 0                   # the log generation the state was loaded at
        # read-only connections never link: rows past a checkpoint's graph are scanned
        self._maintainer = None if readonly else Maintainer(self)
        self.log = LogFile(path, readonly, durability, batch_ms) if path else None
        if self.log:
            try:
                self._load()
            except BaseException:
                # A file that fails to load (e.g. CorruptFileError) must not keep
                # its fd and write lock: later connects in this process would
                # get WriterLockedError until exit.
                self._map = None
                self.log.close()
                raise

    # ---- opening -------------------------------------------------------------

    def _load(self) -> None:
        log = self.log
        buf = log.map()
        self._map = buf
        mv = memoryview(buf) if buf is not None else memoryview(b"")
        # the newest checkpoint first; a damaged one costs only its shortcut
        starts = [sb for sb in log.superblocks if sb.checkpoint_offset] + [None]
        for i, sb in enumerate(starts):
            try:
                version, chain = self._load_from(mv, sb)
                break
            except CorruptFileError:
                self.tables, self.names, self.history = {}, {}, []
                if i == len(starts) - 1:
                    raise
        self.visible = self.written = version
        self._generation = log.generation
        for t in self.tables.values():
            t.committed_n = t.n
        if not self.readonly:
            log.cut_tail(buf)
            self._link(self.tables.values())

    def _load_from(self, mv, sb) -> tuple[int, bytes]:
        """Load the checkpoint sb points at (None: none), replay the log after it."""
        log = self.log
        version, chain, start = 0, F.genesis_chain(log.file_id), F.LOG_START
        if sb is not None:
            checkpoint.load(self, mv, sb.checkpoint_offset, sb)
            version, chain, start = sb.checkpoint_version, sb.chain, sb.log_end
        if len(mv) > start:
            scan = log.scan(mv, start, version, chain)
            self._check_scan(scan, start)
            if sb is not None and not scan.commits and scan.stop_reason == "bad commit frame":
                raise CorruptFileError("the log does not follow from the checkpoint")
            for c in scan.commits:
                self._replay(mv, c)
            last = scan.commits[-1] if scan.commits else None
            if last is not None:
                version, chain = last.record.version, last.record.chain
            log.adopt(scan.end, version, chain, last.offset if last else None)
        else:
            log.adopt(start, version, chain)
        return version, chain

    def _reload(self) -> None:
        """After a failed sync: rebuild the state from the file, which the log has
        put back at the last durable commit. Called with the writer lock held."""
        if self.log is None or self._generation == self.log.generation:
            return
        with self._maintainer.hold():   # it must not link into the tables replaced here
            self.tables, self.names, self.history = {}, {}, []
            self._load()

    def _check_scan(self, scan, start: int) -> None:
        if scan.damaged:
            bad = next(((c.record.version, f.offset) for c in scan.commits for f in c.frames
                        if not f.payload_ok), None)
            v, off = bad if bad else (len(scan.commits) + 1, scan.stop_offset)
            raise CorruptFileError(f"{self.path}: history is damaged at version {v} "
                                   f"(offset {off}); run `varvedb verify` for a report")
        if scan.commits and not all(f.payload_ok for f in scan.commits[-1].frames):
            scan.commits.pop()  # torn before it was acknowledged: drop it
            scan.end = scan.commits[-1].end if scan.commits else start

    def _replay(self, mv, c: LoggedCommit) -> None:
        v = c.record.version
        try:
            frames.check_commit(c.record)
        except CorruptFileError as e:
            raise CorruptFileError(f"{self.path}: the commit frame at offset {c.offset}: "
                                   f"{e}") from e
        for f in c.frames:
            payload = mv[f.payload_offset:f.payload_offset + f.length]
            # The hash proves the bytes, not the writer: each frame is decoded and
            # checked (frames.py) before it touches a table. The except is a
            # backstop for what the checks miss; it names where the file is bad.
            try:
                meta, arrays, offsets = record.decode(payload)
                frames.check(self, f.kind, meta, arrays)
                offs = {k: f.payload_offset + o for k, o in offsets.items()}
                self._apply(f.kind, meta, arrays, offs, v)
            except frames.APPLY_ERRORS as e:
                why = str(e) if isinstance(e, CorruptFileError) else f"{type(e).__name__}: {e}"
                raise CorruptFileError(f"{self.path}: the frame at offset {f.offset} (version "
                                       f"{v}) is not valid: {why}") from e
        self.history.append(Commit(v, c.record.timestamp_us, c.record.chain,
                                   c.record.rows_changed))

    def refresh(self) -> int:
        """Read-only connections: apply commits other processes added. Returns the version."""
        self._ensure_open()
        if self.log is None:
            return self.visible
        with self._writer:
            buf = self.log.map()
            if buf is None:
                return self.visible
            mv = memoryview(buf)
            if not self.log.still_holds(mv):
                # the writer undid commits this reader had seen (a failed sync): start over
                self.tables, self.names, self.history = {}, {}, []
                self._load()
                return self.visible
            scan = self.log.scan(mv, self.log.end, self.log.version, self.log.chain)
            self._check_scan(scan, self.log.end)
            for c in scan.commits:
                self._replay(mv, c)
            if scan.commits:
                last = scan.commits[-1]
                self.log.adopt(last.end, last.record.version, last.record.chain, last.offset)
                self._map = buf
                self.visible = self.written = last.record.version
                for t in self.tables.values():
                    t.committed_n = t.n
            return self.visible

    # ---- frames ----------------------------------------------------------------

    def _apply(self, kind: int, meta: dict, arrays: dict, offsets: dict, version: int) -> None:
        if kind == F.Kind.CREATE_COLLECTION:
            t = Table(meta["cid"], meta["name"], Schema.from_dict(meta["schema"]), version)
            self.tables[t.cid] = t
            self.names[t.name] = t.cid
            if self._tx is not None and self._tx.version == version:
                t.begin()
                self._tx.tables.add(t.cid)
        elif kind == F.Kind.INSERT:
            self.tables[meta["c"]].apply_insert(meta, arrays, offsets, version)
        elif kind == F.Kind.DELETE:
            self.tables[meta["c"]].apply_delete(arrays["rows"], version)
        elif kind == F.Kind.CREATE_INDEX:
            self.tables[meta["c"]].create_index(meta["field"], meta["spec"], version)
        else:
            raise CorruptFileError(f"unknown frame kind {kind}")

    def write(self, kind: int, meta: dict, arrays: dict | None = None, rows_changed: int = 0):
        """Append one frame to the open transaction and apply it.

        If either fails, the transaction is undone and aborted, and the error raised."""
        tx = self._require_tx()
        if tx.aborted:
            raise TransactionAbortedError("an earlier write of this transaction failed and "
                                          "the transaction was undone: roll it back")
        arrays = arrays or {}
        offs = {}
        try:
            if self.log is not None:
                parts, length, offsets = record.encode(meta, arrays)
                base = self.log.append(kind, parts, length)
                offs = {k: base + o for k, o in offsets.items()}
            cid = meta.get("c")
            if cid is not None and cid not in tx.tables:
                self.tables[cid].begin()
                tx.tables.add(cid)
            self._apply(kind, meta, arrays, offs, tx.version)
        except BaseException:
            self._abort(tx)
            raise
        tx.rows_changed += rows_changed
        tx.frames += 1

    # ---- transactions ----------------------------------------------------------

    def begin(self) -> Transaction:
        self._ensure_writable()
        self._writer.acquire()
        try:
            if self._tx is not None:
                raise TransactionError("a transaction is already open on this thread")
            if self.log is not None:
                if self._generation != self.log.generation:
                    self._reload()
                failure = self.log.failure
                if failure is not None:   # a background (batch-mode) sync's: reported once
                    self.log.failure = None
                    raise failure
                self.log.begin()
        except BaseException:
            self._writer.release()
            raise
        self._tx = Transaction(self, self.written + 1)
        return self._tx

    def commit(self, tx: Transaction) -> int:
        """Make the transaction durable and visible. Returns its version."""
        if self._closed and tx.done:
            raise ClosedError("the database was closed inside this transaction, which was "
                              "rolled back")
        if tx is not self._tx or tx.done:
            raise TransactionError("this transaction is not open")
        if tx.aborted:
            self._end(tx)
            raise TransactionAbortedError("a write of this transaction failed, so it was "
                                          "rolled back and cannot commit")
        if not tx.frames:   # nothing was written: no version, no fsync
            self._end(tx)
            return self.written
        try:
            if self.log is not None:
                try:
                    rec, end, generation = self.log.commit(tx.rows_changed)
                except BaseException:
                    self._abort(tx)
                    raise
                ts, chain = rec.timestamp_us, rec.chain
            else:
                ts, chain = time.time_ns() // 1000, b""
            self.history.append(Commit(tx.version, ts, chain, tx.rows_changed))
            self.written = tx.version
            for cid in tx.tables:
                self.tables[cid].end()
        finally:
            self._end(tx)
        if self.log is not None:
            try:
                self.log.sync_to(end, generation)
            except StorageError:
                with self._writer:
                    self._reload()
                raise
        with self._publish:
            self.visible = max(self.visible, tx.version)
        self._link(self.tables[c] for c in tx.tables if c in self.tables)
        return tx.version

    def _end(self, tx: Transaction) -> None:
        tx.done = True
        self._tx = None
        self._writer.release()

    def _abort(self, tx: Transaction) -> None:
        """Undo the transaction in memory and in the file; it stays open, aborted."""
        if tx.aborted:
            return
        tx.aborted = True
        try:
            if self.log is not None:
                self.log.rollback()
        finally:
            self._undo_tables(tx)

    def _undo_tables(self, tx: Transaction) -> None:
        for cid in tx.tables:
            t = self.tables.get(cid)
            if t is None:
                continue
            if t.created == tx.version:
                del self.tables[cid]
                self.names.pop(t.name, None)
            else:
                t.rollback()
        tx.tables = set()

    def _link(self, tables) -> None:
        """Wake the maintainer if any of these tables has committed rows its graphs lack.

        Open links in the background too: it never waits for a graph, and
        until one covers the rows, answers come from the exact tail scan."""
        if self._maintainer is not None and any(
                vi.linked < t.committed_n for t in tables for vi in t.vector_indexes.values()):
            self._maintainer.wake()

    def index_status(self, table: Table, field: str) -> dict:
        """Committed rows of `field`'s graph linked and not yet linked (row versions)."""
        if self._maintainer is not None:
            self._maintainer.raise_failure()
        vi = table.vector_indexes[field]
        linked = min(vi.linked, table.committed_n)
        return {"field": field, "linked": linked, "unlinked": table.committed_n - linked}

    def rollback(self, tx: Transaction) -> None:
        if tx is not self._tx or tx.done:
            return
        try:
            self._abort(tx)
        finally:
            self._end(tx)

    def in_transaction(self) -> Transaction | None:
        tx = self._tx
        return tx if tx is not None and tx.owner == threading.get_ident() else None

    def _require_tx(self) -> Transaction:
        tx = self.in_transaction()
        if tx is None:
            raise TransactionError("no transaction is open on this thread")
        return tx

    # ---- reading ---------------------------------------------------------------

    def read_version(self) -> int:
        tx = self.in_transaction()
        return tx.version if tx is not None else self.visible

    def resolve_as_of(self, as_of) -> int:
        """A version number, or a timezone-aware datetime → the last version
        committed at or before it. Anything else is an OptionError: a naive
        datetime (or a string, a datetime64) could be in any zone."""
        if as_of is None:
            return self.read_version()
        if isinstance(as_of, bool) or not isinstance(as_of, (int, np.integer)):
            if not isinstance(as_of, datetime.datetime):
                raise OptionError(f"as_of is a version number or a timezone-aware "
                                  f"datetime, got {as_of!r:.80}")
            try:
                aware = as_of.utcoffset() is not None
            except (TypeError, ValueError):
                aware = False
            if not aware:
                raise OptionError("as_of needs a timezone-aware datetime (a naive one could "
                                  f"be in any zone), got {as_of!r}")
            try:
                us = to_micros("as_of", as_of)
            except FieldTypeError as e:
                raise OptionError(str(e)) from None
            stamps = np.fromiter((c.timestamp_us for c in self.history), np.int64,
                                 len(self.history))
            i = int(np.searchsorted(stamps, us, side="right"))
            v = self.history[i - 1].version if i else self.oldest_version() - 1
            return min(v, self.read_version())
        v = int(as_of)
        if v < 0 or v > self.read_version():
            raise VersionNotFoundError(f"version {v} does not exist; the newest is "
                                       f"{self.read_version()}")
        if v < self.oldest_version() - 1:
            raise VersionNotFoundError(f"version {v} is older than the history kept "
                                       f"(oldest {self.oldest_version()})")
        return v

    def oldest_version(self) -> int:
        return self.history[0].version if self.history else 1

    def table(self, name: str) -> Table:
        self._ensure_open()
        cid = self.names.get(name)
        if cid is None:
            raise NotFoundError(f"no collection named {name!r}")
        return self.tables[cid]

    def create_table(self, name: str, schema: Schema) -> Table:
        if name in self.names:
            raise SchemaError(f"a collection named {name!r} already exists")
        cid = max(self.tables, default=0) + 1
        self.write(F.Kind.CREATE_COLLECTION, {"cid": cid, "name": name,
                                              "schema": schema.to_dict()})
        return self.tables[cid]

    # ---- checkpoints and lifecycle ------------------------------------------

    def checkpoint(self) -> None:
        """Write the state as of the latest version so open loads it instead of replaying."""
        self._ensure_writable()
        if self.in_transaction() is not None:
            raise TransactionError("checkpoint() inside a transaction: commit or roll back "
                                   "first")
        if self.log is None:
            return
        with self._writer:
            self._reload()
            self._maintainer.finish()   # the graph written covers every committed row
            if self.log.superblock and self.log.superblock.checkpoint_version == self.written:
                return
            parts, length, adopt = checkpoint.encode(self)
            # nothing in memory changes until the checkpoint is durable
            self.log.write_checkpoint(parts, length, self.written)
            adopt()
            for t in self.tables.values():
                for vi in t.vector_indexes.values():
                    vi.checkpointed = vi.linked

    def _checkpoint_worthwhile(self) -> bool:
        """Would the next open replay much log, or rebuild graph links?"""
        sb = self.log.superblock
        since = self.log.end - (sb.log_end if sb and sb.checkpoint_offset else F.LOG_START)
        relink = any(vi.linked != vi.checkpointed for t in self.tables.values()
                     for vi in t.vector_indexes.values())
        return since > CLOSE_CHECKPOINT_BYTES or (relink and self.written > 0)

    def _ensure_open(self) -> None:
        if self._closed:
            raise ClosedError("the database is closed")

    def _ensure_writable(self) -> None:
        self._ensure_open()
        if self.readonly:
            raise ReadOnlyError(f"{self.path} was opened read-only")

    def close(self) -> None:
        """Close; first checkpoint if replaying the log since the last one would be slow."""
        if self._closed:
            return
        tx = self.in_transaction()
        if tx is not None:   # closing inside a transaction rolls it back
            self.rollback(tx)
        maintainer = self._maintainer
        failure = linked = None
        with self._writer:
            try:
                if maintainer is not None:
                    try:
                        maintainer.finish()   # so the checkpoint below holds whole graphs
                        linked = True
                    except Exception as e:
                        failure = e
                    maintainer.stop()
                    try:
                        maintainer.raise_failure()
                    except IndexMaintenanceError as e:
                        failure = failure or e
                if self.log is not None:
                    if linked and self._checkpoint_worthwhile():
                        try:
                            self.checkpoint()
                        except StorageError:
                            pass   # a checkpoint is only a shortcut: the log has it all
                    self.log.close()
            finally:
                if maintainer is not None:
                    maintainer.stop()   # before the tables go: it touches nothing after
                self._closed = True
                self.tables.clear()
                self._map = None
        if failure is not None:   # closed all the same, and nothing was lost
            if isinstance(failure, IndexMaintenanceError):
                raise failure
            raise IndexMaintenanceError(f"linking rows into a vector index failed at close: "
                                        f"{type(failure).__name__}: {failure}; nothing is "
                                        "lost: the next open links them") from failure
