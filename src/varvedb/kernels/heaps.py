"""Heap and sorted-array kernels over (key float32, id int32) pairs: top-k machinery.

What this is for: every best-k search keeps its candidates and results in
these structures — the HNSW walks and graph build (:mod:`varvedb.kernels.hnsw`).
(The BM25 top-k in :mod:`varvedb.kernels.bm25` keeps its own heap, ordered by
score then row, so that equal scores go to the lower row as the exhaustive
path orders them.) A structure is two parallel arrays of the
same length, ``keys`` float32 and ``ids`` int32, plus its current size ``n``
held by the caller; every function takes the size and returns the new one, so
nothing here allocates and a structure can live in reusable scratch.

Smaller keys are better everywhere (a distance).

* min-heap: the best pair at index 0 (a walk's open candidates);
* max-heap: the worst pair at index 0 (the k best found so far: a new pair
  replaces the root when it is better);
* sorted array: ascending by key, ties kept in insertion order.

Pairs with equal keys may come out of a heap in any order. Functions that sit
on a walk's inner loop are inlined into their callers at numba's IR level, so
that no call passes arrays (with their reference counts) per element.
"""

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .jit import njit

_JIT = dict(cache=True, nogil=True, fastmath=True)
_INLINE = dict(_JIT, inline="always")


# ------------------------------------------------------------------ min-heap


@njit(**_INLINE)
def _min_sift_down(keys, ids, j, n):
    d = keys[j]
    i = ids[j]
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and keys[c + 1] < keys[c]:
            c += 1
        if keys[c] >= d:
            break
        keys[j] = keys[c]
        ids[j] = ids[c]
        j = c
    keys[j] = d
    ids[j] = i


@njit(**_INLINE)
def min_push(keys, ids, n, d, i):
    """Push (d, i) onto a min-heap of size ``n`` (room for one more); returns n + 1."""
    j = n
    while j > 0:
        parent = (j - 1) >> 1
        if keys[parent] <= d:
            break
        keys[j] = keys[parent]
        ids[j] = ids[parent]
        j = parent
    keys[j] = d
    ids[j] = i
    return n + 1


@njit(**_INLINE)
def min_pop(keys, ids, n):
    """Drop the root (the best) of a min-heap of size ``n`` >= 1; returns n - 1."""
    n -= 1
    if n > 0:
        keys[0] = keys[n]
        ids[0] = ids[n]
        _min_sift_down(keys, ids, 0, n)
    return n


