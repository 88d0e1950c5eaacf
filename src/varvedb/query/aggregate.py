"""Grouping, aggregates and sort ranks over expression values (expr.Val).

Every step is a numpy pass: keys are factorized (expr.codes: np.unique's
inverse, vectors' and sparsevecs' btree ranks), a composite key is the
combined codes, and each aggregate is one ufunc.at / bincount over the group
codes. Text and json values are factorized through np.unique on object arrays
(Python comparisons, but no loop of our own).
"""
from __future__ import annotations

import numpy as np

from ..errors import SqlError
from .expr import Agg, Env, Rel, Val, codes, coerce, evaluate, truth

_INT64_MAX = np.iinfo(np.int64).max


_LOGICAL = ("bool_and", "bool_or", "every")


def sort_ranks(v: Val) -> np.ndarray:
    """Ranks that order rows by value (NULLs ranked by the caller); floats with a
    NaN by their codes, NaN above every number as PostgreSQL orders it (a NaN
    rank would stay last when negated for DESC, and be no peer of another)."""
    if v.kind in ("int", "float", "bool", "timestamp"):
        if v.kind == "int":
            return v.data
        data = v.data.astype(np.float64)
        if v.kind != "float" or not np.isnan(data).any():
            return data
    return codes(v)[0]


def sort_order(keys: tuple, rel: Rel, env: Env) -> np.ndarray:
    """The rows' order under ORDER BY keys ((expr, desc, nulls_first or None), ...),
    stable; PostgreSQL's NULLS LAST ascending, FIRST descending unless said."""
    order_keys = []
    for e, desc, nulls_first in reversed(keys):     # lexsort: the last key is primary
        v = evaluate(e, rel, env)
        ranks = sort_ranks(v)
        if desc:
            ranks = -ranks
        if nulls_first is None:
            nulls_first = desc
        order_keys.append(ranks)
        order_keys.append(~v.nulls if nulls_first else v.nulls)
    return np.lexsort(order_keys) if order_keys else np.arange(rel.n)


def groups(keys: list[Val], n: int) -> tuple[np.ndarray, int, np.ndarray]:
    """(group code per row, number of groups, first row of each group) for rows grouped
    by equal keys (NULLs equal to each other, as GROUP BY and DISTINCT treat them).
    No keys: one group of every row (even of none, as an aggregate without GROUP BY)."""
    if not keys:
        return np.zeros(n, np.int64), 1, np.zeros(1 if n else 0, np.int64)
    combined = np.zeros(n, np.int64)
    for k in keys:
        c, width = codes(k)
        combined = combined * width + c
        _, combined = np.unique(combined, return_inverse=True)   # keep codes dense
    uniq, first, inv = np.unique(combined, return_index=True, return_inverse=True)
    return inv.astype(np.int64), len(uniq), first


