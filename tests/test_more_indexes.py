"""A second vector index on one column (issue 30; schema.Field.more_indexes): SQL's
CREATE INDEX twice on one column with different operator classes (pgvector-python's
SQLAlchemy test, an l2 and a cosine HNSW index of one column) builds both; on
enough rows that the planner walks a graph, each ORDER BY operator ranks through
the index of its metric (EXPLAIN names it) and finds what an exact scan finds;
DROP INDEX of either keeps the other; a checkpoint, reopen, replay, vacuum and
backup keep both. The answers on PostgreSQL + pgvector, and the catalog, are
tests/sql_cases/more_indexes.sql's."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from conftest import restamp, stamped
from test_index_exprs import _ids, _lit, _plan
from varvedb.errors import SchemaError, SqlError

N, DIM, K = 3000, 16, 10


def _rows(seed=0, n=N):
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


def _load(db, vecs, start=0):
    if start == 0:
        db.sql(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({DIM}), n int)")
    ids = np.arange(start, start + len(vecs))
    with db.transaction():
        db.collection("items").insert_arrays(id=ids, embedding=vecs, n=ids % 3)


def _exact(vecs, q, op):
    v, q = vecs.astype(np.float64), q.astype(np.float64)
    d = {"<->": lambda: ((v - q) ** 2).sum(1),
         "<=>": lambda: 1 - v @ q / (np.linalg.norm(v, axis=1) * np.linalg.norm(q)),
         "<#>": lambda: -(v @ q)}[op]()
    return list(np.argsort(d, kind="stable")[:K])


def _sql(op, q):
    return f"SELECT id FROM items ORDER BY embedding {op} '{_lit(q)}' LIMIT {K}"


def _recall(db, vecs, op, queries):
    got = sum(len(set(_ids(db, _sql(op, q))) & set(_exact(vecs, q, op))) for q in queries)
    return got / (len(queries) * K)


def _walks(db, op, using):
    """EXPLAIN of `op`'s top-k: a graph walk through the index `using` ("" the
    column's own)."""
    plan = _plan(db, _sql(op, _rows(9)[0]))
    shown = f") using {using} k=" if using else ") k="
    return shown in plan and ": graph" in plan


def _two(path, *names):
    """A database of N rows with an l2 and a cosine index of one column (named
    `names`, else PostgreSQL's names), both linked: (db, vectors, its table)."""
    vecs = _rows()
    db = vv.connect(path)
    _load(db, vecs)
    for name, ops in zip(names or ("", ""), ("vector_l2_ops", "vector_cosine_ops")):
        db.sql(f"CREATE INDEX {name} ON items USING hnsw (embedding {ops})")
    db.collection("items").wait_indexed("embedding")
    return db, vecs, db.engine.table("items")


def test_an_l2_and_a_cosine_index_each_answer_their_operator(tmp_path):
    db, vecs, t = _two(tmp_path / "two.vv")
    assert [(name, ix.metric, ix.nodes()) for name, ix in t.vector_choices("embedding")] \
        == [("", "l2", N), ("items_embedding_idx1", "cosine", N)]
    assert _walks(db, "<->", "") and _walks(db, "<=>", "items_embedding_idx1")
    queries = _rows(1)[:20]
    assert _recall(db, vecs, "<->", queries) >= 0.9
    assert _recall(db, vecs, "<=>", queries) >= 0.9
    # no index of <#>'s metric: scanned exactly, saying why
    plan = _plan(db, _sql("<#>", queries[0]))
    assert "exact scan (index built for l2)" in plan
    assert _ids(db, _sql("<#>", queries[0])) == _exact(vecs, queries[0], "<#>")
    db.close()


def test_the_same_opclass_twice_and_names(tmp_path):
    db = vv.connect(tmp_path / "n.vv")
    _load(db, _rows()[:10])
    db.sql("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops)")
    db.sql("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops)")      # PostgreSQL's too
    db.sql("CREATE INDEX named ON items USING hnsw (embedding vector_cosine_ops)")
    for sql in ("CREATE INDEX named ON items USING hnsw (embedding vector_ip_ops)",
                "CREATE INDEX items_embedding_idx1 ON items USING hnsw (embedding vector_ip_ops)"):
        before = db.version
        with pytest.raises(SqlError) as e:
            db.sql(sql)
        assert e.value.sqlstate == "42P07" and db.version == before
    db.sql("CREATE INDEX IF NOT EXISTS named ON items USING hnsw (embedding vector_ip_ops)")
    f = db.engine.table("items").schema.fields["embedding"]
    assert [s.name for s in f.vector_specs] == [None, "items_embedding_idx1", "named"]
    assert [s.metric for s in f.vector_specs] == ["l2", "l2", "cosine"]
    db.close()


