"""varvedb.integrations.langchain: LangChain's own standard suite
(langchain_tests' VectorStoreIntegrationTests, sync and async, every test
enabled) against an embedded file and against a real `varvedb serve` started
here, then what the suite does not cover: filters (every operator, JSON types,
a quote in a key and a value, the nesting bound), exact metadata round trips, relevance scores per
metric, MMR, hybrid and text modes, and errors.

One file and one server per module; each standard test gets a fresh collection.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_tests.integration_tests import VectorStoreIntegrationTests

import varvedb as vv
from conftest import child_env
from server_proc import ServerProcess
from varvedb.integrations import MAX_FILTER_DEPTH, dict_where, renumber
from varvedb.integrations.langchain import VarveVectorStore

TOKEN = "lc-token"
_names = itertools.count()


@pytest.fixture(scope="module")
def file_db(tmp_path_factory):
    db = vv.connect(str(tmp_path_factory.mktemp("lc") / "lc.varve"))
    yield db
    db.close()


@pytest.fixture(scope="module")
def server_db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lcsrv") / "served.varve")
    with ServerProcess(path, token=TOKEN, env=child_env()) as srv:
        c = vv.Client(srv.url, token=TOKEN, timeout=1800)
        yield c
        c.close()


def _fresh(db, embeddings, **kw) -> VarveVectorStore:
    return VarveVectorStore(embeddings, db=db, collection_name=f"lc{next(_names)}", **kw)


def _drop(db, store) -> None:
    if store.collection is not None:
        db.drop_collection(store.collection_name)


class TestEmbeddedStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, file_db):
        store = _fresh(file_db, self.get_embeddings())
        yield store
        _drop(file_db, store)


class TestServerStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, server_db):
        store = _fresh(server_db, self.get_embeddings())
        yield store
        _drop(server_db, store)


# ---- beyond the standard suite --------------------------------------------------------

class Axis(Embeddings):
    """A text's first word is a number: its vector points at that angle (exact,
    known order); a text without one points at angle 0."""

    def embed_documents(self, texts):
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text):
        try:
            a = float(text.split()[0])
        except ValueError:
            a = 0.0
        return [math.cos(a), math.sin(a), 0.0]


META = [
    {"n": 1, "f": 1.5, "b": True, "s": "a", "tags": ["x", 1], "deep": {"k": [1, {"z": None}]}},
    {"n": 2, "f": 2.0, "b": False, "s": "it's", "k'q": "v"},
    {"n": 3, "b": 1, "s": "c"},
    {"s": "true", "n": "4"},
    {},
]


@pytest.fixture(scope="module", params=["file", "server"])
def axis_store(request, file_db, server_db):
    db = file_db if request.param == "file" else server_db
    store = VarveVectorStore(Axis(), db=db, collection_name=f"axis_{request.param}",
                             fts=True)
    texts = [f"{i / 10:.1f} word{i} common" for i in range(len(META))]
    store.add_texts(texts, META, ids=[f"d{i}" for i in range(len(META))])
    yield store
    db.drop_collection(store.collection_name)


def _ids(store, **kw):
    return sorted(d.id for d in store.similarity_search("0", k=10, **kw))


def test_metadata_round_trips_exactly(axis_store):
    docs = axis_store.get_by_ids([f"d{i}" for i in range(len(META))])
    assert [d.metadata for d in docs] == META
    for d, m in zip(docs, META):
        for k, v in m.items():       # 2.0 stays a float, 1 an int, True a bool
            assert type(d.metadata[k]) is type(v)


@pytest.mark.parametrize("flt, want", [
    ({"n": 1}, ["d0"]),
    ({"n": {"$eq": 1}}, ["d0"]),
    ({"n": {"$ne": 1}}, ["d1", "d2", "d3"]),       # a missing key matches nothing
    ({"n": {"$lt": 2}}, ["d0"]),
    ({"n": {"$lte": 2}}, ["d0", "d1"]),
    ({"n": {"$gt": 1}}, ["d1", "d2"]),            # "4" is a string, not a number
    ({"n": {"$gte": 2}}, ["d1", "d2"]),
    ({"n": {"$in": [1, 3, "4"]}}, ["d0", "d2", "d3"]),
    ({"n": {"$nin": [1, 3]}}, ["d1", "d3"]),
    ({"n": {"$between": [2, 3]}}, ["d1", "d2"]),
    ({"f": 2}, ["d1"]),                           # 2 and 2.0 are one JSON number
    ({"b": True}, ["d0"]),                        # not d2's 1, nor d3's "true"
    ({"b": 1}, ["d2"]),                           # not d0's True
    ({"b": {"$ne": True}}, ["d1", "d2"]),
    ({"s": "it's"}, ["d1"]),                      # a quote in a value
    ({"k'q": "v"}, ["d1"]),                       # and in a key
    ({"s": {"$like": "%'%"}}, ["d1"]),
    ({"s": {"$ilike": "A"}}, ["d0"]),
    ({"tags": {"$exists": True}}, ["d0"]),
    ({"tags": {"$exists": False}}, ["d1", "d2", "d3", "d4"]),
    ({"n": 1, "s": "a"}, ["d0"]),
    ({"$and": [{"n": {"$gt": 1}}, {"s": "c"}]}, ["d2"]),
    ({"$or": [{"n": 1}, {"s": "true"}]}, ["d0", "d3"]),
    ({"$not": {"s": "a"}}, ["d1", "d2", "d3"]),
    ({"s": "x' OR 1=1 --"}, []),                  # an injection is just a value
    ("metadata->>'s' = 'c'", ["d2"]),             # a varvedb where string
])
def test_filters(axis_store, flt, want):
    assert _ids(axis_store, filter=flt) == want


def test_filter_dict_and_where_together(axis_store):
    got = _ids(axis_store, filter={"n": {"$gte": 1}}, where="metadata->>'s' <> $1",
               params=["a"])
    assert got == ["d1", "d2"]
    assert renumber("a = $1 AND b = '$1' AND \"$2\" = $2", 3) == \
        "a = $4 AND b = '$1' AND \"$2\" = $5"


def test_bad_filters_raise(axis_store):
    for flt in ({"n": {"$regex": "x"}}, {"$nope": 1}, {"n": [1]}, {"n": {"$in": 1}},
                {"b": {"$gt": True}}, {"n": float("nan")}):
        with pytest.raises(vv.FilterError):
            axis_store.similarity_search("0", filter=flt)
    where, params = dict_where({"s": "x'y"})
    assert "x'y" not in where and params == ["x'y"]


def _nested(op: str, levels: int) -> dict:
    """`levels` of `op` over {"s": "c"} (a string comparison: one level of a where),
    each $and / $or beside another one-level comparison: a where levels + 1 deep."""
    f = {"s": "c"}
    for _ in range(levels):
        f = {"$and": [{"n": {"$exists": True}}, f]} if op == "$and" else \
            {"$or": [{"s": "zz"}, f]} if op == "$or" else {"$not": f}
    return f


@pytest.mark.parametrize("op, at_limit", [("$and", ["d2"]), ("$or", ["d2"]),
                                          ("$not", ["d0", "d1", "d3"])])    # 63 NOTs
def test_deep_filters_are_bounded(axis_store, op, at_limit):
    assert _ids(axis_store, filter=_nested(op, MAX_FILTER_DEPTH - 1)) == at_limit
    chain = {"s": "c"}                           # the issue's: one filter in each, 10 000 deep
    for _ in range(10_000):
        chain = {"$not": chain} if op == "$not" else {op: [chain]}
    for deep in (_nested(op, MAX_FILTER_DEPTH), _nested(op, 10_000), chain):
        with pytest.raises(vv.FilterError, match=f"more than {MAX_FILTER_DEPTH} levels"):
            axis_store.similarity_search("0", filter=deep)
        with pytest.raises(vv.FilterError, match=f"more than {MAX_FILTER_DEPTH} levels"):
            axis_store.delete(filter=deep)
    assert len(axis_store.get_by_ids([f"d{i}" for i in range(len(META))])) == len(META)


def test_nested_and_huge_filter_values_get_a_filter_error(axis_store):
    """A value too deep for repr() (a list nested 100 000 deep, as key, operator or
    operand) or too big to print whole, anywhere in a filter: FilterError with a
    message cut while it is built, never RecursionError."""
    deep, deep_key = 1, 1
    for _ in range(100_000):
        deep, deep_key = [deep], (deep_key,)
    filters = [{"k": {"$eq": deep}}, {"k": {"$in": deep}}, {"k": {"$in": [1, deep]}},
               {"k": {"$between": deep}}, {"k": deep}, {"k": {"$like": deep}},
               {"k": {"$exists": deep}}, {"$and": deep}, {"$or": [deep]}, {"$not": deep},
               {"k": {deep_key: 1}}, {deep_key: 1},
               {"k": {"$between": list(range(1_000_000))}}, {"k": {"$eq": b"x" * 10 ** 7}},
               {"k": {"$" + "z" * 10 ** 7: 1}}]
    for flt in filters:
        with pytest.raises(vv.FilterError) as e:
            dict_where(flt)
        assert len(str(e.value)) < 400, str(e.value)[:400]
        with pytest.raises(vv.FilterError):
            axis_store.similarity_search("0", filter=flt)
    assert len(axis_store.get_by_ids([f"d{i}" for i in range(len(META))])) == len(META)


def test_scores_order_and_relevance(axis_store):
    pairs = axis_store.similarity_search_with_score("0.1", k=5)
    assert [d.id for d, _ in pairs] == ["d1", "d0", "d2", "d3", "d4"]
    assert pairs[0][1] == pytest.approx(0.0, abs=1e-6)          # cosine distance
    rel = axis_store.similarity_search_with_relevance_scores("0.1", k=5)
    assert [d.id for d, _ in rel] == ["d1", "d0", "d2", "d3", "d4"]
    assert rel[0][1] == pytest.approx(1.0) and all(0 <= s <= 1 for _, s in rel)
    assert rel[1][1] == pytest.approx(1 - (1 - math.cos(0.1)) / 2, abs=1e-6)


@pytest.mark.parametrize("metric", ["cosine", "l2", "dot"])
def test_relevance_per_metric(file_db, metric):
    store = _fresh(file_db, Axis(), metric=metric, index=None)
    store.add_texts(["0", "1.5", "3.1"])
    rel = store.similarity_search_with_relevance_scores("0", k=3)
    scores = [s for _, s in rel]
    assert [d.page_content for d, _ in rel] == ["0", "1.5", "3.1"]
    assert scores[0] == pytest.approx(1.0) and scores == sorted(scores, reverse=True)
    assert all(0 <= s <= 1 for s in scores)
    _drop(file_db, store)


def test_mmr_prefers_diverse(axis_store):
    # 0.1 is nearest; 0.0 nearly duplicates it, so a diversity-weighted pick skips it
    # (the query is 0.09, not 0.1, which is as near 0.0 as 0.2: a tie either way)
    docs = axis_store.max_marginal_relevance_search("0.09", k=2, fetch_k=5, lambda_mult=0.1)
    assert docs[0].id == "d1" and docs[1].id != "d0"
    assert axis_store.max_marginal_relevance_search("0.09", k=2, fetch_k=5,
                                                    lambda_mult=1.0)[1].id == "d0"
    assert axis_store.max_marginal_relevance_search("0.1", k=2, filter={"n": 99}) == []


def test_hybrid_and_text_modes(axis_store):
    text = axis_store.similarity_search("word3", k=3, mode="text")
    assert [d.id for d in text] == ["d3"]
    hybrid = axis_store.similarity_search_with_score("word3", k=2, mode="hybrid")
    # the text leg finds d3, the vector leg (angle 0) d0 first: fused, both
    assert [d.id for d, _ in hybrid] == ["d3", "d0"] and hybrid[0][1] > hybrid[1][1] > 0
    assert [d.id for d in axis_store.similarity_search("common", k=5, mode="text",
                                                       filter={"s": "c"})] == ["d2"]
    with pytest.raises(vv.OptionError):
        axis_store.similarity_search("0", mode="fuzzy")
    with pytest.raises(vv.OptionError):
        axis_store.similarity_search_with_relevance_scores("0", mode="text")


def test_ids_generated_kept_and_last_wins(file_db):
    store = _fresh(file_db, Axis())
    ids = store.add_documents([Document("0.5", id="mine"), Document("0.6")])
    assert ids[0] == "mine" and isinstance(ids[1], str) and len(ids[1]) == 36
    assert store.add_texts(["0.7", "0.8"], [{"v": 1}, {"v": 2}], ids=["x", "x"]) == ["x", "x"]
    assert store.get_by_ids(["x"])[0].metadata == {"v": 2}
    assert [d.id for d in store.get_by_ids(["x", "nope", "mine"])] == ["x", "mine"]
    store.delete(filter={"v": 2})
    assert store.get_by_ids(["x"]) == [] and len(store.collection) == 2
    store.delete()
    assert len(store.collection) == 0
    _drop(file_db, store)


def test_from_texts_on_a_path_and_errors(tmp_path):
    emb = DeterministicFakeEmbedding(size=8)
    with VarveVectorStore.from_texts(["a", "b"], emb, metadatas=[{"i": 1}, {"i": 2}],
                                     path=str(tmp_path / "own.varve")) as store:
        assert store.similarity_search("a", k=1, filter={"i": 2})[0].page_content == "b"
        with pytest.raises(vv.OptionError):
            store.add_texts(["c"], [{"i": 3}, {"i": 4}])
        with pytest.raises(vv.FieldTypeError):       # metadata must be JSON
            store.add_texts(["c"], [{"when": object()}])
        assert len(store.collection) == 2               # nothing half-written
    with pytest.raises(vv.OptionError):
        VarveVectorStore(emb)
    with pytest.raises(vv.OptionError):
        VarveVectorStore(emb, path=str(tmp_path / "x.varve"), metric="hamming")
    db = vv.connect(str(tmp_path / "other.varve"))
    c = db.create_collection("plain", {"body": "text", "v": vv.Vector(8)})
    with pytest.raises(vv.SchemaError):
        VarveVectorStore(emb, collection=c)
    db.close()


def test_add_embeddings_bulk(file_db):
    store = _fresh(file_db, Axis(), index=None)
    vecs = np.random.default_rng(0).standard_normal((300, 3)).astype(np.float32)
    ids = store.add_embeddings([str(i) for i in range(300)], vecs,
                               [{"i": i} for i in range(300)])
    assert len(ids) == len(set(ids)) == 300
    got = store.similarity_search_by_vector(vecs[7].tolist(), k=1, filter={"i": {"$lt": 10}})
    assert got[0].metadata == {"i": 7}
    _drop(file_db, store)


def test_bench_langchain_small(tmp_path):
    """The bench's code path at a tiny size (Chroma too where it is installed)."""
    from varvedb_bench import langchain as bench
    out = str(tmp_path / "lc")
    s = bench.run(out, n=60, dim=8, rounds=2, queries=4, k=5, workdir=str(tmp_path),
                  peers=bench.chroma_available(), echo=lambda *a: None)
    assert s["add_documents_s"]["varvedb"]["n"] == 2
    assert s["filtered_search_ms"]["varvedb"]["median"] > 0
    if "chroma" in s["engines"]:
        assert s["top_k_overlap"]["median"] == 1.0     # the same 5 documents (exact at 6 rows)
    md = open(out + ".md").read()
    assert "| add_documents, 60 docs, s |" in md


