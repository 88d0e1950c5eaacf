"""pgvector's vector functions over whole columns: what SQL expressions call.

The SQL layer evaluates an expression over a block of rows at once, so each
function here takes vectors as one ``(d,)`` vector or an ``(n, d)`` block
(one vector per row) and does the whole block in numpy, no loop per row:

* two arguments: a block and one vector (each row against the vector), two
  blocks of the same n (row by row), or two vectors;
* the result is float64 ``(n,)`` for a block, a float64 scalar for two vectors.

Definitions are pgvector's (src/vector.c), checked against its own test
expectations (test/expected/functions.out):

* ``l2_distance`` (``<->``) = sqrt(sum (a-b)^2); ``l1_distance`` (``<+>``) =
  sum |a-b|; ``inner_product`` = sum a*b, and ``<#>`` is its negation
  (:func:`negative_inner_product`);
* ``cosine_distance`` (``<=>``) = 1 - a.b / sqrt(|a|^2 |b|^2), the similarity
  clamped to [-1, 1] first (so a vector and a multiple of it are at exactly 0,
  opposite ones at 2), and NaN when either vector is zero (0/0: pgvector
  returns NaN there; the search kernels rank such rows at 1 instead);
* ``vector_norm`` = sqrt(sum a^2); ``l2_normalize`` = a / |a|, the zero vector
  for a zero vector, in the input's float type (f16 stays f16, else f32);
* ``subvector(v, start, count)``: elements start .. start+count-1, 1-based and
  clipped like substring(); a result with no element is an error.
* bit strings (bool blocks): ``hamming_distance`` (``<~>``) the positions that
  differ, ``jaccard_distance`` (``<%>``) 1 - shared set bits / set bits of
  either (1 where none is shared); ``binary_quantize`` a vector's bits (> 0).
* Vectors of different dimensions are an error (DimensionError, pgvector's
  "different vector dimensions 2 and 1").
* the btree order (ORDER BY, DISTINCT, GROUP BY, <, ...): element by element,
  then the dimensions, as pgvector's vector_cmp and PostgreSQL's bit strings
  (:func:`ranks` of one block's rows, :func:`compare` of two blocks row by row).

pgvector sums in float32; here every sum is float64, so results agree with
pgvector's to float32 rounding (and exceed it where a float32 sum would
overflow to infinity). NULLs are the caller's: blocks hold no missing rows.
"""
from __future__ import annotations

import numpy as np

from ..errors import DimensionError, FieldTypeError


def _vectors(v) -> np.ndarray:
    """One vector (d,) or a block (n, d) as a float array (any float type kept)."""
    a = np.asarray(v)
    if a.dtype == object:          # a column of separate vectors
        a = np.stack([np.asarray(x) for x in a]) if a.ndim == 1 else a
    if a.dtype.kind not in "fiub":      # (b: a bit string's bits)
        raise FieldTypeError(f"a vector holds numbers, got {a.dtype}")
    if a.ndim not in (1, 2) or a.shape[-1] < 1:
        raise DimensionError(f"vectors are a (d,) vector or an (n, d) block, got shape "
                             f"{a.shape}")
    return a


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = _vectors(a), _vectors(b)
    if a.shape[-1] != b.shape[-1]:
        raise DimensionError(f"different vector dimensions {a.shape[-1]} and {b.shape[-1]}")
    if a.ndim == b.ndim == 2 and len(a) != len(b):
        raise DimensionError(f"blocks of {len(a)} and {len(b)} vectors compared row by row")
    return a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)


def _dot(a: np.ndarray, b: np.ndarray):
    """Row-wise a.b in float64 (a block against a vector is a matrix-vector product)."""
    if a.ndim == 2 and b.ndim == 2:
        return np.einsum("ij,ij->i", a, b)
    return a @ b if b.ndim == 1 else b @ a


def _result(x):
    return np.float64(x) if np.ndim(x) == 0 else x


def l2_distance(a, b):
    """pgvector's ``l2_distance`` / ``<->``: the Euclidean distance, float64."""
    a, b = _pair(a, b)
    d = a - b
    return _result(np.sqrt(np.einsum("...j,...j->...", d, d)))


def l1_distance(a, b):
    """pgvector's ``l1_distance`` / ``<+>``: the taxicab distance sum |a-b|, float64."""
    a, b = _pair(a, b)
    return _result(np.abs(a - b).sum(axis=-1))


def hamming_distance(a, b):
    """pgvector's ``hamming_distance`` / ``<~>``: the positions where two bit
    vectors (0/1 values) differ, float64."""
    a, b = _pair(a, b)
    return _result((a != b).sum(axis=-1).astype(np.float64))


def inner_product(a, b):
    """pgvector's ``inner_product``: the plain dot product, float64."""
    a, b = _pair(a, b)
    return _result(_dot(a, b))


def negative_inner_product(a, b):
    """pgvector's ``<#>``: minus the dot product, float64 (smaller is nearer)."""
    return -inner_product(a, b)


