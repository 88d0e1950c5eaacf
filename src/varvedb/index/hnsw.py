"""The HNSW vector index: a layered proximity graph over the rows of a vector arena.

What this is for: approximate nearest-neighbour search over one vector field.
The engine owns the vectors (the arena) and the visibility of rows; this class
owns only the graph and is handed the arena on every call. A node's id is its
arena row number, so a result needs no id translation, and every row version
can be a node: rows the caller cannot see are excluded with an ``allow`` mask,
walked through but never returned. The index never removes a node.

Layout (the kernels in :mod:`varvedb.kernels.hnsw` explain their side):

* ``levels``      int8  ``(cap,)``         -1 = the row is not a node, else its top level.
* ``links0``      int32 ``(cap, 2m)``      level-0 out-links, -1 padded.
* ``upper_slot``  int32 ``(cap,)``         row of the node's level-1 list in
                                            ``upper_links``, or -1.
* ``upper_links`` int32 ``(lists, m)``     upper lists: a node of level L owns L
                                            rows, level l at ``upper_slot + l - 1``.
* ``twins``       int32 ``(cap,)``         rings of rows with bit-identical vectors
                                            (encoding in the kernels' docstring).
* ``codes``       int8  ``(cap, w)``       quantize="int8" only: each node's codes
                                            (:mod:`varvedb.kernels.codes`), with
                                            ``code_norms`` (cap,) and the range
                                            ``code_lo`` / ``code_step`` (dim,);
                  uint8 ``(cap, pq_m)``    quantize="pq": each node's product-quantizer
                                            code (:mod:`varvedb.kernels.pq`), with the
                                            ``codebooks`` (pq_m, 256, dim / pq_m).

``cap`` (rows) and ``lists`` grow by doubling, so growth costs an amortised
copy per element. A node costs ``8m + 10`` bytes on level 0 plus, for the upper
levels it has, ``4m`` bytes a level (on average ``4m / (m - 1)``: about 4
bytes at m=16): about 143 bytes at m=16, on top of the arena itself. (Format 3
gave each upper node a slot of every level the graph had, ``4 L`` bytes a node
on average; it is still read, and converted when opened.)

A node's level is ``floor(-ln U / ln m)``, U from a splitmix64 hash of (seed,
row): a seeded draw that needs no stored RNG state to survive a checkpoint and
does not depend on how rows were split across ``add`` calls. Within one
``add``, rows are inserted in a seeded random order, so that rows arriving
sorted (by cluster, by time) do not build a lopsided graph.

A larger batch is linked in lanes: each phase kernel does one lane's share of
the batch (:mod:`varvedb.kernels.hnsw`), and :func:`_on_lanes` runs a phase's
lanes at once, lane 0 on the calling thread and the others on a small pool of
threads (the kernels release the GIL), one lane per numba thread
(``numba.get_num_threads()``, so ``numba.set_num_threads(1)`` links on the
calling thread alone). A pool rather than a ``prange``: numba's parallel
lowering compiled each phase kernel for tens of seconds, once per arena type.

A small ``add`` costs its work, not the batch machinery: a batch under
``_PARALLEL_FROM`` rows is linked on the calling thread in one kernel call
(handing lanes to other threads costs more than it saves), the insert
scratch is kept between calls, and the argument checks touch only the rows
given, never the whole arena.

Invariants: ``n_nodes`` rows have ``levels >= 0``; ``entry`` is a node of level
``top`` (both -1 when empty); every node with a level > 0 owns one slot; list
ids are nodes; ``extent`` is one past the largest node row. Arrays restored by
:meth:`HnswIndex.from_arrays` may be read-only views; they are copied on the
first :meth:`HnswIndex.add` (copy-on-write), never before.
"""

import concurrent.futures as cf
import math
import os
import threading

import numba
import numpy as np

from varvedb.kernels import codes as code_kernels
from varvedb.kernels import hnsw as kernels
from varvedb.kernels import pq as pq_kernels
from varvedb.kernels.jit import direct
from varvedb.kernels.distance import (GRAPH_METRIC_CODES, L2_SCALE, METRIC_CODE_DOT,
                                      METRIC_CODE_L2, METRIC_CODE_L2_SCALED, METRIC_CODE_PQ,
                                      METRIC_COSINE, METRIC_L2)

from ..errors import DimensionError, NonFiniteVectorError
from ..schema import HNSW_LIMITS, MAX_DIM
from ..storage.format import code_width
from ..storage.memory import line_aligned
from . import prefetch

_FORMAT = 4              # 1: before quantize (13 params), 2: before pq (15), 3: before a
                         # node's upper levels were its own (upper_links (slots, L, m)); all read
_MAX_LEVEL = 30
# Batches grow with the graph, up to a quarter of its size and at most
# _MAX_BATCH rows: small enough that a batch rarely misses a neighbour it would
# have seen one row at a time, large enough to keep both cores busy.
_BATCH_FRACTION = 4
_MAX_BATCH = 256
# Smaller batches are linked on the calling thread: handing lanes to other
# threads costs more than it saves (milliseconds on a busy machine).
_PARALLEL_FROM = 16
# params layout of to_arrays()/from_arrays()
_P_FORMAT, _P_DIM, _P_METRIC, _P_M, _P_EFC, _P_EFS, _P_SEED = range(7)
_P_ENTRY, _P_TOP, _P_NODES, _P_EXTENT, _P_SLOTS, _P_LEVELS = range(7, 13)
_P_QUANT, _P_CODE_FIT, _P_PQ_M = 13, 14, 15
_N_PARAMS = 16
_N_PARAMS_OLD = {1: 13, 2: 15}
_ARRAY_NAMES = ("levels", "links0", "upper_slot", "upper_links", "twins")
_CODE_ARRAYS = {"int8": ("codes", "code_norms", "code_lo", "code_step"),
                "pq": ("codes", "codebooks")}
QUANTIZERS = (None, "int8", "pq")
_QUANT_CODES = {None: 0, "int8": 1, "pq": 2}
_PQ_ITERS = 20           # k-means iterations of each sub-vector's codebook
_QUANT_NAMES = {code: name for name, code in _QUANT_CODES.items()}
# The codes' range is fitted again each time the graph doubles, on a sample of
# at most this many rows, until it has been fitted on that many: a graph built
# row by row does not keep the range of its first few rows. (The quantiles of
# 16 384 rows cost 0.2 s at dim 384; of 65 536, 0.8 s.)
_CODE_SAMPLE = 16384
# A coded walk's best RERANK_PER_K * k candidates are measured exactly. On
# glove-50 (100k), 2 * k already gave the recall of measuring the whole pool.
_RERANK_PER_K = {"int8": 4, "pq": 8}   # pq's codes are coarser: more candidates measured
_METRIC_NAMES = {code: name for name, code in GRAPH_METRIC_CODES.items()}


_LANES_LOCK = threading.Lock()
_lanes_pool: tuple[int, cf.ThreadPoolExecutor] | None = None   # (pid that made it, pool)


def _lane_pool() -> cf.ThreadPoolExecutor:
    """The process's pool for lanes 1.. of a phase: as many threads as numba may
    use (less the calling thread's lane), started as they are first needed. Made
    again in a forked child, where the parent's threads do not exist."""
    global _lanes_pool
    with _LANES_LOCK:
        if _lanes_pool is None or _lanes_pool[0] != os.getpid():
            workers = max(numba.config.NUMBA_NUM_THREADS - 1, 1)
            _lanes_pool = (os.getpid(), cf.ThreadPoolExecutor(
                workers, thread_name_prefix="varvedb-lane"))
        return _lanes_pool[1]


def _on_lanes(kernel, lanes: int, *args) -> None:
    """``kernel(*args, lane, lanes)`` for every lane at once: lane 0 on the calling
    thread, the others on the lane pool. Returns when every lane has ended (so the
    next phase reads what they wrote); an error in one is raised then."""
    if lanes <= 1:
        kernel(*args, 0, 1)
        return
    pool = _lane_pool()
    jobs = [pool.submit(kernel, *args, lane, lanes) for lane in range(1, lanes)]
    try:
        kernel(*args, 0, lanes)
    finally:
        cf.wait(jobs)       # no lane still writes the graph when this returns
    for job in jobs:
        job.result()


