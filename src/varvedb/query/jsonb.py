"""PostgreSQL's jsonb comparison, for json values held as Python values.

jsonb's `=` compares values, not their text: 1 and 1.0 are equal, an object's
keys are compared whatever their order, a boolean never equals a number (where
Python's `True == 1`). Its ordering (`<`, `>` …) ranks kinds first — object >
array > boolean > number > string > null — then, within a kind: an object or
an array with more members is greater, objects compare their keys in jsonb's
storage order (shorter first, then bytewise) and then their values, arrays
element by element, strings bytewise (the C collation varvedb sorts text in).

`key(v)` is a sort key that orders and equates as jsonb does, so `compare`
is one Python comparison of two keys. Shared by where= (query/filter.py) and
SQL (query/expr.py).
"""
from __future__ import annotations

import operator

from .literals import parse_input

_NULL, _STRING, _NUMBER, _BOOL, _ARRAY, _OBJECT = range(6)

OPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
       "gt": operator.gt, "ge": operator.ge,
       "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}


def key(v) -> tuple:
    """A sort key of a json value (None: json null) that orders as jsonb does."""
    if v is None:
        return (_NULL,)
    if isinstance(v, bool):
        return (_BOOL, v)
    if isinstance(v, (int, float)):
        return (_NUMBER, v)
    if isinstance(v, str):
        return (_STRING, v.encode())
    if isinstance(v, (list, tuple)):
        return (_ARRAY, len(v), tuple(key(x) for x in v))
    if isinstance(v, dict):
        names = sorted(v, key=lambda k: (len(k.encode()), k.encode()))
        return (_OBJECT, len(v), tuple(k.encode() for k in names),
                tuple(key(v[k]) for k in names))
    return (_STRING, str(v).encode())       # (not a json value: compared as its text)


def compare(op: str, a, b) -> bool:
    """`a <op> b` as jsonb compares (op: eq / ne / lt … or = / <> / < …)."""
    return OPS[op](key(a), key(b))


def parse(text: str):
    """A literal's text read as json, as PostgreSQL reads an untyped literal compared
    with jsonb: 22P02 where it is not json."""
    return parse_input("json", text)
