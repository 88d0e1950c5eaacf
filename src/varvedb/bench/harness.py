"""`varvedb bench`: every engine on the same data in one run; medians of N runs.

Data and exact ground truth are made once and cached under the output
folder; each (run, engine) pair is a separate worker process (worker.py).
Figures are reported as the median with min–max over the runs, and every
ratio in the table is against a peer measured in this same invocation.
Output: `bench-results/bench-<rows>x<dim>.md` and `.json` (and a recall/QPS
plot when ANN figures exist and matplotlib is installed).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
from tqdm import tqdm

from . import data
from .engines import ENGINES

# (key, label, higher_is_better, format)
FIGURES = [
    ("write_rows_per_s", "bulk write rows/s", True, "{:,.0f}"),
    ("checkpoint_s", "checkpoint / tag index s", False, "{:.3f}"),
    ("index_build_s", "ANN index build s", False, "{:.2f}"),
    ("exact_ms", "exact top-10 ms", False, "{:.2f}"),
    ("exact_f1_ms", "exact top-10, filter 1% ms", False, "{:.2f}"),
    ("exact_f25_ms", "exact top-10, filter 25% ms", False, "{:.2f}"),
    ("exact_recall", "exact recall@10", True, "{:.3f}"),
    ("open_ms", "open ms", False, "{:.2f}"),
    ("open_first_query_ms", "open + first query ms", False, "{:.2f}"),
    ("disk_mb", "disk MB", False, "{:.1f}"),
    ("durable_commits_per_s", "durable 1-row commits/s (sqlite: WAL)", True, "{:,.0f}"),
    ("durable_commits_rollback_journal_per_s", "durable 1-row commits/s, sqlite rollback journal",
     True, "{:,.0f}"),
    ("durable_commits_4_threads_per_s", "durable 1-row commits/s, 4 threads", True, "{:,.0f}"),
    ("peak_mb", "peak memory MB", False, "{:,.0f}"),
]


def run(rows: int, dim: int, queries: int, distribution: str, metric: str, m: int,
        ef_construction: int, ef: list[int], runs: int, peers: list[str], out_dir: str,
        exact_queries: int = 20, commits: int = 500, workdir: str | None = None,
        echo=print) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    cache = os.path.join(out_dir, "cache")
    os.makedirs(cache, exist_ok=True)
    stem = f"{distribution}-{rows}x{dim}-q{queries}"
    vpath, qpath = (os.path.join(cache, f"{stem}-{x}.npy") for x in ("vectors", "queries"))
    if not (os.path.exists(vpath) and os.path.exists(qpath)):
        echo(f"generating {rows:,} x {dim} {distribution} vectors + {queries} queries")
        ds = data.make(rows, dim, queries, distribution)
        np.save(vpath, ds.vectors)
        np.save(qpath, ds.queries)
    vectors = np.load(vpath, mmap_mode="r")
    qs = np.load(qpath)
    tags = data.tag_of(np.arange(rows))
    truth = {}
    for name, allow in (("all", None), ("f1", tags < 1), ("f25", tags < 25)):
        path = os.path.join(cache, f"{stem}-{metric}-gt-{name}.npy")
        if not os.path.exists(path):
            echo(f"exact ground truth ({name})")
            np.save(path, data.exact_topk(vectors, qs, 10, metric, allow))
        truth[name] = path

    engines = list(ENGINES) if peers == ["all"] else peers
    if "varvedb" not in engines:
        engines.insert(0, "varvedb")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; known: {sorted(ENGINES)}")
    work = workdir or tempfile.mkdtemp(prefix="varvedb-bench-", dir=out_dir)
    results: dict[str, list[dict]] = {e: [] for e in engines}
    skipped: dict[str, str] = {}
    with tqdm(total=runs * len(engines), desc="bench", unit="engine-run") as bar:
        for r in range(runs):
            for e in engines:
                bar.set_postfix_str(f"run {r + 1}/{runs}: {e}")
                if e in skipped:
                    bar.update()
                    continue
                cfg = {"engine": e, "vectors": vpath, "queries": qpath, "truth": truth,
                       "metric": metric, "k": 10, "m": m, "ef_construction": ef_construction,
                       "ef": ef, "filter_ef": max(ef), "exact_queries": exact_queries,
                       "commits": commits, "workdir": os.path.join(work, e)}
                res = _worker(cfg)
                if "skipped" in res:
                    skipped[e] = res["skipped"]
                    echo(f"note: {e} skipped: {res['skipped']}")
                else:
                    results[e].append(res)
                bar.update()
    summary = {
        "config": {"rows": rows, "dim": dim, "queries": queries, "distribution": distribution,
                   "metric": metric, "m": m, "ef_construction": ef_construction, "ef": ef,
                   "runs": runs, "exact_queries": exact_queries, "commits": commits},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "when": time.strftime("%Y-%m-%d %H:%M")},
        "engines": {e: _aggregate(rs) for e, rs in results.items() if rs},
        "skipped": skipped,
    }
    base = os.path.join(out_dir, f"bench-{distribution}-{rows}x{dim}")
    with open(base + ".json", "w") as f:
        json.dump(summary, f, indent=2)
    table = markdown(summary)
    with open(base + ".md", "w") as f:
        f.write(table)
    echo(table)
    echo(f"wrote {base}.md and {base}.json")
    return summary


def _worker(cfg: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    try:
        out = subprocess.run([sys.executable, "-m", "varvedb.bench.worker", f.name],
                             capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(f"bench worker for {cfg['engine']} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _aggregate(runs: list[dict]) -> dict:
    keys = sorted({k for r in runs for k in r})
    out = {}
    for k in keys:
        vals = np.array([r[k] for r in runs if k in r], dtype=float)
        out[k] = {"median": float(np.median(vals)), "min": float(vals.min()),
                  "max": float(vals.max()), "n": int(len(vals))}
    return out


def markdown(summary: dict) -> str:
    cfg = summary["config"]
    engines = summary["engines"]
    names = list(engines)
    lines = [f"### {cfg['rows']:,} x {cfg['dim']} {cfg['distribution']}, {cfg['metric']}, "
             f"median of {cfg['runs']} runs (min–max), {summary['machine']['cpus']} cores",
             "", "| figure | " + " | ".join(names) + " | varvedb vs " +
             " / ".join(n for n in names if n != "varvedb") + " |",
             "|---" * (len(names) + 2) + "|"]
    keys = list(FIGURES) + [(k, k.replace("_", " "), k.endswith("recall"), "{:.3f}")
                            for k in _extra_keys(engines)]
    for key, label, higher, fmt in keys:
        if not any(key in engines[n] for n in names):
            continue
        cells = []
        for n in names:
            s = engines[n].get(key)
            cells.append("–" if s is None else
                         f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"
                         if s["n"] > 1 else fmt.format(s["median"]))
        ratios = []
        v = engines.get("varvedb", {}).get(key)
        for n in names:
            if n == "varvedb" or v is None or key not in engines[n]:
                continue
            p = engines[n][key]["median"]
            if "recall" in key or p == 0 or v["median"] == 0:
                continue
            r = v["median"] / p if higher else p / v["median"]
            ratios.append(f"{r:.2f}x")
        lines.append(f"| {label} | " + " | ".join(cells) + " | " + " / ".join(ratios) + " |")
    lines.append("")
    lines.append("Ratios read \"varvedb is N x better\" (faster, smaller, or more per second). "
                 "Peak memory includes the benchmark's own copy of the data.")
    for e, why in summary.get("skipped", {}).items():
        lines.append(f"- {e} skipped: {why}")
    return "\n".join(lines) + "\n"


def _extra_keys(engines: dict) -> list[str]:
    known = {k for k, *_ in FIGURES}
    extra = sorted({k for e in engines.values() for k in e if k not in known})
    return extra
