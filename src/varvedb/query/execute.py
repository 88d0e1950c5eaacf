"""The executor: runs a planned `Query` and returns columns as numpy arrays.

Each node yields either a row mask (Scan, Filter: a bool array over the
snapshot's rows and its count) or ranked rows (VectorTopK, Limit: row
numbers, and scores where there are any). The result is `Result`: rows,
scores, the count, the fields to return, and the plan as it actually ran —
a vector top-k that fell back (widened walk, then exact scan) says so.
`Hit` objects are built from it only at the API edge (collection.py).
Before each node it checks for cancellation (varvedb.cancel).
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..cancel import check as check_canceled
from ..errors import SqlError
from ..index import flat
from .aggregate import aggregate, groups as _groups, sort_order
from .expr import (Col, Rel, Val, col_value, const_val, evaluate, no_nulls,
                   set_function_nulls, set_function_rows, truth)
from .plan import (Aggregate, Count, Derived, Distinct, Filter, FunctionScan, Fusion, Join,
                   Limit, Lookup, Output, PlanNode, Project, ProjectSet, Rerank, Scan, SetOp,
                   Sort,
                   Strategy, TextTopK, VectorTopK, Where, Window)
from .planner import WIDEN, Query
from .arrays import MAX_BUILT_ROWS
from .relations import concat, join_pairs, take_or_null, union
from .window import window_values


class Result:
    """What a read returns before any Python objects are built."""
    __slots__ = ("rows", "scores", "count", "fields", "plan", "columns")

    def __init__(self, rows, scores, count, fields, plan, columns=None):
        self.rows: np.ndarray | None = rows      # int64 row numbers, in answer order
        self.scores: np.ndarray | None = scores  # float64, one per row (vector top-k)
        self.count: int = count
        self.fields: tuple = fields              # fields to return besides id (and score)
        self.plan: PlanNode = plan               # as it ran
        self.columns: list | None = columns      # an Output node's columns (expr.Val each)


class Out:
    """What a node yields: a row mask over the table (Scan, Filter) or ranked
    rows (and scores), with columns computed so far (an Output's, a
    subquery's, an aggregate's; aligned with rows), and the node as it ran."""
    __slots__ = ("mask", "rows", "scores", "count", "node", "cols")

    def __init__(self, mask, rows, scores, count, node, cols=None):
        self.mask = mask
        self.rows = rows
        self.scores = scores
        self.count = count
        self.node = node
        self.cols = cols


def execute(query: Query) -> Result:
    root = query.plan
    fields = root.fields if isinstance(root, Project) else ()
    out = _run(root, query)
    columns = None
    if out.cols is not None and "$out" in out.cols:
        columns = [out.cols[k] for k in out.cols["$out"]]
    return Result(out.rows, out.scores, out.count, fields, out.node, columns)


def _run(node: PlanNode, query: Query) -> Out:
    check_canceled()       # between nodes: a read its caller gave up on stops here
    analyze = query.analyze
    if analyze is None:
        return _RUNNERS[type(node)](node, query)
    t0 = time.perf_counter()
    out = _RUNNERS[type(node)](node, query)
    analyze[id(out.node)] = (out.count, time.perf_counter() - t0)
    return out


def _scan(node: Scan, query: Query) -> Out:
    if query.types_only:
        return _none(node, query)
    got = query.masks.get(id(node))
    mask, count = got if got is not None else query.snapshot.visible(query.table, node.nonnull)
    return Out(mask, None, None, count, node)


def _none(node: PlanNode, query: Query) -> Out:
    """A scan's or filter's Out of no rows (a plan run for its types alone)."""
    return Out(np.zeros(query.snapshot.n(query.table), bool), None, None, 0, node)


def _filter(node: Filter, query: Query) -> Out:
    if query.types_only:
        return _none(node, query)
    got = query.masks.get(id(node))
    if got is not None:
        return Out(got[0], None, None, got[1], node)
    inp = _run(node.input, query)
    table = query.table
    key = node.bound.id_key()
    if key is not None:     # `id = value`: the document's row, by the table's id map
        mask = np.zeros(len(inp.mask), bool)
        row = table.live.get(key, -1)
        if 0 <= row < len(mask) and inp.mask[row]:
            rows = np.array([row], np.int64)      # the live row, visible: the common case
        else:
            rows = table.rows_of_ids([key], inp.mask)
            rows = rows[rows >= 0]
        mask[rows] = True
        return Out(mask, rows, None, len(rows), _with_input(node, inp.node))
    mask = inp.mask & node.bound.mask(table, query.snapshot.n(table))
    return Out(mask, None, None, int(np.count_nonzero(mask)), _with_input(node, inp.node))


def _limit(node: Limit, query: Query) -> Out:
    inp = _run(node.input, query)
    rows, scores, cols = inp.rows, inp.scores, inp.cols
    if rows is None and cols is None:
        rows = np.flatnonzero(inp.mask)
    end = None if node.limit is None else node.offset + node.limit
    part = slice(node.offset or None, end)
    if rows is not None:
        rows = rows[part]
    if scores is not None:
        scores = scores[part]
    count = len(rows) if rows is not None else len(range(inp.count)[part])
    if cols is not None:
        cols = _take_cols(cols, np.arange(inp.count)[part])
    return Out(None, rows, scores, count, _with_input(node, inp.node), cols)


def _lookup(node: Lookup, query: Query) -> Out:
    inp = _run(node.input, query)
    rows = query.table.rows_of_ids(node.keys, inp.mask)
    rows = rows[rows >= 0]
    if len(rows) > 1:           # an id named twice: its row once, where first named
        _, first = np.unique(rows, return_index=True)
        if len(first) < len(rows):
            rows = rows[np.sort(first)]
    return Out(None, rows, None, len(rows), _with_input(node, inp.node))


def _project(node: Project, query: Query) -> Out:
    inp = _run(node.input, query)
    rows = inp.rows if inp.rows is not None else np.flatnonzero(inp.mask)
    return Out(None, rows, inp.scores, inp.count, _with_input(node, inp.node))


def _count(node: Count, query: Query) -> Out:
    inp = _run(node.input, query)
    return Out(None, None, None, inp.count, _with_input(node, inp.node))


def _vector_topk(node: VectorTopK, query: Query) -> Out:
    given = query.given
    if given is not None and id(node) in given:     # a kept plan's search, already run
        rows, dists = given[id(node)]
        return Out(None, rows, dists, len(rows), node)
    inp = _run(node.input, query)
    rows, dists, ran = vector_topk(node, query.table, query.snapshot.n(query.table),
                                   inp.mask, inp.count, node.query)
    if ran is node and inp.node is not node.input:
        ran = replace(node, input=inp.node)
    elif ran is not node:
        ran = replace(ran, input=inp.node)
    return Out(None, rows, dists, len(rows), ran)


def vector_topk(node: VectorTopK, table, n: int, mask, allowed: int, q
                ) -> tuple[np.ndarray, np.ndarray, VectorTopK]:
    """The node's top-k of query vector `q` among the `allowed` rows of `mask`
    (over [0, n)): (rows, float64 scores, the node as it ran: itself, unless a
    walk short of k was widened or answered exactly). What the executor runs for
    a VectorTopK, and what a prepared search (query/prepared.py) calls directly."""
    index = table.vector_index_of(node.field, node.index)
    column = table.index_column(node.field, n, index) if node.expr else \
        table.columns[node.field]
    allow = None if allowed == n else mask     # every row: the kernels skip the mask
    k = want = min(node.k, allowed)
    metric = node.metric
    strategy, ef = node.strategy, node.ef
    if strategy is Strategy.EXACT or k <= 0:    # (the scan refuses a NaN query, k 0 too)
        rows, dists = _exact(column, metric, q, k, allow, n)
        return rows, dists, node
    column = table.index_column(node.field, n, index)  # (a partial index's rows: its own)
    lists = strategy is Strategy.LISTS
    stats = {} if lists else None
    unlinked = n - index.linked      # the maintainer's work left: the search scans it
    rows, dists = index.search(column, metric, q, k, allow, ef, n, stats)
    unlinked = unlinked if unlinked > 0 else None
    if len(rows) >= want and not lists and unlinked is None:
        return rows, dists, node
    # (every list already probed: nothing wider to try)
    if len(rows) < want and not (lists and ef >= index.spec.lists):
        ef = min(ef * WIDEN, index.spec.lists) if lists else ef * WIDEN
        strategy = Strategy.LISTS_WIDENED if lists else Strategy.WIDENED
        rows, dists = index.search(column, metric, q, k, allow, ef, n, stats)
    if len(rows) < want:
        strategy = Strategy.LISTS_THEN_EXACT if lists else Strategy.GRAPH_THEN_EXACT
        rows, dists = _exact(column, metric, q, k, allow, n)
    scanned = stats.get("scanned") if lists else None
    if strategy is node.strategy and scanned is None and unlinked is None:
        return rows, dists, node
    return rows, dists, replace(node, strategy=strategy, ef=ef, scanned=scanned,
                                unlinked=unlinked,
                                linked=None if unlinked is None else n - unlinked)


def topk_searcher(node: VectorTopK, table, n: int, mask, allowed: int):
    """`vector_topk` of a planned node bound to everything but the query vector
    (query/prepared.py keeps it): a function of q giving (rows, scores), or None
    when that pass fell short (a walk short of k, an index that moved on):
    vector_topk answers then. None for the strategies that need more than one
    pass (IVF lists, their widening)."""
    allow = None if allowed == n else mask
    k = min(node.k, allowed)
    index = table.vector_index_of(node.field, node.index)
    column = table.index_column(node.field, n, index) if node.expr else \
        table.columns[node.field]
    if node.strategy is Strategy.EXACT or k <= 0:   # (the scan refuses a NaN query, k 0 too)
        arena, norms = column.frozen(n)
        return flat.searcher(node.metric, arena, norms, k, allow)
    if node.strategy is Strategy.GRAPH:
        return index.searcher(table.index_column(node.field, n, index), k, allow, node.ef, n)
    return None


# ---- the nodes SQL adds: each evaluates query/expr.py expressions over a Rel ----

def _rel(inp: Out, query: Query) -> Rel:
    """The rows an Out holds, as a Rel expressions can be evaluated over."""
    rows = inp.rows
    if rows is None and inp.mask is not None:
        rows = np.flatnonzero(inp.mask)
    cols = dict(inp.cols) if inp.cols is not None else {}
    if inp.scores is not None:
        cols["$score"] = Val("float", inp.scores, np.zeros(len(inp.scores), bool))
    # rows computed from nothing but columns (an aggregate's, a subquery's) have no table
    return Rel(query.table if rows is not None else None, rows, cols, inp.count)


def _derived(node: Derived, query: Query) -> Out:
    node.inner.types_only = query.types_only    # (planned for this run alone)
    res = execute(node.inner)
    cols = {f"$c{i}": v for i, v in enumerate(res.columns)}
    for name, v in zip(node.columns, res.columns):
        cols.setdefault(name, v)
    return Out(None, None, None, res.count, replace(node, input=res.plan), cols)


def _leg_columns(out: Out) -> list:
    """A join's or set operation's leg's columns, in order: a subquery's output
    columns, or a join's (qualified) columns."""
    node = out.node
    if isinstance(node, Derived):
        return [out.cols[f"$c{i}"] for i in range(len(node.columns))]
    return [out.cols.get(k) for k in node.columns]     # (None: not read above it)