def aggregate(a: Agg, rel: Rel, env: Env, group: np.ndarray, n_groups: int) -> Val:
    """One aggregate per group, PostgreSQL's types: count → int, sum of ints → an
    exact int (past int64: Python ints, as PostgreSQL's numeric), avg → float,
    min/max keep the kind; NULL inputs are skipped, an empty group (other than
    for count) gives NULL."""
    fn = a.fn
    if a.filter is not None:        # FILTER (WHERE ...): the other rows are not seen
        keep = np.flatnonzero(truth(evaluate(a.filter, rel, env)))
        rel, group = rel.take(keep), group[keep]
    if a.order:             # ORDER BY inside the call: its rows in that order
        order = sort_order(a.order, rel, env)
        rel, group = rel.take(order), group[order]
    if a.arg is None:       # count(*)
        return Val("int", np.bincount(group, minlength=n_groups).astype(np.int64),
                   np.zeros(n_groups, bool))
    if fn == "string_agg":
        return _string_agg(evaluate(a.arg, rel, env), evaluate(a.sep, rel, env), group,
                           n_groups)
    v = evaluate(a.arg, rel, env)
    if fn == "array_agg":
        return _array_agg(v, group, n_groups)
    if v.kind == "unknown":
        v = coerce(v, "text" if fn in ("count", "min", "max", "array_agg") else
                   "bool" if fn in _LOGICAL else "float")
    present = ~v.nulls
    g = group[present]
    if a.distinct:
        c, _ = codes(v.take(np.flatnonzero(present)))
        keep = _first_of_pairs(g, c)
        g = g[keep]
        v = v.take(np.flatnonzero(present)[keep])
    else:
        v = v.take(np.flatnonzero(present))
    counts = np.bincount(g, minlength=n_groups)
    empty = counts == 0
    if fn == "count":
        return Val("int", counts.astype(np.int64), np.zeros(n_groups, bool))
    if fn in ("sum", "avg") and v.kind == "vector":
        if v.data.dtype == np.bool_:
            raise SqlError("42883", f"function {fn}(bit) does not exist")
        return _vector_sums(fn, v.data, g, counts, empty)
    if fn in ("sum", "avg"):
        if v.kind not in ("int", "float"):
            raise SqlError("42883", f"function {fn}({v.kind}) does not exist")
        if v.kind == "int":
            sums = _int_sums(g, v.data, n_groups)
            if fn == "sum":
                return Val("int", sums, empty)
            sums = sums.astype(np.float64)      # one rounding of the exact sum
        else:
            sums = np.bincount(g, weights=v.data.astype(np.float64), minlength=n_groups)
            if fn == "sum":
                return Val("float", sums, empty)
        with np.errstate(invalid="ignore", divide="ignore"):
            return Val("float", sums / np.maximum(counts, 1), empty)
    if fn in _LOGICAL:     # bool_and / every: all true; bool_or: any true
        if v.kind not in ("bool", "null"):
            raise SqlError("42883", f"function {fn}({v.kind}) does not exist")
        hits = np.bincount(g, weights=v.data if v.kind == "bool" else None,
                           minlength=n_groups) if len(g) else np.zeros(n_groups)
        out = hits > 0 if fn == "bool_or" else hits == counts
        return Val("bool", out, empty)
    if fn in ("min", "max"):
        if v.kind in ("vector", "json", "sparsevec", "bool"):     # (bool: bool_and / bool_or)
            raise SqlError("42883", f"function {fn}({v.kind}) does not exist")
        c, _ = codes(v)
        best = np.full(n_groups, -1 if fn == "max" else np.iinfo(np.int64).max, np.int64)
        (np.maximum if fn == "max" else np.minimum).at(best, g, c)
        # back from codes to values: any row holding the winning code
        order = np.argsort(c, kind="stable")
        pos = np.searchsorted(c[order], np.where(empty, 0, best))
        idx = order[np.minimum(pos, max(len(order) - 1, 0))] if len(order) else \
            np.zeros(n_groups, np.int64)
        if not len(order):
            return Val(v.kind, _empty_of(v, n_groups), np.ones(n_groups, bool))
        out = v.take(idx)
        return Val(out.kind, out.data, empty)
    raise SqlError("42883", f"function {fn}() does not exist")


def _vector_sums(fn: str, data: np.ndarray, g: np.ndarray, counts: np.ndarray,
                 empty: np.ndarray) -> Val:
    """pgvector's sum(vector) and avg(vector) per group: element-wise, in the
    input's float type (halfvec stays halfvec), summed in float64 and rounded once
    (pgvector's sum adds in float4; on values a float4 sum holds exactly the two
    agree); NULL for an empty group; 22003 where a result overflows its type."""
    sums = np.zeros((len(counts), data.shape[1]), np.float64)
    np.add.at(sums, g, data)
    if fn == "avg":
        sums /= np.maximum(counts, 1)[:, None]
    with np.errstate(over="ignore"):
        out = sums.astype(data.dtype)
    if not np.isfinite(out).all():
        raise SqlError("22003", "value out of range: overflow")
    return Val("vector", out, empty)


