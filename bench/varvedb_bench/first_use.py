"""Issue 28's first-use script: what a new user's first minute costs in numba.

    python -m varvedb_bench.first_use [--rows 2000] [--dim 64]

Inserts `rows` rows with a full-text field and a vector into a fresh file, runs
one text search, one vector search and one SQL query, and prints each step's
wall time and the specialisations numba compiled (kernel, count, seconds of its
own), read from kernels/compile_log.py. Run it with an empty NUMBA_CACHE_DIR
for the cold figure, and after `varvedb warm` for the warm one (0 compiled).
"""
from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time

import numpy as np

WORDS = "river ice varve layer sediment lake summer winter clay silt core year".split()


def run(path: str, rows: int = 2000, dim: int = 64) -> dict[str, float]:
    """The script on a new file at `path`; each step's seconds."""
    import varvedb as vv
    steps = {}
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    with vv.connect(path) as db:
        docs = db.create_collection("docs", {"body": vv.Text(fts=True),
                                             "embedding": vv.Vector(dim)})
        words = np.array(WORDS, dtype=object)
        bodies = [" ".join(w) for w in words[rng.integers(0, len(WORDS), (rows, 5))]]
        docs.insert_arrays(id=np.arange(rows), body=bodies,
                           embedding=rng.standard_normal((rows, dim), dtype=np.float32))
        steps["insert"] = time.perf_counter() - t
        t = time.perf_counter()
        assert len(docs.search(text="lake clay", limit=10)) == 10
        steps["text search"] = time.perf_counter() - t
        t = time.perf_counter()
        query = rng.standard_normal(dim, dtype=np.float32)
        assert len(docs.search(vector=query, limit=10)) == 10
        steps["vector search"] = time.perf_counter() - t
        t = time.perf_counter()
        db.sql("SELECT count(*) FROM docs WHERE body @@ 'river'")
        steps["sql"] = time.perf_counter() - t
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        steps = run(os.path.join(tmp, "first.varve"), args.rows, args.dim)
    total = time.perf_counter() - t0
    from varvedb.kernels.compile_log import compilations
    done = compilations()
    for step, s in steps.items():
        print(f"{step:>14}: {s:8.2f} s")
    print(f"{'total':>14}: {total:8.2f} s, {len(done)} specialisations compiled "
          f"({sum(c.seconds for c in done):.2f} s)")
    by = collections.defaultdict(list)
    for c in done:
        by[c.kernel].append(c.seconds)
    for kernel, secs in sorted(by.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {sum(secs):7.2f} s  {len(secs):3d}x  {kernel}")


if __name__ == "__main__":
    main()
