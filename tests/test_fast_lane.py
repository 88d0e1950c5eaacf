"""The kept-search fast lane (query/prepared.py, execute.topk_searcher, flat.searcher,
VectorIndex.searcher, HnswIndex.searcher, kernels/scan.py) answers and refuses as a
fresh bind does: a NaN query with no row to score, a parameter of another type that
hashes alike, a walk bound while the maintainer links rows; and the scan kernel's
answers equal a float64 numpy oracle for every metric, arena dtype and mask shape.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import varvedb as vv
from varvedb.index import flat
from varvedb.index.vector_index import make_vector_index
from varvedb.query.planner import EXACT_ROWS
from varvedb.query.request import Search

DIM = 4


def _linked(c) -> None:
    deadline = time.monotonic() + 600            # a hang guard only
    while c.index_status()["unlinked"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _collection(index, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(DIM, metric="l2",
                                                                    index=index)})
    c.insert_arrays(id=np.arange(n), tag=np.arange(n) % 3,
                    v=rng.standard_normal((n, DIM)).astype(np.float32))
    if index is not None:
        _linked(c)
    return db, c


@pytest.mark.parametrize("index", [None, vv.HNSW(m=8, ef_construction=32),
                                   vv.IVFPQ(lists=8, nprobe=2)],
                         ids=["exact", "hnsw", "ivf"])
def test_a_kept_search_with_no_row_to_score_refuses_nan_and_inf(index):
    """limit 0, or a filter that allows no row: no kernel runs, yet a NaN or inf
    query is refused on the kept path as the fresh bind refuses it (API and SQL)."""
    db, c = _collection(index, 50 if index is None else EXACT_ROWS + 200)
    q = np.ones(DIM, np.float32)
    shapes = [dict(limit=0), dict(limit=5, where="tag = 7"), dict(limit=0, where="tag = 1")]
    for kw in shapes:
        where = f"WHERE {kw['where']} " if "where" in kw else ""
        sql = f"SELECT id FROM d {where}ORDER BY v <-> $1 LIMIT {kw['limit']}"
        for _ in range(2):                      # the second is the kept plan
            assert len(c.search(q, **kw)) == 0
            assert db.sql(sql, [q]).rows == []
        for bad in (np.nan, np.inf, -np.inf):
            v = q.copy()
            v[2] = bad
            with pytest.raises(vv.NonFiniteVectorError):
                c.search(v, **kw)
            with pytest.raises(vv.NonFiniteVectorError):
                c.run(Search.of(v, **kw))
            with pytest.raises(vv.NonFiniteVectorError):
                db.sql(sql, [v])
            with pytest.raises(vv.NonFiniteVectorError):
                db.sql(sql, [list(v)])
    db.close()


def _answer(run):
    """What a call gives: its rows, or the type of the error it raises."""
    try:
        got = run()
    except vv.VarveError as e:
        return type(e)
    return got.rows if hasattr(got, "rows") else (got.ids, list(got.scores))


ALIKE = [1, True, 1.0, np.int64(1), np.float64(1.0), np.bool_(True), (1,), (True,)]


@pytest.mark.parametrize("where", ["tag = $2", "flag = $2", "x < $2", "ts > $2"])
def test_parameters_that_hash_alike_are_not_one_kept_plan(where):
    """1, 1.0 and True are equal keys; a statement kept with one must answer each of
    the others as a fresh bind does (SQL refuses int = bool), in SQL and the API."""
    rng = np.random.default_rng(4)
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"tag": vv.Int(), "flag": vv.Bool(), "x": vv.Float(),
                                   "ts": vv.Timestamp(), "v": vv.Vector(DIM, metric="l2")})
    n = 40
    c.insert_arrays(id=np.arange(n), tag=np.arange(n) % 3, flag=np.arange(n) % 2 == 1,
                    x=np.linspace(0, 2, n), ts=np.arange(n).astype("datetime64[us]"), v=rng.standard_normal(
                        (n, DIM)).astype(np.float32))
    q = np.ones(DIM, np.float32)
    sql = f"SELECT id FROM d WHERE {where} ORDER BY v <-> $1 LIMIT 5"
    api = dict(where=where.replace("$2", "$1"), limit=5)
    fresh = {}
    for p in ALIKE:
        c.table.prepared.clear()
        fresh[repr(p)] = (_answer(lambda: db.sql(sql, [q, p])),
                          _answer(lambda: c.search(q, params=[p], **api)))
    for first in ALIKE:
        c.table.prepared.clear()
        for p in [first] + ALIKE:       # the first is kept; every other finds its key
            got = (_answer(lambda: db.sql(sql, [q, p])),
                   _answer(lambda: c.search(q, params=[p], **api)))
            assert got == fresh[repr(p)], (first, p)
    db.close()


def test_a_walk_bound_while_the_maintainer_links_rows_never_fails():
    """VectorIndex.searcher binds the walk of the rows linked now; a link of a large
    chunk (the graph's extent already past the watermark, the arrays being grown)
    may run meanwhile. Binding waits for it (the read lock): it never raises, and
    what it binds answers the reader's rows as exact search does, or None."""
    rng = np.random.default_rng(6)
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"v": vv.Vector(DIM, metric="l2")})   # no index: ours
    first, total = 64, 64 + 4000
    c.insert_arrays(v=rng.standard_normal((total, DIM)).astype(np.float32))
    column = c.table.columns["v"]
    vi = make_vector_index("v", DIM, "l2", vv.HNSW(m=8, ef_construction=32))
    vi.extend(column, first)
    allow = np.arange(first) % 2 == 0
    q = np.ones(DIM, np.float32)
    arena, norms = column.frozen(first)
    want = flat.search("l2", arena, norms, q, 5, allow)
    errors, bound = [], []
    linking = threading.Thread(target=vi.extend, args=(column, total))
    linking.start()
    while linking.is_alive() or not bound:
        try:
            bound.append(vi.searcher(column, 5, allow, first, first))
        except ValueError as e:
            errors.append(e)
    linking.join()
    assert vi.linked == total and errors == []
    for top_k in bound:     # the walk is as wide as the reader's rows: exact
        got = top_k(q)
        assert got is None or (np.array_equal(got[0], want[0])
                               and np.array_equal(got[1], want[1]))
    assert vi.searcher(column, 5, allow, first, first)(q) is not None
    db.close()
