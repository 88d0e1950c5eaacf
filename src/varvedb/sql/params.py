"""The types of a statement's parameters where its text fixes them: what the
wire protocol tells a client that asks (Describe), so that a driver that encodes
each parameter by the server's answer (asyncpg) sends an int as an int and a
vector as a vector.

A $n is typed by what it meets: the column it is compared with, ordered by
(`embedding <-> $1`), inserted into or set to; its cast (`$1::int`); LIMIT and
OFFSET; `col = ANY($1)` (an array of the column's type). Anywhere else it is
unknown: the client sends a string, which the statement casts where it uses it,
as before. Types are PostgreSQL's names (int8, float8, text, vector, ...).
"""
from __future__ import annotations

from pglast import ast
from pglast.enums import A_Expr_Kind
from pglast.parser import ParseError, parse_sql

from ..errors import VarveError
from ..schema import array_element
from .types import type_of

# a field's kind (and a vector's dtype) -> the type PostgreSQL would give the column
_FIELD_TYPES = {"int": "int8", "float": "float8", "bool": "bool", "text": "text",
                "json": "jsonb", "timestamp": "timestamptz", "sparsevec": "sparsevec",
                "bytes": "bytea"}
_VECTOR_TYPES = {"f32": "vector", "f16": "halfvec", "bit": "bit"}


def param_types(engine, text: str) -> dict[int, str]:
    """{n: type name} for the $n of a one-statement text that its text types."""
    try:
        stmts = parse_sql(text)
    except (ParseError, RecursionError, UnicodeEncodeError):
        return {}
    if len(stmts) != 1:
        return {}
    stmt = stmts[0].stmt
    out: dict[int, str] = {}
    _Walk(_tables(engine, stmt), out, engine, stmt).visit(stmt)
    if isinstance(stmt, ast.InsertStmt):
        _insert(engine, stmt, out)
    return out


def _table(engine, rv):
    if not isinstance(rv, ast.RangeVar) or rv.schemaname not in (None, "public"):
        return None
    try:
        return engine.table(rv.relname)
    except VarveError:          # no such table (or none to read): untyped
        return None


def _tables(engine, stmt) -> dict:
    """The statement's tables by name and alias (None: an unnamed column's)."""
    rvs = []
    if isinstance(stmt, ast.SelectStmt):
        rvs = [r for r in stmt.fromClause or () if isinstance(r, ast.RangeVar)]
    elif isinstance(stmt, (ast.UpdateStmt, ast.DeleteStmt, ast.InsertStmt)):
        rvs = [stmt.relation]
    out = {}
    for rv in rvs:
        t = _table(engine, rv)
        if t is not None:
            out[rv.relname] = t
            if rv.alias is not None:
                out[rv.alias.aliasname] = t
    if len(rvs) == 1 and out:
        out[None] = next(iter(out.values()))
    return out


def _field_type(t, name: str) -> str | None:
    if name == "id":
        return _FIELD_TYPES.get(t.schema.id_kind)
    f = t.schema.fields.get(name)
    if f is None:
        return None
    if f.kind == "vector":
        return _VECTOR_TYPES.get(f.dtype)
    if f.array_of is not None:          # an array column's array type: _vector, _int8 ...
        kind, vtype, _ = array_element(f.array_of)
        return "_" + (vtype or _FIELD_TYPES[kind])
    return _FIELD_TYPES.get(f.kind)


class _Walk:
    """Types the $n of a statement's tree (`top`); a subquery's by its own FROM's
    tables (its unqualified names first, the enclosing levels' by their names)."""

    def __init__(self, tables: dict, out: dict, engine=None, top=None):
        self.tables, self.out, self.engine, self.top = tables, out, engine, top

    def column(self, node) -> str | None:
        if not isinstance(node, ast.ColumnRef):
            return None
        parts = [f.sval for f in node.fields if isinstance(f, ast.String)]
        if len(parts) != len(node.fields) or not 1 <= len(parts) <= 2:
            return None
        t = self.tables.get(parts[0] if len(parts) == 2 else None)
        return None if t is None else _field_type(t, parts[-1])

    def param(self, node, type_name: str | None) -> None:
        if isinstance(node, ast.ParamRef) and type_name is not None:
            self.out.setdefault(node.number, type_name)

    def visit(self, node) -> None:
        if isinstance(node, (list, tuple)):
            for n in node:
                self.visit(n)
            return
        if not isinstance(node, ast.Node):
            return
        if isinstance(node, ast.A_Expr):
            self.a_expr(node)
        elif isinstance(node, ast.TypeCast):
            try:
                name = type_of(node.typeName)[1]
            except VarveError:
                name = None
            array = bool(node.typeName.arrayBounds)
            if isinstance(node.arg, ast.ParamRef):      # $1::vector, $1::vector[]
                self.param(node.arg, name and name + "[]" if array else name)
            elif array and isinstance(node.arg, ast.A_ArrayExpr):   # ARRAY[$1, $2]::vector[]
                for el in node.arg.elements or ():
                    self.param(el, name)
        elif isinstance(node, ast.SelectStmt):
            if node is not self.top and self.engine is not None and node.fromClause:
                inner = _tables(self.engine, node)
                tables = {k: v for k, v in self.tables.items() if k is not None}
                _Walk({**tables, **inner}, self.out, self.engine, node).visit(node)
                return
            self.param(node.limitCount, "int8")
            self.param(node.limitOffset, "int8")
        elif isinstance(node, ast.UpdateStmt):
            t = self.tables.get(None)
            for rt in node.targetList or ():
                if t is not None and isinstance(rt, ast.ResTarget):
                    self.param(rt.val, _field_type(t, rt.name))
        for name in node.__slots__:
            self.visit(getattr(node, name, None))

    def a_expr(self, e: ast.A_Expr) -> None:
        left, right = e.lexpr, e.rexpr
        if e.kind == A_Expr_Kind.AEXPR_OP_ANY:
            col = self.column(left)
            self.param(right, col and col + "[]")
        elif e.kind == A_Expr_Kind.AEXPR_IN and isinstance(right, list):
            col = self.column(left)
            for r in right:
                self.param(r, col)
        elif e.kind in (A_Expr_Kind.AEXPR_BETWEEN, A_Expr_Kind.AEXPR_NOT_BETWEEN) \
                and isinstance(right, list):
            col = self.column(left)
            for r in right:
                self.param(r, col)
        elif e.kind == A_Expr_Kind.AEXPR_OP:
            self.param(right, self.column(left))
            self.param(left, self.column(right))
        elif e.kind in (A_Expr_Kind.AEXPR_LIKE, A_Expr_Kind.AEXPR_ILIKE):
            self.param(right, "text")


def _insert(engine, stmt: ast.InsertStmt, out: dict) -> None:
    """VALUES' $n typed by the column each fills."""
    t = _table(engine, stmt.relation)
    sel = stmt.selectStmt
    if t is None or not isinstance(sel, ast.SelectStmt) or not sel.valuesLists:
        return
    names = [c.name for c in stmt.cols] if stmt.cols else t.schema.columns
    for row in sel.valuesLists:
        for name, v in zip(names, row):
            if isinstance(v, ast.ParamRef):
                typ = _field_type(t, name)
                if typ is not None:
                    out.setdefault(v.number, typ)
