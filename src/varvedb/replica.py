"""A read replica: a file kept a copy of a leader server's by shipping its log.

`varvedb replicate URL DEST` and `varvedb serve DEST --replica-of URL`
(docs/server.md, "Read replicas"). DEST, when it does not exist, is seeded
from the leader's backup stream (GET /backup, as `Client.backup` takes it).
Then a thread pulls the leader's committed frames after DEST's own version
and chain hash (GET /log: a long poll, answered as soon as the leader
commits, LONG_POLL seconds at most) and appends each commit to DEST through
the storage layer (`Engine.follow`: every frame's hash, the commit's digest
and the chain hash checked; a pull cut short leaves DEST at its last whole
commit), so a replica that stopped, fell behind or was killed resumes from
where it is. The leader's restore is a commit like any other. When the
leader answers that it does not hold DEST's version with DEST's chain hash
(LogMismatchError: its vacuum dropped that version, or it is another file)
the replica says so in its log and re-seeds from the backup stream, then
follows again. Writes sent to a replica's server are refused
(ReplicaReadOnlyError, HTTP 421, naming the leader); a read's min_version
waits for the pulls (`catch_up`), as in a read worker.
"""
from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import threading
import time
from urllib.parse import urlencode, urlsplit

from . import errors as E

log = logging.getLogger("varvedb.replica")

LONG_POLL = 5.0        # seconds the leader holds a pull that finds nothing new
RETRY_AFTER = 1.0      # seconds between pulls after the leader could not be reached
MAX_WAIT = 5.0         # seconds a read waits at most for its min_version
CHUNK = 1 << 20


