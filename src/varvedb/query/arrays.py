"""SQL arrays, as far as the catalog queries psql and SQLAlchemy's reflection send
need them: `ARRAY(SELECT ...)`, `x = ANY(an array value)`, `||`, array_to_string(),
unnest() in FROM, the set-returning functions of a select list (unnest,
generate_subscripts, generate_series: `set_rows`), and the text form `{a,b}`. An array is a Python list in an
object column (query/expr.py's kind "array"); the work is a Python step a row,
as arrays here are catalog values, a few a statement (`x = ANY($1)` with a
list parameter takes query/expr.py's vectorised path instead)."""
from __future__ import annotations

import numpy as np

from ..bytea import bytea_text
from ..errors import NotSupportedError, SqlError
from ..sparse import SparseVector


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
        x = _element_key(x)         # (a vector's numbers: no numpy truth value)
        hit[i] = any(y is not None and _element_key(y) == x for y in arr)
        unknown[i] = not hit[i] and None in arr
    return hit, unknown


def key(arr: list) -> tuple:
    """An array's key in PostgreSQL's order of arrays: element by element, a NULL
    element above every value (a NaN above every number, below NULL), then the
    shorter first; equal keys, equal arrays. A vector element by its numbers
    (pgvector's order), a sparsevec by its text (equality only)."""
    return tuple(_NULL_KEY if x is None else _element_key(x) for x in arr)


_NULL_KEY = (2,)


def _element_key(x) -> tuple:
    if isinstance(x, float) and x != x:
        return (1,)
    if isinstance(x, np.ndarray):
        return (0, tuple(x.tolist()))
    if isinstance(x, SparseVector):
        return (0, str(x))
    return (0, x)


def element_spec(arrays) -> str:
    """The element type (schema.Field.array_of's words) an array value's elements
    have, for an untyped literal beside it: the first element's (text: none)."""
    for arr in arrays:
        for x in arr if arr is not None else ():
            if x is None:
                continue
            if isinstance(x, np.ndarray):
                return "halfvec" if x.dtype == np.float16 else "vector"
            if isinstance(x, SparseVector):
                return "sparsevec"
            if isinstance(x, bytes):
                raise NotSupportedError("an untyped literal beside an array of bytea is not "
                                        "supported")
            return {bool: "bool", int: "int", float: "float"}.get(type(x), "text")
    return "text"


class SpaceVector(list):
    """An int2vector (pg_index.indkey, indoption): a catalog array PostgreSQL writes
    as its elements separated by spaces, `1 2`, and sends as its own type; its
    subscripts start at 0, as PostgreSQL's do (`indkey[0]`, generate_subscripts)."""
    TYPE = "int2vector"

    def text(self) -> str:
        return " ".join(str(x) for x in self)


class OidVector(SpaceVector):
    """An oidvector (pg_index.indclass, indcollation)."""
    TYPE = "oidvector"


# the catalog's array types by name (an array Val's `literal`: its type on zero rows too)
SPACE_TYPES = {c.TYPE: c for c in (SpaceVector, OidVector)}


# the set-returning functions a select list (sql/select.py's ProjectSet) or FROM may call
SET_FUNCTIONS = frozenset({"unnest", "generate_subscripts", "generate_series"})
# The most rows one step of a statement builds that no table holds — a join's
# pairs, a generate_series, a select list's set-returning calls over all its rows
# together — refused (54000) before they are allocated: built by numpy a row costs
# ~70 bytes at its peak (a select list's generate_series over 2 rows of 1 000 000,
# measured), so ~0.7 GB a statement at the limit; unnest's elements are Python
# values, several hundred bytes each, but come of arrays the statement already
# holds (a server's client can ask for no more; a table's own rows have no limit)
MAX_BUILT_ROWS = 10_000_000
MAX_SERIES = MAX_BUILT_ROWS       # generate_series' rows


def set_rows(name: str, args: list, n: int) -> list:
    """Each of n rows' values of a set-returning function of a select list, as
    PostgreSQL's: unnest(array) its elements, generate_subscripts(array, dim) its
    subscripts (from `lower(array)`, dimension 1: these arrays have one), generate_series(a, b
    [, step]) of integers (a range); a NULL argument gives no values. `args`: each
    argument's Python values a row."""
    counts = {"unnest": (1,), "generate_subscripts": (2, 3), "generate_series": (2, 3)}[name]
    if len(args) not in counts:
        raise SqlError("42883", f"function {name}() does not take {len(args)} arguments")
    out = []
    for row in zip(*args) if args else [()] * n:
        if any(x is None for x in row):         # (each is strict)
            out.append([])
        elif name == "unnest":
            out.append(list(_array_arg(name, row[0])))
        elif name == "generate_subscripts":
            arr = _array_arg(name, row[0])
            backwards = len(row) == 3 and row[2]
            first = lower(arr)
            subs = list(range(first, first + len(arr))) if row[1] == 1 else []
            out.append(subs[::-1] if backwards else subs)
        else:
            start, stop = row[0], row[1]
            step = 1 if len(row) == 2 else row[2]
            if not all(isinstance(x, int) and not isinstance(x, bool)
                       for x in (start, stop, step)):
                raise NotSupportedError("generate_series() of integers only")
            if step == 0:
                raise SqlError("22023", "step size cannot equal zero")
            if (stop - start) // step + 1 > MAX_SERIES:     # (both ends included)
                raise SqlError("54000", f"generate_series() of more than {MAX_SERIES} rows")
            out.append(range(start, stop + (1 if step > 0 else -1), step))
    return out