def test_dropping_either_keeps_the_other_and_a_rollback_keeps_both(tmp_path):
    db, vecs, t = _two(tmp_path / "d.vv", "e_l2", "e_cos")
    graphs = [ix for _, ix in t.vector_choices("embedding")]
    db.sql("BEGIN")
    db.sql("DROP INDEX e_l2")
    db.sql("ROLLBACK")
    assert [ix for _, ix in t.vector_choices("embedding")] == graphs
    assert t.schema.fields["embedding"].metric == "l2"
    db.sql("DROP INDEX e_l2")
    # the cosine graph takes the column's place, the same graph (nothing rebuilt)
    assert t.vector_choices("embedding") == [("", graphs[1])]
    f = t.schema.fields["embedding"]
    # the column keeps its metric, the graph its own (red-team 11: the field took cosine)
    assert (f.vector_index.name, f.metric, f.more_indexes) == ("e_cos", "l2", ())
    assert _walks(db, "<=>", "")
    assert "exact scan (index built for cosine)" in _plan(db, _sql("<->", vecs[0]))
    db.sql("CREATE INDEX e_l2 ON items USING hnsw (embedding vector_l2_ops)")
    db.collection("items").wait_indexed("embedding")
    db.sql("DROP INDEX e_l2")       # a further one: the column's own stays
    assert t.vector_choices("embedding") == [("", graphs[1])]
    db.sql("DROP INDEX e_cos")
    assert t.vector_choices("embedding") == [] and \
        t.schema.fields["embedding"].vector_index is None
    db.close()


@pytest.mark.parametrize("step", ["reopen", "replay", "rebuild", "repair", "backup"])
def test_both_survive_a_reopen_replay_vacuum_and_backup(tmp_path, step):
    vecs = _rows(0, 4000)
    path = tmp_path / "r.vv"
    db = vv.connect(path)
    _load(db, vecs[:3000])
    db.sql("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops)")
    db.sql("CREATE INDEX e_cos ON items USING hnsw (embedding vector_cosine_ops) "
           "WITH (m = 8)")
    if step != "replay":    # (replay: the indexes' frames after the checkpoint)
        db.collection("items").wait_indexed("embedding")
        db.checkpoint()
    _load(db, vecs[3000:], start=3000)
    if step in ("rebuild", "repair"):      # vacuum's two ways with graphs
        db.collection("items").wait_indexed("embedding")
        db.sql("DELETE FROM items WHERE id < 100")
        db.vacuum(keep=1, graphs=step)
        vecs = vecs[100:]
    if step == "backup":
        db.backup(tmp_path / "b.vv")
        path = tmp_path / "b.vv"
    db.close()
    db = vv.connect(path)
    t = db.engine.table("items")
    specs = t.schema.fields["embedding"].vector_specs
    assert [(s.name, s.metric, s.m) for s in specs] == [(None, "l2", 16), ("e_cos", "cosine", 8)]
    db.collection("items").wait_indexed("embedding")
    assert [ix.nodes() for _, ix in t.vector_choices("embedding")] == [len(vecs)] * 2
    assert _walks(db, "<->", "") and _walks(db, "<=>", "e_cos")
    queries = _rows(1)[:10]
    off = 100 if step in ("rebuild", "repair") else 0
    for op in ("<->", "<=>"):
        got = sum(len({i - off for i in _ids(db, _sql(op, q))} & set(_exact(vecs, q, op)))
                  for q in queries)
        assert got / (len(queries) * K) >= 0.9, (step, op)
    db.close()