@njit(**_JIT)
def min_keep_best(keys, ids, n, keep):
    """Shrink a min-heap of size ``n`` to its ``keep`` best pairs; returns keep.

    The result is sorted ascending, which is also a valid min-heap: an
    in-place heapsort leaves the array descending, and reversed it is
    ascending, the best ``keep`` first.
    """
    for end in range(n - 1, 0, -1):
        d = keys[0]
        i = ids[0]
        keys[0] = keys[end]
        ids[0] = ids[end]
        keys[end] = d
        ids[end] = i
        _min_sift_down(keys, ids, 0, end)
    for t in range(n // 2):
        d = keys[t]
        i = ids[t]
        keys[t] = keys[n - 1 - t]
        ids[t] = ids[n - 1 - t]
        keys[n - 1 - t] = d
        ids[n - 1 - t] = i
    return keep


@njit(**_INLINE)
def candidate_push(keys, ids, n, d, i):
    """Push onto a min-heap that fills its arrays; when full, first drop its worse half.

    For a best-first walk's open candidates: with capacity above twice the
    number of results kept, the dropped half holds only candidates the walk
    would never expand. Returns the new size.
    """
    if n == keys.shape[0]:
        n = min_keep_best(keys, ids, n, n // 2)
    return min_push(keys, ids, n, d, i)


# ------------------------------------------------------------------ max-heap


@njit(**_INLINE)
def _max_sift_down(keys, ids, j, n):
    d = keys[j]
    i = ids[j]
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and keys[c + 1] > keys[c]:
            c += 1
        if keys[c] <= d:
            break
        keys[j] = keys[c]
        ids[j] = ids[c]
        j = c
    keys[j] = d
    ids[j] = i


@njit(**_INLINE)
def max_push(keys, ids, n, d, i):
    """Push (d, i) onto a max-heap of size ``n`` (room for one more); returns n + 1."""
    j = n
    while j > 0:
        parent = (j - 1) >> 1
        if keys[parent] >= d:
            break
        keys[j] = keys[parent]
        ids[j] = ids[parent]
        j = parent
    keys[j] = d
    ids[j] = i
    return n + 1


@njit(**_INLINE)
def max_replace_top(keys, ids, n, d, i):
    """Replace the root (the worst) of a max-heap of size ``n`` >= 1 with (d, i)."""
    keys[0] = d
    ids[0] = i
    _max_sift_down(keys, ids, 0, n)


@njit(**_INLINE)
def max_pop(keys, ids, n):
    """Drop the root (the worst) of a max-heap of size ``n`` >= 1; returns n - 1."""
    n -= 1
    if n > 0:
        keys[0] = keys[n]
        ids[0] = ids[n]
        _max_sift_down(keys, ids, 0, n)
    return n


@njit(**_INLINE)
def top_k_push(keys, ids, n, k, d, i):
    """Offer (d, i) to a max-heap holding the best ``k`` >= 1 pairs seen; returns its size.

    Below k pairs it is pushed; at k it replaces the worst when strictly better.
    """
    if n < k:
        return max_push(keys, ids, n, d, i)
    if d < keys[0]:
        max_replace_top(keys, ids, n, d, i)
    return n


@njit(**_JIT)
def max_sort(keys, ids, n):
    """Sort a max-heap of size ``n`` in place, ascending (heapsort); returns n."""
    for end in range(n - 1, 0, -1):
        d = keys[0]
        i = ids[0]
        keys[0] = keys[end]
        ids[0] = ids[end]
        keys[end] = d
        ids[end] = i
        _max_sift_down(keys, ids, 0, end)
    return n


# -------------------------------------------------------------- sorted arrays


@intrinsic
def _shift_up(typingctx, array, lo, count):
    """Move ``array[lo:lo + count]`` (1-D, contiguous) one place up, to
    ``array[lo + 1:lo + count + 1]``, as one ``llvm.memmove``.

    The element-by-element loop it replaces was not vectorised (a copy onto an
    overlapping range): in an ef-200 pool, ~1 ns a moved element, about 50 us of
    a build's ~400 us level-0 walk, against ~10 us as one memmove."""
    if not (isinstance(array, types.Array) and array.ndim == 1
            and isinstance(lo, types.Integer) and isinstance(count, types.Integer)):
        return None

    def by_element(array, lo, count):
        for t in range(lo + count, lo, -1):
            array[t] = array[t - 1]

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        if array_type.layout not in ("C", "F"):   # maybe strided: one element at a time
            return context.compile_internal(builder, by_element, signature, args)
        view = context.make_array(array_type)(context, builder, args[0])
        start = context.cast(builder, args[1], signature.args[1], types.intp)
        n = context.cast(builder, args[2], signature.args[2], types.intp)
        src = cgutils.get_item_pointer(context, builder, array_type, view, [start],
                                       wraparound=False)
        dst = cgutils.get_item_pointer(context, builder, array_type, view,
                                       [builder.add(start, context.get_constant(types.intp, 1))],
                                       wraparound=False)
        itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
        cgutils.raw_memmove(builder, dst, src, n, itemsize)
        return context.get_dummy_value()

    return types.void(array, lo, count), codegen


@njit(**_INLINE)
def sorted_insert(keys, ids, n, d, i):
    """Insert (d, i) into an ascending array of size ``n`` (room for one more),
    after any equal keys, by shifting the tail; returns n + 1. For short arrays."""
    p = n
    while p > 0 and keys[p - 1] > d:
        keys[p] = keys[p - 1]
        ids[p] = ids[p - 1]
        p -= 1
    keys[p] = d
    ids[p] = i
    return n + 1


@njit(**_INLINE)
def bounded_insert(keys, ids, n, cap, d, i):
    """Insert (d, i) into an ascending array of size ``n`` that keeps at most ``cap``.

    A binary search places it after any equal keys; a full array drops its
    last pair. The caller ensures it belongs (``n < cap`` or ``d`` below the
    last key). Returns ``(new size, position)``.
    """
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] <= d:
            lo = mid + 1
        else:
            hi = mid
    moved = min(n, cap - 1) - lo
    if moved > 0:
        _shift_up(keys, lo, moved)
        _shift_up(ids, lo, moved)
    keys[lo] = d
    ids[lo] = i
    return min(n + 1, cap), lo


@njit(**_JIT)
def merge_sorted(a_keys, a_ids, n_a, b_keys, b_ids, n_b, out_keys, out_ids):
    """Merge two ascending arrays into ``out_*``; on equal keys ``a`` goes first.
    Returns n_a + n_b."""
    ia = 0
    ib = 0
    n = 0
    while ia < n_a or ib < n_b:
        if ib == n_b or (ia < n_a and a_keys[ia] <= b_keys[ib]):
            out_keys[n] = a_keys[ia]
            out_ids[n] = a_ids[ia]
            ia += 1
        else:
            out_keys[n] = b_keys[ib]
            out_ids[n] = b_ids[ib]
            ib += 1
        n += 1
    return n
