"""The kept-search fast lane (query/prepared.py, execute.topk_searcher, flat.searcher,
VectorIndex.searcher, HnswIndex.searcher, kernels/scan.py) answers and refuses as a
fresh bind does: a NaN query with no row to score, a parameter of another type that
hashes alike, a walk bound while the maintainer links rows; and the scan kernel's
answers equal a float64 numpy oracle for every metric, arena dtype and mask shape.
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import varvedb as vv
from varvedb.engine.columns import norms_of
from varvedb.index import flat
from varvedb.index.vector_index import make_vector_index
from varvedb.query.bind import bind
from varvedb.query.execute import execute
from varvedb.query.plan import VectorTopK
from varvedb.query.planner import EXACT_ROWS
from varvedb.query.request import Search

DIM = 4


def _linked(c) -> None:
    assert c.wait_indexed(timeout=1800)          # the timeout is a hang guard only


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
    vi = make_vector_index("v", DIM, "l2", vv.HNSW(m=8, ef_construction=32, quantize=None))
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



def test_kept_searches_beside_commits_and_the_maintainer_never_fail():
    """Searches of one shape (API and SQL) in three threads while another commits
    batches and the maintainer links them: each new state binds and keeps its walk
    while a link may be in progress (main raised ValueError about once in 2 500)."""
    rng = np.random.default_rng(10)
    n = EXACT_ROWS * 2
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(
        DIM, metric="l2", index=vv.HNSW(m=4, ef_construction=16))})
    c.insert_arrays(tag=np.arange(n) % 4, v=rng.standard_normal((n, DIM)).astype(np.float32))
    _linked(c)
    done = threading.Event()
    errors, answered = [], []
    sql = "SELECT id FROM d WHERE tag != $2 ORDER BY v <-> $1 LIMIT 5"

    def search(seed):
        r = np.random.default_rng(seed)
        while not done.is_set():
            q = r.standard_normal(DIM).astype(np.float32)
            try:
                answered.append((len(c.search(q, limit=5, where="tag != 3", ef=40)),
                                 len(db.sql(sql, [q, 3]).rows)))
            except Exception as e:      # noqa: BLE001 (any error is the failure)
                errors.append(e)
    threads = [threading.Thread(target=search, args=(s,)) for s in range(3)]
    for th in threads:
        th.start()
    try:
        for _ in range(600):
            c.insert_arrays(tag=np.arange(20) % 4,
                            v=rng.standard_normal((20, DIM)).astype(np.float32))
            time.sleep(0.003)       # room for the searches and the maintainer
    finally:
        done.set()
        for th in threads:
            th.join()
    assert errors == [] and answered and set(answered) == {(5, 5)}
    db.close()

# ---- kernels/scan.py through flat.search: exact answers equal a float64 oracle ----

def _oracle(metric, arena, q, k, allow):
    """The k allowed rows nearest q by float64 scores on pgvector's scale, ties by row."""
    if metric == "hamming":
        s = np.unpackbits(arena ^ q, axis=1).sum(1).astype(np.float64)
    else:
        a, v = arena.astype(np.float64), q.astype(np.float64)
        if metric == "l2":
            s = np.sqrt(((a - v) ** 2).sum(1))
        elif metric == "l1":
            s = np.abs(a - v).sum(1)
        # a row's products summed by the same pairwise sum for every row: BLAS's
        # a @ v sums row blocks apart, so two equal rows (the copies below) could
        # score an ulp apart and the oracle break their exact tie the wrong way
        elif metric == "dot":
            s = -(a * v).sum(1)
        else:
            norms = np.linalg.norm(a, axis=1) * np.linalg.norm(v)
            s = np.where(norms == 0, 1.0, 1 - (a * v).sum(1) / np.where(norms == 0, 1, norms))
    rows = np.arange(len(arena)) if allow is None else np.flatnonzero(allow)
    rows = rows[np.lexsort((rows, s[rows]))][:k]
    return rows, s


def _check_scan(metric, arena, q, k, allow):
    norms = norms_of(arena) if metric != "hamming" else np.zeros(len(arena), np.float32)
    rows, scores = flat.search(metric, arena, norms, q, k, allow)
    want, s = _oracle(metric, arena, q, k, allow)
    assert len(rows) == len(want) and len(set(rows.tolist())) == len(rows)
    assert np.allclose(scores, s[rows], rtol=1e-12, atol=1e-12)     # its own rows' scores
    assert np.allclose(scores, s[want], rtol=1e-12, atol=1e-12)     # the best ones
    if metric != "cosine":      # integer data: exact scores, so the rows are the oracle's
        assert np.array_equal(rows, want), (rows, want, s[rows], s[want])


