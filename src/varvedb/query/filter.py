"""`where=` filters: SQL boolean expressions parsed by pglast, evaluated as numpy masks.

A filter string is parsed once (cached) into a small tree of `Node`s, checked
against the collection's schema (unknown fields and type mismatches are
errors before anything runs), and evaluated column-at-a-time: each leaf is
one vectorised comparison over a column, text leaves are evaluated once per
dictionary word and mapped through the codes, and AND/OR/NOT combine masks.

SQL's three-valued logic is kept: every node yields (true, unknown) masks, so
`NOT (tag = 3)` does not match rows whose tag is NULL, as in PostgreSQL.
Supported: = <> != < <= > >=, IN, IS [NOT] NULL, [NOT] LIKE/ILIKE, NOT, AND,
OR, json paths (meta->'a'->>'b'), parameters ($1), literals and casts.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bytea import parse_bytea
from ..errors import FieldTypeError, FilterError, SqlError, UnknownFieldError
from ..float_order import WORDS, compare
from ..schema import OBJECT_KINDS, Schema, brief, to_micros
from . import jsonb
from .text_query import text_query

# Conversion, checking and evaluation recurse once per level: deeper nesting
# (NOT NOT ... x, a AND (b OR (...))) raised RecursionError, not a FilterError.
MAX_FILTER_DEPTH = 64

_OPS = {"=": "eq", "<>": "ne", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_FLIP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


@dataclass(frozen=True)
class Ref:
    """A column, or a json path into one (path steps; last_text=True for ->>)."""
    name: str
    path: tuple = ()
    as_text: bool = False


@dataclass(frozen=True)
class Param:
    index: int  # 1-based, as $1


class Unknown(str):
    """A quoted literal's text, of no type until compared (PostgreSQL's unknown): a
    json value reads it as json (`meta->'a' = '1'` is the number 1), a text field
    as the text. A parameter's Python value is compared as it is (a str with a bytes
    field as bytea's text, '\\x00ff', either way: how bytes parameters travel over
    HTTP, wire.params_to_wire)."""
    __slots__ = ()


class _Missing:
    """A parameter the filter names that was not given (why, for the error)."""
    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


@dataclass(frozen=True)
class Node:
    op: str           # and, or, not, cmp, in, isnull, like, bool, const
    args: tuple = ()


# ---- parsing ----------------------------------------------------------------

@functools.lru_cache(maxsize=512)
def parse(expr: str) -> Node:
    """Parse a filter expression into a Node tree (no schema check yet)."""
    if not isinstance(expr, str) or not expr.strip():
        raise FilterError(f"a filter is a non-empty SQL expression, got {brief(expr)}")
    # pglast is imported here, not at import time: it costs ~45 ms and a
    # search without a filter never needs it
    from pglast import ast, parse_sql
    from pglast.parser import ParseError
    try:
        stmts = parse_sql(f"SELECT 1 WHERE {expr}")
    except ParseError as e:
        raise FilterError(f"malformed filter {expr!r}: {e}") from None
    except UnicodeEncodeError:      # the parser takes UTF-8: a lone surrogate has none
        raise FilterError(f"filter {brief(expr)} is not valid Unicode (a lone surrogate)") from None
    if len(stmts) != 1 or not isinstance(stmts[0].stmt, ast.SelectStmt):
        raise FilterError(f"malformed filter {expr!r}")
    sel = stmts[0].stmt
    if sel.fromClause or sel.groupClause or sel.sortClause or sel.limitCount or sel.havingClause:
        raise FilterError(f"malformed filter {expr!r}: expected a boolean expression")
    try:
        root = convert(sel.whereClause, expr)
    except RecursionError:
        root = None
    if root is None or _depth(root) > MAX_FILTER_DEPTH:
        raise FilterError(f"filter nested more than {MAX_FILTER_DEPTH} levels deep: "
                          f"{brief(expr)}")
    return root


def _depth(root: Node) -> int:
    """Nesting depth of a Node tree, walked without recursion."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((a, d + 1) for a in node.args if isinstance(a, Node))
    return deepest


class Refusal(str):
    """Why the filter grammar cannot express a construct: what the converter gives
    back instead of a Node, so that a caller with another way (SQL's evaluator)
    chooses by what the expression is, and one without (`parse`) raises it."""


