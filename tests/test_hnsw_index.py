"""HnswIndex on its own: recall against exact search, filters, f16 arenas,
determinism, incremental inserts, persistence and bad input."""

import functools

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

import varvedb as vv
from conftest import hnsw_arrays_of_format
from test_fast_lane import _oracle
from varvedb.index import flat, hnsw
from varvedb.index.hnsw import HnswIndex

DIM = 64
N_ROWS = 10_000      # four graphs at the defaults (l2, cosine, dot, f16): most of this file's time
K = 10


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """64 centres; each row = centre + 32 centre-specific directions + small noise.

    The centres and directions come from one fixed seed, so base rows and
    held-out queries drawn with different seeds share the clusters.
    """
    model = np.random.default_rng(20240601)
    centres = model.normal(size=(64, dim)).astype(np.float32)
    directions = model.normal(size=(64, 32, dim)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=2, keepdims=True)
    rng = np.random.default_rng(seed)
    which = rng.integers(0, 64, n)
    coefficients = rng.normal(0.0, 0.5, size=(n, 32)).astype(np.float32)
    rows = centres[which] + np.einsum("nk,nkd->nd", coefficients, directions[which])
    rows += rng.normal(0.0, 0.05, size=(n, dim)).astype(np.float32)
    return np.ascontiguousarray(rows, dtype=np.float32)


def norms_of(vectors: np.ndarray) -> np.ndarray:
    return np.linalg.norm(vectors.astype(np.float32), axis=1).astype(np.float32)


def exact_distances(vectors: np.ndarray, queries: np.ndarray, metric: str) -> np.ndarray:
    x = vectors.astype(np.float64)
    q = queries.astype(np.float64)
    dot = q @ x.T
    if metric == "dot":
        return -dot
    if metric == "cosine":
        denom = np.linalg.norm(q, axis=1)[:, None] * np.linalg.norm(x, axis=1)[None, :]
        return 1.0 - dot / np.where(denom == 0.0, np.inf, denom)
    sq = (q * q).sum(1)[:, None] - 2.0 * dot + (x * x).sum(1)[None, :]
    return np.sqrt(np.maximum(sq, 0.0))


def exact_top_k(vectors, queries, metric, k=K, allow=None):
    dist = exact_distances(vectors, queries, metric)
    if allow is not None:
        dist = np.where(allow[: vectors.shape[0]][None, :], dist, np.inf)
    return np.argsort(dist, axis=1, kind="stable")[:, :k]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    hits = sum(len(set(f[f >= 0].tolist()) & set(t.tolist())) for f, t in zip(found, truth))
    return hits / truth.size


def nodes_without_in_link(index: HnswIndex) -> list[tuple[int, int]]:
    """(level, node) for each linked node that no list on that level holds, the
    entry point (where every walk starts) aside."""
    a = index.to_arrays()
    levels, entry = a["levels"], index._entry
    found = []
    for level in range(int(levels.max(initial=-1)) + 1):
        on = np.flatnonzero(levels >= level)
        lists = a["links0"][on] if level == 0 else a["upper_links"][a["upper_slot"][on] + level - 1]
        held = np.zeros(len(levels), bool)
        held[lists[lists >= 0]] = True
        linked = on[lists[:, 0] >= 0]       # a twin's lists are empty: its ring finds it
        found += [(level, int(v)) for v in linked if not held[v] and v != entry]
    return found


def search_each(index: HnswIndex, vectors, norms, queries, k, **kw):
    """index.search for each query, as (q, k) rows padded with -1 and distances
    with inf where fewer than k rows qualify."""
    rows = np.full((len(queries), k), -1, np.int64)
    dists = np.full((len(queries), k), np.inf)
    for i, q in enumerate(queries):
        r, d = index.search(vectors, norms, q, k, **kw)
        rows[i, :len(r)], dists[i, :len(d)] = r, d
    return rows, dists


def build(vectors, metric="l2", rows=None, **params) -> HnswIndex:
    index = HnswIndex(vectors.shape[1], metric, **params)
    index.add(vectors, norms_of(vectors), np.arange(len(vectors)) if rows is None else rows)
    return index


@pytest.fixture(scope="module")
def base():
    return clustered(N_ROWS, DIM, seed=1)


@pytest.fixture(scope="module")
def queries():
    return clustered(200, DIM, seed=2)


@pytest.fixture(scope="module")
def l2_index(base):
    return build(base, "l2")


