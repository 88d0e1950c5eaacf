"""`vacuum`: a compacted file that keeps the newest versions, renamed into place.

With K the oldest version kept (`keep`: a number of versions, a datetime, or
None for all of them; never before the last branch drop, as the new file holds
main's line only and no branch), the new file holds

1. an ANCHOR commit (storage/rewrite.py) with the base: the state as of K,
   replayed from the file itself up to K (a read-only engine, `until=K`), so a
   collection dropped or a field renamed after K is there as it was. Only the
   row versions visible at K are written, renumbered from 0, and a BASE frame
   records what the log called them (engine/rowmap.py). The commit record
   carries K's version, timestamp and chain hash, and the chain hash of K - 1;
2. the frames of versions K+1.. copied byte for byte, so every retained
   version keeps its digest and chain hash and `verify()` proves them from
   the anchor on; an external anchor taken at K - 1 or later still checks.

Row versions dead by K are gone, with their graph nodes: the graphs are
rebuilt from the kept rows when the new file is first opened here (which
also checkpoints it, so no later open relinks). The file is written beside
the old one as PATH.vacuum-<random> (never a name already taken: rewrite.py),
fsynced, locked, and renamed over PATH; a crash before the rename leaves the
old file whole (and the new one, which the next vacuum removes), after it the
new one. The writer lock is held
throughout: other writers wait (their timeout applies), readers of this
connection go on answering from the old state until the new one is loaded,
and readers in other processes until they refresh().
"""
from __future__ import annotations

import datetime
import functools
import os
import threading
import time
import warnings

import numpy as np

from ..errors import (BranchError, OptionError, StorageError, TransactionError,
                      VersionNotFoundError)
from ..schema import brief, is_int
from ..index.vector_index import HnswVectorIndex
from ..storage import format as F
from ..storage import log_reader
from ..storage.backup import remove_quietly as _remove
from ..storage.file import DatabaseFile, fsync_dir
from ..storage.log_writer import LogWriter
from ..storage.rewrite import NewLog, new_path, remove_leftovers
from . import frames
from .rowmap import log_n
from .snapshot import resolve
from .branches import HEAD, MAIN, main_view
from ..reports import VacuumReport   # noqa: F401  (plain data: reports.py)

PROGRESS_FROM = 100_000  # base rows from which a bar is shown




def oldest_kept(engine, keep) -> int:
    """K for `keep`: None (every version held), a count >= 1 of the newest
    versions, or an aware datetime (the version visible then, and every later one);
    never after the oldest version an open block reads (engine/pins.py)."""
    history = engine.history
    if not history:
        return 0
    oldest, newest = history[0].version, history[-1].version
    if keep is None:
        return oldest
    if isinstance(keep, datetime.datetime):
        try:
            v = resolve(engine, keep, newest)
        except VersionNotFoundError:   # before the history held: every version stays
            v = oldest
    elif not is_int(keep) or keep < 1:
        raise OptionError(f"keep is a number of versions >= 1, an aware datetime, or None "
                          f"(keep every version), got {brief(keep)}")
    else:
        v = newest - int(keep) + 1
    pinned = engine.pins.oldest()
    if pinned is not None:
        v = min(v, pinned)
    return max(v, oldest)


def check_pins(engine, k: int) -> None:
    """TransactionError if an open block reads a version before k (one that began
    before the last branch drop, or while this vacuum chose k): the vacuum
    would drop what it reads."""
    pinned = engine.pins.oldest()
    if pinned is not None and pinned < k:
        raise TransactionError(f"vacuum would drop version {pinned}, which an open "
                               f"REPEATABLE READ block reads (the state of its BEGIN), as "
                               f"it keeps version {k} on: end that block first; the file "
                               "is as it was")


GRAPHS = ("rebuild", "repair")


