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
  null), or, for an IVF index, scan its nearest lists with it (the width is
  then the lists probed). At run time a search that returns fewer than
  min(k, allowed) rows is retried WIDEN × wider, and if still short, answered
  exactly (execute.py).

Choosing needs the count of allowed rows, so planning a search evaluates
its visibility and filter masks; the `Query` keeps them for the executor.
Planning a find or a count evaluates nothing but visibility (cached).
"""
from __future__ import annotations

import numpy as np

from ..schema import MAX_EF
from .plan import (Count, Filter, Fusion, Limit, Lookup, PlanNode, Project, Rerank, Scan,
                   Strategy, TextTopK, VectorTopK)

from .request import RRF_K     # noqa: F401  (fusion's k, written once in request.py)
EXACT_ROWS = 2048
EXACT_FRACTION = 0.02
WIDEN = 4
# what a search of each vector index kind (index/vector_index.py) does
_WALKS = {"hnsw": Strategy.GRAPH, "ivfpq": Strategy.LISTS}


class Query:
    """A planned read: its plan, the snapshot and table it reads, and the
    masks planning already evaluated (keyed by node), which the executor reuses,
    and a kept plan's top-k already answered (`given`, query/prepared.py).
    `types_only`: it runs over no rows — its scans find none, its function rows
    and subqueries give none — for its output's types alone (the wire's Describe
    of a SELECT: sql's describe_read)."""
    __slots__ = ("plan", "snapshot", "table", "masks", "env", "analyze", "given",
                 "types_only")

    def __init__(self, plan: PlanNode, snapshot, table, masks: dict, env=None):
        self.plan = plan
        self.snapshot = snapshot
        self.table = table
        self.masks = masks
        self.env = env              # expression parameters and subquery values (SQL)
        self.analyze = None         # EXPLAIN ANALYZE: id(node as ran) -> (rows, seconds)
        self.given = None           # id(VectorTopK) -> (rows, scores) its kept search found
        self.types_only = False


def choose_vector_strategy(index, k: int, allowed: int, n: int, ef: int | None,
                           exact: bool, metric: str | None = None
                           ) -> tuple[Strategy, int | None, str]:
    """(strategy, width, reason) for the top-k among `allowed` of `n` rows by `metric`
    (None: the index's own); `ef` is the caller's width (a graph's beam, or the
    lists an IVF index probes; None: the index's own)."""
    k = min(k, allowed)
    built_for = None if index is None or metric is None else index.metric
    reason = ("exact=True" if exact else "no vector index" if index is None
              # a graph's edges are nearest by its own metric: another one it cannot answer
              else f"index built for {built_for}" if built_for != metric
              else "few rows allowed" if allowed < max(EXACT_ROWS, EXACT_FRACTION * n)
              else "limit above the widest walk" if k > MAX_EF else "")
    if reason:
        return Strategy.EXACT, None, reason
    return _WALKS[index.kind], index.width(ef, k), ""


# The ranked reads (search, text, hybrid, rerank) return their legs bare: the
# API wraps them in Project (query/bind.py), SQL in its Limit and Output.

def plan_search(snap, table, field: str, metric: str, q: np.ndarray, k: int, where,
                widths: dict, exact: bool, expr: tuple = (), implies=None) -> Query:
    """VectorTopK(Filter?(Scan)): `where` is a bound filter or None; `widths` the
    width asked of each kind of index, by its knob (query/bind.search_widths).
    `expr`: the index expression the search ranks by, (schema.HNSW's expr, its
    text) (SQL's), () the field's vectors; `implies(conditions)`: whether the
    WHERE implies a partial index's predicate (SQL checks it; None: never)."""
    masks: dict = {}
    top = _vector_leg(snap, table, field, metric, q, k, where, widths, exact, masks,
                      expr=expr, implies=implies)
    return Query(top, snap, table, masks)


def plan_text(snap, table, field: str, text: str, bound, match: str, corpus, k: int,
              where, pruned: bool = True) -> Query:
    """TextTopK(Filter?(Scan)): `bound` is the text query's tree, analyzed, with
    its words side by side all required or any (`match`), scored with `corpus`'s
    statistics (None: the rows the snapshot sees)."""
    masks: dict = {}
    top = _text_leg(snap, table, field, text, bound, match, corpus, k, where, pruned, masks)
    return Query(top, snap, table, masks)


def plan_hybrid(snap, table, text_leg: tuple, vector_leg: tuple, limit: int,
                candidates: int, rrf_k: int, weights: tuple, where) -> Query:
    """Limit(Fusion(TextTopK(...), VectorTopK(...))): each leg finds
    `candidates` rows among those `where` allows; text_leg is (field, text, bound, match,
    corpus) as plan_text takes them,
    vector_leg (field, metric, q, widths, exact)."""
    masks: dict = {}
    where_mask = _where_mask(snap, table, where)
    text = _text_leg(snap, table, *text_leg, candidates, where, True, masks, where_mask)
    field, metric, q, widths, exact = vector_leg
    vector = _vector_leg(snap, table, field, metric, q, candidates, where, widths, exact, masks,
                         where_mask)
    fused = Fusion(rrf_k, weights, (text, vector))
    return Query(Limit(limit, fused), snap, table, masks)


