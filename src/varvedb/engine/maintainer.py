"""The index maintainer: extends the deferred indexes off the commit path.

A commit returns once its bytes are durable and its version is published; it
only wakes the maintainer, one daemon thread per writable Engine, which adds
the rows committed since the last pass to every deferred index (index/
protocol.py: the HNSW graphs and IVF lists, the full-text indexes), a chunk of
rows at a time (a graph build itself runs on numba's threads). Until a row is
indexed, a read finds it by an exact scan of the rows above the index's
watermark (index/vector_index.py; a text index's `covering` copy, index/
fts.py), so indexing late changes no answer.

`hold()` is also the way to keep it behind on purpose: while a caller holds
it, nothing is indexed (tests of the exact tails use it; never hold it
across a checkpoint or close, which finish its work in the caller's thread).

Locks: a chunk is linked holding `hold`, and the tables to link are looked
up again under it for every chunk. Whoever replaces or discards the engine's
tables (a reload after a failed sync, close) takes `hold` first, so the
maintainer never links into a table the engine has replaced, nor touches
memory after close; so does the writer applying (or undoing) a schema
change (Engine.write, abort), so a chunk never links a partial index whose
predicate's column a DROP COLUMN took away meanwhile, or reads a renamed
column by its old name. `hold` is reentrant: a write under create_index's
hold takes it again. The maintainer never takes the engine's writer lock:
order is writer → hold → a graph's own locks.

A failure inside the maintainer loses nothing (the rows stay searchable by
the exact scan, and the log has them): it is recorded, linking pauses, and
the next `index_status` or `close` raises it as IndexMaintenanceError. After
that the next commit tries again.
"""
from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from contextlib import contextmanager

from ..errors import IndexMaintenanceError
from ..reports import rows_bar

log = logging.getLogger("varvedb.index")


PACE_MIN_S = 0.01   # the shortest and longest rest between two passes (see _run)
PACE_MAX_S = 0.05
RATE_WEIGHT = 0.3        # of the newest chunk in the rows/s average (index_status's ETA)

_LIVE: "weakref.WeakSet[Maintainer]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    # At exit, before the interpreter tears down: a chunk in flight finishes
    # rather than having its thread cut off inside a parallel kernel.
    for m in list(_LIVE):
        m.stop()