def _allow(kind, n, rng):
    if kind == "none":
        return None
    count = {"all": n, "zero": 0, "one": 1, "under a third": (n - 1) // 3,
             "a third": -(-n // 3), "few": max(1, n // 25), "half": n // 2}[kind]
    allow = np.zeros(n, bool)
    allow[rng.choice(n, count, replace=False)] = True
    return allow


MASKS = ["none", "all", "zero", "one", "under a third", "a third", "few", "half"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), dim=st.integers(1, 24),
       k=st.integers(1, 40), spread=st.sampled_from([1, 3, 100]),
       kind=st.sampled_from(["f32", "f16", "int8", "bit"]),
       metric=st.sampled_from(["l2", "cosine", "dot", "l1"]), mask=st.sampled_from(MASKS))
def test_the_scan_answers_as_a_float64_oracle(seed, n, dim, k, spread, kind, metric, mask):
    """Small integers (spread 1: a few distinct values, so many ties) in every arena
    dtype; the mask allows no row, one, under and over a third (the scoring loop's
    branch), a few (gathered first) or all."""
    rng = np.random.default_rng(seed)
    if kind == "bit":
        metric = "hamming"
        arena = rng.integers(0, 256 if spread > 1 else 2, (n, -(-dim // 8)), dtype=np.uint8)
        q = rng.integers(0, 256, arena.shape[1], dtype=np.uint8)
    else:
        dtype = {"f32": np.float32, "f16": np.float16, "int8": np.int8}[kind]
        arena = rng.integers(-spread, spread + 1, (n, dim)).astype(dtype)
        if rng.random() < 0.5:      # duplicates of a few rows
            arena = arena[rng.integers(0, max(1, n // 4), n)]
        q = rng.integers(-spread, spread + 1, dim).astype(np.float32)
    _check_scan(metric, np.ascontiguousarray(arena), q, k, _allow(mask, n, rng))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 700), dim=st.integers(1, 140),
       k=st.integers(1, 40), kind=st.sampled_from(["f32", "f16"]),
       metric=st.sampled_from(["l2", "cosine", "dot", "l1"]), mask=st.sampled_from(MASKS),
       copies=st.sampled_from([0, 1, 3]))
@example(seed=415003, n=18, dim=22, k=7, kind="f32", metric="dot", mask="none", copies=3)
def test_the_scan_of_real_rows_answers_as_a_float64_oracle(seed, n, dim, k, kind, metric,
                                                           mask, copies):
    """Real-valued rows, as many as the scan scores in steps of eight with a bound
    from their runs' minima (n past 8 x the candidates kept), wide enough for the
    vectorised loops' remainders, and k both sides of the sorted array's limit
    (the spares: max(8, k // 4)); some rows copied once or thrice (exact ties, the
    lower row first), the copies spread or side by side."""
    rng = np.random.default_rng(seed)
    arena = rng.standard_normal((n, dim)).astype(np.float32)
    if copies and n > 1:
        src = rng.integers(0, n, max(1, n // 10))
        for c in range(copies):
            at = rng.integers(0, n, len(src)) if rng.random() < 0.5 else (src + c + 1) % n
            arena[at] = arena[src]
    q = rng.standard_normal(dim).astype(np.float32)
    if kind == "f16":
        arena = arena.astype(np.float16)
    _check_scan(metric, np.ascontiguousarray(arena), q, k, _allow(mask, n, rng))


@pytest.mark.parametrize("metric", ["l2", "l1", "dot", "cosine"])
@pytest.mark.parametrize("mask", ["none", "half", "few"])
def test_float32_near_ties_past_the_spare_candidates_are_ranked_exactly(metric, mask):
    """Rows whose float32 scores are all equal (a large first coordinate hides the
    second in float32) but whose float64 scores differ, the best of them last: more
    of them than the spare candidates, so the float32 pass alone keeps the wrong ones."""
    n = 200
    small = np.linspace(0.9, 0.0, n)                    # the nearest rows last
    arena = np.zeros((n, 3), np.float32)
    arena[:, 0] = 4096
    if metric in ("dot", "cosine"):     # a second coordinate along q, too small for float32
        arena[:, 1] = small * 1e-4
        q = np.array([1, 1, 0], np.float32)
        if metric == "dot":
            arena[:, 1] = -small * 1e-3 + 1e-3
    else:
        arena[:, 1] = small
        q = np.zeros(3, np.float32)
    _check_scan(metric, arena, q, 5, _allow(mask, n, np.random.default_rng(1)))


# ---- the kept lane across state changes and query forms ----------------------------

def _fresh(c, q, **kw):
    """The search bound and run without the cache: (ids, scores)."""
    t = c.table
    res = execute(bind(Search.of(q, **kw), t, c.database.thread_session().snapshot()))
    return t.id_values(res.rows), list(res.scores)


def _agree(db, c, q, kw, sql):
    """The API's kept search (asked twice) and SQL's kept statement answer as a fresh
    bind does."""
    want = _fresh(c, q, **kw)
    for _ in range(2):
        got = c.search(q, **kw)
        assert (got.ids, list(got.scores)) == want
        rows = db.sql(sql, [q, 3]).rows
        assert [r[0] for r in rows] == want[0]
        assert np.allclose([r[1] for r in rows], want[1])
    kept = {type(k).__name__ for k in c.table.prepared.values()}
    assert kept == {"PreparedSearch", "KeptPlan"}      # both were the kept lane


def test_kept_searches_follow_vacuum_index_drop_and_create_settings_and_close(tmp_path):
    rng = np.random.default_rng(8)
    n = EXACT_ROWS + 300
    db = vv.connect(str(tmp_path / "k.vv"))
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(
        DIM, metric="l2", index=vv.HNSW(m=8, ef_construction=32))})
    c.insert_arrays(id=np.arange(n), tag=np.arange(n) % 5,
                    v=rng.standard_normal((n, DIM)).astype(np.float32))
    _linked(c)
    kw = dict(limit=5, where="tag != $1", params=[3], ef=64)
    sql = "SELECT id, v <-> $1 AS d FROM d WHERE tag != $2 ORDER BY v <-> $1 LIMIT 5"
    db.sql("SET hnsw.ef_search = 64")
    qs = rng.standard_normal((6, DIM)).astype(np.float32)
    _agree(db, c, qs[0], kw, sql)
    c.delete(ids=list(range(0, 400, 3)))
    _agree(db, c, qs[1], kw, sql)
    for graphs in ("repair", "rebuild"):
        db.vacuum(keep=1, graphs=graphs)
        _linked(c)
        _agree(db, c, qs[2], kw, sql)
    c.drop_index("v")
    assert c.search(qs[3], **kw).plan.find(VectorTopK).strategy == "exact"
    _agree(db, c, qs[3], kw, sql)
    c.create_index("v", vv.HNSW(m=4, ef_construction=16))
    _linked(c)
    _agree(db, c, qs[4], kw, sql)
    db.sql("SET hnsw.ef_search = 10")     # another setting: SQL's plan is another
    got = db.sql(sql, [qs[5], 3]).rows
    assert [r[0] for r in got] == _fresh(c, qs[5], **{**kw, "ef": 10})[0]
    db.close()
    with pytest.raises(vv.ClosedError):
        c.search(qs[0], **kw)
    with pytest.raises(vv.ClosedError):
        db.sql(sql, [qs[0], 3])


@pytest.mark.parametrize("dtype", ["f32", "f16", "int8", "bit"])
def test_a_kept_search_takes_every_query_form_a_fresh_bind_takes(dtype):
    """float64, lists, non-contiguous and read-only float32 views, bools for a bit
    field: the kept answer is the fresh bind's; a wrong dimension is refused as it
    is; a limit past the rows gives them all."""
    rng = np.random.default_rng(9)
    n, dim = 60, 16
    metric = "hamming" if dtype == "bit" else "l2"
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"v": vv.Vector(dim, metric=metric, dtype=dtype)})
    if dtype == "bit":
        vectors = rng.integers(0, 2, (n, dim)).astype(bool)
        base = rng.integers(0, 2, dim).astype(np.float32)
    else:
        vectors = rng.integers(-20, 21, (n, dim)).astype(np.float32)
        base = rng.standard_normal(dim).astype(np.float32) * 10
    c.insert_arrays(v=vectors)
    wide = np.repeat(base, 2)               # base[::1] as a strided view of it
    readonly = base.copy()
    readonly.flags.writeable = False
    forms = [base, base.astype(np.float64), base.tolist(), wide[::2], readonly]
    if dtype == "bit":
        forms += [base.astype(bool), base.astype(bool).tolist()]
    sql = f"SELECT id FROM d ORDER BY v {'<~>' if dtype == 'bit' else '<->'} $1 LIMIT 7"
    for limit in (7, 1000):
        want = _fresh(c, base, limit=limit)
        assert len(want[0]) == min(limit, n)
        for form in forms + forms:          # the second round: every form kept
            got = c.search(form, limit=limit)
            assert (got.ids, list(got.scores)) == want
            if limit == 7:
                assert [r[0] for r in db.sql(sql, [form]).rows] == want[0]
    for wrong in (np.ones(dim + 1, np.float32), np.ones(dim - 1, np.float32)):
        with pytest.raises(vv.DimensionError):
            c.search(wrong, limit=7)
        with pytest.raises(vv.VarveError):
            db.sql(sql, [wrong])
    db.close()


@pytest.mark.parametrize("index", [None, vv.HNSW(m=8, ef_construction=32)],
                         ids=["exact", "hnsw"])
def test_the_hits_of_a_kept_search_stay_as_they_were_after_later_searches(index):
    """The kept lane reuses its scratch between searches (flat.searcher's score
    buffer, the walk's workspace), never what it returns: hits read after many
    later searches, on this thread and on others, are still their own query's."""
    db, c = _collection(index, 60 if index is None else EXACT_ROWS + 200)
    qs = np.random.default_rng(3).standard_normal((40, DIM)).astype(np.float32)
    want = [_fresh(c, q, limit=6, where=w) for q in qs for w in (None, "tag = 1")]
    got = [c.search(q, limit=6, where=w, select=[]) for q in qs for w in (None, "tag = 1")]
    threads = [threading.Thread(target=lambda: [c.search(q[::-1].copy(), limit=6, select=[])
                                                for q in qs]) for _ in range(3)]
    for t in threads:
        t.start()
    more = [c.search(q + 1, limit=6, select=[]) for q in qs]
    for t in threads:
        t.join(timeout=600)                 # a hang guard only
    assert not any(t.is_alive() for t in threads)
    assert len(more) == len(qs) and all(len(h) == 6 for h in more)
    assert [(h.ids, list(h.scores)) for h in got] == want
    assert {type(k).__name__ for k in c.table.prepared.values()} == {"PreparedSearch"}
    db.close()


def test_a_kept_walk_over_a_graph_loaded_from_a_checkpoint_follows_new_links(tmp_path):
    """The graph a reopened file maps from its checkpoint (read-only arrays, copied
    on the next link): a walk kept over it answers as a fresh bind, before and
    after the maintainer links new rows into a copy."""
    rng = np.random.default_rng(11)
    path = str(tmp_path / "c.vv")
    n = EXACT_ROWS * 2
    db = vv.connect(path)
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(
        DIM, metric="l2", index=vv.HNSW(m=8, ef_construction=32))})
    c.insert_arrays(id=np.arange(n), tag=np.arange(n) % 5,
                    v=rng.standard_normal((n, DIM)).astype(np.float32))
    _linked(c)
    db.checkpoint()
    db.close()
    db = vv.connect(path)
    c = db.collection("d")
    kw = dict(limit=5, where="tag != $1", params=[3], ef=64)
    sql = "SELECT id, v <-> $1 AS d FROM d WHERE tag != $2 ORDER BY v <-> $1 LIMIT 5"
    qs = rng.standard_normal((4, DIM)).astype(np.float32)
    _linked(c)
    _agree(db, c, qs[0], kw, sql)
    assert c.search(qs[0], **kw).plan.find(VectorTopK).strategy == "graph"
    near = qs[1] + rng.standard_normal((300, DIM)).astype(np.float32) * np.float32(1e-3)
    c.insert_arrays(id=np.arange(n, n + 300), tag=np.zeros(300, int), v=near)
    _linked(c)
    _agree(db, c, qs[1], kw, sql)
    assert set(c.search(qs[1], **kw).ids) <= set(range(n, n + 300))   # the new rows
    db.close()


def test_a_kept_sql_statement_follows_the_schema():
    """SELECT * kept, then a field added, renamed, dropped: each run answers with
    the schema of its state, as a fresh statement does."""
    rng = np.random.default_rng(12)
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(DIM, metric="l2")})
    c.insert_arrays(tag=np.arange(40) % 3, v=rng.standard_normal((40, DIM)).astype(np.float32))
    q = np.ones(DIM, np.float32)
    sql = "SELECT * FROM d ORDER BY v <-> $1 LIMIT 3"
    want = [r[0] for r in db.sql(sql, [q]).rows]
    for step, change in enumerate([lambda: c.add_field("extra", vv.Int(default=7)),
                                   lambda: c.rename_field("extra", "more"),
                                   lambda: c.drop_field("more")]):
        db.sql(sql, [q])
        change()
        for _ in range(2):
            got = db.sql(sql, [q])
            assert got.columns == [["id", "tag", "v", "extra"], ["id", "tag", "v", "more"],
                                   ["id", "tag", "v"]][step]
            assert [r[0] for r in got.rows] == want
            assert step == 2 or [r[3] for r in got.rows] == [7, 7, 7]
    db.close()


