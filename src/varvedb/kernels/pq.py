"""Product quantization: k-means, the sub-vector codebooks, codes, and query tables.

What this is for: a product quantizer stands for a vector of ``dim`` values by
``m`` bytes: the vector is cut into ``m`` sub-vectors of ``dim / m`` values and
each is replaced by the number of its nearest of 256 sub-centroids (its
codebook, learnt by k-means over a sample). A query is then compared with a
code through one table per query: ``table[j, c]`` is the query's part of the
distance to sub-centroid ``c`` of sub-vector ``j``, so a row costs ``m``
lookups and adds. vv.IVFPQ codes each row's residual from its list's centroid
(kernels/ivf.py scans them); the k-means of its lists is here too.

k-means assigns with a blocked matrix product (numpy's BLAS, which is faster
at hundreds of dimensions than any loop here); the centroid sums and the
encoding (256 sub-centroids of a few dimensions: a product too thin for BLAS)
are numba kernels, the encoding parallel over rows.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .jit import njit

PQ_CODES = 256      # sub-centroids per sub-vector: one byte a code
BLOCK_ROWS = 4096   # rows per matrix product when assigning to centroids


# ------------------------------------------------------------------ k-means

def nearest(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The nearest centroid (l2) of each row of ``x`` (float32), as int32."""
    c_sq = np.einsum("ij,ij->i", centroids, centroids)
    out = np.empty(len(x), np.int32)
    for lo in range(0, len(x), BLOCK_ROWS):
        block = x[lo:lo + BLOCK_ROWS]
        d = c_sq[None, :] - 2.0 * (block @ centroids.T)
        out[lo:lo + len(block)] = np.argmin(d, axis=1)
    return out


@njit(cache=True, nogil=True, readonly=("x", "labels"))
def centroid_sums(x, labels, sums, counts):
    """Add each row of ``x`` to ``sums[labels[i]]`` (float64) and count it."""
    for i in range(x.shape[0]):
        c = labels[i]
        counts[c] += 1
        for j in range(x.shape[1]):
            sums[c, j] += x[i, j]


def kmeans(x: np.ndarray, k: int, iters: int, rng: np.random.Generator,
           progress=None) -> np.ndarray:
    """``k`` centroids (float32, k × dim) of the rows of ``x`` by Lloyd's
    iterations from ``k`` distinct rows drawn by ``rng``; an emptied cluster
    restarts at a row of the largest one, nudged apart from it."""
    x = np.ascontiguousarray(x, np.float32)
    centroids = x[rng.choice(len(x), size=k, replace=False)].copy()
    for _ in range(iters):
        labels = nearest(x, centroids)
        sums = np.zeros(centroids.shape, np.float64)
        counts = np.zeros(k, np.int64)
        centroid_sums(x, labels, sums, counts)
        filled = counts > 0
        centroids[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
        for c in np.flatnonzero(~filled):
            # a member of the largest cluster, nudged: next round splits that cluster
            big = int(np.argmax(counts))
            members = np.flatnonzero(labels == big)
            pick = members[rng.integers(len(members))]
            scale = np.float32(1e-4) * (np.abs(centroids[big]) + np.float32(1e-6))
            centroids[c] = x[pick] + scale
            counts[big] = (counts[big] + 1) // 2    # (counts only picks the next `big`)
        if progress is not None:
            progress(1)
    return centroids


# ------------------------------------------------------- product quantizer

@njit(cache=True, nogil=True, parallel=True, fastmath=True, readonly=("x", "codebooks_t"))
def encode(x, codebooks_t, codes):
    """``codes[i, j]``: the nearest sub-centroid of row i's j-th sub-vector.

    ``codebooks_t`` is (m, dsub, 256): each sub-vector dimension's 256 values
    side by side, so the distance to all 256 sub-centroids is one vector loop."""
    m, dsub, n_codes = codebooks_t.shape
    for i in prange(x.shape[0]):
        dist = np.empty(n_codes, np.float32)
        for j in range(m):
            dist[:] = 0.0
            for t in range(dsub):
                v = x[i, j * dsub + t]
                for c in range(n_codes):
                    diff = v - codebooks_t[j, t, c]
                    dist[c] += diff * diff
            best = 0
            for c in range(1, n_codes):
                if dist[c] < dist[best]:
                    best = c
            codes[i, j] = best


@njit(cache=True, nogil=True, readonly=("x", "codes"))
def code_sums(x, codes, sums, counts):
    """Per sub-vector j and code c: the sum (float64) and count of the
    sub-vectors of ``x`` coded c (``sums`` is (m, 256, dsub))."""
    m, n_codes, dsub = sums.shape
    for i in range(x.shape[0]):
        for j in range(m):
            c = codes[i, j]
            counts[j, c] += 1
            for t in range(dsub):
                sums[j, c, t] += x[i, j * dsub + t]


def train(residuals: np.ndarray, m: int, iters: int, rng: np.random.Generator,
             progress=None) -> np.ndarray:
    """The codebooks (m, 256, dsub) float32 of ``m`` sub-vector k-means over
    ``residuals``, run side by side (one encode assigns every sub-vector)."""
    x = np.ascontiguousarray(residuals, np.float32)
    n, dim = x.shape
    dsub = dim // m
    start = x[rng.choice(n, size=PQ_CODES, replace=n < PQ_CODES)]
    books = np.ascontiguousarray(start.reshape(PQ_CODES, m, dsub).transpose(1, 0, 2))
    codes = np.empty((n, m), np.uint8)
    for _ in range(iters):
        encode(x, np.ascontiguousarray(books.transpose(0, 2, 1)), codes)
        sums = np.zeros(books.shape, np.float64)
        counts = np.zeros((m, PQ_CODES), np.int64)
        code_sums(x, codes, sums, counts)
        filled = counts > 0
        books[filled] = (sums[filled] / counts[filled][:, None]).astype(np.float32)
        for j, c in zip(*np.nonzero(~filled)):
            # an unused code restarts at a random row's sub-vector
            books[j, c] = x[rng.integers(n), j * dsub:(j + 1) * dsub]
        if progress is not None:
            progress(1)
    return books


@njit(cache=True, nogil=True, fastmath=True, readonly=("codebooks_t", "query"))
def distance_table(codebooks_t, query, l2, table):
    """The table a PQ-coded row's distance sums: ``table[j, c]`` is
    ``|q_j - codebook_j[c]|²`` with ``l2``, else ``-q_j · codebook_j[c]`` (dot, and
    cosine over normalized rows and query). An HNSW walk on codes sums it as it is
    (distance.METRIC_CODE_PQ); the IVF scan sums the ``-q·r̂`` form (kernels.ivf)."""
    m, dsub, n_codes = codebooks_t.shape
    for j in range(m):
        for c in range(n_codes):
            table[j, c] = 0.0
        for t in range(dsub):
            v = query[j * dsub + t]
            for c in range(n_codes):
                if l2:
                    diff = v - codebooks_t[j, t, c]
                    table[j, c] += diff * diff
                else:
                    table[j, c] -= v * codebooks_t[j, t, c]
