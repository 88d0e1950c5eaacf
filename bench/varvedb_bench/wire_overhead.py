"""`python -m varvedb_bench.wire_overhead`: what a query costs over the wire
(`varvedb serve --pg`, psycopg prepared, binary) against `db.sql()` of the same
statement in process, in CPU time, and the wire's QPS at 1 and CLIENTS
connections.

Why CPU time: the machine is shared (load beside the run); the server's CPU
seconds per query (all its threads, in nanoseconds: /proc/PID/task/*/schedstat;
the clock ticks psutil reads are 10 ms, 5 µs a query over 2000) and the
in-process call's (`time.thread_time`) are what each side spends, whatever
else runs. The wire
overhead is their difference. Rounds alternate the two sides (the first swapping
every round); the report gives each round's figures, their medians and min–max,
and /proc/loadavg before and after.

Statements (varvedb.demo_data's clustered ROWS×DIM vectors in `items`, HNSW):
by_id `SELECT embedding FROM items WHERE id = %s` and top10 `SELECT id FROM
items ORDER BY embedding <-> %s LIMIT 10` (a held-out query vector).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

from varvedb import demo_data
from .server import K, VarveServer, build_file, free_port

STATEMENTS = {"by_id": "SELECT embedding FROM items WHERE id = %s",
              "top10": f"SELECT id FROM items ORDER BY embedding <-> %s LIMIT {K}"}


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _threads_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds the processes' threads have run (a thread that ended is not
    counted: the connections' threads live through a round)."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total / 1e9


def _args(name: str, i: int, rows: int, queries):
    return (i * 7919 % rows,) if name == "by_id" else (queries[i % len(queries)],)


def _connect(port: int):
    import psycopg
    from pgvector.psycopg import register_vector
    conn = psycopg.connect(f"host=127.0.0.1 port={port} user=me dbname=db", autocommit=True)
    register_vector(conn)
    return conn


def _wire(conns: list, name: str, n: int, rows: int, queries) -> tuple[float, int]:
    """Each connection runs n queries of `name` on a thread of its own: (seconds, queries)."""
    def work(conn, at):
        cur = conn.cursor(binary=True)
        for i in range(at, at + n):
            cur.execute(STATEMENTS[name], _args(name, i, rows, queries), prepare=True)
            cur.fetchall()
    threads = [threading.Thread(target=work, args=(c, j * n)) for j, c in enumerate(conns)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t, n * len(conns)


def _in_process(db, name: str, n: int, rows: int, queries) -> float:
    """CPU µs a db.sql() of the statement costs (this thread's time)."""
    t = time.thread_time()
    for i in range(n):
        db.sql(STATEMENTS[name], _args(name, i, rows, queries))
    return (time.thread_time() - t) / n * 1e6


def _summary(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def run(rows: int = 10_000, dim: int = 128, rounds: int = 5, n: int = 2000, clients: int = 8,
        ef: int = 40, workdir: str | None = None, echo=print) -> dict:
    import varvedb as vv
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="varvedb-wire-", dir=os.getcwd())
    ds = demo_data.make(rows, dim, 64)
    path = os.path.join(workdir, "items.varve")
    build_file(path, ds.vectors, ds.queries, 16, 64, ef)
    pg_port = free_port()
    srv = VarveServer(path, ["--pg", str(pg_port)]).start()
    report: dict = {"config": {"rows": rows, "dim": dim, "rounds": rounds, "n": n,
                               "clients": clients, "ef": ef, "cpus": os.cpu_count()}}
    try:
        db = vv.connect(path, readonly=True)
        one, many = [_connect(pg_port)], [_connect(pg_port) for _ in range(clients)]
        for name in STATEMENTS:                   # warm: plans kept, caches filled
            _wire(one, name, 200, rows, ds.queries)
            _wire(many, name, 50, rows, ds.queries)
            _in_process(db, name, 200, rows, ds.queries)
        for name in STATEMENTS:
            runs = []
            for r in range(rounds):
                got = {"loadavg_before": _loadavg()}
                for side in (("wire", "sql") if r % 2 == 0 else ("sql", "wire")):
                    if side == "sql":
                        got["sql_cpu_us"] = _in_process(db, name, n, rows, ds.queries)
                        continue
                    c0 = _threads_cpu_seconds(srv.pids())
                    secs, done = _wire(one, name, n, rows, ds.queries)
                    got["wire_cpu_us"] = (_threads_cpu_seconds(srv.pids()) - c0) / done * 1e6
                    got["qps_1"] = done / secs
                secs, done = _wire(many, name, n // clients * 2, rows, ds.queries)
                got[f"qps_{clients}"] = done / secs
                got["overhead_us"] = got["wire_cpu_us"] - got["sql_cpu_us"]
                got["loadavg_after"] = _loadavg()
                echo(f"{name} round {r}: " + ", ".join(
                    f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in got.items()))
                runs.append(got)
            report[name] = {"runs": runs, **{k: _summary([x[k] for x in runs]) for k in (
                "sql_cpu_us", "wire_cpu_us", "overhead_us", "qps_1", f"qps_{clients}")}}
        for c in one + many:
            c.close()
        db.close()
    finally:
        srv.stop()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    return report


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m varvedb_bench.wire_overhead",
                                description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=2000, help="queries a side runs each round")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--workdir")
    a = p.parse_args(argv)
    print(json.dumps(run(a.rows, a.dim, a.rounds, a.n, a.clients, workdir=a.workdir,
                         echo=lambda line: print(line, file=sys.stderr, flush=True)),
                     indent=1))


if __name__ == "__main__":
    main()
