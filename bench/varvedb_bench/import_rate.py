"""`varvedb bench import`: rows/s of `varvedb import` (varvedb.transfer.import_file)
from a .parquet and a .npy file of clustered vectors, against LanceDB's
create_table from the same file where lancedb is installed (the peers extra).

Both sides read the file inside the timed span (LanceDB: pyarrow's read of the
parquet, np.load of the .npy, then create_table); each writes a new database in
a fresh folder, removed after. Rounds alternate the order of the engines
(A,B,A,B, then B,A,B,A), in one process; figures are medians with min..max.
Each run also records the CPU seconds of the process (every thread's, so
LanceDB's writer threads count) and the 1-minute load average after it: on
a shared machine the wall time follows the load, the CPU time far less.
"""
from __future__ import annotations

import os
import resource
import shutil
import statistics
import tempfile
import time

import numpy as np

import varvedb as vv
from varvedb.demo_data import clustered
from varvedb.transfer import import_file


def make_files(folder: str, rows: int, dim: int) -> dict:
    """The same vectors (ids 0..rows-1) as data.parquet (id, emb) and data.npy."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    vecs = clustered(rows, dim, seed=1).astype(np.float32)
    npy = os.path.join(folder, "data.npy")
    np.save(npy, vecs)
    parquet = os.path.join(folder, "data.parquet")
    table = pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)),
                      "emb": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)),
                                                               dim)})
    pq.write_table(table, parquet, row_group_size=100_000)
    return {"parquet": parquet, "npy": npy}


def _varvedb(path: str, kind: str, work: str) -> float:
    target = os.path.join(work, "t.varve")
    t0 = time.perf_counter()
    with vv.connect(target) as db:
        import_file(db, "vecs", path, vector="emb", progress=False)
    return time.perf_counter() - t0


def _lancedb(path: str, kind: str, work: str) -> float:
    import lancedb
    import pyarrow as pa
    import pyarrow.parquet as pq
    t0 = time.perf_counter()
    if kind == "parquet":
        table = pq.read_table(path)
    else:
        vecs = np.load(path)
        table = pa.table({"emb": pa.FixedSizeListArray.from_arrays(
            pa.array(vecs.reshape(-1)), vecs.shape[1])})
    lancedb.connect(os.path.join(work, "lance")).create_table("vecs", data=table)
    return time.perf_counter() - t0


def run(rows: int, dim: int, rounds: int, folder: str | None = None) -> dict:
    """{kind: {engine: [seconds per round]}} and rows, dim, engines."""
    # each side's modules loaded before the timed spans (vv.connect loads the
    # engine's on first use: a second and more, which the first round paid alone)
    import varvedb.database  # noqa: F401
    try:
        import lancedb  # noqa: F401
        engines = {"varvedb": _varvedb, "lancedb": _lancedb}
    except ImportError:
        engines = {"varvedb": _varvedb}
    own = folder is None
    folder = folder or tempfile.mkdtemp(prefix="varvedb-bench-import-")
    try:
        files = make_files(folder, rows, dim)
        times = {kind: {e: [] for e in engines} for kind in files}
        cpu = {kind: {e: [] for e in engines} for kind in files}
        load = []
        for r in range(rounds):
            order = list(engines) if r % 2 == 0 else list(engines)[::-1]
            for kind, path in files.items():
                for e in order:
                    work = tempfile.mkdtemp(dir=folder)
                    try:
                        c0 = _cpu()
                        times[kind][e].append(engines[e](path, kind, work))
                        cpu[kind][e].append(_cpu() - c0)
                        load.append(os.getloadavg()[0])
                    finally:
                        shutil.rmtree(work, ignore_errors=True)
        return {"rows": rows, "dim": dim, "rounds": rounds, "engines": list(engines),
                "seconds": times, "cpu_seconds": cpu, "load": load}
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def format_table(fig: dict) -> str:
    rows = fig["rows"]
    load = fig["load"]
    lines = [f"import of {rows:,} x {fig['dim']} float32, {fig['rounds']} alternating rounds "
             f"(rows/s: median, min..max; CPU s: median), load {min(load):.1f}.."
             f"{max(load):.1f}"]
    if "lancedb" not in fig["engines"]:
        lines.append("  (lancedb is not installed: varvedb alone; pip install lancedb)")
    for kind, by_engine in fig["seconds"].items():
        for e, secs in by_engine.items():
            rates = [rows / s for s in secs]
            lines.append(f"  {kind:<8} {e:<8} {statistics.median(rates):>12,.0f} rows/s  "
                         f"({min(rates):,.0f}..{max(rates):,.0f}; "
                         f"{statistics.median(secs):.2f} s; "
                         f"CPU {statistics.median(fig['cpu_seconds'][kind][e]):.2f} s)")
    return "\n".join(lines)
