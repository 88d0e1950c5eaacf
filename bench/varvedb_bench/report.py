"""The benchmark's outputs: the markdown table and the recall/QPS plot.

Both read the summary the harness writes as JSON: `config`, `machine`, and
per engine its `figures` (median, min, max and n over the runs), `notes`
(how it was driven, the plans it chose), `measured` (when) and `problems`
(timeouts, failures). Ratios read "varvedb is N x better" against each peer.
"""
from __future__ import annotations

# (key, label, higher_is_better, format); ANN rows are added per ef of the run.
FIGURES = [
    ("write_rows_per_s", "bulk load rows/s (with tag index)", True, "{:,.0f}"),
    ("index_build_s", "ANN index build s", False, "{:.2f}"),
    ("checkpoint_s", "checkpoint / save s", False, "{:.3f}"),
    ("exact_ms", "exact top-10 ms", False, "{:.2f}"),
    ("exact_f1_ms", "exact top-10, filter 1% ms", False, "{:.2f}"),
    ("exact_f25_ms", "exact top-10, filter 25% ms", False, "{:.2f}"),
    ("exact_recall", "exact recall@10", True, "{:.3f}"),
    ("exact_f1_recall", "exact recall@10, filter 1%", True, "{:.3f}"),
    ("exact_f25_recall", "exact recall@10, filter 25%", True, "{:.3f}"),
]
TAIL = [
    ("open_ms", "open ms", False, "{:.2f}"),
    ("open_first_query_ms", "open + first query ms", False, "{:.2f}"),
    ("disk_mb", "disk MB", False, "{:.1f}"),
    ("graph_bytes_per_vector", "ANN graph bytes per vector (vectors excluded)", False, "{:,.0f}"),
    ("durable_commits_per_s", "durable 1-row commits/s (sqlite: WAL)", True, "{:,.0f}"),
    ("durable_commits_rollback_journal_per_s", "durable 1-row commits/s, sqlite rollback journal",
     True, "{:,.0f}"),
    ("durable_commits_4_threads_per_s", "durable 1-row commits/s, 4 threads", True, "{:,.0f}"),
    ("peak_mb", "peak memory MB", False, "{:,.0f}"),
    ("wall_s", "engine-run wall time s", False, "{:,.1f}"),
]
NO_RATIO = ("recall", "hits", "wall_s", "checkpoint_s")   # the last means different things
NO_MATPLOTLIB = "no plot: matplotlib is not installed (pip install -e './bench[plot]')"


def write_outputs(summary: dict, base: str, markdown, plot, echo) -> None:
    """BASE.json, BASE.md (also echoed) and, where matplotlib is there, BASE.png."""
    import json
    with open(base + ".json", "w") as f:
        json.dump(summary, f, indent=2)
    table = markdown(summary)
    with open(base + ".md", "w") as f:
        f.write(table)
    echo(table)
    why_not = plot(summary, base + ".png")
    if why_not:
        echo(f"note: {why_not}")
        echo(f"wrote {base}.md and {base}.json")
    else:
        echo(f"wrote {base}.md, {base}.json and {base}.png")


