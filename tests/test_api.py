"""The public Python API: CRUD, filters, indexes, vectors, time travel, checkpoints.

Each test states one behaviour of the contract in DESIGN.md and checks it
against values worked out by hand or by a plain numpy/Python oracle.
"""
from __future__ import annotations

import datetime as dt
import time

import numpy as np
import pytest

import varvedb as vv

from conftest import file_digest

UTC = dt.timezone.utc


def _ids(hits) -> set:
    return {h.id for h in hits}


# ---- CRUD ----------------------------------------------------------------------

def test_insert_then_get_returns_every_field_as_written(db):
    docs = db.create_collection("docs", {
        "title": "text", "tag": vv.Int(), "meta": "json", "ts": "timestamp",
        "flag": "bool", "score": "float", "emb": vv.Vector(3, metric="l2")})
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    ids = docs.insert([{"id": 7, "title": "hello", "tag": -3, "meta": {"a": [1, 2, {"b": None}]},
                        "ts": when, "flag": False, "score": 2.5, "emb": [1.0, -2.0, 0.5]}])
    assert ids == [7]
    got = docs.get(7)
    emb = got.pop("emb")
    assert got == {"id": 7, "title": "hello", "tag": -3, "meta": {"a": [1, 2, {"b": None}]},
                   "ts": when, "flag": False, "score": 2.5}
    np.testing.assert_array_equal(emb, np.array([1.0, -2.0, 0.5], np.float32))


def test_missing_fields_read_back_as_null(db):
    docs = db.create_collection("docs", {"title": "text", "tag": "int", "meta": "json",
                                         "emb": vv.Vector(2)})
    docs.insert({"id": 1})
    assert docs.get(1) == {"id": 1, "title": None, "tag": None, "meta": None, "emb": None}


def test_get_of_unknown_id_is_none(db):
    docs = db.create_collection("docs", {"title": "text"})
    docs.insert({"id": 1, "title": "a"})
    assert docs.get(2) is None


def test_insert_without_ids_assigns_fresh_increasing_ids(db):
    docs = db.create_collection("docs", {"title": "text"})
    first = docs.insert([{"title": "a"}, {"title": "b"}])
    docs.insert({"id": 100, "title": "c"})
    later = docs.insert([{"title": "d"}])
    assert len(set(first)) == 2
    assert later[0] > 100
    assert docs.get(later[0])["title"] == "d"


def test_upsert_merges_into_live_document_and_inserts_new_one(db):
    docs = db.create_collection("docs", {"title": "text", "tag": "int"})
    docs.insert([{"id": 1, "title": "a", "tag": 1}])
    docs.upsert([{"id": 1, "title": "a2"}, {"id": 2, "title": "b"}])
    assert docs.get(1) == {"id": 1, "title": "a2", "tag": 1}    # the fields not named kept
    assert docs.get(2) == {"id": 2, "title": "b", "tag": None}
    docs.replace([{"id": 1, "title": "a3"}])
    assert docs.get(1) == {"id": 1, "title": "a3", "tag": None}  # whole document replaced
    assert docs.count() == 2


def test_update_sets_fields_on_matching_rows_and_keeps_the_rest(db):
    docs = db.create_collection("docs", {"title": "text", "tag": "int", "emb": vv.Vector(2)})
    docs.insert([{"id": i, "title": f"t{i}", "tag": i % 2, "emb": [i, 1]} for i in range(6)])
    assert docs.update({"title": "odd"}, where="tag = 1") == 3
    assert docs.update({"tag": 9}, ids=[0, 99]) == 1
    for i in range(6):
        d = docs.get(i)
        assert d["title"] == ("odd" if i % 2 else f"t{i}")
        assert d["tag"] == (9 if i == 0 else i % 2)
        np.testing.assert_array_equal(d["emb"], [i, 1])
    assert docs.count() == 6


def test_delete_by_ids_and_by_filter_returns_counts(db):
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": i, "tag": i % 3} for i in range(9)])
    assert docs.delete(ids=[0, 1, 1, 50]) == 2
    assert docs.delete(where="tag = 2") == 3
    assert sorted(h.id for h in docs.find()) == [3, 4, 6, 7]
    assert docs.delete(where="tag = 2") == 0