def test_threads_keeping_plans_of_many_shapes_at_once_never_fail():
    """Each search of a new shape keeps its plan in the table's one cache, summing
    the kept masks' bytes: four threads doing that at once (the interpreter
    switching threads as often as it can) never see it change under them."""
    rng = np.random.default_rng(13)
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(DIM, metric="l2")})
    c.insert_arrays(tag=np.arange(200), v=rng.standard_normal((200, DIM)).astype(np.float32))
    q = np.ones(DIM, np.float32)
    errors, answered = [], []

    def search(seed):
        r = np.random.default_rng(seed)
        for _ in range(2000):
            cut = int(r.integers(0, 10**9))        # a new shape each time
            try:
                answered.append(len(c.search(q, where="tag > $1", params=[cut % 190],
                                             limit=3, ef=cut % 50 + 1)))
            except Exception as e:      # noqa: BLE001 (any error is the failure)
                errors.append(e)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=search, args=(s,)) for s in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == [] and set(answered) == {3}
    db.close()


BESIDE_A_VECTOR = [("vectors refused", dict(vectors=np.ones((2, DIM), np.float32))),
                   ("match any refused", dict(match="any")),
                   ("match bad refused", dict(match="most")),
                   ("rrf_k refused", dict(rrf_k=-1)),
                   ("weights refused", dict(weights=(1.0, -1.0))),
                   ("candidates refused", dict(candidates=0)),
                   ("text_field", dict(text_field="v")),
                   ("rrf_k", dict(rrf_k=61)), ("candidates", dict(candidates=5))]


