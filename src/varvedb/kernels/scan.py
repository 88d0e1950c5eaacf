"""Exact top-k by one pass over a small arena: distances and the heap in one call.

What this is for: the exact scan of a small collection (or of few allowed
rows), where BLAS's matrix-vector product is cheap but the numpy steps
around it (a distance array, a partition, a gather, a lexsort) cost more
than the arithmetic. One kernel call ranks every allowed row by the walk's
float32 distance (:func:`query_distance`, or :func:`l1_query` for L1, which
only the scan answers), keeps the best ``k + spare`` (unordered with the
worst's slot tracked when few, else in a max-heap of :mod:`varvedb.kernels.heaps`),
then rescores those exactly in float64 and
sorts them by (score, row) (:func:`rank_rows`) — the same scores
and order as the BLAS path. The spare candidates absorb float32 near-ties;
when the heap's worst is still within float32's error of the k-th (ties, or
scores float32 cannot tell apart, past the spares), every allowed row that
near is ranked exactly, so the answer is always exact
search's: the k best by (float64 score, row). That last step is a kernel of
its own (:func:`rank_near`, which the caller runs when :func:`scan_top_k`
says so), so a first search compiles it only when ties need it.
"""
from __future__ import annotations

import numpy as np

from .distance import (METRIC_COSINE, METRIC_DOT, METRIC_HAMMING, METRIC_L1, METRIC_L2,
                       all_finite, as_f32, cosine_from_dot, exact_row_distances, l1_query,
                       query_distance, query_norm, rank_rows)
from .heaps import max_sort, sorted_insert, top_k_push
from .jit import njit


@njit(cache=True, nogil=True, fastmath=True)
def _offer(keys, ids, n, cap, d, r):
    # a real call, not inlined: few rows ever get here
    return top_k_push(keys, ids, n, cap, d, r)


# At most this many candidates are kept unordered, the worst's slot found by a
# linear pass after each replacement (a short, branch-free loop), instead of in a
# heap: at 1 000 rows and k 10 (18 kept) the heap's sift-downs were most of the
# keep pass (about 90 of the 1 000 rows enter; measured 25-30% faster this way).
# Past it a replacement's pass costs more than a sift-down.
SMALL_CAP = 32


@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _keep(scores, allow, use_allow, rows, use_rows, keys, ids, cap):
    # the keep pass (masked rows' scores are never read): most rows lose to the
    # worst kept, so that test comes first. Leaves keys/ids ascending by key.
    if cap > SMALL_CAP:
        return max_sort(keys, ids, _keep_heap(scores, allow, use_allow, rows, use_rows, keys,
                                              ids, cap))
    n = 0
    at = 0
    worst = np.float32(np.inf)
    for i in range(scores.shape[0]):
        d = scores[i]
        if n < cap or d < worst:
            r = rows[i] if use_rows else i
            if use_allow and not allow[r]:
                continue
            if n < cap:
                keys[n] = d
                ids[n] = r
                n += 1
                if n < cap:
                    continue
            else:           # strictly better than the worst kept: it takes its slot
                keys[at] = d
                ids[at] = r
            at = 0
            for j in range(1, cap):
                if keys[j] > keys[at]:
                    at = j
            worst = keys[at]
    for j in range(1, n):   # insertion sort: n <= SMALL_CAP
        sorted_insert(keys, ids, j, keys[j], ids[j])
    return n


@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _keep_heap(scores, allow, use_allow, rows, use_rows, keys, ids, cap):
    # _keep's pass for a large k: a max-heap of the best cap
    n = 0
    worst = np.float32(np.inf)
    for i in range(scores.shape[0]):
        r = rows[i] if use_rows else i
        if use_allow and not allow[r]:
            continue
        d = scores[i]
        if n < cap or d < worst:
            n = _offer(keys, ids, n, cap, d, r)
            if n == cap:
                worst = keys[0]
    return n


# Two passes: the scores alone (4 bytes of scratch a row), then the heap. A branch
# in the scoring loop keeps LLVM from vectorising the distance (3x slower on
# 1 000 x 128, measured: the heap's test beside it, or a mask's test even when
# no row is masked), so the mask is tested there only when it allows few rows.
# (L1's loop vectorises with the mask's test: it skips masked rows always.)
@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _candidates(arena, norms, query, metric, cap, allow, use_allow, rows, use_rows, scores,
                keys, ids):
    masked = use_allow and not use_rows      # (gathered rows are all allowed)
    if metric == METRIC_L1:
        if masked:
            _l1_score_allowed(arena, query, allow, scores)
        else:
            _l1_score_all(arena, query, rows, use_rows, scores)
    elif masked and _sparse(allow):
        _score_allowed(arena, norms, query, metric, allow, scores)
    else:
        _score_all(arena, norms, query, metric, rows, use_rows, scores)
    return _keep(scores, allow, use_allow, rows, use_rows, keys, ids, cap)


