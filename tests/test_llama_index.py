"""varvedb.integrations.llama_index. LlamaIndex ships no standard suite; this one
is modelled on LangChain's: an empty store, add / query / get_nodes / delete /
delete_nodes / clear round trips, every filter operator and condition, the
nesting bound, the query modes, the async variants, and LlamaIndex's own
VectorStoreIndex over the store, against an embedded file and a real server.
Also: `import varvedb` imports neither framework.
"""
from __future__ import annotations

import asyncio
import itertools
import subprocess
import zlib

import numpy as np
import pytest
import varvedb as vv
from conftest import PYTHON, child_env
from server_proc import ServerProcess
from varvedb.integrations import MAX_FILTER_DEPTH

# llama-index's names (and the integration's, which imports it), imported at the
# first one a test reads: at every pytest worker's collection they cost ~1.6 s of CPU
class _LlamaIndex:
    def __getattr__(self, name: str):
        if name.startswith("_"):        # pytest's collection asks for its markers
            raise AttributeError(name)
        from llama_index.core import Document, StorageContext, VectorStoreIndex
        from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
        from llama_index.core.vector_stores.types import (
            FilterCondition, FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery,
            VectorStoreQueryMode)

        from varvedb.integrations.llama_index import (VarveEmbedding, VarveVectorStore,
                                                      filters_where)
        vars(self).update({k: v for k, v in locals().items() if k not in ("self", "name")})
        return vars(self)[name]


li = _LlamaIndex()
TOKEN = "li-token"
_names = itertools.count()


@pytest.fixture(scope="module", params=["file", "server"])
def db(request, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("li") / "li.varve")
    if request.param == "file":
        d = vv.connect(path)
        yield d
        d.close()
    else:
        with ServerProcess(path, token=TOKEN, env=child_env()) as srv:
            c = vv.Client(srv.url, token=TOKEN, timeout=1800)
            yield c
            c.close()


@pytest.fixture
def store(db):
    s = li.VarveVectorStore(db=db, collection_name=f"li{next(_names)}", fts=True)
    yield s
    if s.collection is not None:
        db.drop_collection(s.collection_name)


META = [
    {"n": 1, "f": 1.5, "s": "alpha", "tags": ["x"], "b": True},
    {"n": 2, "f": 2.0, "s": "it's beta", "tags": []},
    {"n": 3, "s": "Gamma_1"},
    {"n": "4", "s": "100%"},
]


def _nodes():
    return [li.TextNode(text=f"node {i} {'apple' if i % 2 else 'pear'}", id_=f"n{i}",
                        metadata=META[i], embedding=[1.0, float(i), 0.0],
                        relationships={li.NodeRelationship.SOURCE: li.RelatedNodeInfo(
                            node_id=f"doc{i % 2}")})
            for i in range(len(META))]


def _f(key, value, op="=="):
    return li.MetadataFilter(key=key, value=value, operator=li.FilterOperator(op))


def _q(store, filters=None, **kw):
    kw.setdefault("query_embedding", [1.0, 0.0, 0.0])
    kw.setdefault("similarity_top_k", 10)
    if isinstance(filters, li.MetadataFilter):
        filters = li.MetadataFilters(filters=[filters])
    return store.query(li.VectorStoreQuery(filters=filters, **kw))


def test_empty_store_answers_nothing(store):
    assert _q(store).ids == [] and store.get_nodes() == []
    store.delete("doc0")
    store.delete_nodes(["n0"])
    store.clear()
    assert store.collection is None


def test_add_query_get_round_trip(store):
    nodes = _nodes()
    assert store.add(nodes) == ["n0", "n1", "n2", "n3"]
    r = _q(store, similarity_top_k=2)
    assert r.ids == ["n0", "n1"] and r.similarities[0] == pytest.approx(1.0)
    assert r.similarities[0] >= r.similarities[1] >= 0
    assert r.nodes[1].get_content() == "node 1 apple" and r.nodes[1].ref_doc_id == "doc1"
    got = store.get_nodes(["n3", "n0", "missing"])
    assert got == [nodes[3], nodes[0]]                   # every field, embedding included
    assert [type(v) for v in got[1].metadata.values()] == [int, float, str, list, bool]
    again = li.TextNode(text="replaced", id_="n0", metadata={"n": 9}, embedding=[0.0, 1.0, 0.0])
    store.add([again])
    assert store.get_nodes(["n0"])[0].get_content() == "replaced"
    assert len(store.get_nodes()) == 4