def convert(n, expr: str) -> Node:
    """A pglast expression node as a Node (shared with the SQL layer); raises
    FilterError where the grammar cannot express it."""
    got = expressed(n, expr)
    if type(got) is Refusal:
        raise FilterError(got)
    return got


def expressed(n, expr: str) -> "Node | Refusal":
    """A pglast expression node as a Node, or the Refusal that says why the filter
    grammar cannot express it."""
    from pglast import ast
    from pglast.enums import BoolExprType, NullTestType
    if isinstance(n, ast.BoolExpr):
        args = tuple(expressed(a, expr) for a in n.args)
        for a in args:
            if type(a) is Refusal:
                return a
        op = {BoolExprType.AND_EXPR: "and", BoolExprType.OR_EXPR: "or",
              BoolExprType.NOT_EXPR: "not"}[n.boolop]
        return Node(op, args)
    if isinstance(n, ast.NullTest):
        ref = _ref(n.arg, expr)
        return ref if type(ref) is Refusal else Node(
            "isnull", (ref, n.nulltesttype == NullTestType.IS_NOT_NULL))
    if isinstance(n, ast.A_Expr):
        return _a_expr(n, expr)
    if isinstance(n, ast.ColumnRef):
        ref = _ref(n, expr)
        return ref if type(ref) is Refusal else Node("bool", (ref,))
    if isinstance(n, ast.A_Const):
        v = _value(n, expr)
        if isinstance(v, bool):
            return Node("const", (v,))
    if isinstance(n, ast.BooleanTest):
        return Refusal(f"IS TRUE/IS FALSE is not supported in filters: {expr!r}")
    return Refusal(f"unsupported construct {type(n).__name__} in filter {expr!r}")


def _a_expr(n, expr: str) -> "Node | Refusal":
    from pglast.enums import A_Expr_Kind
    name = n.name[-1].sval if n.name else ""
    if n.kind == A_Expr_Kind.AEXPR_IN:
        return _node("in", _ref(n.lexpr, expr), tuple(_value(v, expr) for v in n.rexpr),
                     name == "<>")
    if n.kind in (A_Expr_Kind.AEXPR_LIKE, A_Expr_Kind.AEXPR_ILIKE):
        return _node("like", _ref(n.lexpr, expr), _value(n.rexpr, expr), name.startswith("!"),
                     n.kind == A_Expr_Kind.AEXPR_ILIKE)
    if n.kind == A_Expr_Kind.AEXPR_OP and name == "@@":
        if not _is_ref(n.lexpr):
            return Refusal(f"@@ takes a full-text field on its left: {expr!r}")
        return _node("match", _ref(n.lexpr, expr), _value(n.rexpr, expr))
    if n.kind == A_Expr_Kind.AEXPR_OP and name in _OPS:
        op = _OPS[name]
        if _is_ref(n.lexpr):
            return _node("cmp", op, _ref(n.lexpr, expr), _value(n.rexpr, expr))
        if _is_ref(n.rexpr):
            return _node("cmp", _FLIP[op], _ref(n.rexpr, expr), _value(n.lexpr, expr))
        return Refusal(f"a comparison needs a field on one side: {expr!r}")
    return Refusal(f"unsupported operator {name!r} in filter {expr!r}")


def _node(op: str, *args) -> "Node | Refusal":
    """Node(op, args), or the first Refusal among them (a tuple of values: within it)."""
    for a in args:
        if type(a) is Refusal:
            return a
        if type(a) is tuple:
            for v in a:
                if type(v) is Refusal:
                    return v
    return Node(op, args)


def _is_ref(n) -> bool:
    from pglast import ast
    return isinstance(n, ast.ColumnRef) or (
        isinstance(n, ast.A_Expr) and n.name and n.name[-1].sval in ("->", "->>"))


