"""A read worker's two links to the writer (serve --workers N, workers.py).

`Follower` keeps the worker's read-only connection at the writer's version:
before each request's work it reads the VersionBoard (a load from shared
memory) and refreshes the connection when the board is ahead; a read that
names a `min_version` (X-Varve-Min-Version) is answered at that version or
later, waiting for it a bounded time (VersionNotReachedError after).

A read-only connection has no index maintainer: the rows a refresh brings
are found by the exact scan of the tail above each graph, which grows with
every write. So a follower links them itself, in memory, in a thread of its
own (`_link`), a chunk at a time as the writer's maintainer does (Table.
link_indexes), the refresh and the linking taking turns on one lock. Each
worker spends that CPU again (the writer's graphs, checkpointed, are not
read back by a refresh); searches stay on the graph.

`WriterLink` forwards what only the writer runs (writes, transactions, SQL
that writes) over the writer's unix socket and hands its answer back as it
came, status, body and version header.
"""
from __future__ import annotations

import threading
import time

from starlette.requests import Request
from starlette.responses import Response

from .. import errors as E

VERSION_HEADER = "X-Varve-Version"          # every answer: the newest version it saw
MIN_VERSION_HEADER = "X-Varve-Min-Version"  # a read: answer at this version or later
MAX_WAIT = 5.0           # seconds a read waits at most for its min_version
WAIT_STEP = 0.001        # seconds between looks at the board while a read waits
# the writer's answer headers a worker passes on (content-length is made anew)
_PASSED = ("content-type", "x-varve-version", "retry-after", "www-authenticate", "allow",
           "x-varve-backup-version", "x-varve-backup-bytes")
# the request headers the writer reads
_SENT = ("authorization", "content-type", "accept", "x-varve-transaction", "x-varve-branch")


class WriterNeeded(Exception):
    """Raised by a route's work in a read worker: only the writer can run this
    request (SQL that writes); the worker forwards it."""


def min_version(given: str | None) -> int | None:
    """The version a read asks to be answered at (or later), if it names one: its
    X-Varve-Min-Version header, `given`."""
    if given is None:
        return None
    if not (given.isascii() and given.isdigit() and len(given) < 20):
        raise E.RequestError(f"{MIN_VERSION_HEADER} is a version number, got {given[:40]!r}")
    return int(given)


class Follower:
    """A worker's read-only Database, kept at the version the writer published."""

    def __init__(self, db, board, wait: float):
        self.db = db
        self.board = board
        self.wait = min(wait, MAX_WAIT)     # seconds a read waits for its min_version
        self._lock = threading.Lock()       # a refresh, or a chunk linked
        self._behind = threading.Event()    # a refresh brought rows the graphs lack
        self._stopped = False
        self._linker = threading.Thread(target=self._link, name="varvedb-follower-linker",
                                        daemon=True)
        self._linker.start()

    def current(self) -> bool:
        """Whether this connection is at the newest version the writer published
        (a request answered now needs no refresh)."""
        return self.board.read() <= self.db.engine.visible

    def catch_up(self, wanted: int | None) -> None:
        engine = self.db.engine
        if self.board.read() > engine.visible:
            with self._lock:     # one refresh at a time; the others find it done
                if self.board.read() > engine.visible:
                    self.db.refresh()
                    self._behind.set()
        if wanted is None or engine.visible >= wanted:
            return
        # the board lags a commit made over --pg by up to app.PUBLISH_EVERY, and
        # a version no commit has made yet (another server's) never comes
        deadline = time.monotonic() + self.wait
        while True:
            with self._lock:
                self.db.refresh()
                self._behind.set()
            if engine.visible >= wanted:
                return
            if time.monotonic() > deadline:
                raise E.VersionNotReachedError(
                    f"this server is at version {engine.visible}; the read asked for "
                    f"version {wanted} or later ({MIN_VERSION_HEADER}) and it did not "
                    f"come within {self.wait:g} s")
            time.sleep(WAIT_STEP)


    def _link(self) -> None:
        engine = self.db.engine
        while True:
            self._behind.wait()
            if self._stopped:
                return
            self._behind.clear()
            while not self._stopped:
                with self._lock:     # the tables looked up under it: a refresh may reload
                    if engine.closed or \
                            not any(t.link_indexes() for t in list(engine.tables.values())):
                        break
                time.sleep(0)       # the readers' turn for the GIL between chunks

    def stop(self) -> None:
        """Before the connection closes: the linker ends after its chunk."""
        self._stopped = True
        self._behind.set()
        with self._lock:
            pass


class WriterLink:
    """The writer's HTTP server on its unix socket, as one worker reaches it."""

    def __init__(self, socket_path: str, timeout: float):
        self.socket_path = socket_path
        self.timeout = timeout + 60.0    # a hang guard: the writer times out first
        self._http = None

    async def send(self, request: Request, raw: bytes) -> Response:
        import httpx
        if self._http is None:      # made in the event loop that uses it
            self._http = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=self.socket_path),
                base_url="http://writer", timeout=self.timeout)
        path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.scope.get("query_string") or b""
        url = path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        headers = {k: v for k in _SENT if (v := request.headers.get(k)) is not None}
        try:
            r = await self._http.request(request.method, url, content=raw, headers=headers)
        except httpx.ConnectError as e:
            raise E.ServerUnavailableError(f"the writer is not answering (restarting?): "
                                           f"{e}; nothing was applied") from None
        except httpx.TransportError as e:
            raise E.ServerUnavailableError(
                f"the connection to the writer failed after the request was sent (it may "
                f"or may not have been applied): {type(e).__name__}: {e}") from None
        return Response(r.content, r.status_code,
                        headers={k: r.headers[k] for k in _PASSED if k in r.headers})

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