def plan_rerank(snap, table, text_leg: tuple, field: str, metric: str, q: np.ndarray,
                limit: int, candidates: int, where) -> Query:
    """Limit(Rerank(TextTopK(Filter?(Scan)))): the text leg's `candidates`
    best rows, ordered by their exact distance to `q` (no graph needed)."""
    masks: dict = {}
    text = _text_leg(snap, table, *text_leg, candidates, where, True, masks)
    top = Rerank(field, metric, text, query=q)
    return Query(Limit(limit, top), snap, table, masks)


def _where_mask(snap, table, where) -> np.ndarray | None:
    return None if where is None else where.mask(table, snap.n(table))


def _allowed(snap, table, nonnull: str | None, where, masks: dict,
             where_mask: np.ndarray | None = None) -> tuple[PlanNode, int]:
    """Filter?(Scan) over the rows visible (with `nonnull` not null), their mask
    recorded in `masks` for the executor, and how many it allows."""
    mask, allowed = snap.visible(table, nonnull)
    n = snap.n(table)
    node = Scan(table.name, snap.version, n, allowed, nonnull)
    masks[id(node)] = (mask, allowed)
    if where is not None:
        mask = mask & (where.mask(table, n) if where_mask is None else where_mask)
        allowed = int(np.count_nonzero(mask))
        node = Filter(where.expr, node, allowed, bound=where)
        masks[id(node)] = (mask, allowed)
    return node, allowed


def _vector_leg(snap, table, field, metric, q, k, where, widths, exact, masks,
                where_mask=None, expr: tuple = (), implies=None) -> VectorTopK:
    node, allowed = _allowed(snap, table, field, where, masks, where_mask)
    name, index, unfit = _fitting_index(table, field, metric, expr[0] if expr else None,
                                        implies)
    # the width asked of the kind of the index it ranks through (a graph's ef, IVF probes)
    ef = None if index is None else widths.get(index.knob)
    strategy, ef, reason = choose_vector_strategy(None if unfit else index, k, allowed,
                                                  snap.n(table), ef, exact, metric)
    if unfit and not exact:
        reason = unfit
    return VectorTopK(field, metric, k, strategy, allowed, node, ef, reason,
                      expr=expr[1] if expr else "", index=name, query=q)


def _fitting_index(table, field: str, metric: str, expr, implies) -> tuple:
    """(name, index, why it does not fit: "" where it does) of the field's vector
    index a search by `metric` over `expr` (None: the field's vectors) ranks
    through: the first of its indexes (its own first, Table.vector_choices) built
    for that metric, over that expression, and not partial unless `implies` its
    predicate; none fitting, the first over that expression, else its own
    (planned exact, saying why: an exact scan of an expression reads the
    expression's values that index keeps)."""
    own = None
    f = table.schema.fields[field]
    for name, index in table.vector_choices(field):
        # the schema's spec, not the index's copy of CREATE INDEX's: a predicate names
        # a renamed column by its new name (Table.rename_column)
        spec = f.vector_spec(name or None)
        on = getattr(spec, "expr", None)
        # an index over an expression of the field answers only that expression, and
        # a partial one only a search whose WHERE keeps none of the rows it lacks
        unfit = "the index is on an expression" if bool(on) != bool(expr) \
            else "the index is on another expression" if on != expr \
            else "the WHERE does not imply the partial index's predicate" \
            if getattr(spec, "where", None) and not (implies and implies(spec.where)) else ""
        if not unfit and index.metric == metric:
            return name, index, ""
        if own is None or on == expr != own[3]:
            own = (name, index, unfit, on)
    return own[:3] if own else ("", None, "")


def _text_leg(snap, table, field, text, bound, match, corpus, k, where, pruned, masks,
              where_mask=None) -> TextTopK:
    node, allowed = _allowed(snap, table, None, where, masks, where_mask)
    return TextTopK(field, text, k, allowed, node, pruned, match, bound=bound, corpus=corpus)


def plan_find(snap, table, where, limit: int | None, fields: tuple, offset: int = 0,
              keys: list | None = None) -> Query:
    """Project(Limit(Filter?(Scan))): rows in insertion order, no scoring; with
    `keys` (ids), Project(Limit(Lookup(Filter?(Scan)))): those documents' rows in
    their order."""
    node, masks = plan_scan(snap, table, where)
    if keys is not None:
        node = Lookup(len(keys), node, keys=keys)
    return Query(Project(fields, Limit(limit, node, offset)), snap, table, masks)


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
