"""DDL: CREATE EXTENSION / TABLE / INDEX, DROP TABLE / INDEX, ALTER TABLE.

A table is a collection: CREATE TABLE builds the same Schema the Python API
does and calls the same engine verb, so either interface reads the other's
tables. The primary key must be one column named `id` (the collection's id;
serial types have their ids assigned); a table without one gets a hidden,
assigned id. ALTER TABLE ADD / DROP / RENAME COLUMN change the schema only —
no row is rewritten. ALTER TABLE ADD [CONSTRAINT name] CHECK (...) [NOT VALID]
adds the fields' check conditions (the CHECK vocabulary of CREATE TABLE) after
checking the rows there (unless NOT VALID): 23514 if one fails, nothing changed;
DROP CONSTRAINT [IF EXISTS] name drops them. A CHECK keeps its name (each
condition carries it), an unnamed one PostgreSQL's, `{table}_{column}_check`.

Vector indexes: USING hnsw WITH (m, ef_construction, quantize, pq_m), USING
ivfflat WITH (lists) — vv.IVFPQ without codes — and USING ivfpq WITH (lists,
pq_m, rerank); the operator class gives the metric, as in pgvector.

Index names: an index keeps the name CREATE INDEX gave it (a vector index
spec's name, a scalar field's index_name); one made without a name has
PostgreSQL's default, `{table}_{column}_idx`.
"""
from __future__ import annotations

from dataclasses import replace

from pglast import ast
from pglast.enums import AlterTableType, ConstrType, ObjectType

from ..errors import NotSupportedError, SqlError
from ..query import expr as E
from ..schema import (HNSW, IVFPQ, MAX_MORE_INDEXES, UNINDEXED_KINDS, Field, Schema,
                      SparseVec, Vector, object_name, pkey_name, validate_name)
from .expressions import Scope, convert
from .index_exprs import index_expr, predicate
from ..results import SqlResult
from .types import SERIAL, array_element, type_kind, type_of

# pgvector's operator classes -> (metric, dtype of the column they index)
OPCLASSES = {
    "vector_l2_ops": ("l2", "f32"), "vector_ip_ops": ("dot", "f32"),
    "vector_cosine_ops": ("cosine", "f32"),
    "halfvec_l2_ops": ("l2", "f16"), "halfvec_ip_ops": ("dot", "f16"),
    "halfvec_cosine_ops": ("cosine", "f16"),
    "bit_hamming_ops": ("hamming", "bit"),
    # l1: a graph of l2 neighbours, its walk's candidates ranked by l1 (index/vector_index.py)
    "vector_l1_ops": ("l1", "f32"), "halfvec_l1_ops": ("l1", "f16"),
}
# index methods -> their WITH (...) parameters
_VECTOR_METHODS = {"hnsw": {"m", "ef_construction", "quantize", "pq_m"}, "ivfflat": {"lists"},
                   "ivfpq": {"lists", "pq_m", "rerank"}}
# pgvector's sparsevec_*_ops: no graph here, and an index that answered approximately
# where pgvector's does would differ from it without saying so
_NO_SPARSE_INDEX = ("an index on a sparsevec column is not supported: varvedb answers "
                    "ORDER BY a sparsevec distance LIMIT k by an exact scan")
# a vector column's SQL type by its dtype
SQL_TYPES = {"f32": "vector", "f16": "halfvec", "bit": "bit", "int8": "vector"}


def compile_statement(stmt):
    if isinstance(stmt, ast.CreateExtensionStmt):
        return CreateExtension(stmt)
    if isinstance(stmt, ast.AlterExtensionStmt):
        return AlterExtension(stmt)
    if isinstance(stmt, ast.CreateStmt):
        return CreateTable(stmt)
    if isinstance(stmt, ast.DropStmt):
        return Drop(stmt)
    if isinstance(stmt, ast.AlterTableStmt):
        return AlterTable(stmt)
    if isinstance(stmt, ast.RenameStmt):
        return Rename(stmt)
    if isinstance(stmt, ast.IndexStmt):
        return CreateIndex(stmt)
    return None


class CreateExtension:
    def __init__(self, stmt):
        if stmt.extname != "vector":
            raise NotSupportedError(f'extension "{stmt.extname}" is not available '
                                    "(vectors are built in)")

    def run(self, ctx, params) -> SqlResult:
        return SqlResult([], [], "CREATE EXTENSION")