class Maintainer:
    def __init__(self, engine):
        self.engine = weakref.ref(engine)   # an engine dropped unclosed is still collected
        self._cond = threading.Condition()
        self._hold = threading.RLock()       # (the writer's DDL may take it inside create_index's)
        self._wanted = False                 # a commit asked for a pass since one began
        self._stopped = False
        self._idle = False                   # the thread waits for a wake (no pass, no rest)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.passes = 0                      # passes begun (an idle maintainer begins none)
        self.rate: float | None = None       # rows linked a second, lately (None: not yet)
        weakref.finalize(engine, self._stop_thread)
        _LIVE.add(self)

    # ---- what the engine calls ------------------------------------------------

    def wake(self) -> None:
        """Rows were committed (or loaded) that the graphs may not cover yet."""
        if self._wanted and self._thread is not None:
            return   # a pass is asked for and not begun: it takes these rows too
        with self._cond:
            if self._stopped:
                return
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="varvedb-maintainer",
                                                daemon=True)
                self._thread.start()
            elif self._idle:
                # only its idle wait needs waking: a pass in flight, or its rest,
                # looks at _wanted when it ends (a notify there woke the rest's
                # wait to no purpose, and cost the committer a Condition's Python)
                self._cond.notify_all()

    @property
    def idle(self) -> bool:
        """Does the thread wait for a commit's wake (no pass in flight, no rest)?"""
        return self._idle

    @contextmanager
    def hold(self):
        """No chunk is being linked inside this block (it waits for one in flight)."""
        with self._hold:
            yield

    def finish(self, why: str = "checkpoint", progress: bool | None = None) -> None:
        """Link every committed row now, in the calling thread (checkpoint, close).

        The caller holds the engine's writer lock, so no rows are committed
        meanwhile; a chunk the maintainer has in flight is finished first.
        `progress`: a bar of the rows linked (None: from reports.PROGRESS_FROM rows left,
        when stderr is a terminal), saying what `why` waits for."""
        left = self.unlinked()
        bar = rows_bar(left, f"{why}: linking the rows not yet indexed", progress)
        if left:
            log.info("%s: linking %d rows not yet indexed first", why, left)
        try:
            more = True
            while more:
                more = self._link_one_chunk()
                # after the last chunk too: rows the chunk in flight linked count
                if bar is not None:
                    bar.update(max(0, left - self.unlinked() - bar.n))
        finally:
            if bar is not None:
                bar.close()
        self._tell()

    def unlinked(self) -> int:
        """Committed rows some deferred index lacks, over every table."""
        engine = self.engine()
        return 0 if engine is None else sum(t.unlinked() for t in list(engine.tables.values()))

    def eta(self, rows: int) -> float | None:
        """Seconds to link `rows` at the recent rate (None: no rate measured yet)."""
        if not rows:
            return 0.0
        return None if not self.rate else rows / self.rate

    def wait(self, done, timeout: float | None = None) -> bool:
        """Wait until ``done()`` holds (looked at again after every chunk linked), a
        failure is recorded or the maintainer stops; False if ``timeout`` seconds
        passed first. ``done`` is called holding the maintainer's condition: it
        only reads."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._error is not None or self._stopped or done(), timeout)

    def _tell(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def raise_failure(self) -> None:
        """Raise (once) what went wrong in the background, if anything did."""
        with self._cond:
            error, self._error = self._error, None
            self._cond.notify_all()   # linking resumes if a commit asked meanwhile
        if error is not None:
            raise IndexMaintenanceError(
                f"indexing rows (a vector or full-text index) failed in the background: "
                f"{type(error).__name__}: {error}; nothing is lost (those rows are "
                f"found by exact scan) and the next commit tries again") from error

    def stop(self) -> None:
        """Stop the thread and wait for it (a chunk in flight is finished first)."""
        thread = self._stop_thread()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    # ---- the thread -------------------------------------------------------------

    def _stop_thread(self) -> threading.Thread | None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            return self._thread

    def _run(self) -> None:
        rest = 0.0
        while True:
            with self._cond:
                # A pass costs a fixed part plus its rows: resting as long as the
                # last pass took (10 ms at least) lets the next one take what
                # commits added meanwhile in one batch, leaves committers half
                # the core at most, and keeps them from waiting for the GIL
                # behind a pass after every commit.
                if rest:
                    self._cond.wait_for(lambda: self._stopped, rest)
                while not (self._wanted and self._error is None) and not self._stopped:
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                if self._stopped:
                    return
                self._wanted = False
                self.passes += 1
            start = time.perf_counter()
            try:
                while self._link_one_chunk():
                    self._tell()             # a waiter (wait) looks again
            except BaseException as e:   # recorded and raised to the next caller
                with self._cond:
                    if self._error is None:
                        self._error = e
            finally:
                rest = min(max(time.perf_counter() - start, PACE_MIN_S), PACE_MAX_S)
                self._tell()

    def _link_one_chunk(self) -> bool:
        """Link one chunk of one table's unlinked rows; False when none is left."""
        with self._hold:
            engine = self.engine()
            if engine is None or self._stopped and threading.current_thread() is self._thread:
                return False
            for table in list(engine.tables.values()):
                before, start = table.unlinked(), time.perf_counter()
                if table.link_indexes():
                    # rows the slowest index gained: what the ETA divides
                    self._measured(before - table.unlinked(), time.perf_counter() - start)
                    return True
            return False

    def _measured(self, rows: int, seconds: float) -> None:
        if rows <= 0:
            return
        rate = rows / max(seconds, 1e-6)
        self.rate = rate if self.rate is None else \
            RATE_WEIGHT * rate + (1 - RATE_WEIGHT) * self.rate
