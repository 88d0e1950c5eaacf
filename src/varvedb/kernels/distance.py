"""Distance kernels between query vectors and rows of a vector arena.

What this is for: every vector index (HNSW walk, graph build, exact scan)
measures distances between a query and arena rows, and between two arena rows.
These numba functions are that inner loop, and nothing else.

Why this layout:

* The arena is one C-contiguous 2-D array, shape ``(n_rows, dim)``, rows
  addressed by row number. It is float32, or float16 passed in as its raw
  ``uint16`` bit view: numba 0.68 has no CPU float16 type, and a float32 copy
  would double the memory of an f16 arena. :func:`as_f32` widens one half
  precision value with LLVM's ``fpext half -> float``; the loop vectoriser turns
  that into ``vcvtph2ps`` (F16C/AVX-512), so an f16 row costs about what an f32
  row costs while moving half the bytes.
  An int8 arena (``dtype="int8"`` fields) is widened the same way, by
  ``sitofp``: its distances are exactly the float distances of the integers.
  A bit arena (``dtype="bit"``) is uint8, ``ceil(dim / 8)`` packed bytes a row
  (big-endian bit order, as ``np.packbits`` and pgvector's ``bit`` type), and
  is measured only by ``METRIC_HAMMING``: XOR and popcount, 8 bytes a step.
* Queries are float32 vectors of shape ``(dim,)``; a bit arena's query is
  packed like its rows (uint8, same width), and so is the build's row buffer
  (:func:`load_row` copies bytes into a uint8 buffer). Loops are plain
  ``for j in range(dim)`` reductions under ``fastmath`` so LLVM reassociates
  them into wide FMA accumulators.
* Metrics are small integer codes so one compiled kernel serves them all; the
  branch sits outside the loop and is perfectly predicted. The graph metrics
  (``GRAPH_METRIC_CODES``: what an HNSW graph is built and walked for) are
  l2, dot and cosine; ``METRIC_L1`` is answered by the exact scan only
  (:func:`l1_query`), so the walk's :func:`query_distance` never branches on it.

Internal distances are monotone in the reported ones, smaller is nearer:

* ``METRIC_L2``: squared Euclidean distance (the returned rows are rescored
  exactly, as pgvector reports them, by :func:`rank_rows`).
* ``METRIC_DOT``: negative inner product (pgvector's ``<#>``).
* ``METRIC_COSINE``: ``1 - dot / (|x| |q|)`` using the caller's row norms; a
  zero norm on either side gives exactly 1 (pgvector's ``<=>`` is NaN there;
  1 ranks such rows as orthogonal rather than poisoning the heap).
* ``METRIC_L1``: the taxicab distance ``sum |x - q|`` (pgvector's ``<+>``).
* ``METRIC_HAMMING``: the number of differing bits (pgvector's ``<~>``), as a
  float; the only metric of bit arenas, and of no other. The kernels compile
  its branch for every arena type (the metric is a run-time value), so for
  non-bit types :func:`hamming_query` / :func:`hamming_rows` compile to a
  constant, and the float metrics' helpers type for uint8 (never run there).

Invariants: kernels never write to the arena or the norms. Arena values are
finite (the engine rejects NaN and inf before they reach the arena), so the
kernels may run under ``fastmath``, which assumes no NaN or infinity; for the
same reason callers use a large finite sentinel, never ``inf``, inside kernels.
"""

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .jit import njit

METRIC_L2 = 0
METRIC_DOT = 1
METRIC_COSINE = 2
METRIC_L1 = 3
METRIC_HAMMING = 4   # bit arenas only
# The walk on int8 codes (kernels.codes): the arena is the codes, the query the
# scaled query q' (q'_j = scale_j q_j), so x̂·q = codes·q' + a constant of the
# query, and the norms are |x̂|² of each row. Constants of the query are
# dropped: a walk only compares distances to one query. Never stored in a file.
METRIC_CODE_L2 = 10    # |x̂ - q|² up to a constant: |x̂|² - 2 codes·q'
METRIC_CODE_DOT = 11   # -x̂·q up to a constant (dot, and cosine on unit rows)
# The walk on product-quantizer codes (kernels.pq): the arena is the codes (uint8,
# m a row), the query the flattened (m, 256) table of the query's part of each
# sub-centroid's distance; a row's distance is the sum of its m entries.
METRIC_CODE_PQ = 12
# l2 of a query whose largest |element| is 2**41 or more (scaled_metric): its float32
# |x - q|^2 overflows (every row inf, the walk blind), and scaling the query alone
# changes l2's ranking; scaling both the row and the query by L2_SCALE (a power of
# two) does not, so the walk measures |x L2_SCALE - q L2_SCALE|^2 (scaled_query
# gives q L2_SCALE: in [2**-46, 2**41), its square in float32's range). The int8
# codes' l2 of such a query: L2_SCALE |x̂|² - 2 codes·(q' L2_SCALE) (the caller
# scales q', index/hnsw.py). Never stored in a file.
METRIC_L2_SCALED = 13
METRIC_CODE_L2_SCALED = 14
L2_SCALE = np.float32(2.0 ** -87)

