"""Joins and set operations on columnar batches (lists of expr.Val).

A join is row-index pairs: equal keys are matched by a hash join made of
numpy passes (both sides' keys factorized together into dense codes, the
right side grouped by an argsort of its codes, each left row's matches
gathered with repeat/cumsum), never a loop per row. A NULL key matches
nothing (SQL's `=` is never true on NULL). The rest of ON is tested on the
matched pairs by the caller; an outer join then adds each side's unmatched
rows, NULL opposite (index -1). UNION concatenates its legs' columns
(unifying their types as PostgreSQL does for numbers and untyped literals)
and, without ALL, keeps each distinct row once (NULLs equal, as DISTINCT).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import SqlError
from .aggregate import codes
from .expr import Val, coerce
from .sparse_funcs import mixed_widths

# The most rows one step of a statement builds that no table holds — a join's
# pairs, a generate_series — refused (54000) before they are allocated: with
# Python values beside them a row costs ~100 bytes, so ~1-2 GB a statement at the
# limit (a server's client can ask for no more; a table's own rows have no limit)
MAX_BUILT_ROWS = 10_000_000
MAX_PAIRS = MAX_BUILT_ROWS

KINDS = ("inner", "left", "right", "full", "cross")


def unified(vals: list[Val], what: str) -> list[Val]:
    """Columns of one type: untyped literals take the typed one's, int widens to
    float, NULL columns fit anything; else `what` is refused (42804; a join's
    key equality: 42883, as the operator does not exist)."""
    kinds = {v.kind for v in vals} - {"null", "unknown"}
    if kinds == {"int", "float"}:
        kinds = {"float"}
    if len(kinds) > 1:
        a, b = sorted(kinds)
        if what == "JOIN":
            raise SqlError("42883", f"operator does not exist: {a} = {b}")
        raise SqlError("42804", f"{what} types {a} and {b} cannot be matched")
    kind = kinds.pop() if kinds else "text" if any(v.kind == "unknown" for v in vals) \
        else "null"
    if kind == "null":
        return vals
    return [v if v.kind in (kind, "null") else coerce(v, kind) for v in vals]


def concat(vals: list[Val], what: str) -> Val:
    """One column of the rows of each (their types unified)."""
    vals = unified(vals, what)
    n = sum(len(v) for v in vals)
    typed = [v for v in vals if v.kind != "null"]
    if not typed:
        return Val("null", None, np.ones(n, bool))
    kind, like = typed[0].kind, typed[0].data
    if kind == "vector":
        # a vector column's rows share one width here (PostgreSQL's may differ: not
        # supported); an all-NULL leg (`NULL::vector` has no width) takes the others'
        valued = [v for v in typed if not v.nulls.all()] or typed[:1]
        if len({v.data.shape[1:] for v in valued}) > 1:
            raise mixed_widths(what + " ")
        like = valued[0].data
        datas = [v.data if v.kind != "null" and not v.nulls.all() else _filler(like, len(v))
                 for v in vals]
    else:
        datas = [v.data if v.kind != "null" else _filler(like, len(v)) for v in vals]
    if any(d.dtype == object for d in datas):
        datas = [d.astype(object) for d in datas]
    return Val(kind, np.concatenate(datas), np.concatenate([v.nulls for v in vals]))


def _filler(like: np.ndarray, n: int) -> np.ndarray:
    """n rows shaped as `like`'s, to stand under NULLs."""
    if like.dtype == object:
        return np.full((n,) + like.shape[1:], None, dtype=object)
    return np.zeros((n,) + like.shape[1:], like.dtype)


def take_or_null(v: Val, idx: np.ndarray) -> Val:
    """`v` at `idx`, NULL where idx is -1 (an outer join's unmatched row)."""
    missing = idx < 0
    if not missing.any():
        return v.take(idx)
    if v.kind == "null":
        return Val("null", None, np.ones(len(idx), bool))
    if len(v) == 0:
        return Val(v.kind, _filler(v.data, len(idx)), np.ones(len(idx), bool), v.literal)
    safe = np.where(missing, 0, idx)
    return Val(v.kind, v.data[safe], v.nulls[safe] | missing, v.literal)


def key_codes(left: list[Val], right: list[Val]) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense codes of each side's composite key, equal where the keys are equal;
    a row with a NULL key gets a code the other side never has (`width` on the
    left, `width + 1` on the right). Returns (left codes, right codes, width)."""
    nl, nr = len(left[0]), len(right[0])
    combined = np.zeros(nl + nr, np.int64)
    null = np.zeros(nl + nr, bool)
    for i, (a, b) in enumerate(zip(left, right)):
        both = concat([a, b], "JOIN")
        c, width = _int_codes(both) if len(left) == 1 else (None, 0)
        if c is None:
            c, width = codes(both)
        if i:
            combined = combined * width + c
            _, combined = np.unique(combined, return_inverse=True)   # keep codes dense
        else:
            combined = c
        null |= both.nulls
    combined = combined.astype(np.int64).ravel()
    width = int(combined.max()) + 1 if len(combined) else 0
    lc, rc = combined[:nl].copy(), combined[nl:].copy()
    lc[null[:nl]] = width
    rc[null[nl:]] = width + 1
    return lc, rc, width


def _int_codes(v: Val) -> tuple[np.ndarray | None, int]:
    """Integer keys within a span not much wider than their count: the values
    less the least are the codes (no sort). (None, 0) otherwise."""
    if v.kind != "int" or v.data.dtype != np.int64 or not len(v):
        return None, 0
    present = v.data[~v.nulls] if v.nulls.any() else v.data
    if not len(present):
        return None, 0
    lo, hi = int(present.min()), int(present.max())
    if hi - lo > 4 * len(v) + 1024:
        return None, 0
    return np.where(v.nulls, 0, v.data - lo), hi - lo + 1


def equi_pairs(lc: np.ndarray, rc: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(left rows, right rows) of every pair with equal codes: the smaller side is
    grouped (argsorted), the larger one probes it in its own order."""
    if len(lc) < len(rc):
        ri, li = _probe(rc, lc, width)
        return li, ri
    return _probe(lc, rc, width)


