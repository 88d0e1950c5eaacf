"""Engines under test: varvedb and its peers behind one small interface.

varvedb_bench/worker.py drives every engine through the same phases, in this order:

1. `load`         bulk load of (id, tag, vector) rows, read from the data file
                  in blocks, plus the tag index a filtered query needs;
2. `exact`        exact top-k, with and without a tag filter, before any
                  ANN index exists (so nothing approximate can answer it);
3. `build_index`  the HNSW index, after the load (m, ef_construction);
4. `persist`      whatever makes the store durable and quick to open
                  (checkpoint, CHECKPOINT, save_index);
5. `ann`          top-k through the index at each ef, then filtered;
6. `close`/`open` reopen from disk, then one query;
7. `durable_commits`  single-row durable transactions, where that means
                  something (a database); pure libraries skip it.

A peer whose package is missing raises `Missing`, and the harness prints a
note and skips it. Peers live in their own modules (pg_engine,
library_engines, store_engines) and are imported only when asked for.
"""
from __future__ import annotations

import importlib
import os
import shutil
import sqlite3
import threading
import time

import numpy as np

from varvedb.engine.columns import norms_of
from varvedb.index import flat
from .data import VectorFile

# name -> "module:Class" inside varvedb_bench; the order is the table's order.
ENGINES = {
    "varvedb": "engines:Varve",
    "sqlite": "engines:Sqlite",
    "pgvector": "pg_engine:Pgvector",
    "hnswlib": "library_engines:Hnswlib",
    "faiss": "library_engines:Faiss",
    "chromadb": "store_engines:Chroma",
    "lancedb": "store_engines:Lance",
}
# `varvedb bench ann --engines` (varvedb_bench/sweep.py): the sweep mode's engines, ANN only;
# NAME:VARIANT is another index of the same engine. The sweep is ef for HNSW
# engines and the lists probed for IVF engines (`sweep = "probes"`).
SWEEP_ENGINES = {
    "varvedb": "engines:Varve",
    "varvedb:int8": "engines:VarveInt8",
    "varvedb:f32": "engines:VarveF32",
    "varvedb:ivfpq": "engines:VarveIvfpq",
    "pgvector": "pg_engine:Pgvector",
    "hnswlib": "library_engines:Hnswlib",
    "faiss": "library_engines:Faiss",
    "faiss:ivfpq": "library_engines:FaissIvfpq",
    "lancedb": "store_engines:Lance",
    "lancedb:ivfpq": "store_engines:LanceIvfpq",
}

LOAD_BLOCK = 50_000   # rows read from the data file and handed to a peer at a time


class Missing(Exception):
    """The peer's package is not installed (or cannot run here)."""


def engine_class(name: str) -> type["Engine"]:
    module, cls = (ENGINES.get(name) or SWEEP_ENGINES[name]).rsplit(":", 1)
    return getattr(importlib.import_module(f".{module}", __package__), cls)


def require(module: str, package: str):
    """Import a peer's module, or raise Missing naming the package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Missing(f"{package} is not installed (pip install -e './bench[peers]'): {e}") from e
    except Exception as e:     # installed but unusable here (a too-old system library, ...)
        raise Missing(f"{package} cannot be imported here: {e!r}") from e


class Engine:
    name = "?"
    supports_exact = True    # has a way to answer exact top-k
    supports_ann = False     # has an approximate (HNSW) index with an ef knob
    index_is_store = False   # the ANN index holds the data: no separate bulk write figure
    durable = True           # a commit can be made durable: durable_commits means something
    sweep = "ef"             # what ann()'s third argument is: "ef", or "probes" (IVF lists)
    in_ram_only = False      # its index must sit in memory: the sweep mode skips it under a cap
    dtype = "f32"            # vector elements the engine is asked to store (the worker sets it)

    def __init__(self, workdir: str, dim: int, metric: str, **options):
        self.workdir = workdir
        self.dim = dim
        self.metric = metric
        # the sweep mode's settings (varvedb_bench/sweep.py): memory_cap, lists, pq_m, rerank, ...
        self.options = options
        self.notes: dict[str, str] = {}    # how this engine was driven, for the JSON
        os.makedirs(workdir, exist_ok=True)

    def advance(self, n: int) -> None:
        """Progress callback (rows or items done); the worker points it at a bar."""

    def load(self, ids: np.ndarray, tags: np.ndarray, rows: VectorFile) -> None:
        raise NotImplementedError

    def exact(self, q: np.ndarray, k: int, max_tag: int | None = None) -> np.ndarray:
        raise NotImplementedError

    def build_index(self, m: int, ef_construction: int) -> None:
        raise NotImplementedError

    def persist(self) -> None:
        """Make what was loaded and indexed durable and quick to open."""

    def ann(self, q: np.ndarray, k: int, ef: int, max_tag: int | None = None) -> np.ndarray:
        raise NotImplementedError

    def explain(self, q: np.ndarray, k: int, ef: int | None = None,
                max_tag: int | None = None) -> str | None:
        """How the engine answers this query (its plan), untimed; None if it cannot say."""
        return None

    def close(self) -> None:
        pass

    def open(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        """Release everything, even after a failure (servers, threads)."""
        self.close()

    def disk_bytes(self) -> int:
        return du(self.workdir)

    def graph_bytes(self) -> int | None:
        """Bytes the ANN graph holds, the vectors left out (None: not known)."""
        return None

    def server_pids(self) -> list[int]:
        """Processes outside the worker that hold this engine's memory (a server)."""
        return []

    def durable_commits(self, n: int, vectors: np.ndarray, threads: int = 1) -> float:
        """Commits per second of single-row durable transactions into a fresh store."""
        raise NotImplementedError


