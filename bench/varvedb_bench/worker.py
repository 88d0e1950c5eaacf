"""One engine, one run, in its own process: load, exact, index, ANN, reopen, commit.

Run by the harness as `python -m varvedb_bench.worker CONFIG.json`. A process
per engine and run keeps peak memory honest (VmHWM of this process, plus the
sampled memory of any server the engine starts) and stops one engine's
caches and threads from helping or hurting another. The figures so far are
rewritten to the config's `result` file after every phase, so a run the
harness stops for time still reports what it measured, and which phase it
was in. Progress bars go to stderr.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time

import numpy as np
from tqdm import tqdm

from varvedb import demo_data
from . import data
from .engines import Missing, engine_class, reset


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss it is not
    inherited from the parent across fork + exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pss_mb(pids: list[int]) -> float:
    """Summed proportional set size of processes (shared pages counted once overall)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total / 1024


class ServerMemory:
    """Samples the engine's server processes (if any) every `every` seconds; keeps the peak."""

    def __init__(self, eng, every: float = 0.25):
        self.eng, self.every, self.peak = eng, every, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.every):
            pids = self.eng.server_pids()
            if pids:
                self.peak = max(self.peak, pss_mb(pids))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


class Run:
    """The figures of one engine-run, written out after every phase."""

    def __init__(self, path: str, engine: str):
        self.path, self.engine = path, engine
        self.res: dict = {"notes": {}}

    def phase(self, name: str) -> None:
        self.res["phase"] = name
        self.save()

    def save(self) -> None:
        with open(self.path + ".part", "w") as f:
            json.dump(self.res, f)
        os.replace(self.path + ".part", self.path)

    def bar(self, total: int, what: str, unit: str = "row"):
        return tqdm(total=total, desc=f"  {self.engine}: {what}", unit=unit, leave=False,
                    mininterval=1.0, dynamic_ncols=True)


