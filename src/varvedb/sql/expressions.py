"""pglast expression nodes → query/expr.py trees, and the names PostgreSQL
gives output columns.

Column references may carry a table or alias qualifier (`items.id`, `s.d`):
with one relation in FROM the qualifier is checked against the names that
level answers to and dropped; with several (a join) it is kept (`s.d`).
`x IN (SELECT ...)` becomes a SubqueryValues leaf; the Select compiler runs
the subquery first. A scalar, EXISTS or ARRAY subquery that names an
enclosing query's `alias.col` (or a bare `col` that only an enclosing level
has) is correlated: that name is an Outer leaf inside it, and the subquery a
`$correlated` call whose arguments are those columns of the outer rows
(sql/select.py runs it once per distinct combination).
"""
from __future__ import annotations

from typing import Callable

from pglast import ast
from pglast.enums import (A_Expr_Kind, BoolExprType, BoolTestType, MinMaxOp, NullTestType,
                          SortByDir, SortByNulls, SQLValueFunctionOp as SVF, SubLinkType)

from ..errors import NotSupportedError, SqlError
from ..query import expr as E
from ..query.filter import NOT_A_LITERAL, literal as _literal
from ..query.window import FUNCTIONS as WINDOW_FUNCTIONS
from .types import array_element, type_of

_BINARY = {"+", "-", "*", "/", "%", "||", "=", "<>", "!=", "<", "<=", ">", ">=", "->", "->>",
           "@@", *E.OPERATORS}
_MINMAX = {MinMaxOp.IS_GREATEST: "greatest", MinMaxOp.IS_LEAST: "least"}
AGGREGATES = ("count", "sum", "avg", "min", "max", "string_agg", "array_agg", "bool_and",
              "bool_or", "every")
_BOOL_TESTS = {BoolTestType.IS_TRUE: (True, False), BoolTestType.IS_NOT_TRUE: (True, True),
               BoolTestType.IS_FALSE: (False, False), BoolTestType.IS_NOT_FALSE: (False, True),
               BoolTestType.IS_UNKNOWN: (None, False), BoolTestType.IS_NOT_UNKNOWN: (None, True)}

# the keywords SQL writes without parentheses (`current_user`) that name the session's
# role, database or schema: the functions of those names
_KEYWORD_FUNCTIONS = {SVF.SVFOP_CURRENT_USER: "current_user",
                      SVF.SVFOP_CURRENT_ROLE: "current_user", SVF.SVFOP_USER: "current_user",
                      SVF.SVFOP_SESSION_USER: "session_user",
                      SVF.SVFOP_CURRENT_CATALOG: "current_database",
                      SVF.SVFOP_CURRENT_SCHEMA: "current_schema"}

# subqueries as values: what makes one value of a subquery's rows (query/expr.py's FOLDS)
_FOLDS = {SubLinkType.EXPR_SUBLINK: "scalar", SubLinkType.ARRAY_SUBLINK: "array",
          SubLinkType.EXISTS_SUBLINK: "exists"}


class Scope:
    """What one query level's expressions may name: its relation's names (for
    qualifiers), a hook that compiles a subquery (returns its key and the
    ColumnRefs of this level it reads), and the enclosing level's scope."""

    def __init__(self, names: set[str], subquery: Callable | None = None,
                 unqualified: list | None = None, qualified: bool = False,
                 outer: "Scope | None" = None, columns: tuple[str, ...] | None = None):
        self.names = names
        # its relation's column names where they are known as it is compiled (a
        # pg_catalog relation's; a table's and what is made of them when the
        # statement is compiled with its tables' columns: sql/select.py's
        # _resolved), else None: a bare name is then always this level's
        self.columns = columns
        self.subquery = subquery
        # a subquery's: the enclosing query's scope, and the qualified names of its
        # columns this level reads (`a.attnum`, its ColumnRef), in order
        self.outer = outer
        self.outer_refs: dict[str, ast.ColumnRef] = {}
        # FROM with several relations (a join): `t.x` stays "t.x" (sql/relations.py
        # resolves it and bare names against each relation's columns)
        self.qualified = qualified
        # ON CONFLICT DO UPDATE's: the column names it uses unqualified (each is the
        # table's and EXCLUDED's: PostgreSQL's 42702 where the column exists)
        self.unqualified = unqualified


