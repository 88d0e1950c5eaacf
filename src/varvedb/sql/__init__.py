"""SQL in pgvector's dialect, on the query layer: `db.sql(text, params)`.

A statement's text is parsed by pglast and compiled once (`compile_text`
keeps the last 512 texts), so a repeated query pays no parse: running it
binds the compiled form to the current schema and a snapshot, plans it onto
query/plan.py nodes and runs it with query/execute.py — there is no second
executor. Writes run through the same engine verbs as the Python API, in the
session's transaction (BEGIN ... COMMIT, which takes the writer lock at the
block's first write) or, outside one, in a transaction of their own that
commits when the statement returns (a text of several statements: when its
last returns, or not at all where one fails — PostgreSQL's implicit
transaction, which the text's own COMMIT or ROLLBACK ends and its BEGIN makes
the block).

A text that differs from an earlier one only in its literals (`... WHERE id =
17`, then `... id = 18`: what the simple query protocol's clients send) runs,
in `run_each` (the wire protocol's), the compiled `$n` form of its shape with
its literals as parameters (shapes.py). `run` (db.sql()) compiles each text as
it is: an embedded caller passes its values as parameters, and a result's plan
shows the statement's own literals, where the shape's would show `$n`.

varvedb's one extension of the grammar, `AS OF VERSION n`,
`AS OF TIMESTAMP '...'` or `AS OF BRANCH 'name'` (optionally followed by
`VERSION n` or `TIMESTAMP '...'`) at the end of a SELECT, is found among
PostgreSQL's own tokens (pglast's scanner: words inside a comment or a
string are not tokens) and cut off before pglast parses the rest.
"""
from __future__ import annotations

import functools
import re

from pglast import ast, parse_sql, visitors
from pglast.parser import ParseError, scan

from ..errors import NotFoundError, ReadOnlyError, SqlError, VarveError
from ..schema import brief
from . import placeholders, privileges, shapes
from ..results import SqlResult

__all__ = ["run", "run_each", "run_compiled", "compile_text", "compiled_in", "fail_block",
           "implicit", "end_implicit", "SqlResult"]

_COMMENTS = frozenset(("SQL_COMMENT", "C_COMMENT"))
_STRINGS = frozenset(("SCONST", "USCONST"))
_AS_OF_KINDS = {"VERSION_P": "version", "TIMESTAMP": "timestamp"}


class Compiled:
    """One compiled statement: `run(ctx, params)` returns a SqlResult."""
    __slots__ = ("kind", "impl", "as_of", "text", "files", "notices")

    def __init__(self, kind: str, impl, as_of, text: str):
        self.kind = kind          # select, write, ddl, command, transaction
        self.impl = impl
        self.as_of = as_of        # (branch arg | None, "version" | "timestamp" | None,
                                  #  arg | None), or None; an arg is ("$", n) or ("=", value)
        self.text = text
        self.files = ()           # what it reads from the server's files (privileges.py)
        # the NOTICEs PostgreSQL gives as it parses the text (an identifier cut to 63
        # bytes), answered with the text's first statement: [(SQLSTATE, message)]
        self.notices = ()


_TOO_DEEP = "statement nested too deeply (stack depth limit exceeded)"


@functools.lru_cache(maxsize=512)
def compile_text(text: str) -> tuple[Compiled, ...]:
    """Parse and compile every statement of a text (cached by the text)."""
    if not isinstance(text, str):
        raise SqlError("42601", f"SQL is a str, got {type(text).__name__}")
    body, as_of = _cut_as_of(text)
    try:
        stmts = parse_sql(body)
    except ParseError as e:
        pos = e.args[1] + 1 if len(e.args) > 1 and isinstance(e.args[1], int) else None
        raise SqlError("42601", str(e.args[0]) if e.args else "syntax error", pos) from None
    except UnicodeEncodeError:
        raise SqlError("22021", "invalid byte sequence for encoding UTF8") from None
    except RecursionError:      # pglast builds the tree's Python nodes recursively
        raise SqlError("54001", _TOO_DEEP) from None
    if as_of is not None and (len(stmts) != 1 or not isinstance(stmts[0].stmt, ast.SelectStmt)):
        raise SqlError("42601", "AS OF applies to one SELECT statement")
    try:
        compiled = tuple(_compile(raw.stmt, as_of, body) for raw in stmts)
    except RecursionError:      # 'SELECT 1+1+...+1': the compiler walks the tree
        raise SqlError("54001", _TOO_DEEP) from None
    if compiled and _LONG_WORD.search(body) and any(
            not isinstance(raw.stmt, ast.InsertStmt) or _long_name(raw.stmt)
            for raw in stmts):
        compiled[0].notices = _truncated(body)
    return compiled