def _join(node: Join, query: Query) -> Out:
    outs = [_run(leg, query) for leg in node.legs]
    left, right = (_leg_columns(o) for o in outs)
    nl, nr = outs[0].count, outs[1].count
    lcols = {k: v for k, v in zip(node.columns[:len(left)], left) if v is not None}
    rcols = {k: v for k, v in zip(node.columns[len(left):], right) if v is not None}
    env = query.env
    lkeys = [evaluate(a, Rel(None, None, lcols, nl), env) for a, _ in node.key_exprs]
    rkeys = [evaluate(b, Rel(None, None, rcols, nr), env) for _, b in node.key_exprs]
    residual = None
    if node.residual_expr is not None:
        def residual(li, ri):
            cols = {k: v.take(li) for k, v in lcols.items()}
            cols.update((k, v.take(ri)) for k, v in rcols.items())
            return truth(evaluate(node.residual_expr, Rel(None, None, cols, len(li)), env))
    li, ri = join_pairs(node.kind, nl, nr, lkeys, rkeys, residual)
    needed = node.needed
    cols = {k: take_or_null(v, li) for k, v in lcols.items() if needed is None or k in needed}
    cols.update((k, take_or_null(v, ri)) for k, v in rcols.items()
                if needed is None or k in needed)
    bare: dict = {}
    for k in node.columns:                  # each unambiguous column by its bare name too
        name = k.split(".", 1)[1]
        bare[name] = None if name in bare else cols.get(k)
    cols.update((k, v) for k, v in bare.items() if v is not None and k not in cols)
    return Out(None, None, None, len(li), replace(node, legs=tuple(o.node for o in outs)), cols)