def convert(n, scope: Scope):
    """A pglast expression as an expr tree."""
    if isinstance(n, ast.ColumnRef):
        ref = _outer_ref(n, scope)
        return ref if ref is not None else E.Col(column_name(n, scope))
    if isinstance(n, ast.A_Const):
        return E.Const(literal(n))
    if isinstance(n, ast.ParamRef):
        return E.Param(n.number)
    if isinstance(n, ast.TypeCast):
        target = n.typeName.names[-1].sval.lower()
        if target == "regconfig":       # 'english'::regconfig: the configuration's name
            return convert(n.arg, scope)
        if target == "tsquery":         # tsquery's input form: operands as written
            return E.Func("$tsquery_in", (convert(n.arg, scope),))
        kind, name, mods = type_of(n.typeName)
        if n.typeName.arrayBounds:          # x::vector(3)[]: its elements read as that type
            return E.Cast("array", convert(n.arg, scope), None, array_element(kind, name, mods))
        dim = mods[0] if kind in ("vector", "sparsevec") and mods else None
        return E.Cast(kind, convert(n.arg, scope), dim, name if kind == "vector" else None)
    if isinstance(n, ast.BoolExpr):
        op = {BoolExprType.AND_EXPR: "and", BoolExprType.OR_EXPR: "or",
              BoolExprType.NOT_EXPR: "not"}[n.boolop]
        return E.Op(op, tuple(convert(a, scope) for a in n.args))
    if isinstance(n, ast.NullTest):
        return E.IsNull(convert(n.arg, scope), n.nulltesttype == NullTestType.IS_NOT_NULL)
    if isinstance(n, ast.A_Expr):
        return _a_expr(n, scope)
    if isinstance(n, ast.FuncCall):
        return _func(n, scope)
    if isinstance(n, ast.CoalesceExpr):
        return E.Func("coalesce", tuple(convert(a, scope) for a in n.args))
    if isinstance(n, ast.MinMaxExpr):
        return E.Func(_MINMAX[n.op], tuple(convert(a, scope) for a in n.args))
    if isinstance(n, ast.CaseExpr):
        arg = convert(n.arg, scope) if n.arg is not None else None
        whens = []
        for w in n.args:
            cond = convert(w.expr, scope)
            if arg is not None:
                cond = E.Op("=", (arg, cond))
            whens.append((cond, convert(w.result, scope)))
        default = convert(n.defresult, scope) if n.defresult is not None else None
        return E.Case(tuple(whens), default)
    if isinstance(n, ast.SubLink):
        if scope.subquery is None:
            raise NotSupportedError("subqueries are not supported here")
        if n.subLinkType == SubLinkType.ANY_SUBLINK and not n.operName:
            key, refs = scope.subquery(n.subselect)
            if refs:
                raise NotSupportedError("a correlated IN (SELECT ...) is not supported")
            return E.InList(convert(n.testexpr, scope), (E.SubqueryValues(key),), False)
        fold = _FOLDS.get(n.subLinkType)
        if fold is not None:
            key, refs = scope.subquery(n.subselect, fold == "exists")
            if not refs:
                return E.Func(f"${fold}", (E.SubqueryValues(key),))
            # the outer values it reads, evaluated over the outer rows
            return E.Func("$correlated", (E.SubqueryValues(key), E.Const(fold),
                                          *(convert(r, scope) for r in refs)))
        raise NotSupportedError("only IN (SELECT ...), EXISTS, ARRAY(SELECT ...) and scalar "
                                "subqueries are supported")
    if isinstance(n, ast.A_Indirection):
        sub = n.indirection[0] if len(n.indirection) == 1 else None
        if not isinstance(sub, ast.A_Indices) or sub.is_slice:
            raise NotSupportedError("only one array subscript, a[i], is supported")
        return E.Func("$subscript", (convert(n.arg, scope), convert(sub.uidx, scope)))
    if isinstance(n, ast.A_ArrayExpr):      # ARRAY[a, b]: a row's values as one array
        if not n.elements:
            raise NotSupportedError("an empty ARRAY[] is not supported")
        return E.Func("$array_of", tuple(convert(x, scope) for x in n.elements))
    if isinstance(n, ast.CollateClause):       # the one collation text has: code points
        coll = n.collname[-1].sval
        if coll not in ("default", "C", "POSIX", "ucs_basic"):
            raise NotSupportedError(f'collation "{coll}" is not supported (text compares '
                                    'by code point: "C")')
        return convert(n.arg, scope)
    if isinstance(n, ast.BooleanTest):
        which, negated = _BOOL_TESTS[n.booltesttype]
        return E.BoolTest(convert(n.arg, scope), which, negated)
    if isinstance(n, ast.SQLValueFunction) and n.op in _KEYWORD_FUNCTIONS:
        return E.Func(_KEYWORD_FUNCTIONS[n.op], ())
    raise NotSupportedError(f"{type(n).__name__} expressions are not supported")


