"""The exact scan (kernels/scan.py) over rows near float32's largest value: a float32
score that overflowed (inf, or NaN from inf + -inf inside its sum) or a cosine
score over a norm that overflowed (1 - dot / inf) says nothing of the row's exact
float64 score, so such a row is ranked exactly, never dropped or misranked: the
answers equal a float64 numpy oracle's through the kernel (masks of every shape),
Collection.search (exact, repeated past the float16 copy's HALF_AFTER) and SQL.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from varvedb.engine.columns import norms_of
from varvedb.index import flat

_BIG = 2.0 ** 126       # 3 * _BIG = 2.55e38, near float32's largest (3.40e38)
_OPS = {"l2": "<->", "dot": "<#>", "cosine": "<=>"}


def _oracle(metric, arena, q):
    """Each row's float64 score and a bound on its rounding in any summing order."""
    a, v = arena.astype(np.float64), q.astype(np.float64)
    dim = arena.shape[1]
    if metric == "l2":
        s = np.sqrt(((a - v) ** 2).sum(1))
        return s, s * dim * 2.0 ** -48 + 1e-300
    terms = np.abs(a * v).sum(1)
    if metric == "dot":
        return -(a @ v), terms * dim * 2.0 ** -48 + 1e-300
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(v)
    zero = norms == 0
    s = np.where(zero, 1.0, 1 - (a @ v) / np.where(zero, 1, norms))
    return s, np.full(len(s), dim * 2.0 ** -44)


def _check(metric, arena, q, k, allow, rows, scores):
    """Any correct answer: min(k, allowed) distinct allowed rows, ascending, each
    scored as float64 scores it, none farther than k allowed rows (within float64's
    rounding of either: a sum that cancels terms near 2**127 loses the small ones)."""
    s, tol = _oracle(metric, arena, q)
    allowed = np.arange(len(arena)) if allow is None else np.flatnonzero(allow)
    want = min(k, len(allowed))
    rows, scores = np.asarray(rows, np.int64), np.asarray(scores, np.float64)
    assert len(rows) == want and len(set(rows.tolist())) == want, (rows, want)
    assert np.isin(rows, allowed).all()
    assert np.all(np.abs(scores - s[rows]) <= tol[rows]), (rows, scores, s[rows])
    if want:
        kth = np.sort((s + tol)[allowed])[want - 1]
        assert np.all(s[rows] - tol[rows] <= kth), (rows, s[rows], kth)
        assert np.all(np.diff(scores) >= -(tol[rows][1:] + tol[rows][:-1]))


def _arena(rng, n, dim, huge):
    """Gaussian rows, and a `huge` share of rows of -3..3 * 2**126 elements (their
    float32 sums overflow either way or cancel to NaN, their norms overflow), or of
    one or two such elements among gaussian ones, copies of each other among them."""
    arena = rng.standard_normal((n, dim))
    kind = np.where(rng.random(n) < huge, rng.integers(1, 4, n), 0)
    ints = rng.integers(-3, 4, (n, dim)) * _BIG
    arena[kind == 1] = ints[kind == 1]
    for i in np.flatnonzero(kind == 2):
        arena[i, rng.integers(0, dim, 2)] = rng.choice([-3, 3], 2) * _BIG
    copies = np.flatnonzero(kind == 3)
    if len(copies) and (kind == 1).any():
        arena[copies] = arena[rng.choice(np.flatnonzero(kind == 1))]
    return np.ascontiguousarray(arena, dtype=np.float32)


def _queries(rng, dim):
    return [np.ones(dim, np.float32), rng.integers(-2, 3, dim).astype(np.float32),
            rng.standard_normal(dim).astype(np.float32),
            (rng.standard_normal(dim) * 1e30).astype(np.float32)]


def _masks(rng, n):
    few = np.zeros(n, bool)
    few[rng.integers(0, n, 2)] = True
    return [None, rng.random(n) < 0.7, rng.random(n) < 0.2, few]   # dense, sparse, gathered


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 90), dim=st.sampled_from([2, 3, 8, 17]),
       metric=st.sampled_from(["l2", "dot", "cosine"]), k=st.sampled_from([1, 10, "more"]),
       huge=st.sampled_from([0.1, 0.5, 1.0]))
def test_the_scan_kernel_ranks_rows_near_float32s_largest_as_float64_does(seed, n, dim, metric,
                                                                          k, huge):
    rng = np.random.default_rng(seed)
    arena = _arena(rng, n, dim, huge)
    k = n + 3 if k == "more" else k
    norms = norms_of(arena)
    for allow in _masks(rng, n):
        for q in _queries(rng, dim):
            rows, scores = flat.search(metric, arena, norms, q, k, allow)
            _check(metric, arena, q, k, allow, rows, scores)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), dim=st.sampled_from([3, 8]),
       metric=st.sampled_from(["l2", "dot", "cosine"]), k=st.sampled_from([1, 10, "more"]),
       huge=st.sampled_from([0.0, 0.3, 1.0]))
