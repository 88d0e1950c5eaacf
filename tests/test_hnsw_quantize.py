"""HNSW(quantize="int8") and HNSW(quantize="pq", pq_m=...): the walk on int8 or
product-quantizer codes with an exact rerank, against exact search and against
the unquantized graph; the int8 codes' error bound; persistence, reopening,
as_of and filters through the codes; bad specs."""

import numpy as np
import pytest

import varvedb as vv
from varvedb.errors import SchemaError
from varvedb.index import flat
from varvedb.index.hnsw import HnswIndex
from varvedb.kernels import codes
from varvedb.storage.format import code_width

from conftest import hnsw_arrays_of_format
from test_hnsw_index import clustered, exact_distances, exact_top_k, norms_of, recall

N, DIM, K = 4000, 32, 10


@pytest.fixture(scope="module")
def data():
    return clustered(N, DIM, seed=11), clustered(100, DIM, seed=12)


# each quantizer with its options
QUANTIZERS = [pytest.param({"quantize": "int8"}, id="int8"),
              pytest.param({"quantize": "pq", "pq_m": 8}, id="pq")]


def built(x, metric, quantize="int8", **kw):
    g = HnswIndex(x.shape[1], metric, 16, 100, quantize=quantize, **kw)
    g.add(x, norms_of(x), np.arange(len(x)))
    return g


def answers(g, x, queries, k=K, ef=100, allow=None):
    got = [g.search(x, norms_of(x), q, k, allow=allow, ef=ef) for q in queries]
    return np.array([r for r, _ in got]), np.array([d for _, d in got])


@pytest.mark.parametrize("quant", QUANTIZERS)
@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_recall_against_exact_search_is_within_001_of_the_unquantized_graph(data, metric,
                                                                            quant):
    x, queries = data
    truth = exact_top_k(x, queries, metric)
    coded = recall(answers(built(x, metric, **quant), x, queries)[0], truth)
    plain = recall(answers(built(x, metric, None), x, queries)[0], truth)
    assert coded >= 0.95, coded
    assert coded >= plain - 0.01, (coded, plain)


def test_scores_are_exact_and_ranked_after_the_rerank(data):
    x, queries = data
    g = built(x, "cosine")
    rows, dists = answers(g, x, queries)
    want = exact_distances(x, queries, "cosine")
    np.testing.assert_allclose(dists, np.take_along_axis(want, rows, 1), rtol=0, atol=1e-6)
    assert (np.diff(dists, axis=1) >= 0).all()


def test_f16_arena_walks_on_codes_too(data):
    x, queries = data
    half = x.astype(np.float16)
    g = HnswIndex(DIM, "l2", 16, 100, quantize="int8")
    g.add(half, norms_of(half), np.arange(N))
    rows, _ = answers(g, half, queries)
    assert recall(rows, exact_top_k(half, queries, "l2")) >= 0.95


def test_a_code_stands_for_its_value_within_half_a_step():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2000, 40)).astype(np.float32)
    lo, step = codes.fit(x)
    width = code_width(40)
    assert width == 64
    out = np.zeros((2000, width), np.int8)
    sq = np.zeros(2000, np.float32)
    codes.encode_rows(x, norms_of(x), np.arange(2000), False, lo, step, out, sq)
    decoded = lo + (out[:, :40].astype(np.float32) + 128) * step
    inside = (x >= lo) & (x <= lo + 255 * step)
    assert inside.mean() > 0.99
    half_step = np.broadcast_to(step / 2, x.shape)
    assert (np.abs(decoded - x)[inside] <= half_step[inside] + 1e-6).all()
    assert (out[:, 40:] == 0).all()                  # the padding adds nothing to a dot
    np.testing.assert_allclose(sq, (decoded ** 2).sum(1), rtol=1e-4)
    # the walk's quantity: codes . (step * q) = decoded . q - off . q
    q = rng.normal(size=40).astype(np.float32)
    off = lo + 128 * step
    scaled = codes.scaled_query(q, step, width)
    np.testing.assert_allclose(out.astype(np.float32) @ scaled, decoded @ q - off @ q,
                               rtol=1e-3, atol=1e-3)


def test_filtered_walk_through_codes_returns_only_allowed_rows(data):
    x, queries = data
    allow = np.random.default_rng(5).random(N) < 0.3
    rows, _ = answers(built(x, "l2"), x, queries, allow=allow)
    assert allow[rows].all()
    assert recall(rows, exact_top_k(x, queries, "l2", allow=allow)) >= 0.93


