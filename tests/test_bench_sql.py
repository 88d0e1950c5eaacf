"""`varvedb bench sql` on a tiny collection: the report's shape, both sides of
the overhead figure answering alike, and the pgvector figure (which must run:
it fails with the reason when PostgreSQL cannot start, unless VARVEDB_NO_PG
is set)."""
import json
import os

from click.testing import CliRunner

from varvedb_bench.cli import bench

# 3 000 rows: tag < 9 allows 2 700, above the planner's exact-scan threshold, so
# the plan is a graph walk as in the real figure
ARGS = ["--rows", "3000", "--dim", "16", "--queries", "30", "--rounds", "2",
        "--profile-queries", "20"]


def test_bench_sql_reports_both_figures(tmp_path):
    no_pg = bool(os.environ.get("VARVEDB_NO_PG"))
    out = tmp_path / "sql.json"
    # the default work folder (a temporary one in the current directory): not under
    # pytest's base folder, which another pytest session reset to 0700 while
    # PostgreSQL (another system user when root) still needed it (initdb: "could
    # not open file .../global/pg_control: Permission denied", a second suite beside)
    args = ARGS + ["--out", str(out)]
    if no_pg:
        args += ["--only", "overhead"]
    res = CliRunner().invoke(bench, ["sql", *args])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads(out.read_text())
    md = (tmp_path / "sql.md").read_text()

    o = report["overhead"]
    assert o["same_ids_all"], o["same_ids"]
    assert o["plan"]["sql"]["strategy"] == "graph" == o["plan"]["api"]["strategy"]
    assert o["goal"] in ("met", "missed")
    for side in ("api", "sql"):
        assert o[side]["median"] > 0 and o[side]["per_round_median"]["rounds"] == 2
    a = o["added"]
    assert a["p25"] <= a["median"] <= a["p75"]
    bo = o["added_by_order"]
    assert o["goal"] == ("met" if bo["balanced"] <= o["goal_us"] else "missed")
    if o["goal"] == "missed":
        assert o["profile"]["sql_only_by_own_time"]
    assert "db.sql() over collection.search" in md

    if no_pg:
        return
    g = report["pgvector"]
    assert isinstance(g, dict), f"pgvector did not run (set VARVEDB_NO_PG to skip it): {g}"
    assert g["both_return_k"]
    assert g["varvedb"]["rounds"] == g["pgvector"]["rounds"] == g["ratio"]["rounds"] == 2
    assert g["varvedb"]["median"] > 0 and g["pgvector"]["median"] > 0
    # 3 000 rows at ef 100: both sides are near exact
    assert g["recall@10"]["varvedb"] >= 0.9 and g["recall@10"]["pgvector"] >= 0.9
    assert all("Limit" in p for p in g["plan"]["pgvector"].values())
    assert "db.sql() against pgvector" in md