def test_insert_arrays_matches_insert_of_the_same_rows(db):
    a = db.create_collection("a", {"tag": "int", "score": "float", "title": "text",
                                   "emb": vv.Vector(4, metric="l2")})
    b = db.create_collection("b", {"tag": "int", "score": "float", "title": "text",
                                   "emb": vv.Vector(4, metric="l2")})
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 4)).astype(np.float32)
    tags = rng.integers(0, 5, 50)
    scores = rng.random(50)
    titles = [f"w{i % 7}" for i in range(50)]
    ids = np.arange(10, 60)
    got_ids = a.insert_arrays(id=ids, tag=tags, score=scores, title=titles, emb=X)
    b.insert([{"id": int(i), "tag": int(t), "score": float(s), "title": w, "emb": x.tolist()}
              for i, t, s, w, x in zip(ids, tags, scores, titles, X)])
    assert list(got_ids) == list(range(10, 60))
    for i in ids.tolist():
        da, dbb = a.get(i), b.get(i)
        np.testing.assert_array_equal(da.pop("emb"), dbb.pop("emb"))
        assert da == dbb
    q = rng.normal(size=4)
    assert a.search(vector=q, limit=7).ids == b.search(vector=q, limit=7).ids


def test_insert_arrays_without_ids_assigns_them(db):
    docs = db.create_collection("docs", {"tag": "int"})
    ids = docs.insert_arrays(tag=np.arange(5))
    assert len(set(np.asarray(ids).tolist())) == 5
    assert sorted(docs.get(int(i))["tag"] for i in ids) == [0, 1, 2, 3, 4]


def test_find_returns_insertion_order_with_limit_and_select(db):
    docs = db.create_collection("docs", {"title": "text", "tag": "int"})
    docs.insert([{"id": i, "title": f"t{i}", "tag": i} for i in (5, 3, 9, 1)])
    hits = docs.find(limit=3, select=["tag"])
    assert hits.ids == [5, 3, 9]
    assert [h.fields for h in hits] == [{"tag": 5}, {"tag": 3}, {"tag": 9}]


def test_text_ids_insert_get_filter_and_auto_assign(db):
    docs = db.create_collection("docs", {"id": "text", "n": "int"})
    docs.insert([{"id": "alpha", "n": 1}, {"id": "beta", "n": 2}])
    auto = docs.insert({"n": 3})[0]
    assert isinstance(auto, str) and auto not in ("alpha", "beta")
    assert docs.get("beta") == {"id": "beta", "n": 2}
    assert docs.get(auto)["n"] == 3
    assert _ids(docs.find("id = 'alpha'")) == {"alpha"}
    assert _ids(docs.find("id LIKE 'be_a'")) == {"beta"}  # auto ids are 32 hex digits
    docs.delete(ids=["alpha"])
    assert docs.get("alpha") is None
    with pytest.raises(vv.FieldTypeError):
        docs.insert({"id": 5, "n": 1})


def test_memory_database_supports_the_same_api():
    d = vv.connect(":memory:")
    docs = d.create_collection("docs", {"tag": "int", "emb": vv.Vector(2, metric="l2")})
    docs.insert([{"id": 1, "tag": 1, "emb": [0, 0]}, {"id": 2, "tag": 2, "emb": [3, 4]}])
    with d.transaction():
        docs.delete(ids=[1])
        docs.upsert({"id": 3, "tag": 3, "emb": [1, 0]})
    assert d.version == 3
    assert docs.count(as_of=2) == 2
    assert docs.search(vector=[0, 0], limit=5).ids == [3, 2]
    assert d.verify().ok
    d.close()


def test_closed_database_raises_closed_error(db_path):
    d = vv.connect(db_path)
    docs = d.create_collection("docs", {"tag": "int"})
    d.close()
    with pytest.raises(vv.ClosedError):
        docs.count()
    with pytest.raises(vv.ClosedError):
        d.version


def test_collection_lookup_and_duplicate_name(db):
    db.create_collection("docs", {"tag": "int"})
    assert db.collections() == ["docs"]
    assert db["docs"].count() == 0
    with pytest.raises(vv.NotFoundError, match="nope"):
        db.collection("nope")
    with pytest.raises(vv.SchemaError, match="docs"):
        db.create_collection("docs", {"tag": "int"})


# ---- transactions ------------------------------------------------------------------

