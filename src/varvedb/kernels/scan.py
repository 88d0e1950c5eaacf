"""Exact top-k by one pass over a small arena: distances and the heap in one call.

What this is for: the exact scan of a small collection (or of few allowed
rows), where BLAS's matrix-vector product is cheap but the numpy steps
around it (a distance array, a partition, a gather, a lexsort) cost more
than the arithmetic. One kernel call ranks every allowed row by the walk's
float32 distance (:func:`query_distance`, or :func:`l1_query` for L1, which
only the scan answers), keeps the best ``k + spare`` in a max-heap
(:mod:`varvedb.kernels.heaps`), then rescores those exactly in float64 and
sorts them by (score, row) (:func:`rank_rows`) — the same scores
and order as the BLAS path. The spare candidates absorb float32 near-ties.
"""
from __future__ import annotations

import numpy as np

from .distance import METRIC_L1, all_finite, l1_query, query_distance, query_norm, rank_rows
from .heaps import max_sort, top_k_push
from .jit import njit


@njit(cache=True, nogil=True, fastmath=True)
def _offer(keys, ids, n, cap, d, r):
    # a real call, not inlined: few rows ever get here
    return top_k_push(keys, ids, n, cap, d, r)


@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _keep(scores, allow, use_allow, rows, use_rows, keys, ids, cap):
    # the heap pass (masked rows' scores are never read): most rows lose to the
    # worst kept, so that test comes first
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
def _candidates(arena, norms, query, metric, cap, allow, use_allow, rows, use_rows, keys,
                ids):
    total = rows.shape[0] if use_rows else arena.shape[0]
    scores = np.empty(total, np.float32)
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
    for i in range(scores.shape[0]):
        scores[i] = query_distance(arena, norms, rows[i] if use_rows else i, query, q_norm,
                                   metric)


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


@njit(cache=True, nogil=True, readonly=("rows",))
def scan_top_k(arena, norms, query, metric, k, spare, allow, use_allow, rows, use_rows,
               out_rows, out_dist):
    """The k allowed rows of ``arena`` nearest ``query`` into ``out_rows``/``out_dist``
    (room for k + spare), ascending by (exact float64 score, row); returns how
    many (fewer than k when fewer rows are allowed), or -1 for a non-finite query.

    ``metric`` is any code of ``METRIC_CODES`` (L1 included);
    ``arena`` is float32, or uint16 holding float16 bits; ``norms`` float32 per
    row (read for cosine only); ``allow`` a bool mask over the rows (read when
    ``use_allow``); ``rows`` the only rows to score, ascending (read when
    ``use_rows``: a sparse mask is cheaper gathered than tested row by row)."""
    if not all_finite(query):
        return -1
    cap = k + spare
    keys = np.empty(cap, np.float32)
    ids = np.empty(cap, np.int64)
    n = _candidates(arena, norms, query, metric, cap, allow, use_allow, rows, use_rows, keys,
                    ids)
    n = max_sort(keys, ids, n)
    for i in range(n):
        out_rows[i] = ids[i]
    rank_rows(arena, out_rows[:n], query, metric, out_dist[:n])
    return min(n, k)
