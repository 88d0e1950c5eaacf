"""`varvedb bench replica` at a tiny size: a real leader and a real read replica
(`serve --replica-of`) on 127.0.0.1; every figure is reported, every commit is
seen on the replica, and the work folder is removed."""
from __future__ import annotations

import math

from varvedb_bench import replica


def test_the_replica_bench_reports_reads_and_lag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = replica.run(rows=300, dim=8, queries=20, rounds=1, seconds=0.3, threads=2,
                      rate=40.0, writers=2, lag_seconds=0.5, echo=lambda *a: None)
    reads = out["reads"]
    assert reads["leader_alone_qps"]["median"] > 0 and reads["split_qps"]["median"] > 0
    lag = out["lag"]["rounds"][0]
    assert lag["commits"] == 20 and lag["commits_per_s"] > 0
    # each commit's lag is measured from a replica answer at its version or later
    assert lag["replica_answers"] >= 1
    assert all(math.isfinite(lag[k]) for k in ("p50_ms", "p99_ms", "max_ms"))
    assert lag["p50_ms"] <= lag["p99_ms"] <= lag["max_ms"]
    assert "single-row commits/s" in replica.summary(out)
    assert list(tmp_path.iterdir()) == []