# ------------------------------------------------------------------ recall


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_recall_at_defaults_is_at_least_095_against_exact_search(base, queries, metric,
                                                                 l2_index):
    index = l2_index if metric == "l2" else build(base, metric)
    rows, dists = search_each(index, base, norms_of(base), queries, K)
    assert recall(rows, exact_top_k(base, queries, metric)) >= 0.95
    assert np.all(np.diff(dists, axis=1) >= 0)


def test_distances_are_on_pgvector_scale(base, queries):
    for metric in ("l2", "cosine", "dot"):
        index = build(base[:2000], metric)
        rows, dists = index.search(base[:2000], norms_of(base[:2000]), queries[0], K)
        expected = exact_distances(base[:2000], queries[:1], metric)[0, rows]
        np.testing.assert_allclose(dists, expected, rtol=1e-4, atol=1e-4)
        assert rows.dtype == np.int64 and dists.dtype == np.float64


def test_f16_arena_recall_is_within_001_of_f32(base, queries, l2_index):
    half = base.astype(np.float16)
    index = build(half, "l2")
    truth = exact_top_k(base, queries, "l2")
    f16_recall = recall(search_each(index, half, norms_of(half), queries, K)[0], truth)
    f32_recall = recall(search_each(l2_index, base, norms_of(base), queries, K)[0], truth)
    assert f16_recall >= f32_recall - 0.01


def test_cosine_treats_zero_norm_rows_as_distance_one():
    vectors = np.random.default_rng(12).normal(size=(60, 8)).astype(np.float32)
    vectors[[3, 30, 59]] = 0.0
    index = build(vectors, "cosine")
    rows, dists = index.search(vectors, norms_of(vectors), vectors[0], 60)
    assert sorted(rows.tolist()) == list(range(60))
    np.testing.assert_allclose(dists[np.isin(rows, [3, 30, 59])], 1.0)
    rows, dists = index.search(vectors, norms_of(vectors), np.zeros(8, np.float32), 5)
    np.testing.assert_allclose(dists, 1.0)


# ---------------------------------------------------------------- filters


@pytest.mark.parametrize("keep", [0.25, 0.75])
def test_filtered_walk_keeps_recall_and_returns_only_allowed_rows(base, queries, l2_index,
                                                                  keep):
    allow = np.random.default_rng(3).random(N_ROWS) < keep
    rows, _ = search_each(l2_index, base, norms_of(base), queries, K, allow=allow)
    assert np.all(allow[rows[rows >= 0]])
    assert recall(rows, exact_top_k(base, queries, "l2", allow=allow)) >= 0.95


def test_one_percent_filter_returns_only_allowed_rows(base, queries, l2_index):
    allow = np.random.default_rng(4).random(N_ROWS) < 0.01
    rows, dists = search_each(l2_index, base, norms_of(base), queries[:50], K, allow=allow,
                                        ef=10)
    assert np.all(allow[rows[rows >= 0]])
    assert np.all((rows >= 0) == np.isfinite(dists))


def test_allow_mask_longer_than_the_index_is_accepted(base, queries, l2_index):
    allow = np.ones(N_ROWS + 500, np.bool_)
    rows, _ = l2_index.search(base, norms_of(base), queries[0], K, allow=allow)
    assert len(rows) == K


def test_fewer_allowed_rows_than_k_returns_only_those(base, queries, l2_index):
    allow = np.zeros(N_ROWS, np.bool_)
    allow[[5, 17, 4000]] = True
    rows, dists = search_each(l2_index, base, norms_of(base), queries[:3], K, allow=allow)
    assert np.all(np.sort(rows[:, :3], axis=1) == [5, 17, 4000])
    assert np.all(rows[:, 3:] == -1) and np.all(np.isinf(dists[:, 3:]))
    single, _ = l2_index.search(base, norms_of(base), queries[0], K, allow=allow)
    assert sorted(single.tolist()) == [5, 17, 4000]


# ------------------------------------------------------------ incremental


def test_rows_added_in_pieces_and_any_order_are_all_found(queries):
    vectors = clustered(12_000, DIM, seed=5)
    norms = norms_of(vectors)
    index = HnswIndex(DIM, "l2")
    order = np.random.default_rng(6).permutation(12_000)
    # nodes are an arbitrary subset of rows, and the arena grows between calls
    # (it never shrinks: every node's vector stays in it)
    grown = vectors[:0]
    for piece in np.array_split(order[:10_000], 7):
        grown = vectors[: max(len(grown), piece.max() + 1)].copy()
        index.add(grown, norms[: len(grown)], piece)
    assert len(index) == 10_000
    members = index.contains(12_000)
    assert members.sum() == 10_000 and np.all(members[order[:10_000]])
    index.validate(12_000)
    rows, _ = search_each(index, vectors, norms, queries, K)
    assert recall(rows, exact_top_k(vectors, queries, "l2", allow=members)) >= 0.95


