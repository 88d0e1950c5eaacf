"""Listening for PostgreSQL clients: one Connection a client, each with its own
Session and thread; cancel requests find the connection by its key.

`PgServer(db, token=...)` without a token trusts every client, so `serve`
listens without one only on a loopback address (server/run.py checks it, as for
HTTP); with a token, clients authenticate with SCRAM-SHA-256 and the token as
their password.
"""
from __future__ import annotations

import asyncio
import hmac
import itertools
import os

from .connection import Connection
from .scram import Verifier


class PgServer:
    def __init__(self, db, token: str | None = None, ssl_context=None):
        self.db = db
        self.verifier = Verifier(token) if token else None
        self.ssl_context = ssl_context
        self._pids = itertools.count((os.getpid() & 0xFFFF) << 12)
        self._live: dict[int, Connection] = {}
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port); returns the port."""
        self._server = await asyncio.start_server(self._accept, host, port)
        return self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await Connection(self, reader, writer).run()
        finally:
            self._tasks.discard(task)

    async def stop(self) -> None:
        """Stop listening, end every connection (their transactions roll back)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for conn in list(self._live.values()):
            conn.cancel()
            conn.writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=30)

    def next_pid(self) -> int:
        return next(self._pids) & 0x7FFF_FFFF

    def register(self, conn: Connection) -> None:
        self._live[conn.pid] = conn

    def unregister(self, conn: Connection) -> None:
        if self._live.get(conn.pid) is conn:
            del self._live[conn.pid]

    def cancel(self, pid: int, secret: int) -> None:
        conn = self._live.get(pid)
        if conn is not None and hmac.compare_digest(conn.secret.to_bytes(4, "big"),
                                                    (secret & 0xFFFF_FFFF).to_bytes(4, "big")):
            conn.cancel()