def _outer_ref(n: ast.ColumnRef, scope: Scope):
    """`t.col` where t is no relation of this level but an enclosing query's: an
    Outer leaf (recorded in the scope, so its subquery is run per outer row).
    A bare name is this level's unless this level's columns are known and it is
    none of them: then it is the nearest enclosing level's that has it, where
    those levels' columns are known too (a pg_catalog relation's always; a
    table's when a statement with subqueries is compiled again as it is
    planned, with its tables' columns)."""
    parts = n.fields
    if len(parts) == 1 and isinstance(parts[0], ast.String):
        return _bare_outer_ref(n, parts[0].sval, scope)
    if len(parts) != 2 or not all(isinstance(p, ast.String) for p in parts) \
            or parts[0].sval in scope.names:
        return None
    up = scope.outer
    while up is not None and parts[0].sval not in up.names:
        up = up.outer
    if up is None:
        return None
    name = f"{parts[0].sval}.{parts[1].sval}"
    scope.outer_refs.setdefault(name, n)
    return E.Outer(name)


def _bare_outer_ref(n: ast.ColumnRef, name: str, scope: Scope):
    up = scope
    while up is not None and up.columns is not None and name not in up.columns:
        up = up.outer
    if up is scope or up is None or up.columns is None:
        return None
    scope.outer_refs.setdefault(name, n)
    return E.Outer(name)


def column_name(n: ast.ColumnRef, scope: Scope) -> str:
    parts = n.fields
    if any(isinstance(p, ast.A_Star) for p in parts):
        raise SqlError("42601", "* is only allowed in a select list or count(*)")
    names = [p.sval for p in parts]
    if len(names) == 2:
        if names[0] == "excluded" and "excluded" in scope.names:
            return f"excluded.{names[1]}"     # ON CONFLICT's proposed row
        if names[0] not in scope.names:
            raise SqlError("42P01", f'missing FROM-clause entry for table "{names[0]}"')
        return f"{names[0]}.{names[1]}" if scope.qualified else names[1]
    if len(names) != 1:
        raise NotSupportedError(f"column reference {'.'.join(names)} is not supported")
    if scope.unqualified is not None:
        scope.unqualified.append(names[0])
    return names[0]


def literal(n: ast.A_Const):
    """A constant's value (query/filter.py reads it, for filters and SQL alike)."""
    v = _literal(n)
    if v is NOT_A_LITERAL:
        raise NotSupportedError(f"literal {type(n.val).__name__} is not supported")
    return v