# an identifier past 63 bytes is a run of 16 characters at least (of 4 bytes at most),
# or a quoted one; a text without one is not scanned, nor one of INSERTs alone whose
# names (but for their VALUES' rows) are none cut to 63 bytes (a bulk INSERT's text)
_LONG_WORD = re.compile(r'[\w$\x80-\U0010ffff]{16}|"[^"]{16}')


def _long_name(node) -> bool:
    """Does an INSERT's tree (but for its VALUES' rows, a bulk INSERT's megabytes)
    hold a name its parser may have cut to 63 bytes (60 bytes at least: the cut is
    never inside a character), so that its text is scanned for the cut ones? (A
    string constant as long makes it scanned too: the scan tells them apart.)"""
    if isinstance(node, str):
        return len(node) >= 15 and len(node.encode()) >= 60
    if isinstance(node, (tuple, list)):
        return any(_long_name(x) for x in node)
    if not isinstance(node, ast.Node):
        return False
    return any(_long_name(getattr(node, name)) for name in type(node).__slots__
               if name != "valuesLists")


def _truncated(text: str) -> tuple:
    """PostgreSQL's NOTICE 42622 for each identifier of the text past 63 bytes, which
    its parser (pglast's too) cuts to 63 bytes, never inside a character; a
    U&"..." one's once its escapes are read (_unicode_word)."""
    out = []
    tokens = scan(text)         # (its offsets are characters')
    for i, t in enumerate(tokens):
        if t.name not in ("IDENT", "UIDENT") or t.end - t.start < 15:
            continue
        word = text[t.start:t.end + 1]
        if word.startswith(("U&", "u&")):
            word = _unicode_word(word[3:-1].replace('""', '"'), text, tokens[i + 1:i + 3])
            if word is None:
                continue
        elif word.startswith('"'):
            word = word[1:-1].replace('""', '"')
        else:
            word = word.translate(_ASCII_LOWER)
        try:
            got = word.encode()
        except UnicodeEncodeError:      # (a lone surrogate: PostgreSQL's error)
            continue
        if len(got) > 63:
            out.append(("42622", f'identifier "{word}" will be truncated to '
                                 f'"{got[:63].decode(errors="ignore")}"'))
    return tuple(out)


def _unicode_word(body: str, text: str, after) -> str | None:
    """A U&"..." identifier's name: its escapes (\\XXXX, \\+XXXXXX, \\\\; another
    escape character where UESCAPE 'c' follows it: `after`, its next tokens) read
    as PostgreSQL reads them; None where one is not valid (PostgreSQL's error)."""
    esc = "\\"
    if len(after) == 2 and after[0].name == "UESCAPE" and after[1].name == "SCONST":
        esc = text[after[1].start + 1:after[1].end]
        if len(esc) != 1:
            return None
    out, i, n = [], 0, len(body)
    while i < n:
        c = body[i]
        if c != esc:
            out.append(c)
            i += 1
            continue
        if body[i + 1:i + 2] == esc:
            out.append(esc)
            i += 2
            continue
        digits = body[i + 2:i + 8] if body[i + 1:i + 2] == "+" else body[i + 1:i + 5]
        width = 6 if body[i + 1:i + 2] == "+" else 4
        try:
            code = int(digits, 16) if len(digits) == width and digits.isascii() \
                and digits.isalnum() else -1
        except ValueError:
            return None
        if not 0 < code <= 0x10FFFF:
            return None
        out.append(chr(code))
        i += 1 + width + (width == 6)
    return "".join(out)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


