"""The bench harness end to end on a tiny data set, and the data it is built on.

Speed is not asserted here (it lives in the harness's own output); these
tests hold the harness to what its figures rest on: the tags keep the
fractions the filters claim, the ground truth is exact, every phase reports,
and a missing peer is skipped with a note rather than failing the run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from varvedb import demo_data
from varvedb_bench.data import exact_topk_many

from conftest import PYTHON, child_env


def test_tags_keep_the_fractions_the_filters_name():
    tags = demo_data.tag_of(np.arange(200_000))
    assert tags.min() == 0 and tags.max() == 99
    assert abs(np.mean(tags < 1) - 0.01) < 0.002
    assert abs(np.mean(tags < 25) - 0.25) < 0.01
    assert np.array_equal(tags, demo_data.tag_of(np.arange(200_000)))   # hashed, not drawn


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_ground_truth_is_exact_under_a_filter(metric):
    ds = demo_data.make(3000, 12, queries=15, seed=3)
    allow = demo_data.tag_of(ds.ids) < 25
    gt = exact_topk_many(ds.vectors, ds.queries, 10, metric, {"all": None, "f": allow},
                              block=700)
    x, q = ds.vectors.astype(np.float64), ds.queries.astype(np.float64)
    if metric == "l2":
        d = ((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    elif metric == "dot":
        d = -q @ x.T
    else:
        d = 1 - (q @ x.T) / np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(x, axis=1))
    for name, mask in (("all", None), ("f", allow)):
        dm = d if mask is None else np.where(mask[None, :], d, np.inf)
        want = np.sort(dm, axis=1)[:, :10]
        got = np.take_along_axis(dm, gt[name], 1)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_clustered_generator_is_reproducible_and_clustered():
    a, b = demo_data.clustered(5000, 32, seed=1), demo_data.clustered(5000, 32, seed=1)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert not np.array_equal(a, demo_data.clustered(5000, 32, seed=2))
    # clustered: a row's nearest neighbour is far nearer than a random row
    x = a[:500].astype(np.float64)
    d = ((x[:, None] - x[None]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    assert np.median(d.min(1)) < 0.25 * np.median(d[np.isfinite(d)])


def _bench(out, *args, timeout=600, path_first=None):
    cmd = [PYTHON, "-m", "varvedb_bench", "ann", "--rows", "3000", "--dim", "16",
           "--queries", "40", "--runs", "1", "--exact-queries", "5", "--commits", "20",
           "--ef", "10,80", "--out", str(out), *args]
    env = child_env()
    if path_first is not None:
        env["PYTHONPATH"] = str(path_first) + os.pathsep + env["PYTHONPATH"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_bench_runs_every_phase_and_writes_its_outputs(tmp_path):
    r = _bench(tmp_path, "--peers", "sqlite")
    assert r.returncode == 0, r.stderr[-3000:]
    stem = tmp_path / "bench-clustered-3000x16"
    summary = json.loads((stem.with_suffix(".json")).read_text())
    figs = {e: {k: v["median"] for k, v in summary["engines"][e]["figures"].items()}
            for e in ("varvedb", "sqlite")}
    v, s = figs["varvedb"], figs["sqlite"]
    for key in ("write_rows_per_s", "index_build_s", "exact_ms", "ann_ef10_ms", "ann_f1_ms",
                "open_ms", "open_first_query_ms", "disk_mb", "durable_commits_per_s",
                "graph_bytes_per_vector", "peak_mb"):
        assert v[key] > 0, key
    assert v["exact_recall"] == 1.0 and s["exact_recall"] == 1.0
    assert v["ann_ef80_recall"] >= 0.95
    assert v["ann_f1_hits"] == 10 and v["ann_f25_hits"] == 10      # never short of k
    assert s["durable_commits_rollback_journal_per_s"] > 0
    table = stem.with_suffix(".md").read_text()
    assert "| ANN recall@10, ef=80 |" in table and "varvedb vs sqlite" in table
    assert stem.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in os.listdir(tmp_path) if p.startswith("work-")]   # cleaned up


def test_f16_run_stores_half_precision_and_keeps_its_own_result(tmp_path):
    # varvedb alone: the run above already measures a peer beside it
    r = _bench(tmp_path, "--peers", "", "--dtype", "f16")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "bench-clustered-3000x16-f16.json").read_text())
    assert summary["config"]["dtype"] == "f16"
    assert "stored as f16" in summary["engines"]["varvedb"]["notes"]["load"]
    v = {k: f["median"] for k, f in summary["engines"]["varvedb"]["figures"].items()}
    assert v["exact_recall"] == 1.0 and v["ann_ef80_recall"] >= 0.95
    vectors = np.load(tmp_path / "cache" / "clustered-3000x16-q40-f16-vectors.npy")
    assert np.array_equal(vectors, vectors.astype(np.float16).astype(np.float32))
    assert not (tmp_path / "bench-clustered-3000x16.json").exists()


def test_missing_peer_is_skipped_with_a_note(tmp_path):
    r = _bench(tmp_path, "--peers", "sqlite", "--no-varvedb")
    assert r.returncode == 0, r.stderr[-3000:]
    # hnswlib made missing whether or not it is installed: a module of that
    # name first on the path that fails to import, as an absent package does
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "hnswlib.py").write_text("raise ImportError('hnswlib blocked by the test')\n")
    r = _bench(tmp_path, "--peers", "hnswlib", "--no-varvedb", path_first=blocked)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "hnswlib skipped" in r.stdout + r.stderr
    summary = json.loads((tmp_path / "bench-clustered-3000x16.json").read_text())
    assert "hnswlib blocked by the test" in summary["skipped"]["hnswlib"]
    assert "sqlite" in summary["engines"]          # the earlier result was kept


def test_sigterm_stops_the_worker_and_removes_its_files(tmp_path):
    # 100 000 rows: the first worker builds their graph for many seconds, long past a
    # poll; the parent makes the whole data set before any worker starts (for 400 000
    # rows, the test's 3.3-3.7 s of CPU against 1.4-2.0 s, most of it spent on data
    # the kill leaves unused)
    proc = subprocess.Popen(
        [PYTHON, "-m", "varvedb_bench", "ann", "--rows", "100000", "--dim", "64",
         "--queries", "20", "--runs", "1", "--peers", "sqlite", "--out", str(tmp_path)],
        env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:      # wait for the first worker to start
        if any(p.startswith("work-") for p in os.listdir(tmp_path)) and _workers(proc.pid):
            break
        time.sleep(0.2)
    workers = _workers(proc.pid)
    assert workers, "no worker started"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=1800)
    assert proc.returncode != 0
    time.sleep(0.5)
    assert not [w for w in workers if os.path.exists(f"/proc/{w}")]
    assert not [p for p in os.listdir(tmp_path) if p.startswith("work-")]


def _workers(parent: int) -> list[int]:
    """Pids of `varvedb_bench.worker` processes whose parent is `parent`."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"varvedb_bench.worker" in cmd and ppid == parent:
            out.append(int(pid))
    return out
