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

from .hot import INLINE_BODY

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


class HotHttpTools(CorkedHttpTools):
    """CorkedHttpTools that answers a short single search itself, no ASGI at all.

    uvicorn makes every request a scope, a RequestResponseCycle, an asyncio
    Event and a Task running the app's coroutine, which awaits `receive` and
    `send` twice; for a search of ~60-200 µs that machinery cost as much again
    in the GIL. Here a request whose line is `POST /collections/{c}/search`
    (`hot.search_target`), on a keep-alive HTTP/1.1 connection with no answer
    under way and its writes not paused (a client that does not read its
    answers meets uvicorn's flow control, as before), is held: its body is gathered as it comes, and when it ends
    `hot.answer_now` runs the search on the loop and gives the whole answer,
    written at once in one send(). Whatever answer_now declines (a search it
    would not run inline, a refusal, a bug), and a body over hot.INLINE_BODY,
    goes on the ASGI way as if it had never been held. `hot`: the HotPath, set
    on a class made per app (`for_app`)."""

    hot = None
    held: tuple | None = None      # (collection, body so far) of the request held

    @classmethod
    def for_app(cls, hot) -> type:
        return type(cls.__name__, (cls,), {"hot": hot})

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.held = None

    def on_headers_complete(self) -> None:
        parser = self.parser
        if (self.cycle is None or self.cycle.response_complete) and not self.pipeline \
                and not self.expect_100_continue and self.limit_concurrency is None \
                and not self.access_log and not self.flow.write_paused \
                and parser.get_http_version() == "1.1" \
                and parser.should_keep_alive() and not parser.should_upgrade():
            collection = self.hot.search_target(parser.get_method(), self.url)
            if collection is not None:
                self.held = (collection, bytearray())
                return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self.held is None:
            return super().on_body(body)
        gathered = self.held[1]
        gathered += body
        if len(gathered) > INLINE_BODY:       # too large to answer here: the ASGI way
            self.release(more=True)

    def on_message_complete(self) -> None:
        if self.held is None:
            return super().on_message_complete()
        collection, gathered = self.held
        answer = self.hot.answer_now(collection, dict(reversed(self.headers)),
                                     bytes(gathered), self.server_state.default_headers)
        if answer is None:
            return self.release(more=False)
        self.held = None
        corked = self.transport
        if corked.pending:        # what an earlier answer left in this turn goes first
            corked.flush()
        corked.transport.write(answer)
        self.on_response_complete()     # uvicorn's: counted, the keep-alive timer armed
        if self.closing:
            self.transport.close()

    def release(self, more: bool) -> None:
        """The held request on to uvicorn's cycle and the app, its body so far with it."""
        gathered = self.held[1]
        self.held = None
        super().on_headers_complete()
        self.cycle.body += gathered
        if not more:
            self.cycle.more_body = False
        if self.closing:              # shutdown() came while it was held
            self.cycle.keep_alive = False
        self.cycle.message_event.set()

    closing = False

    def shutdown(self) -> None:
        if self.held is not None:     # its body is still coming: close once it is answered
            self.closing = True
            return
        super().shutdown()
