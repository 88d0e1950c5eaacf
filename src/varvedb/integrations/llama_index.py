"""LlamaIndex's `BasePydanticVectorStore` over a varvedb collection (extra:
`varvedb[llamaindex]`).

    from varvedb.integrations.llama_index import VarveEmbedding, VarveVectorStore
    store = VarveVectorStore(path="rag.varve")            # or db=vv.Client(url)
    index = VectorStoreIndex.from_documents(docs, storage_context=
        StorageContext.from_defaults(vector_store=store), embed_model=VarveEmbedding())

The collection (default "llama_index") has string ids (the node ids) and the
fields `text` (the node's content; `fts=True` gives it a BM25 index, for the
HYBRID and TEXT_SEARCH / SPARSE modes, which match any word of the query's
text, `match="any"`), `metadata` (json: the node's own
metadata, as stored, which the filters read), `ref_doc_id` (hashed, for
`delete(ref_doc_id)` and `doc_ids=`), `node` (json: the rest of the node, its
relationships and templates) and `embedding`. It is made at the first `add`, in
that add's commit.

MetadataFilters map onto one `where` string whose values are $n parameters:
== != < <= > >= in nin, text_match (LIKE '%value%') and text_match_insensitive
(ILIKE), is_empty (missing, null or []), AND / OR / NOT (none of them)
nested, each MetadataFilters a level (at most
`varvedb.integrations.MAX_FILTER_DEPTH`, counted on the where). A missing key
is SQL's NULL, which no comparison matches. `any`, `all` and `contains` (array
membership) have no form in varvedb's filters and raise FilterError.

Similarities: in the default mode the distance as a relevance in [0, 1]
(higher is closer, `varvedb.integrations.relevance_fn`); BM25 in TEXT_SEARCH,
the fused reciprocal-rank score in HYBRID. Async variants run the sync ones
on a thread.
"""
from __future__ import annotations

import asyncio
from typing import Any, List, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import (BaseNode, ImageNode, IndexNode, MetadataMode, Node,
                                     TextNode)
from llama_index.core.vector_stores.types import (BasePydanticVectorStore, FilterCondition,
                                                  FilterOperator, MetadataFilter,
                                                  MetadataFilters, VectorStoreQuery,
                                                  VectorStoreQueryMode,
                                                  VectorStoreQueryResult)

from ..errors import FilterError, OptionError, SchemaError
from ..schema import brief
from . import (METADATA, TEXT, VECTOR, MetaWhere, and_where, check_descent, check_store_schema,
               create_with, embed_texts, join, negate, open_collection, query_vector,
               relevance_fn, store_schema, vector_block, within_bound)

REF, NODE = "ref_doc_id", "node"
_NODE_CLASSES = {c.class_name(): c for c in (TextNode, ImageNode, IndexNode, Node)}
_TEXT_MODES = (VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.SPARSE)
_CMP = {FilterOperator.EQ: "=", FilterOperator.NE: "<>", FilterOperator.LT: "<",
        FilterOperator.LTE: "<=", FilterOperator.GT: ">", FilterOperator.GTE: ">="}


def filters_where(filters: MetadataFilters | None, field: str = METADATA,
                  w: MetaWhere | None = None) -> tuple[str | None, list]:
    """LlamaIndex MetadataFilters as (where, params); (None, []) for none."""
    w = MetaWhere(field) if w is None else w
    if filters is None or not filters.filters:
        return None, w.params
    return within_bound(_filters(w, filters, 0)), w.params


def _filters(w: MetaWhere, fs: MetadataFilters, above: int) -> str:
    check_descent(above)
    parts = [_filters(w, f, above + 1) if isinstance(f, MetadataFilters) else _filter(w, f)
             for f in fs.filters]
    cond = fs.condition or FilterCondition.AND
    if cond == FilterCondition.NOT:
        return negate(join("OR", parts))
    if cond not in (FilterCondition.AND, FilterCondition.OR):
        raise FilterError(f"unknown filter condition {brief(cond)}")
    return join(cond.value.upper(), parts)


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _filter(w: MetaWhere, f: MetadataFilter) -> str:
    op, key, value = f.operator, f.key, f.value
    if op in _CMP:
        return w.cmp(key, _CMP[op], value)
    if op in (FilterOperator.IN, FilterOperator.NIN):
        return w.one_of(key, value, negated=op == FilterOperator.NIN)
    if op in (FilterOperator.TEXT_MATCH, FilterOperator.TEXT_MATCH_INSENSITIVE):
        if not isinstance(value, str):
            raise FilterError(f"text_match takes a string, got {brief(value)}")
        return w.like(key, f"%{_like_escape(value)}%",
                      icase=op == FilterOperator.TEXT_MATCH_INSENSITIVE)
    if op == FilterOperator.IS_EMPTY:
        return join("OR", [f"{w.path(key)} IS NULL", f"{w.path(key, True)} = '[]'"])
    raise FilterError(f"filter operator {op.value!r} has no varvedb form; supported: "
                      "==, !=, <, <=, >, >=, in, nin, text_match, "
                      "text_match_insensitive, is_empty")


