"""IVF kernels: k-means, product-quantizer codes, and the scan of inverted lists.

What this is for: ``vv.IVFPQ`` (:mod:`varvedb.index.ivfpq`) splits the rows into
``lists`` clusters by k-means and, at query time, scans only the rows of the
``probes`` clusters nearest the query. With ``pq_m`` it keeps per row only a
product-quantizer code of the row's residual from its cluster's centroid
(``pq_m`` bytes: one byte per sub-vector of ``dim / pq_m`` dimensions, the
index of its nearest of 256 sub-centroids), scans those codes, and measures
only the best candidates exactly from the stored vectors. Without ``pq_m``
(IVF-Flat) the probed rows are measured exactly from the arena.

The code scan (asymmetric distance, "ADC"), for a row ``x = c + r`` in list
``l`` whose residual ``r`` decodes to ``r̂``:

    |q - c - r̂|² = |q - c|² + (2 c·r̂ + |r̂|²) - 2 q·r̂
    -(q · (c + r̂)) = -q·c - q·r̂

``|q - c|²`` (up to |q|², the same for every row) and ``q·c`` come from the
probe step; ``2 c·r̂ + |r̂|²`` is one float per row (``extra``), fixed when the
row is encoded; ``q·r̂`` is a sum of ``pq_m`` lookups in one table per query
(``table[j, code_j] = q_j · codebook_j[code_j]``). So the table does not
depend on the list, and a probe costs nothing but its rows. Cosine rows and
queries are normalized first and scanned as l2.

Rows live in two parts: a *sealed* part laid out list by list (``offsets``:
list ``l`` is ``[offsets[l], offsets[l+1])``), and an append-only *tail* of
rows added since, each with its list number. Sealing re-sorts the tail into
the lists (index/ivfpq.py decides when).

k-means assigns with a blocked matrix product (numpy's BLAS, which is faster
at 768 dimensions than any loop here); the centroid sums and the PQ encoding
(256 sub-centroids of a few dimensions: a product too thin for BLAS) are
numba kernels, the encoding parallel over rows.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .distance import METRIC_DOT, query_distance, query_norm
from .heaps import max_sort, top_k_push
from .jit import njit

PQ_CODES = 256      # sub-centroids per sub-vector: one byte a code
BLOCK_ROWS = 4096   # rows per matrix product when assigning to centroids
_SENTINEL = np.float32(3.0e38)


# ------------------------------------------------------------------ k-means

def nearest(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The nearest centroid (l2) of each row of ``x`` (float32), as int32."""
    c_sq = np.einsum("ij,ij->i", centroids, centroids)
    out = np.empty(len(x), np.int32)
    for lo in range(0, len(x), BLOCK_ROWS):
        block = x[lo:lo + BLOCK_ROWS]
        d = c_sq[None, :] - 2.0 * (block @ centroids.T)
        out[lo:lo + len(block)] = np.argmin(d, axis=1)
    return out


@njit(cache=True, nogil=True, readonly=("x", "labels"))
def centroid_sums(x, labels, sums, counts):
    """Add each row of ``x`` to ``sums[labels[i]]`` (float64) and count it."""
    for i in range(x.shape[0]):
        c = labels[i]
        counts[c] += 1
        for j in range(x.shape[1]):
            sums[c, j] += x[i, j]


