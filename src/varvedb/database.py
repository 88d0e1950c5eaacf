"""`connect` and `Database`: opening a file, collections, transactions, versions."""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

from .collection import Collection
from .engine.engine import Engine, checkpoint_breaks, freeze_loaded_modules
from .engine import merge
from .engine.branches import MAIN
from .kernels import ahead
from .errors import BranchError, NotFoundError, OptionError, TransactionError
from .schema import brief, from_micros, is_int
from .session import Session, TransactionScope
from .engine.snapshot import resolve as resolve_version
from .engine.vacuum import Retention
from .storage.backup import BackupInfo
from .reports import BranchInfo
from .results import VersionInfo
from .storage import verify
from .storage.verify import VerifyReport


def connect(path: str | os.PathLike = ":memory:", *, readonly: bool = False,
            durability: str = "commit", batch_ms: float = 50.0,
            timeout: float = 5.0, retain=None, retain_dead: float = 0.5,
            branch: str = "main") -> "Database":
    """Open (creating if missing) a varvedb file; ":memory:" (the default) keeps
    nothing on disk; an empty path is an OptionError. The path is resolved once
    (symlinks followed, made absolute; `Database.path`): the connection keeps
    that file, whatever the name or the working directory names later.

    durability: "commit" (fdatasync before each commit returns; concurrent
    commits share one), "batch" (fdatasync at most every `batch_ms`
    milliseconds) or "off" (the OS decides). readonly=True opens without the
    write lock; call `refresh()` to see commits made since by the writer.
    timeout: how many seconds a transaction waits for another session's to end
    before it raises LockTimeoutError.
    retain: automatic vacuum, off (None) by default: the number of newest
    versions to keep, or a datetime.timedelta (the versions younger than
    that). Once the row versions that such a vacuum would drop pass
    `retain_dead` of all of them, one runs in the background (Database.vacuum).
    branch: the branch read and written (Database.branch makes one; use() switches).
    """
    freeze_loaded_modules()     # once: numba's objects out of every full gc (issue 28)
    db = Database(path, readonly=readonly, durability=durability, batch_ms=batch_ms,
                  timeout=timeout)
    try:
        if branch != "main":
            db.use(branch)
    except BaseException:
        db.close()
        raise
    if retain is not None:
        try:
            if db.path is None or readonly:
                raise OptionError("retain= needs a file opened for writing")
            db.engine.retention = Retention(db.engine, retain, retain_dead)
        except BaseException:
            db.close()
            raise
    return db



def verify_file(path, anchor: tuple[int, str] | None = None,
                expect_version: int | None = None) -> VerifyReport:
    """Prove the file at path holds the history that was written: every frame's
    hash, every commit's digest and chain hash, both superblock slots
    (storage/verify.py), and the state each checkpoint a slot names holds
    against the log replayed to its version (engine.checkpoint_breaks).
    anchor=(version, chain hex) also checks that history up to that version is
    the one the caller saw before."""
    return verify.verify_file(path, anchor, expect_version,
                              states=checkpoint_breaks)

@contextmanager
def thread_session_as(db: "Database", session: Session):
    """While the block lasts, `session` is the calling thread's session of `db`: its
    verbs (vacuum, drop_branch, ...) see the transaction `session` has open and are
    refused in it as they are in the thread's own (AsyncDatabase: a task's session,
    lent to a pool thread)."""
    local = db._local
    before = getattr(local, "session", None)
    local.session = session
    try:
        yield
    finally:
        if before is None:
            del local.session
        else:
            local.session = before


