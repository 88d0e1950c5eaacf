"""Session commands: SET / SHOW / RESET, BEGIN / COMMIT / ROLLBACK, EXPLAIN, VACUUM.

Settings live on the session (`session.settings`), as PostgreSQL's do on a
connection. `hnsw.ef_search` is the graph walk's width for this session's
searches, `ivfflat.probes` the number of lists an IVF index (ivfflat or
ivfpq) scans (both unset: the index's own); `hnsw.iterative_scan` is accepted and changes nothing, because the
planner always completes a filtered walk (widens, then scans exactly).
"""
from __future__ import annotations

from pglast import ast
from pglast.enums import DiscardMode, TransactionStmtKind, VariableSetKind

from ..errors import NotSupportedError, SqlError, TransactionError
from ..schema import IVF_LIMITS, MAX_EF
from ..results import SqlResult
from .settings import SETTINGS, setting_text

_CHOICES = {"hnsw.iterative_scan": ("off", "relaxed_order", "strict_order")}
# settings a client or ORM sets at connect; accepted, not used
_IGNORED = {"client_encoding", "search_path", "timezone", "statement_timeout",
            "application_name", "datestyle", "extra_float_digits", "client_min_messages",
            "maintenance_work_mem", "work_mem", "max_parallel_maintenance_workers",
            "max_parallel_workers_per_gather", "enable_seqscan", "jit", "enable_indexscan",
            "min_parallel_table_scan_size", "parallel_setup_cost", "parallel_tuple_cost",
            "random_page_cost", "effective_cache_size", "lock_timeout",
            "idle_in_transaction_session_timeout", "hnsw.scan_mem_multiplier",
            "ivfflat.max_probes", "ivfflat.iterative_scan"}


def compile_statement(stmt):
    if isinstance(stmt, ast.VariableSetStmt):
        return SetCommand(stmt)
    if isinstance(stmt, ast.VariableShowStmt):
        return ShowCommand(stmt.name)
    if isinstance(stmt, ast.TransactionStmt):
        return TransactionCommand(stmt)
    if isinstance(stmt, ast.ExplainStmt):
        return ExplainCommand(stmt)
    if isinstance(stmt, ast.VacuumStmt) and stmt.is_vacuumcmd:
        return VacuumCommand(stmt)
    if isinstance(stmt, ast.VacuumStmt):
        return AnalyzeCommand(stmt)
    if isinstance(stmt, ast.DeallocateStmt):
        return DeallocateCommand(stmt.name)
    if isinstance(stmt, ast.DiscardStmt):
        return DiscardCommand(stmt)
    return None


class DeallocateCommand:
    """DEALLOCATE [PREPARE] name | ALL: drops prepared statements — the wire
    protocol's, of the connection this session serves (psycopg drops its own so
    after DDL; `Session.deallocate`); an embedded session keeps none (a name is
    26000 there, ALL drops nothing)."""

    def __init__(self, name: str | None):
        self.name = name            # None: ALL

    def run(self, ctx, params) -> SqlResult:
        drop = ctx.session.deallocate
        found = drop(self.name) if drop is not None else self.name is None
        if not found:
            raise SqlError("26000", f'prepared statement "{self.name}" does not exist')
        return SqlResult([], [], "DEALLOCATE ALL" if self.name is None else "DEALLOCATE")


class DiscardCommand:
    """DISCARD ALL (what connection poolers send between clients): the session's
    settings reset and its prepared statements dropped; DISCARD PLANS, SEQUENCES
    and TEMP hold nothing here to discard."""

    def __init__(self, stmt: ast.DiscardStmt):
        self.what = DiscardMode(stmt.target).name.removeprefix("DISCARD_")  # ALL, PLANS, ...

    def run(self, ctx, params) -> SqlResult:
        s = ctx.session
        if self.what == "ALL":
            ctx.outside_block("DISCARD ALL")
            s.settings.clear()
            DeallocateCommand(None).run(ctx, params)
        return SqlResult([], [], f"DISCARD {self.what}")


