"""db.sql(): pgvector's dialect on the query layer — Python-side behaviour
(parameters, plans, transactions, time travel, errors, results). Row-level
semantics against real PostgreSQL are in test_sql_cases.py."""
from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import varvedb as vv
from conftest import file_digest, restamp, stamped
from varvedb.query.plan import Aggregate, Output, Sort, Strategy, VectorTopK
from varvedb.sql import compile_text
from varvedb_bench.sql_shapes import items_table as _items


@pytest.fixture
def db(tmp_path):
    d = vv.connect(tmp_path / "s.varve")
    yield d
    d.close()


# ---- tables are collections ------------------------------------------------------

def test_sql_tables_and_api_collections_are_the_same_objects(db):
    db.sql("CREATE TABLE docs (id bigserial PRIMARY KEY, body text, embedding vector(3))")
    docs = db.collection("docs")
    assert docs.schema.fields["embedding"].dim == 3
    ids = docs.insert([{"body": "from the api", "embedding": [1, 2, 3]}])
    r = db.sql("INSERT INTO docs (body, embedding) VALUES ('from sql', '[3,2,1]') RETURNING id")
    assert r.rows == [(ids[0] + 1,)]
    assert docs.get(ids[0] + 1)["body"] == "from sql"
    api = db.create_collection("notes", {"n": "int", "v": "vector(2)"})
    api.insert([{"id": 5, "n": 1, "v": [0, 1]}])
    assert db.sql("SELECT id, n, v FROM notes").rows[0][:2] == (5, 1)
    assert db.sql("SELECT * FROM docs ORDER BY id").columns == ["id", "body", "embedding"]