def cosine_distance(a, b):
    """pgvector's ``cosine_distance`` / ``<=>``: 1 - clamp(a.b / sqrt(|a|^2 |b|^2)),
    NaN where either vector is zero."""
    a, b = _pair(a, b)
    aa = np.einsum("...j,...j->...", a, a)
    bb = np.einsum("...j,...j->...", b, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        similarity = _dot(a, b) / np.sqrt(aa * bb)
    return _result(1.0 - np.clip(similarity, -1.0, 1.0))   # clip keeps NaN


def jaccard_distance(a, b):
    """pgvector's ``jaccard_distance`` / ``<%>`` of bit strings: 1 - |a and b| /
    |a or b|, 1 where they share no set bit (two empty ones too), float64."""
    a, b = _pair(a, b)
    both = np.einsum("...j,...j->...", a, b)
    either = a.sum(axis=-1) + b.sum(axis=-1) - both
    with np.errstate(invalid="ignore", divide="ignore"):
        return _result(np.where(both > 0, 1.0 - both / either, 1.0))


def binary_quantize(v) -> np.ndarray:
    """pgvector's ``binary_quantize``: a bit per element, set where it is above 0."""
    return _vectors(v) > 0


def vector_dims(v):
    """pgvector's ``vector_dims``: d, as an int (one vector) or int64 (n,) (a block)."""
    a = _vectors(v)
    return a.shape[-1] if a.ndim == 1 else np.full(len(a), a.shape[-1], np.int64)


def vector_norm(v):
    """pgvector's ``vector_norm``: the Euclidean norm, float64."""
    a = _vectors(v).astype(np.float64, copy=False)
    return _result(np.sqrt(np.einsum("...j,...j->...", a, a)))


def l2_normalize(v) -> np.ndarray:
    """pgvector's ``l2_normalize``: each vector over its norm (a zero vector stays
    zero), computed in float64 and returned as float16 for f16 input, else float32."""
    a = _vectors(v)
    out_type = np.float16 if a.dtype == np.float16 else np.float32
    x = a.astype(np.float64, copy=False)
    norm = np.sqrt(np.einsum("...j,...j->...", x, x))[..., None]
    safe = np.where(norm > 0, norm, 1.0)     # zero vectors divide by 1: they stay zero
    return (x / safe).astype(out_type)


def subvector(v, start: int, count: int) -> np.ndarray:
    """pgvector's ``subvector``: ``count`` elements from 1-based ``start``, clipped
    to the vector like substring() (start 0, count 3 gives elements 1 and 2);
    the input's float type is kept. No element left is an error."""
    a = _vectors(v)
    start, count = int(start), int(count)
    end = min(start + count, a.shape[-1] + 1)
    start = max(start, 1)
    if end - start < 1:
        raise DimensionError("vector must have at least 1 dimension")
    return a[..., start - 1:end - 1].copy()


_KEY_ROWS = 4096         # rows whose sort keys are made at once (their temporaries in cache)


def ranks(rows: np.ndarray) -> np.ndarray:
    """Dense ranks of an (n, d) block's rows in the btree order (equal rows rank
    equal; -0 equals 0): each element as a big-endian unsigned key that orders as
    the float does, so that one sort of the rows' bytes orders them element by
    element (2-4x faster than one lexsort of d keys)."""
    if rows.dtype == np.bool_:
        key = rows.astype(np.uint8)
    else:
        key = np.empty(rows.shape, np.uint32)
        for i in range(0, len(rows), _KEY_ROWS):
            x = rows[i:i + _KEY_ROWS].astype(np.float32)    # (a copy: changed in place)
            x += np.float32(0)                              # -0 is 0
            # a negative float's bits all flipped, a positive one's sign bit set; the
            # bytes big-endian: memcmp orders them as the floats
            flip = (x.view(np.int32) >> 31).view(np.uint32)
            flip >>= 1
            flip |= np.uint32(0x80000000)
            bits = x.view(np.uint32)
            bits ^= flip
            key[i:i + _KEY_ROWS] = bits.byteswap()
    if not key.shape[1]:
        return np.zeros(len(rows), np.int64)
    whole = np.ascontiguousarray(key).view(np.dtype((np.void, key.itemsize * key.shape[1])))
    return np.unique(whole.ravel(), return_inverse=True)[1].ravel().astype(np.int64)


def compare(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """-1, 0 or 1 per row: (n, da) block a against (n, db) block b in the btree
    order: the first element that differs among the first min(da, db), else the
    dimensions."""
    m = min(a.shape[1], b.shape[1])
    differ = a[:, :m] != b[:, :m]
    first = np.argmax(differ, axis=1)
    rows = np.arange(len(a))
    at = np.sign(a[rows, first].astype(np.float64) - b[rows, first].astype(np.float64)) \
        if m else np.zeros(len(a))
    return np.where(differ.any(axis=1), at, np.sign(a.shape[1] - b.shape[1])).astype(np.int8)