# each filter made by its test (llama-index is imported by the tests, not at collection)
FILTERS = [
    (lambda: _f("n", 1), ["n0"]),
    (lambda: _f("n", 1, "!="), ["n1", "n2", "n3"]),
    (lambda: _f("n", 2, "<"), ["n0"]),
    (lambda: _f("n", 2, "<="), ["n0", "n1"]),
    (lambda: _f("n", 2, ">"), ["n2"]),                   # "4" is a string
    (lambda: _f("n", 2, ">="), ["n1", "n2"]),
    (lambda: _f("n", [1, 3], "in"), ["n0", "n2"]),
    (lambda: _f("n", [1, 3], "nin"), ["n1", "n3"]),
    (lambda: _f("s", ["alpha", "100%"], "in"), ["n0", "n3"]),
    (lambda: _f("f", 2, "=="), ["n1"]),
    (lambda: _f("s", "it's beta"), ["n1"]),              # a quote in a value
    (lambda: _f("s", "Gamm_", "text_match"), []),        # _ is a character, not a wildcard
    (lambda: _f("s", "gamma_1", "text_match_insensitive"), ["n2"]),
    (lambda: _f("s", "0%", "text_match"), ["n3"]),
    (lambda: _f("s", "ph", "text_match"), ["n0"]),
    (lambda: _f("tags", None, "is_empty"), ["n1", "n2", "n3"]),
    (lambda: li.MetadataFilters(filters=[_f("n", 1, ">"), _f("s", "Gamma_1")]), ["n2"]),
    (lambda: li.MetadataFilters(filters=[_f("n", 1), _f("n", 3)],
                                condition=li.FilterCondition.OR), ["n0", "n2"]),
    (lambda: li.MetadataFilters(filters=[_f("n", 1), _f("n", 3)],
                                condition=li.FilterCondition.NOT),
     ["n1", "n3"]),                                      # n3's "4" is no number
    (lambda: li.MetadataFilters(filters=[_f("n", 2, ">="), li.MetadataFilters(
        filters=[_f("s", "alpha"), _f("s", "Gamma_1")], condition=li.FilterCondition.OR)]),
     ["n2"]),
]


@pytest.mark.parametrize("flt, want", FILTERS,
                         ids=[f"flt{i}-want{i}" for i in range(len(FILTERS))])
def test_filters(store, flt, want):
    flt = flt()
    store.add(_nodes())
    assert sorted(_q(store, flt).ids) == want
    if isinstance(flt, li.MetadataFilter):
        flt = li.MetadataFilters(filters=[flt])
    assert sorted(n.node_id for n in store.get_nodes(filters=flt)) == want


def test_unsupported_filters_and_modes_raise(store):
    store.add(_nodes())
    for op in ("any", "all", "contains"):
        with pytest.raises(vv.FilterError):
            _q(store, _f("tags", ["x"] if op != "contains" else "x", op))
    with pytest.raises(vv.OptionError):
        _q(store, mode=li.VectorStoreQueryMode.SVM)
    with pytest.raises(vv.OptionError):
        _q(store, mode=li.VectorStoreQueryMode.TEXT_SEARCH)          # no query_str
    with pytest.raises(vv.OptionError):
        store.add([li.TextNode(text="no vector", id_="x")])
    where, params = li.filters_where(li.MetadataFilters(filters=[_f("k'); --", "x'y")]))
    assert "x'y" not in where and params == ["x'y"] and "'k''); --'" in where


def test_doc_ids_node_ids_and_modes(store):
    store.add(_nodes())
    assert _q(store, doc_ids=["doc1"]).ids == ["n1", "n3"]
    assert _q(store, node_ids=["n2", "n3"]).ids == ["n2", "n3"]
    assert _q(store, node_ids=[]).ids == ["n0", "n1", "n2", "n3"]    # [] restricts nothing
    assert store.get_nodes([]) == []                                 # but asks for none here
    store.delete_nodes([])                                           # and deletes none
    assert len(store.get_nodes()) == 4
    text = _q(store, query_str="apple", mode=li.VectorStoreQueryMode.TEXT_SEARCH,
              query_embedding=None)
    assert sorted(text.ids) == ["n1", "n3"] and all(s > 0 for s in text.similarities)
    hybrid = _q(store, query_str="apple", mode=li.VectorStoreQueryMode.HYBRID,
                similarity_top_k=3)
    # n1 and n3 are in both legs, n0 only first in the vector one
    assert sorted(hybrid.ids[:2]) == ["n1", "n3"] and hybrid.ids[2] == "n0"
    only_text = _q(store, query_str="apple", mode=li.VectorStoreQueryMode.HYBRID, alpha=0.0,
                   similarity_top_k=2)
    assert sorted(only_text.ids) == ["n1", "n3"]


