"""varvedb_bench.tail on a small file: its figures are there and consistent, and
a run that keeps its results sees the collector run (the mechanism it reports)."""
from __future__ import annotations

from varvedb_bench import cold, tail


def test_tail_reports_latency_and_collections(tmp_path):
    path = str(tmp_path / "t.varve")
    cold.build(path, 600, 16)
    out = tail.run(path, searches=400, keep=True)
    for name in ("wall", "cpu"):
        f = out[name]
        assert 0 < f["p50_us"] <= f["p99_us"] <= f["p999_us"] <= f["max_us"]
    slow = out["slow (cpu > 3x median)"]
    assert 0 <= slow["with a collection"] <= slow["searches"] <= 400
    # 400 kept results are thousands of tracked objects: generation 0 filled
    assert out["collections"][0]["n"] >= 1
    assert out["frozen objects"] > 0        # connect() froze the imports' objects
