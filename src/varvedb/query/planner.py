"""The vector search planner: exact scan, graph walk, or a widened walk, by selectivity.

Every answer is complete: when k rows are allowed, k rows come back. A k
above the allowed rows is cut to their count first, so no kernel sizes its
scratch by a caller's limit=10**9.

* No graph, `exact=True`, or few allowed rows (below EXACT_ROWS, or below
  EXACT_FRACTION of the table): exact scan over the allowed rows — cheaper
  than a walk that must step over many disallowed nodes to find them.
* Otherwise walk the graph with the allow-mask (filter ∧ visibility ∧ not
  null). A walk that returns fewer than min(k, allowed) rows is retried with
  WIDEN × ef, and if still short, answered exactly. A k above MAX_EF is
  answered exactly too: a walk that wide costs more than the scan.

Both paths score their final rows exactly in float64 and rank them by (score,
row), so scores equal pgvector's values whichever path found them. `Plan.describe()` is what `explain` reports.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..index import flat
from ..schema import MAX_EF

EXACT_ROWS = 2048
EXACT_FRACTION = 0.02
WIDEN = 4


@dataclass
class Plan:
    path: str            # "exact", "hnsw", "hnsw-widened", "hnsw-then-exact"
    allowed: int
    rows: int
    ef: int | None = None
    reason: str = ""

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        if self.path == "exact":
            return f"exact scan over {self.allowed:,} of {self.rows:,} rows ({self.reason})"
        what = {"hnsw": "hnsw walk", "hnsw-widened": "hnsw walk widened",
                "hnsw-then-exact": "hnsw walk short of k, then exact scan"}[self.path]
        return f"{what} ef={self.ef}, {self.allowed:,} of {self.rows:,} rows allowed"


def vector_search(column, metric: str, index, q: np.ndarray, k: int, allow: np.ndarray,
                  allowed: int, ef: int | None = None, exact: bool = False
                  ) -> tuple[np.ndarray, np.ndarray, Plan]:
    """Top-k rows of `column` among `allow` (`allowed` of them set) nearest to q:
    (rows, distances, plan)."""
    n = len(allow)
    if allowed == n:
        allow = None    # every row: the kernels skip the mask
    k = want = min(k, allowed)
    reason = ("exact=True" if exact else "no vector index" if index is None
              else "few rows allowed" if allowed < max(EXACT_ROWS, EXACT_FRACTION * n)
              else "limit above the widest walk" if k > MAX_EF else "")
    if reason:
        rows, dists = _exact(column, metric, q, k, allow, n)
        return rows, dists, Plan("exact", allowed, n, reason=reason)
    ef = max(ef or index.spec.ef_search, k)
    rows, dists = index.search(column, metric, q, k, allow, ef, n)
    path = "hnsw"
    if len(rows) < want:
        ef *= WIDEN
        rows, dists = index.search(column, metric, q, k, allow, ef, n)
        path = "hnsw-widened"
    if len(rows) < want:
        rows, dists = _exact(column, metric, q, k, allow, n)
        path = "hnsw-then-exact"
    return rows, dists, Plan(path, allowed, n, ef)


def _exact(column, metric, q, k, allow, n):
    return flat.search(metric, column.arena.frozen(n), column.norms.frozen(n), q, k, allow)
