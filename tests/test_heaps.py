"""The heap and sorted-array kernels (varvedb.kernels.heaps) against Python's
heapq, bisect and sorted as oracles, on random operation sequences."""

import bisect
import heapq

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from varvedb.kernels import heaps
from varvedb.kernels.jit import njit

# distinct keys where a heap may break ties either way; few distinct keys where
# the sorted arrays must keep insertion order among equals
finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-2.0**100,
                     max_value=2.0**100)
distinct_keys = st.lists(finite32, min_size=1, max_size=80, unique=True)
tied_keys = st.lists(st.integers(0, 5).map(float), min_size=1, max_size=60)
SETTINGS = settings(max_examples=150, deadline=None)

# The heap functions are inlined into their callers (their IR copied), so each one
# called from Python compiled on its own, uncached: nine compilations in every run.
# The tests call them through one kernel that does one operation: one compilation.
# (Not cached: a cache of this file's kernel would be keyed on kernels/' source,
# not on this file's.)
(MIN_PUSH, MIN_POP, MAX_PUSH, MAX_POP, MAX_REPLACE_TOP, TOP_K_PUSH, CANDIDATE_PUSH,
 SORTED_INSERT, BOUNDED_INSERT) = range(9)


@njit()
def _step(op, keys, ids, n, cap, d, i):
    """Operation `op` on the structure (keys, ids) of size n (cap: top_k_push's k,
    bounded_insert's cap): the size after it, and bounded_insert's position."""
    if op == MIN_PUSH:
        return heaps.min_push(keys, ids, n, d, i), -1
    if op == MIN_POP:
        return heaps.min_pop(keys, ids, n), -1
    if op == MAX_PUSH:
        return heaps.max_push(keys, ids, n, d, i), -1
    if op == MAX_POP:
        return heaps.max_pop(keys, ids, n), -1
    if op == MAX_REPLACE_TOP:
        heaps.max_replace_top(keys, ids, n, d, i)
        return n, -1
    if op == TOP_K_PUSH:
        return heaps.top_k_push(keys, ids, n, cap, d, i), -1
    if op == CANDIDATE_PUSH:
        return heaps.candidate_push(keys, ids, n, d, i), -1
    if op == SORTED_INSERT:
        return heaps.sorted_insert(keys, ids, n, d, i), -1
    return heaps.bounded_insert(keys, ids, n, cap, d, i)


def step(op, keys, ids, n, d=0.0, i=0, cap=0) -> int:
    """_step's new size."""
    return _step(op, keys, ids, n, cap, d, i)[0]


def arrays(cap):
    return np.zeros(cap, np.float32), np.full(cap, -1, np.int32)


def pairs(keys):
    return [(float(np.float32(k)), i) for i, k in enumerate(keys)]


@SETTINGS
@given(distinct_keys, st.lists(st.booleans(), max_size=120))
def test_min_heap_pops_what_heapq_pops(keys, pops):
    keys_a, ids_a = arrays(len(keys))
    n, oracle, todo = 0, [], pairs(keys)
    for pop in pops + [False] * len(todo):
        if pop and n:
            assert (keys_a[0], ids_a[0]) == oracle[0]
            n = step(MIN_POP, keys_a, ids_a, n)
            heapq.heappop(oracle)
        elif todo:
            d, i = todo.pop()
            n = step(MIN_PUSH, keys_a, ids_a, n, d, i)
            heapq.heappush(oracle, (d, i))
        assert n == len(oracle)
    drained = []
    while n:
        drained.append((float(keys_a[0]), int(ids_a[0])))
        n = step(MIN_POP, keys_a, ids_a, n)
    assert drained == sorted(oracle)


@SETTINGS
@given(distinct_keys, st.lists(st.sampled_from(["push", "pop", "replace"]), max_size=120))
def test_max_heap_keeps_its_worst_at_the_root(keys, ops):
    keys_a, ids_a = arrays(len(keys))
    n, oracle, todo = 0, [], pairs(keys)
    for op in ops + ["push"] * len(todo):
        if op == "pop" and n:
            n = step(MAX_POP, keys_a, ids_a, n)
            oracle.remove(max(oracle))
        elif op == "replace" and n and todo:
            d, i = todo.pop()
            step(MAX_REPLACE_TOP, keys_a, ids_a, n, d, i)
            oracle.remove(max(oracle))
            oracle.append((d, i))
        elif todo:
            d, i = todo.pop()
            n = step(MAX_PUSH, keys_a, ids_a, n, d, i)
            oracle.append((d, i))
        assert n == len(oracle)
        if n:
            assert (float(keys_a[0]), int(ids_a[0])) == max(oracle)
    assert heaps.max_sort(keys_a, ids_a, n) == n
    assert list(zip(keys_a[:n].tolist(), ids_a[:n].tolist())) == sorted(oracle)


