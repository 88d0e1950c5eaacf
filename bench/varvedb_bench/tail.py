"""Warm in-process search latency: p50 / p99 / p999 of top-10 searches, and what
the slow ones coincided with.

    python -m varvedb_bench.tail PATH [--rows 100000] [--dim 128] [--searches 20000]
                                      [--ef 10] [--keep] [--unfreeze]

PATH is built once if missing (varvedb_bench.cold's file: clustered vectors,
cosine, HNSW defaults, checkpointed). The process opens it, warms with 2 000
searches, then times each of `--searches` searches (one at a time, one thread,
queries cycling through 2 000 clustered vectors) in wall and in the thread's
CPU time. Beside each search it records what may have made it slow: garbage
collections (gc.callbacks: how many, of which generation, their pauses),
the thread's context switches (getrusage RUSAGE_THREAD) and minor page faults
(/proc/self/stat). A search is "slow" above 3x the median.

--keep keeps every result, as an application that holds its hits does (a
search whose result is dropped leaves nothing for the collector; a kept one
makes it run). --unfreeze undoes what connect() froze (engine.
freeze_loaded_modules), for an A/B against the heap as it was before.

On a shared machine the wall-clock tail is mostly the scheduler (the slow
searches are those with a context switch, and a library's own p99 in the same
run is as long); the thread-CPU figures and the gc pauses are the in-process
ones.
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import time

import numpy as np

QUERIES = 2000


def _minflt() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def _switches() -> int:
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    return ru.ru_nvcsw + ru.ru_nivcsw


def run(path: str, searches: int = 20_000, ef: int = 10, keep: bool = False,
        unfreeze: bool = False) -> dict:
    """The figures of one process's warm searches of PATH's collection "docs"."""
    import varvedb as vv
    from varvedb import demo_data
    db = vv.connect(path)
    try:
        if unfreeze:
            gc.unfreeze()
        docs = db.collection("docs")
        dim = docs.schema.fields["embedding"].dim
        queries = demo_data.clustered(QUERIES, dim, seed=7)
        for q in queries:
            docs.search(vector=q, limit=10, ef=ef)
        kept = []
        pauses: list[list] = []     # [generation, start ns, end ns]

        def on_gc(phase, info):
            if phase == "start":
                pauses.append([info["generation"], time.perf_counter_ns(), 0])
            elif pauses:
                pauses[-1][2] = time.perf_counter_ns()

        wall = np.empty(searches, np.int64)
        cpu = np.empty(searches, np.int64)
        collections = np.zeros(searches, np.int64)
        switches = np.zeros(searches, np.int64)
        faults = np.zeros(searches, np.int64)
        clock, thread_clock = time.perf_counter_ns, time.thread_time_ns
        gc.callbacks.append(on_gc)
        try:
            for i in range(searches):
                q = queries[i % QUERIES]
                n_gc, f0, s0 = len(pauses), _minflt(), _switches()
                c0 = thread_clock()
                t0 = clock()
                hits = docs.search(vector=q, limit=10, ef=ef)
                wall[i] = clock() - t0
                cpu[i] = thread_clock() - c0
                switches[i] = _switches() - s0
                faults[i] = _minflt() - f0
                collections[i] = len(pauses) - n_gc
                if keep:
                    kept.append(hits)
        finally:
            gc.callbacks.remove(on_gc)
    finally:
        db.close()
    us, cpu_us = wall / 1e3, cpu / 1e3
    slow = cpu_us > 3 * np.median(cpu_us)
    out = {"searches": searches, "ef": ef, "keep": keep, "unfreeze": unfreeze,
           "frozen objects": gc.get_freeze_count()}
    for name, values in (("wall", us), ("cpu", cpu_us)):
        p50, p99, p999 = np.percentile(values, [50, 99, 99.9])
        out[name] = {"p50_us": p50, "p99_us": p99, "p999_us": p999, "max_us": values.max(),
                     "p99/p50": p99 / p50}
    out["slow (cpu > 3x median)"] = {
        "searches": int(slow.sum()), "with a collection": int((slow & (collections > 0)).sum()),
        "with a context switch": int((slow & (switches > 0)).sum()),
        "with a page fault": int((slow & (faults > 0)).sum())}
    out["searches with a context switch"] = int((switches > 0).sum())
    out["collections"] = {
        g: {"n": len(ms), "median_ms": float(np.median(ms)) if ms else 0.0,
            "max_ms": max(ms, default=0.0)}
        for g in (0, 1, 2)
        for ms in [[(end - start) / 1e6 for gen, start, end in pauses if gen == g and end]]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--searches", type=int, default=20_000)
    ap.add_argument("--ef", type=int, default=10)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--unfreeze", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(a.path):
        from . import cold
        cold.build(a.path, a.rows, a.dim)
    out = run(a.path, a.searches, a.ef, a.keep, a.unfreeze)
    for name in ("wall", "cpu"):
        f = out[name]
        print(f"{name:4s} p50 {f['p50_us']:7.1f} us  p99 {f['p99_us']:7.1f} us  "
              f"p999 {f['p999_us']:8.1f} us  max {f['max_us']:8.0f} us  "
              f"p99/p50 {f['p99/p50']:.2f}")
    print("slow searches (cpu > 3x median):", out["slow (cpu > 3x median)"],
          "; searches with a context switch:", out["searches with a context switch"])
    print("collections by generation:", out["collections"])


if __name__ == "__main__":
    main()
