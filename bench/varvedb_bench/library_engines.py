"""In-memory vector libraries: hnswlib and FAISS.

For these the index *is* the store: there is no table to bulk-load first.
So `load` builds the library's own brute-force index (hnswlib BFIndex, FAISS
IndexFlat) for the exact figures, `build_index` drops it and builds the HNSW
index by adding the vectors (add_items / add: that is the load, and its time
is reported as the index build, with no separate bulk-write figure), and
`persist` saves the index file that `open` reads back. Neither library holds
the tags, so the application keeps them as a numpy array beside the index
(saved and loaded with it) and turns `tag < t` into the library's filter for
each query; that cost is part of the query time, as it would be for a user.
Neither has a durable commit: durable_commits is skipped.
"""
from __future__ import annotations

import os

import numpy as np

from .engines import LOAD_BLOCK, Engine, require


class _Library(Engine):
    index_is_store = True
    supports_ann = True
    durable = False
    in_ram_only = True

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        self.index_path = os.path.join(workdir, f"{self.name}.index")
        self.tags_path = os.path.join(workdir, "tags.npy")
        self.rows = None
        self.tags = None

    def _keep(self, tags, rows):
        self.rows = rows
        self.tags = np.ascontiguousarray(tags, np.int64)

    def close(self):
        self.index = None
        self.tags = None

    def persist(self):
        np.save(self.tags_path, self.tags)

    def graph_bytes(self):
        # the saved index is the in-memory layout; less the raw float32 vectors
        return os.path.getsize(self.index_path) - len(self.tags) * self.dim * 4


class Hnswlib(_Library):
    """hnswlib: BFIndex for exact; Index (HNSW) with a per-label filter callable."""
    name = "hnswlib"
    SPACES = {"l2": "l2", "cosine": "cosine", "dot": "ip"}

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        self.hnswlib = require("hnswlib", "hnswlib")
        self.space = self.SPACES[metric]
        self.index = None
        self.ef = None

    def _filter(self, max_tag):
        """hnswlib's only filter is a Python callable per candidate label; a bytes
        lookup (built with numpy per query) is the cheapest one it can call."""
        if max_tag is None:
            return None
        return (self.tags < max_tag).tobytes().__getitem__

    def load(self, ids, tags, rows):
        self._keep(tags, rows)
        if not self.supports_exact:
            return
        self.flat = self.hnswlib.BFIndex(space=self.space, dim=self.dim)
        self.flat.init_index(max_elements=len(rows))
        for lo, block in rows.blocks(LOAD_BLOCK):
            self.flat.add_items(block, ids[lo:lo + len(block)])
            self.advance(len(block))
        self.notes["exact"] = "BFIndex (brute force), filter = per-label Python callable"

    def exact(self, q, k, max_tag=None):
        labels, _ = self.flat.knn_query(q, k=k, filter=self._filter(max_tag))
        return labels[0].astype(np.int64)

    def build_index(self, m, ef_construction):
        self.flat = None
        self.index = self.hnswlib.Index(space=self.space, dim=self.dim)
        self.index.init_index(max_elements=len(self.rows), M=m, ef_construction=ef_construction,
                              random_seed=100)
        for lo, block in self.rows.blocks(LOAD_BLOCK):
            self.index.add_items(block, np.arange(lo, lo + len(block)),
                                 num_threads=os.cpu_count() or 1)
            self.advance(len(block))
        self.notes["index"] = (f"Index M={m} ef_construction={ef_construction}, add_items on "
                               f"{os.cpu_count()} threads; filter = per-label Python callable")

    def persist(self):
        super().persist()
        self.index.save_index(self.index_path)

    def ann(self, q, k, ef, max_tag=None):
        if ef != self.ef:
            self.index.set_ef(ef)
            self.ef = ef
        try:
            labels, _ = self.index.knn_query(q, k=k, num_threads=1,
                                             filter=self._filter(max_tag))
        except RuntimeError:        # fewer than k allowed rows reached: it returns nothing
            return np.empty(0, np.int64)
        return labels[0].astype(np.int64)

    def open(self):
        self.index = self.hnswlib.Index(space=self.space, dim=self.dim)
        self.index.load_index(self.index_path)
        self.tags = np.load(self.tags_path)
        self.ef = None


