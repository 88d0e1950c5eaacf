"""`varvedb bench layers`: what the layers above the kernels and the write path
cost, each figure against a peer in the same process, interleaved.

Each figure is taken over `rounds` alternating rounds (varvedb, peer, peer,
varvedb, ... — the order flips every round so neither side always runs warm
or first); a round's figure is a mean over its calls, and the report gives
the median over rounds, their spread (min–max) and the median of the
per-round ratios. Peers: SQLite (stdlib sqlite3) and hnswlib (optional: the
`peers` or `test` extra); a peer that is not installed is skipped with a note.

* get(id): `Collection.get` against SQLite's primary-key SELECT.
* upsert: a one-row upsert of a live document, merged (the default) against
  replaced (`replace`, the path upsert took before it merged), a whole row
  and a row naming one field (no peer: the merge must not cost the hot path).
* search: a top-10 search with select=[] on a 1 000-row collection (no peer:
  the goal is absolute, a few microseconds of Python above the kernel).
* overhead: `Collection.search` minus the kernel call it makes, on a warm
  100k-row graph at ef 10: the same queries through the full search and
  through the graph's kernel called directly with the arguments that search
  passed it (captured once), interleaved query by query, on `--dataset`'s
  vectors (the clustered generator, or a named set such as glove-50).
* durable commits: one-row commits into a collection with an HNSW index,
  durability="commit", against SQLite WAL + synchronous=FULL, on 1 and on
  8 threads. Taken in the working directory: use a real disk, never tmpfs.
* sustained inserts: one-row inserts into an HNSW-indexed collection
  (durability="off", timed until the graph has linked every row) against
  hnswlib's add_items one item at a time, on the same vectors.
* cold start: varvedb_bench/cold.py — fresh processes that open a 100k-row file with
  its graph and answer one top-10 query (import excluded), and `import
  varvedb` against `import numba` alone.
"""
from __future__ import annotations

import json
import os
import sqlite3
import statistics
import tempfile
import time

import numpy as np

from varvedb import demo_data


def _stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": len(xs)}


def _ab(a, b, rounds: int) -> tuple[list[float], list[float]]:
    """Alternate a() and b() (each returns its figure) for `rounds` rounds."""
    ra, rb = [], []
    for i in range(rounds):
        if i % 2 == 0:
            ra.append(a())
            rb.append(b())
        else:
            rb.append(b())
            ra.append(a())
    return ra, rb


def _pair(name: str, unit: str, ra: list[float], rb: list[float], peer: str,
          higher_is_better: bool) -> dict:
    ratios = [(x / y if higher_is_better else y / x) for x, y in zip(ra, rb)]
    return {"figure": name, "unit": unit, "varvedb": _stats(ra), peer: _stats(rb),
            "ratio": _stats(ratios), "ratio_means": f"varvedb is this many times as "
            f"{'fast' if higher_is_better else 'quick'} as {peer} (>1: ahead)"}


def _us_per_call(fn, args: list) -> float:
    t0 = time.perf_counter_ns()
    for a in args:
        fn(a)
    return (time.perf_counter_ns() - t0) / 1e3 / len(args)


def _items(path: str, rng, rows: int) -> tuple:
    """(db, collection, titles, vectors): `rows` items (int, text, 16-d vector) in a
    file at `path`, durability="off"."""
    import varvedb as vv
    vecs = rng.normal(size=(rows, 16)).astype(np.float32)
    db = vv.connect(path, durability="off")
    c = db.create_collection("items", {"tag": "int", "title": "text",
                                       "embedding": vv.Vector(16)})
    titles = [f"title {i}" for i in range(rows)]
    c.insert_arrays(id=np.arange(rows), tag=np.arange(rows) % 100, title=titles,
                    embedding=vecs)
    return db, c, titles, vecs


