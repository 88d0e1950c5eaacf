"""Expression and partial HNSW indexes from SQL (issue 30; sql/index_exprs.py,
engine/columns.py's DerivedColumn): on enough rows that the planner walks the
graph, a query ranking by the index's expression uses it (EXPLAIN says so) and
finds what an exact scan of the same values finds; a partial index holds only
its predicate's rows and follows updates; the index survives a checkpoint,
reopen, replay, vacuum and as_of. The answers on PostgreSQL + pgvector are
tests/sql_cases/index_exprs.sql's."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.errors import SqlError

N, DIM, K = 3000, 16, 10


def _rows(seed=0, n=N):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, DIM)).astype(np.float32)


def _load(db, vecs, n_mod=3):
    db.sql(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({DIM}), n int)")
    with db.transaction():
        db.collection("items").insert_arrays(id=np.arange(len(vecs)), embedding=vecs,
                                             n=np.arange(len(vecs)) % n_mod)


def _lit(q):
    return "[" + ",".join(f"{x:.6f}" for x in q) + "]"


def _plan(db, sql):
    return "\n".join(r[0] for r in db.sql("EXPLAIN " + sql).rows)


def _ids(db, sql):
    return [r[0] for r in db.sql(sql).rows]


def _exact_l2(vecs, q, rows=None):
    d = ((vecs.astype(np.float64) - q) ** 2).sum(1)
    if rows is not None:
        d = np.where(rows, d, np.inf)
    return list(np.argsort(d, kind="stable")[:K])


def test_halfvec_index_walks_the_graph_and_finds_the_exact_rows(tmp_path):
    vecs = _rows()
    db = vv.connect(tmp_path / "h.vv")
    _load(db, vecs)
    db.sql("CREATE INDEX ON items USING hnsw ((embedding::halfvec(16)) halfvec_l2_ops)")
    db.collection("items").wait_indexed("embedding")
    half = vecs.astype(np.float16).astype(np.float32)
    queries = _rows(1)[:20]
    got = 0
    for q in queries:
        sql = f"SELECT id FROM items ORDER BY embedding::halfvec({DIM}) <-> '{_lit(q)}' LIMIT {K}"
        assert "VectorTopK embedding::halfvec(16) (l2) k=10: graph" in _plan(db, sql)
        got += len(set(_ids(db, sql)) & set(_exact_l2(half, q.astype(np.float16))))
    assert got / (len(queries) * K) >= 0.9
    # the column itself is not what the index holds: scanned exactly
    sql = f"SELECT id FROM items ORDER BY embedding <-> '{_lit(queries[0])}' LIMIT {K}"
    plan = _plan(db, sql)
    assert "exact scan (the index is on an expression)" in plan
    assert _ids(db, sql) == _exact_l2(vecs, queries[0])
    db.close()


def test_binary_quantize_index_and_its_rerank(tmp_path):
    vecs = _rows()
    db = vv.connect(tmp_path / "b.vv")
    _load(db, vecs)
    db.sql(f"CREATE INDEX ON items USING hnsw ((binary_quantize(embedding)::bit({DIM})) "
           "bit_hamming_ops)")
    db.collection("items").wait_indexed("embedding")
    bits = vecs > 0
    for q in _rows(2)[:10]:
        top = (f"SELECT id FROM items ORDER BY binary_quantize(embedding)::bit({DIM}) <~> "
               f"binary_quantize('{_lit(q)}'::vector) LIMIT {K}")
        assert "VectorTopK binary_quantize(embedding)::bit(16) (hamming) k=10: graph" \
            in _plan(db, top)
        ham = (bits != (q > 0)).sum(1)
        got = ham[_ids(db, top)]
        # ties are many: the walk's distances are the exact k best distances, nearly
        assert np.mean(np.sort(got) <= np.sort(ham)[:K] + 1) >= 0.9
        inner = top.replace(f"LIMIT {K}", "LIMIT 100").replace("SELECT id", "SELECT *")
        rerank = (f"SELECT id FROM ({inner}) s "
                  f"ORDER BY embedding <=> '{_lit(q)}' LIMIT 5")
        assert len(_ids(db, rerank)) == 5
    db.close()


def test_subvector_index(tmp_path):
    vecs = _rows()
    db = vv.connect(tmp_path / "s.vv")
    _load(db, vecs)
    db.sql("CREATE INDEX ON items USING hnsw ((subvector(embedding, 3, 8)::vector(8)) "
           "vector_l2_ops)")
    db.collection("items").wait_indexed("embedding")
    hits = 0
    for q in _rows(3)[:10]:
        sql = (f"SELECT id FROM items ORDER BY subvector(embedding, 3, 8)::vector(8) <-> "
               f"subvector('{_lit(q)}'::vector, 3, 8) LIMIT {K}")
        assert "graph" in _plan(db, sql)
        hits += len(set(_ids(db, sql)) & set(_exact_l2(vecs[:, 2:10], q[2:10])))
    assert hits / 100 >= 0.9
    db.close()


def test_partial_index_holds_its_rows_and_follows_updates(tmp_path):
    vecs = _rows(0, 7000)     # 2333 rows of n = 1: above the planner's exact scan
    db = vv.connect(tmp_path / "p.vv")
    _load(db, vecs)
    db.sql("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops) WHERE (n = 1)")
    coll = db.collection("items")
    coll.wait_indexed("embedding")
    t = db.engine.table("items")
    assert t.vector_indexes["embedding"].nodes() == int((np.arange(7000) % 3 == 1).sum())
    n = np.arange(7000) % 3
    q = _rows(4)[0]
    sql = f"SELECT id FROM items WHERE n = 1 ORDER BY embedding <-> '{_lit(q)}' LIMIT {K}"
    assert "graph" in _plan(db, sql)
    assert len(set(_ids(db, sql)) & set(_exact_l2(vecs, q, n == 1))) >= 9
    # a cast to the column's own type is the column (pgvector's README writes it so)
    cast = sql.replace("ORDER BY embedding", f"ORDER BY embedding::vector({DIM})")
    assert "VectorTopK embedding (l2) k=10: graph" in _plan(db, cast)
    assert _ids(db, cast) == _ids(db, sql)
    # a WHERE that does not imply the predicate: exact, and right
    other = f"SELECT id FROM items WHERE n = 2 ORDER BY embedding <-> '{_lit(q)}' LIMIT {K}"
    assert "does not imply the partial index's predicate" in _plan(db, other)
    assert _ids(db, other) == _exact_l2(vecs, q, n == 2)
    # the nearest rows of n = 2 move in, the nearest of n = 1 move out
    move_in = _exact_l2(vecs, q, n == 2)[:5]
    move_out = _exact_l2(vecs, q, n == 1)[:5]
    db.sql(f"UPDATE items SET n = 1 WHERE id IN ({','.join(map(str, move_in))})")
    db.sql(f"UPDATE items SET n = 0 WHERE id IN ({','.join(map(str, move_out))})")
    n[move_in], n[move_out] = 1, 0
    coll.wait_indexed("embedding")
    got = _ids(db, sql)
    assert set(move_in) <= set(got) and not set(move_out) & set(got)
    assert len(set(got) & set(_exact_l2(vecs, q, n == 1))) >= 9
    # dropping the column its predicate reads drops the index, as in PostgreSQL
    db.sql("ALTER TABLE items DROP COLUMN n")
    assert "embedding" not in db.engine.table("items").vector_indexes
    db.close()


def test_round_trip_checkpoint_reopen_replay_vacuum_as_of(tmp_path):
    vecs = _rows(0, 7000)
    path = tmp_path / "r.vv"
    db = vv.connect(path)
    _load(db, vecs[:5000])
    db.sql("CREATE INDEX hx ON items USING hnsw ((embedding::halfvec(16)) halfvec_l2_ops) "
           "WHERE (n >= 1)")
    db.collection("items").wait_indexed("embedding")
    v_before = db.version
    db.checkpoint()
    with db.transaction():
        db.collection("items").insert_arrays(id=np.arange(5000, 7000), embedding=vecs[5000:],
                                             n=np.arange(5000, 7000) % 3)
    db.close()          # the last rows: in the log after the checkpoint, replayed at open
    q = _rows(5)[0]
    n = np.arange(7000) % 3
    half = vecs.astype(np.float16).astype(np.float32)
    sql = (f"SELECT id FROM items WHERE n >= 1 ORDER BY embedding::halfvec(16) <-> "
           f"'{_lit(q)}' LIMIT {K}")
    want = _exact_l2(half, q.astype(np.float16), n >= 1)
    for step in ("reopen", "vacuum"):
        db = vv.connect(path)
        spec = db.engine.table("items").schema.fields["embedding"].vector_index
        assert (spec.expr, spec.where, spec.name) == (("cast", 0, 0, "f16"),
                                                        (("n", ">=", 1),), "hx")
        db.collection("items").wait_indexed("embedding")
        assert "graph" in _plan(db, sql)
        assert len(set(_ids(db, sql)) & set(want)) >= 9, step
        if step == "reopen":
            old = db.sql(f"{sql} AS OF VERSION {v_before}")
            assert len(old.rows) == K and all(r[0] < 5000 for r in old.rows)
            db.vacuum()
        db.close()


def test_refusals(tmp_path):
    db = vv.connect(tmp_path / "x.vv")
    _load(db, _rows()[:10])
    for sql, state in [
        ("CREATE INDEX ON items USING ivfflat ((embedding::halfvec(16)) halfvec_l2_ops)",
         "0A000"),
        ("CREATE INDEX ON items USING hnsw (embedding vector_l2_ops) WHERE (n % 2 = 1)",
         "0A000"),
        ("CREATE INDEX ON items USING hnsw ((embedding::halfvec(16)) vector_l2_ops)", "42804"),
        ("CREATE INDEX ON items USING hnsw ((embedding::halfvec(8)) halfvec_l2_ops)", "22000"),
        ("CREATE INDEX ON items USING hnsw ((subvector(embedding, 10, 8)::vector(8)) "
         "vector_l2_ops)", "0A000"),
        ("CREATE INDEX ON items USING hnsw ((l2_normalize(embedding)) vector_l2_ops)",
         "0A000"),
    ]:
        before = db.version
        with pytest.raises(SqlError) as e:
            db.sql(sql)
        assert e.value.sqlstate == state, sql
        assert db.version == before
    db.close()


def test_catalog_rename_and_a_two_column_btree():
    """pg_get_indexdef shows the expression and the predicate; renaming the
    predicate's column renames it there (the index keeps its rows); a two-column
    btree index is its leading column's, under PostgreSQL's name."""
    db = vv.connect(":memory:")
    db.sql("CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(3), n int, t text)")
    db.sql("CREATE INDEX ON items USING hnsw ((binary_quantize(embedding)::bit(3)) "
           "bit_hamming_ops) WHERE (n = 1 AND t = 'a''b' AND t IS NOT NULL)")
    db.sql("CREATE INDEX ON items (n, t)")
    q = "SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_class c WHERE c.relkind = 'i' " \
        "ORDER BY 1"
    assert db.sql(q).rows == [
        ("items_binary_quantize_idx", "CREATE INDEX items_binary_quantize_idx ON public.items "
         "USING hnsw ((binary_quantize(embedding)::bit(3)) bit_hamming_ops) WHERE (n = 1 AND "
         "t = 'a''b' AND t IS NOT NULL)"),
        ("items_n_t_idx", "CREATE INDEX items_n_t_idx ON public.items USING btree (n)"),
        ("items_pkey", "CREATE UNIQUE INDEX items_pkey ON public.items USING btree (id)")]
    db.sql("ALTER TABLE items RENAME COLUMN n TO m")
    db.sql("INSERT INTO items VALUES (1, '[1,2,3]', 1, 'a''b'), (2, '[1,2,3]', 2, 'a''b'), "
           "(3, '[1,-2,3]', 1, 'a''b')")
    db.collection("items").wait_indexed("embedding")
    t = db.engine.table("items")
    assert t.schema.fields["embedding"].vector_index.where[0] == ("m", "=", 1)
    assert t.vector_indexes["embedding"].nodes() == 2
    assert "WHERE (m = 1 AND" in db.sql(q).rows[0][1]
    db.close()


def test_a_renamed_predicate_column_and_a_new_one_of_its_old_name(tmp_path):
    """A partial index WHERE (n = 1), then RENAME n TO m, ADD COLUMN n and UPDATE
    SET n = 1: a query's WHERE n = 1 (the new column: every row) does not imply
    the index's predicate, now m = 1, and is scanned exactly, not walked through a
    graph that lacks the nearest rows (red-team 11: the planner read the predicate
    CREATE INDEX gave); WHERE m = 1 walks it. An expression index over the renamed
    vector column still answers its expression."""
    vecs = _rows(0, 6000)
    n = np.arange(6000) % 2
    vecs[n == 1] += 10          # the partial index's rows lie far from the query
    db = vv.connect(tmp_path / "r.vv")
    _load(db, vecs, n_mod=2)
    db.sql("CREATE INDEX part ON items USING hnsw (embedding vector_l2_ops) WHERE (n = 1)")
    db.sql(f"CREATE INDEX hx ON items USING hnsw ((embedding::halfvec({DIM})) "
           "halfvec_cosine_ops)")
    db.sql("ALTER TABLE items RENAME COLUMN n TO m")
    db.sql("ALTER TABLE items ADD COLUMN n int")
    db.sql("UPDATE items SET n = 1")
    db.sql("ALTER TABLE items RENAME COLUMN embedding TO e")
    db.collection("items").wait_indexed("e")
    q = _rows(4)[0]
    sql = f"SELECT id FROM items WHERE n = 1 ORDER BY e <-> '{_lit(q)}' LIMIT {K}"
    assert "does not imply the partial index's predicate" in _plan(db, sql)
    assert _ids(db, sql) == _exact_l2(vecs, q)
    walked = sql.replace("WHERE n = 1", "WHERE m = 1")
    assert "VectorTopK e (l2) k=10: graph" in _plan(db, walked)
    assert len(set(_ids(db, walked)) & set(_exact_l2(vecs, q, n == 1))) >= 9
    half = f"SELECT id FROM items ORDER BY e::halfvec({DIM}) <=> '{_lit(q)}' LIMIT {K}"
    assert f"e::halfvec({DIM}) (cosine) using hx k=10: graph" in _plan(db, half)
    h = vecs.astype(np.float16).astype(np.float64)
    cos = 1 - h @ q / np.linalg.norm(h, axis=1)
    assert len(set(_ids(db, half)) & set(np.argsort(cos, kind="stable")[:K])) >= 8
    db.close()


def test_partitions_stay_refused_and_say_why():
    db = vv.connect(":memory:")
    with pytest.raises(SqlError) as e:
        db.sql("CREATE TABLE p (embedding vector(3), category_id int) "
               "PARTITION BY LIST(category_id)")
    assert e.value.sqlstate == "0A000" and "partial HNSW index" in str(e.value)
    db.close()


@pytest.mark.parametrize("dtype", ["vector", "halfvec"])
def test_l1_index_walks_the_graph_and_ranks_by_l1(tmp_path, dtype):
    """vector_l1_ops / halfvec_l1_ops: a graph of l2 neighbours whose candidates are
    ranked by l1 (index/vector_index.py); the field keeps its metric; the index
    comes back from a checkpoint."""
    vecs = _rows()
    path = tmp_path / "l1.vv"
    db = vv.connect(path)
    db.sql(f"CREATE TABLE items (id bigint PRIMARY KEY, embedding {dtype}({DIM}))")
    db.collection("items").insert_arrays(id=np.arange(N), embedding=vecs)
    db.sql(f"CREATE INDEX ON items USING hnsw (embedding {dtype}_l1_ops)")
    db.collection("items").wait_indexed("embedding")
    db.checkpoint()
    db.close()
    db = vv.connect(path)
    stored = vecs.astype(np.float16).astype(np.float64) if dtype == "halfvec" else vecs
    hits = 0
    for q in _rows(6)[:20]:
        sql = f"SELECT id FROM items ORDER BY embedding <+> '{_lit(q)}' LIMIT {K}"
        assert "VectorTopK embedding (l1) k=10: graph" in _plan(db, sql)
        want = np.argsort(np.abs(stored - q.astype(np.float32)).sum(1), kind="stable")[:K]
        hits += len(set(_ids(db, sql)) & set(want.tolist()))
    assert hits / 200 >= 0.9
    # the index's opclass in the catalog; ivfflat has no l1 class (pgvector's 42704)
    assert f"{dtype}_l1_ops" in db.sql(
        "SELECT pg_get_indexdef(c.oid) FROM pg_class c WHERE c.relname = "
        "'items_embedding_idx'").rows[0][0]
    with pytest.raises(SqlError) as e:
        db.sql(f"CREATE INDEX ON items USING ivfflat (embedding {dtype}_l1_ops)")
    assert e.value.sqlstate == "42704"
    db.close()


def test_the_python_api_makes_one_and_its_searches_rank_the_column():
    """vv.HNSW(expr=..., where=...) is the same index from the Python API; the API's
    searches rank the field's own vectors, so they scan exactly and say why."""
    vecs = _rows()
    db = vv.connect(":memory:")
    c = db.create_collection("items", {"embedding": vv.Vector(DIM, metric="l2"),
                                       "n": vv.Int()})
    c.insert_arrays(id=np.arange(N), embedding=vecs, n=np.arange(N) % 3)
    c.create_index("embedding", vv.HNSW(metric="hamming", expr=("binary_quantize", 0, 0, "bit")))
    c.wait_indexed("embedding")
    q = _rows(7)[0]
    hits = c.search(q, limit=K)
    assert [h.id for h in hits] == _exact_l2(vecs, q)
    assert "the index is on an expression" in str(hits.plan)
    sql = (f"SELECT id FROM items ORDER BY binary_quantize(embedding)::bit({DIM}) <~> "
           f"binary_quantize('{_lit(q)}'::vector) LIMIT {K}")
    assert "graph" in _plan(db, sql)
    db.close()