def _set_op(node: SetOp, query: Query) -> Out:
    outs = [_run(leg, query) for leg in node.legs]
    cols, n = union([_leg_columns(o) for o in outs], node.all)
    named = {f"$c{i}": v for i, v in enumerate(cols)}
    for name, v in zip(node.columns, cols):
        named.setdefault(name, v)
    return Out(None, None, None, n, replace(node, legs=tuple(o.node for o in outs)), named)


def _window(node: Window, query: Query) -> Out:
    inp = _run(node.input, query)
    rel = _rel(inp, query)
    cols = dict(rel.cols)
    for i, w in enumerate(node.exprs):
        cols[f"$w{i}"] = window_values(w, rel, query.env)
    cols.pop("$score", None)
    return Out(None, rel.rows, inp.scores, rel.n, _with_input(node, inp.node), cols)


def _project_set(node: ProjectSet, query: Query) -> Out:
    inp = _run(node.input, query)
    rel = _rel(inp, query)
    made = [set_function_rows(f, rel, query.env) for f in node.exprs]
    lens = [np.fromiter(map(len, m), np.int64, rel.n) for m in made]
    counts = np.maximum.reduce(lens) if made else np.ones(rel.n, np.int64)
    total = int(counts.sum())       # (each series is bounded; their sum must be too)
    if total > MAX_BUILT_ROWS:
        raise SqlError("54000", f"a select list's set-returning calls of {total:,} rows "
                                f"are more than varvedb builds ({MAX_BUILT_ROWS:,})")
    idx = np.repeat(np.arange(rel.n, dtype=np.int64), counts)
    out = rel.take(idx)
    cols = dict(out.cols)
    at = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    for i, (m, n) in enumerate(zip(made, lens)):
        got = _set_values(m, n[idx], counts, at)
        if got.kind == "null":      # no value says its type (a Describe's: no row)
            got = set_function_nulls(node.exprs[i], rel, query.env, total)
        cols[f"$s{i}"] = got
    scores = cols.pop("$score", None)
    return Out(None, out.rows, None if scores is None else scores.data, out.n,
               _with_input(node, inp.node), cols)