def get_by_id(workdir: str, rounds: int, calls: int = 2000, rows: int = 10_000) -> dict:
    rng = np.random.default_rng(1)
    db, c, titles, vecs = _items(os.path.join(workdir, "get.varve"), rng, rows)
    con = sqlite3.connect(os.path.join(workdir, "get.sqlite"), isolation_level=None)
    con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, tag INTEGER, title TEXT, "
                "embedding BLOB)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)",
                    zip(range(rows), (i % 100 for i in range(rows)), titles,
                        (v.tobytes() for v in vecs)))
    con.execute("COMMIT")
    keys = rng.integers(0, rows, calls).tolist()
    sql = "SELECT id, tag, title, embedding FROM items WHERE id = ?"

    def vv_get(k):
        return c.get(k)

    def sq_get(k):
        return con.execute(sql, (k,)).fetchone()
    assert vv_get(keys[0])["tag"] == sq_get(keys[0])[1]
    ra, rb = _ab(lambda: _us_per_call(vv_get, keys), lambda: _us_per_call(sq_get, keys),
                 rounds)
    db.close()
    con.close()
    out = _pair("get(id), whole document", "µs per call", ra, rb, "sqlite", False)
    out["note"] = (f"{rows:,} rows (int, text, 16-d vector); sqlite returns its row as a "
                   "tuple (the vector a blob), varvedb a dict (the vector an array)")
    return out


def one_row_upserts(workdir: str, rounds: int, calls: int = 2000, rows: int = 10_000
                    ) -> dict:
    """One-row upserts of live documents, merged (upsert, the default) against
    replaced (replace: upsert's path before it merged), on the same ids in turn:
    a whole row each way (the hot path: the merge must not cost it), and a row
    naming one field merged against the whole row it comes to replaced (the
    same document written; the merge gathers the rest from the live one)."""
    rng = np.random.default_rng(2)
    db, c, titles, vecs = _items(os.path.join(workdir, "upsert.varve"), rng, rows)
    keys = rng.integers(0, rows, calls).tolist()
    whole = [{"id": k, "tag": k % 100, "title": titles[k], "embedding": vecs[k]}
             for k in keys]
    partial = [{"id": k, "tag": k % 100} for k in keys]
    out = {}
    for name, merged, replaced in (("whole row", whole, whole),
                                   ("one field named", partial, whole)):
        ra, rb = _ab(lambda: _us_per_call(c.upsert, merged),
                     lambda: _us_per_call(c.replace, replaced), rounds)
        out[name] = _pair(f"one-row upsert of a live document, {name}: merge (upsert) "
                          "against replace of the whole row", "µs per call", ra, rb,
                          "replace", False)
    assert c.get(keys[0])["title"] == titles[keys[0]]
    db.close()
    out["note"] = (f"{rows:,} rows (int, text, 16-d vector), durability='off', one commit "
                   "a call; replace writes what upsert wrote before it merged")
    return out


def small_search(rounds: int, calls: int = 2000, rows: int = 1000, dim: int = 128) -> dict:
    import varvedb as vv
    x = demo_data.clustered(rows, dim, seed=3)
    qs = demo_data.clustered(calls, dim, seed=4)
    db = vv.connect(":memory:")
    c = db.create_collection("items", {"embedding": vv.Vector(dim, metric="l2")})
    c.insert_arrays(id=np.arange(rows), embedding=x)
    queries = list(qs)

    def once():
        return _us_per_call(lambda q: c.search(vector=q, limit=10, select=[]), queries)
    once()
    figures = [once() for _ in range(rounds)]
    db.close()
    return {"figure": f"top-10 search, select=[], {rows:,} rows × {dim}", "unit": "µs per call",
            "varvedb": _stats(figures)}