@njit(cache=True, nogil=True)
def _sparse(allow):
    # under a third of the rows allowed: skipping the others pays for the branch
    count = 0
    for i in range(allow.shape[0]):
        count += allow[i]
    return 3 * count < allow.shape[0]


@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _score_all(arena, norms, query, metric, rows, use_rows, scores):
    q_norm = query_norm(query, metric)
    start = 0
    if not use_rows and (metric == METRIC_L2 or metric == METRIC_DOT
                         or metric == METRIC_COSINE):
        start = _score_blocks(arena, norms, query, q_norm, metric, scores)
    for i in range(start, scores.shape[0]):
        scores[i] = query_distance(arena, norms, rows[i] if use_rows else i, query, q_norm,
                                   metric)


# Four rows a step: the query's elements are loaded once for the four, and the
# four sums are independent (each row's sum still runs over the dimensions in
# one loop, which LLVM vectorises). 25-30% faster than a row a step at 1 000 x
# 128 (measured); a row's float32 score differs from the walk's only in the
# order of its sum, which _near's error bound already allows (fastmath).
@njit(cache=True, nogil=True, fastmath=True)
def _score_blocks(arena, norms, query, q_norm, metric, scores):
    """L2, dot or cosine scores of the rows in steps of four; returns the first
    row left (fewer than four remain)."""
    m = scores.shape[0] - scores.shape[0] % 4
    for i in range(0, m, 4):
        a0 = a1 = a2 = a3 = np.float32(0.0)
        if metric == METRIC_L2:
            for j in range(query.shape[0]):
                qj = query[j]
                t0 = as_f32(arena[i, j]) - qj
                t1 = as_f32(arena[i + 1, j]) - qj
                t2 = as_f32(arena[i + 2, j]) - qj
                t3 = as_f32(arena[i + 3, j]) - qj
                a0 += t0 * t0
                a1 += t1 * t1
                a2 += t2 * t2
                a3 += t3 * t3
            scores[i], scores[i + 1], scores[i + 2], scores[i + 3] = a0, a1, a2, a3
            continue
        for j in range(query.shape[0]):
            qj = query[j]
            a0 += as_f32(arena[i, j]) * qj
            a1 += as_f32(arena[i + 1, j]) * qj
            a2 += as_f32(arena[i + 2, j]) * qj
            a3 += as_f32(arena[i + 3, j]) * qj
        if metric == METRIC_DOT:
            scores[i], scores[i + 1], scores[i + 2], scores[i + 3] = -a0, -a1, -a2, -a3
        else:
            scores[i] = cosine_from_dot(a0, norms[i], q_norm)
            scores[i + 1] = cosine_from_dot(a1, norms[i + 1], q_norm)
            scores[i + 2] = cosine_from_dot(a2, norms[i + 2], q_norm)
            scores[i + 3] = cosine_from_dot(a3, norms[i + 3], q_norm)
    return m


@njit(cache=True, nogil=True, fastmath=True)
def _score_allowed(arena, norms, query, metric, allow, scores):
    q_norm = query_norm(query, metric)
    for i in range(scores.shape[0]):
        if allow[i]:
            scores[i] = query_distance(arena, norms, i, query, q_norm, metric)


# L1's scoring has its own loops, not a fourth branch in query_distance: with
# that branch the l2 scan of an f16 arena ran 8-10% slower (measured).
@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _l1_score_all(arena, query, rows, use_rows, scores):
    for i in range(scores.shape[0]):
        scores[i] = l1_query(arena, rows[i] if use_rows else i, query)


@njit(cache=True, nogil=True, fastmath=True)
def _l1_score_allowed(arena, query, allow, scores):
    for i in range(scores.shape[0]):
        if allow[i]:
            scores[i] = l1_query(arena, i, query)


NEAR_TIES = -2     # scan_top_k's answer when rank_near must settle the k best