@pytest.mark.parametrize("where", [
    (("nope", "=", 1),), (("meta", "=", 1),), (("n", "=", "x"),), (("n", "=", True),),
    (("flag", "=", 1),), (("name", "<", 2),),
])
def test_a_partial_predicate_is_checked_against_the_fields(tmp_path, where):
    """vv.HNSW(where=...) from the Python API reads scalar fields of the collection
    with values of their kind: anything else is a SchemaError at create_index (or in
    the schema), the file unchanged — not a maintainer that fails for good on its
    first row (red-team 7, F6)."""
    from conftest import file_digest
    path = str(tmp_path / "w.varve")
    db = vv.connect(path)
    c = db.create_collection("items", {"embedding": vv.Vector(DIM, metric="l2"),
                                       "n": vv.Int(), "flag": vv.Bool(), "name": "text",
                                       "meta": "json"})
    c.insert_arrays(id=np.arange(10), embedding=_rows()[:10], n=np.arange(10))
    db.checkpoint()
    before = file_digest(path)
    with pytest.raises(vv.SchemaError, match="partial index"):
        c.create_index("embedding", vv.HNSW(where=where))
    with pytest.raises(vv.SchemaError, match="partial index"):
        db.create_collection("other", {"n": vv.Int(), "embedding": vv.Vector(
            DIM, metric="l2", index=vv.HNSW(where=where))})
    assert file_digest(path) == before
    c.create_index("embedding", vv.HNSW(where=(("n", "<", 5),)))
    assert c.wait_indexed(timeout=1800)                 # a hang guard
    db.close()