def test_a_table_without_primary_key_hides_its_id(db):
    db.sql("CREATE TABLE t (x int, y text)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    r = db.sql("SELECT * FROM t ORDER BY x")
    assert r.columns == ["x", "y"] and r.rows == [(1, "a"), (2, "b")]


def test_a_primary_key_of_two_columns_is_refused_naming_them_and_why(db):
    """pgvector's README's PRIMARY KEY (model_id, item_id): the engine keys a row by
    its one id and keeps nothing else unique, so the pair is refused (0A000) with
    the way to key rows by both, not taken without its uniqueness."""
    with pytest.raises(vv.NotSupportedError, match=r"\(model_id, item_id\).*one id") as e:
        db.sql("CREATE TABLE e (model_id bigint, item_id bigint, embedding vector(3), "
               "PRIMARY KEY (model_id, item_id))")
    assert e.value.sqlstate == "0A000" and "e" not in db.collections()


def test_an_array_column_is_a_json_field_that_keeps_its_element_type(db, tmp_path):
    """vector(3)[] / integer[]: json fields with array_of, kept across a reopen; the
    embedded API's writes are checked against the element type (a vector element is
    its text, as SQL keeps it), a refused one changes nothing."""
    db.sql("CREATE TABLE arr (id bigint PRIMARY KEY, e vector(3)[], i integer[])")
    fields = db["arr"].schema.fields
    assert (fields["e"].kind, fields["e"].array_of, fields["i"].array_of) == \
        ("json", "vector(3)", "int")
    db["arr"].insert([{"id": 1, "e": ["[1,2,3]", None], "i": [1, 2]}])
    for bad in ({"id": 2, "i": ["x"]}, {"id": 2, "i": [True]}, {"id": 2, "e": [[1, 2, 3]]},
                {"id": 2, "i": 3}):
        with pytest.raises(vv.errors.FieldTypeError):
            db["arr"].insert([bad])
    db.close()
    again = vv.connect(tmp_path / "s.varve")
    try:
        assert again["arr"].schema.fields["e"].array_of == "vector(3)"
        (row,) = again.sql("SELECT e, i FROM arr").rows
        assert [list(x) if x is not None else None for x in row[0]] == [[1, 2, 3], None]
        assert row[1] == [1, 2]
    finally:
        again.close()


def test_the_api_refuses_an_array_element_as_sql_does(db, tmp_path):
    """defect: the embedded API stored a halfvec(n)[] element past half precision
    (and any text at all for a vector element), which SQL's write refuses (22003):
    both now check an element with one check (schema.array_vector), and a refused
    write leaves the file unchanged."""
    db.sql("CREATE TABLE arr (id bigint PRIMARY KEY, h halfvec(2)[], v vector[])")
    path = tmp_path / "s.varve"
    before = path.read_bytes()
    for bad, sqlstate in [({"h": ["[1,70000]"]}, "22003"), ({"h": ["[1,-65520]"]}, "22003"),
                          ({"v": ["[1e39,1]"]}, "22003"), ({"v": ["[nan]"]}, "22000"),
                          ({"h": ["[1,2,3]"]}, "22000"), ({"v": ["[]"]}, "22000"),
                          ({"v": ["[1,x]"]}, "22P02"), ({"h": [None, "1,2"]}, "22P02")]:
        col, value = next(iter(bad.items()))
        text = "{" + ",".join("NULL" if x is None else f'"{x}"' for x in value) + "}"
        with pytest.raises(vv.VarveError) as sql_error:
            db.sql(f"INSERT INTO arr (id, {col}) VALUES (1, '{text}')")
        with pytest.raises(vv.VarveError) as api_error:
            db["arr"].insert([{"id": 1, **bad}])
        assert sql_error.value.sqlstate == api_error.value.sqlstate == sqlstate, bad
        if sqlstate == "22003":
            assert isinstance(api_error.value, vv.VectorRangeError)
    assert db["arr"].count() == 0 and path.read_bytes() == before
    db["arr"].insert([{"id": 1, "h": ["[1,65504]", None], "v": ["[1e38]"]}])
    (row,) = db.sql("SELECT h, v FROM arr").rows
    assert row[0][0].tolist() == [1.0, 65504.0] and row[0][1] is None
    assert row[1][0].tolist() == [np.float32(1e38)]


@pytest.mark.parametrize("x", [float("nan"), float("inf"), -float("inf")])
def test_an_array_of_vectors_refuses_a_parameters_nan_or_infinity(db, x):
    """A vector(2)[] parameter's element is checked as a vector's input is (22000),
    not stored to fail every later read of its row (red-team 8 F09)."""
    db.sql("CREATE TABLE b (id bigint PRIMARY KEY, av vector(2)[], ah halfvec[])")
    db.sql("INSERT INTO b VALUES (1, $1, $1)", [[[1.0, 2.0]]])
    for sql in ("INSERT INTO b (id, av) VALUES (2, $1)", "INSERT INTO b (id, ah) VALUES (2, $1)"):
        with pytest.raises(vv.VarveError) as e:
            db.sql(sql, [[[1.0, x]]])
        assert e.value.sqlstate == "22000"
    with pytest.raises(vv.VarveError) as e:
        db.sql("INSERT INTO b (id, ah) VALUES (2, $1)", [[[1.0, 70000.0]]])
    assert e.value.sqlstate == "22003"
    rows = db.sql("SELECT id, av, ah FROM b").rows
    assert [(i, [v.tolist() for v in a], [v.tolist() for v in h]) for i, a, h in rows] == \
        [(1, [[1.0, 2.0]], [[1.0, 2.0]])]


def test_every_column_type_round_trips(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a smallint, b bigint, c real, "
           "d double precision, e boolean, f varchar(10), g jsonb, h timestamptz, "
           "i vector(2), k halfvec(2))")
    ts = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
    db.sql("INSERT INTO t VALUES (1, 2, 3, 0.5, 1.25, true, 'x', '{\"a\": [1, 2]}', "
           "'2026-11-30 12:00:00+00', '[1,2]', '[0.5,1.5]')")
    row = db.sql("SELECT * FROM t").rows[0]
    assert row[:9] == (1, 2, 3, 0.5, 1.25, True, "x", {"a": [1, 2]}, ts)
    assert row[9].dtype == np.float32 and row[9].tolist() == [1, 2]
    assert row[10].dtype == np.float16 and row[10].tolist() == [0.5, 1.5]


# ---- parameters ------------------------------------------------------------------

@pytest.mark.parametrize("q", [np.array([1, 0, 0], np.float32), [1, 0, 0], "[1,0,0]",
                               (1.0, 0.0, 0.0)])
def test_a_vector_parameter_in_every_form(db, q):
    db.sql("CREATE TABLE v (id int PRIMARY KEY, e vector(3))")
    db.sql("INSERT INTO v VALUES (1, $1), (2, $2)", [[0, 1, 0], np.array([1, 0.1, 0])])
    r = db.sql("SELECT id, e <-> $1 AS d FROM v ORDER BY e <-> $1 LIMIT 1", [q])
    assert r.rows[0][0] == 2 and r.rows[0][1] == pytest.approx(0.1, rel=1e-6)


def test_a_wrong_dimension_is_22000_and_changes_nothing(db):
    db.sql("CREATE TABLE v (id int PRIMARY KEY, e vector(3))")
    with pytest.raises(vv.VarveError) as e:
        db.sql("INSERT INTO v VALUES (1, '[1,2]')")
    assert e.value.sqlstate == "22000"
    assert str(e.value) == "expected 3 dimensions, not 2"      # (PostgreSQL's words)
    with pytest.raises(vv.VarveError) as e:
        db.sql("SELECT id FROM v ORDER BY e <-> $1 LIMIT 1", [[1, 2]])
    assert e.value.sqlstate == "22000"
    assert db.sql("SELECT count(*) FROM v").rows == [(0,)]


def test_missing_parameter_is_an_error(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY)")
    with pytest.raises(vv.VarveError) as e:
        db.sql("SELECT id FROM t WHERE id = $2", [1])
    assert e.value.sqlstate in ("42P02", "42601")


# ---- ANN through SQL is the query layer's vector top-k ---------------------------------

def test_sql_ann_is_the_same_plan_and_answer_as_the_api(db):
    x = _items(db)
    c = db.collection("items")
    q = x[7] + 0.01
    hits = c.search(vector=q, where="tag = $1", params=[3], limit=10, select=[],
                    metric="l2") if "metric" in c.search.__code__.co_varnames else \
        c.search(vector=q, where="tag = $1", params=[3], limit=10, select=[])
    r = db.sql("SELECT id, embedding <-> $1 AS distance FROM items WHERE tag = $2 "
               "ORDER BY embedding <-> $1 LIMIT 10", [q, 3])
    assert [row[0] for row in r.rows] == [h.id for h in hits]
    assert [row[1] for row in r.rows] == pytest.approx([h.score for h in hits])
    top = r.plan.find(VectorTopK)
    assert top.metric == "l2" and top.k == 10


def test_an_unfiltered_ann_query_walks_the_graph_with_the_session_ef(db):
    x = _items(db)
    s = db.session()
    s.sql("SET hnsw.ef_search = 37")
    assert s.sql("SHOW hnsw.ef_search").rows == [("37",)]
    r = s.sql("SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 5", [x[1]])
    top = r.plan.find(VectorTopK)
    assert top.strategy == Strategy.GRAPH and top.ef == 37
    assert r.rows[0] == (1,)
    # another session keeps the index's default
    r2 = db.sql("SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 5", [x[1]])
    assert r2.plan.find(VectorTopK).ef == 100
    s.sql("SET hnsw.iterative_scan = relaxed_order")       # accepted, changes nothing
    with pytest.raises(vv.VarveError) as e:
        s.sql("SET hnsw.ef_search = 0")
    assert e.value.sqlstate == "22023"


def test_the_ann_subquery_idiom_reorders_outside(db):
    x = _items(db, index=False)
    inner = db.sql("SELECT id, embedding <-> $1 AS d FROM items ORDER BY d LIMIT 5", [x[0]])
    outer = db.sql("SELECT * FROM (SELECT id, embedding <-> $1 AS d FROM items "
                   "ORDER BY embedding <-> $1 LIMIT 5) s ORDER BY id DESC", [x[0]])
    assert sorted(inner.rows, key=lambda r: -r[0]) == outer.rows
    assert outer.columns == ["id", "d"]
    ids = db.sql("SELECT title FROM items WHERE id IN (SELECT id FROM items "
                 "ORDER BY embedding <-> $1 LIMIT 3) ORDER BY title", [x[0]])
    assert len(ids.rows) == 3


def test_the_relaxed_order_cte_idiom(db):
    x = _items(db)
    r = db.sql("WITH relaxed AS MATERIALIZED (SELECT id, embedding <-> $1 AS distance FROM items "
               "WHERE tag = 3 ORDER BY distance LIMIT 5) SELECT * FROM relaxed "
               "ORDER BY distance + 0", [x[13]])
    assert r.columns == ["id", "distance"] and r.rows[0] == (13, 0.0)
    assert [d for _, d in r.rows] == sorted(d for _, d in r.rows)
    no_alias = db.sql("SELECT id FROM (SELECT id FROM items ORDER BY embedding <-> $1 LIMIT 3) "
                      "ORDER BY id", [x[13]])
    assert (13,) in no_alias.rows and len(no_alias.rows) == 3


def test_order_by_distance_without_limit_orders_every_row(db):
    x = _items(db, n=50, index=False)
    r = db.sql("SELECT id FROM items ORDER BY embedding <#> $1", [x[0]])
    dots = x @ x[0]
    assert [row[0] for row in r.rows] == list(np.argsort(-dots, kind="stable"))


@pytest.mark.parametrize("op, fn", [
    ("<->", lambda a, q: np.linalg.norm(a - q, axis=1)),
    ("<#>", lambda a, q: -(a @ q)),
    ("<=>", lambda a, q: 1 - (a @ q) / np.linalg.norm(a, axis=1) / np.linalg.norm(q)),
    ("<+>", lambda a, q: np.abs(a - q).sum(axis=1)),
])
def test_each_distance_operator_matches_numpy(db, op, fn):
    x = _items(db, n=200, index=False)
    q = x[3] * 0.5 + 0.1
    r = db.sql(f"SELECT id, embedding {op} $1 FROM items ORDER BY embedding {op} $1 LIMIT 7",
               [q])
    want = fn(x.astype(np.float64), q.astype(np.float64))
    order = np.argsort(want, kind="stable")[:7]
    assert [row[0] for row in r.rows] == order.tolist()
    assert [row[1] for row in r.rows] == pytest.approx(want[order], rel=1e-5, abs=1e-6)


# ---- plans -----------------------------------------------------------------------

def test_explain_prints_the_query_layer_plan(db):
    x = _items(db)
    plan = db.sql("EXPLAIN SELECT id FROM items WHERE tag = 1 ORDER BY embedding <-> $1 "
                  "LIMIT 3", [x[0]])
    assert plan.columns == ["QUERY PLAN"]
    text = "\n".join(r[0] for r in plan.rows)
    assert "VectorTopK embedding (l2) k=3" in text and "Filter tag = 1" in text
    assert "Scan items" in text
    analyzed = db.sql("EXPLAIN ANALYZE SELECT id FROM items WHERE tag = 1 "
                      "ORDER BY embedding <-> $1 LIMIT 3", [x[0]])
    first = analyzed.rows[0][0]
    assert first.startswith("Output id") and "actual rows=3" in first and "ms)" in first
    agg = db.sql("EXPLAIN SELECT tag, count(*) FROM items GROUP BY tag ORDER BY tag")
    assert isinstance(agg.plan.find(Aggregate), Aggregate)
    assert isinstance(agg.plan.find(Sort), Sort)


def test_a_repeated_statement_is_parsed_once(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
    text = "SELECT x FROM t WHERE id = $1"
    db.sql(text, [1])
    before = compile_text.cache_info()
    for i in range(5):
        db.sql(text, [i])
    after = compile_text.cache_info()
    assert after.hits - before.hits == 5 and after.misses == before.misses


def test_a_statement_rebinds_after_ddl(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
    db.sql("INSERT INTO t VALUES (1, 2)")
    assert db.sql("SELECT * FROM t").columns == ["id", "x"]
    db.sql("DROP TABLE t")
    db.sql("CREATE TABLE t (id int PRIMARY KEY, y text, x int)")
    db.sql("INSERT INTO t VALUES (1, 'a', 2)")
    assert db.sql("SELECT * FROM t").rows == [(1, "a", 2)]


# Every statement class sql's compile_statement functions make, with the kind its
# Compiled takes (sql.Compiled.kind: what the implicit transaction, READ ONLY and
# the servers go by): CREATE INDEX of each method is DDL.
STATEMENT_KINDS = {
    "INSERT INTO t VALUES (1)": "write", "UPDATE t SET x = 1": "write",
    "DELETE FROM t": "write", "COPY t FROM STDIN": "write", "COPY t TO STDOUT": "select",
    "CREATE EXTENSION IF NOT EXISTS vector": "ddl", "ALTER EXTENSION vector UPDATE": "ddl",
    "CREATE TABLE u (id int PRIMARY KEY)": "ddl", "DROP TABLE t": "ddl",
    "ALTER TABLE t ADD COLUMN y int": "ddl", "ALTER TABLE t RENAME x TO y": "ddl",
    "CREATE INDEX i ON t (x)": "ddl", "CREATE INDEX i ON t USING hash (x)": "ddl",
    "CREATE INDEX i ON t USING hnsw (e vector_cosine_ops)": "ddl",
    "CREATE INDEX i ON t USING ivfflat (e vector_l2_ops) WITH (lists = 1)": "ddl",
    "CREATE INDEX i ON t USING ivfpq (e vector_l2_ops) WITH (pq_m = 1)": "ddl",
    "CREATE INDEX i ON t USING gin (to_tsvector('english', s))": "ddl",
    "SET hnsw.ef_search = 10": "command", "SHOW hnsw.ef_search": "select",
    "BEGIN": "transaction", "COMMIT": "transaction", "EXPLAIN SELECT 1": "command",
    "VACUUM": "command", "ANALYZE": "command", "DEALLOCATE ALL": "command",
    "DISCARD ALL": "command", "SELECT 1": "select"}


def test_every_statement_class_compiles_to_its_kind():
    """An impl names its statement's kind only on purpose (statement_kind: COPY TO,
    SHOW read): CREATE INDEX's index method sat in the attribute the kind was taken
    from, so CREATE INDEX was no DDL — committed alone where its text failed after it,
    taken in a READ ONLY block (red-team 19). Each class of each module's
    compile_statement is compiled here, so a new one is too."""
    import inspect
    import re
    from varvedb.sql import commands, ddl, dml
    made = {}
    for text, kind in STATEMENT_KINDS.items():
        c = compile_text(text)[0]
        assert c.kind == kind, text
        made.setdefault(type(c.impl).__module__, set()).add(type(c.impl).__name__)
    for module in (dml, ddl, commands):
        named = set(re.findall(r"return (\w+)\(", inspect.getsource(module.compile_statement)))
        assert named and named == made[module.__name__], module.__name__


def test_create_index_is_undone_with_its_text_and_refused_read_only(tmp_path):
    """A text whose statement after CREATE INDEX fails (PostgreSQL's implicit
    transaction), and a ROLLBACK, leave no index of any method, in the file too;
    a READ ONLY block refuses it (25006) — red-team 19."""
    path = tmp_path / "i.varve"
    db = vv.connect(path)
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, s text, e vector(3))")
    db.sql("INSERT INTO t VALUES (1, 1, 'a b', '[1,2,3]'), (2, 2, 'c', '[3,2,1]')")
    made = [t for t in STATEMENT_KINDS if t.startswith("CREATE INDEX")]
    before = db.sql("SELECT relname FROM pg_class WHERE relkind = 'i' ORDER BY 1").rows
    for text in made:
        with pytest.raises(vv.VarveError) as e:
            db.sql(f"{text}; SELECT 1/0")
        assert e.value.sqlstate == "22012", text
        db.sql("BEGIN")
        db.sql(text)
        db.sql("ROLLBACK")
        db.sql("BEGIN READ ONLY")
        with pytest.raises(vv.ReadOnlyError):
            db.sql(text)
        db.sql("ROLLBACK")
    db.close()
    db = vv.connect(path)
    assert db.sql("SELECT relname FROM pg_class WHERE relkind = 'i' ORDER BY 1").rows == before
    fields = db.collection("t").schema.fields
    assert not fields["e"].vector_specs and fields["x"].index is None and not fields["s"].fts
    db.close()


# ---- writes ------------------------------------------------------------------------

def test_insert_returning_on_conflict(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, s text)")
    assert db.sql("INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'b') RETURNING id, x * 10 AS y"
                  ).rows == [(1, 10), (2, 20)]
    r = db.sql("INSERT INTO t (id, x) VALUES (2, 5), (3, 3) ON CONFLICT (id) DO NOTHING "
               "RETURNING id")
    assert r.rows == [(3,)] and r.status == "INSERT 0 1"
    r = db.sql("INSERT INTO t (id, x) VALUES (2, 5), (4, 4) ON CONFLICT (id) DO UPDATE "
               "SET x = EXCLUDED.x + t.x RETURNING id, x, s")
    assert r.rows == [(2, 7, "b"), (4, 4, None)]
    with pytest.raises(vv.VarveError) as e:
        db.sql("INSERT INTO t (id, x) VALUES (5, 1), (5, 2) ON CONFLICT (id) DO UPDATE "
               "SET x = EXCLUDED.x")
    assert e.value.sqlstate == "21000"
    assert db.sql("SELECT count(*) FROM t").rows == [(4,)]


def test_update_and_delete_with_expressions_and_returning(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, s text)")
    db.sql("INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, NULL)")
    r = db.sql("UPDATE t SET x = x * 100 + id, s = coalesce(s, 'none') WHERE x >= $1 "
               "RETURNING id, x, s", [2])
    assert sorted(r.rows) == [(2, 202, "b"), (3, 303, "none")] and r.status == "UPDATE 2"
    r = db.sql("DELETE FROM t WHERE s = 'none' OR id = 1 RETURNING id, x")
    assert sorted(r.rows) == [(1, 1), (3, 303)] and r.status == "DELETE 2"
    assert db.sql("SELECT * FROM t").rows == [(2, 202, "b")]
    with pytest.raises(vv.VarveError) as e:
        db.sql("UPDATE t SET id = 5")
    assert e.value.sqlstate == "0A000"


def test_copy_from_csv_and_text(db, tmp_path):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, s text, v vector(2))")
    (tmp_path / "a.csv").write_text('id,x,s,v\n1,10,"hello, world","[1,2]"\n2,,,\n')
    assert db.sql(f"COPY t FROM '{tmp_path}/a.csv' WITH (FORMAT csv, HEADER true)"
                  ).status == "COPY 2"
    (tmp_path / "a.txt").write_text("3\t30\ttab\\there\t[3,4]\n4\t\\N\t\\N\t\\N\n")
    assert db.sql(f"COPY t (id, x, s, v) FROM '{tmp_path}/a.txt'").status == "COPY 2"
    rows = db.sql("SELECT id, x, s, v FROM t ORDER BY id").rows
    assert [r[:3] for r in rows] == [(1, 10, "hello, world"), (2, None, None),
                                     (3, 30, "tab\there"), (4, None, None)]
    assert rows[0][3].tolist() == [1, 2] and rows[1][3] is None
    with pytest.raises(vv.VarveError) as e:
        db.sql(f"COPY t FROM '{tmp_path}/missing.csv' WITH (FORMAT csv)")
    assert e.value.sqlstate == "58P01"


# ---- transactions --------------------------------------------------------------------

def test_begin_commit_rollback_and_the_failed_block(db):
    s = db.session()
    s.sql("CREATE TABLE t (id int PRIMARY KEY)")
    s.sql("BEGIN")
    s.sql("INSERT INTO t VALUES (1)")
    assert s.sql("SELECT count(*) FROM t").rows == [(1,)]
    assert db.sql("SELECT count(*) FROM t").rows == [(0,)]     # another session
    s.sql("ROLLBACK")
    assert s.sql("SELECT count(*) FROM t").rows == [(0,)]
    s.sql("BEGIN")
    s.sql("INSERT INTO t VALUES (2)")
    with pytest.raises(vv.VarveError):
        s.sql("INSERT INTO t VALUES (2)")
    with pytest.raises(vv.VarveError) as e:
        s.sql("SELECT 1")
    assert e.value.sqlstate == "25P02"
    assert s.sql("COMMIT").status == "ROLLBACK"       # a failed block only rolls back
    assert s.sql("SELECT count(*) FROM t").rows == [(0,)]
    s.sql("BEGIN")
    s.sql("INSERT INTO t VALUES (3)")
    assert s.sql("COMMIT").status == "COMMIT"
    assert db.sql("SELECT id FROM t").rows == [(3,)]


# ---- time travel and history -------------------------------------------------------------

def test_as_of_version_and_timestamp(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    v1 = db.version
    stamp = db.history()[-1].timestamp
    db.sql("UPDATE t SET x = 2")
    db.sql("INSERT INTO t VALUES (2, 5)")
    assert db.sql(f"SELECT id, x FROM t AS OF VERSION {v1}").rows == [(1, 1)]
    assert db.sql("SELECT id, x FROM t ORDER BY id AS OF VERSION $1", [v1 + 1]).rows == [(1, 2)]
    assert db.sql(f"SELECT x FROM t WHERE id = 1 AS OF TIMESTAMP '{stamp.isoformat()}'"
                  ).rows == [(1,)]
    assert db.sql("SELECT count(*) FROM t").rows == [(2,)]
    with pytest.raises(vv.VarveError):
        db.sql("SELECT id FROM t AS OF VERSION 999")


@pytest.mark.parametrize("key", ["int", "text"])
def test_where_id_equals_is_the_row_each_view_sees(db, key):
    """`WHERE id = v` looks its row up by id (no scan of the ids): the answer is
    a scan's (`id + 0 = v` names no plain id) in every view, the
    newest, an older version's, a transaction's own writes, after updates,
    deletes and an id inserted again."""
    scanned = "id + 0" if key == "int" else "id || ''"    # not a plain id: a scan
    db.sql(f"CREATE TABLE t (id {'bigint' if key == 'int' else 'text'} PRIMARY KEY, x int)")
    ids = [i if key == "int" else f"k{i}" for i in range(6)]
    for i, k in enumerate(ids):
        db.sql("INSERT INTO t VALUES (%s, %s)", (k, i))
    v1 = db.version
    db.sql("UPDATE t SET x = x + 10 WHERE x < 3")
    db.sql("DELETE FROM t WHERE x = 4")
    v2 = db.version
    s = db.session()
    s.sql("BEGIN")
    s.sql("UPDATE t SET x = x + 100 WHERE x = 5")
    s.sql("INSERT INTO t VALUES (%s, 7)", (ids[4],))      # deleted, then again

    def same(run, as_of=""):
        for k in ids + ([99, -1] if key == "int" else ["zz"]):
            got = run(f"SELECT id, x FROM t WHERE id = %s{as_of}", (k,))
            scan = run(f"SELECT id, x FROM t WHERE {scanned} = %s{as_of}", (k,))
            assert got.rows == scan.rows, k
    same(db.sql)
    same(db.sql, f" AS OF VERSION {v1}")
    same(db.sql, f" AS OF VERSION {v2}")
    same(s.sql)
    assert s.sql("SELECT x FROM t WHERE id = %s", (ids[4],)).rows == [(7,)]
    s.sql("ROLLBACK")
    assert db.sql("SELECT x FROM t WHERE id = %s", (ids[1],)).rows == [(11,)]
    assert db.sql("SELECT x FROM t WHERE id = %s", (ids[4],)).rows == []


# AS OF is found among the statement's tokens: the same words in a comment or a
# string are not a clause (issue 26: a comment used to change the answer)
_NOT_AS_OF = [
    "SELECT count(*) FROM t -- AS OF VERSION {v}",
    "SELECT count(*) FROM t --AS OF VERSION {v}\n",
    "SELECT count(*) FROM t /* AS OF VERSION {v} */",
    "SELECT count(*) FROM t /* AS OF VERSION {v} */ ;",
    "SELECT count(*) FROM t /* x /* AS OF VERSION {v} */ AS OF VERSION {v} */",
    "SELECT count(*) FROM t WHERE 'x' <> 'x AS OF TIMESTAMP ' || ''''",
    "SELECT count(*) FROM t WHERE s <> ' AS OF VERSION {v}'",
    "SELECT count(*) FROM t WHERE s <> $$ AS OF VERSION {v}$$",
    "SELECT count(*) FROM t WHERE s <> $q$ AS OF BRANCH 'main' VERSION {v} $q$",
    "SELECT count(*) FROM t WHERE s <> E'\\' AS OF VERSION {v}'",
    'SELECT count(*) AS "AS OF VERSION {v}" FROM t',
    'SELECT count(*) AS "as" FROM t "of"',          # quoted: names, not the keywords
    "SELECT count(*) FROM t WHERE s <> 'x' -- bias of\n",
]
_AS_OF = [
    "SELECT count(*) FROM t AS OF VERSION {v}",
    "SELECT count(*) FROM t AS OF VERSION {v}; -- a note",
    "SELECT count(*) FROM t /* note */ AS OF /* c */ VERSION {v} /* note */",
    "SELECT count(*) FROM t\n  as of version {v}\n;",
    "SELECT count(*) FROM t WHERE s <> ' AS OF VERSION 99' AS OF VERSION {v}",
    "SELECT count(*) FROM t AS OF BRANCH 'main' VERSION {v}",
    "SELECT count(*) FROM t AS OF BRANCH $$main$$ VERSION {v} -- AS OF VERSION 99",
    "SELECT count(*) FROM t AS OF BRANCH E'ma\\x69n' VERSION $1",
    "SELECT count(*) FROM t AS OF VERSION $1",
    "SELECT count(*) FROM t AS OF TIMESTAMP '{ts}'",
    "SELECT count(*) FROM t AS OF TIMESTAMP $${ts}$$ -- AS OF VERSION 99",
    "SELECT count(*) FROM t AS OF BRANCH $2 TIMESTAMP $3",
    # the words with no space around them (the text is scanned only where both stand)
    "SELECT count(*) FROM t As/**/oF VERSION {v}",
    "SELECT count(*) FROM t\tAS--\nOF\tVERSION {v}",
    'SELECT count(*) FROM "t"AS OF VERSION {v}',
    "SELECT count(*) FROM t WHERE s <> $$x$$AS OF VERSION {v}",
]


def test_as_of_in_a_comment_or_a_string_is_not_a_clause(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, s text)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    v = db.version
    ts = db.history()[-1].timestamp.isoformat()
    db.sql("INSERT INTO t VALUES (2, 'b')")
    params = [v, "main", ts]
    for text in _NOT_AS_OF:
        sql = text.format(v=v, ts=ts)
        assert db.sql(sql).rows == [(2,)], sql
    for text in _AS_OF:
        sql = text.format(v=v, ts=ts)
        used = params[:max((int(c) for c in "123" if f"${c}" in sql), default=0)]
        assert db.sql(sql, used).rows == [(1,)], sql
    with pytest.raises(vv.VarveError) as e:      # the clause ends the statement
        db.sql(f"SELECT count(*) FROM t AS OF VERSION {v} WHERE id = 1")
    assert e.value.sqlstate == "42601"


def test_history_table_functions(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    db.sql("UPDATE t SET x = 2 WHERE id = 1")
    db.sql("CREATE TABLE u (id int PRIMARY KEY)")
    db.sql("INSERT INTO u VALUES (1)")
    everything = db.sql("SELECT version, rows_changed FROM varvedb_history()")
    assert [r[0] for r in everything.rows] == [h.version for h in db.history()]
    of_t = db.sql("SELECT version FROM varvedb_history('t') ORDER BY version")
    assert [r[0] for r in of_t.rows] == [2, 3]
    of_row = db.sql("SELECT version, deleted, doc FROM varvedb_history('t', 1)")
    assert of_row.rows == [(2, 3, {"id": 1, "x": 1}), (3, None, {"id": 1, "x": 2})]


# ---- errors ------------------------------------------------------------------------------

ERRORS = [
    ("SELEC 1", "42601"),
    ("SELECT * FROM nope", "42P01"),
    ("SELECT nope FROM t", "42703"),
    ("INSERT INTO t VALUES (1, 1)", "23505"),
    ("INSERT INTO t (x) VALUES (1)", "23502"),
    ("INSERT INTO t VALUES (9, 'abc')", "22P02"),
    ("SELECT x FROM t GROUP BY id", "42803"),
    ("SELECT * FROM t a, LATERAL (SELECT b.x FROM t b WHERE b.id = a.id) s", "0A000"),
    ("SELECT id FROM t a JOIN t b ON a.x = b.id", "42702"),
    ("SELECT x FROM t UNION SELECT x, id FROM t", "42601"),
    ("SELECT sum(x) OVER (ORDER BY id) FROM t", "0A000"),
    ("CREATE INDEX ON t USING gist (v vector_l2_ops)", "0A000"),
    ("CREATE TABLE t (id int PRIMARY KEY)", "42P07"),
    ("SELECT 1 / 0", "22012"),
    ("DROP TABLE nope", "42P01"),
    ("DROP INDEX nope", "42704"),
    ("SET nope.setting = 1", "42704"),
    ("SELECT x FROM t LIMIT -1", "2201W"),
]


@pytest.mark.parametrize("sql, state", ERRORS)
def test_errors_carry_sqlstate_and_leave_the_file_unchanged(tmp_path, sql, state):
    path = tmp_path / "e.varve"
    db = vv.connect(path)
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, v vector(2))")
    db.sql("INSERT INTO t VALUES (1, 1, '[1,1]')")
    before = path.read_bytes()
    with pytest.raises(vv.VarveError) as e:
        db.sql(sql)
    assert e.value.sqlstate == state, e.value
    assert path.read_bytes() == before
    assert db.sql("SELECT id, x FROM t").rows == [(1, 1)]
    db.close()
    assert vv.connect(path, readonly=True).sql("SELECT count(*) FROM t").rows == [(1,)]


def test_a_syntax_error_names_its_position(db):
    with pytest.raises(vv.VarveError) as e:
        db.sql("SELECT * FORM t")
    assert e.value.sqlstate == "42601" and e.value.position == 10
    assert 'near "FORM"' in str(e.value)


# ---- results -------------------------------------------------------------------------------

def test_result_exits(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x double precision, v vector(2), s text)")
    db.sql("INSERT INTO t VALUES (1, 0.5, '[1,2]', 'a'), (2, NULL, '[3,4]', NULL)")
    r = db.sql("SELECT id, x, v, s FROM t ORDER BY id")
    assert r.dicts()[0]["s"] == "a" and len(r) == 2 and list(r)[1][0] == 2
    arrays = r.to_numpy()
    assert arrays["id"].dtype == np.int64 and np.isnan(arrays["x"][1])
    assert arrays["v"].shape == (2, 2)
    table = r.to_arrow()
    assert table.column_names == ["id", "x", "v", "s"] and table.num_rows == 2
    assert table.column("v").to_pylist()[1] == [3.0, 4.0]
    frame = r.to_pandas()
    assert list(frame.columns) == ["id", "x", "v", "s"] and frame["id"].tolist() == [1, 2]


# ---- integer arithmetic against Python's unbounded ints ----------------------------------

_I64 = (-(1 << 63), (1 << 63) - 1)
_EDGE = [_I64[0], _I64[0] + 1, _I64[1], _I64[1] - 1, -(1 << 32), -(1 << 31) - 1, -(1 << 31),
         (1 << 31) - 1, 1 << 31, 1 << 32, 1 << 62, -(1 << 62), 3037000499, 3037000500,
         -3037000500, -3, -2, -1, 0, 1, 2, 3]
_int64 = st.one_of(st.sampled_from(_EDGE), st.integers(*_I64))


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_EXACT = {"a + b": lambda a, b: a + b, "a - b": lambda a, b: a - b,
          "a * b": lambda a, b: a * b, "a / b": _trunc_div,
          "a % b": lambda a, b: a - b * _trunc_div(a, b),
          "abs(a)": lambda a, b: abs(a), "-a": lambda a, b: -a}


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.one_of(st.none(), _int64), st.one_of(st.none(), _int64)),
                     min_size=1, max_size=6),
       expr=st.sampled_from(sorted(_EXACT)))