def _a_expr(n: ast.A_Expr, scope: Scope):
    kind = n.kind
    name = n.name[-1].sval if n.name else ""
    if kind == A_Expr_Kind.AEXPR_OP:
        if n.lexpr is None:
            arg = convert(n.rexpr, scope)
            if name == "-":
                if isinstance(arg, E.Const) and isinstance(arg.value, (int, float)) \
                        and not isinstance(arg.value, bool):
                    return E.Const(-arg.value)
                return E.Op("neg", (arg,))
            if name == "+":
                return arg
            raise NotSupportedError(f"prefix operator {name} is not supported")
        if name in ("~", "~*", "!~", "!~*"):       # POSIX regular expressions
            return E.Like(convert(n.lexpr, scope), convert(n.rexpr, scope),
                          name.startswith("!"), name.endswith("*"), regex=True)
        if name not in _BINARY:
            raise SqlError("42883", f"operator does not exist: {name}")
        op = "<>" if name == "!=" else name
        return E.Op(op, (convert(n.lexpr, scope), convert(n.rexpr, scope)))
    if kind == A_Expr_Kind.AEXPR_OP_ANY and name == "=":
        if isinstance(n.rexpr, ast.A_ArrayExpr):    # x = ANY (ARRAY[a, b]): x IN (a, b)
            return E.InList(convert(n.lexpr, scope),
                            tuple(convert(v, scope) for v in n.rexpr.elements or ()), False)
        return E.InList(convert(n.lexpr, scope), (E.ArrayValues(convert(n.rexpr, scope)),),
                        False)
    if kind == A_Expr_Kind.AEXPR_IN:
        values = tuple(convert(v, scope) for v in n.rexpr)
        return E.InList(convert(n.lexpr, scope), values, name == "<>")
    if kind in (A_Expr_Kind.AEXPR_LIKE, A_Expr_Kind.AEXPR_ILIKE):
        return E.Like(convert(n.lexpr, scope), convert(n.rexpr, scope), name.startswith("!"),
                      kind == A_Expr_Kind.AEXPR_ILIKE)
    if kind in (A_Expr_Kind.AEXPR_BETWEEN, A_Expr_Kind.AEXPR_NOT_BETWEEN):
        x = convert(n.lexpr, scope)
        lo, hi = (convert(v, scope) for v in n.rexpr)
        inside = E.Op("and", (E.Op(">=", (x, lo)), E.Op("<=", (x, hi))))
        return E.Op("not", (inside,)) if kind == A_Expr_Kind.AEXPR_NOT_BETWEEN else inside
    if kind == A_Expr_Kind.AEXPR_NULLIF:
        a, b = convert(n.lexpr, scope), convert(n.rexpr, scope)
        return E.Case(((E.Op("=", (a, b)), E.Const(None)),), a)
    if kind == A_Expr_Kind.AEXPR_DISTINCT:
        raise NotSupportedError("IS DISTINCT FROM is not supported")
    raise NotSupportedError(f"operator {name} ({kind.name}) is not supported")


def _func(n: ast.FuncCall, scope: Scope):
    names = [s.sval.lower() for s in n.funcname]
    if len(names) == 2 and names[0] == "pg_catalog":
        names = names[1:]
    if len(names) != 1:
        raise SqlError("42883", f"function {'.'.join(names)}() does not exist")
    name = names[0]
    if n.over is not None:
        return _window(name, n, scope)
    args = tuple(convert(a, scope) for a in (n.args or ()))
    if name in AGGREGATES:
        order = _sort_keys(n.agg_order, scope)
        if order and n.agg_distinct:
            raise NotSupportedError("ORDER BY in an aggregate with DISTINCT is not supported")
        where = None if n.agg_filter is None else convert(n.agg_filter, scope)
        if n.agg_star:
            if name != "count":
                raise SqlError("42601", f"{name}(*) is not valid")
            return E.Agg("count", None, False, where)
        if len(args) != (2 if name == "string_agg" else 1):
            raise SqlError("42883", f"function {name} takes "
                                    f"{'two arguments' if name == 'string_agg' else 'one argument'}")
        if name == "string_agg" and n.agg_distinct:
            raise NotSupportedError("string_agg(DISTINCT ...) is not supported")
        return E.Agg(name, args[0], bool(n.agg_distinct), where,
                     args[1] if len(args) == 2 else None, order)
    if n.agg_filter is not None:
        raise SqlError("42809", f"FILTER specified, but {name} is not an aggregate function")
    if name not in E.FUNCTIONS and name not in E.ROW_FUNCTIONS \
            and name not in E.SET_FUNCTIONS:
        raise SqlError("42883", f"function {name}() does not exist")
    return E.Func(name, args)


