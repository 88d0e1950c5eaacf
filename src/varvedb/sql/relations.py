"""FROM lists, joins and UNION bound from pglast onto the query layer's
Join and SetOp nodes (query/relations.py runs them).

Each relation of a join is a subquery of its own (a table is read as
`SELECT * FROM table`, a subquery or WITH query as written, so a vector
top-k subquery keeps its top-k plan), under its alias; the join's columns
are named `alias.column`. Compiling (once per statement text) keeps the
tree; planning (every run) plans each relation, resolves the ON clause's
column names against the relations' columns (a bare name must be one
relation's: 42702 where it is several's), and splits ON into the equalities
between the two sides (hash join keys) and the rest (tested on the pairs).
A function beside other relations is a relation too: a table function's rows,
or a scalar function's one row. Not supported, and refused naming the feature:
NATURAL joins, USING, LATERAL, INTERSECT and EXCEPT.
"""
from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from pglast import ast, visitors
from pglast.enums import JoinType, SetOperation

from ..errors import NotSupportedError, SqlError
from ..query import expr as E
from ..query.plan import Derived, Join, Output, SetOp
from . import pg_catalog
from .expressions import Scope, convert, deparse

_KINDS = {JoinType.JOIN_INNER: "inner", JoinType.JOIN_LEFT: "left",
          JoinType.JOIN_RIGHT: "right", JoinType.JOIN_FULL: "full"}


@dataclass
class Leaf:
    alias: str
    select: Any                     # sql/select.py's Select
    colnames: tuple = ()            # AS alias (a, b, ...): the first columns renamed


@dataclass
class JoinSpec:
    kind: str                       # inner left right full cross
    left: Any                       # Leaf or JoinSpec
    right: Any
    on: Any = None                  # expr tree (qualified names kept) or None
    on_text: str | None = None


def is_join(from_clause) -> bool:
    """Whether FROM names several relations (a list, or a JOIN)."""
    return bool(from_clause) and (len(from_clause) > 1
                                  or isinstance(from_clause[0], ast.JoinExpr))


def compile_from(from_clause, ctes: dict, make_select: Callable) -> tuple[Any, set]:
    """FROM a, b JOIN c ON ... → (the tree, the aliases it answers to). A list
    is a chain of cross joins, left to right."""
    aliases: list = []
    tree = None
    for item in from_clause:
        node = _item(item, ctes, make_select, aliases)
        tree = node if tree is None else JoinSpec("cross", tree, node)
    seen = set()
    for a in aliases:
        if a in seen:
            raise SqlError("42712", f'table name "{a}" specified more than once')
        seen.add(a)
    return tree, seen


def _item(f, ctes: dict, make_select: Callable, aliases: list):
    if isinstance(f, ast.JoinExpr):
        if f.isNatural:
            raise NotSupportedError("NATURAL JOIN is not supported (write ON)")
        if f.usingClause:
            raise NotSupportedError("JOIN ... USING is not supported (write ON)")
        if f.alias is not None:
            raise NotSupportedError("an alias on a JOIN is not supported")
        kind = _KINDS.get(f.jointype)
        if kind is None:
            raise NotSupportedError(f"{f.jointype.name} joins are not supported")
        left = _item(f.larg, ctes, make_select, aliases)
        right = _item(f.rarg, ctes, make_select, aliases)
        if f.quals is None:
            return JoinSpec("cross" if kind == "inner" else kind, left, right)
        names = set(_aliases(left)) | set(_aliases(right))
        return JoinSpec(kind, left, right, convert(f.quals, Scope(names, qualified=True)),
                        deparse(f.quals))
    if isinstance(f, ast.RangeVar):
        alias = f.alias.aliasname if f.alias else f.relname
        colnames = column_aliases(f.alias)
        if f.schemaname is None and f.relname in ctes:
            sel = make_select(ctes[f.relname], ctes)
        else:
            sel = make_select(star_select(f), ctes)
        aliases.append(alias)
        return Leaf(alias, sel, colnames)
    if isinstance(f, ast.RangeSubselect):
        if f.lateral:
            raise NotSupportedError("LATERAL is not supported")
        alias = f.alias.aliasname if f.alias is not None else "unnamed_subquery"
        aliases.append(alias)
        return Leaf(alias, make_select(f.subquery, ctes), column_aliases(f.alias))
    if isinstance(f, ast.RangeFunction):
        return _function_leaf(f, ctes, make_select, aliases)
    raise NotSupportedError(f"FROM {type(f).__name__} is not supported")