def test_integer_arithmetic_is_exact_or_out_of_range(rows, expr):
    """Over a column at once: the exact result of every row, or 22003 when any row's
    leaves int64 (22012 first, when a divisor is zero); NULL rows are never checked;
    sum is the exact sum, past int64 too, and never a float."""
    db = vv.connect(":memory:")
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a bigint, b bigint)")
    db.collection("t").insert([{"id": i, "a": a, "b": b} for i, (a, b) in enumerate(rows)])
    unary = expr in ("abs(a)", "-a")
    want = [None if a is None or (b is None and not unary) else (a, b) for a, b in rows]
    if not unary and expr[2] in "/%" and any(w and w[1] == 0 for w in want):
        sqlstate = "22012"
    else:
        want = [None if w is None else _EXACT[expr](*w) for w in want]
        sqlstate = "22003" if any(w is not None and not _I64[0] <= w <= _I64[1]
                                  for w in want) else None
    if sqlstate is None:
        got = [r[0] for r in db.sql(f"SELECT {expr} FROM t ORDER BY id").rows]
        assert got == want and all(type(g) is int for g in got if g is not None), expr
    else:
        with pytest.raises(vv.VarveError) as e:
            db.sql(f"SELECT {expr} FROM t ORDER BY id")
        assert e.value.sqlstate == sqlstate, expr
    present = [a for a, _ in rows if a is not None]
    total, = db.sql("SELECT sum(a) FROM t").rows[0]
    assert total == (sum(present) if present else None) and type(total) in (int, type(None))