def _candidate_capacity(ef: int) -> int:
    # a filtered walk keeps open candidates that are not allowed, so it gets
    # far more room than ef before its candidate heap drops its worse half
    return 16 * ef + 64


class _Workspace:
    """Scratch for one single-query walk: a visited set, the pool and the heaps."""

    __slots__ = ("visited", "generation", "cand_d", "cand_i", "res_d", "res_i", "fresh",
                 "exact_i", "exact_d", "args")

    def __init__(self, rows: int, ef: int, m0: int):
        self.visited = np.zeros(rows, np.uint16)
        self.generation = np.zeros(1, np.int64)
        cand = _candidate_capacity(ef)
        self.cand_d = np.empty(cand, np.float32)
        self.cand_i = np.empty(cand, np.int32)
        self.res_d = np.empty(ef, np.float32)
        self.res_i = np.empty(ef, np.int32)
        self.fresh = np.empty(m0, np.int32)
        self.exact_i = np.empty(ef, np.int64)     # the pool's best, scored exactly
        self.exact_d = np.empty(ef, np.float64)
        # the kernel's ``ws`` argument, packed once (kernels.hnsw: _SEARCH_READS)
        self.args = (self.visited, self.generation, self.cand_d, self.cand_i, self.res_d,
                     self.res_i, self.fresh, self.exact_i, self.exact_d)


# A lane's scratch row ends this many bytes before the next lane's begins: the
# lanes write their rows at once (a walk's pool is shifted on every insert), and
# two rows sharing a cache line (or the pair of lines the adjacent-line
# prefetcher fetches together) bounce it between the cores on every write.
_LANE_GAP = 128


