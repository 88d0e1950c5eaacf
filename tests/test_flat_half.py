"""The exact scan through a float16 copy of a float32 arena (index/flat.py's searcher
past HALF_AFTER searches, kernels/scan.py half_top_k): the copy only chooses the
rows, so the answers are the plain scan's, rows and float64 scores, ties alike, on
rows float16 holds exactly, rounds coarsely or cannot tell apart.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from varvedb.engine.columns import norms_of
from varvedb.index import flat
from varvedb.kernels import scan
from varvedb.kernels.distance import METRIC_CODES
from test_fast_lane import _fresh, _oracle


def _half_scan(metric, arena, queries, k):
    """Each query's answer from a searcher whose float16 copy is made at its first
    search (that one plain) and read by the others, each query's answer from the
    plain scan, and whether the copy was made (False: a value past float16's range)."""
    norms = norms_of(arena)
    made, half = [], flat._half

    def spy(*args):
        got = half(*args)
        made.append(got is not None)
        return got
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(flat, "HALF_AFTER", 1)
        mp.setattr(flat, "HALF_DIM", 1)
        mp.setattr(flat, "HALF_MIN", 1)
        mp.setattr(flat, "_half", spy)
        top_k = flat.searcher(metric, arena, norms, k, None)
        top_k(queries[0])
        got = [top_k(q) for q in queries]
    want = [flat.search(metric, arena, norms, q, k, None) for q in queries]  # (one search each)
    return got, want, made


def _same_answers(metric, arena, queries, k, made=True):
    got, want, copied = _half_scan(metric, arena, queries, k)
    assert copied == [made]
    for q, (rows, scores), (want_rows, want_scores) in zip(queries, got, want):
        assert np.array_equal(rows, want_rows) and np.array_equal(scores, want_scores), \
            (rows, want_rows)
        best, s = _oracle(metric, arena, q, k, None)
        assert np.allclose(scores, s[best], rtol=1e-12, atol=1e-12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400), dim=st.integers(1, 140),
       k=st.integers(1, 40), metric=st.sampled_from(["l2", "cosine", "dot"]),
       data=st.sampled_from(["normal", "integers", "far from 0", "below float16", "zeros"]),
       copies=st.sampled_from([0, 1, 30]))
def test_the_float16_copys_scan_answers_as_the_plain_scan(seed, n, dim, k, metric, data,
                                                          copies):
    """The copy chooses the rows, the arena ranks them: the same rows and scores as the
    plain scan on rows float16 holds exactly (small integers: ties), rows it rounds
    coarsely (far from 0), rows that differ only below its resolution, zero rows,
    and copies of a row past the spare candidates (rank_near on the chosen rows)."""
    rng = np.random.default_rng(seed)
    arena = rng.standard_normal((n, dim)).astype(np.float32)
    if data == "integers":
        arena = rng.integers(-2, 3, (n, dim)).astype(np.float32)
    elif data == "far from 0":
        arena = (1000 + arena * 0.01).astype(np.float32)
    elif data == "below float16":
        arena = (arena[:1] + rng.standard_normal((n, dim)) * 1e-5).astype(np.float32)
    elif data == "zeros":
        arena[rng.random(n) < 0.3] = 0
    if copies and n > 1:
        arena[rng.integers(0, n, min(n, copies))] = arena[0]
    queries = [arena[0] + rng.standard_normal(dim).astype(np.float32) * 0.01,
               rng.standard_normal(dim).astype(np.float32), arena[n - 1].copy()]
    _same_answers(metric, np.ascontiguousarray(arena), queries, k)


@pytest.mark.parametrize("metric", ["l2", "dot", "cosine"])
def test_float32_near_ties_through_the_float16_copy_are_ranked_exactly(metric):
    """Rows float16 cannot tell apart and float32 scores alike (the near-ties test's
    rows): the copy chooses them all, and rank_near ranks the chosen rows exactly."""
    n = 300
    small = np.linspace(0.9, 0.0, n)
    arena = np.zeros((n, 3), np.float32)
    arena[:, 0] = 4096
    if metric == "l2":
        arena[:, 1] = small
        q = np.zeros(3, np.float32)
    else:
        arena[:, 1] = small * 1e-4 if metric == "cosine" else -small * 1e-3 + 1e-3
        q = np.array([1, 1, 0], np.float32)
    _same_answers(metric, arena, [q, q * 2], 5)