class Faiss(_Library):
    """FAISS: IndexFlat for exact; IndexHNSWFlat; filters as an IDSelectorBitmap."""
    name = "faiss"

    def __init__(self, workdir, dim, metric, **options):
        super().__init__(workdir, dim, metric, **options)
        self.faiss = require("faiss", "faiss-cpu")
        self.index = None
        # cosine = inner product over normalised vectors (FAISS has no cosine metric)
        self.ip = metric in ("cosine", "dot")

    def _prepare(self, x):
        if self.metric == "cosine":
            x = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-30)
        return np.ascontiguousarray(x, np.float32).reshape(-1, self.dim)

    def _search(self, index, q, k, max_tag, ef=None):
        """Search with the filter as a bitmap over row ids (IDSelectorBitmap reads
        bit i of byte i >> 3: numpy's little-endian bit order)."""
        faiss = self.faiss
        params = faiss.SearchParameters() if ef is None else faiss.SearchParametersHNSW()
        if ef is not None:
            params.efSearch = ef
        bits = sel = None      # referenced until the search returns: FAISS holds raw pointers
        if max_tag is not None:
            bits = np.packbits(self.tags < max_tag, bitorder="little")
            sel = faiss.IDSelectorBitmap(len(self.tags), faiss.swig_ptr(bits))
            params.sel = sel
        _, labels = index.search(self._prepare(q), k, params=params)
        del bits, sel
        found = labels[0]
        return found[found >= 0].astype(np.int64)

    def load(self, ids, tags, rows):
        self._keep(tags, rows)
        if not self.supports_exact:
            return
        faiss = self.faiss
        self.flat = faiss.IndexFlatIP(self.dim) if self.ip else faiss.IndexFlatL2(self.dim)
        for _lo, block in rows.blocks(LOAD_BLOCK):
            self.flat.add(self._prepare(block))
            self.advance(len(block))
        self.notes["exact"] = "IndexFlat, filter = IDSelectorBitmap built per query"

    def exact(self, q, k, max_tag=None):
        return self._search(self.flat, q, k, max_tag)

    def build_index(self, m, ef_construction):
        faiss = self.faiss
        self.flat = None
        metric = faiss.METRIC_INNER_PRODUCT if self.ip else faiss.METRIC_L2
        self.index = faiss.IndexHNSWFlat(self.dim, m, metric)
        self.index.hnsw.efConstruction = ef_construction
        for _lo, block in self.rows.blocks(LOAD_BLOCK):
            self.index.add(self._prepare(block))
            self.advance(len(block))
        self.notes["index"] = (f"IndexHNSWFlat M={m} efConstruction={ef_construction}, add on "
                               f"{faiss.omp_get_max_threads()} OpenMP threads; queries on 1 "
                               f"thread; filter = SearchParametersHNSW(sel=IDSelectorBitmap)")
        # One query at a time: OpenMP's team start-up would only add latency.
        faiss.omp_set_num_threads(1)

    def persist(self):
        super().persist()
        self.faiss.write_index(self.index, self.index_path)

    def ann(self, q, k, ef, max_tag=None):
        return self._search(self.index, q, k, max_tag, ef)

    def open(self):
        self.index = self.faiss.read_index(self.index_path)
        self.tags = np.load(self.tags_path)


class FaissIvfpq(Faiss):
    """FAISS IndexIVFPQ (residual PQ, 8-bit codes) under an IndexRefineFlat that
    reranks rerank candidates exactly; trained on a sample of the rows; queries on
    one thread. Everything, the refine vectors included, is held in memory."""
    name = "faiss:ivfpq"
    sweep = "probes"
    supports_exact = False
    in_ram_only = False      # run under a cap too: the report shows what the cap does to it
    TRAIN_ROWS = 100_000

    def build_index(self, m, ef_construction):
        faiss, o = self.faiss, self.options
        metric = faiss.METRIC_INNER_PRODUCT if self.ip else faiss.METRIC_L2
        quantizer = faiss.IndexFlatIP(self.dim) if self.ip else faiss.IndexFlatL2(self.dim)
        ivf = faiss.IndexIVFPQ(quantizer, self.dim, o["lists"], o["pq_m"], 8, metric)
        self.index = faiss.IndexRefineFlat(ivf)
        n = len(self.rows)
        pick = np.sort(np.random.default_rng(0).choice(n, min(n, self.TRAIN_ROWS),
                                                       replace=False))
        self.index.train(self._prepare(np.load(self.rows.path, mmap_mode="r")[pick]))
        for _lo, block in self.rows.blocks(LOAD_BLOCK):
            self.index.add(self._prepare(block))
            self.advance(len(block))
        self.quantizer = quantizer       # FAISS does not own it: keep it alive
        self.notes["index"] = (f"IndexRefineFlat(IndexIVFPQ nlist={o['lists']} M={o['pq_m']} "
                               f"nbits=8), trained on {len(pick):,} rows, k_factor = "
                               f"rerank / k; queries on 1 thread")
        faiss.omp_set_num_threads(1)

    def _settings(self, k, probes):
        faiss = self.faiss
        rerank = self.options.get("rerank") or k
        if getattr(self, "_set", None) != (k, probes):
            faiss.extract_index_ivf(self.index).nprobe = probes
            self.index.k_factor = max(1.0, rerank / k)
            self._set = (k, probes)

    def ann(self, q, k, probes, max_tag=None):
        self._settings(k, probes)
        _, labels = self.index.search(self._prepare(q), k)
        found = labels[0]
        return found[found >= 0].astype(np.int64)

    def open(self):
        super().open()
        self.faiss.omp_set_num_threads(1)
        self._set = None
