"""Transactions that span requests (docs/server.md, "Transactions").

`POST /transactions` opens one: a Session of its own whose write transaction
begins at once, so it takes the file's writer lock as `db.transaction()` does
(a second one waits the connection's lock timeout, then LockTimeoutError).
Requests that carry its id (`X-Varve-Transaction`) run in that session, one at
a time (a lock per transaction), until a commit or a rollback — the routes',
or SQL's COMMIT / ROLLBACK — ends it.

What keeps it honest:
  * an id the server does not hold (never opened, or ended) is
    TransactionNotFoundError: a request that names a transaction never runs
    outside it;
  * a transaction idle for `idle_timeout` seconds (no request in it) is rolled
    back by one reaper thread, which frees the writer lock;
  * a transaction is *failed* once a request in it ran past the server's
    timeout, once one of its SQL statements failed inside BEGIN, or once a
    write failed (the engine aborts it): later requests get 25P02
    (TransactionAbortedError) until it is rolled back, and its commit rolls
    back — as the embedded session after an error;
  * a request that fails after it wrote in the transaction undoes the whole
    transaction (engine.abort): no part of a failed request can commit;
  * closing the server rolls back every open transaction.
"""
from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager

from .. import errors as E
from ..cancel import check

log = logging.getLogger("varvedb.server")

HEADER = "x-varve-transaction"      # the request header naming the transaction
_ENDED_KEPT = 1024                  # ids remembered after they end, to say how they ended


class RemoteTransaction:
    """One transaction opened over HTTP: its session, and the lock its requests take."""
    __slots__ = ("id", "session", "lock", "last_used", "busy", "failure", "ended")

    def __init__(self, tid: str, session):
        self.id = tid
        self.session = session
        self.lock = threading.Lock()      # one request at a time
        self.last_used = time.monotonic()
        self.busy = 0                     # requests that found it and have not finished
        self.failure: str | None = None   # why later requests get 25P02
        self.ended: str | None = None     # how it ended (then it is no longer held)

    @property
    def failed(self) -> bool:
        tx = self.session.tx
        return self.failure is not None or self.session.sql_failed or \
            (tx is not None and tx.aborted)

    @property
    def state(self) -> str:
        return "failed" if self.failed else "open"

    def check_usable(self) -> None:
        """25P02 for a failed transaction (its rollback, or SQL's, still runs)."""
        if self.failed:
            raise E.TransactionAbortedError(
                f"transaction {self.id} is failed ({self.failure or 'a statement in it failed'})"
                ": requests in it are refused until it is rolled back")

    def describe(self) -> dict:
        return {"id": self.id, "state": self.state, "version": self.session.version}


