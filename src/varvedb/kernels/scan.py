"""Exact top-k by one pass over a small arena: distances and the heap in one call.

What this is for: the exact scan of a small collection (or of few allowed
rows), where BLAS's matrix-vector product is cheap but the numpy steps
around it (a distance array, a partition, a gather, a lexsort) cost more
than the arithmetic. One kernel call ranks every allowed row by the walk's
float32 distance (:func:`query_distance`, or :func:`l1_query` for L1, which
only the scan answers, in a kernel of its own), keeps the best ``k + spare`` in a max-heap
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
    # a real call, not inlined: the heap's loops inside the scan loop keep LLVM
    # from optimising the scan (8x slower), and few rows ever get here
    return top_k_push(keys, ids, n, cap, d, r)


@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _candidates(arena, norms, query, metric, cap, allow, use_allow, rows, use_rows, keys,
                ids):
    q_norm = query_norm(query, metric)
    n = 0
    worst = np.float32(np.inf)
    for i in range(rows.shape[0] if use_rows else arena.shape[0]):
        r = rows[i] if use_rows else i
        if use_allow and not allow[r]:
            continue
        d = query_distance(arena, norms, r, query, q_norm, metric)
        # most rows lose to the worst kept: test that before touching the heap
        if n < cap or d < worst:
            n = _offer(keys, ids, n, cap, d, r)
            if n == cap:
                worst = keys[0]
    return n


# The same loop for L1. Its own kernel, not a fourth branch in query_distance:
# with that branch the l2 scan of an f16 arena ran 8-10% slower (measured).
@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _l1_candidates(arena, query, cap, allow, use_allow, rows, use_rows, keys, ids):
    n = 0
    worst = np.float32(np.inf)
    for i in range(rows.shape[0] if use_rows else arena.shape[0]):
        r = rows[i] if use_rows else i
        if use_allow and not allow[r]:
            continue
        d = l1_query(arena, r, query)
        if n < cap or d < worst:
            n = _offer(keys, ids, n, cap, d, r)
            if n == cap:
                worst = keys[0]
    return n


@njit(nogil=True, inline="always")
def _ranked(arena, query, metric, k, keys, ids, n, out_rows, out_dist):
    """The heap's n candidates rescored exactly and sorted into out_rows/out_dist."""
    n = max_sort(keys, ids, n)
    for i in range(n):
        out_rows[i] = ids[i]
    rank_rows(arena, out_rows[:n], query, metric, out_dist[:n])
    return min(n, k)


@njit(cache=True, nogil=True, readonly=("rows",))
def scan_top_k(arena, norms, query, metric, k, spare, allow, use_allow, rows, use_rows,
               out_rows, out_dist):
    """The k allowed rows of ``arena`` nearest ``query`` into ``out_rows``/``out_dist``
    (room for k + spare), ascending by (exact float64 score, row); returns how
    many (fewer than k when fewer rows are allowed), or -1 for a non-finite query.

    ``metric`` is any code of ``METRIC_CODES`` but L1 (:func:`scan_top_k_l1`);
    ``arena`` is float32, or uint16 holding float16 bits; ``norms`` float32 per
    row (read for cosine only); ``allow`` a bool mask over the rows (read when
    ``use_allow``); ``rows`` the only rows to score, ascending (read when
    ``use_rows``: a sparse mask is cheaper gathered than tested row by row)."""
    if not all_finite(query):
        return -1
    cap = k + spare
    keys = np.empty(cap, np.float32)
    ids = np.empty(cap, np.int64)
    n = _candidates(arena, norms, query, metric, cap, allow, use_allow, rows, use_rows,
                    keys, ids)
    return _ranked(arena, query, metric, k, keys, ids, n, out_rows, out_dist)


# L1's scan is a kernel of its own, not a branch of scan_top_k: numba compiles
# every branch of a kernel, and every search of every arena type compiled the
# L1 loop that few ever run.
@njit(cache=True, nogil=True, readonly=("rows",))
def scan_top_k_l1(arena, query, k, spare, allow, use_allow, rows, use_rows, out_rows,
                  out_dist):
    """:func:`scan_top_k` for ``METRIC_L1`` (which needs no norms)."""
    if not all_finite(query):
        return -1
    cap = k + spare
    keys = np.empty(cap, np.float32)
    ids = np.empty(cap, np.int64)
    n = _l1_candidates(arena, query, cap, allow, use_allow, rows, use_rows, keys, ids)
    return _ranked(arena, query, METRIC_L1, k, keys, ids, n, out_rows, out_dist)