class Varve(Engine):
    name = "varvedb"
    supports_ann = True

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        import varvedb as vv
        self.vv = vv
        self.path = os.path.join(workdir, "bench.varve")
        self.db = None

    def load(self, ids, tags, rows):
        vv = self.vv
        self.db = vv.connect(self.path)
        self.coll = self.db.create_collection("items", {
            "tag": vv.Int(index="sorted"),
            "embedding": vv.Vector(self.dim, metric=self.metric, dtype=self.dtype)})
        with self.db.transaction():    # one commit, fed block by block
            for lo, block in rows.blocks(LOAD_BLOCK):
                hi = lo + len(block)
                self.coll.insert_arrays(id=ids[lo:hi], tag=tags[lo:hi], embedding=block)
                self.advance(len(block))
        self.notes["load"] = (f"insert_arrays in blocks of {LOAD_BLOCK:,} rows, one transaction; "
                              f"tag: sorted index; vectors stored as {self.dtype}")

    def exact(self, q, k, max_tag=None):
        return np.array(self.coll.search(vector=q, limit=k, where=_where(max_tag),
                                         select=[]).ids)

    def build_index(self, m, ef_construction):
        self.coll.create_index("embedding", self.vv.HNSW(m=m, ef_construction=ef_construction))
        # the graph is built in the background: the figure is the build, not the commit
        while self.coll.index_status()["unlinked"]:
            time.sleep(0.001)
        self.notes["index"] = (f"HNSW m={m} ef_construction={ef_construction}; queries through "
                               "collection.search(select=[]): ids and scores, like the libraries")

    def persist(self):
        self.db.checkpoint()

    def graph_bytes(self):
        return self.coll.vector_memory()["graph_bytes"]

    def ann(self, q, k, ef, max_tag=None):
        return np.array(self.coll.search(vector=q, limit=k, ef=ef, where=_where(max_tag),
                                         select=[]).ids)

    def explain(self, q, k, ef=None, max_tag=None):
        # the plan as it ran (a fallback shows), on one line for the report
        return self.coll.search(vector=q, limit=k, ef=ef, where=_where(max_tag),
                                select=[]).plan.brief()

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None

    def open(self):
        self.db = self.vv.connect(self.path)
        self.coll = self.db["items"]

    def durable_commits(self, n, vectors, threads=1):
        vv = self.vv
        path = os.path.join(self.workdir, f"commits-{threads}.varve")
        with vv.connect(path, durability="commit") as db:
            c = db.create_collection("items", {
                "tag": "int",
                "embedding": vv.Vector(self.dim, metric=self.metric, dtype=self.dtype)})

            def commit_one(i):
                c.insert({"id": i, "tag": i % 100, "embedding": vectors[i]})
            return rate(commit_one, n, threads)


class VarveInt8(Varve):
    """varvedb's HNSW over int8 codes: the walk reads the codes, the best 4*k are
    reranked from the stored vectors (in the mapped file after the checkpoint)."""
    name = "varvedb:int8"
    quantize = "int8"

    def build_index(self, m, ef_construction):
        self.coll.create_index("embedding", self.vv.HNSW(m=m, ef_construction=ef_construction,
                                                         quantize=self.quantize))
        while self.coll.index_status()["unlinked"]:
            time.sleep(0.001)
        self.notes["index"] = (f"HNSW m={m} ef_construction={ef_construction} "
                               f"quantize={self.quantize!r}")


class VarveF32(VarveInt8):
    """varvedb's HNSW walking the stored vectors themselves (quantize=None)."""
    name = "varvedb:f32"
    quantize = None


