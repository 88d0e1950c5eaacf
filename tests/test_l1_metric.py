"""A search's metric is the query's: l1 (pgvector's <+>) by exact scan, and any
metric a field's graph was not built for planned exact, held to numpy oracles.

The oracle scores every allowed row in float64 from the same float32 query
and the stored (f32 or f16) values, and orders by (score, row): the kernels
must return exactly those rows, with those scores."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.engine.columns import norms_of
from varvedb.index import flat
from varvedb.index.hnsw import HnswIndex
from varvedb.index.vector_index import make_vector_index
from varvedb.query.plan import Strategy, VectorTopK
from varvedb.query.planner import EXACT_ROWS, choose_vector_strategy

METRICS = ("cosine", "l2", "dot", "l1")


def oracle_scores(x: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """pgvector-scale distances of every row of x from q, float64, by plain numpy."""
    x = x.astype(np.float64)
    q = np.asarray(q, np.float32).astype(np.float64)
    if metric == "l1":
        return np.abs(x - q).sum(axis=1)
    if metric == "l2":
        return np.sqrt(((x - q) ** 2).sum(axis=1))
    if metric == "dot":
        return -(x @ q)
    norms = np.linalg.norm(x, axis=1) * np.linalg.norm(q)
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = np.clip((x @ q) / norms, -1.0, 1.0)
    return np.where(norms == 0, 1.0, 1.0 - sim)       # the kernels rank a zero vector at 1


def oracle_top_k(x, q, metric, k, allow=None):
    scores = oracle_scores(x, q, metric)
    rows = np.arange(len(x)) if allow is None else np.flatnonzero(allow)
    order = np.lexsort((rows, scores[rows]))[:k]
    return rows[order], scores[rows[order]]


def check_same(got, want):
    (rows, dists), (want_rows, want_dists) = got, want
    assert rows.dtype == np.int64 and dists.dtype == np.float64
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_allclose(dists, want_dists, rtol=1e-12, atol=1e-12)


# ---- the kernel: index/flat.search("l1", ...) -------------------------------------

@pytest.fixture(scope="module")
def arenas():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3000, 19)).astype(np.float32)   # 19: the sums' tail path too
    return {"f32": x, "f16": x.astype(np.float16)}


def _mask(kind: str, n: int, rng) -> np.ndarray | None:
    if kind == "all":
        return None
    if kind == "dense":          # tested row by row in the scan
        return rng.random(n) < 0.5
    mask = np.zeros(n, bool)     # under flat.GATHER_BELOW: gathered first
    mask[rng.choice(n, size=int(0.01 * n), replace=False)] = True
    return mask


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("mask", ["all", "dense", "sparse"])
@pytest.mark.parametrize("k", [1, 10, 64])
def test_l1_exact_scan_matches_the_oracle(arenas, dtype, mask, k):
    x = arenas[dtype]
    rng = np.random.default_rng(k)
    allow = _mask(mask, len(x), rng)
    if mask == "sparse":
        assert np.count_nonzero(allow) < flat.GATHER_BELOW * len(x)
    for _ in range(5):
        q = rng.standard_normal(x.shape[1]).astype(np.float32)
        got = flat.search("l1", x, norms_of(x), q, k, allow)
        check_same(got, oracle_top_k(x, q, "l1", k, allow))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_l1_ties_are_ordered_by_row_and_scores_are_exact(dtype):
    # small integers: every distance is exact in float32 and many tie
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, size=(500, 6)).astype(dtype)
    q = rng.integers(-3, 4, size=6).astype(np.float32)
    for allow in (None, rng.random(500) < 0.3, np.arange(500) % 97 == 0):
        rows, dists = flat.search("l1", x, norms_of(x), q, 40, allow)
        want = oracle_top_k(x, q, "l1", 40, allow)
        np.testing.assert_array_equal(rows, want[0])
        np.testing.assert_array_equal(dists, want[1])     # integers: no rounding at all
        assert len(set(dists.tolist())) < len(dists)      # the case has ties


def test_l1_scan_edges(arenas):
    x = arenas["f32"][:100]
    q = np.ones(x.shape[1], np.float32)
    nothing = np.zeros(100, bool)
    rows, dists = flat.search("l1", x, norms_of(x), q, 5, nothing)
    assert len(rows) == len(dists) == 0
    rows, _ = flat.search("l1", x, norms_of(x), q, 10**6, None)     # k past n: every row
    np.testing.assert_array_equal(rows, oracle_top_k(x, q, "l1", 100)[0])
    rows, dists = flat.search("l1", x, norms_of(x), x[7], 1, None)  # a row is at 0 from itself
    assert rows.tolist() == [7] and dists.tolist() == [0.0]
    with pytest.raises(vv.NonFiniteVectorError, match="NaN or inf"):
        flat.search("l1", x, norms_of(x), np.full(x.shape[1], np.nan, np.float32), 3, None)


@pytest.mark.parametrize("metric", ["cosine", "l2", "dot"])
def test_the_graph_metrics_scan_as_before(arenas, metric):
    x = arenas["f16"]
    rng = np.random.default_rng(2)
    allow = _mask("sparse", len(x), rng)
    q = rng.standard_normal(x.shape[1]).astype(np.float32)
    check_same(flat.search(metric, x, norms_of(x), q, 10, allow),
               oracle_top_k(x, q, metric, 10, allow))


def test_cosine_of_a_vector_and_itself_is_zero_not_rounding_noise():
    x = np.array([[0.1, 0.2, 0.7], [1.0, 3.0, -2.0]], np.float32)
    for r in range(2):
        rows, dists = flat.search("cosine", x, norms_of(x), x[r], 1, None)
        assert rows.tolist() == [r] and dists.tolist() == [0.0]   # clamped like pgvector


def test_graphs_stay_cosine_l2_dot():
    with pytest.raises(ValueError, match="metric"):
        HnswIndex(4, "l1")
    with pytest.raises(vv.SchemaError):
        vv.Vector(4, metric="l1")       # a field's metric is one a graph can be built for


# ---- the planner: a metric the graph was not built for is answered exactly ------------

def test_choose_vector_strategy_refuses_a_graph_of_another_metric():
    index = make_vector_index("emb", 4, "cosine", vv.HNSW(ef_search=40, quantize=None))
    n = 100_000
    assert choose_vector_strategy(index, 10, n, n, None, False, "cosine") == \
        (Strategy.GRAPH, 40, "")
    for metric in ("l2", "dot", "l1"):
        assert choose_vector_strategy(index, 10, n, n, None, False, metric) == \
            (Strategy.EXACT, None, "index built for cosine")
    assert choose_vector_strategy(index, 10, n, n, None, True, "l1")[2] == "exact=True"
    assert choose_vector_strategy(None, 10, n, n, None, False, "l1")[2] == "no vector index"


ROWS, DIM = EXACT_ROWS + 500, 8      # enough rows that the field's own metric walks the graph


@pytest.fixture(scope="module")
def coll(tmp_path_factory):
    rng = np.random.default_rng(21)
    x = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    x[3] = 0.0                                       # a zero vector: cosine ranks it at 1
    x[10:20] = x[0]                                  # duplicates: ties settled by id
    tags = rng.integers(0, 100, ROWS)
    db = vv.connect(str(tmp_path_factory.mktemp("l1") / "l1.varve"))
    c32 = db.create_collection("c32", {"tag": vv.Int(index="sorted"),
                                       "emb": vv.Vector(DIM, metric="cosine")})
    c16 = db.create_collection("c16", {"tag": vv.Int(index="sorted"),
                                       "emb": vv.Vector(DIM, metric="l2", dtype="f16")})
    for c in (c32, c16):
        c.insert_arrays(id=np.arange(ROWS) * 2, tag=tags, emb=x)   # ids are not row numbers
        c.create_index("emb", vv.HNSW(m=4, ef_construction=16))
    flat_ = db.create_collection("flat", {"tag": "int", "emb": vv.Vector(DIM, metric="dot")})
    flat_.insert_arrays(id=np.arange(ROWS) * 2, tag=tags, emb=x)
    yield {"x": x, "tags": tags, "c32": c32, "c16": c16, "flat": flat_, "rng": rng}
    db.close()


def _topk(plan) -> dict:
    return plan.find(VectorTopK).to_dict()


@pytest.mark.parametrize("name", ["c32", "c16"])
def test_a_mismatched_metric_is_planned_exact_and_runs_exact(coll, name):
    c = coll[name]
    own = c.schema.fields["emb"].metric
    q = coll["rng"].standard_normal(DIM).astype(np.float32)
    walk = _topk(c.explain("search", vector=q, limit=5))
    assert (walk["metric"], walk["strategy"], walk["reason"]) == (own, "graph", "")
    assert _topk(c.explain("search", vector=q, limit=5, metric=own))["strategy"] == "graph"
    for metric in METRICS:
        if metric == own:
            continue
        plan = c.explain("search", vector=q, limit=5, metric=metric)
        d = _topk(plan)
        assert (d["metric"], d["strategy"], d["ef"], d["reason"]) == \
            (metric, "exact", None, f"index built for {own}")
        hits = c.search(vector=q, limit=5, metric=metric)
        assert hits.plan == plan                      # it ran as planned: no walk at all
        assert f"({metric})" in str(hits.plan) and f"index built for {own}" in str(hits.plan)


@pytest.mark.parametrize("name", ["c32", "c16", "flat"])
@pytest.mark.parametrize("metric", METRICS)
def test_search_by_each_metric_matches_the_oracle(coll, name, metric):
    c, rng = coll[name], coll["rng"]
    stored = coll["x"].astype(np.float16) if name == "c16" else coll["x"]
    # the field's own metric walks the graph (approximate): exact=True holds it to the oracle
    exact = metric == c.schema.fields["emb"].metric
    queries = [rng.standard_normal(DIM).astype(np.float32), coll["x"][0], coll["x"][3] + 1]
    for q in queries:
        for where, allow in ((None, None), ("tag < 30", coll["tags"] < 30),
                             ("tag = 7", coll["tags"] == 7)):
            hits = c.search(vector=q, limit=15, where=where, metric=metric, exact=exact,
                            select=[])
            rows, scores = oracle_top_k(stored, q, metric, 15, allow)
            assert hits.ids == (rows * 2).tolist()
            np.testing.assert_allclose([h.score for h in hits], scores, rtol=1e-12, atol=1e-12)


def test_l1_scores_are_pgvectors_sum_of_absolute_differences(coll):
    c = coll["c32"]
    hits = c.search(vector=[1, 0, 0, 0, 0, 0, 0, 0], limit=1, metric="l1", where="id = 6")
    assert hits.ids == [6]
    assert hits[0].score == pytest.approx(float(np.abs(coll["x"][3].astype(np.float64)
                                                       - [1, 0, 0, 0, 0, 0, 0, 0]).sum()))
    assert c.search(vector=coll["x"][0], limit=11, metric="l1").ids == \
        [0] + list(range(20, 40, 2))                  # the duplicates, at 0, by id


@pytest.mark.parametrize("bad", ["hamming", "L1", "", "l1 ", 1, 1.0, b"l1", ["l1"], True,
                                 ("l2",), {"l1"}])
def test_a_metric_it_does_not_take_is_refused(coll, bad):
    c = coll["c32"]
    with pytest.raises(vv.OptionError, match="metric"):
        c.search(vector=np.ones(DIM), metric=bad)
    with pytest.raises(vv.OptionError, match="metric"):
        c.explain("search", vector=np.ones(DIM), metric=bad)


def test_metric_default_is_the_fields_and_numpy_strings_are_taken(coll):
    c = coll["flat"]
    q = np.ones(DIM, np.float32)
    assert _topk(c.explain("search", vector=q))["metric"] == "dot"
    assert c.search(vector=q, metric=np.str_("l1")).ids == c.search(vector=q, metric="l1").ids
    assert _topk(c.explain("search", vector=q, metric=np.str_("l1")))["metric"] == "l1"