def _probe(lc: np.ndarray, rc: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """equi_pairs with the right side grouped; in left order. A NULL's code (width on
    one side, width + 1 on the other) has no rows opposite."""
    order = np.argsort(rc, kind="stable")
    counts = np.bincount(rc, minlength=width + 2)
    counts[width:] = 0                       # NULL keys match nothing (either side's code)
    starts = np.cumsum(counts) - counts
    per_left = counts[lc]
    total = int(per_left.sum())
    _check_size(total)
    li = np.repeat(np.arange(len(lc), dtype=np.int64), per_left)
    # the k-th match of left row i is order[starts[code] + k], k = pair - first pair of i
    shift = starts[lc] - (np.cumsum(per_left) - per_left)
    ri = order[shift[li] + np.arange(total, dtype=np.int64)]
    return li, ri.astype(np.int64)


def cross_pairs(nl: int, nr: int) -> tuple[np.ndarray, np.ndarray]:
    _check_size(nl * nr)
    return (np.repeat(np.arange(nl, dtype=np.int64), nr),
            np.tile(np.arange(nr, dtype=np.int64), nl))


def _check_size(total: int) -> None:
    if total > MAX_PAIRS:
        raise SqlError("54000", f"a join of {total:,} row pairs is more than varvedb "
                                f"builds ({MAX_PAIRS:,})")


def join_pairs(kind: str, nl: int, nr: int, left_keys: list[Val], right_keys: list[Val],
               residual: Callable[[np.ndarray, np.ndarray], np.ndarray] | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """The (left row, right row) pairs of a join, -1 for an outer join's missing
    side: keys matched by hash, then `residual(li, ri)` (a bool mask over the
    pairs: the rest of ON) keeps pairs, then the unmatched rows an outer join keeps."""
    if left_keys:
        lc, rc, width = key_codes(left_keys, right_keys)
        li, ri = equi_pairs(lc, rc, width)
    else:
        li, ri = cross_pairs(nl, nr)
    if residual is not None and len(li):
        keep = residual(li, ri)
        li, ri = li[keep], ri[keep]
    parts_l, parts_r = [li], [ri]
    if kind in ("left", "full"):
        alone = np.ones(nl, bool)
        alone[li] = False
        lone = np.flatnonzero(alone)
        parts_l.append(lone)
        parts_r.append(np.full(len(lone), -1, np.int64))
    if kind in ("right", "full"):
        alone = np.ones(nr, bool)
        alone[ri] = False
        lone = np.flatnonzero(alone)
        parts_l.append(np.full(len(lone), -1, np.int64))
        parts_r.append(lone)
    if len(parts_l) == 1:
        return li, ri
    return np.concatenate(parts_l), np.concatenate(parts_r)


def union(legs: list[list[Val]], all_rows: bool) -> tuple[list[Val], int]:
    """UNION [ALL] of legs of equally many columns: (columns, row count)."""
    width = len(legs[0])
    if any(len(cols) != width for cols in legs):
        raise SqlError("42601", "each UNION query must have the same number of columns")
    cols = [concat([leg[i] for leg in legs], "UNION") for i in range(width)]
    n = sum(len(leg[0]) if leg else 0 for leg in legs)
    if all_rows or not cols:
        return cols, n
    firsts = np.sort(first_of_each(cols, n))
    return [c.take(firsts) for c in cols], len(firsts)


def first_of_each(cols: list[Val], n: int) -> np.ndarray:
    """The first row of each distinct row of `cols` (NULLs equal): each column's
    codes (narrow integers: their offsets, no sort) combined in mixed radix,
    then one sort."""
    combined = np.zeros(n, np.int64)
    span = 1
    for c in cols:
        k, width = _int_codes(c)
        if k is None:
            k, width = codes(c)
        else:
            k[c.nulls] = width          # NULL: a code of its own
            width += 1
        if span * width >= 2 ** 62:     # re-number densely before the radix overflows
            _, combined = np.unique(combined, return_inverse=True)
            combined = combined.astype(np.int64).ravel()
            span = int(combined.max()) + 1 if n else 1
        combined = combined * width + k
        span *= width
    if not n:
        return np.zeros(0, np.int64)
    order = np.argsort(combined)                # (not stable: each run's least row below)
    run = combined[order]
    starts = np.flatnonzero(np.concatenate(([True], run[1:] != run[:-1])))
    return np.minimum.reduceat(order, starts)
