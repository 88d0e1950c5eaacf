"""The executor: runs a planned `Query` and returns columns as numpy arrays.

Each node yields either a row mask (Scan, Filter: a bool array over the
snapshot's rows and its count) or ranked rows (VectorTopK, Limit: row
numbers, and scores where there are any). The result is `Result`: rows,
scores, the count, the fields to return, and the plan as it actually ran —
a vector top-k that fell back (widened walk, then exact scan) says so.
`Hit` objects are built from it only at the API edge (collection.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..index import flat
from .plan import Count, Filter, Limit, PlanNode, Project, Scan, Strategy, VectorTopK
from .planner import WIDEN, Query


class Result:
    """What a read returns before any Python objects are built."""
    __slots__ = ("rows", "scores", "count", "fields", "plan")

    def __init__(self, rows, scores, count, fields, plan):
        self.rows: np.ndarray | None = rows      # int64 row numbers, in answer order
        self.scores: np.ndarray | None = scores  # float64, one per row (vector top-k)
        self.count: int = count
        self.fields: tuple = fields              # fields to return besides id (and score)
        self.plan: PlanNode = plan               # as it ran


def execute(query: Query) -> Result:
    root = query.plan
    fields = ()
    if isinstance(root, Project):
        fields = root.fields
    out = _run(root, query)
    mask, rows, scores, count, plan = out
    return Result(rows, scores, count, fields, plan)


# Each runner returns (mask, rows, scores, count, node as it ran); mask or rows is None.

def _run(node: PlanNode, query: Query):
    return _RUNNERS[type(node)](node, query)


def _scan(node: Scan, query: Query):
    got = query.masks.get(id(node))
    mask, count = got if got is not None else query.snapshot.visible(query.table, node.nonnull)
    return mask, None, None, count, node


def _filter(node: Filter, query: Query):
    got = query.masks.get(id(node))
    if got is not None:
        return got[0], None, None, got[1], node
    mask, _, _, _, inp = _run(node.input, query)
    table = query.table
    mask = mask & node.bound.mask(table, query.snapshot.n(table))
    return mask, None, None, int(np.count_nonzero(mask)), _with_input(node, inp)


def _limit(node: Limit, query: Query):
    mask, rows, scores, _, inp = _run(node.input, query)
    if rows is None:
        rows = np.flatnonzero(mask)
    rows = rows[:node.limit]
    if scores is not None:
        scores = scores[:node.limit]
    return None, rows, scores, len(rows), _with_input(node, inp)


def _project(node: Project, query: Query):
    mask, rows, scores, count, inp = _run(node.input, query)
    if rows is None:
        rows = np.flatnonzero(mask)
    return None, rows, scores, count, _with_input(node, inp)


def _count(node: Count, query: Query):
    _, _, _, count, inp = _run(node.input, query)
    return None, None, None, count, _with_input(node, inp)


def _vector_topk(node: VectorTopK, query: Query):
    mask, _, _, allowed, inp = _run(node.input, query)
    table = query.table
    n = query.snapshot.n(table)
    column = table.columns[node.field]
    allow = None if allowed == n else mask     # every row: the kernels skip the mask
    k = want = min(node.k, allowed)
    q, metric = node.query, node.metric
    strategy, ef = node.strategy, node.ef
    if strategy is Strategy.EXACT:
        rows, dists = _exact(column, metric, q, k, allow, n)
    else:
        index = table.vector_indexes[node.field]
        rows, dists = index.search(column, metric, q, k, allow, ef, n)
        if len(rows) < want:
            ef *= WIDEN
            strategy = Strategy.WIDENED
            rows, dists = index.search(column, metric, q, k, allow, ef, n)
        if len(rows) < want:
            strategy = Strategy.GRAPH_THEN_EXACT
            rows, dists = _exact(column, metric, q, k, allow, n)
    ran = node
    if strategy is not node.strategy or inp is not node.input:
        ran = replace(node, strategy=strategy, ef=ef, input=inp)
    return None, rows, dists, len(rows), ran


def _exact(column, metric, q, k, allow, n):
    arena, norms = column.frozen(n)
    return flat.search(metric, arena, norms, q, k, allow)


def _with_input(node: PlanNode, inp: PlanNode) -> PlanNode:
    return node if inp is node.input else replace(node, input=inp)


_RUNNERS = {Scan: _scan, Filter: _filter, Limit: _limit, Project: _project, Count: _count,
            VectorTopK: _vector_topk}