def test_transaction_makes_several_writes_one_version(db):
    docs = db.create_collection("docs", {"tag": "int"})
    v0 = db.version
    with db.transaction():
        docs.insert([{"id": 1, "tag": 1}])
        docs.insert([{"id": 2, "tag": 2}])
        docs.update({"tag": 5}, ids=[1])
        docs.delete(ids=[2])
        # the writer's own thread reads its pending writes
        assert docs.get(1)["tag"] == 5 and docs.count() == 1
    assert db.version == v0 + 1
    assert docs.count(as_of=v0) == 0
    assert docs.get(1) == {"id": 1, "tag": 5}
    assert db.history()[-1].rows_changed == 5   # 2 inserts, update = delete + insert, delete


def test_exception_in_transaction_rolls_every_write_back(db):
    docs = db.create_collection("docs", {"tag": vv.Int(index="hash"), "title": "text"})
    docs.insert([{"id": 1, "tag": 1, "title": "keep"}])
    v0 = db.version
    with pytest.raises(RuntimeError):
        with db.transaction():
            docs.insert([{"id": 2, "tag": 2, "title": "new"}])
            docs.update({"title": "changed"}, ids=[1])
            docs.delete(ids=[1])
            raise RuntimeError("abort")
    assert db.version == v0
    assert docs.get(1) == {"id": 1, "tag": 1, "title": "keep"}
    assert docs.get(2) is None
    assert docs.count("tag = 2") == 0 and docs.count("tag = 1") == 1
    docs.insert([{"id": 2, "tag": 2, "title": "again"}])
    assert docs.get(2)["title"] == "again"
    assert db.verify().ok


def test_collection_created_in_rolled_back_transaction_is_gone(db_path):
    d = vv.connect(db_path)
    with pytest.raises(KeyError):
        with d.transaction():
            d.create_collection("tmp", {"tag": "int"})
            d["tmp"].insert({"id": 1, "tag": 1})
            raise KeyError
    assert d.collections() == []
    d.create_collection("tmp", {"tag": "int"})
    d.close()
    d = vv.connect(db_path)
    assert d.collections() == ["tmp"] and d["tmp"].count() == 0
    d.close()


def test_nested_transaction_raises_transaction_error(db):
    db.create_collection("docs", {"tag": "int"})
    with db.transaction():
        with pytest.raises(vv.TransactionError):
            with db.transaction():
                pass


# ---- filters -----------------------------------------------------------------------

@pytest.fixture
def filtered(db):
    docs = db.create_collection("docs", {"title": "text", "tag": "int", "year": "int",
                                         "meta": "json", "flag": "bool", "score": "float"})
    docs.insert([
        {"id": 1, "title": "alpha", "tag": 1, "year": 2020, "meta": {"src": "x", "n": 1},
         "flag": True, "score": 0.5},
        {"id": 2, "title": "beta", "tag": 2, "year": 2021, "meta": {"src": "y"},
         "flag": False, "score": 1.5},
        {"id": 3, "year": 2022},
        {"id": 4, "title": "alphabet", "tag": 3, "meta": {"src": "x"}, "score": -1.0},
        {"id": 5, "title": "gamma", "tag": 1, "year": 2024, "meta": {"other": 1}},
    ])
    return docs


