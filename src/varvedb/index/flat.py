"""Exact (flat) vector search: one kernel pass over the arena, top-k kept in a heap.

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

import numpy as np

from ..kernels.distance import METRIC_CODES
from ..kernels.scan import scan_top_k, scan_top_k_l1

_NO_ALLOW = np.zeros(1, np.bool_)
_NO_ROWS = np.zeros(1, np.int64)
GATHER_BELOW = 0.05   # a mask allowing fewer rows than this fraction is gathered first


def search(metric: str, arena: np.ndarray, norms: np.ndarray, q: np.ndarray, k: int,
           allow: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k rows of arena (rows where allow is True) nearest to q: (rows int64,
    float64 distances), ascending by (distance, row)."""
    n = len(arena)
    if allow is not None and (allow.dtype != np.bool_ or allow.shape != (n,)):
        raise ValueError(f"allow must be a bool mask over the {n} arena rows")
    k = min(int(k), n)
    if k <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    spare = max(8, k // 4)         # near-ties in float32 are settled by the rescoring
    rows = np.empty(k + spare, np.int64)
    dists = np.empty(k + spare, np.float64)
    bits = arena.view(np.uint16) if arena.dtype == np.float16 else arena
    # a bit arena's query is packed bytes like its rows; every other one float32
    q = np.ascontiguousarray(q, dtype=np.uint8 if metric == "hamming" else np.float32)
    gathered = None
    if allow is not None and np.count_nonzero(allow) < GATHER_BELOW * n:
        gathered = np.flatnonzero(allow)
    allowed = (_NO_ALLOW if allow is None else allow, allow is not None,
               _NO_ROWS if gathered is None else gathered, gathered is not None)
    if metric == "l1":
        count = scan_top_k_l1(bits, q, k, spare, *allowed, rows, dists)
    else:
        count = scan_top_k(bits, norms, q, METRIC_CODES[metric], k, spare, *allowed,
                           rows, dists)
    if count < 0:
        raise ValueError("query must be finite")
    return rows[:count], dists[:count]