class Database:
    def __init__(self, path, readonly: bool = False, durability: str = "commit",
                 batch_ms: float = 50.0, timeout: float = 5.0):
        try:
            path = os.fspath(path)
        except TypeError:
            raise OptionError(f"a database's path is a str or os.PathLike (\":memory:\" for "
                              f"one kept in memory), got {type(path).__name__}") from None
        if not path:        # else taken as no path: a typo'd path would silently keep nothing
            raise OptionError('the path is empty: name a file, or ":memory:" for a database '
                              "kept in memory")
        self.engine = Engine(None if path == ":memory:" else path, readonly, durability,
                             batch_ms, timeout)
        self.path = self.engine.path     # resolved: the file this connection opened
        self._local = threading.local()
        self._branch = MAIN         # the branch its sessions use, unless one use()s another

    # ---- sessions ------------------------------------------------------------

    def session(self, timeout: float | None = None, *, server_files: bool = True) -> Session:
        """A new session: its own transaction, independent of threads (see Session).
        `timeout` overrides the connection's lock timeout for its transactions.
        server_files=False takes from it the privilege of reading this machine's
        files (COPY FROM 'file', embed() loading a model from disk, a field made
        with such an embedder: SQLSTATE 42501), as the server does for its
        clients' sessions."""
        self.engine.ensure_open()
        return Session(self, timeout, server_files)

    def thread_session(self) -> Session:
        """The calling thread's default session: what db.transaction() and the
        collections from db.collection() use."""
        try:
            return self._local.session
        except AttributeError:        # (no getattr with a default: every read asks)
            s = self._local.session = Session(self)
            return s

    def sql(self, text: str, params: list | tuple = (), copy_data=None):
        """Run SQL in pgvector's dialect (in this thread's session); returns a SqlResult.
        `copy_data` (bytes, str or a binary file object) is what a COPY ... FROM STDIN
        reads; COPY ... TO STDOUT returns its data in the result's copy_data.

            db.sql("SELECT id FROM docs WHERE tag = $1 ORDER BY embedding <-> $2 LIMIT 5",
                   [3, q])
        """
        s = getattr(self._local, "session", None) or self.thread_session()
        return s.sql(text, params, copy_data)

    # ---- collections -------------------------------------------------------

    def create_collection(self, name: str, schema: dict | None = None,
                          exist_ok: bool = False, *, data=None) -> Collection:
        """Create a collection with a schema of field name -> type. exist_ok=True:
        a collection of that name with the same schema (indexes created since
        aside) is returned; one with another schema raises SchemaError naming
        the difference. data (rows, a DataFrame, an Arrow table) is inserted in
        the same commit, and without a schema the schema is inferred from it:

            docs = db.create_collection("docs", data=[{"id": "a", "n": 1}])  # text ids

        With exist_ok=True an existing collection is returned without the data."""
        self.thread_session().create_collection(name, schema, exist_ok, data=data)
        ahead.start(ahead.shares_for(self.engine.table(name).schema.fields.values()))
        return Collection(self, name)

    def get_or_create_collection(self, name: str, schema: dict | None = None, *,
                                 data=None) -> Collection:
        """create_collection(name, schema, exist_ok=True, data=data)."""
        return self.create_collection(name, schema, exist_ok=True, data=data)

    def drop_collection(self, name: str) -> None:
        """Drop a collection: its documents are gone for every version (as_of
        included); the name can be used again by a new collection."""
        self.thread_session().drop_collection(name)

    def collection(self, name: str) -> Collection:
        """An existing collection (NotFoundError if there is none by that name)."""
        if not isinstance(name, str):    # a list as a dict key raised TypeError
            raise NotFoundError(f"a collection is named by a str, got {brief(name)}")
        ahead.start(ahead.shares_for(self.engine.table(name).schema.fields.values()))
        return Collection(self, name)

    __getitem__ = collection

    def collections(self) -> list[str]:
        self.engine.ensure_open()
        return sorted(self.engine.names)

    # ---- transactions and versions -------------------------------------------

    def transaction(self) -> TransactionScope:
        """Group writes into one commit; an exception inside rolls all of them back.

            with db.transaction():
                docs.insert(...); docs.delete(ids=[3])

        The transaction is the calling thread's (its default session's)."""
        return self.thread_session().transaction()

    @property
    def version(self) -> int:
        """The newest version this thread sees (its open transaction's, if any)."""
        return self.thread_session().version

    def history(self) -> list[VersionInfo]:
        """Every commit still held on this branch's line (its ancestors' up to each
        fork, then its own): version, timestamp, chain hash, rows changed, branch."""
        s = self.thread_session()
        v = s.version
        eng = self.engine
        view = eng.catalog.view(s.branch_id, v)
        names = {b.id: b.name for b in eng.catalog.by_id.values()}
        return [VersionInfo(c.version, from_micros(c.timestamp_us), c.chain.hex(),
                            c.rows_changed, names[c.branch])
                for c in eng.history if c.version <= v and view.holds(c.branch, c.version)]

    # ---- branches (docs: README "Branches") --------------------------------------

    @property
    def current_branch(self) -> str:
        """The branch this thread reads and writes."""
        return self.thread_session().branch

    def use(self, name: str) -> None:
        """Read and write branch `name` (this connection's sessions that have not
        chosen their own with Session.use); not inside a transaction."""
        self.engine.ensure_open()
        if self.thread_session().in_transaction:
            raise TransactionError("use() inside a transaction: commit or roll back first")
        self._branch = self.engine.catalog.named(name).id

    def branch(self, name: str, at=None) -> BranchInfo:
        """Fork a new branch `name` from the current one as of `at` (a version or
        an aware datetime; None: now). Nothing is copied: the branch sees the
        current branch up to `at`, then its own writes; main never sees them.
        Making it is a commit of the new branch (it has a version and a chain hash)."""
        s = self.thread_session()
        head = s.version
        at = head if at is None else resolve_version(self.engine, at, head)
        with s.transaction() as tx:
            self.engine.create_branch(tx, name, at)
        return self._branch_info(self.engine.catalog.named(name))

    def branches(self) -> list[BranchInfo]:
        """Every live branch, main first."""
        self.engine.ensure_open()
        live = sorted(self.engine.catalog.live(), key=lambda b: b.id)
        return [self._branch_info(b) for b in live]

    def _branch_info(self, b) -> BranchInfo:
        eng = self.engine
        parent = eng.catalog.by_id[b.parent].name if b.parent >= 0 else None
        return BranchInfo(b.name, parent, b.fork, b.created, eng.read_version(None, b.id))

    def drop_branch(self, name: str) -> None:
        """Drop branch `name`: it can no longer be read or written and its name is
        free; its rows stay in the file, seen by no one, until a vacuum. The drop
        is a commit on the branch it forked from, made at once: not inside a
        transaction (TransactionError), SQL's BEGIN block included."""
        b = self.engine.catalog.named(name)
        if b.id == MAIN:
            raise BranchError("main cannot be dropped")
        self._outside_transaction("drop_branch()")
        if b.id == self.thread_session().branch_id:
            raise BranchError(f"{name!r} is the branch in use: use() another first")
        s = Session(self)          # the drop is a commit on its parent
        s._branch = b.parent
        with s.transaction() as tx:
            self.engine.drop_branch(tx, b.id)

    def merge(self, source: str) -> int:
        """Apply branch `source`'s changes since it and the current branch last met
        (their fork, or the newer of their merges either way) onto the current
        branch, as one commit (engine/merge.py). Raises MergeConflictError, having written nothing, when an id
        changed on both sides to different documents. Returns the version."""
        src = self.engine.catalog.named(source)
        s = self.thread_session()
        with s.transaction() as tx:
            self.engine.merge(tx, src.id)
        return s.version

    def diff(self, a, b) -> dict:
        """What changed from `a` to `b`, per collection: {name: Changes(added,
        changed, deleted)} (sorted ids). Each side is a version of the current
        branch, a branch name (its newest version), or (branch name, version)."""
        return merge.diff(self.engine, self._view_of(a), self._view_of(b))

    def _view_of(self, side):
        eng = self.engine
        s = self.thread_session()
        if isinstance(side, str):
            b = eng.catalog.named(side)
            return eng.catalog.view(b.id, eng.read_version(None, b.id))
        if isinstance(side, (tuple, list)) and len(side) == 2 and isinstance(side[0], str):
            b = eng.catalog.named(side[0])
            return eng.catalog.view(b.id, resolve_version(eng, side[1], eng.visible))
        if isinstance(side, (tuple, list, str)):
            raise OptionError(f"a side of a diff is a version, a branch name or (branch, "
                              f"version), got {brief(side)}")
        return eng.catalog.view(s.branch_id, resolve_version(eng, side, s.version))

    def verify(self, anchor: tuple[int, str] | None = None) -> VerifyReport:
        """Re-read every frame, recompute every digest and the chain, and compare
        each checkpoint's state with the log's (see verify_file).

        anchor=(version, chain hex) also checks that history up to that
        version is the one the caller saw before (no rewrite, no truncation).
        """
        self.engine.ensure_open()
        if anchor is not None and (not isinstance(anchor, (tuple, list)) or len(anchor) != 2
                                   or not is_int(anchor[0]) or not isinstance(anchor[1], str)):
            raise OptionError(f"anchor is (version, chain hex), got {brief(anchor)}")
        if self.path is None:
            return VerifyReport(True, self.version, None, "")
        return verify_file(self.path, anchor=anchor, expect_version=self.engine.written)

    def vacuum(self, keep=None, progress: bool | None = None, graphs: str = "rebuild"):
        """Compact the file: drop the row versions that none of the kept versions
        can see, and the history before them. `keep`: None (every version: only
        what no version sees goes, e.g. rows of dropped collections), a number of
        the newest versions, or an aware datetime (the version visible then and
        every later one). The kept versions keep their numbers, timestamps and
        chain hashes; as_of an older one raises VersionNotFoundError naming the
        oldest kept. Versions before the last drop_branch() are never kept (the
        dropped branches' commits go with them). The new file is written beside
        this one and renamed into place (a crash leaves one or the other whole);
        other writers wait.
        `graphs`: "rebuild" (each HNSW graph built again from the kept rows) or
        "repair" (the graph kept, less the dropped nodes, each list that named one
        chosen again from its neighbourhood; see README "History").
        Returns a VacuumReport (versions kept, rows dropped, bytes before/after).
        Not inside a transaction (TransactionError), SQL's BEGIN block included,
        as PostgreSQL's VACUUM; an open REPEATABLE READ block of another session
        keeps the version it reads (docs/sql.md)."""
        self._outside_transaction("vacuum()")
        return self.engine.vacuum(keep, progress, graphs)

    def _outside_transaction(self, verb: str) -> None:
        """TransactionError where the calling thread's session is in a transaction,
        SQL's block included (BEGIN's, before its first write too): a verb that
        commits apart from it (drop_branch's session of its own) or replaces the
        file (vacuum) would escape the block's ROLLBACK and its READ ONLY."""
        if self.thread_session().in_transaction:
            raise TransactionError(f"{verb} inside a transaction: commit or roll back first")

    def backup(self, path: str | os.PathLike, progress: bool | None = None) -> BackupInfo:
        """Copy the file, as of its newest durable commit, to `path` (a new file)
        while writes go on: the copy is fsynced and verified before this returns,
        and opens on its own with the same history (as_of, verify, chain hashes).
        `progress`: a bar (None: for large files when stderr is a terminal)."""
        return self.engine.backup(os.fspath(path), progress)

    def backup_stream(self) -> tuple[int, int, Iterator[bytes]]:
        """backup() as a stream of bytes instead of a file: (version, size, chunks),
        the chunks being what backup() would write, as of the newest durable
        commit, held one at a time (the server's GET /backup; Client.backup writes
        them to the client's own file). Exhaust or close the chunks."""
        return self.engine.backup_stream()

    def restore(self, version) -> int:
        """A new commit whose documents equal those as of `version` (a version
        number or an aware datetime), in every collection; history is kept, so
        restoring is itself undone by restoring the version before it. Fields
        and indexes stay as they are now. Returns the new version (the current
        one when nothing differs)."""
        s = self.thread_session()
        v = resolve_version(self.engine, version, s.version)
        with s.writing() as tx:
            self.engine.restore(tx, v)
        return s.version

    def checkpoint(self, progress: bool | None = None) -> None:
        """Write the current state so the next open loads it instead of replaying.
        Rows a graph has yet to link are linked first (`progress`: a bar; None:
        when many are left and stderr is a terminal)."""
        self.engine.checkpoint(progress)

    def refresh(self) -> int:
        """See commits added by another connection since open. Returns the version."""
        return self.engine.refresh()

    def close(self, wait: bool | None = None, progress: bool | None = None) -> None:
        """Close the file (a checkpoint first when the next open would replay much).

        Commits return before a graph links their rows (`index_status`). Rows
        still unlinked: `wait=True` links them now (a bar per `progress`);
        `wait=False` saves each graph as far as it is linked and returns at once,
        the next open linking the rest in the background while exact scans answer
        for those rows; the default waits only for a few (about a second's work).

        This thread's open transaction is rolled back. Another session's is
        waited for up to the lock timeout, then LockTimeoutError is raised and
        the database stays open (that session may be writing at this moment)."""
        self.engine.close(wait, progress)

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<varvedb.Database {self.path or ':memory:'} version {self.engine.visible}>"
