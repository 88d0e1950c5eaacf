"""LangChain's `VectorStore` over a varvedb collection (extra: `varvedb[langchain]`).

    from varvedb.integrations.langchain import VarveVectorStore
    store = VarveVectorStore(embeddings, path="rag.varve")          # or db=vv.Client(url)
    store.add_documents(docs)
    store.similarity_search("question", k=4, filter={"source": {"$in": ["a", "b"]}})

The collection (default "langchain") has string ids and three fields: `text`
(the page content; `fts=True` gives it a BM25 index, for `mode="hybrid"` and
`mode="text"`, which search the query's words with `match="any"`: a question in
plain words finds the documents holding any of them, best BM25 first; pass
`match="all"` to require every word), `metadata` (json: every key and JSON type comes back as
stored) and `embedding` (a vector of the embedder's dimension, with an HNSW
graph by default). It is created at the first write when it does not exist (in
that write's commit: a refused one leaves none),
so an empty store needs no embedding to answer.

Scores: `similarity_search_with_score` gives varvedb's score, pgvector's
distance for the collection's metric (lower is closer; BM25 or the fused score,
higher is better, in the text and hybrid modes); relevance scores map the
distance into [0, 1], higher is closer (`varvedb.integrations.relevance_fn`).

Async variants run the sync ones on a thread (LangChain's default executor),
which is what both an embedded file and `vv.Client` (one connection per
thread) want.
"""
from __future__ import annotations

import uuid
from typing import Any, Iterable, Sequence

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from ..errors import OptionError
from ..schema import brief
from . import (METADATA, TEXT, VECTOR, and_where, check_store_schema, dict_where,
               create_with, embed_texts, open_collection, query_vector, relevance_fn,
               renumber, store_schema, vector_block)

MODES = ("vector", "hybrid", "text")