def test_rows_added_one_batch_at_a_time_refit_the_codes(data):
    x, queries = data
    g = HnswIndex(DIM, "l2", 16, 100, quantize="int8")
    norms = norms_of(x)
    for lo in range(0, N, 7):            # a range fitted on 7 rows would clip most others
        g.add(x, norms, np.arange(lo, min(lo + 7, N)))
    assert g._code_fit >= N // 2
    assert recall(answers(g, x, queries)[0], exact_top_k(x, queries, "l2")) >= 0.95


@pytest.mark.parametrize("quant", QUANTIZERS)
def test_to_arrays_round_trip_answers_identically(data, quant):
    x, queries = data
    g = built(x, "cosine", **quant)
    again = HnswIndex.from_arrays({k: v.copy() for k, v in g.to_arrays().items()})
    assert (again.quantize, again.pq_m) == (quant["quantize"], quant.get("pq_m"))
    again.validate(N)
    a, b = answers(g, x, queries), answers(again, x, queries)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    code_bytes = 64 if quant["quantize"] == "int8" else quant["pq_m"]
    assert g.memory_bytes() >= built(x, "cosine", None).memory_bytes() + N * code_bytes


def test_format_2_params_of_an_older_file_still_load(data):
    x, queries = data
    g = built(x, "l2")
    arrays = hnsw_arrays_of_format(g.to_arrays(), 2)
    old = HnswIndex.from_arrays(arrays)
    assert old.quantize == "int8" and old.pq_m is None
    np.testing.assert_array_equal(answers(old, x, queries)[0], answers(g, x, queries)[0])