def _function_leaf(f: ast.RangeFunction, ctes: dict, make_select: Callable, aliases: list):
    """A function in FROM beside other relations: a table function's rows
    (varvedb_history, pg_catalog's), or a scalar function's one row, its one
    column named as the alias (PostgreSQL's `FROM t, plainto_tsquery(...) query`)."""
    if f.lateral or f.ordinality or f.is_rowsfrom or f.coldeflist or len(f.functions) != 1:
        raise NotSupportedError("LATERAL, WITH ORDINALITY, ROWS FROM and column definition "
                                "lists are not supported")
    call = f.functions[0][0]
    if not isinstance(call, ast.FuncCall):
        raise NotSupportedError(f"FROM {type(call).__name__} is not supported")
    name = call.funcname[-1].sval.lower()
    alias = f.alias.aliasname if f.alias else name
    aliases.append(alias)
    if name in TABLE_FUNCTIONS or name in pg_catalog.RELATIONS:
        bare = ast.RangeFunction(functions=f.functions, lateral=False, ordinality=False,
                                 is_rowsfrom=False, alias=ast.Alias(aliasname=alias))
        star = ast.ResTarget(val=ast.ColumnRef(fields=(ast.A_Star(),)))
        stmt = ast.SelectStmt(targetList=(star,), fromClause=(bare,), op=SetOperation.SETOP_NONE)
        return Leaf(alias, make_select(stmt, ctes), column_aliases(f.alias))
    colnames = column_aliases(f.alias) or (alias,)
    if len(colnames) != 1:
        raise SqlError("42804", f"too many column aliases specified for function {name}")
    stmt = ast.SelectStmt(targetList=(ast.ResTarget(name=colnames[0], val=call),),
                          op=SetOperation.SETOP_NONE)
    return Leaf(alias, make_select(stmt, ctes))


# functions of rows (sql/select.py's _function_rows); a scalar one in FROM is one row
TABLE_FUNCTIONS = frozenset({"varvedb_history"}) | E.SET_FUNCTIONS
# scalar functions whose one row beside a table is read where its column is named
INLINED = frozenset({"to_tsquery", "plainto_tsquery", "phraseto_tsquery",
                     "websearch_to_tsquery"})


def inline_functions(stmt: ast.SelectStmt) -> ast.SelectStmt:
    """`FROM documents, plainto_tsquery('english', $1) query WHERE ... @@ query`:
    a query constructor of constants in FROM is one row of one value, so the
    statement is the same with the call written where its column is named and
    the function gone from FROM. Then a lone table is left, its WHERE runs over
    the table (where a full-text index can answer it) and no join is made. A
    statement that reads `*` keeps its FROM as written."""
    items = stmt.fromClause or ()
    if len(items) < 2 or stmt.op != SetOperation.SETOP_NONE:
        return stmt
    calls, kept = {}, []
    for f in items:
        call = _inlinable(f)
        if call is None:
            kept.append(f)
        else:
            alias = f.alias.aliasname if f.alias else call.funcname[-1].sval.lower()
            column = column_aliases(f.alias)[0] if column_aliases(f.alias) else alias
            calls[(column,)] = calls[(alias, column)] = call
    if not calls or not kept or any(
            isinstance(rt.val, ast.ColumnRef) and isinstance(rt.val.fields[-1], ast.A_Star)
            for rt in stmt.targetList or ()):
        return stmt
    out = copy.deepcopy(stmt)
    out.fromClause = tuple(copy.deepcopy(kept))

    class Inline(visitors.Visitor):
        def visit_ColumnRef(self, ancestors, node):
            return _called(node, calls)

    for attr in ("targetList", "whereClause", "sortClause", "groupClause", "havingClause",
                 "fromClause"):
        value = getattr(out, attr)
        if value is None:
            continue
        items = value if isinstance(value, tuple) else (value,)
        done = tuple(_called(x, calls) or Inline()(x) or x for x in items)
        setattr(out, attr, done if isinstance(value, tuple) else done[0])
    return out


def _called(node, calls):
    """The call a ColumnRef names (a copy), or None."""
    if not isinstance(node, ast.ColumnRef) or not all(
            isinstance(x, ast.String) for x in node.fields):
        return None
    call = calls.get(tuple(x.sval for x in node.fields))
    return None if call is None else copy.deepcopy(call)


def _inlinable(f):
    """The call of a FROM item that is an INLINED function of constants, or None."""
    if not isinstance(f, ast.RangeFunction) or f.lateral or f.ordinality \
            or f.is_rowsfrom or f.coldeflist or len(f.functions) != 1:
        return None
    call = f.functions[0][0]
    if not isinstance(call, ast.FuncCall) or call.funcname[-1].sval.lower() not in INLINED \
            or len(column_aliases(f.alias)) > 1 or call.agg_star or call.over is not None:
        return None
    if any(True for _ in _column_refs(call.args or ())):
        return None
    return call