@pytest.mark.parametrize("spec", [
    {"kind": "hnsw", "metric": "l2", "expr": ["cast", 0, 0, "f64"]},
    {"kind": "hnsw", "metric": "l2", "expr": ["subvector", 1, 0, "f32"]},
    {"kind": "hnsw", "metric": "hamming", "expr": ["cast", 0, 0, "bit"]},
    {"kind": "hnsw", "expr": ["cast", 0, 0, "f16"]},
    {"kind": "hnsw", "metric": "l2", "where": [["n", "~", 1]]},
    {"kind": "hnsw", "metric": "l2", "where": [["n", "=", None]]},
    {"kind": "hnsw", "metric": "l2", "where": [["1bad", "=", 1]]},
    {"kind": "hnsw", "metric": "l2", "where": [["n", "=", [1]]]},
])
def test_a_files_expression_or_predicate_is_checked_not_trusted(spec):
    from varvedb.errors import SchemaError
    from varvedb.schema import Field, index_spec_from_dict
    with pytest.raises(SchemaError):
        index_spec_from_dict({"m": 16, "ef_construction": 64, "ef_search": 40,
                              "quantize": None, **spec})
    with pytest.raises(SchemaError):    # nor a check that is no condition of its field
        Field.from_dict({"kind": "int", "check": [["=", "one"]]})