class VarveEmbeddings(Embeddings):
    """A varvedb embedder as LangChain `Embeddings`: "onnx" (the default, the
    all-MiniLM-L6-v2 model the `embed` extra ships; nothing downloaded), or any
    spec `vv.embed.resolve` takes. Rows come back L2-normalized."""

    def __init__(self, spec: str = "onnx"):
        from ..embed import resolve
        self.spec = spec
        self._embedder = resolve(spec)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed_texts(self._embedder, texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
_GET_CHUNK = 1000       # ids per `id IN (...)` filter of get_by_ids


class VarveVectorStore(VectorStore):
    """A LangChain vector store kept in one varvedb collection.

    Give one of `collection` (a `db.collection(...)`, embedded or remote),
    `db` (a `vv.Database` or `vv.Client`) or `path` (a file, opened here and
    closed by `close()`); `collection_name` names the collection in `db` or
    `path`. `metric` ("cosine", "l2", "dot"), `index` (True: `vv.HNSW()`;
    None: exact scans; or a `vv.HNSW(...)` / `vv.IVFPQ(...)`) and `fts` apply
    when the store creates the collection.
    """

    def __init__(self, embedding: Embeddings, collection=None, *, db=None,
                 path: str | None = None, collection_name: str = "langchain",
                 metric: str = "cosine", index=True, fts: bool = False,
                 text_field: str = TEXT, metadata_field: str = METADATA,
                 vector_field: str = VECTOR):
        if sum(x is not None for x in (collection, db, path)) != 1:
            raise OptionError("give one of collection=, db= or path=")
        relevance_fn(metric)      # an unknown metric fails here, not at the first write
        self._embedding = embedding
        self._owned = None
        if path is not None:
            import varvedb as vv
            db = self._owned = vv.connect(path)
        self._db = db
        self.collection_name = collection.name if collection is not None else collection_name
        self.text_field, self.metadata_field, self.vector_field = (
            text_field, metadata_field, vector_field)
        self._create = dict(metric=metric, fts=fts, index=index)
        self._coll = None
        if collection is not None:
            self._adopt(collection)
        else:
            self._collection()

    # ---- the collection ---------------------------------------------------------

    def _adopt(self, coll):
        check_store_schema(coll.schema, coll.name, self.text_field, self.metadata_field,
                           self.vector_field)
        self._coll = coll
        self._metric = coll.schema.fields[self.vector_field].metric
        return coll

    def _collection(self):
        """The collection, or None while it does not exist (the first add makes it)."""
        if self._coll is not None:
            return self._coll
        return open_collection(self._db, self.collection_name, self._adopt)

    @property
    def collection(self):
        """The varvedb collection (None until the first write creates it)."""
        return self._collection()

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    def close(self) -> None:
        """Close the file if this store opened it (path=)."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> "VarveVectorStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- writes -----------------------------------------------------------------

    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *,
                  ids: list[str | None] | None = None, **kwargs: Any) -> list[str]:
        """Embed and store the texts; an id already stored is overwritten. Ids
        missing (None) are generated (uuid4). Returns the ids, in order."""
        texts = list(texts)
        if kwargs:
            raise OptionError(f"add_texts takes texts, metadatas, ids; got {sorted(kwargs)}")
        vectors = self._embedding.embed_documents(texts) if texts else []
        return self.add_embeddings(texts, vectors, metadatas, ids=ids)

    def add_embeddings(self, texts: Sequence[str], vectors, metadatas: list[dict] | None = None,
                       *, ids: list[str | None] | None = None) -> list[str]:
        """Store texts with vectors computed elsewhere ((n, dim)); as add_texts."""
        n = len(texts)
        metadatas = [{}] * n if metadatas is None else list(metadatas)
        ids = [None] * n if ids is None else list(ids)
        if not len(metadatas) == len(ids) == n:
            raise OptionError(f"{n} texts, {len(metadatas)} metadatas and {len(ids)} ids")
        if n == 0:
            return []
        vectors = vector_block(vectors, self.vector_field)
        if vectors.ndim != 2 or len(vectors) != n:
            raise OptionError(f"{n} texts need an (n, dim) array of vectors, got shape "
                              f"{vectors.shape}")
        fresh = [i is None for i in ids]
        ids = [str(uuid.uuid4()) if i is None else i for i in ids]
        for m in metadatas:
            if not isinstance(m, dict):
                raise OptionError(f"metadata is a dict, got {brief(m)}")
        t, m, v = self.text_field, self.metadata_field, self.vector_field
        if all(fresh):
            keep = range(n)

            def write(coll):    # every id new (generated): the columnar bulk path
                coll.insert_arrays(id=ids, **{t: texts, m: metadatas, v: vectors})
        else:
            last = {}
            for j, i in enumerate(ids):      # the same id twice in one call: the last wins
                last[i] = j
            keep = sorted(last.values())

            def write(coll):
                coll.upsert(rows())

        def rows():
            return [{"id": ids[j], t: texts[j], m: metadatas[j], v: vectors[j]} for j in keep]
        coll = self._collection()
        if coll is not None:
            write(coll)
            return ids
        c = self._create
        schema = store_schema(vectors.shape[1], c["metric"], c["fts"], c["index"], t, m, v)
        create_with(self._db, self.collection_name, schema, write, rows, self._adopt)
        return ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete by id (ids not stored are ignored); ids=None deletes every
        document, or those a filter= / where= matches."""
        coll = self._collection()
        if coll is None:
            return True
        if ids is not None:
            if kwargs:
                raise OptionError("delete takes ids, or a filter=/where=, not both")
            ids = list(ids)
            if ids:
                coll.delete(ids=ids)
            return True
        where, params = self._where(kwargs.pop("filter", None), kwargs.pop("where", None),
                                    kwargs.pop("params", ()))
        if kwargs:
            raise OptionError(f"delete takes ids, filter, where, params; got {sorted(kwargs)}")
        coll.delete(where=where or "true", params=params)
        return True

    # ---- reads ------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, in the order given (missing ids left out)."""
        coll = self._collection()
        ids = list(ids)
        if coll is None or not ids:
            return []
        found = {}
        for s in range(0, len(ids), _GET_CHUNK):
            chunk = ids[s:s + _GET_CHUNK]
            where = "id IN (" + ", ".join(f"${k + 1}" for k in range(len(chunk))) + ")"
            for h in coll.find(where=where, params=chunk,
                               select=[self.text_field, self.metadata_field]):
                found[h.id] = self._doc(h)
        return [found[i] for i in ids if i in found]

    def similarity_search(self, query: str, k: int = 4, filter: dict | str | None = None,
                          **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4,
                                     filter: dict | str | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """The k nearest documents and their scores. `filter` is a LangChain
        metadata dict or a varvedb where string; `where=` / `params=` add a
        where string of their own. `mode="hybrid"` fuses the vector search
        with a full-text search of `query` (the collection needs fts=True),
        `mode="text"` is the full-text search alone."""
        mode = kwargs.pop("mode", "vector")
        if mode not in MODES:
            raise OptionError(f"mode is one of {', '.join(MODES)}, got {brief(mode)}")
        vector = None if mode == "text" else self._embedding.embed_query(query)
        text = None if mode == "vector" else query
        return self._search(vector, k, filter, text=text, **kwargs)

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4,
                                    filter: dict | str | None = None,
                                    **kwargs: Any) -> list[Document]:
        return [d for d, _ in self._search(embedding, k, filter, **kwargs)]

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4,
                                               filter: dict | str | None = None,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        return self._search(embedding, k, filter, **kwargs)

    def _select_relevance_score_fn(self):
        coll = self._collection()
        return relevance_fn(self._metric if coll is not None else self._create["metric"])

    def _similarity_search_with_relevance_scores(self, query: str, k: int = 4,
                                                 **kwargs: Any) -> list[tuple[Document, float]]:
        if kwargs.get("mode", "vector") != "vector":
            raise OptionError("relevance scores are for vector search (mode='vector'): "
                              "BM25 and fused scores have no [0, 1] scale")
        return super()._similarity_search_with_relevance_scores(query, k, **kwargs)

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20,
                                      lambda_mult: float = 0.5,
                                      filter: dict | str | None = None,
                                      **kwargs: Any) -> list[Document]:
        return self.max_marginal_relevance_search_by_vector(
            self._embedding.embed_query(query), k, fetch_k, lambda_mult, filter, **kwargs)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4,
                                                fetch_k: int = 20, lambda_mult: float = 0.5,
                                                filter: dict | str | None = None,
                                                **kwargs: Any) -> list[Document]:
        """The `fetch_k` nearest, then `k` of them chosen for relevance and diversity
        (lambda_mult 1: relevance only, 0: diversity only)."""
        hits = self._hits(embedding, fetch_k, filter, vectors=True, **kwargs)
        if not hits:
            return []
        found = np.stack([np.asarray(h[self.vector_field], np.float32) for h in hits])
        chosen = maximal_marginal_relevance(np.asarray(embedding, np.float32), found,
                                            lambda_mult=lambda_mult, k=k)
        return [self._doc(hits[i]) for i in chosen]

    def _search(self, vector, k, filter, **kwargs) -> list[tuple[Document, float]]:
        return [(self._doc(h), h.score) for h in self._hits(vector, k, filter, **kwargs)]

    def _hits(self, vector, k, filter, *, text: str | None = None, where: str | None = None,
              params=(), vectors: bool = False, **search: Any):
        coll = self._collection()
        if coll is None:
            return []
        where, params = self._where(filter, where, params)
        select = [self.text_field, self.metadata_field] + ([self.vector_field] if vectors else [])
        if text is not None:
            search["text"], search["text_field"] = text, self.text_field
            search.setdefault("match", "any")     # a question's words, not a conjunction
        if vector is not None:
            search["vector"] = query_vector(vector)
        return coll.search(where=where, params=params, limit=k, select=select,
                           field=self.vector_field, **search)

    def _where(self, filter, where, params) -> tuple[str | None, list]:
        """filter= (a LangChain dict or a where string) and where= / params= as one
        where and its parameters (the dict's values come first: where's $n move up)."""
        params = list(params)
        if filter is None or isinstance(filter, str):
            return and_where(filter, where), params
        fw, fparams = dict_where(filter, self.metadata_field)
        return and_where(fw, None if where is None else renumber(where, len(fparams))), \
            fparams + params

    def _doc(self, h) -> Document:
        meta = h[self.metadata_field]
        return Document(page_content=h[self.text_field] or "", id=h.id,
                        metadata=meta if meta is not None else {})

    # ---- constructors -------------------------------------------------------------

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings,
                   metadatas: list[dict] | None = None, *, ids: list[str] | None = None,
                   **kwargs: Any) -> "VarveVectorStore":
        """A store (kwargs: the constructor's) with the texts added."""
        store = cls(embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store