def _ref(n, expr: str) -> "Ref | Refusal":
    from pglast import ast
    if isinstance(n, ast.ColumnRef):
        fields = n.fields
        if len(fields) != 1 or not isinstance(fields[0], ast.String):
            return Refusal(f"unsupported column reference in filter {expr!r}")
        return Ref(fields[0].sval)
    if isinstance(n, ast.A_Expr) and n.name and n.name[-1].sval in ("->", "->>"):
        base = _ref(n.lexpr, expr)
        if type(base) is Refusal:
            return base
        step = _value(n.rexpr, expr)
        if type(step) is Refusal:
            return step
        if not isinstance(step, (str, int)) or isinstance(step, bool):
            return Refusal(f"a json path step is a string or an integer: {expr!r}")
        return Ref(base.name, base.path + (step,), n.name[-1].sval == "->>")
    return Refusal(f"expected a field name in filter {expr!r}")


NOT_A_LITERAL = object()


def literal(n) -> Any:
    """The Python value of a pglast A_Const (NULL: None); NOT_A_LITERAL for a
    kind of constant neither filters nor SQL take (bit strings). Shared with sql/."""
    from pglast import ast
    if n.isnull:
        return None
    v = n.val
    if isinstance(v, ast.Integer):
        return v.ival
    if isinstance(v, ast.Float):     # an integer too large for int4 arrives as Float
        f = v.fval
        return int(f) if re.fullmatch(r"-?\d+", f) else float(f)
    if isinstance(v, ast.String):
        return v.sval
    if isinstance(v, ast.Boolean):
        return bool(v.boolval)
    return NOT_A_LITERAL


def kleene(op: str, t, u, t2, u2):
    """SQL's three-valued AND / OR of (true, unknown) mask pairs."""
    if op == "and":
        f = (~t & ~u) | (~t2 & ~u2)
        return t & t2, (u | u2) & ~f
    t = t | t2
    return t, (u | u2) & ~t


def _value(n, expr: str) -> Any:
    """A literal's or parameter's value, or a Refusal (str subclass: test its type)."""
    from pglast import ast
    if isinstance(n, ast.TypeCast):
        return _value(n.arg, expr)
    if isinstance(n, ast.ParamRef):
        return Param(n.number)
    if isinstance(n, ast.A_Const):
        found = literal(n)
        if type(found) is str:
            return Unknown(found)
        if found is not NOT_A_LITERAL:
            return found
    if isinstance(n, ast.A_Expr) and n.name and n.name[-1].sval == "-" and n.lexpr is None:
        v = _value(n.rexpr, expr)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v
    return Refusal(f"expected a literal or $n parameter in filter {expr!r}")


# ---- checking and evaluation -----------------------------------------------

def check_params(params) -> None:
    """params= is a list or tuple ($1 is params[0]); a str was split into characters."""
    if not isinstance(params, (list, tuple)):
        raise FilterError(f"params is a list or tuple of values, got {brief(params)}")


