"""Queries and rows at float32's edges through the approximate indexes: an l2 query
past 2**41 (its float32 |q - x|^2 overflows: every row inf, the walk blind) walks
with its rows scaled alike (distance.METRIC_L2_SCALED), a huge dot or cosine
query's PQ table and probe are made on the query scaled by a power of two, an int8
walk's query is made in float64 when its float32 form ``step q`` leaves float32's
range, and a row's norm is computed in float64. The oracle: float64 numpy scores,
ties by row (as tests/test_fast_lane.py's)."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from test_fast_lane import _oracle
from varvedb.engine.columns import norms_of
from varvedb.index import flat
from varvedb.index.hnsw import HnswIndex
from varvedb.index.ivfpq import IvfIndex

_ROWS, _DIM = 300, 16


@functools.lru_cache(maxsize=None)
def _indexes(metric: str, scale: float):
    """(rows, norms, {name: search(q, k) -> rows}) over 300 16-d gaussian rows times scale."""
    x = (np.random.default_rng(3).standard_normal((_ROWS, _DIM)) * scale).astype(np.float32)
    norms = norms_of(x)
    out = {}
    for quantize, extra in ((None, {}), ("int8", {}), ("pq", {"pq_m": 4})):
        graph = HnswIndex(_DIM, metric, m=8, ef_construction=64, seed=1, quantize=quantize,
                          **extra)
        graph.add(x, norms, np.arange(_ROWS))
        out[f"hnsw-{quantize}"] = functools.partial(
            lambda g, q, k: g.search(x, norms, q, k, ef=64)[0], graph)
        if quantize is None:
            out["hnsw-searcher"] = functools.partial(
                lambda g, q, k: g.searcher(x, norms, k, ef=64)(q)[0], graph)
    ivf = IvfIndex(_DIM, metric, 8, None, seed=1)
    ivf.train(x, norms, np.arange(_ROWS))
    ivf.add(x, norms, np.arange(_ROWS))
    out["ivf-flat"] = lambda q, k: ivf.search(x, norms, q, k, probes=4)[0]
    ivfpq = IvfIndex(_DIM, metric, 1, 4, seed=1, rerank=40)
    ivfpq.train(np.tile(x, (4, 1)), np.tile(norms, 4), np.arange(4 * _ROWS))
    ivfpq.add(x, norms, np.arange(_ROWS))
    out["ivf-pq"] = lambda q, k: ivfpq.search(x, norms, q, k, probes=1)[0]
    return x, norms, out


def _recall(metric, scale, queries, names, k=10):
    x, _, searches = _indexes(metric, scale)
    found = {name: 0 for name in names}
    for q in queries:
        want, _ = _oracle(metric, x, q, k, None)
        for name in names:
            found[name] += len(set(searches[name](q, k).tolist()) & set(want.tolist()))
    return {name: hits / (k * len(queries)) for name, hits in found.items()}


def _directions(seed, n=8):
    v = np.random.default_rng(seed).standard_normal((n, _DIM))
    return v / np.abs(v).max(axis=1)[:, None]


def test_a_huge_l2_query_walks_and_probes_as_the_same_query_at_a_moderate_scale_does():
    """Rows near 1e17, queries whose largest element is 1e22 (|q|^2 past float32's
    largest: main walked every l2 graph, coded or not, and probed IVF-Flat's lists
    on infinities, recall ~0.03): each walk finds about what it finds for rows and
    queries both scaled down by 2**-70 (a scaling l2 ranks alike)."""
    names = ["hnsw-None", "hnsw-searcher", "hnsw-int8", "hnsw-pq", "ivf-flat"]
    huge = _recall("l2", 1e17, (_directions(1) * 1e22).astype(np.float32), names)
    small = _recall("l2", 1e17 * 2.0 ** -70,
                    (_directions(1) * 1e22 * 2.0 ** -70).astype(np.float32), names)
    for name in names:
        assert huge[name] >= small[name] - 0.1, (name, huge, small)


def test_a_huge_l2_query_walks_row_for_row_as_rows_and_query_scaled_alike():
    """The plain walk of a huge l2 query equals, row for row and at any ef, the walk
    of rows and query both scaled by 2**-70 over the same graph: its float32
    distances are those times a power of two."""
    x, norms, _ = _indexes("l2", 1e17)
    graph = HnswIndex(_DIM, "l2", m=8, ef_construction=64, seed=1)
    graph.add(x, norms, np.arange(_ROWS))
    small = np.ascontiguousarray(x * np.float32(2.0 ** -70))
    for q in (_directions(2) * 3e22).astype(np.float32):
        q_small = q * np.float32(2.0 ** -70)
        for ef in (10, 40):
            assert graph.search(x, norms, q, 10, ef=ef)[0].tolist() == \
                graph.search(small, norms, q_small, 10, ef=ef)[0].tolist()
        want, s = _oracle("l2", x, q, 10, None)
        rows, dists = graph.search(x, norms, q, 10, ef=_ROWS)
        assert rows.tolist() == want.tolist() and np.allclose(dists, s[rows], rtol=1e-12)
        rows, dists = flat.search("l2", x, norms, q, 10, None)
        assert rows.tolist() == want.tolist() and np.allclose(dists, s[rows], rtol=1e-12)


def _unit(q):
    """q scaled by a power of two into [1, 2), exactly (a float32)."""
    top = np.abs(q.astype(np.float64)).max()
    return (q.astype(np.float64) * 2.0 ** (1 - np.frexp(top)[1])).astype(np.float32)


@pytest.mark.parametrize("metric", ["dot", "cosine"])
@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_a_huge_or_tiny_dot_or_cosine_query_walks_codes_as_the_same_query_scaled(metric, scale):
    """PQ's float32 table of a dot query past ~1.28e38 overflowed (and of a cosine
    one past ~1e19: its float32 norm did), an int8 walk's ``step q`` of a tiny query
    underflowed (of a subnormal one, to zeros) and of a huge one, where the codes'
    step is past 1 (rows near 1e4), overflowed: each walked blind. A positive factor
    ranks dot and cosine alike, so every coded walk (HNSW int8 and PQ, IVF-PQ) of
    such a query returns, row for row, what it returns for the query scaled by a
    power of two into [1, 2)."""
    _, _, searches = _indexes(metric, scale)
    for exponent in (-44.5, -42, -30, 20, 30, 37, 38, 38.5):
        for q in (_directions(4, 3) * 10.0 ** exponent).astype(np.float32):
            if not q.any():
                continue
            unit = _unit(q)
            for name in ("hnsw-int8", "hnsw-pq", "ivf-pq"):
                assert searches[name](q, 10).tolist() == searches[name](unit, 10).tolist(), \
                    (name, exponent)


def test_a_norm_is_summed_without_overflow_and_stored_finite_where_float32_holds_it():
    """A row with elements near 1e20 has a norm float32 holds (4e20) but a float32
    |x|^2 past its largest: norms_of stored inf (with "overflow encountered in
    vecdot", and the one-row commit's "in dot"); now the float64 norm, rounded, and
    inf only where the norm itself is past float32's largest (a row of 3e38s)."""
    import varvedb as vv
    x = np.ones((5, 4), np.float32)
    x[1] = 1e20
    x[2, 0] = -3e19
    x[3] = 3e38
    x[4, :2] = [2e38, -2e38]
    want = np.linalg.norm(x.astype(np.float64), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = norms_of(x)
        assert got[3] == np.inf
        fits = want <= np.finfo(np.float32).max
        assert np.array_equal(got[fits], want[fits].astype(np.float32))
        assert np.array_equal(norms_of(x[:3]), got[:3])     # (rows apart: alike)
        db = vv.connect(":memory:")
        c = db.create_collection("d", {"v": vv.Vector(4, metric="cosine")})
        for i, row in enumerate(x):       # one-row commits
            c.insert({"id": i, "v": row})
        hits = c.search(x[2], limit=5, exact=True, select=[])
        assert hits.ids[0] == 2 and abs(hits.scores[0]) < 1e-6
        db.close()


@pytest.mark.parametrize("metric", ["l2", "dot", "cosine"])
def test_rows_near_float32s_largest_are_built_over_and_found_as_float64_ranks(metric):
    """Rows of 3e38s (a norm past float32's largest), of two such elements, and of
    1e20s among gaussian ones: every graph (plain, int8, PQ) and IVF-Flat builds,
    and a walk as wide as the graph, or a probe of every list, answers as float64
    scores rank."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((_ROWS, _DIM)).astype(np.float32)
    x[7], x[8], x[10] = 3e38, -3e38, 1e20
    x[9, :2] = 3e38
    norms = norms_of(x)
    searches = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (k-means' float32 products of such rows)
        for quantize, extra in ((None, {}), ("int8", {}), ("pq", {"pq_m": 4})):
            graph = HnswIndex(_DIM, metric, m=8, ef_construction=64, seed=1,
                              quantize=quantize, **extra)
            graph.add(x, norms, np.arange(_ROWS))
            searches[quantize] = functools.partial(
                lambda g, q: g.search(x, norms, q, 10, ef=_ROWS), graph)
        ivf = IvfIndex(_DIM, metric, 4, None, seed=1)
        ivf.train(x, norms, np.arange(_ROWS))
        ivf.add(x, norms, np.arange(_ROWS))
    searches["ivf"] = lambda q: ivf.search(x, norms, q, 10, probes=4)
    searches["flat"] = lambda q: flat.search(metric, x, norms, q, 10, None)
    queries = list(rng.standard_normal((4, _DIM)).astype(np.float32)) + [x[7], x[9], x[10]]
    for q in queries:
        want, s = _oracle(metric, x, q, 10, None)
        for name, search in searches.items():
            rows, dists = search(q)
            assert np.allclose(s[rows], s[want], rtol=1e-9), (name, rows, want)
            assert np.allclose(dists, s[rows], rtol=1e-9), name
