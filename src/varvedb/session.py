"""`Session`: one client of a Database, with its own transaction.

A session, not a thread, owns a transaction: two sessions on one thread are
isolated (one's uncommitted rows are invisible to the other), and a session
may begin on one thread and commit on another — the requests of an asyncio
server, say. A session must not be used by two threads at once. Only one
transaction writes at a time: a second writing session waits up to its
`timeout` for the writer lock, then raises LockTimeoutError.

`Database` keeps a default session per thread, so `db.transaction()` and the
collection verbs work as they always did: one thread, one transaction. A
session dropped (or closed) with its transaction open rolls it back.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from .errors import (BranchError, NotFoundError, OptionError, ReadOnlyError, SchemaError,
                     SqlError, TransactionAbortedError, TransactionError)
from .schema import Schema, brief, schema_difference, validate_name
from .schema_inference import creation_data, infer_schema

if TYPE_CHECKING:
    from .collection import Collection
    from .engine.engine import Transaction
    from .engine.snapshot import Snapshot
    from .results import SqlResult


_sql_run = None     # varvedb.sql.run, imported by the first Session.sql


class Session:
    def __init__(self, db, timeout: float | None = None, server_files: bool = True):
        # db: the Database (not imported here: database.py imports this module)
        from .engine.engine import check_timeout
        self.db = db
        self.engine = db.engine
        self.timeout = self.engine.lock_timeout if timeout is None else check_timeout(timeout)
        self._tx: Transaction | None = None
        self._branch: int | None = None   # its own branch (use()); None: the database's
        self._finalizer = None
        self.settings: dict = {}      # SQL's SET (hnsw.ef_search, ...), per session
        self.sql_block = False        # a transaction SQL's BEGIN opened
        # a statement in it failed: 25P02 until ROLLBACK (the sql_failed property)
        self._sql_failed = False
        self.begin_joins = False      # SQL's BEGIN joins an open transaction (the server's)
        # the open transaction is SQL's implicit one (a text's of several statements, a
        # pipeline's up to Sync: sql.begin_implicit), which BEGIN makes the block
        self.sql_implicit = False
        # the statement running is an Execute of the extended protocol after another
        # in the implicit transaction (before the pipeline's Sync, COMMIT or ROLLBACK):
        # PostgreSQL runs it in an implicit block, which VACUUM & co. refuse (25001)
        self.sql_pipelined = False
        self.sql_read_only = False    # the block is READ ONLY: its writes are 25006
        # the block reads one state throughout (REPEATABLE READ, SERIALIZABLE)
        self.sql_snapshot = False
        # such a block's state, while it has not written: the version its BEGIN saw,
        # which its reads see (snapshot) and a vacuum keeps (engine/pins.py); its
        # first write begins its transaction (Session.writing), refused (40001)
        # where a commit came since
        self._sql_version: int | None = None
        # in the block: (the settings at its BEGIN, those its COMMIT keeps), else None
        self.sql_settings = None
        # SQL's SAVEPOINTs in it: (name, frames written then, (the settings then,
        # those its COMMIT would keep then))
        self.savepoints: list = []
        # may it read files of this machine (COPY FROM 'file'; embed() with a spec, or a
        # field made with an embedder, that loads a model from disk)? An embedded caller
        # may; the server's sessions may not (sql/privileges.py, engine/embedding.py)
        self.server_files = bool(server_files)
        # the wire connection's hook that drops its prepared statement of a name (None:
        # all) and says whether it had it (SQL's DEALLOCATE); None: it keeps none
        self.deallocate = None

    # ---- transactions ----------------------------------------------------------

    @property
    def tx(self) -> "Transaction | None":
        """The open transaction of this session, if any."""
        tx = self._tx
        return tx if tx is not None and not tx.done else None

    @property
    def in_transaction(self) -> bool:
        """Is a transaction open: begun, or SQL's block (BEGIN's), which begins its
        transaction at its first write?"""
        return self.tx is not None or self.sql_block

    def transaction(self) -> "TransactionScope":
        """Group writes into one commit; an exception inside rolls all of them back.

            with s.transaction():
                s.collection("docs").insert(...)
        """
        return TransactionScope(self, join=False)

    def writing(self) -> "TransactionScope":
        """This session's open transaction, or a new one that commits on exit. In
        SQL's block that has not written yet, its transaction begins here (it takes
        the writer lock at its first write, as a reading block keeps no writer
        waiting) and stays open to the block's COMMIT. A block that reads the state
        of its BEGIN (REPEATABLE READ) writes on it only where no commit of its
        branch came since; else SqlError 40001, as PostgreSQL refuses a write to a
        row changed since (first committer wins; here a commit of any row refuses
        it), and nothing is written. A READ ONLY block refuses every write, the
        Python API's too (ReadOnlyError, 25006; the block fails)."""
        if self.sql_block and self.sql_read_only:
            self.sql_failed = True
            raise ReadOnlyError("cannot execute this statement in a read-only transaction")
        if self.sql_block and self.tx is None:
            self.begin()
            pinned = self.unpin()
            if pinned is not None and self.engine.read_version(None, self.branch_id) > pinned:
                self.rollback()
                self.sql_failed = True      # the block fails (an API write in it too)
                raise SqlError("40001", "could not serialize access due to concurrent update")
        return TransactionScope(self, join=True)

    @property
    def sql_failed(self) -> bool:
        """Has a statement in SQL's block failed (25P02 until ROLLBACK)?"""
        return self._sql_failed

    @sql_failed.setter
    def sql_failed(self, failed: bool) -> None:
        """A block that fails with no SAVEPOINT to go back to lets its version go
        (unpin): only its end runs in it now, as PostgreSQL's aborted transaction
        ("idle in transaction (aborted)") holds no snapshot and no xmin, so a
        vacuum meanwhile reclaims what it read. One with a savepoint keeps it, as
        PostgreSQL's transaction keeps its snapshot across a subtransaction's
        abort: ROLLBACK TO reads on at the state of its BEGIN."""
        self._sql_failed = failed
        if failed and not self.savepoints and self._sql_version is not None:
            self.unpin()

    def _let_go(self) -> bool:
        """Is this a REPEATABLE READ block that failed and let its version go? Its
        reads (the Python API's; SQL's answer 25P02) are refused: the state of its
        BEGIN is no longer kept, and reading the newest instead would break the
        block's one state."""
        return (self._sql_failed and self.sql_block and self.sql_snapshot
                and self._sql_version is None and self.tx is None)

    @property
    def sql_version(self) -> int | None:
        """The version SQL's REPEATABLE READ block reads (pin()), or None: the newest."""
        return self._sql_version

    def pin(self) -> None:
        """Read the newest version from now on, kept by a vacuum until unpin()
        (SQL's REPEATABLE READ block, from its BEGIN)."""
        self._sql_version = self.engine.pins.hold(self)

    def unpin(self) -> int | None:
        """Read the newest version again; returns the version pinned (None: none)."""
        v, self._sql_version = self._sql_version, None
        if v is not None:
            self.engine.pins.release(self)
        return v

    def begin(self, scoped: bool = False) -> None:
        """Open a transaction (the explicit form of `with s.transaction()`).
        scoped: a `with` block opens it and ends it on the way out, so no
        finalizer need roll it back when the session is dropped open."""
        if self.tx is not None or (scoped and self.sql_block):
            # (SQL's block that has not written yet: its first write begins it)
            raise TransactionError("this session already has an open transaction")
        if self._tx is not None:     # ended under it (a close rolled it back)
            self._take_tx("begin")
        tx = self.engine.begin(self.timeout, self.branch_id, self.server_files)
        self._tx = tx
        if not scoped:
            # dropped with the transaction open: roll it back (the engine, not the
            # session, is referenced, so the session can be collected)
            self._finalizer = weakref.finalize(self, self.engine.rollback, tx)
            self._finalizer.atexit = False

    def commit(self) -> int:
        """Commit the open transaction; returns its version."""
        tx = self._take_tx("commit")
        return self.engine.commit(tx)

    def rollback(self) -> None:
        """Undo the open transaction (nothing open: nothing to do)."""
        if self._tx is not None:
            self.engine.rollback(self._take_tx("rollback"))

    def _take_tx(self, verb: str) -> "Transaction":
        tx = self._tx
        if tx is None:
            raise TransactionError(f"{verb}: this session has no open transaction")
        self._tx = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        return tx

    def snapshot(self, as_of=None, branch: str | None = None) -> "Snapshot":
        """What one read sees, taken here for every read (the API's, SQL's, the
        server's): this session's branch, or `branch` (a name), as of a version
        (`as_of`: a version number or an aware datetime; None: the newest), with
        this session's own uncommitted writes when it reads its transaction's branch."""
        tx = self.tx
        if branch is None:
            if as_of is None and tx is None:
                if self._sql_failed and self._let_go():
                    raise TransactionAbortedError(
                        "current transaction is aborted, commands ignored until end of "
                        "transaction block")
                as_of = self.sql_version       # (None: the newest)
                if as_of is not None:
                    oldest = self.engine.oldest_version()
                    if as_of < oldest and (as_of > 0 or oldest > 1):   # (0: the empty file)
                        raise self._snapshot_gone(as_of)
            return self.engine.snapshot(as_of, tx=tx,
                                        branch=tx.branch if tx is not None else self.branch_id)
        bid = self.engine.catalog.named(branch).id
        if tx is not None and bid != tx.branch:
            tx = None      # another branch: its committed state, not this one's writes
        if as_of is None:
            as_of = self.engine.read_version(tx, bid)
        return self.engine.snapshot(as_of, tx=tx, branch=bid)

    def _snapshot_gone(self, version: int) -> SqlError:
        """The error of a REPEATABLE READ block whose version is no longer held:
        a vacuum in another process (whose pins are its own) dropped it, and
        this connection's refresh() loaded the vacuumed file. The block fails
        (and lets its version go) and answers 40001, which a client retries, as
        PostgreSQL answers a serializable transaction that cannot go on; never
        another version's rows."""
        self.sql_failed = True
        return SqlError("40001", f"could not serialize access: the state this REPEATABLE "
                                 f"READ block reads (version {version}) was dropped by a "
                                 f"vacuum of another connection to the file (the oldest "
                                 f"version held is {self.engine.oldest_version()}): roll "
                                 "back and retry the block")

    # ---- branches ------------------------------------------------------------

    @property
    def branch_id(self) -> int:
        """The id of the branch this session reads and writes (BranchError once
        that branch is dropped)."""
        bid = self._branch if self._branch is not None else self.db._branch
        b = self.engine.catalog.by_id.get(bid)
        if b is None or b.dropped:
            raise BranchError("the branch this session used was dropped: use() another")
        return bid

    def read_state(self) -> tuple | None:
        """What a read of this session sees now, whole, as a kept search's key
        (query/prepared.py): (the version it reads — the newest visible, or its
        REPEATABLE READ block's — and the branch it reads);
        None in a transaction (its reads see its own writes). A dropped branch
        need not be checked here: the drop is a commit, so the version differs."""
        tx = self._tx
        if (tx is not None and not tx.done) or self._sql_failed and self._let_go():
            return None
        return (self.engine.visible if self._sql_version is None else self._sql_version,
                self._branch if self._branch is not None else self.db._branch)

    @property
    def branch(self) -> str:
        """The name of the branch this session reads and writes."""
        return self.engine.catalog.by_id[self.branch_id].name

    def use(self, name: str) -> None:
        """Read and write branch `name` from now on (not inside a transaction)."""
        if self.tx is not None:
            raise TransactionError("use() inside a transaction: commit or roll back first")
        self._branch = self.engine.catalog.named(name).id

    # ---- what a session reads and writes -------------------------------------

    def collection(self, name: str) -> "Collection":
        """A collection whose reads and writes run in this session."""
        from .collection import Collection
        self.db.collection(name)     # NotFoundError now, not at the first call
        return Collection(self.db, name, self)

    __getitem__ = collection

    def create_collection(self, name: str, schema: dict | None = None,
                          exist_ok: bool = False, *, data=None) -> "Collection":
        """Create a collection (in this session's transaction, if one is open).
        exist_ok=True: a collection of that name with the same schema (indexes
        created since aside) is returned as it is; one with another schema raises
        SchemaError naming the difference.
        data (rows, a DataFrame or an Arrow table) is inserted in the same commit;
        without a schema, the schema is inferred from it (schema_inference). With
        exist_ok=True a collection that exists is returned without the data (and,
        for an inferred schema, without comparing schemas), so the call can run
        again."""
        from .collection import Collection
        validate_name(name)
        if exist_ok is not False and exist_ok is not True:
            raise OptionError(f"exist_ok is True or False, got {brief(exist_ok)}")
        data = creation_data(schema, data)
        parsed = None if schema is None else Schema.parse(schema)   # None: inferred if new
        if exist_ok and self._existing(name, parsed):
            return Collection(self.db, name, self)
        if parsed is None:
            parsed = Schema.parse(infer_schema(data))
        with self.writing() as tx:
            if exist_ok and self._existing(name, parsed):        # made meanwhile?
                return Collection(self.db, name, self)
            coll = Collection(self.db, name, self)
            self.engine.create_collection(
                tx, name, parsed, None if data is None else lambda _: coll.insert(data))
        return coll

    def get_or_create_collection(self, name: str, schema: dict | None = None, *,
                                 data=None) -> "Collection":
        """create_collection(name, schema, exist_ok=True, data=data)."""
        return self.create_collection(name, schema, exist_ok=True, data=data)

    def _existing(self, name: str, schema: Schema | None) -> bool:
        """Is there a collection `name` of this schema (SchemaError: of another;
        None: of any schema)?"""
        self.engine.ensure_open()
        if name not in self.engine.names:
            return False
        if schema is None:
            return True
        diff = schema_difference(self.engine.table(name).schema, schema)
        if diff is not None:
            raise SchemaError(f"a collection named {name!r} exists with another schema: "
                              f"{diff}")
        return True

    def drop_collection(self, name: str) -> None:
        """Drop a collection (in this session's transaction, if one is open): its
        documents are gone for every version; the name can be used again."""
        if not isinstance(name, str):
            raise NotFoundError(f"a collection is named by a str, got {brief(name)}")
        with self.writing() as tx:
            self.engine.drop_collection(tx, self.engine.table(name))

    def sql(self, text: str, params: list | tuple = (), copy_data=None) -> "SqlResult":
        """Run SQL (pgvector's dialect) in this session; see varvedb.sql. `copy_data`
        (bytes, str or a binary file object) is the data of a COPY ... FROM STDIN."""
        global _sql_run
        if _sql_run is None:        # pglast loads with the first statement, not with varvedb
            from .sql import run as _sql_run
        self.engine.ensure_open()
        return _sql_run(self, text, params, copy_data)

    @property
    def version(self) -> int:
        """The version this session reads: its own open transaction's, else the newest."""
        self.engine.ensure_open()
        tx = self.tx
        return self.engine.read_version(tx, tx.branch if tx else self.branch_id)

    def close(self) -> None:
        """Roll back the open transaction, if any, and let go of the version a
        REPEATABLE READ block pinned."""
        self.rollback()
        self.unpin()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "in a transaction" if self.in_transaction else "idle"
        return f"<varvedb.Session {state} on {self.db!r}>"


class TransactionScope:
    """Context manager for a session's transaction; join=True reuses an open one."""
    __slots__ = ("session", "join", "owns")

    def __init__(self, session: Session, join: bool):
        self.session = session
        self.join = join
        self.owns = False

    def __enter__(self) -> "Transaction":
        s = self.session
        if self.join and s.tx is not None:
            return s.tx
        s.begin(scoped=True)
        self.owns = True
        return s._tx

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.owns:
            return
        if exc_type is not None:
            self.session.rollback()
        else:
            self.session.commit()