class AnalyzeCommand:
    """ANALYZE [table, ...]: PostgreSQL gathers the planner's statistics; varvedb's
    planner reads its indexes' own counts as they are, so there is nothing to
    gather. The tables named must exist, as in PostgreSQL."""

    def __init__(self, stmt: ast.VacuumStmt):
        self.tables = [r.relation.relname for r in stmt.rels or ()]

    def run(self, ctx, params) -> SqlResult:
        for name in self.tables:
            ctx.table(name)
        return SqlResult([], [], "ANALYZE")


class VacuumCommand:
    """VACUUM [(KEEP n | KEEP 'timestamp with zone')]: Database.vacuum of the whole
    file. Without KEEP every version stays (what no version sees still goes);
    PostgreSQL's FULL, VERBOSE, ANALYZE and FREEZE are accepted and change nothing."""

    def __init__(self, stmt: ast.VacuumStmt):
        self.keep = None
        if stmt.rels:
            raise NotSupportedError("VACUUM of a table: varvedb vacuums the whole file "
                                    "(VACUUM with no table)")
        for opt in stmt.options or ():
            name = opt.defname.lower()
            if name in ("full", "verbose", "analyze", "freeze"):
                continue
            if name != "keep":
                raise NotSupportedError(f"VACUUM option {name.upper()} is not supported "
                                        "(KEEP n or KEEP 'timestamp')")
            arg = opt.arg
            if isinstance(arg, ast.Integer) and arg.ival >= 1:
                self.keep = arg.ival
            elif isinstance(arg, ast.String):
                import datetime
                try:
                    self.keep = datetime.datetime.fromisoformat(arg.sval)
                except ValueError:
                    self.keep = None
                if self.keep is None or self.keep.tzinfo is None:
                    raise SqlError("22007", f"KEEP takes a count of versions >= 1 or a "
                                            f"timestamp with its zone, got {arg.sval!r}")
            else:
                raise SqlError("22023", "KEEP takes a count of versions >= 1 or a timestamp "
                                        "with its zone")

    def run(self, ctx, params) -> SqlResult:
        ctx.outside_block("VACUUM")
        ctx.engine.vacuum(self.keep)
        return SqlResult([], [], "VACUUM")


class SetCommand:
    def __init__(self, stmt: ast.VariableSetStmt):
        self.name = (stmt.name or "").lower()
        self.reset = stmt.kind in (VariableSetKind.VAR_RESET, VariableSetKind.VAR_SET_DEFAULT)
        # PostgreSQL's command tag: SET ... TO DEFAULT is a SET
        self.tag = "SET" if stmt.kind in (VariableSetKind.VAR_SET_VALUE,
                                          VariableSetKind.VAR_SET_DEFAULT) else "RESET"
        if stmt.kind == VariableSetKind.VAR_RESET_ALL:
            self.name, self.reset = "all", True
        elif stmt.kind not in (VariableSetKind.VAR_SET_VALUE, VariableSetKind.VAR_RESET,
                               VariableSetKind.VAR_SET_DEFAULT):
            raise NotSupportedError(f"SET {self.name} in this form is not supported")
        self.local = bool(stmt.is_local)
        self.value = None
        if stmt.args:
            if len(stmt.args) != 1 or not isinstance(stmt.args[0], ast.A_Const):
                raise NotSupportedError(f"SET {self.name} takes one value")
            v = stmt.args[0].val
            self.value = v.sval if isinstance(v, ast.String) else \
                getattr(v, "ival", None) if isinstance(v, ast.Integer) else \
                getattr(v, "fval", None)

    def run(self, ctx, params) -> SqlResult:
        s = ctx.session
        tag = self.tag
        if self.name in _IGNORED:
            return SqlResult([], [], tag)
        if self.name == "bytea_output":     # bytea prints in the hex form only
            if self.reset or str(self.value).lower() == "hex":
                return SqlResult([], [], tag)
            raise NotSupportedError("bytea_output other than 'hex' is not supported")
        if self.name != "all":
            spec = SETTINGS.get(self.name)
            if spec is None:
                raise SqlError("42704", f'unrecognized configuration parameter "{self.name}"')
            value = None if self.reset else _parse(self.name, spec[1], self.value)
        block = s.sql_settings
        if block is None and s.sql_implicit:    # the implicit transaction's first SET
            block = s.sql_settings = (dict(s.settings), dict(s.settings))
        if self.local and block is None:
            return SqlResult([], [], tag)   # PostgreSQL warns: no block for it to last
        # the session's settings now, and (in a block or an implicit transaction,
        # for SET without LOCAL) those its COMMIT keeps
        for settings in (s.settings,) if self.local or block is None \
                else (s.settings, block[1]):
            if self.name == "all":
                settings.clear()
            elif self.reset:
                settings.pop(self.name, None)
            else:
                settings[self.name] = value
        return SqlResult([], [], tag)