class Replica:
    """One replica file and its pulls from the leader at `url`."""

    def __init__(self, url: str, path: str, token: str | None = None,
                 durability: str = "commit", long_poll: float = LONG_POLL,
                 wait: float = MAX_WAIT):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise E.OptionError(f"the leader's URL is http://host:port or https://..., "
                                f"got {url!r}")
        self.url = url.rstrip("/")
        self.path = os.fspath(path)
        self.token = token
        self.durability = durability
        self.long_poll = long_poll
        self.wait = min(wait, MAX_WAIT)
        self._parts = parts
        self.db = None
        self.leader_version = 0          # the leader's newest, as of the last pull
        self.lag_seconds = 0.0
        self.reseeds = 0
        self.error: str | None = None    # the last pull's failure, until one succeeds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: http.client.HTTPConnection | None = None

    # ---- the file ----------------------------------------------------------------

    def open(self):
        """Seed the file when it does not exist, open it; returns the Database."""
        import varvedb as vv
        if not os.path.exists(self.path):
            self._seed(self.path)
            log.warning("varvedb replica: seeded %s from %s", self.path, self.url)
        self.db = vv.connect(self.path, durability=self.durability)
        return self.db

    def _seed(self, dest: str) -> None:
        from .client import Client
        client = Client(self.url, token=self.token, timeout=None)
        try:
            client.backup(dest, progress=False)
        finally:
            client.close()

    def reseed(self, why: str) -> None:
        """Take the leader's whole file again (its backup stream) in place of ours."""
        log.warning("varvedb replica: re-seeding %s from %s's backup: %s", self.path,
                    self.url, why)
        tmp = self.db.path + ".reseed"     # beside the file open (its path resolved)
        from .storage.backup import remove_quietly
        remove_quietly(tmp)
        self._seed(tmp)
        self.db.engine.replace_file(tmp)
        self.reseeds += 1

    # ---- pulling -------------------------------------------------------------------

    def pull(self, wait: float = 0.0) -> int:
        """One request for the leader's commits after ours (held up to `wait` seconds
        when there are none); applies them. Returns how many were applied. A
        mismatch with the leader's chain re-seeds first."""
        engine = self.db.engine
        try:
            return self._pull(engine, wait)
        except E.LogMismatchError as e:
            self.reseed(str(e))
            return self._pull(engine, 0.0)

    def _pull(self, engine, wait: float) -> int:
        from .storage.shipping import Unshipper
        query = urlencode({"after": engine.visible, "chain": engine.log.chain.hex(),
                           "wait": f"{wait:g}"})
        resp = self._get(f"/log?{query}", wait)
        if resp.status != 200:
            from .wire import error_from_wire
            body = resp.read()
            try:
                err = json.loads(body)
            except ValueError:
                err = body[:200].decode("utf-8", "replace")
            raise error_from_wire(err, resp.status)
        self.leader_version = int(resp.getheader("X-Varve-Log-Version") or 0)
        size = resp.getheader("X-Varve-Log-Bytes")
        if size is None or not size.isdigit():
            self._close()
            raise E.ServerUnavailableError(f"the leader {self.url} did not say how many bytes "
                                           "its log answer holds (X-Varve-Log-Bytes)")
        unshipper, applied = Unshipper(int(size)), 0
        try:
            while chunk := resp.read(CHUNK):
                commits = unshipper.feed(chunk)
                if commits:        # the whole commits of a chunk: one sync
                    engine.follow(commits)
                    applied += len(commits)
                    self.lag_seconds = max(0.0, time.time()
                                           - commits[-1][1].timestamp_us / 1e6)
        except (OSError, http.client.HTTPException) as e:
            self._close()
            raise E.ServerUnavailableError(f"the pull from {self.url} was cut short after "
                                           f"{applied} commits: {e}") from None
        except E.CorruptFileError:
            self._close()       # the answer's rest is not read: its connection is done
            raise
        if unshipper.pending:
            self._close()
            raise E.ServerUnavailableError(f"the pull from {self.url} ended inside a commit "
                                           f"(after {applied} whole ones)")
        if engine.visible >= self.leader_version:
            self.lag_seconds = 0.0
        return applied

    def _get(self, path: str, wait: float) -> http.client.HTTPResponse:
        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        for attempt in range(2):
            conn = self._connection(wait)
            try:
                conn.request("GET", (self._parts.path.rstrip("/")) + path, headers=headers)
                return conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                self._close()
                if attempt == 0 and not isinstance(e, TimeoutError):
                    continue      # a kept-alive connection the leader had closed
                raise E.ServerUnavailableError(f"the leader {self.url} did not answer: "
                                               f"{type(e).__name__}: {e}") from None
        raise AssertionError("unreachable")

    def _connection(self, wait: float) -> http.client.HTTPConnection:
        if self._conn is None:
            p = self._parts
            if p.scheme == "https":
                self._conn = http.client.HTTPSConnection(p.hostname, p.port or 443,
                                                         timeout=wait + 60)
            else:
                self._conn = http.client.HTTPConnection(p.hostname, p.port or 80,
                                                        timeout=wait + 60)
        self._conn.timeout = wait + 60
        return self._conn

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            if conn.sock is not None:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)   # ends a pull waiting on it
                except OSError:
                    pass
            conn.close()

    def run_once(self, wait: float) -> None:
        """One pull; a failure is logged (once while it lasts) and waited out."""
        try:
            self.pull(wait)
            self.error = None
        except E.VarveError as e:
            if self._stop.is_set():
                return
            if self.error != str(e):
                log.warning("varvedb replica: %s", e)
            self.error = str(e)
            self._stop.wait(RETRY_AFTER)

    def run(self) -> None:
        """Pull until stop(): each pull a long poll."""
        while not self._stop.is_set():
            self.run_once(self.long_poll)

    def start(self) -> None:
        """run() on a daemon thread of its own."""
        self._thread = threading.Thread(target=self.run, name="varvedb-replica", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the pulls (a pull in flight is cut: its whole commits stay)."""
        self._stop.set()
        self._close()
        if self._thread is not None:
            self._thread.join()

    # ---- what the server asks -------------------------------------------------------

    def current(self) -> bool:
        """Whether a read that names no min_version may run now with nothing
        first: always (the pulls apply in the replica's own thread; a read sees
        what they applied)."""
        return True

    def catch_up(self, wanted: int | None) -> None:
        """Before a read: wait (bounded) until the replica reaches `wanted`."""
        if wanted is None:
            return
        engine = self.db.engine
        if engine.visible >= wanted or engine.wait_visible(wanted - 1, self.wait):
            return
        raise E.VersionNotReachedError(
            f"this replica is at version {engine.visible}; the read asked for version "
            f"{wanted} or later (X-Varve-Min-Version) and it did not come within "
            f"{self.wait:g} s (the leader is {self.url})")

    def refusal(self) -> E.ReplicaReadOnlyError:
        return E.ReplicaReadOnlyError(f"this server is a read replica of {self.url}: "
                                      "send writes to the leader there; nothing was applied")

    @property
    def lag_versions(self) -> int:
        return max(0, self.leader_version - self.db.engine.visible)

    def state(self) -> dict:
        """GET /health's replica part."""
        return {"replica_of": self.url, "leader_version": self.leader_version,
                "lag_versions": self.lag_versions, "lag_seconds": round(self.lag_seconds, 6),
                "reseeds": self.reseeds, "error": self.error}