@pytest.mark.parametrize("which", ["file_db", "server_db"])
def test_a_refused_first_add_leaves_no_collection(request, which):
    """A store's first add that is refused (a text not a str, vectors of different
    lengths) made the collection anyway, of that add's width, so every later add
    of the right width was refused; the collection and the first add's rows are
    one commit now. Vectors of different lengths are a DimensionError (numpy's
    ValueError before), on an existing collection too."""
    db = request.getfixturevalue(which)
    store = _fresh(db, Axis(), index=None)
    with pytest.raises(vv.FieldTypeError):
        store.add_embeddings([5], [[1.0, 2.0, 3.0, 4.0]])     # a text that is not a str
    assert store.collection is None and store.collection_name not in db.collections()
    with pytest.raises(vv.DimensionError, match="different lengths"):
        store.add_embeddings(["a", "b"], [[1.0, 0.0], [1.0, 0.0, 0.0]])
    assert store.collection is None and store.collection_name not in db.collections()
    assert store.add_texts(["0.5 x", "0.1 y"], ids=["x", "y"]) == ["x", "y"]
    with pytest.raises(vv.DimensionError, match="different lengths"):
        store.add_embeddings(["a", "b"], [[1.0, 0.0, 0.0], [1.0, 0.0]])
    assert [d.id for d in store.similarity_search("0.5", k=5)] == ["x", "y"]
    _drop(db, store)