def _string_agg(v: Val, sep: Val, group: np.ndarray, n_groups: int) -> Val:
    """string_agg(text, separator) per group: its rows' texts in row order, each but
    the first after its own row's separator (NULL texts skipped, a NULL separator
    none); NULL for a group without a text."""
    v, sep = (coerce(x, "text") if x.kind == "unknown" else x for x in (v, sep))
    for x in (v, sep):
        if x.kind not in ("text", "null"):
            raise SqlError("42883", f"function string_agg({v.kind}, {sep.kind}) does not exist")
    rows = np.flatnonzero(~v.nulls) if v.kind == "text" else np.zeros(0, np.int64)
    rows = rows[np.argsort(group[rows], kind="stable")]
    seps = sep.python() if sep.kind == "text" else [None] * len(group)
    texts = v.data if v.kind == "text" else None
    out = np.full(n_groups, None, dtype=object)
    starts = np.searchsorted(group[rows], np.arange(n_groups + 1))
    for g in np.flatnonzero(np.diff(starts)).tolist():     # a Python join per group
        idx = rows[starts[g]:starts[g + 1]].tolist()
        out[g] = texts[idx[0]] + "".join((seps[i] or "") + texts[i] for i in idx[1:])
    return Val("text", out, np.array([x is None for x in out], bool))


def _array_agg(v: Val, group: np.ndarray, n_groups: int) -> Val:
    """array_agg(x) per group: its rows' values in row order, NULLs kept (PostgreSQL's);
    NULL for a group without rows. An array is a list a row (query/arrays.py); its
    element type is its argument's kind where an array column may hold it
    (schema.Field.array_of), so that groups without rows give its type too (the
    wire's Describe announces int8[] for array_agg of ints that found no row)."""
    if v.kind == "unknown":
        v = coerce(v, "text")
    values = v.python()
    out = np.empty(n_groups, dtype=object)
    for g in range(n_groups):
        out[g] = []
    for g, x in zip(group.tolist(), values):    # a Python step a row: catalog rows
        out[g].append(x)
    nulls = np.array([not x for x in out], bool)
    out[nulls] = None
    return Val("array", out, nulls, v.kind if v.kind in _ELEMENT_KINDS else None)


_ELEMENT_KINDS = ("int", "float", "bool", "text")


def _int_sums(g: np.ndarray, data: np.ndarray, n_groups: int) -> np.ndarray:
    """Exact per-group sums of int64 values: int64 where every group fits, else
    Python ints (`_exact`)."""
    if data.dtype == object:        # sums of sums past int64: Python ints already
        total = np.zeros(n_groups, object)
        np.add.at(total, g, data)
        return total
    out = np.zeros(n_groups, np.int64)
    if not len(data) or len(data) * max(-int(data.min()), int(data.max())) <= _INT64_MAX:
        np.add.at(out, g, data)     # no partial sum can leave int64: one plain pass
        return out
    # the values' high and low 32 bits summed apart: neither wraps below 2**31 rows
    high, low = out, np.zeros(n_groups, np.int64)
    np.add.at(high, g, data >> 32)
    np.add.at(low, g, data & 0xFFFFFFFF)
    return _exact(high + (low >> 32), low & 0xFFFFFFFF)


def _exact(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """high * 2**32 + low as int64 where every group fits, else as Python ints (the
    groups past int64 only): PostgreSQL's sum(bigint) is numeric, never wrapped."""
    fits = (high >= -(1 << 31)) & (high < (1 << 31))
    out = (np.where(fits, high, 0) << 32) + low
    if fits.all():
        return out
    out = out.astype(object)
    big = np.flatnonzero(~fits)
    out[big] = [h * (1 << 32) + lo for h, lo in zip(high[big].tolist(), low[big].tolist())]
    return out


def _first_of_pairs(g: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct (group, code) pair."""
    if not len(g):
        return np.zeros(0, np.int64)
    key = g * (int(c.max()) + 1) + c
    _, first = np.unique(key, return_index=True)
    return np.sort(first)


def _empty_of(v: Val, n: int):
    if v.data is not None and v.data.dtype == object:
        return np.full(n, None, dtype=object)
    return np.zeros(n, v.data.dtype if v.data is not None else np.int64)