@pytest.mark.parametrize("label,extra", BESIDE_A_VECTOR, ids=[x for x, _ in BESIDE_A_VECTOR])
def test_a_kept_search_refuses_or_takes_the_other_arguments_as_a_fresh_bind(label, extra):
    """The text and fusion arguments beside a vector are checked as a fresh bind
    checks them when the vector's shape is kept: the same error type or rows."""
    rng = np.random.default_rng(15)
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"v": vv.Vector(DIM, metric="l2")})
    c.insert_arrays(v=rng.standard_normal((20, DIM)).astype(np.float32))
    q = np.ones(DIM, np.float32)
    fresh = _answer(lambda: c.search(q, limit=3, **extra))
    c.table.prepared.clear()
    c.search(q, limit=3)
    assert len(c.table.prepared) == 1
    assert _answer(lambda: c.search(q, limit=3, **extra)) == fresh
    if "refused" in label:
        assert type(fresh) is type and issubclass(fresh, vv.VarveError)
    else:
        assert type(fresh) is tuple and len(fresh[0]) == 3
    db.close()


REFUSED_OR_TAKEN = [("text", "hello"), ("a dict", {"a": 1}), ("a row of one", [[1, 2, 3, 4]]),
                    ("(1, dim)", np.ones((1, DIM), np.float32)),
                    ("(dim, 1)", np.ones((DIM, 1), np.float32)), ("a scalar", np.float32(1)),
                    ("bools", np.ones(DIM, bool)), ("ints", [1, 2, 3, 4]),
                    ("int8", np.arange(DIM, dtype=np.int8))]