class AlterExtension:
    """`ALTER EXTENSION vector UPDATE`: the vector types are built in, always at
    the version pg_extension shows; nothing to update."""

    def __init__(self, stmt):
        if stmt.extname != "vector":
            raise SqlError("42704", f'extension "{stmt.extname}" does not exist')
        if stmt.options:
            raise NotSupportedError("ALTER EXTENSION vector takes no version: the vector "
                                    "types are built in")

    def run(self, ctx, params) -> SqlResult:
        return SqlResult([], [], "ALTER EXTENSION")


def column_field(cd: ast.ColumnDef) -> tuple[Field | None, str, bool, list]:
    """(field, type name, primary key?, CHECKs) of a column definition: the field
    is None for the id column; its CHECK constraints, (name or None, expression),
    are for `with_checks` to add."""
    kind, tname, mods = type_of(cd.typeName)
    array_of = None
    if cd.typeName.arrayBounds:      # a column of arrays: a json field that knows its type
        array_of = array_element(kind, tname, mods)
        if array_of is None:
            raise NotSupportedError(f'array type of column "{cd.colname}" is not supported '
                                    "(arrays of integers, floats, booleans, text, vector, "
                                    "halfvec or sparsevec are)")
        kind = "array"
    primary, not_null, default = False, bool(cd.is_not_null), None
    checks = []
    for c in cd.constraints or ():
        if c.contype == ConstrType.CONSTR_PRIMARY:
            primary = True
        elif c.contype == ConstrType.CONSTR_NOTNULL:
            not_null = True
        elif c.contype == ConstrType.CONSTR_NULL:
            not_null = False
        elif c.contype == ConstrType.CONSTR_DEFAULT:
            if array_of is not None:
                raise NotSupportedError("an array column has no DEFAULT")
            default = _default_value(cd.colname, kind, c.raw_expr)
        elif c.contype == ConstrType.CONSTR_CHECK:
            checks.append((c.conname, c.raw_expr))
        elif c.contype != ConstrType.CONSTR_UNIQUE or not primary:   # the key is unique
            raise NotSupportedError(f'constraint {c.contype.name.removeprefix("CONSTR_")} on '
                                    f'column "{cd.colname}" is not supported')
    if kind == "vector":
        if not mods and tname != "bit":
            raise NotSupportedError(
                f'column "{cd.colname}": a {tname} without a dimension (pgvector\'s rows of '
                f"any dimension) is not supported: varvedb keeps a column's vectors in one "
                f"array of one dimension; declare {tname}(n)")
        dim = mods[0] if mods else 1        # bit alone is bit(1), as in PostgreSQL
        if default is not None:
            raise NotSupportedError("a vector column has no DEFAULT")
        field = Vector(dim, dtype="bit") if tname == "bit" else \
            Vector(dim, metric="l2", dtype="f16" if tname == "halfvec" else "f32")
    elif kind == "sparsevec":             # sparsevec(n), or of any dimension
        if default is not None:
            raise NotSupportedError("a sparsevec column has no DEFAULT")
        field = SparseVec(mods[0] if mods else 0)
    elif kind == "array":
        if primary:
            raise NotSupportedError("an array column cannot be the primary key")
        field = Field("json", array_of=array_of)
    elif kind == "text" and mods:         # varchar(n), char(n)
        field = Field(kind, max_length=mods[0])
    else:
        field = Field(kind)
    if primary:
        if checks:
            raise NotSupportedError("a CHECK constraint on the id column is not supported")
        return None, tname, True, []
    if not_null or default is not None:
        field = replace(field, not_null=not_null, default=default)
    return field, tname, False, checks


def check_conditions(raw, fields: dict) -> tuple:
    """CHECK `raw` (a pglast expression) as (field, op, value) conditions: an AND of
    conditions each on one int, float, bool or text column (`price > 0 AND price <
    100`, `code IS NOT NULL`) or of a vector column's dimension
    (`vector_dims(embedding) = 3`); else 0A000."""
    e = convert(raw, Scope(set()))
    missing = sorted(c for c in E.columns_of(e) if c not in fields and c != "id")
    if missing:
        raise SqlError("42703", f'column "{missing[0]}" does not exist')
    conds = predicate(e, fields, dims=True)
    if not conds:
        raise NotSupportedError(
            "a CHECK constraint is supported as an AND of comparisons of int, float, bool "
            "or text columns with constants (CHECK (price > 0)), IS [NOT] NULL, or of a "
            "vector's dimension (CHECK (vector_dims(embedding) = 3))")
    return conds