def _timed_queries(fn, queries, bar, budget_s: float) -> tuple[float, list]:
    """Mean ms per query of fn over queries, one at a time; the bar moves every 50.

    One untimed query first takes one-off costs out of the mean (JIT compiles,
    statement preparation, a changed search setting); the cold cost is measured
    on its own as "open + first query". A loop past budget_s stops early (after
    at least 10 queries): the figures are then over the queries it answered.
    """
    fn(queries[0])
    out = []
    t = time.perf_counter()
    stop = t + budget_s if budget_s else float("inf")
    for i, q in enumerate(queries):
        out.append(fn(q))
        if i % 50 == 49:
            bar.update(50)
        if i >= 9 and time.perf_counter() > stop:
            break
    ms = (time.perf_counter() - t) * 1000 / max(1, len(out))
    bar.update(len(queries) - 50 * (len(out) // 50))
    return ms, out


def run(cfg: dict) -> dict:
    rows = data.VectorFile(cfg["vectors"])
    queries = np.load(cfg["queries"])
    gt = {name: np.load(path) for name, path in cfg["truth"].items()}
    ids = np.arange(len(rows), dtype=np.int64)
    tags = demo_data.tag_of(ids)
    k, name = cfg["k"], cfg["engine"]
    out = Run(cfg["result"], name)
    reset(cfg["workdir"])
    try:
        eng = engine_class(name)(cfg["workdir"], rows.dim, cfg["metric"])
        eng.dtype = cfg.get("dtype", "f32")
    except Missing as e:
        out.res = {"skipped": str(e)}
        out.save()
        return out.res
    res = out.res
    server = ServerMemory(eng)
    try:
        _phases(cfg, eng, out, rows, ids, tags, queries, gt, k)
        res.pop("phase", None)
    finally:
        res["notes"].update(eng.notes)
        eng.teardown()
        server_peak = server.stop()
        res["peak_mb"] = peak_rss_mb() + server_peak
        if server_peak:
            res["notes"]["memory"] = (f"worker {peak_rss_mb():,.0f} MB + server processes "
                                      f"{server_peak:,.0f} MB (summed PSS, sampled)")
        out.save()
        reset(cfg["workdir"])
    return res


def _phases(cfg, eng, out, rows, ids, tags, queries, gt, k) -> None:
    res = out.res
    n = len(rows)
    budget = cfg.get("query_budget_s", 0)

    out.phase("load")
    with out.bar(n, "load") as bar:
        eng.advance = bar.update
        t = time.perf_counter()
        eng.load(ids, tags, rows)
        load_s = time.perf_counter() - t
    if not eng.index_is_store:
        res["write_rows_per_s"] = n / load_s

    nq_exact = queries[:cfg["exact_queries"]]
    if eng.supports_exact:
        out.phase("exact")
        with out.bar(3 * len(nq_exact), "exact top-k", "query") as bar:
            for key, max_tag in (("", None), ("_f1", 1), ("_f25", 25)):
                ms, found = _timed_queries(lambda q, t=max_tag: eng.exact(q, k, t), nq_exact,
                                           bar, budget)
                _count(res, f"exact{key}", found, nq_exact)
                res[f"exact{key}_ms"] = ms
                res[f"exact{key}_recall"] = data.recall(found, gt[key[1:] or "all"])
                _explain(eng, res, queries[0], k, None, max_tag)
        out.save()

    if eng.supports_ann:
        out.phase("index build")
        with out.bar(n, "index build") as bar:
            eng.advance = bar.update
            t = time.perf_counter()
            eng.build_index(cfg["m"], cfg["ef_construction"])
            res["index_build_s"] = time.perf_counter() - t
        out.save()

    out.phase("persist")
    t = time.perf_counter()
    eng.persist()
    res["checkpoint_s"] = time.perf_counter() - t
    graph = eng.graph_bytes() if eng.supports_ann else None
    if graph is not None:
        res["graph_bytes_per_vector"] = graph / n

    if eng.supports_ann:
        out.phase("ann")
        fe = cfg["filter_ef"]
        with out.bar(len(queries) * (len(cfg["ef"]) + 2), "ANN top-k", "query") as bar:
            for ef in cfg["ef"]:
                ms, found = _timed_queries(lambda q, e=ef: eng.ann(q, k, e), queries, bar,
                                           budget)
                _count(res, f"ann_ef{ef}", found, queries)
                res[f"ann_ef{ef}_ms"] = ms
                res[f"ann_ef{ef}_recall"] = data.recall(found, gt["all"])
                out.save()
            _explain(eng, res, queries[0], k, fe, None)
            for pct in (1, 25):
                ms, found = _timed_queries(lambda q, t=pct: eng.ann(q, k, fe, t), queries, bar,
                                           budget)
                _count(res, f"ann_f{pct}", found, queries)
                res[f"ann_f{pct}_ms"] = ms
                res[f"ann_f{pct}_recall"] = data.recall(found, gt[f"f{pct}"])
                res[f"ann_f{pct}_hits"] = float(np.mean([len(f) for f in found]))
                _explain(eng, res, queries[0], k, fe, pct)
                out.save()

    out.phase("reopen")
    eng.close()
    res["disk_mb"] = eng.disk_bytes() / 2**20
    t = time.perf_counter()
    eng.open()
    res["open_ms"] = (time.perf_counter() - t) * 1000
    if eng.supports_ann:
        eng.ann(queries[0], k, cfg["filter_ef"])
    else:
        eng.exact(queries[0], k)
    res["open_first_query_ms"] = (time.perf_counter() - t) * 1000
    eng.close()
    out.save()

    if eng.durable:
        out.phase("durable commits")
        vec = rows.read(0, cfg["commits"])
        res["durable_commits_per_s"] = eng.durable_commits(cfg["commits"], vec)
        res["durable_commits_4_threads_per_s"] = eng.durable_commits(cfg["commits"], vec,
                                                                     threads=4)
        if eng.name == "sqlite":
            res["durable_commits_rollback_journal_per_s"] = eng.durable_commits(
                cfg["commits"], vec, journal="DELETE")


def _count(res, key, found, queries) -> None:
    """Note a timed loop that the query budget cut short."""
    if len(found) < len(queries):
        res["notes"][f"{key} queries"] = (f"{len(found)} of {len(queries)} queries "
                                          "(the rest past the --query-budget)")


def _explain(eng, res, q, k, ef, max_tag) -> None:
    plan = eng.explain(q, k, ef, max_tag)
    if plan is not None:
        what = "exact" if ef is None else f"ANN ef={ef}"
        res["notes"][f"plan, {what}, {'no filter' if max_tag is None else f'tag < {max_tag}'}"] = \
            str(plan)


# -- the sweep mode (varvedb_bench/sweep.py): a build step, then one process per sweep point ---

def sweep_step(cfg: dict) -> dict:
    """One step of `varvedb bench ann --engines`: "build" (load, index, persist, close;
    outside any cap) or "query" (open the built files, time the queries at one
    sweep point). Figures go to cfg["result"], as for run()."""
    out = Run(cfg["result"], cfg["engine"])
    if cfg["step"] == "build":
        reset(cfg["workdir"])
    try:
        eng = engine_class(cfg["engine"])(cfg["workdir"], cfg["dim"], cfg["metric"],
                                          **cfg["options"])
    except Missing as e:
        out.res = {"skipped": str(e)}
        out.save()
        return out.res
    server = ServerMemory(eng)
    try:
        if cfg["step"] == "build":
            _build_step(cfg, eng, out)
        else:
            _query_step(cfg, eng, out)
        out.res.pop("phase", None)
    finally:
        out.res["notes"].update(eng.notes)
        eng.teardown()
        out.res["worker_peak_mb"] = peak_rss_mb()
        out.res["server_peak_mb"] = server.stop()
        out.save()
    return out.res


def _build_step(cfg, eng, out) -> None:
    res = out.res
    rows = data.VectorFile(cfg["vectors"])
    ids = np.arange(len(rows), dtype=np.int64)
    eng.supports_exact = False          # no exact figures here: no brute-force copy
    out.phase("load")
    with out.bar(len(rows), "load") as bar:
        eng.advance = bar.update
        t = time.perf_counter()
        eng.load(ids, demo_data.tag_of(ids), rows)
        res["load_s"] = time.perf_counter() - t
    out.phase("index build")
    with out.bar(len(rows), "index build") as bar:
        eng.advance = bar.update
        t = time.perf_counter()
        eng.build_index(cfg["m"], cfg["ef_construction"])
        res["index_build_s"] = time.perf_counter() - t
    out.phase("persist")
    t = time.perf_counter()
    eng.persist()
    res["persist_s"] = time.perf_counter() - t
    index = eng.graph_bytes()
    if index is not None:
        res["index_bytes"] = int(index)
    # one query on the reopened files, here outside any cap: a JIT compiles (and
    # caches) the search kernels now, which a capped query worker then only loads
    # (compiling there took ~60 MB more and was killed at a 64 MB cap)
    out.phase("warm-up")
    eng.close()
    eng.open()
    eng.ann(np.load(cfg["queries"])[0], cfg["k"], 1)
    eng.close()
    res["disk_bytes"] = eng.disk_bytes()
    out.save()


def _query_step(cfg, eng, out) -> None:
    """Open, one untimed query (JIT, prepared statements), then cold (drop the page
    cache) or warm (one untimed pass over the queries); then the timed pass:
    per-query latency and the bytes the worker and its servers read from disk."""
    from .cgroup import drop_page_cache, read_bytes
    res = out.res
    queries = np.load(cfg["queries"])
    truth = np.load(cfg["truth"])
    k, point = cfg["k"], cfg["point"]
    out.phase("open")
    eng.close()
    t = time.perf_counter()
    eng.open()
    res["open_ms"] = (time.perf_counter() - t) * 1000
    eng.ann(queries[0], k, point)
    out.phase("warm-up")
    if cfg["cold"]:
        drop_page_cache()
    else:
        for q in queries:
            eng.ann(q, k, point)
    out.phase("queries")
    pids = [os.getpid()] + eng.server_pids()
    before = read_bytes(pids)
    budget = cfg.get("query_budget_s") or float("inf")
    found, lat = [], []
    stop = time.perf_counter() + budget
    for i, q in enumerate(queries):
        t0 = time.perf_counter_ns()
        found.append(eng.ann(q, k, point))
        lat.append(time.perf_counter_ns() - t0)
        if i >= 9 and time.perf_counter() > stop:
            break
    after = read_bytes(pids + [p for p in eng.server_pids() if p not in pids])
    n = len(found)
    lat_ms = np.array(lat) / 1e6
    res.update(queries=n, qps=n / (lat_ms.sum() / 1000), p50_ms=float(np.percentile(lat_ms, 50)),
               p99_ms=float(np.percentile(lat_ms, 99)), recall=data.recall(found, truth),
               read_bytes_per_query=sum(after[p] - before.get(p, 0) for p in after) / n)
    if n < len(queries):
        res["notes"]["queries"] = f"{n} of {len(queries)} queries (past the --query-budget)"
    plan = eng.explain(queries[0], k, point)
    if plan is not None:
        res["notes"][f"plan, {eng.sweep}={point}"] = str(plan)
    res["cgroup"] = _my_cgroup()
    out.save()


def _my_cgroup() -> str:
    """This process's memory cgroup (the tests check that the worker ran inside the cap)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return path
    return ""


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        config = json.load(f)
    if "step" in config:
        sweep_step(config)
    else:
        run(config)
