"""Columns of SQL arrays: vector(n)[], vector[], halfvec[], sparsevec[], double
precision[], integer[], boolean[], text[]. Such a column is a json field that keeps
its element type (schema.Field.array_of: "int", "float", "bool", "text", "vector(3)",
"halfvec", "sparsevec(5)", ...): each array a JSON list, numbers as numbers, a vector
as its text form. `stored` checks and keeps what SQL writes, `read` gives SQL its
values (a Python step an element: arrays are small, and no index reads them)."""
from __future__ import annotations

import math
import sys

import numpy as np

from ..errors import SqlError
from ..schema import array_element, array_vector
from .arrays import split_text
from .literals import parse_input, value_text


_INT_MIN, _INT_END = -(1 << 63), 1 << 63
_FLOAT_MAX = int(sys.float_info.max)


def stored(spec: str, value) -> list | None:
    """An array (a list, or its text form) as a column of `spec` keeps it: each element
    checked as PostgreSQL's input of the element type checks it (a vector's dimension:
    22000), a vector kept as its text."""
    if value is None:
        return None
    kind, vtype, dim = array_element(spec)
    items = split_text(value) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise SqlError("42804", f"an array is expected, got {type(value).__name__}")
    out = []
    for x in items:
        if x is None:
            out.append(None)
            continue
        if kind == "vector":        # (as the API's write checks it: one check)
            x = array_vector(vtype, dim, x)
            out.append(value_text(x.astype(np.float16) if vtype == "halfvec" else x))
            continue
        if isinstance(x, str):
            x = parse_input(kind, x)
        if kind == "sparsevec":
            if dim is not None and getattr(x, "dim", dim) != dim:
                raise SqlError("22000", f"expected {dim} dimensions, not {x.dim}")
            out.append(value_text(x))
        elif kind == "int" and isinstance(x, (int, float)) and not isinstance(x, bool) \
                and (isinstance(x, int) or math.isfinite(x) and x == int(x)):
            if not _INT_MIN <= x < _INT_END:    # (as '{...}'::bigint[] and $1::bigint)
                raise SqlError("22003", f"{int(x)} is out of range for type bigint")
            out.append(int(x))
        elif kind == "float" and isinstance(x, (int, float)) and not isinstance(x, bool):
            if isinstance(x, int) and not -_FLOAT_MAX <= x <= _FLOAT_MAX:
                raise SqlError("22003", f"{str(x)[:40]} is out of range for type double precision")
            out.append(float(x))
        elif (kind == "bool" and isinstance(x, bool)) or (kind == "text" and isinstance(x, str)):
            out.append(x)
        else:
            raise SqlError("22P02", f"invalid input for an array of {spec}: {x!r:.40}")
    return out


def read(spec: str, value: list | None) -> list | None:
    """A stored array as SQL reads it: its vectors as arrays (float32, halfvec's
    float16), its sparsevecs as SparseVectors."""
    if value is None:
        return None
    kind, vtype, _ = array_element(spec)
    if kind not in ("vector", "sparsevec"):
        return value
    out = [None if x is None else parse_input(kind, x) for x in value]
    if vtype == "halfvec":
        out = [None if x is None else x.astype(np.float16) for x in out]
    return out