def pyplot():
    """matplotlib's pyplot on the Agg backend, or None when it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def figure_rows(cfg: dict) -> list[tuple]:
    fe = max(cfg["ef"])
    ann = []
    for ef in cfg["ef"]:
        ann += [(f"ann_ef{ef}_ms", f"ANN top-10 ms, ef={ef}", False, "{:.3f}"),
                (f"ann_ef{ef}_recall", f"ANN recall@10, ef={ef}", True, "{:.3f}")]
    for pct in (1, 25):
        ann += [(f"ann_f{pct}_ms", f"ANN top-10, filter {pct}% (ef={fe}) ms", False, "{:.3f}"),
                (f"ann_f{pct}_recall", f"ANN recall@10, filter {pct}%", True, "{:.3f}"),
                (f"ann_f{pct}_hits", f"ANN hits returned, filter {pct}%", True, "{:.1f}")]
    return FIGURES + ann + TAIL


def markdown(summary: dict) -> str:
    cfg = summary["config"]
    engines = summary["engines"]
    names = list(engines)
    peers = [n for n in names if n != "varvedb"]
    lines = [f"### {cfg['rows']:,} x {cfg['dim']} {cfg.get('dtype', 'f32')} "
             f"{cfg['distribution']}, {cfg['metric']}, "
             f"{cfg['queries']:,} queries, HNSW m={cfg['m']} ef_construction="
             f"{cfg['ef_construction']}, median of runs (min–max), "
             f"{summary['machine']['cpus']} cores", "",
             "| figure | " + " | ".join(names) + " | varvedb vs " + " / ".join(peers) + " |",
             "|---" * (len(names) + 2) + "|"]
    for key, label, higher, fmt in figure_rows(cfg):
        if not any(key in engines[n]["figures"] for n in names):
            continue
        cells = [_cell(engines[n]["figures"].get(key), fmt) for n in names]
        ratios = []
        v = engines.get("varvedb", {}).get("figures", {}).get(key)
        if v is not None and not any(w in key for w in NO_RATIO):
            for n in peers:
                p = engines[n]["figures"].get(key)
                if p is None or p["median"] == 0 or v["median"] == 0:
                    ratios.append("–")
                    continue
                r = v["median"] / p["median"] if higher else p["median"] / v["median"]
                ratios.append(f"{r:.2f}x")
        lines.append(f"| {label} | " + " | ".join(cells) + " | " + " / ".join(ratios) + " |")
    lines += ["", "Ratios read \"varvedb is N x better\" (faster, smaller, or more per second). "
              "– : not measured, or not meaningful for that engine (see notes). Exact figures "
              f"are over the first {cfg['exact_queries']} queries, taken before the ANN index "
              "exists; ANN figures over all queries, one at a time. Peak memory includes the "
              "worker's own working set (one block of data) and, for a server, its processes."]
    stamps = {e["measured"] for e in engines.values()}
    if len(stamps) > 1:
        lines.append("Engines measured in separate invocations (same config): " + ", ".join(
            f"{n} {engines[n]['measured']}" for n in names) + ".")
    for n in names:
        for problem in engines[n].get("problems", []):
            lines.append(f"- **{n}**: {problem}")
    for e, why in summary.get("skipped", {}).items():
        lines.append(f"- {e} skipped: {why}")
    lines += ["", "<details><summary>How each engine was driven</summary>", ""]
    for n in names:
        for what, note in engines[n].get("notes", {}).items():
            lines.append(f"- {n}, {what}: `{note}`")
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _cell(s: dict | None, fmt: str) -> str:
    if s is None:
        return "–"
    if s["n"] > 1 and s["min"] != s["max"]:
        return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"
    return fmt.format(s["median"])


def save_curves(plt, fig, ax, path: str, title: str) -> None:
    """The recall@10 / QPS (log) axes every bench plot shares: titled, saved, closed."""
    ax.set_yscale("log")
    ax.set_xlabel("recall@10")
    ax.set_ylabel("queries per second, one at a time (log scale)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot(summary: dict, path: str) -> str | None:
    """Recall@10 against queries per second (log), one line per engine across
    the ef sweep; an exact-only engine is one point at its exact speed.
    Returns a note when it cannot plot (matplotlib missing, nothing to plot)."""
    plt = pyplot()
    if plt is None:
        return NO_MATPLOTLIB
    cfg = summary["config"]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    drawn = 0
    for name, e in summary["engines"].items():
        f = e["figures"]
        pts = [(f[f"ann_ef{ef}_recall"]["median"], 1000 / f[f"ann_ef{ef}_ms"]["median"], ef)
               for ef in cfg["ef"] if f"ann_ef{ef}_ms" in f and f"ann_ef{ef}_recall" in f]
        if pts:
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
            for r, qps, ef in pts:
                ax.annotate(f"{ef}", (r, qps), textcoords="offset points", xytext=(4, 4),
                            fontsize=7, color=line.get_color())
            drawn += 1
        elif "exact_ms" in f and "exact_recall" in f:
            ax.plot([f["exact_recall"]["median"]], [1000 / f["exact_ms"]["median"]],
                    marker="x", linestyle="none", markersize=9, label=f"{name} (exact only)")
            drawn += 1
    if not drawn:
        plt.close(fig)
        return "no plot: no engine has query figures"
    return save_curves(
        plt, fig, ax, path,
        f"{cfg['rows']:,} x {cfg['dim']} {cfg.get('dtype', 'f32')} "
        f"{cfg['distribution']}, {cfg['metric']}, "
        f"m={cfg['m']} ef_construction={cfg['ef_construction']} (labels: ef)")


# -- the sweep mode (varvedb_bench/sweep.py) ---------------------------------------------------

def peak_of(res: dict) -> float | None:
    """A sweep worker's peak MB: its memory group's max usage (page cache included)
    where it had one, else its VmHWM plus its servers' sampled PSS."""
    if res.get("cgroup_peak_mb") is not None:
        return res["cgroup_peak_mb"]
    if res.get("worker_peak_mb") is None:
        return None
    return res["worker_peak_mb"] + res.get("server_peak_mb", 0)


def _mb(b):
    return None if b is None else b / 2**20


