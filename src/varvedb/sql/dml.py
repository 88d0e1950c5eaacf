"""INSERT, UPDATE, DELETE (each with RETURNING) and COPY (FROM a file or STDIN, TO STDOUT).

Values are evaluated by query/expr.py and converted to each column's kind
the way PostgreSQL assigns them (a quoted literal through the type's input
function, a float rounded into an integer column, a number into text as
its text), then validated by schema.py like any Python API write, and
written by the same engine verbs, in the session's transaction. A
statement that raises has written nothing: its writes share one
transaction, and a statement inside BEGIN that fails leaves the block
failed (25P02) until ROLLBACK, as in PostgreSQL.
"""
from __future__ import annotations

import contextlib
import csv
import io
import itertools
import os
import re
import stat
import struct

import numpy as np
from pglast import ast, parse_sql
from pglast.enums import OnConflictAction

from ..errors import DimensionError, NotNullViolationError, NotSupportedError, SqlError
from ..query import array_columns, expr as E
from ..schema import coerce_ids, coerce_values, from_micros
from .expressions import Scope, convert, literal, output_name
from ..results import SqlResult
from .select import Select
from ..query.literals import parse_input, value_text
from ..query.pg_binary import column_oid, encoder, receive as pg_receive
from ..query.pg_types import OIDS

_DEFAULT = object()        # a DEFAULT in VALUES, or a column the INSERT leaves out


def compile_statement(stmt):
    if isinstance(stmt, ast.InsertStmt):
        return Insert(stmt)
    if isinstance(stmt, ast.UpdateStmt):
        return Update(stmt)
    if isinstance(stmt, ast.DeleteStmt):
        return Delete(stmt)
    if isinstance(stmt, ast.CopyStmt):
        return Copy(stmt)
    return None


def _table_names(rv: ast.RangeVar) -> set:
    """The name the target table answers to: its alias where it has one (which
    hides the table's name, as in PostgreSQL)."""
    return {rv.alias.aliasname if rv.alias else rv.relname}


def _returning(clause, scope) -> list | None:
    if clause is None:
        return None
    out = []
    for rt in clause.exprs:
        v = rt.val
        if isinstance(v, ast.ColumnRef) and isinstance(v.fields[-1], ast.A_Star):
            out.append(("*",))
        else:
            out.append((rt.name or output_name(v), convert(v, scope)))
    return out


def returning_result(items, t, rows: np.ndarray, env, status: str) -> SqlResult:
    if items is None:
        return SqlResult([], [], status, rowcount=len(rows))
    names, exprs = [], []
    for it in items:
        if it[0] == "*":
            cols = list(t.schema.columns)
            names += cols
            exprs += [E.Col(c) for c in cols]
        else:
            names.append(it[0])
            exprs.append(it[1])
    rel = E.Rel(t, np.asarray(rows, np.int64))
    vals = [E.evaluate(e, rel, env) for e in exprs]
    out = list(zip(*(v.python() for v in vals))) if vals else [()] * len(rows)
    kinds = [None if v.kind in ("null", "unknown") else v.kind for v in vals]
    return SqlResult(names, out, status, rowcount=len(rows), kinds=kinds,
                     elements=E.declared_types(vals))


def returning_columns(impl, ctx, params) -> SqlResult | None:
    """A write's RETURNING columns as a result without rows, the write not run (what
    the wire's Describe of its statement answers); None: it returns no rows."""
    if getattr(impl, "returning", None) is None:
        return None
    return returning_result(impl.returning, ctx.table(impl.table), np.empty(0, np.int64),
                            E.Env(params), "")


def column_kind(schema, name: str) -> str:
    """What a column takes: its field's kind, or `array:<element type>` for a column
    of arrays (a json field with array_of), or the id's kind."""
    if name == "id":
        return schema.id_kind
    f = schema.fields[name]
    return f"array:{f.array_of}" if f.array_of is not None else f.kind


def assignable(kind: str, v: E.Val, column: str) -> list:
    """A Val as Python values for a column of `kind` (PostgreSQL's assignment casts)."""
    if v.kind == "null":
        return [None] * len(v)
    if kind.startswith("array:"):       # an array, or its text form, of the element type
        if v.kind not in ("array", "unknown", "text"):
            raise SqlError("42804", f'column "{column}" is of type {kind[6:]}[] but '
                                    f"expression is of type {v.kind}")
        return [array_columns.stored(kind[6:], x) for x in E.raw_values(v)]
    if v.kind == "unknown":
        v = E.coerce(v, kind)
    elif kind == "float" and v.kind == "int":
        v = E.coerce(v, "float")
    elif kind == "int" and v.kind == "float":
        v = E.Val("int", E.round_half_away(v.data), v.nulls)
    elif kind == "text" and v.kind != "text":
        v = E.evaluate(E.Cast("text", E.Given(v)), E.Rel(None, None, n=len(v)), E.Env())
    elif kind == "json" and v.kind == "text":
        v = E.coerce(E.Val("unknown", v.data, v.nulls), "json")
    elif kind == "json" and v.kind in ("int", "float", "bool"):
        v = E.Val("json", np.array(v.python(), dtype=object), v.nulls)
    elif kind == "sparsevec" and v.kind == "vector":      # pgvector's assignment cast
        v = E.evaluate(E.Cast("sparsevec", E.Given(v)), E.Rel(None, None, n=len(v)), E.Env())
    if v.kind != kind:
        raise SqlError("42804", f'column "{column}" is of type {kind} but expression is of '
                                f"type {v.kind}")
    if kind == "int":
        v = E.int64_of(v)       # an exact sum past int64: 22003, as PostgreSQL assigns it
    if kind == "timestamp":
        from ..schema import from_micros
        return [None if nl else from_micros(x) for x, nl in zip(v.data.tolist(), v.nulls)]
    if kind == "vector":
        return [None if nl else np.asarray(x) for x, nl in zip(v.data, v.nulls)]
    return v.python()