def _set_values(made: list, lens: np.ndarray, counts: np.ndarray, at: np.ndarray) -> Val:
    """A set-returning call's column over ProjectSet's rows: row r's values, NULL
    past their end (`lens`: its values' count at each output row, `at`: the output
    row's place among its input row's). generate_series' ranges by numpy (8 bytes
    a row); an array's elements as the Python values they are."""
    if not len(at):
        return Val("null", None, np.ones(0, bool))
    if any(type(r) is range for r in made) and all(type(r) is range or not r for r in made):
        first = np.fromiter((r.start if r else 0 for r in made), np.int64, len(made))
        step = np.fromiter((r.step if r else 0 for r in made), np.int64, len(made))
        first, step = np.repeat(first, counts), np.repeat(step, counts)
        nulls = at >= lens
        data = first + at * step
        data[nulls] = 0
        return Val("int", data, nulls)
    values = [row[j] if j < len(row) else None
              for row, c in zip(made, counts.tolist()) for j in range(c)]
    return concat([const_val(x, 1) for x in values], "ProjectSet")


def _function_scan(node: FunctionScan, query: Query) -> Out:
    if query.types_only:
        return Out(None, None, None, 0, node, _take_cols(node.cols or {}, np.zeros(0, np.int64)))
    return Out(None, None, None, node.rows, node, dict(node.cols or {}))