def kmeans(x: np.ndarray, k: int, iters: int, rng: np.random.Generator,
           progress=None) -> np.ndarray:
    """``k`` centroids (float32, k × dim) of the rows of ``x`` by Lloyd's
    iterations from ``k`` distinct rows drawn by ``rng``; an emptied cluster
    restarts at a row of the largest one, nudged apart from it."""
    x = np.ascontiguousarray(x, np.float32)
    centroids = x[rng.choice(len(x), size=k, replace=False)].copy()
    for _ in range(iters):
        labels = nearest(x, centroids)
        sums = np.zeros(centroids.shape, np.float64)
        counts = np.zeros(k, np.int64)
        centroid_sums(x, labels, sums, counts)
        filled = counts > 0
        centroids[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
        for c in np.flatnonzero(~filled):
            # a member of the largest cluster, nudged: next round splits that cluster
            big = int(np.argmax(counts))
            members = np.flatnonzero(labels == big)
            pick = members[rng.integers(len(members))]
            scale = np.float32(1e-4) * (np.abs(centroids[big]) + np.float32(1e-6))
            centroids[c] = x[pick] + scale
            counts[big] = (counts[big] + 1) // 2    # (counts only picks the next `big`)
        if progress is not None:
            progress(1)
    return centroids


# ------------------------------------------------------- product quantizer

@njit(cache=True, nogil=True, parallel=True, fastmath=True, readonly=("x", "codebooks_t"))
def pq_encode(x, codebooks_t, codes):
    """``codes[i, j]``: the nearest sub-centroid of row i's j-th sub-vector.

    ``codebooks_t`` is (m, dsub, 256): each sub-vector dimension's 256 values
    side by side, so the distance to all 256 sub-centroids is one vector loop."""
    m, dsub, n_codes = codebooks_t.shape
    for i in prange(x.shape[0]):
        dist = np.empty(n_codes, np.float32)
        for j in range(m):
            dist[:] = 0.0
            for t in range(dsub):
                v = x[i, j * dsub + t]
                for c in range(n_codes):
                    diff = v - codebooks_t[j, t, c]
                    dist[c] += diff * diff
            best = 0
            for c in range(1, n_codes):
                if dist[c] < dist[best]:
                    best = c
            codes[i, j] = best


@njit(cache=True, nogil=True, readonly=("x", "codes"))
def pq_sums(x, codes, sums, counts):
    """Per sub-vector j and code c: the sum (float64) and count of the
    sub-vectors of ``x`` coded c (``sums`` is (m, 256, dsub))."""
    m, n_codes, dsub = sums.shape
    for i in range(x.shape[0]):
        for j in range(m):
            c = codes[i, j]
            counts[j, c] += 1
            for t in range(dsub):
                sums[j, c, t] += x[i, j * dsub + t]


def pq_train(residuals: np.ndarray, m: int, iters: int, rng: np.random.Generator,
             progress=None) -> np.ndarray:
    """The codebooks (m, 256, dsub) float32 of ``m`` sub-vector k-means over
    ``residuals``, run side by side (one encode assigns every sub-vector)."""
    x = np.ascontiguousarray(residuals, np.float32)
    n, dim = x.shape
    dsub = dim // m
    start = x[rng.choice(n, size=PQ_CODES, replace=n < PQ_CODES)]
    books = np.ascontiguousarray(start.reshape(PQ_CODES, m, dsub).transpose(1, 0, 2))
    codes = np.empty((n, m), np.uint8)
    for _ in range(iters):
        pq_encode(x, np.ascontiguousarray(books.transpose(0, 2, 1)), codes)
        sums = np.zeros(books.shape, np.float64)
        counts = np.zeros((m, PQ_CODES), np.int64)
        pq_sums(x, codes, sums, counts)
        filled = counts > 0
        books[filled] = (sums[filled] / counts[filled][:, None]).astype(np.float32)
        for j, c in zip(*np.nonzero(~filled)):
            # an unused code restarts at a random row's sub-vector
            books[j, c] = x[rng.integers(n), j * dsub:(j + 1) * dsub]
        if progress is not None:
            progress(1)
    return books


@njit(cache=True, nogil=True, fastmath=True, readonly=("codes", "codebooks", "centre"))
def pq_extra(codes, codebooks, centre, out):
    """``2 c·r̂ + |r̂|²`` of each row: r̂ its decoded residual, c ``centre[i]``."""
    m, n_codes, dsub = codebooks.shape
    for i in range(codes.shape[0]):
        acc = np.float32(0.0)
        for j in range(m):
            c = codes[i, j]
            for t in range(dsub):
                r = codebooks[j, c, t]
                acc += r * (np.float32(2.0) * centre[i, j * dsub + t] + r)
        out[i] = acc


# ------------------------------------------------------------------ the scan

@njit(cache=True, nogil=True, fastmath=True,
      readonly=("centroids", "c_sq", "query"))
def probe_lists(centroids, c_sq, query, metric, probes, out_lists, out_base):
    """The ``probes`` lists nearest ``query`` into ``out_lists`` and their
    part of each row's distance into ``out_base`` (l2: |c|² - 2 q·c, dot: -q·c),
    indexed by list; returns how many (fewer only when there are fewer lists).
    ``query`` is already normalized for cosine (scanned as l2)."""
    n_lists, dim = centroids.shape
    keys = np.empty(probes, np.float32)
    ids = np.empty(probes, np.int64)
    n = 0
    for c in range(n_lists):
        dot = np.float32(0.0)
        for j in range(dim):
            dot += centroids[c, j] * query[j]
        d = -dot if metric == METRIC_DOT else c_sq[c] - np.float32(2.0) * dot
        out_base[c] = d
        n = top_k_push(keys, ids, n, probes, d, c)
    n = max_sort(keys, ids, n)
    for i in range(n):
        out_lists[i] = ids[i]
    return n


@njit(cache=True, nogil=True, fastmath=True, readonly=("codebooks_t", "query"))
def adc_table(codebooks_t, query, table):
    """``table[j, c] = q_j · codebook_j[c]`` for the sub-vectors q_j of ``query``."""
    m, dsub, n_codes = codebooks_t.shape
    for j in range(m):
        for c in range(n_codes):
            table[j, c] = 0.0
        for t in range(dsub):
            v = query[j * dsub + t]
            for c in range(n_codes):
                table[j, c] += v * codebooks_t[j, t, c]


@njit(cache=True, nogil=True, fastmath=True)
def _offer(keys, ids, n, cap, d, r):
    # a real call, not inlined (as in kernels.scan): the heap's loops inside the
    # scan loop keep LLVM from optimising it, and few rows get this far
    return top_k_push(keys, ids, n, cap, d, r)


@njit(nogil=True, fastmath=True, inline="always")
def _code_sum(codes, i, table):
    acc = np.float32(0.0)
    for j in range(table.shape[0]):
        acc += table[j, codes[i, j]]
    return acc


@njit(cache=True, nogil=True, fastmath=True,
      readonly=("lists", "base", "offsets", "rows", "codes", "extra", "tail_rows",
                "tail_lists", "tail_codes", "tail_extra", "table", "allow"))
def pq_candidates(lists, n_probed, base, metric, offsets, rows, codes, extra, tail_rows,
                  tail_lists, tail_codes, tail_extra, n_tail, table, allow, use_allow,
                  cap, keys, ids):
    """The ``cap`` allowed rows of the probed lists nearest the query by their
    codes, into the max-heap ``keys``/``ids``, then sorted ascending; returns
    (kept, rows scanned).

    l2 (and cosine, normalized): base + extra - 2 sum(table); dot: base - sum(table)."""
    dot = metric == METRIC_DOT
    scale = np.float32(-1.0) if dot else np.float32(-2.0)
    probed = np.zeros(base.shape[0], np.bool_)
    n = 0
    worst = _SENTINEL
    scanned = 0
    for p in range(n_probed):
        lst = lists[p]
        probed[lst] = True
        b = base[lst]
        for i in range(offsets[lst], offsets[lst + 1]):
            r = rows[i]
            if use_allow and not allow[r]:
                continue
            scanned += 1
            d = b + scale * _code_sum(codes, i, table)
            if not dot:
                d += extra[i]
            if n < cap or d < worst:
                n = _offer(keys, ids, n, cap, d, r)
                if n == cap:
                    worst = keys[0]
    for i in range(n_tail):
        lst = tail_lists[i]
        r = tail_rows[i]
        if not probed[lst] or (use_allow and not allow[r]):
            continue
        scanned += 1
        d = base[lst] + scale * _code_sum(tail_codes, i, table)
        if not dot:
            d += tail_extra[i]
        if n < cap or d < worst:
            n = _offer(keys, ids, n, cap, d, r)
            if n == cap:
                worst = keys[0]
    return max_sort(keys, ids, n), scanned


@njit(cache=True, nogil=True, fastmath=True,
      readonly=("lists", "offsets", "rows", "tail_rows", "tail_lists"))
def flat_candidates(lists, n_probed, n_lists, arena, norms, query, metric, offsets, rows,
                    tail_rows, tail_lists, n_tail, allow, use_allow, cap, keys, ids):
    """IVF-Flat: the ``cap`` allowed rows of the probed lists nearest ``query``
    by the walk's float32 distance on the arena; returns (kept, rows scanned)."""
    q_norm = query_norm(query, metric)
    probed = np.zeros(n_lists, np.bool_)
    n = 0
    worst = _SENTINEL
    scanned = 0
    for p in range(n_probed):
        lst = lists[p]
        probed[lst] = True
        for i in range(offsets[lst], offsets[lst + 1]):
            r = rows[i]
            if use_allow and not allow[r]:
                continue
            scanned += 1
            d = query_distance(arena, norms, r, query, q_norm, metric)
            if n < cap or d < worst:
                n = _offer(keys, ids, n, cap, d, r)
                if n == cap:
                    worst = keys[0]
    for i in range(n_tail):
        r = tail_rows[i]
        if not probed[tail_lists[i]] or (use_allow and not allow[r]):
            continue
        scanned += 1
        d = query_distance(arena, norms, r, query, q_norm, metric)
        if n < cap or d < worst:
            n = _offer(keys, ids, n, cap, d, r)
            if n == cap:
                worst = keys[0]
    return max_sort(keys, ids, n), scanned

