"""`varvedb bench ann`: every engine on the same data; medians of N runs.

Data and exact ground truth are made once, block by block, and cached under
the output folder (`cache/`); each (run, engine) pair is a separate worker
process (worker.py) with a time budget: a worker past it is killed with
anything it started (a PostgreSQL server included), and what it measured
before is kept, with the phase it was in. Figures are the median with
min–max over the runs.

Output: `bench-results/bench-<distribution>-<rows>x<dim>.{md,json,png}`;
with a data set (`--dataset`, varvedb_bench/datasets.py) its name replaces the
distribution and its metric the `--metric`.
Results merge: a run with the same config as the existing JSON replaces the
engines it measured and keeps the others (each engine records when it was
measured), so peers can be measured one invocation at a time, e.g.
`varvedb bench ann --peers pgvector --no-varvedb`. `--fresh` starts over.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from tqdm import tqdm

from varvedb import demo_data
from varvedb.errors import OptionError
from . import data, report
from .engines import ENGINES

# A result merges with an earlier one only when these are equal.
IDENTITY = ("rows", "dim", "queries", "distribution", "metric", "m", "ef_construction", "ef",
            "exact_queries", "commits", "dtype", "dataset")
# for results written before the key existed
IDENTITY_DEFAULTS = {"dtype": "f32", "dataset": None}


def run(rows: int, dim: int, queries: int, distribution: str, metric: str, m: int,
        ef_construction: int, ef: list[int], runs: int, peers: list[str], out_dir: str,
        exact_queries: int = 20, commits: int = 500, workdir: str | None = None,
        timeout: float = 3600, query_budget: float = 300, with_varvedb: bool = True,
        fresh: bool = False, dtype: str = "f32", echo=print, dataset=None) -> dict:
    """Run the benchmark and write its outputs; returns the (merged) summary.
    `dataset` (a datasets.Dataset): its rows, queries, truth and metric instead
    of the generator's (rows, dim, queries, distribution and metric are then its)."""
    if dataset is not None:
        if dtype != "f32":
            raise OptionError("--dtype f16 rounds the generator's values; with --dataset "
                              "the vectors are the file's (f32)")
        rows, dim = dataset.train.shape
        queries, distribution, metric = len(dataset.test), dataset.name, dataset.metric
    engines = _engines(peers, with_varvedb)
    # A plain `kill` (SIGTERM) becomes an exception, so the worker and any
    # server it started are stopped on the way out, as on Ctrl-C.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    os.makedirs(out_dir, exist_ok=True)
    vpath, qpath, truth = prepare_data(out_dir, rows, dim, queries, distribution, metric, echo,
                                       dtype, dataset)
    config = {"rows": rows, "dim": dim, "queries": queries, "distribution": distribution,
              "dataset": None if dataset is None else dataset.key,
              "source": None if dataset is None else dataset.source,
              "metric": metric, "dtype": dtype, "m": m, "ef_construction": ef_construction, "ef": ef,
              "runs": runs, "exact_queries": exact_queries, "commits": commits}
    own_work = workdir is None
    work = workdir or tempfile.mkdtemp(prefix="work-", dir=out_dir)
    results: dict[str, list[dict]] = {e: [] for e in engines}
    notes: dict[str, dict] = {e: {} for e in engines}
    problems: dict[str, list[str]] = {e: [] for e in engines}
    skipped: dict[str, str] = {}
    try:
        for r in range(runs):
            for e in engines:
                if e in skipped or problems[e]:
                    continue    # a peer that failed or ran out of time would do so again
                echo(f"run {r + 1}/{runs}: {e}")
                cfg = {"engine": e, "vectors": vpath, "queries": qpath, "truth": truth,
                       "metric": metric, "dtype": dtype, "k": 10, "m": m, "ef_construction": ef_construction,
                       "ef": ef, "filter_ef": max(ef), "exact_queries": exact_queries,
                       "commits": commits, "query_budget_s": query_budget,
                       "workdir": os.path.join(work, e),
                       "result": os.path.join(work, f"{e}-result.json")}
                t = time.perf_counter()
                res, problem = _worker(cfg, timeout)
                wall = time.perf_counter() - t
                if "skipped" in res:
                    skipped[e] = res["skipped"]
                    echo(f"note: {e} skipped: {res['skipped']}")
                    continue
                notes[e].update(res.pop("notes", {}))
                if res:
                    results[e].append(res | {"wall_s": wall})
                if problem:
                    problems[e].append(f"run {r + 1}: {problem}")
                    echo(f"note: {e}: {problem}")
                echo(f"  {e}: {wall:,.1f} s")
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)

    measured = {"when": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                "python": platform.python_version(), "platform": platform.platform()}
    summary = {"config": config, "machine": measured, "engines": {}, "skipped": {}}
    for e in engines:
        if results[e] or problems[e]:
            summary["engines"][e] = {"figures": _aggregate(results[e]), "notes": notes[e],
                                     "problems": problems[e], "measured": measured["when"],
                                     "runs": results[e]}
    summary["skipped"] = skipped
    base = os.path.join(out_dir, f"bench-{distribution}-{rows}x{dim}"
                               + ("-f16" if dtype == "f16" else ""))
    summary = _merge(summary, base + ".json", fresh, echo)
    report.write_outputs(summary, base, report.markdown, report.plot, echo)
    return summary


def _engines(peers: list[str], with_varvedb: bool) -> list[str]:
    wanted = list(ENGINES) if peers == ["all"] else list(dict.fromkeys(peers))
    unknown = [e for e in wanted if e not in ENGINES]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; known: {', '.join(ENGINES)} or all")
    if with_varvedb and "varvedb" not in wanted:
        wanted.insert(0, "varvedb")
    if not with_varvedb and "varvedb" in wanted:
        wanted.remove("varvedb")
    return [e for e in ENGINES if e in wanted]