@pytest.mark.parametrize("label,vector", REFUSED_OR_TAKEN, ids=[x for x, _ in REFUSED_OR_TAKEN])
def test_a_kept_search_refuses_or_takes_each_vector_as_a_fresh_bind(label, vector):
    """The same error type (or the same rows) with the shape kept as without it."""
    rng = np.random.default_rng(14)
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"v": vv.Vector(DIM, metric="l2")})
    c.insert_arrays(v=rng.standard_normal((20, DIM)).astype(np.float32))
    sql = "SELECT id FROM d ORDER BY v <-> $1 LIMIT 3"
    q = np.ones(DIM, np.float32)

    def both():
        return (_answer(lambda: c.search(vector, limit=3)),
                _answer(lambda: db.sql(sql, [vector])))
    fresh = both()
    c.table.prepared.clear()
    c.search(q, limit=3)
    db.sql(sql, [q])
    assert len(c.table.prepared) == 2 and both() == fresh
    db.close()


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot", "l1"])
def test_a_read_only_query_scores_to_the_bit_as_a_writable_one(metric):
    """The exact scan compiles its query read-only whatever it is handed: a kept
    search takes a read-only vector as it is, a fresh bind may copy it, and the
    two answers must not differ in the last place."""
    rng = np.random.default_rng(4)
    arena = rng.integers(-20, 21, (60, 16)).astype(np.float32)
    norms = np.linalg.norm(arena, axis=1).astype(np.float32)
    q = (rng.standard_normal(16) * 10).astype(np.float32)
    frozen = q.copy()
    frozen.flags.writeable = False
    rows, scores = flat.search(metric, arena, norms, q, 60, None)
    rows_ro, scores_ro = flat.search(metric, arena, norms, frozen, 60, None)
    assert np.array_equal(rows, rows_ro) and np.array_equal(scores, scores_ro)



