"""PostgreSQL's jsonb comparison, for json values held as Python values.

jsonb's `=` compares values, not their text: 1 and 1.0 are equal, an object's
keys are compared whatever their order, a boolean never equals a number (where
Python's `True == 1`). Its ordering (`<`, `>` …) ranks kinds first — object >
array > boolean > number > string > null — then, within a kind: an object or
an array with more members is greater, objects compare pair by pair in jsonb's
storage order of keys (shorter first, then bytewise), a key then its value,
arrays element by element, strings bytewise (the C collation varvedb sorts text in).

`key(v)` is a sort key that orders and equates as jsonb does, so a comparison
is one Python comparison of two keys (OPS[op]). Shared by where=
(query/filter.py) and SQL's operators, ORDER BY and GROUP BY (query/expr.py).
"""
from __future__ import annotations

import operator

from .literals import parse_input

_NULL, _STRING, _NUMBER, _BOOL, _ARRAY, _OBJECT = range(6)

OPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
       "gt": operator.gt, "ge": operator.ge,
       "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}


def key(v, top: bool = False) -> tuple:
    """A sort key of a json value (None: json null) that orders as jsonb does; `top`:
    a whole value, whose empty array sorts below null (jsonb's historical rule)."""
    if top and isinstance(v, (list, tuple)) and not v:
        return (_NULL - 1,)
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
    if isinstance(v, dict):     # pair by pair: a key, then its value
        names = sorted(v, key=lambda k: (len(k.encode()), k.encode()))
        return (_OBJECT, len(v), tuple((k.encode(), key(v[k])) for k in names))
    return (_STRING, str(v).encode())       # (not a json value: compared as its text)


def parse(text: str):
    """A literal's text read as json, as PostgreSQL reads an untyped literal compared
    with jsonb: 22P02 where it is not json."""
    return parse_input("json", text)