def test_a_sum_past_int64_is_exact_in_every_result_form(db):
    from decimal import Decimal
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x bigint)")
    big = (1 << 63) - 1
    db.sql("INSERT INTO t VALUES (1, $1), (2, $1), (3, 4), (4, NULL), (5, $1)", [big])
    r = db.sql("SELECT id % 2 AS odd, sum(x) AS s, sum(x) + 1 AS s1, avg(x) AS a FROM t "
               "GROUP BY id % 2 ORDER BY s DESC")
    odd = 2 * big + 4                       # ids 1, 3, 5; the even ids sum to big
    assert [row[:3] for row in r.rows] == [(1, odd, odd + 1), (0, big, big + 1)]
    assert all(type(v) is int for row in r.rows for v in row[:3])
    assert r.rows[0][3] == pytest.approx(odd / 3, rel=1e-15) and r.rows[1][3] == float(big)
    assert r.to_numpy()["s"].tolist() == [odd, big]
    assert r.to_arrow().column("s").to_pylist() == [Decimal(odd), Decimal(big)]
    assert r.to_pandas()["s"].tolist() == [odd, big]


@pytest.mark.parametrize("a, b, expr, want", [
    # operands whose ranges reach int64's edge exactly: no overflow is possible, and
    # operands whose ranges could overflow where no row does (the per-row check runs)
    ([_I64[1] - 1, 0], [1, 0], "a + b", [_I64[1], 0]),
    ([_I64[0] + 1, 6], [1, -1], "a - b", [_I64[0], 7]),
    ([3037000499, -3037000499], [3037000499, 3037000499],
     "a * b", [9223372030926249001, -9223372030926249001]),
    ([_I64[1], -4], [-1, 2], "a + b", [_I64[1] - 1, -2]),
    ([_I64[0], 5], [2, -1], "a / b", [_I64[0] // 2, -5]),
    ([_I64[0], 5], [2, -1], "a % b", [0, 0]),
    ([_I64[0], 5], [-1, 2], "a / b", "22003"),
    ([_I64[1], 1], [1, _I64[1]], "a + b", "22003"),
    ([1 << 32, 1], [1, 1 << 32], "a * b", [1 << 32, 1 << 32]),
    ([1 << 32, 1], [1 << 31, 1], "a * b", "22003"),
])
def test_integer_arithmetic_at_the_edge_of_the_range_check(db, a, b, expr, want):
    """The pre-check that skips the per-row overflow test (from the operands' min
    and max) answers exactly at its boundary, either way."""
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a bigint, b bigint)")
    db.collection("t").insert([{"id": i, "a": x, "b": y} for i, (x, y) in enumerate(zip(a, b))])
    if isinstance(want, str):
        with pytest.raises(vv.VarveError) as e:
            db.sql(f"SELECT {expr} FROM t")
        assert e.value.sqlstate == want
    else:
        assert [r[0] for r in db.sql(f"SELECT {expr} FROM t ORDER BY id").rows] == want


def test_a_sum_past_int64_assigned_to_a_column_is_out_of_range(tmp_path):
    """INSERT ... SELECT sum(x) and UPDATE SET x = (SELECT sum(x)) past int64: 22003,
    as PostgreSQL assigns a numeric to a bigint, and the file is unchanged."""
    path = tmp_path / "s.varve"
    with vv.connect(path) as db:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x bigint)")
        db.sql("INSERT INTO t VALUES (1, $1), (2, $1), (3, -5)", [(1 << 63) - 1])
        version, digest = db.version, file_digest(path)
        for statement in ("INSERT INTO t (id, x) SELECT 100, sum(x) FROM t",
                          "UPDATE t SET x = (SELECT sum(x) FROM t)",
                          "UPDATE t SET x = (SELECT coalesce(sum(x), 0) FROM t) WHERE id = 3 "
                          "RETURNING x"):
            with pytest.raises(vv.VarveError) as e:
                db.sql(statement)
            assert e.value.sqlstate == "22003", statement
        assert db.version == version and file_digest(path) == digest
        assert db.sql("SELECT x FROM t ORDER BY id").rows == [((1 << 63) - 1,)] * 2 + [(-5,)]


class _CountingEmbedder:
    name, dim = "test-sql-counting", 4

    def __init__(self):
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        return np.ones((len(texts), self.dim), np.float32) / 2


def test_a_case_branch_no_row_takes_computes_nothing_and_cannot_fail(db):
    """A branch no row reaches (and any expression over zero rows) is typed from the
    query, not from row 0 of empty data: no dimension error, no IndexError, and an
    embedder in it embeds nothing."""
    from varvedb import embed as vv_embed
    emb = _CountingEmbedder()
    vv_embed.register(emb.name, emb)
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, v vector(3))")
    db.sql("CREATE TABLE e (id int PRIMARY KEY, x int, v vector(3))")
    db.sql("INSERT INTO t VALUES (1, 1, '[1,2,3]'), (2, 2, '[3,2,1]')")
    for table, want in (("t", [(1, None), (2, None)]), ("e", [])):
        for fn in (f"embed('hi', '{emb.name}')", "embed('hi', 'onnx')", "subvector(v, 1, 2)",
                   "l2_normalize(v + '[1,1,1]')", "v - '[1,2,3]'"):
            got = db.sql(f"SELECT id, CASE WHEN id = 99 THEN {fn} END FROM {table} "
                         "ORDER BY id").rows
            assert got == want, fn
        assert db.sql(f"SELECT id FROM {table} WHERE CASE WHEN x > 5 THEN "
                      f"embed(v::text, '{emb.name}') <-> '[1,1,1,1]' < 1 END").rows == []
    assert emb.texts == 0
    got = db.sql(f"SELECT id, CASE WHEN x = 2 THEN embed('hi', '{emb.name}') END FROM t "
                 "ORDER BY id").rows
    assert got[0] == (1, None) and got[1][1].tolist() == [0.5] * 4 and emb.texts == 1
    # start and count are one value for every row (a column's vectors share a dimension)
    with pytest.raises(vv.VarveError) as e:
        db.sql("SELECT subvector(v, id, 2) FROM t")
    assert e.value.sqlstate == "0A000"
    assert [r[1].tolist() for r in db.sql("SELECT id, subvector(v, $1, 2) FROM t ORDER BY id",
                                          [2]).rows] == [[2, 3], [2, 1]]


# ---- WHERE semantics against a plain-Python oracle ---------------------------------------

_cell = st.one_of(st.none(), st.integers(-3, 3))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_cell, _cell), min_size=0, max_size=12),
       a=st.integers(-3, 3), b=st.integers(-3, 3),
       shape=st.sampled_from(["x < {a} AND y > {b}", "x < {a} OR y > {b}",
                              "NOT (x = {a})", "x + y >= {a}", "x IN ({a}, {b})",
                              "x NOT IN ({a}, {b})", "x BETWEEN {a} AND {b}",
                              "coalesce(x, {a}) = {b}", "x IS NULL OR y * 2 = {b}"]))
def test_where_follows_three_valued_logic(rows, a, b, shape):
    db = vv.connect(":memory:")
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, y int)")
    for i, (x, y) in enumerate(rows):
        db.sql("INSERT INTO t VALUES ($1, $2, $3)", [i, x, y])
    where = shape.format(a=a, b=b)
    got = [r[0] for r in db.sql(f"SELECT id FROM t WHERE {where} ORDER BY id").rows]
    want = [i for i, (x, y) in enumerate(rows) if _oracle(shape, x, y, a, b) is True]
    assert got == want, where


def _and(p, q):
    if p is False or q is False:
        return False
    return None if p is None or q is None else True


def _or(p, q):
    if p is True or q is True:
        return True
    return None if p is None or q is None else False


def _not(p):
    return None if p is None else not p


def _cmp(fn, p, q):
    return None if p is None or q is None else fn(p, q)


