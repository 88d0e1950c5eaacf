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
    equal to NaN and greater than every number. One vectorised pass more, and
    only where a float side holds a NaN."""
    with np.errstate(invalid="ignore"):
        out = _IEEE[op](x, y)
    xn, yn = _nan(x), _nan(y)
    if xn is None and yn is None:
        return out
    xn = np.False_ if xn is None else xn
    yn = np.False_ if yn is None else yn
    if op == "=":
        return out | (xn & yn)
    if op == "<>":
        return out & ~(xn & yn)
    if op == "<":
        return out | (~xn & yn)
    if op == "<=":
        return out | yn
    if op == ">":
        return out | (xn & ~yn)
    return out | xn                                         # >=


def _nan(x):
    """Where `x` is NaN, or None where it is not a float or holds no NaN."""
    if isinstance(x, float):
        return np.True_ if x != x else None
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" or isinstance(x, np.floating):
        nan = np.isnan(x)
        return nan if nan.any() else None
    return None