def _lane_rows(lanes: int, width: int, dtype) -> np.ndarray:
    """``(lanes, width + pad)`` scratch: each lane's row is followed by
    ``_LANE_GAP`` bytes no kernel touches (the kernels take their sizes from their
    arguments, not from the row's length)."""
    return np.empty((lanes, width + _LANE_GAP // np.dtype(dtype).itemsize), dtype)


class _BuildScratch:
    """Per-lane scratch of the batch insert, plus the batch buffers.

    Kept by the index across ``add`` calls, so that linking one row does not
    allocate (and fault in) a visited set over the whole capacity each time;
    rebuilt only when the capacity, the level count or the thread count grows.
    """

    def __init__(self, lanes: int, rows: int, dim: int, ef: int, m: int, n_levels: int,
                 query_dtype=np.float32):
        m0 = 2 * m
        self.visited = np.zeros((lanes, rows), np.uint16)
        self.generation = np.zeros(lanes, np.int64)
        self.query = np.empty((lanes, dim), query_dtype)   # a row's copy: the walk's query
        self.batch_dist = _lane_rows(lanes, _MAX_BATCH, np.float32)
        self.pool_d = _lane_rows(lanes, ef, np.float32)
        self.pool_i = _lane_rows(lanes, ef, np.int32)
        self.fresh = _lane_rows(lanes, m0, np.int32)
        self.x_d = _lane_rows(lanes, _MAX_BATCH, np.float32)
        self.x_i = _lane_rows(lanes, _MAX_BATCH, np.int32)
        self.s_d = _lane_rows(lanes, ef + _MAX_BATCH, np.float32)
        self.s_i = _lane_rows(lanes, ef + _MAX_BATCH, np.int32)
        self.over_i = _lane_rows(lanes, _MAX_BATCH, np.int32)
        self.union_d = _lane_rows(lanes, m0 + _MAX_BATCH, np.float32)
        self.union_i = _lane_rows(lanes, m0 + _MAX_BATCH, np.int32)
        self.fwd = np.empty((_MAX_BATCH, n_levels, m), np.int32)
        self.twin_of = np.empty(_MAX_BATCH, np.int64)
        self.tasks = np.zeros(1, np.int64)    # a phase's next task (kernels.claim)

    def fits(self, lanes: int, rows: int, n_levels: int) -> bool:
        """Right for ``rows`` and ``n_levels``, with ``lanes`` lanes (0: any number)."""
        return self.visited.shape[1] == rows and self.fwd.shape[1] == n_levels \
            and lanes in (0, self.visited.shape[0])


class HnswIndex:
    """Hierarchical navigable small-world graph over arena rows.

    ``metric`` is "cosine", "l2" or "dot"; ``m`` is the out-degree of the
    upper levels (level 0 keeps ``2m``); ``ef_construction`` and
    ``ef_search`` are the beam widths of insertion and of search; ``seed``
    fixes the level draws and the insertion order within each ``add``;
    ``quantize="int8"`` makes searches walk int8 codes of the rows and measure
    the best ``4 k`` candidates again from the arena (the build walks the arena);
    ``quantize="pq"`` walks ``pq_m``-byte product-quantizer codes instead (and measures
    the best ``8 k``: its codes are coarser).
    Writers must be serialised by the caller and must not overlap searches;
    searches may run in parallel with each other (the kernels release the GIL).
    """

    def __init__(self, dim: int, metric: str, m: int = 16, ef_construction: int = 200,
                 ef_search: int = 100, seed: int = 0, quantize: str | None = None,
                 pq_m: int | None = None):
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if metric not in GRAPH_METRIC_CODES:     # l1 is exact-scan only
            raise ValueError(f"metric must be one of {sorted(GRAPH_METRIC_CODES)}, "
                             f"got {metric!r}")
        if m < 2:
            raise ValueError(f"m must be >= 2, got {m}")
        if ef_construction < 1 or ef_search < 1:
            raise ValueError("ef_construction and ef_search must be >= 1")
        if quantize not in QUANTIZERS or (quantize is not None and metric == "hamming"):
            raise ValueError(f"quantize must be one of {QUANTIZERS} (None for hamming), "
                             f"got {quantize!r}")
        if (quantize == "pq") != (pq_m is not None) or pq_m is not None and (
                pq_m < 1 or dim % pq_m):
            raise ValueError(f"quantize='pq' takes a pq_m dividing the dimension {dim} "
                             f"(and only it takes one), got {pq_m!r}")
        self.quantize = quantize
        self.pq_m = None if pq_m is None else int(pq_m)
        self.dim = int(dim)
        self.metric = metric
        self.m = int(m)
        self.ef_construction = int(ef_construction)
        self.ef_search = int(ef_search)
        self.seed = int(seed)
        self._seed_bits = np.uint64(self.seed & 0xFFFFFFFFFFFFFFFF)
        self._metric_code = GRAPH_METRIC_CODES[metric]
        # hamming graphs are over packed bit rows (uint8, dim = bytes a row): their
        # queries are packed bytes too, every other graph's float32
        self._query_dtype = np.uint8 if metric == "hamming" else np.float32
        self._query_dt = np.dtype(self._query_dtype)
        self._levels = np.full(0, -1, np.int8)
        self._links0 = np.full((0, 2 * self.m), -1, np.int32)
        self._upper_slot = np.full(0, -1, np.int32)
        self._upper_links = np.full((0, self.m), -1, np.int32)
        self._upper_levels = 0      # the highest level of any node (L)
        self._twins = np.full(0, -1, np.int32)
        # quantize="int8": the walk's codes (kernels.codes), one row per arena row
        self._code_width = code_width(dim)
        self._codes = np.zeros((0, self._code_width), np.int8)
        self._code_norms = np.zeros(0, np.float32)
        self._code_lo = np.zeros(dim, np.float32)
        self._code_step = np.ones(dim, np.float32)
        self._code_fit = 0          # rows the codes' range (or codebooks) was fitted on
        if quantize == "pq":        # quantize="pq": the walk's codes (kernels.pq)
            dsub = dim // self.pq_m
            self._codes = np.zeros((0, self.pq_m), np.uint8)
            self._codebooks = np.zeros((self.pq_m, pq_kernels.PQ_CODES, dsub), np.float32)
            self._books_t = np.zeros((self.pq_m, dsub, pq_kernels.PQ_CODES), np.float32)
        self._n_slots = 0
        self._entry = -1
        self._top = -1
        self._n_nodes = 0
        self._extent = 0
        self._workspaces: list[_Workspace] = []
        self._graph_args: tuple | None = None   # the search kernels' ``graph``, packed
        # search()'s prepared calls by (k, ef, allow is None): (graph, params,
        # spare workspaces, cosine); dropped with the graph tuple on any change
        self._calls: dict = {}
        self._scratch: _BuildScratch | None = None
        self._writable = True   # False while the arrays may be restored read-only views

    # ------------------------------------------------------------------ size

    def __len__(self) -> int:
        """Number of nodes in the graph."""
        return self._n_nodes

    @property
    def extent(self) -> int:
        """One past the largest node row (0 when empty)."""
        return self._extent

    def contains(self, n_rows: int | None = None) -> np.ndarray:
        """Bool mask over arena rows ``[0, n_rows)`` (default: the extent): True = node."""
        n = self._extent if n_rows is None else int(n_rows)
        mask = np.zeros(n, np.bool_)
        upto = min(n, self._extent)
        mask[:upto] = self._levels[:upto] >= 0
        return mask

    def memory_bytes(self) -> int:
        """Bytes held by the graph arrays and codes, spare capacity included (not the arena)."""
        return int(sum(array.nbytes for array in self._arrays() + self._code_arrays()))

    def node_bytes(self) -> int:
        """Bytes the nodes use: their rows of the per-row arrays and their upper
        levels' slots, without the capacity kept for rows not linked yet (a graph
        still linking a bulk load holds arrays sized for every row)."""
        per_row = sum(a.nbytes // max(a.shape[0], 1) for a in
                      (self._levels, self._links0, self._upper_slot, self._twins,
                       *self._code_arrays()[:1]))
        if self.quantize not in (None, "pq"):
            per_row += self._code_norms.itemsize
        slot = self._upper_links.nbytes // max(self._upper_links.shape[0], 1)
        shared = self._codebooks.nbytes if self.quantize == "pq" else 0
        return int(per_row * self._n_nodes + slot * self._n_slots + shared)

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return (self._levels, self._links0, self._upper_slot, self._upper_links, self._twins)

    def _code_arrays(self) -> tuple[np.ndarray, ...]:
        if self.quantize is None:
            return ()
        if self.quantize == "pq":
            return (self._codes, self._codebooks)
        return (self._codes, self._code_norms, self._code_lo, self._code_step)

    # ---------------------------------------------------------------- insert

    def add(self, vectors: np.ndarray, norms: np.ndarray, rows: np.ndarray,
            parallel: bool | None = None) -> None:
        """Insert arena ``rows`` (int64) as new nodes.

        ``vectors`` is the whole arena (float32 or float16, shape (N, dim)),
        ``norms`` the float32 L2 norm of each arena row (read for cosine only).
        Rows must be distinct, within the arena and not yet nodes, and the
        arena must hold every node already in the graph (the walk measures them).
        ``parallel``: True links every batch in lanes on threads, False on the
        calling thread only (a background linker that should leave the other
        cores to the application); None (default) uses the threads for
        batches of at least ``_PARALLEL_FROM`` rows. The graph is the same
        either way.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size == 0:
            return
        self._graph_args = None     # the arrays, the entry point and the top change
        self._calls = {}
        arena = self._arena(vectors)
        if arena.shape[0] < self._extent:
            # the build walk reads the vector of every node it meets: a node
            # past the arena's end would be read past the array's end
            raise ValueError(f"vectors has {arena.shape[0]} rows, the index has nodes "
                             f"up to row {self._extent - 1}")
        norms = self._norms(norms, arena.shape[0])
        hi = self._check_new_rows(rows, arena.shape[0])

        self._make_writable()
        self._grow_rows(hi + 1)
        levels = self._draw_levels(rows)
        self._assign_upper_slots(rows, levels)
        self._levels[rows] = levels
        self._extent = max(self._extent, hi + 1)
        if self.quantize is not None:
            self._encode(arena, norms, rows)
        order = rows
        if rows.size > 1:
            order = rows[np.random.default_rng((self.seed, self._n_nodes)).permutation(rows.size)]
        if self._n_nodes == 0:
            self._entry, self._top = int(order[0]), int(self._levels[order[0]])
            self._n_nodes = 1
            order = order[1:]
        self._insert_batches(arena, norms, order, parallel)
        self._graph_args = None
        self._calls = {}

    def repaired(self, kept: np.ndarray, vectors: np.ndarray, norms: np.ndarray
                 ) -> "HnswIndex":
        """This graph over only the arena rows ``kept`` (increasing), renumbered:
        new row i is old row ``kept[i]`` and ``vectors`` / ``norms`` are the new
        arena. Each kept node keeps its level and its lists less the dropped ids;
        a list that lost one is chosen again from its survivors and the dropped
        nodes' own neighbours (:func:`kernels.repair_lists`), and a node those
        lists no longer hold is linked again from a list near it
        (:func:`kernels.link_orphans`; a search's sweep finds any other); the
        entry point moves to a node of the highest level left if it was dropped. Twins are
        linked again (their rings may have lost their linked node). What a
        vacuum does instead of a rebuild, when asked to repair."""
        kept = np.asarray(kept, np.int64)
        inside = kept[kept < self._extent]      # a prefix: kept is increasing
        n, k = len(kept), len(inside)
        inv = np.full(self._extent, -1, np.int32)
        inv[inside] = np.arange(k, dtype=np.int32)
        old_levels = self._levels[:self._extent]
        unlinked = self._twins[inside] <= -2    # twins: linked again below
        levels = np.full(n, -1, np.int8)
        levels[:k] = np.where(unlinked, -1, old_levels[inside])
        nodes = levels[:k] >= 0

        def mapped(lists: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # old ids -> new, dropped ones removed with the survivors' order kept
            ids = np.where(lists >= 0, inv[np.maximum(lists, 0)], -1)
            lost = ((lists >= 0) & (ids < 0)).any(axis=-1)
            return np.take_along_axis(ids, np.argsort(ids < 0, axis=-1, kind="stable"),
                                      -1), lost

        out = HnswIndex(self.dim, self.metric, self.m, self.ef_construction, self.ef_search,
                        self.seed, self.quantize, self.pq_m)
        out._grow_rows(n, exact=True)
        l0, lost0 = mapped(self._links0[inside])
        out._links0[:k] = np.where(nodes[:, None], l0, -1)
        upper = np.flatnonzero(levels >= 1)
        # a kept node keeps its level, so its lists, in the order of the new rows
        count = levels[upper].astype(np.int64)
        start = np.cumsum(count) - count
        out._upper_slot[upper] = start
        owner = np.repeat(upper, count)            # each new list's node, and its level
        level_of = np.arange(int(count.sum())) - np.repeat(start, count) + 1
        out._upper_links, lost_up = mapped(
            self._upper_links[self._upper_slot[kept[owner]] + level_of - 1])
        out._n_slots, out._upper_levels = owner.size, self._upper_levels
        out._levels[:] = levels
        task_node = np.concatenate([np.flatnonzero(lost0 & nodes),
                                    owner[lost_up]]).astype(np.int64)
        task_level = np.concatenate([np.zeros(int((lost0 & nodes).sum()), np.int64),
                                     level_of[lost_up]])
        arena = self._arena(vectors)
        norms = self._norms(norms, arena.shape[0])
        lanes = min(numba.get_num_threads(), max(task_node.size // _PARALLEL_FROM, 1))
        _on_lanes(kernels.repair_lists, lanes, arena, norms, self._metric_code, kept, inv,
                  old_levels, self._links0, self._upper_slot, self._upper_links, task_node,
                  task_level, out._links0, out._upper_slot, out._upper_links)
        # lists chosen again may have dropped a node's only in-link (twins are not
        # nodes yet: they are added below)
        kernels.link_orphans(out._levels, out._links0, out._upper_slot, out._upper_links)
        if self.quantize is not None:
            src = self._codes[inside]
            if self.quantize == "pq":
                out._codes[:k] = src
                out._codebooks, out._books_t = self._codebooks, self._books_t
            else:
                out._codes = _aligned_grown(np.ascontiguousarray(src), n)
                out._code_norms[:k] = self._code_norms[inside]
                out._code_lo, out._code_step = self._code_lo, self._code_step
            out._code_fit = self._code_fit
        out._n_nodes = int(np.count_nonzero(levels >= 0))
        if out._n_nodes:
            out._extent = int(np.flatnonzero(levels >= 0)[-1]) + 1
            entry = inv[self._entry] if 0 <= self._entry < self._extent else -1
            if entry < 0 or levels[entry] < 0:
                entry = int(np.argmax(levels))
            out._entry, out._top = int(entry), int(levels[entry])
        out.add(vectors, norms, np.flatnonzero(unlinked))
        return out

    def _check_new_rows(self, rows: np.ndarray, n_rows: int) -> int:
        """ValueError unless ``rows`` are distinct new rows of the arena; returns the
        largest. O(batch): a one-row add must not pay for a mask over the arena."""
        cap = self._levels.shape[0]
        if rows.size == 1:
            hi = int(rows[0])
            if not 0 <= hi < n_rows:
                raise ValueError(f"rows must lie in [0, {n_rows})")
            if hi < cap and self._levels[hi] >= 0:
                raise ValueError("some rows are already nodes of the index")
            return hi
        hi = int(rows.max())
        if int(rows.min()) < 0 or hi >= n_rows:
            raise ValueError(f"rows must lie in [0, {n_rows})")
        if np.unique(rows).size != rows.size:
            raise ValueError("rows must be distinct")
        known = rows if hi < cap else rows[rows < cap]
        if np.any(self._levels[known] >= 0):
            raise ValueError("some rows are already nodes of the index")
        return hi

    def _insert_batches(self, arena: np.ndarray, norms: np.ndarray, order: np.ndarray,
                        parallel: bool | None) -> None:
        n_levels = self._upper_levels + 1
        pos = 0
        while pos < order.size:
            size = min(max(self._n_nodes // _BATCH_FRACTION, 1), _MAX_BATCH, order.size - pos)
            batch = order[pos:pos + size]
            threads = size >= _PARALLEL_FROM if parallel is None else parallel
            scratch = self._build_scratch(n_levels, numba.get_num_threads() if threads else 0)
            fwd, twin_of = scratch.fwd[:size], scratch.twin_of[:size]
            if not threads:
                self._entry, self._top = kernels.link_batch(
                    arena, norms, self._metric_code, batch, self._levels, self._links0,
                    self._upper_slot, self._upper_links, self._twins, self._entry,
                    self._top, self.m, self.ef_construction, scratch.visited,
                    scratch.generation, scratch.query, scratch.batch_dist, scratch.pool_d,
                    scratch.pool_i, scratch.fresh, scratch.x_d, scratch.x_i, scratch.s_d,
                    scratch.s_i, fwd, twin_of, scratch.over_i, scratch.union_d,
                    scratch.union_i, scratch.tasks)
            else:
                self._link_parallel(arena, norms, batch, scratch, fwd, twin_of, n_levels)
            self._n_nodes += size
            pos += size

    def _link_parallel(self, arena: np.ndarray, norms: np.ndarray, batch: np.ndarray,
                       scratch: _BuildScratch, fwd: np.ndarray, twin_of: np.ndarray,
                       n_levels: int) -> None:
        lanes = scratch.visited.shape[0]
        scratch.tasks[0] = 0
        _on_lanes(kernels.find_links, lanes,
                  arena, norms, self._metric_code, batch, self._levels, self._links0,
                  self._upper_slot, self._upper_links, self._twins, self._entry, self._top,
                  self.m, self.ef_construction, scratch.visited, scratch.generation,
                  scratch.query, scratch.batch_dist, scratch.pool_d, scratch.pool_i,
                  scratch.fresh, scratch.x_d, scratch.x_i, scratch.s_d, scratch.s_i, fwd,
                  twin_of, scratch.tasks)
        kernels.join_twins(batch, twin_of, self._levels, fwd, self._twins, self._links0,
                           self._upper_slot, self._upper_links)
        keys, sources, starts = kernels.reverse_edges(batch, self._levels, fwd)
        drops, n_drops = kernels.drop_space(sources, starts, self._links0)
        scratch.tasks[0] = 0
        _on_lanes(kernels.apply_reverse_edges, lanes,
                  arena, norms, self._metric_code, keys, sources, starts, n_levels,
                  self._links0, self._upper_slot, self._upper_links, scratch.query,
                  scratch.over_i, scratch.union_d, scratch.union_i, drops, n_drops,
                  scratch.tasks)
        kernels.keep_in_links(keys, starts, n_levels, drops, n_drops, self._links0,
                              self._upper_slot, self._upper_links)
        self._entry, self._top = kernels.raise_entry(batch, twin_of, self._levels,
                                                     self._entry, self._top)

    def _encode(self, arena: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> None:
        """Codes for the new ``rows``; first fit the range (or the codebooks) again,
        and encode every node again, while the graph has doubled since the last fit."""
        nodes = self._n_nodes + rows.size
        normalize = self._metric_code == METRIC_COSINE
        if self._code_fit < _CODE_SAMPLE and nodes >= 2 * self._code_fit:
            every = np.flatnonzero(self._levels[:self._extent] >= 0)
            sample = every
            if sample.size > _CODE_SAMPLE:
                sample = np.sort(np.random.default_rng(self.seed).choice(
                    every, _CODE_SAMPLE, replace=False))
            x = self._unit_rows(arena, norms, sample)
            if self.quantize == "pq":
                self._codebooks = pq_kernels.train(x, self.pq_m, _PQ_ITERS,
                                                   np.random.default_rng(self.seed))
                self._books_t = np.ascontiguousarray(self._codebooks.transpose(0, 2, 1))
            else:
                self._code_lo, self._code_step = code_kernels.fit(x)
            self._code_fit = int(sample.size)
            rows = every
        if self.quantize == "pq":
            for lo in range(0, rows.size, pq_kernels.BLOCK_ROWS):
                part = rows[lo:lo + pq_kernels.BLOCK_ROWS]
                out = np.empty((part.size, self.pq_m), np.uint8)
                pq_kernels.encode(self._unit_rows(arena, norms, part), self._books_t, out)
                self._codes[part] = out
            return
        code_kernels.encode_rows(arena, norms, rows, normalize, self._code_lo,
                                 self._code_step, self._codes, self._code_norms)

    def _unit_rows(self, arena: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Arena ``rows`` as float32, normalized for cosine (the rows codes stand for)."""
        x = self._widened(arena[rows])
        if self._metric_code == METRIC_COSINE:
            x /= np.maximum(norms[rows], np.float32(1e-30))[:, None]
        return x

    @staticmethod
    def _widened(block: np.ndarray) -> np.ndarray:
        return (block.view(np.float16) if block.dtype == np.uint16 else block).astype(np.float32)

    def _walk(self, query: np.ndarray):
        """What the walk measures for ``query`` (float32 (dim,) or (q, dim)):
        (rows, their norms, the query, the metric) — the arena's or the codes'."""
        if self.quantize is None:
            return None
        if self.quantize == "pq":
            return (self._codes, _NO_NORMS, self._pq_table(query), METRIC_CODE_PQ)
        return (self._codes, self._code_norms,
                code_kernels.scaled_query(query, self._code_step, self._code_width),
                self._int8_metric())

    def _code_query(self, query: np.ndarray) -> tuple[np.ndarray, int] | None:
        """(the int8 walk's query, its metric) for one query whose float32 form
        ``step q`` overflows or underflows, or whose l2 distances would
        (distance.code_query_fits): ``step q`` in float64, for l2 of a query past
        2**41 (or a form past 2**100) times L2_SCALE with the code norms
        (METRIC_CODE_L2_SCALED), for dot scaled into [1, 2); then rounded to float32.
        None where even that is past float32's range (codes of rows near its largest)."""
        q = np.asarray(query, np.float64) * self._code_step
        metric, top = self._int8_metric(), float(np.abs(q).max())
        if metric == METRIC_CODE_L2:
            if np.abs(query).max() >= 2.0 ** 41 or top >= 2.0 ** 100:
                q *= float(L2_SCALE)
                metric = METRIC_CODE_L2_SCALED
        elif top > 0:       # dot's, scaled by a power of two into [1, 2) (ranks alike)
            q *= 2.0 ** (1 - math.frexp(top)[1])
        if not np.abs(q).max(initial=0.0) < 2.0 ** 127:
            return None
        out = np.zeros(self._code_width, np.float32)
        out[:self.dim] = q
        return out, metric

    def _int8_metric(self) -> int:
        """The metric an int8 walk measures codes by: cosine rows are coded unit
        length, so cosine and dot walk as a dot product."""
        return METRIC_CODE_L2 if self._metric_code == METRIC_L2 else METRIC_CODE_DOT

    def _pq_table(self, query: np.ndarray) -> np.ndarray:
        """The walk's query for PQ codes: per query, the flattened (pq_m, 256) table."""
        queries = np.atleast_2d(query).astype(np.float32)
        l2 = self._metric_code == METRIC_L2
        if self._metric_code == METRIC_COSINE:
            # (normalized in float64: a float32 norm of a huge query overflows)
            wide = queries.astype(np.float64)
            norm = np.linalg.norm(wide, axis=1)
            queries = (wide / np.where(norm > 0, norm, 1.0)[:, None]).astype(np.float32)
        out = np.empty((len(queries), self.pq_m, pq_kernels.PQ_CODES), np.float32)
        for q, table in zip(queries, out):
            top = float(np.abs(q).max())
            if l2 and top >= 2.0 ** 41:
                table[:] = self._l2_table(q)
                continue
            if not l2 and top > 0 and not 2.0 ** -40 <= top < 2.0 ** 41:
                # a huge or tiny dot query's table overflows or underflows in float32: the
                # query scaled by a power of two (every row's sum scaled alike)
                q = (q.astype(np.float64) * 2.0 ** (1 - math.frexp(top)[1])
                     ).astype(np.float32)
            pq_kernels.distance_table(self._books_t, q, l2, table)
        out = out.reshape(len(queries), -1)
        return out[0] if query.ndim == 1 else out

    def _l2_table(self, q: np.ndarray) -> np.ndarray:
        """The l2 table of a query past 2**41 (its float32 one overflows): in
        float64, scaled by a power of two to fit float32 (every sum scaled alike)."""
        m, dsub = self._books_t.shape[:2]
        diff = q.astype(np.float64).reshape(m, dsub, 1) - self._books_t
        table = np.einsum("jtc,jtc->jc", diff, diff)
        return (table * 2.0 ** (100 - math.frexp(float(table.max()))[1])).astype(np.float32)

    def _rerank(self, k: int, ef: int) -> int:
        """How many of a coded walk's best candidates are measured exactly: a few
        per result, and half the pool once ef is raised past that (a fixed 4·k
        capped recall where the codes cannot order near neighbours: 0.991 at any ef
        on a clustered 128-d cosine set whose plain walk reached 1.000 at ef 80)."""
        return min(ef, max(_RERANK_PER_K.get(self.quantize, 0) * k, ef // 2))

    def _build_scratch(self, n_levels: int, lanes: int) -> _BuildScratch:
        # lanes: one per numba thread for the kernels run in lanes, 0 for the serial
        # one (which uses lane 0 of any scratch)
        rows = self._levels.shape[0]
        if self._scratch is None or not self._scratch.fits(lanes, rows, n_levels):
            lanes = max(lanes, 1)
            self._scratch = None   # drop the old one before allocating its successor
            self._scratch = _BuildScratch(lanes, rows, self.dim, self.ef_construction,
                                          self.m, n_levels, self._query_dtype)
        return self._scratch

    def _draw_levels(self, rows: np.ndarray) -> np.ndarray:
        return kernels.draw_levels(rows, self._seed_bits, self.m, _MAX_LEVEL)

    def reserve(self, n_rows: int) -> None:
        """Room for nodes up to row ``n_rows - 1`` in one allocation, no spare:
        a bulk link that knows its size need not grow by doubling."""
        if n_rows > self._levels.shape[0]:
            self._graph_args = None
            self._calls = {}
            self._make_writable()
            self._grow_rows(n_rows, exact=True)

    def _grow_rows(self, needed: int, exact: bool = False) -> None:
        cap = self._levels.shape[0]
        if needed <= cap:
            return
        new_cap = needed if exact else max(needed, 2 * cap, 1024)
        self._levels = _grown(self._levels, (new_cap,))
        self._links0 = _grown(self._links0, (new_cap, 2 * self.m))
        self._upper_slot = _grown(self._upper_slot, (new_cap,))
        self._twins = _grown(self._twins, (new_cap,))
        if self.quantize == "pq":
            codes = np.zeros((new_cap, self.pq_m), np.uint8)
            codes[:self._codes.shape[0]] = self._codes
            self._codes = codes
        elif self.quantize is not None:
            self._codes = _aligned_grown(self._codes, new_cap)
            self._code_norms = _grown(self._code_norms, (new_cap,))

    def _assign_upper_slots(self, rows: np.ndarray, levels: np.ndarray) -> None:
        if int(levels[0] if levels.size == 1 else levels.max()) == 0:   # most small batches
            return
        # each new upper node owns as many lists as it has upper levels, in row order
        upper = levels > 0
        count = levels[upper].astype(np.int64)
        end = self._n_slots + np.cumsum(count)
        needed = int(end[-1])
        cap = self._upper_links.shape[0]
        if needed > cap:
            self._upper_links = _grown(self._upper_links, (max(needed, 2 * cap, 64), self.m))
        self._upper_slot[rows[upper]] = end - count
        self._n_slots = needed
        self._upper_levels = max(self._upper_levels, int(levels.max()))

    def _make_writable(self) -> None:
        if self._writable:
            return
        if not all(a.flags.writeable and a.flags.c_contiguous for a in self._arrays()):
            (self._levels, self._links0, self._upper_slot, self._upper_links,
             self._twins) = (np.array(a, copy=True, order="C") for a in self._arrays())
        if self.quantize == "pq" and not self._codes.flags.writeable:
            self._codes = self._codes.copy()
        elif self.quantize is not None and not self._codes.flags.writeable:
            self._codes = _aligned_grown(self._codes, self._codes.shape[0])
            self._code_norms = self._code_norms.copy()
        self._writable = True

    # ---------------------------------------------------------------- search

    def search(self, vectors: np.ndarray, norms: np.ndarray, query: np.ndarray, k: int,
               allow: np.ndarray | None = None, ef: int | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """The (at most) k nearest allowed nodes to ``query`` (float32, shape (dim,)).

        Returns ``(rows int64, distances float64)`` ascending by (distance, row),
        exact on pgvector's scale: cosine ``1 - cos``, l2 Euclidean, dot ``-<x, q>``.
        ``allow`` is a bool mask over arena rows (None = all); rows it
        excludes are walked through but never returned. The beam is
        ``max(ef or ef_search, k)`` wide.

        A call of a shape (k, ef, whether filtered) seen since the graph last
        changed only takes that shape's packed arguments and a spare workspace
        and calls the kernel, which checks the sizes itself; any call it does
        not fit, or the kernel refuses, goes through :meth:`_search`, which
        checks every argument (and says what is wrong) and prepares the shape.
        """
        try:
            graph, params, spare, cosine = self._calls[k, ef, allow is None]
        except (KeyError, TypeError):
            return self._search(vectors, norms, query, k, allow, ef)
        dt = self._query_dt
        if type(query) is not np.ndarray or query.dtype is not dt \
                or not (query.flags.writeable and query.flags.c_contiguous) \
                or type(vectors) is not np.ndarray or vectors.dtype is not dt \
                or allow is not None and (type(allow) is not np.ndarray
                                          or allow.dtype is not _BOOL) \
                or cosine and (type(norms) is not np.ndarray or norms.dtype is not _F32):
            return self._search(vectors, norms, query, k, allow, ef)
        if not cosine:
            norms = _NO_NORMS
        if allow is None:
            allow = _NO_ALLOW
        try:
            ws = spare.pop()
        except IndexError:
            ws = _Workspace(self._levels.shape[0], params[3], 2 * self.m)
        out_rows = np.empty(k, np.int64)
        out_dist = np.empty(k, np.float64)
        try:
            count = kernels.search_one(graph, (vectors, norms, vectors, norms, allow),
                                       (query, query), params, ws.args, out_rows, out_dist)
        except Exception:      # shapes numba cannot type (a 2-D query): the checks say so
            return self._search(vectors, norms, query, k, allow, ef)
        spare.append(ws)
        if count == k:
            return out_rows, out_dist
        if count >= 0:
            return out_rows[:count], out_dist[:count]
        return self._search(vectors, norms, query, k, allow, ef)

    def searcher(self, vectors: np.ndarray, norms: np.ndarray, k: int,
                 allow: np.ndarray | None = None, ef: int | None = None):
        """:meth:`search` bound to everything but the query: a function of a query
        of the graph's dtype, C-contiguous, shape (dim,), giving (rows, distances).
        The caller keeps the graph unchanged while it uses one (VectorIndex's
        read lock and watermark). None for a PQ walk (its query is a table a
        search) and for a coded walk over vectors that do not fit in memory (the
        caller's prefetch between walk and rerank): :meth:`search` then."""
        k = int(k)
        if self.quantize == "pq" or self._n_nodes == 0 or k <= 0:
            return None
        arena = self._arena(vectors)
        if self.quantize is not None and prefetch.pays(vectors):
            return None
        norms = self._norms(norms, arena.shape[0])
        asked = (vectors, norms, k, allow, ef)      # (a query whose codes' form is remade)
        allow, use_allow = self._allow(allow)
        ef = max(int(ef) if ef is not None else self.ef_search, k)
        mc, coded = self._metric_code, self.quantize is not None
        if coded:       # int8 codes: the walk's query is the query scaled by the codes' step
            data = (arena, norms, self._codes, self._code_norms, allow)
            params = (mc, self._int8_metric(), self._rerank(k, ef), ef, k, use_allow, 0)
        else:
            data = (arena, norms, arena, norms, allow)
            params = (mc, mc, 0, ef, k, use_allow, 0)
        step, dim, scaled_width = self._code_step, self.dim, self._code_width if coded else 0
        risky = coded and code_kernels.step_past_one(step)
        graph = self._graph_args or self._graph()
        cap, width, qdt = self._levels.shape[0], 2 * self.m, self._query_dt
        pool = [(_Workspace(cap, ef, width), np.zeros(scaled_width, np.float32))]
        # the walk's machine code for these arguments' types, called without numba's
        # dispatch (~1.3 µs of typing two dozen arrays and numbers a search): a
        # query of another type is converted to the graph's below
        ws, scaled = pool[0]
        q = np.empty(1, qdt)
        search_one = direct(kernels.search_one, graph, data, (q, scaled if coded else q),
                            params, ws.args, np.empty(k, _I64), np.empty(k, _F64))

        def walk(query):
            if not (type(query) is np.ndarray and query.dtype is qdt and query.ndim == 1
                    and query.flags.c_contiguous and query.flags.writeable):
                query = np.array(query, dtype=qdt, order="C")     # (a copy: writable)
                if query.ndim != 1:
                    raise DimensionError(f"a query vector is one row, got shape {query.shape}")
            try:
                ws, scaled = pool.pop()
            except IndexError:
                ws, scaled = _Workspace(cap, ef, width), np.zeros(scaled_width, np.float32)
            if coded:       # (code_kernels.scaled_query, into this walk's own buffer)
                if risky:   # (an overflow: the walk refuses it, and search() remakes it)
                    with np.errstate(over="ignore"):
                        np.multiply(query, step, out=scaled[:dim])
                else:
                    np.multiply(query, step, out=scaled[:dim])
            out_rows = np.empty(k, _I64)      # (a dtype object: np.empty parses a type)
            out_dist = np.empty(k, _F64)
            count = search_one(graph, data, (query, scaled if coded else query), params,
                               ws.args, out_rows, out_dist)
            pool.append((ws, scaled))
            if count == k:
                return out_rows, out_dist
            if count == -1:
                raise NonFiniteVectorError("query vector holds NaN or inf")
            if count == kernels.CODE_QUERY_UNFIT:      # (its codes' form made with care)
                return self._search(asked[0], asked[1], query, asked[2], asked[3], asked[4])
            if count < 0:
                raise ValueError("the arguments do not fit the graph")   # checked above: a bug
            return out_rows[:count], out_dist[:count]
        return walk

    def _search(self, vectors: np.ndarray, norms: np.ndarray, query: np.ndarray, k: int,
                allow: np.ndarray | None, ef: int | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search` with every argument checked; prepares the call's shape."""
        shape = (k, ef, allow is None)
        k = int(k)
        if self._n_nodes == 0 or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        if not (type(query) is np.ndarray and query.dtype is self._query_dt
                and query.flags.c_contiguous and query.flags.writeable):
            # (a read-only query, SQL's literal, would compile a kernel of its own)
            query = np.array(query, dtype=self._query_dtype, order="C")
        if query.shape != (self.dim,):
            raise ValueError(f"query must have shape ({self.dim},), got {query.shape}")
        arena = self._arena(vectors)
        norms = self._norms(norms, arena.shape[0])
        allow, use_allow = self._allow(allow)
        ef = max(int(ef) if ef is not None else self.ef_search, k)
        ws = self._take_workspace(ef)
        out_rows = np.empty(k, np.int64)
        out_dist = np.empty(k, np.float64)
        split = False
        if self.quantize is None:     # the walk measures the arena itself
            data = (arena, norms, arena, norms, allow)
            pair = (query, query)
            params = (self._metric_code, self._metric_code, 0, ef, k, use_allow, 0)
        else:                         # it walks the codes, then reranks from the arena
            codes, code_norms, walk_query, walk_metric = self._walk(query)
            data = (arena, norms, codes, code_norms, allow)
            pair = (query, walk_query)
            rerank = self._rerank(k, ef)
            # a coded walk over vectors that do not fit in memory: walk, ask for the
            # candidates' pages together, then rerank (else one fault at a time)
            split = prefetch.pays(vectors)
            if split:
                out_rows = np.empty(max(k, rerank), np.int64)
                rerank = -rerank
            params = (self._metric_code, walk_metric, rerank, ef, k, use_allow, 0)
        graph = self._graph_args or self._graph()
        try:
            count = kernels.search_one(graph, data, pair, params, ws.args, out_rows, out_dist)
            made = None
            if count == kernels.CODE_QUERY_UNFIT:
                # the int8 walk's float32 query did not fit: made in float64, scaled
                made = self._code_query(query)
            if made is not None:
                params = params[:1] + (made[1],) + params[2:]
                count = kernels.search_one(graph, data, (query, made[0]), params, ws.args,
                                           out_rows, out_dist)
            if count == kernels.CODE_QUERY_UNFIT:
                # not even so (codes of rows past float32's range: a step that is not
                # finite): the graph walked on the rows themselves
                params = (self._metric_code, self._metric_code, 0) + params[3:]
                count = kernels.search_one(graph, (arena, norms, arena, norms, allow),
                                           (query, query), params, ws.args, out_rows,
                                           out_dist)
            if split and count > 0:
                rows = out_rows[:count].copy()
                prefetch.prefetch_rows(vectors, rows)
                count = kernels.rerank_rows(arena, norms, query, self._metric_code, rows,
                                            count, k, ws.res_d, out_rows, out_dist)
        finally:
            self._workspaces.append(ws)
        if count == -1:
            raise NonFiniteVectorError("query vector holds NaN or inf")
        if count < 0:
            raise ValueError("the arguments do not fit the graph")   # checked above: a bug
        if self.quantize is None and type(shape[0]) is int \
                and (shape[1] is None or type(shape[1]) is int):
            self._calls[shape] = (graph, params, [], self._metric_code == METRIC_COSINE)
        return out_rows[:count], out_dist[:count]

    def _graph(self) -> tuple:
        """The search kernels' ``graph`` argument, packed once until the next add."""
        self._graph_args = (self._links0, self._upper_slot, self._upper_links, self._twins,
                            self._levels, self._entry, self._top, self._extent)
        return self._graph_args

    def _take_workspace(self, ef: int) -> _Workspace:
        try:
            ws = self._workspaces.pop()
        except IndexError:
            return _Workspace(self._levels.shape[0], ef, 2 * self.m)
        if ws.visited.shape[0] < self._levels.shape[0] or ws.res_d.shape[0] < ef:
            return _Workspace(self._levels.shape[0], ef, 2 * self.m)
        return ws

    # ------------------------------------------------------------ arguments

    # On a search's path: a dtype compared with a type (``== np.float32``) costs
    # ~0.4 us, so the common case is told by the dtype object first.

    def _arena(self, vectors: np.ndarray) -> np.ndarray:
        if not isinstance(vectors, np.ndarray) or vectors.ndim != 2 \
                or vectors.shape[1] != self.dim:
            raise ValueError(f"vectors must be an array of shape (N, {self.dim})")
        if vectors.dtype is _F32 and self._query_dt is _F32:    # float32, not hamming
            return vectors
        if (vectors.dtype == np.uint8) != (self.metric == "hamming"):
            raise ValueError(f"a hamming graph's vectors are packed bits (uint8), and only "
                             f"its: got {vectors.dtype} for {self.metric}")
        if vectors.dtype == np.float16:
            return vectors.view(np.uint16)
        if vectors.dtype not in (np.float32, np.int8, np.uint8):
            raise ValueError(f"vectors must be float32, float16 or int8, got {vectors.dtype}")
        return vectors

    def _norms(self, norms: np.ndarray | None, n_rows: int) -> np.ndarray:
        if self._metric_code != METRIC_COSINE:
            return _NO_NORMS
        if not isinstance(norms, np.ndarray) \
                or not (norms.dtype is _F32 or norms.dtype == np.float32) \
                or norms.ndim != 1 or norms.shape[0] < n_rows:
            raise ValueError(f"norms must be a float32 array of at least {n_rows} rows")
        return norms

    def _allow(self, allow: np.ndarray | None) -> tuple[np.ndarray, bool]:
        if allow is None:
            return _NO_ALLOW, False
        if not isinstance(allow, np.ndarray) or allow.dtype != np.bool_ or allow.ndim != 1:
            raise ValueError("allow must be a 1-D bool array over arena rows")
        if allow.shape[0] < self._extent:
            raise ValueError(f"allow covers {allow.shape[0]} rows, the index {self._extent}")
        return allow, True

    # ----------------------------------------------------------- validation

    def validate(self, n_rows: int) -> None:
        """Cheap structural check against an arena of ``n_rows``; raises ValueError."""
        ext = self._extent
        if ext > n_rows:
            raise ValueError(f"index has nodes up to row {ext - 1}, arena has {n_rows} rows")
        levels = self._levels[:ext]
        if levels.size and (int(levels.min()) < -1 or int(levels.max()) > _MAX_LEVEL):
            raise ValueError(f"node levels outside -1..{_MAX_LEVEL}")
        if int(np.count_nonzero(levels >= 0)) != self._n_nodes:
            raise ValueError("node count does not match the levels array")
        if self._n_nodes == 0:
            if self._entry != -1:
                raise ValueError("empty index with an entry point")
            return
        if not (0 <= self._entry < ext) or levels[self._entry] != self._top \
                or self._top < 0:
            raise ValueError("entry point is not a node of the top level")
        _check_lists(self._links0[:ext], levels, 0, np.arange(ext))
        slots = self._upper_slot[:ext]
        upper = levels > 0
        # each upper node's lists (one per level it has) lie inside the used
        # lists, and no two nodes' overlap
        start = slots[upper].astype(np.int64)
        count = levels[upper].astype(np.int64)
        order = np.argsort(start, kind="stable")
        start, count = start[order], count[order]
        if np.any(slots[~upper] != -1) or start.size and (
                start[0] < 0 or start[-1] + count[-1] > self._n_slots
                or np.any(start[1:] < start[:-1] + count[:-1])):
            raise ValueError("upper slots do not match the node levels")
        if int(levels.max()) > self._upper_levels:
            raise ValueError("upper links have fewer levels than the nodes")
        for level in range(1, int(levels.max()) + 1):
            on_level = np.flatnonzero(levels >= level)
            _check_lists(self._upper_links[slots[on_level] + level - 1], levels, level,
                         on_level)
        _check_twins(self._twins[:ext], levels, self._links0[:ext])

    # ---------------------------------------------------------- persistence

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything needed to restore the index, as read-only numpy views.

        ``params`` (int64) holds the settings and the entry point; the other
        arrays are trimmed to the used extent and reflect the live index until
        the next :meth:`add`: write them out (or copy them) before that.
        """
        params = np.zeros(_N_PARAMS, np.int64)
        params[[_P_FORMAT, _P_DIM, _P_METRIC, _P_M, _P_EFC, _P_EFS, _P_SEED, _P_ENTRY,
                _P_TOP, _P_NODES, _P_EXTENT, _P_SLOTS, _P_LEVELS, _P_QUANT, _P_CODE_FIT,
                _P_PQ_M]] = [
            _FORMAT, self.dim, self._metric_code, self.m, self.ef_construction,
            self.ef_search, self.seed, self._entry, self._top, self._n_nodes, self._extent,
            self._n_slots, self._upper_levels, _QUANT_CODES[self.quantize],
            self._code_fit, self.pq_m or 0]
        arrays = {"params": params}
        trim = {"upper_links": self._n_slots, "code_lo": self.dim, "code_step": self.dim,
                "codebooks": self.pq_m or 0}
        for name, array in zip(_ARRAY_NAMES + _CODE_ARRAYS.get(self.quantize, ()),
                               self._arrays() + self._code_arrays()):
            view = array[: trim.get(name, self._extent)].view()
            view.flags.writeable = False
            arrays[name] = view
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "HnswIndex":
        """Restore an index from :meth:`to_arrays` output without rebuilding.

        The arrays are used in place (they may be read-only views over a
        mapped file, flat or shaped); they are copied only if :meth:`add` is
        called later. Raises ValueError when they do not fit together. The
        arrays may come from a crafted file: sizes are checked with Python
        ints before any array is shaped, and :meth:`validate` checks the rest.
        """
        try:
            p = np.asarray(arrays["params"])
            old = _N_PARAMS_OLD.get(int(p[_P_FORMAT])) if p.dtype == np.int64 \
                and p.ndim == 1 and p.size else None
            if old is not None and p.shape == (old,):
                p = np.concatenate([p, np.zeros(_N_PARAMS - old, np.int64)])
            elif p.dtype != np.int64 or p.shape != (_N_PARAMS,) \
                    or int(p[_P_FORMAT]) not in (3, _FORMAT):
                raise ValueError("unknown HNSW params layout")
            # before format 4 every upper node had a slot of every level
            slotted = int(p[_P_FORMAT]) < 4
            if int(p[_P_METRIC]) not in _METRIC_NAMES or int(p[_P_QUANT]) not in _QUANT_NAMES \
                    or int(p[_P_CODE_FIT]) < 0:
                raise ValueError("unknown HNSW metric or quantizer")
            quant = _QUANT_NAMES[int(p[_P_QUANT])]
            extent, slots, n_levels = int(p[_P_EXTENT]), int(p[_P_SLOTS]), int(p[_P_LEVELS])
            # a slot belongs to one node, no node is above _MAX_LEVEL, and a seed
            # seeds numpy's generator (which takes no negative one)
            if not (0 <= slots <= extent * (1 if slotted else n_levels)
                    and 0 <= n_levels <= _MAX_LEVEL) or int(p[_P_SEED]) < 0:
                raise ValueError(f"HNSW params claim {extent} rows, {slots} slots, "
                                 f"{n_levels} levels, seed {int(p[_P_SEED])}")
            # what the constructor sizes arrays by, bounded before it runs (a
            # crafted dim asked numpy for 876 TiB); the spec's limits
            if not 1 <= int(p[_P_DIM]) <= MAX_DIM or any(
                    not low <= int(p[at]) <= high for at, (low, high) in
                    ((_P_M, HNSW_LIMITS["m"]), (_P_EFC, HNSW_LIMITS["ef_construction"]),
                     (_P_EFS, HNSW_LIMITS["ef_search"]))):
                raise ValueError("HNSW params outside a spec's limits")
            pq_m = int(p[_P_PQ_M])
            if (quant == "pq") != (pq_m > 0):
                raise ValueError("HNSW params give pq_m without quantize='pq', or not with it")
            index = cls(int(p[_P_DIM]), _METRIC_NAMES[int(p[_P_METRIC])], int(p[_P_M]),
                        int(p[_P_EFC]), int(p[_P_EFS]), int(p[_P_SEED]), quant,
                        pq_m or None)
            m = index.m
            if quant == "pq":
                index._codes = _restored(arrays["codes"], np.uint8, (extent, pq_m))
                index._codebooks = _restored(arrays["codebooks"], np.float32,
                                             index._codebooks.shape)
                if not np.isfinite(index._codebooks).all():
                    raise ValueError("HNSW codebooks are not finite")
                index._books_t = np.ascontiguousarray(index._codebooks.transpose(0, 2, 1))
                index._code_fit = int(p[_P_CODE_FIT])
            elif quant is not None:
                index._codes = _restored(arrays["codes"], np.int8,
                                         (extent, index._code_width))
                index._code_norms = _restored(arrays["code_norms"], np.float32, (extent,))
                index._code_lo = _restored(arrays["code_lo"], np.float32, (index.dim,))
                index._code_step = _restored(arrays["code_step"], np.float32, (index.dim,))
                if not (np.isfinite(index._code_lo).all()
                        and np.isfinite(index._code_step).all()
                        and (index._code_step > 0).all()
                        and np.isfinite(index._code_norms).all()):
                    raise ValueError("HNSW codes have a range that is not finite and positive")
                index._code_fit = int(p[_P_CODE_FIT])
            index._levels = _restored(arrays["levels"], np.int8, (extent,))
            index._links0 = _restored(arrays["links0"], np.int32, (extent, 2 * m))
            index._upper_slot = _restored(arrays["upper_slot"], np.int32, (extent,))
            if slotted:
                index._upper_slot, index._upper_links = _own_levels(
                    index._levels, index._upper_slot,
                    _restored(arrays["upper_links"], np.int32, (slots, n_levels, m)))
                slots = index._upper_links.shape[0]
            else:
                index._upper_links = _restored(arrays["upper_links"], np.int32, (slots, m))
            index._upper_levels = n_levels
            index._twins = _restored(arrays["twins"], np.int32, (extent,))
        except KeyError as exc:
            raise ValueError(f"HNSW arrays lack {exc}") from None
        index._entry, index._top, index._n_nodes = (int(p[_P_ENTRY]), int(p[_P_TOP]),
                                                    int(p[_P_NODES]))
        index._extent, index._n_slots = extent, slots
        index._writable = False
        return index


_NO_NORMS = np.zeros(1, np.float32)
_F32 = np.dtype(np.float32)
_BOOL = np.dtype(np.bool_)
_I64 = np.dtype(np.int64)
_F64 = np.dtype(np.float64)
_NO_ALLOW = np.zeros(1, np.bool_)


def _grown(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.full(shape, -1, array.dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


def _own_levels(levels: np.ndarray, upper_slot: np.ndarray, slotted: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Format 3's upper lists (``slotted[upper_slot[r], l - 1]``: a slot of every
    level for each upper node) as ``(upper_slot, upper_links)`` where a node owns
    only the levels it has, in row order. The arrays may come from a crafted file:
    a slot outside them, or one given to a row of level 0, is refused."""
    upper = levels > 0
    slot = upper_slot[upper].astype(np.int64)
    count = levels[upper].astype(np.int64)
    if np.any(upper_slot[~upper] != -1) or np.any(slot < 0) \
            or np.any(slot >= slotted.shape[0]) or np.any(count > slotted.shape[1]):
        raise ValueError("upper slots do not match the node levels")
    start = np.cumsum(count) - count
    own = np.full(levels.shape, -1, np.int32)
    own[upper] = start
    level_of = np.arange(int(count.sum())) - np.repeat(start, count)
    return own, np.ascontiguousarray(slotted[np.repeat(slot, count), level_of])


def _aligned_grown(codes: np.ndarray, rows: int) -> np.ndarray:
    """``codes`` copied into ``rows`` rows (zeros past its own) whose first byte is
    on a cache line, so that a row of 64 bytes is one line."""
    out = line_aligned((rows, codes.shape[1]), np.int8, zero=True)
    n = min(rows, codes.shape[0])
    out[:n] = codes[:n]
    return out


def _restored(array: np.ndarray, dtype, shape: tuple[int, ...]) -> np.ndarray:
    array = np.asarray(array)
    # math.prod: Python ints, so a crafted shape cannot overflow to a match
    if array.dtype != dtype or array.size != math.prod(shape):
        raise ValueError(f"HNSW array has dtype {array.dtype} and size {array.size}, "
                         f"expected {np.dtype(dtype)} and shape {shape}")
    return array.reshape(shape)


def _check_lists(lists: np.ndarray, levels: np.ndarray, level: int,
                 owners: np.ndarray) -> None:
    """The lists of `owners` (rows) on one level: ids in range, a prefix, of nodes
    on that level, never the owner. (Not checked: an id twice, which costs a
    sort and harms only recall.)"""
    fault = kernels.check_lists(np.ascontiguousarray(lists), levels, level,
                                np.ascontiguousarray(owners, np.int64))
    if fault:
        raise ValueError({1: f"level-{level} links point outside the index",
                          2: f"level-{level} links have gaps",
                          3: f"a level-{level} list links its own node",
                          4: f"level-{level} links point to rows that are not nodes "
                             "there"}[fault])


def _check_twins(twins: np.ndarray, levels: np.ndarray, links0: np.ndarray) -> None:
    members = np.flatnonzero(twins != -1)
    if not members.size:
        return   # no rings (no duplicate vectors): nothing below can fail, and the last
                 # check alone walks every link (37 ms of a 100k x 128 open)
    nexts = np.where(twins[members] >= 0, twins[members], -twins[members] - 2)
    if np.any(nexts >= levels.shape[0]):
        raise ValueError("twin rings point outside the index")
    # rings: members are nodes and each is the successor of exactly one member
    if np.any(levels[members] < 0) or np.any(twins[nexts] == -1) \
            or np.unique(nexts).size != members.size:
        raise ValueError("twin rings are broken")
    unlinked = twins <= -2
    if unlinked.any() and (np.any(links0[unlinked] >= 0)
                           or np.any(unlinked[links0[links0 >= 0]])):
        raise ValueError("a twin is linked into the graph")
