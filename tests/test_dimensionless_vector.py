"""`vector` without a dimension (issue 30): what pgvector does with it, measured on the
real PostgreSQL + pgvector the suite starts, and what varvedb does instead — a clear
0A000 at CREATE TABLE / ADD COLUMN, the table left as it was (docs/sql.md says why)."""
from __future__ import annotations

import psycopg
import pytest

import varvedb as vv


def test_pgvector_takes_rows_of_any_dimension_but_indexes_none(pg_conn):
    """The behaviour varvedb declines: rows of several dimensions in one column,
    22000 where two of them meet, and no HNSW index on the column."""
    pg_conn.execute("CREATE TABLE anydim (id bigint PRIMARY KEY, embedding vector)")
    pg_conn.execute("INSERT INTO anydim VALUES (1, '[1,2,3]'), (2, '[1,2]')")
    with pytest.raises(psycopg.errors.DataException, match="different vector dimensions"):
        pg_conn.execute("SELECT id FROM anydim ORDER BY embedding <-> '[1,1,1]'").fetchall()
    with pytest.raises(psycopg.errors.InvalidParameterValue,       # 22023
                       match="column does not have dimensions"):
        pg_conn.execute("CREATE INDEX ON anydim USING hnsw (embedding vector_l2_ops)")


@pytest.mark.parametrize("sql", [
    "CREATE TABLE anydim (id bigint PRIMARY KEY, embedding vector)",
    "CREATE TABLE anydim (id bigint PRIMARY KEY, embedding halfvec)",
    "ALTER TABLE items ADD COLUMN other vector"])
def test_varvedb_refuses_it_with_0a000_naming_the_fix(db, db_path, sql):
    db.sql("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(3))")
    with pytest.raises(vv.SqlError, match=r"without a dimension.*declare (vector|halfvec)\(n\)") \
            as e:
        db.sql(sql)
    assert e.value.sqlstate == "0A000"
    assert db.collections() == ["items"] and list(db.collection("items").schema.fields) == \
        ["embedding"]