def _oracle(shape, x, y, a, b):
    lt = lambda p, q: _cmp(lambda u, v: u < v, p, q)
    gt = lambda p, q: _cmp(lambda u, v: u > v, p, q)
    eq = lambda p, q: _cmp(lambda u, v: u == v, p, q)
    in_ = lambda p: _or(eq(p, a), eq(p, b))
    return {
        "x < {a} AND y > {b}": lambda: _and(lt(x, a), gt(y, b)),
        "x < {a} OR y > {b}": lambda: _or(lt(x, a), gt(y, b)),
        "NOT (x = {a})": lambda: _not(eq(x, a)),
        "x + y >= {a}": lambda: None if x is None or y is None else x + y >= a,
        "x IN ({a}, {b})": lambda: in_(x),
        "x NOT IN ({a}, {b})": lambda: _not(in_(x)),
        "x BETWEEN {a} AND {b}": lambda: _and(_cmp(lambda u, v: u >= v, x, a),
                                              _cmp(lambda u, v: u <= v, x, b)),
        "coalesce(x, {a}) = {b}": lambda: (x if x is not None else a) == b,
        "x IS NULL OR y * 2 = {b}": lambda: _or(x is None, None if y is None else y * 2 == b),
    }[shape]()


def test_output_is_a_plan_node_everywhere(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY)")
    assert isinstance(db.sql("SELECT id FROM t").plan, Output)
    assert isinstance(db.sql("SELECT count(*) FROM t").plan, Output)


def test_sql_runs_on_a_read_only_connection(tmp_path):
    path = tmp_path / "r.varve"
    with vv.connect(path) as w:
        w.sql("CREATE TABLE t (id int PRIMARY KEY)")
        w.sql("INSERT INTO t VALUES (1)")
    ro = vv.connect(path, readonly=True)
    assert ro.sql("SELECT id FROM t").rows == [(1,)]
    with pytest.raises(vv.VarveError) as e:
        ro.sql("INSERT INTO t VALUES (2)")
    assert e.value.sqlstate == "25006"
    assert os.path.getsize(path) > 0


def test_index_names_and_varchar_lengths_survive_reopen(tmp_path):
    path = tmp_path / "n.varve"
    with vv.connect(path) as db:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, code varchar(3), tag int, e vector(2))")
        db.sql("CREATE INDEX by_tag ON t (tag)")
        db.sql("CREATE INDEX near ON t USING hnsw (e vector_cosine_ops)")
        db.sql("INSERT INTO t VALUES (1, 'abc', 1, '[1,0]')")
    with vv.connect(path) as db:
        f = db.collection("t").schema.fields
        assert f["tag"].index_name == "by_tag" and f["e"].vector_index.name == "near"
        assert f["e"].metric == "cosine" and f["code"].max_length == 3
        with pytest.raises(vv.VarveError) as e:
            db.sql("INSERT INTO t VALUES (2, 'abcd', 2, '[0,1]')")
        assert e.value.sqlstate == "22001"
        with pytest.raises(vv.VarveError) as e:
            db.sql("DROP INDEX t_tag_idx")          # it has a name of its own
        assert e.value.sqlstate == "42704"
        db.sql("DROP INDEX by_tag")
        db.sql("DROP INDEX near")
    with vv.connect(path) as db:
        f = db.collection("t").schema.fields
        assert f["tag"].index is None and f["e"].vector_index is None
        assert db.sql("SELECT id, code FROM t").rows == [(1, "abc")]


# A RETURNING list is part of its statement: when it fails, the rows it would
# return were never written (issue 26: they used to be committed first)
_FAILING_RETURNING = [
    "UPDATE t SET x = x - 1 RETURNING 1 / x",
    "UPDATE t SET x = x - 1 WHERE id = 1 RETURNING id, 1 / x",
    "INSERT INTO t VALUES (3, 0) RETURNING 1 / x",
    "INSERT INTO t VALUES (3, 5), (4, 0) RETURNING id, 10 / x",
    "INSERT INTO t VALUES (1, 0), (3, 3) ON CONFLICT (id) DO UPDATE SET x = 0 RETURNING 1 / x",
    "INSERT INTO t VALUES (1, 9), (3, 0) ON CONFLICT (id) DO NOTHING RETURNING 1 / x",
    "DELETE FROM t WHERE id = 1 RETURNING 1 / (x - 1)",
]


@pytest.fixture
def two_rows(tmp_path):
    """A file whose table t holds (1, 1) and (2, 2)."""
    path = tmp_path / "r.varve"
    with vv.connect(path) as db:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
        db.sql("INSERT INTO t VALUES (1, 1), (2, 2)")
    return path


@pytest.mark.parametrize("statement", _FAILING_RETURNING)
def test_a_failing_returning_leaves_the_file_and_version_as_they_were(two_rows, statement):
    path = two_rows
    with vv.connect(path) as db:
        version, digest = db.version, file_digest(path)
        with pytest.raises(vv.VarveError) as e:
            db.sql(statement)
        assert e.value.sqlstate == "22012"
        assert db.version == version and file_digest(path) == digest
        assert db.sql("SELECT id, x FROM t ORDER BY id").rows == [(1, 1), (2, 2)]
        db.sql("INSERT INTO t VALUES (7, 7)")       # the session goes on
    with vv.connect(path, readonly=True) as db:
        assert db.version == version + 1
        assert db.sql("SELECT id, x FROM t ORDER BY id").rows == [(1, 1), (2, 2), (7, 7)]
        assert db.sql("SELECT id, x FROM t ORDER BY id AS OF VERSION $1",
                      [version]).rows == [(1, 1), (2, 2)]


@pytest.mark.parametrize("statement", _FAILING_RETURNING)
def test_a_failing_returning_inside_a_transaction_keeps_nothing_of_it(two_rows, statement):
    path = two_rows
    with vv.connect(path) as db:
        version, digest = db.version, file_digest(path)
        # BEGIN: the block fails (25P02) and its COMMIT rolls back, as in PostgreSQL
        s = db.session()
        s.sql("BEGIN")
        s.sql("INSERT INTO t VALUES (5, 5)")
        with pytest.raises(vv.VarveError) as e:
            s.sql(statement)
        assert e.value.sqlstate == "22012"
        with pytest.raises(vv.VarveError) as e:
            s.sql("SELECT 1")
        assert e.value.sqlstate == "25P02"
        assert s.sql("COMMIT").status == "ROLLBACK"
        assert db.version == version and file_digest(path) == digest
        # a Python transaction: a statement that failed after writing aborts it (no
        # savepoints); one that failed before (DELETE's RETURNING comes first) does not
        aborted = False
        try:
            with db.transaction():
                db.sql("INSERT INTO t VALUES (6, 6)")
                with pytest.raises(vv.VarveError) as e:
                    db.sql(statement)
                assert e.value.sqlstate == "22012"
        except vv.TransactionAbortedError:
            aborted = True
        assert aborted == (not statement.startswith("DELETE"))
        kept = [(1, 1), (2, 2)] + ([] if aborted else [(6, 6)])
        assert db.sql("SELECT id, x FROM t ORDER BY id").rows == kept
    with vv.connect(path, readonly=True) as db:
        assert db.sql("SELECT id, x FROM t ORDER BY id").rows == kept


def test_a_raw_error_after_writing_half_applies_nothing(two_rows, monkeypatch):
    """A statement that fails with an exception that is not a VarveError (a defect
    of the evaluator, injected here as a function that raises one) after its writes
    landed leaves nothing of them: the SQL block fails, a Python transaction aborts,
    and an autocommitted statement is rolled back, as for a typed error."""
    from varvedb.query import expr

    def boom(v):
        raise RuntimeError("an evaluator's defect")
    monkeypatch.setitem(expr.FUNCTIONS, "boom", boom)
    path = two_rows
    with vv.connect(path) as db:
        version, digest = db.version, file_digest(path)
        with pytest.raises(RuntimeError):
            db.sql("UPDATE t SET x = 99 RETURNING boom(x)")
        s = db.session()
        s.sql("BEGIN")
        with pytest.raises(RuntimeError):
            s.sql("UPDATE t SET x = 99 RETURNING boom(x)")
        assert s.sql("COMMIT").status == "ROLLBACK"
        with pytest.raises(vv.TransactionAbortedError):
            with db.transaction():
                with pytest.raises(RuntimeError):
                    db.sql("UPDATE t SET x = 42 RETURNING boom(x)")
        assert db.version == version and file_digest(path) == digest
    with vv.connect(path, readonly=True) as db:
        assert db.sql("SELECT id, x FROM t ORDER BY id").rows == [(1, 1), (2, 2)]


def test_sql_commit_or_rollback_inside_a_python_transaction_is_refused(two_rows):
    """A Python transaction ends with its with block: an SQL COMMIT inside it would
    commit the block's first half and autocommit the rest (then the block's error
    could undo none of it). Refused (25000), the transaction still whole."""
    path = two_rows
    with vv.connect(path) as db:
        for verb in ("COMMIT", "ROLLBACK"):
            with pytest.raises(ValueError):
                with db.transaction():
                    db.sql("INSERT INTO t VALUES (21, 21)")
                    with pytest.raises(vv.VarveError) as e:
                        db.sql(verb)
                    assert e.value.sqlstate == "25000"
                    db.sql("INSERT INTO t VALUES (22, 22)")
                    raise ValueError("the block fails: all of it is rolled back")
        with db.transaction():
            db.sql("INSERT INTO t VALUES (23, 23)")
    with vv.connect(path, readonly=True) as db:
        assert db.sql("SELECT id FROM t ORDER BY id").rows == [(1,), (2,), (23,)]


def test_a_write_naming_rows_past_the_table_is_refused_before_it_is_written(two_rows):
    """The engine's own check: rows outside the table (what replay refuses as a
    corrupt frame, so a file that held one would not open) are refused unwritten."""
    path = two_rows
    with vv.connect(path) as db:
        version, digest = db.version, file_digest(path)
        t = db.engine.table("t")
        for rows in (np.array([0, 2]), np.array([-1]), np.array([[0]])):
            with pytest.raises(vv.VarveError, match="rows outside"):
                with db.transaction():
                    db.engine.delete(db.thread_session().tx, t, rows)
        assert db.version == version and file_digest(path) == digest
    with vv.connect(path, readonly=True) as db:
        assert db.sql("SELECT id, x FROM t ORDER BY id").rows == [(1, 1), (2, 2)]


def test_a_failed_statement_inside_an_api_transaction_aborts_it(db):
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    with pytest.raises(vv.TransactionAbortedError):
        with db.transaction():
            db.sql("INSERT INTO t VALUES (5, 5)")
            # the new row 2 is written, then its SET fails: nothing of it may stay
            with pytest.raises(vv.VarveError) as e:
                db.sql("INSERT INTO t VALUES (2, 2), (1, 0) ON CONFLICT (id) DO UPDATE "
                       "SET x = EXCLUDED.x / 0")
            assert e.value.sqlstate == "22012"
    assert db.sql("SELECT id, x FROM t").rows == [(1, 1)]
    # a statement that failed before writing leaves the transaction usable
    with db.transaction():
        db.sql("INSERT INTO t VALUES (6, 6)")
        with pytest.raises(vv.VarveError):
            db.sql("SELECT nope FROM t")
    assert db.sql("SELECT id FROM t ORDER BY id").rows == [(1,), (6,)]


def _nested(depth: int):
    x = 1
    for _ in range(depth):
        x = [x]
    return x