# A text that holds the clause holds the words AS and OF, AS first, each a word of its
# own: no identifier character on either side (PostgreSQL reads "xas" as a name, "1AS"
# as an error) and no keyword is spelled with escapes. A text without them is not
# scanned: a bulk INSERT's megabytes of VALUES, mostly. (A pattern that starts with the
# letters is found several times faster than one that starts with a look-behind.)
_AS = re.compile(r"[aA][sS]\b")
_OF = re.compile(r"[oO][fF]\b")


def _word(pattern, text: str, pos: int = 0) -> int | None:
    """Where the first `pattern` at or after pos that no identifier character
    precedes ends, or None."""
    for m in pattern.finditer(text, pos):
        i = m.start()
        before = text[i - 1] if i else " "
        if not (before.isalnum() or before == "_" or not before.isascii()):
            return m.end()
    return None


def _cut_as_of(text: str):
    """(the text without its AS OF clause, the clause) — the clause being the
    statement's last tokens, comments aside, before any final `;`."""
    after_as = _word(_AS, text)
    if after_as is None or _word(_OF, text, after_as) is None:
        return text, None
    try:
        toks = [t for t in scan(text) if t.name not in _COMMENTS]
    except (ParseError, UnicodeEncodeError):
        return text, None                   # parse_sql reports it
    while toks and toks[-1].name == "ASCII_59":
        toks.pop()
    start = next((i for i in range(len(toks) - 2, -1, -1)
                  if toks[i].name == "AS" and toks[i + 1].name == "OF"), None)
    if start is None:
        return text, None
    words = [(t.name, text[t.start:t.end + 1]) for t in toks[start + 2:]]
    branch = kind = value = None
    if len(words) >= 2 and words[0][0] == "IDENT" and words[0][1].lower() == "branch":
        branch = _as_of_arg(words[1], _STRINGS)
        if branch is None:
            return text, None
        words = words[2:]
    if len(words) == 2:
        kind = _AS_OF_KINDS.get(words[0][0])
        if kind is not None:
            value = _as_of_arg(words[1], ("ICONST", "FCONST") if kind == "version"
                               else _STRINGS)
        if value is None:
            return text, None
    elif words or branch is None:
        return text, None
    return text[:toks[start].start], (branch, kind, value)


def _as_of_arg(word, literals):
    """A parameter as ("$", n), a literal of the `literals` tokens as ("=", its value),
    else None."""
    name, src = word
    if name == "PARAM":
        return "$", int(src[1:])
    if name not in literals:
        return None
    if name in _STRINGS:        # PostgreSQL's parser reads the literal ('', E'', $$ $$)
        return "=", parse_sql("SELECT " + src)[0].stmt.targetList[0].val.val.sval
    return ("=", int(src)) if src.isdigit() else None


def _compile(stmt, as_of, text: str) -> Compiled:
    c = _compile_kind(_schema_less_columns(stmt, text), as_of, text)
    c.files = privileges.server_files(stmt)
    return c


# `pg_catalog.pg_namespace.oid`: a column named by schema, table and column, as
# SQLAlchemy's PostgreSQL dialect names pg_catalog's (looked for in the text first:
# a bulk INSERT's tree is never walked for it)
_SCHEMA_COLUMN = re.compile(r"\b(pg_catalog|public)\s*\.\s*\"?\w+\"?\s*\.", re.I)


_SCHEMAS = ("pg_catalog", "public")


class _SchemaLess(visitors.Visitor):
    def visit_ColumnRef(self, ancestors, node):
        f = node.fields
        if len(f) == 3 and isinstance(f[0], ast.String) and f[0].sval in _SCHEMAS:
            return ast.ColumnRef(fields=f[1:], location=node.location)
        return None


def _schema_less_columns(stmt, text: str):
    """stmt with each `schema.table.column` as `table.column`: a table's name is
    one in both schemas here (pg_catalog's relations and the collections, public's,
    never share one), so the table alone names it, as a FROM item names it."""
    if _SCHEMA_COLUMN.search(text):
        _SchemaLess()(stmt)
    return stmt