def test_the_exact_scan_takes_every_form_of_a_query_alike_and_refuses_more_than_one_row():
    """flat.searcher calls its kernel's machine code for the types it bound
    (kernels.jit.direct), without numba's dispatch: every other form of a query
    (a list, float64, a strided view, read-only) is converted to the one it was
    bound for and answers alike, and a query of two dimensions, which numba's
    dispatch refused with a raw typing error, is a DimensionError."""
    rng = np.random.default_rng(5)
    arena = rng.standard_normal((50, 16)).astype(np.float32)
    norms = np.linalg.norm(arena, axis=1).astype(np.float32)
    q = rng.standard_normal(16).astype(np.float32)
    top_k = flat.searcher("l2", arena, norms, 7, None)
    want = top_k(q)
    frozen = q.copy()
    frozen.flags.writeable = False
    strided = np.repeat(q, 2)[::2]
    for form in (q.tolist(), q.astype(np.float64), strided, frozen):
        rows, scores = top_k(form)
        assert np.array_equal(rows, want[0]) and np.array_equal(scores, want[1])
    for wrong in (q[None, :], np.float32(1.0)):
        with pytest.raises(vv.DimensionError):
            top_k(wrong)

# ---- the kept lane against a fresh bind over random writes and searches -------------

KEPT_SHAPES = [dict(limit=5), dict(limit=5, select=[]), dict(limit=3, where="tag = $1", params=[1]),
               dict(limit=3, where="tag = $1", params=[1.0]), dict(limit=5, ef=16),
               dict(limit=4, exact=True), dict(limit=5, metric="cosine", select=["tag"]),
               dict(limit=3, where="tag = 7"), dict(limit=5000, select=[])]
_SHAPE = st.integers(0, len(KEPT_SHAPES) - 1)
_SEED = st.integers(0, 2**16)
_BRANCH = st.sampled_from(["b1", "b2"])
KEPT_OPS = st.one_of(
    st.tuples(st.just("search"), _SHAPE, _SEED, st.booleans()),  # (True: another object)
    st.tuples(st.just("insert"), st.integers(1, 30), _SEED),
    st.tuples(st.just("delete"), st.integers(0, 40), _SEED),
    st.tuples(st.just("tx"), _SHAPE, _SEED, st.booleans()),      # (True: commit)
    st.tuples(st.just("branch"), _BRANCH), st.tuples(st.just("use"), _BRANCH),
    st.tuples(st.just("use"), st.just("main")), st.tuples(st.just("drop"), _BRANCH),
    st.tuples(st.just("session"), _SHAPE, _SEED, _BRANCH),      # a second session's search
    st.tuples(st.just("as_of"), _SHAPE, _SEED), st.tuples(st.just("index"), st.booleans()))


