"""SELECT: a compiled statement that plans itself onto the query layer.

Compiling (once per statement text) turns the pglast tree into expression
trees and decides the statement's shape; planning (every run) binds it to
the table's current schema and a snapshot and builds plan nodes
(query/plan.py), which query/execute.py runs. The shapes:

* `ORDER BY vec <op> q LIMIT k` (op one of <-> <#> <=> <+>, q a constant or
  parameter): a Search request (query/request.py) bound as the Python API's
  is (query/bind.py's bind_legs, its Project left off), so it walks the HNSW graph with the filter mask, widens or falls back exactly
  as the Python API's search does. The distance in the select list is the
  top-k's score, not computed twice.
* otherwise: Scan → Filter/Where → Aggregate → Sort → Limit → Output, or with
  DISTINCT: ... → Output → Distinct → Sort → Limit.

WHERE uses the where= filter grammar (query/filter.py: scalar indexes, text
codes) when it can express the clause and its values, else the expression
evaluator (Where).
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Callable

import numpy as np
from pglast import ast
from pglast.enums import SetOperation, SortByDir, SortByNulls

from ..errors import NotSupportedError, SqlError, VarveError
from ..query import expr as E
from . import pg_catalog
from ..query.execute import execute
from ..query.filter import Filter as GrammarFilter, Refusal, expressed as grammar_expressed
from ..query.plan import (Aggregate, Derived, Distinct, FunctionScan, Limit, Output,
                          ProjectSet, Sort, VectorTopK, Where, Window)
from ..query.bind import bind_legs, search_widths
from ..query.prepared import keep, query_vector, typed_key
from ..query.planner import Query, plan_scan, plan_search
from ..query.aggregate import groups
from ..query.relations import concat, take_or_null
from ..query.request import RRF_K, Search, TextLeg, VectorLeg
from ..schema import brief
from ..text.tsquery import varvedb_text
from . import relations
from .expressions import Scope, convert, deparse, output_name
from .index_exprs import derived_field, expr_text, implies, index_expr
from ..results import SqlResult


class Select:
    """`columns_of`: a table's column names by its name (None: not known). As
    compiled once per text it is None, and a bare name in a subquery is its own
    level's; a statement with subqueries is compiled again when it is planned, with
    its tables' columns (`_resolved`), so a bare name is the innermost level's that
    has it, as in PostgreSQL (`EXISTS (SELECT 1 FROM w WHERE m > n)`, n the outer
    table's)."""

    def __init__(self, stmt: ast.SelectStmt, ctes: dict | None = None,
                 outer: Scope | None = None, columns_of: Callable | None = None):
        self._given = (stmt, ctes, outer, columns_of)
        self._variant = None        # (the tables' schemas it read, the Select _resolved made)
        if stmt.intoClause or stmt.lockingClause or stmt.windowClause:
            raise NotSupportedError("SELECT INTO, FOR UPDATE and WINDOW are not supported")
        # WITH name AS [NOT] MATERIALIZED (SELECT ...): each name is a subquery in FROM
        # (pgvector's relaxed-order idiom re-orders an ANN query this way)
        self.ctes = dict(ctes or {})
        if stmt.withClause is not None:
            if stmt.withClause.recursive:
                raise NotSupportedError("WITH RECURSIVE is not supported")
            for cte in stmt.withClause.ctes:
                if not isinstance(cte.ctequery, ast.SelectStmt):
                    raise NotSupportedError("a WITH query is a SELECT")
                query = cte.ctequery
                if cte.aliascolnames:       # WITH t (a, b) AS (...): its columns renamed
                    query = ast.SelectStmt(
                        targetList=(ast.ResTarget(val=ast.ColumnRef(fields=(ast.A_Star(),))),),
                        fromClause=(ast.RangeSubselect(subquery=query, alias=ast.Alias(
                            aliasname=cte.ctename, colnames=cte.aliascolnames)),),
                        op=SetOperation.SETOP_NONE)
                self.ctes[cte.ctename] = query
        self.subqueries: dict[int, Select] = {}
        stmt = relations.inline_functions(stmt)
        set_op = stmt.op != SetOperation.SETOP_NONE
        self._from_refs = {}
        self._renames = None        # (alias, column names) of FROM x AS alias (a, b, ...)
        # its FROM's columns' names where they are known as it is compiled (a
        # pg_catalog relation's; with columns_of, a table's and what is made of them)
        self._columns = None
        if set_op:          # UNION: its rows are this level's FROM (sql/relations.py)
            self.source = relations.compile_set_op(
                stmt, self.ctes, partial(Select, outer=outer, columns_of=columns_of))
            self._names = set()
            self._columns = self.source[2].output_names()
            for leg in self.source[2:]:
                self._from_refs.update(zip(leg.outer_refs, leg.outer_columns()))
        elif stmt.valuesLists:
            self.source = self._values(stmt.valuesLists, outer)
        else:
            self.source = self._source(stmt.fromClause, outer, columns_of)
        scope = Scope(self._names, self._add_subquery, qualified=self.source[0] == "join",
                      outer=outer, columns=self._columns)
        scope.outer_refs.update(self._from_refs)
        self._scope = scope
        self.targets = []                          # ("*", qualifier or None) or (name, expr)
        if set_op or stmt.valuesLists:
            self.targets.append(("*", None))
        for rt in stmt.targetList or ():
            v = rt.val
            if isinstance(v, ast.ColumnRef) and isinstance(v.fields[-1], ast.A_Star):
                qualifier = v.fields[0].sval if len(v.fields) == 2 else None
                if qualifier is not None and qualifier not in self._names:
                    raise SqlError("42P01", f'missing FROM-clause entry for table "{qualifier}"')
                self.targets.append(("*", qualifier))
            else:
                self.targets.append((rt.name or output_name(v), convert(v, scope)))
        self.where = stmt.whereClause
        self.where_expr = None if stmt.whereClause is None else convert(stmt.whereClause, scope)
        self.where_text = None if stmt.whereClause is None else deparse(stmt.whereClause)
        self.where_grammar = grammar_root(stmt.whereClause, self.where_text) \
            if not scope.outer_refs else None      # (the grammar reads no outer value)
        self.distinct = stmt.distinctClause is not None
        if self.distinct and any(d is not None for d in stmt.distinctClause):
            raise NotSupportedError("DISTINCT ON is not supported")
        self.group = [self._ref_or_expr(g, scope) for g in (stmt.groupClause or ())]
        self.having = None if stmt.havingClause is None else convert(stmt.havingClause, scope)
        self.having_text = None if stmt.havingClause is None else deparse(stmt.havingClause)
        self.order = []                            # (expr or target ref, desc, nulls_first, text)
        for sb in stmt.sortClause or ():
            if sb.useOp:
                raise NotSupportedError("ORDER BY ... USING is not supported")
            nulls = {SortByNulls.SORTBY_NULLS_FIRST: True,
                     SortByNulls.SORTBY_NULLS_LAST: False}.get(sb.sortby_nulls)
            self.order.append((self._ref_or_expr(sb.node, scope),
                               sb.sortby_dir == SortByDir.SORTBY_DESC, nulls, deparse(sb))
                              )
        if set_op and any(o[0][0] == "expr" for o in self.order):
            raise NotSupportedError("invalid UNION/INTERSECT/EXCEPT ORDER BY clause: only "
                                    "result column names or positions can be used")
        self.limit = None if stmt.limitCount is None else convert(stmt.limitCount, scope)
        self.offset = None if stmt.limitOffset is None else convert(stmt.limitOffset, scope)
        self.outer_refs = list(scope.outer_refs)   # the enclosing query's columns it reads
        self.rows_only = False                     # EXISTS's: its rows, not a column
        self._bound = None                          # (schema, Bound) of the last run

    # ---- compiling ---------------------------------------------------------------

    def _source(self, from_clause, outer, columns_of):
        self._names = set()
        if not from_clause:
            return ("none",)
        if relations.is_join(from_clause):
            tree, self._names = relations.compile_from(
                from_clause, self.ctes, partial(Select, outer=outer, columns_of=columns_of))
            self._from_refs = relations.outer_refs(tree)
            self._columns = relations.bare_columns(tree)
            return ("join", tree)
        f = from_clause[0]
        colnames = relations.column_aliases(getattr(f, "alias", None))
        if colnames:        # AS alias (a, b, ...): the relation's first columns renamed
            self._renames = (f.alias.aliasname, colnames)
        if isinstance(f, ast.RangeVar) and f.schemaname is None and f.relname in self.ctes:
            alias = f.alias.aliasname if f.alias else f.relname
            self._names = {alias}       # (an alias hides the name it stands for)
            sub = Select(self.ctes[f.relname], self.ctes, columns_of=columns_of)
            self._columns = _known(sub.output_names(), f.alias)
            return ("derived", sub, alias)
        if isinstance(f, ast.RangeVar) and colnames:    # a table's: a derived table
            self._names = {f.alias.aliasname}
            sub = Select(relations.star_select(f), self.ctes, outer=outer,
                         columns_of=columns_of)
            return ("derived", sub, f.alias.aliasname)
        if isinstance(f, ast.RangeVar) and f.relname in pg_catalog.RELATIONS \
                and f.schemaname in (None, "pg_catalog"):     # pg_catalog is searched first
            alias = f.alias.aliasname if f.alias else f.relname
            self._names = {alias}
            self._columns = self._renamed(pg_catalog.RELATIONS[f.relname][0])
            return ("function", f.relname, ())
        if isinstance(f, ast.RangeVar):
            if f.schemaname not in (None, "public"):
                raise SqlError("42P01", f'relation "{f.schemaname}.{f.relname}" does not exist')
            self._names = {f.alias.aliasname if f.alias else f.relname}
            self._columns = _known(columns_of(f.relname) if columns_of else None, f.alias)
            return ("table", f.relname)
        if isinstance(f, ast.RangeSubselect):
            if f.lateral:
                raise NotSupportedError("LATERAL is not supported")
            alias = f.alias.aliasname if f.alias is not None else "subquery"
            self._names = {alias}
            sub = Select(f.subquery, self.ctes, outer=outer,   # (not LATERAL: not this level)
                         columns_of=columns_of)
            self._from_refs = sub._scope.outer_refs
            self._columns = _known(sub.output_names(), f.alias)
            return ("derived", sub, alias)
        if isinstance(f, ast.RangeFunction):
            call = f.functions[0][0]
            name = call.funcname[-1].sval.lower()
            # its arguments may read the outer row (a subquery's) and hold subqueries
            scope = self._scope = Scope(set(), self._add_subquery, outer=outer)
            args = tuple(convert(a, scope) for a in (call.args or ()))
            self._from_refs = scope.outer_refs
            alias = f.alias.aliasname if f.alias else name
            self._names = {alias}
            return ("function", name, args, alias)
        raise NotSupportedError(f"FROM {type(f).__name__} is not supported")

    def _values(self, rows, outer):
        """VALUES (...), (...): a relation of constant rows, its columns column1 ..."""
        scope = Scope(set(), outer=outer)
        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise SqlError("42601", "VALUES lists must all be the same length")
        self._names = set()
        values = tuple(tuple(convert(x, scope) for x in r) for r in rows)
        self._from_refs = scope.outer_refs
        return ("values", values)

    def _renamed(self, names) -> list:
        """The FROM relation's column names, under its AS alias (a, b, ...) if any."""
        return list(names) if self._renames is None else relations.renamed(
            self._renames[0], names, self._renames[1])

    def _add_subquery(self, stmt, rows_only: bool = False) -> tuple[int, list]:
        """A subquery's key, and the ColumnRefs of this level's columns it reads
        (rows_only: EXISTS's, which reads how many rows it has, of any columns)."""
        key = len(self.subqueries)
        sub = self.subqueries[key] = Select(stmt, self.ctes, outer=self._scope,
                                            columns_of=self._given[3])
        sub.rows_only = rows_only
        return key, sub.outer_columns()

    def output_names(self) -> tuple | None:
        """Its output columns' names where they are known as it is compiled."""
        names = []
        for t in self.targets:
            if t[0] != "*":
                names.append(t[0])
            elif t[1] is not None or self._columns is None:
                return None         # (x.*, or * of columns not known yet)
            else:
                names.extend(c.split(".", 1)[-1] for c in self._columns)
        return tuple(names)

    def _resolved(self, ctx) -> "Select":
        """This statement compiled with its tables' columns, so that its
        subqueries' bare names find their level."""
        stmt, ctes, outer, _ = self._given
        return with_columns(self, ctx, lambda columns_of: Select(stmt, ctes, outer, columns_of))

    def outer_columns(self) -> list:
        """The enclosing query's columns this subquery reads, as ColumnRefs (in the
        order its runner takes their values)."""
        return [self._scope.outer_refs[name] for name in self.outer_refs]

    def _ref_or_expr(self, node, scope):
        """GROUP BY / ORDER BY item: an output position (int), an output name, or an
        expression (resolved against the select list when the statement is bound)."""
        if isinstance(node, ast.A_Const) and not node.isnull \
                and isinstance(node.val, ast.Integer):
            return ("position", node.val.ival)
        if isinstance(node, ast.ColumnRef) and len(node.fields) == 1 \
                and isinstance(node.fields[0], ast.String):
            return ("name", node.fields[0].sval)
        return ("expr", convert(node, scope))

    # ---- planning ------------------------------------------------------------------

    def plan(self, ctx, params, outer: dict | None = None) -> Query:
        """`outer`: a correlated subquery's outer row (name -> a one-row Val)."""
        if self.subqueries and self._given[2] is None and self._given[3] is None:
            return self._resolved(ctx).plan(ctx, params, outer)
        env = subquery_env(self.subqueries, ctx, params, outer)
        kind = self.source[0]
        table = None
        if kind == "table":
            table = ctx.table(self.source[1])
            b = self._bind(table, table.schema)
        elif kind == "derived":
            inner = self.source[1].plan(ctx, params, outer)
            names = self._renamed(inner.plan.find(Output).columns)
            b = self._bind(None, tuple(names))
        elif kind == "join":
            rel_node, names = relations.plan_tree(self.source[1], ctx, params, outer)
            b = self._bind(None, tuple(names))
            relations.read_only(rel_node, b.reads(self))
            relations.where_keys(rel_node, self.where_expr)
        elif kind == "setop":
            rel_node, names = relations.plan_set_op(self.source, ctx, params, outer)
            b = self._bind(None, tuple(names))
        else:
            cols, names = self._function_rows(ctx, env)
            names = self._renamed(names)
            b = self._bind(None, tuple(names))
        snap = ctx.snapshot()
        if kind == "table":
            where = None if self.where_expr is None else self._where_bound(table, env)
            if b.vector is not None:
                query = self._plan_vector(ctx, b, snap, table, where, env)
                if isinstance(query, Query):
                    return query
                b = query                   # no top-k: each distance evaluated
            if b.text is not None or b.hybrid is not None:
                return self._plan_text(ctx, b, snap, table, where, env)
            node, masks = plan_scan(snap, table, where)
        elif kind in ("derived", "join", "setop"):
            node = Derived(self.source[2], inner.plan, tuple(names), inner=inner) \
                if kind == "derived" else rel_node
            masks = {}
            if self.where_expr is not None:
                node = Where(self.where_text, node, expr=self.where_expr)
        else:
            node = FunctionScan(self.source[1] if kind == "function" else
                                "VALUES" if kind == "values" else "one row",
                                tuple(names), len(cols[0]) if cols else 1,
                                cols={**{f"$c{i}": c for i, c in enumerate(cols)},
                                      **dict(zip(names, cols))})
            masks = {}
            if self.where_expr is not None:
                node = Where(self.where_text, node, expr=self.where_expr)
        node = self._shape(b, node, env)
        return Query(node, snap, table, masks, env)

    def _plan_text(self, ctx, b, snap, table, where, env) -> Query:
        """ORDER BY bm25(...) DESC → the text top-k; rrf(...) DESC → it fused with the
        vector top-k, each leg finding max(LIMIT + OFFSET, 50) rows."""
        (tfield, q_expr) = b.text if b.text is not None else b.hybrid[0]
        q = self._constant(q_expr, env)
        if not isinstance(q, str):
            raise SqlError("42883", f"bm25()'s query is text, got {brief(q)}")
        limit, offset = self._limit_offset(env)
        k = snap.n(table) if limit is None else limit + offset
        vector, rrf_k = None, RRF_K
        if b.hybrid is not None:
            (vfield, metric, v_expr), k_expr = b.hybrid[1], b.hybrid[2]
            rrf_k = RRF_K if k_expr is None else self._constant(k_expr, env)
            if type(rrf_k) is not int or not 1 <= rrf_k <= 10**6:
                raise SqlError("22023", f"rrf()'s k is an integer in 1..1000000, got "
                                        f"{brief(rrf_k)}")
            vector = VectorLeg(vector=self._query_vector(table.schema.fields[vfield], v_expr,
                                                         env, f"vector {metric}"),
                               field=vfield, metric=metric)
        request = Search(vector=vector, text=TextLeg(text=q, field=tfield), limit=k,
                         rrf_k=rrf_k, where=where)
        return self._output(b, bind_legs(request, table, snap, ctx.session.settings), limit,
                            offset, env)

    def _output(self, b, query: Query, limit, offset, env) -> Query:
        """A search's legs, cut to LIMIT/OFFSET, under the statement's Output."""
        node = query.plan
        if b.windows:       # (ranks over the top-k's order: the same over its rows)
            node = _window_node(b, node)
        if offset or limit is None:
            node = Limit(limit, node, offset)
        query.plan = Output(tuple(b.names), node, exprs=tuple(b.exprs))
        query.env = env
        return query

    @staticmethod
    def _constant(e, env):
        """A constant or parameter's value (it reads no column)."""
        v = E.evaluate(e, E.Rel(None, None, n=1), env)
        if v.kind == "unknown":
            v = E.coerce(v, "text")
        if v.kind == "tsquery" and not v.nulls[0]:     # bm25(col, to_tsquery(...)): as written
            return varvedb_text(v.data[0])
        return None if v.nulls[0] else v.python()[0]

    def _query_vector(self, f, q_expr, env, what, null_ok=False):
        """The query vector an ORDER BY names, as given (bind coerces it); None for
        a NULL one where null_ok (its distances are all NULL, as in PostgreSQL)."""
        q = None
        if type(q_expr) is E.Param and 1 <= q_expr.index <= len(env.params):
            q = env.params[q_expr.index - 1]       # the common case: a vector parameter
            if not isinstance(q, (np.ndarray, list, tuple)):
                q = None
        if q is None and isinstance(q_expr, E.Func) and q_expr.name == "embed" \
                and len(q_expr.args) == 1 and f.embed is not None:
            q_expr = E.Func("embed", (q_expr.args[0], E.Const(f.embed)))   # this field's
        if q is None:
            qv = E.evaluate(q_expr, E.Rel(None, None, n=1), env)
            if qv.kind == "unknown":
                qv = E.coerce(qv, "vector")
            if null_ok and (qv.kind == "null" or qv.nulls[0]):
                return None
            if qv.kind != "vector" or qv.nulls[0]:
                raise SqlError("42883", f"operator does not exist: {what} {qv.kind}")
            q = qv.data[0]
        return q

    def _plan_vector(self, ctx, b, snap, table, where, env) -> "Query | Bound":
        """The vector top-k's plan; or, where a top-k cannot answer, the Bound to
        plan without one: a NULL query vector's (every distance NULL), or one whose
        LIMIT + OFFSET reaches past the rows with a vector to rows without one
        (their NULL distances sort last, as PostgreSQL's do)."""
        fname, metric, q_expr = b.vector
        f = table.schema.fields[fname]
        expr = getattr(b, "vector_expr", None)
        # <~> is bit's, and bit has only it (an index expression's operator is its own)
        if expr is None and (f.dtype == "bit") != (metric == "hamming"):
            raise SqlError("42883", f"operator does not exist: "
                                    f"{'bit' if f.dtype == 'bit' else 'vector'} {b.vector_op} "
                                    f"{'bit' if f.dtype != 'bit' else 'vector'}")
        if expr is not None or any(getattr(s, "where", None) for s in f.vector_specs):
            return self._plan_index_expr(ctx, b, snap, table, where, env)
        q = self._query_vector(f, q_expr, env, f"vector {b.vector_op}", null_ok=True)
        if q is None:
            return b.without_top_k(sort=False)
        # A statement run again at the same state with only its query vector changed
        # reuses its plan, masks and strategy (query/prepared.py), as the API does
        # (`_kept_run` finds it before anything is bound; this, on a branch's head).
        session = ctx.session
        key = state = None
        skip = -1
        # (not a correlated subquery's: its WHERE's mask changes with the outer row;
        # not one planned to be described: its plan is run over no rows)
        if not self.subqueries and ctx.as_of is None and session.tx is None and snap.final \
                and not b.windows and not self.outer_refs and not ctx.describing:
            skip = q_expr.index - 1 if type(q_expr) is E.Param else -1
            key = self._kept_key(session, env.params, skip)
            state = (snap.version, session.branch_id)
            try:
                kept = table.prepared.get(key)
            except TypeError:       # a list among the other parameters: bound each time
                kept = key = None
            if kept is not None and kept.state == state:
                return kept.with_vector(query_vector(f, q), env)
        limit, offset = self._limit_offset(env)
        k = snap.n(table) if limit is None else limit + offset
        request = Search(vector=VectorLeg(vector=q, field=fname, metric=metric), limit=k,
                         where=where)
        query = self._output(b, bind_legs(request, table, snap, session.settings), limit,
                             offset, env)
        if _reaches_nulls(query, k, snap, table, fname, where):
            return b.without_top_k(sort=True)
        # (not when the WHERE reads the vector's parameter: its mask would change)
        if key is not None and (skip < 0 or f"Param(index={skip + 1})"
                                not in repr(self.where_expr)):
            keep(table.prepared, key, state, query)
        return query

    def _plan_index_expr(self, ctx, b, snap, table, where, env) -> "Query | Bound":
        """The vector top-k of a field with an index on an expression or a partial
        one (sql/index_exprs.py): over the expression's values when the ORDER BY
        ranks by it, and through a partial index only when the WHERE implies its
        predicate (else exactly). Not kept (query/prepared.py): planned each time.
        As _plan_vector, the Bound to plan without a top-k where one cannot answer."""
        fname, metric, q_expr = b.vector
        f = table.schema.fields[fname]
        expr = b.vector_expr
        target = f if expr is None else derived_field(f, expr[0])
        q = self._query_vector(target, q_expr, env, f"vector {b.vector_op}", null_ok=True)
        if q is None:
            return b.without_top_k(sort=False)
        q = query_vector(target, q)
        limit, offset = self._limit_offset(env)
        k = snap.n(table) if limit is None else limit + offset
        session = ctx.session
        widths = search_widths(None, None, session.settings)
        query = plan_search(snap, table, fname, metric, q, k, where, widths, False,
                            expr=expr or (), implies=lambda conditions: implies(
                                self.where_expr, conditions, table.schema.fields, env))
        if _reaches_nulls(query, k, snap, table, fname, where):
            return b.without_top_k(sort=True)       # (an expression of NULL is NULL)
        return self._output(b, query, limit, offset, env)

    def _kept_key(self, session, params, skip: int) -> tuple:
        """A vector statement's key in the table's kept plans: the statement, its
        parameters but the query vector's (`skip`), each with its type (1, 1.0 and
        True are equal keys but not equal parameters: int = bool is refused), the
        session's settings."""
        return ("sql", self, tuple(typed_key(p) for i, p in enumerate(params) if i != skip),
                tuple(session.settings.items()))

    def _kept_run(self, ctx, params) -> Query | None:
        """The kept plan of this statement run with a new query vector, found before
        anything is bound or a snapshot taken, at the newest state of main; None:
        plan it (which finds kept plans on a branch's head too)."""
        got = self._bound
        if got is None or self.subqueries or ctx.as_of is not None \
                or self.source[0] != "table":
            return None
        schema, b = got
        if b.vector is None or type(b.vector[2]) is not E.Param or b.windows:
            return None
        session = ctx.session
        table = ctx.table(self.source[1])
        skip = b.vector[2].index - 1
        if table.schema is not schema or session.tx is not None \
                or not 0 <= skip < len(params):
            return None
        q = params[skip]
        if not isinstance(q, (np.ndarray, list, tuple)):
            return None
        try:
            kept = table.prepared.get(self._kept_key(session, params, skip))
        except TypeError:       # a list among the other parameters: bound each time
            return None
        if kept is None or kept.state != session.read_state():
            return None
        return kept.with_vector(query_vector(schema.fields[b.vector[0]], q),
                                E.Env(params, {}, ctx.snapshot))

    def _shape(self, b, node, env):
        limit, offset = self._limit_offset(env)
        if b.aggregates is not None:
            groups, aggs, having = b.aggregates
            node = Aggregate(tuple(t for t, _ in groups), tuple(t for t, _ in aggs), node,
                             self.having_text, group_exprs=tuple(e for _, e in groups),
                             agg_exprs=tuple(e for _, e in aggs), having_expr=having)
        if b.windows:
            node = _window_node(b, node)
        if b.sets:
            node = ProjectSet(tuple(E.describe(f) for f in b.sets), node, exprs=tuple(b.sets))
        if self.distinct:
            node = Output(tuple(b.names), node, exprs=tuple(b.exprs))
            node = Distinct(node)
        if b.sort:
            node = Sort(tuple(t for *_, t in b.sort), node,
                        key_exprs=tuple((e, d, nf) for e, d, nf, _ in b.sort))
        if limit is not None or offset:
            node = Limit(limit, node, offset)
        if not self.distinct:
            node = Output(tuple(b.names), node, exprs=tuple(b.exprs))
        return node

    def _limit_offset(self, env) -> tuple[int | None, int]:
        limit = None if self.limit is None else _count_value(self.limit, env, "LIMIT")
        offset = None if self.offset is None else _count_value(self.offset, env, "OFFSET")
        return limit, offset or 0

    def _where_bound(self, table, env):
        bound = WhereBound(self.where_text, self.where_expr, self.where_grammar, table.schema,
                           env)
        if bound.grammar is None:
            paths = E.full_text_paths(self.where_expr, table)
            if paths:
                bound.expr = f"{bound.expr} [{'; '.join(paths)}]"
        return bound

    def _function_rows(self, ctx, env):
        if self.source[0] == "none":          # SELECT without FROM: one row, no columns
            return [], []
        if self.source[0] == "values":
            one = E.Rel(None, None, n=1)
            rows = self.source[1]
            cols = [concat([E.evaluate(r[i], one, env) for r in rows], "VALUES")
                    for i in range(len(rows[0]))]
            return cols, [f"column{i + 1}" for i in range(len(cols))]
        name, args = self.source[1], self.source[2]
        if name in pg_catalog.RELATIONS:
            names, cols = pg_catalog.relation_rows(name, ctx)
            return cols, names
        if name in E.SET_FUNCTIONS:
            return [_set_column(name, args, env)], [self.source[3]]
        if name != "varvedb_history":
            raise SqlError("42883", f"function {name}() does not exist")
        vals = [E.evaluate(a, E.Rel(None, None, n=1), env).python()[0] for a in args]
        from .history import history_rows
        names, cols = history_rows(ctx, vals)
        return cols, names

    def _bind(self, table, schema) -> "Bound":
        """Bound to a table's schema (or a subquery's column names): kept until they change."""
        cached = self._bound
        if cached is not None and (cached[0] is schema or cached[0] == schema):
            return cached[1]
        ambiguous = set()
        if table is not None:
            source_cols = list(schema.columns)
            known = set(schema.columns)
        elif self.source[0] == "join":      # alias.column, and each unambiguous bare name
            source_cols = list(schema)
            unique, ambiguous = relations.bare_names(source_cols)
            twice = _twice(source_cols)     # (x(a, b) over a column b: x.b is two)
            known = set(source_cols) - twice | set(unique)
            ambiguous |= twice
        else:       # a name two columns have (x(a, b) over a column b) is ambiguous
            source_cols = list(schema)
            ambiguous = _twice(source_cols)
            known = set(source_cols) - ambiguous
        b = Bound(self, source_cols, known, table, ambiguous)
        self._bound = (schema, b)
        return b

    # ---- running ---------------------------------------------------------------------

    def run(self, ctx, params) -> SqlResult:
        query = self._kept_run(ctx, params) or self.plan(ctx, params)
        return result_of(execute(query), _output_columns(query))

    def planned(self, ctx, params) -> SqlResult:
        """Its columns' names and types as a result without rows, the statement not
        run: its plan run over no rows (query.types_only: no table's rows read, no
        expression evaluated on a value, so that none can fail or cost), of no
        kind where that fails (sql's describe_read: the wire's Describe)."""
        ctx.describing = True       # (its subqueries' plans too; no plan kept)
        query = self.plan(ctx, params)
        names = _output_columns(query)
        query.types_only = True
        try:
            return result_of(execute(query), names)
        except VarveError:
            return SqlResult(list(names), [], "SELECT 0")


def _output_columns(query: Query) -> tuple:
    top = query.plan
    return (top if type(top) is Output else top.find(Output)).columns


def _set_column(name: str, args: tuple, env) -> E.Val:
    """A set-returning function in FROM (unnest(array), generate_series(a, b [, step])):
    its rows' one column (a series made by numpy)."""
    got = E.set_function_rows(E.Func(name, args), E.Rel(None, None, n=1), env)[0]
    if isinstance(got, range):
        rows = np.arange(got.start, got.stop, got.step, dtype=np.int64)
        return E.Val("int", rows, np.zeros(len(rows), bool))
    return concat([E.const_val(x, 1) for x in got], name) if got else \
        E.Val("null", None, np.ones(0, bool))


def _window_node(b, node):
    return Window(tuple(E.describe(w) for w in b.windows), node, exprs=tuple(b.windows))


def subquery_env(subqueries: dict, ctx, params, outer: dict | None = None) -> E.Env:
    """The parameters, and each `x IN (SELECT ...)` subquery's one column, run
    first on the statement's snapshot; a correlated subquery's is its runner
    (outer row -> its column) and the outer names it takes."""
    env = E.Env(params, {}, ctx.snapshot, outer, pg_catalog.Catalog(ctx))
    for key, sub in subqueries.items():
        if sub.outer_refs:
            env.subqueries[key] = partial(_correlated, sub, ctx, params)
        else:
            env.subqueries[key] = _column(sub, ctx, params, outer)
    return env


def _column(sub: Select, ctx, params, outer: dict | None = None) -> E.Val:
    query = sub.plan(ctx, params, outer)
    query.types_only = ctx.describing       # (described, not run: over no rows)
    res = execute(query)
    if sub.rows_only:
        return E.Val("null", None, np.ones(res.count, bool))
    if len(res.columns) != 1:
        raise SqlError("42601", "subquery has too many columns")
    return res.columns[0]


def _correlated(sub: Select, ctx, params, outer: list, fold, n: int) -> E.Val:
    """A correlated subquery's value over n outer rows (`outer`: the values it reads,
    in the order of its outer_refs): it runs once for each distinct combination
    of them (PostgreSQL's SubPlan runs once a row), `fold` making each answer
    one value (scalar or array), each row taking its combination's."""
    group, _, first = groups(outer, n)      # (equal outer values: one group, NULLs too)
    answers = [fold(_column(sub, ctx, params, {name: v.take(np.array([r]))
                                               for name, v in zip(sub.outer_refs, outer)}))
               for r in first.tolist()]
    if not answers:     # no outer rows (a Describe's: over none): its type's NULLs
        return _typed_nulls(sub, ctx, params, outer, fold, n)
    return concat(answers, "subquery").take(group)


def _typed_nulls(sub: Select, ctx, params, outer: list, fold, n: int) -> E.Val:
    """A correlated subquery's answer over no outer rows: NULLs of the type it has
    (it planned and run once, its outer values NULLs of theirs), so that a
    Describe announces that type, as PostgreSQL's does; of no type where that
    fails."""
    try:
        one = fold(_column(sub, ctx, params, {name: take_or_null(v, np.array([-1]))
                                              for name, v in zip(sub.outer_refs, outer)}))
    except VarveError:
        return E.const_val(None, n)
    return take_or_null(one, np.full(n, -1))


def with_columns(owner, ctx, make: Callable):
    """`make(columns_of)`: a statement compiled again with its tables' columns
    (`columns_of(name)`: a table's column names, None where there is no such
    table), kept in `owner._variant` while those tables' schemas stay."""
    got = owner._variant
    if got is not None and all(_schema(ctx, name) is schema for name, schema in got[0]):
        return got[1]
    seen = {}

    def columns_of(name):
        schema = seen[name] = _schema(ctx, name)
        return None if schema is None else tuple(schema.columns)
    made = make(columns_of)
    owner._variant = (tuple(seen.items()), made)
    return made


def _schema(ctx, name: str):
    """Table `name`'s schema, or None where there is none (refused when planned)."""
    try:
        return ctx.table(name).schema
    except SqlError:
        return None


def _known(names: tuple | None, alias) -> tuple | None:
    """A lone relation's column names, as a subquery's bare names are resolved
    against them; None (not known: its own level's) under `AS alias (a, b, ...)`."""
    return None if alias is not None and alias.colnames else names


def _reaches_nulls(query: Query, k: int, snap, table, field: str, where) -> bool:
    """Whether a vector top-k of `k` rows reaches past the rows with a vector
    (`query`'s VectorTopK chooses among those) to a row the statement reads
    (visible, WHERE true) whose `field` is NULL."""
    if k <= query.plan.find(VectorTopK).allowed:
        return False
    mask, rows = snap.visible(table, None)
    valued, with_vector = snap.visible(table, field)      # (counts cached per version)
    if rows == with_vector:
        return False
    if where is None:
        return True
    return bool((mask & ~valued & where.mask(table, snap.n(table))).any())


def grammar_root(node, text):
    """The where= grammar's tree of a WHERE clause, or None where the grammar
    cannot express it (functions, arithmetic, subqueries: the evaluator's)."""
    if node is None:
        return None
    try:
        got = grammar_expressed(node, text)
    except RecursionError:      # nested past Python's stack: the evaluator's too
        return None
    return None if type(got) is Refusal else got


# the most rows a SELECT's result may have, and what refuses one past it, where a
# caller set them (`rows_at_most`: the HTTP server's result cap): refused from its
# count, before its rows are made as Python values (many times its arrays' size)
_ROWS_AT_MOST: ContextVar = ContextVar("varvedb_sql_rows_at_most", default=None)


@contextmanager
def rows_at_most(n: int, refuse: Callable[[int], None]):
    """Within it, a SELECT answering more than `n` rows calls `refuse(its rows)`
    (which raises) before its rows are made."""
    token = _ROWS_AT_MOST.set((n, refuse))
    try:
        yield
    finally:
        _ROWS_AT_MOST.reset(token)


def _twice(names) -> set:
    """The names that several of the columns have."""
    seen: set = set()
    return {n for n in names if n in seen or seen.add(n)}


def result_of(res, names) -> SqlResult:
    cap = _ROWS_AT_MOST.get()
    if cap is not None and res.count > cap[0]:
        cap[1](res.count)
    cols = [v.python() for v in res.columns]
    rows = list(zip(*cols)) if cols else [() for _ in range(res.count)]
    kinds = [None if v.kind in ("null", "unknown") else v.kind for v in res.columns]
    return SqlResult(list(names), rows, f"SELECT {len(rows)}", plan=res.plan, kinds=kinds,
                     elements=E.declared_types(res.columns))


def _count_value(e, env, what: str) -> int | None:
    """A LIMIT or OFFSET: a non-negative integer (None: NULL, no limit)."""
    v = e.value if type(e) is E.Const else None
    if type(v) is int and v >= 0:      # the common case, without building a Val
        return v
    v = E.evaluate(e, E.Rel(None, None, n=1), env)
    if v.nulls[0]:
        return None
    if v.kind == "unknown":
        v = E.coerce(v, "int")
    if v.kind == "float":
        v = E.Val("int", E.round_half_away(v.data), v.nulls)
    if v.kind != "int":
        raise SqlError("42804", f"argument of {what} must be type bigint, not type {v.kind}")
    n = int(v.data[0])
    if n < 0:
        raise SqlError("2201W" if what == "LIMIT" else "2201X", f"{what} must not be negative")
    return n


class WhereBound:
    """A WHERE clause over a table, compiled once into the form that fits it: the
    filter grammar's (indexes, text codes) when the grammar expresses the clause
    and its values fit the schema (query/filter.py's Filter.bound says so before
    anything runs), else the expression evaluator's."""
    __slots__ = ("expr", "tree", "grammar", "env")

    def __init__(self, text, tree, root, schema, env):
        self.expr = text
        self.tree = tree
        self.env = env
        if schema.id_hidden and "id" in E.columns_of(tree):
            # a table declared without a key: its hidden one has no name in SQL
            raise SqlError("42703", 'column "id" does not exist')
        self.grammar = None if root is None else \
            GrammarFilter.bound(text, root, schema, env.params)

    def id_key(self):
        return None if self.grammar is None else self.grammar.id_key()

    def mask(self, table, n: int) -> np.ndarray:
        if self.grammar is not None:
            return self.grammar.mask(table, n)
        return E.truth(E.evaluate(self.tree, E.Rel(table, np.arange(n, dtype=np.int64)),
                                  self.env))


class Bound:
    """A Select bound to a source's columns: expanded *, validated names, the
    vector top-k (if the ORDER BY is one), aggregates and sort keys."""

    def __init__(self, sel: Select, source_cols: list, known: set, table,
                 ambiguous: set = frozenset()):
        self.names, self.exprs = [], []
        self.ambiguous = ambiguous          # a join's bare names that several relations have
        join = sel.source[0] == "join"
        for t in sel.targets:
            if t[0] == "*":
                cols = source_cols
                if join:                    # alias.column: all, or the qualifier's (x.*)
                    cols = [c for c in cols if t[1] is None or c.split(".", 1)[0] == t[1]]
                if join and ambiguous.intersection(cols):
                    raise NotSupportedError("* over a join where a relation has two "
                                            "columns of one name is not supported")
                self.names.extend(c.split(".", 1)[1] if join else c for c in cols)
                # (a name two columns have: each read by its position)
                self.exprs.extend(E.Col(f"$c{i}" if c in ambiguous else c)
                                  for i, c in enumerate(cols))
            else:
                self.names.append(t[0])
                self.exprs.append(t[1])
        self.sets = []              # the select list's set-returning calls: ProjectSet's
        self.exprs = [E.rewrite(e, self._set_call) for e in self.exprs]
        self._check_names(sel, known)
        order = [(self._resolve(o, known, "ORDER BY"), d, nf, text)
                 for o, d, nf, text in sel.order]
        plain = list(self.exprs)
        self._shape_order(sel, known, table, order)
        if self.sets and (self.aggregates is not None or sel.distinct or self.vector
                          is not None or self.text is not None or self.hybrid is not None):
            raise NotSupportedError("set-returning functions in a select list with "
                                    "aggregates, DISTINCT or a top-k are not supported")
        self.windows = []
        if any(E.has_window(e) for e in self.exprs) or \
                any(E.has_window(e) for e, *_ in self.sort):
            self._bind_windows(plain, order)

    def _set_call(self, e):
        """A set-returning call (unnest(...) ...) -> the column `$s<i>` of ProjectSet;
        one nested in another's arguments is refused, as PostgreSQL's grammar does
        for one in an aggregate's."""
        if isinstance(e, E.Func) and e.name in E.SET_FUNCTIONS:
            if any(isinstance(x, E.Func) and x.name in E.SET_FUNCTIONS
                   for a in e.args for x in E.walk(a)):
                raise NotSupportedError("nested set-returning functions are not supported")
            self.sets.append(e)
            return E.Col(f"$s{len(self.sets) - 1}")
        return None

    def reads(self, sel: Select) -> set:
        """The column names the statement reads of its FROM (bare or qualified)."""
        exprs = list(self.exprs) + [e for e, *_ in self.sort] + list(self.windows) + \
            list(self.sets)
        if self.aggregates is not None:
            groups, aggs, having = self.aggregates
            exprs += [e for _, e in groups] + [e for _, e in aggs]
            exprs += [] if having is None else [having]
        if sel.where_expr is not None:
            exprs.append(sel.where_expr)
        return {n for e in exprs for n in E.columns_of(e) if not n.startswith("$")}

    def _bind_windows(self, plain: list, order: list) -> None:
        """Each window function a column `$w<i>` of the Window node. Over a vector
        top-k only ranks in the top-k's own order (no PARTITION BY): those are the
        same over its rows as over the table's; else no top-k (the rows sorted)."""
        score = (E.Col("$score"), False)
        if self.text is not None or self.hybrid is not None or (
                self.vector is not None and any(
                    w.partition or [o[:2] for o in w.order] != [score]
                    or w.order[0][2] not in (None, False)
                    for e in self.exprs for w in E.walk(e) if isinstance(w, E.Window))):
            self.exprs, self.sort = plain, order
            self.vector = self.vector_op = self.distance = self.text = self.hybrid = None
        windows = self.windows

        def sub(n):
            if isinstance(n, E.Window):
                if any(isinstance(x, E.Window) for x in E.walk(n) if x is not n):
                    raise SqlError("42P20", "window function calls cannot be nested")
                if n not in windows:
                    windows.append(n)
                return E.Col(f"$w{windows.index(n)}")
            return None
        self.exprs = [E.rewrite(e, sub) for e in self.exprs]
        self.sort = [(E.rewrite(e, sub), d, nf, text) for e, d, nf, text in self.sort]

    def _shape_order(self, sel: Select, known: set, table, order) -> None:
        self.vector = None
        self.vector_op = None
        self.distance = None        # the ORDER BY distance expression the top-k replaced
        self.text = None              # ORDER BY bm25(col, q) DESC: (field, query expr)
        self.hybrid = None            # ORDER BY rrf(bm25(...), vec <op> q [, k]) DESC
        self.aggregates = None
        aggregating = bool(sel.group) or any(E.has_aggregate(e) for e in self.exprs) or \
            sel.having is not None or any(E.has_aggregate(e) for e, *_ in order)
        if aggregating:
            self._bind_aggregates(sel, known, order)
            return
        if sel.distinct:
            self.sort = [(self._target_col(e), d, nf, text) for e, d, nf, text in order]
            return
        vec = self._vector_order(order, table)
        if vec is not None:
            return
        if self._text_order(order, table):
            return
        self.sort = order

    def _check_names(self, sel: Select, known: set) -> None:
        exprs = list(self.exprs) + list(self.sets)
        if sel.where_expr is not None:
            exprs.append(sel.where_expr)
        for e in exprs:
            for name in E.columns_of(e):
                if name not in known and not name.startswith("$"):
                    self._unknown(name)

    def _unknown(self, name: str):
        if name in self.ambiguous:
            raise SqlError("42702", f'column reference "{name}" is ambiguous')
        raise SqlError("42703", f'column "{name}" does not exist' if "." not in name
                       else f"column {name} does not exist")

    def _resolve(self, item, known: set, clause: str):
        kind, v = item
        if kind == "position":
            if not 1 <= v <= len(self.exprs):
                raise SqlError("42P10", f"{clause} position {v} is not in select list")
            return self.exprs[v - 1]
        if kind == "name":
            if v in self.names and (clause == "ORDER BY" or v not in known):
                named = [e for name, e in zip(self.names, self.exprs) if name == v]
                if any(e != named[0] for e in named):   # (PostgreSQL's: two of one name)
                    raise SqlError("42702", f'{clause} "{v}" is ambiguous')
                return named[0]
            if v not in known:
                self._unknown(v)
            return E.Col(v)
        for name in E.columns_of(v):
            if name not in known:
                self._unknown(name)
        return v

    def _target_col(self, e):
        for i, t in enumerate(self.exprs):
            if t == e:
                return E.Col(f"$o{i}")
        raise SqlError("42P10", "for SELECT DISTINCT, ORDER BY expressions must appear in "
                                "select list")

    def _vector_order(self, order, table):
        """ORDER BY vec <op> q [ASC] [NULLS LAST]: the vector top-k (NULLS FIRST or
        DESC: a sort, the NULL distances first)."""
        if len(order) != 1 or order[0][1] or order[0][2] or table is None:
            return None
        e = order[0][0]
        self.vector = self._distance_call(e, table)
        self.vector_expr = None
        if self.vector is None:
            self.vector, self.vector_expr = self._index_expr_call(e, table)
            if self.vector is None:
                return None
        self.vector_op = e.op
        self.distance = e
        self.vector_sort = order[0]
        score = E.Col("$score")
        self.exprs = [E.rewrite(x, lambda n: score if n == e else None) for x in self.exprs]
        self.sort = []
        return self.vector

    def without_top_k(self, sort: bool) -> "Bound":
        """This without the vector top-k: each distance evaluated (as PostgreSQL
        does); `sort`: the rows sorted by it, NULL distances as the ORDER BY says
        (else in scan order: a NULL query vector's distances are all NULL)."""
        b = copy.copy(self)
        score, e = E.Col("$score"), self.distance
        b.exprs = [E.rewrite(x, lambda n: e if n == score else None) for x in self.exprs]
        b.windows = [E.rewrite(w, lambda n: e if n == score else None) for w in self.windows]
        b.vector = b.vector_op = None
        if sort:
            b.sort = [self.vector_sort]
        return b

    def _text_order(self, order, table) -> bool:
        """ORDER BY bm25(col, q) DESC (a text top-k) or rrf(bm25(col, q), vec <op> q2
        [, k]) DESC (the two fused): the score replaces that call in the select list."""
        if len(order) != 1 or not order[0][1] or table is None:
            return False
        e = order[0][0]
        if not isinstance(e, E.Func) or e.name not in ("bm25", "rrf"):
            return False
        text = self._bm25_call(e if e.name == "bm25" else e.args[0] if e.args else None, table)
        if text is None:
            return False
        if e.name == "bm25":
            self.text = text
        else:
            if not 2 <= len(e.args) <= 3:
                return False
            vec = self._distance_call(e.args[1], table)
            if vec is None:
                return False
            self.hybrid = (text, vec, e.args[2] if len(e.args) == 3 else None)
        score = E.Col("$score")
        self.exprs = [E.rewrite(x, lambda n: score if n == e else None) for x in self.exprs]
        self.sort = []
        return True

    @staticmethod
    def _bm25_call(e, table):
        """(field, query expr) of bm25(fts_col, q) with a constant or parameter q."""
        if not (isinstance(e, E.Func) and e.name == "bm25" and len(e.args) == 2
                and isinstance(e.args[0], E.Col) and not E.columns_of(e.args[1])):
            return None
        f = table.schema.fields.get(e.args[0].name)
        if f is not None and not f.fts:     # said here: rrf() would blame its own shape
            raise SqlError("42883", f'column "{e.args[0].name}" has no full-text index '
                                    "(vv.Text(fts=True))")
        return (e.args[0].name, e.args[1]) if f is not None else None

    @staticmethod
    def _index_expr_call(e, table):
        """((field, metric, query expr), (expr, its text)) of `x <op> q` where x is the
        expression the field's HNSW index is on (sql/index_exprs.py) and the
        operator its metric's; else (None, None): the ORDER BY sorts the values."""
        if not (isinstance(e, E.Op) and e.op in E.OPERATOR_METRICS):
            return None, None
        a, b = e.args
        if E.columns_of(b):
            a, b = b, a
        if E.columns_of(b) or isinstance(a, E.Col):
            return None, None
        try:
            got = index_expr(a, table.schema.fields)
        except VarveError:      # (not one an index can hold: evaluated as written)
            return None, None
        if got is None:
            return None, None
        fname, expr = got
        if expr is None:        # a cast to the column's own type: the column itself
            return Bound._distance_call(E.Op(e.op, (E.Col(fname), b)), table), None
        f = table.schema.fields[fname]
        metric = E.OPERATOR_METRICS[e.op]
        if not any(getattr(s, "expr", None) == expr and s.metric == metric
                   for s in f.vector_specs):
            return None, None
        return (fname, metric, b), (expr, expr_text(fname, expr, f.dim))

    @staticmethod
    def _distance_call(e, table):
        """(field, metric, query expr) of `vec <op> q` with q not reading the table."""
        if not (isinstance(e, E.Op) and e.op in E.OPERATOR_METRICS):
            return None     # (<%>, jaccard: no index or scan kernel; ORDER BY sorts it)
        a, b = e.args
        if isinstance(b, E.Col) and not isinstance(a, E.Col):
            a, b = b, a
        if not isinstance(a, E.Col) or E.columns_of(b):
            return None
        f = table.schema.fields.get(a.name)
        if f is None or f.kind != "vector":
            return None
        if isinstance(b, E.Cast) and b.kind == "vector" and isinstance(b.arg, E.Param) \
                and b.dim in (None, f.dim):
            b = b.arg       # `$1::vector`: the parameter itself, so the kept plan serves it
        return (a.name, E.OPERATOR_METRICS[e.op], b)

    def _bind_aggregates(self, sel: Select, known: set, order) -> None:
        groups = []
        for g in sel.group:
            e = self._resolve(g, known, "GROUP BY")
            if E.has_aggregate(e):
                raise SqlError("42803", "aggregate functions are not allowed in GROUP BY")
            groups.append(e)
        aggs: list = []

        def sub(n):
            for i, g in enumerate(groups):
                if n == g:
                    return E.Col(f"$g{i}")
            if isinstance(n, E.Agg):
                if n.arg is not None and E.has_aggregate(n.arg):
                    raise SqlError("42803", "aggregate function calls cannot be nested")
                if n not in aggs:
                    aggs.append(n)
                return E.Col(f"$a{aggs.index(n)}")
            if isinstance(n, E.Col) and not n.name.startswith("$"):
                raise SqlError("42803", f'column "{n.name}" must appear in the GROUP BY clause '
                                        "or be used in an aggregate function")
            return None

        self.exprs = [E.rewrite(e, sub) for e in self.exprs]
        having = None if sel.having is None else E.rewrite(sel.having, sub)
        if sel.distinct:
            self.sort = [(self._target_col(e), d, nf, text) for e, d, nf, text in order]
        else:
            self.sort = [(E.rewrite(e, sub), d, nf, text) for e, d, nf, text in order]
        self.aggregates = ([(E.describe(g), g) for g in groups],
                           [(E.describe(a), a) for a in aggs], having)
