"""The bench's sweep mode (`varvedb bench ann --engines`) under a memory cap.

These hold the mode to what its figures rest on: each capped query worker
ran inside a fresh cgroup v1 memory group with the limit asked for, the group
is gone afterwards, every point reports QPS, latency, recall and bytes read
per query, and a cap is refused where there is no memory controller.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from varvedb_bench import cgroup, sweep
from varvedb.errors import OptionError

from conftest import PYTHON, child_env

CONTROLLER = os.path.isfile(os.path.join(cgroup.ROOT, "memory.limit_in_bytes")) \
    and os.access(cgroup.ROOT, os.W_OK)
needs_cgroup = pytest.mark.skipif(not CONTROLLER, reason="no writable cgroup v1 memory "
                                                         "controller here")


def test_sizes_parse_in_binary_units():
    assert cgroup.parse_size("64M") == 64 * 2**20
    assert cgroup.parse_size("1G") == 2**30
    assert cgroup.parse_size("512MB") == 512 * 2**20
    assert cgroup.parse_size("1.5GiB") == 3 * 2**29
    for bad in ("lots", "12X", "100"):     # "100" bytes is under the 1 MB floor
        with pytest.raises(OptionError):
            cgroup.parse_size(bad)


def _sweep(out, *args):
    return subprocess.run(
        [PYTHON, "-m", "varvedb_bench", "ann", "--engines", "varvedb:int8,varvedb:ivfpq",
         "--rows", "10000", "--dim", "32", "--queries", "50", "--ef", "40", "--probes", "8",
         "--lists", "10", "--pq-m", "4", "--m", "8", "--ef-construction", "64",
         "--keep-builds", str(out / "builds"), "--out", str(out), *args],
        env=child_env(), capture_output=True, text=True, timeout=300)


@needs_cgroup
def test_capped_sweep_runs_each_worker_in_a_fresh_group_and_removes_it(tmp_path):
    # 128 MB: a query worker peaks near 56 MB (numpy, numba and the index), and a
    # kernel it compiles itself (a cache another process wrote for another CPU)
    # takes LLVM's memory on top; 64 MB was killed once so on a CI machine
    r = _sweep(tmp_path, "--memory-cap", "128M", "--rounds", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "sweep-clustered-10000x32-cap128M.json").read_text())
    assert summary["config"]["memory_cap"] == 128 * 2**20
    points_of = {"varvedb:int8": "40", "varvedb:ivfpq": "8"}
    for name, point in points_of.items():
        points = (point,)
        e = summary["engines"][name]
        assert not e["problems"], e["problems"]
        assert e["build"]["index_build_s"] > 0 and e["build"]["cgroup_peak_mb"] > 0
        assert e["build"]["index_bytes"] > 0
        assert len(e["rounds"]) == 2
        groups = set()
        for rd in e["rounds"]:
            for p in points:
                res = rd[p]
                # the worker read its own memory cgroup: the capped group, now removed
                assert os.path.basename(res["cap_group"]) == res["cgroup"].lstrip("/")
                assert not os.path.exists(res["cap_group"])
                assert 0 < res["cgroup_peak_mb"] <= 128
                assert res["read_bytes_per_query"] >= 0 and res["queries"] == 50
                groups.add(res["cap_group"])
        assert len(groups) == 2                 # a fresh group per worker
        for p in points:
            f = e["points"][p]
            for key in ("qps", "p50_ms", "p99_ms", "recall", "read_bytes_per_query"):
                assert f[key]["n"] == 2, key
            assert f["p50_ms"]["median"] <= f["p99_ms"]["median"]
        assert set(e["qps_at_recall"]) == {"0.90", "0.95", "0.99"}
    assert summary["engines"]["varvedb:int8"]["points"]["40"]["recall"]["median"] >= 0.95
    table = (tmp_path / "sweep-clustered-10000x32-cap128M.md").read_text()
    assert "memory cap 128 MB" in table and "| varvedb:int8 | ef=40 |" in table
    assert "KB read / query" in table
    # no group of this run left behind (named varvedb-<engine>-<its pid>-<n>)
    run_pid = res["cap_group"].rsplit("-", 2)[1]
    assert not [d for d in os.listdir(cgroup.ROOT) if f"-{run_pid}-" in d]

    # the same indexes again, without a cap: the builds are reused, not redone
    r = _sweep(tmp_path, "--rounds", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("reusing the build") == 2
    nocap = json.loads((tmp_path / "sweep-clustered-10000x32-nocap.json").read_text())
    for name in ("varvedb:int8", "varvedb:ivfpq"):
        e = nocap["engines"][name]
        assert e["build"]["index_build_s"] == summary["engines"][name]["build"]["index_build_s"]
        assert "cap_group" not in e["rounds"][0][points_of[name]]     # no cap, no group


def test_a_cap_is_refused_without_a_memory_controller(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroup, "ROOT", str(tmp_path))      # a folder, not a cgroup
    with pytest.raises(OptionError, match="memory controller"):
        sweep.run(["varvedb:int8"], 1000, 8, 10, "clustered", "l2", str(tmp_path / "out"),
                  memory_cap=64 * 2**20)
    assert os.listdir(tmp_path) == []           # refused before any data or group was made


def test_cli_refuses_a_cap_without_engines_and_unknown_engines(tmp_path):
    r = subprocess.run([PYTHON, "-m", "varvedb_bench", "ann", "--memory-cap", "64M",
                        "--out", str(tmp_path)], env=child_env(), capture_output=True,
                       text=True)
    assert r.returncode != 0 and "--engines" in r.stderr
    r = subprocess.run([PYTHON, "-m", "varvedb_bench", "ann", "--engines", "nosuch",
                        "--out", str(tmp_path)], env=child_env(), capture_output=True,
                       text=True)
    assert r.returncode != 0 and "unknown engine" in r.stderr


def test_cold_is_refused_where_the_page_cache_cannot_be_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroup, "DROP_CACHES", str(tmp_path))     # a folder: not writable
    with pytest.raises(OptionError, match="--cold"):
        sweep.run(["varvedb:int8"], 1000, 8, 10, "clustered", "l2", str(tmp_path / "out"),
                  cold=True)
    assert os.listdir(tmp_path) == []