GRAPH_METRIC_CODES = {"l2": METRIC_L2, "dot": METRIC_DOT, "cosine": METRIC_COSINE,
                      "hamming": METRIC_HAMMING}
METRIC_CODES = {**GRAPH_METRIC_CODES, "l1": METRIC_L1}   # l1: exact scan only

_CACHE_LINE_BYTES = 64

_JIT = dict(cache=True, nogil=True, fastmath=True)
# Inlined into their callers at numba's IR level: a call to a separate
# compiled function passes each array as a struct and pays two atomic
# reference-count updates per array, which costs more than the distance.
# (kernels.jit gives inlined functions no disk cache: they are never compiled alone.)
_INLINE = dict(_JIT, inline="always")


def _widen(value):
    """The codegen that widens one arena element of numba type ``value`` to
    float32, or None for a type no arena holds."""
    if value == types.uint16:

        def widen_half(context, builder, signature, args):
            half = builder.bitcast(args[0], ir.HalfType())
            return builder.fpext(half, ir.FloatType())

        return widen_half
    if value == types.int8:
        return lambda context, builder, signature, args: builder.sitofp(
            args[0], ir.FloatType())
    if value == types.uint8:    # a byte of packed bits: typed for the float metrics' code
        return lambda context, builder, signature, args: builder.uitofp(
            args[0], ir.FloatType())
    if value == types.float32:
        return lambda context, builder, signature, args: args[0]
    return None


@intrinsic
def as_f32(typingctx, value):
    """Widen one arena element to float32: uint16 holds f16 bits, int8 its
    integer, float32 passes."""
    codegen = _widen(value)
    return None if codegen is None else (types.float32(value), codegen)


@intrinsic
def half_bits(typingctx, value):
    """One float32 rounded to the nearest float16 (LLVM's ``fptrunc``; past its
    range, infinity), as its bits in a uint16: what :func:`as_f32` widens back."""
    if value != types.float32:
        return None

    def narrow(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(value), narrow


@intrinsic
def _as_buffer_element(typingctx, value):
    """An arena element as :func:`load_row`'s buffer holds it: float32, but a
    byte of packed bits stays that byte (a bit row's buffer is uint8)."""
    if value == types.uint8:
        return types.uint8(value), lambda context, builder, signature, args: args[0]
    codegen = _widen(value)
    return None if codegen is None else (types.float32(value), codegen)


@intrinsic
def _popcount(typingctx, word):
    """The number of set bits of an unsigned 64- or 8-bit integer (llvm.ctpop: one
    ``popcnt`` instruction on x86-64), as int64."""
    if word not in (types.uint64, types.uint8):
        return None

    def codegen(context, builder, signature, args):
        width = word.bitwidth
        ty = ir.IntType(width)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty]),
                                            f"llvm.ctpop.i{width}")
        return builder.zext(builder.call(fn, [args[0]]), ir.IntType(64))

    return types.int64(word), codegen


def _word_at(context, builder, array_type, array_value, indices):
    """The 8 bytes from ``array[indices]`` onward loaded as one uint64 (unaligned)."""
    array = context.make_array(array_type)(context, builder, array_value)
    pointer = cgutils.get_item_pointer(context, builder, array_type, array, indices,
                                       wraparound=False)
    word_pointer = builder.bitcast(pointer, ir.PointerType(ir.IntType(64)))
    return builder.load(word_pointer, align=1)