def sweep_markdown(summary: dict) -> str:
    """Per engine: the build; per sweep point QPS, p50/p99, recall@10, bytes read per
    query (median (min–max) over the rounds); QPS at recall 0.90/0.95/0.99."""
    cfg = summary["config"]
    cap = cfg["memory_cap"]
    where = (f"memory cap {cap / 2**20:,.0f} MB (cgroup v1, page cache included)" if cap
             else "no memory cap")
    lines = [f"### {cfg['rows']:,} x {cfg['dim']} {cfg['distribution']}, {cfg['metric']}, "
             f"{cfg['queries']:,} queries, {where}, "
             f"{'cold (page cache dropped before the timed queries)' if cfg['cold'] else 'warm'}"
             f", median of {cfg['rounds']} rounds (min–max), {summary['machine']['cpus']} cores",
             "", f"HNSW m={cfg['m']} ef_construction={cfg['ef_construction']}; IVF lists="
             f"{cfg['lists']} pq_m={cfg['pq_m']} rerank={cfg['rerank']}"
             + (f"; pgvector shared_buffers={cfg['pg_shared_buffers'] / 2**20:,.0f} MB"
                if cfg.get("pg_shared_buffers") else ""), "",
             "| engine | build s | build peak MB | index MB | disk MB | QPS @0.90 | QPS @0.95 "
             "| QPS @0.99 |", "|---" * 8 + "|"]
    engines = summary["engines"]
    for n, e in engines.items():
        b = e["build"] or {}
        peak = peak_of(b)
        at = [_spread_cell(e["qps_at_recall"][t], "{:,.0f}") for t in ("0.90", "0.95", "0.99")]
        lines.append(f"| {n} | {_num(b.get('index_build_s'), '{:.1f}')} | "
                     f"{_num(peak, '{:,.0f}')} | {_num(_mb(b.get('index_bytes')), '{:,.1f}')} | "
                     f"{_num(_mb(b.get('disk_bytes')), '{:,.1f}')} | " + " | ".join(at) + " |")
    lines += ["", "| engine | point | QPS | p50 ms | p99 ms | recall@10 | KB read / query "
              "| query peak MB |", "|---" * 8 + "|"]
    for n, e in engines.items():
        for p, f in e["points"].items():
            peak = f["peak_mb"]
            kb = {k: (v / 1024 if isinstance(v, float) else v)
                  for k, v in f["read_bytes_per_query"].items()}
            lines.append(f"| {n} | {e['sweep']}={p} | {_spread_cell(f['qps'], '{:,.0f}')} | "
                         f"{_spread_cell(f['p50_ms'], '{:.3f}')} | "
                         f"{_spread_cell(f['p99_ms'], '{:.3f}')} | "
                         f"{_spread_cell(f['recall'], '{:.3f}')} | {_spread_cell(kb, '{:,.1f}')}"
                         f" | {_spread_cell(peak, '{:,.0f}')} |")
    lines += ["", "QPS @r: interpolated on each round's recall/QPS curve (linear in recall "
              "between the sweep points around r; '≥' when the first point already reaches it, "
              "'–' not reached). Build peak: the build's memory group's max usage (page cache "
              "included) where there is a cgroup, else the worker's VmHWM plus its servers' "
              "PSS. KB read / query: /proc/PID/io read_bytes of the worker and its server "
              "processes over the timed queries. Query peak: the capped group's max usage "
              "(page cache included) or, without a cap, the worker's VmHWM plus its "
              "servers' PSS."]
    for n, e in engines.items():
        for problem in e["problems"]:
            lines.append(f"- **{n}**: {problem}")
    for n, why in summary.get("skipped", {}).items():
        lines.append(f"- {n} skipped: {why}")
    lines += ["", "<details><summary>How each engine was driven</summary>", ""]
    for n, e in engines.items():
        for what, note in e["notes"].items():
            lines.append(f"- {n}, {what}: `{note}`")
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _num(v, fmt):
    return "–" if v is None else fmt.format(v)


def _spread_cell(s: dict, fmt: str) -> str:
    if not s.get("n"):
        return "–"
    cell = _cell(s, fmt)
    return ("≥ " + cell) if s.get("how") == ["reached at the first point"] else cell


def sweep_plot(summary: dict, path: str) -> str | None:
    """Recall@10 against QPS (log), one line per engine over its sweep (medians)."""
    plt = pyplot()
    if plt is None:
        return NO_MATPLOTLIB
    cfg = summary["config"]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    drawn = 0
    for name, e in summary["engines"].items():
        pts = [(f["recall"]["median"], f["qps"]["median"], p) for p, f in e["points"].items()
               if f["qps"]["n"]]
        if not pts:
            continue
        line, = ax.plot([x[0] for x in pts], [x[1] for x in pts], marker="o", label=name)
        for r, q, p in pts:
            ax.annotate(p, (r, q), textcoords="offset points", xytext=(4, 4), fontsize=7,
                        color=line.get_color())
        drawn += 1
    if not drawn:
        plt.close(fig)
        return "no plot: no engine has query figures"
    cap = cfg["memory_cap"]
    return save_curves(
        plt, fig, ax, path,
        f"{cfg['rows']:,} x {cfg['dim']} {cfg['distribution']}, "
        f"{f'cap {cap / 2**20:,.0f} MB' if cap else 'no cap'}"
        f"{', cold' if cfg['cold'] else ''} (labels: ef or probes)")