@pytest.mark.parametrize("where,expected", [
    ("tag = 1", {1, 5}),
    ("tag <> 1", {2, 4}),
    ("tag != 1", {2, 4}),
    ("tag < 2", {1, 5}),
    ("tag <= 2", {1, 2, 5}),
    ("tag > 1", {2, 4}),
    ("tag >= 3", {4}),
    ("2 < tag", {4}),
    ("tag IN (1, 3)", {1, 4, 5}),
    ("tag NOT IN (1, 3)", {2}),
    ("tag IS NULL", {3}),
    ("tag IS NOT NULL", {1, 2, 4, 5}),
    ("title LIKE 'alpha%'", {1, 4}),
    ("title LIKE '_eta'", {2}),
    ("title NOT LIKE 'alpha%'", {2, 5}),
    ("title ILIKE 'ALPHA%'", {1, 4}),
    ("title = 'gamma'", {5}),
    ("title IS NULL", {3}),
    ("NOT (tag = 1)", {2, 4}),
    ("tag = 1 AND year >= 2021", {5}),
    ("tag = 1 OR title = 'beta'", {1, 2, 5}),
    ("meta->>'src' = 'x'", {1, 4}),
    ("meta->>'src' IS NULL", {3, 5}),
    ("meta IS NULL", {3}),
    ("NOT (meta->>'src' = 'x')", {2}),
    ("flag", {1}),
    ("NOT flag", {2}),
    ("id IN (1, 2)", {1, 2}),
    ("id > 3", {4, 5}),
    ("score > 0", {1, 2}),
    ("score < 0.0", {4}),
    # SQL three-valued logic: NULL compares unknown, NOT unknown is unknown.
    ("NOT (tag = 1 OR tag IS NULL)", {2, 4}),
    ("NOT (tag = 1 AND year > 2000)", {2, 4}),
    ("NOT (tag = 2 AND year > 2030)", {1, 2, 3, 4, 5}),
    ("tag = 1 OR year > 2021", {1, 3, 5}),
    ("NOT (tag = 3 OR year = 2022)", {1, 2, 5}),
    ("tag = NULL", set()),
    ("NOT (tag = NULL)", set()),
])
def test_filter_answers_match_hand_worked_sql(filtered, where, expected):
    assert _ids(filtered.find(where)) == expected
    assert filtered.count(where) == len(expected)


def test_json_path_filter_forgets_rows_a_rollback_removed(db):
    # a path filter keeps each row's value once read; a rolled-back row's
    # slot is written anew, and the filter must read the new value
    docs = db.create_collection("docs", {"meta": "json"})
    docs.insert({"id": 1, "meta": {"src": "x", "n": 1}})
    with pytest.raises(RuntimeError):
        with db.transaction():
            docs.insert({"id": 2, "meta": {"src": "y", "n": 2}})
            assert docs.count("meta->>'src' = 'y'") == 1
            assert docs.count("meta->>'n' = '2'") == 1
            raise RuntimeError("roll back")
    docs.insert({"id": 3, "meta": {"src": "z", "n": True}})
    assert docs.count("meta->>'src' = 'y'") == 0
    assert _ids(docs.find("meta->>'src' = 'z'")) == {3}
    assert _ids(docs.find("meta->>'n' = 'true'")) == {3}
    assert _ids(docs.find("meta->>'n' = '1'")) == {1}


def test_vector_fields_filter_only_by_null_test(db):
    docs = db.create_collection("docs", {"emb": vv.Vector(2)})
    docs.insert([{"id": 1, "emb": [1, 0]}, {"id": 2}])
    assert _ids(docs.find("emb IS NULL")) == {2}
    assert _ids(docs.find("emb IS NOT NULL")) == {1}
    with pytest.raises(vv.FilterError, match="vector"):
        docs.find("emb = 1")


def test_filter_parameters_bind_by_position(filtered):
    assert _ids(filtered.find("tag = $1", params=[2])) == {2}
    assert _ids(filtered.find("title = $2 OR tag = $1", params=[3, "gamma"])) == {4, 5}
    assert _ids(filtered.find("title LIKE $1", params=["al%"])) == {1, 4}
    assert _ids(filtered.find("tag IN ($1, $2)", params=[1, 2])) == {1, 2, 5}
    with pytest.raises(vv.FilterError, match=r"\$2"):
        filtered.find("tag = $2", params=[1])


def test_update_and_delete_where_use_parameters(filtered):
    assert filtered.update({"year": 1999}, where="tag = $1", params=[1]) == 2
    assert _ids(filtered.find("year = 1999")) == {1, 5}
    assert filtered.delete(where="title LIKE $1", params=["alpha%"]) == 2
    assert _ids(filtered.find()) == {2, 3, 5}


def test_timestamp_fields_filter_by_datetime_and_iso_string(db):
    docs = db.create_collection("docs", {"ts": vv.Timestamp(index="sorted")})
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    docs.insert([{"id": i, "ts": base + dt.timedelta(days=i)} for i in range(5)])
    docs.insert({"id": 9, "ts": "2023-06-01T12:00:00+00:00"})
    assert docs.get(9)["ts"] == dt.datetime(2023, 6, 1, 12, tzinfo=UTC)
    assert _ids(docs.find("ts >= '2024-01-03'")) == {2, 3, 4}
    assert _ids(docs.find("ts < $1", params=[base])) == {9}
    naive = dt.datetime(2024, 1, 2)        # naive datetimes are UTC
    docs.insert({"id": 10, "ts": naive})
    assert docs.get(10)["ts"] == dt.datetime(2024, 1, 2, tzinfo=UTC)
    assert _ids(docs.find("ts = '2024-01-02T00:00:00Z'")) == {1, 10}


