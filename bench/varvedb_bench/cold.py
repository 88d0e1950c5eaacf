"""Cold start in fresh processes: `import varvedb` against `import numba`, then
open a file with its HNSW graph and answer the first top-10 query.

    python -m varvedb_bench.cold PATH [--rows 100000] [--dim 128] [--rounds 15]

PATH is built once if missing (clustered vectors, cosine, HNSW defaults,
checkpointed); the first child run also fills numba's kernel cache, and is
not counted. Each round then runs three fresh interpreters, one after the
other: `import numba`, `import varvedb`, and a cold query (connect,
collection, search). Times are taken inside each child (interpreter start-up
excluded), as wall and CPU time; the report gives medians and min-max.
CPU time is the steadier figure on a shared machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

_IMPORT = ("import time; t, c = time.perf_counter(), time.process_time(); import {module}; "
           "print('RES', (time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3)")


def build(path: str, rows: int, dim: int) -> None:
    import numpy as np

    import varvedb as vv
    from varvedb import demo_data
    vectors = demo_data.clustered(rows + 1, dim, seed=0)
    np.save(path + ".query.npy", vectors[rows])
    with vv.connect(path) as db:
        docs = db.create_collection("docs", {"tag": "int",
                                             "embedding": vv.Vector(dim, metric="cosine")})
        docs.insert_arrays(id=np.arange(rows), tag=np.arange(rows) % 100,
                           embedding=vectors[:rows])
        docs.create_index("embedding", vv.HNSW())
        db.checkpoint()


def cold_query(path: str) -> None:
    """The child: times from before connect() to the first answer (varvedb imported)."""
    import numpy as np

    import varvedb as vv
    query = np.load(path + ".query.npy")
    connect = vv.connect    # the lazy exports load the engine (and numba) here, untimed
    t0, c0 = time.perf_counter(), time.process_time()
    db = connect(path)
    t1, c1 = time.perf_counter(), time.process_time()
    hits = db.collection("docs").search(vector=query, limit=10)
    t2, c2 = time.perf_counter(), time.process_time()
    assert len(hits) == 10
    print("RES", (t1 - t0) * 1e3, (c1 - c0) * 1e3, (t2 - t1) * 1e3, (c2 - c1) * 1e3,
          (t2 - t0) * 1e3, (c2 - c0) * 1e3)
    db.close()


def _child(args: list[str]) -> list[float]:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("RES"))
    return [float(x) for x in line.split()[1:]]


def run(path: str, rounds: int) -> dict[str, list[float]]:
    me = ["-m", "varvedb_bench.cold", "--child", path]
    _child(me)                            # fills the kernel cache if it is cold
    names = ("import numba wall", "import numba cpu", "import varvedb wall",
             "import varvedb cpu", "open wall", "open cpu", "first query wall",
             "first query cpu", "open + first query wall", "open + first query cpu")
    res: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        values = (_child(["-c", _IMPORT.format(module="numba")])
                  + _child(["-c", _IMPORT.format(module="varvedb")])
                  + _child(me))
        for name, value in zip(names, values):
            res[name].append(value)
    for kind in ("wall", "cpu"):
        res[f"varvedb over numba {kind}"] = [
            v - n for v, n in zip(res[f"import varvedb {kind}"], res[f"import numba {kind}"])]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        cold_query(a.path)
        return
    if not os.path.exists(a.path):
        build(a.path, a.rows, a.dim)
    for name, values in run(a.path, a.rounds).items():
        print(f"{name:28s} median {statistics.median(values):7.1f} ms "
              f"(min {min(values):.1f}, max {max(values):.1f}, n={len(values)})")


if __name__ == "__main__":
    main()