def with_checks(fields: dict, checks, table: str, taken: set) -> dict:
    """`fields` with the CHECK constraints `checks` ((name or None, pglast
    expression), in order: one statement's) added to the checks of the fields each
    reads, each under its name (42710 where one before it in `checks` has it), or
    one PostgreSQL would choose, none of `taken` (the schema's constraint names)."""
    out, given = dict(fields), set()
    for name, raw in checks:
        conds = check_conditions(raw, out)
        if name in given:
            raise SqlError("42710", f'check constraint "{name}" already exists')
        name = name or _check_name(table, conds, taken | given)
        given.add(name)
        several = len({c[0] for c in conds}) > 1    # (each keeps its place: as written)
        for at, (col, op, value) in enumerate(conds):
            f = out[col]
            out[col] = replace(f, check=(*(f.check or ()), (op, value, name, at) if several
                                         else (op, value, name)))
    return out


def _default_value(column: str, kind: str, node):
    v = E.evaluate(convert(node, Scope(set())), E.Rel(None, None, n=1), E.Env())
    if v.kind == "unknown" or (v.kind == "int" and kind == "float"):
        v = E.coerce(v, kind)
    if v.kind == "null":
        return None
    if v.kind != kind:
        raise SqlError("42804", f'column "{column}" is of type {kind} but default expression '
                                f"is of type {v.kind}")
    return v.python()[0]


# PARTITION BY and PARTITION OF: refused rather than kept as one table (a partitioned
# table with no partition holds no row in PostgreSQL, and a partition is a table of
# its own that reads a part of the other): what pgvector points at them for
_NO_PARTITIONS = ("partitioned tables are not supported: a table is one collection (to "
                  "search within one value of a column, a partial HNSW index, CREATE INDEX "
                  "... USING hnsw (embedding vector_l2_ops) WHERE (category_id = 123), is "
                  "pgvector's other way)")


class CreateTable:
    def __init__(self, stmt: ast.CreateStmt):
        if stmt.partspec or stmt.partbound:
            raise NotSupportedError(_NO_PARTITIONS)
        if stmt.inhRelations or stmt.ofTypename:
            raise NotSupportedError("inheritance and typed tables are not supported")
        self.name = stmt.relation.relname
        self.if_not_exists = bool(stmt.if_not_exists)
        self.stmt = stmt

    def schema(self, taken: set, relations: set = frozenset()) -> Schema:
        """The table's schema, made when the statement runs, never when it is compiled:
        a DEFAULT is evaluated, and a statement runs only once its session may
        (privileges.py: embed() with a spec loads a model). `taken`: the constraint
        names in use (an unnamed CHECK's takes none of them); `relations`: the
        relations' (its primary key's, an index's, takes none of either)."""
        fields, id_kind, id_type, pk = {}, None, None, None
        checks = []         # the columns' and the table's, in order
        for el in self.stmt.tableElts or ():
            if isinstance(el, ast.Constraint):
                if el.contype == ConstrType.CONSTR_CHECK:
                    checks.append((el.conname, el.raw_expr))
                    continue
                if el.contype != ConstrType.CONSTR_PRIMARY:
                    raise NotSupportedError(f"table constraint {el.contype.name} is not supported")
                keys = [k.sval for k in el.keys]
                if len(keys) != 1:
                    # (nothing else could keep the pair unique honestly: UNIQUE is refused too)
                    raise NotSupportedError(
                        f"a primary key of more than one column ({', '.join(keys)}) is not "
                        f"supported: a row's key is its one id column, which alone is kept "
                        f"unique; to key rows by several values, make them one id "
                        f"(id text PRIMARY KEY holding them joined, e.g. '123:456')")
                pk = keys[0]
                continue
            if not isinstance(el, ast.ColumnDef):
                raise NotSupportedError(f"{type(el).__name__} in CREATE TABLE is not supported")
            field, tname, primary, column_checks = column_field(el)
            checks += column_checks
            name = el.colname
            if name in fields or (name == "id" and id_kind is not None):
                raise SqlError("42701", f'column "{name}" specified more than once')
            if primary or name == "id":
                if name != "id":
                    raise NotSupportedError(f'the primary key column must be named "id", '
                                            f'not "{name}"')
                kind = field.kind if field is not None else type_kind([tname])[0]
                if kind not in ("int", "text"):
                    raise NotSupportedError("the id column is an integer or text type")
                id_kind, id_type = kind, tname
                if primary:
                    pk = "id"
                continue
            validate_name(name, "column")
            fields[name] = field
        if pk is not None and pk != "id":
            raise NotSupportedError(f'the primary key column must be named "id", not "{pk}"')
        fields = with_checks(fields, checks, self.name, taken)
        # pgvector-python's loading example writes `id bigserial` alone: a sequence's
        # values, kept unique here as the collection's id (an explicit duplicate is 23505)
        if id_kind is not None and pk is None and id_type not in SERIAL:
            raise NotSupportedError('a column named "id" must be the PRIMARY KEY (or a '
                                    'serial / bigserial, whose values are assigned)')
        key = None
        if pk is not None:
            mine = {c[2] for f in fields.values() for c in f.check or () if len(c) >= 3}
            key = pkey_name(self.name, taken | relations | mine)
        return Schema(fields, id_kind or "int", id_hidden=id_kind is None,
                      id_required=id_kind is not None and id_type not in SERIAL,
                      key=None if key == object_name(self.name, None, "pkey") else key)

    def run(self, ctx, params) -> SqlResult:
        s = ctx.session
        if self.name in relation_names(ctx.engine):     # a table's, an index's, a sequence's
            if self.if_not_exists:
                return SqlResult([], [], "CREATE TABLE")
            raise SqlError("42P07", f'relation "{self.name}" already exists')
        validate_name(self.name, "table")
        schema = self.schema(constraint_names(ctx.engine), relation_names(ctx.engine))
        with s.writing() as tx:
            ctx.engine.create_collection(tx, self.name, schema)
        return SqlResult([], [], "CREATE TABLE")


