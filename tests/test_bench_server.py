"""`varvedb bench server --quick` end to end: a real `varvedb serve` and a real
PostgreSQL + pgvector on 127.0.0.1, tiny sizes; the report's shape and sane
values. Where PostgreSQL cannot start, the varvedb side is checked and the
test then skips with the reason (VARVEDB_NO_PG runs without it)."""
import json
import os
import signal

import pytest
from click.testing import CliRunner

from varvedb_bench.cli import bench


def _sane(summary):
    assert summary["qps"]["median"] > 0
    assert summary["qps"]["min"] <= summary["qps"]["median"] <= summary["qps"]["max"]
    assert 0 < summary["p50_us"]["median"] <= summary["p99_us"]["median"]
    assert summary["qps"]["rounds"] == 2


def test_bench_server_quick(tmp_path):
    pytest.importorskip("varvedb.server", reason="`varvedb serve` is not in this tree yet")
    no_pg = bool(os.environ.get("VARVEDB_NO_PG"))
    out = tmp_path / "server.json"
    # the default work folder (a temporary one in the current directory): not
    # under pytest's base folder, which another pytest session may reset to 0700
    # while PostgreSQL (another system user when root) still needs to reach it
    args = ["--quick", "--client", "all", "--out", str(out)]
    if no_pg:
        args.append("--no-pg")
    res = CliRunner().invoke(bench, ["server", *args])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads(out.read_text())
    md = (tmp_path / "server.md").read_text()
    c = report["config"]
    assert c["threads"] == [1, 4, 8] and c["workdir_fs"] not in ("tmpfs", "ramfs")
    # uvicorn re-raises a SIGTERM it handled once the server has shut down cleanly
    assert c["varvedb"]["sigterm_exit"] in (0, -signal.SIGTERM)
    pg = isinstance(c.get("pgvector"), dict)

    assert 0.0 <= report["recall@10"]["varvedb"] <= 1.0
    # 2 000 rows at ef 100: the graph answers near exactly
    assert report["recall@10"]["varvedb"] >= 0.9
    assert report["recall@10"]["varvedb_pg"] >= 0.9     # psycopg over serve --pg
    for t, row in report["search"]["threads"].items():
        _sane(row["varvedb"])
        _sane(row["varvedb_raw"])
        _sane(row["varvedb_pg"])
        assert len(row["rounds"]["varvedb"]) == 2
        if pg:
            _sane(row["pgvector"])
            ratios = [a["qps"] / b["qps"] for a, b in
                      zip(row["rounds"]["varvedb"], row["rounds"]["pgvector"])]
            assert row["ratio_qps"]["median"] == pytest.approx(sorted(ratios)[0] / 2 +
                                                               sorted(ratios)[1] / 2)
    mx = report["mixed"]["varvedb"]
    _sane(mx["with_writer"])
    assert mx["writer_rows_per_s"]["median"] > 0
    assert mx["read_only"] == report["search"]["threads"]["8"]["varvedb"]
    forms = report["ingest"]["forms"]
    for form in ("varvedb_json", "varvedb_arrow", "varvedb_npy"):
        assert forms[form]["rows_per_s"]["median"] > 0
    assert "## Search: QPS and latency" in md and "## Ingest" in md
    la = report["ladder"]
    assert isinstance(la, dict), la
    levels = {k: v["median_us"] for k, v in la["levels"].items()}
    assert all(v > 0 for v in levels.values()) and levels["http"] > levels["search"]
    assert la["steps"]["thread hand-off (run_in_executor to the pool and back)"] == \
        pytest.approx(levels["asgi_pool"] - levels["asgi_inline"], abs=0.11)

    if not pg:
        pytest.skip(f"the pgvector side did not run: {c.get('pgvector', 'VARVEDB_NO_PG')}")
    assert 0.9 <= report["recall@10"]["pgvector"] <= 1.0
    copy = forms["pgvector_copy"]["rows_per_s"]
    for form in ("varvedb_json", "varvedb_arrow", "varvedb_npy"):
        r = report["ingest"]["ratio_vs_copy"][form]
        assert r["median"] == pytest.approx(forms[form]["rows_per_s"]["median"] / copy["median"])
    assert report["mixed"]["pgvector"]["writer_rows_per_s"]["median"] > 0
    assert "pgvector" in md


def test_bench_server_quick_with_c_load_generators(tmp_path):
    """--client wrk: wrk drives varvedb and pgbench drives pgvector (no Python
    client); the search figure alone, its shape and sane values."""
    import shutil
    pytest.importorskip("varvedb.server", reason="`varvedb serve` is not in this tree yet")
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (Debian's package wrk)")
    no_pg = bool(os.environ.get("VARVEDB_NO_PG"))
    out = tmp_path / "wrk.json"
    args = ["--quick", "--client", "wrk", "--only", "search", "--ladder-rounds", "0",
            "--out", str(out)] + (["--no-pg"] if no_pg else [])
    res = CliRunner().invoke(bench, ["server", *args])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads(out.read_text())
    assert report["config"]["client"] == "wrk" and "mixed" not in report
    assert report["recall@10"]["varvedb"] >= 0.9
    pg = isinstance(report["config"].get("pgvector"), dict)
    for t, row in report["search"]["threads"].items():
        _sane(row["varvedb"])
        assert row["varvedb"]["server_cpu_us_per_query"]["median"] > 0
        if pg:
            _sane(row["pgvector"])
            assert row["pgvector"]["server_cpu_us_per_query"]["median"] > 0
            assert row["ratio_qps"]["rounds"] == 2
    assert "wrk (wrk_search.lua)" in (tmp_path / "wrk.md").read_text()


def test_bench_server_quick_with_wrk_drives_each_worker_count(tmp_path):
    """--client wrk --workers W: wrk drives each `serve --workers W` side (the
    workers' sides were driven by http.client, silently, with --client wrk)."""
    import shutil
    pytest.importorskip("varvedb.server", reason="`varvedb serve` is not in this tree yet")
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (Debian's package wrk)")
    out = tmp_path / "wrkw.json"
    args = ["--quick", "--client", "wrk", "--only", "search", "--ladder-rounds", "0",
            "--no-pg", "--workers", "1", "--threads", "2", "--out", str(out)]
    res = CliRunner().invoke(bench, ["server", *args])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads(out.read_text())
    assert report["config"]["load_generators"] == {"varvedb_w1": "wrk"}
    assert report["recall@10"]["varvedb_w1"] >= 0.9
    row = report["search"]["threads"]["2"]
    assert set(row["rounds"]) == {"varvedb_w1"}
    _sane(row["varvedb_w1"])
    assert row["varvedb_w1"]["server_cpu_us_per_query"]["median"] > 0
