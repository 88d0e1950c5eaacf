"""Engines under test: varvedb and its peers behind one small interface.

Each engine is driven the same way by bench/worker.py: bulk load first (one
transaction), index after, then queries one at a time. A peer whose package
is missing raises `Missing`, and the harness prints a note and skips it.
Exact search in SQLite reads the blobs back and scores them with varvedb's
own kernel (index/flat.py), so the comparison measures storage, not maths.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time

import numpy as np

from ..engine.columns import norms_of
from ..index import flat


class Missing(Exception):
    """The peer's package is not installed."""


class Engine:
    name = "?"
    supports_ann = False

    def __init__(self, workdir: str, dim: int, metric: str):
        self.workdir = workdir
        self.dim = dim
        self.metric = metric
        os.makedirs(workdir, exist_ok=True)

    def load(self, ids: np.ndarray, tags: np.ndarray, vectors: np.ndarray) -> None:
        raise NotImplementedError

    def build_index(self, m: int, ef_construction: int) -> None:
        raise NotImplementedError

    def exact(self, q: np.ndarray, k: int, max_tag: int | None = None) -> np.ndarray:
        raise NotImplementedError

    def ann(self, q: np.ndarray, k: int, ef: int, max_tag: int | None = None) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def open(self) -> None:
        raise NotImplementedError

    def disk_bytes(self) -> int:
        return _du(self.workdir)

    def durable_commits(self, n: int, vectors: np.ndarray) -> float:
        """Commits per second of single-row durable transactions into a fresh store."""
        raise NotImplementedError


class Varve(Engine):
    name = "varvedb"

    def __init__(self, workdir, dim, metric):
        super().__init__(workdir, dim, metric)
        import varvedb as vv
        self.vv = vv
        self.path = os.path.join(workdir, "bench.varve")
        self.db = None

    def load(self, ids, tags, vectors):
        vv = self.vv
        self.db = vv.connect(self.path)
        self.coll = self.db.create_collection("items", {
            "tag": vv.Int(index="sorted"),
            "embedding": vv.Vector(self.dim, metric=self.metric)})
        self.coll.insert_arrays(id=ids, tag=tags, embedding=vectors)

    def checkpoint(self) -> None:
        self.db.checkpoint()

    def exact(self, q, k, max_tag=None):
        where = None if max_tag is None else f"tag < {max_tag}"
        return np.array(self.coll.search(vector=q, limit=k, where=where).ids)

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
            c = db.create_collection("items", {"tag": "int",
                                               "embedding": vv.Vector(self.dim, metric=self.metric)})

            def commit_one(i):
                c.insert({"id": i, "tag": i % 100, "embedding": vectors[i]})
            return _rate(commit_one, n, threads)


class Sqlite(Engine):
    """stdlib sqlite3: WAL, synchronous=NORMAL for the load, rows as (id, tag, blob)."""
    name = "sqlite"

    def __init__(self, workdir, dim, metric):
        super().__init__(workdir, dim, metric)
        self.path = os.path.join(workdir, "bench.sqlite")
        self.con = None

    def _connect(self, path, synchronous="NORMAL"):
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"PRAGMA synchronous={synchronous}")
        return con

    def load(self, ids, tags, vectors):
        self.con = con = self._connect(self.path)
        con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, tag INTEGER, vec BLOB)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO items VALUES (?, ?, ?)",
                        zip(ids.tolist(), tags.tolist(), (v.tobytes() for v in vectors)))
        con.execute("COMMIT")

    def checkpoint(self) -> None:
        self.con.execute("CREATE INDEX items_tag ON items (tag)")
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
        return _rate(commit_one, n, threads)


ENGINES = {"varvedb": Varve, "sqlite": Sqlite}


def _rate(commit_one, n: int, threads: int) -> float:
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


def _du(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def reset(workdir: str) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir, exist_ok=True)