def _column_refs(nodes):
    found = []

    class Refs(visitors.Visitor):
        def visit_ColumnRef(self, ancestors, node):
            found.append(node)

    for n in nodes:
        Refs()(n)
    return found


def star_select(f: ast.RangeVar) -> ast.SelectStmt:
    """SELECT * FROM the relation `f` names (without its alias)."""
    rv = ast.RangeVar(relname=f.relname, schemaname=f.schemaname, inh=True, relpersistence="p")
    star = ast.ResTarget(val=ast.ColumnRef(fields=(ast.A_Star(),)))
    return ast.SelectStmt(targetList=(star,), fromClause=(rv,), op=SetOperation.SETOP_NONE)


def renamed(alias: str, names: list, colnames: tuple) -> list:
    """A relation's column names under `alias (a, b, ...)`: the first ones renamed
    (42P10 where it names more columns than the relation has)."""
    if len(colnames) > len(names):
        raise SqlError("42P10", f'table "{alias}" has {len(names)} columns available '
                                f"but {len(colnames)} columns specified")
    return list(colnames) + list(names[len(colnames):])


def column_aliases(alias) -> tuple:
    """The column names of `AS alias (a, b, ...)` (none: ())."""
    if alias is None or not alias.colnames:
        return ()
    return tuple(c.sval for c in alias.colnames)


def _aliases(tree) -> list:
    if isinstance(tree, Leaf):
        return [tree.alias]
    return _aliases(tree.left) + _aliases(tree.right)


def bare_columns(tree) -> tuple | None:
    """The relations' column names (bare, as each leaf renames them), where each is
    known as the statement is compiled; else None."""
    if isinstance(tree, Leaf):
        names = tree.select.output_names()
        if names is None:
            return None
        return tree.colnames + names[len(tree.colnames):]
    left, right = bare_columns(tree.left), bare_columns(tree.right)
    return None if left is None or right is None else left + right


def outer_refs(tree) -> dict:
    """The enclosing query's columns (name -> ColumnRef) that a correlated
    subquery's relations read (a relation in FROM sees no other of its level)."""
    if isinstance(tree, Leaf):
        return dict(zip(tree.select.outer_refs, tree.select.outer_columns()))
    return {**outer_refs(tree.left), **outer_refs(tree.right)}


def plan_tree(tree, ctx, params, outer: dict | None = None):
    """The tree planned: (plan node, its qualified column names in order); `outer`:
    a correlated subquery's outer row."""
    if isinstance(tree, Leaf):
        inner = tree.select.plan(ctx, params, outer)
        names = renamed(tree.alias, inner.plan.find(Output).columns, tree.colnames)
        node = Derived(tree.alias, inner.plan, tuple(names), inner=inner)
        return node, [f"{tree.alias}.{n}" for n in names]
    left, lkeys = plan_tree(tree.left, ctx, params, outer)
    right, rkeys = plan_tree(tree.right, ctx, params, outer)
    keys, residual, key_text = [], [], []
    if tree.on is not None:
        on = resolve(tree.on, lkeys + rkeys)
        for c in conjuncts(on):
            pair = _key_pair(c, set(lkeys), set(rkeys))
            if pair is None:
                residual.append(c)
            else:
                keys.append(pair)
                key_text.append(f"{E.describe(pair[0])} = {E.describe(pair[1])}")
    res = None
    for c in residual:
        res = c if res is None else E.Op("and", (res, c))
    node = Join(tree.kind, tuple(key_text), None if res is None else E.describe(res),
                tuple(lkeys + rkeys), legs=(left, right), key_exprs=tuple(keys),
                residual_expr=res)
    return node, lkeys + rkeys


def where_keys(node, where) -> None:
    """WHERE's equalities between two relations of an inner or cross join (reached
    through inner and cross joins only) become that join's hash keys too, so
    `FROM a, b WHERE a.k = b.k` pairs equal keys instead of every row. WHERE
    still tests them: the answer is the same, the pairs fewer."""
    if where is None or not isinstance(node, Join):
        return
    try:
        found = conjuncts(resolve(where, list(node.columns)))
    except SqlError:            # (Bound has said what is wrong with the names)
        return
    inner = []
    todo = [node]
    while todo:
        j = todo.pop()
        if isinstance(j, Join) and j.kind in ("inner", "cross"):
            inner.append(j)
            todo.extend(j.legs)
    for c in found:
        for j in inner:
            ncols = len(j.legs[0].columns)     # (a subquery's bare names, a join's qualified)
            pair = _key_pair(c, set(j.columns[:ncols]), set(j.columns[ncols:]))
            if pair is not None:
                j.key_exprs = j.key_exprs + (pair,)
                j.keys = j.keys + (f"{E.describe(pair[0])} = {E.describe(pair[1])}",)
                j.kind = "inner"
                break


