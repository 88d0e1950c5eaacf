"""`varvedb bench ann --engines ... [--memory-cap 1G] [--cold]`: recall/QPS sweeps of
ANN indexes in fresh processes, optionally under a memory cap and from a cold cache.

The data and the exact ground truth are made first, outside any cap
(harness.prepare_data, cached under OUT/cache). Then, per engine:

1. build: one worker process loads the rows, builds the index and persists it
   (load, build and persist times, index and disk bytes). The build runs
   outside the cap, in a memory cgroup of its own without a limit where the
   controller is there (its peak, page cache included, is the group's
   memory.max_usage_in_bytes; elsewhere the worker's VmHWM plus its servers'
   sampled PSS): a larger-than-memory index is served under the cap, not
   necessarily built under it.
2. query: for every round and every sweep point (ef for HNSW, the lists
   probed for IVF), a fresh worker opens the built files and times the
   queries one at a time: QPS, p50/p99, recall@10, and the bytes read from
   disk per query (/proc/PID/io read_bytes of the worker and of its server
   processes, before and after the timed pass). Under --memory-cap the
   worker joins a fresh memory cgroup before it runs any Python, so its
   servers (PostgreSQL's postmaster and backends) are inside the cap too;
   the group is removed afterwards, also on failure. A process the kernel
   kills for memory is reported as "OOM at cap". A group is charged only for
   the pages it brings into the page cache, so before each capped worker the
   engine's files are evicted from it (cgroup.evict): what the worker reads
   of them counts against its cap.

What a round starts from: every point is a fresh process, so nothing of an
engine's own caches carries over. With --cold, after the open and one untimed
query the page cache is dropped (sync + /proc/sys/vm/drop_caches: what no
process maps is gone; what the engine holds itself, PostgreSQL's
shared_buffers or the pages it maps, stays, within the cap), and the timed
queries start from disk. Without --cold one untimed pass over the queries
comes first: the timed pass finds whatever the cap lets stay cached.

Rounds alternate the engines (A, B, C, then C, B, A, ...), so none always
runs after the same neighbour; figures are the median and min–max over the
rounds. QPS at recall 0.90 / 0.95 / 0.99 is interpolated on each round's
curve (ab.qps_at_recall). Output: OUT/sweep-<data>-<rows>x<dim>-<cap|nocap>[-cold].{json,md,png}.
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

from varvedb.errors import OptionError
from . import cgroup, report
from .ab import TARGETS, ivf_settings, qps_at_recall, spread
from .engines import SWEEP_ENGINES, engine_class
from .harness import _kill, _terminated, prepare_data

PROBES = [1, 2, 4, 8, 16, 32, 64]
FIGURES = ("qps", "p50_ms", "p99_ms", "recall", "read_bytes_per_query")
# a kept build (--keep-builds) is reused only when these are the same
BUILD_IDENTITY = ("rows", "dim", "queries", "distribution", "metric", "dataset", "m",
                  "ef_construction", "lists", "pq_m", "rerank")


def parse_engines(spec: str) -> list[str]:
    names = [e.strip() for e in spec.split(",") if e.strip()]
    unknown = [e for e in names if e not in SWEEP_ENGINES]
    if unknown or not names:
        raise OptionError(f"unknown engine(s) {unknown or spec!r} for --engines; known: "
                          f"{', '.join(SWEEP_ENGINES)}")
    return list(dict.fromkeys(names))


def run(engines: list[str], rows: int, dim: int, queries: int, distribution: str, metric: str,
        out_dir: str, memory_cap: int | None = None, cold: bool = False, rounds: int = 3,
        m: int = 16, ef_construction: int = 200, ef: list[int] | None = None,
        probes: list[int] | None = None, lists: int | None = None, pq_m: int | None = None,
        rerank: int | None = 100, pg_shared_buffers: int | None = None,
        timeout: float = 3600, query_budget: float = 300, echo=print, dataset=None,
        builds: str | None = None) -> dict:
    """Build every engine once, then `rounds` alternating rounds of query workers;
    writes the outputs and returns the summary. `builds`: a folder that keeps the
    built indexes, reused by a later run with the same data and index settings
    (e.g. the same indexes with and without a cap); else a temporary folder."""
    if dataset is not None:
        rows, dim = dataset.train.shape
        queries, distribution, metric = len(dataset.test), dataset.name, dataset.metric
    ivf = ivf_settings(rows, dim, lists, pq_m, rerank)
    lists, pq_m = ivf["lists"], ivf["pq_m"]
    if memory_cap is not None:
        cgroup.MemoryGroup(memory_cap, "check").create().remove()   # refuse before any work
    if cold:
        cgroup.drop_page_cache()
    ef, probes = ef or [10, 40, 100, 200], probes or PROBES
    os.makedirs(out_dir, exist_ok=True)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    vpath, qpath, truth = prepare_data(out_dir, rows, dim, queries, distribution, metric, echo,
                                       dataset=dataset)
    ivf = {"lists": lists, "pq_m": pq_m, "rerank": rerank}
    config = {"rows": rows, "dim": dim, "queries": queries, "distribution": distribution,
              "metric": metric, "memory_cap": memory_cap, "cold": cold, "rounds": rounds,
              "m": m, "ef_construction": ef_construction, "ef": ef, "probes": probes, **ivf,
              "pg_shared_buffers": pg_shared_buffers or (memory_cap // 4 if memory_cap else None),
              "dataset": None if dataset is None else dataset.key}
    base_cfg = {"vectors": vpath, "queries": qpath, "truth": truth["all"], "metric": metric,
                "dim": dim, "k": 10, "m": m, "ef_construction": ef_construction, "cold": cold,
                "query_budget_s": query_budget}
    work = builds or tempfile.mkdtemp(prefix="sweep-", dir=out_dir)
    os.makedirs(work, exist_ok=True)
    identity = {k: config[k] for k in BUILD_IDENTITY}
    state = {e: {"build": None, "rounds": [], "problems": [], "notes": {}, "failed": set()}
             for e in engines}
    skipped: dict[str, str] = {}
    try:
        for e in engines:
            cls = engine_class(e)
            if memory_cap is not None and cls.in_ram_only:
                skipped[e] = "in RAM only: its index must fit in memory, not run under the cap"
                continue
            saved = os.path.join(work, f"{e.replace(':', '-')}-build.json")
            kept = _kept_build(saved, identity) if builds else None
            if kept is not None:
                echo(f"build: {e}: reusing the build in {work} ({kept['built']})")
                res, problem = kept, None
            else:
                echo(f"build: {e}")
                cfg = base_cfg | {"engine": e, "step": "build", "options": ivf,
                                  "workdir": os.path.join(work, e)}
                res, problem = _step(cfg, e, None if memory_cap is None else 0, timeout, work)
                if builds and not problem and "skipped" not in res:
                    with open(saved, "w") as f:
                        json.dump(res | {"identity": identity,
                                         "built": time.strftime("%Y-%m-%d %H:%M")}, f)
            if "skipped" in res:
                skipped[e] = res["skipped"]
                echo(f"note: {e} skipped: {res['skipped']}")
                continue
            state[e]["notes"].update(res.pop("notes", {}))
            state[e]["build"] = res
            if problem:
                state[e]["problems"].append(f"build: {problem}")
                echo(f"note: {e}: build: {problem}")
        live = [e for e in engines if state[e]["build"] and not state[e]["problems"]]
        for r in range(rounds):
            for e in (live if r % 2 == 0 else live[::-1]):
                # a point that failed (or hit the cap) would do so again
                points = [p for p in (probes if engine_class(e).sweep == "probes" else ef)
                          if p not in state[e]["failed"]]
                if not points:
                    continue
                echo(f"round {r + 1}/{rounds}: {e} at {engine_class(e).sweep} "
                     f"{','.join(map(str, points))}")
                got = {}
                for p in points:
                    cfg = base_cfg | {"engine": e, "step": "query", "point": p,
                                      "options": _query_options(e, ivf, memory_cap,
                                                                config["pg_shared_buffers"]),
                                      "workdir": os.path.join(work, e)}
                    res, problem = _step(cfg, e, memory_cap, timeout, work)
                    state[e]["notes"].update(res.pop("notes", {}))
                    if "skipped" in res and not problem:
                        # it built, so a failed import here is the cap's doing
                        problem = f"could not start: {res['skipped']}"
                    if problem:
                        state[e]["problems"].append(f"round {r + 1}, "
                                                    f"{engine_class(e).sweep}={p}: {problem}")
                        echo(f"note: {e}: {problem}")
                        state[e]["failed"].add(p)
                        continue
                    got[p] = res
                state[e]["rounds"].append(got)
    finally:
        if not builds:
            shutil.rmtree(work, ignore_errors=True)
    summary = _summarize(config, engines, state, skipped, ef, probes)
    base = os.path.join(out_dir, f"sweep-{distribution}-{rows}x{dim}-"
                        + (f"cap{memory_cap // 2**20}M" if memory_cap else "nocap")
                        + ("-cold" if cold else ""))
    report.write_outputs(summary, base, report.sweep_markdown, report.sweep_plot, echo)
    return summary


def _kept_build(path: str, identity: dict) -> dict | None:
    """The figures of a kept build of the same data and settings, or None."""
    try:
        with open(path) as f:
            res = json.load(f)
    except (OSError, ValueError):
        return None
    return res if res.pop("identity", None) == identity else None


def _query_options(engine: str, ivf: dict, memory_cap: int | None,
                   shared_buffers: int | None) -> dict:
    if engine == "pgvector" and shared_buffers:
        return {"shared_buffers": f"{max(1, shared_buffers // 2**20)}MB"}
    return ivf


def _step(cfg: dict, engine: str, cap: int | None, timeout: float,
          work: str) -> tuple[dict, str | None]:
    """One worker, inside a fresh memory group when cap is not None (0: no limit,
    only the peak measured); returns (its figures, a problem or None)."""
    group = None
    if cap is not None:
        if cap:
            cgroup.evict(cfg["workdir"])
        group = cgroup.MemoryGroup(cap or 2**62, engine).create()
    cfg = cfg | {"result": os.path.join(work, f"{engine.replace(':', '-')}-result.json")}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, dir=work) as f:
        json.dump(cfg, f)
    problem = None
    try:
        proc = subprocess.Popen([sys.executable, "-m", "varvedb_bench.worker", f.name],
                                start_new_session=True,
                                preexec_fn=group.join_fn() if group else None)
        try:
            rc = proc.wait(timeout=timeout or None)
            if rc != 0:
                problem = f"worker exited with status {rc} (its traceback is above)"
        except subprocess.TimeoutExpired:
            _kill(proc, cfg["workdir"])     # the engine is not run again: its files can go
            problem = f"stopped after the {timeout:,.0f} s budget"
        except BaseException:
            _kill(proc, cfg["workdir"])
            raise
        if group is not None:
            oom = group.oom_kills()
            if oom and cap:
                problem = (f"OOM at cap: the kernel killed {oom} process(es) of the group "
                           f"at {cap / 2**20:,.0f} MB" + (f" ({problem})" if problem else ""))
        try:
            with open(cfg["result"]) as r:
                res = json.load(r)
            os.unlink(cfg["result"])
        except (OSError, ValueError):
            res = {}
        if group is not None:
            res["cgroup_peak_mb"] = group.max_usage() / 2**20
            if cap:
                res["cap_group"] = group.path
    finally:
        os.unlink(f.name)
        if group is not None:
            _stop_servers(group)
            group.remove()
    phase = res.pop("phase", None)
    if problem and phase:
        problem += f", in phase '{phase}'"
    return res, problem


def _stop_servers(group: cgroup.MemoryGroup) -> None:
    """A server the worker left running (it was killed) is still in the group: stop it."""
    for pid in group.pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(50):
        if not group.pids():
            return
        time.sleep(0.1)


def _summarize(config, engines, state, skipped, ef, probes) -> dict:
    out = {}
    for e in engines:
        st = state[e]
        if st["build"] is None and not st["problems"]:
            continue
        sweep = engine_class(e).sweep
        points = probes if sweep == "probes" else ef
        per_point = {}
        for p in points:
            runs = [rd[p] for rd in st["rounds"] if "recall" in rd.get(p, {})]
            if runs:
                per_point[str(p)] = {k: spread([r.get(k) for r in runs]) for k in
                                     FIGURES + ("open_ms", "cgroup_peak_mb", "worker_peak_mb",
                                                "server_peak_mb")}
                per_point[str(p)]["peak_mb"] = spread([report.peak_of(r) for r in runs])
        at = {}
        for target in TARGETS:
            vals, how = [], set()
            for rd in st["rounds"]:
                pts = [p for p in points if "recall" in rd.get(p, {})]
                if pts:
                    v, h = qps_at_recall([rd[p]["recall"] for p in pts],
                                         [rd[p]["qps"] for p in pts], target)
                    vals.append(v)
                    how.add(h)
            at[f"{target:.2f}"] = spread(vals) | {"how": sorted(how)}
        out[e] = {"sweep": sweep, "build": st["build"], "points": per_point,
                  "qps_at_recall": at, "problems": st["problems"], "notes": st["notes"],
                  "rounds": [{str(p): r for p, r in rd.items()} for rd in st["rounds"]]}
    return {"config": config, "engines": out, "skipped": skipped,
            "machine": {"when": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                        "python": platform.python_version(), "platform": platform.platform()}}