class VarveIvfpq(Varve):
    """varvedb's IVF-PQ index (vv.IVFPQ); the sweep is the lists probed."""
    name = "varvedb:ivfpq"
    sweep = "probes"

    def build_index(self, m, ef_construction):
        o = self.options
        self.coll.create_index("embedding", self.vv.IVFPQ(lists=o["lists"], pq_m=o["pq_m"],
                                                          rerank=o.get("rerank")))
        while self.coll.index_status()["unlinked"]:    # trained and filled in the background
            time.sleep(0.001)
        self.notes["index"] = (f"IVFPQ lists={o['lists']} pq_m={o['pq_m']} "
                               f"rerank={o.get('rerank')}; search(probes=N)")

    def ann(self, q, k, probes, max_tag=None):
        return np.array(self.coll.search(vector=q, limit=k, probes=probes,
                                         where=_where(max_tag), select=[]).ids)

    def explain(self, q, k, probes=None, max_tag=None):
        return self.coll.search(vector=q, limit=k, probes=probes, where=_where(max_tag),
                                select=[]).plan.brief()


class Sqlite(Engine):
    """stdlib sqlite3: WAL, synchronous=NORMAL for the load, rows as (id, tag, blob).

    Exact search reads the blobs back and scores them with varvedb's own
    kernel (index/flat.py), so the comparison measures storage, not maths.
    """
    name = "sqlite"

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        self.path = os.path.join(workdir, "bench.sqlite")
        self.con = None

    def _connect(self, path, synchronous="NORMAL"):
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"PRAGMA synchronous={synchronous}")
        return con

    def load(self, ids, tags, rows):
        self.con = con = self._connect(self.path)
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, tag INTEGER, vec BLOB)")
        con.execute("BEGIN")
        for lo, block in rows.blocks(LOAD_BLOCK):
            hi = lo + len(block)
            con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                            zip(ids[lo:hi].tolist(), tags[lo:hi].tolist(),
                                (v.tobytes() for v in block), strict=True))
            self.advance(len(block))
        con.execute("COMMIT")
        con.execute("CREATE INDEX items_tag ON items (tag)")
        self.notes["load"] = "executemany in one transaction (WAL), then an index on tag"
        self.notes["exact"] = "rows read back with SELECT, scored by varvedb's exact kernel"

    def persist(self):
        self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def exact(self, q, k, max_tag=None):
        if max_tag is None:
            rows = self.con.execute("SELECT id, vec FROM items").fetchall()
        else:
            rows = self.con.execute("SELECT id, vec FROM items WHERE tag < ?",
                                    (max_tag,)).fetchall()
        if not rows:
            return np.empty(0, np.int64)
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        x = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), self.dim)
        found, _ = flat.search(self.metric, x, norms_of(x), q, k, None)
        return ids[found]

    def close(self):
        if self.con is not None:
            self.con.close()
            self.con = None

    def open(self):
        self.con = self._connect(self.path)

    def durable_commits(self, n, vectors, threads=1, journal="WAL"):
        """synchronous=FULL; WAL (its fastest durable mode) unless journal says otherwise."""
        path = os.path.join(self.workdir, f"commits-{threads}-{journal}.sqlite")
        return rate(sqlite_committer(path, vectors, journal), n, threads)


def sqlite_committer(path: str, vectors: np.ndarray, journal: str = "WAL"):
    """A fresh SQLite table at `path` and commit_one(i): row i as one durable
    commit (synchronous=FULL), on a connection per thread."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute(f"PRAGMA journal_mode={journal}")
    con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, tag INTEGER, vec BLOB)")
    con.close()
    local = threading.local()

    def commit_one(i):
        if not hasattr(local, "con"):
            local.con = sqlite3.connect(path, isolation_level=None, timeout=60,
                                        check_same_thread=False)
            local.con.execute("PRAGMA synchronous=FULL")
        local.con.execute("INSERT INTO items VALUES (?, ?, ?)",
                          (i, i % 100, vectors[i].tobytes()))
    return commit_one


def _where(max_tag: int | None) -> str | None:
    return None if max_tag is None else f"tag < {int(max_tag)}"


def rate(commit_one, n: int, threads: int) -> float:
    """Commits per second of n calls of commit_one(i), spread over threads."""
    def work(lo):
        for i in range(lo, n, threads):
            commit_one(i)
    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    t0 = time.perf_counter()
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return n / (time.perf_counter() - t0)


def du(path: str, skip: tuple[str, ...] = ()) -> int:
    """Bytes in the files under path, leaving out subfolders named in skip."""
    total = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in skip]
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def reset(workdir: str) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir, exist_ok=True)