def test_searches_beside_the_link_read_whole_derived_rows():
    """Searches while the maintainer links an expression index (its DerivedColumn
    filled by both): every answer is k rows of the expression's nearest, by the
    cosine distance the derived norms give."""
    import threading
    vecs = _rows(0, 6000)
    db = vv.connect(":memory:")
    _load(db, vecs)
    db.sql("CREATE INDEX ON items USING hnsw ((subvector(embedding, 2, 12)::halfvec(12)) "
           "halfvec_cosine_ops)")
    sub = vecs[:, 1:13].astype(np.float16).astype(np.float64)
    sub /= np.linalg.norm(sub, axis=1, keepdims=True)
    qs = _rows(8)[:8]
    wants = []
    for q in qs:
        qq = q[1:13].astype(np.float16).astype(np.float64)
        wants.append(set(np.argsort(-(sub @ (qq / np.linalg.norm(qq))))[:K].tolist()))
    scores, failures = [], []

    def search():
        try:
            for _ in range(6):
                for q, want in zip(qs, wants):
                    got = _ids(db, f"SELECT id FROM items ORDER BY subvector(embedding, 2, 12)"
                                   f"::halfvec(12) <=> subvector('{_lit(q)}'::halfvec, 2, 12) "
                                   f"LIMIT {K}")
                    scores.append(len(set(got) & want) / K)
        except Exception as e:      # (raised below, in the test's thread)
            failures.append(e)
    threads = [threading.Thread(target=search) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)         # a hang guard
    assert not failures, failures
    assert db.collection("items").wait_indexed("embedding")
    assert len(scores) == 2 * 6 * len(qs) and np.mean(scores) >= 0.9
    db.close()