def test_a_nested_or_huge_value_gets_its_typed_error_with_a_bounded_repr(tmp_path):
    """A value too deep for repr() or too big to print whole (a list nested 100 000
    deep, a million items, a 300 000-bit int, 10 MB of bytes), passed to a Collection
    verb (where params, ids, values, names, options) or as an SQL parameter, gets the
    typed error the value deserves, its message cut while it is built; never
    RecursionError or MemoryError, and the file is unchanged."""
    path = tmp_path / "b.varve"
    d = vv.connect(path)
    c = d.create_collection("c", {"n": "int", "s": "text", "b": "bool", "v": vv.Vector(2)})
    c.insert([{"id": 1, "n": 1, "s": "a", "b": True, "v": [1, 0]}])
    d.sql("CREATE TABLE t (id int PRIMARY KEY, n int)")
    before = file_digest(path)
    huge = 10 ** 100_000        # a number: compared as one where it is one
    for value in (_nested(100_000), list(range(1_000_000)), b"x" * 10 ** 7, huge):
        for i, (call, error) in enumerate([
                (lambda: c.find("n = $1", params=[value]), vv.FilterError),
                (lambda: c.count("b = $1", params=[value]), vv.FilterError),
                (lambda: c.find("s LIKE $1", params=[value]), vv.FilterError),
                (lambda: c.find(value), vv.FilterError),
                (lambda: c.get([value]), vv.FieldTypeError),
                (lambda: c.delete(ids=[1, value]), vv.FieldTypeError),
                (lambda: c.update({"s": value}, ids=[1]), vv.FieldTypeError),
                (lambda: c.search([1, 0], limit=value), vv.FieldTypeError),
                (lambda: c.find("n = 1", as_of=value), (vv.OptionError, vv.VersionNotFoundError)),
                (lambda: d.collection(value), vv.NotFoundError),
                (lambda: d.session(server_files=False).drop_collection(value), vv.NotFoundError),
                (lambda: d.sql("SELECT * FROM t AS OF BRANCH $1", [value]), vv.SqlError)]):
            if value is huge and i in (0, 1, 7):
                continue
            with pytest.raises(error) as e:
                call()
            assert len(str(e.value)) < 400, (i, str(e.value)[:400])
        assert file_digest(path) == before
    d.close()


def test_messages_users_hit_first(tmp_path):
    """ANALYZE is accepted (nothing to gather), an index on the primary key is there
    already, rrf() over a column with no full-text index says so, and a vacuum
    reports the bytes in use, not the preallocated file's size."""
    db = vv.connect(str(tmp_path / "m.varve"))
    try:
        db.sql("CREATE TABLE items (id bigint PRIMARY KEY, body text, e vector(2))")
        assert db.sql("ANALYZE").status == "ANALYZE"
        assert db.sql("ANALYZE items").status == "ANALYZE"
        with pytest.raises(vv.SqlError) as e:
            db.sql("ANALYZE nope")
        assert e.value.sqlstate == "42P01"
        assert db.sql("CREATE INDEX ON items (id)").status == "CREATE INDEX"
        with pytest.raises(vv.SqlError) as e:
            db.sql("CREATE INDEX ON items (nope)")
        assert e.value.sqlstate == "42703"
        with pytest.raises(vv.SqlError, match='column "body" has no full-text index'):
            db.sql("SELECT id FROM items ORDER BY rrf(bm25(body, 'x'), e <-> '[1,2]') DESC "
                   "LIMIT 3")
        for i in range(5):
            db.sql("INSERT INTO items (id, body) VALUES ($1, 'x') ON CONFLICT (id) DO UPDATE "
                   "SET body = excluded.body", [1])
        r = db.vacuum(keep=1)
        assert r.bytes_after < r.bytes_before < os.path.getsize(str(tmp_path / "m.varve"))
    finally:
        db.close()


PSYCOPG_STATEMENTS = [
    ("SELECT id, body FROM items WHERE tag = %s ORDER BY id", [2]),
    ("SELECT id FROM items WHERE body LIKE 'a%%' OR id = %s ORDER BY id", [3]),
    ("SELECT id FROM items WHERE tag = %(t)s AND id > %(lo)s ORDER BY id", {"t": 2, "lo": 1}),
    ("SELECT id, '%%s' AS lit FROM items WHERE id = %s", [1]),
    ("SELECT id FROM items ORDER BY embedding <-> %s LIMIT 2", ["[1,1,1]"]),
    ("SELECT id FROM items WHERE id = ANY(%s) ORDER BY id", [[1, 3]]),
    # red-team 10 f18_list_param_int_array: the list read as a vector, its cast 42846
    ("SELECT id FROM items WHERE id = ANY(%s::int[]) ORDER BY id", [[1, 3]]),
    ("SELECT id FROM items WHERE tag = ANY(%s::bigint[]) ORDER BY id", [[2]]),
]


@pytest.mark.parametrize("text,params", PSYCOPG_STATEMENTS)
def test_psycopg_placeholders_answer_as_postgresql(pg_conn, text, params):
    """db.sql() takes a statement written for psycopg, placeholders and %% as they
    are, and answers what PostgreSQL answers to psycopg."""
    setup = ["CREATE TABLE items (id bigint PRIMARY KEY, tag int, body text, "
             "embedding vector(3))",
             "INSERT INTO items VALUES (1, 1, 'ab', '[1,2,3]'), (2, 2, 'b', '[1,1,1]'), "
             "(3, 2, 'a%', '[0,0,1]')"]
    db = vv.connect(":memory:")
    try:
        for s in setup:
            db.sql(s)
            pg_conn.execute(s)
        want = [tuple(r) for r in pg_conn.execute(text, params).fetchall()]
        assert db.sql(text, params).rows == want
    finally:
        db.close()


def test_psycopg_placeholders_refused_when_they_do_not_fit():
    db = vv.connect(":memory:")
    try:
        for text, params, match in [
                ("SELECT %s, %(a)s", [1], "not both"),
                ("SELECT %d", [1], "syntax error"),        # not psycopg's: left as SQL
                ("SELECT %s, %s", [1], "2 placeholders but 1"),
                ("SELECT %(a)s", {"b": 1}, "no parameter named 'a'"),
                ("SELECT %(a)s", [1], "take a dict")]:
            with pytest.raises(vv.SqlError, match=match):
                db.sql(text, params)
        # PostgreSQL's numbered form keeps its % signs as they are
        assert db.sql("SELECT 'a%' || $1::text", ["b"]).rows == [("a%b",)]
        assert db.sql("SELECT '%s'").rows == [("%s",)]      # no parameters: no placeholders
    finally:
        db.close()


def test_an_index_build_in_progress_and_relation_sizes(db):
    """pg_stat_progress_create_index shows a vector index while it takes the table's
    rows (pgvector's phase, row versions for blocks and tuples) and nothing once it
    has caught up; pg_relation_size and its kin count the arrays each relation holds."""
    db.sql("CREATE TABLE items (id bigserial PRIMARY KEY, tag int, embedding vector(8))")
    items = db.collection("items")
    items.insert_arrays(tag=np.arange(3000) % 7,
                        embedding=np.random.default_rng(0).random((3000, 8), np.float32))
    progress = ("SELECT relid = 'items'::regclass, index_relid = 'items_idx'::regclass, phase, "
                "blocks_total, blocks_done < blocks_total, tuples_total "
                "FROM pg_stat_progress_create_index")
    with db.engine.maintainer.hold():           # nothing links while held
        db.sql("CREATE INDEX items_idx ON items USING hnsw (embedding vector_l2_ops)")
        assert db.sql(progress).rows == [(True, True, "building index: loading tuples", 3000,
                                          True, 3000)]
        before = db.sql("SELECT pg_relation_size('items_idx')").rows[0][0]
    assert items.wait_indexed(timeout=600)
    assert db.sql(progress).rows == []
    table, index, indexes, total = db.sql(
        "SELECT pg_relation_size('items'), pg_relation_size('items_idx'), "
        "pg_indexes_size('items'), pg_total_relation_size('items')").rows[0]
    assert index > before and table > 3000 * 8 * 4      # (no node linked: no array yet)
    assert indexes > index and total == table + indexes


def test_discard_all_refuses_any_open_transaction(db):
    """DISCARD ALL (a pooler's reset) is PostgreSQL's 25001 inside a transaction: a
    SQL BEGIN's or a Python block's alike, as VACUUM is; outside one it resets."""
    db.sql("SET hnsw.ef_search = 77")
    db.sql("BEGIN")
    with pytest.raises(vv.SqlError, match="transaction block") as e:
        db.sql("DISCARD ALL")
    assert e.value.sqlstate == "25001"
    db.sql("ROLLBACK")
    with db.transaction():
        with pytest.raises(vv.SqlError, match="transaction block"):
            db.sql("DISCARD ALL")
    assert db.sql("SHOW hnsw.ef_search").rows == [("77",)]
    assert db.sql("DISCARD ALL").status == "DISCARD ALL"
    assert db.sql("SHOW hnsw.ef_search").rows == [("index default",)]



def test_show_the_settings_pgvector_readme_tunes():
    """`SHOW config_file` (none: varvedb reads no configuration file) and `SHOW
    shared_buffers` (the memory it may map, as PostgreSQL's memory unit) answer
    (issue 30: the README's tuning section)."""
    from varvedb.storage.memory import memory_limit
    db = vv.connect(":memory:")
    assert db.sql("SHOW config_file").rows == [("",)]
    assert db.sql("SHOW shared_buffers").rows == [(f"{memory_limit() >> 20}MB",)]
    db.close()


def test_check_constraints_bind_every_write_and_stay_with_the_file(tmp_path):
    """A CHECK from CREATE TABLE is the field's check: the Python API's writes are
    held to it too (CheckViolationError, 23514, nothing written), it comes back
    with the file, and what it cannot keep is refused (issue 30; the differential
    cases are sql_cases/checks.sql)."""
    path = tmp_path / "c.vv"
    db = vv.connect(path)
    db.sql("CREATE TABLE p (id bigint PRIMARY KEY, price float CHECK (price > 0), "
           "n int CHECK (n IS NOT NULL))")
    c = db.collection("p")
    for bad in ({"id": 1, "price": -1.0, "n": 1}, {"id": 1, "price": 1.0}):
        before = db.version
        with pytest.raises(vv.CheckViolationError) as e:
            c.insert(bad)
        assert e.value.sqlstate == "23514" and db.version == before
    with pytest.raises(vv.CheckViolationError):
        c.insert_arrays(id=np.arange(3), price=np.array([1.0, 2.0, 0.0]), n=np.ones(3, int))
    c.insert({"id": 1, "price": 1.0, "n": 1})
    db.close()
    db = vv.connect(path)
    assert db.engine.table("p").schema.fields["price"].check == ((">", 0.0, "p_price_check"),)
    with pytest.raises(vv.CheckViolationError):
        db.sql("UPDATE p SET price = -price")
    for sql in ("CREATE TABLE q (id bigint PRIMARY KEY, s text CHECK (s IN ('a', 'b')))",
                "CREATE TABLE q (id bigint PRIMARY KEY, a int, b int, CHECK (a < b))",
                "ALTER TABLE p ADD CHECK (n < price)", "ALTER TABLE p ADD UNIQUE (n)"):
        with pytest.raises(vv.SqlError) as e:
            db.sql(sql)
        assert e.value.sqlstate == "0A000", sql
    db.close()