def test_an_hnsw_and_an_ivfflat_index_and_an_expression_beside(tmp_path):
    vecs = _rows()
    db = vv.connect(tmp_path / "i.vv")
    _load(db, vecs)
    db.sql("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops)")
    db.sql("CREATE INDEX e_ivf ON items USING ivfflat (embedding vector_ip_ops) "
           "WITH (lists = 20)")
    db.sql(f"CREATE INDEX e_half ON items USING hnsw ((embedding::halfvec({DIM})) "
           "halfvec_cosine_ops)")
    db.collection("items").wait_indexed("embedding")
    q = _rows(3)[0]
    plan = _plan(db, _sql("<#>", q))
    assert ") using e_ivf k=" in plan and "probes=" in plan
    assert _recall(db, vecs, "<#>", _rows(3)[:10]) >= 0.8
    sql = f"SELECT id FROM items ORDER BY embedding::halfvec({DIM}) <=> '{_lit(q)}' LIMIT {K}"
    plan = _plan(db, sql)
    assert f"embedding::halfvec({DIM}) (cosine) using e_half k=" in plan and ": graph" in plan
    half = vecs.astype(np.float16).astype(np.float32)
    assert len(set(_ids(db, sql)) & set(_exact(half, q.astype(np.float16), "<=>"))) >= 8
    assert _walks(db, "<->", "")
    # a width setting reaches a further index of the other kind (red-team 11: it
    # reached only the column's own kind's): ivfflat.probes the IVF one ...
    for probes in (1, 7):
        db.sql(f"SET ivfflat.probes = {probes}")
        assert f"using e_ivf k=10: IVF lists probes={probes}," in _plan(db, _sql("<#>", q))
    c = db.collection("items")
    assert f"using e_ivf k={K}: IVF lists probes=3," in str(
        c.explain(vector=q, limit=K, metric="dot", probes=3))
    # ... and hnsw.ef_search a further graph beside an IVF index of the column's own
    db.sql("DROP INDEX items_embedding_idx")
    db.sql("SET hnsw.ef_search = 77")
    assert "using e_half k=10: graph walk ef=77," in _plan(db, sql)
    assert "k=10: IVF lists probes=7," in _plan(db, _sql("<#>", q))
    db.close()


def test_the_python_api_adds_a_named_one_and_searches_rank_through_it():
    vecs = _rows()
    db = vv.connect(":memory:")
    c = db.create_collection("docs", {"v": vv.Vector(DIM, metric="l2", index=vv.HNSW())})
    c.insert_arrays(id=np.arange(N), v=vecs)
    with pytest.raises(SchemaError):            # a further one is named
        c.create_index("v", vv.HNSW(metric="cosine"))
    c.create_index("v", vv.HNSW(metric="cosine", name="v_cos"))
    c.wait_indexed("v")
    q = _rows(4)[0]
    assert "(cosine) using v_cos k=10: graph" in str(c.explain(vector=q, limit=K,
                                                                metric="cosine"))
    hits = c.search(q, limit=K, metric="cosine")
    assert len({h.id for h in hits} & set(_exact(vecs, q, "<=>"))) >= 8
    c.drop_index("v", "v_cos")
    assert db.engine.table("docs").vector_choices("v")[1:] == []
    db.close()


def test_dropping_a_fields_own_index_keeps_its_metric_and_the_next_its_own(tmp_path):
    """drop_index(field) promotes the further cosine graph; the field stays l2, so
    search() without metric= still ranks by l2 (exactly: no l2 index is left), and
    the promoted graph stays cosine, after a checkpoint and reopen too (red-team 11:
    the field took the promoted index's metric, and search() changed its answer)."""
    path = tmp_path / "m.vv"
    db = vv.connect(path)
    c = db.create_collection("t", {"v": vv.Vector(2, metric="l2", index=vv.HNSW(),
                                                   more_indexes=(vv.HNSW(name="cos",
                                                                         metric="cosine"),))})
    c.insert_arrays(v=np.array([[10, 0], [1, 1], [0.5, 0.4], [3, 3.1]], np.float32))
    q = np.array([1, 0], np.float32)
    assert [h.id for h in c.search(q, limit=2)] == [3, 2]
    c.drop_index("v")
    for step in ("dropped", "reopened"):
        if step == "reopened":
            db.checkpoint()
            db.close()
            db = vv.connect(path)
            c = db.collection("t")
        f = db.engine.table("t").schema.fields["v"]
        assert (f.metric, f.vector_index.name, f.more_indexes) == ("l2", "cos", ()), step
        assert [ix.metric for _, ix in db.engine.table("t").vector_choices("v")] == \
            ["cosine"], step
        assert [h.id for h in c.search(q, limit=2)] == [3, 2], step
        assert [h.id for h in c.search(q, limit=2, metric="cosine")] == [1, 3], step
        assert "index built for cosine" in str(c.explain(vector=q, limit=2)), step
    db.close()


