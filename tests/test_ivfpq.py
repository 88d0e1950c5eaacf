"""vv.IVFPQ: k-means lists with and without product-quantizer codes, against exact
search (recall floors on fixed seeds; every list probed and every candidate
reranked is exact search itself); training reproducible from its seed; lists
persisted and reopened identically; filters and as_of through the lists; the
plan; SQL's ivfflat / ivfpq; bad specs and crafted arrays refused."""

import os

import numpy as np
import pytest

import varvedb as vv
from conftest import counts
from varvedb.errors import SchemaError, SqlError
from varvedb.index.ivfpq import IvfIndex
from varvedb.kernels import pq as kernels

from test_hnsw_index import clustered, exact_top_k, norms_of, recall

N, DIM, K = 6000, 32, 10


@pytest.fixture(scope="module")
def data():
    return clustered(N, DIM, seed=21), clustered(60, DIM, seed=22)


def built(x, metric, lists=32, pq_m=None, seed=0, **kw):
    ix = IvfIndex(x.shape[1], metric, lists, pq_m, seed=seed, **kw)
    ix.train(x, norms_of(x), np.arange(len(x)))
    # two adds: the second lands in the tail, then (past the seal size) in the lists
    ix.add(x, norms_of(x), np.arange(len(x) // 3))
    ix.add(x, norms_of(x), np.arange(len(x) // 3, len(x)))
    return ix


def answers(ix, x, queries, k=K, probes=None, allow=None):
    got = [ix.search(x, norms_of(x), q, k, allow=allow, probes=probes) for q in queries]
    return np.array([r for r, _ in got]), np.array([d for _, d in got])


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
@pytest.mark.parametrize("pq_m", [None, 8])
def test_recall_against_exact_search_on_fixed_seeds(data, metric, pq_m):
    x, queries = data
    truth = exact_top_k(x, queries, metric)
    ix = built(x, metric, pq_m=pq_m)
    few = recall(answers(ix, x, queries, probes=2)[0], truth)
    more = recall(answers(ix, x, queries, probes=8)[0], truth)
    assert more >= 0.95, (few, more)
    assert more >= few


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_every_list_probed_is_exact_search(data, metric):
    x, queries = data
    truth = exact_top_k(x, queries, metric)
    flat = built(x, metric)
    rows, dists = answers(flat, x, queries, probes=32)
    np.testing.assert_array_equal(rows, truth)
    # with codes, reranking every row is exact too
    coded = built(x, metric, pq_m=8, rerank=N)
    np.testing.assert_array_equal(answers(coded, x, queries, probes=32)[0], truth)
    assert (np.diff(dists, axis=1) >= 0).all()


def test_codes_scan_ranks_by_the_decoded_rows(data):
    """The scan's l2 distance is |q - c - r̂|² up to |q|²: decode r̂ and check."""
    x, queries = data
    ix = built(x, "l2", pq_m=8)
    ix.seal()
    q = queries[0]
    books, cents = ix.codebooks, ix.centroids
    lists = np.repeat(np.arange(ix.lists), np.diff(ix._offsets))
    decoded = cents[lists] + np.concatenate(
        [books[j][ix._codes[:, j]] for j in range(ix.pq_m)], axis=1)
    want = ((decoded - q) ** 2).sum(1) - (q ** 2).sum()
    table = np.empty((ix.pq_m, kernels.PQ_CODES), np.float32)
    kernels.distance_table(ix._books_t, q, False, table)      # -q_j · codebook_j[c]
    base = ix._c_sq - 2 * cents @ q
    got = base[lists] + ix._extra + 2 * table[np.arange(ix.pq_m), ix._codes].sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_training_is_reproducible_from_the_seed(data):
    x, _ = data
    a, b = built(x, "l2", pq_m=8, seed=3), built(x, "l2", pq_m=8, seed=3)
    c = built(x, "l2", pq_m=8, seed=4)
    for name, array in a.to_arrays().items():
        np.testing.assert_array_equal(array, b.to_arrays()[name], err_msg=name)
    assert not np.array_equal(a.centroids, c.centroids)


def test_filter_mask_restricts_the_scan(data):
    x, queries = data
    allow = np.zeros(N, bool)
    allow[::3] = True
    ix = built(x, "l2")
    rows, _ = answers(ix, x, queries, probes=32, allow=allow)
    assert allow[rows].all()
    sub = np.flatnonzero(allow)
    want = sub[exact_top_k(x[sub], queries, "l2")]
    np.testing.assert_array_equal(rows, want)


def test_arrays_round_trip_and_crafted_arrays_are_refused(data):
    x, queries = data
    ix = built(x, "cosine", pq_m=8)
    ix.add(x, norms_of(x), np.arange(N, N))          # an empty add changes nothing
    arrays = {k: v.copy() for k, v in ix.to_arrays().items()}
    back = IvfIndex.from_arrays(arrays)
    back.validate(N)
    np.testing.assert_array_equal(answers(back, x, queries)[0], answers(ix, x, queries)[0])
    bad = dict(arrays, rows=arrays["rows"][::-1].copy())
    bad["rows"][0] = bad["rows"][1]                  # one row twice
    with pytest.raises(ValueError, match="twice"):
        IvfIndex.from_arrays(bad).validate(N)
    with pytest.raises(ValueError, match="the arena 5999 rows"):
        IvfIndex.from_arrays(arrays).validate(N - 1)
    short = dict(arrays, codes=arrays["codes"][:-1])
    with pytest.raises(ValueError, match="size"):
        IvfIndex.from_arrays(short)
    params = arrays["params"].copy()
    params[3] = 0                                    # no lists
    with pytest.raises(ValueError, match="range"):
        IvfIndex.from_arrays(dict(arrays, params=params))


def _collection(path, spec, n=N, dim=DIM, seed=21):
    db = vv.connect(path)
    c = db.create_collection("docs", {"v": vv.Vector(dim, metric="l2"), "tag": vv.Int()})
    x = clustered(n, dim, seed=seed)
    c.insert_arrays(id=np.arange(n), v=x, tag=np.arange(n) % 7)
    c.create_index("v", spec)
    db.checkpoint()                    # the maintainer has linked every row
    return db, c, x


def test_collection_search_filters_as_of_and_reopen(tmp_path, data):
    _, queries = data
    path = str(tmp_path / "ivf.varve")
    db, c, x = _collection(path, vv.IVFPQ(lists=32, pq_m=8, nprobe=4))
    assert counts(c.index_status("v")) == {"field": "v", "linked": N, "unlinked": 0}
    v0 = db.version
    c.delete(ids=list(range(0, N, 2)))
    c.update({"tag": 100}, where="id < 600")
    before = [(c.search(vector=q, limit=K, probes=p).ids,
               c.search(vector=q, limit=K, as_of=v0, probes=p).ids,
               c.search(vector=q, limit=K, where="tag = 3", probes=p).ids)
              for q in queries[:20] for p in (4, 32)]
    # every list probed: the answer is exact search over what the read sees
    for q in queries[:5]:
        assert c.search(vector=q, limit=K, probes=32, where="tag < 5").ids == \
            c.search(vector=q, limit=K, exact=True, where="tag < 5").ids
        assert c.search(vector=q, limit=K, probes=32, as_of=v0).ids == \
            c.search(vector=q, limit=K, exact=True, as_of=v0).ids
    db.checkpoint()
    db.close()
    db = vv.connect(path)
    c = db.collection("docs")
    after = [(c.search(vector=q, limit=K, probes=p).ids,
              c.search(vector=q, limit=K, as_of=v0, probes=p).ids,
              c.search(vector=q, limit=K, where="tag = 3", probes=p).ids)
             for q in queries[:20] for p in (4, 32)]
    assert after == before
    assert all(i % 2 for ids, _, _ in after for i in ids)   # deleted rows never return
    assert db.verify().ok
    db.close()


def test_plan_shows_probes_and_rows_scanned(tmp_path, data):
    _, queries = data
    db, c, _ = _collection(str(tmp_path / "plan.varve"), vv.IVFPQ(lists=16, nprobe=3))
    planned = c.explain(vector=queries[0], limit=5)
    assert "IVF lists probes=3" in str(planned) and "scanned" not in str(planned)
    node = c.search(vector=queries[0], limit=5).plan.input
    assert node.strategy == "lists" and node.ef == 3 and 0 < node.scanned < N
    assert f"({node.scanned:,} rows scanned)" in str(node)
    wide = c.search(vector=queries[0], limit=5, probes=16).plan.input
    assert wide.scanned == N
    # ef is the graph's width: an IVF index ignores it, as pgvector's settings are
    assert c.search(vector=queries[0], limit=5, ef=40).plan.input.ef == 3
    with pytest.raises(vv.FieldTypeError, match="probes"):
        c.search(vector=queries[0], probes=0)
    db.close()


def test_untrained_index_answers_exactly_until_enough_rows(tmp_path):
    db = vv.connect(str(tmp_path / "few.varve"))
    c = db.create_collection("docs", {"v": vv.Vector(8, metric="l2")})
    c.create_index("v", vv.IVFPQ(lists=50))        # trains at 4 rows per list: 200
    x = clustered(150, 8, seed=5)
    c.insert_arrays(id=np.arange(150), v=x)
    db.checkpoint()
    assert c.index_status("v")["unlinked"] == 150
    q = x[7] + 0.01
    assert c.search(vector=q, limit=3).ids == c.search(vector=q, limit=3, exact=True).ids
    c.insert_arrays(id=np.arange(150, 400), v=clustered(250, 8, seed=6))
    db.checkpoint()
    assert counts(c.index_status("v")) == {"field": "v", "linked": 400, "unlinked": 0}
    assert c.search(vector=q, limit=3, probes=50).ids == \
        c.search(vector=q, limit=3, exact=True).ids
    db.close()


def test_sql_ivfflat_and_ivfpq(tmp_path, data):
    _, queries = data
    db = vv.connect(str(tmp_path / "sql.varve"))
    db.sql("CREATE TABLE items (id bigint PRIMARY KEY, e vector(32))")
    x = clustered(3000, DIM, seed=8)       # above the planner's exact-scan size
    db.collection("items").insert_arrays(id=np.arange(3000), e=x)
    db.sql("CREATE INDEX items_e ON items USING ivfflat (e vector_l2_ops) WITH (lists = 20)")
    spec = db.collection("items").schema.fields["e"].vector_index
    assert spec == vv.IVFPQ(lists=20, metric="l2", name="items_e")
    q = queries[0]
    sql = "SELECT id FROM items ORDER BY e <-> $1 LIMIT 5"
    plan = "\n".join(r[0] for r in db.sql("EXPLAIN " + sql, [q]).rows)
    assert "IVF lists probes=10" in plan
    db.sql("SET ivfflat.probes = 20")
    assert db.sql("SHOW ivfflat.probes").rows == [("20",)]
    got = [r[0] for r in db.sql(sql, [q]).rows]
    assert got == db.collection("items").search(vector=q, limit=5, exact=True).ids
    db.sql("DROP INDEX items_e")
    db.sql("CREATE INDEX ON items USING ivfpq (e vector_l2_ops) WITH (lists = 20, pq_m = 8)")
    assert db.collection("items").schema.fields["e"].vector_index.pq_m == 8
    with pytest.raises(SqlError, match="pq_m"):
        db.sql("CREATE INDEX ON items USING ivfpq (e vector_l2_ops) WITH (lists = 20)")
    with pytest.raises(SqlError, match="unrecognized parameter"):
        db.sql("CREATE INDEX ON items USING ivfflat (e vector_l2_ops) WITH (m = 20)")
    db.close()


@pytest.mark.parametrize("spec, field, match", [
    (vv.IVFPQ(pq_m=5), vv.Vector(32), "divide the dimension"),
    (vv.IVFPQ(), vv.Vector(16, dtype="bit"), "bit field"),
])
def test_bad_specs_are_refused_and_the_file_is_unchanged(tmp_path, spec, field, match):
    path = str(tmp_path / "bad.varve")
    db = vv.connect(path)
    c = db.create_collection("docs", {"v": field})
    db.checkpoint()
    size, version = os.path.getsize(path), db.version
    with pytest.raises(SchemaError, match=match):
        c.create_index("v", spec)
    with pytest.raises(SchemaError, match=match):
        db.create_collection("other", {"v": vv.Vector(field.dim, dtype=field.dtype,
                                                      index=spec)})
    assert os.path.getsize(path) == size and db.version == version
    db.close()


@pytest.mark.parametrize("args, match", [
    (dict(lists=0), "lists"), (dict(pq_m=0), "pq_m"), (dict(nprobe=1.5), "nprobe"),
    (dict(metric="hamming"), "metric"), (dict(rerank=-1), "rerank"), (dict(seed=-1), "seed"),
])
def test_spec_limits(args, match):
    with pytest.raises(SchemaError, match=match):
        vv.IVFPQ(**args)
