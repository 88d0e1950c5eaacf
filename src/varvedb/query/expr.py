"""Expressions over rows, evaluated a column at a time: what SQL's target
lists, WHERE clauses the filter grammar cannot serve, ORDER BY keys,
GROUP BY keys, HAVING and RETURNING are made of.

An expression is a small tree of frozen nodes (Col, Const, Param, Op, Func,
...), built once per statement text by the SQL compiler and evaluated by
`evaluate(expr, rel, params)` against a `Rel`: row numbers of a table
(values gathered per column), plus columns already computed (a derived
table's, an aggregate's, the vector distance of a top-k). Every node yields
a `Val`: a kind, one numpy array of values and a null mask — never a Python
loop per row except where the values are Python objects anyway (json paths).

SQL's rules are kept where they decide an answer: NULL propagates through
operators and functions; AND/OR/NOT are three-valued; integer division
truncates toward zero and dividing by zero is an error (22012); integer
arithmetic that leaves int64 is an error (22003), never a wrapped number
(checked on the whole column at once); a quoted
literal has no type until it meets one ('[1,2,3]' next to a vector column
is a vector, '2026-01-01' next to a timestamp is a timestamp).
"""
from __future__ import annotations

import datetime as _dt
import functools
import inspect
import json
import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np

from ..errors import NotSupportedError, SqlError
from ..float_order import compare
from ..schema import (OBJECT_KINDS, array_element, brief, from_micros, half_overflow,
                      vector_values)
from ..sparse import SparseBlock, SparseVector
from ..text import tsquery
from ..text.tsvector import tsvectors
from . import (array_columns, arrays, catalog_funcs, jsonb, sparse_funcs, text_funcs,
               tsearch, vector_funcs)
from .filter import kleene, like_regex
from .literals import json_text, parse_input, timestamp_json, value_text

NUMERIC = ("int", "float")

# pgvector's distance operators (its scale: <#> is the negative inner product)
OPERATORS = {
    "<->": vector_funcs.l2_distance,
    "<#>": vector_funcs.negative_inner_product,
    "<=>": vector_funcs.cosine_distance,
    "<+>": vector_funcs.l1_distance,
    "<~>": vector_funcs.hamming_distance,
    "<%>": lambda a, b: vector_funcs.jaccard_distance(_bits(a, "<%>"), _bits(b, "<%>")),
}


def _bits(data: np.ndarray, what: str) -> np.ndarray:
    """A bit string block, for what only bit takes (jaccard): a vector is refused."""
    if data.dtype != np.bool_:
        raise SqlError("42883", f"operator does not exist: vector {what} vector")
    return data
# each operator's metric, as the planner and the indexes name it
OPERATOR_METRICS = {"<->": "l2", "<#>": "dot", "<=>": "cosine", "<+>": "l1", "<~>": "hamming"}


@dataclass(slots=True)
class Val:
    """A column of values: kind (int, float, bool, text, json, timestamp,
    vector, sparsevec (data: a SparseBlock), tsvector (data: text/tsvector.py's
    TsVectors), tsquery (data: TsQuery objects), unknown: an untyped literal,
    null: all NULL), data, null mask."""
    kind: str
    data: Any            # ndarray (object for text/json/unknown; (n, d) for vector)
    nulls: np.ndarray
    # unknown: the literal's text, which zero rows of data do not hold; array: its
    # element type where known (an array column's schema.Field.array_of)
    literal: Any = None

    def __len__(self) -> int:
        return len(self.nulls)

    def take(self, idx: np.ndarray) -> "Val":
        return Val(self.kind, None if self.data is None else self.data[idx], self.nulls[idx],
                   self.literal)

    def python(self) -> list:
        """The values as Python objects (None for NULL), as a row of a result holds them."""
        kind, nulls = self.kind, self.nulls
        if kind == "null":
            return [None] * len(nulls)
        if kind == "vector":
            vs = list(self.data)
        elif kind == "sparsevec":
            return self.data.values(nulls)
        elif kind == "timestamp":
            vs = [from_micros(x) for x in self.data.tolist()]
        elif kind == "tsquery":
            vs = [None if x is None else str(x) for x in self.data.tolist()]
        else:
            vs = self.data.tolist()
        if nulls is not _NO_NULLS.get(len(nulls)) and np.count_nonzero(nulls):
            return [None if nl else v for v, nl in zip(vs, nulls.tolist())]
        return vs


_NO_NULLS: dict = {}     # n -> a read-only all-False mask, shared by columns that have no NULLs


def no_nulls(n: int) -> np.ndarray:
    """A read-only all-False null mask of n rows (shared: a top-k's ids and scores
    have no NULLs, and Val.python skips counting them)."""
    got = _NO_NULLS.get(n)
    if got is None:
        got = np.zeros(n, bool)
        got.flags.writeable = False
        if n <= 4096:
            _NO_NULLS[n] = got
    return got


class Rel:
    """Rows an expression is evaluated over: `rows` of `table` (None: no
    table), and `cols`, named columns already computed (aligned with rows)."""
    __slots__ = ("table", "rows", "cols", "n")

    def __init__(self, table, rows: np.ndarray | None, cols: dict | None = None,
                 n: int | None = None):
        self.table = table
        self.rows = rows
        self.cols = cols if cols is not None else {}
        self.n = len(rows) if rows is not None else (n if n is not None else 0)

    def take(self, idx: np.ndarray) -> "Rel":
        return Rel(self.table, None if self.rows is None else self.rows[idx],
                   {k: v.take(idx) for k, v in self.cols.items()}, len(idx))


# ---- nodes ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Col:
    name: str


@dataclass(frozen=True, slots=True)
class Const:
    value: Any


@dataclass(frozen=True, slots=True)
class Param:
    index: int          # 1-based ($1)


@dataclass(frozen=True, slots=True)
class Op:
    op: str             # + - * / % || = <> < <= > >= and or not neg <-> <#> <=> <+> -> ->>
    args: tuple


@dataclass(frozen=True, slots=True)
class Func:
    name: str
    args: tuple


@dataclass(frozen=True, slots=True)
class Cast:
    kind: str           # a schema kind
    arg: Any
    dim: int | None = None      # vector(n): the dimension the value must have
    vtype: str | None = None    # a vector kind's type: vector, halfvec or bit


@dataclass(frozen=True, slots=True)
class IsNull:
    arg: Any
    negated: bool


@dataclass(frozen=True, slots=True)
class BoolTest:
    """x IS [NOT] TRUE / FALSE / UNKNOWN: never NULL itself."""
    arg: Any
    value: bool | None      # True, False, or None for UNKNOWN
    negated: bool


@dataclass(frozen=True, slots=True)
class InList:
    arg: Any
    values: tuple       # expressions; or one Col naming a column of `rel.cols` holding a set
    negated: bool


@dataclass(frozen=True, slots=True)
class Like:
    """LIKE / ILIKE, or (regex=True) the POSIX regular-expression match ~, ~*, !~, !~*
    (unanchored, as PostgreSQL's; read with Python's re, which agrees on the common
    forms: classes, anchors, groups, alternation, quantifiers)."""
    arg: Any
    pattern: Any
    negated: bool
    icase: bool
    regex: bool = False


@dataclass(frozen=True, slots=True)
class Case:
    whens: tuple        # ((condition, result), ...)
    default: Any


@dataclass(frozen=True, slots=True)
class Agg:
    """An aggregate call; the planner replaces it by a Col of the Aggregate node's output."""
    fn: str             # count sum avg min max string_agg
    arg: Any            # None for count(*)
    distinct: bool = False
    filter: Any = None  # FILTER (WHERE ...): only the rows it is true for
    sep: Any = None     # string_agg's separator
    order: tuple = ()   # ORDER BY inside the call: ((expr, desc, nulls_first or None), ...)


@dataclass(frozen=True, slots=True)
class Window:
    """A ranking window function (row_number, rank, dense_rank) OVER (PARTITION BY
    ... ORDER BY ...); the planner replaces it by a Col of the Window node's output."""
    fn: str
    partition: tuple    # exprs
    order: tuple        # ((expr, desc, nulls_first or None), ...)


@dataclass(frozen=True, slots=True)
class ArrayValues:
    """`x = ANY($1)`: the elements of an array parameter (a list)."""
    arg: Any


@dataclass(frozen=True, slots=True)
class SubqueryValues:
    """`x IN (SELECT ...)`: the subquery's single column, computed before the
    outer query runs and handed in as a parameter-like value."""
    key: int


@dataclass(frozen=True, slots=True)
class Outer:
    """A correlated subquery's reference to the enclosing query's column
    (`a.attnum` inside `(SELECT ... WHERE d.adnum = a.attnum)`): its value in the
    outer row the subquery runs for (Env.outer)."""
    name: str