def test_a_files_further_indexes_are_checked_not_trusted():
    base = vv.Vector(4, metric="l2", index=vv.HNSW()).to_dict()
    for more in ([vv.HNSW(metric="cosine").to_dict()],                 # unnamed
                 [vv.HNSW(name="a").to_dict(), vv.HNSW(name="a").to_dict()],  # twice
                 "x"):
        with pytest.raises(SchemaError):
            vv.Field.from_dict({**base, "more_indexes": more})
    with pytest.raises(SchemaError):        # none without the field's own
        vv.Field.from_dict({**vv.Vector(4).to_dict(),
                            "more_indexes": [vv.HNSW(name="a").to_dict()]})
    f = vv.Field.from_dict({**base, "more_indexes": [vv.HNSW(name="a", metric="dot").to_dict()]})
    assert vv.Field.from_dict(f.to_dict()) == f


def test_the_shells_describe_lists_each():
    from varvedb.shell import describe_table
    db = vv.connect(":memory:")
    db.sql("CREATE TABLE t (id bigint PRIMARY KEY, emb vector(3))")
    db.sql("CREATE INDEX ON t USING hnsw (emb vector_l2_ops)")
    db.sql("CREATE INDEX ON t USING hnsw (emb vector_cosine_ops) WITH (m = 8)")
    db.sql("CREATE INDEX t_l1 ON t USING hnsw (emb vector_l1_ops)")
    db.sql("CREATE INDEX t_ivf ON t USING ivfflat (emb vector_ip_ops) WITH (lists = 4)")
    out = describe_table(db, "t")
    assert '    "t_emb_idx" hnsw (emb vector_l2_ops) WITH (m = 16, ef_construction = 200)\n' \
        '    "t_emb_idx1" hnsw (emb vector_cosine_ops) WITH (m = 8, ef_construction = 200)\n' \
        '    "t_l1" hnsw (emb vector_l1_ops) WITH (m = 16, ef_construction = 200)\n' \
        '    "t_ivf" ivfflat (emb vector_ip_ops)\n' in out
    db.close()


def test_updates_and_the_range_check_of_a_further_halfvec_index():
    db = vv.connect(":memory:")
    db.sql("CREATE TABLE t (id bigint PRIMARY KEY, emb vector(3), n int)")
    db.sql("INSERT INTO t VALUES (1, '[1,0,0]', 1), (2, '[0,1,0]', 2)")
    db.sql("CREATE INDEX ON t USING hnsw (emb vector_l2_ops)")
    db.sql("CREATE INDEX ON t USING hnsw ((emb::halfvec(3)) halfvec_cosine_ops) WHERE (n = 1)")
    db.sql("UPDATE t SET emb = '[0,0,1]' WHERE id = 1")
    assert db.sql("SELECT id FROM t ORDER BY emb <-> '[0,0,0.9]' LIMIT 1").rows == [(1,)]
    before = db.version
    with pytest.raises(vv.VectorRangeError) as e:  # past half precision, in the index's rows
        db.sql("INSERT INTO t VALUES (3, '[1e6,0,0]', 1)")
    assert e.value.sqlstate == "22003" and db.version == before
    db.sql("INSERT INTO t VALUES (3, '[1e6,0,0]', 2)")     # (a row the index does not hold)
    db.collection("t").wait_indexed("emb")
    db.sql("ALTER TABLE t DROP COLUMN n")   # the partial index goes with its column
    f = db.engine.table("t").schema.fields["emb"]
    assert f.vector_index is not None and f.more_indexes == ()
    assert [n for n, _ in db.engine.table("t").vector_choices("emb")] == [""]
    db.close()


def test_a_further_index_stamps_the_files_format_first(tmp_path):
    """An older varvedb cannot read a field's further index: the header is stamped
    with this format (5) before the first one's frame, so that it refuses the file
    as newer instead of calling it corrupt; one index a column keeps the old stamp."""
    from varvedb.storage import format as F
    path = tmp_path / "f.vv"
    db = vv.connect(path)
    db.sql(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({DIM}))")
    db.close()
    restamp(path, 4)                # as a format-4 varvedb wrote it
    db = vv.connect(path)
    db.sql("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops)")
    assert stamped(path) == 4
    db.sql("CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops)")
    assert stamped(path) == F.FORMAT_VERSION >= 5
    db.close()