class Filter:
    """A parsed filter bound to a schema and parameters, ready to evaluate."""

    def __init__(self, expr: str, schema: Schema, params: list | tuple = (),
                 root: Node | None = None):
        if not isinstance(expr, str):   # parse's cache would raise TypeError on a list
            raise FilterError(f"a filter is an SQL expression string, got {brief(expr)}")
        check_params(params)
        self.expr = expr
        self.root = parse(expr) if root is None else root
        self.schema = schema
        self.params = params if type(params) is list else list(params)
        problem = self.problem(self.root)
        if problem is not None:
            raise problem[0](problem[1])

    @classmethod
    def bound(cls, expr: str, root: Node, schema: Schema, params=()) -> "Filter | None":
        """A filter from a tree already converted (an SQL WHERE clause), or None
        where it does not fit the schema and the parameters' values (SQL's
        evaluator answers those, with its own coercions)."""
        self = cls.__new__(cls)
        self.expr, self.root, self.schema = expr, root, schema
        # SQL's text parameters are untyped, as a client's are in PostgreSQL
        self.params = [Unknown(p) if type(p) is str else p for p in params]
        return None if self.problem(root) is not None else self

    def problem(self, node: Node) -> tuple[type, str] | None:
        """(error class, message) for the first thing in `node` the schema, then
        the parameters' values, refuse, else None: everything `mask` could
        refuse, checked before anything runs (a filter evaluates whole or not at all)."""
        return self._schema_problem(node) or self._values_problem(node)

    def _schema_problem(self, node: Node) -> tuple[type, str] | None:
        for a in node.args:
            if isinstance(a, Node):
                found = self._schema_problem(a)
                if found is not None:
                    return found
            elif isinstance(a, Ref):
                if a.name != "id" and a.name not in self.schema.fields:
                    return UnknownFieldError, (f"unknown field {a.name!r} in filter "
                                               f"{self.expr!r}; fields are "
                                               f"{sorted(self.schema.fields)}")
                kind = self.kind(a)
                if a.path and kind != "json":
                    return FilterError, f"{a.name!r} is {kind}, not json: no path into it"
                # Vector columns have no scalar values: comparing one raised
                # AttributeError during evaluation. Only IS [NOT] NULL applies.
                if kind in ("vector", "sparsevec") and node.op != "isnull":
                    return FilterError, (f"{a.name!r} is a {kind} field; a filter can only "
                                         f"test it with IS [NOT] NULL: {self.expr!r}")
        if node.op == "match":
            ref = node.args[0]
            f = self.schema.fields.get(ref.name)
            if f is None or not f.fts or ref.path:
                return FilterError, (f"@@ needs a full-text field (vv.Text(fts=True)) on its "
                                     f"left; {ref.name!r} is not one: {self.expr!r}")
        if node.op == "bool" and self.kind(node.args[0]) not in ("bool", "json"):
            return FilterError, f"{node.args[0].name!r} is not a boolean field: {self.expr!r}"
        return None

    def _values_problem(self, node: Node) -> tuple[type, str] | None:
        op = node.op
        if op in ("and", "or", "not"):
            for a in node.args:
                found = self._values_problem(a)
                if found is not None:
                    return found
        elif op == "cmp":
            return self._value_problem(node.args[1], self._resolve(node.args[2]))
        elif op == "in":
            for v in node.args[1]:
                found = self._value_problem(node.args[0], self._resolve(v))
                if found is not None:
                    return found
        elif op in ("match", "like"):
            value = self._resolve(node.args[1])
            if isinstance(value, _Missing):
                return FilterError, value.why
            if not isinstance(value, str):
                return FilterError, (f"@@ takes a text query string, got {brief(value)}"
                                     if op == "match" else
                                     f"LIKE takes a string pattern, got {brief(value)}")
            ref = node.args[0]
            kind = "json" if ref.path else self.kind(ref)
            if op == "like" and kind not in ("text", "json"):
                return FilterError, f"LIKE needs a text field; {ref.name!r} is {kind}"
        return None

    def _resolve(self, v):
        """A literal's value, a parameter's, or a _Missing saying which is not given."""
        if isinstance(v, Param):
            if not 1 <= v.index <= len(self.params):
                return _Missing(f"filter uses ${v.index} but {len(self.params)} "
                                "parameter(s) were given")
            return self.params[v.index - 1]
        return v

    def _value_problem(self, ref: Ref, value) -> tuple[type, str] | None:
        """Can `ref` be compared with `value` (what _compare would refuse)?"""
        if isinstance(value, _Missing):
            return FilterError, value.why
        if value is None:
            return None             # unknown, as in SQL
        kind = "json" if ref.path else self.kind(ref)
        if kind == "json":
            if type(value) is Unknown and not ref.as_text:
                try:
                    jsonb.parse(value)
                except SqlError as e:
                    return FilterError, str(e)
            return None
        if kind == "text":
            return None if isinstance(value, str) else \
                (FilterError, f"{ref.name!r} is text; cannot compare it with {brief(value)}")
        if kind == "timestamp":
            try:
                to_micros(ref.name, value)
            except FieldTypeError as e:     # the conversion says why
                return FilterError, str(e)
            return None
        if kind == "bool":
            return None if isinstance(value, bool) else \
                (FilterError, f"{ref.name!r} is bool; cannot compare it with {brief(value)}")
        if kind == "bytes":
            if isinstance(value, str):
                try:
                    parse_bytea(value)
                except SqlError as e:
                    return FilterError, f"{ref.name!r} is bytes: {e}"
                return None
            return None if isinstance(value, _BYTES_LIKE) else \
                (FilterError, f"{ref.name!r} is bytes; cannot compare it with {brief(value)}")
        if not isinstance(value, (int, float, np.integer, np.floating)) \
                or isinstance(value, bool):
            return FilterError, f"{ref.name!r} is {kind}; cannot compare it with {brief(value)}"
        return None

    def kind(self, ref: Ref) -> str:
        if ref.name == "id":
            return self.schema.id_kind
        return self.schema.fields[ref.name].kind

    def id_key(self):
        """The id of a filter `id = value` (its document is looked up, no column
        scanned), else None."""
        node = self.root
        if node.op != "cmp" or node.args[0] != "eq":
            return None
        ref, value = node.args[1], self._resolve(node.args[2])
        if ref.name != "id" or ref.path:
            return None
        if self.schema.id_kind == "int":
            return value if type(value) is int else None
        return str.__str__(value) if isinstance(value, str) else None   # (Unknown's too)

    def mask(self, table, n: int) -> np.ndarray:
        """Rows [0, n) of table that satisfy the filter (unknown counts as false)."""
        t, _ = self._eval(self.root, table, n)
        return t

    def _eval(self, node: Node, table, n: int):
        op = node.op
        if op == "and" or op == "or":
            t, u = self._eval(node.args[0], table, n)
            for a in node.args[1:]:
                t, u = kleene(op, t, u, *self._eval(a, table, n))
            return t, u
        if op == "not":
            t, u = self._eval(node.args[0], table, n)
            return ~t & ~u, u
        if op == "const":
            return np.full(n, node.args[0]), np.zeros(n, bool)
        if op == "isnull":
            ref, negated = node.args
            nulls = self._nulls(ref, table, n)
            return (~nulls if negated else nulls), np.zeros(n, bool)
        if op == "bool":
            return self._compare("eq", node.args[0], True, table, n)
        if op == "cmp":
            cmp, ref, value = node.args
            return self._compare(cmp, ref, self._resolve(value), table, n)
        if op == "in":
            ref, values, negated = node.args
            values = [self._resolve(v) for v in values]
            t = np.zeros(n, bool)
            u = np.zeros(n, bool)
            for v in values:
                t2, u2 = self._compare("eq", ref, v, table, n)
                t |= t2
                u |= u2
            u &= ~t
            return ((~t & ~u) if negated else t), u
        if op == "match":
            return self._match(node.args[0], self._resolve(node.args[1]), table, n)
        if op == "like":
            ref, pattern, negated, icase = node.args
            rx = like_regex(self._resolve(pattern), icase)
            t, u = self._apply(ref, table, n, lambda x: isinstance(x, str) and rx.fullmatch(x)
                               is not None)
            return ((~t & ~u) if negated else t), u
        raise AssertionError(op)

    # The leaves below trust what `problem` checked when the filter was made: the
    # values fit the fields they are compared with, so they refuse nothing.

    # A leaf: (true, unknown) masks of `ref <op> value`.
    def _compare(self, op: str, ref: Ref, value, table, n: int):
        if value is None:  # comparing with NULL is unknown, as in SQL
            return np.zeros(n, bool), np.ones(n, bool)
        kind = "json" if ref.path else self.kind(ref)
        if kind == "json" and not ref.as_text:      # jsonb's comparison (query/jsonb.py)
            fn, key = jsonb.OPS[op], jsonb.key
            if type(value) is Unknown:      # json text: jsonb against jsonb, as SQL's
                want = key(jsonb.parse(value), True)
                return self._apply(ref, table, n, lambda x: fn(key(x, True), want))
            want = key(value, True)
            if op in ("eq", "ne") or isinstance(value, (dict, list)):
                return self._apply(ref, table, n, lambda x: fn(key(x, True), want))
            # a Python scalar orders only values of its own kind (a number no string,
            # a bool no number): PostgreSQL has no jsonb < integer to follow
            return self._apply(ref, table, n, lambda x: (k := key(x, True))[0] == want[0]
                               and fn(k, want))
        if kind == "bytes":     # a str is bytea's text, as SQL reads an untyped value
            value = parse_bytea(value) if isinstance(value, str) else bytes(value)
        if kind in OBJECT_KINDS:
            fn = _PY_OPS[op]
            if kind == "text" and op == "eq" and ref.name != "id":
                col = table.columns[ref.name]
                codes = col.head(n)
                return codes == col.code_of(value), codes < 0
            return self._apply(ref, table, n, lambda x: _safe(fn, x, value))
        values, nulls = self._scalar(ref, table, n)
        if kind == "timestamp":
            value = to_micros(ref.name, value)
        index = table.indexes.get(ref.name)
        if index is not None and index.serves(op):
            t = np.zeros(n, bool)
            t[index.search(table.columns[ref.name], op, value, n)] = True
        else:
            t = compare(WORDS[op], values, value)
        return t & ~nulls, nulls

    def _match(self, ref: Ref, query, table, n: int):
        """`field @@ 'query'`: the rows the full-text query matches; unknown where
        the field is null."""
        index = table.text_index(ref.name, n)
        nulls = table.columns[ref.name].null_mask(n)
        bound = text_query(query, index.analyzer)
        if bound is None:
            return np.zeros(n, bool), nulls
        m = index.n
        t = index.match(bound, np.ones(m, bool))
        if m >= n:
            t = t[:n]
        else:
            t = np.concatenate([t, np.zeros(n - m, bool)])
        return t & ~nulls, nulls

    def _scalar(self, ref: Ref, table, n: int):
        if ref.name == "id":      # int ids (text ones are compared as text)
            return table.ids.head(n), np.zeros(n, bool)
        return table.columns[ref.name].head(n)

    def _nulls(self, ref: Ref, table, n: int) -> np.ndarray:
        if ref.path:
            return self._json_codes(ref, table, n)[0] < 0
        if ref.name == "id":
            return np.zeros(n, bool)
        return table.columns[ref.name].null_mask(n)

    def _apply(self, ref: Ref, table, n: int, pred):
        """Evaluate a Python predicate over text dictionary words or json values."""
        if not ref.path and self.kind(ref) == "text":
            col = table.ids if ref.name == "id" else table.columns[ref.name]
            return _map_codes(*col.coded(n), pred)
        return _map_codes(*self._json_codes(ref, table, n), pred)

    def _json_codes(self, ref: Ref, table, n: int) -> tuple[np.ndarray, list]:
        path, as_text = ref.path, ref.as_text
        return table.columns[ref.name].path_codes((path, as_text), n,
                                                  lambda v: _walk(v, path, as_text))