class Transactions:
    """The open transactions of one server, and the reaper of idle ones."""

    def __init__(self, db, idle_timeout: float = 60.0, wait: float = 30.0):
        self.db = db
        self.idle_timeout = idle_timeout
        self.wait = wait                 # seconds a request waits for its transaction's lock
        self._open: dict[str, RemoteTransaction] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._cond = threading.Condition()
        self._reaper: threading.Thread | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._open)

    # ---- open, find, use -------------------------------------------------------

    def open(self, branch: str | None = None) -> RemoteTransaction:
        """A new transaction, its write transaction begun (LockTimeoutError while
        another holds the writer lock past the connection's lock timeout), on
        branch `branch` (None: main)."""
        with self._cond:
            if self._closed:
                raise E.ClosedError("the server is stopping")
        sess = self.db.session(server_files=False)
        sess.begin_joins = True          # SQL's BEGIN in it makes it the block
        try:
            if branch is not None:
                sess.use(branch)
            sess.begin()
        except BaseException:
            sess.close()
            raise
        t = RemoteTransaction(secrets.token_urlsafe(18), sess)
        with self._cond:
            if self._closed:
                sess.close()
                raise E.ClosedError("the server is stopping")
            self._open[t.id] = t
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, daemon=True,
                                                name="varvedb-transaction-reaper")
                self._reaper.start()
            self._cond.notify_all()
        return t

    def find(self, tid: str) -> RemoteTransaction:
        with self._cond:
            t = self._open.get(tid)
            if t is None:
                raise self._not_found(tid)
            return t

    def _not_found(self, tid: str) -> E.TransactionNotFoundError:
        how = self._ended.get(tid)
        shown = tid if len(tid) <= 40 else tid[:40] + "..."
        return E.TransactionNotFoundError(
            f"transaction {shown!r} " + (f"has ended ({how})" if how else "is not open here")
            + "; nothing of this request ran")

    @contextmanager
    def using(self, tid: str):
        """The transaction `tid`, held by the calling request alone (its requests
        run one at a time; a request that waits past `wait` seconds is a
        RequestTimeoutError)."""
        with self._cond:
            t = self._open.get(tid)
            if t is None:
                raise self._not_found(tid)
            t.busy += 1
        try:
            if not t.lock.acquire(timeout=self.wait):
                # given up on, like a request past the timeout: it fails the transaction
                self.fail(tid, "a request in it waited past the server's timeout")
                raise E.RequestTimeoutError(f"transaction {tid} was busy with another "
                                            f"request for {self.wait:g} s; nothing of this "
                                            "request ran, and the transaction is failed")
            try:
                self._ended_by_sql(t)
                if t.ended is not None:       # ended while this request waited
                    raise self._not_found(tid)
                check()                        # abandoned at the timeout while it waited
                yield t
            finally:
                t.last_used = time.monotonic()
                self._ended_by_sql(t)
                t.lock.release()
        finally:
            with self._cond:
                t.busy -= 1
                self._cond.notify_all()

    def _ended_by_sql(self, t: RemoteTransaction) -> None:
        """Forget `t` if its session's transaction has ended (SQL's COMMIT or
        ROLLBACK, or a failed commit): nothing may run in a session with none."""
        if t.ended is None and t.session.tx is None:
            self._forget(t, "ended by SQL's COMMIT or ROLLBACK")

    @contextmanager
    def running(self, t: RemoteTransaction):
        """Run one request's work in `t`: a failure after the work wrote in it
        undoes the transaction (the engine aborts it: later writes and its commit
        raise 25P02), so no part of a failed request can commit."""
        tx = t.session.tx
        frames = tx.frames if tx is not None else 0
        try:
            yield t.session
        except BaseException:
            if tx is not None and not tx.done and tx.frames != frames:
                t.session.engine.abort(tx)
            raise

    def fail(self, tid: str, why: str) -> None:
        """Mark `tid` failed (a request in it ran past the server's timeout)."""
        with self._cond:
            t = self._open.get(tid)
        if t is not None and t.failure is None:
            t.failure = why
            t.session.sql_failed = True     # SQL in it: 25P02, and COMMIT rolls back

    # ---- end --------------------------------------------------------------------

    def commit(self, t: RemoteTransaction) -> int:
        """Commit `t` (held through `using`); a failed one is rolled back and its
        commit raises TransactionAbortedError. Either way it has ended."""
        how = "rolled back: its commit failed"
        try:
            if t.failed:
                why = t.failure or "a statement in it failed"
                t.session.rollback()
                raise E.TransactionAbortedError(f"transaction {t.id} was failed ({why}), so "
                                                "it was rolled back and cannot commit")
            version = t.session.commit()
            how = "committed"
            return version
        finally:
            t.session.rollback()      # what did not commit (nothing, once committed)
            self._forget(t, how)

    def rollback(self, t: RemoteTransaction, how: str = "rolled back") -> None:
        try:
            t.session.rollback()
        finally:
            self._forget(t, how)

    def _forget(self, t: RemoteTransaction, how: str) -> None:
        with self._cond:
            t.ended = how
            self._open.pop(t.id, None)
            self._ended[t.id] = how
            while len(self._ended) > _ENDED_KEPT:
                self._ended.popitem(last=False)

    def close(self) -> None:
        """Roll back every open transaction (the server is stopping); no new one opens."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            held = list(self._open.values())
        for t in held:
            with t.lock:
                if t.ended is None:
                    self.rollback(t, "rolled back: the server stopped")

    # ---- the reaper ------------------------------------------------------------------

    def _reap(self) -> None:
        """Roll back each transaction idle (no request in it) for idle_timeout s."""
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                due = [t for t in self._open.values()
                       if not t.busy and now - t.last_used >= self.idle_timeout]
                if not due:
                    idle = [t.last_used + self.idle_timeout - now
                            for t in self._open.values() if not t.busy]
                    self._cond.wait(min(idle) if idle else None)
                    continue
            for t in due:
                if not t.lock.acquire(blocking=False):
                    continue              # a request took it meanwhile: not idle
                try:
                    with self._cond:
                        still_idle = (t.ended is None and not t.busy and
                                      time.monotonic() - t.last_used >= self.idle_timeout)
                    if still_idle:
                        self.rollback(t, f"rolled back after {self.idle_timeout:g} s idle")
                except E.VarveError:     # the file failed: the rollback is done in memory
                    log.exception("rolling back idle transaction %s failed", t.id)
                finally:
                    t.lock.release()