def test_a_value_past_half_precision_under_a_halfvec_index_is_refused_whole(tmp_path):
    """An index that casts a vector to halfvec cannot hold an element past float16's
    range: every write holding one (insert, upsert, replace, insert_arrays, update,
    SQL's INSERT, COPY, UPDATE, a restore) is refused with VectorRangeError (22003,
    as pgvector's cast) before any of it is applied; a row the index leaves out (a
    partial index's predicate) is not; an index over live rows holding one is
    refused and not made. (Before: the write was kept, the row left out of the
    graph and ranked as a zero vector.) PostgreSQL's answers to the same in SQL:
    tests/sql_cases/index_exprs.sql."""
    half = vv.HNSW(metric="l2", expr=("cast", 0, 0, "f16"))
    db = vv.connect(tmp_path / "r.vv")
    c = db.create_collection("items", {"embedding": vv.Vector(3, metric="l2"), "n": vv.Int(),
                                       "tag": vv.Text()})
    c.insert([{"id": 1, "embedding": [1, 2, 3], "n": 1, "tag": "a"},
              {"id": 2, "embedding": [1e6, 0, 0], "n": 2, "tag": "b"}])
    v = db.version
    with pytest.raises(vv.VectorRangeError, match='"1e[+]06" is out of range for type halfvec'
                       ) as e:
        c.create_index("embedding", half)
    assert e.value.sqlstate == "22003"
    assert db.version == v and c.schema.fields["embedding"].vector_index is None
    # a partial index whose predicate leaves row 2 out is made
    c.create_index("embedding", vv.HNSW(metric="l2", expr=("cast", 0, 0, "f16"),
                                        where=(("tag", "=", "a"),)))
    v = db.version
    bad = [{"id": 3, "embedding": [0, 0, 1], "n": 1, "tag": "a"},
           {"id": 4, "embedding": [0, -7e4, 0], "n": 1, "tag": "a"}]
    refusals = [
        lambda: c.insert(bad), lambda: c.upsert(bad), lambda: c.replace(bad),
        lambda: c.insert_arrays(id=[3, 4], embedding=np.array([b["embedding"] for b in bad],
                                                              np.float32),
                                n=[1, 1], tag=["a", "a"]),
        lambda: c.update({"tag": "a"}, ids=[2]),
        lambda: c.update({"embedding": [65520, 0, 0]}, ids=[1]),
        lambda: c.upsert({"id": 2, "tag": "a"}),       # merged: row 2's vector, now held
        lambda: db.sql("INSERT INTO items (id, embedding, n, tag) VALUES "
                       "(3, '[0,0,1]', 1, 'a'), (4, '[0,-70000,0]', 1, 'a')"),
        lambda: db.sql("COPY items (id, embedding, n, tag) FROM STDIN",
                       copy_data="3\t[0,0,1]\t1\ta\n4\t[0,-70000,0]\t1\ta\n"),
        lambda: db.sql("UPDATE items SET tag = 'a'")]
    for refuse in refusals:
        with pytest.raises(vv.VectorRangeError) as e:
            refuse()
        assert e.value.sqlstate == "22003"
        assert db.version == v
    assert sorted(d["id"] for d in c.get(ids=[1, 2, 3, 4]) if d) == [1, 2]
    # inside a transaction: the refused write leaves nothing, the transaction goes on
    with db.transaction():
        c.insert({"id": 6, "embedding": [0, 1, 0], "n": 1, "tag": "a"})
        with pytest.raises(vv.VectorRangeError):
            c.upsert([{"id": 6, "embedding": [0, 2, 0], "n": 1, "tag": "a"}] + bad[1:])
        c.insert({"id": 5, "embedding": [9e5, 0, 0], "n": 1, "tag": "z"})   # not held
    assert sorted(d["id"] for d in c.get(ids=[1, 2, 3, 4, 5, 6]) if d) == [1, 2, 5, 6]
    assert c.get(6)["embedding"].tolist() == [0, 1, 0]
    # a restore bringing back a row the index cannot hold is refused whole
    before = db.version
    c.update({"tag": "b"}, ids=[1])
    c.delete([2, 5])
    c.drop_index("embedding")
    c.create_index("embedding", half)        # row 2 is dead now: made
    v = db.version
    with pytest.raises(vv.VectorRangeError):
        db.restore(before)
    assert db.version == v and c.get(1)["tag"] == "b" and c.get(2) is None
    hits = db.sql("SELECT id FROM items ORDER BY embedding::halfvec(3) <-> '[0,0,0]' LIMIT 9")
    assert [r[0] for r in hits.rows] == [6, 1]
    db.close()