def end_settings(s, rolled_back: bool) -> None:
    """The session's settings as its block (or implicit transaction) ends: those at
    its start where it rolls back, else those its SETs without LOCAL made (SET LOCAL
    lasts to the end)."""
    got = s.sql_settings
    s.sql_settings = None
    if got is not None:
        s.settings.clear()
        s.settings.update(got[0] if rolled_back else got[1])


def _parse(name: str, kind: str, value):
    if kind == "int":
        try:
            n = int(value)
        except (TypeError, ValueError):
            raise SqlError("22023", f'invalid value for parameter "{name}": "{value}"') from None
        high = {"hnsw.ef_search": MAX_EF, "ivfflat.probes": IVF_LIMITS["lists"][1]}.get(
            name, 1 << 31)
        if not 1 <= n <= high:
            raise SqlError("22023", f"{n} is outside the valid range for parameter "
                                    f'"{name}" (1 .. {high})')
        return n
    v = str(value).lower()
    if v not in _CHOICES[name]:
        raise SqlError("22023", f'invalid value for parameter "{name}": "{value}"')
    return v


class ShowCommand:
    statement_kind = "select"   # a read that answers rows (a client describes it as one)

    def __init__(self, name: str):
        self.name = name.lower()

    def run(self, ctx, params) -> SqlResult:
        value = setting_text(self.name, ctx.session)
        if value is None:
            raise SqlError("42704", f'unrecognized configuration parameter "{self.name}"')
        kinds = ["text"] if self.name not in SETTINGS else None
        return SqlResult([self.name], [(value,)], "SHOW", kinds=kinds)



