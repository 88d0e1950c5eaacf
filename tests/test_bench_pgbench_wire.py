"""`python -m varvedb_bench.pgbench_wire`, tiny: pgbench against a real `varvedb
serve --pg` and a real PostgreSQL + pgvector, the same scripts; the report's
shape and sane values (never its speed). VARVEDB_NO_PG skips it where
PostgreSQL cannot start."""
import os

import pytest

from varvedb_bench import pgbench_wire


def test_pgbench_both_servers_alternating():
    if os.environ.get("VARVEDB_NO_PG"):
        pytest.skip("VARVEDB_NO_PG: no PostgreSQL here")
    # the default work folder (a temporary one in the current directory): PostgreSQL,
    # another system user when root, must reach it (pytest's base folder may be 0700)
    # (--no-warm: the server's start would warm every kernel; these few are cached)
    report = pgbench_wire.run(rows=300, dim=8, n_queries=2, rounds=2, seconds=1, clients=2,
                              threads=1, serve_args=["--no-warm"], echo=lambda line: None)
    assert report["config"]["pgbench"] == "-M prepared -n"
    for script in ("by_id", "top10"):
        row = report[script]
        for side in ("varvedb", "pgvector"):
            s = row[side]
            assert len(s["runs"]) == 2 and all(r["tps"] > 0 for r in s["runs"])
            assert s["min_tps"] <= s["median_tps"] <= s["max_tps"]
            assert all(len(r["loadavg_after"].split()) == 3 for r in s["runs"])
        ratio = row["ratio_varvedb_over_pgvector"]
        assert 0 < ratio["min"] <= ratio["median"] <= ratio["max"]
