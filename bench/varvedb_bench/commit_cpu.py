"""`varvedb bench commit-cpu`: the CPU one durable one-row commit spends outside
its fdatasync, and where (issue 28, item 4).

A collection of 1 000 rows (an int and a 128-d vector) with an HNSW index,
durability="commit", in the working directory (use a real disk). shape="wide":
rows of two text fields, a json field, an int and a 384-d vector instead (a
shape the write path was not tuned on). Each commit
is one `Collection.insert` of one row on one thread; its CPU is
`time.thread_time()` around the call minus the thread CPU of the fdatasync
inside it (the committing thread's own CPU: the maintainer's linking runs on
its own thread and is reported apart, as process CPU a commit). The pwritev's
thread CPU is given apart too, and the CPU outside both system calls: on
ext4 a write after a sync updates the inode's time stamps through the
journal (tens of µs of kernel CPU), the same for any write-then-sync design
(SQLite's WAL too).

Two passes, alternating over rounds: a bare one (the figure) and one with
every step of the write path wrapped in a thread-CPU timer (the table: each
step's CPU inclusive and exclusive of the steps timed inside it; the timers'
own cost inflates the steps a little, which is why the figure comes from the
bare pass).
"""
from __future__ import annotations

import functools
import os
import statistics
import tempfile
import time

import numpy as np

from varvedb import demo_data

_clock = time.thread_time_ns


# each step timed, outermost first: the module under varvedb, then the attribute
# (a function of the module, or Class.method), which is also its label
_STEPS = """
collection Collection.insert
collection Collection.prepare_rows
collection coerce_values
collection _embedded
session Session.begin
engine.engine Engine.begin
engine.writer_lock WriterLock.acquire
collection Collection.insert_prepared
collection Collection.prepared_now
engine.engine Engine.insert
engine.engine complete_columns
engine.engine fill_embedded
engine.table Table.check_new_ids
engine.engine Engine.write
engine.frames encode
storage.record encode
storage.log_writer LogWriter.append
storage.format frame_hash
engine.table Table.begin
engine.engine Engine._apply
engine.columns VectorColumn.append
engine.columns ScalarColumn.append
session Session.commit
storage.log_writer LogWriter.commit
storage.log_writer LogWriter._flush
storage.fileio FileIO.pwritev
storage.log_writer LogWriter.sync_to
storage.fileio FileIO.fdatasync
engine.engine Engine._link
engine.maintainer Maintainer.wake
"""


def _steps():
    """(owner, attribute, label) of each step in _STEPS."""
    import importlib
    out = []
    for line in _STEPS.split("\n"):
        if not line:
            continue
        module, path = line.split()
        owner = importlib.import_module(f"varvedb.{module}")
        *classes, attr = path.split(".")
        for name in classes:
            owner = getattr(owner, name)
        label = path if classes else f"{module.rsplit('.', 1)[-1]}.{attr}"
        out.append((owner, attr, label))
    return out


class _Timers:
    """Thread-CPU timers wrapped round the steps; inclusive and child totals."""

    def __init__(self):
        self.incl: dict[str, int] = {}
        self.child: dict[str, int] = {}
        self.parent: dict[str, str | None] = {}
        self.stack: list[str] = []
        self.saved: list = []

    def install(self) -> None:
        for owner, attr, label in _steps():
            fn = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
            self.saved.append((owner, attr, fn))
            setattr(owner, attr, self._wrap(fn, label))

    def remove(self) -> None:
        for owner, attr, fn in reversed(self.saved):
            setattr(owner, attr, fn)
        self.saved = []

    def _wrap(self, fn, label):
        timers = self

        @functools.wraps(fn)
        def timed(*a, **k):
            stack = timers.stack
            timers.parent.setdefault(label, stack[-1] if stack else None)
            stack.append(label)
            t0 = _clock()
            try:
                return fn(*a, **k)
            finally:
                dt = _clock() - t0
                stack.pop()
                timers.incl[label] = timers.incl.get(label, 0) + dt
                if stack:
                    timers.child[stack[-1]] = timers.child.get(stack[-1], 0) + dt
        return timed


def _syscall_meter():
    """Wrap FileIO.fdatasync and FileIO.pwritev to count their thread CPU (and
    the fdatasync's wall), in ns; returns (totals, remove())."""
    from varvedb.storage import fileio
    sync, write = fileio.FileIO.fdatasync, fileio.FileIO.pwritev
    tot = {"cpu": 0, "wall": 0, "n": 0, "write": 0}

    def fdatasync(self):
        c0, w0 = _clock(), time.perf_counter_ns()
        try:
            return sync(self)
        finally:
            tot["cpu"] += _clock() - c0
            tot["wall"] += time.perf_counter_ns() - w0
            tot["n"] += 1

    def pwritev(self, bufs, offset):
        c0 = _clock()
        try:
            return write(self, bufs, offset)
        finally:
            tot["write"] += _clock() - c0
    fileio.FileIO.fdatasync, fileio.FileIO.pwritev = fdatasync, pwritev

    def remove():
        fileio.FileIO.fdatasync, fileio.FileIO.pwritev = sync, write
    return tot, remove


_WIDE_WORDS = ("river", "stone", "cloud", "ember", "lattice", "harbor", "meadow", "signal")