def walk(expr):
    """Every node of an expression tree."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, (Op, Func)):
            stack.extend(e.args)
        elif isinstance(e, (Cast,)):
            stack.append(e.arg)
        elif isinstance(e, (IsNull, BoolTest)):
            stack.append(e.arg)
        elif isinstance(e, InList):
            stack.append(e.arg)
            stack.extend(e.values)
        elif isinstance(e, Like):
            stack.extend((e.arg, e.pattern))
        elif isinstance(e, Case):
            for c, r in e.whens:
                stack.extend((c, r))
            if e.default is not None:
                stack.append(e.default)
        elif isinstance(e, Agg):
            stack.extend(x for x in (e.arg, e.filter, e.sep) if x is not None)
            stack.extend(o[0] for o in e.order)
        elif isinstance(e, Window):
            stack.extend(e.partition)
            stack.extend(o[0] for o in e.order)


# ---- evaluation ------------------------------------------------------------------

class Env:
    """What evaluation reads besides the rows: parameters, subquery results, and
    the statement's snapshot (`snapshot()`, taken when first asked: BM25's
    statistics are those of the rows it sees), a correlated subquery's outer
    row (name -> a one-row Val), and the catalog ::regclass and pg_get_indexdef
    read (sql/pg_catalog.py's Catalog)."""
    __slots__ = ("params", "subqueries", "snapshot", "outer", "catalog")

    def __init__(self, params=(), subqueries: dict | None = None, snapshot=None,
                 outer: dict | None = None, catalog=None):
        self.params = params
        self.subqueries = subqueries or {}
        self.snapshot = snapshot
        self.outer = outer or {}
        self.catalog = catalog


def evaluate(expr, rel: Rel, env: Env) -> Val:
    return _EVAL[type(expr)](expr, rel, env)


def truth(v: Val) -> np.ndarray:
    """Rows where a boolean Val is true (NULL and false are not)."""
    if v.kind == "null":
        return np.zeros(len(v), bool)
    if v.kind == "unknown":
        v = coerce(v, "bool")
    if v.kind != "bool":
        raise SqlError("42804", f"argument of WHERE must be type boolean, not type {v.kind}")
    out = v.data & ~v.nulls
    if out.shape != v.nulls.shape or out.ndim != 1:
        # one truth a row, or rows past the table's end would be written (a
        # 2-D mask's flat indices): never let an evaluator's slip reach a write
        raise SqlError("XX000", f"a condition gave {out.shape} values for {len(v)} rows")
    return out


def _col(e: Col, rel: Rel, env: Env) -> Val:
    got = rel.cols.get(e.name)
    if got is not None:
        return got
    t = rel.table
    if t is None:
        raise SqlError("42703", f'column "{e.name}" does not exist')
    return col_value(e, t, rel.rows)


def col_value(e: Col, t, rows: np.ndarray) -> Val:
    """A stored column (or the id, unless the table hides it) of table `t` at `rows`."""
    if e.name == "id" and not t.schema.id_hidden:
        kind = t.schema.id_kind
        if kind == "text":
            return Val("text", np.array(t.id_values(rows), dtype=object), np.zeros(len(rows), bool))
        return Val("int", t.ids.data[rows], no_nulls(len(rows)))
    f = t.schema.fields.get(e.name)
    if f is None:
        raise SqlError("42703", f'column "{e.name}" does not exist')
    if f.kind == "sparsevec":
        block = t.columns[e.name].block(rows)
        return Val("sparsevec", block, block.dims == 0)
    vals, nulls = t.columns[e.name].take(rows)
    nulls = np.asarray(nulls, bool)
    if f.array_of is not None:      # a column of SQL arrays (a Python step a row)
        return Val("array", object_array([array_columns.read(f.array_of, x) for x in vals]), nulls,
                   f.array_of)
    if f.kind == "vector" and f.dtype in ("int8", "bit"):
        # SQL's vectors are float32 (int8 values), float16 or bits (bool)
        vals = vector_values(f, vals).astype(np.bool_ if f.dtype == "bit" else np.float32)
    if isinstance(vals, list):
        return Val(f.kind, object_array(vals), nulls)
    return Val(f.kind, vals, nulls)


def object_array(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def const_val(value, n: int) -> Val:
    """A Python value (a literal, a parameter) broadcast to n rows."""
    if value is None:
        return Val("null", None, np.ones(n, bool))
    nulls = np.zeros(n, bool)
    if isinstance(value, (bool, np.bool_)):
        return Val("bool", np.full(n, bool(value)), nulls)
    if isinstance(value, (int, np.integer)):
        if not -(1 << 63) <= int(value) < (1 << 63):    # a parameter: Python ints are unbounded
            raise SqlError("22003", f"{brief(value)} is out of range for type bigint")
        return Val("int", np.full(n, int(value), np.int64), nulls)
    if isinstance(value, (float, np.floating)):
        return Val("float", np.full(n, float(value)), nulls)
    if isinstance(value, str):
        out = np.empty(n, dtype=object)
        out.fill(value)     # one shared str (np.full made a copy of it for every row)
        return Val("unknown", out, nulls, value)
    if isinstance(value, (bytes, bytearray, memoryview)):     # a bytea parameter
        return const_like(bytes(value), "bytes", n, nulls)
    if isinstance(value, _dt.datetime):
        from ..schema import to_micros
        return Val("timestamp", np.full(n, to_micros("value", value), np.int64), nulls)
    if isinstance(value, SparseVector) or callable(getattr(value, "dimensions", None)):
        return Val("sparsevec", SparseBlock.broadcast(SparseVector(value), n), nulls)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        if value.dtype.kind not in "biuf":
            raise SqlError("22P02", f"a vector parameter holds numbers, got {value.dtype}")
        return Val("vector", np.broadcast_to(value.astype(np.bool_ if value.dtype == np.bool_
                                                          else np.float32),
                                             (n, len(value))), nulls)
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(x, (int, float, np.number)) and not isinstance(x, bool) for x in value):
        try:
            a = np.asarray(value, np.float32)
        except OverflowError:   # an int past any float: no vector's, read as json (its
            a = None            # cast, $1::float8[], says 22003)
        if a is not None:
            return Val("vector", np.broadcast_to(a, (n, len(a))), nulls)
    if isinstance(value, (dict, list)):
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = value
        return Val("json", out, nulls)
    raise SqlError("22P02", f"cannot use a value of type {type(value).__name__} here")


def _const(e: Const, rel: Rel, env: Env) -> Val:
    return const_val(e.value, rel.n)


def _param(e: Param, rel: Rel, env: Env) -> Val:
    params = env.params
    if not 1 <= e.index <= len(params):
        raise SqlError("42P02", f"there is no parameter ${e.index}")
    return const_val(params[e.index - 1], rel.n)


def coerce(v: Val, kind: str) -> Val:
    """An untyped literal (or an int, where a float is wanted) as `kind`."""
    if v.kind == kind or v.kind == "null":
        return v
    if v.kind == "int" and kind == "float":
        return Val("float", v.data.astype(np.float64), v.nulls)
    if v.kind == "unknown":
        if v.literal is not None:       # one value broadcast, known on zero rows too
            return const_like(parse_input(kind, v.literal), kind, len(v), v.nulls)
        keep = ~v.nulls
        if not keep.any():      # no row (or only NULLs) to parse
            return Val(kind, _zeros(kind, len(v)), v.nulls)
        values = v.data[keep]
        # one value in every row (text cast to a type): parse it once
        first = values[0]
        if (values == first).all():
            return const_like(parse_input(kind, first), kind, len(v), v.nulls)
        parsed = [parse_input(kind, x) for x in values]     # NULL rows are not parsed
        return _from_python(kind, _with_holes(kind, parsed, keep), v.nulls)
    return v


def coerced(vals: list[Val], kind: str) -> list[Val]:
    """Columns that meet in one (CASE's, COALESCE's, UNION's, VALUES'), each as
    `kind` (NULL ones as they are): an untyped literal read as the typed columns'
    vector type too (coalesce(halfvec_col, '[1,2]') stays halfvec, bit stays bit)."""
    out = [v if v.kind in (kind, "null") else coerce(v, kind) for v in vals]
    if kind == "vector":
        vtype = next((_VECTOR_TYPES.get(v.data.dtype.type) for v in vals
                      if v.kind == "vector"), None)
        if vtype is not None:
            out = [Val(kind, as_vector_type(o.data, vtype), o.nulls) if v.kind == "unknown"
                   else o for v, o in zip(vals, out)]
    return out


def _with_holes(kind: str, parsed: list, keep: np.ndarray) -> list:
    """`parsed` (the rows `keep` marks) as a list of every row, a NULL row holding a
    filler of its kind (a vector's zeros, of the others' one dimension)."""
    if kind == "vector" and len({len(x) for x in parsed}) > 1:
        raise sparse_funcs.mixed_widths()
    filler = np.zeros_like(parsed[0]) if kind == "vector" else \
        None if kind in (*OBJECT_KINDS, "sparsevec") else _zeros(kind, 1)[0]
    out = [filler] * len(keep)
    for i, x in zip(np.flatnonzero(keep).tolist(), parsed):
        out[i] = x
    return out


def const_like(value, kind: str, n: int, nulls) -> Val:
    if kind == "vector":
        return Val("vector", np.broadcast_to(value, (n, len(value))), nulls)
    if kind == "sparsevec":
        return Val(kind, SparseBlock.broadcast(value, n), nulls)
    if kind in OBJECT_KINDS:
        out = np.empty(n, dtype=object)
        out[:] = [value] * n
        return Val(kind, out, nulls)
    dtype = {"int": np.int64, "float": np.float64, "bool": bool, "timestamp": np.int64}[kind]
    return Val(kind, np.full(n, value, dtype), nulls)


def _from_python(kind: str, values: list, nulls) -> Val:
    if kind == "vector":        # (bit strings stay bool)
        return Val("vector", np.asarray(values, np.bool_ if len(values) and
                                        np.asarray(values[0]).dtype == np.bool_
                                        else np.float32), nulls)
    if kind in OBJECT_KINDS:
        return Val(kind, object_array(values), nulls)
    if kind == "sparsevec":
        return Val(kind, SparseBlock.of_values(values), nulls)
    dtype = {"int": np.int64, "float": np.float64, "bool": bool, "timestamp": np.int64}[kind]
    return Val(kind, np.asarray(values, dtype), nulls)


def _unify(a: Val, b: Val) -> tuple[Val, Val]:
    """Give an untyped side the other side's type; widen int to float."""
    if a.kind == "unknown" and b.kind == "array":
        a = _array_literal(a, b)
    elif b.kind == "unknown" and a.kind == "array":
        b = _array_literal(b, a)
    elif a.kind == "unknown" and b.kind not in ("unknown", "null"):
        a = coerce(a, b.kind)
    elif b.kind == "unknown" and a.kind not in ("unknown", "null"):
        b = coerce(b, a.kind)
    elif a.kind == "unknown" and b.kind == "unknown":
        a, b = Val("text", a.data, a.nulls), Val("text", b.data, b.nulls)
    if a.kind == "int" and b.kind == "float":
        a = coerce(a, "float")
    elif a.kind == "float" and b.kind == "int":
        b = coerce(b, "float")
    return a, b


def _array_literal(v: Val, like: Val) -> Val:
    """An untyped literal beside an array, read as that array's type: '{1,2}' beside
    an integer[] (its element type, or its elements'), '1 2' beside an int2vector."""
    data = _array_data(like)
    space = arrays.SPACE_TYPES.get(like.literal) or next(
        (type(x) for x in data if isinstance(x, arrays.SpaceVector)), None)
    spec = like.literal or arrays.element_spec(data)

    def read(text):
        if space is not None:
            try:
                return space(int(t) for t in text.split())
            except ValueError:
                raise SqlError("22P02", f'invalid input syntax for type {space.TYPE}: '
                                        f'"{text}"') from None
        return array_columns.read(spec, array_columns.stored(spec, text))
    values = raw_values(v)
    return Val("array", object_array([None if x is None else read(x) for x in values]),
               np.asarray(v.nulls, bool), like.literal)


_CMP = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal}


def _array_data(v: Val) -> np.ndarray:
    """An array column's lists (a NULL column's: None each)."""
    return v.data if v.kind == "array" else np.full(len(v), None, dtype=object)


def _op(e: Op, rel: Rel, env: Env) -> Val:
    op = e.op
    if op == "@@":
        return _text_match(e, rel, env)
    if op in ("and", "or"):
        return _logic(op, [evaluate(a, rel, env) for a in e.args])
    if op == "not":
        v = _as_bool(evaluate(e.args[0], rel, env))
        return Val("bool", ~v.data & ~v.nulls, v.nulls)
    if op == "neg":
        v = evaluate(e.args[0], rel, env)
        if v.kind == "unknown":
            v = coerce(v, "float")
        if v.kind not in NUMERIC:
            raise SqlError("42883", f"operator does not exist: - {v.kind}")
        if v.kind == "int":
            _no_int64_min(v)
        return Val(v.kind, -v.data, v.nulls)
    a, b = (evaluate(x, rel, env) for x in e.args)
    if op == "||" and "array" in (a.kind, b.kind):
        if "unknown" in (a.kind, b.kind):       # an untyped literal: the array's type
            a, b = _unify(a, b)
        if a.kind == "array" and b.kind in _ELEMENT_KINDS:
            return _array_add(a, b, append=True)
        if b.kind == "array" and a.kind in _ELEMENT_KINDS:
            return _array_add(b, a, append=False)
        if {a.kind, b.kind} - {"array", "null"}:
            raise SqlError("42883", f"operator does not exist: {a.kind} || {b.kind}")
        return Val("array", *arrays.concat(_array_data(a), a.nulls, _array_data(b), b.nulls))
    if op in ("->", "->>"):
        return _json_path(a, b, op == "->>")
    if op in OPERATORS:
        return _distance(op, a, b)
    if op == "||":
        a, b = _textcat_sides(a, b)
        if {a.kind, b.kind} & {"tsvector", "tsquery"}:     # (text || either is text's)
            raise NotSupportedError(f"{a.kind} || {b.kind} is not supported")
    a, b = _unify(a, b)
    nulls = a.nulls | b.nulls
    if a.kind == "null" or b.kind == "null":
        kind = "bool" if op in _CMP else (a.kind if b.kind == "null" else b.kind)
        return Val("null" if kind == "null" else kind, _zeros(kind, len(nulls)), nulls)
    if op in _CMP:
        if a.kind != b.kind:
            raise SqlError("42883", f"operator does not exist: {a.kind} {op} {b.kind}")
        if a.kind == "json":            # jsonb's comparison (query/jsonb.py): values, not ==
            out = np.zeros(len(nulls), bool)
            keep = np.flatnonzero(~nulls)
            fn, key = jsonb.OPS[op], jsonb.key
            out[keep] = [fn(key(x, True), key(y, True)) for x, y in
                         zip(a.data[keep].tolist(), b.data[keep].tolist())]
            return Val("bool", out, nulls)
        if a.kind in ("vector", "sparsevec") and op not in ("=", "<>"):
            # pgvector's btree order (element by element, then the dimensions):
            # vectors row by row, sparsevecs by their codes among both sides' rows
            if a.kind == "vector":
                sign = vector_funcs.compare(a.data, b.data)
            else:
                c = codes(joined(a.kind, [a, b], op))[0]
                sign = np.sign(c[:len(a)] - c[len(a):])
            return Val("bool", _CMP[op](sign, 0) & ~nulls, nulls)
        if a.kind == "sparsevec":
            eq = sparse_funcs.equal(a.data, b.data)
            return Val("bool", eq if op == "=" else ~eq, nulls)
        if a.kind == "vector":      # vectors of other dimensions are unequal (pgvector)
            eq = ((a.data == b.data).all(axis=1) if a.data.shape[-1] == b.data.shape[-1]
                  else np.zeros(len(nulls), bool))
            return Val("bool", eq if op == "=" else ~eq, nulls)
        if a.data.dtype == object:      # Python values: compared where neither is NULL
            out = np.zeros(len(nulls), bool)
            keep = ~nulls
            if keep.any():
                x, y = a.data[keep], b.data[keep]
                if a.kind == "array":   # (element by element: arrays.key)
                    x, y = (object_array([arrays.key(r) for r in z]) for z in (x, y))
                out[keep] = np.asarray(_CMP[op](x, y), bool)
            return Val("bool", out, nulls)
        out = compare(op, a.data, b.data)      # (PostgreSQL's order: NaN = NaN, NaN > inf)
        return Val("bool", np.asarray(out, bool), nulls)
    if a.kind == b.kind == "vector" and op in _VECTOR_OPS:
        if len(nulls) and nulls.all():      # (a NULL vector has no dimension to check)
            return Val("vector", np.zeros((len(nulls), 0), np.float32), nulls)
        return Val("vector", _vector_arith(op, a.data, b.data), nulls)
    if op == "||":      # text's concatenation, and bytea's
        if a.kind != b.kind or a.kind not in ("text", "bytes"):
            raise SqlError("42883", f"operator does not exist: {a.kind} || {b.kind}")
        out = np.full(len(nulls), None, dtype=object)
        keep = ~nulls
        out[keep] = a.data[keep] + b.data[keep]
        return Val(a.kind, out, nulls)
    if a.kind not in NUMERIC or b.kind not in NUMERIC:
        raise SqlError("42883", f"operator does not exist: {a.kind} {op} {b.kind}")
    x, y = a.data, b.data
    if op in ("/", "%"):
        if (y[~nulls] == 0).any():
            raise SqlError("22012", "division by zero")
        y = np.where(nulls, 1, y)
    if a.kind == "int":
        # a literal operand's range is its value: no reduction over its broadcast
        lits = [n.value if type(n) is Const and type(n.value) is int else None for n in e.args]
        return Val("int", _int_arith(op, x, y, nulls, lits), nulls)
    with np.errstate(over="ignore", invalid="ignore"):
        out = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
               "%": np.fmod}[op](x, y)
    return Val(a.kind, out, nulls)


_ELEMENT_KINDS = ("int", "float", "bool", "text")


def _array_add(arr: Val, v: Val, append: bool) -> Val:
    """array || element, element || array (array_append / array_prepend): the value a
    row added at the end or the start, a NULL one as a NULL element; the element as
    the array's type (an int beside float8[] a float; a float beside int[] makes
    float8[], as PostgreSQL's anycompatible), 42883 where they have none in common
    (text || int[])."""
    data = _array_data(arr)
    spec = arr.literal or arrays.element_spec(data)
    kind = array_element(spec)[0] if arr.literal or any(
        x is not None and len(x) for x in data) else v.kind  # (no element says: v's own)
    if (kind, v.kind) == ("int", "float"):
        data = object_array([None if x is None else [None if y is None else float(y)
                                                     for y in x] for x in data])
        kind, spec = "float", "float"
    elif (kind, v.kind) == ("float", "int"):
        v = coerce(v, "float")
    if kind != v.kind:
        left, right = ("array", v.kind) if append else (v.kind, "array")
        raise SqlError("42883", f"operator does not exist: {left} || {right}")
    out = np.empty(len(data), dtype=object)
    for i, (x, y, null) in enumerate(zip(data, v.python(), arr.nulls.tolist())):
        xs = [] if null else list(x)
        out[i] = xs + [y] if append else [y] + xs
    return Val("array", out, np.zeros(len(out), bool), spec if arr.literal else arr.literal)