def search_overhead(rounds: int, dataset: str = "clustered", rows: int = 100_000,
                    calls: int = 1000, ef: int = 10, echo=print) -> dict:
    """µs of `Collection.search` above its kernel call (module docstring)."""
    import varvedb as vv
    from varvedb.index import hnsw as graph_module
    from . import datasets
    ds = datasets.load(dataset, os.path.join("bench-results", "cache"), echo, rows=rows,
                       queries=calls)
    db = vv.connect(":memory:")
    c = db.create_collection("items", {"embedding": vv.Vector(ds.train.shape[1],
                                                              metric=ds.metric,
                                                              index=vv.HNSW())})
    echo(f"bench layers: overhead: building the graph over {len(ds.train):,} rows")
    c.insert_arrays(embedding=ds.train)
    _wait_linked(c)
    queries = [np.ascontiguousarray(q, np.float32) for q in ds.test[:calls]]
    kernels = graph_module.kernels
    kernel = kernels.search_one
    seen = []

    def spy(graph, data, query_pair, *rest):
        # the pair copied: a bound walk scales each query into a buffer it reuses
        seen.append((graph, data, tuple(np.array(a) for a in query_pair), *rest))
        return kernel(graph, data, query_pair, *rest)
    kernels.search_one = spy
    try:        # each query's own kernel call, as the search makes it (a coded walk's
        for q in queries:       # query pair holds the query scaled to the codes)
            c.search(q, limit=10, ef=ef, select=[])
    finally:
        kernels.search_one = kernel
    # those searches kept their shape bound to the kernel they found, the spy: bound
    # again (a fresh bind), so that the figure times the search's own kernel call
    c.table.prepared.clear()
    if len(seen) != len(queries):
        return {"figure": "search overhead", "skipped": f"{len(queries)} searches made "
                f"{len(seen)} kernel calls (expected one graph walk each)"}
    calls_of = {id(q): args for q, args in zip(queries, seen)}

    def direct(q):
        return kernel(*calls_of[id(q)])
    clock = time.perf_counter_ns
    full, bare, diff = [], [], []
    for q in queries[:100]:          # warm both
        c.search(q, limit=10, ef=ef, select=[])
        direct(q)
    for r in range(rounds):
        f_r, b_r = [], []
        for i, q in enumerate(queries):
            # untimed first: the query's graph nodes in cache for both sides, else
            # whichever runs first pays the misses and the paired difference is
            # bimodal by order
            direct(q)
            if (i + r) % 2 == 0:
                t0 = clock(); c.search(q, limit=10, ef=ef, select=[]); t1 = clock()
                direct(q); t2 = clock()
                f_r.append(t1 - t0); b_r.append(t2 - t1)
            else:
                t0 = clock(); direct(q); t1 = clock()
                c.search(q, limit=10, ef=ef, select=[]); t2 = clock()
                b_r.append(t1 - t0); f_r.append(t2 - t1)
        full.append(statistics.median(f_r) / 1e3)
        bare.append(statistics.median(b_r) / 1e3)
        diff.append(statistics.median(np.subtract(f_r, b_r)) / 1e3)
    db.close()
    return {"figure": f"Collection.search minus its kernel call, top-10 ef={ef}, "
                      f"{len(ds.train):,} × {ds.train.shape[1]} ({ds.name}, {ds.metric})",
            "unit": "µs per query (median over queries, per round)",
            "search": _stats(full), "kernel": _stats(bare), "overhead": _stats(diff),
            "goal": "overhead ≤ 5 µs"}


def durable_commits(workdir: str, rounds: int, commits: int, threads: int,
                    dim: int = 128) -> dict:
    import varvedb as vv
    from .engines import rate, sqlite_committer
    vecs = demo_data.clustered(commits * rounds + 1000, dim, seed=5)
    db = vv.connect(os.path.join(workdir, f"commits-{threads}.varve"), durability="commit")
    c = db.create_collection("items", {"tag": "int", "embedding": vv.Vector(dim)})
    c.insert_arrays(id=np.arange(1000), tag=np.zeros(1000, np.int64), embedding=vecs[:1000])
    c.create_index("embedding", vv.HNSW())
    sq_commit = sqlite_committer(os.path.join(workdir, f"commits-{threads}.sqlite"), vecs)
    nxt = {"vv": 1000, "sq": 0}

    def vv_round():
        base = nxt["vv"]
        nxt["vv"] += commits
        return rate(lambda i: c.insert({"id": base + i, "tag": i % 100,
                                        "embedding": vecs[base + i]}), commits, threads)

    def sq_round():
        base = nxt["sq"]
        nxt["sq"] += commits
        return rate(lambda i: sq_commit(base + i), commits, threads)
    ra, rb = _ab(vv_round, sq_round, rounds)
    db.close()
    out = _pair(f"durable 1-row commits, HNSW-indexed, {threads} thread"
                f"{'s' if threads > 1 else ''}", "commits/s", ra, rb, "sqlite WAL+FULL", True)
    out["note"] = f"{commits} commits a round; {dim}-d vectors; a collection of 1,000 rows first"
    return out


