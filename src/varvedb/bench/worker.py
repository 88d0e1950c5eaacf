"""One engine, one run, in its own process: load, index, query, reopen, commit.

Run by the harness as `python -m varvedb.bench.worker CONFIG.json`; prints
one JSON object of figures. A process per engine and run keeps peak memory
(ru_maxrss) honest and stops one engine's caches and threads from helping or
hurting another.
"""
from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np

from . import data
from .engines import ENGINES, Missing, reset


def _ms_per_query(fn, queries) -> tuple[float, list]:
    out = []
    t = time.perf_counter()
    for q in queries:
        out.append(fn(q))
    return (time.perf_counter() - t) * 1000 / max(1, len(queries)), out


def run(cfg: dict) -> dict:
    vectors = np.load(cfg["vectors"], mmap_mode="r")
    queries = np.load(cfg["queries"])
    gt = {name: np.load(path) for name, path in cfg["truth"].items()}
    ids = np.arange(len(vectors), dtype=np.int64)
    tags = data.tag_of(ids)
    k = cfg["k"]
    reset(cfg["workdir"])
    try:
        eng = ENGINES[cfg["engine"]](cfg["workdir"], vectors.shape[1], cfg["metric"])
    except Missing as e:
        return {"skipped": str(e)}
    res: dict = {}
    vec = np.ascontiguousarray(vectors)

    t = time.perf_counter()
    eng.load(ids, tags, vec)
    res["write_rows_per_s"] = len(ids) / (time.perf_counter() - t)

    t = time.perf_counter()
    eng.checkpoint()
    res["checkpoint_s"] = time.perf_counter() - t

    if eng.supports_ann:
        t = time.perf_counter()
        eng.build_index(cfg["m"], cfg["ef_construction"])
        res["index_build_s"] = time.perf_counter() - t

    nq_exact = queries[:cfg["exact_queries"]]
    ms, found = _ms_per_query(lambda q: eng.exact(q, k), nq_exact)
    res["exact_ms"] = ms
    res["exact_recall"] = data.recall(found, gt["all"][:len(nq_exact)])

    for pct in (1, 25):
        ms, found = _ms_per_query(lambda q: eng.exact(q, k, max_tag=pct), nq_exact)
        res[f"exact_f{pct}_ms"] = ms
        res[f"exact_f{pct}_recall"] = data.recall(found, gt[f"f{pct}"][:len(nq_exact)])

    if eng.supports_ann:
        for ef in cfg["ef"]:
            ms, found = _ms_per_query(lambda q: eng.ann(q, k, ef), queries)
            res[f"ann_ef{ef}_ms"] = ms
            res[f"ann_ef{ef}_recall"] = data.recall(found, gt["all"])
        ef = cfg["filter_ef"]
        for pct in (1, 25):
            ms, found = _ms_per_query(lambda q: eng.ann(q, k, ef, max_tag=pct), queries)
            res[f"ann_f{pct}_ms"] = ms
            res[f"ann_f{pct}_recall"] = data.recall(found, gt[f"f{pct}"])
            res[f"ann_f{pct}_hits"] = float(np.mean([len(f) for f in found]))

    eng.close()
    res["disk_mb"] = eng.disk_bytes() / 2**20

    t = time.perf_counter()
    eng.open()
    res["open_ms"] = (time.perf_counter() - t) * 1000
    first = (eng.ann if eng.supports_ann else eng.exact)
    args = (queries[0], k, cfg["filter_ef"]) if eng.supports_ann else (queries[0], k)
    first(*args)
    res["open_first_query_ms"] = (time.perf_counter() - t) * 1000
    eng.close()

    res["durable_commits_per_s"] = eng.durable_commits(cfg["commits"], vec)
    res["durable_commits_4_threads_per_s"] = eng.durable_commits(cfg["commits"], vec, threads=4)
    if cfg["engine"] == "sqlite":
        res["durable_commits_rollback_journal_per_s"] = eng.durable_commits(
            cfg["commits"], vec, journal="DELETE")
    res["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    reset(cfg["workdir"])
    return res


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        config = json.load(f)
    print(json.dumps(run(config)))