def index_names(engine) -> dict[str, tuple[str, str]]:
    """Every index by name -> (table, column): the name CREATE INDEX gave it, else
    PostgreSQL's default, `{table}_{column}_idx`."""
    out = {}
    for tname, cid in engine.names.items():
        t = engine.tables[cid]
        for name, f in t.schema.fields.items():
            given = f.vector_index.name if f.vector_index is not None else f.index_name
            if f.vector_index is not None or f.index is not None:
                out[given or f"{tname}_{name}_idx"] = (tname, name)
            for spec in f.more_indexes:     # (named: CREATE INDEX named them)
                out[spec.name] = (tname, name)
    return out


class Drop:
    def __init__(self, stmt: ast.DropStmt):
        if stmt.removeType not in (ObjectType.OBJECT_TABLE, ObjectType.OBJECT_INDEX,
                                   ObjectType.OBJECT_EXTENSION):
            raise NotSupportedError(f"DROP {stmt.removeType.name.removeprefix('OBJECT_')} "
                                    "is not supported")
        self.what = stmt.removeType
        self.names = [o[-1].sval if isinstance(o, tuple) else o.sval for o in stmt.objects]
        self.missing_ok = bool(stmt.missing_ok)
        self.concurrent = bool(stmt.concurrent)

    def run(self, ctx, params) -> SqlResult:
        s, engine = ctx.session, ctx.engine
        if self.concurrent:
            ctx.outside_block("DROP INDEX CONCURRENTLY")
        if self.what == ObjectType.OBJECT_EXTENSION:
            raise NotSupportedError("the vector extension is built in; it cannot be dropped")
        if self.what == ObjectType.OBJECT_TABLE:
            missing = [n for n in self.names if n not in engine.names]
            if missing and not self.missing_ok:
                raise SqlError("42P01", f'table "{missing[0]}" does not exist')
            with s.writing():
                for n in self.names:
                    if n in engine.names:
                        s.drop_collection(n)
            return SqlResult([], [], "DROP TABLE")
        known = index_names(engine)
        missing = [n for n in self.names if n not in known]
        if missing and not self.missing_ok:
            raise SqlError("42704", f'index "{missing[0]}" does not exist')
        with s.writing():
            for n in self.names:
                if n in known:
                    table, field = known[n]
                    f = ctx.table(table).schema.fields[field]
                    further = any(spec.name == n for spec in f.more_indexes)
                    s.collection(table).drop_index(field, n if further else None)
        return SqlResult([], [], "DROP INDEX")


