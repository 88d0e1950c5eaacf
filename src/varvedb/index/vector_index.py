"""A vector field's index as the engine holds it: the index, its watermark, its lock.

The index (`graph`: an `HnswIndex`, or an `IvfIndex` for vv.IVFPQ) covers the
arena rows below `linked`; rows at or above
it — committed but not yet linked by the engine's maintainer
(engine/maintainer.py), or replayed after a checkpoint on a read-only
connection — are searched exactly and merged, so an answer never waits for
linking and never misses a row. Only committed rows are linked
(rows are appended in commit order, so they are a prefix of the arena), so a
rolled-back transaction never touches the graph.

Linking mutates neighbour lists in place, so it holds the write side of a
readers-writer lock, a chunk of rows at a time: searches hold the read side,
run in parallel with each other (the kernels release the GIL) and wait at
most one chunk for a writer.

An IVF index links nothing until it is trained: its first link, once the
field has `train_min` committed vectors, fits the lists on a sample of all of
them (outside the write lock: searches go on answering exactly meanwhile),
then adds every waiting row in one batch (one sort into the lists).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numba
import numpy as np

from ..schema import HNSW, IVFPQ
from . import flat
from .hnsw import HnswIndex
from .ivfpq import IvfIndex
from .prefetch import prefetch_rows

LINK_CHUNK = 4096   # rows linked per hold of the write lock
PARALLEL_FROM = 256  # smaller chunks link on one thread (see link)
_BUILD = threading.Lock()


class ReadWriteLock:
    """Many readers or one writer; a waiting writer stops new readers (no starvation).

    The state sits behind a plain mutex whose `with` runs in C: a search takes
    and drops the read side once per query, so that path stays short."""

    def __init__(self):
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._readers = 0
        self._writer = False
        self._waiting = 0

    def acquire_read(self) -> None:
        with self._mutex:
            while self._writer or self._waiting:
                self._cond.wait()
            self._readers += 1

    def release_read(self) -> None:
        with self._mutex:
            self._readers -= 1
            if not self._readers and self._waiting:   # only a writer waits on readers
                self._cond.notify_all()

    @contextmanager
    def write(self):
        with self._mutex:
            self._waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._mutex:
                self._writer = False
                self._cond.notify_all()


class VectorIndex:
    """The HNSW graph of one vector field plus the rows it does not cover yet."""

    def __init__(self, field: str, dim: int, metric: str, spec: HNSW | IVFPQ,
                 graph: HnswIndex | IvfIndex | None = None, linked: int = 0):
        self.field = field
        self.spec = spec
        self.graph = graph or new_index(dim, metric, spec)
        self.is_ivf = isinstance(self.graph, IvfIndex)
        self.linked = linked              # rows [0, linked) are in the graph (or null)
        self.checkpointed = linked        # `linked` as of the last checkpoint
        self._lock = ReadWriteLock()
        self._link_lock = threading.Lock()

    def link(self, column, upto: int) -> int:
        """Add the next chunk of committed rows [linked, upto) with non-null vectors
        to the graph; returns how many rows the watermark moved (0: none left).

        When more than a chunk waits, room for all of it is reserved at once:
        a bulk build knows its size and need not grow by doubling."""
        with self._link_lock:
            lo = self.linked
            if lo >= upto:
                return 0
            if self.is_ivf:
                return self._link_lists(column, lo, upto)
            hi = min(upto, lo + LINK_CHUNK)
            arena = column.arena.frozen(hi)
            norms = column.norms.frozen(hi)
            rows = np.arange(lo, hi, dtype=np.int64)
            rows = rows[~column.nulls.data[lo:hi]]
            # one build at a time in the process: each uses every core, and
            # numba's workqueue layer must not run two parallel kernels at once
            # A few rows gain nothing from numba's threads, and a parallel region
            # waits for its slowest thread: on a busy machine that wait, not the
            # work, was most of a small link. (numba's thread count is per thread.)
            threads = numba.get_num_threads()
            with _BUILD:
                try:
                    if len(rows) < PARALLEL_FROM:
                        numba.set_num_threads(1)
                    with self._lock.write():
                        if upto - lo > LINK_CHUNK:
                            self.graph.reserve(upto)
                        self.graph.add(arena, norms, rows)
                        self.linked = hi
                finally:
                    numba.set_num_threads(threads)
            return hi - lo

    def _link_lists(self, column, lo: int, upto: int) -> int:
        """IVF: train once enough rows are committed, then add [lo, upto) at once."""
        ivf = self.graph
        arena = column.arena.frozen(upto)
        norms = column.norms.frozen(upto)
        with _BUILD:
            if not ivf.trained:
                present = np.flatnonzero(~column.nulls.data[:upto])
                if len(present) < ivf.train_min:
                    return 0        # searched exactly until there are enough
                ivf.train(arena, norms, present)
            rows = np.arange(lo, upto, dtype=np.int64)
            batch = ivf.encode(arena, norms, rows[~column.nulls.data[lo:upto]])
            with self._lock.write():
                ivf.insert(batch)
                self.linked = upto
        return upto - lo

    def search(self, column, metric: str, q: np.ndarray, k: int, allow: np.ndarray | None,
               ef: int | None, n: int, stats: dict | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k allowed rows among [0, n) (allow None: all of them) with exact
        float64 scores, ranked: the index below the watermark, exact above it.
        `ef` is the graph's beam, or an IVF index's probes; `stats` (a dict)
        gets an IVF search's "lists" probed and "scanned" rows."""
        self._lock.acquire_read()
        try:
            # The graph may already hold rows newer than this reader's snapshot:
            # they are walked through (their vectors are in the arena by now)
            # but never returned.
            linked = self.linked
            arena, norms = column.frozen(max(n, linked))
            if linked > n:
                walk_allow = np.zeros(linked, bool)
                walk_allow[:n] = True if allow is None else allow
            else:
                walk_allow = None if allow is None else allow[:linked]
            if self.is_ivf:
                rows, dists = self.graph.search(arena, norms, q, k, walk_allow, ef, stats,
                                                prefetch_rows)
            else:
                rows, dists = self.graph.search(arena, norms, q, k, walk_allow, ef)
        finally:
            self._lock.release_read()
        if linked < n:
            tail = np.zeros(n, bool)
            tail[linked:] = True if allow is None else allow[linked:]
            if tail.any():
                trows, tdists = flat.search(metric, arena[:n], norms[:n], q, k, tail)
                rows = np.concatenate([rows, trows])
                dists = np.concatenate([dists, tdists])
                order = np.lexsort((rows, dists))[:k]
                rows, dists = rows[order], dists[order]
        return rows, dists

    def memory_bytes(self) -> int:
        return self.graph.memory_bytes()

    def to_arrays(self) -> dict:
        out = {f"g.{k}": v for k, v in self.graph.to_arrays().items()}
        out["linked"] = np.array([self.linked], np.int64)
        return out

    @classmethod
    def from_arrays(cls, field: str, dim: int, metric: str, spec: HNSW | IVFPQ, arrays: dict,
                    n_rows: int) -> "VectorIndex":
        """The index a checkpoint holds, checked against the field and its rows.

        Raises ValueError when the index is not the one this field's spec
        builds (dim, metric, its parameters) or does not fit the table: the
        caller rebuilds it then."""
        own = {k[2:]: v for k, v in arrays.items() if k.startswith("g.")}
        graph = (IvfIndex if isinstance(spec, IVFPQ) else HnswIndex).from_arrays(own)
        if _settings(graph) != _settings(new_index(dim, metric, spec)):
            raise ValueError(f"the index of {field!r} was built for another field spec")
        graph.validate(n_rows)
        linked = arrays.get("linked")
        if not isinstance(linked, np.ndarray) or linked.dtype != np.int64 \
                or linked.shape != (1,):
            raise ValueError(f"the graph of {field!r} has no 'linked' watermark")
        linked = int(linked[0])
        # every node lies below the watermark: rows above it are linked later
        if not graph.extent <= linked <= n_rows:
            raise ValueError(f"graph covers {linked} rows; the table has {n_rows} and the "
                             f"graph nodes up to row {graph.extent - 1}")
        return cls(field, dim, metric, spec, graph, linked)


def new_index(dim: int, metric: str, spec: HNSW | IVFPQ) -> HnswIndex | IvfIndex:
    """The empty index `spec` builds over a field of `dim` and `metric`."""
    if isinstance(spec, IVFPQ):
        return IvfIndex(dim, metric, spec.lists, spec.pq_m, spec.nprobe, spec.rerank,
                        spec.seed)
    return HnswIndex(dim, metric, spec.m, spec.ef_construction, spec.ef_search,
                     quantize=spec.quantize, pq_m=spec.pq_m)


def _settings(index: HnswIndex | IvfIndex) -> tuple:
    if isinstance(index, IvfIndex):
        return ("ivf", index.dim, index.metric, index.lists, index.pq_m, index.nprobe,
                index.rerank, index.seed)
    return ("hnsw", index.dim, index.metric, index.m, index.ef_construction,
            index.ef_search, index.quantize, index.pq_m)