def test_pq_codes_that_do_not_fit_are_refused(data):
    x, _ = data
    arrays = dict(built(x, "l2", "pq", pq_m=8).to_arrays())
    with pytest.raises(ValueError, match="dtype"):
        HnswIndex.from_arrays(dict(arrays, codes=arrays["codes"][:, :4].copy()))
    books = arrays["codebooks"].copy()
    books[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        HnswIndex.from_arrays(dict(arrays, codebooks=books))
    params = arrays["params"].copy()
    params[15] = 0                      # pq without its pq_m
    with pytest.raises(ValueError, match="pq_m"):
        HnswIndex.from_arrays(dict(arrays, params=params))


def test_format_1_params_of_an_older_file_still_load(data):
    x, queries = data
    g = built(x, "l2", None)
    arrays = hnsw_arrays_of_format(g.to_arrays(), 1)
    old = HnswIndex.from_arrays(arrays)
    assert old.quantize is None
    np.testing.assert_array_equal(answers(old, x, queries)[0], answers(g, x, queries)[0])


def test_codes_that_do_not_fit_the_params_are_refused(data):
    x, _ = data
    arrays = dict(built(x, "l2").to_arrays())
    bad = dict(arrays, codes=arrays["codes"][:-1])
    with pytest.raises(ValueError, match="dtype"):
        HnswIndex.from_arrays(bad)
    step = arrays["code_step"].copy()
    step[3] = 0.0
    with pytest.raises(ValueError, match="finite and positive"):
        HnswIndex.from_arrays(dict(arrays, code_step=step))
    params = arrays["params"].copy()
    params[13] = 7
    with pytest.raises(ValueError, match="quantizer"):
        HnswIndex.from_arrays(dict(arrays, params=params))


@pytest.mark.parametrize("quant", QUANTIZERS)
def test_a_collection_with_a_quantized_index_survives_reopen_with_as_of_and_filters(
        tmp_path, data, quant):
    x, queries = data
    path = tmp_path / "q.varve"
    with vv.connect(path) as db:
        c = db.create_collection("items", {
            "tag": vv.Int(),
            "v": vv.Vector(DIM, metric="l2", index=vv.HNSW(m=16, ef_construction=100,
                                                           **quant))})
        c.insert_arrays(id=np.arange(N), tag=np.arange(N) % 4, v=x)
        first = db.version
        c.update(where="tag = 0", set={"v": x[0] + 100})     # moves a quarter away
        db.checkpoint()
        before = [c.search(vector=q, limit=K, ef=100, where="tag != 1", select=[]).ids
                  for q in queries[:20]]
        old = [c.search(vector=q, limit=K, ef=100, as_of=first, select=[]).ids
               for q in queries[:20]]
    with vv.connect(path) as db:
        c = db["items"]
        assert c.schema.fields["v"].vector_index.quantize == quant["quantize"]
        after = [c.search(vector=q, limit=K, ef=100, where="tag != 1", select=[]).ids
                 for q in queries[:20]]
        old_again = [c.search(vector=q, limit=K, ef=100, as_of=first, select=[]).ids
                     for q in queries[:20]]
    assert after == before and old_again == old
    live = np.arange(N)[(np.arange(N) % 4 != 0) & (np.arange(N) % 4 != 1)]
    truth = exact_top_k(x[live], queries[:20], "l2")
    assert recall(np.array([np.asarray(ids) for ids in after]), live[truth]) >= 0.9
    truth_then = exact_top_k(x, queries[:20], "l2")
    assert recall(np.array([np.asarray(ids) for ids in old]), truth_then) >= 0.9


def test_sql_creates_a_quantized_index(tmp_path, data):
    x, queries = data
    with vv.connect(tmp_path / "s.varve") as db:
        db.sql("CREATE TABLE t (id bigint PRIMARY KEY, v vector(32))")
        c = db["t"]
        c.insert_arrays(id=np.arange(500), v=x[:500])
        before = (tmp_path / "s.varve").read_bytes()
        with pytest.raises(SchemaError, match="quantize"):
            db.sql("CREATE INDEX ON t USING hnsw (v vector_l2_ops) WITH (quantize = 'int4')")
        assert (tmp_path / "s.varve").read_bytes() == before
        with pytest.raises(SchemaError, match="divide"):
            db.sql("CREATE INDEX ON t USING hnsw (v vector_l2_ops) "
                   "WITH (quantize = 'pq', pq_m = 5)")
        assert (tmp_path / "s.varve").read_bytes() == before
        truth = exact_top_k(x[:500], queries[:1], "l2")[0]
        for sql, quant in [("m = 8, quantize = 'int8'", ("int8", None)),
                           ("m = 8, quantize = 'pq', pq_m = 16", ("pq", 16)),
                           ("m = 8", ("int8", None)),       # the default, at 32-d f32
                           ("m = 8, quantize = 'none'", (None, None))]:
            db.sql(f"CREATE INDEX t_v ON t USING hnsw (v vector_l2_ops) WITH ({sql})")
            spec = c.table.vector_indexes["v"].spec
            assert (spec.quantize, spec.pq_m) == quant and spec.m == 8
            rows = c.search(vector=queries[0], limit=K, ef=100, select=[]).ids
            assert len(set(rows) & set(truth.tolist())) >= 9
            db.sql("DROP INDEX t_v")


@pytest.mark.parametrize("bad", ["int4", "INT8", 8, True])
def test_an_unknown_quantizer_is_a_schema_error(bad):
    with pytest.raises(SchemaError, match="quantize"):
        vv.HNSW(quantize=bad)


@pytest.mark.parametrize("args", [{"quantize": "pq"}, {"quantize": "int8", "pq_m": 8},
                                  {"pq_m": 8}, {"quantize": "pq", "pq_m": 0},
                                  {"quantize": "pq", "pq_m": 2.0}])
def test_pq_m_goes_with_quantize_pq_and_only_with_it(args):
    with pytest.raises(SchemaError, match="pq_m"):
        vv.HNSW(**args)


@pytest.mark.parametrize("dtype", ["int8", "bit"])
def test_quantize_is_refused_on_vectors_that_are_codes_already(tmp_path, dtype):
    with pytest.raises(SchemaError, match="quantize"):
        vv.Vector(16, dtype=dtype, index=vv.HNSW(quantize="int8"))
    path = tmp_path / "d.varve"
    with vv.connect(path) as db:
        c = db.create_collection("items", {"v": vv.Vector(16, dtype=dtype)})
        c.insert({"id": 1, "v": np.ones(16, np.int8)})
        db.checkpoint()
        before = path.read_bytes()
        with pytest.raises(SchemaError, match="quantize"):
            c.create_index("v", vv.HNSW(quantize="int8"))
        assert path.read_bytes() == before


@pytest.mark.parametrize("dim, dtype, quantize", [
    (8, "f32", None), (16, "f32", None), (17, "f32", "int8"), (384, "f32", "int8"),
    (32, "f16", None), (33, "f16", "int8"), (64, "int8", None), (64, "bit", None)])
def test_the_default_walks_int8_codes_where_they_are_smaller_than_the_vectors(
        tmp_path, dim, dtype, quantize):
    # codes are padded to 64 bytes: below that a row's own values are fewer bytes
    assert vv.HNSW().quantize == "auto"
    assert vv.Vector(dim, dtype=dtype, index=vv.HNSW()).vector_index.quantize == quantize
    assert vv.Vector(dim, dtype=dtype, index=vv.HNSW(quantize=None)).vector_index.quantize \
        is None
    path = tmp_path / "d.varve"
    with vv.connect(path) as db:        # create_index decides it too, and the file keeps it
        c = db.create_collection("items", {"v": vv.Vector(dim, dtype=dtype)})
        c.create_index("v", vv.HNSW(m=4))
        assert c.table.vector_indexes["v"].spec.quantize == quantize
    with vv.connect(path) as db:
        assert db["items"].table.vector_indexes["v"].spec.quantize == quantize


@pytest.mark.parametrize("quant", QUANTIZERS)
@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_a_coded_walk_as_wide_as_the_graph_is_exact_search(metric, quant):
    # ef at least the rows: every node is measured exactly, near-ties cut by
    # (float64 score, row) as exact search cuts them, whatever order the codes
    # put them in; a filtered walk too
    # rows that differ by far less than a code's step (the wide rows set it), so
    # the codes cannot order them: a rerank of the codes' best few would miss
    rng = np.random.default_rng(5)
    x = (1.0 + rng.normal(size=(300, DIM)) * 1e-3).astype(np.float32)
    x[:10] = rng.normal(size=(10, DIM)) * 4
    queries = x[10:30] + (rng.normal(size=(20, DIM)) * 1e-3).astype(np.float32)
    g = built(x, metric, **quant)
    norms = norms_of(x)
    for allow in (None, np.arange(300) % 3 != 0):
        for q in queries[:20]:
            want = flat.search(metric, x, norms, q, K, allow)
            for ef in (300, 301, 1000):
                rows, dists = g.search(x, norms, q, K, allow=allow, ef=ef)
                assert rows.tolist() == want[0].tolist()
                assert dists.tolist() == want[1].tolist()


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_the_bound_int8_walk_answers_as_search(data, metric):
    # the kept lane's walk (query/prepared.py) binds the codes and their step once
    x, queries = data
    g = built(x, metric)
    norms = norms_of(x)
    allow = np.arange(N) % 5 != 0
    for mask in (None, allow):
        for ef in (10, 40, 4000):
            walk = g.searcher(x, norms, K, mask, ef)
            for q in queries[:15]:
                rows, dists = walk(q)
                want_rows, want_dists = g.search(x, norms, q, K, allow=mask, ef=ef)
                assert rows.tolist() == want_rows.tolist()
                assert dists.tolist() == want_dists.tolist()
    pq = built(x[:300], metric, quantize="pq", pq_m=8)    # its query is a table a search
    assert pq.searcher(x[:300], norms[:300], K) is None


# a reopened int8 dot graph asked a query near float32's largest value: the codes'
# float32 dot overflowed (NaN from inf + -inf), and under fastmath a NaN compared
# "nearer" on every step of greedy_descend, which then circled for ever
_HUGE_QUERY = r"""
import sys
import numpy as np
import varvedb as vv
from varvedb.index import flat
db = vv.connect(sys.argv[1], readonly=True)
t = db.engine.table("docs")
ix = t.vector_indexes["embedding"]
arena, norms = t.columns["embedding"].frozen(ix.linked)
v = np.random.default_rng(441863).standard_normal(128)
unit = (v / np.abs(v).max() * 1.5).astype(np.float32)
for big in (2.5e38, 1.28e38, 3.4e38, 1.9e30):
    q = (unit.astype(np.float64) / 1.5 * big).astype(np.float32)
    rows, dist = ix.graph.search(arena, norms, q, 3, ef=100)
    exact, _ = flat.search("dot", arena, norms, q, 3, None)
    hits = db.collection("docs").search(vector=q, limit=3)
    # (scaled, the walk, its rerank and exact search rank as for a unit query)
    assert list(rows) == list(exact), (big, rows, exact)
    assert len(hits) == 3
    print(big, list(rows), flush=True)
print("done")
"""


def test_a_huge_dot_query_on_a_reopened_int8_graph_returns(tmp_path):
    import subprocess
    from conftest import PYTHON, child_env
    path = str(tmp_path / "huge.varve")
    db = vv.connect(path)
    c = db.create_collection("docs", {"embedding": vv.Vector(128, metric="dot",
                                                             index=vv.HNSW())})
    x = np.random.default_rng(0).standard_normal((3000, 128)).astype(np.float32)
    c.insert([{"id": i, "embedding": x[i]} for i in range(3000)])
    c.wait_indexed("embedding")
    db.close()
    # (a child process: the defect hung the walk, uninterruptibly, in machine code)
    child = subprocess.run([PYTHON, "-c", _HUGE_QUERY, path], env=child_env(),
                           capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.strip().endswith("done")
