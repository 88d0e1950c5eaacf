"""Statement shapes (sql/shapes.py): a text that differs from an earlier one only in
its literals runs that one's compiled form with its literals as parameters — and
answers exactly what compiling the text itself answers (the oracle here), errors
included. In process through sql.run_each (what the wire protocol calls), and over
the wire with a real server and psycopg."""
from __future__ import annotations

import re
import socket
import struct
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from varvedb.errors import VarveError
from varvedb.sql import compile_text, run_each, shapes

from server_proc import ServerProcess, free_port
from sql_cases.runner import parse_case
from test_pgwire import _plain

CASES = sorted((Path(__file__).parent / "sql_cases").glob("*.sql"))
SETUP = [
    "CREATE TABLE t (id bigint PRIMARY KEY, a int, b float, s text, embedding vector(3), "
    "meta jsonb)",
    "INSERT INTO t VALUES (1, 1, 1.5, 'x', '[1,2,3]', '{\"n\": 5, \"k\": \"x\"}'), "
    "(2, -3, 2.5, 'it''s', '[0,0,1]', '{\"n\": 15, \"k\": \"1\"}'), "
    "(3, NULL, NULL, NULL, '[3,1,0]', NULL), (4, 1, -0.5, '1', '[1,1,1]', '{\"k\": [1]}'), "
    "(5, 2147483647, 1e3, '', '[2,2,2]', '[1, 2]'), (6, 7, 7.0, 'x%y', NULL, '{}')",
]


@pytest.fixture(scope="module")
def db():
    d = vv.connect(":memory:")
    d.sql(";".join(SETUP))
    yield d
    d.close()


def _answer(results):
    return [(r.columns, [tuple(_plain(v) for v in row) for row in r.rows]) for r in results]


def _run(session, text: str, use_shapes: bool):
    """The answer (columns and rows of each statement, or the error's SQLSTATE and
    message) through the shape cache, or from the text's own compile (the oracle)."""
    shapes.enabled = use_shapes
    try:
        if use_shapes:
            return _answer(run_each(session, text))
        return _answer(run_each.__globals__["_each"](session, compile_text(text), (), None))
    except VarveError as e:
        return ("error", e.sqlstate, str(e))
    finally:
        shapes.enabled = True


def _same(db, text: str):
    s = db.thread_session()
    got, want = _run(s, text, True), _run(s, text, False)
    assert got == want, text
    return got


# ---- a small grammar: one shape, filled with two sets of literals -------------------

INTS = st.sampled_from(["0", "1", "7", "-3", "2147483647", "2147483648", "-2147483648",
                        "9223372036854775807", "99999999999999999999", "- 1"])
FLOATS = st.sampled_from(["1.5", "-0.5", "0.0", "1e3", ".5", "2.", "7.0", "-1.5e-3"])
STRINGS = st.sampled_from(["'x'", "'1'", "'it''s'", "''", "'1.5'", "'x%'", "'[1,2,3]'",
                           "'abc'", "'-3'", "'é''ü'"])
LITS = st.one_of(INTS, FLOATS, STRINGS, st.just("NULL"))
VECTORS = st.lists(st.sampled_from(["0", "1", "-1", "0.5", "2"]), min_size=3,
                   max_size=3).map(lambda v: "'[" + ",".join(v) + "]'")

