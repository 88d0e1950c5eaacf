"""Every value is checked at the door: a bad one raises a typed VarveError and changes nothing.

Three parts. Regression tests for values that used to be stored (and broke
every later open or read) or that crashed with a builtin error; each checks
the error's type, the file's bytes (compared while the database is open,
since writes go straight to the file) and the visible state. Then a sweep of
bad (method, argument) cases generated from tables: each must raise a
VarveError subclass, and after the whole sweep the file is unchanged and a
reopen verifies. Last, values at the very edge of each limit, which are valid
and must round-trip through a reopen.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pytest

import varvedb as vv
from varvedb.query.filter import MAX_FILTER_DEPTH
from varvedb.query.plan import VectorTopK
from varvedb.schema import MAX_EF, MAX_JSON_DEPTH, MAX_VALUE_BYTES

from conftest import file_digest

UTC = dt.timezone.utc
NAN, INF = float("nan"), float("inf")
SCHEMA = {"title": "text", "tag": vv.Int(index="hash"), "meta": "json", "ts": "timestamp",
          "flag": "bool", "score": "float", "emb": vv.Vector(4, metric="l2"),
          "half": vv.Vector(2, dtype="f16")}


def _row(i: int) -> dict:
    return {"id": i, "title": f"t{i}", "tag": i % 3, "meta": {"i": i}, "flag": bool(i % 2),
            "ts": dt.datetime(2024, 1, 1 + i, tzinfo=UTC), "score": i / 2,
            "emb": [i, 0, 0, 1], "half": [1, i]}


@pytest.fixture
def loaded(db_path):
    d = vv.connect(db_path)
    docs = d.create_collection("docs", SCHEMA)
    docs.insert([_row(i) for i in range(5)] + [{"id": -2**63, "tag": 7}])
    yield d, docs, db_path
    d.close()


def _state(d, docs):
    return d.version, docs.count(), [(h.id, h.fields) for h in docs.find()]


def refused(loaded, call, exc=vv.VarveError, *words):
    """call() raises exc naming `words`; the file's bytes and the state are unchanged."""
    d, docs, path = loaded
    before_bytes, before = file_digest(path), _state(d, docs)
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), f"{w!r} not in {str(info.value)!r}"
    assert file_digest(path) == before_bytes
    assert _state(d, docs) == before
    return info.value


def _reopens(path, **counts):
    d = vv.connect(path)
    try:
        assert d.verify().ok
        for name, n in counts.items():
            assert d[name].count() == n
    finally:
        d.close()


def _deep_list(depth: int):
    """`depth` nested lists around 0, built without recursion."""
    v = 0
    for _ in range(depth):
        v = [v]
    return v


def _deep_dict(depth: int):
    v = "leaf"
    for _ in range(depth):
        v = {"a": v}
    return v


def _forced_hnsw(**params):
    """A vv.HNSW whose fields were altered past the constructor's checks."""
    h = vv.HNSW()
    for k, v in params.items():
        object.__setattr__(h, k, v)
    return h


# ---- 1. ids outside int64, and bools, are refused (they wrapped or became 1) ------------------

@pytest.mark.parametrize("make", [
    lambda docs: docs.get(2**63),
    lambda docs: docs.get(np.uint64(2**64 - 1)),
    lambda docs: docs.delete(ids=[2**63]),
    lambda docs: docs.delete(ids=np.array([2**63], np.uint64)),
    lambda docs: docs.update({"tag": 1}, ids=[2**63]),
    lambda docs: docs.history(2**63),
    lambda docs: docs.insert({"id": 2**63, "tag": 1}),
    lambda docs: docs.insert({"id": -2**63 - 1, "tag": 1}),
    lambda docs: docs.upsert({"id": np.uint64(2**64 - 1), "tag": 1}),
    lambda docs: docs.insert_arrays(id=np.array([2**64 - 1], np.uint64), tag=np.array([1])),
    lambda docs: docs.insert_arrays(id=[2**63], tag=[1]),
], ids=["get", "get-uint64", "delete", "delete-uint64-array", "update", "history", "insert",
        "insert-below", "upsert-uint64", "arrays-uint64", "arrays-list"])
def test_id_at_or_above_2_63_is_refused_not_wrapped(loaded, make):
    d, docs, path = loaded
    refused(loaded, lambda: make(docs), vv.FieldTypeError, "id")
    assert docs.get(-2**63)["tag"] == 7       # the document -2**63 is untouched
    assert docs.history(-2**63)[0]["deleted"] is None
    d.close()
    _reopens(path, docs=6)


@pytest.mark.parametrize("make", [
    lambda docs: docs.insert([{"id": True, "tag": 1}, {"id": 5, "tag": 1}]),
    lambda docs: docs.insert({"id": np.bool_(True), "tag": 1}),
    lambda docs: docs.upsert({"id": False, "tag": 1}),
    lambda docs: docs.insert_arrays(id=[True, 5], tag=[1, 1]),
    lambda docs: docs.insert_arrays(id=np.array([True, False]), tag=np.array([1, 1])),
    lambda docs: docs.get(True),
    lambda docs: docs.delete(ids=[True]),
], ids=["insert-beside-int", "insert-np-bool", "upsert", "arrays-list", "arrays-bool-array",
        "get", "delete"])
def test_bool_id_is_refused_not_read_as_1(loaded, make):
    d, docs, _ = loaded
    refused(loaded, lambda: make(docs), vv.FieldTypeError, "integers")
    assert docs.get(1)["title"] == "t1" and docs.get(5) is None


def test_numpy_int_ids_keep_the_vectorised_path(loaded):
    d, docs, path = loaded
    docs.insert_arrays(id=np.arange(100, 110, dtype=np.uint32), tag=np.arange(10))
    docs.insert_arrays(id=np.array([2**63 - 1], np.uint64), tag=np.array([1]))
    assert docs.get(109)["tag"] == 9 and docs.get(2**63 - 1)["tag"] == 1
    d.close()
    _reopens(path, docs=17)


# ---- 2. json nested too deep, or a value too large, is refused -----------------------------