def test_reinserted_rows_are_found_among_dead_old_rows(queries):
    old = clustered(8_000, DIM, seed=7)
    new = clustered(8_000, DIM, seed=8)
    arena = np.concatenate([old, new])
    norms = norms_of(arena)
    index = HnswIndex(DIM, "cosine")
    index.add(arena[:8_000], norms[:8_000], np.arange(8_000))
    index.add(arena, norms, np.arange(8_000, 16_000))
    alive = np.zeros(16_000, np.bool_)
    alive[8_000:] = True
    rows, _ = search_each(index, arena, norms, queries, K, allow=alive)
    assert np.all(rows >= 8_000)
    assert recall(rows, exact_top_k(arena, queries, "cosine", allow=alive)) >= 0.95


@pytest.mark.parametrize("metric", ["l2", "cosine"])
def test_every_version_of_a_repeated_vector_stays_findable(metric):
    # an updated row whose vector did not change is inserted again: 120 versions
    vectors = clustered(5_000, DIM, seed=13)
    arena = np.concatenate([vectors, np.repeat(vectors[7:8], 120, axis=0)])
    norms = norms_of(arena)
    index = HnswIndex(DIM, metric)
    index.add(arena[:5_000], norms[:5_000], np.arange(5_000))
    for version in range(5_000, 5_120, 8):
        index.add(arena[: version + 8], norms[: version + 8], np.arange(version, version + 8))
    index.validate(len(arena))
    versions = np.append(7, np.arange(5_000, 5_120))
    query = vectors[7] + np.float32(0.01)
    rows, _ = index.search(arena, norms, query, K)
    assert np.all(np.isin(rows, versions))
    for visible in (7, 5_000, 5_063, 5_119):
        allow = np.random.default_rng(visible).random(len(arena)) < 0.5
        allow[versions] = False
        allow[visible] = True
        rows, _ = index.search(arena, norms, query, K, allow=allow)
        assert rows[0] == visible


def test_one_row_adds_link_as_well_as_a_bulk_build(queries):
    vectors = clustered(6_000, DIM, seed=15)
    norms = norms_of(vectors)
    index = HnswIndex(DIM, "cosine")
    index.add(vectors, norms, np.arange(4_000))
    for row in range(4_000, 6_000):
        index.add(vectors[: row + 1], norms[: row + 1], np.array([row]))
    index.validate(6_000)
    late = np.zeros(6_000, np.bool_)
    late[4_000:] = True   # only rows linked one at a time may answer
    rows, _ = search_each(index, vectors, norms, queries, K, allow=late)
    assert recall(rows, exact_top_k(vectors, queries, "cosine", allow=late)) >= 0.95
    rows, _ = search_each(index, vectors, norms, queries, K)
    assert recall(rows, exact_top_k(vectors, queries, "cosine")) >= 0.95


def test_serial_and_parallel_linking_build_the_same_graph():
    vectors = clustered(3_000, 16, seed=16)
    norms = norms_of(vectors)
    graphs = []
    for parallel in (True, False, None):   # every batch on the threads, none, by size
        index = HnswIndex(16, "cosine", seed=4)
        index.add(vectors, norms, np.arange(2_000), parallel=parallel)
        for lo in range(2_000, 2_900, 100):
            index.add(vectors, norms, np.arange(lo, lo + 100), parallel=parallel)
        for row in range(2_900, 3_000):
            index.add(vectors, norms, np.array([row]), parallel=parallel)
        graphs.append(index.to_arrays())
    for name in graphs[0]:
        np.testing.assert_array_equal(graphs[0][name], graphs[1][name])
        np.testing.assert_array_equal(graphs[0][name], graphs[2][name])


def test_build_lanes_write_no_cache_line_together():
    # each lane's scratch row is followed by 128 bytes no kernel writes: two lanes
    # writing one cache line (a walk's pool is shifted on every insert) bounce it
    # between the cores (issue 32)
    ef, m, dim = 200, 16, 16
    scratch = hnsw._BuildScratch(2, 1_000, dim, ef, m, 3)
    batch = hnsw._MAX_BATCH
    used = {"pool_d": ef, "pool_i": ef, "fresh": 2 * m, "batch_dist": batch, "x_d": batch,
            "x_i": batch, "s_d": ef + batch, "s_i": ef + batch, "over_i": batch,
            "union_d": 2 * m + batch, "union_i": 2 * m + batch}
    for name, width in used.items():
        rows = getattr(scratch, name)
        assert rows.shape[0] == 2 and rows.flags.c_contiguous, name
        assert rows.strides[0] - width * rows.itemsize >= 128, name