def test_a_check_of_a_vectors_dimension_binds_writes_and_stays_with_the_file(tmp_path):
    """pgvector's README's CHECK (vector_dims(embedding::vector) = 3): a vector field's
    check of its dimension, from CREATE TABLE and from ALTER TABLE, holds the Python
    API's writes too, comes back with the file (its frame and its checkpoint), and a
    vector_dims check beside another column is still refused, one over a bit column is
    42883 as on PostgreSQL (pgvector has no vector_dims(bit))."""
    path = tmp_path / "d.vv"
    db = vv.connect(path)
    db.sql("CREATE TABLE a (id bigint PRIMARY KEY, e vector(2) CHECK (vector_dims(e) = 5))")
    db.sql("CREATE TABLE b (id bigint PRIMARY KEY, e halfvec(2), n int)")
    db.sql("INSERT INTO b VALUES (1, '[1,2]', 1)")
    db.sql("ALTER TABLE b ADD CHECK (vector_dims(e::vector) = 2)")
    with pytest.raises(vv.CheckViolationError):
        db.sql("ALTER TABLE b ADD CHECK (vector_dims(e) > 2)")
    with pytest.raises(vv.CheckViolationError) as e:
        db.collection("a").insert({"id": 1, "e": [1.0, 2.0]})
    assert e.value.sqlstate == "23514"
    db.collection("a").insert({"id": 1, "e": None})
    db.close()
    for _ in range(2):           # from the log, then from a checkpoint
        db = vv.connect(path)
        checks = [db.engine.table(t).schema.fields["e"].check for t in "ab"]
        assert checks == [(("vector_dims =", 5, "a_e_check"),),
                          (("vector_dims::vector =", 2, "b_e_check"),)]     # (as written)
        with pytest.raises(vv.CheckViolationError):
            db.sql("UPDATE a SET e = '[3,4]'")
        db.sql("INSERT INTO b VALUES (2, '[3,4]', 2)")
        db.checkpoint()
        db.sql("DELETE FROM b WHERE id = 2")
        db.close()
    db = vv.connect(path)
    for sql, sqlstate in [
            ("CREATE TABLE c (id bigint PRIMARY KEY, e bit(3) CHECK (vector_dims(e) = 3))",
             "42883"), ("ALTER TABLE b ADD CHECK (vector_dims(e) = n)", "0A000")]:
        with pytest.raises(vv.SqlError) as e:
            db.sql(sql)
        assert e.value.sqlstate == sqlstate, sql
    db.close()


def test_a_table_made_with_a_vector_dims_check_stamps_the_files_format_first(tmp_path):
    """An older (format 4) varvedb cannot read a vector field's check: CREATE TABLE
    with one stamps the header with this format before its frame, so that such a
    varvedb refuses the file as newer; a table without a check keeps the old stamp
    (a SQL CHECK of any field is named, format 6: test_sql's constraint names)."""
    from varvedb.storage import format as F
    path = tmp_path / "s.vv"
    vv.connect(path).close()
    restamp(path, 4)                # as a format-4 varvedb wrote it
    db = vv.connect(path)
    db.sql("CREATE TABLE a (id bigint PRIMARY KEY, e vector(2), n int)")
    assert stamped(path) == 4
    db.sql("CREATE TABLE b (id bigint PRIMARY KEY, e vector(2) CHECK (vector_dims(e) = 2))")
    assert stamped(path) == F.FORMAT_VERSION
    db.close()


_CHECK_OPS = {"=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b,
              "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 5)), st.booleans()),
                     max_size=10),
       op=st.sampled_from(sorted(_CHECK_OPS)), bound=st.integers(-5, 5),
       later=st.lists(st.one_of(st.none(), st.integers(-6, 6)), max_size=4))
def test_add_check_agrees_with_an_oracle(rows, op, bound, later):
    """ADD CHECK (x op bound) on random rows, some deleted first: it succeeds exactly
    when every live row passes (NULL passes), and then refuses exactly the later
    inserts that fail it; a refused ADD CHECK leaves every later insert allowed."""
    def passes(x):
        return x is None or _CHECK_OPS[op](x, bound)
    db = vv.connect(":memory:")
    try:
        db.sql("CREATE TABLE c (id bigint PRIMARY KEY, x bigint)")
        for i, (x, _) in enumerate(rows):
            db.sql("INSERT INTO c VALUES ($1, $2)", [i, x])
        dead = [i for i, (_, gone) in enumerate(rows) if gone]
        if dead:
            db.sql("DELETE FROM c WHERE id = ANY($1)", [dead])
        live = [x for x, gone in rows if not gone]
        try:
            db.sql(f"ALTER TABLE c ADD CHECK (x {op} {bound})")
            added = True
        except vv.CheckViolationError:
            added = False
        assert added == all(passes(x) for x in live)
        for j, x in enumerate(later):
            try:
                db.sql("INSERT INTO c VALUES ($1, $2)", [100 + j, x])
                ok = True
            except vv.CheckViolationError:
                ok = False
            assert ok == (not added or passes(x)), (x, op, bound)
    finally:
        db.close()


def test_add_check_holds_the_python_api_and_stays_with_the_file(tmp_path):
    """ALTER TABLE ADD CHECK is the fields' checks from then on (a SET_CHECK frame):
    the Python API's writes are held to it, it comes back with the file (replayed,
    and from a checkpoint), and one that a row there fails changes nothing (issue
    30; the differential cases are sql_cases/alter_check.sql)."""
    from varvedb.storage import format as F
    path = tmp_path / "c.vv"
    db = vv.connect(path)
    db.sql("CREATE TABLE p (id bigint PRIMARY KEY, price float, code text)")
    db.sql("INSERT INTO p VALUES (1, 2.0, 'a'), (2, NULL, 'b')")
    db.close()
    restamp(path, 3)        # stamped format 3: upgraded at its first SET_CHECK
    db = vv.connect(path)
    before = db.version
    with pytest.raises(vv.CheckViolationError) as e:
        db.sql("ALTER TABLE p ADD CONSTRAINT cheap CHECK (price < 1)")
    assert e.value.sqlstate == "23514" and 'constraint "cheap"' in str(e.value)
    assert db.version == before and db.engine.table("p").schema.fields["price"].check is None
    assert db.engine.log.file.format_version == 3
    db.sql("ALTER TABLE p ADD CHECK (price > 0 AND code <> 'x')")
    # an older varvedb refuses the file, not misreads it
    assert stamped(path) == F.FORMAT_VERSION >= 4
    c = db.collection("p")
    for bad in ({"id": 3, "price": -1.0}, {"id": 3, "code": "x"}):
        with pytest.raises(vv.CheckViolationError):
            c.insert(bad)
    db.close()
    for _ in range(2):          # replayed from the log, then from a checkpoint
        db = vv.connect(path)
        fields = db.engine.table("p").schema.fields
        assert fields["price"].check == ((">", 0.0, "p_check", 0),) \
            and fields["code"].check == (("<>", "x", "p_check", 1),)    # (their places)
        with pytest.raises(vv.CheckViolationError):
            db.collection("p").insert({"id": 3, "price": 0.0})
        db.checkpoint()
        db.close()


def test_a_schema_change_fits_the_rows_every_branch_holds(db):
    """The schema is every branch's, and a merge brings a branch's rows in: ADD CHECK,
    ADD COLUMN … CHECK and ADD COLUMN … NOT NULL check the rows any branch holds, not
    the writer's branch's alone (red-team 10: a row x = -7 on a branch survived
    ADD CHECK (x > 0) on main and reached main by merge); nothing changes."""
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
    db.sql("INSERT INTO t VALUES (1, 5)")
    db.branch("b")
    db.use("b")
    db.sql("INSERT INTO t VALUES (3, -7)")
    db.use("main")
    before = db.version
    with pytest.raises(vv.CheckViolationError) as e:
        db.sql("ALTER TABLE t ADD CONSTRAINT pos CHECK (x > 0)")
    assert e.value.sqlstate == "23514" and 'constraint "pos"' in str(e.value)
    with pytest.raises(vv.CheckViolationError):
        db.sql("ALTER TABLE t ADD COLUMN z int DEFAULT -1 CHECK (z > 0)")
    with pytest.raises(vv.NotNullViolationError):
        db.collection("t").add_field("w", vv.Int(not_null=True))
    fields = db.engine.table("t").schema.fields
    assert db.version == before and fields["x"].check is None and set(fields) == {"x"}
    db.sql("ALTER TABLE t ADD CHECK (x > 0) NOT VALID")      # NOT VALID: no rows checked
    db.sql("DELETE FROM t WHERE id = 1")          # main holds no row: b's still count
    with pytest.raises(vv.CheckViolationError):
        db.sql("ALTER TABLE t ADD CHECK (x < 0)")
    db.drop_branch("b")                           # gone with its rows: nothing to fit
    db.sql("ALTER TABLE t ADD COLUMN z int DEFAULT 2 CHECK (z > 1)")


_NAMES = ("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = "
          "'t'::regclass AND contype = 'c' ORDER BY conname")


def test_check_constraints_keep_their_names_with_the_file(tmp_path):
    """A CHECK keeps the name CREATE TABLE or ADD CONSTRAINT gave it (or PostgreSQL's,
    t_y_check) through a reopen, a checkpoint, a vacuum, a backup and on a branch,
    and every write's error names it, the Python API's too; DROP CONSTRAINT drops it
    by that name; a file that holds a name is stamped format 6, so an older varvedb
    refuses it (defect: the names were not kept, a later write named the column's
    t_x_check, and DROP CONSTRAINT was 0A000)."""
    from varvedb.storage import format as F
    path = tmp_path / "n.vv"
    db = vv.connect(path)
    db.create_collection("plain", {"n": vv.Field("int", check=((">", 0),))})
    db.close()

    def stamp(version=None):
        with open(path, "r+b") as f:
            header = F.unpack_header(f.read(F.HEADER_SIZE))
            if version is not None:
                f.seek(0)
                f.write(F.pack_header(header.file_id, header.created_us, version=version))
        return header.format_version
    stamp(5)        # as a format-5 varvedb wrote it: an unnamed check keeps it 5
    db = vv.connect(path)
    db.sql("CREATE TABLE t (id bigint PRIMARY KEY, x int, y int, "
           "CONSTRAINT pos CHECK (x > 0), CHECK (y > 0))")
    assert stamp() == F.FORMAT_VERSION >= 6
    db.sql("ALTER TABLE t ADD CONSTRAINT small CHECK (x < 100 AND y < 100)")
    db.sql("INSERT INTO t VALUES (1, 1, 1)")
    want = [("pos", "CHECK ((x > 0))"), ("small", "CHECK (((x < 100) AND (y < 100)))"),
            ("t_y_check", "CHECK ((y > 0))")]

    def same(db):
        assert db.sql(_NAMES).rows == want
        for row, name in [("(2, 0, 0)", "pos"), ("(2, 200, 1)", "small"),
                          ("(2, 1, 0)", "t_y_check")]:
            with pytest.raises(vv.CheckViolationError,
                               match=f'relation "t" violates check constraint "{name}"'):
                db.sql(f"INSERT INTO t VALUES {row}")
        with pytest.raises(vv.CheckViolationError, match='constraint "small"'):
            db.collection("t").insert({"id": 2, "x": 5, "y": 500})
        with pytest.raises(vv.CheckViolationError, match='constraint "plain_n_check"'):
            db.collection("plain").insert({"id": 1, "n": 0})
    same(db)
    db.close()
    db = vv.connect(path)           # replayed from the log
    same(db)
    db.checkpoint()
    db.close()
    db = vv.connect(path)           # from the checkpoint
    same(db)
    v = db.version
    db.vacuum()
    same(db)
    db.backup(tmp_path / "b.vv")
    db.branch("b")
    db.use("b")
    same(db)
    db.use("main")
    db.close()
    with vv.connect(tmp_path / "b.vv") as b:
        same(b)
    db = vv.connect(path)
    same(db)
    db.sql("ALTER TABLE t DROP CONSTRAINT small")
    want = want[:1] + want[2:]
    db.sql("INSERT INTO t VALUES (2, 200, 1)")
    assert db.sql(f"SELECT id FROM t ORDER BY id AS OF VERSION {v}").rows == [(1,)]
    r = db.sql("ALTER TABLE t DROP CONSTRAINT IF EXISTS small")
    assert r.notice == [("00000", 'constraint "small" of relation "t" does not exist, skipping')]
    # a statement's notices are one list, each of them there (the last alone was kept)
    r = db.sql("ALTER TABLE t DROP CONSTRAINT IF EXISTS small, DROP CONSTRAINT IF EXISTS tiny")
    assert r.notice == [("00000", f'constraint "{c}" of relation "t" does not exist, skipping')
                        for c in ("small", "tiny")]
    assert db.sql("COMMIT").notice == [("25P01", "there is no transaction in progress")]
    assert db.sql("SELECT 1").notice is None
    with pytest.raises(vv.SqlError) as e:
        db.sql("ALTER TABLE t DROP CONSTRAINT small")
    assert e.value.sqlstate == "42704"
    db.close()
    db = vv.connect(path)
    assert db.sql(_NAMES).rows == want
    db.close()


