"""COPY over the protocol: the CopyData a client streams in, as the file object
`COPY ... FROM STDIN` reads (sql/dml.py reads its copy_data in chunks).

The event loop puts each CopyData message's bytes in; the statement reads them
on the connection's thread as they come. At most LIMIT bytes wait between the
two: past that the loop stops reading the socket until the statement has read
more, so a client streaming gigabytes holds a bounded amount of memory here.
A statement that ends early (a bad row) abandons the feed: what the client
still sends up to CopyDone is read and dropped.
"""
from __future__ import annotations

import asyncio
import threading
from collections import deque

from ..errors import SqlError

LIMIT = 1 << 20        # bytes waiting for the statement at most (plus one message)


class CopyFeed:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._cond = threading.Condition()
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._ended = False
        self._failure: str | None = None
        self._abandoned = False
        self._room = asyncio.Event()
        self._room.set()

    # ---- the event loop's side ------------------------------------------------

    async def put(self, data: bytes) -> None:
        await self._room.wait()
        with self._cond:
            if self._abandoned:
                return
            self._chunks.append(data)
            self._size += len(data)
            if self._size >= LIMIT:
                self._room.clear()
            self._cond.notify()

    def end(self, failure: str | None = None) -> None:
        """CopyDone (failure None) or CopyFail (its message)."""
        with self._cond:
            self._ended, self._failure = True, failure
            self._cond.notify()

    # ---- the statement's side (the connection's thread) -------------------------

    def read(self, n: int = -1) -> bytes:
        with self._cond:
            while not self._chunks and not self._ended:
                self._cond.wait()
            if self._failure is not None:
                raise SqlError("57014", f"COPY from stdin failed: {self._failure}")
            if not self._chunks:
                return b""
            out = [self._chunks.popleft()]
            got = len(out[0])
            while self._chunks and (n < 0 or got + len(self._chunks[0]) <= n):
                out.append(self._chunks.popleft())
                got += len(out[-1])
            self._size -= got
            if self._size < LIMIT:
                self._loop.call_soon_threadsafe(self._room.set)
        return b"".join(out)

    def abandon(self) -> None:
        """The statement is over: drop what waits and what is still to come."""
        with self._cond:
            self._abandoned = True
            self._chunks.clear()
            self._size = 0
        self._loop.call_soon_threadsafe(self._room.set)