def test_build_is_identical_for_the_same_seed_and_any_thread_count():
    vectors = clustered(3_000, 16, seed=9)
    threads = numba.get_num_threads()
    first = build(vectors, "l2", seed=11).to_arrays()
    numba.set_num_threads(1)
    try:
        single = build(vectors, "l2", seed=11).to_arrays()
    finally:
        numba.set_num_threads(threads)
    again = build(vectors, "l2", seed=11).to_arrays()
    other = build(vectors, "l2", seed=12).to_arrays()
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
        np.testing.assert_array_equal(first[name], single[name])
    assert not np.array_equal(first["links0"], other["links0"])


def test_levels_follow_the_geometric_draw(l2_index):
    levels = l2_index.to_arrays()["levels"]
    upper = np.count_nonzero(levels > 0) / levels.size
    assert abs(upper - 1 / 16) < 0.01
    assert l2_index.to_arrays()["params"][8] == levels.max()


def test_level_draw_is_the_documented_hash_of_seed_and_row():
    def splitmix64(x):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))

    rows = np.arange(300_000, dtype=np.int64)
    for seed, m in ((0, 16), (2**63 + 5, 3)):
        h = splitmix64(rows.astype(np.uint64) ^ splitmix64(np.array([seed], np.uint64)))
        u = ((h >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53
        expected = np.minimum(np.floor(-np.log(u) / np.log(m)), 30).astype(np.int8)
        index = HnswIndex(8, "l2", m=m, seed=seed)
        np.testing.assert_array_equal(index._draw_levels(rows), expected)


def test_level_zero_keeps_two_m_links_and_upper_levels_m(l2_index):
    arrays = l2_index.to_arrays()
    assert arrays["links0"].shape[1] == 32
    assert arrays["upper_links"].shape[1] == 16
    degree = (arrays["links0"] >= 0).sum(axis=1)
    assert degree.min() >= 1 and degree.max() == 32


def test_search_over_a_shorter_arena_never_reads_past_it(base, queries, l2_index):
    # a reader holding the arena as it was before a concurrent add() is
    # handed a graph that may already link rows its arena does not cover
    short = base[:5_000]
    rows, _ = l2_index.search(short, norms_of(short), queries[0], K)
    assert len(rows) > 0 and np.all(rows < 5_000)
    rows, _ = search_each(l2_index, short, norms_of(short), queries[:20], K,
                                    allow=np.ones(N_ROWS, np.bool_))
    assert np.all(rows < 5_000)


# ------------------------------------------------------------ persistence


def test_from_arrays_over_read_only_buffers_searches_without_rebuilding(base, queries,
                                                                        l2_index):
    arrays = l2_index.to_arrays()
    frozen = {}
    for name, array in arrays.items():
        flat = np.frombuffer(array.tobytes(), dtype=array.dtype)  # read-only, flat
        assert not flat.flags.writeable
        frozen[name] = flat
    restored = HnswIndex.from_arrays(frozen)
    restored.validate(N_ROWS)
    assert len(restored) == len(l2_index)
    norms = norms_of(base)
    for i in range(5):
        expected = l2_index.search(base, norms, queries[i], K)
        got = restored.search(base, norms, queries[i], K)
        np.testing.assert_array_equal(expected[0], got[0])

    snapshot = {name: array.copy() for name, array in frozen.items()}
    extra = clustered(300, DIM, seed=10)
    arena = np.concatenate([base, extra])
    restored.add(arena, norms_of(arena), np.arange(N_ROWS, N_ROWS + 300))
    assert len(restored) == N_ROWS + 300
    restored.validate(len(arena))
    for name, array in frozen.items():
        np.testing.assert_array_equal(array, snapshot[name])


def test_to_arrays_are_plain_read_only_arrays(l2_index):
    arrays = l2_index.to_arrays()
    assert set(arrays) == {"params", "levels", "links0", "upper_slot", "upper_links", "twins"}
    for name, array in arrays.items():
        assert isinstance(array, np.ndarray) and array.dtype.kind in "iu"
        if name != "params":
            assert not array.flags.writeable


def test_memory_is_about_150_bytes_per_node(l2_index):
    assert 130 <= l2_index.memory_bytes() / len(l2_index) <= 260


def test_a_node_owns_only_the_upper_levels_it_has(l2_index):
    # one list per (node, level above 0): nothing allocated for levels a node lacks
    arrays = l2_index.to_arrays()
    levels = arrays["levels"].astype(np.int64)
    assert levels.max() >= 2                   # some node has two upper levels or more
    assert arrays["upper_links"].shape == (levels[levels > 0].sum(), 16)
    assert l2_index.node_bytes() == len(l2_index) * (1 + 2 * 16 * 4 + 4 + 4) \
        + levels[levels > 0].sum() * 16 * 4


def test_a_format_3_graph_opens_searches_and_grows_as_it_did(base, queries, l2_index):
    old = {name: np.frombuffer(array.tobytes(), array.dtype)       # read-only, flat
           for name, array in hnsw_arrays_of_format(l2_index.to_arrays(), 3).items()}
    restored = HnswIndex.from_arrays(old)
    restored.validate(N_ROWS)
    a, b = l2_index.to_arrays(), restored.to_arrays()
    assert b["params"][0] == 4 and b["upper_links"].shape == a["upper_links"].shape
    for r in np.flatnonzero(a["levels"] > 0):      # each node's lists, level by level
        for level in range(1, int(a["levels"][r]) + 1):
            np.testing.assert_array_equal(b["upper_links"][b["upper_slot"][r] + level - 1],
                                          a["upper_links"][a["upper_slot"][r] + level - 1])
    norms = norms_of(base)
    for q in queries[:20]:
        np.testing.assert_array_equal(restored.search(base, norms, q, K)[0],
                                      l2_index.search(base, norms, q, K)[0])
    extra = clustered(300, DIM, seed=10)
    arena = np.concatenate([base, extra])
    restored.add(arena, norms_of(arena), np.arange(N_ROWS, N_ROWS + 300))
    restored.validate(len(arena))
    again = HnswIndex.from_arrays(restored.to_arrays())
    again.validate(len(arena))
    np.testing.assert_array_equal(again.search(arena, norms_of(arena), extra[0], K)[0],
                                  restored.search(arena, norms_of(arena), extra[0], K)[0])


def test_a_format_3_graph_with_slots_that_do_not_fit_is_refused(l2_index):
    old = hnsw_arrays_of_format(l2_index.to_arrays(), 3)
    upper = np.flatnonzero(old["levels"] > 0)
    for change in (lambda a: a["upper_slot"].__setitem__(upper[0], len(upper)),
                   lambda a: a["upper_slot"].__setitem__(upper[0], -1),
                   lambda a: a["upper_slot"].__setitem__(np.flatnonzero(a["levels"] == 0)[0],
                                                        0)):
        broken = {name: array.copy() for name, array in old.items()}
        change(broken)
        with pytest.raises(ValueError, match="upper slots"):
            HnswIndex.from_arrays(broken)


# ------------------------------------------------------------- validation


def test_validate_rejects_broken_structure(base, l2_index):
    l2_index.validate(N_ROWS)
    with pytest.raises(ValueError):
        l2_index.validate(N_ROWS - 1)
    arrays = {name: array.copy() for name, array in l2_index.to_arrays().items()}
    arrays["links0"][7, 0] = N_ROWS + 3
    with pytest.raises(ValueError):
        HnswIndex.from_arrays(arrays).validate(N_ROWS + 10)
    arrays = {name: array.copy() for name, array in l2_index.to_arrays().items()}
    arrays["params"][7] = -1  # entry point
    with pytest.raises(ValueError):
        HnswIndex.from_arrays(arrays).validate(N_ROWS)
    with pytest.raises(ValueError):
        HnswIndex.from_arrays({"params": arrays["params"]})


def test_bad_input_raises_value_error(base, l2_index):
    norms = norms_of(base)
    with pytest.raises(ValueError):
        l2_index.search(base, norms, np.zeros(DIM + 1, np.float32), K)
    with pytest.raises(ValueError):
        l2_index.search(base, norms, np.full(DIM, np.nan, np.float32), K)
    with pytest.raises(ValueError):
        l2_index.search(base, norms, base[0], K, allow=np.ones(10, np.bool_))
    with pytest.raises(ValueError):
        l2_index.search(base.astype(np.float64), norms, base[0], K)
    with pytest.raises(ValueError):
        l2_index.add(base, norms, np.array([3]))  # already a node
    fresh = HnswIndex(DIM, "l2")
    with pytest.raises(ValueError):
        fresh.add(base, norms, np.array([1, 1]))
    with pytest.raises(ValueError):
        fresh.add(base, norms, np.array([N_ROWS]))
    with pytest.raises(ValueError):
        HnswIndex(DIM, "l1")   # the exact scan's only
    with pytest.raises(ValueError):
        HnswIndex(DIM, "cosine").add(base, None, np.arange(3))


def test_an_arena_without_every_node_is_refused_before_anything_changes():
    # The build walk measures every node it meets; a node past the end of the
    # arena it was handed was read past the end of that array (garbage
    # distances, a recall that came and went, IndexError under bounds checks).
    vectors = clustered(3_000, DIM, seed=21)
    norms = norms_of(vectors)
    index = HnswIndex(DIM, "l2")
    index.add(vectors, norms, np.arange(0, 3_000, 2))
    before = {name: array.copy() for name, array in index.to_arrays().items()}
    with pytest.raises(ValueError, match="nodes up to row 2998"):
        index.add(vectors[:2_000].copy(), norms[:2_000], np.array([1, 3, 5]))
    after = index.to_arrays()
    assert all(np.array_equal(before[name], after[name]) for name in before)
    index.add(vectors, norms, np.array([1, 3, 5]))   # the whole arena: accepted
    assert len(index) == 1_503
    index.validate(3_000)


def test_the_graph_build_walks_arrays_that_grow_between_calls():
    # numba does not check indexes: `make boundscheck` runs this (and the other
    # kernel tests) with them compiled in, where an index past an end raises.
    # Every build path (parallel, serial, upper levels, twins) and every search
    # path runs over an arena that grows between calls.
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(4_000, 8)).astype(np.float32)
    vectors[3_000:3_040] = vectors[5]            # twins: rows that repeat one vector
    norms = np.linalg.norm(vectors, axis=1).astype(np.float32)
    queries = rng.normal(size=(20, 8)).astype(np.float32)
    for metric in ("l2", "cosine"):
        # m=2: many levels, so the capacity, the upper slots, the level count and
        # the build scratch all grow between calls; rows come in any order, in
        # pieces of every size, on numba's threads and on the calling thread
        index = HnswIndex(8, metric, m=2, ef_construction=16, ef_search=16, seed=1)
        order = rng.permutation(4_000)[:3_500]
        n = 0
        for i, piece in enumerate(np.array_split(order, [1, 3, 10, 40, 200, 900, 1500, 2600])):
            n = max(n, int(piece.max()) + 1)
            arena = vectors[:n].copy()
            index.add(arena, norms[:n].copy(), piece, parallel=[None, False, True][i % 3])
            behind = max(n // 2, 1)      # a reader whose arena predates the last add
            rows, _ = search_each(index, arena[:behind], norms[:behind], queries, 5)
            assert rows.max() < behind
            search_each(index, arena, norms[:n], queries, 5, allow=np.ones(n, np.bool_))
            index.search(arena, norms[:n], queries[0], 5)
        assert len(index) == 3_500
        index.validate(4_000)


def test_empty_index_returns_nothing(base):
    index = HnswIndex(DIM, "cosine")
    rows, dists = index.search(base, norms_of(base), base[0], K)
    assert rows.size == 0 and dists.size == 0
    rows, dists = search_each(index, base, norms_of(base), base[:2], K)
    assert np.all(rows == -1) and np.all(np.isinf(dists))
    index.validate(0)
    assert len(index) == 0


# ------------------------------------------------------------------ repair


@pytest.mark.parametrize("dropped", [0.25, 0.75])
def test_a_repaired_graph_is_sound_and_finds_the_kept_rows(base, queries, l2_index, dropped):
    """Vacuum's graphs="repair": the graph over the kept rows (renumbered), twins
    added in the kept part, validated and within recall of a graph built afresh."""
    rng = np.random.default_rng(5)
    arena = base.copy()
    arena[7] = arena[3]                     # a twin pair, both kept
    index = build(arena, "l2")
    kept = np.sort(rng.choice(N_ROWS, int(N_ROWS * (1 - dropped)), replace=False))
    kept = np.union1d(kept, [3, 7])
    new = np.ascontiguousarray(arena[kept])
    repaired = index.repaired(kept, new, norms_of(new))
    repaired.validate(len(kept))
    assert len(repaired) == len(kept) and repaired.extent == len(kept)
    truth = exact_top_k(new, queries, "l2")
    found = search_each(repaired, new, norms_of(new), queries, K, ef=64)[0]
    fresh = search_each(build(new, "l2"), new, norms_of(new), queries, K, ef=64)[0]
    assert recall(found, truth) >= recall(fresh, truth) - 0.05 >= 0.85
    rows, _ = repaired.search(new, norms_of(new), arena[3], 2, ef=64)
    assert set(rows.tolist()) == set(np.searchsorted(kept, [3, 7]).tolist())


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 120),
       metric=st.sampled_from(["l2", "cosine", "dot"]), pieces=st.integers(1, 5),
       k=st.integers(1, 8), filtered=st.booleans(), vacuumed=st.booleans())