_NO_FAST = object()


def assign_python(kind: str, v):
    """A literal or parameter as a value for a column of `kind`, for the common
    cases (the rest, _NO_FAST, go through `assignable`); schema.py validates it after."""
    t = type(v)
    if v is None:
        return None
    if kind.startswith("array:"):
        return array_columns.stored(kind[6:], v) if t in (str, list, tuple) else _NO_FAST
    if t is str:
        if kind == "text":
            return v
        parsed = parse_input(kind, v)
        if kind == "timestamp":
            return from_micros(parsed)
        return parsed
    if kind == "int" and t is int:
        return v
    if kind == "float" and (t is float or t is int):
        return float(v)
    if kind == "bool" and t is bool:
        return v
    if kind == "vector" and (t is np.ndarray or t is list or t is tuple):
        return v
    if kind == "json" and t in (dict, list, int, float, bool):
        return v
    if kind == "bytes" and t is bytes:
        return v
    return _NO_FAST


# ---- INSERT -----------------------------------------------------------------------

_MORE_TARGETS = "INSERT has more target columns than expressions"


class Insert:
    def __init__(self, stmt: ast.InsertStmt):
        self.table = stmt.relation.relname
        self.columns = [c.name for c in stmt.cols] if stmt.cols else None
        if stmt.withClause is not None:
            raise NotSupportedError("WITH is not supported")
        sel = stmt.selectStmt
        scope = Scope(_table_names(stmt.relation))
        self.values = None
        self.select = None
        if sel is None:
            self.values = [[]]               # INSERT ... DEFAULT VALUES
        elif sel.valuesLists:
            self.values = [[_DEFAULT if isinstance(x, ast.SetToDefault) else
                            E.Const(literal(x)) if isinstance(x, ast.A_Const) else
                            convert(x, scope) for x in row] for row in sel.valuesLists]
            if len({len(row) for row in self.values}) > 1:
                raise SqlError("42601", "VALUES lists must all be the same length")
            if self.columns is not None and len(self.values[0]) < len(self.columns):
                raise SqlError("42601", _MORE_TARGETS)
        else:
            from .select import Select
            self.select = Select(sel)
        self.conflict = None
        oc = stmt.onConflictClause
        self.on_id = oc is not None and oc.infer is not None   # ON CONFLICT (id)
        if oc is not None:
            if oc.infer is not None:
                keys = [e.name for e in oc.infer.indexElems or ()]
                if keys != ["id"]:
                    raise NotSupportedError("ON CONFLICT is on the id column: ON CONFLICT (id)")
            if oc.action == OnConflictAction.ONCONFLICT_NOTHING:
                self.conflict = ("nothing",)
            else:
                if oc.infer is None:
                    raise SqlError("42601", "ON CONFLICT DO UPDATE requires inference "
                                            "specification or constraint name")
                if oc.whereClause is not None:
                    raise NotSupportedError("ON CONFLICT DO UPDATE ... WHERE is not supported")
                uscope = Scope(scope.names | {"excluded"}, unqualified=[])
                sets = []
                for rt in oc.targetList:
                    sets.append((rt.name, _DEFAULT if isinstance(rt.val, ast.SetToDefault)
                                 else convert(rt.val, uscope)))
                _once_each(sets)
                self.conflict = ("update", sets, uscope.unqualified)
        self.returning = _returning(stmt.returningClause, scope)

    def run(self, ctx, params) -> SqlResult:
        t = ctx.table(self.table)
        schema = t.schema
        order = schema.columns
        columns = self.columns or order
        for c in columns:
            if c not in schema.fields and not (c == "id" and not schema.id_hidden):
                raise SqlError("42703", f'column "{c}" of relation "{self.table}" does not exist')
        if len(set(columns)) != len(columns):
            raise SqlError("42701", "column specified more than once")
        if self.on_id and schema.id_hidden:      # a table made with no id column
            raise SqlError("42703", 'column "id" does not exist')
        if self.conflict is not None and self.conflict[0] == "update":
            _check_unqualified(self.conflict[2], schema)
        env = E.Env(params)
        rows = self._rows(ctx, columns, params, env, t)
        s = ctx.session
        # rows that do not depend on what the lock reads (no ON CONFLICT) are
        # coerced and embedded before it is taken: the model never runs under it
        ahead = None
        with _in_postgres_words(schema, rows):
            if self.conflict is None and rows:
                from ..collection import Collection
                ahead = Collection(s.db, t.name, s).prepare_rows(rows)
            with s.writing() as tx:
                t = ctx.table(self.table)
                written, updated = _insert_rows(ctx, tx, t, rows, self.conflict, env, ahead)
                # RETURNING inside the transaction: a failing expression undoes the rows
                return returning_result(self.returning, t, written, env,
                                        f"INSERT 0 {len(written)}")

    def _rows(self, ctx, columns, params, env, t) -> list[dict]:
        schema = t.schema
        kinds = {c: column_kind(schema, c) for c in columns}
        one = E.Rel(None, None, n=1)
        if self.select is not None:
            from ..query.execute import execute
            q = self.select.plan(ctx, params)
            res = execute(q)
            if len(res.columns) > len(columns):
                raise SqlError("42601", "INSERT has more expressions than target columns")
            if self.columns is not None and len(res.columns) < len(columns):
                raise SqlError("42601", _MORE_TARGETS)
            cols = [assignable(kinds[c], v, c) for c, v in zip(columns, res.columns)]
            return [dict(zip(columns, r)) for r in zip(*cols)]
        out = []
        for row in self.values:
            if len(row) > len(columns):
                raise SqlError("42601", "INSERT has more expressions than target columns")
            d = {}
            for c, x in zip(columns, row):
                if x is _DEFAULT:
                    if c != "id":         # an id left out is assigned
                        d[c] = schema.fields[c].default_value()
                    continue
                kind = kinds[c]
                # a literal or a parameter (nearly every VALUES item): no Val built
                tx = type(x)
                if tx is E.Const:
                    v = assign_python(kind, x.value)
                elif tx is E.Param and 1 <= x.index <= len(params):
                    v = assign_python(kind, params[x.index - 1])
                else:
                    v = _NO_FAST
                if v is _NO_FAST:
                    v = assignable(kind, E.evaluate(x, one, env), c)[0]
                d[c] = v
            out.append(d)
        return out


