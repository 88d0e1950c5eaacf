"""Embedded vector stores: Chroma and LanceDB, each in a local folder.

Chroma (PersistentClient) builds its HNSW graph as rows are added; there is
no bulk load to separate from the index, so, as for the libraries, the adds
are the index build (`index_is_store`). HNSW parameters go in the
collection's configuration (`hnsw`: max_neighbors = m, ef_construction,
ef_search; Chroma 1.x's successor to the `hnsw:*` metadata keys), ef_search
is changed with `collection.modify` and a reopen (a loaded index keeps the
ef_search it was opened with), filters are `where={"tag": {"$lt": t}}`.
Chroma has no exact search, and the durability of an add is not a setting:
neither figure is reported.

LanceDB: the rows are written as Arrow record batches streamed from the data
file (one `create_table`), with a BTree index on tag. Exact top-k is its
flat scan, taken before the vector index exists; the ANN index is IVF_HNSW_FLAT
with one partition (a single HNSW graph over full-precision vectors, the
closest to the others), searched with nprobes=1 and `ef`; filters are
`where("tag < t", prefilter=True)`. Its commits are not fsync-configurable:
durable_commits is skipped.
"""
from __future__ import annotations

import os
import re

import numpy as np

from .engines import LOAD_BLOCK, Engine, du, require

CHROMA_SPACES = {"l2": "l2", "cosine": "cosine", "dot": "ip"}


class Chroma(Engine):
    name = "chromadb"
    supports_exact = False
    supports_ann = True
    index_is_store = True
    durable = False

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        self.chromadb = require("chromadb", "chromadb")
        self.path = os.path.join(workdir, "chroma")
        self.client = None
        self.coll = None
        self.ef = None

    def _client(self):
        from chromadb.config import Settings
        return self.chromadb.PersistentClient(path=self.path,
                                              settings=Settings(anonymized_telemetry=False))

    def load(self, ids, tags, rows):
        self.ids, self.tags, self.rows = ids, tags, rows

    def build_index(self, m, ef_construction):
        self.client = self._client()
        self.coll = self.client.create_collection("items", embedding_function=None, configuration={
            "hnsw": {"space": CHROMA_SPACES[self.metric], "max_neighbors": m,
                     "ef_construction": ef_construction, "num_threads": os.cpu_count() or 1}})
        batch = min(LOAD_BLOCK, self.client.get_max_batch_size())
        for lo, block in self.rows.blocks(LOAD_BLOCK):
            for b in range(0, len(block), batch):
                part = slice(lo + b, lo + min(b + batch, len(block)))
                self.coll.add(ids=[str(i) for i in self.ids[part].tolist()],
                              embeddings=block[b:b + batch],
                              metadatas=[{"tag": t} for t in self.tags[part].tolist()])
                self.advance(part.stop - part.start)
        self.notes["index"] = (f"collection configuration hnsw max_neighbors={m} "
                               f"ef_construction={ef_construction}; adds of {batch} rows")

    def ann(self, q, k, ef, max_tag=None):
        if ef != self.ef:
            # A loaded index keeps the ef_search it was opened with: reopen the client.
            self.coll.modify(configuration={"hnsw": {"ef_search": ef}})
            self.close()
            self.open()
            self.ef = ef
        where = None if max_tag is None else {"tag": {"$lt": int(max_tag)}}
        res = self.coll.query(query_embeddings=[q], n_results=k, where=where, include=[])
        return np.array([int(i) for i in res["ids"][0]], np.int64)

    def close(self):
        if self.client is not None:
            self.client.clear_system_cache()   # else the next client reuses the loaded index
        self.coll = None
        self.client = None

    def open(self):
        self.client = self._client()
        self.coll = self.client.get_collection("items")
        self.ef = self.coll.configuration["hnsw"]["ef_search"]


