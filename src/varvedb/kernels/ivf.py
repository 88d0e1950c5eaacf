"""IVF kernels: the probe of the nearest lists and the scans of their rows.

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
row is encoded; ``-q·r̂`` is a sum of ``pq_m`` lookups in one table per query
(``table[j, code_j] = -q_j · codebook_j[code_j]``: kernels.pq.distance_table).
So the table does not depend on the list, and a probe costs nothing but its
rows. Cosine rows and
queries are normalized first and scanned as l2.

Rows live in two parts: a *sealed* part laid out list by list (``offsets``:
list ``l`` is ``[offsets[l], offsets[l+1])``), and an append-only *tail* of
rows added since, each with its list number. Sealing re-sorts the tail into
the lists (index/ivfpq.py decides when).

The lists' k-means and the product quantizer are kernels/pq.py.
"""
from __future__ import annotations

import numpy as np

from .distance import (METRIC_COSINE, METRIC_DOT, all_finite, query_distance, query_norm,
                       scaled_metric, scaled_query)
from .heaps import max_sort, top_k_push
from .jit import njit
from .pq import distance_table

_SENTINEL = np.float32(3.0e38)
_F32_MAX = 3.4028234663852886e38
UNKNOWN_SCORES = -2     # flat_candidates: a float32 score may be unknown (inf, NaN)


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


@njit(cache=True, nogil=True, fastmath=True)
def _offer(keys, ids, n, cap, d, r):
    # a real call, not inlined (as in kernels.scan): the heap's loops inside the
    # scan loop keep LLVM from optimising it, and few rows get this far
    return top_k_push(keys, ids, n, cap, d, r)


@njit(nogil=True, fastmath=True, inline="always")
def _keep(keys, ids, n, cap, worst, d, r):
    """Offer (d, r) to the heap when it can enter; returns (size, worst kept).
    Most rows lose to the worst kept: that test stays inline, the heap does not."""
    if n < cap or d < worst:
        n = _offer(keys, ids, n, cap, d, r)
        if n == cap:
            worst = keys[0]
    return n, worst


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

    ``table`` holds ``-q_j · codebook_j[c]``, so with ``s`` its sum over a row's
    codes (``-q·r̂``): l2 (and cosine, normalized) is base + extra + 2 s, dot base + s."""
    dot = metric == METRIC_DOT
    scale = np.float32(1.0) if dot else np.float32(2.0)
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
            n, worst = _keep(keys, ids, n, cap, worst, d, r)
    for i in range(n_tail):
        lst = tail_lists[i]
        r = tail_rows[i]
        if not probed[lst] or (use_allow and not allow[r]):
            continue
        scanned += 1
        d = base[lst] + scale * _code_sum(tail_codes, i, table)
        if not dot:
            d += tail_extra[i]
        n, worst = _keep(keys, ids, n, cap, worst, d, r)
    return max_sort(keys, ids, n), scanned


@njit(cache=True, nogil=True, fastmath=True,
      readonly=("lists", "offsets", "rows", "tail_rows", "tail_lists"))
def flat_candidates(lists, n_probed, n_lists, arena, norms, query, metric, offsets, rows,
                    tail_rows, tail_lists, n_tail, allow, use_allow, cap, keys, ids):
    """IVF-Flat: the ``cap`` allowed rows of the probed lists nearest ``query``
    by the walk's float32 distance on the arena; returns (kept, rows scanned). A
    huge or tiny dot or cosine query is measured scaled (scaled_query), a huge l2
    query with its rows (scaled_metric), as exact search measures them; the
    caller's float64 ranking reads it as it is."""
    metric = scaled_metric(query, metric)
    query = scaled_query(query, metric)
    q_norm = query_norm(query, metric)
    dot = metric == METRIC_DOT or metric == METRIC_COSINE
    probed = np.zeros(n_lists, np.bool_)
    n = 0
    worst = _SENTINEL
    scanned = 0
    top = np.float32(0.0)       # (dot, cosine: the largest row norm scanned)
    for p in range(n_probed):
        lst = lists[p]
        probed[lst] = True
        for i in range(offsets[lst], offsets[lst + 1]):
            r = rows[i]
            if use_allow and not allow[r]:
                continue
            scanned += 1
            if dot:
                top = max(top, norms[r])
            d = query_distance(arena, norms, r, query, q_norm, metric)
            n, worst = _keep(keys, ids, n, cap, worst, d, r)
    for i in range(n_tail):
        r = tail_rows[i]
        if not probed[tail_lists[i]] or (use_allow and not allow[r]):
            continue
        scanned += 1
        if dot:
            top = max(top, norms[r])
        d = query_distance(arena, norms, r, query, q_norm, metric)
        n, worst = _keep(keys, ids, n, cap, worst, d, r)
    if dot and np.float64(top) * query.shape[0] * 4.0 >= _F32_MAX:
        # a row norm near float32's largest (or past it: inf): its float32 dot with
        # the query (largest |element| under 2, scaled_query) may overflow, and its
        # cosine is 1 - dot / inf; the caller ranks every row scanned exactly
        return UNKNOWN_SCORES, scanned
    return max_sort(keys, ids, n), scanned



@njit(cache=True, nogil=True, fastmath=True,
      readonly=("centroids", "c_sq", "codebooks_t", "query", "offsets", "rows", "codes",
                "extra", "tail_rows", "tail_lists", "tail_codes", "tail_extra", "allow"))
def coded_search(centroids, c_sq, codebooks_t, query, metric, probes, offsets, rows, codes,
                 extra, tail_rows, tail_lists, tail_codes, tail_extra, n_tail, allow,
                 use_allow, cap, keys, ids, stats):
    """IVF-PQ's candidates in one call: the query normalized for cosine, the
    ``probes`` nearest lists, the query's table, the scan; the best ``cap`` rows
    by code go to ``ids`` (ascending). Returns their count, or -1 for a query
    that is not finite; ``stats`` gets (lists probed, rows scanned)."""
    if not all_finite(query):
        return -1
    # a huge or tiny dot query scaled by a power of two: its float32 probe and table
    # overflowed or underflowed (every row's distance, base + table sum, scales alike);
    # cosine's normalized in float64 (a float32 norm of a huge query overflows)
    q = query.copy()
    if metric == METRIC_DOT:
        q = scaled_query(q, metric)
    if metric == METRIC_COSINE:
        norm = 0.0
        for j in range(q.shape[0]):
            norm += np.float64(q[j]) * np.float64(q[j])
        if norm > 0:
            norm = 1.0 / np.sqrt(norm)
            for j in range(q.shape[0]):
                q[j] = np.float64(query[j]) * norm
    lists = np.empty(probes, np.int64)
    base = np.empty(centroids.shape[0], np.float32)
    n_probed = probe_lists(centroids, c_sq, q, METRIC_DOT if metric == METRIC_DOT else 0,
                           probes, lists, base)
    table = np.empty((codebooks_t.shape[0], codebooks_t.shape[2]), np.float32)
    distance_table(codebooks_t, q, False, table)      # -q_j · codebook_j[c]
    n, scanned = pq_candidates(lists, n_probed, base, metric, offsets, rows, codes, extra,
                               tail_rows, tail_lists, tail_codes, tail_extra, n_tail, table,
                               allow, use_allow, cap, keys, ids)
    stats[0] = n_probed
    stats[1] = scanned
    return n
