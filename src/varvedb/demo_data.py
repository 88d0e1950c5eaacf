"""The demo's data, and the bench's generated sets: clustered vectors (DESIGN's
generator), uniform noise, held-out queries and tags.

Clustered: 64 centres; each centre owns 32 random directions, and a vector is
its centre plus a Gaussian mix of those directions plus small isotropic noise
— low intrinsic dimension inside each cluster, like real embeddings. Uniform
random is the worst case for graph indexes. Tags are hashed from the id so
that `tag < 1` keeps ~1% and `tag < 25` ~25% of rows, whatever the order.
"""
from __future__ import annotations

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
    """n vectors of DESIGN's clustered distribution, generated in blocks."""
    return np.concatenate(list(generate(n, dim, "clustered", seed, block)) or
                          [np.empty((0, dim), np.float32)])


def uniform(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, dim)).astype(np.float32)


def generate(n: int, dim: int, distribution: str = "clustered", seed: int = 0,
             block: int = 65536):
    """Yield n vectors as (≤ block, dim) float32 blocks (the values depend on block:
    keep the default to reproduce cached data)."""
    rng = np.random.default_rng(seed)
    if distribution == "clustered":
        centres = rng.normal(0, 1, (CENTRES, dim)).astype(np.float32)
        dirs = rng.normal(0, 1, (CENTRES, DIRECTIONS, dim)).astype(np.float32)
        dirs /= np.linalg.norm(dirs, axis=2, keepdims=True)
    for lo in range(0, n, block):
        m = min(block, n - lo)
        if distribution == "clustered":
            c = rng.integers(0, CENTRES, m)
            coef = rng.normal(0, 0.35, (m, DIRECTIONS)).astype(np.float32)
            yield (centres[c] + np.einsum("md,mdk->mk", coef, dirs[c])
                   + rng.normal(0, 0.03, (m, dim)).astype(np.float32))
        else:
            yield rng.uniform(-1, 1, (m, dim)).astype(np.float32)


def make(rows: int, dim: int, queries: int = 1000, distribution: str = "clustered",
         seed: int = 0) -> Dataset:
    """Rows and held-out queries from one generator (queries are extra draws)."""
    gen = clustered if distribution == "clustered" else uniform
    allv = gen(rows + queries, dim, seed)
    return Dataset(allv[:rows], allv[rows:].copy(), distribution, seed)