def vacuum(engine, keep, progress: bool | None = None, graphs: str = "rebuild"
           ) -> VacuumReport:
    engine.ensure_writable()
    if engine.log is None:
        raise OptionError("a ':memory:' database has no file to vacuum")
    if engine.begun_here() is not None:
        raise TransactionError("vacuum() inside a transaction: commit or roll back first")
    if graphs not in GRAPHS:
        raise OptionError(f"graphs is 'rebuild' or 'repair', not {brief(graphs)}")
    t0 = time.perf_counter()
    path = engine.path
    with engine.writer.held(engine.lock_timeout, "vacuum()"):
        engine.reload()
        k = oldest_kept(engine, keep)
        branched = [b.name for b in engine.catalog.live() if b.id != MAIN]
        if branched:
            raise BranchError(f"vacuum keeps main's history only: merge or drop the "
                              f"branches {branched} first")
        # The new file holds main's line only, with no branches: a dropped branch's
        # commits, and the frames on main that name it (its merges, its drop), have
        # nothing to replay onto there, so the base is at least the last drop's state
        # (all of them come before it) and the branch's versions go with the older ones.
        k = max(k, max((b.dropped for b in engine.catalog.by_id.values()), default=0))
        check_pins(engine, k)
        before = engine.log.end     # bytes in use (the file is preallocated past them)
        if k == 0:                 # no commit yet: nothing to keep or drop
            return VacuumReport(0, 0, 0, 0, before, before, time.perf_counter() - t0)
        remove_leftovers(path, engine.log.file.file_id)
        tmp = new_path(path)
        try:
            kept, dropped, rows = _write(engine, k, tmp, progress)
            prepare = None
            if graphs == "repair":
                engine.maintainer.finish()     # the old graphs cover every row
                prepare = functools.partial(_repair_graphs, engine, rows)
            fresh = type(engine)(tmp, durability=engine.log.durability, prepare=prepare)
            try:
                fresh.checkpoint()     # links every kept row: the graphs are rebuilt
            finally:
                fresh.close()
            check_pins(engine, k)      # a block that began while the file was written
            new = DatabaseFile(tmp)    # its lock, before the file takes the name
        except BaseException as e:
            if not isinstance(e, FileExistsError):     # (O_EXCL: never another's file)
                _remove(tmp)
            if isinstance(e, OSError) and not isinstance(e, StorageError):
                # the new file's writes: the old file is untouched
                raise StorageError(f"{path}: vacuum failed ({e.strerror or e}); the file is "
                                   "as it was", e) from e
            raise
        try:
            os.rename(tmp, path)
        except OSError as e:
            new.close()
            _remove(tmp)
            raise StorageError(f"{path}: vacuum could not rename its new file into place "
                               f"({e.strerror or e}); the file is as it was", e) from e
        new.path = new.io.path = path
        adopt_file(engine, new)        # the name is the new file's now, whatever follows
        after = engine.log.end
        try:
            fsync_dir(path)
        except OSError as e:
            raise StorageError(f"{path}: the vacuumed file is in place, but syncing its "
                               f"folder failed ({e.strerror or e}): a power cut could still "
                               "bring the old one back", e) from e
    return VacuumReport(k, engine.written, kept, dropped, before, after,
                        time.perf_counter() - t0)


