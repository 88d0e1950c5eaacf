"""query/vector_funcs: pgvector's functions over numpy blocks, against plain-Python
oracles (float64 sums, one vector at a time) and pgvector's own expected outputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import varvedb as vv
from varvedb.query import vector_funcs as vf

# ---- plain-Python oracles, one pair of vectors at a time ------------------------------


def py_l2(a, b):
    return math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(a, b)))


def py_l1(a, b):
    return math.fsum(abs(x - y) for x, y in zip(a, b))


def py_ip(a, b):
    return math.fsum(x * y for x, y in zip(a, b))


def py_cosine(a, b):
    aa, bb = math.fsum(x * x for x in a), math.fsum(y * y for y in b)
    if aa == 0 or bb == 0:
        return math.nan
    return 1.0 - max(-1.0, min(1.0, py_ip(a, b) / math.sqrt(aa * bb)))


def py_norm(a):
    return math.sqrt(math.fsum(x * x for x in a))


def py_subvector(a, start, count):
    """Elements at 1-based positions i with start <= i < start + count."""
    return [x for i, x in enumerate(a, 1) if start <= i < start + count]


PAIRWISE = {"l2_distance": py_l2, "l1_distance": py_l1, "inner_product": py_ip,
            "negative_inner_product": lambda a, b: -py_ip(a, b), "cosine_distance": py_cosine}

finite = st.floats(-1e4, 1e4, width=32, allow_subnormal=False)


@st.composite
def blocks(draw):
    d = draw(st.integers(1, 12))
    n = draw(st.integers(0, 6))
    vec = st.lists(st.one_of(finite, st.just(0.0)), min_size=d, max_size=d)
    a = draw(st.lists(vec, min_size=n, max_size=n))
    b = draw(st.lists(vec, min_size=n, max_size=n))
    q = draw(vec)
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    return (np.array(a, dtype).reshape(n, d), np.array(b, dtype).reshape(n, d),
            np.array(q, dtype))


def close(got, want):
    if math.isnan(want):
        return math.isnan(got)
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=150, deadline=None)
@given(blocks(), st.sampled_from(sorted(PAIRWISE)))
def test_pairwise_functions_match_the_oracle_in_every_shape(data, name):
    a, b, q = data
    fn, oracle = getattr(vf, name), PAIRWISE[name]
    A, B, Q = a.astype(float).tolist(), b.astype(float).tolist(), q.astype(float).tolist()
    rows = fn(a, b)                         # two blocks, row by row
    against = fn(a, q)                      # each row against one vector
    mirrored = fn(q, a)
    assert rows.dtype == against.dtype == np.float64 and rows.shape == against.shape == (len(a),)
    for i in range(len(a)):
        assert close(rows[i], oracle(A[i], B[i]))
        assert close(against[i], oracle(A[i], Q))
        assert close(mirrored[i], oracle(Q, A[i]))
    one = fn(q, q)
    assert isinstance(one, np.float64) and close(one, oracle(Q, Q))


@settings(max_examples=100, deadline=None)
@given(blocks())
def test_norm_dims_and_normalize_match_the_oracle(data):
    a, _, q = data
    norms = vf.vector_norm(a)
    assert norms.dtype == np.float64 and norms.shape == (len(a),)
    for row, got in zip(a.astype(float).tolist(), norms):
        assert close(got, py_norm(row))
    assert close(vf.vector_norm(q), py_norm(q.astype(float).tolist()))
    assert vf.vector_dims(q) == len(q)
    assert vf.vector_dims(a).tolist() == [a.shape[1]] * len(a)
    unit = vf.l2_normalize(a)
    assert unit.dtype == a.dtype and unit.shape == a.shape     # f16 stays halfvec
    for row, got in zip(a.astype(float).tolist(), unit):
        n = py_norm(row)
        want = [x / n if n > 0 else 0.0 for x in row]     # a zero vector stays zero
        np.testing.assert_allclose(got.astype(float), np.array(want, a.dtype).astype(float),
                                   rtol=1e-6 if a.dtype == np.float32 else 1e-3, atol=0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9), st.integers(-12, 12), st.integers(-12, 12),
       st.sampled_from([np.float32, np.float16]))
def test_subvector_matches_the_oracle(d, start, count, dtype):
    v = np.arange(1, d + 1, dtype=dtype)
    block = np.stack([v, -v])
    want = py_subvector(v.tolist(), start, count)
    if not want:
        for arg in (v, block):
            with pytest.raises(vv.DimensionError, match="at least 1 dimension"):
                vf.subvector(arg, start, count)
        return
    got = vf.subvector(v, start, count)
    assert got.dtype == dtype and got.tolist() == want
    assert vf.subvector(block, start, count).tolist() == [want, [-x for x in want]]


# ---- pgvector's own expected outputs (its test/expected/functions.out) -----------------

@pytest.mark.parametrize("fn, a, b, want", [
    ("l2_distance", [0, 0], [3, 4], 5.0), ("l2_distance", [0, 0], [0, 1], 1.0),
    ("inner_product", [1, 2], [3, 4], 11.0), ("negative_inner_product", [1, 2], [3, 4], -11.0),
    ("cosine_distance", [1, 2], [2, 4], 0.0), ("cosine_distance", [1, 1], [1, 1], 0.0),
    ("cosine_distance", [1, 1], [-1, -1], 2.0), ("cosine_distance", [1, 1], [1.1, 1.1], 0.0),
    ("cosine_distance", [1, 1], [-1.1, -1.1], 2.0),
    ("l1_distance", [0, 0], [3, 4], 7.0), ("l1_distance", [0, 0], [0, 1], 1.0),
])
def test_pgvectors_expected_values(fn, a, b, want):
    for dtype in (np.float32, np.float16):
        assert getattr(vf, fn)(np.array(a, dtype), np.array(b, dtype)) == want


def test_cosine_of_a_zero_vector_is_nan_like_pgvector():
    assert math.isnan(vf.cosine_distance([1, 2], [0, 0]))
    assert math.isnan(vf.cosine_distance([0, 0], [0, 0]))
    got = vf.cosine_distance(np.array([[1, 2], [0, 0], [3, 0]], np.float32), [1, 0])
    assert got[0] == pytest.approx(1 - 1 / math.sqrt(5)) and math.isnan(got[1]) and got[2] == 0


def test_norms_and_normalize_of_pgvectors_examples():
    assert vf.vector_norm([3, 4]) == 5.0 and vf.vector_norm([0, 1]) == 1.0
    assert round(vf.vector_norm([1, 1]), 5) == 1.41421
    assert vf.vector_dims(np.zeros(3, np.float32)) == 3
    assert vf.l2_normalize(np.array([3, 4], np.float32)).tolist() == [0.6000000238418579,
                                                                       0.800000011920929]
    z = vf.l2_normalize(np.zeros((2, 3), np.float16))
    assert z.dtype == np.float16 and not z.any()


def test_pgvectors_subvector_examples():
    v = np.array([1, 2, 3, 4, 5], np.float32)
    assert vf.subvector(v, 1, 3).tolist() == [1, 2, 3]
    assert vf.subvector(v, 3, 2).tolist() == [3, 4]
    assert vf.subvector(v, -1, 3).tolist() == [1]          # clipped like substring()
    assert vf.subvector(v, 3, 9).tolist() == [3, 4, 5]
    for start, count in ((3, -1), (3, 0), (6, 1), (-5, 5)):
        with pytest.raises(vv.DimensionError, match="at least 1 dimension"):
            vf.subvector(v, start, count)


# ---- refusals --------------------------------------------------------------------------

@pytest.mark.parametrize("fn", sorted(PAIRWISE))
def test_different_dimensions_are_refused_in_pgvectors_words(fn):
    with pytest.raises(vv.DimensionError, match="different vector dimensions 2 and 1"):
        getattr(vf, fn)([1, 2], [3])
    with pytest.raises(vv.DimensionError, match="different vector dimensions 3 and 2"):
        getattr(vf, fn)(np.ones((4, 3)), np.ones((4, 2)))
    with pytest.raises(vv.DimensionError, match="row by row"):
        getattr(vf, fn)(np.ones((4, 3)), np.ones((5, 3)))


@pytest.mark.parametrize("bad, err", [
    (np.ones((2, 2, 2)), vv.DimensionError), (np.float32(1.0), vv.DimensionError),
    (np.ones((3, 0)), vv.DimensionError), (["a", "b"], vv.FieldTypeError)])
def test_what_is_not_a_vector_or_a_block_is_refused(bad, err):
    for call in (lambda: vf.vector_norm(bad), lambda: vf.l2_distance(bad, bad),
                 lambda: vf.l2_normalize(bad), lambda: vf.subvector(bad, 1, 1),
                 lambda: vf.vector_dims(bad)):
        with pytest.raises(err):
            call()


def test_a_column_of_separate_vectors_is_taken_as_a_block():
    col = np.empty(3, object)
    col[:] = [np.array([1, 0], np.float32), np.array([0, 2], np.float32),
              np.array([3, 4], np.float32)]
    assert vf.vector_norm(col).tolist() == [1.0, 2.0, 5.0]
    assert vf.l1_distance(col, [0, 0]).tolist() == [1.0, 2.0, 7.0]
