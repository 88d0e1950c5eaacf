"""Listening for PostgreSQL clients: one Connection a client, each on a thread
of its own (as PostgreSQL gives each a process); cancel requests find the
connection by its key.

`PgServer(db, token=...)` without a token trusts every client, so `serve`
listens without one only on a loopback address (server/run.py checks it, as for
HTTP); with a token, clients authenticate with SCRAM-SHA-256 and the token as
their password. At most MAX_CONNECTIONS clients are served at once; one more
is told so (53300) and closed.

A client still starting up (TLS, start-up packet, SCRAM) holds a thread too, so
those are bounded apart: each has `startup_timeout` seconds in all (however it
drips its bytes) before the listener hangs it up, and at most MAX_STARTING are
under way; one more makes room by hanging up the oldest, so clients that never
finish cannot keep one that does from being served. Nothing one socket does
stops the listener: a socket it cannot serve (no thread can be started) is
closed. A session idle inside a transaction for `idle_in_transaction_timeout`
seconds (serve's --transaction-idle-timeout, as over HTTP) is ended with
FATAL 25P03 and its transaction rolled back: a transaction holds the database's
one writer lock, which no client may keep by going quiet.
"""
from __future__ import annotations

import hmac
import itertools
import logging
import os
import socket
import threading
import time

from . import messages as M
from .connection import Connection
from .scram import Verifier

log = logging.getLogger("varvedb.pgwire")

MAX_CONNECTIONS = 100         # PostgreSQL's default max_connections
MAX_STARTING = 100            # connections still starting up
MAX_THREADS = MAX_CONNECTIONS + 2 * MAX_STARTING    # with those hung up, not yet ended
STARTUP_TIMEOUT = 60.0        # seconds to start up and authenticate, in all
                              # (PostgreSQL's authentication_timeout)
ACCEPT_WAKE = 0.5             # seconds: how often the listener looks whether to stop,
                              # for start-ups past their deadline and for sessions
                              # idle in a transaction too long


class PgServer:
    def __init__(self, db, token: str | None = None, ssl_context=None,
                 startup_timeout: float = STARTUP_TIMEOUT,
                 idle_in_transaction_timeout: float | None = None,
                 max_message: int | None = None):
        self.db = db
        # the longest message after start-up (serve's --max-body-mb, as HTTP's bodies)
        self.max_message = M.MAX_MESSAGE if max_message is None else \
            min(max_message, M.MAX_MESSAGE)
        self.startup_timeout = startup_timeout
        self.idle_in_transaction_timeout = idle_in_transaction_timeout
        self.verifier = Verifier(token) if token else None
        self.ssl_context = ssl_context
        self._pids = itertools.count((os.getpid() & 0xFFFF) << 12)
        self._lock = threading.Lock()
        self._live: dict[int, Connection] = {}
        self._starting: dict[Connection, float] = {}    # its deadline, oldest first
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
            self._hang_up_late()
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopping.is_set():
                    return                  # the listener was closed
                log.exception("pgwire: accept failed")  # out of descriptors: wait a while
                self._stopping.wait(ACCEPT_WAKE)
                continue
            try:
                self._start(sock)
            except Exception:               # that socket only: the listener goes on
                log.exception("pgwire: a connection could not be started")
                sock.close()

    def _start(self, sock: socket.socket) -> None:
        """A thread for the new client's connection, in start-up until it registers."""
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(self, sock)
        t = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name=f"varvedb-pg-{conn.pid}")
        with self._lock:
            if len(self._threads) >= MAX_THREADS:
                full = True
            else:
                full, oldest = False, None
                if len(self._starting) >= MAX_STARTING:
                    oldest = next(iter(self._starting))
                    del self._starting[oldest]
                self._starting[conn] = time.monotonic() + self.startup_timeout
                self._threads.add(t)
        if full:
            self._refuse(sock)
            return
        if oldest is not None:
            oldest.hang_up()
        try:
            t.start()
        except RuntimeError:                # no thread can be started now
            log.exception("pgwire: no thread for a new connection")
            with self._lock:
                self._threads.discard(t)
                self._starting.pop(conn, None)
            self._refuse(sock)

    def _hang_up_late(self) -> None:
        """Hang up each start-up past its deadline (again each pass until its thread
        ends and unregisters it), and each session idle inside a transaction past
        idle_in_transaction_timeout (PostgreSQL's idle_in_transaction_session_timeout:
        its transaction holds the database's one writer lock)."""
        now = time.monotonic()
        idle = self.idle_in_transaction_timeout
        with self._lock:
            late = [c for c, deadline in self._starting.items() if deadline <= now]
            if idle is not None:
                stale = [c for c in self._live.values()
                         if c.idle_since is not None and now - c.idle_since >= idle]
        for conn in late:
            conn.hang_up()
        if idle is not None:
            for conn in stale:
                conn.expire_idle()

    @staticmethod
    def _refuse(sock: socket.socket) -> None:
        """Tell a client that cannot be served so, without waiting on it, and close."""
        try:
            sock.setblocking(False)
            sock.send(M.error({"S": "FATAL", "V": "FATAL", "C": "53300",
                               "M": "sorry, too many clients already"}))
        except OSError:
            pass
        sock.close()

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
            live = [*self._live.values(), *self._starting]
            threads = list(self._threads)
        for conn in live:
            conn.hang_up()
        for t in threads:
            t.join(timeout)

    def next_pid(self) -> int:
        return next(self._pids) & 0x7FFF_FFFF

    def register(self, conn: Connection) -> bool:
        """Count a started connection in; False when MAX_CONNECTIONS are served."""
        with self._lock:
            self._starting.pop(conn, None)
            if len(self._live) >= MAX_CONNECTIONS or self._stopping.is_set():
                return False
            self._live[conn.pid] = conn
            return True

    def unregister(self, conn: Connection) -> None:
        with self._lock:
            self._starting.pop(conn, None)
            if self._live.get(conn.pid) is conn:
                del self._live[conn.pid]

    def cancel(self, pid: int, secret: int) -> None:
        with self._lock:
            conn = self._live.get(pid)
        if conn is not None and hmac.compare_digest(conn.secret.to_bytes(4, "big"),
                                                    (secret & 0xFFFF_FFFF).to_bytes(4, "big")):
            conn.cancel()
