"""Sparse vectors (pgvector's sparsevec), row by row over two blocks.

A block (sparse.SparseBlock.parts) is (dims, istart, vstart, count, idx, vals):
row r has dims[r] dimensions and count[r] non-zero elements, its ascending
indices at idx[istart[r]:] and values at vals[vstart[r]:]. Two rows are
measured by one merge of their sorted index lists: an index in one list only
meets a zero in the other. Sums are float64 (pgvector's are float32: results
agree to float32 rounding).
"""
import math

import numpy as np

from .jit import njit

_JIT = dict(cache=True, nogil=True)

L2, DOT, COSINE, L1 = 0, 1, 2, 3         # `metric` of pair_distances


@njit(readonly=("a", "b"), **_JIT)
def pair_distances(metric, a, b, out):
    """out[r] = the `metric` distance of a's row r and b's row r (DOT: the inner
    product; COSINE: 1 - the clamped similarity, NaN where either row is zero)."""
    _, ais, avs, acn, aidx, aval = a
    _, bis, bvs, bcn, bidx, bval = b
    for r in range(len(out)):
        i, j = 0, 0
        ca, cb = acn[r], bcn[r]
        pa, qa, pb, qb = ais[r], avs[r], bis[r], bvs[r]
        s, na, nb = 0.0, 0.0, 0.0
        while i < ca or j < cb:
            x, y = 0.0, 0.0
            if j >= cb or (i < ca and aidx[pa + i] < bidx[pb + j]):
                x = float(aval[qa + i])
                i += 1
            elif i >= ca or bidx[pb + j] < aidx[pa + i]:
                y = float(bval[qb + j])
                j += 1
            else:
                x = float(aval[qa + i])
                y = float(bval[qb + j])
                i += 1
                j += 1
            if metric == L2:
                s += (x - y) * (x - y)
            elif metric == L1:
                s += abs(x - y)
            else:
                s += x * y
                na += x * x
                nb += y * y
        if metric == L2:
            out[r] = math.sqrt(s)
        elif metric == COSINE:
            if na * nb > 0.0:
                out[r] = 1.0 - min(1.0, max(-1.0, s / math.sqrt(na * nb)))
            else:           # 0/0, as pgvector's
                out[r] = math.nan
        else:
            out[r] = s


@njit(readonly=("a", "b"), **_JIT)
def pair_equal(a, b, out):
    """out[r] = whether a's row r and b's row r are the same sparsevec."""
    adim, ais, avs, acn, aidx, aval = a
    bdim, bis, bvs, bcn, bidx, bval = b
    for r in range(len(out)):
        same = adim[r] == bdim[r] and acn[r] == bcn[r]
        k = 0
        while same and k < acn[r]:
            same = aidx[ais[r] + k] == bidx[bis[r] + k] and aval[avs[r] + k] == bval[bvs[r] + k]
            k += 1
        out[r] = same


@njit(readonly=("a",), **_JIT)
def norms(a, out):
    """out[r] = the Euclidean norm of a's row r."""
    _, _, avs, acn, _, aval = a
    for r in range(len(out)):
        s = 0.0
        for k in range(acn[r]):
            x = float(aval[avs[r] + k])
            s += x * x
        out[r] = math.sqrt(s)


@njit(readonly=("a",), **_JIT)
def to_dense(a, out):
    """out[r] = a's row r as a dense row (out zeroed by the caller)."""
    _, ais, avs, acn, aidx, aval = a
    for r in range(out.shape[0]):
        for k in range(acn[r]):
            out[r, aidx[ais[r] + k]] = aval[avs[r] + k]