# ---- scalar indexes ----------------------------------------------------------------

_INDEX_FILTERS = ["tag = 3", "tag = -1", "tag IN (1, 4, 99)", "tag <> 2", "NOT (tag = 0)",
                  "year = 2020", "year < 2010", "year <= 2010", "year > 2030", "year >= 2030",
                  "year > 2010 AND year < 2015", "tag = 2 AND year >= 2025",
                  "tag = 1 OR year < 2002", "name = 'n3'", "name = 'missing'",
                  "tag IS NULL", "year IS NOT NULL"]


def _indexed_twins(db):
    plain = db.create_collection("plain", {"tag": "int", "year": "int", "name": "text"})
    indexed = db.create_collection("indexed", {"tag": vv.Int(index="hash"),
                                               "year": vv.Int(index="sorted"),
                                               "name": vv.Text(index="hash")})
    return plain, indexed


def _load_twins(rng, colls, n, id0):
    rows = []
    for i in range(id0, id0 + n):
        rows.append({"id": i,
                     "tag": None if rng.random() < 0.05 else int(rng.integers(0, 6)),
                     "year": None if rng.random() < 0.05 else int(rng.integers(2000, 2040)),
                     "name": f"n{int(rng.integers(0, 8))}"})
    for c in colls:
        c.insert(rows)


def _assert_twins_agree(plain, indexed, as_of=None):
    for where in _INDEX_FILTERS:
        want = plain.find(where, as_of=as_of).ids
        assert indexed.find(where, as_of=as_of).ids == want, where
        assert indexed.count(where, as_of=as_of) == len(want), where


def test_hash_and_sorted_indexes_answer_like_a_scan(db_path):
    rng = np.random.default_rng(7)
    d = vv.connect(db_path)
    plain, indexed = _indexed_twins(d)
    # enough rows, in several batches, that the index merges its delta tail
    for k in range(6):
        _load_twins(rng, (plain, indexed), 700, k * 700)
        _assert_twins_agree(plain, indexed)
    mid = d.version
    for c in (plain, indexed):
        c.update({"year": 2031}, where="tag = 4")
        c.delete(where="tag = 5")
    _assert_twins_agree(plain, indexed)
    _assert_twins_agree(plain, indexed, as_of=mid)
    d.checkpoint()
    d.close()
    d = vv.connect(db_path)
    plain, indexed = d["plain"], d["indexed"]
    _assert_twins_agree(plain, indexed)
    _load_twins(rng, (plain, indexed), 1500, 10_000)   # appends to a checkpoint-loaded index
    _assert_twins_agree(plain, indexed)
    _assert_twins_agree(plain, indexed, as_of=mid)
    with pytest.raises(ZeroDivisionError):
        with d.transaction():
            _load_twins(rng, (plain, indexed), 1500, 20_000)
            1 / 0
    _assert_twins_agree(plain, indexed)
    d.close()


# ---- vectors and scores ------------------------------------------------------------