def test_a_walk_as_wide_as_the_graph_returns_exact_searchs_answer(seed, n, metric, pieces,
                                                                  k, filtered, vacuumed):
    # Tiny graphs (m=4) over coarse values (one decimal) with repeated rows: full
    # lists re-pruned again and again, where a node can lose its only in-link
    # (then only the walk's sweep of the nodes it never reached finds it), and
    # exact ties, which the float32 beam ordered otherwise than exact search.
    # vacuumed: the graph repaired over a random part of its rows (lists chosen
    # again wholesale), as a vacuum leaves it.
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=(n, 4)), 1).astype(np.float32)
    x[rng.integers(0, n, n // 3)] = x[rng.integers(0, n, n // 3)]
    index = HnswIndex(4, metric, m=4, ef_construction=16, ef_search=8, seed=seed % 1000)
    for piece in np.array_split(rng.permutation(n), pieces):
        index.add(x, norms_of(x), piece)
    if vacuumed:
        kept = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
        x = np.ascontiguousarray(x[kept])
        index = index.repaired(kept, x, norms_of(x))
        n = len(kept)
    assert nodes_without_in_link(index) == []
    norms = norms_of(x)
    for _ in range(4):
        q = np.round(rng.normal(size=4), 1).astype(np.float32)
        allow = rng.random(n) < 0.7 if filtered else None
        rows, dists = index.search(x, norms, q, k, allow, ef=n)
        want, want_d = flat.search(metric, x, norms, q, k, allow)
        assert rows.tolist() == want.tolist(), (rows, want, dists, want_d)
        assert dists.tolist() == want_d.tolist()


@pytest.mark.parametrize("metric", ["dot", "l2", "cosine"])
def test_a_walk_as_wide_as_a_clustered_graph_equals_exact_search(metric):
    # 4 000 clustered rows: the diversity heuristic over inner products leaves
    # many small-norm nodes in no list (about 5% here), which only the sweep
    # of the nodes a walk never reached returns; also under a filter, at ef =
    # the rows allowed
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(20, 16)) * 3
    x = (centres[rng.integers(0, 20, 4000)] + rng.normal(size=(4000, 16))).astype(np.float32)
    norms = norms_of(x)
    index = HnswIndex(16, metric, m=16, ef_construction=100, seed=7)
    index.add(x, norms, np.arange(4000))
    assert nodes_without_in_link(index) == []
    allow = rng.random(4000) < 0.05
    for q in (centres[rng.integers(0, 20, 10)] + rng.normal(size=(10, 16))).astype(np.float32):
        rows, dists = index.search(x, norms, q, 10, ef=4000)
        want, want_d = flat.search(metric, x, norms, q, 10, None)
        assert rows.tolist() == want.tolist() and dists.tolist() == want_d.tolist()
        rows, dists = index.search(x, norms, q, 10, allow, ef=int(allow.sum()))
        want, want_d = flat.search(metric, x, norms, q, 10, allow)
        assert rows.tolist() == want.tolist() and dists.tolist() == want_d.tolist()


def test_an_inner_product_graph_keeps_the_recall_of_its_lists():
    # A guard for the lists the diversity heuristic chose: giving every node an
    # in-link by displacing the farthest entry of a full list took this graph
    # (4 000 clustered rows, queries from other clusters) from 0.82 to 0.77 at
    # ef 64. The build is deterministic (seed and insertion order only).
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(20, 16)) * 3
    x = (centres[rng.integers(0, 20, 4000)] + rng.normal(size=(4000, 16))).astype(np.float32)
    norms = norms_of(x)
    index = HnswIndex(16, "dot", m=16, ef_construction=200, ef_search=64, seed=7)
    index.add(x, norms, np.arange(4000))
    centres = rng.normal(size=(20, 16)) * 3
    queries = (centres[rng.integers(0, 20, 100)] + rng.normal(size=(100, 16))).astype(np.float32)
    found = 0
    for q in queries:
        rows, _ = index.search(x, norms, q, 10, ef=64)
        want, _ = flat.search("dot", x, norms, q, 10, None)
        found += len(set(rows.tolist()) & set(want.tolist()))
    assert found / 1000 >= 0.8, found / 1000


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_a_bound_searcher_answers_as_search(base, queries, metric):
    """searcher() (a kept search's walk: everything but the query bound once)
    returns what search() returns, filtered or not, k past the rows allowed too."""
    index = build(base, metric)
    norms = np.linalg.norm(base, axis=1).astype(np.float32)
    allow = np.random.default_rng(2).random(len(base)) < 0.3
    for k, mask, ef in ((10, None, 40), (5, allow, 64), (len(base) + 5, allow, None)):
        walk = index.searcher(base, norms, k, mask, ef)
        for q in queries[:20]:
            got, want = walk(q), index.search(base, norms, q, k, mask, ef)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    bad = queries[0].copy()
    bad[0] = np.nan
    with pytest.raises(vv.NonFiniteVectorError):      # as search raises it
        index.searcher(base, norms, 10, None, 40)(bad)
    # its kernel is called for the types it was bound with (kernels.jit.direct), not
    # through numba's dispatch: any other form of a query is converted to them, and
    # one of two dimensions, which the dispatch refused with a raw typing error, is
    # a DimensionError
    walk, q = index.searcher(base, norms, 10, None, 40), queries[0]
    want = walk(q)
    frozen = q.copy()
    frozen.flags.writeable = False
    for form in (q.tolist(), q.astype(np.float64), np.repeat(q, 2)[::2], frozen):
        got = walk(form)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    with pytest.raises(vv.DimensionError):
        walk(q[None, :])


