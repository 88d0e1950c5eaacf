"""Exact (flat) vector search: one kernel pass over the arena, top-k kept in a heap
(a searcher used often over a float32 arena: over a float16 copy of it first,
HALF_AFTER).

Distances are on pgvector's scale so that ordering and values match its
operators: cosine `<=>` = 1 - cos (a zero vector is at distance 1), l2 `<->`
= Euclidean distance, dot `<#>` = -inner product. Rows are ranked by the
graph walk's float32 distance, a few spare candidates are kept, and those
are rescored in float64 and ordered by (score, row) (kernels/scan.py), so
reported scores carry no cancellation error and equal the graph path's.

Why one kernel and not BLAS: measured on this project's machines, the numpy
steps around a matrix-vector product (a distance array, a partition, a
gather, a sort) cost more than the product itself — 2x at 1 000 rows, 1.6–2x
at 100 000 × 128, 30x on f16 arenas (which BLAS must widen first), and a tie
at 1% of the rows allowed — and the kernel allocates nothing per row.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..errors import DimensionError, NonFiniteVectorError
from ..kernels.distance import METRIC_CODES
from ..kernels.jit import direct
from ..kernels.scan import NEAR_TIES, half_copy, half_top_k, rank_near, scan_top_k

_NO_ALLOW = np.zeros(1, np.bool_)
_NO_ROWS = np.zeros(1, np.int64)
GATHER_BELOW = 0.05   # a mask allowing fewer rows than this fraction is gathered first
_U8, _F32 = np.dtype(np.uint8), np.dtype(np.float32)
_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)   # (np.empty parses a type each call)
# The float16 copy (kernels/scan.py, half_top_k): an unmasked scan of a float32 arena
# of HALF_DIM dimensions or more and HALF_MIN to HALF_MAX elements reads a float16
# copy of it first, made at the searcher's HALF_AFTER-th search (a shape searched
# once a commit never pays for it: the copy costs about 15 scans), one per searcher,
# kept with it (counted in the kept searches' byte cap: top_k.nbytes below).
# Measured (the kernel alone, loaded machine, 1 000 rows, top-10):
# 13.6 -> 10.4 us at 128 dimensions, 9.3 -> 8.8 at 96; at 64, and at 256 x 128, the
# pass that gathers the rows chosen costs more than the bytes saved (6.7 -> 7.3,
# 3.9 -> 4.2). Since the copy's l2 scores take one product an element and few rows
# chosen are ranked in float64 at once (kernels/scan.py), 1 000 rows, top-10, the
# kernel alone interleaved with the plain scan's (medians of 5, loaded machine):
# 10.8 us against 11.5 at 128 dimensions (l2), 25.6 against 26.4 at 384 (cosine).
# The copy's l2 pass (kernels/scan.py, then by _score_blocks: 8 rows a step, the
# dimensions in 8-lane vectors) cost ~6.5 ns a row at 128 dimensions whether its rows
# sat in L1 (96 rows) or L2 (1 000), as a plain float32 row sum does (7.2 ns a row):
# bound by the work a row, not by the reads; summing the 8 rows' vectors across in
# one tree (scan.py _dots8, in half_scores) cut it to ~6.1 us a 1 000 rows from 7.3.
# Tried besides (the pass alone, 1 000 x 128, one process, loaded 2-core machine with
# AVX-512 FP16, BF16 and VNNI), against the 7.3: 16-lane vectors (the function
# attribute prefer-vector-width=512) 6-8% faster; bf16 rows by vdpbf16ps (inline asm)
# 3%; int16 codes, vpmaddwd 20% faster row by row but 1.7x slower 8 rows a step; rows
# as lanes (a transposed copy) 5x slower (LLVM vectorises the dimensions' loop, SLP
# never packs the rows). None of them paid for a new copy format and its bounds.
_HALF_METRICS = frozenset({"l2", "dot", "cosine"})
HALF_DIM = 96
HALF_MIN = 1 << 16
HALF_MAX = 1 << 22
HALF_AFTER = 8


def search(metric: str, arena: np.ndarray, norms: np.ndarray, q: np.ndarray, k: int,
           allow: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k rows of arena (rows where allow is True) nearest to q: (rows int64,
    float64 distances), ascending by (distance, row)."""
    return searcher(metric, arena, norms, k, allow)(q)