class VarveEmbedding(BaseEmbedding):
    """A varvedb embedder as LlamaIndex's `embed_model`: "onnx" (the default, the
    all-MiniLM-L6-v2 model the `embed` extra ships; nothing downloaded), or any
    spec `vv.embed.resolve` takes. Rows come back L2-normalized; a batch is
    embedded in one call (length-sorted, as the writers embed)."""
    spec: str = Field(default="onnx", description="a vv.embed.resolve spec")
    _embedder: Any = PrivateAttr()

    def __init__(self, spec: str = "onnx", **kwargs: Any):
        from ..embed import resolve
        embedder = resolve(spec)
        kwargs.setdefault("model_name", embedder.name)
        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(spec=spec, **kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "VarveEmbedding"

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return embed_texts(self._embedder, texts)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return await asyncio.to_thread(self._get_text_embedding, query)

    async def _aget_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


class VarveVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store kept in one varvedb collection.

    Give one of `collection` (embedded or remote), `db` (a `vv.Database` or
    `vv.Client`) or `path` (a file, opened here; `close()` closes it).
    `metric`, `index` (True: `vv.HNSW()`, None: exact) and `fts` apply when the
    store creates the collection."""

    stores_text: bool = True
    flat_metadata: bool = False
    collection_name: str = "llama_index"
    metric: str = "cosine"
    fts: bool = False

    _db: Any = PrivateAttr(default=None)
    _owned: Any = PrivateAttr(default=None)
    _coll: Any = PrivateAttr(default=None)
    _index: Any = PrivateAttr(default=True)

    def __init__(self, collection=None, *, db=None, path: str | None = None,
                 collection_name: str = "llama_index", metric: str = "cosine",
                 index=True, fts: bool = False):
        if sum(x is not None for x in (collection, db, path)) != 1:
            raise OptionError("give one of collection=, db= or path=")
        relevance_fn(metric)
        super().__init__(collection_name=collection.name if collection is not None
                         else collection_name, metric=metric, fts=fts)
        self._index = index
        if path is not None:
            import varvedb as vv
            db = self._owned = vv.connect(path)
        self._db = db
        if collection is not None:
            self._adopt(collection)
        else:
            self._collection()

    @classmethod
    def class_name(cls) -> str:
        return "VarveVectorStore"

    @property
    def client(self) -> Any:
        """The database (vv.Database or vv.Client) or, given one, the collection."""
        return self._db if self._db is not None else self._coll

    def _adopt(self, coll):
        check_store_schema(coll.schema, coll.name, TEXT, METADATA, VECTOR)
        for name, kind in ((REF, "text"), (NODE, "json")):
            f = coll.schema.fields.get(name)
            if f is None or f.kind != kind:
                raise SchemaError(f"collection {coll.name!r} has no {kind} field {name!r}")
        self._coll = coll
        self.metric = coll.schema.fields[VECTOR].metric
        return coll

    def _collection(self):
        if self._coll is not None:
            return self._coll
        return open_collection(self._db, self.collection_name, self._adopt)

    def _created_with(self, dim: int, rows: list) -> None:
        import varvedb as vv
        schema = {**store_schema(dim, self.metric, self.fts, self._index, TEXT, METADATA,
                                 VECTOR), REF: vv.Text(index="hash"), NODE: vv.Json()}
        create_with(self._db, self.collection_name, schema, lambda c: c.upsert(rows),
                    lambda: rows, self._adopt)

    @property
    def collection(self):
        """The varvedb collection (None until the first add creates it)."""
        return self._collection()

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    # ---- writes -------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[str]:
        """Store the nodes (each with its embedding); a node id already stored is
        overwritten. Returns the node ids."""
        nodes = list(nodes)
        if not nodes:
            return []
        missing = [n.node_id for n in nodes if n.embedding is None]
        if missing:
            raise OptionError(f"nodes need their embedding; {len(missing)} have none "
                              f"(first: {missing[0]!r})")
        vectors = vector_block([n.embedding for n in nodes])
        rows, at = [], {}
        for n, v in zip(nodes, vectors):
            rest = n.to_dict()
            for k in ("embedding", "metadata", "text"):
                rest.pop(k, None)
            row = {"id": n.node_id, TEXT: n.get_content(metadata_mode=MetadataMode.NONE),
                   METADATA: dict(n.metadata), REF: n.ref_doc_id, NODE: rest, VECTOR: v}
            if row["id"] in at:                      # the same id twice: the last wins
                rows[at[row["id"]]] = row
            else:
                at[row["id"]] = len(rows)
                rows.append(row)
        coll = self._collection()
        if coll is None:
            self._created_with(vectors.shape[1], rows)
        else:
            coll.upsert(rows)
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of this source document."""
        coll = self._collection()
        if coll is not None:
            coll.delete(where=f"{REF} = $1", params=[ref_doc_id])

    def delete_nodes(self, node_ids: Optional[List[str]] = None,
                     filters: Optional[MetadataFilters] = None, **delete_kwargs: Any) -> None:
        """Delete the nodes with these ids and/or matching the filters (both: both
        must hold); neither deletes nothing."""
        coll = self._collection()
        if coll is None or (node_ids is None and filters is None):
            return
        where, params = self._where(filters, node_ids)
        coll.delete(where=where or "true", params=params)

    def clear(self) -> None:
        """Delete every node (the collection stays, with its history)."""
        coll = self._collection()
        if coll is not None:
            coll.delete(where="true")

    # ---- reads --------------------------------------------------------------------

    def get_nodes(self, node_ids: Optional[List[str]] = None,
                  filters: Optional[MetadataFilters] = None) -> List[BaseNode]:
        """The nodes with these ids (in that order) and/or matching the filters."""
        coll = self._collection()
        if coll is None or node_ids == []:
            return []
        where, params = self._where(filters, node_ids)
        hits = coll.find(where=where, params=params, select=[TEXT, METADATA, NODE, VECTOR])
        nodes = [self._node(h) for h in hits]
        if node_ids is not None:
            by_id = {n.node_id: n for n in nodes}
            nodes = [by_id[i] for i in node_ids if i in by_id]
        return nodes

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """DEFAULT (vector), HYBRID (vector and BM25 fused; `alpha` weighs the
        vector leg, 1 - alpha the text one), TEXT_SEARCH / SPARSE (BM25 alone;
        both text modes match any word of query_str, `match="all"` in kwargs
        requires every one);
        filters, doc_ids and node_ids restrict each; node_ids=[] restricts
        nothing."""
        coll = self._collection()
        if coll is None:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        mode = query.mode
        # VectorStoreIndex's retriever passes its index struct's node ids on every
        # query: [] for a store that keeps the text (stores_text), meaning all nodes
        where, params = self._where(query.filters, query.node_ids or None)
        if query.doc_ids is not None:
            refs = ", ".join(f"${len(params) + k + 1}" for k in range(len(query.doc_ids)))
            where = and_where(where, f"{REF} IN ({refs})" if refs else "false")
            params = params + list(query.doc_ids)
        args = dict(where=where, params=params, select=[TEXT, METADATA, NODE])
        k = query.similarity_top_k
        if mode == VectorStoreQueryMode.DEFAULT:
            args["vector"] = self._query_vector(query)
        elif mode == VectorStoreQueryMode.HYBRID:
            args.update(vector=self._query_vector(query), text=self._query_text(query),
                        match=kwargs.pop("match", "any"))
            k = query.hybrid_top_k or k
            if query.alpha is not None:
                args["weights"] = (1.0 - query.alpha, query.alpha)
        elif mode in _TEXT_MODES:
            args.update(text=self._query_text(query), match=kwargs.pop("match", "any"))
            k = query.sparse_top_k or k
        else:
            raise OptionError(f"query mode {mode.value!r} is not supported; supported: "
                              "default, hybrid, text_search, sparse")
        hits = coll.search(limit=k, **args, **kwargs)
        if mode == VectorStoreQueryMode.DEFAULT:
            rel = relevance_fn(self.metric)
            sims = [rel(h.score) for h in hits]
        else:
            sims = [h.score for h in hits]
        return VectorStoreQueryResult(nodes=[self._node(h) for h in hits], similarities=sims,
                                      ids=[h.id for h in hits])

    @staticmethod
    def _query_vector(query: VectorStoreQuery):
        if query.query_embedding is None:
            raise OptionError("this query mode needs query_embedding")
        return query_vector(query.query_embedding)

    @staticmethod
    def _query_text(query: VectorStoreQuery) -> str:
        if not query.query_str:
            raise OptionError("this query mode needs query_str (a full-text query)")
        return query.query_str

    def _where(self, filters, node_ids) -> tuple[str | None, list]:
        w = MetaWhere(METADATA)
        where, params = filters_where(filters, METADATA, w)
        if node_ids is not None:
            node_ids = list(node_ids)
            ids = ", ".join(w.param(i) for i in node_ids)
            where = and_where(where, f"id IN ({ids})" if ids else "false")
        return where, w.params

    @staticmethod
    def _node(h) -> BaseNode:
        d = dict(h[NODE] or {})
        cls = _NODE_CLASSES.get(d.pop("class_name", None), TextNode)
        d["text"], d["metadata"], d["id_"] = h[TEXT], h[METADATA] or {}, h.id
        if VECTOR in h.fields and h[VECTOR] is not None:
            d["embedding"] = np.asarray(h[VECTOR], np.float64).tolist()
        return cls.model_validate(d)

    # ---- async: the sync verbs on a thread ------------------------------------------

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[str]:
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(self, node_ids: Optional[List[str]] = None,
                            filters: Optional[MetadataFilters] = None,
                            **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

    async def aget_nodes(self, node_ids: Optional[List[str]] = None,
                         filters: Optional[MetadataFilters] = None) -> List[BaseNode]:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)