def test_collection_search_and_sql_rank_rows_near_float32s_largest_as_float64_does(
        seed, n, dim, metric, k, huge):
    """Each query asked past HALF_AFTER times (the kept search, through the float16
    copy where the rows fit it), with and without a filter, and in SQL."""
    rng = np.random.default_rng(seed)
    arena = _arena(rng, n, dim, huge)
    k = n + 3 if k == "more" else k
    tags = rng.integers(0, 3, n)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(flat, "HALF_DIM", 1)
        mp.setattr(flat, "HALF_MIN", 1)
        db = vv.connect(":memory:")
        c = db.create_collection("d", {"tag": vv.Int(), "v": vv.Vector(dim, metric=metric)})
        c.insert_arrays(id=np.arange(n), tag=tags, v=arena)
        op = _OPS[metric]
        for q in _queries(rng, dim):
            for where, allow in ((None, None), ("tag = 1", tags == 1)):
                for _ in range(flat.HALF_AFTER + 2):
                    hits = c.search(q, where=where, limit=k, exact=True, select=[])
                    _check(metric, arena, q, k, allow, hits.ids, hits.scores)
                cond = "" if where is None else f"WHERE {where} "
                for _ in range(2):
                    got = db.sql(f"SELECT id, v {op} $1 FROM d {cond}ORDER BY v {op} $1 "
                                 "LIMIT $2", [q, k]).rows
                    _check(metric, arena, q, k, allow, [r[0] for r in got], [r[1] for r in got])
        db.close()


def _sql(rows: str, dim: int, select: str):
    db = vv.connect(":memory:")
    db.sql(f"CREATE TABLE t (id int primary key, e vector({dim}))")
    db.sql(f"INSERT INTO t VALUES {rows}")
    got = db.sql(select).rows
    db.close()
    return got


def test_rows_whose_float32_dot_is_nan_are_all_returned_in_float64_order():
    """inf + -inf inside a row's float32 dot (NaN): the scan never kept the row, and
    LIMIT 7 over 7 rows answered 6; each row's float64 score is finite."""
    pats = ["[3e38,3e38,-3e38,-3e38,1e38,0,0,0]", "[3e38,-3e38,3e38,-3e38,1e38,0,0,0]",
            "[3e38,3e38,3e38,3e38,-3e38,-3e38,-3e38,-3e38]", "[3e38,0,0,0,-3e38,0,0,0]",
            "[3e38,3e38,0,0,-3e38,-3e38,0,0]", "[3e38,3e38,3e38,0,-3e38,-3e38,-3e38,1e38]",
            "[1,1,1,1,1,1,1,1]"]
    q = "'[1,1,1,1,1,1,1,1]'"
    got = _sql(", ".join(f"({i}, '{p}')" for i, p in enumerate(pats, 1)), 8,
               f"SELECT id, e <#> {q} FROM t ORDER BY e <#> {q} LIMIT 7")
    arena = np.array([json.loads(p) for p in pats], np.float32)
    s, _ = _oracle("dot", arena, np.ones(8, np.float32))
    assert [r[0] for r in got] == (np.lexsort((np.arange(7), s)) + 1).tolist()
    assert np.allclose([r[1] for r in got], np.sort(s), rtol=1e-12)


def test_more_rows_whose_float32_dot_overflows_than_kept_are_ranked_in_float64():
    """20 rows whose float32 dot is -inf, the k-th too (so the near-tie bound was NaN):
    only the first k + spare were rescored, and LIMIT 1 answered id 9, not id 20."""
    got = _sql(", ".join(f"({i}, '[3e38,3e38,{i}e36]')" for i in range(1, 21)), 3,
               "SELECT id, e <#> '[1,1,1]' FROM t ORDER BY e <#> '[1,1,1]' LIMIT 1")
    x = np.float64(np.float32(3e38))
    assert got[0][0] == 20 and got[0][1] == -(2 * x + np.float64(np.float32(20e36)))


def test_a_row_whose_float32_norm_overflows_is_found_by_cosine():
    """|[3e38,3e38,0]| is past float32's range (its stored norm inf): the scan scored
    it 1 - dot / inf = 1, though its distance to [1,1,0] is 0."""
    got = _sql("(1, '[3e38,3e38,0]'), (2, '[1,0.9,0]'), (3, '[1,0.5,0]')", 3,
               "SELECT id, e <=> '[1,1,0]' FROM t ORDER BY e <=> '[1,1,0]' LIMIT 2")
    assert [r[0] for r in got] == [1, 2] and abs(got[0][1]) < 1e-15