def test_a_search_inside_a_transaction_derives_only_its_new_rows(monkeypatch):
    """The rows an expression index holds are derived once: a search inside a write
    transaction derives only the rows written since its last search, not its
    transaction's rows again nor the committed ones (red-team 7, F8: each search
    re-derived them and concatenated the whole column), and reads the column in
    place; a rollback drops what was derived of its rows, so the rows a later
    transaction writes in their place are derived anew. Every answer is the
    exact one (a counter on the derivation, not a clock)."""
    from varvedb.engine.columns import DerivedColumn
    derived = []
    real = DerivedColumn.derive

    def counting(self, lo, hi):
        derived.append((lo, hi))
        return real(self, lo, hi)
    monkeypatch.setattr(DerivedColumn, "derive", counting)
    vecs = _rows(0, 600)
    db = vv.connect(":memory:")
    _load(db, vecs)
    db.sql(f"CREATE INDEX ON items USING hnsw ((subvector(embedding, 2, 12)::halfvec(12)) "
           "halfvec_l2_ops)")
    c = db.collection("items")
    assert c.wait_indexed("embedding", timeout=1800)          # a hang guard
    t = c.table
    col = t.index_column("embedding", t.n)
    q = _rows(3)[0]
    sql = (f"SELECT id FROM items ORDER BY subvector(embedding, 2, 12)::halfvec(12) <-> "
           f"subvector('{_lit(q)}'::vector, 2, 12)::halfvec(12) LIMIT {K}")

    def exact(vs):
        sub = vs[:, 1:13].astype(np.float16).astype(np.float64)
        qq = q[1:13].astype(np.float16).astype(np.float64)
        return _exact_l2(sub, qq)

    def search(vs):
        assert sorted(_ids(db, sql)) == sorted(exact(vs))
    derived.clear()
    near = np.tile(q, (3, 1)) + np.float32(0.01) * _rows(4, 3)     # nearer than any
    with db.transaction():
        c.insert_arrays(id=np.arange(600, 602), embedding=near[:2], n=[0, 0])
        for _ in range(3):
            search(np.concatenate([vecs, near[:2]]))
        c.insert_arrays(id=[602], embedding=near[2:], n=[0])
        for _ in range(3):
            search(np.concatenate([vecs, near]))
        arena, _ = col.frozen(t.n)
        assert np.shares_memory(arena, col.arena.data)        # in place, not a copy
    assert derived == [(600, 602), (602, 603)]
    assert sorted(_ids(db, sql)) == sorted(exact(np.concatenate([vecs, near])))
    assert derived == [(600, 602), (602, 603)]               # committed: kept as they were
    # a rollback: its rows are dropped, the next transaction's derived in their place
    far = -np.tile(q, (2, 1))
    with pytest.raises(RuntimeError):
        with db.transaction():
            nearer = np.tile(q, (2, 1)) + np.float32(0.001) * _rows(5, 2)
            c.insert_arrays(id=[603, 604], embedding=nearer, n=[0, 0])
            search(np.concatenate([vecs, near, nearer]))
            raise RuntimeError("roll it back")
    with db.transaction():
        c.insert_arrays(id=[603, 604], embedding=far, n=[0, 0])
        search(np.concatenate([vecs, near, far]))
    assert derived[2:] == [(603, 605), (603, 605)]