def _compile_kind(stmt, as_of, text: str) -> Compiled:
    from . import commands, ddl, dml, select
    if isinstance(stmt, ast.SelectStmt):
        return Compiled("select", select.Select(stmt), as_of, text)
    for module, kind in ((dml, "write"), (ddl, "ddl"), (commands, "command")):
        impl = module.compile_statement(stmt)
        if impl is not None:
            # an impl may name its own (COPY TO STDOUT reads, SHOW answers rows), under
            # a name no impl holds for anything else: an index's kind once sat in
            # `kind`, which made CREATE INDEX no DDL (committed alone in a failed text)
            return Compiled(getattr(impl, "statement_kind", kind), impl, as_of, text)
    raise SqlError("0A000", f"{type(stmt).__name__.removesuffix('Stmt')} statements are not "
                            "supported")


class Context:
    """What one statement runs against: its session, and one snapshot for all
    of its reads (subqueries included), the caller's copy_data for a COPY
    FROM STDIN, whether it is one of a text's several statements, and whether it
    is planned to be described, not run (`describing`: describe_read's; its
    subqueries' plans are run over no rows and no plan is kept)."""
    __slots__ = ("session", "engine", "as_of", "copy_data", "several", "describing",
                 "_snap")

    def __init__(self, session, as_of=None, copy_data=None, several: bool = False):
        self.session = session
        self.copy_data = copy_data
        self.engine = session.engine
        self.as_of = as_of        # (branch name | None, version | datetime | None), or None
        self.several = several
        self.describing = False
        self._snap = None

    def outside_block(self, what: str) -> None:
        """25001 for `what` (VACUUM, ...) where PostgreSQL refuses it in a transaction
        block: BEGIN's, a Python transaction's, the implicit one of a text of
        several statements, or a pipeline's once an Execute ran in it before this
        one (Session.sql_pipelined): the text or pipeline then fails whole, nothing
        of it applied."""
        s = self.session
        if s.in_transaction or self.several or s.sql_pipelined:
            raise SqlError("25001", f"{what} cannot run inside a transaction block")

    def snapshot(self):
        if self._snap is None:
            branch, when = self.as_of or (None, None)
            self._snap = self.session.snapshot(when, branch)
        return self._snap

    def table(self, name: str):
        try:
            return self.engine.table(name)
        except NotFoundError:
            raise SqlError("42P01", f'relation "{name}" does not exist') from None


def run(session, text: str, params=(), copy_data=None) -> SqlResult:
    """Run SQL in a session; the last statement's result is returned. `copy_data`
    (bytes, str or a binary file object) is what a COPY ... FROM STDIN reads."""
    if type(params) is not list and type(params) is not tuple:
        if isinstance(params, dict):
            text, params = placeholders.convert(text, params)
        params = _params(params)
    elif params and "%" in text and placeholders.applies(text):   # psycopg's %s
        text, params = placeholders.convert(text, params)
    compiled = compiled_in(session, text)
    if len(compiled) == 1:
        return _run_one(session, compiled[0], params, copy_data)
    result, notices = SqlResult([], [], "EMPTY"), []
    try:
        for result in _each(session, compiled, params, copy_data):
            notices += result.notice or ()
    except VarveError as e:     # (the NOTICEs sent before its error)
        if notices:
            e.notices = [*notices, *(getattr(e, "notices", None) or ())]
        raise
    if notices:     # the text's NOTICEs (its parsing's, with its first statement's)
        result.notice = notices
    return result


def run_each(session, text: str, params=(), copy_data=None):
    """Run SQL in a session, yielding each statement's result as it finishes (the
    wire protocol answers each statement of a text; nothing for an empty text).
    A SELECT without parameters runs its shape's compiled form where it has one
    (shapes.py): the simple query protocol's clients send each value as a new text."""
    if not params and copy_data is None and isinstance(text, str):
        try:
            got = shaped(text)
        except BaseException:
            fail_block(session)
            raise
        if got is not None:
            return run_shaped(session, got)
    return _each(session, compiled_in(session, text), _params(params), copy_data)


def compiled_in(session, text: str) -> tuple[Compiled, ...]:
    """compile_text for a statement of `session`: one that does not parse or compile
    fails the session's transaction block, as any other error does (fail_block)."""
    try:
        return compile_text(text)
    except BaseException:
        fail_block(session)
        raise


