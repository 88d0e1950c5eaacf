"""Quantized storage: int8 and bit vector fields, end to end.

int8 rows are whole numbers in -128..127, measured exactly in float from those
integers; bit rows are dim bits packed 8 a byte, measured by hamming (the
number of differing bits). Each is checked against a numpy oracle (exact
search, and recall floors of the graph on a fixed seed), through bad input
(refused, the file unchanged), reopen, as_of, filters, twins and the wire.
"""
from __future__ import annotations


import numpy as np
import pytest

import varvedb as vv
from varvedb.query.plan import VectorTopK
from varvedb.wire import decode, encode, value_from_wire

ROWS = 3000            # above the planner's exact-scan threshold: searches walk the graph
DIM = 32
BITS = 100             # not a multiple of 64: the popcount's byte tail runs too
K = 10


def int8_rows(n, dim=DIM, seed=0):
    """Clustered int8 embeddings (what a quantizing embedding API returns)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 40, (20, dim))
    x = centers[rng.integers(0, 20, n)] + rng.normal(0, 15, (n, dim))
    return np.clip(np.rint(x), -128, 127).astype(np.int8)


def bit_rows(n, bits=BITS, seed=0):
    """Clustered binary embeddings: cluster patterns with 10% of the bits flipped."""
    rng = np.random.default_rng(seed)
    centers = rng.integers(0, 2, (20, bits)).astype(bool)
    return centers[rng.integers(0, 20, n)] ^ (rng.random((n, bits)) < 0.1)


def oracle(metric, rows, q):
    x, q = rows.astype(np.float64), np.asarray(q, np.float64)
    if metric == "l2":
        return np.sqrt(((x - q) ** 2).sum(1))
    if metric == "l1":
        return np.abs(x - q).sum(1)
    if metric == "dot":
        return -(x @ q)
    if metric == "cosine":
        return 1 - (x @ q) / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))
    return (rows != q.astype(bool)).sum(1).astype(np.float64)      # hamming


def recall(hits, truth, k=K):
    """Found among the true k nearest, ties at the k-th distance counted as found."""
    kth = np.sort(truth)[k - 1]
    return sum(truth[i] <= kth + 1e-9 for i in hits.ids) / k


def caught_up(c, field, timeout=1800.0):      # a hang guard: numba may compile under load
    assert c.wait_indexed(field, timeout=timeout), c.index_status(field)


@pytest.fixture(scope="module")
def data():
    return int8_rows(ROWS, seed=1), bit_rows(ROWS, seed=2)


def make(path, data, index=True):
    a, b = data
    db = vv.connect(path)
    hnsw = vv.HNSW() if index else None
    c = db.create_collection("docs", {
        "g": "int",
        "q": vv.Vector(DIM, dtype="int8", metric="l2", index=hnsw),
        "f": vv.Vector(DIM, metric="l2"),          # the same integers as float32
        "b": vv.Vector(BITS, dtype="bit", index=hnsw)})
    c.insert_arrays(id=np.arange(ROWS), g=np.arange(ROWS) % 4, q=a, f=a.astype(np.float32),
                    b=b)
    if index:
        caught_up(c, "q")
        caught_up(c, "b")
    return db, c


@pytest.fixture(scope="module")
def built(tmp_path_factory, data):
    db, c = make(str(tmp_path_factory.mktemp("dtypes") / "d.varve"), data)
    yield db, c
    db.close()


# ---- exact search --------------------------------------------------------------------

@pytest.mark.parametrize("metric", ["l2", "dot", "cosine", "l1"])
def test_int8_exact_search_is_the_float_search_of_the_same_integers(built, data, metric):
    db, c = built
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.normal(0, 40, DIM).astype(np.float32)
        got = c.search(q, field="q", metric=metric, exact=True, limit=K, select=[])
        same = c.search(q, field="f", metric=metric, exact=True, limit=K, select=[])
        truth = oracle(metric, data[0], q)
        assert got.ids == list(np.lexsort((np.arange(ROWS), truth))[:K])
        # the float64 sums of the same integers (the compiled loops may differ in
        # fused multiply-adds: within a few ulp)
        assert got.ids == same.ids
        assert np.allclose(got.scores, same.scores, rtol=1e-12, atol=1e-12)
        assert np.allclose(got.scores, truth[got.ids])


def test_bit_exact_search_counts_differing_bits(built, data):
    db, c = built
    bits = data[1]
    rng = np.random.default_rng(4)
    for _ in range(5):
        q = rng.integers(0, 2, BITS)                       # 0/1 ints; bools work too
        got = c.search(q, field="b", exact=True, limit=K, select=[])
        truth = oracle("hamming", bits, q)
        assert got.ids == list(np.lexsort((np.arange(ROWS), truth))[:K])
        assert got.scores.tolist() == truth[got.ids].tolist()       # whole counts, as floats
    own = c.search(bits[7].astype(np.float64), field="b", exact=True, limit=1, select=[])
    assert own.scores.tolist() == [0.0] and bits[own.ids[0]].tolist() == bits[7].tolist()


# ---- the graph -----------------------------------------------------------------------

@pytest.mark.parametrize("metric", ["l2", "dot", "cosine"])
def test_int8_graph_recall_floor(tmp_path, data, metric):
    db = vv.connect(str(tmp_path / "g.varve"))
    c = db.create_collection("docs", {"q": vv.Vector(DIM, dtype="int8", metric=metric,
                                                     index=vv.HNSW())})
    c.insert_arrays(id=np.arange(ROWS), q=data[0])
    caught_up(c, "q")
    rng = np.random.default_rng(5)
    queries = data[0][rng.integers(0, ROWS, 30)].astype(np.float32) + rng.normal(0, 8, (30, DIM))
    found = []
    for q in queries.astype(np.float32):
        hits = c.search(q, limit=K, ef=100, select=[])
        assert hits.plan.find(VectorTopK).strategy == "graph"
        found.append(recall(hits, oracle(metric, data[0], q)))
    assert np.mean(found) >= 0.9, np.mean(found)
    db.close()


def test_bit_graph_recall_floor(built, data):
    db, c = built
    rng = np.random.default_rng(6)
    found = []
    for i in rng.integers(0, ROWS, 30):
        q = data[1][i] ^ (rng.random(BITS) < 0.05)
        hits = c.search(q, field="b", limit=K, ef=100, select=[])
        assert hits.plan.find(VectorTopK).strategy == "graph"
        found.append(recall(hits, oracle("hamming", data[1], q)))
    assert np.mean(found) >= 0.9, np.mean(found)


def test_identical_bit_rows_are_all_found_under_a_filter(tmp_path):
    # twins (bit-identical rows) are common with binary codes: the graph keeps
    # one node per vector and a ring of the others, and a filter must reach them
    n, twins = 6000, 4000
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2, (n, 64)).astype(bool)
    bits[:twins] = bits[0]
    db = vv.connect(str(tmp_path / "t.varve"))
    c = db.create_collection("docs", {"g": "int", "b": vv.Vector(64, dtype="bit",
                                                                index=vv.HNSW())})
    c.insert_arrays(id=np.arange(n), g=np.arange(n) % 3, b=bits)
    caught_up(c, "b")
    want = [i for i in range(twins) if i % 3 != 0]
    hits = c.search(bits[0], where="g != 0", limit=len(want), ef=len(want) + 100, select=[])
    assert hits.plan.find(VectorTopK).strategy == "graph"
    assert sorted(hits.ids) == want and set(hits.scores.tolist()) == {0.0}
    db.close()


# ---- bad input -----------------------------------------------------------------------

def _file_bytes(path):
    with open(path, "rb") as fh:
        return fh.read()


@pytest.mark.parametrize("field,value,error", [
    ("q", [1.5] + [0] * (DIM - 1), vv.FieldTypeError),          # not a whole number
    ("q", [128] + [0] * (DIM - 1), vv.FieldTypeError),          # past int8
    ("q", [0] * (DIM - 1) + [-129], vv.FieldTypeError),
    ("q", [float("nan")] + [0] * (DIM - 1), vv.FieldTypeError),
    ("q", [0] * (DIM + 1), vv.DimensionError),
    ("q", [True] * DIM, vv.FieldTypeError),                      # bools are not numbers here
    ("b", [0, 1, 2] + [0] * (BITS - 3), vv.FieldTypeError),      # a bit is 0 or 1
    ("b", [0.5] + [0] * (BITS - 1), vv.FieldTypeError),
    ("b", [1] * (BITS - 1), vv.DimensionError),
])
def test_bad_vectors_are_refused_and_the_file_is_unchanged(tmp_path, field, value, error):
    path = str(tmp_path / "bad.varve")
    db = vv.connect(path)
    c = db.create_collection("docs", {"q": vv.Vector(DIM, dtype="int8"),
                                      "b": vv.Vector(BITS, dtype="bit")})
    c.insert([{"id": 1, "q": [0] * DIM, "b": [0] * BITS}])
    before, version = _file_bytes(path), db.version
    with pytest.raises(error) as e:
        c.insert([{"id": 2, field: value}])
    assert field in str(e.value)
    with pytest.raises(error):
        c.insert_arrays(id=[3], **{field: np.array([value])})
    assert _file_bytes(path) == before and db.version == version and c.count() == 1
    db.close()


def test_the_position_of_a_bad_value_is_named(tmp_path):
    db = vv.connect(str(tmp_path / "p.varve"))
    c = db.create_collection("docs", {"q": vv.Vector(4, dtype="int8")})
    block = np.zeros((5, 4))
    block[3, 2] = 7.25
    with pytest.raises(vv.FieldTypeError, match="position 3 .*dimension 2"):
        c.insert_arrays(id=np.arange(5), q=block)
    c.insert_arrays(id=np.arange(5), q=np.full((5, 4), -128.0))   # whole floats are fine
    assert c.get(4)["q"].tolist() == [-128] * 4
    db.close()


def test_metrics_and_dtypes_that_do_not_fit_are_refused(tmp_path):
    for bad in (lambda: vv.Vector(8, dtype="bit", metric="cosine"),
                lambda: vv.Vector(8, metric="hamming"),
                lambda: vv.Vector(8, dtype="int8", metric="hamming"),
                lambda: vv.Vector(8, dtype="bit", index=vv.HNSW(metric="l2")),
                lambda: vv.Vector(8, dtype="int8", embed="onnx", source="t")):
        with pytest.raises(vv.SchemaError):
            bad()
    db = vv.connect(str(tmp_path / "m.varve"))
    c = db.create_collection("docs", {"f": vv.Vector(8), "b": vv.Vector(8, dtype="bit")})
    c.insert([{"f": [1.0] * 8, "b": [1] * 8}])
    with pytest.raises(vv.SchemaError):
        c.create_index("f", vv.HNSW(metric="hamming"))
    for field, metric in (("b", "l2"), ("b", "l1"), ("b", "cosine"), ("f", "hamming")):
        q = [1] * 8
        with pytest.raises(vv.OptionError):
            c.search(q, field=field, metric=metric)
    with pytest.raises(vv.FieldTypeError):
        c.search([2] + [0] * 7, field="b")
    with pytest.raises(vv.DimensionError):
        c.search([1] * 9, field="b")
    assert c.search([True] * 8, field="b").scores.tolist() == [0.0]
    db.close()


# ---- persistence, as_of, filters -------------------------------------------------------

def _answers(c, data):
    rng = np.random.default_rng(8)
    out = []
    for i in rng.integers(0, ROWS, 5):
        for field, q in (("q", data[0][i].astype(np.float32) + 3), ("b", data[1][i])):
            h = c.search(q, field=field, limit=K, select=[])
            out.append((h.ids, h.scores.tolist()))
            h = c.search(q, field=field, limit=K, where="g = 2", select=[])
            assert all(j % 4 == 2 for j in h.ids)
            out.append((h.ids, h.scores.tolist()))
    return out


@pytest.mark.parametrize("checkpoint", [True, False])
def test_reopened_files_answer_identically(tmp_path, data, checkpoint):
    path = str(tmp_path / "r.varve")
    db, c = make(path, data)
    before = _answers(c, data)
    arenas = {n: [c.get(i)[n] for i in (0, 17, ROWS - 1)] for n in ("q", "b")}
    if checkpoint:
        db.checkpoint()
    db.close()
    db = vv.connect(path)
    c = db.collection("docs")
    assert db.verify().ok
    assert _answers(c, data) == before
    for n, vals in arenas.items():
        for i, v in zip((0, 17, ROWS - 1), vals):
            got = c.get(i)[n]
            assert got.dtype == v.dtype and got.tolist() == v.tolist()
    assert c.get(17)["q"].dtype == np.int8 and c.get(17)["b"].dtype == np.bool_
    assert c.get(17)["b"].tolist() == data[1][17].tolist()
    db.close()


def test_as_of_sees_the_vectors_of_its_version(tmp_path):
    db = vv.connect(str(tmp_path / "a.varve"))
    c = db.create_collection("docs", {"g": "int", "q": vv.Vector(4, dtype="int8", metric="l2"),
                                      "b": vv.Vector(12, dtype="bit")})
    c.insert([{"id": 1, "g": 0, "q": [1, 2, 3, 4], "b": [1] * 12}])
    v1 = db.version
    c.upsert([{"id": 1, "g": 0, "q": [-1, -2, -3, -4], "b": [0] * 12}])
    c.insert([{"id": 2, "g": 1, "q": [1, 2, 3, 4], "b": [1] * 12}])
    assert c.get(1, as_of=v1)["q"].tolist() == [1, 2, 3, 4]
    assert c.get(1)["b"].tolist() == [False] * 12
    old = c.search([1, 2, 3, 4], field="q", as_of=v1, select=["q"])
    assert old.ids == [1] and old.scores.tolist() == [0.0] and old[0].fields["q"].dtype == np.int8
    now = c.search([True] * 12, field="b", where="g = 0", select=["b"])
    assert now.ids == [1] and now.scores.tolist() == [12.0]
    assert c.search([True] * 12, field="b", as_of=v1).ids == [1]
    db.close()


def test_memory_per_vector(built):
    db, c = built
    q, b = c.vector_memory("q"), c.vector_memory("b")
    assert (q["bytes_per_vector"], b["bytes_per_vector"]) == (DIM, (BITS + 7) // 8)
    assert q["arena_bytes"] == ROWS * DIM and q["graph_bytes"] > 0
    assert q["graph_bytes_per_vector"] > 0
    assert c.vector_memory("f")["bytes_per_vector"] == 4 * DIM


# ---- the wire ---------------------------------------------------------------------------

def test_wire_round_trip(built, data):
    db, c = built
    doc = c.get(5)
    back = decode(encode(doc))
    assert back["q"] == data[0][5].tolist() and all(isinstance(x, int) for x in back["q"])
    assert back["b"] == data[1][5].tolist()                     # JSON booleans
    q = value_from_wire("vector", back["q"], "int8")
    b = value_from_wire("vector", back["b"], "bit")
    assert q.dtype == np.int8 and q.tolist() == doc["q"].tolist()
    assert b.dtype == np.bool_ and b.tolist() == doc["b"].tolist()
    assert value_from_wire("vector", [1, 0, 1], "bit").tolist() == [True, False, True]
    assert value_from_wire("vector", [0.5, 1], None).dtype == np.float32


def test_a_client_reads_int8_and_bit_vectors_back_as_the_embedded_api_does(tmp_path):
    from conftest import child_env
    from server_proc import ServerProcess
    a, b = int8_rows(50, 8, seed=9), bit_rows(50, 20, seed=9)
    with ServerProcess(str(tmp_path / "s.varve"), env=child_env()) as srv:
        client = vv.Client(srv.url, timeout=1800)
        c = client.create_collection("docs", {"q": vv.Vector(8, dtype="int8", metric="l2"),
                                              "b": vv.Vector(20, dtype="bit")})
        c.insert_arrays(id=np.arange(50), q=a, b=b)                 # the bulk body
        c.insert([{"id": 50, "q": a[0].tolist(), "b": b[0].tolist()}])   # JSON rows
        for i in (3, 50):
            doc = c.get(i)
            assert doc["q"].dtype == np.int8 and doc["q"].tolist() == a[i % 50].tolist()
            assert doc["b"].dtype == np.bool_ and doc["b"].tolist() == b[i % 50].tolist()
        hits = c.search(b[3], field="b", limit=3, select=["q", "b"])
        assert 3 in hits.ids and hits.scores[0] == 0.0
        assert hits[0].fields["b"].dtype == np.bool_ and hits[0].fields["q"].dtype == np.int8
        with pytest.raises(vv.FieldTypeError):
            c.insert([{"id": 51, "q": [0.5] * 8}])
        client.close()


def test_updates_keep_the_stored_form_and_sql_reads_numbers(tmp_path):
    path = str(tmp_path / "u.varve")
    db = vv.connect(path)
    c = db.create_collection("c", {"g": "int", "q": vv.Vector(4, dtype="int8", metric="l2"),
                                   "b": vv.Vector(10, dtype="bit")})
    bits = [1, 0, 1, 0, 1, 1, 0, 0, 0, 1]
    c.insert([{"id": 1, "g": 0, "q": [1, 2, 3, 4], "b": bits}])
    c.update({"g": 5}, where="id = 1")                  # the vectors are carried over
    db.sql("UPDATE c SET g = 7 WHERE id = 1")
    c.update({"q": [-1, -2, -3, -4]}, where="g = 7")
    db.close()
    db = vv.connect(path)
    c = db.collection("c")
    doc = c.get(1)
    assert doc["g"] == 7 and doc["q"].tolist() == [-1, -2, -3, -4]
    assert doc["b"].tolist() == [bool(x) for x in bits]
    (q, b), = [r[1:] for r in db.sql("SELECT id, q, b FROM c").rows]
    assert q.tolist() == [-1, -2, -3, -4] and b.tolist() == [float(x) for x in bits]
    assert db.sql("SELECT id FROM c ORDER BY q <-> '[-1,-2,-3,-4]' LIMIT 1").rows == [(1,)]
    with pytest.raises(vv.SqlError):            # a bit column's distance is <~> only
        db.sql("SELECT id FROM c ORDER BY b <-> '[1,0,1,0,1,1,0,0,0,1]' LIMIT 1")
    db.close()


def test_a_graph_takes_packed_bits_for_hamming_only():
    from varvedb.index.hnsw import HnswIndex
    bits = np.packbits(bit_rows(100, 64), axis=1)
    with pytest.raises(ValueError):
        HnswIndex(8, "l2").add(bits, np.zeros(100, np.float32), np.arange(100))
    with pytest.raises(ValueError):
        HnswIndex(8, "hamming").add(bits.view(np.int8), None, np.arange(100))
    g = HnswIndex(8, "hamming")
    g.add(bits, None, np.arange(100))
    rows, dists = g.search(bits, None, bits[5], 1)
    assert dists.tolist() == [0.0] and (bits[rows[0]] == bits[5]).all()


def test_sql_bit_columns_and_the_hamming_operator():
    db = vv.connect(":memory:")
    db.sql("CREATE TABLE items (id bigserial PRIMARY KEY, tag int, b bit(12))")
    db.sql("INSERT INTO items (tag, b) VALUES (1, '101100001111'), (2, '000000000000'), "
           "(3, '[1,0,1,1,0,0,0,0,1,1,1,0]')")
    f = db.collection("items").schema.fields["b"]
    assert (f.dtype, f.metric, f.dim) == ("bit", "hamming", 12)
    order = "ORDER BY b <~> '101100001111' LIMIT 3"
    assert db.sql(f"SELECT id, b <~> '101100001111' FROM items {order}").rows == \
        [(1, 0.0), (3, 1.0), (2, 7.0)]
    db.sql("CREATE INDEX ON items USING hnsw (b bit_hamming_ops)")
    assert db.sql(f"SELECT id, hamming_distance(b, '101100001111') FROM items {order}"
                  ).rows == [(1, 0.0), (3, 1.0), (2, 7.0)]
    assert db.collection("items").search([1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]).ids[:2] == [1, 3]
    with pytest.raises(vv.SqlError):
        db.sql("SELECT id FROM items ORDER BY b <-> '101100001111' LIMIT 1")
    with pytest.raises(vv.DimensionError):
        db.sql("INSERT INTO items (b) VALUES ('10110000111')")
    db.sql("CREATE TABLE v (id bigserial PRIMARY KEY, e vector(3))")
    with pytest.raises(vv.SqlError):
        db.sql("SELECT id FROM v ORDER BY e <~> '[1,0,1]' LIMIT 1")
    with pytest.raises(vv.SqlError):
        db.sql("CREATE INDEX ON v USING hnsw (e bit_hamming_ops)")
    db.close()
