"""IVF index over arena rows: k-means lists, optional product-quantizer codes, exact rerank.

``IvfIndex(dim, metric, lists, pq_m, nprobe, rerank, seed)`` is what
``vv.IVFPQ`` builds (the scan's arithmetic is in :mod:`varvedb.kernels.ivf`):

* **training** (:meth:`train`) runs once, on a sample of the rows present
  when there are enough of them (:attr:`train_min`): k-means for the lists,
  then, with ``pq_m``, k-means of each of the ``pq_m`` sub-vectors of the
  residuals (256 codes each). The sample and every initial centroid are drawn
  from ``seed``, so the same rows give the same index. The lists are not
  retrained as rows arrive (pgvector's ivfflat neither): build the index after
  a bulk load, or drop and recreate it when the data has moved.
* **adding** (:meth:`add`) assigns each row to its nearest list and, with
  ``pq_m``, stores its code (``pq_m`` bytes) and one float. What stays in
  memory per row is ``pq_m + 12`` bytes (code, row number, float), or 8 for
  IVF-Flat; the vectors themselves stay in the arena (the mapped file) and
  are read only to measure the ``rerank`` best candidates (IVF-PQ) or the
  probed rows (IVF-Flat).
* **searching** (:meth:`search`) probes the ``probes`` nearest lists (the
  caller's, else ``nprobe``), scans their allowed rows, and ranks the best
  candidates by their exact distance, on pgvector's scale like every index.

Rows are kept list by list (a sealed part) plus a tail of rows added since,
each with its list number; a tail longer than 1/32 of the rows (at least
4 096) is sealed into the lists, so a bulk load sorts once and a trickle of
small adds costs no re-sort, while a search scans at most a short tail.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import NonFiniteVectorError
from ..kernels import ivf, pq
from ..kernels.distance import (GRAPH_METRIC_CODES, L2_SCALE, METRIC_COSINE, METRIC_DOT,
                                METRIC_L2, exact_row_distances, rank_rows, rerank_rows)

_FORMAT = 1
_P_FORMAT, _P_DIM, _P_METRIC, _P_LISTS, _P_PQ_M, _P_NPROBE, _P_RERANK, _P_SEED = range(8)
_P_TRAINED, _P_SEALED, _P_TAIL = 8, 9, 10
_N_PARAMS = 11
_METRIC_NAMES = {GRAPH_METRIC_CODES[name]: name for name in ("l2", "dot", "cosine")}
KMEANS_ITERS = 20
SAMPLE_PER_LIST = 64           # training rows per list, at most ...
MAX_SAMPLE = 131_072           # ... and in all
PQ_SAMPLE = 32_768             # residuals the sub-vector codebooks are trained on (128 a code)
PQ_ITERS = 15                  # their k-means iterations
RERANK_PER_K = 8               # IVF-PQ: candidates measured exactly per result asked
SEAL_FRACTION = 32             # a tail past 1/32 of the rows is sorted into the lists
SEAL_MIN = 4096
_NO_ALLOW = np.zeros(1, np.bool_)


class IvfIndex:
    """Inverted lists of arena rows (see the module docstring). Writers are
    serialised by the caller and do not overlap searches."""

    def __init__(self, dim: int, metric: str, lists: int = 100, pq_m: int | None = None,
                 nprobe: int = 10, rerank: int | None = None, seed: int = 0):
        if metric not in ("l2", "dot", "cosine"):
            raise ValueError(f"an IVF index is built for l2, dot or cosine, got {metric!r}")
        if pq_m is not None and (pq_m < 1 or dim % pq_m):
            raise ValueError(f"pq_m must divide the dimension {dim}, got {pq_m}")
        self.dim, self.metric, self.lists = int(dim), metric, int(lists)
        self.pq_m = None if pq_m is None else int(pq_m)
        self.nprobe, self.rerank, self.seed = int(nprobe), rerank, int(seed)
        self._metric_code = GRAPH_METRIC_CODES[metric]
        self.centroids = np.zeros((0, dim), np.float32)
        self._c_sq = np.zeros(0, np.float32)
        m = self.pq_m or 0
        dsub = dim // m if m else 0
        self.codebooks = np.zeros((m, pq.PQ_CODES, dsub), np.float32)
        self._books_t = np.zeros((m, dsub, pq.PQ_CODES), np.float32)
        # the sealed lists, then the tail (capacity grows by doubling; n_tail used)
        self._offsets = np.zeros(1, np.int64)
        self._rows = np.zeros(0, np.int64)
        self._codes = np.zeros((0, m), np.uint8)
        self._extra = np.zeros(0, np.float32)
        self._tail_rows = np.zeros(0, np.int64)
        self._tail_lists = np.zeros(0, np.int32)
        self._tail_codes = np.zeros((0, m), np.uint8)
        self._tail_extra = np.zeros(0, np.float32)
        self._n_tail = 0
        self._extent = 0

    # ---------------------------------------------------------------- size

    @property
    def trained(self) -> bool:
        return len(self.centroids) > 0

    @property
    def train_min(self) -> int:
        """Rows needed before training: four per list, and per sub-vector code."""
        return 4 * max(self.lists, pq.PQ_CODES if self.pq_m else 1)

    def __len__(self) -> int:
        return len(self._rows) + self._n_tail

    @property
    def extent(self) -> int:
        """One past the largest row in the lists (0 when empty)."""
        return self._extent

    def memory_bytes(self) -> int:
        """Bytes of the centroids, codebooks and lists (capacity included), not the arena."""
        return int(sum(a.nbytes for a in (
            self.centroids, self._c_sq, self.codebooks, self._books_t, self._offsets,
            self._rows, self._codes, self._extra, self._tail_rows, self._tail_lists,
            self._tail_codes, self._tail_extra)))

    def node_bytes(self) -> int:
        """The lists hold no capacity for rows not added yet: memory_bytes."""
        return self.memory_bytes()

    # ------------------------------------------------------------- training

    def train(self, vectors: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> None:
        """Fit the lists (and codebooks) on a sample of arena ``rows`` drawn from ``seed``."""
        if self.trained:
            raise ValueError("the IVF index is trained already")
        rows = np.asarray(rows, np.int64)
        if len(rows) < self.train_min:
            raise ValueError(f"training needs {self.train_min} rows, got {len(rows)}")
        rng = np.random.default_rng(self.seed)
        size = min(len(rows), max(SAMPLE_PER_LIST * self.lists, PQ_SAMPLE if self.pq_m else 0),
                   MAX_SAMPLE)
        sample = np.sort(rng.choice(rows, size=size, replace=False))
        x = self._floats(vectors, norms, sample)
        centroids = pq.kmeans(x, self.lists, KMEANS_ITERS, rng)
        if self.pq_m:
            # every few rows of the sample (sorted by row), not its first: the
            # codebooks see the whole span of the table, not its oldest rows
            part = x[::-(-len(x) // PQ_SAMPLE)]
            residuals = part - centroids[pq.nearest(part, centroids)]
            books = pq.train(residuals, self.pq_m, PQ_ITERS, rng)
            self.codebooks = books
            self._books_t = np.ascontiguousarray(books.transpose(0, 2, 1))
        self._c_sq = np.einsum("ij,ij->i", centroids, centroids).astype(np.float32)
        self._offsets = np.zeros(self.lists + 1, np.int64)
        self.centroids = centroids

    def _floats(self, vectors: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``vectors[rows]`` as float32, normalized for cosine (zero rows stay zero)."""
        x = np.asarray(vectors[rows], np.float32)
        if self._metric_code == METRIC_COSINE:
            n = norms[rows].astype(np.float32)
            x = x / np.where(n > 0, n, np.float32(1.0))[:, None]
        return np.ascontiguousarray(x)

    # ---------------------------------------------------------------- adding

    def add(self, vectors: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> None:
        """Put arena ``rows`` (int64, ascending, above every row already in) in their lists."""
        self.insert(self.encode(vectors, norms, rows))

    def encode(self, vectors: np.ndarray, norms: np.ndarray, rows: np.ndarray,
               parts=None) -> tuple:
        """The lists, codes and row terms of ``rows``, changing nothing (the slow
        half of :meth:`add`, which may run while searches do). ``parts``: how the
        rows are encoded, ``parts(index, vectors, norms, rows)`` giving what
        :meth:`encode_rows` gives for them (None: here, in one go; the Ray build
        of integrations/ray.py encodes row ranges in workers)."""
        if not self.trained:
            raise ValueError("the IVF index is not trained")
        rows = np.asarray(rows, np.int64)
        if len(rows) and (rows[0] < self._extent or np.any(np.diff(rows) <= 0)):
            raise ValueError("rows must ascend, above the rows already in the index")
        lists, codes, extra = (parts or IvfIndex.encode_rows)(self, vectors, norms, rows)
        if len(lists) != len(rows):
            raise ValueError(f"{len(lists)} rows encoded for {len(rows)}")
        return rows, lists, codes, extra

    def encode_rows(self, vectors: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> tuple:
        """(lists int32, codes uint8 (n, pq_m), row terms float32) of ``rows`` of a
        trained index: each row's nearest list and, with ``pq_m``, its residual's
        code and term. A row's answer depends on that row alone, so any split of
        the rows into parts gives the same arrays."""
        m = self.pq_m or 0
        lists = np.empty(len(rows), np.int32)
        codes = np.empty((len(rows), m), np.uint8)
        extra = np.zeros(len(rows), np.float32)
        for lo in range(0, len(rows), pq.BLOCK_ROWS):
            part = rows[lo:lo + pq.BLOCK_ROWS]
            x = self._floats(vectors, norms, part)
            lab = pq.nearest(x, self.centroids)
            lists[lo:lo + len(part)] = lab
            if m:
                centre = self.centroids[lab]
                pq.encode(x - centre, self._books_t, codes[lo:lo + len(part)])
                ivf.pq_extra(codes[lo:lo + len(part)], self.codebooks, centre,
                             extra[lo:lo + len(part)])
        return lists, codes, extra

    def trained_copy(self) -> "IvfIndex":
        """The centroids and codebooks without the rows: what :meth:`encode_rows`
        needs, light to send to another process."""
        if not self.trained:
            raise ValueError("the IVF index is not trained")
        out = IvfIndex(self.dim, self.metric, self.lists, self.pq_m, self.nprobe,
                       self.rerank, self.seed)
        out.centroids, out._c_sq = self.centroids, self._c_sq
        out.codebooks, out._books_t = self.codebooks, self._books_t
        out._offsets = np.zeros(self.lists + 1, np.int64)
        return out

    def insert(self, batch: tuple) -> None:
        """Add what :meth:`encode` made (no add in between)."""
        rows = batch[0]
        if not len(rows):
            return
        if rows[0] < self._extent:
            raise ValueError("rows must ascend, above the rows already in the index")
        self._append_tail(*batch)
        self._extent = int(rows[-1]) + 1
        if self._n_tail >= max(SEAL_MIN, len(self) // SEAL_FRACTION):
            self.seal()

    def _append_tail(self, rows, lists, codes, extra) -> None:
        need = self._n_tail + len(rows)
        if need > len(self._tail_rows):
            cap = max(need, 2 * len(self._tail_rows), 1024)
            self._tail_rows = _grown(self._tail_rows, cap, self._n_tail)
            self._tail_lists = _grown(self._tail_lists, cap, self._n_tail)
            self._tail_codes = _grown(self._tail_codes, cap, self._n_tail)
            self._tail_extra = _grown(self._tail_extra, cap, self._n_tail)
        at = slice(self._n_tail, need)
        self._tail_rows[at], self._tail_lists[at] = rows, lists
        self._tail_codes[at], self._tail_extra[at] = codes, extra
        self._n_tail = need

    def seal(self) -> None:
        """Sort the tail into the lists: each list's rows contiguous, ascending."""
        t = self._n_tail
        if not t:
            return
        sealed_lists = np.repeat(np.arange(self.lists, dtype=np.int32), np.diff(self._offsets))
        lists = np.concatenate([sealed_lists, self._tail_lists[:t]])
        order = np.argsort(lists, kind="stable")    # rows ascend within a list
        self._rows = np.concatenate([self._rows, self._tail_rows[:t]])[order]
        self._codes = np.concatenate([self._codes, self._tail_codes[:t]])[order]
        self._extra = np.concatenate([self._extra, self._tail_extra[:t]])[order]
        self._offsets = np.zeros(self.lists + 1, np.int64)
        np.cumsum(np.bincount(lists, minlength=self.lists), out=self._offsets[1:])
        # the tail's room goes too (a bulk add grew it to the whole batch)
        m = self.pq_m or 0
        self._tail_rows, self._tail_lists = np.zeros(0, np.int64), np.zeros(0, np.int32)
        self._tail_codes, self._tail_extra = np.zeros((0, m), np.uint8), np.zeros(0, np.float32)
        self._n_tail = 0

    def reserve(self, n_rows: int) -> None:
        """Nothing to reserve: the lists grow by whole batches."""

    # ------------------------------------------------------------- searching

    def search(self, vectors: np.ndarray, norms: np.ndarray, query: np.ndarray, k: int,
               allow: np.ndarray | None = None, probes: int | None = None,
               stats: dict | None = None, prefetch=None) -> tuple[np.ndarray, np.ndarray]:
        """The (at most) k nearest allowed rows of the ``probes`` nearest lists:
        ``(rows int64, distances float64)`` ascending by (distance, row), exact
        on pgvector's scale. ``stats`` (a dict) gets "lists" probed and "scanned"
        rows; ``prefetch(arena, rows)``, when given, is called with the
        candidates before they are measured exactly (IVF-PQ)."""
        k = int(k)
        if not len(self) or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        # writable too: a read-only query (SQL's literal) would compile kernels of its own
        query = np.require(query, np.float32, ("C", "W"))
        if query.shape != (self.dim,):
            raise ValueError(f"query must have shape ({self.dim},), got {query.shape}")
        arena = vectors.view(np.uint16) if vectors.dtype == np.float16 else vectors
        if allow is not None and (allow.dtype != np.bool_ or allow.shape[0] < self._extent):
            raise ValueError(f"allow must be a bool mask over at least {self._extent} rows")
        use_allow = allow is not None
        allow = allow if use_allow else _NO_ALLOW
        probes = min(max(int(probes or self.nprobe), 1), self.lists)
        counts = np.zeros(2, np.int64)          # lists probed, rows scanned
        if self.pq_m:
            cap = max(self.rerank or RERANK_PER_K * k, k)
            keys, ids = np.empty(cap, np.float32), np.empty(cap, np.int64)
            n = ivf.coded_search(
                self.centroids, self._c_sq, self._books_t, query, self._metric_code, probes,
                self._offsets, self._rows, self._codes, self._extra, self._tail_rows,
                self._tail_lists, self._tail_codes, self._tail_extra, self._n_tail, allow,
                use_allow, cap, keys, ids, counts)
        else:
            if not np.isfinite(query).all():
                raise NonFiniteVectorError("query vector holds NaN or inf")
            q = query
            if self._metric_code == METRIC_COSINE:
                # (its norm in float64: a float32 one of a huge query overflows, of a
                # tiny one underflows, and the probe would rank no list nearer)
                q64 = query.astype(np.float64)
                qn = float(np.sqrt(q64 @ q64))
                q = (q64 / qn).astype(np.float32) if qn > 0 else query
            c_sq, top = self._c_sq, float(np.abs(q).max())
            if top >= 2.0 ** 41 or 0 < top < 2.0 ** -40:
                # a huge or tiny query's float32 probe overflows or underflows: dot's
                # query scaled by a power of two, a huge l2 one with the centroids'
                # |c|^2 by L2_SCALE (every list's |c|^2 - 2 q.c scaled alike)
                if self._metric_code == METRIC_L2 and top >= 2.0 ** 41:
                    q, c_sq = q * L2_SCALE, c_sq * L2_SCALE
                elif self._metric_code == METRIC_DOT:
                    q = (q.astype(np.float64) * 2.0 ** (1 - math.frexp(top)[1])).astype(
                        np.float32)
            lists = np.empty(probes, np.int64)
            base = np.empty(self.lists, np.float32)
            counts[0] = ivf.probe_lists(self.centroids, c_sq, q,
                                        METRIC_DOT if self._metric_code == METRIC_DOT else 0,
                                        probes, lists, base)
            cap = k + max(8, k // 4)     # float32 near-ties settled by the exact ranking
            keys, ids = np.empty(cap, np.float32), np.empty(cap, np.int64)
            n, counts[1] = ivf.flat_candidates(
                lists, int(counts[0]), self.lists, arena, norms, query, self._metric_code,
                self._offsets, self._rows, self._tail_rows, self._tail_lists, self._n_tail,
                allow, use_allow, cap, keys, ids)
            if n == ivf.UNKNOWN_SCORES:
                # rows near float32's largest scanned: their float32 scores say
                # nothing, so every row scanned is ranked exactly
                rows = self._probed_rows(lists[:counts[0]], allow, use_allow)
                dists = np.empty(len(rows), np.float64)
                exact_row_distances(arena, rows, query, self._metric_code, dists)
                order = np.lexsort((rows, dists))[:k]
                if stats is not None:
                    stats["lists"], stats["scanned"] = int(counts[0]), int(counts[1])
                return rows[order], dists[order]
        if n < 0:
            raise NonFiniteVectorError("query vector holds NaN or inf")
        if stats is not None:
            stats["lists"], stats["scanned"] = int(counts[0]), int(counts[1])
        rows = ids[:n]
        if not self.pq_m:
            dists = np.empty(n, np.float64)
            rank_rows(arena, rows, query, self._metric_code, dists)
            return rows[:k], dists[:k]
        if prefetch is not None:
            prefetch(vectors, rows)
        # the candidates measured in float32 (vector code), the best k then exactly
        out_rows, out_dist = np.empty(k, np.int64), np.empty(k, np.float64)
        count = rerank_rows(arena, norms, query, self._metric_code, rows, n, k, keys,
                            out_rows, out_dist)
        return out_rows[:count], out_dist[:count]

    def _probed_rows(self, lists: np.ndarray, allow: np.ndarray, use_allow: bool
                     ) -> np.ndarray:
        """The allowed rows of ``lists`` (sealed and tail), ascending."""
        off = self._offsets
        parts = [self._rows[off[lst]:off[lst + 1]] for lst in lists.tolist()]
        t = self._n_tail
        parts.append(self._tail_rows[:t][np.isin(self._tail_lists[:t], lists)])
        rows = np.sort(np.concatenate(parts))
        return rows[allow[rows]] if use_allow else rows

    # ---------------------------------------------------------- persistence

    def validate(self, n_rows: int) -> None:
        """Structural check against an arena of ``n_rows``; raises ValueError."""
        if self._extent > n_rows:
            raise ValueError(f"IVF lists hold row {self._extent - 1}, the arena {n_rows} rows")
        if not self.trained:
            if len(self):
                raise ValueError("an untrained IVF index holds rows")
            return
        off = self._offsets
        if off.shape != (self.lists + 1,) or off[0] != 0 or np.any(np.diff(off) < 0) \
                or off[-1] != len(self._rows):
            raise ValueError("IVF list offsets do not cover the sealed rows")
        t = self._n_tail
        rows = np.concatenate([self._rows, self._tail_rows[:t]])
        if rows.size:
            if rows.min() < 0 or rows.max() >= self._extent:
                raise ValueError("IVF rows are outside the index's extent")
            seen = np.zeros(self._extent, np.bool_)
            seen[rows] = True
            if int(np.count_nonzero(seen)) != rows.size:
                raise ValueError("an IVF row is in the lists twice")
        if t and (self._tail_lists[:t].min() < 0 or self._tail_lists[:t].max() >= self.lists):
            raise ValueError("IVF tail rows name lists that do not exist")
        for name in ("centroids", "codebooks"):
            if not np.isfinite(getattr(self, name)).all():
                raise ValueError(f"IVF {name} are not finite")
        if not (np.isfinite(self._extra).all() and np.isfinite(self._tail_extra[:t]).all()):
            raise ValueError("IVF row terms are not finite")

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything needed to restore the index: ``params`` (int64) and the
        arrays trimmed to their use, as read-only views valid until the next add."""
        params = np.zeros(_N_PARAMS, np.int64)
        params[:] = [_FORMAT, self.dim, self._metric_code, self.lists, self.pq_m or 0,
                     self.nprobe, self.rerank or 0, self.seed, int(self.trained),
                     len(self._rows), self._n_tail]
        t = self._n_tail
        out = {"params": params, "extent": np.array([self._extent], np.int64),
               "centroids": self.centroids, "codebooks": self.codebooks,
               "offsets": self._offsets, "rows": self._rows, "codes": self._codes,
               "extra": self._extra, "tail_rows": self._tail_rows[:t],
               "tail_lists": self._tail_lists[:t], "tail_codes": self._tail_codes[:t],
               "tail_extra": self._tail_extra[:t]}
        for name, array in out.items():
            view = array.view()
            view.flags.writeable = False
            out[name] = view
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "IvfIndex":
        """Restore from :meth:`to_arrays` output (arrays used in place; sizes
        checked with Python ints before anything is shaped); ValueError when
        they do not fit together."""
        try:
            p = np.asarray(arrays["params"])
            if p.dtype != np.int64 or p.shape != (_N_PARAMS,) or int(p[_P_FORMAT]) != _FORMAT:
                raise ValueError("unknown IVF params layout")
            dim, lists, m = int(p[_P_DIM]), int(p[_P_LISTS]), int(p[_P_PQ_M])
            if int(p[_P_METRIC]) not in _METRIC_NAMES or not 1 <= lists <= 1 << 20 \
                    or not 0 <= m <= dim or dim < 1 or int(p[_P_SEED]) < 0 \
                    or int(p[_P_NPROBE]) < 1 or int(p[_P_RERANK]) < 0:
                raise ValueError("IVF params are out of range")
            # the empty index allocates codebooks of 256 x dim floats: dim is checked
            # against those present first, so a crafted dim allocates nothing
            if m and np.asarray(arrays["codebooks"]).size != pq.PQ_CODES * dim:
                raise ValueError("IVF codebooks do not fit the dimension")
            index = cls(dim, _METRIC_NAMES[int(p[_P_METRIC])], lists, m or None,
                        int(p[_P_NPROBE]), int(p[_P_RERANK]) or None, int(p[_P_SEED]))
            sealed, tail = int(p[_P_SEALED]), int(p[_P_TAIL])
            trained = bool(p[_P_TRAINED])
            if sealed < 0 or tail < 0:
                raise ValueError("IVF params are out of range")
            dsub = dim // m if m else 0
            if trained:
                index.centroids = _restored(arrays["centroids"], np.float32, (lists, dim))
                index.codebooks = _restored(arrays["codebooks"], np.float32,
                                            (m, pq.PQ_CODES, dsub))
                index._books_t = np.ascontiguousarray(index.codebooks.transpose(0, 2, 1))
                index._c_sq = np.einsum("ij,ij->i", index.centroids,
                                        index.centroids).astype(np.float32)
                index._offsets = _restored(arrays["offsets"], np.int64, (lists + 1,))
            index._rows = _restored(arrays["rows"], np.int64, (sealed,))
            index._codes = _restored(arrays["codes"], np.uint8, (sealed, m))
            index._extra = _restored(arrays["extra"], np.float32, (sealed,))
            index._tail_rows = _restored(arrays["tail_rows"], np.int64, (tail,))
            index._tail_lists = _restored(arrays["tail_lists"], np.int32, (tail,))
            index._tail_codes = _restored(arrays["tail_codes"], np.uint8, (tail, m))
            index._tail_extra = _restored(arrays["tail_extra"], np.float32, (tail,))
            index._n_tail = tail
            extent = _restored(arrays["extent"], np.int64, (1,))
            index._extent = int(extent[0])
        except KeyError as exc:
            raise ValueError(f"IVF arrays lack {exc}") from None
        if index._extent < 0:
            raise ValueError("IVF extent is negative")
        return index


def _grown(array: np.ndarray, rows: int, used: int) -> np.ndarray:
    out = np.zeros((rows,) + array.shape[1:], array.dtype)
    out[:used] = array[:used]
    return out


def _restored(array: np.ndarray, dtype, shape: tuple[int, ...]) -> np.ndarray:
    array = np.asarray(array)
    if array.dtype != dtype or array.size != math.prod(shape):
        raise ValueError(f"IVF array has dtype {array.dtype} and size {array.size}, "
                         f"expected {np.dtype(dtype)} and shape {shape}")
    return array.reshape(shape)
