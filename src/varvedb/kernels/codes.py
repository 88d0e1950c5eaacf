"""int8 scalar codes of arena rows: what a quantized HNSW graph walks on.

What this is for: ``vv.HNSW(quantize="int8")`` walks its graph on one byte per
dimension instead of four (or two): a measured row costs one or two cache
lines instead of four to eight, and the walk's best candidates are then
reranked exactly from the arena (:func:`varvedb.kernels.hnsw.search_one`).

The code of a value x in dimension j is ``c = round((x - lo_j) / step_j)``
clipped to 0..255 and stored as ``c - 128`` (int8), so the row it stands for is
``x̂_j = off_j + code_j * step_j`` with ``off_j = lo_j + 128 step_j``. Then

    x̂ · q = sum_j off_j q_j + codes · q',   q'_j = step_j q_j,

and the first term is the same for every row of one query, so the walk
measures ``codes · q'`` (the arena's dot kernel, on int8) and, for l2, the
row's ``|x̂|²`` (kept per row): ``|x̂ - q|² = |x̂|² - 2 codes · q' + const``.
Cosine rows are encoded normalized, so cosine walks as a dot product.

Rows are padded to a multiple of 64 bytes (``storage.format.code_width``), zeros past dim,
and the query's padding is zero: a short row is one cache line, and the
vectorised loop has no remainder.
"""
import numpy as np

from .distance import as_f32
from .jit import njit

@njit(cache=True, nogil=True, fastmath=True, readonly=("rows", "lo", "step"))
def encode_rows(arena, norms, rows, normalize, lo, step, codes, code_norms):
    """Write the codes of ``arena[rows]`` into ``codes[rows]`` and ``|x̂|²`` into
    ``code_norms[rows]``; with ``normalize`` each row is divided by its norm first."""
    dim = lo.shape[0]
    for i in range(rows.shape[0]):
        r = rows[i]
        scale = np.float32(1.0)
        if normalize and norms[r] > 0.0:
            scale = np.float32(1.0) / norms[r]
        sq = np.float32(0.0)
        for j in range(dim):
            c = np.floor((as_f32(arena[r, j]) * scale - lo[j]) / step[j] + np.float32(0.5))
            c = min(max(c, np.float32(0.0)), np.float32(255.0))
            codes[r, j] = np.int8(np.int32(c) - 128)
            x = lo[j] + c * step[j]
            sq += x * x
        for j in range(dim, codes.shape[1]):
            codes[r, j] = 0
        code_norms[r] = sq


def fit(sample: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension ``(lo, step)`` (float32) from a sample of (normalized) rows.

    The range is the 0.1 % .. 99.9 % quantiles, not min .. max: one outlier
    would otherwise spend the 256 levels of its dimension on empty space. Rows
    outside the range are clipped; the exact rerank repairs their order.
    """
    sample = np.asarray(sample, np.float32)
    if len(sample) and max(sample.max(), -sample.min()) >= 2.0 ** 126:
        # in float64: a span of values near float32's largest on both sides of 0 is
        # past it (an infinite step), its 255th part is not
        lo, hi = np.quantile(sample.astype(np.float64), [0.001, 0.999], axis=0)
        return (np.ascontiguousarray(lo.astype(np.float32)),
                np.ascontiguousarray((np.maximum(hi - lo, 1e-30) / 255.0).astype(np.float32)))
    lo, hi = np.quantile(sample, [0.001, 0.999], axis=0).astype(np.float32)
    span = np.maximum(hi - lo, np.float32(1e-30))
    return np.ascontiguousarray(lo), np.ascontiguousarray(span / np.float32(255.0))


def scaled_query(query: np.ndarray, step: np.ndarray, width: int) -> np.ndarray:
    """The query the codes are measured against: ``step * q``, zero-padded to width.
    With a step past 1 a huge query's overflows (silently: the walk refuses such a
    query, distance.code_query_fits, and its caller makes it again in float64)."""
    out = np.zeros(query.shape[:-1] + (width,), np.float32)
    if step_past_one(step):
        with np.errstate(over="ignore"):
            out[..., :step.shape[0]] = query * step
    else:
        out[..., :step.shape[0]] = query * step
    return out


def step_past_one(step: np.ndarray) -> bool:
    """Can ``step * q`` of a finite float32 query overflow (a step past 1)?"""
    return bool(step.max(initial=0.0) > 1.0)