def _pgvector_scores(metric: str, X: np.ndarray, q: np.ndarray) -> np.ndarray:
    X = X.astype(np.float64)
    q = q.astype(np.float64)
    if metric == "l2":       # <->
        return np.sqrt(((X - q) ** 2).sum(axis=1))
    if metric == "dot":      # <#>
        return -(X @ q)
    return 1.0 - (X @ q) / (np.linalg.norm(X, axis=1) * np.linalg.norm(q))   # <=>


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("metric", ["cosine", "l2", "dot"])
def test_search_scores_equal_pgvector_operators(db, metric, dtype):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 8)).astype(np.float32)
    docs = db.create_collection("docs", {"tag": "int",
                                         "emb": vv.Vector(8, metric=metric, dtype=dtype)})
    docs.insert_arrays(id=np.arange(300), tag=np.arange(300) % 4, emb=X)
    stored = X.astype(np.float16).astype(np.float32) if dtype == "f16" else X
    np.testing.assert_array_equal(docs.get(17)["emb"], stored[17])
    for _ in range(5):
        q = rng.normal(size=8).astype(np.float32)
        want = _pgvector_scores(metric, stored, q)
        hits = docs.search(vector=q, limit=10)
        order = np.argsort(want, kind="stable")[:10]
        assert hits.ids == order.tolist()
        np.testing.assert_allclose(hits.scores, want[order], rtol=1e-5, atol=1e-5)
        sub = np.flatnonzero(np.arange(300) % 4 == 1)
        hits = docs.search(vector=q, where="tag = 1", limit=10)
        order = sub[np.argsort(want[sub], kind="stable")[:10]]
        assert hits.ids == order.tolist()
        np.testing.assert_allclose(hits.scores, want[order], rtol=1e-5, atol=1e-5)


def test_cosine_distance_to_a_zero_vector_is_one(db):
    docs = db.create_collection("docs", {"emb": vv.Vector(3, metric="cosine")})
    docs.insert([{"id": 1, "emb": [0, 0, 0]}, {"id": 2, "emb": [1, 0, 0]}])
    hits = docs.search(vector=[0, 1, 0], limit=2)
    assert sorted(hits.scores.tolist()) == pytest.approx([1.0, 1.0])


def test_search_skips_rows_with_null_vectors_and_respects_limit(db):
    docs = db.create_collection("docs", {"emb": vv.Vector(2, metric="l2")})
    docs.insert([{"id": 1, "emb": [0, 0]}, {"id": 2}, {"id": 3, "emb": [1, 1]}])
    assert docs.search(vector=[0, 0], limit=10).ids == [1, 3]
    assert docs.search(vector=[0, 0], limit=1).ids == [1]
    assert docs.search(vector=[0, 0], limit=0).ids == []


def test_search_select_returns_chosen_fields(db):
    docs = db.create_collection("docs", {"title": "text", "tag": "int",
                                         "emb": vv.Vector(2, metric="l2")})
    docs.insert({"id": 1, "title": "a", "tag": 4, "emb": [0, 0]})
    hit = docs.search(vector=[0, 0], select=["tag"])[0]
    assert hit.id == 1 and hit.fields == {"tag": 4} and hit.score == 0.0


# ---- time travel and history ----------------------------------------------------------

def test_as_of_version_sees_each_past_state(db):
    docs = db.create_collection("docs", {"tag": "int", "emb": vv.Vector(2, metric="l2")})
    v_create = db.version
    docs.insert([{"id": 1, "tag": 1, "emb": [0, 0]}, {"id": 2, "tag": 2, "emb": [5, 5]}])
    v1 = db.version
    docs.update({"tag": 10}, ids=[1])
    v2 = db.version
    docs.delete(ids=[2])
    v3 = db.version
    docs.upsert({"id": 2, "tag": 20, "emb": [1, 1]})
    assert docs.count(as_of=v_create) == 0
    assert docs.get(1, as_of=v1)["tag"] == 1
    assert docs.get(1, as_of=v2)["tag"] == 10
    assert docs.get(2, as_of=v2)["tag"] == 2
    assert docs.get(2, as_of=v3) is None
    assert docs.get(2)["tag"] == 20
    assert [docs.count(as_of=v) for v in (v1, v2, v3)] == [2, 2, 1]
    assert _ids(docs.find("tag > 5", as_of=v2)) == {1}
    assert docs.search(vector=[4, 4], limit=1, as_of=v2).ids == [2]
    assert docs.search(vector=[4, 4], limit=2, as_of=v3).ids == [1]


def test_as_of_outside_history_raises_version_not_found(db):
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert({"id": 1, "tag": 1})
    with pytest.raises(vv.VersionNotFoundError):
        docs.count(as_of=db.version + 1)
    with pytest.raises(vv.VersionNotFoundError):
        docs.get(1, as_of=-1)
    with pytest.raises(vv.OptionError):     # not a version: a wrong kind of as_of
        docs.count(as_of="not a time")