@intrinsic
def _row_word(typingctx, arena, row, col):
    """Bytes ``arena[row, col:col + 8]`` of a 2-D uint8 array read as one uint64."""
    if not (isinstance(arena, types.Array) and arena.ndim == 2 and arena.dtype == types.uint8):
        return None

    def codegen(context, builder, signature, args):
        indices = [context.cast(builder, value, typ, types.intp)
                   for value, typ in zip(args[1:], signature.args[1:])]
        return _word_at(context, builder, signature.args[0], args[0], indices)

    return types.uint64(arena, row, col), codegen


@intrinsic
def _vector_word(typingctx, vector, col):
    """Bytes ``vector[col:col + 8]`` of a 1-D uint8 array read as one uint64."""
    if not (isinstance(vector, types.Array) and vector.ndim == 1
            and vector.dtype == types.uint8):
        return None

    def codegen(context, builder, signature, args):
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        return _word_at(context, builder, signature.args[0], args[0], [index])

    return types.uint64(vector, col), codegen


@intrinsic
def _f32_bits(typingctx, value):
    """The IEEE bits of a float32 as uint32 (a bit cast, no array view: numba's
    ``ndarray.view`` lives in a module that loading a cached kernel would import)."""
    if value == types.uint8:
        # a packed bit query has no NaN: all_finite sees bits that test clean
        return types.uint32(value), lambda context, builder, signature, args: \
            ir.Constant(ir.IntType(32), 0)
    if value != types.float32:
        return None

    def bitcast(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(value), bitcast


def _prefetch(context, builder, signature, args):
    # llvm.prefetch of the element args[0][args[1:]]: never faults, whatever the address
    array_type = signature.args[0]
    array = context.make_array(array_type)(context, builder, args[0])
    indices = [context.cast(builder, value, typ, types.intp)
               for value, typ in zip(args[1:], signature.args[1:])]
    pointer = cgutils.get_item_pointer(
        context, builder, array_type, array, indices, wraparound=False
    )
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [ir.PointerType(), i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
    # read access, keep in all cache levels, data cache
    builder.call(
        fn, [builder.bitcast(pointer, ir.PointerType()), ir.Constant(i32, 0),
             ir.Constant(i32, 3), ir.Constant(i32, 1)]
    )
    return context.get_dummy_value()


@intrinsic
def _prefetch_element(typingctx, arena, row, col):
    """Hint the CPU to pull the cache line of ``arena[row, col]`` into L1."""
    if not (isinstance(arena, types.Array) and arena.ndim == 2):
        return None
    return types.void(arena, row, col), _prefetch


@intrinsic
def _prefetch_item(typingctx, vector, i):
    """Hint the CPU to pull the cache line of ``vector[i]`` (1-D) into L1."""
    if not (isinstance(vector, types.Array) and vector.ndim == 1):
        return None
    return types.void(vector, i), _prefetch


@intrinsic
def unmanaged(typingctx, array):
    """The same array without its reference-counted owner (meminfo = NULL).

    Numba brackets every inlined helper that takes an array with atomic
    reference-count updates when the helper has several exits (the metric
    branches do), and in a walk's inner loop those locked instructions cost
    more than the distance itself. A kernel takes unmanaged views of its
    arguments once, on entry; the caller's references keep the memory alive
    for the whole call, so nothing is lost by not counting.
    """
    if not isinstance(array, types.Array):
        return None

    def strip_owner(context, builder, signature, args):
        source = context.make_array(signature.args[0])(context, builder, args[0])
        view = context.make_array(signature.return_type)(context, builder)
        for field in ("data", "shape", "strides", "itemsize", "nitems"):
            setattr(view, field, getattr(source, field))
        view.meminfo = context.get_constant_null(types.MemInfoPointer(types.voidptr))
        view.parent = context.get_constant_null(types.pyobject)
        return view._getvalue()

    return array(array), strip_owner


@njit(**_INLINE)
def prefetch_row(arena, row):
    """Start loading every cache line of one arena row; returns at once."""
    step = _CACHE_LINE_BYTES // arena.itemsize
    for col in range(0, arena.shape[1], step):
        _prefetch_element(arena, row, col)


@njit(**_INLINE)
def prefetch_norm(norms, row, metric):
    """Start loading ``norms[row]`` where ``metric`` reads it (cosine, int8 codes
    under l2). A walk that prefetched a row but not its norm waited on the norm
    at every distance (issue 32)."""
    if metric == METRIC_COSINE or metric == METRIC_CODE_L2 or metric == METRIC_CODE_L2_SCALED:
        _prefetch_item(norms, row)


@njit(**_INLINE)
def _dot_query(arena, row, query):
    acc = np.float32(0.0)
    for j in range(query.shape[0]):
        acc += as_f32(arena[row, j]) * query[j]
    return acc


@njit(**_INLINE)
def _l2sq_query(arena, row, query):
    acc = np.float32(0.0)
    for j in range(query.shape[0]):
        diff = as_f32(arena[row, j]) - query[j]
        acc += diff * diff
    return acc


@njit(**_INLINE)
def _l2sq_scaled(arena, row, query):
    # METRIC_L2_SCALED: the row scaled as the query was (x L2_SCALE - q L2_SCALE:
    # the product is rounded before the difference, which cannot overflow)
    acc = np.float32(0.0)
    for j in range(query.shape[0]):
        diff = as_f32(arena[row, j]) * L2_SCALE - query[j]
        acc += diff * diff
    return acc


@njit(**_INLINE)
def l1_query(arena, row, query):
    """L1 distance (float32) from ``query`` to ``arena[row]``: the exact scan's only."""
    acc = np.float32(0.0)
    for j in range(query.shape[0]):
        acc += abs(as_f32(arena[row, j]) - query[j])
    return acc


@njit(**_INLINE)
def _dot_rows(arena, a, b):
    acc = np.float32(0.0)
    for j in range(arena.shape[1]):
        acc += as_f32(arena[a, j]) * as_f32(arena[b, j])
    return acc


@njit(**_INLINE)
def _l2sq_rows(arena, a, b):
    acc = np.float32(0.0)
    for j in range(arena.shape[1]):
        diff = as_f32(arena[a, j]) - as_f32(arena[b, j])
        acc += diff * diff
    return acc


def hamming_query(arena, row, query):
    """Differing bits (float32) between packed ``query`` and packed ``arena[row]``."""
    raise NotImplementedError("a numba kernel helper")   # overloaded below


def hamming_rows(arena, a, b):
    """Differing bits (float32) between packed arena rows ``a`` and ``b``."""
    raise NotImplementedError("a numba kernel helper")


def _is_bits(array) -> bool:
    return isinstance(array, types.Array) and array.dtype == types.uint8


def pq_code_sum(arena, row, query):
    """``sum_j query[256 j + arena[row, j]]``: a PQ-coded row's distance (float32)."""
    raise NotImplementedError("a numba kernel helper")   # overloaded below


@overload(pq_code_sum, fastmath=True)
def _pq_code_sum_impl(arena, row, query):
    if not (_is_bits(arena) and isinstance(query, types.Array)
            and query.dtype == types.float32):
        return lambda arena, row, query: np.float32(0.0)   # not a code walk: never run

    def total(arena, row, query):
        acc = np.float32(0.0)
        for j in range(arena.shape[1]):
            acc += query[j * 256 + arena[row, j]]
        return acc

    return total


@overload(hamming_query, fastmath=True)
def _hamming_query_impl(arena, row, query):
    if not (_is_bits(arena) and _is_bits(query)):
        return lambda arena, row, query: np.float32(0.0)   # not a bit arena: never run

    def count(arena, row, query):
        width = query.shape[0]
        whole = width - width % 8
        acc = 0
        for j in range(0, whole, 8):
            acc += _popcount(_row_word(arena, row, j) ^ _vector_word(query, j))
        for j in range(whole, width):
            acc += _popcount(arena[row, j] ^ query[j])
        return np.float32(acc)

    return count


@overload(hamming_rows, fastmath=True)
def _hamming_rows_impl(arena, a, b):
    if not _is_bits(arena):
        return lambda arena, a, b: np.float32(0.0)

    def count(arena, a, b):
        width = arena.shape[1]
        whole = width - width % 8
        acc = 0
        for j in range(0, whole, 8):
            acc += _popcount(_row_word(arena, a, j) ^ _row_word(arena, b, j))
        for j in range(whole, width):
            acc += _popcount(arena[a, j] ^ arena[b, j])
        return np.float32(acc)

    return count


@njit(**_INLINE)
def cosine_from_dot(dot, norm_a, norm_b):
    if norm_a == 0.0 or norm_b == 0.0:
        return np.float32(1.0)
    return np.float32(1.0) - dot / (norm_a * norm_b)


@njit(**_INLINE)
def all_finite(query):
    """True when no element of a float32 vector is NaN or infinite.

    Tested on the exponent bits, because ``fastmath`` lets the compiler assume
    that floating-point NaN tests are false.
    """
    exponent = np.uint32(0x7F800000)
    bad = False
    for j in range(query.shape[0]):
        bad |= (_f32_bits(query[j]) & exponent) == exponent
    return not bad


# scaled_query's range for the largest |element| of a dot or cosine query: [2**-40, 2**41)
_SCALED_LOW = np.uint32((127 - 40) << 23)
_SCALED_HIGH = np.uint32((127 + 41) << 23)


@njit(**_INLINE)
def scaled_query(query, metric):
    """``query`` as the float32 scores take it: itself, or for dot, cosine and the
    int8 codes' dot (``METRIC_CODE_DOT``: an int8 walk's query is the dot query times
    the codes' step; ranking by any of them a positive factor leaves as it is) a
    copy scaled by a power of two when
    its largest |element| is past 2**40 or under 2**-40: a float32 dot or norm of a
    larger one overflows (an inf or NaN score, never ranked right), of a smaller one
    underflows (an error no bound relative to the query covers). The copy's largest
    |element| is in [1, 2); the exact float64 scores take ``query`` as it is.
    ``METRIC_L2_SCALED`` (scaled_metric): the query times L2_SCALE, as its rows are."""
    if metric == METRIC_L2_SCALED:
        out = np.empty_like(query)
        for j in range(query.shape[0]):
            out[j] = query[j] * L2_SCALE
        return out
    if metric != METRIC_DOT and metric != METRIC_COSINE and metric != METRIC_CODE_DOT:
        return query
    top = np.uint32(0)
    for j in range(query.shape[0]):
        top = max(top, _f32_bits(query[j]) & np.uint32(0x7FFFFFFF))
    if top == 0 or (_SCALED_LOW <= top and top < _SCALED_HIGH):
        return query
    power = np.int64(top >> np.uint32(23)) - 127
    if power == -127:               # subnormal: its highest bit
        power = -150
        while top:
            top >>= np.uint32(1)
            power += 1
    factor = 2.0 ** -power
    out = np.empty_like(query)
    for j in range(query.shape[0]):
        out[j] = np.float64(query[j]) * factor
    return out


@njit(**_INLINE)
def scaled_metric(query, metric):
    """The metric a float32 walk or scan measures ``query`` by: METRIC_L2_SCALED for
    an l2 query whose largest |element| is 2**41 or more, else ``metric``."""
    if metric != METRIC_L2:
        return metric
    top = np.uint32(0)
    for j in range(query.shape[0]):
        top = max(top, _f32_bits(query[j]) & np.uint32(0x7FFFFFFF))
    return METRIC_L2_SCALED if top >= _SCALED_HIGH else metric


@njit(**_INLINE)
def _top_bits(query):
    # the largest |element|'s bits (an infinity's or NaN's past every finite one's)
    top = np.uint32(0)
    for j in range(query.shape[0]):
        top = max(top, _f32_bits(query[j]) & np.uint32(0x7FFFFFFF))
    return top


@njit(**_INLINE)
def code_query_fits(query, walk_query, walk_metric):
    """Does an int8 walk's query ``walk_query`` (``step q`` made in float32 by the
    caller, of the finite ``query``) measure codes as ``query`` would? Not when it
    is past float32's range (an overflow) or, for METRIC_CODE_DOT, its largest
    |element| is outside scaled_query's range (under 2**-40 it underflowed: a tiny
    query's lost its digits, a subnormal one's may be all zeros), nor for
    METRIC_CODE_L2 when ``query`` is past 2**41 (the l2 distances overflow:
    METRIC_CODE_L2_SCALED). The caller then makes it again in float64."""
    if walk_metric == METRIC_CODE_L2:
        return all_finite(walk_query) and _top_bits(query) < _SCALED_HIGH
    if walk_metric == METRIC_CODE_DOT:
        top = _top_bits(walk_query)
        return (_SCALED_LOW <= top and top < _SCALED_HIGH) or (
            top == 0 and _top_bits(query) == 0)
    return True


@njit(**_INLINE)
def query_norm(query, metric):
    """L2 norm of a float32 query when the metric needs it, else 0 (float32)."""
    if metric != METRIC_COSINE:
        return np.float32(0.0)
    acc = np.float32(0.0)
    for j in range(query.shape[0]):
        acc += query[j] * query[j]
    return np.float32(np.sqrt(acc))


@njit(**_INLINE)
def query_distance(arena, norms, row, query, q_norm, metric):
    """Internal distance (float32, smaller is nearer) from ``query`` to ``arena[row]``."""
    if metric == METRIC_L2:
        return _l2sq_query(arena, row, query)
    if metric == METRIC_HAMMING:
        return hamming_query(arena, row, query)
    if metric == METRIC_CODE_PQ:
        return pq_code_sum(arena, row, query)
    if metric == METRIC_L2_SCALED:
        return _l2sq_scaled(arena, row, query)
    dot = _dot_query(arena, row, query)
    if metric == METRIC_DOT or metric == METRIC_CODE_DOT:
        return -dot
    if metric == METRIC_CODE_L2:
        return norms[row] - np.float32(2.0) * dot
    if metric == METRIC_CODE_L2_SCALED:
        return norms[row] * L2_SCALE - np.float32(2.0) * dot
    return cosine_from_dot(dot, norms[row], q_norm)


@njit(**_INLINE)
def row_distance(arena, norms, a, b, metric):
    """Internal distance (float32) between arena rows ``a`` and ``b``."""
    if metric == METRIC_L2:
        return _l2sq_rows(arena, a, b)
    if metric == METRIC_HAMMING:
        return hamming_rows(arena, a, b)
    dot = _dot_rows(arena, a, b)
    if metric == METRIC_DOT:
        return -dot
    return cosine_from_dot(dot, norms[a], norms[b])


@njit(**_INLINE)
def load_row(arena, row, out):
    """Copy one arena row into the buffer ``out`` (shape ``(dim,)``): float32, or
    uint8 for a bit arena (its packed bytes, the form of its queries)."""
    for j in range(out.shape[0]):
        out[j] = _as_buffer_element(arena[row, j])


# What _sum4 adds up per element: x*q, (x-q)^2 or |x-q|.
_PRODUCT, _SQUARED_DIFF, _ABS_DIFF, _SQUARE = 0, 1, 2, 3   # (_SQUARE: x * x, a row's own)


@njit(nogil=True, inline="always")   # no fastmath: part of _sum4's exact sums
def _term(x, q, kind):
    if kind == _PRODUCT:
        return x * q
    d = x - q
    return d * d if kind == _SQUARED_DIFF else abs(d)


def _widen_lanes(builder, vector, element):
    """Four arena or query elements of numba type ``element`` as <4 x double>,
    exactly (each widening is exact, as as_f32's then float64's are)."""
    f64x4 = ir.VectorType(ir.DoubleType(), 4)
    if element == types.uint16:     # float16 bits
        return builder.fpext(builder.bitcast(vector, ir.VectorType(ir.HalfType(), 4)), f64x4)
    if element == types.int8:
        return builder.sitofp(vector, f64x4)
    if element == types.uint8:
        return builder.uitofp(vector, f64x4)
    return builder.fpext(vector, f64x4)


def _lanes_typed(arena, query) -> bool:
    # four consecutive elements are loaded as one: only C-contiguous rows and queries
    # (another layout is a typing error here, never a strided read past the row)
    return (isinstance(arena, types.Array) and arena.layout == "C"
            and _widen(arena.dtype) is not None and isinstance(query, types.Array)
            and query.layout == "C" and _widen(query.dtype) is not None)


def _lanes(context, builder, arena_t, query_t, arena, query, rows, sums):
    """The loop of the lane intrinsics below: for each (i, term) of ``sums``, the
    four partial sums of ``term`` over arena row ``rows[i]`` and the query (lane l:
    columns l, l + 4, ... in that order, to ``dim - dim % 4``), each sum its own
    <4 x double> accumulator, all in one pass; the lanes, sum after sum."""
    rows_a = context.make_array(arena_t)(context, builder, arena)
    vec = context.make_array(query_t)(context, builder, query)
    dim = builder.extract_value(vec.shape, 0)
    main = builder.and_(dim, ir.Constant(dim.type, -4))
    f64x4 = ir.VectorType(ir.DoubleType(), 4)
    accs = [cgutils.alloca_once_value(builder, ir.Constant(f64x4, [0.0] * 4)) for _ in sums]

    def load4(array_t, array, indices):
        pointer = cgutils.get_item_pointer(context, builder, array_t, array, indices,
                                           wraparound=False)
        width = context.get_data_type(array_t.dtype)
        lanes = builder.bitcast(pointer, ir.VectorType(width, 4).as_pointer())
        return _widen_lanes(builder, builder.load(lanes, align=1), array_t.dtype)

    with cgutils.for_range_slice(builder, ir.Constant(dim.type, 0), main,
                                 ir.Constant(dim.type, 4)) as (j, _):
        q = load4(query_t, vec, [j])
        xs = [load4(arena_t, rows_a, [row, j]) for row in rows]
        for acc, (i, term) in zip(accs, sums):
            x = xs[i]
            if term == _PRODUCT:
                t = builder.fmul(x, q)
            elif term == _SQUARE:
                t = builder.fmul(x, x)
            else:
                d = builder.fsub(x, q)
                if term == _SQUARED_DIFF:
                    t = builder.fmul(d, d)
                else:
                    fabs = cgutils.get_or_insert_function(
                        builder.module, ir.FunctionType(f64x4, [f64x4]), "llvm.fabs.v4f64")
                    t = builder.call(fabs, [d])
            builder.store(builder.fadd(builder.load(acc), t), acc)
    lanes = []
    for acc in accs:
        total = builder.load(acc)
        lanes += [builder.extract_element(total, ir.Constant(ir.IntType(32), i))
                  for i in range(4)]
    return lanes


def _intp(context, builder, signature, args, at):
    return context.cast(builder, args[at], signature.args[at], types.intp)


@intrinsic
def _lane_sums(typingctx, arena, r, query, kind):
    """_sum4's four partial sums over the first ``dim - dim % 4`` columns of row
    ``r`` (lane l: the terms of columns l, l + 4, ... added in that order), as
    one <4 x double> accumulator: the same IEEE operations, lane by lane, that
    four scalar sums make (numba's SLP vectoriser is off: it never packs them)."""
    if not (isinstance(kind, types.IntegerLiteral) and _lanes_typed(arena, query)):
        return None
    term = kind.literal_value

    def codegen(context, builder, signature, args):
        lanes = _lanes(context, builder, signature.args[0], signature.args[2], args[0],
                       args[2], [_intp(context, builder, signature, args, 1)], [(0, term)])
        return context.make_tuple(builder, signature.return_type, lanes)

    return types.UniTuple(types.float64, 4)(arena, r, query, kind), codegen


@intrinsic
def _cosine_lanes(typingctx, arena, r, query):
    """_lane_sums of row ``r`` for x.q (the first four) and for x.x (the last
    four) in one loop: the same operations in the same order as each alone, both
    vectorised (|x|^2 was four scalar sums: a cosine's exact score took twice the
    time at 384 dimensions, measured)."""
    if not _lanes_typed(arena, query):
        return None

    def codegen(context, builder, signature, args):
        lanes = _lanes(context, builder, signature.args[0], signature.args[2], args[0],
                       args[2], [_intp(context, builder, signature, args, 1)],
                       [(0, _PRODUCT), (0, _SQUARE)])
        return context.make_tuple(builder, signature.return_type, lanes)

    return types.UniTuple(types.float64, 8)(arena, r, query), codegen


@njit(cache=True, nogil=True)
def _cosine_sums(arena, r, query):
    """(x.q, x.x) of row ``r`` in float64, each in _sum4's order, in one pass."""
    d0, d1, d2, d3, s0, s1, s2, s3 = _cosine_lanes(arena, r, query)
    dim = query.shape[0]
    for j in range(dim - dim % 4, dim):
        x = np.float64(as_f32(arena[r, j]))
        d0 += x * np.float64(query[j])
        s0 += x * x
    return (d0 + d1) + (d2 + d3), (s0 + s1) + (s2 + s3)


# No fastmath: float64 sums in a fixed order, so a row's score is the same
# whichever path (walk or scan) found it. Four interleaved partial sums, added
# in a fixed order at the end, keep that order and still fill the pipeline
# (_lane_sums: one vector of four). ``kind`` is a constant of the caller's.
@njit(cache=True, nogil=True, literal=("kind",))
def _sum4(arena, r, query, kind):
    a0, a1, a2, a3 = _lane_sums(arena, r, query, kind)
    dim = query.shape[0]
    for j in range(dim - dim % 4, dim):
        a0 += _term(np.float64(as_f32(arena[r, j])), np.float64(query[j]), kind)
    return (a0 + a1) + (a2 + a3)


@njit(cache=True, nogil=True, readonly=("rows",))
def exact_row_distances(arena, rows, query, metric, out):
    """pgvector-scale distances in float64 from ``query`` to ``arena[rows]`` (the few rows returned)."""
    q_norm = 0.0
    if metric == METRIC_COSINE:
        for j in range(query.shape[0]):
            q_norm += np.float64(query[j]) * np.float64(query[j])
        q_norm = np.sqrt(q_norm)
    for i in range(rows.shape[0]):
        r = rows[i]
        if metric == METRIC_L2:
            out[i] = np.sqrt(_sum4(arena, r, query, _SQUARED_DIFF))
            continue
        if metric == METRIC_L1:
            out[i] = _sum4(arena, r, query, _ABS_DIFF)
            continue
        if metric == METRIC_HAMMING:   # an integer count: exact already
            out[i] = np.float64(hamming_query(arena, r, query))
            continue
        if metric == METRIC_DOT:
            out[i] = -_sum4(arena, r, query, _PRODUCT)
            continue
        s, xx = _cosine_sums(arena, r, query)
        if xx == 0.0 or q_norm == 0.0:
            out[i] = 1.0
        else:
            # clamped like pgvector's cosine_distance: a vector and itself score 0, not -2e-16
            out[i] = 1.0 - min(1.0, max(-1.0, s / (np.sqrt(xx) * q_norm)))


@njit(cache=True, nogil=True)
def rank_rows(arena, rows, query, metric, out):
    """Exact scores of ``rows`` into ``out``, then both sorted by (score, row).

    For the k rows a walk returns: already in order but for near-ties that
    the float64 scores settle, so an insertion sort is linear in practice.
    """
    exact_row_distances(arena, rows, query, metric, out)
    for i in range(1, rows.shape[0]):
        d, r = out[i], rows[i]
        j = i - 1
        while j >= 0 and (out[j] > d or (out[j] == d and rows[j] > r)):
            out[j + 1] = out[j]
            rows[j + 1] = rows[j]
            j -= 1
        out[j + 1] = d
        rows[j + 1] = r


@njit(cache=True, nogil=True, fastmath=True)
def rerank_rows(arena, norms, query, metric, rows, n, k, scratch_d, out_rows, out_dist):
    """The k best of ``rows[:n]`` by the exact distance from the arena, ranked.

    ``scratch_d`` (>= n entries) receives the exact float32 distances (of a huge
    or tiny dot or cosine query scaled: scaled_query; a huge l2 query's, its rows
    too: scaled_metric); the pool is reordered in
    place, its best k first, and ranked by float64 scores of ``query`` itself.
    """
    arena, norms, query = unmanaged(arena), unmanaged(norms), unmanaged(query)
    rows, scratch_d = unmanaged(rows), unmanaged(scratch_d)
    measure = scaled_metric(query, metric)
    scored = scaled_query(query, measure)
    q_norm = query_norm(scored, measure)
    for j in range(n):
        prefetch_row(arena, rows[j])
    for j in range(n):
        scratch_d[j] = query_distance(arena, norms, rows[j], scored, q_norm, measure)
    count = min(n, k)
    # a selection of the k best: the pool is small (ef) and k smaller
    for j in range(count):
        best = j
        for t in range(j + 1, n):
            if scratch_d[t] < scratch_d[best]:
                best = t
        d, r = scratch_d[j], rows[j]
        scratch_d[j], rows[j] = scratch_d[best], rows[best]
        scratch_d[best], rows[best] = d, r
        out_rows[j] = rows[j]
    rank_rows(arena, out_rows[:count], query, metric, out_dist)
    return count
