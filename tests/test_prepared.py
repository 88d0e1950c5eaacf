"""A search bound once and kept (query/prepared.py) answers as a fresh bind does.

Each step changes the state a kept search was planned at (a commit, a delete,
an open transaction with its own writes, another branch, a new table after a
DDL) or not, and the same-shaped search is asked through `search()` (which
keeps and reuses plans), through `run(Search.of(...))` (the server's way in,
the same cache) and bound afresh without the cache: the ids, scores and plans
agree, and agree with exact search where the plan is an exact scan.
"""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import varvedb as vv
from varvedb.query.bind import bind
from varvedb.query.execute import execute
from varvedb.query.plan import VectorTopK
from varvedb.query.planner import EXACT_ROWS
from varvedb.query.request import Search

DIM = 4


def _fresh(c, request):
    """The request bound and run without the cache: (ids, scores, plan)."""
    t = c.table
    res = execute(bind(request, t, c.database.thread_session().snapshot()))
    return t.id_values(res.rows), res.scores, res.plan


def _same(c, q, **kw):
    kept = c.search(q, **kw)
    served = c.run(Search.of(q, **kw))          # the server's way in: the same cache
    ids, scores, plan = _fresh(c, Search.of(q, **kw))
    exact = c.run(Search.of(q, exact=True, **{k: v for k, v in kw.items() if k != "ef"}))
    for got in (kept, served):
        assert got.ids == ids and np.array_equal(got.scores, scores)
        assert got.plan == plan
    if kept.plan.find(VectorTopK).strategy == "exact":
        assert kept.ids == exact.ids and np.allclose(kept.scores, exact.scores)
    else:       # a walk: deterministic, so the kept plan's equals the fresh one's
        assert len(kept) == min(kw["limit"], len(exact))
    return kept


def _indexed(rng, n: int, tags: int):
    """A database with n rows (ids 1..n, tag = row % tags) of an HNSW-indexed field."""
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(DIM, metric="l2",
                                                                    index=vv.HNSW())})
    c.insert_arrays(id=np.arange(1, n + 1), tag=np.arange(n) % tags,
                    v=rng.standard_normal((n, DIM)).astype(np.float32))
    return db, c


OPS = st.lists(st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 40)),
    st.tuples(st.just("delete"), st.integers(1, 60)),
    st.tuples(st.just("update"), st.integers(1, 60)),
    st.tuples(st.just("search"), st.integers(0, 9)),
    st.tuples(st.just("tx"), st.integers(1, 60)),
    st.tuples(st.just("branch"), st.integers(0, 1)),
    st.tuples(st.just("field"), st.integers(0, 0)),
), min_size=1, max_size=25)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, seed=st.integers(0, 2**16))
@example(ops=[("tx", 1)] * 6, seed=0)       # six rows of one vector: ties, ranked by row
def test_kept_searches_answer_as_fresh_binds(ops, seed):
    rng = np.random.default_rng(seed)
    base = EXACT_ROWS + 60
    db, c = _indexed(rng, base, 5)
    queries = rng.standard_normal((10, DIM)).astype(np.float32)
    next_id, fields = base + 1, 0
    shapes = [dict(limit=5, ef=200), dict(limit=3, where="tag = $1", params=[2], ef=200),
              dict(limit=7, select=[], ef=200)]
    for op, x in ops:
        if op == "insert":
            c.insert({"id": next_id, "tag": x % 5,
                      "v": rng.standard_normal(DIM).astype(np.float32)})
            next_id += 1
        elif op == "delete":
            c.delete(ids=[x])
        elif op == "update":
            c.update({"tag": x % 5}, ids=[x])
        elif op == "tx":
            with db.transaction():
                c.insert({"id": next_id, "tag": 2, "v": queries[x % 10]})
                next_id += 1
                c.delete(ids=[x])
                for kw in shapes:     # the transaction's own writes are seen
                    hits = _same(c, queries[x % 10], **kw)
                    if "where" not in kw:     # its own row, at distance 0 (unless
                        # as many older rows of that vector tie it: ranked by row)
                        assert hits.scores[0] == 0 and (next_id - 1 in hits.ids
                                                        or not any(hits.scores))
        elif op == "branch":
            name = f"b{x}"
            if name not in [b.name for b in db.branches()]:
                db.branch(name)
            db.use(name if db.current_branch != name else "main")
            c.insert({"id": next_id, "tag": 1, "v": queries[0]})
            next_id += 1
        elif op == "field":
            fields += 1
            db.use("main")         # the schema is changed on main
            c.add_field(f"extra{fields}", "int")     # a DDL: the kept plans' state moves on
        for kw in shapes:
            _same(c, queries[x % 10], **kw)
            _same(c, queries[x % 10], **kw)          # the second one is the kept plan
    db.close()