def _insert_rows(ctx, tx, t, rows: list[dict], conflict, env, ahead=None
                 ) -> tuple[np.ndarray, int]:
    """Write the rows (after ON CONFLICT); the row numbers written, in input order.
    `ahead`: the rows as Collection.prepare_rows made them before the lock."""
    from ..collection import Collection
    schema = t.schema
    # a key is never NULL: one that is required must be given, and a serial one
    # given NULL is refused too (only its absence, or DEFAULT, assigns it)
    if any(r.get("id") is None and (schema.id_required or "id" in r) for r in rows):
        raise SqlError("23502", f'null value in column "id" of relation "{t.name}" '
                                "violates not-null constraint")
    coll = Collection(ctx.session.db, t.name, ctx.session)
    if conflict is not None:
        _check_proposed(t, rows)
    if conflict is None:
        if not rows:
            return t.live_rows([]), 0
        ids = coll.insert_prepared(tx, ahead if ahead is not None else coll.prepare_rows(rows))
        return t.live_rows(list(ids)), 0
    given = [r.get("id") for r in rows]
    keys = list(coerce_ids(schema, [g for g in given if g is not None]))
    keys = iter(k.item() if hasattr(k, "item") else k for k in keys)
    fresh, clashing, seen = [], [], set()
    order = []                  # per input row: ("new", i) / ("old", i) / None (skipped)
    for r, g in zip(rows, given):
        key = None if g is None else next(keys)
        if key is not None and (key in seen or key in t.live):
            if conflict[0] == "update" and key in seen:
                raise SqlError("21000", "ON CONFLICT DO UPDATE command cannot affect row a "
                                        "second time")
            order.append(("old", len(clashing)) if conflict[0] == "update" else None)
            clashing.append((key, r))
        else:
            order.append(("new", len(fresh)))
            fresh.append(r)
        if key is not None:
            seen.add(key)
    written = []
    if fresh:
        written = list(coll.insert(fresh))
    if conflict[0] == "nothing" or not clashing:
        return t.live_rows(written), 0
    # DO UPDATE: SET evaluated over the existing rows, EXCLUDED.* the proposed ones
    sets = conflict[1]
    keys = [k for k, _ in clashing]
    old = t.live_rows(keys)
    rel = E.Rel(t, old)
    for name, f in schema.fields.items():
        kind = f.kind
        # EXCLUDED is the row proposed: a column the INSERT leaves out holds its default
        proposed = [r[name] if name in r else f.default_value() for _, r in clashing]
        vals, nulls = coerce_values(name, schema.fields[name], proposed)
        rel.cols[f"excluded.{name}"] = _val_of(kind, vals, nulls)
    rel.cols["excluded.id"] = E.Val(schema.id_kind if schema.id_kind != "text" else "text",
                                    np.array(keys, dtype=object if schema.id_kind == "text"
                                             else np.int64), np.zeros(len(keys), bool))
    values = {}
    for name, x in sets:
        if name == "id" and not schema.id_hidden:
            raise NotSupportedError("the id of a row cannot be updated")
        f = schema.fields.get(name)
        if f is None:
            raise SqlError("42703", f'column "{name}" of relation "{t.name}" does not exist')
        if x is _DEFAULT:
            values[name] = [f.default_value() for _ in range(len(old))]
        else:
            values[name] = assignable(column_kind(schema, name), E.evaluate(x, rel, env), name)
    rewrite_rows(ctx, tx, t, old, values)
    # RETURNING lists rows in the order the VALUES gave them
    out = [written[i] if side == "new" else keys[i] for side, i in filter(None, order)]
    return t.live_rows(out), len(keys)


def _once_each(sets: list) -> None:
    """A SET assigns each column once (PostgreSQL refuses a second before running)."""
    seen = set()
    for name, _ in sets:
        if name in seen:
            raise SqlError("42601", f'multiple assignments to same column "{name}"')
        seen.add(name)


def _check_unqualified(names: list, schema) -> None:
    """ON CONFLICT DO UPDATE names a column unqualified: the table's or EXCLUDED's
    (PostgreSQL refuses it before anything runs)."""
    for name in names:
        if name in schema.fields or name == "id" and not schema.id_hidden:
            raise SqlError("42702", f'column reference "{name}" is ambiguous')
        raise SqlError("42703", f'column "{name}" does not exist')


def _check_proposed(t, rows: list[dict]) -> None:
    """Every row an INSERT ... ON CONFLICT proposes keeps NOT NULL, the rows that
    conflict too (PostgreSQL checks a row before it looks for its conflict)."""
    for name, f in t.schema.fields.items():
        if f.not_null and any((r[name] if name in r else f.default) is None for r in rows):
            raise NotNullViolationError(f'null value in column "{name}" of relation '
                                        f'"{t.name}" violates not-null constraint')


