"""A vector field's index as the engine holds it: the index, its watermark, its lock.

Two kinds implement the Index protocol (index/protocol.py), deferred to the
maintainer: `HnswVectorIndex` (its `graph`: an `HnswIndex`) and
`IvfVectorIndex` (its `lists`: an `IvfIndex`, for vv.IVFPQ). Either covers the
arena rows below `linked`; rows at or above
it — committed but not yet linked by the engine's maintainer
(engine/maintainer.py), or replayed after a checkpoint on a read-only
connection — are searched exactly and merged, so an answer never waits for
linking and never misses a row. Only committed rows are linked
(rows are appended in commit order, so they are a prefix of the arena), so a
rolled-back transaction never touches the graph.

An index restored from a checkpoint (`loaded`) is checked against its table
lazily: open checks only what sizes the arrays (the structure's `from_arrays`),
and the rest of its `validate` (every link in range, levels, twin rings: what
a kernel walking a crafted file would read out of bounds or loop on) runs once,
at the structure's first use (`check_loaded`: a search, the maintainer's
next link, vacuum's repair, a checkpoint writing it). One that fails is
replaced by an empty index (linked = 0) before any kernel reads it: the rows
are then searched exactly, and a writer's maintainer links them again. A
process that never searches a field never pays for its graph's check (~37 ms
of CPU for 100k x 128, most of it numba's set-up on the first kernel call).
Not in the maintainer right after open: a first search then waited for that
thread under load (open + first search 444 ms of wall against 341 checked
in the searching thread, medians of 15 alternating processes, load 20).

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

import logging
import threading
from contextlib import contextmanager

import numba
import numpy as np

from ..schema import HNSW, IVFPQ
from . import flat
from .hnsw import HnswIndex
from .ivfpq import IvfIndex
from .prefetch import prefetch_rows

log = logging.getLogger(__name__)

LINK_CHUNK = 4096   # rows linked per hold of the write lock
# pgvector's vector_l1_ops: the graph links l2 neighbours (the kernels build and walk
# l2, dot, cosine, hamming: kernels/distance.py), its walk finds this many candidates
# per row asked (and at least ef), which an exact scan of them ranks by l1
L1_POOL = 4
PARALLEL_FROM = 256  # smaller chunks link on one thread (see link)
_BUILD = threading.Lock()


class ReadWriteLock:
    """Many readers or one writer; a waiting writer stops new readers (no starvation).

    A search takes the read side once per query, so that side takes no mutex:
    a reader registers in a list and then looks for a writer, and a writer
    announces itself under the mutex and then waits for the registered readers
    to leave. list.append and pop are atomic under the GIL, so either the writer
    sees the reader registered, or the reader sees the writer announced and
    steps back to wait for it."""

    def __init__(self):
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._inside = []       # one entry per reader holding the read side
        self._writers = 0       # writers holding the lock or waiting for it
        self._writing = False

    def acquire_read(self) -> None:
        inside = self._inside
        inside.append(None)
        if self._writers:                   # step back, wake the writer, wait it out
            inside.pop()
            with self._mutex:
                self._cond.notify_all()
                while self._writers:
                    self._cond.wait()
                inside.append(None)         # under the mutex: no writer announces now

    def release_read(self) -> None:
        self._inside.pop()
        if self._writers:                   # a writer may wait for the last reader
            self._wake()

    def _wake(self) -> None:
        with self._mutex:
            self._cond.notify_all()

    @contextmanager
    def write(self):
        with self._mutex:
            self._writers += 1
            while self._writing or self._inside:
                self._cond.wait(0.01)       # (a poll as well: readers leave unlocked)
            self._writing = True
        try:
            yield
        finally:
            with self._mutex:
                self._writing = False
                self._writers -= 1
                self._cond.notify_all()


class VectorIndex:
    """A vector field's index plus the rows it does not cover yet (the kinds below
    say how rows are added and how the covered ones are searched)."""

    PREFIX = "vx"
    in_step = False
    kind = ""
    knob = ""           # the search's width argument: "ef" or "probes"
    setting = ""        # SQL's setting of that width

    def __init__(self, field: str, dim: int, metric: str, spec: HNSW | IVFPQ, linked: int = 0):
        self.field = field
        self.dim = dim
        self.metric = metric
        self.spec = spec
        self.linked = linked              # rows [0, linked) are in the index (or null)
        self.checkpointed = linked        # `linked` as of the last checkpoint
        self._lock = ReadWriteLock()
        self._link_lock = threading.Lock()
        # a checkpoint's structure not yet checked: the table's rows to check it
        # against (check_loaded); None once checked, or built here
        self.unchecked: int | None = None
        self._check_lock = threading.Lock()
        # an index on an expression or with a predicate: the vectors it holds
        # (engine/columns.py's DerivedColumn, the table's to make)
        self.derived = None

    @property
    def indexed(self) -> int:
        return self.linked

    def fresh(self) -> "VectorIndex":
        return make_vector_index(self.field, self.dim, self.metric, self.spec)

    def truncate(self, n: int) -> None:
        """Only committed rows are linked: a rollback never reaches them."""
        if n < self.linked:
            raise ValueError(f"{self.field!r}: rows below {self.linked} are linked and "
                             f"committed; cannot truncate to {n}")

    def extend(self, column, upto: int, parts=None) -> int:
        """Add the next chunk of committed rows [linked, upto) with non-null vectors
        to the index; returns how many rows the watermark moved (0: none left).
        `parts`: an IVF index's encoder of row parts (IvfIndex.encode; None here)."""
        self.check_loaded()
        with self._link_lock:
            lo = self.linked
            if lo >= upto:
                return 0
            return self._extend(column, lo, upto, parts)

    def check_loaded(self) -> None:
        """Check a structure restored from a checkpoint against its table, once, before
        its first use (see the module's docstring); one that does not fit is
        replaced by an empty one, whose rows are searched exactly until linked."""
        if self.unchecked is None:
            return
        with self._check_lock:
            n = self.unchecked
            if n is None:           # another thread checked it meanwhile
                return
            try:
                self._structure().validate(n)
            except ValueError as e:
                log.warning("the checkpoint's index of %r does not fit its table (%s): "
                            "it is built again", self.field, e)
                empty = self.fresh()._structure()
                with self._lock.write():
                    self._set_structure(empty)
                    self.linked = self.checkpointed = 0
            self.unchecked = None

    def search(self, column, metric: str, q: np.ndarray, k: int, allow: np.ndarray | None,
               ef: int | None, n: int, stats: dict | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k allowed rows among [0, n) (allow None: all of them) with exact
        float64 scores, ranked: the index below the watermark, exact above it.
        `ef` is the width (`knob`): a graph's beam, or an IVF index's probes;
        `stats` (a dict) gets an IVF search's "lists" probed and "scanned" rows."""
        self.check_loaded()
        self._lock.acquire_read()
        try:
            # The index may already hold rows newer than this reader's snapshot:
            # they are walked through (their vectors are in the arena by now)
            # but never returned.
            linked = self.linked
            arena, norms = column.frozen(max(n, linked))
            if linked > n:
                walk_allow = np.zeros(linked, bool)
                walk_allow[:n] = True if allow is None else allow
            else:
                walk_allow = None if allow is None else allow[:linked]
            rows, dists = self._search(arena, norms, q, k, walk_allow, ef, stats)
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

    def searcher(self, column, k: int, allow: np.ndarray | None, width: int, n: int):
        """`search` of one reader's rows bound to everything but the query vector
        (query/prepared.py): a function of q giving (rows, scores) when the index
        answers k rows in one pass, else None (the caller searches in full). None
        here: this kind of index has no such pass."""
        return None

    def to_arrays(self) -> dict:
        self.check_loaded()     # a checkpoint writes only a checked structure
        out = {f"g.{k}": v for k, v in self._structure().to_arrays().items()}
        out["linked"] = np.array([self.linked], np.int64)
        return out

    def loaded(self, arrays: dict, n: int) -> "VectorIndex":
        """The index a checkpoint holds, checked against this field's spec and its
        n rows. Raises ValueError when the index is not the one this spec builds
        (dim, metric, its parameters) or does not fit the table: the caller
        starts a fresh one then. What `validate` checks of the structure is checked
        at its first use instead (check_loaded)."""
        own = {k[2:]: v for k, v in arrays.items() if k.startswith("g.")}
        empty = self.fresh()
        structure = type(empty._structure()).from_arrays(own)
        if _settings(structure) != _settings(empty._structure()):
            raise ValueError(f"the index of {self.field!r} was built for another field spec")
        linked = arrays.get("linked")
        if not isinstance(linked, np.ndarray) or linked.dtype != np.int64 \
                or linked.shape != (1,):
            raise ValueError(f"the index of {self.field!r} has no 'linked' watermark")
        linked = int(linked[0])
        # every node lies below the watermark: rows above it are linked later
        if not structure.extent <= linked <= n:
            raise ValueError(f"index covers {linked} rows; the table has {n} and the "
                             f"index nodes up to row {structure.extent - 1}")
        out = type(empty)(self.field, self.dim, self.metric, self.spec, structure, linked)
        out.unchecked = n           # structure.validate(n) runs at first use (check_loaded)
        return out

    def nodes(self) -> int:
        """Rows held in the index."""
        return len(self._structure())

    def nbytes(self) -> int:
        return self._structure().memory_bytes()

    def node_bytes(self) -> int:
        """Bytes its nodes use, without capacity kept for rows not linked yet."""
        return self._structure().node_bytes()

    # ---- what each kind provides -------------------------------------------------

    def _structure(self):
        raise NotImplementedError

    def _set_structure(self, structure) -> None:
        raise NotImplementedError

    def _extend(self, column, lo: int, upto: int, parts=None) -> int:
        raise NotImplementedError

    def _search(self, arena, norms, q, k, allow, width, stats):
        raise NotImplementedError

    def width(self, asked: int | None, k: int) -> int:
        """The width a search of the k best uses (`asked` None: the index's own)."""
        raise NotImplementedError


class HnswVectorIndex(VectorIndex):
    """An HNSW graph: rows are linked a chunk at a time."""

    kind = "hnsw"
    knob = "ef"
    setting = "hnsw.ef_search"

    def __init__(self, field: str, dim: int, metric: str, spec: HNSW,
                 graph: HnswIndex | None = None, linked: int = 0):
        super().__init__(field, dim, metric, spec, linked)
        self.graph = graph if graph is not None else HnswIndex(
            dim, "l2" if metric == "l1" else metric, spec.m, spec.ef_construction,
            spec.ef_search, quantize=spec.quantize, pq_m=spec.pq_m)

    def _structure(self):
        return self.graph

    def _set_structure(self, structure) -> None:
        self.graph = structure

    def width(self, asked: int | None, k: int) -> int:
        return max(asked or self.spec.ef_search, k)

    def _extend(self, column, lo: int, upto: int, parts=None) -> int:
        """When more than a chunk waits, room for all of it is reserved at once:
        a bulk build knows its size and need not grow by doubling. (A graph's
        rows are linked here: `parts` is for the IVF kind.)"""
        hi = min(upto, lo + LINK_CHUNK)
        arena = column.arena.frozen(hi)
        norms = column.norms.frozen(hi)
        rows = np.arange(lo, hi, dtype=np.int64)
        rows = rows[~column.nulls.data[lo:hi]]
        # one build at a time in the process: each uses every core
        # A few rows gain nothing from more lanes (the graph links one lane per
        # numba thread), and a phase waits for its slowest lane: on a busy
        # machine that wait, not the work, was most of a small link. (numba's
        # thread count is per thread.)
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

    def _search(self, arena, norms, q, k, allow, width, stats):
        if self.metric != "l1":
            return self.graph.search(arena, norms, q, k, allow, width)
        pool = max(width, L1_POOL * k)
        rows, _ = self.graph.search(arena, norms, q, pool, allow, pool)
        if not len(rows):
            return rows, np.empty(0, np.float64)
        mask = np.zeros(len(arena), bool)
        mask[rows] = True
        return flat.search("l1", arena, norms, q, k, mask)

    def searcher(self, column, k: int, allow: np.ndarray | None, width: int, n: int):
        """A walk over the rows linked now. It answers None once more rows are
        linked (the arena view and the mask are this state's), when the walk comes
        back short of k, and always while the maintainer is behind this reader
        (the rows above the watermark need search's exact tail): the caller binds
        again then, and gets the walk once the graph has caught up.
        It binds under the read lock: a link in progress has grown the graph
        past the watermark, and what it packs must be the arrays of one state."""
        if self.metric == "l1":     # two passes (the walk, the l1 rank): search's
            return None
        self.check_loaded()
        lock = self._lock
        lock.acquire_read()
        try:
            linked = self.linked
            if linked < n:
                return _behind
            arena, norms = column.frozen(linked)
            if linked > n:      # linked rows newer than the reader: walked, never returned
                walk_allow = np.zeros(linked, bool)
                walk_allow[:n] = True if allow is None else allow
            else:
                walk_allow = allow
            graph = self.graph
            walk = graph.searcher(arena, norms, k, walk_allow, width)
        finally:
            lock.release_read()
        if walk is None:                    # a coded walk: the graph's own search
            def walk(q):
                return graph.search(arena, norms, q, k, walk_allow, width)

        inside = lock._inside

        def top_k(q):
            # acquire_read and release_read inlined where no writer waits (this is
            # every kept graph search's path: two calls fewer)
            inside.append(None)
            if lock._writers:
                inside.pop()
                lock.acquire_read()
            try:
                if self.linked != linked:   # the graph changed: its arrays are others
                    return None
                got = walk(q)               # (rows, distances)
            finally:
                inside.pop()
                if lock._writers:
                    lock._wake()
            return got if len(got[0]) >= k else None
        return top_k


class IvfVectorIndex(VectorIndex):
    """IVF-PQ lists: nothing is added until they are trained, then every waiting row."""

    kind = "ivfpq"
    knob = "probes"
    setting = "ivfflat.probes"

    def __init__(self, field: str, dim: int, metric: str, spec: IVFPQ,
                 lists: IvfIndex | None = None, linked: int = 0):
        super().__init__(field, dim, metric, spec, linked)
        self.lists = lists if lists is not None else IvfIndex(
            dim, metric, spec.lists, spec.pq_m, spec.nprobe, spec.rerank, spec.seed)

    def _structure(self):
        return self.lists

    def _set_structure(self, structure) -> None:
        self.lists = structure

    def width(self, asked: int | None, k: int) -> int:
        return min(asked or self.spec.nprobe, self.spec.lists)

    def _extend(self, column, lo: int, upto: int, parts=None) -> int:
        """Train once enough rows are committed, then add [lo, upto) at once
        (encoded by `parts`, IvfIndex.encode's, when given)."""
        ivf = self.lists
        arena = column.arena.frozen(upto)
        norms = column.norms.frozen(upto)
        with _BUILD:
            if not ivf.trained:
                present = np.flatnonzero(~column.nulls.data[:upto])
                if len(present) < ivf.train_min:
                    return 0        # searched exactly until there are enough
                ivf.train(arena, norms, present)
            rows = np.arange(lo, upto, dtype=np.int64)
            batch = ivf.encode(arena, norms, rows[~column.nulls.data[lo:upto]], parts)
            with self._lock.write():
                ivf.insert(batch)
                self.linked = upto
        return upto - lo

    def _search(self, arena, norms, q, k, allow, width, stats):
        return self.lists.search(arena, norms, q, k, allow, width, stats, prefetch_rows)


def _behind(q) -> None:
    return None


def make_vector_index(field: str, dim: int, metric: str, spec: HNSW | IVFPQ) -> VectorIndex:
    """The empty index `spec` builds over a field of `dim` and `metric` (a spec as
    the schema fitted it to the field: `schema.fit_index` decides quantize="auto")."""
    kind = IvfVectorIndex if isinstance(spec, IVFPQ) else HnswVectorIndex
    return kind(field, dim, metric, spec)


def _settings(index: HnswIndex | IvfIndex) -> tuple:
    if isinstance(index, IvfIndex):
        return ("ivf", index.dim, index.metric, index.lists, index.pq_m, index.nprobe,
                index.rerank, index.seed)
    return ("hnsw", index.dim, index.metric, index.m, index.ef_construction,
            index.ef_search, index.quantize, index.pq_m)
