"""Listening for PostgreSQL clients: one Connection a client, each on a thread
of its own (as PostgreSQL gives each a process); cancel requests find the
connection by its key.

`PgServer(db, token=...)` without a token trusts every client, so `serve`
listens without one only on a loopback address (server/run.py checks it, as for
HTTP); with a token, clients authenticate with SCRAM-SHA-256 and the token as
their password. At most MAX_CONNECTIONS clients are served at once; one more
is told so (53300) and closed.
"""
from __future__ import annotations

import hmac
import itertools
import os
import socket
import threading

from .connection import Connection
from .scram import Verifier

MAX_CONNECTIONS = 100         # PostgreSQL's default max_connections
ACCEPT_WAKE = 0.5             # seconds: how often the listener looks whether to stop


class PgServer:
    def __init__(self, db, token: str | None = None, ssl_context=None):
        self.db = db
        self.verifier = Verifier(token) if token else None
        self.ssl_context = ssl_context
        self._pids = itertools.count((os.getpid() & 0xFFFF) << 12)
        self._lock = threading.Lock()
        self._live: dict[int, Connection] = {}
        self._threads: set[threading.Thread] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port); returns the port."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        listener.settimeout(ACCEPT_WAKE)
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, name="varvedb-pg-listen",
                                           daemon=True)
        self._accepting.start()
        return listener.getsockname()[1]

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return                      # the listener was closed
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                 name=f"varvedb-pg-{conn.pid}")
            with self._lock:
                self._threads.add(t)
            t.start()

    def _serve(self, conn: Connection) -> None:
        try:
            conn.run()
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def stop(self, timeout: float = 30.0) -> None:
        """Stop listening, end every connection (their transactions roll back)."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        if self._accepting is not None:
            self._accepting.join(timeout)
        with self._lock:
            live, threads = list(self._live.values()), list(self._threads)
        for conn in live:
            conn.hang_up()
        for t in threads:
            t.join(timeout)

    def next_pid(self) -> int:
        return next(self._pids) & 0x7FFF_FFFF

    def register(self, conn: Connection) -> bool:
        """Count a started connection in; False when MAX_CONNECTIONS are served."""
        with self._lock:
            if len(self._live) >= MAX_CONNECTIONS or self._stopping.is_set():
                return False
            self._live[conn.pid] = conn
            return True

    def unregister(self, conn: Connection) -> None:
        with self._lock:
            if self._live.get(conn.pid) is conn:
                del self._live[conn.pid]

    def cancel(self, pid: int, secret: int) -> None:
        with self._lock:
            conn = self._live.get(pid)
        if conn is not None and hmac.compare_digest(conn.secret.to_bytes(4, "big"),
                                                    (secret & 0xFFFF_FFFF).to_bytes(4, "big")):
            conn.cancel()
