"""`varvedb bench walk`: the graph walk alone, and the walk with its neighbours'
1-bit codes beside the links (issue 32, item 1), on one graph, in one process.

What it answers: would a level-0 block that holds, beside each node's list, its
neighbours' compact codes (scored in one loop per expansion, an exact distance
only where the estimate's error bound cannot reject the neighbour) make the
walk faster than today's? The index builds its default graph (and hnswlib its
own, same m and ef_construction); then, over the same queries, one at a time,
interleaved query by query (the order rotated by query), per ef of a sweep:

* ``varvedb``: the package's walk, ``HnswIndex.searcher`` (index level: no
  collection, no database above it), over the vectors (``quantize=None``);
  ``varvedb:int8`` the same graph walking its int8 codes, as ``vv.HNSW()``
  does by default at these dimensions (the best 4 k reranked from the vectors);
* ``hnswlib``: ``knn_query`` of one query;
* ``plain``: this module's walk over varvedb's graph, on unit rows (cosine as
  a dot product): the coded walks' control, the same code without the codes;
* ``coded``: ``plain`` plus, beside each list, each neighbour's RaBitQ-style
  code: the sign bits of its rotated offset from the rows' centroid, and two
  one-byte corrections (its offset's norm over the code's agreement; its
  offset's dot with the centroid). A neighbour is estimated by popcounts
  against the query's 4-bit bit planes; it is measured exactly only when
  ``estimate - eps * K * |q - c|`` is below the pool's worst distance;
* ``edge``: the same with the code of the neighbour's offset from the list's
  owner (SymphonyQG-style; one correction byte): its estimate starts from the
  owner's exact dot, so its error scales with the edge's length;
* ``oracle``: ``plain`` with every distance read from this query's distances
  to all rows, computed for every query before any is timed: what the walk
  would cost if a distance cost one 4-byte read (a cache miss, not a row's
  four to eight), the ceiling of any cheaper-distance layout.

Add ``:EPS`` to ``coded`` / ``edge`` (default 0.7 / 1.0, the values tuned on
glove-50 100k), and ``:nopf`` to any walk but hnswlib's to drop its
prefetches (issued with the ``llvm.prefetch`` intrinsic of
:func:`varvedb.kernels.distance.prefetch_row`: the next node's list and block
as soon as it is known, and each fresh neighbour's row before any is measured);
``varvedb:nopf`` is the package's own ``search_one`` compiled again in this
process with its walks' prefetches no-ops (:func:`search_one_without_prefetch`).
``varvedb:bfs`` / ``varvedb:rcm`` walk the package's graph renumbered
(:func:`node_order`, :func:`renumbered`: breadth first from the entry, or
reverse Cuthill-McKee), its rows, codes and lists permuted, the ids mapped back
to the table's rows outside the timed call: would a layout where the nodes a
walk meets together sit together in memory pay?

Times are the calling thread's CPU time (``time.thread_time``) per query, so
that a shared, loaded machine's preemptions do not land on whichever engine ran
then; a round's QPS is queries over its summed time. Engines take turns query
by query (the order rotated), each on a different query: engines that walked
one query in turn would find its rows in cache after the first (a run that
did so measured the prefetches as a loss and the codes as a gain of 10 %). Per (engine, ef): recall@10
and the median and spread of QPS over rounds; per engine the QPS at recall
0.90 / 0.95 / 0.99 (linear between the sweep points around it, per round) and
its ratio to hnswlib's, per round (median, min-max); the machine's load
(1-minute average after each round); bytes per vector (vectors + graph +
codes); each build's wall time. Cosine sets only (the coded walks measure unit rows).
"""
from __future__ import annotations

import contextlib
import json
import time
import types

import numpy as np
from numba import njit

from varvedb.errors import OptionError
from varvedb.index.hnsw import HnswIndex
from varvedb.kernels import hnsw as hnsw_kernels
from varvedb.kernels import jit
from varvedb.kernels.distance import _popcount, _row_word, prefetch_row, unmanaged
from varvedb.kernels.heaps import bounded_insert
from varvedb.storage.memory import line_aligned

from . import datasets