def _write(engine, k: int, tmp: str, progress) -> tuple[int, int, dict]:
    """Write the new file at tmp: the base as of k, then the commits after it.
    Returns (rows kept, rows dropped, cid -> the engine's rows the new file holds,
    in its order)."""
    file = engine.log.file
    buf = file.map()    # as it is now: the engine's own map ends where its open found the file
    mv = memoryview(buf) if buf is not None else memoryview(b"")
    scan = log_reader.scan(mv, F.LOG_START, 0, F.genesis_chain(file.file_id),
                           file.superblocks, check_payload=False)
    by_version = {c.record.version: c for c in scan.commits}
    log = NewLog(tmp, file.file_id, file.created_us)
    try:
        scratch = type(engine)(path=engine.path, readonly=True, until=k)
        try:
            kept, dropped, alive = _write_base(scratch, log, progress)
            at_k = {cid: t.n for cid, t in scratch.tables.items()}
        finally:
            scratch.close()
        rec = by_version[k].record
        log.anchor(k, rec.timestamp_us, rec.rows_changed, rec.prev_chain, rec.chain)
        runs: list[list[int]] = []
        for c in scan.commits:
            if c.record.version <= k:
                continue
            start = c.frames[0].offset if c.frames else c.offset
            if runs and runs[-1][1] == start:
                runs[-1][1] = c.end
            else:
                runs.append([start, c.end])
        for start, end in runs:
            log.copy(file.fd, start, end, progress)
        log.finish()
    finally:
        log.close()
    # the base's rows, then every row the copied commits add (memory numbering)
    rows = {cid: np.concatenate([alive[cid], np.arange(at_k[cid], t.n, dtype=np.int64)])
            for cid, t in engine.tables.items() if cid in alive}
    return kept, dropped, rows


def _write_base(scratch, log: NewLog, progress) -> tuple[int, int, dict]:
    """The frames of the state as of the scratch engine's version: each table,
    its rows alive then (renumbered from 0), and the BASE frame that maps them."""
    tables = [scratch.tables[cid] for cid in sorted(scratch.tables)]
    # main's rows alive then: a dropped branch's rows go with its history
    alive = {t.cid: np.flatnonzero(t.view_mask(main_view(HEAD), t.n)) for t in tables}
    total = sum(len(r) for r in alive.values())
    bar = None
    if progress or (progress is None and total >= PROGRESS_FROM):
        from tqdm import tqdm
        bar = tqdm(total=total, unit="rows", desc="vacuum: base",
                   disable=None if progress is None else False)
    base: dict = {}
    try:
        for t in tables:
            log.frame(*_encoded(frames.CreateCollection(t.cid, t.name, t.schema)))
            # one INSERT per table: each vector arena is one run in the new file,
            # which its checkpoints then reference in place (checkpoint.py)
            rows = alive[t.cid]
            if len(rows):
                ids = t.id_values(rows)
                if t.schema.id_kind != "text":
                    ids = np.asarray(ids, np.int64)
                cols = {name: col.take(rows) for name, col in t.columns.items()}
                # text, json and scalars compressed; vectors raw, so they can be mapped
                raw = {f"v:{name}" for name, f in t.schema.fields.items() if f.kind == "vector"}
                log.frame(*_encoded(frames.Insert(t.cid, 0, ids, cols),
                                    packed=lambda a, raw=raw: a not in raw))
                del cols
            if bar is not None:
                bar.update(len(rows))
            kept = rows if t.rowmap is None else t.rowmap.to_log(rows)
            base[t.cid] = (kept, log_n(t.rowmap, t.n), t.next_int_id)
        log.frame(*_encoded(frames.Base(scratch.next_cid, base)))
    finally:
        if bar is not None:
            bar.close()
    n_all = sum(t.n for t in tables)
    return total, n_all - total, alive


def _repair_graphs(engine, rows: dict, fresh) -> None:
    """The vacuumed file's HNSW graphs from the engine's own, repaired
    (HnswIndex.repaired) instead of rebuilt; the rows past what the old graph
    held are linked after, as any new rows."""
    for cid, t in fresh.tables.items():
        old = engine.tables.get(cid)
        if old is None or cid not in rows:
            continue
        kept = rows[cid]
        before = dict(old.index_items())
        for label, vi in t.index_items():     # (a field's further graphs "field@name")
            was = before.get(label)
            if vi.kind != "hnsw" or was is None or was.kind != "hnsw" or was.spec != vi.spec:
                continue
            name = label.partition("@")[0]
            arena, norms = t.index_column(name, t.n, vi).frozen(t.n)
            was.check_loaded()      # the repair's kernels read the old graph
            graph = was.graph.repaired(kept[kept < was.linked], arena, norms)
            t.put_index(label, HnswVectorIndex(name, vi.dim, vi.metric, vi.spec, graph,
                                               int(np.searchsorted(kept, was.linked))))