class AlterTable:
    def __init__(self, stmt: ast.AlterTableStmt):
        if stmt.objtype != ObjectType.OBJECT_TABLE:
            raise NotSupportedError("ALTER is supported for tables")
        self.name = stmt.relation.relname
        self.missing_ok = bool(stmt.missing_ok)
        self.cmds = []
        for c in stmt.cmds:
            if c.subtype == AlterTableType.AT_AddColumn:
                if c.def_.colname == "id":
                    raise NotSupportedError("a table's id column cannot be added")
                # its field is made when the statement runs (CreateTable.schema says why)
                self.cmds.append(("add", c.def_.colname, c.def_, bool(c.missing_ok)))
            elif c.subtype == AlterTableType.AT_DropColumn:
                self.cmds.append(("drop", c.name, None, bool(c.missing_ok)))
            elif c.subtype == AlterTableType.AT_SetStorage:
                # pgvector's advice for exact scans (SET STORAGE PLAIN): a column's
                # values are always kept in its own arrays here, never out of line
                self.cmds.append(("storage", c.name, None, False))
            elif c.subtype == AlterTableType.AT_AddConstraint \
                    and c.def_.contype == ConstrType.CONSTR_CHECK:
                # its conditions are read when the statement runs, against the fields
                self.cmds.append(("check", c.def_.conname, c.def_.raw_expr,
                                  not c.def_.skip_validation))
            elif c.subtype == AlterTableType.AT_DropConstraint:
                self.cmds.append(("uncheck", c.name, None, bool(c.missing_ok)))
            elif c.subtype == AlterTableType.AT_AlterColumnType:
                # (missing_ok: no USING, or one that reads the column as it is)
                using = c.def_.raw_default
                self.cmds.append(("type", c.name, c.def_, using is None or (
                    isinstance(using, ast.ColumnRef) and len(using.fields) == 1
                    and getattr(using.fields[0], "sval", None) == c.name)))
            elif c.subtype == AlterTableType.AT_AddConstraint:
                raise NotSupportedError(
                    f"ALTER TABLE ADD {c.def_.contype.name.removeprefix('CONSTR_')} is not "
                    "supported (ADD CHECK is)")
            else:
                raise NotSupportedError(f"ALTER TABLE {c.subtype.name.removeprefix('AT_')} "
                                        "is not supported")

    def run(self, ctx, params) -> SqlResult:
        if self.name not in ctx.engine.names:
            if self.missing_ok:
                return SqlResult([], [], "ALTER TABLE")
            raise SqlError("42P01", f'relation "{self.name}" does not exist')
        s, notices = ctx.session, []
        with s.writing() as tx:
            coll = s.collection(self.name)
            for verb, column, column_def, missing_ok in self.cmds:
                t = ctx.engine.table(self.name)
                fields = t.schema.fields
                if verb == "check":      # (column: the name given; missing_ok: validate)
                    conds = check_conditions(column_def, fields)
                    name = column or _check_name(t.name, conds, constraint_names(ctx.engine))
                    ctx.engine.add_check(tx, t, conds, name, validate=missing_ok)
                elif verb == "uncheck":  # (column: the constraint's name)
                    if column == t.schema.key_name(t.name):     # (None: hidden)
                        raise _key_kept(column, t.name)
                    if missing_ok and column not in t.schema.constraints(t.name):
                        notices.append(("00000", f'constraint "{column}" of relation '
                                                 f'"{t.name}" does not exist, skipping'))
                        continue
                    ctx.engine.drop_check(tx, t, column)
                elif verb == "type":
                    _same_type(t, column, column_def, missing_ok)
                elif verb == "add":
                    if column in fields:
                        if missing_ok:
                            continue
                        raise SqlError("42701", f'column "{column}" of relation "{self.name}" '
                                                "already exists")
                    field, _, primary, checks = column_field(column_def)
                    if primary:
                        raise NotSupportedError("a table's id column cannot be added")
                    validate_name(column, "column")
                    taken = constraint_names(ctx.engine)
                    given = {n for n, _ in checks} & t.schema.constraint_names(t.name)
                    if given:
                        raise SqlError("42710", f'constraint "{min(given)}" for relation '
                                                f'"{t.name}" already exists')
                    # a CHECK that reads only the new column is its field's; one that
                    # reads another column is added to the table after it (and
                    # checked on the rows so far), as ALTER TABLE ADD CHECK adds it
                    whole = {**fields, column: field}
                    others = [(n, raw) for n, raw in checks if any(
                        c[0] != column for c in check_conditions(raw, whole))]
                    field = with_checks({column: field}, [c for c in checks if c not in others],
                                        t.name, taken)[column]
                    coll.add_field(column, field)       # (its CHECK on the rows so far)
                    for name, raw in others:
                        t = ctx.engine.table(self.name)
                        conds = check_conditions(raw, t.schema.fields)
                        name = name or _check_name(t.name, conds, constraint_names(ctx.engine))
                        ctx.engine.add_check(tx, t, conds, name)
                elif verb == "storage":
                    if column not in fields and column != "id":
                        raise SqlError("42703", f'column "{column}" of relation "{self.name}" '
                                                "does not exist")
                else:
                    if column == "id":
                        raise NotSupportedError("a table's id column cannot be dropped")
                    if column not in fields:
                        if missing_ok:
                            continue
                        raise SqlError("42703", f'column "{column}" of relation "{self.name}" '
                                                "does not exist")
                    coll.drop_field(column)
        result = SqlResult([], [], "ALTER TABLE")
        result.notice = notices or None
        return result