def test_text_modes_answer_a_question_by_any_of_its_words(store):
    """TEXT_SEARCH and HYBRID rank the nodes holding any word of a question (a
    question's words are not all in one node); match="all" requires every one."""
    store.add(_nodes())
    question = "which of them has an apple today?"
    text = _q(store, query_str=question, mode=li.VectorStoreQueryMode.TEXT_SEARCH,
              query_embedding=None)
    assert sorted(text.ids) == ["n1", "n3"]
    assert store.query(li.VectorStoreQuery(query_str=question, similarity_top_k=10,
                                           mode=li.VectorStoreQueryMode.TEXT_SEARCH),
                       match="all").ids == []
    hybrid = _q(store, query_str=question, mode=li.VectorStoreQueryMode.HYBRID,
                similarity_top_k=2, alpha=0.0)
    assert sorted(hybrid.ids) == ["n1", "n3"]


def _nested(levels: int, cond: li.FilterCondition):
    """`levels` MetadataFilters, each `cond` of a string comparison (one level of
    a where) and the next: a where nested levels + 1 deep, matching n2 alone."""
    f = _f("s", "Gamma_1")
    other = _f("s", "", "text_match") if cond == li.FilterCondition.AND else _f("s", "zz")
    for _ in range(levels):
        f = li.MetadataFilters(filters=[other, f], condition=cond)
    return f


@pytest.mark.parametrize("cond", ["and", "or"])
def test_deep_filters_are_bounded(store, cond):
    cond = li.FilterCondition(cond)
    store.add(_nodes())
    at_limit = _nested(MAX_FILTER_DEPTH - 1, cond)
    assert _q(store, at_limit).ids == ["n2"]
    assert [n.node_id for n in store.get_nodes(filters=at_limit)] == ["n2"]
    chain = _f("s", "Gamma_1")                  # the issue's: one filter in each, 3 000 deep
    for _ in range(3000):
        chain = li.MetadataFilters(filters=[chain], condition=cond)
    for deep in (_nested(MAX_FILTER_DEPTH, cond), chain,
                 li.MetadataFilters(filters=[chain], condition=li.FilterCondition.NOT)):
        with pytest.raises(vv.FilterError, match=f"more than {MAX_FILTER_DEPTH} levels"):
            _q(store, deep)
        with pytest.raises(vv.FilterError, match=f"more than {MAX_FILTER_DEPTH} levels"):
            store.delete_nodes(filters=deep)
    assert len(store.get_nodes()) == 4                                # nothing deleted


def test_delete_delete_nodes_clear(store):
    store.add(_nodes())
    store.delete("doc0")
    assert sorted(n.node_id for n in store.get_nodes()) == ["n1", "n3"]
    store.delete_nodes(["n1", "zz"])
    assert [n.node_id for n in store.get_nodes()] == ["n3"]
    store.add(_nodes())
    store.delete_nodes(filters=li.MetadataFilters(filters=[_f("n", 2, ">=")]))
    assert sorted(n.node_id for n in store.get_nodes()) == ["n0", "n3"]
    store.delete_nodes(["n0", "n3"], filters=li.MetadataFilters(filters=[_f("n", 1)]))
    assert [n.node_id for n in store.get_nodes()] == ["n3"]
    store.clear()
    assert store.get_nodes() == [] and _q(store).ids == []


def test_async_variants(store):
    async def main():
        assert await store.async_add(_nodes()) == ["n0", "n1", "n2", "n3"]
        r = await store.aquery(li.VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0],
                                                   similarity_top_k=1))
        assert r.ids == ["n0"]
        assert [n.node_id for n in await store.aget_nodes(["n2"])] == ["n2"]
        await store.adelete("doc1")
        await store.adelete_nodes(["n0"])
        assert [n.node_id for n in await store.aget_nodes()] == ["n2"]
        await store.aclear()
        assert await store.aget_nodes() == []
    asyncio.run(main())


def _words():
    """Words, an embedding model (made at first use: its base is llama-index's)."""
    from llama_index.core.embeddings import BaseEmbedding

    class Words(BaseEmbedding):
        """A deterministic local embedding: a bag of words, each word hashed into one
        of 64 dimensions (texts sharing words are near; no model, no network)."""

        def _get_text_embedding(self, text: str) -> list[float]:
            v = [0.0] * 64
            for word in text.lower().split():
                v[zlib.crc32(word.encode()) % 64] += 1.0
            return v

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

    return Words


