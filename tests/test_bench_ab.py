"""varvedb_bench/ab.py: the A/B mode end to end through the CLI on a tiny set, and the
interpolation of QPS at equal recall on hand-made curves.

Speed is not asserted (the machine is shared); the run is held to its shape:
every engine, every ef and round measured, recall against the exact truth,
the interpolated points and their ratios present and consistent.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from varvedb_bench import ab
from varvedb_bench.cli import bench
from varvedb.errors import OptionError


def test_interpolation_is_linear_in_recall_between_the_points_around_the_target():
    recall = [0.80, 0.90, 0.96, 0.995]
    qps = [10_000, 8_000, 5_000, 1_000]
    assert ab.qps_at_recall(recall, qps, 0.90) == (8_000, "interpolated")
    value, status = ab.qps_at_recall(recall, qps, 0.95)
    assert status == "interpolated" and value == pytest.approx(8_000 - 3_000 * 5 / 6)
    value, _ = ab.qps_at_recall(recall, qps, 0.99)
    assert value == pytest.approx(5_000 - 4_000 * 0.03 / 0.035)
    assert ab.qps_at_recall(recall, qps, 0.999) == (None, "not reached")
    # the smallest ef already past the target: its QPS, flagged as a lower bound
    assert ab.qps_at_recall([0.97, 0.99], [9_000, 4_000], 0.95) == \
        (9_000, "reached at the first point")
    # a dip in recall (noise): the first crossing in sweep order counts
    value, _ = ab.qps_at_recall([0.90, 0.94, 0.93, 0.97], [9, 8, 7, 5], 0.95)
    assert value == pytest.approx(7 - 2 * 0.02 / 0.04)


def test_engine_lists_are_checked():
    assert ab.parse_engines("varvedb, hnswlib,varvedb:int8") == [
        ("varvedb", "varvedb", None), ("hnswlib", "hnswlib", None),
        ("varvedb:int8", "varvedb", "int8")]
    assert ab.parse_engines("varvedb:ivfpq,faiss:ivfpq")[1] == ("faiss:ivfpq", "faiss", "ivfpq")
    for bad, msg in (("varvedb", "at least two"), ("varvedb,annoy", "unknown engine 'annoy'"),
                     ("varvedb,hnswlib:int8", "the options are"),
                     ("varvedb:f4,hnswlib", "varvedb:int8; varvedb:f32; varvedb:ivfpq"),
                     ("varvedb,varvedb", "named twice")):
        with pytest.raises(OptionError, match=msg):
            ab.parse_engines(bad)


def test_ab_mode_runs_end_to_end_and_writes_curves_and_interpolated_points(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(bench, [
        "ann", "--dataset", "clustered", "--rows", "2000", "--dim", "16", "--queries", "60",
        "--ab", "varvedb,hnswlib", "--rounds", "3", "--build-rounds", "2",
        "--ef", "10,20,40,80", "--out", str(out)])
    assert r.exit_code == 0, r.output + repr(r.exception)
    summary = json.loads((out / "ab-clustered-2000x16.json").read_text())
    cfg = summary["config"]
    assert cfg["engines"] == ["varvedb", "hnswlib"] and cfg["reference"] == "hnswlib"
    assert (cfg["rows"], cfg["dim"], cfg["queries"], cfg["ef"]) == (2000, 16, 60, [10, 20, 40, 80])
    for name, e in summary["engines"].items():
        assert len(e["build_s"]["per_round"]) == 2 and e["build_s"]["median"] > 0
        assert 0 < e["graph_bytes_per_vector"] < e["memory_bytes_per_vector"]
        assert e["build_threads"] >= 1
        assert e["memory_bytes_per_vector"] - e["graph_bytes_per_vector"] == 16 * 4
        assert [p["ef"] for p in e["curve"]] == [10, 20, 40, 80]
        for p in e["curve"]:
            assert 0.5 < p["recall"] <= 1 and len(p["qps_per_round"]) == 3
            assert p["qps"]["min"] <= p["qps"]["median"] <= p["qps"]["max"]
            assert 0 < p["p50_us"] <= p["p99_us"]
            ratio = p["qps_ratio_to_reference"]
            if name == "hnswlib":
                assert ratio["median"] == ratio["min"] == ratio["max"] == 1.0
        assert e["curve"][-1]["recall"] >= 0.95, name
        assert set(e["qps_at_recall"]) == {"0.90", "0.95", "0.99"}
        point = e["qps_at_recall"]["0.95"]
        assert point["status"] in ("interpolated", "reached at the first point")
        curve = e["curve"]
        assert point["qps"] == ab.qps_at_recall([p["recall"] for p in curve],
                                                [p["qps"]["median"] for p in curve], 0.95)[0]
        assert len(point["qps_per_round"]) == 3
    v = summary["engines"]["varvedb"]["qps_at_recall"]["0.95"]
    h = summary["engines"]["hnswlib"]["qps_at_recall"]["0.95"]
    assert v["ratio_to_reference"] == pytest.approx(v["qps"] / h["qps"])
    per_round = np.array(v["qps_per_round"]) / np.array(h["qps_per_round"])
    assert v["ratio_to_reference_per_round"]["median"] == pytest.approx(np.median(per_round))
    table = (out / "ab-clustered-2000x16.md").read_text()
    assert "QPS at 0.95" in table and "varvedb/hnswlib" in table
    assert (out / "ab-clustered-2000x16.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in out.iterdir() if p.name.startswith("ab-")
            and p.is_dir()] == []                                  # work folder removed


def test_ab_mode_reports_a_bad_engine_as_a_usage_error(tmp_path):
    r = CliRunner().invoke(bench, ["ann", "--dataset", "clustered", "--rows", "200",
                                  "--dim", "4", "--queries", "5", "--ab", "varvedb,annoy",
                                  "--out", str(tmp_path)])
    assert r.exit_code == 1 and "unknown engine 'annoy'" in r.output