class TransactionCommand:
    """BEGIN / START TRANSACTION, COMMIT / END, ROLLBACK / ABORT: the session's
    transaction block. A BEGIN inside a transaction that no BEGIN opened is an
    error (25001), but in a session whose `begin_joins` is set (a transaction
    the server opened over HTTP), where it makes that transaction the block;
    a BEGIN inside the block changes nothing (PostgreSQL warns). READ ONLY refuses
    the block's writes (25006); AND CHAIN opens the next block, of the same mode,
    as COMMIT or ROLLBACK ends one. SET in a block is undone by its ROLLBACK, and
    SET LOCAL's lasts until the block ends (`end_settings`)."""
    statement_kind = "transaction"

    def __init__(self, stmt: ast.TransactionStmt):
        k = stmt.kind
        self.tag = None
        self.chain = bool(getattr(stmt, "chain", False))
        self.read_only = False
        self.snapshot = False       # REPEATABLE READ / SERIALIZABLE: one state throughout
        if k in (TransactionStmtKind.TRANS_STMT_BEGIN, TransactionStmtKind.TRANS_STMT_START):
            self.verb = "BEGIN"
            if k == TransactionStmtKind.TRANS_STMT_START:
                self.tag = "START TRANSACTION"
            for opt in stmt.options or ():
                if opt.defname == "transaction_read_only":
                    self.read_only = bool(getattr(opt.arg.val, "ival", 0))
                elif opt.defname == "transaction_isolation":
                    self.snapshot = getattr(opt.arg.val, "sval", "") in _SNAPSHOT_LEVELS
        elif k == TransactionStmtKind.TRANS_STMT_COMMIT:
            self.verb = "COMMIT"
        elif k == TransactionStmtKind.TRANS_STMT_ROLLBACK:
            self.verb = "ROLLBACK"
        elif k in _SAVEPOINT_VERBS:
            self.verb = _SAVEPOINT_VERBS[k]
            self.savepoint = stmt.savepoint_name
        else:
            raise NotSupportedError(f"{k.name.removeprefix('TRANS_STMT_')} is not supported")
        # what a failed transaction still takes (anything else answers 25P02)
        self.ends_transaction = self.verb in ("COMMIT", "ROLLBACK", "ROLLBACK TO")

    def run(self, ctx, params) -> SqlResult:
        s = ctx.session
        if self.verb in ("SAVEPOINT", "RELEASE", "ROLLBACK TO"):
            return self._savepoint(s)
        if self.verb == "BEGIN":
            if s.sql_block:
                # PostgreSQL: WARNING 25001, and the block goes on as it was
                return _warned(SqlResult([], [], self.tag or "BEGIN"), "25001",
                               "there is already a transaction in progress")
            s.savepoints = []
            # the implicit transaction's settings so far are the block's
            settings = s.sql_settings if s.sql_implicit else None
            if s.tx is not None and (s.begin_joins or s.sql_implicit):
                s.sql_block = True     # its failed state (sql_failed) stays as it was
            else:
                if s.tx is not None:
                    raise SqlError("25001", "there is already a transaction in progress")
                self._open(s, self.snapshot, s.begin_joins)
            s.sql_implicit = False
            s.sql_read_only = self.read_only
            s.sql_settings = settings or (dict(s.settings), dict(s.settings))
            return SqlResult([], [], self.tag or "BEGIN")
        implicit = s.sql_implicit
        if s.tx is not None and not s.sql_block and not s.begin_joins and not implicit:
            # a Python transaction (db.transaction()): its with block ends it; a
            # COMMIT here would commit half of the block and leave the rest to
            # autocommit, ROLLBACK the same for its undo
            raise SqlError("25000", f"{self.verb} inside a Python transaction: leave its "
                                    "with block to commit (or raise to roll back)")
        s.savepoints = []
        failed, block = s.sql_failed, s.sql_block
        read_only, snapshot = s.sql_read_only, s.sql_snapshot
        if not block and (s.tx is None or implicit):
            if self.chain:      # (the implicit transaction is then rolled back whole)
                raise SqlError("25P01", f"{self.verb} AND CHAIN can only be used in "
                                        "transaction blocks")
            if s.tx is None and not implicit:   # PostgreSQL warns and carries on
                return _warned(SqlResult([], [], self.verb), "25P01",
                               "there is no transaction in progress")
        s.sql_failed = False
        s.sql_block = False
        s.sql_read_only = False
        s.unpin()
        s.sql_implicit = False
        rolled_back = self.verb == "ROLLBACK" or failed
        end_settings(s, rolled_back)
        status = "ROLLBACK" if rolled_back else "COMMIT"
        if s.tx is None:
            pass        # a block that wrote nothing took no transaction to end
        elif rolled_back:
            s.rollback()
        else:
            try:
                s.commit()
            except TransactionError as e:
                if getattr(e, "sqlstate", "") != "25P02":
                    raise
                s.rollback()
                status = "ROLLBACK"
        if implicit and not block:      # PostgreSQL ends it, and warns: no BEGIN opened it
            return _warned(SqlResult([], [], status), "25P01",
                           "there is no transaction in progress")
        if self.chain:      # the next block, of the same mode
            self._open(s, snapshot, s.begin_joins)
            s.sql_read_only = read_only
            s.sql_settings = (dict(s.settings), dict(s.settings))
        return SqlResult([], [], status)

    @staticmethod
    def _open(s, snapshot: bool, joins: bool) -> None:
        """Open SQL's block. The block takes the writer lock at its first write
        (Session.writing), so a block that only reads keeps no writer waiting; once
        it holds the lock nothing else commits, so its writes act on what it reads
        from then on. READ COMMITTED (PostgreSQL's default): each statement reads
        the newest commit. REPEATABLE READ and SERIALIZABLE: every statement reads
        the state at BEGIN (Session.pin: a vacuum keeps it), and the first write is refused
        (40001) where a commit came since. A block in a transaction the server
        opened over HTTP (`joins`) takes the lock here: it ends when its session's
        transaction does."""
        if joins:
            s.begin()
        elif snapshot:
            s.pin()
        s.sql_block = True
        s.sql_failed = False
        s.sql_snapshot = snapshot

    def _savepoint(self, s) -> SqlResult:
        """SAVEPOINT, RELEASE and ROLLBACK TO. A rollback to a savepoint is taken
        only where the transaction has written nothing since it (a read-only
        step, or a statement that failed before writing, as drivers' nested
        blocks and type lookups do): undoing part of a transaction's writes is
        not supported, and that answers an error and leaves the transaction
        failed, so its writes can only be rolled back whole. A rollback to a
        savepoint puts the settings back as they were at it, as PostgreSQL does."""
        if not s.sql_block:
            raise SqlError("25P01", f"{self.verb} can only be used in transaction blocks")
        names = [n for n, _, _ in s.savepoints]
        frames = s.tx.frames if s.tx is not None else 0    # none: it wrote nothing yet
        if self.verb == "SAVEPOINT":
            kept = s.sql_settings[1] if s.sql_settings is not None else s.settings
            s.savepoints.append((self.savepoint, frames, (dict(s.settings), dict(kept))))
            return SqlResult([], [], "SAVEPOINT")
        if self.savepoint not in names:
            s.sql_failed = True
            raise SqlError("3B001", f'savepoint "{self.savepoint}" does not exist')
        at = len(names) - 1 - names[::-1].index(self.savepoint)
        if self.verb == "RELEASE":
            del s.savepoints[at:]
            return SqlResult([], [], "RELEASE")
        if (s.tx is not None and s.tx.aborted) or frames != s.savepoints[at][1]:
            s.sql_failed = True
            raise NotSupportedError(f'rolling back to savepoint "{self.savepoint}" would undo '
                                    "writes made since it, which is not supported: roll the "
                                    "whole transaction back")
        del s.savepoints[at + 1:]
        s.sql_failed = False
        now, kept = s.savepoints[at][2]     # the settings as they were at the savepoint
        for settings, then in ((s.settings, now), (s.sql_settings and s.sql_settings[1], kept)):
            if settings is not None:
                settings.clear()
                settings.update(then)
        return SqlResult([], [], "ROLLBACK")


