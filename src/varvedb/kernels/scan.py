"""Exact top-k by one pass over a small arena: distances and the heap in one call.

What this is for: the exact scan of a small collection (or of few allowed
rows), where BLAS's matrix-vector product is cheap but the numpy steps
around it (a distance array, a partition, a gather, a lexsort) cost more
than the arithmetic. One kernel call ranks every allowed row by the walk's
float32 distance (:func:`query_distance`, or :func:`l1_query` for L1, which
only the scan answers), keeps the best ``k + spare`` (in a sorted array when
few, else in a max-heap of :mod:`varvedb.kernels.heaps`), then rescores the
k best exactly in float64 — all of those kept when the (k+1)-th is within
float32's error of the k-th — and sorts them by (score, row) (:func:`rank_rows`):
the same scores and order as the BLAS path. The spare candidates absorb float32
near-ties; when the worst kept is still within float32's error of the k-th
(ties, or scores float32 cannot tell apart, past the spares), every allowed
row that near is ranked exactly, so the answer is always exact
search's: the k best by (float64 score, row). That last step is a kernel of
its own (:func:`rank_near`, which the caller runs when :func:`scan_top_k`
says so), so a first search compiles it only when ties need it.
:func:`half_top_k` is the same scan with its rows chosen first on a float16 copy
of a float32 arena (:func:`half_copy`): half the bytes read, the same answer.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .distance import (METRIC_COSINE, METRIC_DOT, METRIC_HAMMING, METRIC_L1,
                       METRIC_L2, all_finite, as_f32, cosine_from_dot, exact_row_distances,
                       half_bits, l1_query, query_distance, query_norm, rank_rows,
                       scaled_metric, scaled_query, unmanaged)
from .heaps import max_sort, sorted_insert, top_k_push
from .jit import njit


@njit(cache=True, nogil=True, fastmath=True)
def _offer(keys, ids, n, cap, d, r):
    # a real call, not inlined: few rows ever get here
    return top_k_push(keys, ids, n, cap, d, r)


# Up to this many candidates are kept in an array sorted by key, a better row
# shifting the worse ones from the end (the last is the worst, and nothing is
# left to sort); past it, in a max-heap, whose sift-down grows with the log of
# the size where a shift grows with the size (at 30 kept the sorted array still
# led: 4.3 µs a query against 9.0 unordered). At 1 000 rows and k 10 (18 kept) about 90 rows enter (fewer from
# _bound), in an order no branch predicts: the sorted array's one exit costs
# less than a linear search for the worst's slot in an unordered array (which
# itself beat the heap there) or a binary search for the new one's (measured on
# real score vectors, 1 000 rows, 18 kept: 2.9 µs a query against 5.0 and 4.7).
SMALL_CAP = 32
_ABOVE = np.float32(3.0e38)     # the worst's stand-in until cap are kept (fastmath: no inf)


@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _keep(scores, allow, use_allow, rows, use_rows, keys, ids, cap, bound):
    # the keep pass (masked rows' scores are never read): most rows lose to the
    # bound or to the worst kept, so those tests come first. ``bound``: at least
    # cap allowed rows score at most it (_bound), or _ABOVE. Leaves keys/ids
    # ascending by key.
    # (unmanaged: the inlined insertion would count its arrays at each call)
    keys, ids = unmanaged(keys), unmanaged(ids)
    n = 0
    worst = _ABOVE
    for i in range(scores.shape[0]):
        d = scores[i]
        if d <= bound and (n < cap or d < worst):
            r = rows[i] if use_rows else i
            if use_allow and not allow[r]:
                continue
            if cap > SMALL_CAP:
                n = _offer(keys, ids, n, cap, d, r)
                if n == cap:
                    worst = keys[0]
            elif n < cap:
                n = sorted_insert(keys, ids, n, d, r)
                if n == cap:
                    worst = keys[n - 1]
            else:       # strictly better than the worst kept: it drops out
                sorted_insert(keys, ids, n - 1, d, r)
                worst = keys[n - 1]
    return max_sort(keys, ids, n) if cap > SMALL_CAP else n


# Two passes: the scores alone (4 bytes of scratch a row), then the keep pass.
# A branch in the scoring loop keeps LLVM from vectorising the distance (3x
# slower on 1 000 x 128, measured: the heap's test beside it, or a mask's test
# even when no row is masked), and the keep's tests beside the scoring of a
# block (after its loop) cost more than a pass of their own (measured); so the
# mask is tested there only when it allows few rows.
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
        bound = _score_all(arena, norms, query, metric, cap, use_allow, rows, use_rows, scores)
        return _keep(scores, allow, use_allow, rows, use_rows, keys, ids, cap, bound)
    return _keep(scores, allow, use_allow, rows, use_rows, keys, ids, cap, _ABOVE)


@njit(cache=True, nogil=True)
def _sparse(allow):
    # under a third of the rows allowed: skipping the others pays for the branch
    count = 0
    for i in range(allow.shape[0]):
        count += allow[i]
    return 3 * count < allow.shape[0]


@njit(cache=True, nogil=True, fastmath=True, readonly=("rows",))
def _score_all(arena, norms, query, metric, cap, use_allow, rows, use_rows, scores):
    # returns _keep's bound (every row scored is allowed, but under a mask)
    q_norm = query_norm(query, metric)
    start = 0
    bound = _ABOVE
    if not use_rows and (metric == METRIC_L2 or metric == METRIC_DOT
                         or metric == METRIC_COSINE):
        start = _score_blocks(arena, norms, query, q_norm, metric, scores)
    for i in range(start, scores.shape[0]):
        scores[i] = query_distance(arena, norms, rows[i] if use_rows else i, query, q_norm,
                                   metric)
    return _ABOVE if use_allow and not use_rows else _bound(scores, cap)


# The keep pass's cost is its rows that pass the first test (each a branch no
# predictor foresees): from the worst kept alone, about 90 of 1 000 (18 kept);
# below this bound, 23 (median on three sets of 1 000; p90 27).
@njit(cache=True, nogil=True, fastmath=True)
def _bound(scores, cap):
    """A score that at least ``cap`` of ``scores`` are at most: the cap-th
    smallest of the minima of about 2 cap interleaved groups of them (row i in
    group i mod groups), or _ABOVE (fewer rows than groups, or a cap past
    SMALL_CAP: the groups' ranking, branch-free, is quadratic in cap)."""
    groups = (2 * cap + 7) // 8 * 8
    used = scores.shape[0] - scores.shape[0] % groups
    if used == 0 or cap > SMALL_CAP:
        return _ABOVE
    mins = scores[:groups].copy()
    for i in range(groups, used, groups):
        chunk = scores[i:i + groups]
        for g in range(groups):
            mins[g] = min(mins[g], chunk[g])
    bound = -_ABOVE
    for g in range(groups):         # each group's rank among the groups
        below = np.int32(0)
        for h in range(groups):
            below += np.int32(mins[h] < mins[g])
        bound = max(bound, mins[g] if below < cap else -_ABOVE)
    return bound


# Eight rows a step: the query's elements are loaded once for the eight, and the
# eight sums are independent (each row's sum still runs over the dimensions in
# one loop, which LLVM vectorises). A row's float32 score differs from the
# walk's only in the order of its sum, which _near's error bound already allows
# (fastmath). Measured at 1 000 rows: 25-30% faster than four a step at 128
# dimensions (and four 25-30% faster than one), 10% at 50.
@njit(cache=True, nogil=True, fastmath=True)
def _score_blocks(arena, norms, query, q_norm, metric, scores):
    """L2, dot or cosine scores of the rows in steps of eight; returns the first row
    left (fewer than eight remain)."""
    # (unmanaged: the inlined cosine_from_dot would count norms at each row)
    arena, norms, query, scores = unmanaged(arena), unmanaged(norms), unmanaged(query), \
        unmanaged(scores)
    m = scores.shape[0] - scores.shape[0] % 8
    for i in range(0, m, 8):
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
        if metric == METRIC_L2:
            for j in range(query.shape[0]):
                qj = query[j]
                t0 = as_f32(arena[i, j]) - qj
                t1 = as_f32(arena[i + 1, j]) - qj
                t2 = as_f32(arena[i + 2, j]) - qj
                t3 = as_f32(arena[i + 3, j]) - qj
                t4 = as_f32(arena[i + 4, j]) - qj
                t5 = as_f32(arena[i + 5, j]) - qj
                t6 = as_f32(arena[i + 6, j]) - qj
                t7 = as_f32(arena[i + 7, j]) - qj
                a0 += t0 * t0
                a1 += t1 * t1
                a2 += t2 * t2
                a3 += t3 * t3
                a4 += t4 * t4
                a5 += t5 * t5
                a6 += t6 * t6
                a7 += t7 * t7
        else:
            for j in range(query.shape[0]):
                qj = query[j]
                a0 += as_f32(arena[i, j]) * qj
                a1 += as_f32(arena[i + 1, j]) * qj
                a2 += as_f32(arena[i + 2, j]) * qj
                a3 += as_f32(arena[i + 3, j]) * qj
                a4 += as_f32(arena[i + 4, j]) * qj
                a5 += as_f32(arena[i + 5, j]) * qj
                a6 += as_f32(arena[i + 6, j]) * qj
                a7 += as_f32(arena[i + 7, j]) * qj
        scores[i], scores[i + 1], scores[i + 2], scores[i + 3] = a0, a1, a2, a3
        scores[i + 4], scores[i + 5], scores[i + 6], scores[i + 7] = a4, a5, a6, a7
        if metric == METRIC_DOT:
            for t in range(i, i + 8):
                scores[t] = -scores[t]
        elif metric == METRIC_COSINE:
            for t in range(i, i + 8):
                scores[t] = cosine_from_dot(scores[t], norms[t], q_norm)
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
    k-th (or a row's float32 score is unknown: :func:`_unknown`, limit inf), so
    :func:`rank_near` ranks them, given ``scores`` as this call left them and
    the limit this call left in ``out_dist[0]``.

    ``metric`` is any code of ``METRIC_CODES`` (L1 included);
    ``arena`` is float32, or uint16 holding float16 bits; ``norms`` float32 per
    row (read for cosine only); ``allow`` a bool mask over the rows (read when
    ``use_allow``); ``rows`` the only rows to score, ascending (read when
    ``use_rows``: a sparse mask is cheaper gathered than tested row by row);
    ``scores`` float32 scratch, one per row scored (``rows``' length when
    ``use_rows``, else the arena's)."""
    if not all_finite(query):
        return -1
    return _ranked(arena, norms, query, metric, k, spare, allow, use_allow, rows, use_rows,
                   scores, out_rows, out_dist)


@njit(cache=True, nogil=True, readonly=("rows",))
def _ranked(arena, norms, query, metric, k, spare, allow, use_allow, rows, use_rows, scores,
            out_rows, out_dist):
    # scan_top_k's work once the query is known finite (half_top_k's second stage too)
    cap = k + spare
    keys = np.empty(cap, np.float32)
    ids = np.empty(cap, np.int64)
    # a huge or tiny dot or cosine query scaled; a huge l2 query and its rows both
    measure = scaled_metric(query, metric)
    scored = scaled_query(query, measure)
    n = _candidates(arena, norms, scored, measure, cap, allow, use_allow, rows, use_rows,
                    scores, keys, ids)          # (ascending by key)
    if _unknown(scores, norms, metric, allow, use_allow, rows, use_rows) or \
            (n < k and n < _allowed(scores, allow, use_allow, rows, use_rows)):
        # a float32 score that says nothing of the row's exact one (_unknown), or
        # rows whose score is past _ABOVE (an l2 query or row near float32's
        # largest), never kept: every row scored is ranked exactly
        out_dist[0] = np.inf
        return NEAR_TIES
    if n > k:
        # a row left out scores above the worst kept; if that is within float32's
        # error of the k-th, its exact score may beat the k-th's (or tie it with a
        # lower row): every row that near is ranked exactly, by rank_near, a kernel
        # of its own so that a first search compiles it only when it needs it.
        # When the (k+1)-th is past that error already, the k best are these k,
        # and only they are rescored (else the spares settle the near-ties).
        limit = _near(keys[k - 1], arena, norms, scored, metric)
        if (n == cap and keys[n - 1] <= limit) or not limit < np.inf:
            # (an infinite bound, a row norm past float32's range: no float32
            # score tells the k best, every row is ranked exactly)
            out_dist[0] = limit if limit < np.inf else np.inf
            return NEAR_TIES
        if keys[k] > limit:
            n = k
    exact = np.empty(n, np.float64)
    rank_rows(arena, ids[:n], query, metric, exact)
    n = min(n, k)
    for i in range(n):
        out_rows[i] = ids[i]
        out_dist[i] = exact[i]
    return n


@njit(cache=True, nogil=True, readonly=("rows",))
def _allowed(scores, allow, use_allow, rows, use_rows):
    # how many rows _candidates scored that are allowed
    if use_rows or not use_allow:
        return scores.shape[0]
    count = 0
    for i in range(allow.shape[0]):
        count += allow[i]
    return count


@njit(cache=True, nogil=True, readonly=("rows",))
def _unknown(scores, norms, metric, allow, use_allow, rows, use_rows):
    """Is an allowed row's float32 score NaN or infinite (a sum past float32's
    range: inf + -inf, an overflow), or for cosine a scored row's norm infinite
    (its score then 1 - dot / inf: finite, and wrong), or past _NORM_SAFE (its
    product with the query's may be)? Such a score tells nothing
    of the row's exact one (finite in float64, maybe among the k best): the
    caller ranks every row exactly. (No fastmath here: x - x is 0 for finite x
    alone; under a mask, an unscored row's scratch is read and ignored.)"""
    bad = False
    if use_allow and not use_rows:
        for i in range(scores.shape[0]):
            bad |= allow[i] & (scores[i] - scores[i] != 0.0)
    else:
        bad = not all_finite(scores)
    if metric == METRIC_COSINE and not bad:
        if use_rows:
            for i in range(rows.shape[0]):
                bad |= not norms[rows[i]] < _NORM_SAFE
        else:           # (masked rows' too: a wider net still ranks right)
            for i in range(norms.shape[0]):
                bad |= not norms[i] < _NORM_SAFE
    return bad


# A row norm under this times the scaled query's (under 2 sqrt(dim) <= 2**9) stays
# in float32's range, and so does its dot with that query: a cosine score over a
# larger norm (finite since columns.norms_of sums it in float64) may be 1 - dot / inf
_NORM_SAFE = np.float32(2.0 ** 118)


# float32's rounding over a dim-long sum (fastmath may reorder it), with room to spare
_ULP = 2.0 ** -24


# ---- the scan through a float16 copy of a float32 arena ---------------------------
# At 1 000 x 128 the scan's time is mostly the arena's 512 KB read from L2: a float16
# copy halves what is read. Its scores are not the arena's, so they only choose
# which rows the arena scores: every row whose exact score may be among the k best
# by a bound on what the rounding moved (half_copy), the float32 sum's rounding and
# float64's; the rows it rules out score, exactly, strictly above at least k rows it
# keeps. Those it keeps (about k on real data) go through scan_top_k's own stages as
# gathered rows, so the answer is the same, ties and near-ties settled alike.

_MARGIN = 2.0 ** -20    # past float64's rounding of the exact scores (dim <= 2**30)
_NO_ALLOW = np.zeros(1, np.bool_)


@njit(cache=True, nogil=True)     # (no fastmath: the bounds' arithmetic as written)
def half_copy(arena, metric, half, extra):
    """Fill ``half`` (uint16, the float32 ``arena``'s shape) with its rows rounded to
    float16 bits (l2: less ``extra[:dim]``, which receives the rows' mean, rounded to
    float32; ``extra[dim:]`` receives each rounded row's |x'|^2, rounded to float32:
    the copy's l2 scores are |x'|^2 + |q'|^2 - 2 x'.q', one product an element);
    returns (moved, top): the most any row moved, ``|x - c - x'|`` (l2, c the mean),
    ``|x - x'|`` (dot) or ``|x - x'| / |x|`` (cosine), and the largest ``|x'|`` (x'
    the rounded row), both rounded up; (-1, 0) when a value is past float16's range."""
    dim = arena.shape[1]
    centre = extra[:dim]
    sq = extra[dim:]
    for j in range(dim):
        centre[j] = 0.0
    if metric == METRIC_L2 and arena.shape[0] > 0:
        # the mean, so that a copy far from 0 still rounds finely and its scores'
        # cancellation (|x'|^2 + |q'|^2 against 2 x'.q') stays small
        for j in range(dim):
            acc = 0.0
            for i in range(arena.shape[0]):
                acc += np.float64(arena[i, j])
            centre[j] = np.float32(acc / arena.shape[0])
        wide = False
        for i in range(arena.shape[0]):
            for j in range(dim):
                wide |= abs(np.float64(arena[i, j]) - centre[j]) >= 65504.0
        if wide:
            # past float16's range once centred (rows near its largest on both
            # sides of 0): the copy of the rows as they are
            for j in range(dim):
                centre[j] = 0.0
    moved = 0.0
    top = 0.0
    over = np.uint16(0)
    for i in range(arena.shape[0]):
        for j in range(dim):
            # (x - c in float64: exact for float32 x and c but past 2**29 apart,
            # rounded once more to float32 before float16: the gap below measures
            # the whole move from x - c)
            half[i, j] = half_bits(np.float32(np.float64(arena[i, j]) - centre[j]))
        gap = 0.0
        size = 0.0
        norm = 0.0
        for j in range(dim):
            bits = half[i, j]
            over |= np.uint16(bits & 0x7C00 == 0x7C00)   # (all ones: infinity)
            x = np.float64(arena[i, j]) - np.float64(centre[j])
            y = np.float64(as_f32(bits))
            gap += (x - y) * (x - y)
            size += y * y
            norm += x * x
        if over:
            return -1.0, 0.0
        sq[i] = np.float32(size)
        if metric == METRIC_COSINE:
            if norm > 0.0:      # (a zero row rounds to itself)
                moved = max(moved, np.sqrt(gap / norm))
        else:
            moved = max(moved, np.sqrt(gap))
        top = max(top, np.sqrt(size))
    # (the float64 sums' rounding: dim * 2**-53 relative, far below this)
    return moved * (1.0 + 1e-9) + 1e-300, top * (1.0 + 1e-9)


@njit(cache=True, nogil=True)
def half_top_k(arena, norms, half, extra, moved, top, query, metric, k, spare, scores, near,
               out_rows, out_dist):
    """scan_top_k over every row of a float32 ``arena`` (l2, dot or cosine, no
    mask), its rows chosen first on ``half``, the arena rounded to float16 bits,
    and ``extra``, ``moved``, ``top``, what half_copy filled and returned: the same
    answer. ``near`` (int64, one per row) receives the rows chosen; on NEAR_TIES,
    ``out_rows[0]`` holds how many (m), and rank_near takes ``scores[:m]`` and
    ``near[:m]`` as gathered rows. A query so large that a float32 score of the
    copy could overflow (_half_overflows) is scanned plainly: every row chosen."""
    if not all_finite(query):
        return -1
    scored = scaled_query(query, metric)
    shift = 0.0
    if metric == METRIC_L2:
        # the query less the copy's centre, as the copy's rows are; its float32
        # rounding moves it by at most 2**-23 |q'|, added to what the rows moved
        dim = query.shape[0]
        scored = np.empty(dim, np.float32)
        q_sq = 0.0
        for j in range(dim):
            scored[j] = query[j] - extra[j]
            q_sq += np.float64(scored[j]) * np.float64(scored[j])
        shift = np.sqrt(q_sq) * 2.0 ** -23 * (1.0 + 1e-9)
    if not all_finite(scored) or _half_overflows(scored, moved, top):
        # a float32 score of the copy could overflow (inf, NaN: never ranked right):
        # the plain scan, every row (its rows "chosen" for rank_near: all)
        for i in range(near.shape[0]):
            near[i] = i
        count = _ranked(arena, norms, query, metric, k, spare, _NO_ALLOW, False, near, False,
                        scores, out_rows, out_dist)
        if count == NEAR_TIES:
            out_rows[0] = near.shape[0]
        return count
    m = _half_near(half, norms, extra[query.shape[0]:], moved + shift, top, scored, metric,
                   k, scores, near)
    if m <= 2 * (k + spare):
        # few rows chosen (at least k: those the reach came from): each ranked
        # exactly, the arena's float32 stage skipped (what it would settle, the
        # float64 scores settle: the same rows and scores)
        chosen = near[:m]
        exact = np.empty(m, np.float64)
        rank_rows(arena, chosen, query, metric, exact)
        count = min(k, m)
        for i in range(count):
            out_rows[i] = chosen[i]
            out_dist[i] = exact[i]
        return count
    count = _ranked(arena, norms, query, metric, k, spare, _NO_ALLOW, False, near[:m], True,
                    scores[:m], out_rows, out_dist)
    if count == NEAR_TIES:
        out_rows[0] = m
    return count


@njit(cache=True, nogil=True, fastmath=True)   # (a finite query: its sum vectorised)
def _half_overflows(query, moved, top):
    """Could a float32 score of the copy overflow? Each is at most (|x'| + |q|)**2
    (l2; dot and cosine's |x'||q| and |q|**2 under it too, |x'| <= top + moved),
    rounding aside: kept under a quarter of float32's largest."""
    q_sq = 0.0
    for j in range(query.shape[0]):
        q_sq += np.float64(query[j]) * query[j]
    size = top + moved + np.sqrt(q_sq)
    return size * size > 0.25 * 3.4028234663852886e38


@njit(cache=True, nogil=True, fastmath=True, readonly=("half",))
def _half_near(half, norms, sq, moved, top, query, metric, k, scores, near):
    # every row whose float16 score is within _half_reach of the k-th's, ascending,
    # into near; returns how many
    half_scores(half, norms, sq, query, metric, scores)
    kth = _bound(scores, k)
    if kth >= _ABOVE:       # (no bound from the groups: the k-th itself)
        keys = np.empty(k, np.float32)
        ids = np.empty(k, np.int64)
        _keep(scores, _NO_ALLOW, False, near, False, keys, ids, k, kth)
        kth = keys[k - 1]
    # (else _bound's: at least k rows score at most it, so the reach it gives holds
    # every row the k-th's would, and a few more, which the arena ranks: cheaper
    # than the keep pass that finds the k-th itself, measured)
    reach = _half_reach(kth, moved, top, query, metric)
    m = 0
    for i in range(scores.shape[0]):
        if np.float64(scores[i]) <= reach:
            near[m] = i
            m += 1
    return m


# _score_blocks leaves the dimensions' loop to LLVM, which sums each row's 8-lane
# vectors across their lanes apart (a shuffle-and-add tree a row); _dots8 writes the
# loop itself, one <8 x float> sum a row, and adds the eight rows' vectors across in
# one tree whose result is their eight sums (the transposed reduction: 7 shuffle
# pairs and adds for 8 rows, where 8 trees take 24). The copy's pass alone, 1 000 x
# 128 float16 rows, one process, loaded machine: 6.1 us against 7.3 (3 runs each);
# at 384 dimensions, where the trees weigh less, 16.7 against 17.4. Any order of a
# row's sum is one the bounds allow (fastmath: _half_reach's float32 error).
@intrinsic
def _dots8(typingctx, half, query, row, out):
    """out[row + t] = the float32 sum over columns j < dim - dim % 8 of half[row + t, j]
    (float16 bits, widened) times query[j], for t < 8 (rows row..row+7 exist)."""
    if not (isinstance(half, types.Array) and half.dtype == types.uint16 and half.ndim == 2
            and half.layout == "C" and isinstance(query, types.Array)
            and query.dtype == types.float32 and query.layout == "C"
            and isinstance(out, types.Array) and out.dtype == types.float32
            and out.layout == "C" and isinstance(row, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        half_t, query_t, row_t, out_t = signature.args
        rows = context.make_array(half_t)(context, builder, args[0])
        vec = context.make_array(query_t)(context, builder, args[1])
        dest = context.make_array(out_t)(context, builder, args[3])
        row = context.cast(builder, args[2], row_t, types.intp)
        f32x8 = ir.VectorType(ir.FloatType(), 8)
        i16x8, f16x8 = ir.VectorType(ir.IntType(16), 8), ir.VectorType(ir.HalfType(), 8)
        dim = builder.extract_value(vec.shape, 0)
        main = builder.and_(dim, ir.Constant(dim.type, -8))
        accs = [cgutils.alloca_once_value(builder, ir.Constant(f32x8, [0.0] * 8))
                for _ in range(8)]
        fast = ("fast",)

        def pointer(array_t, array, indices, lanes):
            at = cgutils.get_item_pointer(context, builder, array_t, array, indices,
                                          wraparound=False)
            return builder.bitcast(at, lanes.as_pointer())

        with cgutils.for_range_slice(builder, ir.Constant(dim.type, 0), main,
                                     ir.Constant(dim.type, 8)) as (j, _):
            q = builder.load(pointer(query_t, vec, [j], f32x8), align=4)
            for t, acc in enumerate(accs):
                r = builder.add(row, ir.Constant(row.type, t))
                bits = builder.load(pointer(half_t, rows, [r, j], i16x8), align=2)
                x = builder.fpext(builder.bitcast(bits, f16x8), f32x8)
                builder.store(builder.fadd(builder.load(acc), builder.fmul(x, q, flags=fast),
                                           flags=fast), acc)
        # the rows' vectors in bit-reversed order, so that the tree leaves row t's sum
        # in lane t: each level adds the halves of lane groups of two vectors
        level = [builder.load(accs[t]) for t in (0, 4, 2, 6, 1, 5, 3, 7)]
        width = 8
        while len(level) > 1:
            half_w, pairs = width // 2, []
            low = [g + lane + side for g in range(0, 8, width)
                   for side in (0, 8) for lane in range(half_w)]
            mask_lo = ir.Constant(ir.VectorType(ir.IntType(32), 8), low)
            mask_hi = ir.Constant(ir.VectorType(ir.IntType(32), 8), [x + half_w for x in low])
            for a, b in zip(level[::2], level[1::2]):
                pairs.append(builder.fadd(builder.shuffle_vector(a, b, mask_lo),
                                          builder.shuffle_vector(a, b, mask_hi), flags=fast))
            level, width = pairs, half_w
        builder.store(level[0], pointer(out_t, dest, [row], f32x8), align=4)
        return context.get_dummy_value()

    return types.none(half, query, row, out), codegen


# The copy's scores, eight rows a step by _dots8 (_score_blocks' scores, each row's
# sum in another order): l2 as |x'|^2 + |q|^2 - 2 x'.q, one product an element where
# the difference's square is two operations (a third fewer at 128 dimensions,
# measured), its cancellation bounded absolutely, by the rows' and the query's sizes,
# in _half_reach (the copy is centred: half_copy); dot -x'.q; cosine from x'.q and
# the arena's row norms, as _score_blocks.
@njit(cache=True, nogil=True, fastmath=True, readonly=("half", "norms", "sq"))
def half_scores(half, norms, sq, query, metric, scores):
    """The float32 score of each row of the copy ``half`` (float16 bits) for ``query``
    into ``scores``: l2 (``sq``: each copy row's |x'|^2; ``query`` centred as the
    copy is), dot or cosine (``norms``: the arena's row norms)."""
    # (unmanaged: no reference counts around the intrinsic's calls)
    half, norms, sq = unmanaged(half), unmanaged(norms), unmanaged(sq)
    query, scores = unmanaged(query), unmanaged(scores)
    if metric == METRIC_L2:
        q_norm = np.float32(0.0)        # (|q|^2)
        for j in range(query.shape[0]):
            q_norm += query[j] * query[j]
    else:
        q_norm = query_norm(query, metric)
    dim = query.shape[0]
    n = scores.shape[0]
    m = n - n % 8
    for i in range(0, m, 8):
        _dots8(half, query, i, scores)
    if dim % 8:
        for i in range(m):
            a = scores[i]
            for j in range(dim - dim % 8, dim):     # (the columns past the last eight)
                a += as_f32(half[i, j]) * query[j]
            scores[i] = a
    for i in range(m, n):
        a = np.float32(0.0)
        for j in range(dim):
            a += as_f32(half[i, j]) * query[j]
        scores[i] = a
    # (each loop alone, so that it vectorises across the rows)
    if metric == METRIC_L2:
        for i in range(n):
            scores[i] = sq[i] + q_norm - np.float32(2.0) * scores[i]
    elif metric == METRIC_DOT:
        for i in range(n):
            scores[i] = -scores[i]
    else:
        for i in range(n):
            scores[i] = cosine_from_dot(scores[i], norms[i], q_norm)


@njit(cache=True, nogil=True)
def _half_reach(kth, moved, top, query, metric):
    """The highest float16 score whose row's exact score may be among the k best,
    given the k-th float16 score ``kth`` (in float64, rounded up). A row's true
    score is its float16 row's (within ``eps`` of what the float32 sum gives,
    as _near) moved by at most the rounding's move: l2 by ``moved`` in distance,
    dot by ``moved |q|``, cosine by ``moved`` (relative to |x|); then _MARGIN
    keeps the rows left out strictly above float64's rounding."""
    eps = 8.0 * (query.shape[0] + 4) * _ULP
    kth = np.float64(kth)
    q_sq = 0.0
    for j in range(query.shape[0]):
        q_sq += np.float64(query[j]) * query[j]
    q = np.sqrt(q_sq) * (1.0 + 1e-9)
    if metric == METRIC_L2:
        # half_scores' l2 score of a row x' errs from |x' - q|^2 by at most
        # (2 dim + 4) 2**-24 (|x'| + |q|)^2 (the dot product's sum, |x'|^2's and
        # |q|^2's rounding, the two sums'), under `err` (+ an underflow's); the k
        # rows kept are within `far` of q; a row left out is farther than
        # far * (1 + _MARGIN): its copy's distance past that plus `moved`
        size = top + q
        err = eps * size * size + query.shape[0] * 1e-37
        far = np.sqrt(max(kth + err, 0.0)) * (1.0 + 1e-12) + moved
        out = far * (1.0 + _MARGIN) + moved
        return out * out * (1.0 + 1e-12) + err
    if metric == METRIC_COSINE:
        slack = moved + 4.0 * eps * (1.0 + moved)
        return kth + 2.0 * slack + _MARGIN
    slack = (moved + eps * top) * q
    return kth + 2.0 * slack + _MARGIN * (top + moved) * q + 2.0 * query.shape[0] * 1e-37


@njit(cache=True, nogil=True)
def _near(kth, arena, norms, query, metric):
    """The highest float32 score whose row's exact score may still beat or tie the
    k-th's, ``kth``: the float32 error bound of both, doubled. L2 and L1 err
    relative to the score (terms >= 0; + an underflow's), cosine absolute, dot by
    the largest row norm times the query's (+ an underflow's); hamming counts exactly."""
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
        return np.float32(kth + err * top * np.sqrt(q_sq) * 1.5 + query.shape[0] * 1e-37)
    return np.float32(kth * (1.0 + err) + query.shape[0] * 1e-37)


@njit(cache=True, nogil=True, readonly=("rows", "scores"))
def rank_near(arena, query, metric, k, limit, scores, allow, use_allow, rows, use_rows,
              out_rows, out_dist):
    """After scan_top_k answered NEAR_TIES (the same arguments, its ``scores``, and
    ``limit`` = the float32 value it left in ``out_dist[0]``): the k best by (exact
    score, row) of the allowed rows scoring at most ``limit`` or NaN (unknown);
    returns how many."""
    m = 0
    for i in range(scores.shape[0]):
        r = rows[i] if use_rows else i
        if not (use_allow and not allow[r]) and not scores[i] > limit:
            m += 1
    near = np.empty(m, np.int64)
    m = 0
    for i in range(scores.shape[0]):
        r = rows[i] if use_rows else i
        if not (use_allow and not allow[r]) and not scores[i] > limit:
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