def test_a_value_past_float16s_range_keeps_the_plain_scan():
    rng = np.random.default_rng(4)
    arena = rng.standard_normal((300, 8)).astype(np.float32)
    arena[17, 3] = 7e4                  # float16's largest is 65 504
    _same_answers("l2", arena, [arena[17].copy(), arena[3].copy()], 10, made=False)


def test_an_l2_copy_past_float16s_range_once_centred_is_made_as_the_rows_are():
    """l2 copies are centred on the rows' mean; rows near float16's largest on both
    sides of 0 would pass its range once centred: the copy is made uncentred."""
    rng = np.random.default_rng(8)
    arena = rng.standard_normal((300, 16)).astype(np.float32)
    arena[::2, 0] = 60000
    arena[1::2, 0] = -60000
    _same_answers("l2", arena, [arena[5].copy(), arena[6] + 1, -arena[7]], 10)


def test_an_l2_copy_far_from_0_is_centred():
    """Rows far from 0 but near each other: centred, the copy rounds them finely."""
    rng = np.random.default_rng(9)
    arena = (5000 + rng.standard_normal((300, 16))).astype(np.float32)
    copy = np.empty(arena.shape, np.uint16)
    extra = np.empty(16 + 300, np.float32)
    moved, top = scan.half_copy(arena, METRIC_CODES["l2"], copy, extra)
    assert np.allclose(extra[:16], arena.mean(axis=0), atol=1e-2)
    assert 0 < moved < 0.01 and top < 10
    _same_answers("l2", arena, [arena[5].copy(), arena[6] + 0.5], 10)


def test_a_kept_search_repeated_at_one_state_answers_as_a_fresh_bind(monkeypatch):
    """Past flat.HALF_AFTER searches of one shape the kept lane reads the copy."""
    made, half = [], flat._half

    def spy(*args):
        got = half(*args)
        made.append(got is not None)
        return got
    monkeypatch.setattr(flat, "_half", spy)
    rng = np.random.default_rng(6)
    db = vv.connect(":memory:")
    dim = flat.HALF_DIM
    c = db.create_collection("d", {"v": vv.Vector(dim, metric="l2")})
    n = -(-flat.HALF_MIN // dim)
    c.insert_arrays(id=np.arange(n), v=rng.standard_normal((n, dim)).astype(np.float32))
    queries = rng.standard_normal((2 * flat.HALF_AFTER, dim)).astype(np.float32)
    for q in queries:
        got = c.search(q, limit=7, select=[])
        assert (got.ids, list(got.scores)) == _fresh(c, q, limit=7, select=[])
    assert made == [True]
    db.close()


_FLT_MAX = float(np.finfo(np.float32).max)


def test_a_dot_query_whose_copys_score_overflows_answers_as_the_plain_scan():
    """|q| near float32's largest: float16 rounds row 0 up, and its float32 dot with
    the copy overflowed (-inf: the k-th score, so the reach, -inf): the copy's scan
    answered row 0 where the plain scan (and float64) answer row 1."""
    arena = np.zeros((64, 128), np.float32)
    arena[0, :2] = [1.00049, 1.0]           # float16: 1.00049 rounds up
    arena[1, :2] = [1.00048, 1.00048]       # float16: both round down to 1
    q = np.zeros(128, np.float32)
    q[:2] = np.float32(_FLT_MAX / 2.000965)
    _same_answers("dot", arena, [q, q.copy()], 1)
    assert flat.search("dot", arena, norms_of(arena), q, 1, None)[0].tolist() == [1]


def test_a_cosine_query_whose_float32_norm_overflows_finds_its_own_direction():
    """A finite query whose float32 norm overflows, and a row of 65 500 on its axis
    (distance 0; float16 rounds it to 65 504, whose dot overflowed): the plain scan
    (NaN scores) and the copy's (NaN: never within reach) both lost that row."""
    rng = np.random.default_rng(5)
    arena = rng.standard_normal((512, 128)).astype(np.float32)
    for row, value, over in ((7, 65500.0, 65502.0), (9, 65519.0, 65510.0)):
        a = arena.copy()
        a[row] = 0
        a[row, 0] = value
        q = np.zeros(128, np.float32)
        q[0] = np.float32(_FLT_MAX / over)
        _same_answers("cosine", a, [q, -q], 3)
        rows, scores = flat.search("cosine", a, norms_of(a), q, 3, None)
        assert rows[0] == row and scores[0] == 0.0


@pytest.mark.parametrize("metric", ["dot", "cosine"])
def test_queries_of_subnormals_and_tiny_elements_are_ranked_as_float64_ranks_them(metric):
    """Their float32 products (and a cosine query's norm) underflowed: an error that
    neither the plain scan's bound nor the copy's covered (dot: 9 of 40 subnormal
    queries were not the float64 top-k)."""
    rng = np.random.default_rng(7)
    arena = rng.standard_normal((512, 128)).astype(np.float32)
    queries = [(rng.integers(-40, 41, 128) * 2.0 ** -149).astype(np.float32)
               for _ in range(12)]
    queries += [(rng.standard_normal(128) * s).astype(np.float32) for s in (1e-22, 4e-23)]
    _same_answers(metric, arena, queries, 10)
    norms = norms_of(arena)
    for q in queries:       # (_same_answers' scores agree to 1e-12: any subnormal's do)
        rows, scores = flat.search(metric, arena, norms, q, 10, None)
        best, s = _oracle(metric, arena, q, 10, None)
        assert rows.tolist() == best.tolist()
        assert np.allclose(scores, s[best], rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), dim=st.integers(1, 140),
       k=st.integers(1, 20), metric=st.sampled_from(["l2", "cosine", "dot"]),
       size=st.sampled_from([1e-44, 1e-30, 1e-13, 1e13, 1e19, 1e30, _FLT_MAX]),
       big_rows=st.booleans())