def test_as_of_datetime_picks_last_version_committed_at_or_before_it(db):
    docs = db.create_collection("docs", {"tag": "int"})
    for i in range(3):
        docs.upsert({"id": 1, "tag": i})
        time.sleep(0.002)
    hist = db.history()
    assert [h.version for h in hist] == [1, 2, 3, 4]
    for h, tag in zip(hist[1:], range(3)):
        assert docs.get(1, as_of=h.timestamp)["tag"] == tag
        assert docs.get(1, as_of=h.timestamp + dt.timedelta(microseconds=1))["tag"] == tag
    assert docs.get(1, as_of=hist[1].timestamp - dt.timedelta(microseconds=1)) is None
    assert docs.count(as_of=hist[0].timestamp - dt.timedelta(days=1)) == 0
    assert docs.get(1, as_of=dt.datetime(2999, 1, 1, tzinfo=UTC))["tag"] == 2


def test_database_history_lists_every_commit_with_distinct_chain(db):
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": 1, "tag": 1}, {"id": 2, "tag": 2}])
    docs.update({"tag": 3}, where="tag = 1")
    docs.delete(ids=[2])
    hist = db.history()
    assert [h.version for h in hist] == [1, 2, 3, 4]
    assert [h.rows_changed for h in hist] == [0, 2, 2, 1]
    assert len({h.chain for h in hist}) == 4
    stamps = [h.timestamp for h in hist]
    assert stamps == sorted(stamps) and all(s.tzinfo is not None for s in stamps)
    assert db.verify().chain == hist[-1].chain
    assert db.verify(anchor=(2, hist[1].chain)).ok
    bad = db.verify(anchor=(2, hist[2].chain))
    assert not bad.ok and bad.first_break.version == 2


def test_collection_history_lists_versions_of_one_document(db):
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert({"id": 1, "tag": 1})
    v1 = db.version
    docs.update({"tag": 2}, ids=[1])
    v2 = db.version
    docs.delete(ids=[1])
    v3 = db.version
    docs.insert({"id": 1, "tag": 3})
    v4 = db.version
    h = docs.history(1)
    assert [(e["version"], e["deleted"], e["doc"]["tag"]) for e in h] == [
        (v1, v2, 1), (v2, v3, 2), (v4, None, 3)]
    assert docs.history(99) == []


# ---- checkpoints and reopen ---------------------------------------------------------------

def _snapshot(d) -> dict:
    """Everything a reader can see, at every version, as plain Python values."""
    out = {"version": d.version, "history": [(h.version, h.timestamp, h.chain, h.rows_changed)
                                             for h in d.history()]}
    for name in d.collections():
        c = d[name]
        for v in range(0, d.version + 1):
            # one get of every id a test writes (those with no document left out), not
            # forty: through vv.Client (test_client runs this) each is a request
            docs = c.get(ids=list(range(40)), as_of=v)
            out[(name, v)] = [{**x, "emb": None if x["emb"] is None else x["emb"].tolist()}
                              for x in docs]
            out[(name, v, "count")] = c.count(as_of=v)
            out[(name, v, "find")] = c.find("tag IN (1, 2) OR title LIKE 'w1%'", as_of=v).ids
            s = c.search(vector=[0.5, -1, 2, 0], limit=5, as_of=v)
            out[(name, v, "search")] = (s.ids, np.round(s.scores, 6).tolist())
    return out


def _fill(d, rng, id0):
    c = d["docs"]
    c.insert([{"id": i, "tag": int(rng.integers(0, 4)), "title": f"w{i % 13}",
               "meta": {"i": i}, "ts": dt.datetime(2024, 1, 1, tzinfo=UTC)
               + dt.timedelta(hours=i),
               "emb": rng.normal(size=4).tolist()} for i in range(id0, id0 + 10)])
    c.update({"title": "changed"}, where="tag = 3")
    c.delete(ids=[id0 + 1])


def test_checkpoint_then_reopen_shows_identical_state_at_every_version(db_path):
    rng = np.random.default_rng(11)
    d = vv.connect(db_path)
    d.create_collection("docs", {"tag": vv.Int(index="hash"), "title": "text", "meta": "json",
                                 "ts": "timestamp", "emb": vv.Vector(4, metric="l2")})
    _fill(d, rng, 0)
    d.checkpoint()
    _fill(d, rng, 10)       # commits after the checkpoint are replayed on open
    before = _snapshot(d)
    d.close()
    d = vv.connect(db_path)
    assert _snapshot(d) == before
    _fill(d, rng, 20)
    d.checkpoint()
    d.checkpoint()          # a second checkpoint at the same version is a no-op
    after = _snapshot(d)
    d.close()
    d = vv.connect(db_path)
    assert _snapshot(d) == after
    assert d.verify().ok
    d.close()


