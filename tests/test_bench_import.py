"""`varvedb bench import`: a short run reports a rate per file kind and engine."""
from varvedb_bench import import_rate


def test_a_short_run_reports_each_kind_and_engine(tmp_path):
    fig = import_rate.run(3000, 8, 2, folder=str(tmp_path))
    assert set(fig["seconds"]) == {"parquet", "npy"}
    for by_engine in fig["seconds"].values():
        assert set(by_engine) == set(fig["engines"]) and "varvedb" in by_engine
        assert all(len(s) == 2 and all(x > 0 for x in s) for s in by_engine.values())
    for kind, by_engine in fig["cpu_seconds"].items():
        assert {e: len(c) for e, c in by_engine.items()} == {e: 2 for e in fig["engines"]}
        assert all(x >= 0 for c in by_engine.values() for x in c)
    assert len(fig["load"]) == 2 * 2 * len(fig["engines"])
    text = import_rate.format_table(fig)
    assert "parquet" in text and "npy" in text and "rows/s" in text and "CPU" in text