def _where(node: Where, query: Query) -> Out:
    inp = _run(node.input, query)
    rel = _rel(inp, query)
    keep = truth(evaluate(node.expr, rel, query.env))
    ran = replace(node, matched=int(np.count_nonzero(keep)), input=inp.node)
    if inp.mask is not None:      # stay a mask over the table: a top-k may read it
        mask = np.zeros(len(inp.mask), bool)
        mask[rel.rows[keep]] = True
        return Out(mask, None, None, ran.matched, ran)
    idx = np.flatnonzero(keep)
    sub = rel.take(idx)
    scores = None if inp.scores is None else inp.scores[idx]
    return Out(None, sub.rows, scores, len(idx), ran, _own_cols(sub.cols))


def _output(node: Output, query: Query) -> Out:
    inp = _run(node.input, query)
    keys = node.keys
    cols = _plain_columns(node.exprs, keys, inp, query.table)
    if cols is not None:        # ids, scores and stored columns of ranked rows: no Rel
        return Out(None, inp.rows, inp.scores, inp.count, _with_input(node, inp.node), cols)
    rel = _rel(inp, query)
    if query.types_only:            # (an aggregate's one row over none, ...)
        rel = rel.take(np.zeros(0, np.int64))
    env = query.env
    cols = dict(rel.cols)
    for key, e in zip(keys, node.exprs):
        cols[key] = evaluate(e, rel, env)
    cols["$out"] = keys
    cols.pop("$score", None)
    return Out(None, rel.rows, inp.scores, rel.n, _with_input(node, inp.node), cols)


def _plain_columns(exprs, keys, inp: Out, table) -> dict | None:
    """The output columns when each is the score or a column of the table read at
    ranked rows (a top-k's usual select list), else None (the evaluator's)."""
    rows = inp.rows
    if rows is None or inp.cols is not None or table is None:
        return None
    cols = {}
    for key, e in zip(keys, exprs):
        if type(e) is not Col:
            return None
        name = e.name
        if name == "$score" and inp.scores is not None:
            cols[key] = Val("float", inp.scores, no_nulls(len(rows)))
        elif name == "id" or name in table.schema.fields:
            cols[key] = col_value(e, table, rows)
        else:
            return None
    cols["$out"] = keys
    return cols


def _aggregate(node: Aggregate, query: Query) -> Out:
    inp = _run(node.input, query)
    rel = _rel(inp, query)
    env = query.env
    keys = [evaluate(e, rel, env) for e in node.group_exprs]
    group, n_groups, firsts = _groups(keys, rel.n)
    cols = {f"$g{i}": k.take(firsts) for i, k in enumerate(keys)}
    for i, a in enumerate(node.agg_exprs):
        cols[f"$a{i}"] = aggregate(a, rel, env, group, n_groups)
    if node.having_expr is not None:
        keep = np.flatnonzero(truth(evaluate(node.having_expr, Rel(None, None, cols, n_groups),
                                             env)))
        cols = _take_cols(cols, keep)
        n_groups = len(keep)
    return Out(None, None, None, n_groups, _with_input(node, inp.node), cols)


def _distinct(node: Distinct, query: Query) -> Out:
    inp = _run(node.input, query)
    cols = inp.cols
    keys = [cols[k] for k in cols["$out"]]
    _, _, firsts = _groups(keys, inp.count)
    firsts = np.sort(firsts)
    rows = None if inp.rows is None else inp.rows[firsts]
    scores = None if inp.scores is None else inp.scores[firsts]
    return Out(None, rows, scores, len(firsts), _with_input(node, inp.node),
               _take_cols(cols, firsts))


def _sort(node: Sort, query: Query) -> Out:
    inp = _run(node.input, query)
    rel = _rel(inp, query)
    order = sort_order(node.key_exprs, rel, query.env)
    rows = None if rel.rows is None else rel.rows[order]
    scores = None if inp.scores is None else inp.scores[order]
    cols = None if inp.cols is None else _take_cols(inp.cols, order)
    return Out(None, rows, scores, rel.n, _with_input(node, inp.node), cols)