def output_name(n) -> str:
    """The name PostgreSQL gives an output column without an alias."""
    return _figure_name(n)[0]


def _figure_name(n) -> tuple[str, int]:
    # (name, strength) as PostgreSQL figures it: 2 a column's or a function's name,
    # 1 a cast's type name or "case", which an outer cast or CASE replaces (so
    # '1'::float8::text is "text"), 0 none ("?column?")
    if isinstance(n, ast.ColumnRef):
        last = n.fields[-1]
        return (last.sval, 2) if isinstance(last, ast.String) else ("?column?", 0)
    if isinstance(n, ast.FuncCall):
        return n.funcname[-1].sval, 2
    if isinstance(n, ast.CoalesceExpr):
        return "coalesce", 2
    if isinstance(n, ast.MinMaxExpr):
        return _MINMAX[n.op], 2
    if isinstance(n, ast.TypeCast):
        inner = _figure_name(n.arg)
        return inner if inner[1] > 1 else (n.typeName.names[-1].sval, 1)
    if isinstance(n, ast.CaseExpr):     # its ELSE's name, where that is a real one
        inner = _figure_name(n.defresult) if n.defresult is not None else ("", 0)
        return inner if inner[1] > 1 else ("case", 1)
    if isinstance(n, ast.A_Expr) and n.kind == A_Expr_Kind.AEXPR_NULLIF:
        return "nullif", 2
    if isinstance(n, ast.SubLink):      # (SELECT x ...): x's name; ARRAY(...): array
        if n.subLinkType in (SubLinkType.ARRAY_SUBLINK, SubLinkType.EXISTS_SUBLINK):
            return _FOLDS[n.subLinkType], 2
        first = (n.subselect.targetList or (None,))[0]
        if n.subLinkType == SubLinkType.EXPR_SUBLINK and first is not None:
            return (first.name, 2) if first.name else _figure_name(first.val)
    if isinstance(n, ast.A_Indirection):    # a[1]: a's name
        return _figure_name(n.arg)
    return "?column?", 0


def deparse(n) -> str:
    """An expression as SQL text (for plans and messages)."""
    from pglast.stream import RawStream
    return RawStream()(n)


_DEFAULT_FRAME = 1058       # FRAMEOPTION_DEFAULTS: RANGE UNBOUNDED PRECEDING .. CURRENT ROW


def _window(name: str, n: ast.FuncCall, scope: Scope):
    """row_number() / rank() / dense_rank() OVER (PARTITION BY ... ORDER BY ...);
    other window functions, named windows and frames are refused."""
    if name not in WINDOW_FUNCTIONS:
        raise NotSupportedError(f"window function {name}() is not supported "
                                f"(only {', '.join(WINDOW_FUNCTIONS)})")
    w = n.over
    if w.refname or w.name:
        raise NotSupportedError("named windows (WINDOW w AS ...) are not supported")
    if w.frameOptions != _DEFAULT_FRAME:
        raise NotSupportedError("window frames (ROWS / RANGE / GROUPS ...) are not supported")
    if n.args or n.agg_star or n.agg_filter is not None or n.agg_distinct:
        raise SqlError("42883", f"function {name}() takes no arguments")
    return E.Window(name, tuple(convert(p, scope) for p in w.partitionClause or ()),
                    _sort_keys(w.orderClause, scope))


def _sort_keys(clause, scope: Scope) -> tuple:
    """A window's or an aggregate's ORDER BY: ((expr, desc, nulls_first or None), ...)."""
    order = []
    for sb in clause or ():
        if sb.useOp:
            raise NotSupportedError("ORDER BY ... USING is not supported")
        nulls = {SortByNulls.SORTBY_NULLS_FIRST: True,
                 SortByNulls.SORTBY_NULLS_LAST: False}.get(sb.sortby_nulls)
        order.append((convert(sb.node, scope), sb.sortby_dir == SortByDir.SORTBY_DESC, nulls))
    return tuple(order)
