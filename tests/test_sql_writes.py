"""SQL's writes (INSERT, UPDATE, COPY) refused where PostgreSQL refuses them, with
its SQLSTATE: the same statements run on real PostgreSQL and on db.sql(), each
answered alike (its command tag, or its SQLSTATE), and the tables left alike."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv


def _answer(run, step):
    sql, copy = (step, None) if isinstance(step, str) else step
    try:
        return "ok", run(sql, copy)
    except Exception as e:
        return "err", getattr(e, "sqlstate", type(e).__name__)


def answers_as_postgresql(pg_conn, tmp_path, steps, check):
    """Each step's answer on db.sql() must be PostgreSQL's, and `check`'s rows; a
    step is a statement or (COPY ... FROM STDIN, its data)."""
    pg_conn.autocommit = True

    def on_pg(sql, copy):
        cur = pg_conn.cursor()
        if copy is None:
            return cur.execute(sql).statusmessage
        with cur.copy(sql) as cp:
            cp.write(copy)
        return cur.statusmessage
    want = [_answer(on_pg, s) for s in steps]
    want_rows = sorted(pg_conn.execute(check).fetchall())
    db = vv.connect(str(tmp_path / "w.varve"))
    try:
        got = [_answer(lambda sql, copy: db.sql(sql, copy_data=copy).status, s)
               for s in steps]
        got_rows = sorted(db.sql(check).rows)
    finally:
        db.close()
    assert got == want
    assert got_rows == want_rows
    return want


def test_a_null_or_missing_key_is_refused(pg_conn, tmp_path):
    # red-team 9 f05: a text key, and a serial key given NULL, got an invented id
    answers = answers_as_postgresql(pg_conn, tmp_path, [
        "CREATE TABLE x (id text PRIMARY KEY, n int)",
        "INSERT INTO x VALUES (NULL, 5)", "INSERT INTO x (n) VALUES (6)",
        ("COPY x (n) FROM STDIN", "7\n"), "INSERT INTO x VALUES ('a', 8)",
        "CREATE TABLE s (id serial PRIMARY KEY, n int)",
        "INSERT INTO s (id, n) VALUES (NULL, 1)", "INSERT INTO s SELECT NULL, 2",
        "INSERT INTO s (n) VALUES (3)", "INSERT INTO s VALUES (DEFAULT, 4)",
    ], "SELECT n FROM x UNION ALL SELECT n FROM s")
    assert [a for a in answers if a[0] == "err"] == [("err", "23502")] * 5


def test_insert_with_fewer_expressions_than_columns_is_refused(pg_conn, tmp_path):
    # red-team 9 f14: the named column left without a value took its default
    answers = answers_as_postgresql(pg_conn, tmp_path, [
        "CREATE TABLE t (id int PRIMARY KEY, n int, s text DEFAULT 'd')",
        "INSERT INTO t (id, n, s) VALUES (1, 2)", "INSERT INTO t (id, n, s) SELECT 2, 3",
        "INSERT INTO t (id, n, s) VALUES (4, 5, 'x'), (5, 6)",
        "INSERT INTO t VALUES (6, 7, 'y'), (7, 8)", "INSERT INTO t VALUES (8, 9)",
        "INSERT INTO t SELECT 9, 10", "INSERT INTO t (id, n) VALUES (10, 11), (12, 13)",
    ], "SELECT id, n, s FROM t")
    assert [a[1] for a in answers[1:5]] == ["42601"] * 4


def test_the_hidden_key_of_a_table_without_an_id_column_is_no_column(pg_conn, tmp_path):
    # red-team 9 f13: COPY wrote the hidden key from the file; UPDATE SET id was 0A000
    answers = answers_as_postgresql(pg_conn, tmp_path, [
        "CREATE TABLE h (n int)", ("COPY h (id, n) FROM STDIN", "7\t1\n"),
        ("COPY h (n) FROM STDIN", "2\n"), "UPDATE h SET id = 3",
        "INSERT INTO h (id, n) VALUES (1, 1)",
    ], "SELECT n FROM h")
    assert answers[1] == answers[3] == answers[4] == ("err", "42703")


def test_on_conflict_id_of_a_table_without_an_id_column_is_refused(pg_conn, tmp_path):
    # red-team 11 f18b_hidden_id: ON CONFLICT (id) named the hidden key (PostgreSQL: 42703)
    answers = answers_as_postgresql(pg_conn, tmp_path, [
        "CREATE TABLE h (n int)", "INSERT INTO h VALUES (1) ON CONFLICT (id) DO NOTHING",
        "INSERT INTO h VALUES (2) ON CONFLICT (id) DO UPDATE SET n = 5",
        "INSERT INTO h VALUES (3) ON CONFLICT DO NOTHING",
    ], "SELECT n FROM h")
    assert answers[1] == answers[2] == ("err", "42703")


def test_a_column_assigned_twice_is_refused(pg_conn, tmp_path):
    # red-team 9 f15: the last assignment won
    answers = answers_as_postgresql(pg_conn, tmp_path, [
        "CREATE TABLE t (id int PRIMARY KEY, n int, m int)", "INSERT INTO t VALUES (1, 1, 1)",
        "UPDATE t SET n = 5, m = 2, n = 6 WHERE id = 1",
        "INSERT INTO t (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET n = 7, n = 8",
        "UPDATE t SET n = 9, m = 9",
    ], "SELECT n, m FROM t")
    assert answers[2] == answers[3] == ("err", "42601")


def test_on_conflict_sets_a_sparsevec_from_excluded(pg_conn, tmp_path):
    # red-team 9 f11: EXCLUDED.sp was a plain column, and the upsert a raw AttributeError
    pg_conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    answers_as_postgresql(pg_conn, tmp_path, [
        "CREATE TABLE t (id int PRIMARY KEY, sp sparsevec(5), n int)",
        "INSERT INTO t VALUES (1, '{1:1}/5', 1), (2, '{3:1}/5', 2)",
        "INSERT INTO t VALUES (1, '{2:3}/5', 3), (2, NULL, 4), (3, '{5:2}/5', 5) "
        "ON CONFLICT (id) DO UPDATE SET sp = EXCLUDED.sp",
        "INSERT INTO t (id, n) VALUES (3, 6) ON CONFLICT (id) DO UPDATE SET sp = EXCLUDED.sp",
    ], "SELECT id, sp::text, n FROM t")


@pytest.mark.parametrize("sql", [
    "INSERT INTO t VALUES (2, $1)", "INSERT INTO t VALUES (2, $1) ON CONFLICT (id) DO NOTHING",
    "INSERT INTO t VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v"])
def test_a_ragged_list_for_a_vector_is_a_dimension_error(tmp_path, sql):
    # red-team 9 f12: the rewording of the DimensionError raised numpy's ValueError
    db = vv.connect(str(tmp_path / "r.varve"))
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v vector(3))")
    db.sql("INSERT INTO t VALUES (1, '[1,2,3]')")
    with pytest.raises(vv.DimensionError) as e:
        db.sql(sql, [[1, [2, 3], 4]])
    assert e.value.sqlstate == "22000"
    with pytest.raises(vv.DimensionError, match="expected 3 dimensions, not 2"):
        db.sql(sql, [np.array([1.0, 2.0])])
    assert db.sql("SELECT id, v FROM t").rows[0][0] == 1
    db.close()