def test_check_constraint_errors_read_as_postgresqls(pg_conn):
    """The errors a CHECK's name is in read word for word as PostgreSQL's: a write's
    (the first failing constraint by name), a duplicate's, DROP CONSTRAINT's."""
    script = ["CREATE TABLE t (id bigint PRIMARY KEY, x int, y int, "
              "CONSTRAINT pos CHECK (x > 0), CHECK (y > 0), CHECK (x < 100 AND y < 100))",
              "INSERT INTO t VALUES (1, 0, 0)", "INSERT INTO t VALUES (1, 1, 0)",
              "INSERT INTO t VALUES (1, 200, 200)", "INSERT INTO t VALUES (1, 1, 1)",
              "UPDATE t SET y = 0", "ALTER TABLE t ADD CONSTRAINT pos CHECK (x > 1)",
              "ALTER TABLE t ADD CONSTRAINT t_pkey CHECK (x > 1)",
              "ALTER TABLE t ADD CONSTRAINT big CHECK (x > 5)",
              "ALTER TABLE t DROP CONSTRAINT nope",
              "CREATE TABLE u (x int, CONSTRAINT c CHECK (x > 0), CONSTRAINT c CHECK (x < 9))",
              "ALTER TABLE t ADD COLUMN z int CONSTRAINT t_y_check CHECK (z > 0)"]
    db = vv.connect(":memory:")
    try:
        for s in script:
            try:
                db.sql(s)
                got = None
            except vv.SqlError as e:
                got = (e.sqlstate, str(e))
            except vv.VarveError as e:
                got = (e.sqlstate, str(e))
            try:
                pg_conn.execute(s)
                want = None
            except Exception as e:
                want = (e.sqlstate, e.diag.message_primary)
            assert got == want, s
    finally:
        db.close()


def test_a_restored_row_is_held_to_the_checks_made_since(db):
    """restore(v) writes v's rows again: one that a CHECK made since refuses is
    refused as any new row is (CheckViolationError, nothing restored) — red-team 10:
    a deleted x = -1 came back live under CHECK (x > 0)."""
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
    db.sql("INSERT INTO t VALUES (1, -1), (2, 5)")
    v = db.version
    db.sql("DELETE FROM t WHERE id = 1")
    db.sql("ALTER TABLE t ADD CONSTRAINT pos CHECK (x > 0)")
    db.sql("INSERT INTO t VALUES (3, 4)")
    before = db.version
    with pytest.raises(vv.CheckViolationError):
        db.restore(v)
    assert db.version == before
    assert db.sql("SELECT id, x FROM t ORDER BY id").rows == [(2, 5), (3, 4)]
    db.sql("UPDATE t SET x = 1 WHERE id = 2")
    db.restore(before)                        # rows that fit come back
    assert db.sql("SELECT id, x FROM t ORDER BY id").rows == [(2, 5), (3, 4)]


def test_an_int2vector_compares_with_an_untyped_literal(db):
    """pg_index.indkey = '1' reads the literal as an int2vector (its elements
    separated by spaces), as PostgreSQL does: no raw KeyError (red-team 8 F02)."""
    db.sql("CREATE TABLE c (id bigint PRIMARY KEY, n int)")
    db.sql("CREATE INDEX ON c (n)")
    rows = db.sql("SELECT indexrelid::regclass::text, indkey = '2', '1' = indkey, "
                  "indkey <> '1 2' FROM pg_index ORDER BY 1").rows
    assert rows == [("c_n_idx", True, False, True), ("c_pkey", False, True, True)]
    with pytest.raises(vv.SqlError) as e:
        db.sql("SELECT indkey = 'x' FROM pg_index")
    assert e.value.sqlstate == "22P02"


def _at_format(path, version: int, sql: str):
    """(path, an open database) of a new file stamped as format `version` wrote it,
    `sql` run on it, which leaves that stamp."""
    vv.connect(path).close()
    restamp(path, version)
    db = vv.connect(path)
    db.sql(sql)
    assert stamped(path) == version
    return path, db


def test_a_constraint_over_several_columns_keeps_its_written_order_in_the_file(tmp_path):
    """A CHECK over several columns keeps each condition's place (format 7: a
    format-6 file is stamped first, so an older varvedb refuses it rather than
    misreading it); pg_get_constraintdef lists them as written after a reopen and
    a vacuum (defect: in the columns' order, `CHECK (b > 0 AND a > 0)` printed as
    `(a > 0) AND (b > 0)`)."""
    from varvedb.storage import format as F
    path, db = _at_format(tmp_path / "o.vv", 6, "CREATE TABLE o (id int PRIMARY KEY, a int, b int)")
    db.sql("ALTER TABLE o ADD CONSTRAINT ba CHECK (b > 0 AND a > 0 AND b < 9)")
    assert stamped(path) == F.FORMAT_VERSION >= 7
    q = "SELECT pg_get_constraintdef(oid, true) FROM pg_constraint WHERE conname = 'ba'"
    want = [("CHECK (b > 0 AND a > 0 AND b < 9)",)]
    assert db.sql(q).rows == want
    db.close()
    db = vv.connect(path)
    assert db.sql(q).rows == want
    db.vacuum()
    db.close()
    db = vv.connect(path)
    assert db.sql(q).rows == want
    db.close()


def test_a_check_keeps_how_it_was_written_in_the_file(tmp_path):
    """A CHECK written constant first (`0 < x`) or with vector_dims of a cast column
    (`vector_dims(h::vector)`) keeps that spelling (format 8: a format-7 file is
    stamped first) and is shown so after a reopen and a vacuum, as PostgreSQL shows
    it (defect: `CHECK ((x > 0))`, `vector_dims(h)`); it is enforced as before."""
    from varvedb.storage import format as F
    path, db = _at_format(tmp_path / "w.vv", 7, "CREATE TABLE p (id int PRIMARY KEY, x int)")
    db.sql("CREATE TABLE w (id int PRIMARY KEY, x int CHECK (0 < x), h halfvec(2) "
           "CHECK (2 = vector_dims(h::vector)))")
    assert stamped(path) == F.FORMAT_VERSION >= 8
    q = "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'w'::regclass " \
        "AND contype = 'c' ORDER BY conname"
    want = [("CHECK ((2 = vector_dims((h)::vector)))",), ("CHECK ((0 < x))",)]
    assert db.sql(q).rows == want
    for reopen in (False, True):
        db.close()
        db = vv.connect(path)
        assert db.sql(q).rows == want
        with pytest.raises(vv.CheckViolationError):
            db.sql("INSERT INTO w (id, x) VALUES (1, 0)")
        db.sql("INSERT INTO w (id, x, h) VALUES (1, 1, '[1,2]')")
        db.sql("DELETE FROM w")
        if not reopen:
            db.vacuum()
    db.close()


def test_a_keys_chosen_name_stays_with_the_file(tmp_path):
    """A primary key named t_pkey1 (a CHECK had t_pkey) keeps that name in the file
    (format 9: a format-8 file is stamped first) after the CHECK is dropped, a
    reopen and a vacuum (defect: it was t_pkey again); a key of its default name
    stores none (no stamp)."""
    from varvedb.storage import format as F
    path, db = _at_format(tmp_path / "k.vv", 8, "CREATE TABLE p (id int PRIMARY KEY, x int)")
    assert db.engine.table("p").schema.key is None
    db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, CONSTRAINT t_pkey CHECK (x > 0))")
    assert stamped(path) == F.FORMAT_VERSION >= 9
    db.sql("ALTER TABLE t DROP CONSTRAINT t_pkey")
    q = "SELECT conname FROM pg_constraint WHERE contype = 'p' ORDER BY 1"
    assert db.sql(q).rows == [("p_pkey",), ("t_pkey1",)]
    for vacuum in (True, False):
        db.close()
        db = vv.connect(path)
        assert db.sql(q).rows == [("p_pkey",), ("t_pkey1",)]
        if vacuum:
            db.vacuum()
    db.close()


def test_alter_column_type_keeps_a_columns_type_or_says_how_to_change_it():
    """ALTER COLUMN ... TYPE that keeps the type a column's values are kept as (int to
    bigint, text to varchar) changes nothing (sql_cases/ddl.sql: as PostgreSQL's
    answers); another type, or a USING that computes values, is 0A000 naming the
    way to do it, and the statement changes nothing (defect: 0A000 "ALTER TABLE
    AlterColumnType is not supported" for every one)."""
    db = vv.connect(":memory:")
    try:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, v varchar(3), f float8)")
        db.sql("INSERT INTO t VALUES (1, 5, 'a', 1.5)")
        db.sql("ALTER TABLE t ALTER COLUMN x TYPE smallint")
        for alter in ["ALTER COLUMN x TYPE text", "ALTER COLUMN v TYPE text",
                      "ALTER COLUMN f TYPE int", "ALTER COLUMN x TYPE bigint USING x * 2",
                      "ALTER COLUMN id TYPE text", "ALTER COLUMN x TYPE int[]",
                      "ADD COLUMN y int, ALTER COLUMN f TYPE text"]:
            with pytest.raises(vv.SqlError) as e:
                db.sql(f"ALTER TABLE t {alter}")
            assert e.value.sqlstate == "0A000" and "add a column of the new type" in str(e.value)
        assert db.sql("SELECT * FROM t").rows == [(1, 5, "a", 1.5)]
        assert db.sql("SELECT * FROM t").columns == ["id", "x", "v", "f"]
    finally:
        db.close()


def test_a_none_parameter_is_an_untyped_null_to_to_json(db):
    """db.sql()'s None is the untyped NULL psycopg sends: to_json($1) / to_jsonb($1)
    is 42804 as to_json(NULL) is (PostgreSQL answers a client so), on no row too;
    a parameter with a value, or a NULL with a type, is that value's JSON."""
    for text in ("SELECT to_json($1)", "SELECT to_jsonb($1)",
                 "SELECT to_json($1) FROM (SELECT 1) s WHERE false"):
        with pytest.raises(vv.SqlError) as e:
            db.sql(text, [None])
        assert e.value.sqlstate == "42804"
    assert db.sql("SELECT to_jsonb($1), to_json($2::text)", [5, None]).rows == [(5, None)]
