"""PostgreSQL's full-text SQL as pgvector users write it: pgvector-python's
hybrid-search example run unchanged (psycopg's %(name)s placeholders) through
db.sql() and through psycopg against `varvedb serve --pg`, its ids and scores
equal to a real PostgreSQL + pgvector's, with and without the full-text index;
the index path taken where the index's configuration matches; random tsqueries'
matches and ranks equal to PostgreSQL's; bad input refused, changing nothing.
(tests/sql_cases/fulltext.sql holds the fixed statements, compared the same way.)"""
from __future__ import annotations

import random

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

import varvedb as vv
from varvedb.errors import SqlError
from varvedb_bench.hybrid import CREATE as CREATE_DIM, GIN, HYBRID, WORDS

from server_proc import ServerProcess, free_port

CREATE = CREATE_DIM.format(dim=3)


def corpus(n: int, seed: int) -> list[tuple[str, np.ndarray]]:
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
        docs.append((text.capitalize() + rng.choice([".", "!", ""]),
                     np.array([rng.uniform(-1, 1) for _ in range(3)], np.float32)))
    return docs


def distinct_scores(rows) -> bool:
    """No two scores of the top 5 equal (ties would let either side order them)."""
    return len({round(float(s), 12) for _, s in rows}) == len(rows)


@pytest.fixture(scope="module")
def docs():
    return corpus(120, 30)


def load_pg(con, docs):
    con.execute(CREATE)
    with con.cursor() as cur:
        cur.executemany("INSERT INTO documents (content, embedding) VALUES (%s, %s)", docs)


def questions(con, n=6):
    """(embedding, query) pairs whose top 5 PostgreSQL ranks without ties."""
    rng = random.Random(7)
    found = []
    while len(found) < n:
        q = " ".join(rng.sample(WORDS[:30], 2))
        e = np.array([rng.uniform(-1, 1) for _ in range(3)], np.float32)
        rows = con.execute(HYBRID, {"embedding": e, "query": q, "k": 60}).fetchall()
        if len(rows) == 5 and distinct_scores(rows):
            found.append((e, q, [(i, float(s)) for i, s in rows]))
    return found


def same(got, want):
    assert [i for i, _ in got] == [i for i, _ in want]
    np.testing.assert_allclose([float(s) for _, s in got], [float(s) for _, s in want],
                               rtol=1e-9)


def test_the_hybrid_example_runs_unchanged_and_answers_as_postgresql(pg_conn, docs, tmp_path):
    load_pg(pg_conn, docs)
    asked = questions(pg_conn)
    db = vv.connect(str(tmp_path / "h.varve"))
    db.sql(CREATE)
    for text, e in docs:
        db.sql("INSERT INTO documents (content, embedding) VALUES (%s, %s)", [text, e])
    for indexed in (False, True):
        if indexed:
            db.sql(GIN)
            pg_conn.execute(GIN)
        for e, q, want in asked:
            params = {"embedding": e, "query": q, "k": 60}
            same(db.sql(HYBRID, params).rows, want)
            same(pg_conn.execute(HYBRID, params).fetchall(), want)
        plan = "\n".join(r[0] for r in db.sql("EXPLAIN " + HYBRID, params).rows)
        assert ("full-text index of content (english): its candidates" in plan) == indexed
        assert ("every row analyzed" in plan) == (not indexed)
    db.close()


def test_the_hybrid_example_through_psycopg_against_the_pg_wire(pg_conn, docs, tmp_path):
    load_pg(pg_conn, docs)
    asked = questions(pg_conn, 3)
    path = str(tmp_path / "w.varve")
    db = vv.connect(path)
    db.sql(CREATE)
    db.sql(GIN)
    db.close()
    port = free_port()
    with ServerProcess(path, args=["--pg", str(port)]):
        with psycopg.connect(host="127.0.0.1", port=port, user="me", dbname="db",
                             sslmode="disable", connect_timeout=600, autocommit=True) as con:
            register_vector(con)
            with con.cursor() as cur:
                cur.executemany("INSERT INTO documents (content, embedding) VALUES (%s, %s)",
                                docs)
            for e, q, want in asked:
                got = con.execute(HYBRID, {"embedding": e, "query": q, "k": 60}).fetchall()
                same([(i, float(s)) for i, s in got], want)
                bound = con.execute(HYBRID, {"embedding": e, "query": q, "k": 60},
                                    prepare=True, binary=True).fetchall()
                same([(i, float(s)) for i, s in bound], want)


TS_FORMS = ["{a} & {b}", "{a} | {b}", "{a} & !{b}", "{a} <-> {b}", "{a} <2> {b}",
            "({a} | {b}) & {c}", "{a}:* & {c}", "!({a} & {b}) & {c}", "{a} | {b} | {c}",
            "{a} <-> ({b} <-> {c})"]