def _row_maker(shape: str, dim: int, vecs: np.ndarray):
    """(schema, fn(i) -> the row of id i) of a bench shape."""
    import varvedb as vv
    if shape == "narrow":
        return ({"tag": "int", "embedding": vv.Vector(dim)},
                lambda i: {"id": i, "tag": i % 100, "embedding": vecs[i]})
    if shape != "wide":
        raise ValueError(f"shape is 'narrow' or 'wide', not {shape!r}")
    w = _WIDE_WORDS

    def row(i):
        return {"id": i, "title": f"{w[i % 8]} {w[i // 8 % 8]} #{i}",
                "body": " ".join(w[(i + k) % 8] for k in range(12)),
                "meta": {"source": w[i % 5], "rank": i % 17, "tags": [w[i % 3], w[i % 7]]},
                "tag": i % 100, "embedding": vecs[i]}
    return ({"title": "text", "body": "text", "meta": "json", "tag": "int",
             "embedding": vv.Vector(dim)}, row)


def run(workdir: str | None = None, rounds: int = 7, commits: int = 300, dim: int | None = None,
        durability: str = "commit", shape: str = "narrow") -> dict:
    """The bare figure (µs of thread CPU a commit outside fdatasync, median and
    spread over rounds) and the step table (µs a commit, from the timed pass).
    durability="off": the same path without the fdatasync, whose wait lets other
    processes evict this one's caches on a shared machine (the CPU of the code
    itself, warm)."""
    import varvedb as vv
    dim = dim or (384 if shape == "wide" else 128)
    workdir = tempfile.mkdtemp(prefix="varvedb-commit-cpu-", dir=workdir or os.getcwd())
    vecs = demo_data.clustered(1000 + 2 * rounds * commits, dim, seed=5)
    schema, make_row = _row_maker(shape, dim, vecs)
    db = vv.connect(os.path.join(workdir, "commit-cpu.varve"), durability=durability)
    c = db.create_collection("items", schema)
    c.insert([make_row(i) for i in range(1000)])
    c.create_index("embedding", vv.HNSW())
    nxt = [1000]
    for i in range(50):                      # warm the path (and numba's dispatch)
        c.insert({**make_row(i), "id": 10**9 + i})
    c.wait_indexed()

    def one_round(timers: _Timers | None) -> dict:
        fs, remove = _syscall_meter()
        if timers is not None:
            timers.install()
        per, py = [], []
        p0, w0 = time.process_time_ns(), time.perf_counter_ns()
        try:
            for _ in range(commits):
                i = nxt[0]
                nxt[0] += 1
                row = make_row(i)
                f0, s0 = fs["cpu"], fs["write"]
                t0 = _clock()
                c.insert(row)
                cpu = _clock() - t0 - (fs["cpu"] - f0)
                per.append(cpu)
                py.append(cpu - (fs["write"] - s0))
        finally:
            if timers is not None:
                timers.remove()
            remove()
        wall = time.perf_counter_ns() - w0
        proc = time.process_time_ns() - p0
        per.sort()
        c.wait_indexed()
        return {"cpu_us": statistics.median(per) / 1e3,
                "cpu_p25_us": per[len(per) // 4] / 1e3,
                "cpu_mean_us": statistics.fmean(per) / 1e3,
                "outside_syscalls_us": statistics.median(py) / 1e3,
                "pwritev_cpu_us": fs["write"] / commits / 1e3,
                "fsync_wall_us": fs["wall"] / max(fs["n"], 1) / 1e3,
                "fsync_cpu_us": fs["cpu"] / max(fs["n"], 1) / 1e3,
                "wall_us": wall / commits / 1e3,
                "process_cpu_us": proc / commits / 1e3}

    bare, timed = [], []
    timers = _Timers()
    try:
        for r in range(rounds):
            order = (None, timers) if r % 2 == 0 else (timers, None)
            for t in order:
                (bare if t is None else timed).append(one_round(t))
    finally:
        db.close()
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    n = rounds * commits
    table = []
    for owner, attr, label in _steps():
        if label not in timers.incl:
            continue
        depth, p = 0, timers.parent[label]
        while p is not None:
            depth, p = depth + 1, timers.parent[p]
        incl = timers.incl[label] / n / 1e3
        table.append({"step": "  " * depth + label, "incl_us": round(incl, 1),
                      "excl_us": round(incl - timers.child.get(label, 0) / n / 1e3, 1)})

    def stats(key, rs):
        xs = [r[key] for r in rs]
        return {"median": round(statistics.median(xs), 1), "min": round(min(xs), 1),
                "max": round(max(xs), 1)}
    keys = ("cpu_us", "cpu_p25_us", "cpu_mean_us", "outside_syscalls_us", "pwritev_cpu_us",
            "fsync_wall_us", "fsync_cpu_us", "wall_us",
            "process_cpu_us")
    return {"figure": f"thread CPU of one 1-row commit (durability={durability!r}) outside "
                      f"fdatasync (HNSW-indexed, {shape} rows, {dim}-d), µs", "rounds": rounds,
            "commits_per_round": commits, "load": os.getloadavg(),
            "bare": {k: stats(k, bare) for k in keys},
            "timed": {k: stats(k, timed) for k in keys},
            "steps": table}


def format_table(out: dict) -> str:
    lines = [out["figure"] + f"; load {out['load'][0]:.2f}"]
    for k, v in out["bare"].items():
        lines.append(f"  {k:22} {v['median']:8.1f}  ({v['min']:.1f}–{v['max']:.1f})")
    lines += ["", f"{'step (timed pass, µs a commit)':44} incl µs  excl µs"]
    for s in out["steps"]:
        lines.append(f"{s['step']:44} {s['incl_us']:7.1f}  {s['excl_us']:7.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    res = run(sys.argv[1] if len(sys.argv) > 1 else None)
    print(format_table(res))