@pytest.mark.parametrize("where, keeps", [
    ("f > 0", lambda f: np.isnan(f) | (f > 0)),
    ("f >= 3", lambda f: np.isnan(f) | (f >= 3)),
    ("f < 0", lambda f: f < 0),
    ("f <= 1.5", lambda f: f <= 1.5),
    ("f = 1.5", lambda f: f == 1.5),
    ("f <> 1.5", lambda f: f != 1.5),
])
def test_a_partial_predicate_orders_nan_as_postgresql(where, keeps):
    """A partial index WHERE (f > 0) holds the rows whose f is NaN, as the query's
    own WHERE f > 0 keeps them (PostgreSQL: NaN is above every number, +inf
    included), so a top-k that walks the index finds them (red-team 8 F06)."""
    db = vv.connect(":memory:")
    db.sql("CREATE TABLE p (id bigint PRIMARY KEY, f float8, v vector(2))")
    db.sql(f"CREATE INDEX ON p USING hnsw (v vector_l2_ops) WHERE ({where})")
    f = np.array([np.nan, np.nan, np.inf, -np.inf, 1.5, -1.5, 0.0, -0.0, 3.0, np.nan])
    ids = np.arange(len(f))
    db.collection("p").insert_arrays(id=ids, f=f, v=np.stack([ids, ids], 1).astype(np.float32))
    db.collection("p").wait_indexed()
    want = ids[keeps(f)]
    assert db.engine.table("p").vector_indexes["v"].nodes() == len(want)
    got = [r[0] for r in db.sql(f"SELECT id FROM p WHERE {where} ORDER BY v <-> '[0,0]'").rows]
    assert got == want.tolist()
    db.close()