def _same_type(t, column: str, cd: ast.ColumnDef, plain: bool) -> None:
    """ALTER COLUMN ... TYPE: accepted, changing nothing, where the type is the one the
    column keeps its values as (int to bigint: varvedb's integers are 64-bit; text to
    varchar) and no USING computes new values (`plain`); else 0A000, saying how."""
    if column != "id" and column not in t.schema.fields:
        raise SqlError("42703", f'column "{column}" of relation "{t.name}" does not exist')
    kind, tname, _ = type_of(cd.typeName)
    if column == "id":
        same = not cd.typeName.arrayBounds and kind == t.schema.id_kind
    else:
        new, old = column_field(cd)[0], t.schema.fields[column]
        same = all(getattr(new, a) == getattr(old, a)
                   for a in ("kind", "dtype", "dim", "max_length", "array_of"))
    if not (same and plain):
        raise NotSupportedError(
            f'ALTER COLUMN "{column}" TYPE {tname}{"[]" if cd.typeName.arrayBounds else ""} '
            f"is not supported: a column keeps the type its values are kept as (a change "
            f"that keeps it, int to bigint or text to varchar, is accepted and changes "
            f"nothing); add a column of the new type, UPDATE {t.name} SET it to "
            f'"{column}"::{tname}, drop "{column}" and RENAME the new column to it')


def constraint_names(engine) -> set:
    """The names of every table's constraints (PostgreSQL's namespace of them, which
    an unnamed CHECK's name avoids)."""
    return {n for table, cid in engine.names.items()
            for n in engine.tables[cid].schema.constraint_names(table)}


def relation_names(engine) -> set:
    """The names of every table, index (keys' too) and serial id's sequence: PostgreSQL's
    namespace of relations, which a new index's name avoids."""
    out = set(engine.names) | set(index_names(engine))
    for table, cid in engine.names.items():
        schema = engine.tables[cid].schema
        if not schema.id_hidden:
            out.add(schema.key_name(table))
            if not schema.id_required and schema.id_kind == "int":
                out.add(f"{table}_id_seq")
    return out


def _key_kept(constraint: str, table: str) -> NotSupportedError:
    """The refusal of DROP CONSTRAINT of a table's primary key: varvedb keys every
    row by one id, the key a table was created with (or a hidden one), and a
    column named id is always the key (docs/sql.md)."""
    e = NotSupportedError(f'cannot drop constraint "{constraint}" on table "{table}"')
    e.detail = (f'Its column "id" is the key varvedb keeps each row of "{table}" by; a '
                "table keeps the key it was created with.")
    e.hint = ("Copy the rows into a table created without a primary key, their id in a "
              "column of another name (a column named id is always the key).")
    return e


def _check_name(table: str, conds: tuple, taken: set) -> str:
    """PostgreSQL's name for an unnamed CHECK: `{table}_{column}_check` when it reads
    one column, else `{table}_check`; `check1`, `check2`, ... where that is taken;
    cut to fit 63 bytes as PostgreSQL cuts it (schema.object_name)."""
    columns = {c[0] for c in conds}
    column = columns.pop() if len(columns) == 1 else None
    label, n = "check", 0
    while True:
        name = object_name(table, column, label)
        if name not in taken:
            return name
        n += 1
        label = f"check{n}"


class Rename:
    def __init__(self, stmt: ast.RenameStmt):
        if stmt.renameType != ObjectType.OBJECT_COLUMN:
            raise NotSupportedError(f"RENAME {stmt.renameType.name.removeprefix('OBJECT_')} "
                                    "is not supported (columns only)")
        self.table, self.old, self.new = stmt.relation.relname, stmt.subname, stmt.newname

    def run(self, ctx, params) -> SqlResult:
        t = ctx.table(self.table)
        if self.old not in t.schema.fields:
            if self.old == "id":
                raise NotSupportedError("a table's id column cannot be renamed")
            raise SqlError("42703", f'column "{self.old}" does not exist')
        if self.new in t.schema.fields or self.new == "id":
            raise SqlError("42701", f'column "{self.new}" of relation "{self.table}" '
                                    "already exists")
        validate_name(self.new, "column")
        s = ctx.session
        with s.writing():
            s.collection(self.table).rename_field(self.old, self.new)
        return SqlResult([], [], "ALTER TABLE")