def fail_block(session) -> None:
    """A statement failed in `session`: in SQL's transaction block (BEGIN's) the block
    is failed — everything but its end answers 25P02, and COMMIT rolls it back — as
    PostgreSQL fails it at any error, a syntax error included."""
    if session.sql_block:
        session.sql_failed = True


def run_compiled(session, compiled: tuple, params) -> list[SqlResult]:
    """Each statement of a text compile_text compiled, with its parameters: a prepared
    statement's Execute (the wire protocol keeps its statement's compiled form)."""
    params = _params(params)
    if len(compiled) == 1:
        return [_run_one(session, compiled[0], params)]
    return list(_each(session, compiled, params, None))


def describe_write(session, compiled: tuple, params) -> SqlResult | None:
    """The columns a write's RETURNING gives, as a result without rows, the write
    not run (the wire's Describe of a prepared INSERT ... RETURNING); None where
    the statement is no write that returns rows."""
    if len(compiled) != 1 or compiled[0].kind != "write":
        return None
    from .dml import returning_columns
    return returning_columns(compiled[0].impl, Context(session), _params(params))


def describe_read(session, compiled: tuple, params) -> SqlResult | None:
    """The columns a SELECT gives, as a result without rows, to describe it before it
    is bound (the wire's Describe of a prepared statement; None where the text is no
    one SELECT). As PostgreSQL, it is not run: it is planned with `params` (the
    NULLs) and its plan run over no rows (Select.planned: no table's rows read, no
    output expression evaluated on a value, no plan kept), which gives its
    columns' names and types; of no type (which the client reads as text) where
    that fails, None where it cannot be planned. Only what PostgreSQL's Parse
    refuses — a name that does not exist, a syntax error (SQLSTATE class 42) —
    is raised. (SHOW and COPY TO, read kinds without a plan, run: they read no
    table's rows.) It fails no transaction block."""
    if len(compiled) != 1 or compiled[0].kind != "select":
        return None
    c = compiled[0]
    params = _params(params)
    if session.sql_failed and session.in_transaction:
        raise _aborted()
    if c.files and not session.server_files:
        privileges.check(c.files, params)
    try:
        ctx = Context(session, None if c.as_of is None else _as_of(c, params, session))
        planned = getattr(c.impl, "planned", None)
        if planned is None:
            return c.impl.run(ctx, params)
        ctx.describing = True
        return planned(ctx, params)
    except SqlError as e:
        if e.sqlstate.startswith("42"):
            raise
    except VarveError:
        pass
    return None


def shaped(text: str):
    """A text without parameters as its shape's compiled form and its literals
    (shapes.py), or None: compile it as it is. A prepared statement keeps it."""
    return shapes.bound(text, compile_text) if shapes.enabled else None


def run_shaped(session, got):
    """run_each of a text `shaped` gave `got`."""
    return _each(session, got[0], got[1], None)


def _each(session, compiled: tuple, params, copy_data):
    if params and len(compiled) > 1:
        fail_block(session)
        raise SqlError("42601", "cannot insert multiple commands into a prepared statement")
    if len(compiled) > 1 and not session.in_transaction:
        yield from _implicit(session, compiled, params, copy_data)
        return
    for c in compiled:
        yield _run_one(session, c, params, copy_data, len(compiled) > 1)


def _implicit(session, compiled: tuple, params, copy_data):
    """A text of several statements outside a block: PostgreSQL's implicit
    transaction, which commits whole at the text's end, or nothing of it (its SETs
    included) where one fails. Its BEGIN makes the transaction the block (open past
    the text's end), its COMMIT or ROLLBACK ends it, and the statements after that
    run in the next one."""
    try:
        for c in compiled:
            implicit(session, c.kind in _WRITES)
            yield _run_one(session, c, params, copy_data, True)
    except BaseException:
        end_implicit(session, failed=True)
        raise
    end_implicit(session, failed=False)


_WRITES = ("write", "ddl")