_SCALE_ROWS = 300


@functools.lru_cache(maxsize=None)
def _scale_graphs(metric: str):
    """(arena, norms, an HNSW graph, an IVF-Flat index) over 300 16-d rows."""
    from varvedb.index.ivfpq import IvfIndex
    x = np.random.default_rng(5).standard_normal((_SCALE_ROWS, 16)).astype(np.float32)
    norms = norms_of(x)
    graph = HnswIndex(16, metric, m=8, ef_construction=64, seed=1)
    graph.add(x, norms, np.arange(_SCALE_ROWS))
    ivf = IvfIndex(16, metric, 8, None, seed=1)
    ivf.train(x, norms, np.arange(_SCALE_ROWS))
    ivf.add(x, norms, np.arange(_SCALE_ROWS))
    return x, norms, graph, ivf


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), metric=st.sampled_from(["dot", "cosine"]),
       exponent=st.floats(-44.0, np.log10(3e38)), k=st.integers(1, 20))
@example(seed=5, metric="cosine", exponent=2.5, k=1)      # the query is row 0, scaled
def test_a_huge_or_tiny_dot_or_cosine_query_walks_as_exact_search_ranks(seed, metric,
                                                                        exponent, k):
    """A dot or cosine query whose largest |element| is 1e-44..3e38: its float32
    distances overflowed (inf, NaN) or underflowed in the walk, which the exact
    scan had stopped by scaling the query by a power of two (distance.scaled_query).
    The walk scales it too (the float64 scores read it as it is), so it walks as
    the same query scaled into [1, 2) does, row for row, at any ef (a positive
    factor ranks rows alike); a walk as wide as the graph (ef >= rows), and
    IVF-Flat probing every list, rank as exact search does (flat.search) and as
    float64 scores do (numpy)."""
    x, norms, graph, ivf = _scale_graphs(metric)
    v = np.random.default_rng(seed).standard_normal(16)
    q = (v / np.abs(v).max() * 10.0 ** exponent).astype(np.float32)
    assume(np.isfinite(q).all() and q.any())
    # the same query scaled by a power of two into [1, 2): exactly, as a float32
    unit = (q.astype(np.float64) * 2.0 ** (1 - np.frexp(np.abs(q).max())[1])).astype(np.float32)
    assert 1 <= np.abs(unit).max() < 2
    for ef in (10, 40):
        assert graph.search(x, norms, q, k, ef=ef)[0].tolist() == \
            graph.search(x, norms, unit, k, ef=ef)[0].tolist()
    want, _ = flat.search(metric, x, norms, q, k, None)
    best, s = _oracle(metric, x, q, k, None)
    # a query along a row (seed 5 draws row 0 itself) has a cosine distance of ~1e-16,
    # whose rounding is absolute: tolerate 1e-12 of the scores' scale, not of that row's
    atol = 1e-12 * np.abs(s).max()
    assert np.allclose(s[want], s[best], rtol=1e-12, atol=atol)     # (near-ties either way)
    for rows, dist in (graph.search(x, norms, q, k, ef=_SCALE_ROWS),
                       graph.search(x, norms, q, k, ef=_SCALE_ROWS),    # (its kept call)
                       graph.searcher(x, norms, k, ef=_SCALE_ROWS)(q),
                       ivf.search(x, norms, q, k, probes=8)):
        assert rows.tolist() == want.tolist()
        assert np.allclose(dist, s[rows], rtol=1e-12, atol=atol)
