"""SQL arrays, as far as the catalog queries psql sends need them:
`ARRAY(SELECT ...)`, `x = ANY(an array value)`, `||`, array_to_string(),
unnest() in FROM, and the text form `{a,b}`. An array is a Python list in an
object column (query/expr.py's kind "array"); the work is a Python step a row,
as arrays here are catalog values, a few a statement (`x = ANY($1)` with a
list parameter takes query/expr.py's vectorised path instead)."""
from __future__ import annotations

import numpy as np


def concat(a: np.ndarray, a_nulls: np.ndarray, b: np.ndarray, b_nulls: np.ndarray):
    """array || array: the elements of both; a NULL side adds nothing, as in
    PostgreSQL (NULL only where both are)."""
    out = np.empty(len(a), dtype=object)
    for i, (x, y, xn, yn) in enumerate(zip(a, b, a_nulls.tolist(), b_nulls.tolist())):
        out[i] = None if xn and yn else (y if xn else x if yn else list(x) + list(y))
    return out, a_nulls & b_nulls


def to_string(arrays, nulls, seps, null_texts=None) -> list:
    """array_to_string(array, separator [, null text]): the elements' text joined
    (NULL elements left out, or written as the null text)."""
    out = []
    for i, (arr, null, sep) in enumerate(zip(arrays, nulls.tolist(), seps)):
        if null or sep is None:
            out.append(None)
            continue
        nt = None if null_texts is None else null_texts[i]
        out.append(sep.join(_element_text(x) if x is not None else nt
                            for x in arr if x is not None or nt is not None))
    return out


def contains(values: list, arrays, array_nulls) -> tuple[np.ndarray, np.ndarray]:
    """x = ANY(array) a row: (true, unknown) masks — unknown where the array is
    NULL, x is NULL and the array not empty, or x is in no element but a NULL one."""
    n = len(values)
    hit, unknown = np.zeros(n, bool), np.zeros(n, bool)
    for i, (x, arr, null) in enumerate(zip(values, arrays, array_nulls.tolist())):
        if null or x is None:
            unknown[i] = null or len(arr) > 0
            continue
        hit[i] = x in arr
        unknown[i] = not hit[i] and None in arr
    return hit, unknown


def element_lists(arrays, nulls) -> list:
    """Each row's array (None where NULL)."""
    return [None if null else arr for arr, null in zip(arrays, nulls.tolist())]


def element(arrays, nulls, indexes: list) -> list:
    """array[i] a row: the i-th element (from 1), NULL past either end."""
    return [None if null or i is None or not 1 <= i <= len(arr) else arr[i - 1]
            for arr, null, i in zip(arrays, nulls.tolist(), indexes)]


def text(arr: list) -> str:
    """An array's text form: `{a,b}`, an element quoted where it must be."""
    return "{" + ",".join("NULL" if x is None else _quoted(_element_text(x)) for x in arr) + "}"


def _element_text(x) -> str:
    if isinstance(x, bool):
        return "t" if x else "f"
    return str(x)


def _quoted(s: str) -> str:
    if s == "" or s.upper() == "NULL" or any(c in s for c in '{},"\\ \t\n'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s