class CreateIndex:
    """CREATE INDEX (a DDL statement: sql.Compiled's kind comes from a class's
    `statement_kind` only). Its index's kind is `index_kind` (hnsw, ivfflat, ivfpq,
    sorted, hash, fts)."""

    def __init__(self, stmt: ast.IndexStmt):
        self.table = stmt.relation.relname
        self.name = stmt.idxname
        self.if_not_exists = bool(stmt.if_not_exists)
        self.concurrent = bool(stmt.concurrent)
        method = (stmt.accessMethod or "btree").lower()
        if stmt.unique:
            raise NotSupportedError("unique indexes are not supported (the id is unique)")
        # a partial one (WHERE) and one on an expression: HNSW's (sql/index_exprs.py),
        # read when the statement runs, against the table's fields
        self.where = None if stmt.whereClause is None else \
            convert(stmt.whereClause, Scope(set()))
        self.expr = None
        if self.where is not None and method != "hnsw":
            raise NotSupportedError("partial indexes are HNSW's (USING hnsw ... WHERE ...)")
        self.ts_config = None
        if method == "gin":
            self.index_kind = "fts"
            self.column, self.ts_config = _gin_tsvector(stmt)
            return
        elems = stmt.indexParams
        if method == "btree" and len(elems) > 1 and all(
                e.name is not None and not e.opclass for e in elems):
            # (location_id, category_id): its first column's sorted index, which
            # answers what PostgreSQL's leading column does, under PostgreSQL's name
            if self.name is None:
                self.name = "_".join([self.table, *(e.name for e in elems), "idx"])[:63]
            elems = elems[:1]
        if len(elems) != 1:
            raise NotSupportedError("an index is on one column")
        elem = elems[0]
        self.column = elem.name
        if elem.name is None:
            if method != "hnsw":
                raise NotSupportedError("an index on an expression is HNSW's (USING hnsw "
                                        "((embedding::halfvec(3)) halfvec_l2_ops))")
            self.expr = convert(elem.expr, Scope(set()))
        options = {}
        for opt in stmt.options or ():
            arg = opt.arg
            options[opt.defname.lower()] = getattr(arg, "ival", getattr(arg, "sval", None))
        if method in _VECTOR_METHODS:
            opclass = elem.opclass[-1].sval if elem.opclass else "vector_l2_ops"
            if opclass.startswith("sparsevec_"):
                raise NotSupportedError(_NO_SPARSE_INDEX)
            if opclass not in OPCLASSES:
                raise NotSupportedError(f'operator class "{opclass}" is not supported '
                                        f"(one of {', '.join(OPCLASSES)})")
            if method != "hnsw" and OPCLASSES[opclass][0] == "l1":
                raise SqlError("42704", f'operator class "{opclass}" does not exist for '
                                        f'access method "{method}"')
            unknown = set(options) - _VECTOR_METHODS[method]
            if unknown:
                raise SqlError("22023", f'unrecognized parameter "{sorted(unknown)[0]}"')
            if method == "ivfpq" and "pq_m" not in options:
                raise SqlError("22023", 'an ivfpq index needs the parameter "pq_m" (bytes '
                                        "per row, dividing the dimension)")
            self.index_kind = method
            self.metric, self.dtype = OPCLASSES[opclass]
            self.opclass = opclass
            if options.get("quantize") == "none":      # the graph walks the vectors
                options["quantize"] = None
            self.options = options
        elif method in ("btree", "hash"):
            if elem.opclass or options:
                raise NotSupportedError("operator classes and options of scalar indexes are "
                                        "not supported")
            self.index_kind = "sorted" if method == "btree" else "hash"
        else:
            raise NotSupportedError(f"index method {method} is not supported")

    def run(self, ctx, params) -> SqlResult:
        if self.concurrent:
            ctx.outside_block("CREATE INDEX CONCURRENTLY")
        t = ctx.table(self.table)
        expr = where = None
        if self.expr is not None:
            got = index_expr(self.expr, t.schema.fields)
            if got is None:
                raise NotSupportedError(
                    "an HNSW index expression is a vector column cast (embedding::"
                    "halfvec(3)), binary_quantize(embedding)::bit(3) or subvector("
                    "embedding, 1, 3)::vector(3)")
            self.column, expr = got
        if self.where is not None:
            where = predicate(self.where, t.schema.fields)
            if where is None:
                raise NotSupportedError(
                    "a partial index's WHERE is an AND of comparisons of int, float, bool "
                    "or text columns with constants (category_id = 123), or IS [NOT] NULL")
        f = t.schema.fields.get(self.column)
        if f is None and self.column == "id" and not t.schema.id_hidden \
                and self.index_kind in ("sorted", "hash"):
            # the id is the primary key, always indexed: nothing to build
            return SqlResult([], [], "CREATE INDEX")
        if f is None:
            raise SqlError("42703", f'column "{self.column}" does not exist')
        relations = relation_names(ctx.engine)      # (an index's name is none of them)
        if self.name is not None and self.name in relations:
            if self.if_not_exists:
                return SqlResult([], [], "CREATE INDEX")
            raise SqlError("42P07", f'relation "{self.name}" already exists')
        s = ctx.session
        if self.index_kind == "fts":
            if f.kind != "text":
                raise SqlError("42883", f'function to_tsvector(regconfig, {f.kind}) does '
                                        "not exist")
            if f.fts:       # the column's full-text index answers it, or it cannot
                if f.ts_config == self.ts_config:
                    return SqlResult([], [], "CREATE INDEX")
                raise NotSupportedError(f'column "{self.column}" already has a full-text '
                                        f"index analyzed as "
                                        f"{f.ts_config or 'varvedb analyzes'}: varvedb keeps "
                                        "one per column")
            with s.writing() as tx:
                ctx.engine.create_text_index(tx, t, self.column, self.ts_config)
            return SqlResult([], [], "CREATE INDEX")
        if self.index_kind in _VECTOR_METHODS:
            if f.kind == "sparsevec":
                raise NotSupportedError(_NO_SPARSE_INDEX)
            if f.kind != "vector":
                raise SqlError("42704", f'column "{self.column}" is not a vector column')
            dtype = f.dtype if expr is None else expr[3]
            if dtype != self.dtype:
                want, have = SQL_TYPES[self.dtype], SQL_TYPES[dtype]
                raise SqlError("42804", f'operator class "{self.opclass}" does not accept '
                                        f"data type {have}")
            name, default = self.name, f"{self.table}_{self.column}_idx"
            if name is None:
                # as PostgreSQL names it (an expression's: the function's), the first
                # of name, name1, name2 ... no relation has; a further index of the
                # column (Field.more_indexes) is named, a first one of the default
                # name is not (index_names makes it from the table's name)
                name = _free_name(f"{self.table}_{expr[0]}_idx" if expr is not None
                                  and expr[0] != "cast" else default, relations)
                if name == default and f.vector_index is None:
                    name = None
            if self.index_kind == "hnsw":
                spec = HNSW(**self.options, metric=self.metric, name=name, expr=expr,
                            where=where)
            else:
                spec = IVFPQ(**self.options, metric=self.metric, name=name)
            if len(f.more_indexes) >= MAX_MORE_INDEXES:
                raise SqlError("54000", f'column "{self.column}" has {MAX_MORE_INDEXES + 1} '
                                        "vector indexes, the most it takes")
            with s.writing():
                s.collection(self.table).create_index(self.column, spec)
            return SqlResult([], [], "CREATE INDEX")
        if f.kind in UNINDEXED_KINDS:
            raise NotSupportedError(f"a {f.kind} column cannot carry a scalar index")
        if self.column in t.indexes:
            if self.if_not_exists:
                return SqlResult([], [], "CREATE INDEX")
            raise NotSupportedError(f'column "{self.column}" already has an index')
        name = self.name
        if name is None and f"{self.table}_{self.column}_idx" in relations:
            name = _free_name(f"{self.table}_{self.column}_idx", relations)
        with s.writing():
            s.collection(self.table).create_index(self.column, self.index_kind, name=name)
        return SqlResult([], [], "CREATE INDEX")