def test_huge_and_tiny_queries_through_the_float16_copy(seed, n, dim, k, metric, size,
                                                        big_rows):
    """Queries whose largest |element| is `size` (finite), over rows near float16's
    largest or not: the copy's scan answers as the plain scan, and both as float64."""
    rng = np.random.default_rng(seed)
    arena = rng.standard_normal((n, dim)).astype(np.float32)
    if big_rows:
        arena = (arena / np.abs(arena).max() * 65500).astype(np.float32)
    queries = []
    for v in (rng.standard_normal(dim), arena[n - 1].astype(np.float64)):
        top = np.abs(v).max()
        if top > 0:
            q = (v / top * size).astype(np.float32)
            if np.isfinite(q).all() and q.any():
                queries.append(q)
    if queries:
        _same_answers(metric, arena, queries, k)


def test_an_l2_query_whose_float32_distances_overflow_still_answers_k_rows():
    """Past float32's range a row's l2 score is inf, which the keep pass's stand-in
    bound (3e38) left out: a scan of fewer rows than its groups answered none."""
    rng = np.random.default_rng(0)
    arena = rng.standard_normal((5, 3)).astype(np.float32)
    for value in (1e30, -3e38):
        q = np.full(3, value, np.float32)
        rows, scores = flat.search("l2", arena, norms_of(arena), q, 4, None)
        best, s = _oracle("l2", arena, q, 4, None)
        assert rows.tolist() == best.tolist() and np.allclose(scores, s[best], rtol=1e-12)


@pytest.mark.parametrize("metric", ["l2", "dot", "cosine"])
@pytest.mark.parametrize("n, dim", [(8, 8), (1000, 128), (37, 100), (7, 131), (17, 3)])
def test_the_copys_scores_eight_rows_a_step_are_its_rows_own(n, dim, metric):
    """half_scores sums eight rows at a step (scan._dots8: their vectors added across
    in one tree) and the columns past the last eight and the rows past the last eight
    apart: each row's score is its own float16 row's, row for row (l2 |x'|^2 + |q|^2 -
    2 x'.q, dot -x'.q, cosine 1 - x'.q / (|x| |q|)), within float32's rounding."""
    rng = np.random.default_rng(n * 1000 + dim)
    rows = rng.standard_normal((n, dim)).astype(np.float16)
    half = rows.view(np.uint16)
    x = rows.astype(np.float64)
    q = rng.standard_normal(dim).astype(np.float32)
    q64 = q.astype(np.float64)
    sq = (x ** 2).sum(1).astype(np.float32)
    norms = np.sqrt((x ** 2).sum(1)).astype(np.float32)
    scores = np.full(n, np.nan, np.float32)
    scan.half_scores(half, norms, sq, q, METRIC_CODES[metric], scores)
    size, q_size = np.sqrt((x ** 2).sum(1)), np.sqrt((q64 ** 2).sum())
    if metric == "l2":
        want, scale = sq + (q64 ** 2).sum() - 2.0 * (x @ q64), (size + q_size) ** 2
    elif metric == "dot":
        want, scale = -(x @ q64), size * q_size
    else:
        want, scale = 1.0 - (x @ q64) / (norms * q_size), np.ones(n)
    assert np.all(np.abs(scores - want) <= 8 * (dim + 4) * 2.0 ** -24 * scale + 1e-30)
