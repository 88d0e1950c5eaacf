"""`varvedb bench ray`: the parallel efficiency `T1 / (2·T2)` of Ray ingest through
VarveDatasink and of build_index's IVF-PQ build, with a local Ray of 1 and of 2
CPUs (integrations/ray.py; issue 33's figure).

The same rows each time (varvedb.demo_data's clustered vectors, `rows` × `dim`,
ids 0..rows-1). Every timing runs in a process of its own (`python -m
varvedb_bench.ray_scaling KIND CPUS WORKDIR`), which starts Ray with CPUS CPUs
and readies its workers before the clock: varvedb's sides with a small job of
the same kind (the workers' imports and kernels loaded), lance-ray's with a
task a worker that imports lance:

* ingest: a Ray dataset of the rows, materialized in the object store in
  `blocks` blocks before the clock; timed: `write_datasink(VarveDatasink(...))`
  into a new file (the tasks' side files and the one commit on the driver,
  whose seconds are also given);
* ivfpq: a copy of a file holding the rows (no index) made before the clock;
  timed: `build_index(copy, ..., IVFPQ(lists, pq_m))` with one task per CPU
  (training on the driver, encoding in the tasks, the commit and checkpoint);
  the encoding's seconds (RayParts, the part that divides) are also given.

Rounds alternate which CPU count goes first. Per round T1 / (2·T2); the
report gives the median and min-max over rounds of each time and of that
efficiency, and the load average.

With `lance=True` (`--lance`, lance-ray installed) lance-ray does the same on
the same rows, as sides of their own: `write_lance` of the same dataset (a
file a block), and `create_index(..., "IVF_PQ", num_workers=CPUS)` on a copy
of a Lance dataset of the rows written a fragment a block (its build is per
fragment). Lance's own native threads are not bounded by Ray's CPU count.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

KINDS = ("ingest", "ivfpq")
LANCE_KINDS = ("lance-ingest", "lance-ivfpq")    # lance-ray's write_lance, create_index
# the part of a timing given apart: (its key, what it is)
PARTS = {"ingest": ("commit_s", "the one commit"), "ivfpq": ("encode_s", "the tasks' encoding")}


def _stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def _arrow(vectors: np.ndarray, first: int = 0):
    import pyarrow as pa
    n, dim = vectors.shape
    vec = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim)
    return pa.table({"id": pa.array(np.arange(first, first + n, dtype=np.int64)),
                     "vec": vec})


def _dataset(vectors: np.ndarray, blocks: int):
    import ray
    parts = np.array_split(np.arange(len(vectors)), blocks)
    return ray.data.from_arrow([_arrow(vectors[p], int(p[0])) for p in parts]).materialize()


def _timed(cls, name: str) -> list:
    """Wrap cls.name (in this child process only) to note the seconds of each call."""
    took, method = [], getattr(cls, name)

    def timed(self, *args):
        t = time.perf_counter()
        out = method(self, *args)
        took.append(time.perf_counter() - t)
        return out
    setattr(cls, name, timed)
    return took


def _ingest(vectors, cpus: int, cfg: dict, scratch: str) -> dict:
    import varvedb as vv
    from varvedb.integrations import ray as vray
    warm_rows = vray.MIN_PART_ROWS * cpus      # a task for each CPU: every worker readied
    _dataset(np.asarray(vectors[:warm_rows]), cpus).write_datasink(
        vray.VarveDatasink(os.path.join(scratch, "warm.varve"), "docs"))
    ds = _dataset(np.asarray(vectors), cfg["blocks"])
    target = os.path.join(scratch, "ingest.varve")
    commit = _timed(vray.VarveDatasink, "_apply")    # the one commit's share
    t0 = time.perf_counter()
    ds.write_datasink(vray.VarveDatasink(target, "docs"))
    seconds = time.perf_counter() - t0
    with vv.connect(target, readonly=True) as db:
        if db.collection("docs").count() != len(vectors):
            raise RuntimeError("the ingest did not write every row")
    return {"seconds": seconds, "commit_s": commit[0]}


def _ivfpq(vectors, cpus: int, cfg: dict, scratch: str, workdir: str) -> dict:
    import varvedb as vv
    from varvedb.integrations import ray as vray
    warm_rows = vray.MIN_PART_ROWS * cpus
    spec = dict(lists=cfg["lists"], pq_m=cfg["pq_m"], nprobe=8, seed=7)
    warm = os.path.join(scratch, "warm.varve")
    with vv.connect(warm) as db:
        db.create_collection("docs", {"vec": vv.Vector(vectors.shape[1])}).insert_arrays(
            id=np.arange(warm_rows), vec=np.asarray(vectors[:warm_rows]))
    vray.build_index(warm, "docs", "vec", vv.IVFPQ(**{**spec, "lists": 8}))
    target = os.path.join(scratch, "ivfpq.varve")
    shutil.copy(os.path.join(workdir, "base.varve"), target)
    encode = _timed(vray.RayParts, "__call__")     # the tasks' share: what divides
    t0 = time.perf_counter()
    vray.build_index(target, "docs", "vec", vv.IVFPQ(**spec))
    return {"seconds": time.perf_counter() - t0, "encode_s": encode[0]}


def _lance_workers(cpus: int) -> None:
    """Each worker imports lance before the clock."""
    import ray

    @ray.remote
    def ready():
        import lance  # noqa: F401
    ray.get([ready.remote() for _ in range(cpus)])


def _lance_ingest(vectors, cpus: int, cfg: dict, scratch: str) -> dict:
    import lance
    import lance_ray
    _lance_workers(cpus)
    per_file = -(-len(vectors) // cfg["blocks"])      # a file a block, as the side files
    ds = _dataset(np.asarray(vectors), cfg["blocks"])
    target = os.path.join(scratch, "ingest.lance")
    t0 = time.perf_counter()
    lance_ray.write_lance(ds, target, min_rows_per_file=per_file)
    seconds = time.perf_counter() - t0
    if lance.dataset(target).count_rows() != len(vectors):
        raise RuntimeError("write_lance did not write every row")
    return {"seconds": seconds}


def _lance_ivfpq(vectors, cpus: int, cfg: dict, scratch: str, workdir: str) -> dict:
    import lance_ray
    _lance_workers(cpus)
    target = os.path.join(scratch, "ivfpq.lance")
    shutil.copytree(os.path.join(workdir, "base.lance"), target)
    t0 = time.perf_counter()
    lance_ray.create_index(target, "vec", "IVF_PQ", num_workers=cpus, num_segments=cpus,
                           num_partitions=cfg["lists"], num_sub_vectors=cfg["pq_m"])
    return {"seconds": time.perf_counter() - t0}


def child(kind: str, cpus: int, workdir: str) -> dict:
    """One timing, in this process (see the module docstring)."""
    import ray
    with open(os.path.join(workdir, "config.json")) as f:
        cfg = json.load(f)
    vectors = np.load(os.path.join(workdir, "rows.npy"), mmap_mode="r")
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
             configure_logging=False,
             runtime_env={"env_vars": {"VARVEDB_COMPILE_AHEAD": "0",
                                       "PYTHONPATH": os.pathsep.join(sys.path)}})
    scratch = tempfile.mkdtemp(dir=workdir)
    try:
        if kind in ("ingest", "lance-ingest"):
            return (_ingest if kind == "ingest" else _lance_ingest)(vectors, cpus, cfg, scratch)
        return (_ivfpq if kind == "ivfpq" else _lance_ivfpq)(vectors, cpus, cfg, scratch,
                                                              workdir)
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


def run(rows: int = 200_000, dim: int = 64, rounds: int = 3, lists: int = 256,
        pq_m: int = 16, blocks: int = 16, lance: bool = False, echo=print) -> dict:
    import importlib.util

    import varvedb as vv
    from varvedb import demo_data
    if lance and importlib.util.find_spec("lance_ray") is None:
        raise RuntimeError("--lance needs lance-ray (pip install lance-ray): not installed")
    kinds = KINDS + LANCE_KINDS if lance else KINDS
    workdir = tempfile.mkdtemp(prefix="varvedb-ray-", dir=os.getcwd())
    report = {"config": {"rows": rows, "dim": dim, "rounds": rounds, "lists": lists,
                         "pq_m": pq_m, "blocks": blocks, "cpus": os.cpu_count()},
              "load_before": os.getloadavg()}
    try:
        vectors = demo_data.make(rows, dim, 0).vectors
        np.save(os.path.join(workdir, "rows.npy"), vectors)
        with open(os.path.join(workdir, "config.json"), "w") as f:
            json.dump(report["config"], f)
        with vv.connect(os.path.join(workdir, "base.varve")) as db:
            db.create_collection("docs", {"vec": vv.Vector(dim)}).insert_arrays(
                id=np.arange(rows), vec=vectors)
        if lance:       # the same rows, a fragment a block (create_index works per fragment)
            import lance as lance_
            lance_.write_dataset(_arrow(vectors), os.path.join(workdir, "base.lance"),
                                 max_rows_per_file=-(-rows // blocks))
        # the children import this varvedb and this bench, wherever they lie
        here = [os.path.dirname(os.path.dirname(os.path.abspath(m.__file__)))
                for m in (vv, sys.modules[__name__.rpartition(".")[0]])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (*here, os.environ.get("PYTHONPATH")) if p)}
        times = {k: {1: [], 2: []} for k in kinds}
        for r in range(rounds):
            for kind in kinds:
                for cpus in ((1, 2) if r % 2 == 0 else (2, 1)):
                    p = subprocess.run([sys.executable, "-m", "varvedb_bench.ray_scaling",
                                        kind, str(cpus), workdir], env=env,
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        raise RuntimeError(f"{kind} with {cpus} CPU(s) failed:\n"
                                           f"{p.stderr[-3000:]}")
                    got = json.loads(p.stdout.strip().splitlines()[-1])
                    times[kind][cpus].append(got)
                    echo(f"bench ray: round {r + 1}, {kind}, {cpus} CPU(s): {got}")
        for kind in kinds:
            t1 = [x["seconds"] for x in times[kind][1]]
            t2 = [x["seconds"] for x in times[kind][2]]
            report[kind] = {"t1_s": _stats(t1), "t2_s": _stats(t2),
                            "efficiency": _stats([a / (2 * b) for a, b in zip(t1, t2)]),
                            "rounds": times[kind]}
            part = PARTS.get(kind, (None,))[0]
            if part:
                report[kind][part] = {c: _stats([x[part] for x in times[kind][c]])
                                      for c in (1, 2)}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report["load_after"] = os.getloadavg()
    return report


def summary(report: dict) -> str:
    def mm(s: dict, fmt: str = ".2f") -> str:
        return f"{s['median']:{fmt}} [{s['min']:{fmt}}–{s['max']:{fmt}}]"
    c = report["config"]
    lines = [f"ray bench: {c['rows']:,} × {c['dim']}, {c['rounds']} rounds, load "
             f"{report['load_before'][0]:.2f} → {report['load_after'][0]:.2f}"]
    build = f"IVF-PQ (lists {c['lists']}, pq_m {c['pq_m']})"
    for kind, what in (("ingest", f"ingest through VarveDatasink ({c['blocks']} blocks)"),
                       ("ivfpq", f"build_index {build}"),
                       ("lance-ingest", "lance-ray write_lance"),
                       ("lance-ivfpq", f"lance-ray create_index {build}")):
        if kind not in report:
            continue
        f = report[kind]
        line = (f"{what}: T1 {mm(f['t1_s'])} s, T2 {mm(f['t2_s'])} s, T1/(2·T2) "
                f"{mm(f['efficiency'])}")
        if kind in PARTS:
            part, of = PARTS[kind]
            line += (f"; of which {of} {mm(f[part][1])} s with 1 CPU, "
                     f"{mm(f[part][2])} s with 2")
        lines.append(line)
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], int(sys.argv[2]), sys.argv[3])))
