"""`varvedb bench sharded`: a collection sharded over 1, 2, 4 ... varvedb files on
a local Ray (integrations/sharded.py) against one in-process collection of the
same rows (issue 33's figure).

Both sides hold the same rows with the same HNSW parameters; the queries run
interleaved, one query on one side then on the other (the order alternating
by query and round), so the machine's noise falls on both. Per shard count:
recall@k of both against exact search, and per query the latency of each and
the difference (what the fan-out adds: a Ray call to every shard, each
shard's search over its share of the rows, and the merge), as medians over
rounds of the per-round p50 and p99.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

BATCH = 10_000


def _pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs), q))


def run(dataset: str = "clustered", rows: int = 50_000, queries: int = 300,
        shards=(1, 2, 4), rounds: int = 5, ef: int = 40, k: int = 10, echo=print) -> dict:
    import ray

    import varvedb as vv
    from varvedb.integrations.sharded import ShardedCollection

    from . import datasets
    ds = datasets.load(dataset, os.path.join("bench-results", "cache"), echo, rows=rows,
                       queries=queries)
    dim = ds.train.shape[1]
    schema = {"vec": vv.Vector(dim, metric=ds.metric, index=vv.HNSW())}
    qs = [np.ascontiguousarray(q, np.float32) for q in ds.test[:queries]]
    db = vv.connect(":memory:")
    single = db.create_collection("items", schema)
    echo(f"bench sharded: one collection of {len(ds.train):,} × {dim} ({ds.name})")
    single.insert_arrays(id=np.arange(len(ds.train)), vec=ds.train)
    single.wait_indexed()
    truth = [set(single.search(vector=q, limit=k, exact=True, select=[]).ids) for q in qs]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False,
             runtime_env={"env_vars": {"VARVEDB_COMPILE_AHEAD": "0"}})
    out = {"figure": f"sharded search (Ray actors, one a shard) against one collection, "
                     f"top-{k} ef={ef}, {len(ds.train):,} × {dim} ({ds.name}, {ds.metric})",
           "unit": "ms per query", "load": os.getloadavg()[0], "by_shards": {}}
    try:
        for n in shards:
            with tempfile.TemporaryDirectory(dir=".") as tmp:
                t0 = time.perf_counter()
                sc = ShardedCollection.create(os.path.join(tmp, "s"), "items", schema,
                                              shards=n)
                for lo in range(0, len(ds.train), BATCH):
                    block = ds.train[lo:lo + BATCH]
                    sc.insert([{"id": lo + i, "vec": v} for i, v in enumerate(block)])
                sc.wait_indexed()
                echo(f"bench sharded: {n} shard(s) loaded and linked in "
                     f"{time.perf_counter() - t0:.1f} s")
                figures = _interleaved(single, sc, qs, truth, rounds, ef, k)
                sc.close()
            out["by_shards"][n] = figures
            echo(f"bench sharded: {n} shard(s): {figures}")
    finally:
        ray.shutdown()
        db.close()
    return out


def _interleaved(single, sc, qs, truth, rounds, ef, k) -> dict:
    clock = time.perf_counter_ns
    for q in qs[:20]:                                   # warm both
        single.search(vector=q, limit=k, ef=ef, select=[])
        sc.search(vector=q, limit=k, ef=ef, select=[])
    per_round = {"single_p50": [], "single_p99": [], "sharded_p50": [], "sharded_p99": [],
                 "added_p50": [], "added_p99": []}
    found_single, found_sharded = [], []
    for r in range(rounds):
        a, b = [], []
        for i, q in enumerate(qs):
            if (i + r) % 2 == 0:
                t0 = clock(); h1 = single.search(vector=q, limit=k, ef=ef, select=[])
                t1 = clock(); h2 = sc.search(vector=q, limit=k, ef=ef, select=[]); t2 = clock()
                a.append(t1 - t0); b.append(t2 - t1)
            else:
                t0 = clock(); h2 = sc.search(vector=q, limit=k, ef=ef, select=[])
                t1 = clock(); h1 = single.search(vector=q, limit=k, ef=ef, select=[])
                t2 = clock()
                b.append(t1 - t0); a.append(t2 - t1)
            if r == 0:
                found_single.append(set(h1.ids)); found_sharded.append(set(h2.ids))
        d = np.subtract(b, a)
        for name, xs in (("single", a), ("sharded", b), ("added", d)):
            per_round[f"{name}_p50"].append(_pct(xs, 50) / 1e6)
            per_round[f"{name}_p99"].append(_pct(xs, 99) / 1e6)
    out = {name: {"median": round(statistics.median(xs), 3),
                  "min": round(min(xs), 3), "max": round(max(xs), 3)}
           for name, xs in per_round.items()}
    total = k * len(qs)
    out["recall_single"] = sum(len(f & t) for f, t in zip(found_single, truth)) / total
    out["recall_sharded"] = sum(len(f & t) for f, t in zip(found_sharded, truth)) / total
    return out


def summary(report: dict) -> str:
    """The figures as lines: median [min–max] over rounds, in ms a query."""
    def mm(s: dict) -> str:
        return f"{s['median']:.2f} [{s['min']:.2f}–{s['max']:.2f}]"
    lines = [f"{report['figure']}; load {report['load']:.2f}"]
    for n, f in report["by_shards"].items():
        lines.append(f"{n} shard(s): recall {f['recall_sharded']:.4f} (one collection "
                     f"{f['recall_single']:.4f}); added p50 {mm(f['added_p50'])}, p99 "
                     f"{mm(f['added_p99'])} ms; one collection p50 {mm(f['single_p50'])} ms")
    return "\n".join(lines)
