"""pgvector's sparsevec functions over whole columns (SparseBlocks, sparse.py):
the distance operators and functions, equality, l2_norm, l2_normalize, and
the casts to and from dense vectors. The work per row is a kernel's
(kernels/sparse.py); a NULL row (the caller's mask) is measured as an empty
vector and its answer ignored.

As pgvector: two sparse vectors of different dimensions are an error
(22000), a cast to sparsevec keeps the non-zero elements (at most 16 000,
else 54000) and a cast back gives the zeros again.
"""
from __future__ import annotations

import numpy as np

from ..errors import NotSupportedError, SqlError
from ..kernels import sparse as K
from ..sparse import MAX_NNZ, SparseBlock

_METRICS = {"<->": K.L2, "l2_distance": K.L2, "<#>": K.DOT, "inner_product": K.DOT,
            "<=>": K.COSINE, "cosine_distance": K.COSINE, "<+>": K.L1, "l1_distance": K.L1}
DISTANCES = frozenset(_METRICS)


def mixed_widths(what: str = "") -> NotSupportedError:
    """One result column holding vectors of different dimensions: PostgreSQL's may
    (a vector's width is its value's, not its column's); here a column's vectors
    share one width (a block of rows × dim)."""
    return NotSupportedError(f"vectors of different dimensions in one {what}column "
                             "are not supported")


def same_dims(a: SparseBlock, b: SparseBlock, nulls: np.ndarray) -> None:
    keep = ~nulls
    bad = keep & (a.dims != b.dims)
    if bad.any():
        r = int(np.argmax(bad))
        raise SqlError("22000", f"different sparsevec dimensions {a.dims[r]} and {b.dims[r]}")


def distance(name: str, a: SparseBlock, b: SparseBlock, nulls: np.ndarray) -> np.ndarray:
    """Row by row: l2, the inner product (<#>: its negation), cosine or l1 distance."""
    same_dims(a, b, nulls)
    out = np.empty(len(nulls), np.float64)
    K.pair_distances(_METRICS[name], a.parts(), b.parts(), out)
    return -out if name == "<#>" else out


def equal(a: SparseBlock, b: SparseBlock) -> np.ndarray:
    out = np.empty(len(a), np.bool_)
    K.pair_equal(a.parts(), b.parts(), out)
    return out


def norms(a: SparseBlock) -> np.ndarray:
    out = np.empty(len(a), np.float64)
    K.norms(a.parts(), out)
    return out


def normalize(a: SparseBlock) -> SparseBlock:
    """pgvector's l2_normalize: each row over its norm (a zero one stays zero)."""
    n = norms(a)
    count = a.count.astype(np.int64)
    row = np.repeat(np.arange(len(a)), count)
    within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    idx = a.idx[a.istart[row] + within]
    vals = a.vals[a.vstart[row] + within].astype(np.float64)
    vals = (vals / np.where(n > 0, n, 1.0)[row]).astype(np.float32)
    starts = np.cumsum(count) - count
    return SparseBlock(a.dims, starts, starts, a.count, idx, vals)


def from_dense(data: np.ndarray) -> SparseBlock:
    """vector / halfvec rows (n, d) as sparsevecs: their non-zero elements."""
    rows, cols = np.nonzero(data)
    count = np.bincount(rows, minlength=len(data)).astype(np.int32)
    if len(count) and count.max() > MAX_NNZ:
        raise SqlError("54000", f"sparsevec cannot have more than {MAX_NNZ} non-zero elements")
    starts = np.cumsum(count, dtype=np.int64) - count
    return SparseBlock(np.full(len(data), data.shape[1], np.int32), starts, starts, count,
                       cols.astype(np.int32), data[rows, cols].astype(np.float32))


def to_dense(a: SparseBlock, nulls: np.ndarray) -> np.ndarray:
    """sparsevec rows as a dense float32 block (n, dim): one dimension for all."""
    dims = np.unique(a.dims[~nulls])
    if len(dims) > 1:
        raise mixed_widths()
    out = np.zeros((len(a), int(dims[0]) if len(dims) else 0), np.float32)
    live = np.flatnonzero(~nulls)
    dense = np.zeros((len(live), out.shape[1]), np.float32)
    K.to_dense(a[live].parts(), dense)
    out[live] = dense
    return out
