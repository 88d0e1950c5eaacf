"""A prepared statement's Describe (run before any Execute: asyncpg's prepare) against
its executions' rows, through `varvedb serve --pg` with asyncpg, which decodes binary
rows by the types the Describe announced: the rows must be what it announced, and
the values PostgreSQL's. (varvedb's ints are int8 where PostgreSQL's are int4: its
arrays of them are int8[].)"""
from __future__ import annotations

import asyncio

import asyncpg
import pytest

from server_proc import pg_server

SETUP = ["CREATE TABLE t (id int PRIMARY KEY, a int, f float8, s text)",
         "INSERT INTO t VALUES (1, 2, 0.5, 'x'), (2, 3, 1.5, 'y')"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with pg_server(str(tmp_path_factory.mktemp("pgd") / "db.varve"), SETUP) as srv:
        yield srv


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 600))


async def _prepared(conn, queries) -> list:
    """Each query prepared (Describe before any Execute), then fetched twice: its
    columns' (name, type OID) and its rows."""
    out = []
    for q in queries:
        st = await conn.prepare(q)
        rows = [tuple(r) for r in await st.fetch()]
        assert [tuple(r) for r in await st.fetch()] == rows
        out.append(([(a.name, a.type.oid) for a in st.get_attributes()], rows))
    return out


def _answers(server, pg, schema: str, queries) -> tuple[list, list]:
    async def go():
        conn = await asyncpg.connect(host="127.0.0.1", port=server.pg, user="me",
                                     database="db", ssl=False)
        try:
            got = await _prepared(conn, queries)
        finally:
            await conn.close()
        pg.connect(schema).close()      # (a schema made empty for it)
        ref = await asyncpg.connect(pg.uri, server_settings={"search_path": schema})
        try:
            for s in SETUP:
                await ref.execute(s)
            want = await _prepared(ref, queries)
        finally:
            await ref.close()
        return got, want
    return run(go())


INT8S = 1016     # int8[]: PostgreSQL's int4[] (1007) where its ints are int4
ARRAYS = ["SELECT ARRAY[1, 2] AS arr",
          "SELECT ARRAY(SELECT a FROM t ORDER BY a) AS arr",
          "SELECT id, ARRAY(SELECT a FROM t ORDER BY a) AS arr FROM t ORDER BY id",
          "SELECT ARRAY(SELECT f FROM t ORDER BY f) AS fs, ARRAY(SELECT s FROM t ORDER BY s) AS ss",
          "SELECT ARRAY[a, id] AS pair FROM t ORDER BY id",
          "SELECT ARRAY(SELECT a FROM t WHERE a > 10) AS none"]


def test_a_described_array_column_is_sent_as_the_type_announced(server, pg):
    """red-team 14 p13: ARRAY[1, 2] and ARRAY(SELECT a FROM t) were announced as text[]
    (1009) and sent as text ('{1,2}') even where binary was asked, which asyncpg
    could not read (insufficient data in buffer). Now typed by their elements' type
    as they are planned: int8[] (PostgreSQL's int4[]), float8[], text[]."""
    got, want = _answers(server, pg, "described_arrays", ARRAYS)
    assert [rows for _, rows in got] == [rows for _, rows in want]
    types = [[t for _, t in cols] for cols, _ in got]
    assert types == [[INT8S], [INT8S], [20, INT8S], [1022, 1009], [INT8S], [INT8S]]
    assert [[n for n, _ in cols] for cols, _ in got] == [[n for n, _ in cols] for cols, _ in want]


SCALARS = ["SELECT (SELECT count(*) FROM t) AS n, (SELECT max(a) FROM t) AS m",
           "SELECT (SELECT f FROM t WHERE id = 1) AS x, (SELECT s FROM t WHERE id = 2) AS y",
           "SELECT (SELECT a FROM t WHERE id = 5) AS none",
           "SELECT id, (SELECT max(a) FROM t t2 WHERE t2.id < t.id) AS m FROM t ORDER BY id",
           "SELECT id, (SELECT f FROM t t2 WHERE t2.id = t.id) AS g FROM t ORDER BY id",
           "SELECT a + (SELECT max(a) FROM t) AS b FROM t ORDER BY id"]


def test_a_described_scalar_subquery_column_is_of_the_subquerys_type(server, pg):
    """red-team 14 p7: a scalar subquery's column was described as text (the
    Describe plans it over no rows, whose NULL had no type), so asyncpg read
    ('2', '3') where PostgreSQL gives (2, 3); correlated ones and floats too."""
    got, want = _answers(server, pg, "described_scalars", SCALARS)
    assert [rows for _, rows in got] == [rows for _, rows in want]
    assert [[t for _, t in cols] for cols, _ in got] == [
        [20, 20], [701, 25], [20], [20, 20], [20, 701], [20]]


def test_a_parameter_in_a_subquery_is_typed_by_the_subquerys_table(server, pg):
    """red-team 14 p7b: `(SELECT count(*) FROM t WHERE a > $1)` described $1 as text
    (the subquery's columns were looked up in the outer FROM, none here), so asyncpg
    refused an int for it; PostgreSQL types it by t.a (int4; varvedb's int8)."""
    async def go():
        conn = await asyncpg.connect(host="127.0.0.1", port=server.pg, user="me",
                                     database="db", ssl=False)
        try:
            st = await conn.prepare("SELECT (SELECT count(*) FROM t WHERE a > $1) AS n, "
                                    "(SELECT max(f) FROM t t2 WHERE t2.id = $2) AS g")
            return [p.oid for p in st.get_parameters()], tuple(await st.fetchrow(2, 2))
        finally:
            await conn.close()
    assert run(go()) == ([20, 20], (1, 1.5))