def searcher(metric: str, arena: np.ndarray, norms: np.ndarray, k: int,
             allow: np.ndarray | None):
    """`search` bound to everything but the query vector: a function of q, for
    many queries over one reader's rows (query/prepared.py)."""
    n = len(arena)
    if allow is not None and (allow.dtype != np.bool_ or allow.shape != (n,)):
        raise ValueError(f"allow must be a bool mask over the {n} arena rows")
    k = min(int(k), n)
    if k <= 0:
        return _nothing
    spare = max(8, k // 4)         # near-ties in float32 are settled by the rescoring
    bits = arena.view(np.uint16) if arena.dtype == np.float16 else arena
    # a bit arena's query is packed bytes like its rows; every other one float32
    dtype = _U8 if metric == "hamming" else _F32     # (one object each: `is` tests it)
    gathered = None
    if allow is not None and np.count_nonzero(allow) < GATHER_BELOW * n:
        gathered = np.flatnonzero(allow)
    code, use_allow, use_rows = METRIC_CODES[metric], allow is not None, gathered is not None
    allow = _NO_ALLOW if allow is None else allow
    gathered = _NO_ROWS if gathered is None else gathered
    scored = len(gathered) if use_rows else n
    pool = []           # scratch, one a search in flight (list.pop/append: atomic)
    # the kernel for these arguments' types, called without numba's dispatch: a
    # query of another type is converted to `dtype`, 1-D, C order, writable below
    kernel = direct(scan_top_k, bits, norms, np.empty(arena.shape[1], dtype), code, k, spare,
                    allow, use_allow, gathered, use_rows, np.empty(scored, np.float32),
                    np.empty(k, _I64), np.empty(k, _F64))
    # the float16 copy's scan (HALF_AFTER), or None: never, or not yet (< 0: never)
    half = None
    seen = 0 if (arena.dtype == _F32 and metric in _HALF_METRICS and not use_allow
                 and arena.shape[1] >= HALF_DIM
                 and HALF_MIN <= arena.size <= HALF_MAX) else -1
    near_rows = n if seen == 0 else 0     # the copy's scratch: the rows it chose

    def top_k(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # one flavour of query for the kernel: a read-only one compiled apart and
        # scored 1e-14 away from a writable copy of itself (the float64 rescoring)
        # (carray: C order, aligned and writable, in one flag)
        if not (type(q) is np.ndarray and q.dtype is dtype and q.ndim == 1 and q.flags.carray):
            q = np.array(q, dtype=dtype, order="C")
            if q.ndim != 1:
                raise DimensionError(f"a query vector is one row, got shape {q.shape}")
        return checked(q)

    def checked(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # top_k of a query already of the kernel's flavour (`dtype`, 1-D, carray)
        nonlocal half, seen
        try:
            scores, near = pool.pop()
        except IndexError:
            scores, near = np.empty(scored, np.float32), np.empty(near_rows, _I64)
        rows = np.empty(k, _I64)
        dists = np.empty(k, _F64)
        if half is not None:
            count = half(q, code, k, spare, scores, near, rows, dists)
            if count == NEAR_TIES:      # (the rows the copy chose: gathered)
                m = int(rows[0])
                count = rank_near(arena, q, code, k, np.float32(dists[0]), scores[:m], allow,
                                  False, near[:m], True, rows, dists)
        else:
            if seen >= 0:
                seen += 1
                if seen >= HALF_AFTER:
                    half = _half(arena, norms, code, q, k, spare, scores, near, rows, dists)
                    seen = -1
            count = kernel(bits, norms, q, code, k, spare, allow, use_allow, gathered, use_rows,
                           scores, rows, dists)
            if count == NEAR_TIES:
                count = rank_near(bits, q, code, k, np.float32(dists[0]), scores, allow,
                                  use_allow, gathered, use_rows, rows, dists)
        pool.append((scores, near))
        if count == k:
            return rows, dists
        if count < 0:
            raise NonFiniteVectorError("query vector holds NaN or inf")
        return rows[:count], dists[:count]
    # the most it holds besides the arena and the mask (a kept search's share of
    # query/prepared.py's byte cap): one search's scratch, and the float16 copy it
    # makes at its HALF_AFTER-th search
    top_k.nbytes = scored * 4 + near_rows * 8 + (
        arena.size * 2 + (n + arena.shape[1]) * 4 if seen == 0 else 0)
    # (query/prepared.py's kept search checks its query's flavour itself: it calls
    # this, one call and one check fewer a search)
    top_k.checked = checked
    return top_k


def _half(arena, norms, code, q, k, spare, scores, near, rows, dists):
    """half_top_k bound to these arguments' types and to the arena, its norms, the
    arena rounded to float16 and half_copy's centre, row sizes and bounds (a
    partial of the query, the metric, k, spare and the scratch and result arrays);
    None when a value is past float16's range (the copy would hold infinities)."""
    copy = np.empty(arena.shape, np.uint16)
    extra = np.empty(arena.shape[1] + len(arena), np.float32)
    moved, top = half_copy(arena, code, copy, extra)
    if moved < 0:
        return None
    kernel = direct(half_top_k, arena, norms, copy, extra, moved, top, q, code, k, spare,
                    scores, near, rows, dists)
    return partial(kernel, arena, norms, copy, extra, moved, top)


def _nothing(q) -> tuple[np.ndarray, np.ndarray]:
    # no row to score, so no kernel refuses a NaN or inf query: refused here
    if not np.isfinite(q).all():
        raise NonFiniteVectorError("query vector holds NaN or inf")
    return np.empty(0, np.int64), np.empty(0, np.float64)