def _encoded(frame, packed=None) -> tuple[int, list, int]:
    parts, length, _ = frames.encode(frame, packed=packed)
    return frame.KIND, parts, length


def adopt_file(engine, new: DatabaseFile) -> None:
    """The engine leaves the old file for the new one (same path, locked)."""
    old = engine.log
    engine.log = LogWriter(new, old.durability, old.batch_ms)
    # No final sync of the old file: the path names the new one, which holds and has
    # synced every commit. A failure there must not stop the engine from loading the
    # new file: it would append at the new log's start with the old file's state.
    old.close(sync=False)
    # The state is loaded whole and then replaces the old (load_state): readers see
    # one or the other (cids are the same).
    with engine.maintainer.hold():   # it must not link into the tables replaced here
        engine.load_state()



class Retention:
    """Automatic vacuum (`connect(path, retain=..., retain_dead=...)`), off by default.

    After commits have changed rows amounting to 1/16 of the rows held (so the
    count below costs O(1) per changed row), the row versions a vacuum with
    `keep` would drop are counted; when they pass `dead` of all row versions,
    a vacuum runs on a thread of its own, so the commit that tipped it returns
    at once. `keep` is a number of versions or a timedelta (versions newer than
    that, and the one visible at its start). None runs while a branch other than
    main lives (a vacuum keeps main's history only). A failure is warned about; the
    file is then as it was (vacuum is all or nothing)."""

    def __init__(self, engine, keep, dead: float = 0.5):
        if keep is None or not (isinstance(keep, datetime.timedelta) and keep.total_seconds() >= 0
                                or is_int(keep) and keep >= 1):
            raise OptionError(f"retain is a number of versions >= 1 or a datetime.timedelta, "
                              f"got {brief(keep)}")
        if isinstance(dead, bool) or not isinstance(dead, (int, float)) or not 0 < dead < 1:
            raise OptionError(f"retain_dead is a fraction of the row versions in (0, 1), "
                              f"got {brief(dead)}")
        self.engine, self.keep, self.dead = engine, keep, float(dead)
        self.changed = 0
        self.thread: threading.Thread | None = None

    def _keep_now(self):
        if isinstance(self.keep, datetime.timedelta):
            return datetime.datetime.now(datetime.timezone.utc) - self.keep
        return int(self.keep)

    def after_commit(self, rows_changed: int) -> None:
        e = self.engine
        self.changed += rows_changed
        total = sum(t.n for t in e.tables.values())
        if self.changed * 16 < total or (self.thread is not None and self.thread.is_alive()):
            return
        self.changed = 0
        if any(b.id != MAIN for b in e.catalog.live()):
            return      # a vacuum would refuse: it waits until the branches are merged or dropped
        if total and self.droppable() >= self.dead * total:
            self.thread = threading.Thread(target=self._run, name="varvedb-retention",
                                           daemon=True)
            self.thread.start()

    def droppable(self) -> int:
        """Row versions dead by the oldest version `keep` keeps."""
        e = self.engine
        k = oldest_kept(e, self._keep_now())
        return sum(int(np.count_nonzero(t.died.data[:t.n] <= k)) for t in e.tables.values())

    def _run(self) -> None:
        try:
            vacuum(self.engine, self._keep_now(), progress=False)
        except Exception as exc:    # noqa: BLE001 — reported, and the file is unchanged
            if not self.engine.closed:
                warnings.warn(f"automatic vacuum failed: {type(exc).__name__}: {exc}",
                              RuntimeWarning, stacklevel=1)

    def stop(self) -> None:
        """Wait for a vacuum under way (close calls it before it takes the lock)."""
        if self.thread is not None:
            self.thread.join()
