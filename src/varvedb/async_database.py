"""AsyncDatabase: the embedded API's verbs as coroutines, for asyncio programs.

    db = await vv.connect_async("notes.varve")
    docs = await db.create_collection("docs", {"title": "text", "emb": vv.Vector(384)})
    hits = await docs.search(vector=q)
    async with db.transaction():            # this task's calls, one commit
        await docs.insert(rows)
        await docs.delete(ids=[3])
    await db.aclose()

Each verb runs on a thread of the database's own pool, so the event loop never
waits on a search, a commit's fdatasync or an open; many tasks' reads run at
once (the kernels release the GIL). A transaction belongs to a task, not to a
thread: the task gets a Session of its own (a Session, unlike a thread's default
one, may move between threads), its calls inside the block run in it one at a
time, and the block commits at a clean exit and rolls back at an exception. A
`BEGIN` sent through `sql()` pins its session to the task the same way until its
`COMMIT` or `ROLLBACK`. A task canceled while its read runs cancels the read
(QueryCanceledError at its next check); a write, once begun, runs to its end.
A task canceled as its block ends still ends the transaction (a commit runs to
its end), then raises the CancelledError with a note saying how it ended.
"""
from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import os
from concurrent.futures import ThreadPoolExecutor

from . import cancel
from .collection import Collection
from .database import Database, connect, thread_session_as
from .errors import ClosedError, OptionError, TransactionError
from .schema import brief
from .session import Session

# {an AsyncDatabase's key: the _Lease its transaction holds}, per task
_PINS: contextvars.ContextVar = contextvars.ContextVar("varvedb_async_pins", default=None)


async def connect_async(path=":memory:", *, threads: int | None = None, **options
                        ) -> "AsyncDatabase":
    """vv.connect(path, **options) on a thread, as an AsyncDatabase; `threads`:
    how many verbs run at once (default: the cores + 4, at most 32)."""
    pool = _thread_pool(threads)
    try:
        db = await asyncio.get_running_loop().run_in_executor(
            pool, functools.partial(connect, path, **options))
    except BaseException:
        pool.shutdown(wait=False)
        raise
    return AsyncDatabase(db, pool=pool)


def _thread_pool(threads) -> ThreadPoolExecutor:
    if threads is None:
        threads = min(32, (os.cpu_count() or 1) + 4)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise OptionError(f"threads is a whole number of at least 1, got {brief(threads)}")
    return ThreadPoolExecutor(threads, thread_name_prefix="varvedb-async")


class _Lease:
    """A session lent to one call, or held by one task's transaction."""
    __slots__ = ("session", "collections", "lock", "owner", "thread")

    def __init__(self, session: Session):
        self.session = session
        self.collections: dict[str, Collection] = {}
        self.lock = asyncio.Lock()   # while held by a task: its calls (and its children's) in turn
        self.owner: str | None = None   # "block": `async with transaction()`; "sql": a BEGIN
        # A transaction's calls run on a thread of its own, not the shared pool's:
        # calls waiting for the writer lock could otherwise fill the pool while the
        # transaction that holds the lock waits for a thread to commit on.
        self.thread: ThreadPoolExecutor | None = None

    def own_thread(self) -> ThreadPoolExecutor:
        if self.thread is None:
            self.thread = ThreadPoolExecutor(1, thread_name_prefix="varvedb-async-tx")
        return self.thread

    def collection(self, name: str) -> Collection:
        c = self.collections.get(name)
        if c is None:
            c = self.collections[name] = Collection(self.session.db, name, self.session)
        return c


