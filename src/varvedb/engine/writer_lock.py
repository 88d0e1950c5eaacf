"""The engine's one-writer lock, held by an owner rather than by a thread.

A session's transaction owns the lock from begin to commit or rollback, and a
session may begin on one thread and commit on another (requests of an
asyncio server, served from a pool): so the owner is the transaction object,
not the thread that took it. Engine maintenance (checkpoint, refresh, close,
a reload after a failed sync) owns it as its thread, reentrantly.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

from ..errors import LockTimeoutError


def this_thread() -> tuple:
    """The owner token of maintenance done by the calling thread."""
    return ("thread", threading.get_ident())


class WriterLock:
    """One owner at a time, reentrant for that owner. A plain lock underneath: a
    waiter sleeps in the lock itself (no condition variable to wake and
    re-check), which is what eight committing threads handing it on cost."""

    def __init__(self):
        self._lock = threading.Lock()
        self._owner = None
        self._depth = 0

    @property
    def owner(self):
        return self._owner

    def acquire(self, owner, timeout: float | None = None) -> bool:
        """Take the lock for `owner` (again, if it holds it); False after `timeout`
        seconds (None: wait as long as it takes)."""
        # only the owner sets _owner to itself, so this read decides reentry
        if self._owner is not None and self._owner == owner:
            self._depth += 1
            return True
        if not self._lock.acquire(False):     # free (the usual case): no timed wait
            wait = -1 if timeout is None else min(timeout, threading.TIMEOUT_MAX)
            if not self._lock.acquire(timeout=wait):
                return False
        self._owner, self._depth = owner, 1
        return True

    def release(self, owner) -> None:
        if self._owner is None or self._owner != owner:
            raise RuntimeError("the writer lock is released by an owner that does not "
                               "hold it")
        self._depth -= 1
        if not self._depth:
            self._owner = None
            self._lock.release()

    @contextmanager
    def held(self, timeout: float | None = None, what: str = ""):
        """The lock for the calling thread's maintenance; LockTimeoutError naming
        `what` after `timeout` seconds (None: waiting as long as it takes, for
        what only a transaction being written or committed can hold up)."""
        owner = this_thread()
        if not self.acquire(owner, timeout):
            raise LockTimeoutError(f"{what}: another session held the write transaction for "
                                   f"{timeout:g} s; commit or roll that one back first")
        try:
            yield
        finally:
            self.release(owner)
