"""Benchmark and demo data: clustered vectors (DESIGN's generator), uniform noise,
held-out queries, and exact ground truth (cached on disk).

Clustered: 64 centres; each centre owns 32 random directions, and a vector is
its centre plus a Gaussian mix of those directions plus small isotropic noise
— low intrinsic dimension inside each cluster, like real embeddings. Uniform
random is the worst case for graph indexes. Tags are hashed from the id so
that `tag < 1` keeps ~1% and `tag < 25` ~25% of rows, whatever the order.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

CENTRES = 64
DIRECTIONS = 32


@dataclass
class Dataset:
    vectors: np.ndarray      # (rows, dim) float32
    queries: np.ndarray      # (queries, dim) float32, held out
    distribution: str
    seed: int

    @property
    def ids(self) -> np.ndarray:
        return np.arange(len(self.vectors), dtype=np.int64)

    @property
    def tags(self) -> np.ndarray:
        return tag_of(self.ids)


def tag_of(ids: np.ndarray) -> np.ndarray:
    """A tag in 0..99 hashed from the id (a fixed integer mix, not random state)."""
    x = ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(32)
    return (x % np.uint64(100)).astype(np.int64)


def clustered(n: int, dim: int, seed: int = 0, block: int = 65536) -> np.ndarray:
    """n vectors of DESIGN's clustered distribution, generated in blocks (flat memory)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (CENTRES, dim)).astype(np.float32)
    dirs = rng.normal(0, 1, (CENTRES, DIRECTIONS, dim)).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=2, keepdims=True)
    out = np.empty((n, dim), np.float32)
    for lo in range(0, n, block):
        m = min(block, n - lo)
        c = rng.integers(0, CENTRES, m)
        coef = rng.normal(0, 0.35, (m, DIRECTIONS)).astype(np.float32)
        out[lo:lo + m] = (centres[c] + np.einsum("md,mdk->mk", coef, dirs[c])
                          + rng.normal(0, 0.03, (m, dim)).astype(np.float32))
    return out


def uniform(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, dim)).astype(np.float32)


def make(rows: int, dim: int, queries: int = 1000, distribution: str = "clustered",
         seed: int = 0) -> Dataset:
    """Rows and held-out queries from one generator (queries are extra draws)."""
    gen = clustered if distribution == "clustered" else uniform
    allv = gen(rows + queries, dim, seed)
    return Dataset(allv[:rows], allv[rows:].copy(), distribution, seed)


def ground_truth(ds: Dataset, k: int = 10, metric: str = "l2", allow: np.ndarray | None = None,
                 cache_dir: str | None = None) -> np.ndarray:
    """Exact top-k ids for every query (cached by content under cache_dir)."""
    key = hashlib.sha256(np.ascontiguousarray(ds.vectors[:1000]).tobytes()
                         + f"{ds.vectors.shape}{ds.queries.shape}{k}{metric}".encode()
                         + (np.packbits(allow).tobytes() if allow is not None else b"")
                         ).hexdigest()[:16]
    path = os.path.join(cache_dir, f"gt-{key}.npy") if cache_dir else None
    if path and os.path.exists(path):
        return np.load(path)
    gt = exact_topk(ds.vectors, ds.queries, k, metric, allow)
    if path:
        os.makedirs(cache_dir, exist_ok=True)
        np.save(path, gt)
    return gt


def exact_topk(x: np.ndarray, queries: np.ndarray, k: int, metric: str,
               allow: np.ndarray | None = None, block: int = 65536) -> np.ndarray:
    """Exact top-k row numbers for each query: blocked GEMM, merged per block."""
    from ..engine.columns import norms_of
    norms = norms_of(x)
    qn = np.linalg.norm(queries, axis=1)
    best_d = np.full((len(queries), 0), np.inf, np.float32)
    best_i = np.zeros((len(queries), 0), np.int64)
    for lo in range(0, len(x), block):
        s = queries @ x[lo:lo + block].T
        nb = norms[lo:lo + block]
        if metric == "dot":
            d = -s
        elif metric == "cosine":
            d = 1 - s / np.maximum(np.outer(qn, nb), 1e-30)
        else:
            d = nb[None, :] ** 2 - 2 * s + (qn ** 2)[:, None]
        if allow is not None:
            d[:, ~allow[lo:lo + block]] = np.inf
        ids = np.broadcast_to(np.arange(lo, lo + len(nb)), d.shape)
        d = np.concatenate([best_d, d], axis=1)
        ids = np.concatenate([best_i, ids], axis=1)
        kk = min(k, d.shape[1])
        part = np.argpartition(d, kk - 1, axis=1)[:, :kk]
        best_d = np.take_along_axis(d, part, 1)
        best_i = np.take_along_axis(ids, part, 1)
    order = np.argsort(best_d, axis=1, kind="stable")
    out = np.take_along_axis(best_i, order, 1)
    out[~np.isfinite(np.take_along_axis(best_d, order, 1))] = -1
    return out


def recall(found: list[np.ndarray] | np.ndarray, truth: np.ndarray) -> float:
    """Mean recall@k of found ids against the true ids (k = truth's width)."""
    hits = sum(len(np.intersect1d(f, t)) for f, t in zip(found, truth))
    return hits / truth.size