def _map_codes(codes: np.ndarray, values: list, pred):
    """(true, null) masks of pred over dictionary-coded rows: pred runs once per distinct value."""
    lut = np.fromiter((bool(pred(v)) for v in values), bool, len(values))
    nulls = codes < 0
    t = np.zeros(len(codes), bool)
    t[~nulls] = lut[codes[~nulls]]
    return t, nulls


def _walk(v, path: tuple, as_text: bool):
    for step in path:
        if isinstance(step, str) and isinstance(v, dict):
            v = v.get(step)
        elif isinstance(step, int) and isinstance(v, list) and -len(v) <= step < len(v):
            v = v[step]
        else:
            return None
    if as_text and v is not None and not isinstance(v, str):
        from .literals import json_text
        return json_text(v)
    return v


def _safe(fn, x, value) -> bool:
    try:
        return bool(fn(x, value))
    except TypeError:
        return False


_BYTES_LIKE = (bytes, bytearray, memoryview)
_PY_OPS = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
           "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


@functools.lru_cache(maxsize=256)
def like_regex(pattern: str, icase: bool = False) -> re.Pattern:
    """SQL LIKE pattern (% any run, _ one char, backslash escapes) as a regex for
    fullmatch. The pieces between %s have fixed lengths, so each middle piece may
    take its leftmost place for good: an atomic group each, and the regex never
    backtracks into one ('%a%a%a...%b' was exponential in the number of %s)."""
    pieces, piece = [], []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            piece.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            pieces.append("".join(piece))
            piece = []
        else:
            piece.append("." if c == "_" else re.escape(c))
        i += 1
    pieces.append("".join(piece))
    if len(pieces) == 1:
        rx = pieces[0]
    else:
        rx = pieces[0] + "".join(f"(?>.*?{p})" for p in pieces[1:-1] if p) + ".*" + pieces[-1]
    return re.compile(rx, re.DOTALL | (re.IGNORECASE if icase else 0))
