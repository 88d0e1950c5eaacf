"""PostgreSQL's order of float8 values, for comparisons on numpy arrays.

IEEE makes every comparison with NaN false (NaN <> NaN true). PostgreSQL
orders float8 totally instead: NaN equals NaN and sorts above every number,
+Infinity included, so `x > 1` holds for a NaN, `x = 'NaN'` finds one and
`ORDER BY x DESC` puts it first. numpy's sort, unique and searchsorted already
order NaN last and unique collapses NaNs into one (GROUP BY, DISTINCT, min,
max and a sorted scalar index agree with PostgreSQL through them); the
comparison ufuncs do not, and `compare` mends them. SQL's expressions, the
where= filter grammar and a scalar index's unsorted tail all compare with it.
"""
from __future__ import annotations

import numpy as np

_IEEE = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal,
         ">": np.greater, ">=": np.greater_equal}
# the where= grammar's and a scalar index's names of the same comparisons
WORDS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def compare(op: str, x, y) -> np.ndarray:
    """`x op y` element-wise (op one of = <> < <= > >=; arrays or scalars that
    broadcast) in PostgreSQL's order: as IEEE where neither side is NaN; NaN
    equal to NaN and greater than every number. Where no float side holds a NaN
    (found by a min, which NaN propagates through) that is all it costs."""
    with np.errstate(invalid="ignore"):
        out = _IEEE[op](x, y)
    xn, yn = _nan(x, out), _nan(y, out)
    if xn is None and yn is None:
        return out
    if op in ("=", "<>"):           # (NaN against a number: IEEE's answer is PostgreSQL's)
        if xn is None or yn is None:
            return out
        both = xn & yn
        return out | both if op == "=" else out & ~both
    if op in ("<", "<="):           # a NaN on the right is above every number
        if yn is None:
            return out
        return out | yn if op == "<=" or xn is None else out | (yn & ~xn)
    if xn is None:                  # > >=: a NaN on the left is above every number
        return out
    return out | xn if op == ">=" or yn is None else out | (xn & ~yn)


def _nan(x, out):
    """Where `x` (a side of `out`) is NaN, or None where it is no float or holds
    no NaN. (Arrays only: a numpy bool scalar broadcast in `&` is a slow loop.)"""
    if isinstance(x, (float, np.floating)):
        return np.broadcast_to(True, np.shape(out)) if x != x else None
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.size \
            and np.isnan(x.min()):
        return np.isnan(x)
    return None