# kinds with no || of their own: an untyped literal (or NULL) beside one is text
_NO_CONCAT = ("int", "float", "bool", "timestamp", "sparsevec")


def _textcat_sides(a: Val, b: Val) -> tuple[Val, Val]:
    """The sides of a non-array || as PostgreSQL resolves them: text beside any other
    type, or an untyped literal (or NULL) beside a type with no || of its own
    (_NO_CONCAT), is textanycat / anytextcat: the other side as its text output
    ('row ' || 5 is 'row 5', tx || jsonb_col text); an untyped literal beside jsonb,
    bytea or a vector is read as that type (_unify), and int || int stays 42883."""
    def textcat(x: Val, y: Val) -> bool:
        untyped = ("unknown", "null")
        return x.kind == "text" and y.kind not in ("text", *untyped) or \
            x.kind in untyped and y.kind in _NO_CONCAT
    if textcat(a, b) or textcat(b, a):
        return _as_text(a), _as_text(b)
    return a, b


def _as_text(v: Val) -> Val:
    """A column as its text output (what ::text gives); an untyped literal as text,
    an untyped NULL as a text NULL."""
    if v.kind == "text":
        return v
    if v.kind == "unknown":
        return Val("text", v.data, v.nulls)
    if v.kind == "null":
        return Val("text", np.full(len(v), None, dtype=object), v.nulls)
    return Val("text", np.array([_text_of(v.kind, x) for x in v.python()], dtype=object),
               v.nulls)


_VECTOR_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "||": None}
VECTOR_MAX_DIM = 16000      # pgvector's limit on a vector's dimensions