@pytest.mark.parametrize("value", [
    lambda: _deep_list(MAX_JSON_DEPTH + 1), lambda: _deep_list(1000),
    lambda: _deep_dict(100_000), lambda: {"k": [_deep_dict(MAX_JSON_DEPTH)]},
], ids=["one-over", "1000", "100000-dicts", "over-inside-a-dict"])
def test_json_nested_deeper_than_max_depth_is_refused(loaded, value):
    d, docs, path = loaded
    v = value()
    refused(loaded, lambda: docs.insert({"id": 10, "meta": v}), vv.FieldTypeError,
            "meta", f"deeper than {MAX_JSON_DEPTH}")
    refused(loaded, lambda: docs.update({"meta": v}, ids=[1]), vv.FieldTypeError, "meta")
    d.close()
    _reopens(path, docs=6)     # the old failure: every later open raised RecursionError


def test_json_that_contains_itself_is_refused(loaded):
    cyclic: list = []
    cyclic.append(cyclic)
    refused(loaded, lambda: loaded[1].insert({"id": 10, "meta": cyclic}), vv.FieldTypeError,
            "deeper")


@pytest.mark.parametrize("row", [
    lambda: {"title": "x" * (MAX_VALUE_BYTES + 1)},
    lambda: {"title": "é" * (MAX_VALUE_BYTES // 2 + 1)},       # 2 bytes a character
    lambda: {"meta": "x" * (MAX_VALUE_BYTES + 1)},
    lambda: {"meta": ["x" * 1000] * (MAX_VALUE_BYTES // 1000 + 1)},
], ids=["text", "text-multibyte", "json-string", "json-list"])
def test_text_or_json_value_over_the_size_limit_is_refused(loaded, row):
    r = row()
    refused(loaded, lambda: loaded[1].insert({"id": 10, **r}), vv.FieldTypeError, "MiB")


# ---- 3. timestamps outside years 1..9999 (and NaT) are refused ------------------------------

@pytest.mark.parametrize("make", [
    lambda docs: docs.insert({"id": 10, "ts": np.datetime64("NaT")}),
    lambda docs: docs.insert({"id": 10, "ts": np.datetime64("20000-01-01")}),
    lambda docs: docs.insert({"id": 10, "ts": np.datetime64(-800_000, "D")}),
    lambda docs: docs.insert({"id": 10, "ts": dt.datetime(1, 1, 1, tzinfo=dt.timezone(
        dt.timedelta(hours=5)))}),                              # year 0 in UTC
    lambda docs: docs.insert({"id": 10, "ts": "9999-12-31T23:00:00-05:00"}),
    lambda docs: docs.update({"ts": np.datetime64("NaT")}, ids=[1]),
    lambda docs: docs.insert_arrays(id=[10, 11], ts=np.array(["NaT", "2000-01-01"], "M8[us]")),
    lambda docs: docs.insert_arrays(id=[10, 11], ts=np.array(["20000-01-01", "2000-01-01"],
                                                             "M8[D]")),
    lambda docs: docs.insert_arrays(id=[10, 11], ts=np.array([10**17, 0], "M8[D]")),
    lambda docs: docs.insert_arrays(id=[10, 11], ts=np.array([2**62, 0], "M8[s]")),
], ids=["nat", "year-20000", "year-before-1", "aware-year-0", "iso-past-9999", "update-nat",
        "arrays-nat", "arrays-year-20000", "arrays-days-overflowing-us", "arrays-seconds"])
def test_timestamp_outside_years_1_to_9999_is_refused(loaded, make):
    d, docs, path = loaded
    refused(loaded, lambda: make(docs), vv.FieldTypeError, "ts")
    assert docs.get(1)["ts"] == dt.datetime(2024, 1, 2, tzinfo=UTC)
    d.close()
    _reopens(path, docs=6)     # the old failure: every later read raised OverflowError


# ---- 4. HNSW parameters are bounded before anything commits -----------------------------------

@pytest.mark.parametrize("params", [
    {"m": 10**8}, {"m": 1}, {"m": 101}, {"m": True}, {"m": 16.0}, {"ef_construction": 0},
    {"ef_construction": 4097}, {"ef_search": 0}, {"ef_search": 10**9}, {"ef_search": "100"},
])
def test_hnsw_parameters_out_of_bounds_are_refused_before_commit(loaded, params):
    d, docs, path = loaded
    with pytest.raises(vv.SchemaError):
        vv.HNSW(**params)
    with pytest.raises(vv.SchemaError):
        vv.Vector(4, index=_forced_hnsw(**params))
    refused(loaded, lambda: docs.create_index("emb", _forced_hnsw(**params)), vv.SchemaError,
            "HNSW")
    refused(loaded, lambda: d.create_collection("other", {"v": vv.Field(
        "vector", dim=4, vector_index=_forced_hnsw(**params))}), vv.SchemaError, "HNSW")
    d.close()
    _reopens(path, docs=6)     # the old failure: m=10**8 committed, then MemoryError on open


# ---- 5. query bounds: a huge limit works, ef is bounded, find's limit is never negative ---------

@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """3 000 rows with an HNSW index: enough that a search walks the graph."""
    path = str(tmp_path_factory.mktemp("door") / "graph.varve")
    d = vv.connect(path)
    g = d.create_collection("g", {"tag": "int", "emb": vv.Vector(4, metric="l2")})
    rng = np.random.default_rng(3)
    g.insert_arrays(id=np.arange(3000), tag=np.arange(3000) % 10,
                    emb=rng.standard_normal((3000, 4)).astype(np.float32))
    g.create_index("emb", vv.HNSW(m=4, ef_construction=16))
    yield d, g, path
    d.close()


def test_graph_fixture_searches_by_walking_the_graph(graph):
    plan = graph[1].search(vector=[1, 0, 0, 0], limit=3).plan
    assert plan.find(VectorTopK).strategy == "graph"


@pytest.mark.parametrize("where,allowed", [(None, 3000), ("tag < 9", 2700)])
def test_huge_search_limit_returns_every_allowed_row(graph, where, allowed):
    d, g, _ = graph
    for limit in (10**9, 2**62):
        hits = g.search(vector=[1, 0, 0, 0], limit=limit, where=where)
        assert len(hits) == allowed and len(set(hits.ids)) == allowed
        assert list(hits.scores) == sorted(hits.scores)
    assert len(g.search(vector=[1, 0, 0, 0], limit=10**9, exact=True)) == 3000


def test_search_ef_at_the_bound_works_and_beyond_it_is_refused(graph):
    d, g, path = graph
    assert len(g.search(vector=[1, 0, 0, 0], limit=5, ef=MAX_EF)) == 5
    before = file_digest(path)
    for ef in (MAX_EF + 1, 10**10, 0, -1, 2.0, True, "10"):
        with pytest.raises(vv.FieldTypeError, match="ef"):
            g.search(vector=[1, 0, 0, 0], ef=ef)
    assert file_digest(path) == before and g.count() == 3000


def test_planner_cuts_k_to_the_allowed_rows(graph):
    # a limit far above the allowed rows returns them, answered exactly (the
    # planner's choice past MAX_EF is tested in test_planner.py)
    d, g, _ = graph
    hits = g.search(vector=[0.5, 0.5, 0, 0], limit=10**9, where="id < 3")
    assert sorted(hits.ids) == [0, 1, 2]
    top = hits.plan.find(VectorTopK)
    assert (top.strategy, top.reason, top.allowed) == ("exact", "few rows allowed", 3)


@pytest.mark.parametrize("limit", [-1, -5, 1.5, "3", True, np.float64(2)])
def test_negative_or_non_int_find_limit_is_refused_not_dropping_a_row(loaded, limit):
    refused(loaded, lambda: loaded[1].find(limit=limit), vv.FieldTypeError, "limit")


def test_find_limit_none_means_all_and_numpy_ints_are_limits(loaded):
    docs = loaded[1]
    assert len(docs.find(limit=None)) == 6 and len(docs.find(limit=np.int64(2))) == 2
    assert len(docs.find(limit=10**12)) == 6


# ---- 6. mistakes that raised builtin errors now raise typed ones ----------------------------

@pytest.mark.parametrize("make,exc,word", [
    (lambda d, docs: docs.insert(None), vv.FieldTypeError, "rows"),
    (lambda d, docs: docs.upsert(5), vv.FieldTypeError, "rows"),
    (lambda d, docs: docs.insert_arrays(id=5, tag=5), vv.FieldTypeError, "insert_arrays"),
    (lambda d, docs: docs.insert_arrays(id=[10], tag=np.array(5)), vv.FieldTypeError, "tag"),
    (lambda d, docs: docs.insert_arrays(id=[10], tag={"a": 1}), vv.FieldTypeError, "tag"),
    (lambda d, docs: docs.insert_arrays(id=[10, 11], emb=[[1, 2, 3, 4], [1, 2]]),
     vv.DimensionError, "emb"),
    (lambda d, docs: docs.delete(ids=5), vv.FieldTypeError, "ids is a list"),
    (lambda d, docs: docs.update({"tag": 1}, ids=7), vv.FieldTypeError, "ids is a list"),
    (lambda d, docs: docs.find(where=["tag = 1"]), vv.FilterError, "filter"),
    (lambda d, docs: docs.delete(where={"tag": 1}), vv.FilterError, "filter"),
    (lambda d, docs: docs.count("tag = $1", params=None), vv.FilterError, "params"),
    (lambda d, docs: docs.count("tag = $1", params=5), vv.FilterError, "params"),
    (lambda d, docs: docs.find("NOT " * 3000 + "flag"), vv.FilterError, "nested"),
    (lambda d, docs: docs.get(1, as_of=dt.datetime(2999, 1, 1)), vv.OptionError,
     "timezone-aware"),
    (lambda d, docs: docs.count(as_of="2024-01-01"), vv.OptionError, "as_of"),
    (lambda d, docs: docs.count(as_of=1.5), vv.OptionError, "as_of"),
    (lambda d, docs: docs.find(as_of=np.datetime64("2024-01-01")), vv.OptionError, "as_of"),
    (lambda d, docs: docs.find(select=5), vv.FieldTypeError, "select"),
    (lambda d, docs: docs.find(select=[["title"]]), vv.FieldTypeError, "select"),
    (lambda d, docs: docs.search(vector=[10**400, 0, 0, 0], field="emb"), vv.FieldTypeError,
     "numeric"),
    (lambda d, docs: d.collection(["docs"]), vv.NotFoundError, "str"),
    (lambda d, docs: d.verify(anchor="x"), vv.OptionError, "anchor"),
    (lambda d, docs: docs.upsert({"id": 1, "tag": 2}, merge=1), vv.OptionError, "merge"),
    (lambda d, docs: docs.replace(5), vv.FieldTypeError, "rows"),
    (lambda d, docs: docs.get(ids=5), vv.FieldTypeError, "ids is a list"),
    (lambda d, docs: docs.get(ids=[1.5]), vv.FieldTypeError, "id"),
    (lambda d, docs: docs.get(ids=["1"]), vv.FieldTypeError, "integers"),
    (lambda d, docs: docs.get(1, ids=[1]), vv.FieldTypeError, "get(id)"),
    (lambda d, docs: docs.get(ids=[1], offset=-1), vv.FieldTypeError, "offset"),
    (lambda d, docs: docs.find(offset="1"), vv.FieldTypeError, "offset"),
    (lambda d, docs: d.create_collection("docs", SCHEMA, exist_ok="yes"), vv.OptionError,
     "exist_ok"),
    (lambda d, docs: d.create_collection("docs", {"title": "int"}, exist_ok=True),
     vv.SchemaError, "'title'"),
], ids=["insert-none", "upsert-int", "arrays-scalar-id", "arrays-0d", "arrays-dict",
        "arrays-ragged-vectors", "delete-scalar-ids", "update-scalar-ids", "where-list",
        "where-dict", "params-none", "params-int", "where-deep", "as-of-naive", "as-of-str",
        "as-of-float", "as-of-datetime64", "select-int", "select-nested", "query-vector-huge-int",
        "collection-list", "verify-anchor", "upsert-merge-int", "replace-int", "get-ids-int",
        "get-ids-float", "get-ids-text", "get-id-and-ids", "get-offset-negative",
        "find-offset-str", "exist-ok-str", "exist-ok-other-schema"])
def test_mistake_that_raised_a_builtin_error_raises_a_typed_one(loaded, make, exc, word):
    d, docs, _ = loaded
    err = refused(loaded, lambda: make(d, docs), exc, word)
    assert type(err) is exc


def test_naive_as_of_is_refused_and_aware_and_version_as_of_still_work(loaded):
    d, docs, _ = loaded
    now = dt.datetime.now(UTC)
    assert docs.get(1, as_of=now)["tag"] == 1 and docs.count(as_of=d.version) == 6
    assert docs.count(as_of=np.int64(d.version)) == 6
    with pytest.raises(vv.OptionError, match="timezone-aware"):
        docs.get(1, as_of=now.replace(tzinfo=None))
    with pytest.raises(vv.VersionNotFoundError):      # a version that does not exist
        docs.count(as_of=d.version + 1)


def test_text_ids_given_as_one_string_are_refused_not_split_into_characters(db_path):
    d = vv.connect(db_path)
    named = d.create_collection("named", {"id": "text", "tag": "int"})
    named.insert([{"id": k, "tag": 1} for k in ("a", "b", "c", "abc")])
    loaded = (d, named, db_path)
    refused(loaded, lambda: named.delete(ids="abc"), vv.FieldTypeError, "ids is a list")
    refused(loaded, lambda: named.update({"tag": 2}, ids="ab"), vv.FieldTypeError, "ids")
    assert named.count() == 4
    d.close()


def test_numpy_strings_and_floats_are_stored_or_refused_never_crash_the_write(db_path):
    # msgpack encodes no numpy scalar: a str_ text value or a float64 in json made
    # the encoder raise TypeError from inside the write.
    d = vv.connect(db_path)
    named = d.create_collection("named", {"id": "text", "title": "text", "meta": "json"})
    named.insert_arrays(id=np.array(["a", "b"]), title=np.array(["x", "y"]),
                        meta=np.array([1.5, 2.5]))
    named.insert({"id": np.str_("c"), "title": np.str_("z")})
    loaded = (d, named, db_path)
    refused(loaded, lambda: named.insert({"id": "d", "meta": np.float64(1.5)}),
            vv.FieldTypeError, "meta")
    refused(loaded, lambda: named.insert({"id": "d", "meta": {"k": [np.int64(1)]}}),
            vv.FieldTypeError, "meta")
    d.close()
    d = vv.connect(db_path)
    assert d["named"].get("a") == {"id": "a", "title": "x", "meta": 1.5}
    assert d["named"].get("c")["title"] == "z" and d.verify().ok
    d.close()


@pytest.mark.parametrize("make", [
    lambda: vv.Field("blob"), lambda: vv.Field(5), lambda: vv.Field("json", index="sorted"),
    lambda: vv.Field("bool", index="hash"), lambda: vv.Field("int", index="btree"),
    lambda: vv.Field("int", fts=True), lambda: vv.Field("text", fts="yes"),
    lambda: vv.Field("int", dim=3), lambda: vv.Field("int", vector_index=vv.HNSW()),
    lambda: vv.Field("vector"), lambda: vv.Field("vector", dim=4, metric="hamming"),
    lambda: vv.Field("vector", dim=4, dtype="f64"), lambda: vv.Field("vector", dim=4, dtype=[]),
    lambda: vv.Field("vector", dim=4, index="hash"), lambda: vv.Int(index="btree"),
    lambda: vv.Text(index="fulltext"), lambda: vv.Vector(4, index="hnsw"),
], ids=["unknown-kind", "int-kind", "json-sorted", "bool-hash", "btree", "fts-on-int",
        "fts-not-bool", "dim-on-int", "hnsw-on-int", "vector-no-dim", "metric", "dtype",
        "dtype-list", "vector-scalar-index", "Int-btree", "Text-index", "Vector-index-str"])
def test_field_spec_that_no_column_serves_is_a_schema_error(loaded, make):
    d, docs, _ = loaded
    with pytest.raises(vv.SchemaError):
        make()
    refused(loaded, lambda: d.create_collection("other", {"f": make()}), vv.SchemaError)


def test_field_helpers_still_build_valid_fields():
    assert vv.Text(fts=True).fts is True and vv.Int(index="sorted").index == "sorted"
    assert vv.Timestamp(index="hash").kind == "timestamp" and vv.Json().kind == "json"
    assert vv.Vector(np.int64(8), index=vv.HNSW(m=np.int64(8))).vector_index.m == 8
    assert vv.Field.from_dict(vv.Vector(4, index=vv.HNSW(m=100)).to_dict()).vector_index.m == 100


# ---- the sweep: junk at every argument of every public method -----------------------------------

class Lazy:
    """A junk value built when its case runs (large ones are not kept at collection)."""

    def __init__(self, make, label):
        self.make, self.label = make, label

    def __repr__(self):
        return self.label


def _forced(**params):
    return Lazy(lambda: _forced_hnsw(**params), f"forced{params}")


PLUS5 = dt.timezone(dt.timedelta(hours=5))
BIG_TEXT = Lazy(lambda: "x" * (MAX_VALUE_BYTES + 1), "big-text")
BIG_JSON = Lazy(lambda: ["x" * 1000] * (MAX_VALUE_BYTES // 1000 + 1), "big-json")
DEEP = [Lazy(lambda: _deep_list(MAX_JSON_DEPTH + 1), "deep65"),
        Lazy(lambda: _deep_dict(10_000), "deep10000")]

BAD_INT_IDS = [2**63, -2**63 - 1, 2**64, 2**100, np.uint64(2**63), np.uint64(2**64 - 1), True,
               False, np.bool_(True), 1.0, 1.5, NAN, INF, "1", b"1", "\ud800", [1], (1,), {},
               np.float16(1), np.complex128(1), np.datetime64(1, "D"), np.array(5),
               np.zeros((2, 2, 2)), object(), Decimal(1)]
BAD_ID_LISTS = [None, 5, np.int64(5), "5", "", b"12", 1.5, {1: 1}, {1, 2}, frozenset(),
                np.array(5), np.zeros((2, 2), np.int64), [2**63], [np.uint64(2**64 - 1)],
                np.array([2**63], np.uint64), [True], [np.bool_(False)], np.array([True]), [1.5],
                np.array([1.5]), [[1]], [None], ["1"], np.array(["1"]), [b"1"], object(),
                range(2**63, 2**63 + 1), np.array([1 + 1j])]
BAD_TEXT_IDS = [5, True, b"x", "\ud800", ["x"], 1.5, np.int64(1), {}, np.datetime64(1, "D")]
BAD_TEXT_ID_LISTS = ["abc", b"ab", 5, [5], [None], ["\ud800"], np.array([1, 2]), {"a": 1},
                     {"a"}, [["a"]]]
BAD_WHERE = [5, 1.5, True, ["tag = 1"], ("tag = 1",), {"tag": 1}, b"tag = 1",
             np.array(["tag = 1"]), "", "   ", "tag = = 1", "tag = $2",
             "NOT " * (MAX_FILTER_DEPTH + 1) + "flag", "NOT " * 3000 + "flag",
             "(flag AND " * 1000 + "flag" + ")" * 1000, "\ud800 = 1", "tag = '\ud800'",
             "title = 5", "emb = 1", object()]
BAD_PARAMS = [  # (where, params)
    *[("tag = $1", p) for p in [None, 5, "1", b"1", {1: 1}, {1}, np.array([1]), [[1]], [{}],
                                [np.complex128(1)], [object()], ["x"], [b"1"],
                                [np.datetime64(1, "D")], [1j], [np.array(1)], [True],
                                [np.bool_(True)], [], [Decimal(1)]]],
    *[("title = $1", p) for p in [[5], [b"x"], [["x"]], [1.5]]],
    *[("ts > $1", p) for p in [[np.datetime64("NaT")], ["x"], [5],
                               [dt.datetime(1, 1, 1, tzinfo=PLUS5)],
                               [np.datetime64("20000-01-01")]]],
    *[("flag = $1", p) for p in [[1], ["true"]]],
    *[("score > $1", p) for p in [["1"], [1j]]],
    *[("title LIKE $1", p) for p in [[5], [None]]],
]
BAD_AS_OF = ["not a time", "2024-01-01T00:00:00+00:00", 1.5, NAN, True, np.bool_(True),
             dt.datetime(2024, 1, 1), np.datetime64("2024-01-01"), -1, 2**70,
             np.uint64(2**64 - 1), 10**6, b"", [], {}, dt.date(2024, 1, 1),
             dt.time(1, tzinfo=UTC), dt.timedelta(1), object(), np.float16(1)]
BAD_LIMITS = [-1, -2**70, 1.5, NAN, INF, "10", True, np.bool_(True), [], [1], np.float16(1),
              np.array(5), b"1", 1j]
BAD_EF = [0, -1, MAX_EF + 1, 10**10, 2**70, 1.5, NAN, True, "10", [], np.float16(4), np.array(5)]
BAD_SELECT = ["title", 5, [5], [["title"]], {"title"}, ["nope"], [None], b"title", [b"title"],
              {"title": 1}]
BAD_FIELD = [5, ["emb"], "nope", "title", None, b"emb", ("emb",)]
BAD_VECTORS = ["abcd", b"abcd", 5, [1, 2, 3], [1, 2, 3, 4, 5], [[1, 2, 3, 4]], [NAN, 0, 0, 0],
               [INF, 0, 0, 0], [1e300, 0, 0, 0], [10**400, 0, 0, 0], ["a", "b", "c", "d"],
               [None] * 4, [1, [2], 3, 4], {}, np.zeros(4, complex), np.zeros((2, 2)),
               np.zeros((1, 4)), np.array(5), np.zeros((2, 2, 2)), np.zeros(4, "M8[D]"),
               np.zeros(4, object), np.full(4, np.nan), np.full(4, 1e300)]
BAD_EXACT = ["yes", 1, 0, None, [], 1.5, "False"]
BAD_ROWS = [None, 5, "abc", b"abc", 1.5, [5], [None], [[{"id": 100}]], [{"id": 100}, 5],
            object(), {1: 2}, {"nope": 1}, {None: 1}, {"id": 100, "emb": [1, 2, 3]},
            np.array([1, 2]), {"id": 0}]   # id 0 exists: DuplicateIdError on insert
BAD_VALUES = {
    "tag": ["3", 3.5, 3.0, True, np.bool_(True), 2**63, -2**63 - 1, np.uint64(2**63),
            np.uint64(2**64 - 1), np.float16(1), np.complex128(1), np.datetime64("NaT"), [1],
            {}, b"1", NAN, object()],
    "title": [5, b"x", {"a": 1}, ["x"], True, "\ud800", "ok \udfff", np.float16(1),
              np.datetime64(1, "D"), BIG_TEXT],
    "meta": [*DEEP, {1: "a"}, {"\ud800": 1}, {"k": "\udfff"}, 2**64, -2**63 - 1, NAN, INF,
             [NAN], {1, 2}, b"x", bytearray(b"x"), np.float64(1.5), np.int64(1), np.str_("x"),
             np.array([1]), np.bool_(True), object(), complex(1, 2), dt.datetime(2024, 1, 1),
             BIG_JSON, {"a": np.float32(1)}, Decimal("1.5")],
    "ts": [np.datetime64("NaT"), np.datetime64("NaT", "ns"), np.datetime64("20000-01-01"),
           np.datetime64(-800_000, "D"), np.datetime64(10**17, "D"),
           dt.datetime(1, 1, 1, tzinfo=PLUS5), dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(
               -dt.timedelta(hours=5))), "0001-01-01T00:00:00+05:00", "20000-01-01",
           "yesterday", 12345, 1.5, b"2024-01-01", dt.date(2024, 1, 1), dt.time(12),
           [dt.datetime(2024, 1, 1)], np.int64(5), "\ud800", np.timedelta64(1, "D")],
    "flag": [1, 0, "true", np.int64(1), 1.5, [], b"1", "\ud800"],
    "score": ["1.5", 10**400, 1j, np.complex128(1), b"1", [1.0], np.datetime64("NaT"), True,
              np.bool_(False), {}, Decimal("1.5")],
    "emb": [[1, 2, 3], [[1, 2, 3, 4]], [NAN, 0, 0, 0], [INF, 0, 0, 0], [1e300] * 4,
            ["a"] * 4, [10**400, 0, 0, 0], [None] * 4, [1, [2], 3, 4], "abcd", 5, {},
            np.zeros(4, complex), np.zeros((2, 2)), np.zeros(4, "M8[D]"), [True] * 4],
    "half": [[1e6, 0], [1, 2, 3], [NAN, 0]],
}
BAD_ARRAY_IDS = [5, "ab", b"ab", np.array(5), np.zeros((2, 2), np.int64),
                 np.array([2**63, 1], np.uint64), np.array([2**64 - 1, 1], np.uint64),
                 np.array([1.5, 2.5]), np.array([True, False]), [True, 5], [2**63, 1], [1.0, 2.0],
                 np.array(["a", "b"]), {1: 2, 3: 4}, np.array(["NaT", "NaT"], "M8[D]"),
                 np.array([1, 2], np.complex128), [None, 100], [100, 101, 102], [100],
                 np.array([100, 100]), [0, 100]]
BAD_COLUMNS = {  # for insert_arrays(id=[100, 101], <field>=...)
    "tag": [5, "ab", np.array(5), np.zeros((2, 2)), np.array([1.5, 2.5]), np.array([True, False]),
            [True, 5], np.array([2**63, 1], np.uint64), np.array([1, 2], np.float16),
            np.array([1j, 2j]), np.array(["1", "2"]), [1], [1, 2, 3], {1: 2, 3: 4}, [2**63, 1],
            np.array(["NaT", "NaT"], "M8[D]"), [1.5, 2]],
    "ts": [np.array(["NaT", "2000-01-01"], "M8[us]"), np.array(["NaT", "NaT"], "M8[ns]"),
           np.array(["20000-01-01", "2000-01-01"], "M8[D]"), np.array([10**17, 0], "M8[D]"),
           np.array([-10**17, 0], "M8[D]"), np.array([2**62, 0], "M8[s]"),
           np.array([-800_000, 0], "M8[D]").astype(">M8[D]"), np.array([1, 2]),
           np.array([1, 2], "m8[s]"), np.array([np.datetime64("NaT"), None], object),
           ["2000-01-01", "nope"], np.array([10**6, 0], "M8[Y]")],
    "title": ["ab", np.array([b"a", b"b"]), np.array([1, 2]), np.array([["a"], ["b"]]),
              ["a", 5], ["\ud800", "b"], np.array(["a", "\ud800"])],
    "meta": [np.array([1.5, np.nan]), np.array([object(), 1], dtype=object), np.zeros((2, 2)),
             [{1: 2}, None], np.array([np.inf, 1.0]),
             Lazy(lambda: [_deep_list(MAX_JSON_DEPTH + 1), None], "[deep65, None]")],
    "emb": [np.zeros((2, 3)), np.zeros(2), np.zeros((2, 4), complex), np.full((2, 4), np.nan),
            [[1, 2, 3, 4], [1, 2]], np.zeros((2, 4, 1)), "ab", np.zeros((3, 4)),
            np.zeros((2, 4), object), np.full((2, 4), 1e300), np.zeros((2, 4), "M8[D]"),
            np.array(5)],
}
BAD_SET = [None, {}, [], "tag", {"id": 5}, {"nope": 1}, {5: 1}, {None: 1}, {("tag",): 1}]
BAD_INDEX = [None, "hnsw", {"m": 16}, 16, vv.Vector(4), _forced(m=10**8), _forced(m=1),
             _forced(ef_search=0), _forced(m=True), _forced(ef_construction=4097),
             _forced(m=16.0), _forced(m=np.int64(16))]
BAD_HNSW = [{"m": v} for v in (0, 1, 101, 10**8, -1, 1.5, 16.0, True, "16", None,
                               np.float16(16), [16])] + \
           [{"ef_construction": v} for v in (0, 4097, 10**9, True, 2.5, None)] + \
           [{"ef_search": v} for v in (0, -5, 4097, 10**10, False, "100", None)]
BAD_NAMES = [None, "", "1abc", "a-b", "x" * 64, 5, b"docs", "docs", "\ud800", ["docs"], "a b"]
BAD_SCHEMAS = [None, [], "int", {"id": "float"}, {"a": "blob"}, {"a": "vector(0)"},
               {"a": "vector(99999999999)"}, {5: "int"}, {"a": 5}, {"a": None}, {"a b": "int"},
               {"a": vv.HNSW()}, {"id": vv.Int()}, {"a": "json", "b": []}, {"a": ["int"]}]
BAD_COLLECTION = [None, 5, ["docs"], "nope", b"docs", {}, "named "]


def _v(x):
    return x.make() if isinstance(x, Lazy) else x


def _nested_transaction(c):
    with c.db.transaction():
        c.db.transaction().__enter__()


Q = [0, 0, 0, 0]
CALLS = [  # (label, junk values, call(ctx, value))
    ("get.id", BAD_INT_IDS + [None], lambda c, v: c.docs.get(v)),
    ("history.id", BAD_INT_IDS + [None], lambda c, v: c.docs.history(v)),
    ("insert.id", BAD_INT_IDS, lambda c, v: c.docs.insert({"id": v, "tag": 1})),
    ("upsert.id", BAD_INT_IDS[::2], lambda c, v: c.docs.upsert({"id": v, "tag": 1})),
    ("delete.ids", BAD_ID_LISTS, lambda c, v: c.docs.delete(ids=v)),
    ("update.ids", BAD_ID_LISTS[::2], lambda c, v: c.docs.update({"tag": 1}, ids=v)),
    ("named.get.id", BAD_TEXT_IDS + [None], lambda c, v: c.named.get(v)),
    ("named.insert.id", BAD_TEXT_IDS, lambda c, v: c.named.insert({"id": v, "tag": 1})),
    ("named.delete.ids", BAD_TEXT_ID_LISTS, lambda c, v: c.named.delete(ids=v)),
    ("named.arrays.id", BAD_TEXT_ID_LISTS, lambda c, v: c.named.insert_arrays(id=v)),
    ("find.where", BAD_WHERE, lambda c, v: c.docs.find(v)),
    ("count.where", BAD_WHERE, lambda c, v: c.docs.count(v)),
    ("delete.where", BAD_WHERE[::2], lambda c, v: c.docs.delete(where=v)),
    ("update.where", BAD_WHERE[1::2], lambda c, v: c.docs.update({"tag": 1}, where=v)),
    ("search.where", BAD_WHERE[::3], lambda c, v: c.docs.search(vector=Q, field="emb", where=v)),
    ("count.params", BAD_PARAMS, lambda c, v: c.docs.count(v[0], params=v[1])),
    ("find.params", BAD_PARAMS[::3], lambda c, v: c.docs.find(v[0], params=v[1])),
    ("delete.params", BAD_PARAMS[1::3], lambda c, v: c.docs.delete(where=v[0], params=v[1])),
    ("search.params", BAD_PARAMS[2::4], lambda c, v: c.docs.search(
        vector=Q, field="emb", where=v[0], params=v[1])),
    ("count.params-no-where", [None, 5, "ab"], lambda c, v: c.docs.count(params=v)),
    ("get.as_of", BAD_AS_OF, lambda c, v: c.docs.get(1, as_of=v)),
    ("count.as_of", BAD_AS_OF[::2], lambda c, v: c.docs.count(as_of=v)),
    ("find.as_of", BAD_AS_OF[1::2], lambda c, v: c.docs.find(as_of=v)),
    ("search.as_of", BAD_AS_OF[::3], lambda c, v: c.docs.search(vector=Q, field="emb", as_of=v)),
    ("find.limit", BAD_LIMITS, lambda c, v: c.docs.find(limit=v)),
    ("search.limit", BAD_LIMITS + [None], lambda c, v: c.docs.search(
        vector=Q, field="emb", limit=v)),
    ("search.ef", BAD_EF, lambda c, v: c.docs.search(vector=Q, field="emb", ef=v)),
    ("graph.search.ef", BAD_EF[:5], lambda c, v: c.graph.search(vector=Q, ef=v)),
    ("explain.ef", BAD_EF[::3], lambda c, v: c.docs.explain(vector=Q, field="emb", ef=v)),
    ("find.select", BAD_SELECT, lambda c, v: c.docs.find(select=v)),
    ("get.select", BAD_SELECT[::2], lambda c, v: c.docs.get(1, select=v)),
    ("search.select", BAD_SELECT[1::2], lambda c, v: c.docs.search(
        vector=Q, field="emb", select=v)),
    ("search.field", BAD_FIELD, lambda c, v: c.docs.search(vector=Q, field=v)),
    ("search.vector", BAD_VECTORS + [None], lambda c, v: c.docs.search(vector=v, field="emb")),
    ("explain.vector", BAD_VECTORS[::4], lambda c, v: c.docs.explain(vector=v, field="emb")),
    ("search.exact", BAD_EXACT, lambda c, v: c.docs.search(vector=Q, field="emb", exact=v)),
    ("insert.rows", BAD_ROWS, lambda c, v: c.docs.insert(v)),
    ("upsert.rows", BAD_ROWS[:-1], lambda c, v: c.docs.upsert(v)),
    *[(f"insert.{f}", vals, lambda c, v, f=f: c.docs.insert({"id": 100, f: _v(v)}))
      for f, vals in BAD_VALUES.items()],
    *[(f"upsert.{f}", vals[::2], lambda c, v, f=f: c.docs.upsert({"id": 1, f: _v(v)}))
      for f, vals in BAD_VALUES.items()],
    *[(f"update.{f}", vals[1::2], lambda c, v, f=f: c.docs.update({f: _v(v)}, ids=[1]))
      for f, vals in BAD_VALUES.items()],
    ("update.set", BAD_SET, lambda c, v: c.docs.update(v, ids=[1])),
    ("update.both-or-neither", [("tag = 1", [1]), (None, None)],
     lambda c, v: c.docs.update({"tag": 1}, where=v[0], ids=v[1])),
    ("delete.both-or-neither", [("tag = 1", [1]), (None, None)],
     lambda c, v: c.docs.delete(where=v[0], ids=v[1])),
    ("arrays.id", BAD_ARRAY_IDS, lambda c, v: c.docs.insert_arrays(id=v, tag=np.array([1, 2]))),
    *[(f"arrays.{f}", vals, lambda c, v, f=f: c.docs.insert_arrays(id=[100, 101], **{f: _v(v)}))
      for f, vals in BAD_COLUMNS.items()],
    ("arrays.shape", [{}, {"id": [100], "nope": [1]},
                      {"tag": np.array([1, 2]), "score": np.array([1.0])}],
     lambda c, v: c.docs.insert_arrays(**v)),
    ("create_index.field", [5, "nope", "tag", None, ["emb"], b"emb"],
     lambda c, v: c.docs.create_index(v, vv.HNSW())),
    ("create_index.index", BAD_INDEX, lambda c, v: c.docs.create_index("emb", _v(v))),
    ("graph.create_index.again", [vv.HNSW()], lambda c, v: c.graph.create_index("emb", v)),
    ("HNSW", BAD_HNSW, lambda c, v: vv.HNSW(**v)),
    ("Vector.index", BAD_INDEX[1:], lambda c, v: vv.Vector(4, index=_v(v))),
    ("Vector.dim", [0, -1, 65536, 4.0, True, "4", None, np.float16(4)], lambda c, v: vv.Vector(v)),
    # metric=None is the dtype's own (cosine; hamming for bit)
    ("Vector.metric-dtype", [{"metric": "hamming"}, {"metric": 5}, {"dtype": "f64"},
                             {"dtype": "bit", "metric": "cosine"}, {"dtype": "int8",
                                                                   "metric": "hamming"},
                             {"dtype": None}, {"dtype": ["f32"]}],
     lambda c, v: vv.Vector(4, **v)),
    ("create_collection.name", BAD_NAMES, lambda c, v: c.db.create_collection(v, {"a": "int"})),
    ("create_collection.schema", BAD_SCHEMAS, lambda c, v: c.db.create_collection("fresh", v)),
    ("collection.name", BAD_COLLECTION, lambda c, v: c.db.collection(v)),
    ("transaction.nested", [None], lambda c, v: _nested_transaction(c)),
    ("verify.anchor", ["x", 5, (1,), (1, 2), ("1", "ab"), [1, "ab", 3]],
     lambda c, v: c.db.verify(anchor=v)),
]
SWEEP = [(f"{label}-{i}", call, value)
         for label, values, call in CALLS for i, value in enumerate(values)]


class Ctx:
    def __init__(self, path):
        self.path = path
        self.db = vv.connect(path)
        self.docs = self.db.create_collection("docs", SCHEMA)
        self.docs.insert([_row(i) for i in range(5)])
        self.named = self.db.create_collection("named", {"id": "text", "tag": "int"})
        self.named.insert([{"id": "a", "tag": 1}, {"id": "abc", "tag": 2}])
        self.graph = self.db.create_collection("graph", {"emb": vv.Vector(4)})
        self.graph.insert_arrays(id=np.arange(2100),
                                 emb=np.random.default_rng(1).random((2100, 4), np.float32))
        self.graph.create_index("emb", vv.HNSW(m=4, ef_construction=8))
        self.digest = file_digest(path)

    def state(self):
        return (self.db.version, self.docs.count(), self.named.count(), self.graph.count(),
                [(h.id, h.fields) for h in self.docs.find()], self.named.get("abc"))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    c = Ctx(str(tmp_path_factory.mktemp("sweep") / "sweep.varve"))
    c.before = c.state()
    yield c
    c.db.close()


def test_the_sweep_has_over_300_cases():
    assert len(SWEEP) >= 300, len(SWEEP)


@pytest.mark.parametrize("label,call,value", SWEEP, ids=[s[0] for s in SWEEP])
def test_sweep_bad_argument_raises_a_varve_error(sweep, label, call, value):
    with pytest.raises(vv.VarveError):
        call(sweep, value)
    assert sweep.db.engine._tx is None
    assert file_digest(sweep.path) == sweep.digest
    assert sweep.state() == sweep.before


def test_after_the_sweep_the_file_is_unchanged_and_a_reopen_verifies(sweep):
    assert file_digest(sweep.path) == sweep.digest
    sweep.docs.upsert({"id": 1, "tag": 9})        # and the connection still writes
    sweep.db.close()
    d = vv.connect(sweep.path)
    try:
        assert d.verify().ok
        assert d["docs"].get(1)["tag"] == 9 and d["docs"].count() == 5
        assert d["named"].count() == 2 and d["graph"].count() == 2100
        assert len(d["graph"].search(vector=Q, limit=3)) == 3
    finally:
        d.close()
    sweep.db = vv.connect(sweep.path)     # for the fixture's own close


# ---- values at the edge that ARE valid ----------------------------------------------------------

TS_FIRST = dt.datetime(1, 1, 1, tzinfo=UTC)
TS_LAST = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def test_values_at_the_edge_of_every_limit_round_trip_through_a_reopen(db_path):
    d = vv.connect(db_path)
    docs = d.create_collection("docs", {"meta": "json", "ts": "timestamp", "title": "text",
                                        "emb": vv.Vector(4)})
    deep = _deep_list(MAX_JSON_DEPTH)
    deep_dict = _deep_dict(MAX_JSON_DEPTH)
    at_limit = "é" * (MAX_VALUE_BYTES // 2)
    docs.insert([{"id": -2**63, "meta": deep, "ts": TS_FIRST},
                 {"id": 2**63 - 1, "meta": deep_dict, "ts": TS_LAST},
                 {"id": 0, "ts": dt.datetime(1, 1, 1), "title": at_limit},     # naive = UTC
                 {"id": 1, "ts": np.datetime64("9999-12-31T23:59:59.999999")},
                 {"id": 2, "ts": "0001-01-01T05:00:00+05:00"}])
    docs.insert_arrays(id=np.array([3, 4, 5, 6], np.uint64),
                       ts=np.array(["0001-01-01", "9999-12-31", "0001", "9999"], "M8[D]"))
    docs.insert_arrays(id=[7, 8], ts=np.array(["0001-01-01T00:00:00.000000",
                                               "9999-12-31T23:59:59.999999"], "M8[us]"))
    docs.insert_arrays(id=[9, 10], ts=np.array(["0001", "9999"], "M8[Y]"))
    docs.insert_arrays(id=[11, 12], emb=np.eye(2, 4, dtype=np.float32))
    docs.create_index("emb", vv.HNSW(m=100, ef_construction=4096, ef_search=4096))
    small = d.create_collection("small", {"emb": vv.Vector(2, index=vv.HNSW(m=2, ef_construction=1,
                                                                             ef_search=1))})
    small.insert({"id": 1, "emb": [1, 0]})
    d.close()

    d = vv.connect(db_path)
    docs = d["docs"]
    assert d.verify().ok
    assert docs.get(-2**63)["meta"] == deep and docs.get(-2**63)["ts"] == TS_FIRST
    assert docs.get(2**63 - 1)["meta"] == deep_dict and docs.get(2**63 - 1)["ts"] == TS_LAST
    assert docs.get(0)["ts"] == TS_FIRST and docs.get(0)["title"] == at_limit
    assert docs.get(1)["ts"] == TS_LAST and docs.get(2)["ts"] == TS_FIRST
    assert [docs.get(i)["ts"].year for i in range(3, 11)] == [1, 9999, 1, 9999, 1, 9999, 1, 9999]
    assert docs.get(4)["ts"] == dt.datetime(9999, 12, 31, tzinfo=UTC)
    assert docs.find("id = $1", params=[2**63 - 1]).ids == [2**63 - 1]
    assert docs.find("ts >= $1", params=[TS_LAST]).ids == [2**63 - 1, 1, 8]
    assert docs.schema.fields["emb"].vector_index.m == 100
    assert docs.search(vector=[1, 0, 0, 0], limit=1, ef=MAX_EF).ids == [11]
    assert d["small"].search(vector=[1, 0], limit=10**9).ids == [1]
    d.close()