K = 10
TARGETS = (0.90, 0.95, 0.99)
WARMUP = 20
ENGINES = ("varvedb", "hnswlib", "plain", "coded", "edge", "oracle")
DEFAULT_EPS = {"coded": 0.7, "edge": 1.0}
_J = dict(cache=True, nogil=True, fastmath=True)
_EXPANDED = np.int32(-(2**31))
_ID_MASK = np.int32(2**31 - 1)
_FAR = np.float32(3.0e38)
PLANES = 4                # bits of the query's quantized form


# ------------------------------------------------------------------ codes (numpy)

def rotation(dim: int, seed: int = 0) -> np.ndarray:
    """A random orthogonal (padded, padded) float32 matrix, padded = dim rounded up to 64."""
    padded = -(-dim // 64) * 64
    g = np.random.default_rng(seed).standard_normal((padded, padded))
    return np.linalg.qr(g)[0].astype(np.float32)


def _signs(offsets: np.ndarray, rot: np.ndarray):
    """(bits packed (..., padded / 8), K = |e| / (f sqrt padded)) of offsets e (..., dim):
    f is the code's agreement with the rotated unit offset (RaBitQ's <x̄, o>)."""
    padded = rot.shape[0]
    e = np.zeros(offsets.shape[:-1] + (padded,), np.float32)
    e[..., :offsets.shape[-1]] = offsets
    r = np.linalg.norm(e, axis=-1)
    o = (e / np.maximum(r, 1e-30)[..., None]) @ rot.T
    f = np.abs(o).sum(axis=-1) / np.sqrt(padded)
    return (np.packbits(o > 0, axis=-1, bitorder="little"),
            (r / (np.maximum(f, 1e-6) * np.sqrt(padded))).astype(np.float32))


def _byte(values: np.ndarray) -> tuple[np.ndarray, float, float]:
    lo = float(values.min())
    step = (float(values.max()) - lo) / 255 or 1.0
    return np.clip(np.rint((values - lo) / step), 0, 255).astype(np.uint8), lo, step


def blocks(unit: np.ndarray, links0: np.ndarray, rot: np.ndarray, edge: bool,
           chunk: int = 8192) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each list's block: ``(n, 2m, padded / 8 + 2)`` uint8, neighbour j's code bytes,
    then its centroid-dot byte and its K byte (one-byte scales: ``corr`` = [a_lo,
    a_step, k_lo, k_step]); and the centre (the rows' centroid, zeros with ``edge``).
    ``edge``: codes of the offset from the list's owner, else from the centroid."""
    n, width = links0.shape
    dim = unit.shape[1]
    centre = np.zeros(dim, np.float32) if edge else unit.mean(axis=0).astype(np.float32)
    words = rot.shape[0] // 8
    out = np.zeros((n, width, words + 2), np.uint8)
    ids = np.maximum(links0, 0)
    if edge:
        ks = np.empty((n, width), np.float32)
        for lo in range(0, n, chunk):
            part = slice(lo, lo + chunk)
            out[part, :, :words], ks[part] = _signs(
                unit[ids[part]] - unit[part][:, None, :], rot)
        ks[links0 < 0] = 0
        a_q, a_lo, a_step = np.zeros((n, width), np.uint8), 0.0, 0.0
        k_q, k_lo, k_step = _byte(ks)
    else:
        codes, k_rows = _signs(unit - centre, rot)
        a_rows = (unit - centre) @ centre
        (a_q, a_lo, a_step), (k_q, k_lo, k_step) = _byte(a_rows), _byte(k_rows)
        out[:, :, :words] = codes[ids]
        a_q, k_q = a_q[ids], k_q[ids]
    out[:, :, words] = a_q
    out[:, :, words + 1] = k_q
    out[links0 < 0] = 0
    return out, np.array([a_lo, a_step, k_lo, k_step], np.float32), centre


# ------------------------------------------------------------------ kernels

@njit(inline="always", **_J)
def _dist(x, dq, v, q, mode):
    # 1 - <x[v], q>, or in the oracle mode this query's precomputed distance
    if mode == 3:
        return dq[v]
    acc = np.float32(0.0)
    for j in range(x.shape[1]):
        acc += x[v, j] * q[j]
    return np.float32(1.0) - acc


@njit(**_J)
def _descend(x, dq, q, mode, upper_slot, upper_links, node, top):
    dist = _dist(x, dq, node, q, mode)
    for level in range(top, 0, -1):
        improved = True
        while improved:
            improved = False
            slot = upper_slot[node] + level - 1
            for j in range(upper_links.shape[1]):
                v = upper_links[slot, j]
                if v < 0:
                    break
                d = _dist(x, dq, v, q, mode)
                if d < dist:
                    dist, node, improved = d, v, True
    return node, dist


@njit(inline="always", **_J)
def _dot(a, b):
    acc = np.float32(0.0)
    for j in range(a.shape[0]):
        acc += a[j] * b[j]
    return acc


@njit(**_J)
def prepare(query, centre, rot, planes, consts):
    """The unit query (returned); ``planes`` (words, 4): the bit planes of its rotated
    offset from ``centre`` quantized to 4 bits; ``consts`` = [<q, centre>, sum of the
    rotated offset, |q - centre|, its quantizer's low end, its step]."""
    dim = query.shape[0]
    q = query / max(np.float32(np.sqrt(_dot(query, query))), np.float32(1e-30))
    off = q - centre
    w = np.zeros(rot.shape[0], np.float32)
    for i in range(rot.shape[0]):
        acc = np.float32(0.0)
        for j in range(dim):
            acc += rot[i, j] * off[j]
        w[i] = acc
    lo = w.min()
    step = max((w.max() - lo) / np.float32(15.0), np.float32(1e-30))
    planes[:] = 0
    for i in range(w.shape[0]):
        u = np.int64(np.rint((w[i] - lo) / step))
        for b in range(PLANES):
            if (u >> b) & 1:
                planes[i // 64, b] |= np.uint64(1) << np.uint64(i % 64)
    consts[0] = _dot(q, centre)
    consts[1] = w.sum()
    consts[2] = np.sqrt(_dot(off, off))
    consts[3] = lo
    consts[4] = step
    return q


@njit(inline="always", **_J)
def _prefetch_block(block, v):
    rec = block[v]
    per_line = max(64 // rec.shape[1], 1)
    for j in range(0, rec.shape[0], per_line):
        prefetch_row(rec, j)


@njit(inline="always", **_J)
def _open_from(pool_i, at, size):
    # the first pool entry from `at` on not yet expanded (size if none)
    while at < size and pool_i[at] < 0:
        at += 1
    return at


@njit(**_J)
def walk(x, dq, links0, block, corr, upper_slot, upper_links, entry, top, q, planes, consts,
         mode, eps, ef, prefetch, visited, stamp, pool_d, pool_i, fresh, stats):
    """One query's level-0 walk (HNSW's sorted pool, as kernels.hnsw.beam_search);
    returns the pool size, ids ascending in ``pool_i``.

    ``mode`` 0 plain, 1 coded (centroid codes), 2 edge (owner codes), 3 oracle
    (every distance is ``dq[row]``). The coded modes estimate each fresh neighbour
    from ``block[node]`` and measure it only when the estimate less its margin
    is below the pool's worst. ``stats`` += [exact distances, estimates]."""
    x, links0, block, visited = unmanaged(x), unmanaged(links0), unmanaged(block), \
        unmanaged(visited)
    pool_d, pool_i, fresh = unmanaged(pool_d), unmanaged(pool_i), unmanaged(fresh)
    node, dist = _descend(x, dq, q, mode, upper_slot, upper_links, entry, top)
    pool_d[0], pool_i[0] = dist, node
    visited[node] = stamp
    size, cursor = 1, 0
    words = planes.shape[0]
    a_lo, a_step, k_lo, k_step = corr[0], corr[1], corr[2], corr[3]
    margin = eps * consts[2]
    n_exact = n_est = 0
    while cursor < size:
        node = pool_i[cursor]
        pool_i[cursor] = node | _EXPANDED
        nxt = _open_from(pool_i, cursor + 1, size)
        if prefetch and nxt < size:
            prefetch_row(links0, pool_i[nxt])
            if mode == 1 or mode == 2:
                _prefetch_block(block, pool_i[nxt])
        worst = pool_d[size - 1] if size == ef else _FAR
        base = np.float32(1.0) - pool_d[cursor] if mode == 2 else consts[0] + a_lo
        rec = block[node if mode == 1 or mode == 2 else 0]    # others get a stand-in block
        n_fresh = 0
        for j in range(links0.shape[1]):
            v = links0[node, j]
            if v < 0:
                break
            if visited[v] == stamp:
                continue
            visited[v] = stamp
            if mode == 1 or mode == 2:
                ones = acc = np.int64(0)
                for t in range(words):
                    b = _row_word(rec, j, 8 * t)
                    ones += _popcount(b)
                    for p in range(PLANES):
                        acc += _popcount(b & planes[t, p]) << p
                s = consts[3] * np.float32(ones) + consts[4] * np.float32(acc)
                k = k_lo + k_step * np.float32(rec[j, 8 * words + 1])
                ip = base + a_step * np.float32(rec[j, 8 * words]) \
                    + k * (np.float32(2.0) * s - consts[1])
                n_est += 1
                if np.float32(1.0) - ip - k * margin >= worst:
                    continue
            fresh[n_fresh] = v
            n_fresh += 1
            if prefetch and mode != 3:
                prefetch_row(x, v)
        for t in range(n_fresh):
            v = fresh[t]
            d = _dist(x, dq, v, q, mode)
            n_exact += 1
            if size == ef and d >= pool_d[size - 1]:
                continue
            size, pos = bounded_insert(pool_d, pool_i, size, ef, d, v)
            cursor = min(cursor, pos)
            if pos <= nxt:
                nxt = pos
                if prefetch:
                    prefetch_row(links0, v)
                    if mode == 1 or mode == 2:
                        _prefetch_block(block, v)
        cursor = _open_from(pool_i, cursor, size)
    for s in range(size):
        pool_i[s] &= _ID_MASK
    stats[0] += n_exact
    stats[1] += n_est
    return size


@njit(**_J)
def search(x, dq, links0, block, corr, upper_slot, upper_links, entry, top, query, centre,
           rot, planes, consts, mode, eps, ef, prefetch, visited, generation, pool_d, pool_i,
           fresh, stats):
    """:func:`walk` of one raw query (normalized and, for the coded modes, prepared here)."""
    stamp = generation[0] + 1
    if stamp > 0xFFFF:
        visited[:] = 0
        stamp = 1
    generation[0] = stamp
    if mode == 1 or mode == 2:
        q = prepare(query, centre, rot, planes, consts)
    else:
        q = query / max(np.float32(np.sqrt(_dot(query, query))), np.float32(1e-30))
    return walk(x, dq, links0, block, corr, upper_slot, upper_links, entry, top, q, planes,
                consts, mode, eps, ef, prefetch, visited, np.uint16(stamp), pool_d, pool_i,
                fresh, stats)


# ------------------------------------------------- the package's walk, varied

@jit.njit(inline="always", nogil=True, fastmath=True)
def _no_prefetch_row(arena, row):
    pass


@jit.njit(inline="always", nogil=True, fastmath=True)
def _no_prefetch_norm(norms, row, metric):
    pass


# the package's kernels that issue prefetches, with the parameters each compiles
# read-only (as in varvedb.kernels.hnsw), in the order they call each other
_PREFETCHING = (("beam_search", ("links0", "upper_slot", "upper_links", "twins")),
                ("filtered_search", ()), ("search_one", ("graph", "data")))
_NOPF: dict = {}


def search_one_without_prefetch():
    """``varvedb.kernels.hnsw.search_one`` compiled again (uncached, once a process)
    from the package's own source with every prefetch of its walks a no-op: the
    same kernel but for the ``llvm.prefetch`` calls, at no cost to the package's
    walk. (The rerank's prefetch of the candidates' rows, in the distance module,
    is kept: it is not the walk's.)"""
    if not _NOPF:
        scope = dict(vars(hnsw_kernels))
        scope["prefetch_row"], scope["prefetch_norm"] = _no_prefetch_row, _no_prefetch_norm
        options = dict(cache=False, nogil=True, fastmath=True)
        for name, readonly in _PREFETCHING:
            f = getattr(hnsw_kernels, name).py_func
            scope[name] = jit.njit(readonly=readonly, **options)(
                types.FunctionType(f.__code__, scope, name, f.__defaults__, f.__closure__))
        _NOPF["search_one"] = scope["search_one"]
    return _NOPF["search_one"]


@contextlib.contextmanager
def _walking_with(search_one):
    """``HnswIndex.searcher`` made inside binds ``search_one`` (it looks the kernel
    up once, when it binds)."""
    kept = hnsw_kernels.search_one
    hnsw_kernels.search_one = search_one
    try:
        yield
    finally:
        hnsw_kernels.search_one = kept


ORDERS = ("bfs", "rcm")


@njit(**_J)
def _bfs(indptr, indices, levels, first, degree):
    """Rows in breadth-first order over the lists ``indices[indptr[r]:indptr[r + 1]]``,
    from ``first``, then from each node not reached yet in row order; with ``degree``
    (non-empty) each node's new neighbours in ascending degree (Cuthill-McKee).
    Rows that are not nodes come last."""
    n = levels.shape[0]
    order = np.empty(n, np.int64)
    seen = np.zeros(n, np.bool_)
    tail = 0
    for s in range(-1, n):
        start = first if s < 0 else s
        if seen[start] or levels[start] < 0:
            continue
        seen[start] = True
        order[tail] = start
        head, tail = tail, tail + 1
        while head < tail:
            u = order[head]
            head += 1
            lo = tail
            for j in range(indptr[u], indptr[u + 1]):
                v = indices[j]
                if not seen[v]:
                    seen[v] = True
                    order[tail] = v
                    tail += 1
                    if degree.shape[0]:         # insertion into its place by degree
                        t = tail - 1
                        while t > lo and degree[order[t - 1]] > degree[v]:
                            order[t] = order[t - 1]
                            t -= 1
                        order[t] = v
    for r in range(n):
        if not seen[r]:
            order[tail] = r
            tail += 1
    return order


def node_order(index: HnswIndex, how: str) -> np.ndarray:
    """A renumbering of the graph's rows (new row -> old row): ``bfs`` breadth first
    from the entry over the level-0 lists as they are; ``rcm`` reverse Cuthill-McKee
    over the lists made symmetric (from a node of least degree)."""
    a = index.to_arrays()
    links0, levels = np.asarray(a["links0"]), np.asarray(a["levels"])
    n = levels.shape[0]
    src = np.repeat(np.arange(n), links0.shape[1]).reshape(links0.shape)[links0 >= 0]
    dst = links0[links0 >= 0].astype(np.int64)
    if how == "rcm":
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        key = np.unique(src * n + dst)
        src, dst = key // n, key % n
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    indices = dst[np.argsort(src, kind="stable")]
    if how == "bfs":
        return _bfs(indptr, indices, levels, index._entry, np.zeros(0, np.int64))
    degree = np.diff(indptr)
    first = int(np.argmin(np.where(levels >= 0, degree, n + 1)))
    return _bfs(indptr, indices, levels, first, degree)[::-1].copy()


def _without_codes(index: HnswIndex) -> HnswIndex:
    """The same graph as ``index`` (int8) walking the vectors themselves."""
    from varvedb.index import hnsw as hnsw_index
    arrays = {name: a for name, a in index.to_arrays().items()
              if name not in ("codes", "code_norms", "code_lo", "code_step")}
    arrays["params"] = arrays["params"].copy()
    arrays["params"][[hnsw_index._P_QUANT, hnsw_index._P_CODE_FIT]] = 0
    return HnswIndex.from_arrays(arrays)


def renumbered(index: HnswIndex, x: np.ndarray, norms: np.ndarray, order: np.ndarray):
    """(the same graph with row ``order[i]`` as row ``i``, its rows, their norms):
    lists, twins, levels, codes and the entry permuted, as a translation layer
    between the graph's ids and the table's rows would store them."""
    from varvedb.index import hnsw as hnsw_index
    a = {name: np.asarray(v) for name, v in index.to_arrays().items()}
    n = a["levels"].shape[0]
    if order.shape != (n,) or x.shape[0] != n:
        raise OptionError("renumbered: every row must be a node")
    inv = np.empty(n, np.int64)
    inv[order] = np.arange(n)

    def ids(lists):
        return np.where(lists >= 0, inv[np.maximum(lists, 0)], -1).astype(np.int32)

    out = dict(a)
    out["params"] = a["params"].copy()
    out["params"][hnsw_index._P_ENTRY] = inv[index._entry]
    out["levels"] = a["levels"][order]
    out["links0"] = ids(a["links0"][order])
    out["upper_slot"] = a["upper_slot"][order]
    out["upper_links"] = ids(a["upper_links"])
    t = a["twins"][order].astype(np.int64)
    out["twins"] = np.where(t >= 0, inv[np.maximum(t, 0)],
                            np.where(t <= -2, -inv[np.maximum(-t - 2, 0)] - 2, -1)
                            ).astype(np.int32)
    if "code_norms" in a:
        codes = line_aligned(a["codes"].shape, a["codes"].dtype)
        codes[:] = a["codes"][order]
        out["codes"], out["code_norms"] = codes, a["code_norms"][order]
    moved = HnswIndex.from_arrays(out)
    moved.validate(n)
    return moved, np.ascontiguousarray(x[order]), np.ascontiguousarray(norms[order])


# ------------------------------------------------------------------ the run

class _Graph:
    """One data set's graphs (varvedb's, hnswlib's) and what the walks share."""

    def __init__(self, ds, m: int, ef_construction: int, echo):
        import hnswlib
        self.x = np.ascontiguousarray(ds.train, np.float32)
        n, dim = self.x.shape
        self.norms = np.linalg.norm(self.x, axis=1).astype(np.float32)
        self.unit = self.x / np.maximum(self.norms, 1e-30)[:, None]
        t = time.perf_counter()
        # the build walks the vectors whatever the walk reads, so one build serves
        # both: the int8 graph (vv.HNSW()'s default at these dimensions) and the
        # same graph without its codes (quantize=None)
        self.coded = HnswIndex(dim, "cosine", m, ef_construction, quantize="int8")
        self.coded.add(self.x, self.norms, np.arange(n))
        self.index = _without_codes(self.coded)
        self.build = {"varvedb": time.perf_counter() - t}
        t = time.perf_counter()
        self.hnsw = hnswlib.Index(space="cosine", dim=dim)
        self.hnsw.init_index(max_elements=n, M=m, ef_construction=ef_construction,
                             random_seed=0)
        self.hnsw.set_num_threads(2)
        self.hnsw.add_items(self.x, np.arange(n))
        self.build["hnswlib"] = time.perf_counter() - t
        self.hnsw.set_num_threads(1)
        arrays = self.index.to_arrays()
        self.links0 = np.ascontiguousarray(arrays["links0"])
        self.upper_slot = np.ascontiguousarray(arrays["upper_slot"])
        self.upper_links = np.ascontiguousarray(arrays["upper_links"])
        self.entry, self.top = self.index._entry, self.index._top
        self.rot = rotation(dim)
        self._blocks: dict = {}
        self._moved: dict = {}
        self.no_dq = np.zeros(1, np.float32)
        self.vector_bytes = 4 * dim
        self.bytes = {"varvedb": 4 * dim + self.index.node_bytes() / n,
                      "varvedb:int8": 4 * dim + self.coded.node_bytes() / n,
                      "hnswlib": 4 * dim + 4 * 2 * m + 16}
        self.bytes["plain"] = self.bytes["oracle"] = self.bytes["varvedb"]
        for kind in ("coded", "edge"):
            self.bytes[kind] = self.bytes["varvedb"] + self.links0.shape[1] * (
                self.rot.shape[0] // 8 + 2)
        echo(f"built in {self.build['varvedb']:.1f} s (varvedb), {self.build['hnswlib']:.1f} s "
             f"(hnswlib, 2 threads); load {_load():.2f}")

    def distances(self, test: np.ndarray) -> np.ndarray:
        """(queries, rows) float32: each query's cosine distance to every row."""
        if getattr(self, "_dq", None) is None or self._dq.shape[0] != len(test):
            unit_q = test / np.maximum(np.linalg.norm(test, axis=1), 1e-30)[:, None]
            self._dq = (1.0 - unit_q @ self.unit.T).astype(np.float32)
        return self._dq

    def moved(self, how: str, coded: bool):
        """(index, rows, norms, order): the graph renumbered by :func:`node_order`."""
        if (how, coded) not in self._moved:
            order = node_order(self.index, how)
            self._moved[how, coded] = (*renumbered(self.coded if coded else self.index,
                                                   self.x, self.norms, order), order)
        return self._moved[how, coded]

    def block(self, kind: str):
        if kind not in self._blocks:
            self._blocks[kind] = (blocks(self.unit, self.links0, self.rot, kind == "edge")
                                  if kind in ("coded", "edge") else
                                  (np.zeros((1, 1, 8 * (self.rot.shape[0] // 64) + 2),
                                            np.uint8), np.zeros(4, np.float32),
                                   np.zeros(self.x.shape[1], np.float32)))
        return self._blocks[kind]


def _load() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def parse_engine(spec: str) -> tuple[str, float, bool, str | None]:
    """'coded:0.5:nopf' -> (kind, eps, prefetch, order); 'varvedb:rcm' -> (..., 'rcm')."""
    kind, *opts = spec.split(":")
    if kind not in ENGINES:
        raise OptionError(f"walk engine {spec!r}: not one of {', '.join(ENGINES)}")
    eps, prefetch, order = DEFAULT_EPS.get(kind, 0.0), True, None
    for opt in opts:
        if opt == "nopf" and kind != "hnswlib":
            prefetch = False
        elif opt in ORDERS and kind == "varvedb":
            order = opt
        elif opt == "int8" and kind == "varvedb":
            pass
        elif kind in DEFAULT_EPS:
            try:
                eps = float(opt)
            except ValueError:
                raise OptionError(f"walk engine {spec!r}: {opt!r} is not an eps") from None
        else:
            raise OptionError(f"walk engine {spec!r}: {kind} takes no {opt!r}")
    return kind, eps, prefetch, order


def _engine(g: _Graph, spec: str, ef: int, test: np.ndarray):
    """(search(i) -> ids of query ``test[i]``, stats, rows: the table's row of each
    id, or None) for one engine at one ef."""
    kind, eps, prefetch, order = parse_engine(spec)
    coded = "int8" in spec.split(":")
    stats = np.zeros(2, np.int64)
    if kind == "varvedb":
        index, x, norms, rows = (g.moved(order, coded) if order else
                                 (g.coded if coded else g.index, g.x, g.norms, None))
        with (contextlib.nullcontext() if prefetch
              else _walking_with(search_one_without_prefetch())):
            f = index.searcher(x, norms, K, ef=ef)
        return (lambda i: f(test[i])[0]), stats, rows
    if kind == "hnswlib":
        def knn(i):
            g.hnsw.set_ef(ef)
            return g.hnsw.knn_query(test[i], k=K)[0][0]
        return knn, stats, None
    mode = {"plain": 0, "coded": 1, "edge": 2, "oracle": 3}[kind]
    block, corr, centre = g.block(kind)
    # the oracle's distances: every query's to every row, computed once before any
    # query is timed (computed per query, their pass over all rows evicted the graph)
    dq = g.distances(test) if kind == "oracle" else None
    n = g.x.shape[0]
    visited, generation = np.zeros(n, np.uint16), np.zeros(1, np.int64)
    pool_d, pool_i = np.empty(ef, np.float32), np.empty(ef, np.int32)
    fresh = np.empty(g.links0.shape[1], np.int32)
    planes = np.zeros((g.rot.shape[0] // 64, PLANES), np.uint64)
    consts = np.zeros(5, np.float32)

    def walk_one(i):
        size = search(g.unit, g.no_dq if dq is None else dq[i], g.links0, block, corr,
                      g.upper_slot, g.upper_links, g.entry, g.top, test[i], centre, g.rot,
                      planes, consts, mode, np.float32(eps), ef, prefetch, visited,
                      generation, pool_d, pool_i, fresh, stats)
        return pool_i[:min(size, K)].copy()
    return walk_one, stats, None


def _at(points, target):
    """QPS at ``target`` recall, linear between the sweep points around it; the first
    point's when it already reaches it (nan: not reached)."""
    points = sorted(points)
    if points and points[0][0] >= target:
        return points[0][1]
    for (r0, q0), (r1, q1) in zip(points, points[1:]):
        if r0 <= target <= r1:
            return q0 + (q1 - q0) * (target - r0) / max(r1 - r0, 1e-12)
    return float("nan")


def _spread(values):
    values = [v for v in values if v == v]
    if not values:
        return None
    return {"median": float(np.median(values)), "min": float(min(values)),
            "max": float(max(values))}


def _fmt(spread, spec: str) -> str:
    if spread is None:
        return "not reached"
    return (f"{spread['median']:{spec}} [{spread['min']:{spec}}-{spread['max']:{spec}}]")


def run(spec: str, cache_dir: str, *, rows: int = 100_000, dim: int = 128,
        queries: int = 1000, efs=(10, 20, 40, 80, 160, 320), rounds: int = 5,
        engines=("varvedb", "hnswlib", "plain", "coded", "edge", "oracle"), m: int = 16,
        ef_construction: int = 200, echo=print) -> dict:
    """The figures described in the module docstring, as a dict (echoed as they come)."""
    for e in engines:
        parse_engine(e)
    if "hnswlib" not in engines:
        raise OptionError("walk: the engines must include hnswlib (the reference)")
    ds = datasets.load(spec, cache_dir, echo, rows=rows, queries=queries, dim=dim,
                       metric=None if spec in datasets.NAMED else "cosine")
    if ds.metric != "cosine":
        raise OptionError(f"walk: cosine sets only, {ds.name} is {ds.metric}")
    g = _Graph(ds, m, ef_construction, echo)
    test, truth = np.ascontiguousarray(ds.test, np.float32), ds.neighbors[:, :K]
    curves = {e: {} for e in engines}       # engine -> ef -> [(recall, qps) per round]
    counts = {e: {} for e in engines}
    loads = []
    stride = max(len(test) // len(engines), 1)
    for ef in efs:
        fs = [_engine(g, e, ef, test) for e in engines]
        for f, stats, _ in fs:
            for i in range(min(WARMUP, len(test))):
                f(i)
            stats[:] = 0
        for _ in range(rounds):
            spent, hits = np.zeros(len(fs)), np.zeros(len(fs))
            for i in range(len(test)):
                for j in range(len(fs)):
                    e = (i + j) % len(fs)
                    # engines side by side walk different queries: one that walked
                    # the query just walked would find its rows in cache
                    at = (i + e * stride) % len(test)
                    t = time.thread_time()
                    ids = fs[e][0](at)
                    spent[e] += time.thread_time() - t
                    if fs[e][2] is not None:        # a renumbered graph's ids
                        ids = fs[e][2][ids]
                    hits[e] += np.intersect1d(ids, truth[at]).size
            for e, name in enumerate(engines):
                curves[name].setdefault(ef, []).append(
                    (hits[e] / truth.size, len(test) / spent[e]))
            loads.append(_load())
        for (_, stats, _), name in zip(fs, engines):
            counts[name][ef] = (stats / (rounds * len(test))).tolist()
            recall, qps = curves[name][ef][0][0], [p[1] for p in curves[name][ef]]
            echo(f"ef {ef:4d} {name:16s} recall {recall:.4f}  QPS median {np.median(qps):8.0f} "
                 f"[{min(qps):.0f}-{max(qps):.0f}]  exact/q {counts[name][ef][0]:7.1f}  "
                 f"estimated/q {counts[name][ef][1]:7.1f}")
    report = {"data": f"{ds.name} {ds.rows}x{ds.dim} cosine, {len(test)} queries",
              "rounds": rounds, "efs": list(efs), "build_s": g.build,
              "load": _spread(loads), "engines": {}}
    echo(f"load (1-min average after each round): {_fmt(report['load'], '.2f')}")
    for name in engines:
        kind = "varvedb:int8" if name.startswith("varvedb") and "int8" in name.split(":") \
            else parse_engine(name)[0]
        entry = {"bytes_per_vector": g.bytes[kind], "curve": {
            ef: {"recall": curves[name][ef][0][0], "qps": _spread([p[1] for p in curves[name][ef]]),
                 "exact_per_query": counts[name][ef][0],
                 "estimated_per_query": counts[name][ef][1]} for ef in efs}}
        for target in TARGETS:
            own, ref = ([_at([curves[e][ef][r] for ef in efs], target) for r in range(rounds)]
                        for e in (name, "hnswlib"))
            entry[f"qps@{target}"] = _spread(own)
            entry[f"vs_hnswlib@{target}"] = _spread([a / b for a, b in zip(own, ref)])
            echo(f"recall {target}: {name:16s} QPS {_fmt(entry[f'qps@{target}'], '.0f')}  "
                 f"x hnswlib {_fmt(entry[f'vs_hnswlib@{target}'], '.2f')}")
        echo(f"{name:16s} bytes/vector {g.bytes[kind]:.0f}")
        report["engines"][name] = entry
    return report


def write(report: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