def test_a_dict_filter_beside_a_where_of_any_string_form(file_db):
    """filter= dict plus where=: the where's $n move up past the dict's, found by
    PostgreSQL's lexer. The hand-written one read E'it\\'s' as ending at the
    backslash and renumbered a $1 inside the string (the search missed the row)."""
    store = _fresh(file_db, Axis(), index=None)
    text = "0.1 it's $1 off"
    store.add_texts([text, "0.2 other"], [{"src": "a"}, {"src": "a"}], ids=["d1", "d2"])
    for where, params in [("text = E'0.1 it\\'s $1 off'", []),
                          ("text = $q$0.1 it's $1 off$q$", []),
                          ("/* it's */ text = $1", [text]),
                          ("text = E'0.1 it\\'s $1 off' AND metadata->>'src' = $1", ["a"])]:
        assert _ids(store, where=where, params=params) == ["d1"]
        assert _ids(store, filter={"src": "a"}, where=where, params=params) == ["d1"]
    assert renumber("x = E'\\'$1' AND \"a$1\" = $$ $2 $$ AND b$1 = $1", 2) == \
        "x = E'\\'$1' AND \"a$1\" = $$ $2 $$ AND b$1 = $3"
    with pytest.raises(vv.FilterError):
        store.similarity_search("0", filter={"src": "a"}, where="text = 'open")
    _drop(file_db, store)