def _array_arg(name: str, x) -> list:
    if not isinstance(x, (list, tuple)):
        raise SqlError("42883", f"function {name}() takes an array")
    return x


def element_lists(arrays, nulls) -> list:
    """Each row's array (None where NULL)."""
    return [None if null else arr for arr, null in zip(arrays, nulls.tolist())]


def lower(arr: list) -> int:
    """An array's first subscript: 0 for an int2vector or oidvector, else 1."""
    return 0 if isinstance(arr, SpaceVector) else 1


def element(arrays, nulls, indexes: list) -> list:
    """array[i] a row: the element at subscript i (from `lower`), NULL past either end."""
    out = []
    for arr, null, i in zip(arrays, nulls.tolist(), indexes):
        k = None if null or i is None else i - lower(arr)
        out.append(None if k is None or not 0 <= k < len(arr) else arr[k])
    return out


def text(arr: list, value_text=str) -> str:
    """An array's text form: `{a,b}`, an element quoted where it must be (a vector's
    text by `value_text`: query/literals.py's)."""
    if isinstance(arr, SpaceVector):
        return arr.text()
    return "{" + ",".join("NULL" if x is None else _quoted(_element_text(x, value_text))
                          for x in arr) + "}"


def _element_text(x, value_text=str) -> str:
    if isinstance(x, bool):
        return "t" if x else "f"
    if isinstance(x, (int, str)):
        return str(x)
    if isinstance(x, bytes):
        return bytea_text(x)
    return value_text(x)        # a float's (1000, -0), a vector's, a sparsevec's


def _quoted(s: str) -> str:
    if s == "" or s.upper() == "NULL" or any(c in s for c in '{},"\\ \t\n'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


# ---- array literals ------------------------------------------------------------------

def split_text(text: str) -> list:
    """A one-dimensional array literal `{a,"b c",NULL}`: its elements' text (None:
    NULL), as PostgreSQL reads it: a backslash, in quotes or not, takes the next
    character as it is; white space around an element goes unless quoted or
    escaped; an element quoted or escaped anywhere is never NULL (`{\\NULL}` is
    the text NULL). 22P02 where it is not one (a multi-dimensional one is 0A000)."""
    s = text.strip()
    if not (s.startswith("{") and s.endswith("}")):
        raise SqlError("22P02", f'malformed array literal: "{text[:60]}"')
    body, items, i = s[1:-1], [], 0
    cur: list = []          # the element's characters so far
    keep = 0                # how many of them stay (up to the last not white space)
    quoted = literal = False    # inside quotes; quoted or escaped somewhere (not NULL)
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            i += 1
            if i == len(body):
                raise SqlError("22P02", f'malformed array literal: "{text[:60]}"')
            cur.append(body[i])
            keep, literal = len(cur), True
        elif quoted:
            if ch == '"':
                quoted = False
            else:
                cur.append(ch)
                keep = len(cur)
        elif ch == '"':
            quoted = literal = True
            if keep == 0:               # (white space before the quote)
                cur = []
        elif ch == ",":
            items.append(_item(cur[:keep], literal, text))
            cur, keep, literal = [], 0, False
        elif ch == "{":
            raise NotSupportedError("multi-dimensional arrays are not supported")
        elif ch.isspace():
            if keep:                    # (leading white space goes, trailing by `keep`)
                cur.append(ch)
        else:
            cur.append(ch)
            keep = len(cur)
        i += 1
    if quoted:
        raise SqlError("22P02", f'malformed array literal: "{text[:60]}"')
    if body.strip():
        items.append(_item(cur[:keep], literal, text))
    return items


def _item(chars: list, literal: bool, text: str):
    if not chars and not literal:       # `{a,,b}`: no element between two commas
        raise SqlError("22P02", f'malformed array literal: "{text[:60]}"')
    raw = "".join(chars)
    return None if not literal and raw.upper() == "NULL" else raw