TEMPLATES = [
    "SELECT id FROM t WHERE a = {0} ORDER BY id",
    "SELECT id, a + {0} FROM t WHERE b > {1} ORDER BY id",
    "SELECT id FROM t WHERE s = {0} OR a < {1} ORDER BY id",
    "SELECT id FROM t WHERE a IN ({0}, {1}) ORDER BY id",
    "SELECT id FROM t WHERE a BETWEEN {0} AND {1} ORDER BY 1",
    "SELECT id, coalesce(a, {0}) AS c FROM t ORDER BY 2, 1",
    "SELECT id, s || {0} FROM t WHERE s LIKE {1} ORDER BY id",
    "SELECT {0}, {1}",
    "SELECT {0}::int + a FROM t ORDER BY id",
    "SELECT a + {0}, count(*) FROM t GROUP BY a + {1} ORDER BY 1",
    "SELECT DISTINCT a * {0} FROM t ORDER BY a * {1}",
    "SELECT id, embedding <-> {v} AS d FROM t ORDER BY embedding <-> {v} LIMIT 3",
    "SELECT id FROM t WHERE a <> {0} ORDER BY embedding <=> {v} LIMIT 2",
    "SELECT id FROM t ORDER BY id LIMIT {0} OFFSET {1}",
    "SELECT count(*) FILTER (WHERE b >= {0}), sum(a) FROM t WHERE id < {1}",
    "SELECT id FROM t WHERE id IN (SELECT id FROM t WHERE a = {0}) ORDER BY id",
    "SELECT CASE WHEN a > {0} THEN {1} ELSE 'z' END FROM t ORDER BY id",
    "SELECT id FROM t WHERE a = -{0} ORDER BY id",
    "SELECT a + {0}, count(*) FROM t GROUP BY a + {0} HAVING count(*) > {1} ORDER BY 1",
    "SELECT id, b / {0}, a % {1} FROM t ORDER BY id",
    "SELECT id, sqrt(abs(b) + {0}), abs({1}), l2_distance(embedding, {1}) FROM t ORDER BY id",
    "SELECT id /* a {0} comment */ FROM t WHERE NOT (a = {0}) -- {1}\n ORDER BY id",
    "SELECT {0}::text, CAST({1} AS float), {0}::int",
    "SELECT id FROM t WHERE {0} IS NULL OR s ILIKE {1} ORDER BY id",
    "SELECT (SELECT max(a) FROM t WHERE a < {0}), {1} || 'z'",
    "SELECT id FROM t WHERE a = ({0}) OR b = -({1}) ORDER BY id",
    "SELECT id FROM t WHERE a = ANY({0}) ORDER BY id",
    "SELECT id FROM t ORDER BY embedding <-> {v}::vector LIMIT 2",
    "SELECT id FROM t WHERE meta->>'n' > {0} OR meta->>'k' = {1} ORDER BY id",
    "SELECT id, meta->'k', meta->>{0} FROM t WHERE meta->'n' = {1} ORDER BY id",
]