@njit(cache=True, nogil=True, readonly=("rows",))
def scan_top_k(arena, norms, query, metric, k, spare, allow, use_allow, rows, use_rows,
               scores, out_rows, out_dist):
    """The k allowed rows of ``arena`` nearest ``query`` into ``out_rows``/``out_dist``
    (room for k: the caller's result arrays), ascending by (exact float64 score,
    row); returns how
    many (fewer than k when fewer rows are allowed), -1 for a non-finite query,
    or NEAR_TIES: rows past the spares score within float32's error of the
    k-th, so :func:`rank_near` ranks them, given ``scores`` as this call left
    them and the limit this call left in ``out_dist[0]``.

    ``metric`` is any code of ``METRIC_CODES`` (L1 included);
    ``arena`` is float32, or uint16 holding float16 bits; ``norms`` float32 per
    row (read for cosine only); ``allow`` a bool mask over the rows (read when
    ``use_allow``); ``rows`` the only rows to score, ascending (read when
    ``use_rows``: a sparse mask is cheaper gathered than tested row by row);
    ``scores`` float32 scratch, one per row scored (``rows``' length when
    ``use_rows``, else the arena's)."""
    if not all_finite(query):
        return -1
    cap = k + spare
    keys = np.empty(cap, np.float32)
    ids = np.empty(cap, np.int64)
    n = _candidates(arena, norms, query, metric, cap, allow, use_allow, rows, use_rows, scores,
                    keys, ids)          # (ascending by key)
    if n == cap:
        # a row the heap left out scores above its worst; if that is within float32's
        # error of the k-th, its exact score may beat the k-th's (or tie it with a
        # lower row): every row that near is ranked exactly, by rank_near, a kernel
        # of its own so that a first search compiles it only when it needs it
        limit = _near(keys[k - 1], arena, norms, query, metric)
        if keys[n - 1] <= limit:
            out_dist[0] = limit
            return NEAR_TIES
    exact = np.empty(cap, np.float64)
    rank_rows(arena, ids[:n], query, metric, exact[:n])
    n = min(n, k)
    for i in range(n):
        out_rows[i] = ids[i]
        out_dist[i] = exact[i]
    return n


# float32's rounding over a dim-long sum (fastmath may reorder it), with room to spare
_ULP = 2.0 ** -24


@njit(cache=True, nogil=True)
def _near(kth, arena, norms, query, metric):
    """The highest float32 score whose row's exact score may still beat or tie the
    k-th's, ``kth``: the float32 error bound of both, doubled. L2 and L1 err
    relative to the score (terms >= 0; + an underflow's), cosine absolute, dot by
    the largest row norm times the query's; hamming counts exactly."""
    if metric == METRIC_HAMMING:
        return kth
    err = 8.0 * (query.shape[0] + 4) * _ULP
    if metric == METRIC_COSINE:
        return np.float32(kth + 2.0 * err)
    if metric == METRIC_DOT:
        q_sq = 0.0
        for j in range(query.shape[0]):
            q_sq += np.float64(query[j]) * query[j]
        top = 0.0
        for i in range(norms.shape[0]):     # masked rows too: a wider bound is still one
            top = max(top, np.float64(norms[i]))
        return np.float32(kth + err * top * np.sqrt(q_sq) * 1.5)
    return np.float32(kth * (1.0 + err) + query.shape[0] * 1e-37)


@njit(cache=True, nogil=True, readonly=("rows", "scores"))
def rank_near(arena, query, metric, k, limit, scores, allow, use_allow, rows, use_rows,
              out_rows, out_dist):
    """After scan_top_k answered NEAR_TIES (the same arguments, its ``scores``, and
    ``limit`` = the float32 value it left in ``out_dist[0]``): the k best by (exact
    score, row) of the allowed rows scoring at most ``limit``; returns how many."""
    m = 0
    for i in range(scores.shape[0]):
        r = rows[i] if use_rows else i
        if not (use_allow and not allow[r]) and scores[i] <= limit:
            m += 1
    near = np.empty(m, np.int64)
    m = 0
    for i in range(scores.shape[0]):
        r = rows[i] if use_rows else i
        if not (use_allow and not allow[r]) and scores[i] <= limit:
            near[m] = r
            m += 1
    exact = np.empty(m, np.float64)
    exact_row_distances(arena, near, query, metric, exact)
    order = np.argsort(exact, kind="mergesort")     # stable: ties by row (ascending)
    count = min(k, m)
    for i in range(count):
        out_rows[i] = near[order[i]]
        out_dist[i] = exact[order[i]]
    return count
