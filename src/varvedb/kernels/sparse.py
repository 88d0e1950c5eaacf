"""Sparse vectors (pgvector's sparsevec), row by row over two blocks.

A block (sparse.SparseBlock.parts) is (dims, istart, vstart, count, idx, vals):
row r has dims[r] dimensions and count[r] non-zero elements, its ascending
indices at idx[istart[r]:] and values at vals[vstart[r]:]. Two rows are
measured by one merge of their sorted index lists: an index in one list only
meets a zero in the other. Sums are float64 (pgvector's are float32: results
agree to float32 rounding). `ranks` orders one block's rows as pgvector's
btree does (ORDER BY, DISTINCT, GROUP BY, UNION, joins and < of sparsevecs).
"""
import math

import numpy as np

from .jit import njit

_JIT = dict(cache=True, nogil=True)
_INLINE = dict(_JIT, inline="always")

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


@njit(**_INLINE)
def _cmp(dims, ist, vst, cnt, idx, val, r, s):
    """pgvector's sparsevec_cmp of rows r and s: their dense forms compared element
    by element up to the lesser dimension, then the dimensions (-1, 0 or 1). At the
    first place their elements differ, a value facing the other's zero decides by its
    sign, as does one row's next value past the other's last."""
    ca, cb = cnt[r], cnt[s]
    pa, qa, pb, qb = ist[r], vst[r], ist[s], vst[s]
    for i in range(min(ca, cb)):
        ia, ib = idx[pa + i], idx[pb + i]
        xa, xb = val[qa + i], val[qb + i]
        if ia < ib:
            return -1 if xa < 0 else 1
        if ia > ib:
            return 1 if xb < 0 else -1
        if xa != xb:
            return -1 if xa < xb else 1
    if ca < cb and idx[pb + ca] < dims[r]:
        return 1 if val[qb + ca] < 0 else -1
    if ca > cb and idx[pa + cb] < dims[s]:
        return -1 if val[qa + cb] < 0 else 1
    if dims[r] != dims[s]:
        return -1 if dims[r] < dims[s] else 1
    return 0


@njit(readonly=("a",), **_JIT)
def ranks(a, out):
    """out[r] = the dense rank of a's row r in pgvector's order of sparsevecs (0: the
    least; equal rows, equal ranks): a bottom-up merge sort of the rows by _cmp, then
    one walk over the sorted rows."""
    dims, ist, vst, cnt, idx, val = a
    m = len(out)
    order = np.arange(m)
    tmp = np.empty(m, np.int64)
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid, hi = min(lo + width, m), min(lo + 2 * width, m)
            i, j = lo, mid
            for k in range(lo, hi):
                if j >= hi or (i < mid and _cmp(dims, ist, vst, cnt, idx, val,
                                                order[j], order[i]) >= 0):
                    tmp[k] = order[i]
                    i += 1
                else:
                    tmp[k] = order[j]
                    j += 1
        order, tmp = tmp, order
        width *= 2
    rank = 0
    for k in range(m):
        if k and _cmp(dims, ist, vst, cnt, idx, val, order[k - 1], order[k]) != 0:
            rank += 1
        out[order[k]] = rank
