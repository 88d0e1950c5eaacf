"""The engine: one database's tables, its log, its transactions and its versions.

Write path, top to bottom: an API call builds frames (kind, meta, arrays) →
`write` appends each to the log and applies it to the tables, tagged with the
transaction's pending version → `commit` writes the commit frame, releases
the writer lock, waits until the log is durable (sharing fsyncs with other
committers), publishes the version to readers and returns. New rows of an
indexed field are linked into its graph afterwards, by the maintainer
(maintainer.py); searches find them by exact scan until then.

Read path: a reader takes a `snapshot()` (snapshot.py) — the published
version, or the pending one of its own open transaction, and each table's row
count read after it — and evaluates visibility masks against it. Nothing a reader touches is modified in place
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

import copy
import gc
import logging
import os
import threading
import time
from dataclasses import replace
from typing import Callable, Iterator

import numpy as np

from ..errors import (BranchError, CheckViolationError, ClosedError, CorruptFileError,
                      IndexMaintenanceError, LockTimeoutError, LogMismatchError, NotFoundError,
                      NotNullViolationError, OptionError,
                      ReadOnlyError, SchemaError, SqlError, StorageError,
                      TransactionAbortedError, TransactionError, UnknownFieldError, VarveError)
from ..schema import (Field, Schema, brief, check_constraints, check_not_null, constraint_name,
                      UNINDEXED_KINDS, check_index_where, complete_columns, fit_index,
                      further_index, validate_name, WRITTEN_OPS)
from .embedding import check_embedders, fill_embedded, unchanged_texts
from ..storage import format as F
from ..reports import rows_bar
from ..storage import backup, log_reader, shipping
from ..storage.file import DatabaseFile, fsync_dir, real_path
from ..storage.backup import BackupInfo
from ..storage.log_reader import LoggedCommit
from ..storage.log_writer import LogWriter
from . import checkpoint, frames, merge, vacuum
from .pins import Pins
from .branches import HEAD, MAIN, Branch, Catalog, View, main_view
from .columns import range_error
from .history import Commit
from .maintainer import Maintainer
from .rowmap import RowMap
from .snapshot import Snapshot, take as take_snapshot
from .table import Table, check_unique
from .writer_lock import WriterLock, this_thread

log = logging.getLogger("varvedb.engine")

CLOSE_CHECKPOINT_BYTES = 4 << 20   # close() checkpoints when more log than this would replay
# close() (wait=None) links the rows left before it checkpoints when they are this
# few (about a second's linking); more, and it saves the graphs as far as they are
CLOSE_FINISH_ROWS = 20_000


def freeze_loaded_modules() -> bool:
    """Move every object the garbage collector tracks so far into its permanent
    generation (gc.freeze), once per process, at the first connect() (before its
    Database and Engine exist, so that neither is frozen); True if this call did it.

    Why: numba's import and the kernels' dispatchers leave ~50 000 tracked,
    never-freed objects (modules, types, functions); every full collection
    walks them all again (25-110 ms measured), and a process that keeps its
    search results triggers one every few thousand searches: the slowest
    searches were those collections. Frozen, a full collection walks only what
    was allocated since (issue 28's tail latency). The price: cycles that
    already exist when the first engine opens and become garbage later are not
    collected (refcounting still frees everything else); there is no
    gc.collect() first, which would cost the open the full walk this avoids.
    Called by connect(), whose import has loaded numba and the kernels."""
    global _FROZEN
    if _FROZEN:
        return False
    _FROZEN = True
    gc.freeze()
    return True


_FROZEN = False
# What a load sets, and load_state swaps in together
LOADED = ("tables", "names", "history", "catalog", "next_cid", "applying_version",
          "applying_branch", "visible", "written", "_map", "_generation")
_MAIN_HEAD = main_view(HEAD)     # the view main's writer writes
_CHECK_CHUNK = 1 << 16   # rows an ADD CHECK or a branch at= reads at a time (bounded memory)


class Transaction:
    """The open write transaction of an Engine (at most one at a time)."""

    def __init__(self, engine: "Engine", version: int):
        self.engine = engine
        self.version = version
        self.thread = threading.get_ident()   # where it began (close rolls it back there)
        self.rows_changed = 0
        self.frames = 0
        self.tables: set[int] = set()
        self.dropped: list[Table] = []       # tables it dropped (a rollback restores them)
        self.next_cid = engine.next_cid      # (and the cid counter)
        self.branch = MAIN                   # the branch it writes (branches.py)
        self.server_files = True             # may it read this machine's files (embedding.py)
        self.catalog = None                  # the branches before its first BRANCH frame
        self.done = False
        self.aborted = False       # a write failed: undone in memory, cannot commit
        self.schema_changed = False    # it wrote a schema change (its undo holds the maintainer)


class Engine:
    def __init__(self, path: str | None, readonly: bool = False, durability: str = "commit",
                 batch_ms: float = 50.0, lock_timeout: float = 5.0, until: int | None = None,
                 prepare=None):
        """`until` (read-only): load the state as of that version, no later (vacuum's);
        `prepare(engine)`: called once loaded, before anything is linked (vacuum's
        repaired graphs go in there)."""
        if durability not in ("commit", "batch", "off"):
            raise OptionError(f"durability is 'commit', 'batch' or 'off', not {durability!r}")
        if isinstance(batch_ms, bool) or not isinstance(batch_ms, (int, float)) or batch_ms < 0:
            raise OptionError(f"batch_ms is a non-negative number of milliseconds, "
                              f"not {batch_ms!r}")
        self.lock_timeout = check_timeout(lock_timeout)
        # resolved once: the file is named again later (vacuum's rename over it,
        # refresh's replaced(), the lock's check)
        self.path = real_path(path) if path else None
        self.readonly = readonly
        self.tables: dict[int, Table] = {}
        self.names: dict[str, int] = {}
        self.next_cid = 1                      # above every cid ever used (dropped ones too)
        self.history: list[Commit] = []
        self.catalog = Catalog()               # the branches (branches.py)
        self.applying_version = 0              # the commit whose frames are being applied,
        self.applying_branch = MAIN            # and its branch (frames.py checks against them)
        self.visible = 0                       # newest version readers may see
        self.written = 0                       # newest version in the log
        self._tx: Transaction | None = None
        self.writer = WriterLock()            # held for a whole transaction
        self._publish = threading.Lock()
        self.published = threading.Condition(self._publish)   # notified as visible grows
        self._watchers = 0          # threads in wait_visible (published is notified for them)
        self.closed = False
        self._map = None
        self._generation = 0                   # the log generation the state was loaded at
        self._until = until
        self._prepare = prepare
        self.retention: vacuum.Retention | None = None   # automatic vacuum, when set
        self.pins = Pins(self)        # versions open blocks read, which a vacuum keeps
        # read-only connections never link: rows past a checkpoint's graph are scanned
        self.maintainer = None if readonly else Maintainer(self)
        self._shipped = None                   # (file, end, version, chain) last shipped
        self.vacuums = self.backups = 0        # done since open (the server's /metrics)
        self.log = LogWriter.open(self.path, readonly, durability, batch_ms) if path else None
        if self.log:
            try:
                self.load_state()
            except BaseException:
                # A file that fails to load (e.g. CorruptFileError) must not keep
                # its fd and write lock: later connects in this process would
                # get WriterLockedError until exit.
                self._map = None
                self.log.close()
                raise

    # ---- opening -------------------------------------------------------------

    def forget_state(self) -> None:
        """Drop the loaded state, before a load starts over from the file."""
        self.tables, self.names, self.history = {}, {}, []
        self.catalog = Catalog()
        self.next_cid = 1

    def load_state(self) -> None:
        """Load the state from the file into a copy of this engine, then put it in
        place at once: this connection's readers on other threads (during a refresh
        after another process's vacuum, or a reload after a failed sync) see the
        old state whole until then, the new one after, never one half loaded."""
        fresh = copy.copy(self)
        fresh.forget_state()          # (its own empty tables: the copy shared ours)
        fresh._load()
        was = {k: self.__dict__[k] for k in LOADED}
        # One dict update puts every loaded attribute in place: no Python code runs
        # inside it (`was` keeps the old values, so none is freed there), so no
        # other thread runs between its stores and sees some swapped, others not.
        self.__dict__.update({k: fresh.__dict__[k] for k in LOADED})
        del was
        if not self.readonly:
            self._link(list(self.tables))

    def _load(self) -> None:
        log = self.log
        buf = log.file.map()
        self._map = buf
        mv = memoryview(buf) if buf is not None else memoryview(b"")
        # the newest checkpoint first; a damaged one costs only its shortcut
        starts = [sb for sb in log.file.superblocks if sb.checkpoint_offset
                  and (self._until is None or sb.checkpoint_version <= self._until)] + [None]
        for i, sb in enumerate(starts):
            try:
                version, chain = self._load_from(mv, sb)
                break
            except CorruptFileError:
                self.forget_state()
                if i == len(starts) - 1:
                    raise
        self._check_vouched(version)
        self.visible = self.written = version
        self._generation = log.generation
        for t in self.tables.values():
            t.committed_n = t.n
            if self.maintainer is None:
                t.index_text_now()
        if self._prepare is not None:
            self._prepare(self)
        if not self.readonly:
            log.cut_tail(buf)

    def _check_vouched(self, version: int) -> None:
        """A superblock is written once its checkpoint, and every commit up to its
        version, is durable, and the file never shrinks: a file that ends before
        a superblock's log end, or whose log stops below its version (the
        checkpoint past the end, the log replayed instead), was cut short (a
        partial copy, a full disk during a copy) and lost acknowledged commits.
        Opening it as the older database it looks like would let a writer append
        over the gap: CorruptFileError instead."""
        size = self.log.io.size()
        for sb in self.log.file.superblocks:
            want = sb.checkpoint_version if self._until is None else min(
                self._until, sb.checkpoint_version)
            if sb.checkpoint_offset and (sb.log_end > size or version < want):
                raise CorruptFileError(
                    f"{self.path}: truncated: the superblock vouches for version "
                    f"{sb.checkpoint_version} and a log of {sb.log_end} bytes, but the file "
                    f"holds {size} bytes and its log ends at version {version}; run "
                    "`varvedb verify` for a report")

    def _load_from(self, mv, sb) -> tuple[int, bytes]:
        """Load the checkpoint sb points at (None: none), replay the log after it."""
        log = self.log
        version, chain, start = 0, F.genesis_chain(log.file.file_id), F.LOG_START
        if sb is not None:
            state = checkpoint.load(mv, sb.checkpoint_offset, sb)
            self.tables, self.names, self.history = state.tables, state.names, state.history
            self.next_cid, self.catalog = state.next_cid, state.catalog
            version, chain, start = sb.checkpoint_version, sb.chain, sb.log_end
        if len(mv) > start:
            scan = log_reader.scan(mv, start, version, chain, log.file.superblocks)
            self._check_scan(scan, start)
            if sb is not None and not scan.commits and scan.stop_reason == "bad commit frame":
                raise CorruptFileError("the log does not follow from the checkpoint")
            if self._until is not None:
                scan.commits = [c for c in scan.commits if c.record.version <= self._until]
                scan.end = scan.commits[-1].end if scan.commits else start
            for c in scan.commits:
                self._replay(mv, c)
            last = scan.commits[-1] if scan.commits else None
            if last is not None:
                version, chain = last.record.version, last.record.chain
            log.adopt(scan.end, version, chain, last.offset if last else None)
        else:
            log.adopt(start, version, chain)
        return version, chain

    def reload(self) -> None:
        """After a failed sync: rebuild the state from the file, which the log has
        put back at the last durable commit. Called with the writer lock held."""
        if self.log is None or self._generation == self.log.generation:
            return
        with self.maintainer.hold():   # it must not link into the tables replaced here
            self.load_state()

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
            self._applying(v, c.record.branch, first=c.frames[0].kind if c.frames else None)
        except CorruptFileError as e:
            raise CorruptFileError(f"{self.path}: the commit frame at offset {c.offset}: "
                                   f"{e}") from e
        for f in c.frames:
            payload = mv[f.payload_offset:f.payload_offset + f.length]
            # The hash proves the bytes, not the writer: each frame is decoded and
            # checked (frames.py) before it touches a table. The except is a
            # backstop for what the checks miss; it names where the file is bad.
            try:
                self._apply(frames.decode(self, f.kind, payload, f.payload_offset), v)
            except frames.APPLY_ERRORS as e:
                why = str(e) if isinstance(e, CorruptFileError) else f"{type(e).__name__}: {e}"
                raise CorruptFileError(f"{self.path}: the frame at offset {f.offset} (version "
                                       f"{v}) is not valid: {why}") from e
        self.history.append(Commit(v, c.record.timestamp_us, c.record.chain,
                                   c.record.rows_changed, c.record.branch))

    def _applying(self, version: int, branch: int, first: int | None = None) -> None:
        """The frames applied next are those of `version`, on `branch`: the tables
        write that branch. A replayed commit on a branch needs the branch live,
        unless its first frame makes it (`first`: that frame's kind)."""
        b = self.catalog.by_id.get(branch)
        if b is None or b.dropped:
            if branch == MAIN or first != F.Kind.BRANCH or b is not None:
                raise CorruptFileError(f"version {version} is on branch {branch}, which "
                                       "is not live")
            view = View(((branch, HEAD),))    # its BRANCH frame makes it; no rows yet
        elif branch == MAIN:
            view = _MAIN_HEAD     # (a View is frozen: one serves every transaction)
        else:
            view = self.catalog.view(branch, HEAD)
        self.applying_version, self.applying_branch = version, branch
        for t in self.tables.values():
            t.use_view(view)

    def refresh(self) -> int:
        """Read-only connections: apply commits other processes added. Returns the version."""
        self.ensure_open()
        if self.log is None:
            return self.visible
        with self.writer.held():
            if self.log.file.replaced():   # a vacuum renamed a new file into place
                old = self.log
                self.log = LogWriter.open(self.path, True, old.durability, old.batch_ms)
                old.close()
                self.load_state()
                return self.visible
            log = self.log
            buf = log.file.map()
            if buf is None:
                return self.visible
            mv = memoryview(buf)
            if not log_reader.holds_commit(mv, log.commit_at, log.version, log.chain):
                # the writer undid commits this reader had seen (a failed sync): start over
                self.load_state()
                return self.visible
            scan = log_reader.scan(mv, log.end, log.version, log.chain, log.file.superblocks)
            self._check_scan(scan, log.end)
            for c in scan.commits:
                self._replay(mv, c)
            if scan.commits:
                last = scan.commits[-1]
                log.adopt(last.end, last.record.version, last.record.chain, last.offset)
                self._map = buf
                self.visible = self.written = last.record.version
                for t in self.tables.values():
                    t.committed_n = t.n
                    if self.maintainer is None:
                        t.index_text_now()
            return self.visible

    # ---- frames ----------------------------------------------------------------

    def _apply(self, frame: frames.Frame, version: int) -> None:
        if isinstance(frame, frames.Insert):
            self.tables[frame.cid].apply_insert(frame, version)
        elif isinstance(frame, frames.Delete):
            self.tables[frame.cid].apply_delete(frame.rows, version)
        elif isinstance(frame, frames.BranchOp):
            self._apply_branch(frame, version)
        elif isinstance(frame, frames.CreateCollection):
            t = Table(frame.cid, frame.name, frame.schema, version)
            self.tables[t.cid] = t
            self.names[t.name] = t.cid
            self.next_cid = max(self.next_cid, t.cid + 1)
            if self._tx is not None and self._tx.version == version:
                t.begin()
                self._tx.tables.add(t.cid)
        elif isinstance(frame, frames.CreateIndex):
            self.tables[frame.cid].create_index(frame.field, frame.spec, version)
        elif isinstance(frame, frames.DropCollection):
            t = self.tables.pop(frame.cid)
            del self.names[t.name]
            if self._tx is not None and self._tx.version == version:
                self._tx.dropped.append(t)
        elif isinstance(frame, frames.AddColumn):
            self.tables[frame.cid].add_column(frame.name, frame.field)
        elif isinstance(frame, frames.DropColumn):
            self.tables[frame.cid].drop_column(frame.name)
        elif isinstance(frame, frames.RenameColumn):
            self.tables[frame.cid].rename_column(frame.old, frame.new)
        elif isinstance(frame, frames.CreateScalarIndex):
            self.tables[frame.cid].create_scalar_index(frame.field, frame.kind, frame.name,
                                                       frame.ts_config)
        elif isinstance(frame, frames.DropIndex):
            self.tables[frame.cid].drop_index(frame.field, frame.index)
        elif isinstance(frame, frames.SetCheck):
            self.tables[frame.cid].set_check(frame.name, frame.check)
        elif isinstance(frame, frames.Base):
            for cid, (kept, base, next_id) in frame.tables.items():
                t = self.tables[cid]
                if base != t.n:      # rows were dropped: the log numbers them apart
                    t.rowmap = RowMap(kept, base)
                t.next_int_id = next_id
            self.next_cid = max(self.next_cid, frame.next_cid)
        else:
            raise CorruptFileError(f"unknown frame {type(frame).__name__}")

    def _apply_branch(self, frame: frames.BranchOp, version: int) -> None:
        tx = self._tx
        if tx is not None and tx.version == version and tx.catalog is None:
            tx.catalog = copy.deepcopy(self.catalog)    # what a rollback puts back
        if frame.op == "create":
            self.catalog.by_id[frame.id] = Branch(frame.id, frame.name, frame.parent,
                                                  frame.fork, version)
            view = self.catalog.view(frame.id, HEAD)
            for t in self.tables.values():
                t.use_view(view)
        elif frame.op == "drop":
            self.catalog.by_id[frame.id].dropped = version
        else:
            self.catalog.by_id[frame.id].merged[frame.source] = (frame.source_version, version)

    def write(self, tx: "Transaction", frame: frames.Frame, rows_changed: int = 0) -> None:
        """Append one frame to the open transaction and apply it.

        If either fails, the transaction is undone and aborted, and the error raised."""
        self._check_writing(tx)
        if tx.branch != MAIN and isinstance(frame, frames.SCHEMA_CHANGES):
            raise BranchError("the schema (collections, fields, indexes) is one for every "
                              "branch and is changed on main: db.use('main') first")
        try:
            if self.log is not None:
                t = self.tables.get(frame.cid)
                parts, length, offsets = frames.encode(frame, t.rowmap if t else None)
                base = self.log.append(frame.KIND, parts, length)
                if isinstance(frame, frames.Insert):
                    frame.located(base, offsets)
            if frame.cid is not None and not isinstance(frame, frames.CreateCollection) \
                    and frame.cid not in tx.tables:
                self.tables[frame.cid].begin()
                tx.tables.add(frame.cid)
            if isinstance(frame, frames.SCHEMA_CHANGES) and self.maintainer is not None:
                # no chunk is linked while a table's columns, indexes and schema
                # change (one after the other): a chunk links against one state, the
                # old or the new, never an index whose predicate's column is gone
                tx.schema_changed = True
                with self.maintainer.hold():
                    self._apply(frame, tx.version)
            else:
                self._apply(frame, tx.version)
        except BaseException:
            self.abort(tx)
            raise
        tx.rows_changed += rows_changed
        tx.frames += 1

    def _check_writing(self, tx: "Transaction") -> None:
        if tx is not self._tx or tx.done:
            raise TransactionError("this transaction is not open")
        self._check_synced(tx)
        if tx.aborted:
            raise TransactionAbortedError("an earlier write of this transaction failed and "
                                          "the transaction was undone: roll it back")

    # ---- write verbs: each checks what only the table knows, then writes frames ----

    def create_collection(self, tx: "Transaction", name: str, schema: Schema,
                          fill: Callable[[Table], object] | None = None) -> Table:
        """A new collection; `fill(table)` writes its first rows in the same step:
        should it raise, the creation is undone too (a call that raises has
        changed nothing, even in a transaction that goes on)."""
        self._check_writing(tx)
        if name in self.names:
            raise SchemaError(f"a collection named {name!r} already exists")
        check_embedders(schema.fields, tx.server_files)
        cid = self.next_cid
        self._stamp(schema.key is not None or _newer_fields(schema.fields.values()))
        before = (self.log.mark() if self.log is not None else None, tx.frames,
                  tx.rows_changed)
        self.write(tx, frames.CreateCollection(cid, name, schema))
        t = self.tables[cid]
        if fill is not None:
            try:
                fill(t)
            except BaseException:
                if not tx.aborted:      # an aborted one is undone whole already
                    self._uncreate(tx, t, *before)
                raise
        return t

    def _stamp(self, needed: bool = True) -> None:
        """The header stamped with this format before a frame that holds what an
        older varvedb cannot read (a branch, a SET_CHECK, a bytes field, a further
        vector index: storage/format.py's versions), so that it refuses the file as
        newer instead of misreading it or calling it corrupt. `needed`: the frame
        holds such a thing."""
        if needed and self.log is not None:
            self.log.file.upgrade_header()

    def _uncreate(self, tx: "Transaction", t: Table, mark, n_frames: int,
                  rows_changed: int) -> None:
        """Undo the creation of `t` and what the transaction wrote since."""
        try:
            if self.log is not None:
                self.log.rollback_to(mark)
        except BaseException:
            self.abort(tx)
            raise
        del self.tables[t.cid]
        self.names.pop(t.name, None)
        tx.tables.discard(t.cid)
        self.next_cid = t.cid
        tx.frames, tx.rows_changed = n_frames, rows_changed

    def insert(self, tx: "Transaction", t: Table, ids, columns: dict) -> None:
        """New documents; DuplicateIdError if an id is live (or twice in the batch).
        Fields absent from `columns` get their default (else null);
        NotNullViolationError if a not_null field would be null."""
        self._check_writing(tx)
        self._check_current(t)
        columns = fill_embedded(t.schema, complete_columns(t.schema, columns, len(ids), t.name),
                                len(ids))
        t.check_new_ids(_keys(ids))
        t.check_index_values(columns, len(ids))
        self.append_rows(tx, t, ids, columns)

    def upsert(self, tx: "Transaction", t: Table, ids, columns: dict,
               named: dict | None = None) -> None:
        """New documents merged into the live document of their id, if any: a
        field a row names takes the row's value (None: null), a field it does not
        name keeps the live document's (SQL's ON CONFLICT (id) DO UPDATE SET of
        the named fields); an id not live is inserted as `insert` does (defaults,
        not_null). An embedded vector a row does not give is made again from a
        new source text the row gives, and kept when the row gives the stored
        text or none.

        `named`: field -> bool mask of the rows of the batch that name it (a field
        of `columns` not in `named` is named by every row, a field absent from
        `columns` by none); a row that does not name a field of `columns` holds
        its default there, or null."""
        self._check_writing(tx)
        self._check_current(t)
        n = len(ids)
        keys = _keys(ids)
        check_unique(keys)
        old = t.live_rows(keys)
        live = old >= 0
        allow = None
        if live.any():
            columns, allow = _merged(t, old, live, columns, named or {})
        columns = fill_embedded(t.schema, complete_columns(t.schema, columns, n, t.name), n,
                                allow=allow)
        t.check_index_values(columns, n)
        self.delete(tx, t, old[live])
        self.append_rows(tx, t, ids, columns)

    def replace(self, tx: "Transaction", t: Table, ids, columns: dict) -> None:
        """New documents, each replacing the whole live document with its id, if
        any (fields absent from `columns` and not_null ones as in `insert`)."""
        self._check_writing(tx)
        self._check_current(t)
        columns = fill_embedded(t.schema, complete_columns(t.schema, columns, len(ids), t.name),
                                len(ids))
        keys = _keys(ids)
        check_unique(keys)
        t.check_index_values(columns, len(ids))
        old = t.live_rows(keys)
        self.delete(tx, t, old[old >= 0])
        self.append_rows(tx, t, ids, columns)

    def update(self, tx: "Transaction", t: Table, rows: np.ndarray, values: dict) -> None:
        """New versions of live `rows`: `values` (field -> (values, nulls) of one
        row) set, every other field kept; NotNullViolationError if one of
        `values` is null in a not_null field."""
        n = len(rows)
        self.rewrite(tx, t, rows, {name: (_repeat(vals, n), _repeat(nulls, n))
                                   for name, (vals, nulls) in values.items()})

    def rewrite(self, tx: "Transaction", t: Table, rows: np.ndarray, values: dict) -> None:
        """New versions of live `rows`: `values` (field -> (values, nulls), one per
        row) set, every other field kept (SQL's UPDATE, whose values differ by row)."""
        self._check_writing(tx)
        self._check_current(t)
        _check_rows(t, rows)
        if not len(rows):
            return
        # the named fields, their indexes left out (a partial one's predicate may read
        # a field not named here, which this schema would refuse to hold)
        given = Schema({k: f if f.vector_index is None else replace(f, vector_index=None,
                                                                   more_indexes=())
                        for k, f in t.schema.fields.items() if k in values})
        check_not_null(given, values, len(rows))
        cols = {}
        for name, col in t.columns.items():
            cols[name] = values[name] if name in values else col.take(rows)
        stale = [name for name in t.schema.embedded
                 if name not in values and t.schema.fields[name].source in values]
        if stale:
            cols = fill_embedded(t.schema, cols, len(rows), stale)
        # the whole new row version, as PostgreSQL checks it: a NOT VALID check holds
        # an old row to it at its next write, whichever field that write sets
        check_constraints(t.schema, cols, len(rows), t.name)
        t.check_index_values(cols, len(rows))
        ids = t.id_values(rows)
        self.delete(tx, t, rows)
        self.append_rows(tx, t, ids, cols)

    def delete(self, tx: "Transaction", t: Table, rows: np.ndarray) -> None:
        """Live `rows` die."""
        self._check_current(t)
        _check_rows(t, rows)
        if len(rows):
            self.write(tx, frames.Delete(t.cid, np.asarray(rows, np.int64)),
                       rows_changed=len(rows))

    def create_index(self, tx: "Transaction", t: Table, field: str, spec,
                     parts=None) -> None:
        """A vector index, linked after commit by the maintainer; with `parts` (an
        IVF index's encoder of row parts, IvfIndex.encode's: integrations/ray.py)
        trained and filled now, in this thread, over the rows committed so far,
        the maintainer held meanwhile so that it builds nothing beside it."""
        self._check_writing(tx)
        self._check_current(t)
        f = t.schema.fields.get(field)
        if f is not None and not further_index(f, spec):
            raise SchemaError(f"{field!r} already has a vector index (a further one "
                              "needs a name of its own: HNSW(name=...))")
        if f is not None and f.kind == "vector":
            spec = fit_index(spec, f.dtype, f.dim)   # before the frame: replay applies it
            check_index_where(spec, t.schema.fields)
            self._check_indexable(t, field, spec, tx.branch)
        self._stamp(f is not None and f.vector_index is not None)    # a further index
        if parts is None or self.maintainer is None:
            self.write(tx, frames.CreateIndex(t.cid, field, spec))
            return
        with self.maintainer.hold():
            self.write(tx, frames.CreateIndex(t.cid, field, spec))
            ix = t.vector_index_of(field, spec.name or "") or t.vector_indexes[field]
            ix.extend(t.columns[field], t.committed_n, parts)

    # ---- schema changes (DDL): one frame each, no row rewritten --------------------
    # Like every write they join the transaction and its rollback undoes them.
    # The schema is the current one for every read, as_of included (table.py).

    def drop_collection(self, tx: "Transaction", t: Table) -> None:
        """The collection is gone for every version (an as_of read of it is
        NotFoundError); its name can be reused, with a new cid."""
        self._check_writing(tx)
        self._check_current(t)
        self.write(tx, frames.DropCollection(t.cid))

    def add_column(self, tx: "Transaction", t: Table, name: str, field: Field) -> None:
        """A new field; the documents so far (every version of them) read as its
        default, or null. NotNullViolationError for a not_null field without a
        default on a collection that has documents."""
        self._check_writing(tx)
        self._check_current(t)
        validate_name(name, "field")
        if not isinstance(field, Field):
            raise SchemaError(f"a field is a vv.Field, got {brief(field)}")
        if name == "id" or name in t.schema.fields:
            raise SchemaError(f"{t.name!r} already has a field named {name!r}")
        Schema({**t.schema.fields, name: field}, t.schema.id_kind)   # an embedder's source
        check_embedders({name: field}, tx.server_files)
        # the schema is every branch's: the documents any branch holds read the new field
        held = (field.not_null or field.check is not None) and self._held(t, tx.branch).any()
        if field.not_null and field.default is None and held:
            raise NotNullViolationError(f"field {name!r} is not null and has no default, "
                                        f"and {t.name!r} has documents")
        if field.check is not None and held:
            # the documents so far take its default (or null): it must pass its checks
            check_constraints(Schema({name: field}), {} if field.default is None
                              else {name: field.default_column(1)}, 1, t.name)
        self._stamp(_newer_fields([field]))
        self.write(tx, frames.AddColumn(t.cid, t.n, name, field))

    def drop_column(self, tx: "Transaction", t: Table, name: str) -> None:
        """The field, its values and its indexes are gone, for every version, and the
        CHECK constraints that read it, from the other fields they read too (as
        PostgreSQL drops them)."""
        self._check_writing(tx)
        self._check_current(t)
        name = _field_of(t, name, "dropped")
        filled = [k for k, f in t.schema.fields.items() if f.source == name]
        if filled:
            raise SchemaError(f"{name!r} is the text that vector field {filled[0]!r} embeds; "
                              "drop that field first")
        self._drop_checks(tx, t, {constraint_name(t.name, name, c)
                                  for c in t.schema.fields[name].check or ()}, but=name)
        self.write(tx, frames.DropColumn(t.cid, name))

    def rename_column(self, tx: "Transaction", t: Table, old: str, new: str) -> None:
        """The field (its values and indexes) takes the name `new`, for every version.
        Its CHECK conditions that carry no name (an older file's, the Python API's
        (op, value)) are named from the table and field: they take the name they
        have now first, `{table}_{old}_check`, so that they keep it (PostgreSQL's
        constraint keeps its name) and never become another constraint's."""
        self._check_writing(tx)
        self._check_current(t)
        old = _field_of(t, old, "renamed")
        validate_name(new, "field")
        if new == "id" or new in t.schema.fields:
            raise SchemaError(f"{t.name!r} already has a field named {new!r}")
        check = t.schema.fields[old].check or ()
        pinned = tuple(c if len(c) > 2 or len(constraint_name(t.name, old, c)) > 63
                       else (*c, constraint_name(t.name, old, c)) for c in check)
        if pinned != check:
            self._stamp()
            self.write(tx, frames.SetCheck(t.cid, old, pinned))
        self.write(tx, frames.RenameColumn(t.cid, old, new))

    def add_check(self, tx: "Transaction", t: Table, conditions, constraint: str,
                  validate: bool = True) -> None:
        """CHECK `conditions` ((field, op, value), AND-ed: one field's `check` each)
        added to the fields' checks as the constraint named `constraint` (SQL's ALTER
        TABLE ADD CHECK; 42710 where the table has a constraint of that name); with
        `validate` the rows any branch holds (this transaction's as it leaves them)
        are checked first, CheckViolationError naming `constraint` if one fails
        (nothing changed)."""
        self._check_writing(tx)
        self._check_current(t)
        if constraint in t.schema.constraint_names(t.name):
            raise SqlError("42710", f'constraint "{constraint}" for relation "{t.name}" '
                                    "already exists")
        by_field: dict = {}
        several = len({c[0] for c in conditions}) > 1     # (each keeps its place)
        for at, (name, op, value) in enumerate(conditions):
            by_field.setdefault(_field_of(t, name, "checked"), []).append(
                (op, value, constraint, at) if several else (op, value, constraint))
        fields = {name: replace(t.schema.fields[name], check=(
            *(t.schema.fields[name].check or ()), *conds)) for name, conds in by_field.items()}
        if validate:
            rows = np.flatnonzero(self._held(t, tx.branch))
            only = Schema({name: replace(f, check=tuple(by_field[name]))
                           for name, f in fields.items()})
            for at in range(0, len(rows), _CHECK_CHUNK):
                part = rows[at:at + _CHECK_CHUNK]
                try:
                    check_constraints(only, {name: t.columns[name].take(part)
                                             for name in only.fields}, len(part), t.name)
                except CheckViolationError:
                    raise CheckViolationError(f'check constraint "{constraint}" of relation '
                                              f'"{t.name}" is violated by some row') from None
        self._stamp()
        for name, f in fields.items():
            self.write(tx, frames.SetCheck(t.cid, name, f.check))

    def drop_check(self, tx: "Transaction", t: Table, constraint: str) -> None:
        """The CHECK constraint named `constraint` is gone from the fields it reads
        (SQL's ALTER TABLE DROP CONSTRAINT): 42704 where the table has none of that
        name."""
        self._check_writing(tx)
        self._check_current(t)
        if constraint not in t.schema.constraints(t.name):
            raise SqlError("42704", f'constraint "{constraint}" of relation "{t.name}" '
                                    "does not exist")
        self._drop_checks(tx, t, {constraint})

    def _drop_checks(self, tx: "Transaction", t: Table, constraints: set,
                     but: str | None = None) -> None:
        """The conditions of the CHECK constraints named `constraints` gone from the
        fields (but the field `but`)."""
        for name in t.schema.checked:
            f = t.schema.fields[name]
            kept = tuple(c for c in f.check if constraint_name(t.name, name, c) not in constraints)
            if len(kept) < len(f.check) and name != but:
                self._stamp()
                self.write(tx, frames.SetCheck(t.cid, name, kept or None))

    def create_scalar_index(self, tx: "Transaction", t: Table, field: str, kind: str,
                            name: str | None = None) -> None:
        """A "hash" (equality) or "sorted" (ranges too) index on a scalar field,
        built over the rows so far; `name` names it (SQL's DROP INDEX finds it by it)."""
        self._check_writing(tx)
        self._check_current(t)
        if kind not in ("hash", "sorted"):
            raise SchemaError(f"a scalar index is 'hash' or 'sorted', got {brief(kind)}")
        f = t.schema.fields[_field_of(t, field, "indexed")]
        if f.kind in UNINDEXED_KINDS:
            raise SchemaError(f"a {f.kind} field cannot carry a {kind} index")
        if f.index is not None:
            raise SchemaError(f"{field!r} already has a {f.index} index")
        if name is not None:
            validate_name(name, "index")
        self.write(tx, frames.CreateScalarIndex(t.cid, field, kind, name))

    def create_text_index(self, tx: "Transaction", t: Table, field: str,
                          ts_config: str) -> None:
        """A full-text index on a text field without one, its words analyzed as
        PostgreSQL's configuration `ts_config` (text/tsconfig.py's CONFIGS)."""
        self._check_writing(tx)
        self._check_current(t)
        f = t.schema.fields[_field_of(t, field, "indexed")]
        if f.kind != "text":
            raise SchemaError(f"a full-text index is on a text field, not {f.kind}")
        if f.fts:
            raise SchemaError(f"{field!r} already has a full-text index")
        from ..text.tsconfig import check_config
        check_config(ts_config)
        self.write(tx, frames.CreateScalarIndex(t.cid, field, "fts", None, ts_config))

    def drop_index(self, tx: "Transaction", t: Table, field: str,
                   index: str | None = None) -> None:
        """Drop the field's index: its HNSW graph or its scalar index; `index`: the
        one of that name among its vector indexes (its own: a further one takes
        its place)."""
        self._check_writing(tx)
        self._check_current(t)
        field = _field_of(t, field, "unindexed")
        if field not in t.vector_indexes and field not in t.indexes:
            raise SchemaError(f"{field!r} has no index")
        f = t.schema.fields[field]
        if index is not None and index not in {s.name for s in f.vector_specs}:
            raise SchemaError(f"{field!r} has no index named {index!r}")
        further = index is not None and index != f.vector_index.name
        self.write(tx, frames.DropIndex(t.cid, field, index if further else None))

    def restore(self, tx: "Transaction", version: int) -> None:
        """Make every collection's documents what they were at `version`: the live
        rows that were not visible then die, the rows visible then and dead now
        are written again (their values, vectors included, as stored). History
        is kept, so a restore is undone by restoring the version before it."""
        self._check_writing(tx)
        view = self.catalog.view(tx.branch, version)
        plans = []
        for t in list(self.tables.values()):
            n = t.n
            then = t.view_mask(view, n)
            now = t.alive_mask(n)
            back = np.flatnonzero(then & ~now)
            plans.append((t, np.flatnonzero(now & ~then), back, self._fitting(t, back)))
        for t, gone, back, cols in plans:
            self.delete(tx, t, gone)
            if len(back):
                self.append_rows(tx, t, t.id_values(back), cols)

    def _fitting(self, t: Table, rows: np.ndarray) -> dict:
        """The columns of `rows`, rows of an older version that a branch holds again
        (a restore writes them again, a branch made at= that version holds them),
        each held to the schema as any new row is: a row written before a
        constraint or an expression index was made may not fit it (the checks
        that made those saw the rows some branch held then, not these).
        NotNullViolationError, CheckViolationError or VectorRangeError if one
        does not, before anything is written."""
        cols = {name: col.take(rows) for name, col in t.columns.items()}
        check_not_null(t.schema, cols, len(rows))
        check_constraints(t.schema, cols, len(rows), t.name)
        t.check_index_values(cols, len(rows))
        return cols

    # ---- branches (branches.py, merge.py) -----------------------------------------

    def create_branch(self, tx: "Transaction", name: str, at: int) -> int:
        """Fork `name` from the transaction's branch as of version `at`: the
        transaction, which must hold nothing else, becomes the new branch's first
        commit. Returns the branch id. A row it would hold that does not fit the
        schema now (written before a CHECK or an expression index was made)
        refuses it (_fitting's errors), nothing written."""
        self._check_writing(tx)
        if tx.frames:
            raise TransactionError("a branch is made in a transaction of its own")
        try:
            self.catalog.check_new_name(name)
        except SchemaError as e:
            raise OptionError(str(e)) from None
        self._check_fork(tx, name, at)
        self._stamp()
        bid, parent = self.catalog.next_id, tx.branch
        tx.branch = self.applying_branch = bid
        self.write(tx, frames.BranchOp("create", bid, name, parent, at))
        return bid

    def _check_fork(self, tx: "Transaction", name: str, at: int) -> None:
        """_fitting's error, naming the branch, where a row that branch `name`
        forked at `at` would hold does not fit the schema as it is now, which every
        branch shares: its rows are those its parent held at `at`, and those the
        parent no longer holds were not read by the checks of a CHECK or an
        expression index made since (_held: the rows live branches hold)."""
        if at >= self.read_version(None, tx.branch):
            return          # the parent's rows as they are: they fit
        view = self.catalog.view(tx.branch, at)
        for t in list(self.tables.values()):
            n = t.n
            rows = np.flatnonzero(t.view_mask(view, n) & ~t.alive_mask(n))
            try:
                for start in range(0, len(rows), _CHECK_CHUNK):
                    self._fitting(t, rows[start:start + _CHECK_CHUNK])
            except VarveError as e:     # (_fitting's: 23502, 23514, 22003)
                raise type(e)(f"branch {name!r} at version {at} would hold a row of "
                              f"{t.name!r} that its schema, changed since, refuses: "
                              f"{e}") from None

    def drop_branch(self, tx: "Transaction", branch: int) -> None:
        """Drop `branch`, a child of the transaction's branch (a commit there): its
        name is free again; its rows stay in the file, unseen, until a vacuum."""
        self._check_writing(tx)
        b = self.catalog.by_id[branch]
        if branch == MAIN:
            raise BranchError("main cannot be dropped")
        if b.parent != tx.branch:
            raise BranchError(f"{b.name!r} is dropped from its parent branch")
        children = [c.name for c in self.catalog.live() if c.parent == branch]
        if children:
            raise BranchError(f"branches {children} fork from {b.name!r}: drop them first")
        self.write(tx, frames.BranchOp("drop", branch))

    def merge(self, tx: "Transaction", source: int) -> None:
        """Write branch `source`'s changes onto the transaction's branch (merge.py)."""
        self._check_writing(tx)
        if source == tx.branch:
            raise BranchError("a branch cannot be merged into itself")
        if tx.frames:
            raise TransactionError("a merge is made in a transaction of its own")
        version = self.read_version(None, source)
        merge.merge(self, tx, source, version)
        if tx.frames:     # nothing to merge: no commit
            self.write(tx, frames.BranchOp("merge", tx.branch, source=source,
                                           source_version=version))

    def _check_indexable(self, t: Table, field: str, spec, branch: int) -> None:
        """VectorRangeError (22003) if a row that some branch holds now has a value
        the new index `spec` cannot hold, as PostgreSQL's CREATE INDEX refuses
        its live rows' (an earlier version's is left out of the index, as a
        null is)."""
        rows = t.unindexable_rows(field, spec)
        if not len(rows):
            return
        rows = rows[self._held(t, branch)[rows]]
        if len(rows):
            raise range_error(field, spec, t.columns[field].arena.data[rows[0]],
                              f"id {t.id_value(int(rows[0]))!r}")

    def _held(self, t: Table, branch: int) -> np.ndarray:
        """Rows [0, t.n) that some live branch holds now, `branch` (the writer's) as
        its open transaction leaves them: what a schema change must fit, since
        every branch shares the schema (and a merge brings a branch's rows in)."""
        n = t.n
        held = t.alive_mask(n)
        for b in self.catalog.live() if self.catalog.any else ():
            if b.id != branch:
                held |= t.view_mask(self.catalog.view(b.id, HEAD), n)
        return held

    def _check_current(self, t: Table) -> None:
        """NotFoundError for a table object its collection's drop left behind."""
        if self.tables.get(t.cid) is not t:
            raise NotFoundError(f"collection {t.name!r} was dropped")

    def append_rows(self, tx: "Transaction", t: Table, ids, columns: dict) -> None:
        if len(ids):
            if t.schema.id_kind != "text":
                ids = np.asarray(ids, np.int64)
            self.write(tx, frames.Insert(t.cid, t.n, ids, columns), rows_changed=len(ids))

    # ---- transactions ----------------------------------------------------------

    def begin(self, timeout: float | None = None, branch: int = MAIN,
              server_files: bool = True) -> Transaction:
        """Open the write transaction on `branch`, waiting up to `timeout` seconds
        (default: the connection's lock_timeout) while another session holds it;
        server_files=False: a transaction that may not make a field whose embedder
        loads a model from this machine's files."""
        self.ensure_writable()
        timeout = self.lock_timeout if timeout is None else timeout
        tx = Transaction(self, 0)
        if not self.writer.acquire(tx, timeout):
            raise LockTimeoutError(f"another session held the write transaction for "
                                   f"{timeout:g} s; commit or roll that one back first")
        try:
            self.ensure_writable()     # closed while this one waited
            b = self.catalog.by_id.get(branch)
            if b is None or b.dropped:
                raise BranchError(f"branch {b.name if b else branch!r} was dropped")
            if self.log is not None:
                if self._generation != self.log.generation:
                    self.reload()
                failure = self.log.failure
                if failure is not None:   # a background (batch-mode) sync's: reported once
                    self.log.failure = None
                    raise failure
                self.log.begin()
        except BaseException:
            self.writer.release(tx)
            raise
        tx.version = self.written + 1
        tx.next_cid = self.next_cid     # as loaded: a reload above may have changed it
        tx.branch = branch
        tx.server_files = server_files
        self._applying(tx.version, branch)
        self._tx = tx
        return tx

    def commit(self, tx: Transaction) -> int:
        """Make the transaction durable and visible. Returns its version."""
        if self.closed and tx.done:
            raise ClosedError("the database was closed inside this transaction, which was "
                              "rolled back")
        if tx is not self._tx or tx.done:
            raise TransactionError("this transaction is not open")
        if tx.aborted:
            self._end(tx)
            raise TransactionAbortedError("a write of this transaction failed, so it was "
                                          "rolled back and cannot commit")
        try:
            self._check_synced(tx)
        except TransactionAbortedError:
            self._end(tx)
            raise
        if not tx.frames:   # nothing was written: no version, no fsync
            self._end(tx)
            return self.written
        try:
            if self.log is not None:
                try:
                    rec, end, generation = self.log.commit(tx.rows_changed,
                                                           branch=tx.branch)
                except BaseException:
                    self.abort(tx)
                    raise
                ts, chain = rec.timestamp_us, rec.chain
            else:
                ts, chain = time.time_ns() // 1000, b""
            self.history.append(Commit(tx.version, ts, chain, tx.rows_changed, tx.branch))
            self.written = tx.version
            for cid in tx.tables:
                if cid in self.tables:      # not dropped
                    self.tables[cid].end()
        finally:
            self._end(tx)
        if self.log is not None:
            try:
                self.log.sync_to(end, generation)
            except StorageError:
                self._reload_if_free()
                raise
        with self._publish:
            self.visible = max(self.visible, tx.version)
            self._notify_published()
        self._link(tx.tables)
        if self.retention is not None:
            self.retention.after_commit(tx.rows_changed)
        return tx.version

    def _end(self, tx: Transaction) -> None:
        tx.done = True
        self._tx = None
        try:
            self.reload()       # a sync failed while it was open: back before it's let go
        finally:
            self.writer.release(tx)

    # ---- a failed sync -----------------------------------------------------------
    # A commit is written, the writer lock let go, then synced (group commit), so a
    # transaction may begin on a commit whose sync then fails. The log puts the
    # file back at the last durable commit and aborts that transaction's writes;
    # memory follows under the writer lock: the failed committer reloads at once
    # if the lock is free (never waiting for it), else its holder does at its next
    # call (_check_synced) or at its end (_end), as begin, checkpoint and vacuum
    # do first. No transaction reads or writes the failed state after the
    # failure, and none waits on another's for it.

    def _stale(self) -> bool:
        """Did a sync fail since the state was loaded (memory not yet back)?"""
        return self.log is not None and self._generation != self.log.generation

    def _check_synced(self, tx: Transaction) -> None:
        """TransactionAbortedError if a sync failed since `tx` began: a commit it was
        built on was undone, so it is undone too, and the state goes back to the
        last durable commit (its writer lock held) before anything reads it."""
        if self._stale():
            self.abort(tx)
            self.reload()
            raise TransactionAbortedError(
                "a commit this transaction was built on failed to sync and was undone, "
                "so this transaction was rolled back: roll it back and start again")

    def _reload_if_free(self) -> None:
        owner = this_thread()
        if self.writer.acquire(owner, 0):
            try:
                self.reload()
            finally:
                self.writer.release(owner)

    def abort(self, tx: Transaction) -> None:
        """Undo the transaction in memory and in the file; it stays open, aborted."""
        if tx.aborted:
            return
        tx.aborted = True
        try:
            if self.log is not None:
                self.log.rollback()
        finally:
            if tx.schema_changed:       # its undo puts columns and indexes back: as write
                with self.maintainer.hold():
                    self._undo_tables(tx)
            else:
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
        # dropped ones come back after the tables created in their place are gone
        for t in reversed(tx.dropped):
            if t.created != tx.version:
                t.rollback()
                self.tables[t.cid] = t
                self.names[t.name] = t.cid
        self.next_cid = tx.next_cid
        if tx.catalog is not None:       # a branch it made is unmade: forget its live maps
            self.catalog, tx.catalog = tx.catalog, None
            for t in self.tables.values():
                t.forget_branches(self.catalog.by_id)
        tx.tables, tx.dropped = set(), []

    def _link(self, cids) -> None:
        """Wake the maintainer if any of these tables (by cid; a dropped one is
        passed over) has committed rows its graphs lack.

        Open links in the background too: it never waits for a graph, and
        until one covers the rows, answers come from the exact tail scan."""
        if self.maintainer is None:
            return
        for cid in cids:
            t = self.tables.get(cid)
            if t is not None and t.deferred_behind():
                self.maintainer.wake()
                return

    def index_status(self, table: Table, field: str) -> dict:
        """Committed rows of `field`'s deferred index (a vector field's graph or lists,
        a text field's full-text index; a vector field's furthest behind, of several)
        indexed and not yet (row versions)."""
        m = self.maintainer
        if m is not None:
            m.raise_failure()
        linked = min(_indexed(table, field), table.committed_n)
        unlinked = table.committed_n - linked
        return {"field": field, "linked": linked, "unlinked": unlinked,
                "rows_per_s": None if m is None or m.rate is None else round(m.rate, 1),
                "eta_s": (0.0 if not unlinked else None) if m is None else m.eta(unlinked)}

    def wait_indexed(self, table: Table, field: str, timeout: float | None = None,
                     progress: bool | None = None) -> bool:
        """Wait until `field`'s deferred index (each of a vector field's) covers the
        rows committed when called (the maintainer's event, not a poll); False if
        `timeout` seconds passed first. A read-only engine links nothing: it
        answers at once. `progress`: a bar of the rows indexed meanwhile
        (reports.rows_bar)."""
        target = table.committed_n
        if self.maintainer is not None:
            start = _indexed(table, field)
            bar = rows_bar(target - start, f"{field}: waiting for its index", progress)

            def done() -> bool:         # (after each chunk the maintainer links)
                indexed = _indexed(table, field)
                if bar is not None:
                    bar.update(min(indexed, target) - start - bar.n)
                return indexed >= target
            try:
                self.maintainer.wait(done, timeout)
            finally:
                if bar is not None:
                    bar.close()
        self.index_status(table, field)     # raises a failure of the background work
        return _indexed(table, field) >= target

    def rollback(self, tx: Transaction) -> None:
        if tx is not self._tx or tx.done:
            return
        try:
            self.abort(tx)
        finally:
            self._end(tx)

    def begun_here(self) -> Transaction | None:
        """The open transaction if it began on the calling thread."""
        tx = self._tx
        return tx if tx is not None and tx.thread == threading.get_ident() else None

    # ---- reading ---------------------------------------------------------------

    def read_version(self, tx: Transaction | None = None, branch: int = MAIN) -> int:
        """The version a reader sees: its own open transaction's, else the newest
        published commit of `branch` (its fork's, if it has none since)."""
        if tx is not None and not tx.done:
            return tx.version
        visible = self.visible
        if not self.catalog.any:
            return visible
        view = self.catalog.view(branch, visible)
        for c in reversed(self.history):
            if c.version <= visible and view.holds(c.branch, c.version):
                return c.version
        return 0

    def snapshot(self, as_of=None, tx: Transaction | None = None,
                 branch: int | None = None) -> Snapshot:
        """What one read sees: a branch (None: `tx`'s, else main) as of a version
        (`as_of`: a version number or an aware datetime; None: the newest) and
        each table's row count, taken after it. `tx` is the reader's own open
        transaction, whose writes it sees."""
        self.ensure_open()
        if tx is not None and tx is self._tx and not tx.done:
            self._check_synced(tx)
        if branch is None:
            branch = tx.branch if tx is not None else MAIN
        return take_snapshot(self, as_of, tx, branch)

    def oldest_version(self) -> int:
        return self.history[0].version if self.history else 1

    def table(self, name: str) -> Table:
        if self.closed:       # (ensure_open inlined: every kept search asks for its table)
            self.ensure_open()
        cid = self.names.get(name)
        if cid is not None:
            try:
                return self.tables[cid]
            except KeyError:      # a load swapped in between the two reads dropped it
                pass
        raise NotFoundError(f"no collection named {name!r}")

    # ---- checkpoints and lifecycle ------------------------------------------

    def checkpoint(self, progress: bool | None = None, finish: bool = True) -> None:
        """Write the state as of the latest version so open loads it instead of
        replaying; first link every committed row (`finish`; a bar per `progress`),
        else the graphs are written as far as they are linked (the next open links
        the rest)."""
        self.ensure_writable()
        if self.begun_here() is not None:   # waiting for it here would wait forever
            raise TransactionError("checkpoint() inside a transaction: commit or roll back "
                                   "first")
        if self.log is None:
            return
        with self.writer.held(self.lock_timeout, "checkpoint()"):
            self.reload()
            if finish:
                self.maintainer.finish("checkpoint", progress)
            sb = self.log.file.superblock
            if sb and sb.checkpoint_version == self.written and not self._relink_needed():
                return
            parts, length, adopt = checkpoint.encode(self.tables, self.history, self.written,
                                                     self.log.end, self.next_cid, self.catalog)
            # nothing in memory changes until the checkpoint is durable
            self.log.write_checkpoint(parts, length, self.written)
            adopt()
            for t in self.tables.values():
                for _, vi in t.index_items():
                    if vi.PREFIX == "vx":
                        vi.checkpointed = vi.linked

    def vacuum(self, keep=None, progress: bool | None = None, graphs: str = "rebuild"):
        """Drop the row versions no kept version can see (vacuum.py)."""
        report = vacuum.vacuum(self, keep, progress, graphs)
        self.vacuums += 1
        return report

    def backup(self, dest: str, progress: bool | None = None) -> BackupInfo:
        """A consistent copy of the file as of its newest durable commit, taken
        while writes go on (storage/backup.py); fsynced and verified."""
        self.ensure_open()
        if self.log is None:
            raise OptionError("a ':memory:' database has no file to back up")
        end, version, _ = self.log.durable_head()
        n = backup.copy_prefix(self.log.file.fd, end, list(self.log.file.superblocks), dest,
                               progress)
        backup.check_copy(dest, version)
        self.backups += 1
        return backup.BackupInfo(dest, version, n)

    def backup_stream(self) -> tuple[int, int, Iterator[bytes]]:
        """backup() into a stream: (version, bytes, chunks), the chunks being the
        bytes a backup file holds, as of the newest durable commit, one chunk of
        storage/backup.STREAM_CHUNK at a time (what the server's GET /backup sends).
        The receiver checks the copy (it opens and verifies as backup()'s does)."""
        self.ensure_open()
        if self.log is None:
            raise OptionError("a ':memory:' database has no file to back up")
        end, version, _ = self.log.durable_head()
        chunks = backup.stream_prefix(self.log.file.fd, end, list(self.log.file.superblocks))
        self.backups += 1
        return version, end, chunks

    # ---- log shipping (a read replica: storage/shipping.py, varvedb/replica.py) ----

    def log_after(self, version: int, chain: bytes) -> tuple[int, int, Iterator[bytes]]:
        """The leader's side: (the newest durable version, how many bytes follow, the
        file's bytes from the end of commit `version` to that version's end, a chunk
        at a time). Raises
        LogMismatchError when this file does not hold commit `version` with chain
        hash `chain` (another file, a tampered one, a version a vacuum dropped)."""
        self.ensure_open()
        if self.log is None:
            raise OptionError("a ':memory:' database has no log to ship")
        end, newest, newest_chain = self.log.durable_head()
        log = self.log
        buf = log.file.map()
        start = None
        if version <= newest and buf is not None:
            # walk from the nearest known point at or below `version`
            known = [(F.LOG_START, 0, F.genesis_chain(log.file.file_id))]
            known += [(sb.log_end, sb.checkpoint_version, sb.chain)
                      for sb in log.file.superblocks if sb.checkpoint_offset]
            shipped = self._shipped
            if shipped is not None and shipped[0] is log.file:
                known.append(shipped[1:])
            known.append((end, newest, newest_chain))
            at, v, c = max((k for k in known if k[1] <= version and k[0] <= end),
                           key=lambda k: (k[1], k[0]))
            if v < version or c == chain:
                start = shipping.commit_end(memoryview(buf), at, v, end, version, chain)
        if start is None:
            raise LogMismatchError(
                f"this server's file does not hold version {version} with the chain hash "
                f"{chain.hex()[:16]}...: another file, a changed one, or a version a vacuum "
                f"dropped (the oldest kept is {self.oldest_version()}); re-seed from its "
                "backup")
        self._shipped = (log.file, end, newest, newest_chain)
        return newest, end - start, backup.read_chunks(log.file.fd, start, end)

    def follow(self, commits: list) -> None:
        """A read replica's side: append commits its leader made — each its frames
        [(kind, payload)] and the leader's commit record, checked against this file's
        chain by LogWriter.commit_shipped — make them durable with one sync, apply
        them and publish the newest. A commit that fails a check or a write leaves
        nothing of itself; those before it are kept, then its error is raised."""
        self.ensure_writable()
        log = self.log
        failure = None
        with self.writer.held():
            done = []
            for frames, rec in commits:
                log.begin()
                refs = []
                try:
                    for kind, payload in frames:
                        at = log.append(kind, [payload], len(payload))
                        refs.append(log_reader.FrameRef(kind, at - F.FRAME_HEADER_SIZE,
                                                        len(payload), b""))
                    end, generation = log.commit_shipped(rec)
                except BaseException as e:
                    log.rollback()
                    failure = e
                    break
                at = end - F.FRAME_HEADER_SIZE - F.pad(len(F.pack_commit(rec)))
                done.append(LoggedCommit(rec, refs, at, end))
            if done:
                log.sync_to(end, generation)      # one sync for them all
                buf = log.file.map()
                self._map = buf
                mv = memoryview(buf)
                for c in done:
                    self._replay(mv, c)
                for t in self.tables.values():
                    t.end()
                with self._publish:
                    self.written = self.visible = done[-1].record.version
                    self._notify_published()
        self._link(list(self.tables))
        if failure is not None:
            raise failure

    def wait_visible(self, version: int, timeout: float) -> bool:
        """Wait (at most timeout seconds) until a version newer than `version` is
        visible: a commit here, or one a replica followed. True when it is."""
        with self.published:
            self._watchers += 1
            try:
                return self.published.wait_for(lambda: self.visible > version, timeout)
            finally:
                self._watchers -= 1

    def _notify_published(self) -> None:
        """`visible` grew (the publish lock held): wake the threads waiting for it,
        if any (a Condition's notify is a few µs of Python a commit)."""
        if self._watchers:
            self.published.notify_all()

    def replace_file(self, new_path: str) -> None:
        """A read replica re-seeded: the whole file at new_path (a backup of the
        leader) is renamed over this one and loaded in its place."""
        self.ensure_writable()
        with self.writer.held():
            new = DatabaseFile(new_path)      # its lock, before it takes the name
            try:
                os.rename(new_path, self.path)
            except OSError as e:
                new.close()
                raise StorageError(f"{self.path}: could not rename {new_path} into place "
                                   f"({e.strerror or e}); the file is as it was", e) from e
            new.path = new.io.path = self.path
            vacuum.adopt_file(self, new)
            with self._publish:
                self.visible = self.written
                self._notify_published()
            fsync_dir(self.path)

    def _checkpoint_worthwhile(self) -> bool:
        """Would the next open replay much log, or rebuild graph links?"""
        sb = self.log.file.superblock
        since = self.log.end - (sb.log_end if sb and sb.checkpoint_offset else F.LOG_START)
        return since > CLOSE_CHECKPOINT_BYTES or (self._relink_needed() and self.written > 0)

    def _relink_needed(self) -> bool:
        """Has a graph linked rows since the last checkpoint (the next open would
        link them again)?"""
        return any(vi.linked != vi.checkpointed for t in self.tables.values()
                   for _, vi in t.index_items() if vi.PREFIX == "vx")

    def ensure_open(self) -> None:
        if self.closed:
            raise ClosedError("the database is closed")

    def ensure_writable(self) -> None:
        self.ensure_open()
        if self.readonly:
            raise ReadOnlyError(f"{self.path} was opened read-only")

    def close(self, wait: bool | None = None, progress: bool | None = None) -> None:
        """Close; first checkpoint if replaying the log since the last one would be slow.

        Rows not yet in a graph (the maintainer's work): `wait=True` links them
        all first (a bar per `progress`); False saves the graphs as far as they
        are linked, and the next writable open links the rest in the background
        (its rows are answered by exact scan meanwhile); None (the default) waits
        only when they are few (CLOSE_FINISH_ROWS)."""
        if self.closed:
            return
        tx = self.begun_here()
        if tx is not None:   # closing inside a transaction rolls it back
            self.rollback(tx)
        if self.retention is not None:
            self.retention.stop()
        maintainer = self.maintainer
        failure = linked = None
        # another session's open transaction is not ended under it, from here: it
        # may be in a write this very moment. Wait for it as a write would.
        with self.writer.held(self.lock_timeout, "close() (the database stays open)"):
            try:
                if maintainer is not None:
                    left = maintainer.unlinked()
                    try:
                        if wait or (wait is None and left <= CLOSE_FINISH_ROWS):
                            maintainer.finish("close", progress)   # whole graphs saved
                        elif left:
                            log.info("close: %d rows not yet in a graph are left for the "
                                     "next open to link (close(wait=True) links them "
                                     "now)", left)
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
                            self.checkpoint(finish=False)   # linked above, or on purpose not
                        except StorageError:
                            pass   # a checkpoint is only a shortcut: the log has it all
                    self.log.close()
            finally:
                if maintainer is not None:
                    maintainer.stop()   # before the tables go: it touches nothing after
                self.closed = True
                self.tables.clear()
                self._map = None
        if failure is not None:   # closed all the same, and nothing was lost
            if isinstance(failure, IndexMaintenanceError):
                raise failure
            raise IndexMaintenanceError(f"indexing rows (a vector or full-text index) failed "
                                        f"at close: {type(failure).__name__}: {failure}; "
                                        "nothing is lost: the next open indexes them"
                                        ) from failure


def _field_of(t: Table, name: str, what: str) -> str:
    if name == "id":
        raise SchemaError(f"the id field cannot be {what}")
    if not isinstance(name, str) or name not in t.schema.fields:
        raise UnknownFieldError(f"{t.name!r} has no field {brief(name)}; fields are "
                                f"{sorted(t.schema.fields)}")
    return name


def _merged(t: Table, old: np.ndarray, live: np.ndarray, columns: dict,
           named: dict) -> tuple[dict, dict]:
    """(columns, allow) of an upsert's batch over a table whose live `old` rows
    (old[i], where `live`) it merges into: each field a live row does not name
    gathered from its old row, column by column (Engine.upsert's `named`); an
    embedded vector is not gathered where its row names a new source text (one
    other than the live document's). `allow`: embedded field -> the rows whose
    vector may be made from the text (new rows, and those that name a new text),
    for fill_embedded."""
    n = len(old)
    fields = t.schema.fields
    out = dict(columns)
    allow = {}
    for name, f in fields.items():
        names = _naming(columns, named, name)
        if f.embed is not None:
            by_text = _naming(columns, named, f.source)
            if by_text is not None:     # a text named as it is: not a new text
                given = np.ones(n, bool) if by_text is _ALL else by_text
                same = unchanged_texts(t, f.source, old, given, columns[f.source])
                if same.any():
                    by_text = given & ~same
            allow[name] = (None if by_text is _ALL else ~live if by_text is None
                           else ~live | by_text)
            names = _either(names, by_text)
        if names is _ALL:
            continue
        keep = live if names is None else live & ~names
        rows = np.flatnonzero(keep)
        if not len(rows):
            continue
        column = t.columns[name]
        if len(rows) == n:              # every row live and silent here: one take
            out[name] = column.take(old)
            continue
        base = columns.get(name)
        if base is None:
            base = f.default_column(n) if f.default is not None else f.null_column(n)
        out[name] = _scattered(base, rows, *column.take(old[rows]))
    return out, allow


_ALL = object()       # every row of the batch names the field


def _naming(columns: dict, named: dict, name: str):
    """The rows of an upsert's batch that name `name`: _ALL, None (none), or a mask."""
    if name not in columns:
        return None
    mask = named.get(name)
    return _ALL if mask is None else np.asarray(mask, bool)


def _either(a, b):
    """The rows that name either of two fields (each as _naming answers)."""
    if a is _ALL or b is _ALL:
        return _ALL
    return b if a is None else a if b is None else a | b


def _scattered(base: tuple, rows: np.ndarray, vals, nulls) -> tuple:
    """A copy of the column `base` (values, nulls) with `rows` set to `vals`, `nulls`."""
    bvals, bnulls = base
    bnulls = np.array(bnulls, bool)
    bnulls[rows] = nulls
    if isinstance(bvals, list):
        bvals = list(bvals)
        for i, v in zip(rows.tolist(), vals):
            bvals[i] = v
    else:
        bvals = np.array(bvals)
        bvals[rows] = vals
    return bvals, bnulls


def checkpoint_breaks(path: str, mv, commits: list[LoggedCommit], superblocks
                      ) -> tuple[int, int, str] | None:
    """verify's check of the checkpoints the superblocks name (those open adopts):
    the log (`commits`, hashes checked, read from mv) replayed from its start in a
    bare read-only engine, and at each one's version the state it holds compared
    with the replay's (checkpoint.differs). A checkpoint is a cache of the log,
    and its own hash is no proof against an edit that recomputed it.

    Returns (version, offset, reason) of the first break, or None: a checkpoint
    that differs (its version + 1: the versions before it are intact), or a
    commit the replay refuses, or a checkpoint that does not load (a frame whose
    hash checks but whose contents do not: crafted; open passes such a
    checkpoint over and replays). Costs a replay up to the newest such
    checkpoint: the CPU and memory of an open that has no checkpoint."""
    want: dict[int, list] = {}
    for sb in superblocks:
        if sb.checkpoint_offset:
            want.setdefault(sb.checkpoint_version, []).append(sb)
    if not want:
        return None
    e = Engine(None, readonly=True)
    e.path = path

    def check(version: int):
        for sb in want.pop(version, ()):
            try:
                state = checkpoint.load(mv, sb.checkpoint_offset, sb)
            except CorruptFileError as err:
                return (version + 1, sb.checkpoint_offset, f"the checkpoint of version "
                        f"{version} does not load: {err}")
            why = checkpoint.differs(state, checkpoint.CheckpointState(
                version, e.tables, e.names, e.history, e.next_cid, e.catalog))
            if why is not None:
                return (version + 1, sb.checkpoint_offset, f"the checkpoint of version "
                        f"{version} does not hold the log's state ({why} differs)")
        return None

    found = check(0)
    for c in commits:
        if found is not None or not want:
            break
        try:
            e._replay(mv, c)
        except CorruptFileError as err:
            return c.record.version, c.offset, str(err)
        found = check(c.record.version)
    return found


def _keys(ids) -> list:
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)


def _repeat(vals, n: int):
    if n == 1:      # a one-row update: the coerced value is the row's own (a copy)
        return vals
    if isinstance(vals, list):
        return vals * n
    return np.repeat(vals, n, axis=0)


def check_timeout(timeout) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not 0 <= timeout < float("inf"):
        raise OptionError(f"a lock timeout is a non-negative number of seconds, "
                          f"not {brief(timeout)}")
    return float(timeout)


def _newer_fields(fields) -> bool:
    """Does any of these fields need file format 5, 6, 7 or 8 (a bytes field, a further
    index, a vector field's check, a check condition that names its constraint, holds
    its place in one or keeps how it was written)?"""
    return any(f.kind == "bytes" or f.more_indexes or (f.kind == "vector" and f.check)
               or any(len(c) >= 3 or c[0] in WRITTEN_OPS for c in f.check or ())
               for f in fields)


def _check_rows(t: Table, rows) -> None:
    """A write names rows of the table, one dimension: what replay would refuse
    as a corrupt frame is refused before it is written (a caller's slip must
    not brick the file)."""
    rows = np.asarray(rows)
    if rows.ndim != 1 or rows.dtype.kind not in "iu":
        bad = True
    elif len(rows) == 1:        # a one-row write: no two reductions' set-up
        bad = not 0 <= rows.item(0) < t.n
    else:
        bad = len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= t.n)
    if bad:
        raise VarveError(f"a write named rows outside [0, {t.n}) of {t.name!r}: refused, "
                         "nothing written")


def _indexed(table: Table, field: str) -> int:
    """The rows `field`'s deferred index covers: a vector field's furthest-behind
    index (of its own and its further ones), or a text field's full-text index."""
    vector = table.vector_choices(field)
    if vector:
        return min(ix.indexed for _, ix in vector)
    return table.text_indexes[field].indexed
