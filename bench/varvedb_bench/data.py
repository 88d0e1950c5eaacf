"""The bench's data on disk and its measures: generated sets written as .npy
block by block (varvedb.demo_data's generator), rows read back in blocks, exact
ground truth, recall.
"""
from __future__ import annotations

import os

import numpy as np

from varvedb.demo_data import generate


def write_npy(vectors_path: str, queries_path: str, rows: int, dim: int, queries: int,
              distribution: str = "clustered", seed: int = 0, progress=None,
              half: bool = False) -> None:
    """Rows and held-out queries (the next draws of the same stream) written as .npy
    files block by block, so that memory stays flat whatever the size. `half`
    rounds the values to float16 (still written as float32, for every peer)."""
    out = np.lib.format.open_memmap(vectors_path + ".part", "w+", np.float32, (rows, dim))
    qs = np.empty((queries, dim), np.float32)
    at = 0
    for b in generate(rows + queries, dim, distribution, seed):
        if half:
            b = b.astype(np.float16).astype(np.float32)
        lo, hi = at, at + len(b)
        if lo < rows:
            out[lo:min(hi, rows)] = b[:rows - lo]
        if hi > rows:
            qs[max(lo, rows) - rows:hi - rows] = b[max(0, rows - lo):]
        at = hi
        if progress:
            progress(len(b))
    out.flush()
    del out
    np.save(queries_path, qs)
    os.replace(vectors_path + ".part", vectors_path)


class VectorFile:
    """Rows of a float32 .npy matrix, read in blocks with plain file reads.

    The bytes pass through the page cache, not through a mapping, so they are
    never counted in this process's resident memory: a worker's peak memory
    is the engine's, plus one block.
    """

    def __init__(self, path: str):
        self.path = path
        header = np.load(path, mmap_mode="r")   # parses the header; touches no rows
        assert header.dtype == np.float32 and header.ndim == 2 and header.flags.c_contiguous
        self.shape = header.shape
        self.offset = header.offset
        del header

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def dim(self) -> int:
        return self.shape[1]

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Rows lo..hi as a fresh (hi - lo, dim) float32 array."""
        hi = min(hi, len(self))
        out = np.empty((max(0, hi - lo), self.dim), np.float32)
        with open(self.path, "rb") as f:
            f.seek(self.offset + lo * self.dim * 4)
            f.readinto(memoryview(out).cast("B"))
        return out

    def blocks(self, size: int = 50_000):
        """Yield (first row, block) over all rows."""
        for lo in range(0, len(self), size):
            yield lo, self.read(lo, lo + size)


def exact_topk(x: np.ndarray, queries: np.ndarray, k: int, metric: str,
               allow: np.ndarray | None = None, block: int = 65536) -> np.ndarray:
    """Exact top-k row numbers for each query: blocked GEMM, merged per block."""
    return exact_topk_many(x, queries, k, metric, {"": allow}, block)[""]


def exact_topk_many(x: np.ndarray, queries: np.ndarray, k: int, metric: str,
                    allows: dict, block: int = 65536, progress=None) -> dict:
    """Exact top-k row numbers for each query under each allow mask (None = all rows).

    One blocked GEMM pass serves every mask; x may be a memory map, read one
    block at a time. A slot with no allowed row left is -1.
    """
    qn = np.linalg.norm(queries, axis=1)
    best = {name: (np.full((len(queries), 0), np.inf, np.float32),
                   np.zeros((len(queries), 0), np.int64)) for name in allows}
    for lo in range(0, len(x), block):
        xb = np.asarray(x[lo:lo + block], np.float32)
        nb = np.sqrt(np.einsum("ij,ij->i", xb, xb))
        s = queries @ xb.T
        if metric == "dot":
            d = -s
        elif metric == "cosine":
            d = 1 - s / np.maximum(np.outer(qn, nb), 1e-30)
        else:
            d = nb[None, :] ** 2 - 2 * s + (qn ** 2)[:, None]
        ids = np.broadcast_to(np.arange(lo, lo + len(nb)), d.shape)
        for name, allow in allows.items():
            dm = d if allow is None else np.where(allow[lo:lo + block][None, :], d, np.inf)
            bd, bi = best[name]
            dm = np.concatenate([bd, dm], axis=1)
            im = np.concatenate([bi, ids], axis=1)
            kk = min(k, dm.shape[1])
            part = np.argpartition(dm, kk - 1, axis=1)[:, :kk]
            best[name] = (np.take_along_axis(dm, part, 1), np.take_along_axis(im, part, 1))
        if progress:
            progress(len(nb))
    out = {}
    for name, (bd, bi) in best.items():
        order = np.argsort(bd, axis=1, kind="stable")
        top = np.take_along_axis(bi, order, 1)
        top[~np.isfinite(np.take_along_axis(bd, order, 1))] = -1
        out[name] = top
    return out


def recall(found: list[np.ndarray] | np.ndarray, truth: np.ndarray) -> float:
    """Mean recall@k of found ids against the true ids of the first len(found)
    queries (k = truth's width; -1 slots, where fewer than k rows qualify, are not counted)."""
    truth = truth[:len(found)]
    hits = sum(len(np.intersect1d(f, t[t >= 0])) for f, t in zip(found, truth, strict=True))
    return hits / max(1, int((truth >= 0).sum()))
