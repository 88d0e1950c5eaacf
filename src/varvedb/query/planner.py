"""The vector search planner: exact scan, graph walk, or a widened walk, by selectivity.

Every answer is complete: when k rows are allowed, k rows come back.

* No graph, `exact=True`, or few allowed rows (below EXACT_ROWS, or below
  EXACT_FRACTION of the table): exact scan over the allowed rows — cheaper
  than a walk that must step over many disallowed nodes to find them.
* Otherwise walk the graph with the allow-mask (filter ∧ visibility ∧ not
  null). A walk that returns fewer than min(k, allowed) rows is retried with
  WIDEN × ef, and if still short, answered exactly.

The final rows are rescored exactly, so scores equal pgvector's values
whichever path found them. `Plan.describe()` is what `explain` reports.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..index import flat

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

    def describe(self) -> str:
        if self.path == "exact":
            return f"exact scan over {self.allowed:,} of {self.rows:,} rows ({self.reason})"
        what = {"hnsw": "hnsw walk", "hnsw-widened": "hnsw walk widened",
                "hnsw-then-exact": "hnsw walk short of k, then exact scan"}[self.path]
        return f"{what} ef={self.ef}, {self.allowed:,} of {self.rows:,} rows allowed"


def vector_search(column, metric: str, index, q: np.ndarray, k: int, allow: np.ndarray,
                  ef: int | None = None, exact: bool = False
                  ) -> tuple[np.ndarray, np.ndarray, Plan]:
    """Top-k rows of `column` among `allow` nearest to q: (rows, distances, plan)."""
    n = len(allow)
    allowed = int(np.count_nonzero(allow))
    arena, norms = column.arena.data[:n], column.norms.data[:n]
    want = min(k, allowed)
    reason = ("exact=True" if exact else "no vector index" if index is None
              else "few rows allowed" if allowed < max(EXACT_ROWS, EXACT_FRACTION * n) else "")
    if reason:
        rows, dists = flat.search(metric, arena, norms, q, k, allow)
        return rows, dists, Plan("exact", allowed, n, reason=reason)
    ef = max(ef or index.spec.ef_search, k)
    rows, _ = index.search(column, metric, q, k, allow, ef)
    path = "hnsw"
    if len(rows) < want:
        ef *= WIDEN
        rows, _ = index.search(column, metric, q, k, allow, ef)
        path = "hnsw-widened"
    if len(rows) < want:
        rows, dists = flat.search(metric, arena, norms, q, k, allow)
        return rows, dists, Plan("hnsw-then-exact", allowed, n, ef)
    dists = flat.exact_distances(metric, arena[rows], q)
    order = np.lexsort((rows, dists))
    return rows[order], dists[order], Plan(path, allowed, n, ef)