def test_vector_store_index_over_the_store(store):
    # LlamaIndex's retriever passes node_ids=[] on every query (its index struct
    # lists no nodes when the store keeps the text): that must restrict nothing
    docs = [li.Document(text="the cat sat on the mat", id_="cats"),
            li.Document(text="stock markets fell sharply today", id_="stocks"),
            li.Document(text="a recipe for lemon cake with lemon zest", id_="cake")]
    index = li.VectorStoreIndex.from_documents(
        docs, storage_context=li.StorageContext.from_defaults(vector_store=store),
        embed_model=_words()())
    got = index.as_retriever(similarity_top_k=3).retrieve("lemon cake recipe")
    assert [n.node.ref_doc_id for n in got][0] == "cake" and len(got) == 3
    assert got[0].node.get_content() == "a recipe for lemon cake with lemon zest"
    assert got[0].score > got[1].score
    got = asyncio.run(index.as_retriever(similarity_top_k=1).aretrieve("stock markets"))
    assert [n.node.ref_doc_id for n in got] == ["stocks"]
    filtered = index.as_retriever(filters=li.MetadataFilters(filters=[_f("k", 1)]))
    assert filtered.retrieve("lemon cake") == []                      # filters still apply
    index.delete_ref_doc("cake")
    got = index.as_retriever(similarity_top_k=3).retrieve("lemon cake recipe")
    assert sorted(n.node.ref_doc_id for n in got) == ["cats", "stocks"]


def test_varve_embedding_is_the_packaged_model_as_llama_indexs_embed_model():
    emb = li.VarveEmbedding()
    model = vv.embed.resolve("onnx")
    texts = ["the cat sat on the mat", "stock markets fell", "lemon cake"]
    want = vv.embed.embed_batched(model, texts, progress=False)
    got = np.asarray(emb.get_text_embedding_batch(texts))       # LlamaIndex's own batching
    assert got.shape == (3, model.dim) and np.allclose(got, want, atol=1e-6)
    assert np.allclose(emb.get_query_embedding(texts[2]), want[2], atol=1e-6)
    assert np.allclose(asyncio.run(emb.aget_query_embedding(texts[0])), want[0], atol=1e-6)
    assert np.allclose(asyncio.run(emb.aget_text_embedding_batch(texts)), want, atol=1e-6)
    assert emb.get_text_embedding_batch([]) == []
    with pytest.raises(vv.EmbedderError):
        li.VarveEmbedding("no-such-embedder")


def test_a_path_store_and_an_existing_collection(tmp_path):
    s = li.VarveVectorStore(path=str(tmp_path / "own.varve"))
    s.add(_nodes()[:2])
    again = li.VarveVectorStore(collection=s.collection)
    assert [n.node_id for n in again.get_nodes()] == ["n0", "n1"]
    s.close()
    with pytest.raises(vv.OptionError):
        li.VarveVectorStore()


def test_import_varvedb_imports_no_framework():
    code = ("import sys, varvedb, varvedb.integrations\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langchain_core', 'langchain', 'llama_index', 'langchain_tests'))\n"
            "print(bad)\n")
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True,
                         env=child_env(), check=True).stdout
    assert out.strip() == "[]"


def test_a_refused_first_add_leaves_no_collection(store, db):
    """A first add that is refused (a text that is not valid Unicode, embeddings of
    different lengths) made the collection anyway, of that add's width, so every later add
    of the right width was refused; the collection and the first add's rows are
    one commit now. Embeddings of different lengths are a DimensionError (numpy's
    ValueError before)."""
    with pytest.raises(vv.FieldTypeError):
        store.add([li.TextNode(text="\ud800", id_="a", embedding=[1.0, 2.0, 3.0, 4.0])])
    assert store.collection is None and store.collection_name not in db.collections()
    with pytest.raises(vv.DimensionError, match="different lengths"):
        store.add([li.TextNode(text="a", id_="a", embedding=[1.0, 0.0]),
                   li.TextNode(text="b", id_="b", embedding=[1.0, 0.0, 0.0])])
    assert store.collection is None and store.collection_name not in db.collections()
    assert store.add(_nodes()) == ["n0", "n1", "n2", "n3"]
    with pytest.raises(vv.DimensionError, match="different lengths"):
        store.add([li.TextNode(text="a", id_="a", embedding=[1.0, 0.0, 0.0]),
                   li.TextNode(text="b", id_="b", embedding=[1.0, 0.0])])
    assert sorted(_q(store).ids) == ["n0", "n1", "n2", "n3"]


def test_varve_embedding_refuses_a_lone_surrogate():
    """Tokenizers' TypeError came through; it is the EmbedderError of any bad text."""
    emb = li.VarveEmbedding()
    for call in (lambda: emb.get_text_embedding("\ud800"),
                 lambda: emb.get_text_embedding_batch(["ok", "\ud800"])):
        with pytest.raises(vv.EmbedderError, match="not valid Unicode"):
            call()


def test_a_query_embedding_numpy_cannot_read_is_refused_typed(store):
    """Strings, or rows of several lengths, as query_embedding raised numpy's
    ValueError; the search refuses them as it refuses any (FieldTypeError)."""
    store.add(_nodes())
    for bad in (["a", "b", "c"], [[1.0, 0.0], [1.0]]):
        with pytest.raises(vv.FieldTypeError, match="query vector must be numeric"):
            _q(store, query_embedding=bad)