def implicit(session, writes: bool) -> None:
    """Go on in SQL's implicit transaction (a text's of several statements, or the
    extended protocol's up to its Sync), opening one outside a block and any other
    open transaction. SQL's BEGIN makes it the block, its COMMIT or ROLLBACK ends it
    (commands.TransactionCommand), its SETs are undone where it fails; end_implicit
    ends it where nothing did. `writes`: the statement to run may write (DDL
    included), so its transaction begins here, where it has not: one that only
    reads and sets takes no writer lock."""
    if session.sql_block or (session.tx is not None and not session.sql_implicit):
        return
    session.sql_implicit = True
    if writes and session.tx is None:
        session.begin()


def end_implicit(session, failed: bool) -> None:
    """The implicit transaction's end: it commits, or rolls back (its settings as
    they were) where a statement in it failed; nothing where none is open (a COMMIT
    or ROLLBACK ended it, a BEGIN made it the block). A commit's error is raised,
    the transaction rolled back."""
    if not session.sql_implicit:
        return
    session.sql_implicit = False
    if session.tx is None and session.sql_settings is None:
        return              # it only read, and set nothing (a wire query's every Sync)
    from .commands import end_settings
    try:
        if session.tx is not None and failed:
            session.rollback()
        elif session.tx is not None:
            session.commit()
    except BaseException:
        end_settings(session, True)
        raise
    end_settings(session, failed)


def _params(params):
    if params is None:
        return ()
    if not isinstance(params, (list, tuple)):
        raise SqlError("22023", f"params is a list or tuple, got {type(params).__name__}")
    return params


def _run_one(session, c: Compiled, params, copy_data=None, several: bool = False) -> SqlResult:
    if session.sql_failed and session.in_transaction:
        if not (c.kind == "transaction" and c.impl.ends_transaction):
            raise _noticed(_aborted(), c)
    tx = session.tx
    frames = tx.frames if tx is not None else 0
    try:
        if c.files and not session.server_files:
            privileges.check(c.files, params)
        if session.sql_read_only and session.sql_block and c.kind in ("write", "ddl"):
            raise ReadOnlyError("cannot execute this statement in a read-only transaction")
        ctx = Context(session, None if c.as_of is None else _as_of(c, params, session),
                      copy_data, several)
        result = c.impl.run(ctx, params)
        if c.notices:       # (the parser's, before the statement's own)
            result.notice = [*c.notices, *(result.notice or ())]
        return result
    except BaseException as e:      # any failure: a raw one (a defect) must not half-apply
        tx = session.tx
        if session.sql_block:
            fail_block(session)
        elif tx is not None and tx.frames != frames:
            # the statement failed after some of its writes landed in an open
            # (Python API) transaction: no savepoints to undo just those, so the
            # transaction is undone and aborted (its commit raises 25P02)
            session.engine.abort(tx)
        if isinstance(e, RecursionError):
            raise _noticed(SqlError("54001", "stack depth limit exceeded"), c) from None
        _noticed(e, c)
        raise


def _noticed(e: BaseException, c: Compiled) -> BaseException:
    """A failed statement's error, with the NOTICEs its text's parsing gave
    (Compiled.notices) in its `notices`: PostgreSQL sends them before the error."""
    if c.notices and isinstance(e, VarveError) and not getattr(e, "notices", None):
        e.notices = list(c.notices)
    return e


def _aborted() -> SqlError:
    return SqlError("25P02", "current transaction is aborted, commands ignored until end "
                             "of transaction block")


def _as_of(c: Compiled, params, session):
    if c.as_of is None:
        return None
    branch, kind, arg = c.as_of
    if branch is not None:
        branch = _literal(branch, params)
        if not isinstance(branch, str):
            raise SqlError("22023", f"AS OF BRANCH takes a branch name, got {brief(branch)}")
    if kind is None:
        return branch, None
    return branch, _when(kind, arg, params)


def _literal(arg, params):
    if arg[0] == "$":
        i = arg[1]
        if not 1 <= i <= len(params):
            raise SqlError("42P02", f"there is no parameter ${i}")
        return params[i - 1]
    return arg[1]


def _when(kind: str, arg, params):
    value = _literal(arg, params)
    if kind == "timestamp" and isinstance(value, str):
        import datetime as _dt
        from ..query.literals import parse_timestamp
        us = parse_timestamp(value)
        value = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=us)
    return value
