"""One send() per answer: uvicorn's httptools protocol on a corked transport.

uvicorn writes an answer's status line and headers when the app sends
http.response.start, and its body at http.response.body; uvloop sends each
write at once, so every answer cost two send() calls (the first one the
most expensive frame of the server's profile, held under the GIL) and woke
the client twice. Here the writes made in one turn of the event loop are
joined and sent together at the end of that turn (`call_soon`), so an answer
whose start and body are sent back to back, as hot.py and Starlette send
them, goes out in one send(). Order is kept (one buffer per connection), a
close sends what is buffered first, and a large write goes out at once
(nothing large waits in memory for the turn to end).
"""
from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

SEND_AT_ONCE = 64 << 10      # bytes buffered in a turn past which they are sent at once


class CorkedTransport:
    """`transport`, its writes in one turn of `loop` sent as one."""
    __slots__ = ("transport", "loop", "pending", "size")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self.transport, self.loop = transport, loop
        self.pending: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> None:
        if not self.pending:
            self.loop.call_soon(self.flush)
        self.pending.append(data)
        self.size += len(data)
        if self.size >= SEND_AT_ONCE:
            self.flush()

    def flush(self) -> None:
        pending = self.pending
        if not pending:
            return
        self.pending, self.size = [], 0
        if not self.transport.is_closing():    # a lost connection takes no more
            self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def abort(self) -> None:
        self.pending, self.size = [], 0
        self.transport.abort()

    def __getattr__(self, name: str):     # the rest as the transport has it
        return getattr(self.transport, name)


class CorkedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through a CorkedTransport."""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(CorkedTransport(transport, self.loop))