def test_reopen_without_checkpoint_replays_the_log(db_path):
    rng = np.random.default_rng(12)
    d = vv.connect(db_path)
    d.create_collection("docs", {"tag": "int", "title": "text", "meta": "json",
                                 "ts": "timestamp", "emb": vv.Vector(4, metric="l2")})
    _fill(d, rng, 0)
    _fill(d, rng, 10)
    before = _snapshot(d)
    d.close()
    d = vv.connect(db_path)
    assert _snapshot(d) == before
    d.close()


# ---- read-only connections ---------------------------------------------------------------

def test_readonly_connection_refuses_every_write_and_leaves_the_file_alone(db_path):
    d = vv.connect(db_path)
    d.create_collection("docs", {"tag": "int"}).insert({"id": 1, "tag": 1})
    d.close()
    before = file_digest(db_path)
    r = vv.connect(db_path, readonly=True)
    docs = r["docs"]
    writes = [lambda: docs.insert({"id": 2, "tag": 2}),
              lambda: docs.insert_arrays(id=[3], tag=[3]),
              lambda: docs.upsert({"id": 1, "tag": 5}),
              lambda: docs.update({"tag": 5}, ids=[1]),
              lambda: docs.delete(ids=[1]),
              lambda: r.create_collection("other", {"x": "int"}),
              lambda: r.checkpoint()]
    for w in writes:
        with pytest.raises(vv.ReadOnlyError):
            w()
    with pytest.raises(vv.ReadOnlyError):
        with r.transaction():
            pass
    assert docs.get(1) == {"id": 1, "tag": 1} and r.version == 2
    r.close()
    assert file_digest(db_path) == before


def test_readonly_connection_of_missing_file_fails_without_creating_it(tmp_path):
    path = tmp_path / "missing.varve"
    with pytest.raises((vv.VarveError, OSError)):
        vv.connect(str(path), readonly=True)
    assert not path.exists()


@pytest.mark.parametrize("durability", ["commit", "batch", "off"])
def test_every_durability_mode_keeps_commits_across_reopen(db_path, durability):
    d = vv.connect(db_path, durability=durability, batch_ms=5)
    docs = d.create_collection("docs", {"tag": "int"})
    for i in range(30):
        docs.insert({"id": i, "tag": i % 4})
        if i % 10 == 0:
            time.sleep(0.01)        # let a batch-mode timer fire between commits
    assert docs.count() == 30 and d.version == 31
    d.close()
    d = vv.connect(db_path)
    assert d.version == 31 and d["docs"].count("tag = 3") == 7
    assert d.verify().ok
    d.close()


def test_a_write_that_changes_nothing_makes_no_version(db):
    docs = db.create_collection("docs", {"n": "int"})
    v = db.version
    assert docs.insert([]) == []
    assert docs.delete(where="n = 1") == 0
    with db.transaction():
        pass
    assert db.version == v and len(db.history()) == v
    docs.insert({"n": 1})
    assert db.version == v + 1


def test_close_releases_the_write_lock_while_arrays_from_the_file_live_on(db_path):
    # A mapping of the file holds its own copy of the descriptor (and so the
    # lock) until every array over it is gone; close must not wait for that.
    d = vv.connect(db_path)
    c = d.create_collection("g", {"emb": vv.Vector(4)})
    c.insert_arrays(id=np.arange(3000), emb=np.random.default_rng(0).random((3000, 4),
                                                                            np.float32))
    c.create_index("emb", vv.HNSW())
    d.close()
    d = vv.connect(db_path)                 # the graph and arena now map the file
    kept = d["g"].table.columns["emb"].arena.frozen(3000)
    fetched = d["g"].get(7)["emb"]
    d.close()
    again = vv.connect(db_path)
    assert again["g"].count() == 3000
    np.testing.assert_array_equal(again["g"].get(7)["emb"], fetched)
    assert kept.shape == (3000, 4)          # still readable: the file never shrinks
    again.close()
