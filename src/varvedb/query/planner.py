"""The planner: a read's arguments → a plan tree (plan.py), run later by execute.py.

A vector top-k chooses its strategy by selectivity; every answer is complete
(when k rows are allowed, k rows come back). A k above the allowed rows is
cut to their count first, so no kernel sizes its scratch by a caller's
limit=10**9.

* No graph, `exact=True`, or few allowed rows (below EXACT_ROWS, or below
  EXACT_FRACTION of the table): exact scan over the allowed rows — cheaper
  than a walk that must step over many disallowed nodes to find them. A k
  above MAX_EF is answered exactly too: a walk that wide costs more than the scan.
  So is a metric other than the one the graph was built for ("index built for
  cosine"): its edges link rows near by that metric only (l1 has no graph at all).
* Otherwise walk the graph with the allow-mask (filter ∧ visibility ∧ not
  null). At run time a walk that returns fewer than min(k, allowed) rows is
  retried WIDEN × wider, and if still short, answered exactly (execute.py).

Choosing needs the count of allowed rows, so planning a search evaluates
its visibility and filter masks; the `Query` keeps them for the executor.
Planning a find or a count evaluates nothing but visibility (cached).
"""
from __future__ import annotations

import numpy as np

from ..schema import MAX_EF
from .plan import Count, Filter, Limit, PlanNode, Project, Scan, Strategy, VectorTopK

EXACT_ROWS = 2048
EXACT_FRACTION = 0.02
WIDEN = 4


class Query:
    """A planned read: its plan, the snapshot and table it reads, and the
    masks planning already evaluated (keyed by node), which the executor reuses."""
    __slots__ = ("plan", "snapshot", "table", "masks", "env", "analyze")

    def __init__(self, plan: PlanNode, snapshot, table, masks: dict, env=None):
        self.plan = plan
        self.snapshot = snapshot
        self.table = table
        self.masks = masks
        self.env = env              # expression parameters and subquery values (SQL)
        self.analyze = None         # EXPLAIN ANALYZE: id(node as ran) -> (rows, seconds)


def choose_vector_strategy(index, k: int, allowed: int, n: int, ef: int | None,
                           exact: bool, metric: str | None = None
                           ) -> tuple[Strategy, int | None, str]:
    """(strategy, ef, reason) for the top-k among `allowed` of `n` rows by `metric`
    (None: the index's own)."""
    k = min(k, allowed)
    built_for = None if index is None or metric is None else index.graph.metric
    reason = ("exact=True" if exact else "no vector index" if index is None
              # a graph's edges are nearest by its own metric: another one it cannot answer
              else f"index built for {built_for}" if built_for != metric
              else "few rows allowed" if allowed < max(EXACT_ROWS, EXACT_FRACTION * n)
              else "limit above the widest walk" if k > MAX_EF else "")
    if reason:
        return Strategy.EXACT, None, reason
    return Strategy.GRAPH, max(ef or index.spec.ef_search, k), ""


def plan_search(snap, table, field: str, metric: str, q: np.ndarray, k: int, where,
                ef: int | None, exact: bool, fields: tuple) -> Query:
    """Project(VectorTopK(Filter?(Scan))): `where` is a bound query.filter.Filter or None."""
    mask, allowed = snap.visible(table, field)
    n = snap.n(table)
    node = Scan(table.name, snap.version, n, allowed, field)
    masks = {id(node): (mask, allowed)}
    if where is not None:
        mask = mask & where.mask(table, n)
        allowed = int(np.count_nonzero(mask))
        node = Filter(where.expr, node, allowed, bound=where)
        masks[id(node)] = (mask, allowed)
    index = table.vector_indexes.get(field)
    strategy, ef, reason = choose_vector_strategy(index, k, allowed, n, ef, exact, metric)
    top = VectorTopK(field, metric, k, strategy, allowed, node, ef, reason, query=q)
    return Query(Project(fields, top), snap, table, masks)


def plan_find(snap, table, where, limit: int | None, fields: tuple) -> Query:
    """Project(Limit(Filter?(Scan))): rows in insertion order, no scoring."""
    node, masks = plan_scan(snap, table, where)
    return Query(Project(fields, Limit(limit, node)), snap, table, masks)


def plan_count(snap, table, where) -> Query:
    """Count(Filter?(Scan))."""
    node, masks = plan_scan(snap, table, where)
    return Query(Count(node), snap, table, masks)


def plan_scan(snap, table, where) -> tuple[PlanNode, dict]:
    """Filter?(Scan), and the masks planning evaluated (visibility)."""
    mask, visible = snap.visible(table)     # cached for a committed version
    node = Scan(table.name, snap.version, snap.n(table), visible)
    masks = {id(node): (mask, visible)}
    return (node if where is None else Filter(where.expr, node, bound=where)), masks