def read_only(node, reads: set) -> None:
    """Tell each Join of a planned tree the columns read above it (`reads`:
    qualified or bare names; None: all), so it gathers no others for its pairs. A
    subquery's joins are its own (their reads are its statement's, told as it is
    planned): only this level's joins, reached through join legs, are told."""
    joins, todo = [], [node]
    while todo:
        n = todo.pop()
        if isinstance(n, Join):
            joins.append(n)
            todo.extend(n.legs)
    if reads is None or not joins:
        return
    unique, _ = bare_names(node.columns)
    needed = {unique.get(name, name) for name in reads}
    for j in joins:
        for a, b in j.key_exprs:
            needed |= E.columns_of(a) | E.columns_of(b)
        if j.residual_expr is not None:
            needed |= E.columns_of(j.residual_expr)
    for j in joins:
        j.needed = frozenset(needed)


def bare_names(keys) -> tuple[dict, set]:
    """Qualified column names → (bare name → the one qualified name, the bare
    names that several relations have)."""
    unique, ambiguous = {}, set()
    for k in keys:
        name = k.split(".", 1)[1]
        if name in unique:
            ambiguous.add(name)
        unique[name] = k
    for name in ambiguous:
        del unique[name]
    return unique, ambiguous


def resolve(e, keys: list):
    """An expression's column names as the relations' qualified ones."""
    unique, ambiguous = bare_names(keys)
    counts = Counter(keys)          # (x(a, b) over a column b: x.b is two columns)
    known = {k for k, c in counts.items() if c == 1}

    def sub(n):
        if not isinstance(n, E.Col) or n.name.startswith("$"):
            return None
        if n.name in keys and n.name not in known:
            raise SqlError("42702", f'column reference "{n.name}" is ambiguous')
        if n.name in known:
            return n
        if "." in n.name:
            raise SqlError("42703", f"column {n.name} does not exist")
        if n.name in ambiguous:
            raise SqlError("42702", f'column reference "{n.name}" is ambiguous')
        if n.name not in unique:
            raise SqlError("42703", f'column "{n.name}" does not exist')
        return E.Col(unique[n.name])
    return E.rewrite(e, sub)


def conjuncts(e) -> list:
    if isinstance(e, E.Op) and e.op == "and":
        return [x for a in e.args for x in conjuncts(a)]
    return [e]


def _key_pair(c, left: set, right: set):
    """(left expr, right expr) where `c` is an equality of one side's columns with
    the other's, else None."""
    if not (isinstance(c, E.Op) and c.op == "=" and len(c.args) == 2):
        return None
    a, b = c.args
    ca, cb = E.columns_of(a), E.columns_of(b)
    if not ca or not cb:
        return None
    if ca <= left and cb <= right:
        return a, b
    if ca <= right and cb <= left:
        return b, a
    return None


def compile_set_op(stmt: ast.SelectStmt, ctes: dict, make_select: Callable) -> tuple:
    """UNION [ALL]'s two sides, each compiled as a SELECT (or a set operation)."""
    if stmt.op != SetOperation.SETOP_UNION:
        raise NotSupportedError(f"{'INTERSECT' if stmt.op == SetOperation.SETOP_INTERSECT else 'EXCEPT'}"
                                " is not supported (UNION is)")
    return ("setop", bool(stmt.all), make_select(stmt.larg, ctes), make_select(stmt.rarg, ctes))


def plan_set_op(source, ctx, params, outer: dict | None = None) -> tuple:
    """The set operation planned: (SetOp node, its column names)."""
    _, all_rows, left, right = source
    legs, names = [], None
    for i, sel in enumerate((left, right)):
        inner = sel.plan(ctx, params, outer)
        cols = inner.plan.find(Output).columns
        if names is None:
            names = tuple(cols)
        elif len(cols) != len(names):
            raise SqlError("42601", "each UNION query must have the same number of columns")
        legs.append(Derived(f"union leg {i + 1}", inner.plan, tuple(cols), inner=inner))
    return SetOp("union", all_rows, names, legs=tuple(legs)), names