def sustained_inserts(rounds: int, rows: int, base_rows: int = 20_000,
                      dim: int = 128) -> dict | str:
    try:
        import hnswlib
    except ImportError:
        return "hnswlib not installed (pip install -e '.[bench]'): sustained inserts skipped"
    import varvedb as vv
    x = demo_data.clustered(base_rows + rows * rounds, dim, seed=6)
    db = vv.connect(":memory:")
    c = db.create_collection("items", {"embedding": vv.Vector(dim, metric="l2")})
    c.insert_arrays(id=np.arange(base_rows), embedding=x[:base_rows])
    spec = vv.HNSW()
    c.create_index("embedding", spec)
    hn = hnswlib.Index(space="l2", dim=dim)
    hn.init_index(max_elements=len(x), M=spec.m, ef_construction=spec.ef_construction)
    hn.set_num_threads(1)
    hn.add_items(x[:base_rows], np.arange(base_rows))
    nxt = {"vv": base_rows, "hn": base_rows}

    def vv_round():
        lo = nxt["vv"]
        nxt["vv"] += rows
        t0 = time.perf_counter()
        for i in range(lo, lo + rows):
            c.insert({"id": i, "embedding": x[i]})
        _wait_linked(c)
        return rows / (time.perf_counter() - t0)

    def hn_round():
        lo = nxt["hn"]
        nxt["hn"] += rows
        t0 = time.perf_counter()
        for i in range(lo, lo + rows):
            hn.add_items(x[i:i + 1], [i])
        return rows / (time.perf_counter() - t0)
    ra, rb = _ab(vv_round, hn_round, rounds)
    db.close()
    out = _pair("sustained 1-row inserts into an HNSW graph", "rows/s", ra, rb,
                "hnswlib add_items", True)
    out["note"] = (f"{rows} rows a round onto a {base_rows:,}-row graph, {dim}-d, m="
                   f"{spec.m}, ef_construction={spec.ef_construction}; varvedb: durability"
                   "='off', timed until every row is linked; hnswlib on one thread")
    return out


def _wait_linked(c) -> None:
    while c.index_status()["unlinked"]:
        time.sleep(0.0005)


def cold_start(workdir: str, rounds: int, rows: int = 100_000, dim: int = 128) -> dict:
    """varvedb_bench/cold.py's fresh-process figures (wall and CPU), summarised."""
    from . import cold
    path = os.path.join(workdir, f"cold-{rows}x{dim}.varve")
    cold.build(path, rows, dim)
    figures = {name: _stats(values) for name, values in cold.run(path, rounds).items()}
    return {"figure": f"fresh process: open a {rows:,} × {dim} file with its graph, first "
                      "top-10 query; import varvedb over import numba", "unit": "ms",
            **figures}


def run(rounds: int = 9, commits: int = 200, insert_rows: int = 500, workdir: str | None = None,
        only: list[str] | None = None, echo=print, dataset: str = "clustered") -> dict:
    """Every figure (or those named in `only`), as a dict; progress on `echo`."""
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="varvedb-layers-", dir=os.getcwd())
    steps = {
        "get": lambda: get_by_id(workdir, rounds),
        "search": lambda: small_search(rounds),
        "upsert": lambda: one_row_upserts(workdir, rounds),
        "overhead": lambda: search_overhead(rounds, dataset, echo=echo),
        "commits-1": lambda: durable_commits(workdir, rounds, commits, 1),
        "commits-8": lambda: durable_commits(workdir, rounds, commits, 8),
        "inserts": lambda: sustained_inserts(rounds, insert_rows),
        "cold": lambda: cold_start(workdir, rounds),
    }
    out = {}
    try:
        for name, step in steps.items():
            if only and name not in only:
                continue
            echo(f"bench layers: {name} ({rounds} rounds)")
            out[name] = step()
            echo(json.dumps(out[name], indent=1, ensure_ascii=False))
    finally:
        if own:
            import shutil
            shutil.rmtree(workdir, ignore_errors=True)
    return out