def prepare_data(out_dir: str, rows: int, dim: int, queries: int, distribution: str,
                 metric: str, echo=print, dtype: str = "f32",
                 dataset=None) -> tuple[str, str, dict[str, str]]:
    """Vectors, queries and exact top-10 ground truth, made once and cached on disk:
    returns (vectors path, queries path, {"all"|"f1"|"f25": ground-truth path}).
    A dataset's rows and queries are written as they are, its truth is "all"."""
    cache = os.path.join(out_dir, "cache")
    os.makedirs(cache, exist_ok=True)
    stem = f"{distribution}-{rows}x{dim}-q{queries}" + ("-f16" if dtype == "f16" else "")
    if dataset is not None:
        stem = f"ds-{stem}-{dataset.key}"
    vpath, qpath = (os.path.join(cache, f"{stem}-{x}.npy") for x in ("vectors", "queries"))
    if dataset is not None:
        for path, x in ((vpath, dataset.train), (qpath, dataset.test)):
            if not os.path.exists(path):
                np.save(path + ".part.npy", x)
                os.replace(path + ".part.npy", path)
        all_path = os.path.join(cache, f"{stem}-{metric}-gt-all.npy")
        if not os.path.exists(all_path):
            np.save(all_path, dataset.neighbors[:, :10])
    elif not (os.path.exists(vpath) and os.path.exists(qpath)):
        with tqdm(total=rows + queries, desc=f"generating {distribution} vectors",
                  unit="row", leave=False) as bar:
            data.write_npy(vpath, qpath, rows, dim, queries, distribution, progress=bar.update,
                           half=dtype == "f16")
    truth = {name: os.path.join(cache, f"{stem}-{metric}-gt-{name}.npy")
             for name in ("all", "f1", "f25")}
    if not all(os.path.exists(p) for p in truth.values()):
        vectors = np.load(vpath, mmap_mode="r")
        tags = demo_data.tag_of(np.arange(rows))
        masks = {"all": None, "f1": tags < 1, "f25": tags < 25}
        if dataset is not None:
            del masks["all"]      # the dataset's own
        with tqdm(total=rows, desc="exact ground truth", unit="row", leave=False) as bar:
            gt = data.exact_topk_many(vectors, np.load(qpath), 10, metric, masks,
                                      progress=bar.update)
        for name, path in truth.items():
            if name in gt:
                np.save(path, gt[name])
    return vpath, qpath, truth


def _worker(cfg: dict, timeout: float) -> tuple[dict, str | None]:
    """Run one engine-run; returns (figures so far, problem or None)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    problem = None
    try:
        # Its own session, so that a kill reaches everything it started.
        proc = subprocess.Popen([sys.executable, "-m", "varvedb_bench.worker", f.name],
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout or None)
            if rc != 0:
                problem = f"worker exited with status {rc} (its traceback is above)"
        except subprocess.TimeoutExpired:
            _kill(proc, cfg["workdir"])
            problem = f"stopped after the {timeout:,.0f} s budget"
        except BaseException:
            _kill(proc, cfg["workdir"])
            raise
    finally:
        os.unlink(f.name)
    try:
        with open(cfg["result"]) as f:
            res = json.load(f)
        os.unlink(cfg["result"])
    except (OSError, ValueError):
        res = {}
    phase = res.pop("phase", None)
    if problem and phase:
        problem += f", in phase '{phase}'"
    return res, problem


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def _kill(proc: subprocess.Popen, workdir: str) -> None:
    """Kill the worker's process group, then any PostgreSQL server it started
    (pg_ctl puts the postmaster in a session of its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for root, _dirs, files in os.walk(workdir):
        if "postmaster.pid" in files:
            try:
                with open(os.path.join(root, "postmaster.pid")) as f:
                    pid = int(f.readline())
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    mine = os.path.abspath(root).encode() in f.read()
                if mine:
                    os.kill(pid, signal.SIGQUIT)    # PostgreSQL's immediate shutdown
            except (OSError, ValueError):
                pass
    time.sleep(1)
    shutil.rmtree(workdir, ignore_errors=True)


def _aggregate(runs: list[dict]) -> dict:
    keys = sorted({k for r in runs for k, v in r.items() if isinstance(v, (int, float))})
    out = {}
    for k in keys:
        vals = np.array([r[k] for r in runs if k in r], dtype=float)
        out[k] = {"median": float(np.median(vals)), "min": float(vals.min()),
                  "max": float(vals.max()), "n": int(len(vals))}
    return out


def _merge(summary: dict, path: str, fresh: bool, echo) -> dict:
    """Keep the engines of an earlier result with the same config that this run
    did not measure; this run's engines replace theirs."""
    if fresh or not os.path.exists(path):
        return summary
    try:
        with open(path) as f:
            old = json.load(f)
        same = all(old["config"].get(k, IDENTITY_DEFAULTS.get(k)) == summary["config"][k]
                   for k in IDENTITY)
        old_engines = old["engines"]
        if same and any("figures" not in e for e in old_engines.values()):
            same = False    # written by an older harness
    except (OSError, ValueError, KeyError):
        same = False
    if not same:
        echo(f"note: {path} had a different config (or format); replacing it")
        return summary
    kept = [e for e in old_engines if e not in summary["engines"]
            and e not in summary["skipped"]]
    if kept:
        echo(f"note: keeping {', '.join(kept)} from {path}")
    merged = {e: summary["engines"].get(e) or old_engines.get(e) for e in ENGINES
              if e in summary["engines"] or e in kept}
    skipped = {e: why for e, why in old.get("skipped", {}).items()
               if e not in summary["engines"]} | summary["skipped"]
    return summary | {"engines": merged, "skipped": skipped}
