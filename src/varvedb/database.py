"""`connect` and `Database`: opening a file, collections, transactions, versions."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from .collection import Collection
from .engine.engine import Engine
from .errors import NotFoundError, OptionError
from .schema import from_micros, is_int
from .session import Session, TransactionScope
from .engine.snapshot import resolve as resolve_version
from .engine.vacuum import Retention
from .storage.backup import BackupInfo
from .storage.verify import VerifyReport, verify_file


def connect(path: str | os.PathLike = ":memory:", *, readonly: bool = False,
            durability: str = "commit", batch_ms: float = 50.0,
            timeout: float = 5.0, retain=None, retain_dead: float = 0.5) -> "Database":
    """Open (creating if missing) a varvedb file; ":memory:" keeps nothing on disk.

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
    """
    db = Database(path, readonly=readonly, durability=durability, batch_ms=batch_ms,
                  timeout=timeout)
    if retain is not None:
        try:
            if db.path is None or readonly:
                raise OptionError("retain= needs a file opened for writing")
            db._engine.retention = Retention(db._engine, retain, retain_dead)
        except BaseException:
            db.close()
            raise
    return db


@dataclass
class VersionInfo:
    version: int
    timestamp: object          # datetime (UTC)
    chain: str                 # hex chain hash
    rows_changed: int


class Database:
    def __init__(self, path, readonly: bool = False, durability: str = "commit",
                 batch_ms: float = 50.0, timeout: float = 5.0):
        path = os.fspath(path)
        self.path = None if path == ":memory:" else path
        self._engine = Engine(self.path, readonly, durability, batch_ms, timeout)
        self._local = threading.local()

    # ---- sessions ------------------------------------------------------------

    def session(self, timeout: float | None = None) -> Session:
        """A new session: its own transaction, independent of threads (see Session).
        `timeout` overrides the connection's lock timeout for its transactions."""
        self._engine._ensure_open()
        return Session(self, timeout)

    def _thread_session(self) -> Session:
        """The calling thread's default session: what db.transaction() and the
        collections from db.collection() use."""
        s = getattr(self._local, "session", None)
        if s is None:
            s = self._local.session = Session(self)
        return s

    def sql(self, text: str, params: list | tuple = ()):
        """Run SQL in pgvector's dialect (in this thread's session); returns a SqlResult.

            db.sql("SELECT id FROM docs WHERE tag = $1 ORDER BY embedding <-> $2 LIMIT 5",
                   [3, q])
        """
        s = getattr(self._local, "session", None) or self._thread_session()
        return s.sql(text, params)

    # ---- collections -------------------------------------------------------

    def create_collection(self, name: str, schema: dict) -> Collection:
        """Create a collection with a schema of field name -> type."""
        self._thread_session().create_collection(name, schema)
        return Collection(self, name)

    def drop_collection(self, name: str) -> None:
        """Drop a collection: its documents are gone for every version (as_of
        included); the name can be used again by a new collection."""
        self._thread_session().drop_collection(name)

    def collection(self, name: str) -> Collection:
        """An existing collection (NotFoundError if there is none by that name)."""
        if not isinstance(name, str):    # a list as a dict key raised TypeError
            raise NotFoundError(f"a collection is named by a str, got {name!r:.80}")
        self._engine.table(name)
        return Collection(self, name)

    __getitem__ = collection

    def collections(self) -> list[str]:
        self._engine._ensure_open()
        return sorted(self._engine.names)

    # ---- transactions and versions -------------------------------------------

    def transaction(self) -> TransactionScope:
        """Group writes into one commit; an exception inside rolls all of them back.

            with db.transaction():
                docs.insert(...); docs.delete(ids=[3])

        The transaction is the calling thread's (its default session's)."""
        return self._thread_session().transaction()

    @property
    def version(self) -> int:
        """The newest version this thread sees (its open transaction's, if any)."""
        return self._thread_session().version

    def history(self) -> list[VersionInfo]:
        """Every commit still held: version, timestamp, chain hash, rows changed."""
        v = self.version
        return [VersionInfo(c.version, from_micros(c.timestamp_us), c.chain.hex(),
                            c.rows_changed) for c in self._engine.history if c.version <= v]

    def verify(self, anchor: tuple[int, str] | None = None) -> VerifyReport:
        """Re-read every frame, recompute every digest and the chain (see verify_file).

        anchor=(version, chain hex) also checks that history up to that
        version is the one the caller saw before (no rewrite, no truncation).
        """
        self._engine._ensure_open()
        if anchor is not None and (not isinstance(anchor, (tuple, list)) or len(anchor) != 2
                                   or not is_int(anchor[0]) or not isinstance(anchor[1], str)):
            raise OptionError(f"anchor is (version, chain hex), got {anchor!r:.80}")
        if self.path is None:
            return VerifyReport(True, self.version, None, "")
        return verify_file(self.path, anchor=anchor, expect_version=self._engine.written)

    def vacuum(self, keep=None, progress: bool | None = None):
        """Compact the file: drop the row versions that none of the kept versions
        can see, and the history before them. `keep`: None (every version: only
        what no version sees goes, e.g. rows of dropped collections), a number of
        the newest versions, or an aware datetime (the version visible then and
        every later one). The kept versions keep their numbers, timestamps and
        chain hashes; as_of an older one raises VersionNotFoundError naming the
        oldest kept. The new file is written beside this one and renamed into
        place (a crash leaves one or the other whole); other writers wait.
        Returns a VacuumReport (versions kept, rows dropped, bytes before/after)."""
        return self._engine.vacuum(keep, progress)

    def backup(self, path: str | os.PathLike, progress: bool | None = None) -> BackupInfo:
        """Copy the file, as of its newest durable commit, to `path` (a new file)
        while writes go on: the copy is fsynced and verified before this returns,
        and opens on its own with the same history (as_of, verify, chain hashes).
        `progress`: a bar (None: for large files when stderr is a terminal)."""
        return self._engine.backup(os.fspath(path), progress)

    def restore(self, version) -> int:
        """A new commit whose documents equal those as of `version` (a version
        number or an aware datetime), in every collection; history is kept, so
        restoring is itself undone by restoring the version before it. Fields
        and indexes stay as they are now. Returns the new version (the current
        one when nothing differs)."""
        s = self._thread_session()
        v = resolve_version(self._engine, version, s.version)
        with s._writing() as tx:
            self._engine.restore(tx, v)
        return s.version

    def checkpoint(self) -> None:
        """Write the current state so the next open loads it instead of replaying."""
        self._engine.checkpoint()

    def refresh(self) -> int:
        """See commits added by another connection since open. Returns the version."""
        return self._engine.refresh()

    def close(self) -> None:
        self._engine.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<varvedb.Database {self.path or ':memory:'} version {self._engine.visible}>"
