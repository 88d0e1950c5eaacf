"""Exact (flat) vector search: one BLAS pass over the arena, top-k by partition.

Distances are on pgvector's scale so that ordering and values match its
operators: cosine `<=>` = 1 - cos (a zero vector is at distance 1), l2 `<->`
= Euclidean distance, dot `<#>` = -inner product. Candidates are ranked with
the cheap BLAS form (|x|² - 2x·q + |q|² for l2), then the final ones are
rescored directly in float64 so reported scores do not carry cancellation
error. f16 arenas are widened in blocks, never as a whole.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels.distance import METRIC_CODES, exact_row_distances

BLOCK = 32768   # rows widened from f16 at a time
GATHER_BELOW = 0.15  # a mask allowing fewer rows than this fraction is gathered


def _dots(arena: np.ndarray, q: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    if rows is not None:
        x = arena[rows]
        return x.astype(np.float32, copy=False) @ q
    if arena.dtype == np.float32:
        return arena @ q
    out = np.empty(len(arena), np.float32)
    for lo in range(0, len(arena), BLOCK):
        out[lo:lo + BLOCK] = arena[lo:lo + BLOCK].astype(np.float32) @ q
    return out


def distances(metric: str, arena: np.ndarray, norms: np.ndarray, q: np.ndarray,
              rows: np.ndarray | None = None) -> np.ndarray:
    """Approximate (BLAS) distances from q to arena rows (all rows, or `rows`)."""
    s = _dots(arena, q, rows)
    nx = norms if rows is None else norms[rows]
    if metric == "dot":
        return -s
    if metric == "cosine":
        denom = nx * np.float32(math.sqrt(float(q @ q)))
        # a zero vector is at distance 1: its cosine is taken as 0
        cos = np.divide(s, denom, out=np.zeros_like(s), where=denom != 0)
        return 1.0 - cos
    qq = float(q @ q)
    return np.sqrt(np.maximum(nx * nx - 2.0 * s + qq, 0.0))


def exact_distances(metric: str, arena: np.ndarray, rows: np.ndarray, q: np.ndarray
                    ) -> np.ndarray:
    """Distances from q to arena[rows] computed directly in float64 (for the few rows returned)."""
    out = np.empty(len(rows), np.float64)
    bits = arena.view(np.uint16) if arena.dtype == np.float16 else arena
    exact_row_distances(bits, np.asarray(rows, np.int64), np.asarray(q, np.float32),
                        METRIC_CODES[metric], out)
    return out


def search(metric: str, arena: np.ndarray, norms: np.ndarray, q: np.ndarray, k: int,
           allow: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k rows of arena (rows where allow is True) nearest to q, ascending."""
    n = len(arena)
    if k <= 0 or n == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    rows = None
    if allow is not None:
        count = int(np.count_nonzero(allow))
        if count == 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        if count < GATHER_BELOW * n:
            rows = np.flatnonzero(allow)
    d = distances(metric, arena, norms, q, rows)
    if allow is not None and rows is None:
        d = np.where(allow, d, np.inf)
    m = len(d)
    # Rank a few spare candidates so near-ties are settled by the exact rescoring.
    take = min(m, k + max(8, k // 4))
    if take < m:
        # the take-th smallest distance, then every row within it (ties too):
        # a partition of the values is about twice as fast as one of indices
        cut = np.partition(d, take - 1)[take - 1]
        cand = np.flatnonzero(d <= cut)
        if len(cand) > 4 * take:          # many ties at the cut: keep the bound
            cand = np.argpartition(d, take - 1)[:take]
    else:
        cand = np.arange(m)
    cand = cand[np.isfinite(d[cand])]
    idx = cand if rows is None else rows[cand]
    exact = exact_distances(metric, arena, idx, q)
    order = np.lexsort((idx, exact))[:k]
    return idx[order].astype(np.int64), exact[order]
