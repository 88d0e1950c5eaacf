"""`varvedb bench branch`: what a branch costs — fork, writes on it, merge.

ROWS x DIM vectors with an HNSW index are loaded and checkpointed on a real
disk (`--out`); then, timed one by one: `branch("exp")`, WRITES single-row
updates on the branch (one commit each, durable), and `merge("exp")` onto
main (one commit). Bytes added are the log's growth over each step (the
file itself grows in 1 MiB steps). The merge's diff reads the visible rows of
both sides and compares the changed ones column by column; the graph links the
branch's rows like any others (one graph for every branch).

Output: OUT/branch-<rows>x<dim>.{json,md}.
"""
from __future__ import annotations

import os
import statistics
import time

import numpy as np

import varvedb as vv

from . import report


def run(out: str, rows: int = 100_000, dim: int = 128, writes: int = 1000, echo=print) -> dict:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"branch-{rows}x{dim}.varve")
    for p in (path, path + ".vacuum"):
        if os.path.exists(p):
            os.remove(p)
    rng = np.random.default_rng(7)
    with vv.connect(path) as db:
        docs = db.create_collection("docs", {"tag": vv.Int(index="hash"), "note": "text",
                                             "emb": vv.Vector(dim, index=vv.HNSW())})
        for lo in range(0, rows, 50_000):
            hi = min(rows, lo + 50_000)
            docs.insert_arrays(id=np.arange(lo, hi), tag=np.arange(lo, hi) % 100,
                               emb=rng.standard_normal((hi - lo, dim)).astype(np.float32))
        while docs.index_status("emb")["unlinked"]:
            time.sleep(0.1)
        db.checkpoint()
        log = db.engine.log
        e0 = log.end
        t = time.perf_counter()
        db.branch("exp")
        fork_s, e1 = time.perf_counter() - t, log.end
        db.use("exp")
        targets = rng.choice(rows, writes, replace=False)
        vecs = rng.standard_normal((writes, dim)).astype(np.float32)
        lat = []
        t = time.perf_counter()
        for i, (k, v) in enumerate(zip(targets.tolist(), vecs)):
            s = time.perf_counter()
            docs.upsert([{"id": k, "tag": 1000 + i, "note": f"edit {i}", "emb": v}])
            lat.append(time.perf_counter() - s)
        writes_s, e2 = time.perf_counter() - t, log.end
        db.use("main")
        t = time.perf_counter()
        merged = db.merge("exp")
        merge_s, e3 = time.perf_counter() - t, log.end
        check = docs.count(where="tag >= 1000")
        assert check == writes, (check, writes)
        summary = {"rows": rows, "dim": dim, "writes": writes, "merge_version": merged,
                   "fork_s": fork_s, "fork_bytes": e1 - e0,
                   "writes_s": writes_s, "writes_bytes": e2 - e1,
                   "write_p50_ms": statistics.median(lat) * 1e3,
                   "write_p99_ms": float(np.percentile(lat, 99)) * 1e3,
                   "merge_s": merge_s, "merge_bytes": e3 - e2,
                   "total_s": fork_s + writes_s + merge_s, "total_bytes": e3 - e0,
                   "file_bytes_before": e0}
    report.write_outputs(summary, os.path.join(out, f"branch-{rows}x{dim}"), markdown,
                         lambda s, p: "these figures have no plot", echo)
    return summary


def markdown(s: dict) -> str:
    return "\n".join([
        f"### branch: fork, {s['writes']:,} single-row updates on it, merge onto main "
        f"({s['rows']:,} x {s['dim']} with HNSW; {s['file_bytes_before']:,} bytes before)", "",
        "| step | seconds | bytes added |", "|---|---|---|",
        f"| branch(\"exp\") | {s['fork_s']:.4f} | {s['fork_bytes']:,} |",
        f"| {s['writes']:,} updates on exp (one durable commit each; p50 "
        f"{s['write_p50_ms']:.2f} ms, p99 {s['write_p99_ms']:.2f} ms) | {s['writes_s']:.2f} | "
        f"{s['writes_bytes']:,} |",
        f"| merge(\"exp\") onto main (one commit) | {s['merge_s']:.3f} | "
        f"{s['merge_bytes']:,} |",
        f"| all | {s['total_s']:.2f} | {s['total_bytes']:,} |", ""])