class AsyncDatabase:
    """A Database whose verbs are coroutines (see the module's docstring).
    `AsyncDatabase(db)` wraps an open Database; vv.connect_async opens one."""

    def __init__(self, db: Database, threads: int | None = None, *,
                 pool: ThreadPoolExecutor | None = None):
        if not isinstance(db, Database):
            raise OptionError(f"AsyncDatabase wraps a Database (vv.connect), got {brief(db)}")
        self.db = db
        self._threads = pool if pool is not None else _thread_pool(threads)
        self._idle: collections.deque[_Lease] = collections.deque()
        self._leases: list[_Lease] = []      # every lease made: their threads shut at close
        self._key = object()

    def __repr__(self) -> str:
        return f"<varvedb.AsyncDatabase on {self.db!r}>"

    # ---- running a verb ------------------------------------------------------

    def _held(self) -> _Lease | None:
        """The lease this task's open transaction holds, if any."""
        pins = _PINS.get()
        lease = pins.get(self._key) if pins else None
        if lease is not None and lease.owner is None:    # ended (a child task's stale copy)
            self._pin(None)
            return None
        return lease

    def _pin(self, lease: _Lease | None) -> None:
        pins = dict(_PINS.get() or {})
        if lease is None:
            pins.pop(self._key, None)
        else:
            pins[self._key] = lease
        _PINS.set(pins)

    def _lease(self) -> _Lease:
        try:
            return self._idle.pop()
        except IndexError:
            lease = _Lease(self.db.session())
            self._leases.append(lease)
            return lease

    def _recycle(self, lease: _Lease) -> None:
        """Lend `lease` again once a thread has rolled back what it left open."""
        def back():
            lease.session.rollback()          # nothing open: nothing to do
            lease.owner = None
            self._idle.append(lease)
        try:
            self._threads.submit(back)
        except RuntimeError:                  # the pool is shut down: closed
            pass

    async def _on_thread(self, fn, lease: _Lease, after_cancel, own: bool = False):
        """fn(lease) on a pool thread (the lease's own when `own`: a transaction's
        call), under a cancel token that this task's cancellation sets;
        after_cancel() runs once the thread is done with the lease, when the task
        was canceled before that."""
        if self.db.engine.closed:
            raise ClosedError("the database is closed")
        token = cancel.CancelToken()
        ctx = contextvars.copy_context()

        def work():
            with cancel.running(token):
                return fn(lease)
        threads = lease.own_thread() if own else self._threads
        fut = asyncio.get_running_loop().run_in_executor(threads, ctx.run, work)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            token.cancel("the task awaiting it was canceled")

            def done(f):
                if not f.cancelled():
                    f.exception()             # read: asyncio logs no "never retrieved"
                after_cancel()
            fut.add_done_callback(done)
            raise

    async def _run(self, fn):
        """fn(lease) in this task's transaction's session, else in an idle one."""
        held = self._held()
        if held is not None:
            await held.lock.acquire()
            if held.owner is not None:        # not ended while this call waited
                try:
                    out = await self._on_thread(fn, held, held.lock.release, own=True)
                except asyncio.CancelledError:
                    raise                     # the lock is released when the thread is done
                except BaseException:
                    self._after_held(held)
                    raise
                self._after_held(held)
                return out
            held.lock.release()
            self._pin(None)
        lease = self._lease()
        try:
            out = await self._on_thread(fn, lease, lambda: self._recycle(lease))
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._after_lent(lease)
            raise
        self._after_lent(lease)
        return out

    def _after_held(self, held: _Lease) -> None:
        held.lock.release()
        if held.owner == "sql" and not held.session.in_transaction:
            held.owner = None                 # SQL's COMMIT or ROLLBACK ended it
            self._pin(None)
            self._idle.append(held)

    def _after_lent(self, lease: _Lease) -> None:
        """A session SQL's BEGIN left open is this task's now; else it is idle again."""
        if lease.session.in_transaction:
            lease.owner = "sql"
            self._pin(lease)
        else:
            self._idle.append(lease)

    # ---- the verbs -------------------------------------------------------------

    async def sql(self, text: str, params: list | tuple = (), copy_data=None):
        """Database.sql; a BEGIN holds its session for this task until COMMIT/ROLLBACK."""
        return await self._run(lambda lease: lease.session.sql(text, params, copy_data))

    async def create_collection(self, name: str, schema: dict | None = None,
                                exist_ok: bool = False, *, data=None) -> "AsyncCollection":
        await self._run(lambda lease: lease.session.create_collection(
            name, schema, exist_ok, data=data))
        return AsyncCollection(self, name)

    async def get_or_create_collection(self, name: str, schema: dict | None = None, *,
                                       data=None) -> "AsyncCollection":
        return await self.create_collection(name, schema, exist_ok=True, data=data)

    async def collection(self, name: str) -> "AsyncCollection":
        """An existing collection (NotFoundError if there is none by that name)."""
        await self._run(lambda lease: lease.session.collection(name))
        return AsyncCollection(self, name)

    async def drop_collection(self, name: str) -> None:
        await self._run(lambda lease: lease.session.drop_collection(name))

    def transaction(self) -> "AsyncTransaction":
        """`async with db.transaction():` this task's calls on this database run in
        one transaction: committed at a clean exit, rolled back at an exception."""
        return AsyncTransaction(self)

    async def version(self) -> int:
        """The newest version this task sees (its open transaction's, if any)."""
        return await self._run(lambda lease: lease.session.version)

    async def aclose(self, wait: bool | None = None) -> None:
        """Database.close(wait) on a thread (a close may link and checkpoint), then
        the pool."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._threads, functools.partial(self.db.close, wait))
        self._threads.shutdown(wait=False)
        for lease in self._leases:
            if lease.thread is not None:
                lease.thread.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncDatabase":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


def _database_verb(name: str):
    """Database.<name> as a coroutine, run with the task's session as its thread's
    (a verb refused inside a transaction, vacuum or drop_branch, sees the task's)."""
    method = getattr(Database, name)

    def call(db, lease, args, kwargs):
        with thread_session_as(db, lease.session):
            return method(db, *args, **kwargs)

    @functools.wraps(method)
    async def verb(self, *args, **kwargs):
        return await self._run(lambda lease: call(self.db, lease, args, kwargs))
    return verb


for _name in ("collections", "history", "branch", "branches", "drop_branch", "use", "merge",
              "diff", "verify", "vacuum", "backup", "restore", "checkpoint", "refresh"):
    setattr(AsyncDatabase, _name, _database_verb(_name))


class AsyncTransaction:
    """The scope of AsyncDatabase.transaction()."""
    __slots__ = ("adb", "lease", "version")

    def __init__(self, adb: AsyncDatabase):
        self.adb = adb
        self.lease: _Lease | None = None
        self.version: int | None = None     # the commit's, once committed

    async def __aenter__(self) -> "AsyncTransaction":
        adb = self.adb
        if adb._held() is not None:
            raise TransactionError("this task already has an open transaction on this "
                                   "database")
        lease = adb._lease()
        recycle = functools.partial(adb._recycle, lease)
        try:
            await adb._on_thread(lambda le: le.session.begin(scoped=True), lease, recycle,
                                 own=True)
        except asyncio.CancelledError:
            raise
        except BaseException:
            recycle()
            raise
        lease.owner = "block"
        self.lease = lease
        adb._pin(lease)
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        self.adb._pin(None)
        # a task canceled here still ends the transaction (a commit, once on its
        # thread, runs to its end), then raises, its note saying which way;
        # a block that raised has rolled back, and its exception goes on
        await cancel.end_transaction(self, self._end(commit=exc_type is None))

    async def _end(self, commit: bool) -> None:
        adb, lease = self.adb, self.lease
        await lease.lock.acquire()      # a child task's call still running ends first
        lease.owner = None              # what waits on the lock now runs outside it
        end = (lambda le: le.session.commit()) if commit else \
            (lambda le: le.session.rollback())

        def after():
            lease.lock.release()
            adb._recycle(lease)
        try:
            self.version = await adb._on_thread(end, lease, after, own=True)
        except asyncio.CancelledError:
            raise
        except BaseException:
            after()
            raise
        after()


class AsyncCollection:
    """A collection's verbs as coroutines (from AsyncDatabase.collection)."""
    __slots__ = ("adb", "name")

    def __init__(self, adb: AsyncDatabase, name: str):
        self.adb = adb
        self.name = name

    def __repr__(self) -> str:
        return f"<AsyncCollection {self.name!r}>"


def _collection_verb(name: str):
    """Collection.<name> as a coroutine, run in the task's session."""
    method = getattr(Collection, name)

    @functools.wraps(method)
    async def verb(self, *args, **kwargs):
        return await self.adb._run(lambda lease: method(lease.collection(self.name),
                                                        *args, **kwargs))
    return verb


# every verb of the embedded Collection but the writer's two-step bulk path
# (prepare_rows / insert_prepared / prepared_now take a transaction object)
COLLECTION_VERBS = ("insert", "insert_arrays", "upsert", "replace", "update", "delete",
                    "create_index", "drop_index", "add_field", "drop_field", "rename_field",
                    "get", "count", "find", "run", "index_status", "wait_indexed",
                    "vector_memory", "search", "explain", "plan", "history", "corpus_stats")
for _name in COLLECTION_VERBS:
    setattr(AsyncCollection, _name, _collection_verb(_name))