@settings(max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(template=st.sampled_from(TEMPLATES), first=st.lists(LITS, min_size=2, max_size=2),
       second=st.lists(LITS, min_size=2, max_size=2), v1=VECTORS, v2=VECTORS)
def test_a_shape_answers_what_the_texts_own_compile_answers(db, template, first, second,
                                                             v1, v2):
    _same(db, template.format(*first, v=v1))
    _same(db, template.format(*second, v=v2))


def test_texts_of_one_shape_hit_and_literal_kinds_are_shapes_of_their_own(db):
    shapes.clear()
    texts = ["SELECT id FROM t WHERE a = 1 ORDER BY id", "SELECT id FROM t WHERE a = 7 "
             "ORDER BY id", "SELECT id FROM t WHERE a = -3 ORDER BY id",
             "SELECT id FROM t WHERE a = 1.5 ORDER BY id",
             "SELECT id FROM t WHERE a = '1' ORDER BY id",
             "SELECT id FROM t WHERE a = - 7 ORDER BY id"]
    answers = [_same(db, text) for text in texts]
    assert answers[:3] == [[(["id"], [(1,), (4,)])], [(["id"], [(6,)])], [(["id"], [(2,)])]]
    assert answers[3] == [(["id"], [])] and answers[4] == answers[0]
    assert answers[5] == [(["id"], [])]
    # (a number, a signed one, a float and a string: four shapes; 7 and -7 hit)
    got = shapes.stats()
    assert got["learned"] == 4 and got["hits"] == 2 and got["refused"] == 0


def test_what_the_shape_reads_stays_in_the_text(db):
    shapes.clear()
    # ORDER BY / GROUP BY positions and LIMIT are part of the statement's shape
    assert _same(db, "SELECT id, a FROM t ORDER BY 2 LIMIT 2") != \
        _same(db, "SELECT id, a FROM t ORDER BY 1 LIMIT 2")
    assert _same(db, "SELECT id, a FROM t ORDER BY 1 LIMIT 3")[0][1] == [(1, 1), (2, -3),
                                                                        (3, None)]
    assert _same(db, "SELECT id FROM t ORDER BY 9")[0] == "error"
    # `x + 1 ... GROUP BY x + 1` is one parameter; `x + 1 ... GROUP BY x + 2` two,
    # and its error is the text's own
    assert _same(db, "SELECT a + 1, count(*) FROM t GROUP BY a + 1 ORDER BY 1")[0][1][0] \
        == (-2, 1)
    assert _same(db, "SELECT a + 1, count(*) FROM t GROUP BY a + 2")[1] == "42803"
    # a vector cast's text is the cast's: kept in the text
    _same(db, "SELECT id FROM t ORDER BY embedding <-> '[1,2,3]'::vector LIMIT 2")
    assert _same(db, "SELECT id FROM t ORDER BY embedding <-> '[1,2]'::vector(2) "
                     "LIMIT 2")[0] == "error"
    compiled, params = shapes.bound(
        "SELECT id, a + 1 FROM t WHERE a > -3 AND s <> 'x' GROUP BY id, a + 1 ORDER BY 2 "
        "LIMIT 2 OFFSET 1", compile_text)
    assert params == [1, -3, "x"]
    assert re.sub(r"\s+", " ", compiled[0].text) == (
        "SELECT id, a + $1 FROM t WHERE a > $2 AND s <> $3 GROUP BY id, a + $1 "
        "ORDER BY 2 LIMIT 2 OFFSET 1")
    compiled, params = shapes.bound(
        "SELECT id FROM t WHERE a = 1 ORDER BY embedding <-> '[1,2,3]'::vector LIMIT 2",
        compile_text)
    assert params == [1] and "'[1,2,3]'::vector LIMIT 2" in compiled[0].text


def test_every_template_of_the_grammar_takes_its_shape(db):
    """(so that the property test above compares the shape path, not the fallback)"""
    shapes.clear()
    for template in TEMPLATES:
        _same(db, template.format("1", "'x'", v="'[1,2,3]'"))
        hits = shapes.stats()["hits"]
        _same(db, template.format("7", "'y'", v="'[0,1,0]'"))
        # (LIMIT, OFFSET, a vector cast's text and a number cast to int are the
        # shape's: a text with only those is no shape; a -(...) over a literal is a
        # constant no plain literal writes)
        shaped = not any(m in template for m in ("LIMIT {0}", "-({1})", "}::vector",
                                                  "SELECT {0}::int + a"))
        assert shapes.stats()["hits"] == hits + shaped, template


@pytest.mark.parametrize("text", [
    "SELECT -(5), -5",                     # a constant no plain literal writes
    "SELECT E'x', 'x'",
    "SELECT 1, 1.0",                       # equal constants of two types
    "SELECT 0.0, -0.0",
    "SELECT 0x1F + 1",
    "SELECT 'a'\n'b'",                    # one string in two pieces
    "SELECT $$x$$",
    "SELECT " + "9" * 150,                 # (kept as written: no plain number)
    "SELECT id FROM t WHERE a IN (" + ", ".join(map(str, range(1200))) + ")",
    "INSERT INTO t (id, a) VALUES (100, 1)",
    "SELECT id FROM t WHERE a = $1",
    "SELECT id FROM t AS OF VERSION 1",
    "SELECT 1; SELECT 2",
])
def test_texts_that_take_no_shape_are_compiled_as_they_are(tmp_path, text):
    d = vv.connect(tmp_path / "x.varve")
    for s in SETUP:
        d.sql(s)
    shapes.clear()
    s = d.thread_session()
    assert shapes.bound(text, compile_text) is None
    assert shapes.stats()["hits"] == 0
    if text.startswith("INSERT"):           # (a write: run once, through run_each)
        assert _run(s, text, True) == [([], [])]
        assert d.sql("SELECT a FROM t WHERE id = 100").rows == [(1,)]
    else:
        _same(d, text)
    d.close()


def test_equal_literals_of_two_types_are_compiled_as_written_and_decide_nothing(db):
    shapes.clear()
    assert shapes.bound("SELECT id FROM t WHERE a = 1 OR b = 1.0", compile_text) is None
    got = shapes.bound("SELECT id FROM t WHERE a = 1 OR b = 2.0", compile_text)
    assert got is not None and got[1] == [1, 2.0]
    assert shapes.bound("SELECT id FROM t WHERE a = 1 OR b = 1.0", compile_text) is None
    assert _same(db, "SELECT id FROM t WHERE a = 7 OR b = 7.0 ORDER BY id") == \
        [(["id"], [(6,)])]


def test_a_hit_after_a_schema_change_binds_the_new_schema(tmp_path):
    d = vv.connect(tmp_path / "x.varve")
    d.sql("CREATE TABLE u (id bigint PRIMARY KEY, a int, s text)")
    d.sql("INSERT INTO u VALUES (1, 1, 'one'), (2, 2, 'two')")
    shapes.clear()
    assert _same(d, "SELECT id, a + 1 FROM u WHERE a = 1") == [(["id", "?column?"],
                                                               [(1, 2)])]
    d.sql("DROP TABLE u")
    d.sql("CREATE TABLE u (id bigint PRIMARY KEY, a text, s text)")
    d.sql("INSERT INTO u VALUES (1, 'x', 'one'), (2, '2', 'two')")
    got = _same(d, "SELECT id, a + 5 FROM u WHERE a = 2")      # a text + an int now
    assert got[0] == "error" and got[1] == "42883"
    assert _same(d, "SELECT id, a || 'y' FROM u WHERE a = '2'") == [(["id", "?column?"],
                                                                    [(2, "2y")])]
    d.sql("DROP TABLE u")
    assert _same(d, "SELECT id, a + 1 FROM u WHERE a = 3")[1] == "42P01"
    assert shapes.stats()["hits"] >= 2
    d.close()


def test_the_cache_is_bounded(db, monkeypatch):
    shapes.clear()
    monkeypatch.setattr(shapes, "MAX_SHAPES", 4)
    for i in range(10):
        _same(db, f"SELECT id FROM t WHERE a = 1 {'AND a = 1 ' * i}ORDER BY id")
    assert shapes.stats()["size"] == 4


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_sql_case_files_selects_answer_alike_through_their_shapes(path, tmp_path):
    """Every SELECT of tests/sql_cases/*.sql, in its file's order on its file's data:
    through the shape cache as the text's own compile answers."""
    shapes.clear()
    d = vv.connect(tmp_path / "c.varve")
    session = d.thread_session()
    try:
        for st in parse_case(path).statements:
            # (in a transaction block a failed statement fails the block: run once)
            if st.sql.lstrip()[:6].lower() in ("select", "with") and session.tx is None:
                _same(d, st.sql)
            else:
                try:
                    d.sql(st.sql)
                except VarveError:
                    pass
    finally:
        d.close()
    assert shapes.stats()["learned"] + shapes.stats()["refused"] > 0


# ---- over the wire ----------------------------------------------------------------

def _query(sock, text: str) -> list[tuple[bytes, bytes]]:
    body = text.encode() + b"\0"
    sock.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)
    return _until_ready(sock)


