"""`varvedb bench history` end to end at a tiny scale: every figure is there and sane."""
import json

from click.testing import CliRunner

from varvedb_bench.cli import bench

from test_bench_text import _corpus


def test_bench_history_reports_vacuum_compression_and_backup(tmp_path):
    _corpus(tmp_path / "c.jsonl", n=300)
    out = tmp_path / "out"
    r = CliRunner().invoke(bench, ["history", "--rows", "1000", "--dim", "8",
                                  "--queries", "20", "--rounds", "2", "--docs", "300",
                                  "--corpus", str(tmp_path / "c.jsonl"), "--backup-mb", "8", "--writer-seconds", "0.3",
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    s = json.loads((out / "history-1000x8.json").read_text())
    v, c, b = s["vacuum"], s["compress"], s["backup"]
    # every row was updated 3 times: three of every four row versions go, and the
    # vacuumed file is the size of a fresh load of the final state
    assert v["rows_dropped"] == 3000
    assert v["vacuumed_log"] <= 1.1 * v["fresh_log"] < v["updated_log"]
    for row in v["curves"].values():
        assert row["vacuumed"]["recall"] >= row["fresh"]["recall"] - 0.02
    assert c["documents"] == 300 and c["log_after_vacuum"] < c["log_before_vacuum"]
    # the copy holds the writer's commits up to the moment it was taken
    assert b["backup_bytes"] > 4 << 20 and b["backup_version"] > 3
    assert b["writer_idle"]["commits"] > 0 and b["backup_s"] > 0
    assert "vacuumed / fresh" in (out / "history-1000x8.md").read_text()
    assert not list(out.glob("*.varve")) and not list(out.glob("*.sqlite"))