def test_a_kept_plan_is_used_and_refuses_what_the_request_refuses():
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"v": vv.Vector(DIM, metric="l2")})
    c.insert_arrays(v=np.eye(DIM, dtype=np.float32))
    q = np.ones(DIM, np.float32)
    c.search(q, limit=2)
    assert len(c.table.prepared) == 1            # kept
    before = list(c.table.prepared.values())[0]
    c.search(q * 2, limit=2)
    assert list(c.table.prepared.values())[0] is before     # reused, not bound again
    c.run(Search.of(q * 3, limit=2))
    assert list(c.table.prepared.values()) == [before]      # the request's way, the same
    with pytest.raises(vv.DimensionError):
        c.search(np.ones(DIM + 1, np.float32), limit=2)
    with pytest.raises(vv.NonFiniteVectorError):
        c.search(np.full(DIM, np.nan, np.float32), limit=2)
    with pytest.raises(vv.FieldTypeError):
        c.search(q, limit=2.0)                   # 2.0 == 2, but not an integer
    with pytest.raises(vv.FieldTypeError):
        c.search(q, limit=2, exact=1)
    db.close()


def test_a_kept_walk_is_one_pass_once_the_graph_has_caught_up():
    """A search kept while the maintainer is behind is bound again, to the walk
    alone, once every row is linked; the walk's own check refuses NaN and inf."""
    rng = np.random.default_rng(5)
    db, c = _indexed(rng, 2 * EXACT_ROWS, 5)
    q = rng.standard_normal(DIM).astype(np.float32)
    kw = dict(limit=5, where="tag != $1", params=[3], ef=400)
    _same(c, q, **kw)
    assert c.wait_indexed(timeout=1800)          # the timeout is a hang guard only
    _same(c, q, **kw)
    _same(c, q, **kw)
    kept = [k for k in c.table.prepared.values() if k.node.strategy == "graph"]
    assert kept and kept[0].top_k.fn is not None and kept[0].top_k.search(q) is not None
    for bad in (np.nan, np.inf):
        v = q.copy()
        v[1] = bad
        with pytest.raises(vv.NonFiniteVectorError):
            c.search(v, **kw)
    db.close()


def test_sql_reuses_a_statements_plan_only_at_its_state_and_shape():
    """db.sql's vector ORDER BY keeps its plan too: the same rows as a fresh bind
    across a commit, another parameter, a WHERE that reads the vector itself."""
    rng = np.random.default_rng(3)
    n = EXACT_ROWS + 100
    db, c = _indexed(rng, n, 3)
    knn = "SELECT id, v <-> $1 AS d FROM d WHERE tag < $2 ORDER BY v <-> $1 LIMIT 5"
    near = "SELECT id FROM d WHERE v <-> $1 < 1.5 ORDER BY v <-> $1 LIMIT 5"
    for step in range(6):
        q = rng.standard_normal(DIM).astype(np.float32)
        for tag in (1, 2):
            got = db.sql(knn, [q, tag]).rows
            ids, scores, _ = _fresh(c, Search.of(q, where="tag < $1", params=[tag], limit=5))
            assert [r[0] for r in got] == ids
            assert np.allclose([r[1] for r in got], scores)
        got = [r[0] for r in db.sql(near, [q]).rows]
        want = [i for i, s in zip(*_fresh(c, Search.of(q, limit=5, exact=True))[:2]) if s < 1.5]
        assert set(want) <= set(got) or len(got) == 5
        assert all(np.linalg.norm(c.get(i, select=["v"])["v"] - q) < 1.5 for i in got)
        if step % 2:
            c.insert({"id": n + step, "tag": 1, "v": q})       # a commit: a new state
    assert any(k[0] == "sql" for k in c.table.prepared if isinstance(k, tuple))
    db.close()


def test_kept_searches_float16_copies_count_in_the_cache_cap_and_memory(monkeypatch):
    """An exact scan kept and searched past flat.HALF_AFTER times makes a float16
    copy of the arena (arena bytes / 2): one per kept shape, counted nowhere (64
    shapes of 32 768 x 128 held 512 MiB under a 64 MiB cap on masks alone)."""
    import gc
    import tracemalloc
    from varvedb.index import flat
    from varvedb.query import prepared
    cap = 2 << 20
    monkeypatch.setattr(prepared, "MAX_PREPARED_BYTES", cap)
    n, dim = 2048, 128                      # a 1 MiB arena: its copy 512 KiB
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"v": vv.Vector(dim, metric="l2")})
    rng = np.random.default_rng(3)
    c.insert_arrays(id=np.arange(n), v=rng.standard_normal((n, dim)).astype(np.float32))
    q = rng.standard_normal(dim).astype(np.float32)
    for _ in range(flat.HALF_AFTER + 1):    # (the kernels compiled or loaded before)
        c.search(q, limit=20, exact=True)
    c.table.prepared.clear()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for limit in range(1, 11):          # 10 shapes, each made its copy
            for _ in range(flat.HALF_AFTER + 1):
                c.search(q, limit=limit, exact=True)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    kept = c.table.memory_bytes()["prepared_searches"]
    assert kept == sum(p.nbytes for p in c.table.prepared.values())
    assert len(c.table.prepared) * n * dim * 2 <= kept <= cap
    assert held <= cap + (1 << 20), held     # (not 10 copies: 5 MiB)
    db.close()