def _until_ready(sock) -> list[tuple[bytes, bytes]]:
    out, buf = [], b""
    while True:
        while len(buf) < 5 or len(buf) < 1 + struct.unpack("!i", buf[1:5])[0]:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            buf += chunk
        n = struct.unpack("!i", buf[1:5])[0]
        out.append((buf[:1], buf[5:1 + n]))
        buf = buf[1 + n:]
        if out[-1][0] == b"Z":
            return out


def _rows(msgs) -> list:
    rows = []
    for kind, body in msgs:
        if kind == b"D":
            n, pos, row = struct.unpack("!h", body[:2])[0], 2, []
            for _ in range(n):
                size = struct.unpack("!i", body[pos:pos + 4])[0]
                pos += 4
                row.append(None if size < 0 else body[pos:pos + size].decode())
                pos += max(size, 0)
            rows.append(tuple(row))
        elif kind == b"E":
            rows.append(("error", re.search(rb"C([0-9A-Z]{5})\0", body).group(1).decode()))
    return rows


def test_the_simple_protocol_answers_as_db_sql_with_new_literals_each_time(db, tmp_path):
    """(db.sql() compiles each text as it is: the oracle.)"""
    port = free_port()
    with ServerProcess(str(tmp_path / "w.varve"), args=["--pg", str(port)]):
        with psycopg.connect(host="127.0.0.1", port=port, user="me", dbname="db",
                             sslmode="disable", connect_timeout=600, autocommit=True) as c:
            for s in SETUP:
                c.execute(s)
        with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
            sock.sendall(struct.pack("!ii", 8, 80877103))
            assert sock.recv(1) == b"N"
            body = struct.pack("!i", 196608) + b"user\0me\0\0"
            sock.sendall(struct.pack("!i", len(body) + 4) + body)
            assert _until_ready(sock)[-1] == (b"Z", b"I")
            for lit in ["1", "7", "-3", "1.5", "'1'", "'it''s'", "NULL", "99999999999999999999"]:
                for text in [f"SELECT id, s FROM t WHERE a = {lit} ORDER BY id",
                             f"SELECT id FROM t WHERE s = {lit} OR b > {lit} ORDER BY id"]:
                    got = _rows(_query(sock, text))
                    try:
                        want = [tuple(None if v is None else str(v) for v in row)
                                for row in db.sql(text).rows]
                    except VarveError as e:
                        want = [("error", e.sqlstate)]
                    assert got == want, text