@contextlib.contextmanager
def _in_postgres_words(schema, rows: list[dict]):
    """A vector of another dimension refused in PostgreSQL's words, "expected 3
    dimensions, not 2" (schema.py's are the embedded API's; 22000 either way)."""
    try:
        yield
    except DimensionError as e:
        if type(e) is not DimensionError:       # (a bit string's length: its own words)
            raise
        for r in rows:
            for name, v in r.items():
                f = schema.fields.get(name)
                if f is None or f.kind != "vector" or v is None:
                    continue
                try:
                    shape = np.shape(v)
                except ValueError:      # a ragged list: no shape, schema.py's words
                    continue
                if len(shape) == 1 and shape[0] != f.dim:
                    raise DimensionError(f"expected {f.dim} dimensions, not "
                                         f"{shape[0]}") from None
        raise


def _val_of(kind: str, vals, nulls) -> E.Val:
    if kind == "sparsevec":         # coerce_values' blobs: a column holds its block
        from ..sparse import SparseBlock
        return E.Val(kind, SparseBlock.of_blobs(vals), np.asarray(nulls, bool))
    if isinstance(vals, list):
        return E.Val(kind, E.object_array(vals), np.asarray(nulls, bool))
    return E.Val(kind, vals, np.asarray(nulls, bool))


def rewrite_rows(ctx, tx, t, rows: np.ndarray, values: dict[str, list]) -> None:
    """New versions of live `rows` with `values` (column -> one value per row) set."""
    schema = t.schema
    with _in_postgres_words(schema, [{name: v} for name, vs in values.items() for v in vs]):
        cols = {name: coerce_values(name, schema.fields[name], vals)
                for name, vals in values.items()}
    ctx.engine.rewrite(tx, t, np.asarray(rows, np.int64), cols)


# ---- UPDATE and DELETE ------------------------------------------------------------

class _Targeted:
    """UPDATE and DELETE: the live rows their WHERE clause picks. `columns_of` as
    sql/select.py's Select takes it: one with subqueries is compiled again when it
    runs, with its tables' columns, so a subquery's bare name may be the target
    table's column (`WHERE EXISTS (SELECT 1 FROM w WHERE m = n)`, n the table's)."""

    def _init(self, stmt, columns_of):
        self._given = (stmt, columns_of)
        self._variant = None
        self.table = stmt.relation.relname
        if getattr(stmt, "fromClause", None) or getattr(stmt, "usingClause", None):
            raise NotSupportedError("UPDATE ... FROM and DELETE ... USING are not supported")
        if stmt.withClause is not None:
            raise NotSupportedError("WITH is not supported")
        from .expressions import deparse
        from .select import Select, grammar_root
        self.scope = Scope(_table_names(stmt.relation), self._add_subquery,
                           columns=None if columns_of is None or stmt.relation.alias
                           and stmt.relation.alias.colnames else columns_of(self.table))
        self.subqueries: dict = {}
        self._Select = Select
        self.where = None if stmt.whereClause is None else convert(stmt.whereClause, self.scope)
        self.where_text = None if stmt.whereClause is None else deparse(stmt.whereClause)
        self.where_grammar = grammar_root(stmt.whereClause, self.where_text)
        self.returning = _returning(stmt.returningClause, self.scope)

    def _add_subquery(self, node, rows_only: bool = False) -> tuple[int, list]:
        key = len(self.subqueries)
        sub = self.subqueries[key] = self._Select(node, outer=self.scope,
                                                  columns_of=self._given[1])
        sub.rows_only = rows_only
        return key, sub.outer_columns()

    def _resolved(self, ctx):
        """This statement to run: compiled again with its tables' columns where it
        has subqueries (sql/select.py's with_columns), else itself."""
        stmt, columns_of = self._given
        if not self.subqueries or columns_of is not None:
            return self
        from .select import with_columns
        return with_columns(self, ctx, lambda c: type(self)(stmt, c))

    def _env(self, ctx, params) -> E.Env:
        from .select import subquery_env
        return subquery_env(self.subqueries, ctx, params)

    def _rows(self, ctx, t, env) -> np.ndarray:
        snap = ctx.snapshot()
        mask, _ = snap.visible(t)
        if self.where is None:
            return np.flatnonzero(mask)
        from .select import WhereBound
        bound = WhereBound(self.where_text, self.where, self.where_grammar, t.schema, env)
        return np.flatnonzero(mask & bound.mask(t, snap.n(t)))


class Update(_Targeted):
    def __init__(self, stmt: ast.UpdateStmt, columns_of=None):
        self._init(stmt, columns_of)
        self.sets = []
        for rt in stmt.targetList:
            if rt.indirection:
                raise NotSupportedError("UPDATE of a part of a column is not supported")
            self.sets.append((rt.name, _DEFAULT if isinstance(rt.val, ast.SetToDefault)
                              else convert(rt.val, self.scope)))
        _once_each(self.sets)

    def run(self, ctx, params) -> SqlResult:
        run = self._resolved(ctx)
        if run is not self:
            return run.run(ctx, params)
        s = ctx.session
        with s.writing() as tx:
            t = ctx.table(self.table)
            schema = t.schema
            for name, _ in self.sets:
                if name == "id" and not schema.id_hidden:
                    raise NotSupportedError("the id of a row cannot be updated")
                if name not in schema.fields:
                    raise SqlError("42703", f'column "{name}" of relation "{self.table}" does '
                                            "not exist")
            env = self._env(ctx, params)
            rows = self._rows(ctx, t, env)
            rel = E.Rel(t, rows)
            values = {}
            for name, x in self.sets:
                f = schema.fields[name]
                if x is _DEFAULT:
                    values[name] = [f.default_value() for _ in range(len(rows))]
                else:
                    values[name] = assignable(column_kind(schema, name),
                                              E.evaluate(x, rel, env), name)
            ids = t.id_values(rows)
            if len(rows):
                rewrite_rows(ctx, tx, t, rows, values)
            new_rows = t.live_rows(ids)
            # RETURNING inside the transaction: a failing expression undoes the update
            return returning_result(self.returning, t, new_rows, env, f"UPDATE {len(rows)}")