@SETTINGS
@given(distinct_keys, st.integers(1, 20))
def test_top_k_push_keeps_the_k_best(keys, k):
    keys_a, ids_a = arrays(k)
    n = 0
    for d, i in pairs(keys):
        n = step(TOP_K_PUSH, keys_a, ids_a, n, d, i, cap=k)
    heaps.max_sort(keys_a, ids_a, n)
    assert list(zip(keys_a[:n].tolist(), ids_a[:n].tolist())) == sorted(pairs(keys))[:k]


@SETTINGS
@given(distinct_keys, st.integers(1, 40))
def test_min_keep_best_leaves_the_best_ascending(keys, keep):
    keys_a, ids_a = arrays(len(keys))
    n = 0
    for d, i in pairs(keys):
        n = step(MIN_PUSH, keys_a, ids_a, n, d, i)
    keep = min(keep, n)
    assert heaps.min_keep_best(keys_a, ids_a, n, keep) == keep
    assert list(zip(keys_a[:keep].tolist(), ids_a[:keep].tolist())) == sorted(pairs(keys))[:keep]


@SETTINGS
@given(distinct_keys, st.integers(2, 16))
def test_candidate_push_drops_the_worse_half_when_full(keys, cap):
    keys_a, ids_a = arrays(cap)
    n, oracle = 0, []
    for d, i in pairs(keys):
        if len(oracle) == cap:
            oracle = sorted(oracle)[: cap // 2]
        oracle.append((d, i))
        n = step(CANDIDATE_PUSH, keys_a, ids_a, n, d, i)
        assert n == len(oracle)
        assert (float(keys_a[0]), int(ids_a[0])) == min(oracle)
    assert sorted(zip(keys_a[:n].tolist(), ids_a[:n].tolist())) == sorted(oracle)


@SETTINGS
@given(tied_keys)
def test_sorted_insert_places_after_equal_keys(keys):
    keys_a, ids_a = arrays(len(keys))
    n, oracle = 0, []
    for d, i in pairs(keys):
        n = step(SORTED_INSERT, keys_a, ids_a, n, d, i)
        bisect.insort_right(oracle, (d, i), key=lambda p: p[0])
    assert list(zip(keys_a[:n].tolist(), ids_a[:n].tolist())) == oracle


@SETTINGS
@given(tied_keys, st.integers(1, 12), st.booleans())
def test_bounded_insert_keeps_the_first_cap_of_a_stable_sort(keys, cap, strided):
    # strided: every other element of arrays twice as long, which the shift moves
    # one element at a time (a contiguous array's shift is one memmove)
    keys_a, ids_a = arrays(2 * cap if strided else cap)
    if strided:
        keys_a, ids_a = keys_a[::2], ids_a[::2]
    n, oracle = 0, []
    for d, i in pairs(keys):
        if n == cap and d >= keys_a[n - 1]:
            continue   # the caller's side of the contract: only pairs that belong
        position = bisect.bisect_right([p[0] for p in oracle], d)
        n, pos = _step(BOUNDED_INSERT, keys_a, ids_a, n, cap, d, i)
        assert pos == position
        oracle.insert(position, (d, i))
        oracle = oracle[:cap]
        assert list(zip(keys_a[:n].tolist(), ids_a[:n].tolist())) == oracle


@SETTINGS
@given(tied_keys, tied_keys)
def test_merge_sorted_is_a_stable_merge_with_a_first(a, b):
    a_pairs = sorted(pairs(a), key=lambda p: p[0])
    b_pairs = sorted([(d, 1000 + i) for d, i in pairs(b)], key=lambda p: p[0])
    a_keys, a_ids = (np.array(c, t) for c, t in zip(zip(*a_pairs), (np.float32, np.int32)))
    b_keys, b_ids = (np.array(c, t) for c, t in zip(zip(*b_pairs), (np.float32, np.int32)))
    out_keys, out_ids = arrays(len(a) + len(b))
    n = heaps.merge_sorted(a_keys, a_ids, len(a), b_keys, b_ids, len(b), out_keys, out_ids)
    assert n == len(a) + len(b)
    expected = sorted(a_pairs + b_pairs, key=lambda p: p[0])   # stable: a's pairs first
    assert list(zip(out_keys.tolist(), out_ids.tolist())) == expected