def _take_cols(cols: dict, idx: np.ndarray) -> dict:
    return {k: (v if k == "$out" else v.take(idx)) for k, v in cols.items()}


def _own_cols(cols: dict) -> dict | None:
    cols = {k: v for k, v in cols.items() if k != "$score"}
    return cols or None


def _exact(column, metric, q, k, allow, n):
    arena, norms = column.frozen(n)
    return flat.search(metric, arena, norms, q, k, allow)


def _text_topk(node: TextTopK, query: Query) -> Out:
    inp = _run(node.input, query)
    table = query.table
    index = table.text_index(node.field, query.snapshot.n(table))
    k = min(node.k, inp.count)
    if k <= 0 or node.bound is None:
        rows, scores = np.empty(0, np.int64), np.empty(0, np.float64)
    else:
        visible, _ = query.snapshot.visible(table)
        rows, scores = index.top_k(node.bound, k, fit_mask(inp.mask, index.n),
                                   fit_mask(visible, index.n), exhaustive=not node.pruned,
                                   corpus=node.corpus)
    return Out(None, rows, scores, len(rows), _with_input(node, inp.node))


def fit_mask(mask: np.ndarray, n: int) -> np.ndarray:
    """A snapshot's mask over an index's n rows: the writer may have appended rows
    the snapshot does not see (not allowed), or rolled back rows it counted."""
    if len(mask) == n:
        return mask
    if len(mask) > n:
        return mask[:n]
    out = np.zeros(n, bool)
    out[:len(mask)] = mask
    return out


def _fusion(node: Fusion, query: Query) -> Out:
    outs = [_run(leg, query) for leg in node.legs]
    found, fused = fuse([o.rows for o in outs], node.weights, node.rrf_k)
    ran = replace(node, legs=tuple(o.node for o in outs))
    return Out(None, found, fused, len(found), ran)


def fuse(legs: list, weights: tuple, rrf_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal-rank fusion of ranked legs (each an array of keys, best first:
    rows here, ids at a sharded collection's coordinator): (keys, fused scores),
    best first, ties by key ascending."""
    keys = np.concatenate(legs)
    # reciprocal rank: weight / (k + rank), rank 1-based within each leg
    parts = [np.full(len(leg), w) / (rrf_k + np.arange(1, len(leg) + 1))
             for leg, w in zip(legs, weights)]
    found, at = np.unique(keys, return_inverse=True)
    fused = np.bincount(at, weights=np.concatenate(parts), minlength=len(found))
    order = np.lexsort((found, -fused))          # best first, ties by key
    return found[order], fused[order]


def text_corpus(table, snap, field: str, bound):
    """The CorpusStats `bound` (a text query's tree, None: no words) is scored
    with on `table`'s `field` as `snap` sees it, as _text_topk scores it."""
    index = table.text_index(field, snap.n(table))
    visible = fit_mask(snap.visible(table)[0], index.n)
    return index.stats(visible) if bound is None else index.corpus(bound, visible)


def _rerank(node: Rerank, query: Query) -> Out:
    inp = _run(node.input, query)
    table = query.table
    n = query.snapshot.n(table)
    column = table.columns[node.field]
    allow = np.zeros(n, bool)
    allow[inp.rows] = True
    allow &= ~column.nulls_head(n)               # a row without a vector has no distance
    rows, dists = _exact(column, node.metric, node.query, len(inp.rows), allow, n)
    return Out(None, rows, dists, len(rows), _with_input(node, inp.node))


def _with_input(node: PlanNode, inp: PlanNode) -> PlanNode:
    return node if inp is node.input else replace(node, input=inp)


_RUNNERS = {Scan: _scan, Filter: _filter, Limit: _limit, Lookup: _lookup, Project: _project,
            Count: _count,
            VectorTopK: _vector_topk, Derived: _derived, Where: _where, Output: _output,
            Aggregate: _aggregate, Distinct: _distinct, Sort: _sort,
            FunctionScan: _function_scan, TextTopK: _text_topk, Fusion: _fusion,
            Rerank: _rerank, Join: _join, SetOp: _set_op, Window: _window,
            ProjectSet: _project_set}