class Lance(Engine):
    name = "lancedb"
    supports_ann = True
    durable = False

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        self.lancedb = require("lancedb", "lancedb")
        self.pa = require("pyarrow", "pyarrow")
        self.path = os.path.join(workdir, "lance")
        self.db = None
        self.tbl = None
        self.ef = None

    def load(self, ids, tags, rows):
        pa = self.pa
        from lancedb.index import BTree
        schema = pa.schema([("id", pa.int64()), ("tag", pa.int32()),
                            ("vector", pa.list_(pa.float32(), self.dim))])

        def batches():
            for lo, block in rows.blocks(LOAD_BLOCK):
                hi = lo + len(block)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(ids[lo:hi]), pa.array(tags[lo:hi].astype(np.int32)),
                     pa.FixedSizeListArray.from_arrays(pa.array(block.ravel()), self.dim)],
                    schema=schema)
                self.advance(len(block))
        self.db = self.lancedb.connect(self.path)
        self.tbl = self.db.create_table(
            "items", data=pa.RecordBatchReader.from_batches(schema, batches()), schema=schema)
        self.tbl.create_index("tag", config=BTree())
        self.notes["load"] = "create_table from streamed Arrow record batches, BTree index on tag"
        self.notes["exact"] = "flat scan before the vector index exists; where(prefilter=True)"

    def _search(self, q, k, max_tag):
        query = self.tbl.search(q).distance_type(self.metric).limit(k).select(["id", "_distance"])
        if max_tag is not None:
            query = query.where(f"tag < {int(max_tag)}", prefilter=True)
        return query

    def exact(self, q, k, max_tag=None):
        return self._search(q, k, max_tag).to_arrow()["id"].to_numpy()

    def build_index(self, m, ef_construction):
        from lancedb.index import HnswFlat
        self.tbl.create_index("vector", config=HnswFlat(
            distance_type=self.metric, num_partitions=1, m=m, ef_construction=ef_construction))
        self.notes["index"] = (f"IVF_HNSW_FLAT num_partitions=1 m={m} "
                               f"ef_construction={ef_construction}; nprobes=1")

    def ann(self, q, k, ef, max_tag=None):
        return self._search(q, k, max_tag).nprobes(1).ef(ef).to_arrow()["id"].to_numpy()

    def explain(self, q, k, ef=None, max_tag=None):
        query = self._search(q, k, max_tag)
        if ef is not None:
            query = query.nprobes(1).ef(ef)
        return re.sub(r"uri=\S+, ", "", " / ".join(
            line.strip() for line in query.explain_plan().splitlines() if line.strip()))

    def close(self):
        self.tbl = None
        self.db = None

    def open(self):
        self.db = self.lancedb.connect(self.path)
        self.tbl = self.db.open_table("items")


class LanceIvfpq(Lance):
    """LanceDB's IVF_PQ index (num_partitions = lists, num_sub_vectors = pq_m, 8-bit
    codes), searched with nprobes and refine_factor = rerank / k (the candidates
    reranked with the full vectors, read from the table's files)."""
    name = "lancedb:ivfpq"
    sweep = "probes"

    def build_index(self, m, ef_construction):
        from lancedb.index import IvfPq
        o = self.options
        self.tbl.create_index("vector", config=IvfPq(
            distance_type=self.metric, num_partitions=o["lists"], num_sub_vectors=o["pq_m"]))
        self.notes["index"] = (f"IVF_PQ num_partitions={o['lists']} num_sub_vectors={o['pq_m']} "
                               f"num_bits=8; nprobes = probes, refine_factor = rerank / k")

    def _ann(self, q, k, probes, max_tag):
        query = self._search(q, k, max_tag).nprobes(probes)
        rerank = self.options.get("rerank")
        if rerank and rerank > k:
            query = query.refine_factor(-(-rerank // k))
        return query

    def ann(self, q, k, probes, max_tag=None):
        return self._ann(q, k, probes, max_tag).to_arrow()["id"].to_numpy()

    def explain(self, q, k, probes=None, max_tag=None):
        query = self._search(q, k, max_tag) if probes is None else self._ann(q, k, probes,
                                                                             max_tag)
        return re.sub(r"uri=\S+, ", "", " / ".join(
            line.strip() for line in query.explain_plan().splitlines() if line.strip()))

    def graph_bytes(self):
        return du(os.path.join(self.path, "items.lance", "_indices"))