def test_varve_embeddings_refuse_a_str_and_a_lone_surrogate():
    """embed_documents("abc") embedded "a", "b" and "c" (the str was listed before
    it was checked); a lone surrogate raised tokenizers' TypeError."""
    from varvedb.integrations.langchain import VarveEmbeddings
    emb = VarveEmbeddings()
    with pytest.raises(vv.EmbedderError, match="not str"):
        emb.embed_documents("abc")
    for call in (lambda: emb.embed_documents(["ok", "\ud800"]), lambda: emb.embed_query("\ud800")):
        with pytest.raises(vv.EmbedderError, match="not valid Unicode"):
            call()
    assert emb.embed_documents([]) == [] and len(emb.embed_query("abc")) == 384


def test_a_first_add_inside_a_transaction_joins_it(tmp_path):
    """The first add's collection and rows join the thread's open transaction: a
    rollback takes both back, a commit keeps both (one version)."""
    with vv.connect(str(tmp_path / "t.varve")) as db:
        store = VarveVectorStore(Axis(), db=db, index=None)
        with pytest.raises(RuntimeError):
            with db.transaction():
                store.add_texts(["0.5 x"], ids=["x"])
                raise RuntimeError("rolled back")
        assert db.collections() == [] and db.version == 0
        store = VarveVectorStore(Axis(), db=db, index=None)   # (the first keeps what it made)
        with db.transaction():
            store.add_texts(["0.5 x"])
            store.add_texts(["0.1 y"], ids=["y"])
        assert db.version == 1 and len(store.collection) == 2


def test_a_query_vector_numpy_cannot_read_is_refused_typed(axis_store):
    """Strings, or rows of several lengths, as the query vector raised numpy's
    ValueError; the search refuses them as it refuses any (FieldTypeError)."""
    for bad in (["a", "b", "c"], [[1.0, 0.0], [1.0]]):
        with pytest.raises(vv.FieldTypeError, match="query vector must be numeric"):
            axis_store.similarity_search_by_vector(bad)
        with pytest.raises(vv.FieldTypeError, match="query vector must be numeric"):
            axis_store.max_marginal_relevance_search_by_vector(bad)