def _warned(result: SqlResult, sqlstate: str, message: str) -> SqlResult:
    result.notice = [(sqlstate, message)]
    return result


_SNAPSHOT_LEVELS = ("repeatable read", "serializable")
_SAVEPOINT_VERBS = {TransactionStmtKind.TRANS_STMT_SAVEPOINT: "SAVEPOINT",
                    TransactionStmtKind.TRANS_STMT_RELEASE: "RELEASE",
                    TransactionStmtKind.TRANS_STMT_ROLLBACK_TO: "ROLLBACK TO"}


class ExplainCommand:
    def __init__(self, stmt: ast.ExplainStmt):
        from .select import Select
        if not isinstance(stmt.query, ast.SelectStmt):
            raise NotSupportedError("EXPLAIN is supported for SELECT")
        self.analyze = False
        for opt in stmt.options or ():
            name = opt.defname.lower()
            on = opt.arg is None or str(getattr(opt.arg, "sval", getattr(opt.arg, "ival", "on"))
                                        ).lower() in ("on", "true", "1")
            if name == "analyze":
                self.analyze = on
        self.select = Select(stmt.query)

    def run(self, ctx, params) -> SqlResult:
        from ..query.execute import execute
        query = self.select.plan(ctx, params)
        if not self.analyze:
            lines = str(query.plan).split("\n")
            return SqlResult(["QUERY PLAN"], [(line,) for line in lines], "EXPLAIN",
                             plan=query.plan)
        query.analyze = {}
        res = execute(query)
        lines = []
        stack = [(res.plan, 0)]
        while stack:
            node, depth = stack.pop()
            rows, seconds = query.analyze.get(id(node), (None, None))
            tail = "" if rows is None else f" (actual rows={rows:,} time={seconds * 1e3:.3f} ms)"
            lines.append(("  " * depth + "-> " if depth else "") + node.describe() + tail)
            stack.extend((i, depth + 1) for i in reversed(node.inputs()))
        return SqlResult(["QUERY PLAN"], [(line,) for line in lines], "EXPLAIN", plan=res.plan)