def _vector_arith(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """pgvector's vector (and halfvec) operators, element-wise: + - * of vectors of
    one dimension, || their concatenation; the result in the operands' type
    (halfvec with halfvec stays halfvec), 22003 where an element overflows it
    (or a product of non-zero elements underflows to zero), as pgvector."""
    bits = x.dtype == np.bool_ or y.dtype == np.bool_
    if bits and (op != "||" or x.dtype != y.dtype):     # bit strings concatenate only
        raise SqlError("42883", f"operator does not exist: {_type_name(x)} {op} {_type_name(y)}")
    out_type = x.dtype if x.dtype == y.dtype else np.float32
    if op == "||":
        if x.shape[-1] + y.shape[-1] > VECTOR_MAX_DIM:
            raise SqlError("54000", f"vector cannot have more than {VECTOR_MAX_DIM} dimensions")
        x, y = np.broadcast_arrays(x, y) if x.shape[0] != y.shape[0] else (x, y)
        return np.concatenate([x, y], axis=-1).astype(out_type, copy=False)
    if x.shape[-1] != y.shape[-1]:
        raise SqlError("22000", f"different vector dimensions {x.shape[-1]} and {y.shape[-1]}")
    with np.errstate(over="ignore", under="ignore"):
        out = _VECTOR_OPS[op](x.astype(np.float64), y.astype(np.float64)).astype(out_type)
    if not np.isfinite(out).all():
        raise SqlError("22003", "value out of range: overflow")
    if op == "*" and ((out == 0) & (x != 0) & (y != 0)).any():
        raise SqlError("22003", "value out of range: underflow")
    return out


def _type_name(data: np.ndarray) -> str:
    return _VECTOR_NAMES.get(data.dtype, "vector")


def declared_types(vals) -> list:
    """Each column's type beyond its kind, as a SqlResult's `elements` holds it: an
    array column's element type where known, a vector column's own (vector, halfvec
    or bit: its block's dtype, which a result of no rows keeps too), else None."""
    return [v.literal if v.kind == "array" else
            _VECTOR_NAMES.get(v.data.dtype) if v.kind == "vector" and v.data is not None
            else None for v in vals]


_INT64_MIN = np.iinfo(np.int64).min
_INT64_MAX = np.iinfo(np.int64).max


def _int_arith(op: str, x: np.ndarray, y: np.ndarray, nulls: np.ndarray,
               lits: list = (None, None)) -> np.ndarray:
    """x op y on int64 columns as PostgreSQL's int8 operators: exact, or 22003 where
    the result leaves int64 (a row with a NULL operand is never checked); `/`
    truncates toward zero and `%` takes the dividend's sign. Arrays of Python ints
    (an exact sum past int64) are computed as Python ints. `lits`: an operand's value
    where it is an int literal."""
    if x.dtype == object or y.dtype == object:
        return _PY_INT_OPS[op](x, y)
    if not _may_overflow(op, _range(x, lits[0]), _range(y, lits[1])):
        # the common case: plain numpy, no per-row check
        if op in "+-*":
            return {"+": np.add, "-": np.subtract, "*": np.multiply}[op](x, y)
        rem = np.fmod(x, y)
        return rem if op == "%" else (x - rem) // y
    with np.errstate(over="ignore"):
        if op == "+":
            out = x + y
            bad = ((x ^ out) & (y ^ out)) < 0       # both operands' sign differs from it
        elif op == "-":
            out = x - y
            bad = ((x ^ y) & (x ^ out)) < 0
        elif op == "*":
            out = x * y
            # wrapped iff dividing back misses y; -1 * INT64_MIN is the one product
            # whose check would itself divide out of range
            safe = np.where((x == 0) | (x == -1), 1, x)
            bad = np.where(x == -1, y == _INT64_MIN, (x != 0) & (out // safe != y))
        else:                                       # / and %: y has no zero here
            if op == "/":
                bad = (x == _INT64_MIN) & (y == -1)
                y = np.where(bad, 1, y)
            else:
                bad = None
                y = np.where(y == -1, 1, y)         # x % -1 is x % 1: 0, with no trap
            rem = np.fmod(x, y)                     # truncating: the sign of x
            out = rem if op == "%" else (x - rem) // y
    if bad is not None and (bad & ~nulls).any():
        raise SqlError("22003", "bigint out of range")
    return out


def _range(x: np.ndarray, literal: int | None) -> tuple[int, int] | None:
    """(min, max) of an int64 operand as Python ints (None: no rows); NULL rows count
    too: a false alarm only runs the exact per-row check."""
    if literal is not None:
        return literal, literal
    return (int(x.min()), int(x.max())) if len(x) else None


def _may_overflow(op: str, xr: tuple | None, yr: tuple | None) -> bool:
    """Whether x op y can leave int64 (or trap, INT64_MIN / -1) on any row, from the
    operands' ranges, compared as Python ints."""
    if xr is None or yr is None:
        return False
    (xlo, xhi), (ylo, yhi) = xr, yr
    if op == "+":
        return xlo + ylo < _INT64_MIN or xhi + yhi > _INT64_MAX
    if op == "-":
        return xlo - yhi < _INT64_MIN or xhi - ylo > _INT64_MAX
    if op == "*":
        return max(-xlo, xhi) * max(-ylo, yhi) > _INT64_MAX
    return xlo == _INT64_MIN and ylo <= -1 <= yhi    # / and %: y has no zero here


def _py_int_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_PY_INT_OPS = {
    "+": np.add, "-": np.subtract, "*": np.multiply,
    "/": np.frompyfunc(_py_int_div, 2, 1),
    "%": np.frompyfunc(lambda a, b: a - b * _py_int_div(a, b), 2, 1),
}


def int64_of(v: Val) -> Val:
    """An int Val as int64: Python ints (an exact sum past int64, PostgreSQL's
    numeric) are 22003 where a row that is not NULL leaves bigint's range."""
    if v.data.dtype != object:
        return v
    keep = v.data[~v.nulls]
    if len(keep) and (keep.min() < _INT64_MIN or keep.max() > _INT64_MAX):
        raise SqlError("22003", "bigint out of range")
    return Val("int", np.where(v.nulls, 0, v.data).astype(np.int64), v.nulls)


def _no_int64_min(v: Val) -> None:
    """-x and abs(x) have no int64 for INT64_MIN (22003, as PostgreSQL's int8)."""
    if v.data.dtype != object and ((v.data == _INT64_MIN) & ~v.nulls).any():
        raise SqlError("22003", "bigint out of range")


def half_away(x: np.ndarray) -> np.ndarray:
    """To the nearest whole float, halves away from zero (numeric's round, and
    round_half_away's); x - trunc(x) is exact, where adding 0.5 first rounds
    0.49999999999999994 up to 1."""
    whole = np.trunc(x)
    return whole + np.sign(x) * (np.abs(x - whole) >= 0.5)


def round_half_away(x: np.ndarray, even: bool = False) -> np.ndarray:
    """Floats to int64 as PostgreSQL rounds a numeric (2.5 -> 3, -2.5 -> -3), or with
    `even` as it rounds a float8 (rint: 2.5 -> 2, -2.5 -> -2); 22003 past int64."""
    with np.errstate(invalid="ignore"):
        r = np.rint(x) if even else half_away(x)
    if not np.isfinite(r).all() or (np.abs(r) >= 2.0 ** 63).any():
        raise SqlError("22003", "bigint out of range")
    return r.astype(np.int64)


def _zeros(kind: str, n: int):
    if kind in ("null",):
        return None
    if kind == "vector":        # a block of n vectors of no dimension (all NULL)
        return np.zeros((n, 0), np.float32)
    if kind in (*OBJECT_KINDS, "unknown", "array"):
        return np.full(n, None, dtype=object)
    if kind == "sparsevec":
        return SparseBlock.of_values([None] * n)
    return np.zeros(n, {"float": np.float64, "bool": bool}.get(kind, np.int64))


def _as_bool(v: Val) -> Val:
    if v.kind == "null":
        return Val("bool", np.zeros(len(v), bool), v.nulls)
    if v.kind == "unknown":
        v = coerce(v, "bool")
    if v.kind != "bool":
        raise SqlError("42804", f"argument of a boolean operator must be type boolean, "
                                f"not type {v.kind}")
    return v


def _logic(op: str, vals: list) -> Val:
    vals = [_as_bool(v) for v in vals]
    t, u = vals[0].data & ~vals[0].nulls, vals[0].nulls
    for v in vals[1:]:
        t, u = kleene(op, t, u, v.data & ~v.nulls, v.nulls)
    return Val("bool", t, u)


def _distance(op: str, a: Val, b: Val) -> Val:
    if "sparsevec" in (a.kind, b.kind):
        return _sparse_distance(op, a, b)
    if a.kind == "unknown":
        a = coerce(a, "vector")
    if b.kind == "unknown":
        b = coerce(b, "vector")
    if a.kind == "null" or b.kind == "null" or len(a) and (a.nulls | b.nulls).all():
        return Val("float", np.zeros(len(a)), a.nulls | b.nulls)
    if a.kind != "vector" or b.kind != "vector":
        raise SqlError("42883", f"operator does not exist: {a.kind} {op} {b.kind}")
    _same_dims(a, b)
    nulls = a.nulls | b.nulls
    return Val("float", OPERATORS[op](a.data, b.data), nulls)


def _sparse_distance(name: str, a: Val, b: Val) -> Val:
    """A distance of sparsevecs (an operator or its function); the other side, an
    untyped literal or a dense vector, is read as a sparsevec (pgvector's casts)."""
    a, b = (_as_sparse(v, name) for v in (a, b))
    nulls = a.nulls | b.nulls
    if a.kind == "null" or b.kind == "null" or len(a) and nulls.all():
        return Val("float", np.zeros(len(a)), nulls)
    if name not in sparse_funcs.DISTANCES:
        raise SqlError("42883", f"operator does not exist: sparsevec {name} sparsevec")
    return Val("float", sparse_funcs.distance(name, a.data, b.data, nulls), nulls)


def _as_sparse(v: Val, what: str) -> Val:
    if v.kind == "unknown":
        return coerce(v, "sparsevec")
    if v.kind == "vector" and v.data.dtype != np.bool_:
        return Val("sparsevec", sparse_funcs.from_dense(v.data), v.nulls)
    if v.kind not in ("sparsevec", "null"):
        raise SqlError("42883", f"operator does not exist: {v.kind} {what} sparsevec")
    return v


def _same_dims(a: Val, b: Val) -> None:
    if a.data.shape[1:] != b.data.shape[1:]:
        raise SqlError("22000", f"different vector dimensions {a.data.shape[1]} and "
                                f"{b.data.shape[1]}")


def _json_path(a: Val, b: Val, as_text: bool) -> Val:
    if a.kind == "unknown":
        a = coerce(a, "json")
    if a.kind != "json":
        raise SqlError("42883", f"operator does not exist: {a.kind} -> {b.kind}")
    keys = b.data if b.kind != "null" else np.full(len(a), None, dtype=object)  # -> NULL
    out = np.empty(len(a), dtype=object)
    nulls = a.nulls | b.nulls
    for i, (v, k) in enumerate(zip(a.data, keys)):
        got = None
        if isinstance(v, dict) and isinstance(k, str):
            got = v.get(k)
        elif isinstance(v, list) and isinstance(k, (int, np.integer)) and -len(v) <= k < len(v):
            got = v[k]
        if as_text and got is not None and not isinstance(got, str):
            got = json_text(got)
        out[i] = got
    nulls = nulls | np.array([x is None for x in out], bool)
    return Val("text" if as_text else "json", out, nulls)


def _outer(e: Outer, rel: Rel, env: Env) -> Val:
    v = env.outer.get(e.name)
    if v is None:
        raise NotSupportedError(f"the outer reference {e.name} is not supported here")
    return v.take(np.zeros(rel.n, np.int64))


def _one_row(sub: Val) -> Val:
    """(SELECT ...)'s value: its one row, or a NULL of its column's type (a
    subquery of no rows, or one planned over none: a Describe's)."""
    if len(sub) > 1:
        raise SqlError("21000", "more than one row returned by a subquery used as an "
                                "expression")
    if len(sub):
        return sub
    if sub.kind in ("null", "unknown"):
        return Val("null", None, np.ones(1, bool))
    got = joined(sub.kind, [sub, Val("null", None, np.ones(1, bool))], "subquery")
    return Val(got.kind, got.data, got.nulls, sub.literal)


def _array_of(sub: Val) -> Val:
    """ARRAY(SELECT ...)'s value: its rows as one array, of its column's element
    type (array_element_of)."""
    return Val("array", object_array([sub.python()]), np.zeros(1, bool),
               array_element_of([sub]))


# the element types an array's elements tell, as Val.literal / Field.array_of name them
_ELEMENT_KINDS = ("int", "float", "bool", "text")


def array_element_of(elements: list) -> str | None:
    """The element type (Val.literal of an array) of an array made of these
    columns' values, told by their kinds alone (so a Describe, over no rows, tells
    it too): their one kind of int, float, bool or text (an int column holding
    values past int64, NULLs, untyped literals or mixed kinds: None, the values'
    own)."""
    kinds = {v.kind for v in elements}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind not in _ELEMENT_KINDS or kind == "int" and any(
            v.data is not None and v.data.dtype == object for v in elements):
        return None
    return kind


def _exists(sub: Val) -> Val:
    """EXISTS (SELECT ...): whether it has a row."""
    return Val("bool", np.array([len(sub) > 0]), np.zeros(1, bool))


# a subquery's column -> its one-row value
FOLDS = {"scalar": _one_row, "array": _array_of, "exists": _exists}


def _correlated(e: Func, rel: Rel, env: Env) -> Val:
    """(SELECT ... outer columns ...) or ARRAY(SELECT ...) as a value: the
    statement's runner (sql/select.py) takes the outer values it reads over
    these rows and gives each row its answer."""
    run = env.subqueries[e.args[0].key]
    return run([evaluate(a, rel, env) for a in e.args[2:]], FOLDS[e.args[1].value], rel.n)


def _func(e: Func, rel: Rel, env: Env) -> Val:
    if e.name == "$correlated":
        return _correlated(e, rel, env)
    if e.name in ("$scalar", "$array", "$exists"):   # (SELECT ...), ARRAY(...), EXISTS
        one = FOLDS[e.name[1:]](env.subqueries[e.args[0].key])
        return one.take(np.zeros(rel.n, np.int64))
    if e.name in _ON_NODES:     # the table's text index, or constant arguments' nodes
        return _ON_NODES[e.name](e, rel, env)
    if e.name in SET_FUNCTIONS:     # (a select list's: sql/select.py's ProjectSet)
        raise SqlError("0A000", f"set-returning function {e.name}() is only supported at "
                                "the top of a select list's expressions")
    if e.name in _POLYMORPHIC and e.args and _untyped_null(e.args[0], env):
        raise _untyped_polymorphic()        # (to_json(NULL): PostgreSQL's too)
    args = [evaluate(a, rel, env) for a in e.args]
    fn = FUNCTIONS.get(e.name)
    if fn is None:
        raise SqlError("42883", f"function {e.name}() does not exist")
    try:
        _signature(fn).bind(*args)
    except TypeError:       # no overload takes that many arguments
        raise SqlError("42883", f"function {e.name}({', '.join(a.kind for a in args)}) "
                                "does not exist") from None
    return fn(*args)


_signature = functools.cache(inspect.signature)
_POLYMORPHIC = frozenset({"to_json", "to_jsonb"})     # (anyelement: a literal NULL is unknown)


def _untyped_null(e, env: Env) -> bool:
    """Is `e` an untyped NULL: the literal, or a parameter whose value is None (which
    psycopg sends as unknown: to_json($1) with None is 42804 from PostgreSQL too)?"""
    if isinstance(e, Param):
        return 1 <= e.index <= len(env.params) and env.params[e.index - 1] is None
    return isinstance(e, Const) and e.value is None


# ---- full-text (query/text_funcs.py does the work over row numbers) ----------------

def _text_args(e, rel: Rel, env: Env, what: str, extra: tuple = ()) -> tuple:
    """(index, column name, query text, extra constant arguments) of `what`(col, 'q', ...)."""
    args = e.args
    if not 2 <= len(args) <= 2 + len(extra) or not isinstance(args[0], Col) \
            or rel.table is None or rel.rows is None:
        raise SqlError("42883", f"{what} takes a full-text column of the table and a "
                                f"query{', then ' + ', '.join(extra) if extra else ''}")
    index = text_funcs.index_of(rel.table, args[0].name)
    if index is None:
        raise SqlError("42883", f'column "{args[0].name}" has no full-text index '
                                "(vv.Text(fts=True))")
    consts = [_constant(a, env, what, "text") for a in args[1:]]
    if isinstance(consts[0], tsquery.TsQuery):
        consts[0] = tsquery.varvedb_text(consts[0])
    if not isinstance(consts[0], str):
        raise SqlError("42883", f"{what}'s query is text, got {consts[0]!r:.40}")
    return index, args[0].name, consts[0], consts[1:]


def _constant(e, env: Env, what: str, kind: str):
    """The value (None: NULL) of an argument that is one value for every row (a
    literal, a parameter), read from its node: known on zero rows too."""
    if any(isinstance(x, (Col, Agg, SubqueryValues)) for x in walk(e)):
        raise SqlError("0A000", f"{what}'s arguments after the first must be the same for "
                                "every row (a literal or a parameter)")
    v = evaluate(e, Rel(None, None, n=1), env)
    if v.kind == "unknown":
        v = coerce(v, kind)
    if v.kind == "tsquery":
        return None if v.nulls[0] else v.data[0]
    return None if v.nulls[0] else v.python()[0]


def _text_match(e: Op, rel: Rel, env: Env) -> Val:
    left = e.args[0]
    if not (isinstance(left, Col) and rel.table is not None and rel.rows is not None
            and text_funcs.index_of(rel.table, left.name) is not None):
        return _ts_match(e, rel, env)     # PostgreSQL's: tsvector @@ tsquery
    index, name, q, _ = _text_args(Func("@@", e.args), rel, env, "@@")
    nulls = evaluate(Col(name), rel, env).nulls
    return Val("bool", text_funcs.match_rows(index, q, rel.rows) & ~nulls, nulls)


def _bm25(e: Func, rel: Rel, env: Env) -> Val:
    index, _, q, _ = _text_args(e, rel, env, "bm25()")
    if env.snapshot is None:     # RETURNING of a write: no snapshot's statistics to score by
        raise SqlError("0A000", "bm25() is only supported in SELECT")
    visible, _ = env.snapshot().visible(rel.table)
    return Val("float", text_funcs.bm25_scores(index, q, rel.rows, visible), no_nulls(rel.n))


def _marks(e: Func, rel: Rel, env: Env, what: str, extra: tuple, defaults: tuple, build):
    index, name, q, given = _text_args(e, rel, env, what, extra)
    opts = [d if g is None else g for g, d in zip(given + [None] * len(defaults), defaults)]
    texts = evaluate(Col(name), rel, env)
    terms, prefixes = text_funcs.query_terms(index, q)
    out = [build(index, t, terms, prefixes, *opts) for t in texts.python()]
    return Val("text", object_array(out), texts.nulls)


def _snippet(e: Func, rel: Rel, env: Env) -> Val:
    return _marks(e, rel, env, "snippet()", ("start", "stop", "ellipsis", "tokens"),
                  ("<b>", "</b>", "…", text_funcs.SNIPPET_TOKENS), text_funcs.snippet)


def _highlight(e: Func, rel: Rel, env: Env) -> Val:
    return _marks(e, rel, env, "highlight()", ("start", "stop"), ("<b>", "</b>"),
                  text_funcs.highlight)


def _embed(e: Func, rel: Rel, env: Env) -> Val:
    """embed('text' [, 'spec']): the text as the embedder makes it — `spec`'s, or
    that of the table's one vector field that names an embedder."""
    if not 1 <= len(e.args) <= 2:
        raise SqlError("42883", "embed() takes a text and, optionally, an embedder spec")
    vals = [evaluate(a, rel, env) for a in e.args[:1]]
    vals = [coerce(v, "text") if v.kind == "unknown" else v for v in vals]
    if any(v.kind not in ("text", "null") for v in vals):
        raise SqlError("42883", "embed() takes text arguments")
    from ..embed import resolve
    if len(e.args) == 2:
        spec = _constant(e.args[1], env, "embed()", "text")
        if spec is not None and not isinstance(spec, str):
            raise SqlError("42883", "embed() takes text arguments")
    else:
        specs = [] if rel.table is None else \
            [f.embed for f in rel.table.schema.fields.values() if f.embed is not None]
        if len(set(specs)) != 1:
            raise SqlError("42883", "embed('...') without a spec needs the table to have one "
                                    "vector field with an embedder; say which: "
                                    "embed('...', 'onnx')")
        spec = specs[0]
    if not isinstance(spec, str):
        raise SqlError("22004", "embed()'s spec is not null text")
    texts, nulls = vals[0].data, np.asarray(vals[0].nulls)
    embedder = resolve(spec)
    todo = [str(t) for t, null in zip(texts, nulls) if not null]
    out = np.zeros((len(texts), embedder.dim), np.float32)
    if todo:
        out[~nulls] = embedder.embed(todo)
    return Val("vector", out, nulls.copy())


def _subvector(e: Func, rel: Rel, env: Env) -> Val:
    """subvector(v, start, count): one start and count for every row (a column's
    vectors share one dimension), read from their nodes."""
    if len(e.args) != 3:
        raise SqlError("42883", "subvector() takes a vector, a start and a count")
    v = _vector_arg("subvector", evaluate(e.args[0], rel, env))
    s, c = (_constant(a, env, "subvector()", "int") for a in e.args[1:])
    if s is None or c is None or v.kind == "null":
        return Val("null", None, np.ones(rel.n, bool))
    if not isinstance(s, int) or not isinstance(c, int):
        raise SqlError("42883", "subvector()'s start and count are integers")
    return Val("vector", vector_funcs.subvector(v.data, s, c), v.nulls)


def _rrf(e: Func, rel: Rel, env: Env) -> Val:
    raise SqlError("0A000", "rrf(bm25(col, 'q'), vec <op> $1 [, k]) fuses two rankings: it is "
                            "only valid as a table SELECT's ORDER BY rrf(...) DESC LIMIT n")


# The PostgreSQL whose SQL and protocol varvedb speaks: version() and SHOW
# server_version say it, and drivers choose their queries by it.
POSTGRES_VERSION = "16.6"


def _fixed(value, args: int = 0):
    """A function with one value for every row (version()); `args`: how many
    arguments it takes (evaluated for their errors, their values unused)."""
    def call(e: Func, rel: Rel, env: Env) -> Val:
        if len(e.args) != args:
            raise SqlError("42883", f"function {e.name}() takes "
                                    f"{args or 'no'} argument{'s' * (args != 1)}")
        for a in e.args:
            evaluate(a, rel, env)
        return const_val(value, rel.n)
    return call


def _per_value(name: str, fn, kind: str, strict: bool):
    """A catalog function (query/catalog_funcs.py) applied to each row's values
    (strict: NULL where an argument is); a value it cannot take is its caller's
    error (42883 for a type it has no overload of, 22P02 for a value it cannot read)."""
    def call(*args: Val) -> Val:
        rows = zip(*(a.python() for a in args)) if args else [()]
        try:
            out = [None if strict and None in xs else fn(*xs) for xs in rows]
            nulls = np.array([x is None for x in out], bool)
            filler = {"int": 0, "bool": False}.get(kind)
            return _from_python(kind, [filler if x is None else x for x in out], nulls)
        except TypeError:
            raise SqlError("42883", f"function {name}({', '.join(a.kind for a in args)}) "
                                    "does not exist") from None
        except (ValueError, OverflowError) as ex:
            raise SqlError("22P02", f"invalid input for {name}(): {ex}") from None
    return call


def _catalog_fn(method: str, kind: str = "text"):
    """pg_get_indexdef(oid [, column, pretty]), pg_get_constraintdef(oid [, pretty]):
    the catalog's text of each row's relation or constraint; with kind "int",
    pg_relation_size(regclass [, fork]) and its kin: a relation's bytes, named by
    OID or by name ('items' is a regclass there, as PostgreSQL reads it)."""
    def call(e: Func, rel: Rel, env: Env) -> Val:
        if not e.args or env.catalog is None:
            raise SqlError("42883", f"function {e.name}() does not exist")
        args = [evaluate(a, rel, env) for a in e.args]
        if kind == "int" and args[0].kind in ("unknown", "text"):
            args[0] = _regclass(args[0], env)
        if kind == "int" and args[0].kind not in ("int", "null"):
            raise SqlError("42883", f"function {e.name}({args[0].kind}) does not exist")
        text_args = method in ("serial_sequence", "setting")    # (names)
        args = [coerce(a, "text" if text_args else "int")
                if a.kind == "unknown" and i < 2 and kind == "text" else a
                for i, a in enumerate(args)]
        find = getattr(env.catalog, method)
        try:
            out = [None if None in xs else find(*xs)
                   for xs in zip(*(a.python() for a in args))]
        except TypeError:
            raise SqlError("42883", f"function {e.name}({', '.join(a.kind for a in args)}) "
                                    "does not exist") from None
        nulls = np.array([x is None for x in out], bool)
        if kind == "int":
            return Val("int", np.array([0 if x is None else x for x in out], np.int64), nulls)
        return Val("text", object_array(out), nulls)
    return call


_ON_NODES = {"bm25": _bm25, "snippet": _snippet, "highlight": _highlight,
             "embed": _embed, "rrf": _rrf, "subvector": _subvector,
             "version": _fixed(f"PostgreSQL {POSTGRES_VERSION} (varvedb)"),
             "current_schema": _fixed("public"), "current_database": _fixed("varvedb"),
             "current_user": _fixed("varvedb"), "session_user": _fixed("varvedb"),
             # psql's \d queries: every relation, type and function has one owner and
             # is in pg_catalog or public, both on the search path
             "pg_get_userbyid": _fixed("varvedb", args=1),
             "pg_table_is_visible": _fixed(True, args=1),
             "pg_type_is_visible": _fixed(True, args=1),
             "pg_function_is_visible": _fixed(True, args=1),
             "pg_operator_is_visible": _fixed(True, args=1),
             # the one role may do anything (`has_database_privilege(d.datname, 'CONNECT')`)
             "has_database_privilege": _fixed(True, args=2),
             "pg_has_role": _fixed(True, args=2),
             "pg_get_indexdef": _catalog_fn("indexdef"),
             "pg_get_constraintdef": _catalog_fn("constraintdef"),
             "pg_relation_size": _catalog_fn("relation_size", "int"),
             "pg_table_size": _catalog_fn("table_size", "int"),
             "pg_indexes_size": _catalog_fn("indexes_size", "int"),
             "pg_total_relation_size": _catalog_fn("total_size", "int"),
             "pg_get_serial_sequence": _catalog_fn("serial_sequence"),
             "current_setting": _catalog_fn("setting")}
ROW_FUNCTIONS = frozenset(_ON_NODES)
SET_FUNCTIONS = arrays.SET_FUNCTIONS


def _cast(e: Cast, rel: Rel, env: Env) -> Val:
    v = _cast_value(e, rel, env)
    if v.kind == "sparsevec" and e.dim is not None:
        bad = ~v.nulls & (v.data.dims != e.dim)
        if bad.any():
            raise SqlError("22000", f"expected {e.dim} dimensions, not "
                                    f"{v.data.dims[np.argmax(bad)]}")
    if v.kind == "vector" and e.vtype is not None:
        v = Val("vector", as_vector_type(v.data, e.vtype), v.nulls)
    if e.dim is not None and v.kind == "vector" and len(v) and v.data.shape[1] != e.dim:
        if v.nulls.all():       # NULL::vector(3): no value to check, the column's width
            return Val("vector", np.zeros((len(v), e.dim), v.data.dtype), v.nulls)
        if e.vtype == "bit":    # a cast to bit(n) pads with zeros or cuts, on the right
            out = np.zeros((len(v), e.dim), np.bool_)
            width = min(e.dim, v.data.shape[1])
            out[:, :width] = v.data[:, :width]
            return Val("vector", out, v.nulls)
        raise SqlError("22000", f"expected {e.dim} dimensions, not {v.data.shape[1]}")
    return v


# A vector value's type is its data's dtype: float32 a vector, float16 a halfvec,
# bool a bit string (what pgwire sends each as, and how each prints)
_VECTOR_DTYPES = {"vector": np.float32, "halfvec": np.float16, "bit": np.bool_}
_VECTOR_NAMES = {np.dtype(t): name for name, t in _VECTOR_DTYPES.items()}
_VECTOR_TYPES = {t: name for name, t in _VECTOR_DTYPES.items()}


def as_vector_type(data: np.ndarray, vtype: str) -> np.ndarray:
    """A block of vectors as `vtype` (pgvector's casts): halfvec refuses what float16
    cannot hold (22003), bit takes 0/1 values only (a vector has no cast to bit)."""
    want = _VECTOR_DTYPES[vtype]
    if data.dtype == want:
        return data
    if vtype == "bit":
        if data.dtype != np.bool_ and not np.isin(data, (0, 1)).all():
            raise SqlError("42846", "cannot cast type vector to bit")
        return data != 0
    if data.dtype == np.bool_:
        raise SqlError("42846", f"cannot cast type bit to {vtype}")
    if vtype == "halfvec" and half_overflow(data) is not None:
        raise SqlError("22003", "value out of range for type halfvec")
    return data.astype(want)


def _numeric(e) -> bool:
    """Is `e` PostgreSQL's numeric: a number literal, or arithmetic of them only?"""
    if isinstance(e, Const):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    return isinstance(e, Op) and e.op in ("+", "-", "*", "/", "%", "neg") and \
        all(_numeric(a) for a in e.args)


def _cast_value(e: Cast, rel: Rel, env: Env) -> Val:
    v = evaluate(e.arg, rel, env)
    kind = e.kind
    if kind == "regtype":
        return _regtype(v)
    if kind == "regclass":
        return _regclass(v, env)
    if kind == "array" and e.vtype is not None:     # ::vector(3)[], ::float8[] ...
        value = env.params[e.arg.index - 1] if isinstance(e.arg, Param) else None
        if v.kind in ("vector", "json") and isinstance(value, (list, tuple, np.ndarray)):
            # a list as a parameter reads as a vector (of numbers) or json where nothing
            # says otherwise (const_val); the cast says it is an array, as the list a
            # driver sends PostgreSQL is (`= ANY($1::int[])`, `$1::vector(3)[]`)
            value = value.tolist() if isinstance(value, np.ndarray) else list(value)
            v = Val("array", object_array([value] * len(v)), v.nulls)
        if v.kind not in ("array", "null", "unknown", "text"):
            raise SqlError("42846", f"cannot cast type {v.kind} to {e.vtype}[]")
        out = [None if nl else array_columns.read(e.vtype, array_columns.stored(e.vtype, x))
               for x, nl in zip(raw_values(v), v.nulls.tolist())]
        return Val("array", object_array(out), np.asarray(v.nulls, bool), e.vtype)
    if kind == "array":
        if v.kind not in ("array", "null"):
            raise NotSupportedError(f"a cast of {v.kind} to an array type is not supported")
        return Val("array", _array_data(v), v.nulls)
    if kind == "regnamespace":
        from .pg_types import NAMESPACES
        return _oid_names(v, NAMESPACES, "regnamespace")
    if v.kind == "int" == kind:
        return int64_of(v)
    if v.kind == kind or v.kind == "null":
        return v if v.kind != "null" else Val(kind, _zeros(kind, len(v)), v.nulls)
    if v.kind == "unknown":
        return coerce(v, kind)
    if kind == "float" and v.kind == "int":
        return coerce(v, "float")
    if kind == "int" and v.kind == "float":
        # a literal (2.5::int) is PostgreSQL's numeric, halves away from zero; any
        # other float is a float8, which rounds them to even (2.5::float8::int is 2)
        return Val("int", round_half_away(v.data, even=not _numeric(e.arg)), v.nulls)
    if kind == "text":
        if isinstance(e.arg, Cast) and e.arg.kind == "regclass" and v.kind == "int":
            return _regclass(v, env)    # 't'::regclass::text: the name the OID is shown as
        return _as_text(v)
    if kind in ("int", "float", "bool") and v.kind in ("int", "float", "bool"):
        return Val(kind, v.data.astype({"int": np.int64, "float": np.float64, "bool": bool}[kind]),
                   v.nulls)
    if kind == "vector" and v.kind == "vector":
        return v
    if kind == "vector" and v.kind == "sparsevec":
        return Val("vector", sparse_funcs.to_dense(v.data, v.nulls), v.nulls)
    if kind == "sparsevec" and v.kind == "vector" and v.data.dtype != np.bool_:
        return Val("sparsevec", sparse_funcs.from_dense(v.data), v.nulls)
    if v.kind == "text":
        return coerce(Val("unknown", v.data, v.nulls), kind)
    raise SqlError("42846", f"cannot cast type {v.kind} to {kind}")


def _regtype(v: Val) -> Val:
    """x::regtype. An OID becomes its type's name (text: what ::regtype::text
    shows); a name becomes its type's OID (an int: what ::regtype compares as)."""
    from .pg_types import TYPES, to_regtype
    if v.kind == "null":
        return v
    if v.kind == "int":
        names = [None if null else (TYPES[x].regtype if x in TYPES else str(x))
                 for x, null in zip(v.data.tolist(), v.nulls.tolist())]
        return Val("text", object_array(names), v.nulls)
    if v.kind in ("text", "unknown"):
        oids = []
        for x, null in zip(v.data.tolist(), v.nulls.tolist()):
            t = None if null else to_regtype(x)
            if t is None and not null:
                raise SqlError("42704", f'type "{x}" does not exist')
            oids.append(0 if t is None else t.oid)
        return Val("int", np.array(oids, np.int64), v.nulls)
    raise SqlError("42846", f"cannot cast type {v.kind} to regtype")


def _oid_names(v: Val, names: dict, what: str) -> Val:
    """An OID column as the names `names` gives them (an OID without one: its
    number, as PostgreSQL shows a dangling reg* value)."""
    if v.kind == "null":
        return v
    if v.kind != "int":
        raise SqlError("42846", f"cannot cast type {v.kind} to {what}")
    out = [None if null else names.get(x, str(x))
           for x, null in zip(v.data.tolist(), v.nulls.tolist())]
    return Val("text", object_array(out), v.nulls)


def _regclass(v: Val, env: Env) -> Val:
    """x::regclass, as ::regtype: an OID becomes its relation's name, a name (or
    an OID's digits) the relation's OID."""
    if env.catalog is None:
        raise NotSupportedError("::regclass is not supported here")
    names = env.catalog.relation_names()
    if v.kind in ("text", "unknown"):
        oids = {name: oid for oid, name in names.items()}
        out = []
        for x, null in zip(v.data.tolist(), v.nulls.tolist()):
            key = None if null else x.strip().replace('"', "").removeprefix("public.") \
                .removeprefix("pg_catalog.")
            if null or key.isdigit():
                out.append(0 if null else int(key))
            elif key in oids:
                out.append(oids[key])
            else:
                raise SqlError("42P01", f'relation "{x}" does not exist')
        return Val("int", np.array(out, np.int64), v.nulls)
    return _oid_names(v, names, "regclass")


def set_function_rows(f: Func, rel: Rel, env: Env) -> list:
    """Each row's values of a set-returning call (unnest(a), generate_series(1, n),
    ...: query/arrays.py), its arguments evaluated over `rel`: an array first for
    unnest and generate_subscripts, an untyped one otherwise read as an integer."""
    args = []
    for i, a in enumerate(f.args):
        v = evaluate(a, rel, env)
        array = i == 0 and f.name in ("unnest", "generate_subscripts")
        if v.kind == "unknown" and not array:
            v = coerce(v, "int")
        if array and v.kind not in ("array", "null"):
            raise SqlError("42883", f"function {f.name}({v.kind}) does not exist")
        args.append(v.python())
    return arrays.set_rows(f.name, args, rel.n)


def set_function_nulls(f: Func, rel: Rel, env: Env, n: int) -> Val:
    """n NULLs of the type a set-returning call yields, where its arguments tell it
    without a value (a Describe's rows, none): an int for generate_series of ints and
    generate_subscripts, unnest's array's declared element type (an array column's,
    a cast's: $1::int[]); else of no type. Its arguments are evaluated over no row."""
    args = [evaluate(a, rel.take(np.zeros(0, np.int64)), env) for a in f.args]
    kind = None
    if f.name == "generate_subscripts" or f.name == "generate_series" and all(
            a.kind in ("int", "unknown") for a in args):
        kind = "int"
    elif f.name == "unnest" and args and args[0].kind == "array" \
            and args[0].literal in ("int2vector", "oidvector"):     # (the catalog's)
        kind = "int"
    elif f.name == "unnest" and args and args[0].kind == "array" and args[0].literal:
        kind, vtype, dim = array_element(args[0].literal)
        if vtype in _VECTOR_DTYPES and dim is not None:
            return Val("vector", np.zeros((n, dim), _VECTOR_DTYPES[vtype]), np.ones(n, bool))
        if kind not in _SCALAR_FILLERS and kind != "text":
            kind = None
    if kind is None:
        return Val("null", None, np.ones(n, bool))
    return _from_python(kind, [_SCALAR_FILLERS.get(kind)] * n, np.ones(n, bool))


def _subscript(arr: Val, index: Val) -> Val:
    if arr.kind not in ("array", "null"):
        raise SqlError("42804", f"cannot subscript type {arr.kind} because it does not "
                                "support subscripting")
    if index.kind == "unknown":
        index = coerce(index, "int")
    if index.kind not in ("int", "null"):
        raise SqlError("42804", f"array subscript must have type integer, not {index.kind}")
    got = items_val(arrays.element(_array_data(arr), arr.nulls, index.python()))
    if got.kind == "null" and arr.kind == "array" and arr.literal in _SCALAR_FILLERS:
        # no element given (none there, or no rows: a Describe's): the column's
        # declared element type (an int[] column's a[1] is an int, as PostgreSQL's)
        n = len(got.nulls)
        return _from_python(arr.literal, [_SCALAR_FILLERS[arr.literal]] * n, got.nulls)
    return got


# an array column's element kinds that a NULL element keeps (text's stay untyped, as its
# elements are), each with a value that fills its place
_SCALAR_FILLERS = {"int": 0, "float": 0.0, "bool": False}


def _array_bound(name: str):
    """array_upper(array, 1) and array_length(array, 1): its last subscript (its
    length, less 1 for an int2vector's from 0) and its length (NULL where it is
    empty or NULL, or of another dimension: arrays here have one)."""
    last = name == "array_upper"

    def call(arr: Val, dim: Val) -> Val:
        if arr.kind not in ("array", "null"):
            raise SqlError("42883", f"function {name}({arr.kind}, {dim.kind}) does not exist")
        out = [len(a) + (arrays.lower(a) - 1 if last else 0) if a and d == 1 else None
               for a, d in zip(arrays.element_lists(_array_data(arr), arr.nulls),
                               dim.python())]
        return _from_python("int", [0 if x is None else x for x in out],
                            np.array([x is None for x in out], bool))
    return call


def _array_to_string(arr: Val, sep: Val, null_text: Val | None = None) -> Val:
    if arr.kind not in ("array", "null"):
        raise SqlError("42883", f"function array_to_string({arr.kind}, {sep.kind}) does not "
                                "exist")
    out = arrays.to_string(_array_data(arr), arr.nulls, sep.python(),
                           None if null_text is None else null_text.python())
    return Val("text", object_array(out), np.array([x is None for x in out], bool))


def _array_of(*elements: Val) -> Val:
    """ARRAY[a, b, ...]: each row's values as one array (untyped ones stay text, cast
    where the array is used)."""
    rows = [list(r) for r in zip(*(raw_values(v) for v in elements))]
    return Val("array", object_array(rows), no_nulls(len(rows)), array_element_of(elements))


def raw_values(v: Val) -> list:
    """Each row's value: an untyped literal's text as written, NULL as None."""
    if v.kind == "unknown":
        texts = [v.literal] * len(v) if v.literal is not None else list(v.data)
        return [None if nl else x for x, nl in zip(texts, v.nulls.tolist())]
    return v.python()


def _json_build_object(*args: Val) -> Val:
    """json_build_object(key, value, ...): an object a row, its keys' text and its
    values as JSON (a value JSON has no type for by its text form)."""
    if not args or len(args) % 2:
        raise SqlError("22023", "argument list must have even number of elements" if args
                       else "json_build_object() without arguments is not supported")
    args = [coerce(a, "text") if a.kind == "unknown" else a for a in args]
    for i, k in enumerate(args[0::2]):
        if k.nulls.any():
            raise SqlError("22004", f"argument {2 * i + 1}: key must not be null")
    columns = [a.python() if a.kind in ("int", "bool", "text", "json", "null") else
               [_json_value(x, a.kind) for x in a.python()] for a in args]
    out = [{_json_key(row[i]): row[i + 1] for i in range(0, len(row), 2)}
           for row in zip(*columns)]
    return Val("json", object_array(out), no_nulls(len(out)))


def _to_json(v: Val) -> Val:
    """to_json(value), to_jsonb(value): each row's value as JSON, as _json_value writes
    it (NULL stays NULL). An untyped literal, to_json('abc') (to_json(NULL): _func), is
    42804, as PostgreSQL cannot tell which type's JSON it would be."""
    if v.kind == "unknown":
        raise _untyped_polymorphic()
    data = v.python() if v.kind in ("int", "bool", "text", "json", "null") else \
        [_json_value(x, v.kind) for x in v.python()]
    return Val("json", object_array(data), v.nulls.copy())


def _untyped_polymorphic() -> SqlError:
    """PostgreSQL's 42804 for a polymorphic function (to_json) given an untyped value."""
    return SqlError("42804", "could not determine polymorphic type because input has "
                             "type unknown")


def _json_value(x, kind: str):
    """A value as PostgreSQL's to_json writes it: an array as a JSON array of its
    elements', a float that JSON has no number for as its text ("NaN",
    "Infinity"), a timestamptz in ISO 8601 (2026-12-01T12:00:00+00:00), what else
    JSON has no type for as its text form (a vector's)."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, _dt.datetime):
        return timestamp_json(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return value_text(x)
        # float8's text read as jsonb's numeric: 2, not Python's 2.0; 0, not -0; 1e+15 as
        # 1000000000000000 (its shortest digits: 123456789012345680, not ...677)
        return int(Decimal(repr(x))) if x.is_integer() else x
    if kind == "array" or isinstance(x, list):
        return [_json_value(y, "") for y in x]
    return value_text(x, None if kind == "" else kind)


def _json_key(k) -> str:
    if isinstance(k, bool):
        return "true" if k else "false"
    return k if isinstance(k, str) else str(k)


def _to_regtype(v: Val) -> Val:
    """to_regtype(name): the type's OID, NULL where no type has that name."""
    from .pg_types import to_regtype
    if v.kind == "unknown":
        v = coerce(v, "text")
    if v.kind == "null":
        return Val("int", np.zeros(len(v), np.int64), v.nulls)
    if v.kind != "text":
        raise SqlError("42883", f"function to_regtype({v.kind}) does not exist")
    found = [None if null else to_regtype(x) for x, null in zip(v.data.tolist(), v.nulls.tolist())]
    return Val("int", np.array([0 if t is None else t.oid for t in found], np.int64),
               np.array([t is None for t in found], bool))


def _text_of(kind: str, x) -> str | None:
    # a cast to text: the output form PostgreSQL prints (literals' output twin),
    # but for a boolean (true, where psql shows t) and jsonb's own spacing
    if x is None:
        return None
    if kind == "bool":
        return "true" if x else "false"
    if kind == "json":
        return json_text(x)
    return value_text(x, kind)


def _isnull(e: IsNull, rel: Rel, env: Env) -> Val:
    v = evaluate(e.arg, rel, env)
    nulls = v.nulls
    return Val("bool", ~nulls if e.negated else nulls.copy(), np.zeros(len(nulls), bool))


def _booltest(e: BoolTest, rel: Rel, env: Env) -> Val:
    v = _as_bool(evaluate(e.arg, rel, env))
    if e.value is None:
        hit = v.nulls.copy()
    else:
        hit = (v.data == e.value) & ~v.nulls
    return Val("bool", ~hit if e.negated else hit, np.zeros(len(hit), bool))


def _members(a: Val, sub: Val) -> np.ndarray:
    """Per row of `a`, whether its value is one of `sub`'s non-NULL values (one kind):
    a vector, or a json value, compared whole, as `=` compares them."""
    present = sub.data[~sub.nulls]
    if not len(present):
        return np.zeros(len(a), bool)
    if a.kind in ("vector", "sparsevec"):    # equal btree ranks among both sides' rows
        if a.kind == "vector" and a.data.shape[1:] != present.shape[1:]:
            return np.zeros(len(a), bool)       # (vectors of other dimensions are unequal)
        r = ranks(a.kind, _stacked(a.kind, [a.data, present]))
        return np.isin(r[:len(a)], r[len(a):])
    if a.kind == "json":
        pool = {json.dumps(x, sort_keys=True) for x in present.tolist()}
        return np.fromiter((json.dumps(x, sort_keys=True) in pool for x in a.data), bool,
                           len(a))
    if a.kind == "text":
        pool = set(present.tolist())
        return np.fromiter((x in pool for x in a.data), bool, len(a))
    hit = np.isin(a.data, present)
    if present.dtype.kind == "f" and a.data.dtype.kind == "f" and np.isnan(present).any():
        hit |= np.isnan(a.data)             # NaN = NaN (PostgreSQL's float order)
    return hit


def _inlist(e: InList, rel: Rel, env: Env) -> Val:
    a = evaluate(e.arg, rel, env)
    n = len(a)
    first = e.values[0] if len(e.values) == 1 else None
    if isinstance(first, ArrayValues) and not isinstance(first.arg, (Param, Const)):
        arr = evaluate(first.arg, rel, env)      # an array value a row (a catalog column)
        if arr.kind not in ("array", "null"):
            raise SqlError("42809", "op ANY/ALL (array) requires array on right side")
        t, unknown = arrays.contains(a.python(), _array_data(arr), arr.nulls)
    elif isinstance(first, (SubqueryValues, ArrayValues)):
        sub: Val = env.subqueries[first.key] if isinstance(first, SubqueryValues) \
            else _array(first, env)
        a, sub = _unify(a, sub)
        if a.kind != sub.kind and "null" not in (a.kind, sub.kind):
            raise SqlError("42883", f"operator does not exist: {a.kind} = {sub.kind}")
        hit = _members(a, sub) if a.kind != "null" and sub.kind != "null" \
            else np.zeros(n, bool)
        # (an empty set has no member to be unknown about: x IN () is false, NULL x too)
        unknown = (a.nulls & bool(len(sub))) | (~hit & bool(sub.nulls.any()))
        t = hit & ~a.nulls
    else:
        t = np.zeros(n, bool)
        u = np.zeros(n, bool)
        for x in e.values:
            eq = _op_vals("=", a, evaluate(x, rel, env))
            t |= eq.data & ~eq.nulls
            u |= eq.nulls
        unknown = u & ~t
    if e.negated:
        return Val("bool", ~t & ~unknown, unknown)
    return Val("bool", t, unknown)


def _array(e: ArrayValues, env: Env) -> Val:
    """An array parameter's elements as one column (its kind by its elements':
    strings are untyped, cast to the other side's type)."""
    arg = e.arg
    if isinstance(arg, Param):
        if not 1 <= arg.index <= len(env.params):
            raise SqlError("42P02", f"there is no parameter ${arg.index}")
        items = env.params[arg.index - 1]
    else:
        items = arg.value if isinstance(arg, Const) else None
    if items is None:
        items = []
    if isinstance(items, np.ndarray) and items.ndim == 1:
        items = items.tolist()
    if not isinstance(items, (list, tuple)) or any(isinstance(x, (list, tuple, dict))
                                                   for x in items):
        raise SqlError("22P02", "= ANY(...) takes a one-dimensional array (a list parameter), "
                                f"not {brief(items)}")
    return items_val(items)


def items_val(items: list) -> Val:
    """Python values of one type (an array's elements) as a column: strings
    untyped, cast to the other side's type where they meet one."""
    nulls = np.array([x is None for x in items], bool)
    given = [x for x in items if x is not None]
    kinds = {"bool" if isinstance(x, bool) else "int" if isinstance(x, int) else
             "float" if isinstance(x, float) else "unknown" if isinstance(x, str) else
             "bytes" if isinstance(x, bytes) else "vector" if isinstance(x, np.ndarray) else
             "sparsevec" if isinstance(x, SparseVector) else "other" for x in given}
    if kinds == {"vector"} and len({(x.shape, x.dtype) for x in given}) == 1:
        return _from_python("vector", [np.zeros_like(given[0]) if x is None else x
                                       for x in items], nulls)
    if kinds == {"sparsevec"}:
        return _from_python("sparsevec", items, nulls)
    if kinds == {"int", "float"}:
        kinds = {"float"}
    if len(kinds) > 1 or "other" in kinds:
        raise SqlError("42804", "an array's elements are of one type")
    kind = kinds.pop() if kinds else "null"
    if kind == "null":
        return Val("null", None, nulls)
    filler = {"int": 0, "float": 0.0, "bool": False}.get(kind)
    data = [filler if x is None else x for x in items]
    if kind == "unknown":
        return Val("unknown", object_array(data), nulls)
    return _from_python(kind, data, nulls)


def _op_vals(op: str, a: Val, b: Val) -> Val:
    return _op(Op(op, (Given(a), Given(b))), Rel(None, None, n=len(a)), Env())


@dataclass(frozen=True, slots=True)
class Given:
    """An already-evaluated Val inside a tree (for reusing operator rules)."""
    val: Any


def _given(e: Given, rel: Rel, env: Env) -> Val:
    return e.val


def _like(e: Like, rel: Rel, env: Env) -> Val:
    a = evaluate(e.arg, rel, env)
    p = evaluate(e.pattern, rel, env)
    if a.kind == "unknown":
        a = coerce(a, "text")
    if a.kind == "null" or p.kind == "null":
        return Val("bool", np.zeros(len(a), bool), a.nulls | p.nulls)
    op = ("!" if e.negated else "") + ("~" if e.regex else "~~") + ("*" if e.icase else "")
    if a.kind != "text":
        raise SqlError("42883", f"operator does not exist: {a.kind} {op} unknown")
    if p.kind not in ("text", "unknown"):      # `s LIKE 1`: no text ~~ integer
        raise SqlError("42883", f"operator does not exist: text {op} {p.kind}")
    nulls = a.nulls | p.nulls
    pats = p.data
    # LIKE matches the whole text, a regex anywhere in it
    compiled, method = (_regex, "search") if e.regex else (like_regex, "fullmatch")
    if len(pats) and (pats == pats[0]).all():
        match = getattr(compiled(pats[0], e.icase), method)
        hit = np.fromiter((x is not None and match(x) is not None for x in a.data),
                          bool, len(a))
    else:
        hit = np.fromiter((x is not None and pt is not None and
                           getattr(compiled(pt, e.icase), method)(x) is not None
                           for x, pt in zip(a.data, pats)), bool, len(a))
    if e.negated:
        hit = ~hit
    return Val("bool", hit & ~nulls, nulls)


def _regex(pattern: str, icase: bool):
    try:
        return re.compile(pattern, re.IGNORECASE if icase else 0)
    except re.error as err:
        raise SqlError("2201B", f"invalid regular expression: {err}") from None


def _case(e: Case, rel: Rel, env: Env) -> Val:
    """Each WHEN is evaluated on the rows no earlier WHEN took, and each result
    only on the rows that reach it, as PostgreSQL does: a branch no row takes
    cannot fail (CASE WHEN x < 9223372036854775807 THEN x + 1 END)."""
    n = rel.n
    left = np.arange(n)                 # rows no WHEN has taken yet
    parts = []                          # (row indices, their Val)
    for cond, r in e.whens:
        hit = truth(evaluate(cond, rel.take(left), env))
        parts.append((left[hit], evaluate(r, rel.take(left[hit]), env)))
        left = left[~hit]
    parts.append((left, evaluate(e.default, rel.take(left), env) if e.default is not None
                  else const_val(None, len(left))))
    kinds = {v.kind for _, v in parts} - {"null", "unknown"}
    kind = "float" if kinds == {"int", "float"} else (kinds.pop() if len(kinds) == 1 else
                                                     "text" if not kinds else None)
    if kind is None:
        raise SqlError("42804", "CASE types do not match")
    # each row is in one part: the parts' values put at their rows
    return joined(kind, coerced([v for _, v in parts], kind), "CASE",
                  at=[idx for idx, _ in parts])


def joined(kind: str, vals: list[Val], what: str, at: list | None = None) -> Val:
    """The rows of `vals` (each of `kind`, or NULL) one after another, one column:
    what CASE, COALESCE, UNION, VALUES and a join's keys put together; with `at`,
    vals[i]'s rows go to the rows at[i] names instead (each row named once). A
    NULL part stands as its kind's filler; ints past int64 make the column Python
    ints; vectors share one width, that of the parts with a value (an all-NULL
    part has none: `NULL::vector`), else `what` is refused (0A000: PostgreSQL's
    column may mix them); sparsevecs join their blocks (SparseBlock.concat)."""
    nulls = _stacked("bool", [v.nulls for v in vals], at) if vals else np.zeros(0, bool)
    typed = [v for v in vals if v.kind != "null"]
    if not typed:
        return Val(kind, _zeros(kind, len(nulls)), nulls)
    if kind == "sparsevec":
        return Val(kind, _stacked(kind, [v.data if v.kind != "null" else _zeros(kind, len(v))
                                         for v in vals], at), nulls)
    valued = [v for v in typed if not v.nulls.all()] or typed[:1]
    if kind == "vector":
        if len({v.data.shape[1:] for v in valued}) > 1:
            raise sparse_funcs.mixed_widths(what + " ")
        like = valued[0].data

        def filler(m: int) -> np.ndarray:
            return np.zeros((m,) + like.shape[1:], like.dtype)
    else:
        def filler(m: int) -> np.ndarray:
            return _zeros(kind, m)
    datas = [v.data if v.kind != "null" and (kind != "vector" or not v.nulls.all())
             else filler(len(v)) for v in vals]
    return Val(kind, _stacked(kind, datas, at), nulls)


def _stacked(kind: str, datas: list, at: list | None = None):
    """Columns' data of one kind one after another, or each at its rows of `at`
    (Python ints where any has them)."""
    if kind == "sparsevec":
        block = SparseBlock.concat(datas)
        if at is None:
            return block
        where = np.empty(len(block), np.int64)
        where[np.concatenate(at)] = np.arange(len(block))
        return block[where]
    if any(d.dtype == object for d in datas):
        datas = [d.astype(object) for d in datas]
    if at is None:
        return np.concatenate(datas)
    out = np.empty((sum(map(len, datas)),) + datas[0].shape[1:], np.result_type(*datas))
    for d, rows in zip(datas, at):
        out[rows] = d
    return out


def ranks(kind: str, data) -> np.ndarray:
    """Dense ranks of a vector or sparsevec column's rows in pgvector's btree order
    (element by element, then the dimensions; equal rows rank equal)."""
    return vector_funcs.ranks(data) if kind == "vector" else sparse_funcs.ranks(data)


def codes(v: Val) -> tuple[np.ndarray, int]:
    """Dense codes of a column's values in ascending order (NULL: the code after the
    last), and how many distinct codes there are."""
    n = len(v)
    nulls = v.nulls
    if v.kind == "null" or n == 0 or nulls.all():
        return np.zeros(n, np.int64), 1
    present = ~nulls
    out = np.empty(n, np.int64)
    vals = v.data[present]
    if v.kind in ("vector", "sparsevec"):       # pgvector's btree order
        inv = ranks(v.kind, vals)
        width = int(inv.max()) + 1
    elif v.kind in ("json", "array"):   # jsonb's btree order (query/jsonb.py), arrays':
        keys = np.empty(len(vals), dtype=object)    # a key a value
        keys[:] = [jsonb.key(x, True) for x in vals.tolist()] if v.kind == "json" else \
            [arrays.key(x) for x in vals.tolist()]
        uniq, inv = np.unique(keys, return_inverse=True)
        width = len(uniq)
    else:
        uniq, inv = np.unique(vals, return_inverse=True)
        width = len(uniq)
    out[present] = inv.ravel()
    out[nulls] = width
    return out, width + 1


def _agg(e: Agg, rel: Rel, env: Env) -> Val:
    raise SqlError("42803", f"aggregate function {e.fn} is not allowed here")


def _window(e: Window, rel: Rel, env: Env) -> Val:
    raise SqlError("42P20", f"window functions are not allowed here ({e.fn})")


def _subquery(e: SubqueryValues, rel: Rel, env: Env) -> Val:
    raise SqlError("42601", "a subquery is only allowed in IN (...) and FROM")


_EVAL = {Col: _col, Const: _const, Param: _param, Op: _op, Func: _func, Cast: _cast,
         IsNull: _isnull, BoolTest: _booltest, InList: _inlist, Like: _like, Case: _case, Agg: _agg,
         SubqueryValues: _subquery, Given: _given, Window: _window, Outer: _outer}


# ---- functions ---------------------------------------------------------------

def _vector_arg(name: str, v: Val) -> Val:
    if v.kind == "unknown":
        v = coerce(v, "vector")
    if v.kind not in ("vector", "null"):
        raise SqlError("42883", f"function {name}({v.kind}) does not exist")
    return v


def _vector_fn(name: str, fn, out_kind: str):
    pair = len(inspect.signature(fn).parameters) == 2      # one vector, or two

    def call(a: Val, b: Val | None = None) -> Val:
        if pair != (b is not None):
            raise SqlError("42883", f"function {name}({a.kind}{', ' + b.kind if b else ''}) "
                                    "does not exist")
        if "sparsevec" in (a.kind, b.kind if b is not None else None):
            return _sparse_fn(name, a, b)
        a = _vector_arg(name, a)
        if b is None:
            if a.kind == "null":
                return Val(out_kind, _zeros(out_kind, len(a)), a.nulls)
            return Val(out_kind, fn(a.data), a.nulls)
        b = _vector_arg(name, b)
        if a.kind == "null" or b.kind == "null":
            return Val(out_kind, _zeros(out_kind, len(a)), a.nulls | b.nulls)
        _same_dims(a, b)
        return Val(out_kind, fn(a.data, b.data), a.nulls | b.nulls)
    return call


def _sparse_fn(name: str, a: Val, b: Val | None) -> Val:
    """pgvector's functions of sparsevecs: the distances, l2_norm, l2_normalize."""
    if b is not None and name in sparse_funcs.DISTANCES:
        return _sparse_distance(name, a, b)
    if b is None and name == "l2_norm":
        return Val("float", sparse_funcs.norms(a.data), a.nulls)
    if b is None and name == "l2_normalize":
        return Val("sparsevec", sparse_funcs.normalize(a.data), a.nulls)
    kinds = a.kind + (", " + b.kind if b is not None else "")
    raise SqlError("42883", f"function {name}({kinds}) does not exist")


def _common(args: tuple, what: str) -> tuple[str, list[Val]]:
    """The one kind of COALESCE's, GREATEST's or LEAST's arguments (int meeting float:
    float; untyped only: text; 42804 where two kinds meet) and the arguments as it."""
    kinds = {a.kind for a in args} - {"null", "unknown"}
    if len(kinds - {"int", "float"} if kinds <= {"int", "float"} else kinds) > 1:
        raise SqlError("42804", f"{what} types {' and '.join(sorted(kinds))} cannot be "
                                "matched")
    kind = "float" if kinds == {"int", "float"} else (kinds.pop() if len(kinds) == 1 else "text")
    return kind, coerced(list(args), kind)


def _coalesce(*args: Val) -> Val:
    kind, vals = _common(args, "COALESCE")
    n = len(args[0])
    # each row from its first argument that is not NULL there (the last where all are)
    first = np.full(n, len(vals) - 1, np.int64)
    for i in reversed(range(len(vals) - 1)):
        first[~vals[i].nulls] = i
    rows = [np.flatnonzero(first == i) for i in range(len(vals))]
    return joined(kind, [v.take(r) for v, r in zip(vals, rows)], "COALESCE", at=rows)


def _extreme(name: str):
    """GREATEST / LEAST: per row the largest / least of the arguments in their kind's
    order (vectors' and sparsevecs' btree order too), NULLs skipped (NULL where all
    are): the arguments' codes, one after another, and an argmax / argmin a row."""
    def call(*args: Val) -> Val:
        kind, vals = _common(args, name.upper())
        n = len(args[0])
        both = joined(kind, vals, name.upper())
        c, width = codes(both)          # (NULL: width - 1, past every value)
        c = c.reshape(len(vals), n)
        if name == "greatest":
            pick = np.argmax(np.where(c == width - 1, -1, c), axis=0)
        else:
            pick = np.argmin(c, axis=0)
        return both.take(pick * n + np.arange(n))
    return call


def _text_fn(fn):
    def call(v: Val) -> Val:
        if v.kind == "unknown":
            v = coerce(v, "text")
        if v.kind == "null":
            return v
        if v.kind != "text":
            raise SqlError("42883", f"function does not exist for {v.kind}")
        return fn(v)
    return call


def _length(octets: bool):
    """length() (a text's characters) or octet_length() (its UTF-8 bytes); a bytea's
    bytes for both."""
    def call(v: Val) -> Val:
        if v.kind == "unknown":
            v = coerce(v, "text")
        if v.kind == "null":
            return Val("int", _zeros("int", len(v)), v.nulls)
        if v.kind not in ("text", "bytes"):
            raise SqlError("42883", f"function does not exist for {v.kind}")
        encode = octets and v.kind == "text"
        return Val("int", np.fromiter((0 if x is None else len(x.encode() if encode else x)
                                       for x in v.data.tolist()), np.int64, len(v)), v.nulls)
    return call


def _numeric_fn(fn, keep_int: bool):
    def call(v: Val) -> Val:
        if v.kind == "unknown":
            v = coerce(v, "float")
        if v.kind == "null":
            return v
        if v.kind not in NUMERIC:
            raise SqlError("42883", f"function does not exist for {v.kind}")
        if v.kind == "int" and keep_int:       # abs, the one that keeps ints
            _no_int64_min(v)
        out = fn(v.data)
        return Val(v.kind if keep_int else "float", out, v.nulls)
    return call


def _sqrt(x: np.ndarray) -> np.ndarray:
    if (x < 0).any():
        raise SqlError("2201F", "cannot take square root of a negative number")
    return np.sqrt(x.astype(np.float64))


def _integral(fn):
    # ceil, floor, trunc: an integer is its own; a float to a whole float
    numeric = _numeric_fn(fn, False)
    return lambda v: v if v.kind == "int" else numeric(v)


def _round(*args: Val) -> Val:
    """round(x) and round(x, s): halves away from zero, as PostgreSQL's numeric
    round (a float8's own round(x) rounds halves to even: varvedb's floats do not
    know which they were); round(x, s) rounds the value's shortest decimal (what
    PostgreSQL's float8-to-numeric cast reads), so round(2.675, 2) is 2.68."""
    if not 1 <= len(args) <= 2:
        raise SqlError("42883", "function round() takes a number and an optional scale")
    v, scale = args[0], args[1] if len(args) == 2 else None
    v = coerce(v, "float") if v.kind == "unknown" else v
    if scale is not None:
        scale = coerce(scale, "int") if scale.kind == "unknown" else scale
        if scale.kind not in ("int", "null"):
            raise SqlError("42883", f"function round({v.kind}, {scale.kind}) does not exist")
    if v.kind not in NUMERIC and v.kind != "null":
        raise SqlError("42883", f"function round({v.kind}) does not exist")
    nulls = v.nulls | (scale.nulls if scale is not None else False)
    if v.kind == "null" or scale is not None and scale.kind == "null":
        return Val("float", np.zeros(len(nulls)), nulls)
    if v.kind == "int" and (scale is None or (scale.data >= 0).all()):
        return v if scale is None else Val("int", v.data, nulls)
    x = v.data.astype(np.float64)
    if scale is None:
        return Val("float", half_away(x), nulls)
    out = np.zeros(len(x))
    pairs = np.stack([x, scale.data.astype(np.float64)], axis=1)
    uniq, inv = np.unique(pairs[~nulls], axis=0, return_inverse=True)
    # each distinct (value, scale) once, in decimal
    done = np.array([float(Decimal(repr(a)).quantize(Decimal(1).scaleb(-int(b)), ROUND_HALF_UP))
                     if math.isfinite(a) else a for a, b in uniq.tolist()])
    out[~nulls] = done[inv.ravel()] if len(done) else out[~nulls]
    return Val("float", out, nulls)


def _config_and_text(name: str, args) -> tuple:
    """([config,] text) arguments: (the configuration, the text Val, nulls)."""
    if not 1 <= len(args) <= 2:
        raise SqlError("42883", f"function {name}() takes a text, or a configuration and "
                                "a text")
    vals = [coerce(v, "text") if v.kind == "unknown" else v for v in args]
    for v in vals:
        if v.kind not in ("text", "null"):
            raise SqlError("42883", f"function {name}({v.kind}) does not exist")
    n = len(vals[-1])
    nulls = np.zeros(n, bool)
    for v in vals:
        nulls |= np.broadcast_to(v.nulls if v.kind != "null" else True, n)
    config = DEFAULT_TEXT_SEARCH_CONFIG
    if len(vals) == 2:
        named = {x for x, null in zip(vals[0].data if vals[0].kind != "null" else (),
                                      vals[0].nulls) if not null}
        if len(named) > 1:
            raise SqlError("0A000", f"{name}()'s configuration is one for every row")
        config = named.pop() if named else DEFAULT_TEXT_SEARCH_CONFIG
    return config, vals[-1], nulls


# PostgreSQL's default_text_search_config as initdb sets it for an English locale
DEFAULT_TEXT_SEARCH_CONFIG = "english"


def _tsquery_fn(name: str, make):
    """SQL's to_tsquery family: ([config,] query text) -> a tsquery (text/tsquery.py)."""
    def call(*args: Val) -> Val:
        config, text, nulls = _config_and_text(name, args)
        return _per_text(text, nulls, lambda t: make(config, t))
    return call


def _to_tsvector(*args: Val) -> Val:
    config, text, nulls = _config_and_text("to_tsvector", args)
    from ..text.tsconfig import config_name
    name = config_name(config)
    texts = [None] * len(nulls) if text.kind == "null" else text.data.tolist()
    return Val("tsvector", tsvectors(name, texts), nulls)


def _as_tsvector(v: Val) -> Val:
    if v.kind in ("text", "unknown"):      # text @@ tsquery: the default configuration's
        return _to_tsvector(coerce(v, "text") if v.kind == "unknown" else v)
    if v.kind not in ("tsvector", "null"):
        raise SqlError("42883", f"operator does not exist: {v.kind} @@ tsquery")
    return v


def _by_query(q: Val, n: int, fn) -> tuple[np.ndarray, np.ndarray]:
    """fn(rows, TsQuery) -> values, for each distinct query of the column `q`
    (one, mostly): (values, NULL mask)."""
    out = np.zeros(n, np.float64)
    nulls = np.broadcast_to(q.nulls, (n,)).copy() if q.kind != "null" else np.ones(n, bool)
    if q.kind == "null":
        return out, nulls
    if q.kind != "tsquery":
        raise SqlError("42883", f"function does not exist for {q.kind} as a tsquery")
    valid = np.flatnonzero(~nulls)
    if not len(valid):
        return out, nulls
    ids = np.fromiter(map(id, q.data[valid]), np.int64, len(valid))
    distinct, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    for k in range(len(distinct)):      # each distinct query (one, mostly) over its rows
        rows = valid[inverse == k] if len(distinct) > 1 else valid
        out[rows] = fn(rows, q.data[valid[first[k]]])
    return out, nulls


def _ts_match(e: Op, rel: Rel, env: Env) -> Val:
    """tsvector @@ tsquery (either way round; text: to_tsvector of it). A
    `to_tsvector(config, col) @@ q` over a table whose column has a full-text
    index of that configuration reads the index's candidates first, and analyzes
    and matches only those rows."""
    a_expr, b_expr = e.args
    got = _indexed_match(a_expr, b_expr, rel, env)
    if got is not None:
        return got
    a, b = evaluate(a_expr, rel, env), evaluate(b_expr, rel, env)
    if a.kind == "tsquery" or (b.kind == "tsvector" and a.kind != "tsvector"):
        a, b = b, a
    if a.kind == "tsvector" and b.kind in ("unknown", "text"):     # tsvector @@ 'a & b'
        b = _tsquery_input(b)
    elif b.kind in ("unknown", "text"):     # text @@ text: plainto_tsquery of the right
        b = FUNCTIONS["plainto_tsquery"](b)
    a = _as_tsvector(a)
    n = rel.n
    if a.kind == "null" or b.kind == "null":
        return Val("bool", np.zeros(n, bool), np.ones(n, bool))
    hit, nulls = _by_query(b, n, lambda rows, q: tsearch.match(a.data[rows], q))
    nulls = nulls | a.nulls
    return Val("bool", (hit != 0) & ~nulls, nulls)


def indexed_tsvector(e, table) -> tuple | None:
    """(column, its full-text index) where `e` is to_tsvector([config,] col) and the
    column's index analyzes as that configuration does."""
    if not (isinstance(e, Func) and e.name == "to_tsvector" and 1 <= len(e.args) <= 2
            and isinstance(e.args[-1], Col) and table is not None):
        return None
    if len(e.args) == 2 and not (isinstance(e.args[0], Const)
                                 and isinstance(e.args[0].value, str)):
        return None
    from ..text.tsconfig import config_name
    try:
        config = config_name(e.args[0].value if len(e.args) == 2
                             else DEFAULT_TEXT_SEARCH_CONFIG)
    except SqlError:
        return None
    field = table.schema.fields.get(e.args[-1].name)
    if field is None or not field.fts or field.ts_config != config:
        return None
    return e.args[-1].name, config


def full_text_paths(tree, table) -> list[str]:
    """How each `to_tsvector(...) @@ q` of a WHERE over `table` runs (for its plan)."""
    out = []
    for x in walk(tree):
        if not (isinstance(x, Op) and x.op == "@@"):
            continue
        for side in x.args:
            if isinstance(side, Func) and side.name == "to_tsvector":
                found = indexed_tsvector(side, table)
                out.append(f"full-text index of {found[0]} ({found[1]}): its candidates "
                           "analyzed and rechecked" if found is not None else
                           "no full-text index of that configuration: every row analyzed")
    return out


def _indexed_match(a_expr, b_expr, rel: Rel, env: Env) -> Val | None:
    if rel.table is None or rel.rows is None:
        return None
    found = indexed_tsvector(a_expr, rel.table)
    if found is None or any(isinstance(x, (Col, Agg, SubqueryValues)) for x in walk(b_expr)):
        return None
    q = _constant(b_expr, env, "@@", "text")
    if not isinstance(q, tsquery.TsQuery):
        return None
    index = text_funcs.index_of(rel.table, found[0])
    maybe = tsearch.candidates(index, q, rel.rows)
    if maybe is None:
        return None
    idx = np.flatnonzero(maybe)
    texts = col_value(Col(found[0]), rel.table, rel.rows[idx])
    out = np.zeros(rel.n, bool)
    out[idx] = tsearch.match(tsvectors(found[1], texts.python()), q) & ~texts.nulls
    column = rel.table.columns[found[0]]          # NULL @@ q is NULL, as PostgreSQL's
    nulls = column.null_mask(int(rel.rows.max()) + 1)[rel.rows] if rel.n \
        else np.zeros(0, bool)
    return Val("bool", out, nulls)


def _rank_fn(name: str, fn):
    """ts_rank / ts_rank_cd([weights,] tsvector, tsquery [, normalization])."""
    def call(*args: Val) -> Val:
        args = list(args)
        weights = None
        if args and args[0].kind in ("vector", "unknown") and len(args) >= 3:
            weights = _weights(args.pop(0))
        if len(args) not in (2, 3):
            raise SqlError("42883", f"function {name}() takes [weights,] a tsvector, a "
                                    "tsquery [and a normalization]")
        v, q = args[0], args[1]
        method = 0
        if len(args) == 3:
            m = args[2]
            if m.kind not in ("int", "null") and m.kind != "unknown":
                raise SqlError("42883", f"{name}()'s normalization is an integer")
            if m.kind == "unknown":
                m = coerce(m, "int")
            if m.kind == "null" or m.nulls.any():
                return Val("float", np.zeros(len(m), np.float64), np.ones(len(m), bool))
            methods = set(m.data.tolist()) or {0}
            if len(methods) != 1:
                raise SqlError("0A000", f"{name}()'s normalization is one for every row")
            method = int(methods.pop())
        if v.kind not in ("tsvector", "null"):
            raise SqlError("42883", f"function {name}({v.kind}, ...) does not exist")
        n = len(v)
        if v.kind == "null":
            return Val("float", np.zeros(n, np.float64), np.ones(n, bool))
        out, nulls = _by_query(q, n, lambda rows, query: fn(v.data[rows], query, method,
                                                           weights))
        return Val("float", out, nulls | v.nulls)
    return call


def _weights(v: Val) -> list:
    if v.kind == "vector":
        return [float(x) for x in v.data[0]]
    text = str(v.data[0]).strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise SqlError("22P02", f'malformed array literal: "{text}"')
    try:
        return [None if x.strip().upper() == "NULL" else float(x)
                for x in text[1:-1].split(",") if x.strip()]
    except ValueError:
        raise SqlError("22P02", f'malformed array literal: "{text}"') from None


def _tsquery_input(v: Val) -> Val:
    """text → tsquery by tsquery's input function ('fat & rat'::tsquery)."""
    v = coerce(v, "text") if v.kind == "unknown" else v
    if v.kind not in ("text", "null"):
        raise SqlError("42846", f"cannot cast type {v.kind} to tsquery")
    return _per_text(v, v.nulls, tsquery.tsquery_in)


def _per_text(text: Val, nulls: np.ndarray, make) -> Val:
    """A tsquery column of make(t) for each row's text (made once per distinct text:
    one for every row, mostly)."""
    out = np.empty(len(nulls), dtype=object)
    if text.kind == "null":
        return Val("tsquery", out, nulls)
    valid = ~nulls
    texts = dict.fromkeys(text.data[valid].tolist())
    for t in texts:
        out[valid & (text.data == t) if len(texts) > 1 else valid] = make(t)
    return Val("tsquery", out, nulls)


FUNCTIONS = {
    "l2_distance": _vector_fn("l2_distance", vector_funcs.l2_distance, "float"),
    "cosine_distance": _vector_fn("cosine_distance", vector_funcs.cosine_distance, "float"),
    "inner_product": _vector_fn("inner_product", vector_funcs.inner_product, "float"),
    "l1_distance": _vector_fn("l1_distance", vector_funcs.l1_distance, "float"),
    "hamming_distance": _vector_fn("hamming_distance", vector_funcs.hamming_distance, "float"),
    "jaccard_distance": _vector_fn("jaccard_distance", OPERATORS["<%>"], "float"),
    "binary_quantize": _vector_fn("binary_quantize", vector_funcs.binary_quantize, "vector"),
    "vector_dims": _vector_fn("vector_dims", vector_funcs.vector_dims, "int"),
    "vector_norm": _vector_fn("vector_norm", vector_funcs.vector_norm, "float"),
    "l2_norm": _vector_fn("l2_norm", vector_funcs.vector_norm, "float"),
    "l2_normalize": _vector_fn("l2_normalize", vector_funcs.l2_normalize, "vector"),
    "coalesce": _coalesce,
    "greatest": _extreme("greatest"),
    "least": _extreme("least"),
    "$array_of": _array_of,
    "json_build_object": _json_build_object,
    "jsonb_build_object": _json_build_object,
    "to_json": _to_json,
    "to_jsonb": _to_json,
    "lower": _text_fn(lambda v: Val("text", np.array([x.lower() if x is not None else None
                                                     for x in v.data], dtype=object), v.nulls)),
    "upper": _text_fn(lambda v: Val("text", np.array([x.upper() if x is not None else None
                                                     for x in v.data], dtype=object), v.nulls)),
    "length": _length(octets=False),
    "octet_length": _length(octets=True),
    "abs": _numeric_fn(np.abs, True),
    "round": _round,
    "ceil": _integral(np.ceil),
    "ceiling": _integral(np.ceil),
    "floor": _integral(np.floor),
    "trunc": _integral(np.trunc),
    "to_regtype": _to_regtype,
    "array_to_string": _array_to_string,
    "array_upper": _array_bound("array_upper"),
    "array_length": _array_bound("array_length"),
    "$subscript": _subscript,
    "sqrt": _numeric_fn(_sqrt, False),
    **{name: _tsquery_fn(name, fn) for name, fn in tsquery.CONSTRUCTORS.items()},
    "to_tsvector": _to_tsvector,
    "$tsquery_in": _tsquery_input,
    "ts_rank": _rank_fn("ts_rank", tsearch.rank),
    "ts_rank_cd": _rank_fn("ts_rank_cd", tsearch.rank_cd),
    **{name: _per_value(name, fn, kind, name not in catalog_funcs.NOT_STRICT)
       for name, (fn, kind) in catalog_funcs.FUNCTIONS.items()},
}


def rewrite(e, fn):
    """A copy of the tree with each node replaced by fn(node) where that is not
    None (the replacement is not descended into)."""
    got = fn(e)
    if got is not None:
        return got
    if isinstance(e, (Op, Func)):
        return type(e)(e.name if isinstance(e, Func) else e.op,
                       tuple(rewrite(a, fn) for a in e.args))
    if isinstance(e, Cast):
        return Cast(e.kind, rewrite(e.arg, fn), e.dim, e.vtype)
    if isinstance(e, IsNull):
        return IsNull(rewrite(e.arg, fn), e.negated)
    if isinstance(e, BoolTest):
        return BoolTest(rewrite(e.arg, fn), e.value, e.negated)
    if isinstance(e, InList):
        return InList(rewrite(e.arg, fn), tuple(rewrite(v, fn) for v in e.values), e.negated)
    if isinstance(e, Like):
        return Like(rewrite(e.arg, fn), rewrite(e.pattern, fn), e.negated, e.icase, e.regex)
    if isinstance(e, Case):
        return Case(tuple((rewrite(c, fn), rewrite(r, fn)) for c, r in e.whens),
                    None if e.default is None else rewrite(e.default, fn))
    if isinstance(e, Agg):
        return Agg(e.fn, None if e.arg is None else rewrite(e.arg, fn), e.distinct,
                   None if e.filter is None else rewrite(e.filter, fn),
                   None if e.sep is None else rewrite(e.sep, fn),
                   tuple((rewrite(x, fn), d, nf) for x, d, nf in e.order))
    if isinstance(e, Window):
        return Window(e.fn, tuple(rewrite(p, fn) for p in e.partition),
                      tuple((rewrite(x, fn), d, nf) for x, d, nf in e.order))
    return e


def columns_of(e) -> set[str]:
    """The column names an expression reads."""
    return {x.name for x in walk(e) if isinstance(x, Col)}


def has_aggregate(e) -> bool:
    return any(isinstance(x, Agg) for x in walk(e))


def has_window(e) -> bool:
    return any(isinstance(x, Window) for x in walk(e))


def describe(e) -> str:
    """An expression as SQL-like text (for plans: GROUP BY keys, aggregates)."""
    if isinstance(e, Col):
        return e.name
    if isinstance(e, Const):
        return "NULL" if e.value is None else repr(e.value) if isinstance(e.value, str) \
            else str(e.value)
    if isinstance(e, Param):
        return f"${e.index}"
    if isinstance(e, Agg):
        inner = "*" if e.arg is None else ("DISTINCT " if e.distinct else "") + describe(e.arg)
        if e.sep is not None:
            inner += f", {describe(e.sep)}"
        if e.order:
            inner += " ORDER BY " + ", ".join(describe(x) + (" DESC" if d else "")
                                              for x, d, _ in e.order)
        tail = "" if e.filter is None else f" FILTER (WHERE {describe(e.filter)})"
        return f"{e.fn}({inner}){tail}"
    if isinstance(e, Op):
        if e.op in ("not", "neg"):
            return ("NOT " if e.op == "not" else "-") + describe(e.args[0])
        return "(" + f" {e.op.upper() if e.op in ('and', 'or') else e.op} ".join(
            describe(a) for a in e.args) + ")"
    if isinstance(e, Func):
        return f"{e.name}({', '.join(describe(a) for a in e.args)})"
    if isinstance(e, Cast):
        return f"{describe(e.arg)}::{e.kind}"
    if isinstance(e, IsNull):
        return f"{describe(e.arg)} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, Window):
        over = []
        if e.partition:
            over.append("PARTITION BY " + ", ".join(describe(p) for p in e.partition))
        if e.order:
            over.append("ORDER BY " + ", ".join(describe(x) + (" DESC" if d else "")
                                                for x, d, _ in e.order))
        return f"{e.fn}() OVER ({' '.join(over)})"
    return type(e).__name__.lower()