def test_random_tsqueries_match_and_rank_as_postgresql(pg_conn, docs, tmp_path):
    """Each form over random words: the rows @@ matches, ts_rank and ts_rank_cd
    (normalizations 0, 1, 4, 32), with the full-text index and without."""
    load_pg(pg_conn, docs)
    db = vv.connect(str(tmp_path / "r.varve"))
    db.sql(CREATE)
    for text, e in docs:
        db.sql("INSERT INTO documents (content, embedding) VALUES ($1, $2)", [text, e])
    rng = random.Random(11)
    words = [w for w in WORDS if len(w) > 3]
    checked = 0
    for indexed in (False, True):
        if indexed:
            db.sql(GIN)
        phrases = []        # words side by side in a text (or one apart): phrases that match
        for text, _ in rng.sample(docs, 12):
            ws = [w.strip(".!").lower() for w in text.split()]
            i = rng.randrange(max(1, len(ws) - 2))
            d = rng.choice((1, 2))
            if i + d < len(ws):
                op = "<->" if d == 1 else "<2>"
                phrases.append(f"{ws[i]} {op} {ws[i + d]}" + rng.choice(("", f" | {ws[i]}",
                                                                        f" & !{ws[-1]}")))
        for form in TS_FORMS * 3 + phrases:
            q = form.format(a=rng.choice(words), b=rng.choice(words), c=rng.choice(words))
            cols = ", ".join([f"ts_rank(v, q, {m})" for m in (0, 1, 32)] +
                             [f"ts_rank_cd(v, q, {m})" for m in (0, 1, 4, 32)])
            sql = (f"SELECT id, {cols} FROM (SELECT id, to_tsvector('english', content) v, "
                   f"to_tsquery('english', %s) q FROM documents) s WHERE v @@ q ORDER BY id")
            want = pg_conn.execute(sql, (q,)).fetchall()
            mine = ("SELECT id, " + cols.replace("(v, q", "(to_tsvector('english', content), "
                                                 "to_tsquery('english', $1)")
                    + " FROM documents WHERE to_tsvector('english', content) @@ "
                      "to_tsquery('english', $1) ORDER BY id")
            got = db.sql(mine, [q]).rows
            assert [r[0] for r in got] == [r[0] for r in want], q
            np.testing.assert_allclose(np.array([r[1:] for r in got], float).reshape(-1),
                                       np.array([r[1:] for r in want], float).reshape(-1),
                                       rtol=2e-6, atol=1e-9, err_msg=q)
            checked += bool(want)
    assert checked >= 20
    db.close()


def test_bad_full_text_input_is_refused_and_changes_nothing(tmp_path):
    db = vv.connect(str(tmp_path / "b.varve"))
    db.sql(CREATE)
    db.sql("INSERT INTO documents (content, embedding) VALUES ('cats and dogs', '[1,2,3]')")
    before = db.sql("SELECT id, content FROM documents").rows
    version = db.version
    for bad, state in (
            ("SELECT to_tsvector('klingon', content) FROM documents", "42704"),
            ("SELECT to_tsvector('french', content) FROM documents", "0A000"),
            ("SELECT to_tsquery('english', 'cats &')", "42601"),
            ("SELECT to_tsquery('english', 'cats dogs')", "42601"),
            ("SELECT to_tsquery('english', '(cats')", "42601"),
            ("SELECT to_tsquery('english', 'cats:A')", "0A000"),
            ("SELECT ts_rank('{0.1,2,0.4,1}', to_tsvector(content), to_tsquery('cat')) "
             "FROM documents", "22023"),
            ("UPDATE documents SET content = 'x' WHERE to_tsvector('english', content) @@ "
             "to_tsquery('english', 'cats & ')", "42601"),
            ("DELETE FROM documents WHERE to_tsvector('nosuch', content) @@ "
             "to_tsquery('cats')", "42704"),
            ("CREATE INDEX ON documents USING GIN (to_tsvector('nosuch', content))", "42704"),
            ("CREATE INDEX ON documents USING GIN (to_tsvector('english', embedding))",
             "42883"),
            ("CREATE INDEX ON documents USING GIN (content)", "0A000")):
        with pytest.raises(SqlError) as e:
            db.sql(bad)
        assert isinstance(e.value, vv.VarveError) and e.value.sqlstate == state, bad
    assert db.sql("SELECT id, content FROM documents").rows == before
    assert db.version == version
    assert not db.collection("documents").schema.fields["content"].fts
    db.close()


def test_a_gin_index_created_over_rows_serves_rows_written_after_it_and_a_reopen(tmp_path):
    path = str(tmp_path / "g.varve")
    db = vv.connect(path)
    db.sql(CREATE)
    for text, e in corpus(60, 3):
        db.sql("INSERT INTO documents (content, embedding) VALUES ($1, $2)", [text, e])
    q = ("SELECT id FROM documents WHERE to_tsvector('english', content) @@ "
         "to_tsquery('english', 'cats & !dog | river') ORDER BY id")
    before = db.sql(q).rows
    assert before
    db.sql(GIN)
    assert db.sql(GIN).status == "CREATE INDEX"     # the column's index is already that one
    assert db.collection("documents").schema.fields["content"].ts_config == "english"
    assert db.sql(q).rows == before
    db.sql("INSERT INTO documents (content, embedding) VALUES ('Rivers run', '[0,0,1]'), "
           "(NULL, '[0,1,0]')")
    after = db.sql(q).rows
    assert after == before + [(61,)]
    # NULL @@ q is NULL through the index as without it
    nulls = ("SELECT id, to_tsvector('english', content) @@ to_tsquery('english', 'river') "
             "FROM documents WHERE id >= 61 ORDER BY id")
    assert db.sql(nulls).rows == [(61, True), (62, None)]
    db.close()
    db = vv.connect(path)
    assert db.sql(q).rows == after
    plan = "\n".join(r[0] for r in db.sql("EXPLAIN " + q).rows)
    assert "its candidates analyzed and rechecked" in plan
    db.close()