class _RolledBack(Exception):
    pass


def _fresh_answer(sess, c, q, kw):
    """A fresh bind's answer in session `sess`: (ids, scores), or the error's type."""
    try:
        t = c.table
        res = execute(bind(Search.of(q, **kw), t, sess.snapshot(kw.get("as_of"))))
    except vv.VarveError as e:
        return type(e)
    return t.id_values(res.rows), list(res.scores)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(KEPT_OPS, min_size=1, max_size=20))
def test_the_kept_lane_answers_as_a_fresh_bind_over_writes_branches_and_sessions(ops):
    """Every search of a random sequence of commits, deletes, transactions (committed
    or rolled back), branches made, used and dropped, a second session on another
    branch, as_of reads and an index dropped and made again: asked twice (the second
    from the kept lane wherever its shape was kept at that state), through the
    collection and a second object of it, each answer is a fresh bind's."""
    rng = np.random.default_rng(20)
    n = EXACT_ROWS + 150            # past the exact threshold: the walk is a lane too
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(
        DIM, metric="l2", index=vv.HNSW(m=8, ef_construction=32))})
    c.insert_arrays(id=np.arange(n), tag=np.arange(n) % 3,
                    v=rng.standard_normal((n, DIM)).astype(np.float32))
    _linked(c)
    other, s2 = db.collection("d"), db.session()
    c2 = s2.collection("d")
    next_id, versions = n, [db.version]

    def check(coll, sess, shape, seed, **extra):
        q = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        kw = {**KEPT_SHAPES[shape], **extra}
        want = _fresh_answer(sess, c, q, kw)
        for _ in range(2):
            assert _answer(lambda: coll.search(q, **kw)) == want, (shape, extra)

    for op in ops:
        kind = op[0]
        if kind == "search":
            check(other if op[3] else c, db.thread_session(), op[1], op[2])
        elif kind == "insert":
            r = np.random.default_rng(op[2])
            c.insert_arrays(id=np.arange(next_id, next_id + op[1]), tag=r.integers(0, 3, op[1]),
                            v=r.standard_normal((op[1], DIM)).astype(np.float32))
            next_id += op[1]
        elif kind == "delete":
            c.delete(ids=np.random.default_rng(op[2]).integers(0, next_id, op[1]).tolist())
        elif kind == "tx":
            try:
                with db.transaction():
                    r = np.random.default_rng(op[2])
                    c.insert({"id": next_id, "tag": 1,
                              "v": r.standard_normal(DIM).astype(np.float32)})
                    check(c, db.thread_session(), op[1], op[2])   # its own write seen
                    if not op[3]:
                        raise _RolledBack
                next_id += 1
            except _RolledBack:
                pass
        elif kind == "branch":
            if op[1] not in {b.name for b in db.branches()}:
                db.branch(op[1])
            db.use(op[1])
        elif kind == "use":
            if op[1] in {b.name for b in db.branches()}:
                db.use(op[1])
        elif kind == "drop":
            live = db.branches()
            if op[1] in {b.name for b in live} and db.thread_session().branch != op[1] \
                    and not any(b.parent == op[1] for b in live):
                db.drop_branch(op[1])   # s2 may be reading it: BranchError there, both ways
        elif kind == "session":
            if op[3] in {b.name for b in db.branches()}:
                s2.use(op[3])
            check(c2, s2, op[1], op[2])
        elif kind == "as_of":
            check(c, db.thread_session(), op[1], op[2], as_of=versions[op[2] % len(versions)])
        elif db.thread_session().branch != "main":
            continue                    # (the schema is changed on main only)
        elif op[1] and "v" not in c.table.vector_indexes:
            c.create_index("v", vv.HNSW(m=8, ef_construction=32))
        elif not op[1] and "v" in c.table.vector_indexes:
            c.drop_index("v")
        _linked(c) if "v" in c.table.vector_indexes else None
        versions.append(db.version)
    c.table.prepared.clear()
    check(c, db.thread_session(), 0, 1)
    assert len(c.table.prepared) == 1          # the lane these searches took was there
    db.close()
