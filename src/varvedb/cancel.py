"""Cooperative cancellation of a read that no one waits for any more.

A caller runs its work under a `CancelToken` (`with running(token):`; a context
variable, so it is the calling thread's and never leaks to another request);
the long loops of a read call `check()` at coarse points (every few thousand
query words, between the kernel calls of a text query), never inside a kernel
nor per row. Once the token is canceled the next check raises
QueryCanceledError, so the work stops and its thread is free again.

The server cancels a read that ran past its timeout (server/app.py, Job); a
write is never canceled once it has begun. Work with no token (the embedded
API's) pays one context-variable lookup per check.

An asyncio task canceled while a transaction begins or ends (AsyncDatabase,
AsyncClient) must not leave it open, nor hide that it committed: to_its_end
sees that step through, and the caller then says what it did.
"""
from __future__ import annotations

import contextvars

from .errors import QueryCanceledError

_current: contextvars.ContextVar = contextvars.ContextVar("varvedb_cancel", default=None)


class CancelToken:
    __slots__ = ("reason",)

    def __init__(self):
        self.reason = None        # why it was canceled; None while it runs on

    def cancel(self, reason: str) -> None:
        self.reason = reason


class running:
    """`with running(token):` runs the block's work (on this thread) under `token`.
    A class rather than a generator context manager: every server request enters
    one, and a class's enter and exit cost less than a generator's."""
    __slots__ = ("token", "reset")

    def __init__(self, token: CancelToken):
        self.token = token

    def __enter__(self) -> CancelToken:
        self.reset = _current.set(self.token)
        return self.token

    def __exit__(self, *exc) -> None:
        _current.reset(self.reset)


def check() -> None:
    """Raise QueryCanceledError if the work this thread runs was canceled."""
    token = _current.get()
    if token is not None and token.reason is not None:
        raise QueryCanceledError(token.reason)


async def to_its_end(coro):
    """Run `coro` to its end though the awaiting task be canceled meanwhile (a
    commit, once sent, ends one way or the other, and the task must learn which).
    Returns (its done future, the CancelledError this task got, or None); the
    caller then raises that error, after undoing or telling what the step did."""
    import asyncio
    fut = asyncio.ensure_future(coro)
    canceled = None
    while not fut.done():
        try:
            await asyncio.wait((fut,))       # unlike await fut, a cancel leaves fut running
        except asyncio.CancelledError as e:
            canceled = e
    return fut, canceled


async def end_transaction(scope, coro) -> None:
    """Await `coro`, the commit or rollback of `scope` (a transaction object whose
    `version` the commit sets), to its end; a cancellation meanwhile is raised
    once it has ended, with a note saying how."""
    fut, canceled = await to_its_end(coro)
    if canceled is None:
        return fut.result()
    if scope.version is not None:
        canceled.add_note(f"the transaction committed (version {scope.version}) before "
                          "the cancellation took effect")
    elif fut.exception() is not None:
        e = fut.exception()
        canceled.add_note(f"ending the transaction failed: {type(e).__name__}: {e}")
    else:
        canceled.add_note("the transaction rolled back")
    raise canceled