@pytest.mark.parametrize("ddl", ["DROP COLUMN n", "RENAME COLUMN n TO m"])
def test_drop_column_under_a_partial_index_the_maintainer_is_linking(tmp_path, monkeypatch,
                                                                     ddl):
    """A race: the maintainer links a partial index's rows (deriving which meet its
    predicate) while DROP COLUMN drops the predicate's column and the index with
    it. Driven by events: the maintainer is stopped inside the derive, the DROP
    runs (on the old code to its end: the maintainer then read the predicate's
    column from the table that no longer had it, a KeyError recorded and raised
    as IndexMaintenanceError by the next index_status or close), then the
    maintainer goes on (RENAME COLUMN alike: the predicate read by its new name
    among the old columns, or the old among the new). The DDL now waits for the chunk in flight (the
    maintainer's hold), and each chunk links only what the table still holds."""
    import threading
    from varvedb.engine import columns as C
    db = vv.connect(tmp_path / "race.vv")
    db.sql("CREATE TABLE t (id int PRIMARY KEY, n int, embedding vector(4))")
    db.sql("CREATE INDEX ON t USING hnsw (embedding vector_l2_ops) WHERE (n = 1)")
    m = db.engine.maintainer
    entered, go, waiting, dropped = (threading.Event() for _ in range(4))
    derive = C.DerivedColumn.derive

    def stopped_derive(self, lo, hi):
        if threading.current_thread().name == "varvedb-maintainer" and not go.is_set():
            entered.set()
            assert go.wait(600), "hang guard"
        return derive(self, lo, hi)
    monkeypatch.setattr(C.DerivedColumn, "derive", stopped_derive)
    hold = m.hold

    def watched_hold():
        if threading.current_thread().name == "dropper":
            waiting.set()
        return hold()
    monkeypatch.setattr(m, "hold", watched_hold)

    rows = ", ".join(f"({i}, {i % 2}, '[{i}, 1, 2, 3]')" for i in range(200))
    db.sql(f"INSERT INTO t VALUES {rows}")
    assert entered.wait(600), "hang guard"

    def drop():
        db.sql(f"ALTER TABLE t {ddl}")
        dropped.set()
    t = threading.Thread(target=drop, name="dropper")
    t.start()
    guard = 0
    while not (dropped.is_set() or waiting.is_set()):   # ended, or waits for the chunk
        assert dropped.wait(0.05) or guard < 12000, "hang guard"
        guard += 1
    go.set()
    t.join(600)
    assert dropped.is_set()
    db.sql("INSERT INTO t (id, embedding) VALUES (500, '[0, 0, 0, 0]')")
    assert m.wait(lambda: m.unlinked() == 0, 600)
    m.raise_failure()       # nothing failed in the background
    assert "n" not in db.engine.table("t").schema.fields
    if ddl.startswith("RENAME"):     # the index follows the column: its rows are n = 1's
        db.sql("UPDATE t SET m = 1 WHERE id = 500")
        assert db.sql("SELECT id FROM t WHERE m = 1 ORDER BY embedding <-> '[0, 0, 0, 0]' "
                      "LIMIT 2").rows == [(500,), (1,)]
    else:
        assert db.sql("SELECT id FROM t ORDER BY embedding <-> '[0, 0, 0, 0]' LIMIT 2"
                      ).rows == [(500,), (0,)]
    db.close()