def _free_name(base: str, taken: set) -> str:
    """The first of base, base1, base2 ... not in `taken` (ChooseRelationName's)."""
    return next(n for n in (base, *(f"{base}{i}" for i in range(1, 10 ** 4)))
                if n not in taken)


def _gin_tsvector(stmt: ast.IndexStmt) -> tuple[str, str]:
    """(column, configuration) of `USING gin (to_tsvector('english', col))`: the
    full-text index varvedb keeps for that column, analyzed as the configuration."""
    from ..text.tsconfig import config_name
    elems = stmt.indexParams
    call = elems[0].expr if len(elems) == 1 else None
    if not isinstance(call, ast.FuncCall) or call.funcname[-1].sval.lower() != "to_tsvector" \
            or not 1 <= len(call.args or ()) <= 2 or elems[0].opclass or stmt.options:
        raise NotSupportedError("a gin index is on to_tsvector([config,] column) only (a "
                                "full-text index)")
    *config, column = call.args
    if not isinstance(column, ast.ColumnRef) or not isinstance(column.fields[-1], ast.String):
        raise NotSupportedError("a gin index is on to_tsvector of a column")
    name = E.DEFAULT_TEXT_SEARCH_CONFIG
    if config:
        c = config[0]
        if isinstance(c, ast.TypeCast):        # 'english'::regconfig
            c = c.arg
        if not (isinstance(c, ast.A_Const) and isinstance(c.val, ast.String)):
            raise NotSupportedError("a gin index's configuration is a literal ('english')")
        name = c.val.sval
    return column.fields[-1].sval, config_name(name)