class Delete(_Targeted):
    def __init__(self, stmt: ast.DeleteStmt, columns_of=None):
        self._init(stmt, columns_of)

    def run(self, ctx, params) -> SqlResult:
        run = self._resolved(ctx)
        if run is not self:
            return run.run(ctx, params)
        s = ctx.session
        with s.writing() as tx:
            t = ctx.table(self.table)
            env = self._env(ctx, params)
            rows = self._rows(ctx, t, env)
            result = returning_result(self.returning, t, rows, env, f"DELETE {len(rows)}")
            ctx.engine.delete(tx, t, rows)
        return result


# ---- COPY -----------------------------------------------------------------------------

MAX_LINE = 4 << 20     # bytes in one line of a COPY file (one CSV record): 54000 past it
_CHUNK = 1 << 20       # bytes read at a time
_BATCH = 10_000        # records parsed and written at a time, all in the statement's one
                       # transaction: a failure anywhere leaves nothing written
_TOO_LONG = f"a line (a CSV record) is longer than {MAX_LINE >> 20} MiB"
_TEXT_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class Copy:
    """COPY t [(cols)] FROM 'file' | STDIN: the data read in chunks, line by line (at
    most MAX_LINE bytes each, UTF-8), each record parsed with its line number for the
    error it may raise, written _BATCH records at a time in one transaction. A file
    is one of the server's machine: reading it is an embedded caller's privilege
    (privileges.py); STDIN is the caller's own copy_data, read by the same reader.
    COPY t [(cols)] | (SELECT ...) TO STDOUT: the rows as PostgreSQL writes them
    (text or CSV), in SqlResult.copy_data; no file of the server is ever written."""

    def __init__(self, stmt: ast.CopyStmt):
        self.is_from = stmt.is_from
        self.statement_kind = "write" if self.is_from else "select"
        if stmt.is_program:
            raise NotSupportedError("COPY ... PROGRAM is not supported")
        if not self.is_from and stmt.filename is not None:
            raise NotSupportedError("COPY ... TO a file is not supported (use TO STDOUT)")
        if stmt.whereClause is not None:
            raise NotSupportedError("COPY ... FROM ... WHERE is not supported")
        self.query = None
        if stmt.relation is None:
            if self.is_from or not isinstance(stmt.query, ast.SelectStmt):
                raise NotSupportedError("COPY (query) supports only SELECT ... TO STDOUT")
            self.query = Select(stmt.query)
            self.table = None
        else:
            self.table = stmt.relation.relname
        self.columns = [c.sval for c in stmt.attlist] if stmt.attlist else None
        self.filename = stmt.filename           # None: STDIN (or STDOUT)
        if self.query is None and not self.is_from:
            cols = ", ".join(map(_quoted, self.columns)) if self.columns else "*"
            self.query = Select(parse_sql(f"SELECT {cols} FROM {_quoted(self.table)}")[0].stmt)
        opts = {}
        for o in stmt.options or ():
            arg = o.arg
            value = True if arg is None else getattr(arg, "sval", None)
            if value is None:
                value = getattr(arg, "boolval", getattr(arg, "ival", True))
            opts[o.defname.lower()] = value
        self.format = str(opts.pop("format", "text")).lower()
        if self.format not in ("text", "csv", "binary"):
            raise NotSupportedError(f"COPY format {self.format} is not supported "
                                    "(text, csv, binary)")
        if self.format == "binary":
            for name in ("delimiter", "null", "header", "quote", "escape"):
                if name in opts:
                    raise SqlError("42601", f"cannot specify {name.upper()} in BINARY mode")
        self.header = str(opts.pop("header", False)).lower() in ("true", "1", "on")
        self.delimiter = opts.pop("delimiter", "," if self.format == "csv" else "\t")
        self.null = opts.pop("null", "" if self.format == "csv" else "\\N")
        if opts:
            raise NotSupportedError(f"COPY option {sorted(opts)[0]} is not supported")
        if not isinstance(self.delimiter, str) or len(self.delimiter.encode()) != 1:
            raise NotSupportedError("COPY delimiter must be a single one-byte character")
        if self.delimiter in "\\\r\n" or (self.format == "csv" and self.delimiter == '"'):
            raise SqlError("22023", f"COPY delimiter cannot be {self.delimiter!r}")
        if not isinstance(self.null, str):
            raise SqlError("22023", "COPY null is a string")
        # a CSV field as written (with its quotes) and the delimiter after it (none at
        # the record's end), of a record whose quotes pair up; possessively: no
        # backtracking, whatever the line holds
        d = re.escape(self.delimiter)
        self._csv_field = re.compile(f'((?:"[^"]*"|[^"{d}]+)*+)({d}|$)')
        # a record whose every field is quoted whole or holds no quote
        field = f'(?:"[^"]*+(?:""[^"]*+)*+"|[^"{d}]*+)'
        self._csv_simple = re.compile(f'{field}(?:{d}{field})*+')
        self._escape = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.)|$)|"
                                  + re.escape(self.delimiter), re.S)

    def run(self, ctx, params) -> SqlResult:
        if not self.is_from:
            return self._to_stdout(ctx, params)
        t = ctx.table(self.table)
        schema = t.schema
        columns = self.columns or schema.columns
        for c in columns:
            if c not in schema.fields and not (c == "id" and not schema.id_hidden):
                raise SqlError("42703", f'column "{c}" of relation "{self.table}" does not exist')
        n = 0
        with self._source(ctx) as fh, ctx.session.writing() as tx:
            records = self._binary_records(fh, len(columns)) if self.format == "binary" \
                else self._records(fh)
            if self.header:
                next(records, None)
            while True:
                batch = list(itertools.islice(records, _BATCH))
                if not batch:
                    break
                t = ctx.table(self.table)
                rows = self._rows(batch, columns, t.schema)
                written, _ = _insert_rows(ctx, tx, t, rows, None, E.Env(params))
                n += len(written)
        return SqlResult([], [], f"COPY {n}", rowcount=n)

    def _source(self, ctx):
        """The binary file the records are read from: the named regular file, or the
        caller's copy_data (bytes, str, or a binary file object, not closed here)."""
        if self.filename is not None:
            return _open_regular(self.filename)
        data = ctx.copy_data
        if data is None:
            raise SqlError("22023", "COPY FROM STDIN needs copy_data= (the rows, as bytes, "
                                    "str or a binary file object)")
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        if isinstance(data, (bytes, bytearray, memoryview)):
            return io.BytesIO(data)
        if not callable(getattr(data, "read", None)):
            raise SqlError("22023", "copy_data is bytes, str or a binary file object, got "
                                    f"{type(data).__name__}")
        return contextlib.nullcontext(data)

    def _to_stdout(self, ctx, params) -> SqlResult:
        """The rows of the table (or query) in the text or CSV format, one line each,
        every value in its PostgreSQL text form (query/literals.py's value_text); or
        in PostgreSQL's binary COPY format, each value in the binary form the wire
        sends it in (query/pg_binary.py: a vector column as pgvector's vector)."""
        res = self.query.run(ctx, params)
        n = len(res.rows)
        if self.format == "binary":
            data, ends = binary_copy(res)
            return SqlResult(list(res.columns), [], f"COPY {n}", rowcount=n,
                             copy_data=data, copy_ends=ends)
        if self.format == "csv":
            quote = re.compile("[" + re.escape(self.delimiter) + '"\r\n]')
            alone = len(res.columns) == 1    # a lone \. would read as the end marker

            def field(s):
                if s is None:
                    return self.null
                if s == self.null or quote.search(s) or (alone and s == "\\."):
                    return '"' + s.replace('"', '""') + '"'
                return s
        else:
            # PostgreSQL's escapes; a control character that is the delimiter keeps its own
            escapes = str.maketrans({self.delimiter: "\\" + self.delimiter, "\\": "\\\\",
                                     "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                                     "\t": "\\t", "\v": "\\v"})

            def field(s):
                return self.null if s is None else s.translate(escapes)
        d = self.delimiter
        lines = [d.join(map(field, res.columns))] if self.header else []
        kinds = res.kinds
        lines += [d.join([field(value_text(v, k)) for v, k in zip(row, kinds)])
                  for row in res.rows]
        pieces = [(line + "\n").encode() for line in lines]
        data, ends = b"".join(pieces), list(itertools.accumulate(map(len, pieces)))
        # its columns' names: the wire's CopyOutResponse tells a client how many there
        # are (psycopg's copy.rows() splits each line by them)
        return SqlResult(list(res.columns), [], f"COPY {n}", rowcount=n, copy_data=data,
                         copy_ends=ends)

    def _where(self, line: int, column: str | None = None) -> str:
        """PostgreSQL's CONTEXT of a COPY error, leading its message."""
        return f"COPY {self.table}, line {line}" + (f", column {column}" if column else "")

    def _records(self, fh):
        """(line number, fields) of each record; a field is None where it is NULL."""
        lines = _lines(fh, self._where)
        if self.format == "text":
            for n, line in lines:
                if line.endswith("\r"):
                    line = line[:-1]
                if line == "\\.":          # the end-of-data marker
                    return
                yield n, self._text_fields(line, n)
            return
        d, null, raw, size, quotes = self.delimiter, self.null, [], 0, 0
        box: list[str] = []     # the record Python's csv reads next (one reader for all)
        reader = csv.reader(iter(box.pop, None), delimiter=d)
        for n, line in lines:
            size += len(line)
            if size > MAX_LINE:
                raise SqlError("54000", f"{self._where(n)}: {_TOO_LONG}")
            raw.append(line)
            quotes += line.count('"')
            if quotes % 2:      # inside a quoted field ("" counts twice): on to the next line
                continue
            text = line if len(raw) == 1 else "\n".join(raw)
            raw.clear()
            size = 0
            if text.endswith("\r"):
                text = text[:-1]
            if '"' not in text:
                if text == "\\.":          # the end-of-data marker (a quoted one is data)
                    return
                yield n, [None if v == null else v for v in text.split(d)]
            elif self._csv_simple.fullmatch(text):
                # each quote at a field's ends: Python's csv (C) reads it as PostgreSQL
                # does, but for which fields were quoted (NULL is an unquoted one) and
                # a field past its limit (128 KiB), which PostgreSQL takes
                box.append(text)
                try:
                    rec = next(reader)
                except csv.Error:
                    rec = None
                yield n, rec if rec is not None and null not in rec \
                    else self._csv_fields(text)
            else:
                yield n, self._csv_fields(text)
        if raw:
            raise SqlError("22P04", f"{self._where(n)}: unterminated CSV quoted field")

    def _csv_fields(self, text: str) -> list:
        """The fields of a CSV record that holds quotes, read by PostgreSQL's rules: a
        quote anywhere in a field opens a quoted part, to the next lone quote ("" in
        it is a quote); what is outside quoted parts is taken as it is, spaces
        included; NULL is a field that is the null string and holds no quote."""
        out = []
        for m in self._csv_field.finditer(text):
            f = m.group(1)
            if '"' not in f:
                out.append(None if f == self.null else f)
            else:
                out.append(_QUOTED.sub(_unquoted, f))
            if not m.group(2):
                break
        return out

    def _text_fields(self, line: str, n: int) -> list:
        """The fields of a text-format line: cut at the delimiter, backslash escapes
        read as PostgreSQL reads them (\\t, \\n, ..., octal \\ooo and hex \\xhh bytes,
        any other character as itself); the null string, as written, is NULL."""
        if "\\" not in line:
            null = self.null
            return [None if v == null else v for v in line.split(self.delimiter)]
        fields, parts, start, pos = [], [], 0, 0
        for m in self._escape.finditer(line):
            parts.append(line[pos:m.start()])
            pos = m.end()
            if m.group(0) == self.delimiter:
                fields.append(self._field(line[start:m.start()], parts, n))
                parts, start = [], pos
            elif m.group(1) is not None:
                parts.append(bytes([int(m.group(1), 8) & 0xFF]))
            elif m.group(2) is not None:
                parts.append(bytes([int(m.group(2), 16)]))
            elif m.group(3) is not None:
                parts.append(_TEXT_ESCAPES.get(m.group(3), m.group(3)))
            else:
                raise SqlError("22P04", f"{self._where(n)}: a backslash ends the line (a "
                                        "newline in a value is written \\n)")
        parts.append(line[pos:])
        fields.append(self._field(line[start:], parts, n))
        return fields

    def _field(self, raw: str, parts: list, n: int):
        if raw == self.null:
            return None
        if not any(type(p) is bytes for p in parts):
            return "".join(parts)
        data = b"".join(p if type(p) is bytes else p.encode() for p in parts)
        return _utf8(data, self._where(n))

    def _binary_records(self, fh, width: int):
        """(record number, fields as bytes or None) of PostgreSQL's binary COPY
        format: the signature, flags and header extension, then each tuple's field
        count and fields (an int32 length, -1 for NULL, then the bytes), up to the
        -1 trailer. Read a record at a time: nothing is held beyond one."""
        reader = _Exact(fh)
        head = reader.take(19, "the header")
        if head[:11] != PGCOPY:
            raise SqlError("22P04", "COPY file signature not recognized")
        flags, ext = struct.unpack("!ii", head[11:])
        if flags & 0x10000:
            raise SqlError("22P04", "COPY with OIDs in the data is not supported")
        if ext < 0 or ext > MAX_LINE:
            raise SqlError("22P04", "invalid COPY file header (wrong length)")
        reader.take(ext, "the header extension")
        n = 0
        while True:
            n += 1
            (count,) = struct.unpack("!h", reader.take(2, self._where(n)))
            if count == -1:
                return
            if count != width:
                raise SqlError("22P04", f"{self._where(n)}: row field count is {count}, "
                                        f"expected {width}")
            fields = []
            for _ in range(count):
                (size,) = struct.unpack("!i", reader.take(4, self._where(n)))
                if size < -1 or size > MAX_LINE:
                    raise SqlError("22P04", f"{self._where(n)}: invalid field size {size}")
                fields.append(None if size == -1 else reader.take(size, self._where(n)))
            yield n, fields

    def _rows(self, batch: list, columns: list, schema) -> list[dict]:
        width = len(columns)
        for n, r in batch:
            if len(r) != width:
                detail = (f'missing data for column "{columns[len(r)]}"' if len(r) < width
                          else "extra data after last expected column")
                raise SqlError("22P04", f"{self._where(n)}: {detail}")
        cols = {}
        for j, c in enumerate(columns):
            field = None if c == "id" else schema.fields[c]
            values = [r[j] for _, r in batch]
            parse = _receive_column if self.format == "binary" else _parse_column
            try:
                cols[c] = parse(schema.id_kind if field is None else field.kind, values, field)
            except _BadValue as bad:
                e = bad.error
                raise SqlError(e.sqlstate, f"{self._where(batch[bad.index][0], c)}: {e}") \
                    from None
        return [dict(zip(cols, vals)) for vals in zip(*cols.values())] if cols else \
            [{} for _ in batch]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _open_regular(filename: str):
    """The file for reading, if it is a regular file. Opened without blocking (a FIFO
    with no writer would wait for one forever), then checked: a device such as
    /dev/zero, a FIFO or a directory is refused before a byte is read."""
    path = os.path.expanduser(filename)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise SqlError("58P01", f'could not open file "{filename}" for reading: '
                                f"{e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SqlError("42809", f'"{filename}" is not a regular file: COPY reads files')
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


_QUOTED = re.compile(r'"((?:[^"]|"")*)"')      # a quoted part of a CSV field


def _unquoted(m) -> str:
    return m.group(1).replace('""', '"')


def _lines(fh, where):
    """(number, text) of each line of a binary file, read _CHUNK bytes at a time: a
    line past MAX_LINE bytes (a file with no newline) is refused before more is read,
    one that is not UTF-8 (or holds a NUL, as PostgreSQL's text cannot) is refused."""
    tail, n = b"", 0
    while True:
        chunk = fh.read(_CHUNK)
        if not chunk:
            break
        if not isinstance(chunk, (bytes, bytearray)):
            raise SqlError("22023", "copy_data's file object is read in binary mode (its "
                                    f"read() gave {type(chunk).__name__})")
        lines = (tail + chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            n += 1
            if len(line) > MAX_LINE:
                raise SqlError("54000", f"{where(n)}: {_TOO_LONG}")
            yield n, _utf8(line, where(n))
        if len(tail) > MAX_LINE:
            raise SqlError("54000", f"{where(n + 1)}: {_TOO_LONG}")
    if tail:
        yield n + 1, _utf8(tail, where(n + 1))


def _utf8(data: bytes, where: str) -> str:
    try:
        if b"\0" in data:
            raise UnicodeDecodeError("utf-8", data, data.index(b"\0"), 0, "NUL")
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SqlError("22021", f'{where}: invalid byte sequence for encoding "UTF8": '
                                f"0x{data[e.start]:02x}") from None


class _BadValue(Exception):
    """A value of a COPY column that did not parse: its index, for the line number."""

    def __init__(self, index: int, error: SqlError):
        self.index, self.error = index, error


PGCOPY = b"PGCOPY\n\xff\r\n\0"      # (UTF-8 text never holds \xff: no text COPY starts so)
_NULL_FIELD = struct.pack("!i", -1)


def binary_copy(res: SqlResult) -> tuple[bytes, list[int]]:
    """A result's rows in PostgreSQL's binary COPY format: the signature, flags and
    header extension (none), then per row its field count and each field's length
    (-1: NULL) and bytes, then the trailer (-1); and where each of PostgreSQL's
    CopyData messages of them ends (the header with the first row, the trailer
    alone, or with the header where there is no row)."""
    send = [encoder(column_oid(kind, res.rows, i, element), kind, True)
            for i, (kind, element) in enumerate(zip(res.kinds, res.elements))]
    count = struct.pack("!h", len(send))
    out, ends, at = [PGCOPY, bytes(8)], [], len(PGCOPY) + 8
    for row in res.rows:
        out.append(count)
        at += 2
        for enc, v in zip(send, row):
            b = enc(v)
            b = _NULL_FIELD if b is None else struct.pack("!i", len(b)) + b
            out.append(b)
            at += len(b)
        ends.append(at)
    out.append(struct.pack("!h", -1))
    ends.append(at + 2)
    return b"".join(out), ends


class _Exact:
    """Exactly n bytes at a time from a binary file object (COPY's source)."""

    def __init__(self, fh):
        self.fh, self.buf = fh, b""

    def take(self, n: int, where: str) -> bytes:
        while len(self.buf) < n:
            chunk = self.fh.read(max(_CHUNK, n - len(self.buf)))
            if not isinstance(chunk, (bytes, bytearray)):
                raise SqlError("22023", "copy_data's file object is read in binary mode (its "
                                        f"read() gave {type(chunk).__name__})")
            if not chunk:
                raise SqlError("22P04", f"{where}: unexpected end of the binary COPY data")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


# the binary form a column of each kind reads (pgvector's for vectors; an int or a
# float column takes any width of its family, as the client's types say)
_BINARY = {"text": "text", "bool": "bool", "timestamp": "timestamptz", "sparsevec": "sparsevec",
           "bytes": "bytea"}


def _receive_column(kind: str, values: list, field=None) -> list:
    """A binary COPY's fields as a column of `kind`; _BadValue names the first that
    is not one."""
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(_receive_field(kind, v, field))
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            raise _BadValue(i, SqlError("22P03", f"incorrect binary data format: {e}")) \
                from None
        except SqlError as e:
            raise _BadValue(i, e) from None
    return out


def _receive_field(kind: str, data: bytes, field):
    n = len(data)
    if kind == "int":
        oid = {8: "int8", 4: "int4", 2: "int2"}.get(n)
    elif kind == "float":
        oid = {8: "float8", 4: "float4"}.get(n)
    elif kind == "vector":      # (a vector is a field's, never the id)
        oid = "bit" if field.dtype == "bit" else "halfvec" if n == 4 + 2 * field.dim \
            else "vector"
    elif kind == "json":
        oid = "jsonb" if data[:1] == b"\x01" else "json"
    else:
        oid = _BINARY.get(kind)
    if oid is None:
        raise ValueError(f"{n} bytes are no binary {kind}")
    x = pg_receive(data, OIDS[oid])
    if kind == "vector" and len(x) != field.dim:
        raise SqlError("22000", f"expected {field.dim} dimensions, not {len(x)}")
    return x


def _parse_column(kind: str, values: list, field=None) -> list:
    """Text values as a column of `kind` (a vector's checked against field's dim);
    _BadValue names the first one that is not."""
    if kind == "text":
        return values
    if kind == "vector":
        dim = field.dim if field is not None else None
        present = [v for v in values if v is not None]
        if present:
            try:        # the common case in one numpy parse: bracketed, one width
                bodies = ",".join(v.strip()[1:-1] for v in present)
                flat = np.array(bodies.split(","), np.float32)
                dims = {v.count(",") + 1 for v in present}
                if len(dims) == 1 and dims == {dim} and np.isfinite(flat).all() and all(
                        v.strip().startswith("[") and v.strip().endswith("]")
                        for v in present):
                    it = iter(flat.reshape(len(present), dim))
                    return [None if v is None else next(it) for v in values]
            except ValueError:
                pass    # one of them is not: found, with its index, below
    out = []
    for i, v in enumerate(values):
        try:
            x = None if v is None else parse_input(kind, v)
            if kind == "vector" and x is not None and field is not None and len(x) != field.dim:
                raise SqlError("22000", f"expected {field.dim} dimensions, not {len(x)}")
            if kind == "timestamp" and x is not None:     # microseconds, as a column takes it
                x = from_micros(x)
        except SqlError as e:
            raise _BadValue(i, e) from None
        out.append(x)
    return out
