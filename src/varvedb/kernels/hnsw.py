"""HNSW graph kernels: the level draw, visited sets, the layered walk,
neighbour selection and the lock-free batch insert (the heaps and sorted
pools they use are in :mod:`varvedb.kernels.heaps`).

What this is for: :class:`varvedb.index.hnsw.HnswIndex` owns the graph arrays
and calls these functions; they hold every loop that touches nodes.

The graph (node id == arena row number; every array is indexed by row):

* ``levels``      int8  ``(cap,)``         top level of each row, -1 = not a node.
* ``links0``      int32 ``(cap, 2m)``      level-0 out-links.
* ``upper_slot``  int32 ``(cap,)``         row -> the row of its level-1 list in
                                            ``upper_links``, -1 if the node lives on
                                            level 0 only.
* ``upper_links`` int32 ``(lists, m)``     one list per (node, level above 0): a node
                                            of level L owns rows ``slot .. slot + L - 1``,
                                            its level-l list at ``slot + l - 1``.
* ``twins``       int32 ``(cap,)``         ring of rows with bit-identical vectors:
                                            -1 no ring; r >= 0 a linked node whose
                                            ring continues at r; r <= -2 an unlinked
                                            twin whose ring continues at -r - 2.

Why this layout: every node has a level-0 list, so that list is a dense row
(128 bytes at m=16) reached with one multiply, no indirection; about one node
in m has upper levels, so those lists live in a compact side array, each node
owning only the levels it has (~4 bytes per node at m=16; one slot of every
level for each upper node cost ~16 at 100k rows and grew with the top level).
A list fills from the front and ends at the first -1 or at its capacity, so
the walk reads no count array.

Twins: a database that keeps every row version inserts the same vector again
whenever a row changes but its vector does not. A crowd of identical points
defeats the diversity heuristic (they tie on every distance, fill each
other's lists and leave the newest with no in-link), so a node found to be
bit-identical to a node already in the graph is not linked at all: it joins
that node's twin ring, and a walk that measures any member of a ring reports
all of them at the same distance. A filter that hides every version but one
still finds that one.

Walks: the unfiltered walk keeps one sorted pool that is both the result set
and the candidate queue (see :func:`beam_search`); the filtered walk, whose
open candidates are not bounded by ef, keeps a candidate min-heap and a result
max-heap (see :func:`filtered_search`). Both use a visited set of uint16
generation stamps per thread (200 kB for 100 000 rows, in L2): starting a walk
bumps the stamp, and only one walk in 65 535 pays to clear it. Neighbour rows
(and their norms, where the metric reads them) and the next node's list are
prefetched before they are needed, which hides much of the memory latency of
the random reads. numba has no prefetch of its own: ``prefetch_row`` and
``prefetch_norm`` (:mod:`varvedb.kernels.distance`) emit LLVM's
``llvm.prefetch`` through an intrinsic (numba's extending API), one per cache
line of the row. Measured against the same kernels compiled with each prefetch a
no-op (``varvedb bench walk``, engine ``varvedb:nopf``, issue 32), at recall
0.95 they are worth 1.08x (f32 walk) and 1.17x (int8 walk) on glove-50 100k and
1.10x on the clustered 100k x 128 set's int8 walk; its f32 walk (512-byte rows)
ran 3 % faster without them.

A walk measures either the arena or the index's int8 codes of it
(:mod:`varvedb.kernels.codes`: a row is one cache line instead of four for
dim 50 in f32); :func:`search_one` then measures the coded walk's best few
candidates again from the arena and ranks those. The build always walks the
arena: walking codes there (and measuring the pool again for the neighbour
selection) was measured no faster. Tried and not kept either: prefetching,
one expansion ahead, the rows the next node links to (slower on glove-50);
renumbering the rows so that the nodes a walk meets together sit together
(breadth first from the entry: at recall 0.95, 1.06x on glove-50 and
1.13-1.17x on the clustered set; reverse Cuthill-McKee: 1.08x and 1.06x, f32),
which pays but needs the node id apart from the table's row (a translation the
masks, twins, rerank and answers would read), not built;
and, beside each level-0 list, its neighbours' 1-bit codes (RaBitQ-style,
offsets from the rows' centroid or from the list's owner) scored in one loop,
a row measured only where the estimate's bound could not reject it
(``varvedb bench walk``, issue 32): at recall 0.95, 0.96-1.00x the same walk
without them on glove-50 100k (2.3x fewer rows measured), 0.73-0.78x on the
clustered 100k x 128 set (the bound rejects 0.5 % of the rows there), for
twice a node's bytes.

A walk as wide as the graph is exact: a walk whose pool is not full at its
end has met every node it can reach, so :func:`search_one` then measures the
nodes it never visited (a graph may hold nodes no list links to: the
diversity heuristic over inner products drops the small-norm rows from
nearly every list). So with ``ef`` >= the rows allowed, a search returns
what exact search returns; a walk that fills its pool pays nothing for it.

Batch insert, parallel without locks, deterministic: new nodes go in batches.
:func:`find_links` searches the graph as it stood at the start of the batch,
one new node per lane at a time, also measures each new node against the
rest of its batch (so nodes of one batch can link to each other), selects its
out-links with the diversity heuristic and writes them to the node's own lists
(nothing can reach a new node yet, so no walk reads them).
:func:`reverse_edges` then groups the reverse links by (target, level) with a
stable sort, and :func:`apply_reverse_edges` lets one lane per group append
to, or re-prune, that target's list; :func:`keep_in_links` then appends,
serially, a node a re-prune left without an in-link to a list near it. No
list is written by two lanes and no
result depends on which lane computed it, so the graph depends only on the
seed and the insertion order, not even on the number of lanes. A batch too
small to pay for waking the threads goes to :func:`link_batch`, which runs the
same phases on the calling thread in one call (each as one lane of one) and
builds the same graph.

A lane is one thread's share of a phase: the phase kernels are plain ``nogil``
kernels that do one lane's share, and the index runs a phase's lanes on a
thread pool (index/hnsw.py), not a ``prange``: numba's parallel lowering
compiled each of them for tens of seconds, once per arena type, for no speed a
pool of threads does not give. The lanes of :func:`find_links` and
:func:`apply_reverse_edges` take their tasks (a new node, a target's group) one
at a time from a shared counter (:func:`claim`, an atomic add), not in fixed
slices (``lane``, ``lane + lanes``, ...): a lane that starts late or is
preempted (a loaded machine) leaves its tasks to the others instead of
making the whole batch wait on its slice. Which lane does a task changes
nothing in the graph (a task writes only its own node's lists, ``fwd`` rows or
group), so the graph still depends only on the seed and the insertion order.

Invariants kept:
* a list holds nodes only (``levels[id] >= level``), never its owner, never
  an id twice, its used entries form a prefix and the rest are -1;
* a twin (a ring member that is not the linked node) has no out-links and
  no list holds it;
* no kernel reads a list while another thread writes it (phases are separated
  by the index waiting for every lane of one before it starts the next).
"""

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from varvedb.kernels.jit import njit
from varvedb.kernels.distance import (
    METRIC_COSINE,
    all_finite,
    code_query_fits,
    load_row,
    prefetch_norm,
    prefetch_row,
    query_distance,
    query_norm,
    rank_rows,
    rerank_rows,
    row_distance,
    scaled_metric,
    scaled_query,
    unmanaged,
)
from varvedb.kernels.heaps import (
    bounded_insert,
    candidate_push,
    max_sort,
    merge_sorted,
    min_pop,
    sorted_insert,
    top_k_push,
)

_JIT = dict(cache=True, nogil=True, fastmath=True)
# A search never writes the graph, so its kernels take the graph's arrays (and
# the walk's rows) read-only: a mapped graph and an in-memory one share one
# specialisation. Not the build's kernels, which write the lists: typed
# read-only there, a cold-compiled process built graphs of lower recall. The two
# walks the build shares with the search (greedy_descend, beam_search) only read
# them and take them read-only from both (one specialisation per arena type, not
# two; three builds in a row in a cold-compiled process: the same recall, 0.941,
# as with main's two flavours, cold and cached).
#
# The search kernels take their arguments packed, a few tuples instead of ~30
# scalars and arrays (each one costs the caller a lookup and the dispatcher a
# type check):
#   graph   (links0, upper_slot, upper_links, twins, levels, entry, top, extent): the index's
#           state, packed once per state by the index (HnswIndex._graph);
#   data    (arena, norms, walk, walk_norms, allow): the rows scored, the rows
#           walked (the arena itself, or its codes) and the mask;
#   query_pair  (query, walk_query): the query and what the walk measures it
#           as (itself, or its codes' form);
#   params  (metric, walk_metric, rerank, ef, k, use_allow, lane);
#   ws      (visited, generation, cand_d, cand_i, res_d, res_i, fresh, exact_i,
#           exact_d):
#           one walk's scratch, packed once per workspace.
_SEARCH_READS = ("graph", "data")
# small helpers on the walk's inner loops are inlined at numba's IR level, so
# that no per-call array passing or reference counting is left in those loops
_INLINE = dict(_JIT, inline="always")

# search_one's answer when an int8 walk's query (``walk_query``, the codes' form the
# caller made of the query) does not fit float32's range: the caller makes it again
# with care (HnswIndex._walk) and walks again
CODE_QUERY_UNFIT = -3

# fastmath assumes no infinities, so "farther than anything" is a finite value
FAR = np.float32(3.0e38)

# sign bit of a pool id: that entry has been expanded (or needs no expanding)
EXPANDED = np.int32(-(2**31))
ID_MASK = np.int32(2**31 - 1)


# ---------------------------------------------------------------- level draw

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True, nogil=True)
def _splitmix64(x):
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def draw_levels(rows, seed, m, max_level):
    """Each row's level (int8), ``floor(-ln U / ln m)`` capped at ``max_level``.

    U comes from a splitmix64 hash of (seed, row) (``seed`` uint64): a draw
    that needs no stored RNG state and does not depend on how rows are split
    across calls. Not fastmath: the same row gets the same level everywhere.
    """
    salt = _splitmix64(seed)
    log_m = np.log(np.float64(m))
    out = np.empty(rows.shape[0], np.int8)
    for i in range(rows.shape[0]):
        h = _splitmix64(np.uint64(rows[i]) ^ salt)
        u = (np.float64(h >> np.uint64(11)) + 0.5) * (1.0 / 2.0**53)
        out[i] = min(np.floor(-np.log(u) / log_m), max_level)
    return out


# ---------------------------------------------------------------- task counter


@intrinsic
def claim(typingctx, counter):
    """The next task of a phase: ``counter[0]`` (int64, 1-D) before adding 1 to
    it, as one atomic add (LLVM ``atomicrmw add``, sequentially consistent), so
    lanes that claim at once each get a task of their own."""
    if not (isinstance(counter, types.Array) and counter.ndim == 1
            and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, signature.args[0], array,
                                           [context.get_constant(types.intp, 0)],
                                           wraparound=False)
        return builder.atomic_rmw("add", pointer, ir.Constant(ir.IntType(64), 1), "seq_cst")

    return types.int64(counter), codegen


# ---------------------------------------------------------------- visited set


@njit(**_JIT)
def next_stamp(visited, generation, lane):
    """Start a new walk on ``visited`` (uint16 row); returns its stamp."""
    stamp = generation[lane] + 1
    if stamp > 0xFFFF:
        visited[:] = 0
        stamp = 1
    generation[lane] = stamp
    return np.uint16(stamp)


# ---------------------------------------------------------------- graph walk


@njit(**_INLINE)
def ring_next(twins, row):
    """The next row in ``row``'s twin ring, or -1 when it has none."""
    code = twins[row]
    return code if code >= -1 else -code - 2


@njit(**_INLINE)
def _level_list(links0, upper_slot, upper_links, row, level):
    # the node's list of one level (the node must be on that level)
    if level == 0:
        return links0[row]
    return upper_links[upper_slot[row] + level - 1]


# The walk's kernels never write the graph: its arrays are compiled read-only, so
# that the build (writable lists) and the search (a mapped graph) share one
# specialisation per arena type, not one each.
@njit(readonly=("upper_slot", "upper_links"), **_JIT)
def greedy_descend(arena, norms, query, q_norm, metric, upper_slot, upper_links,
                   node, dist, top, bottom):
    """Greedy walk (ef = 1) down levels ``top`` .. ``bottom + 1``; returns (node, dist).

    Each step of a level moves to a strictly nearer node, so a level takes fewer
    steps than there are nodes; the walk stops there all the same, because a NaN
    distance (an overflowed score) under fastmath may compare "nearer" every
    time, and the walk would then circle between nodes for ever."""
    arena, norms, query = unmanaged(arena), unmanaged(norms), unmanaged(query)
    upper_slot, upper_links = unmanaged(upper_slot), unmanaged(upper_links)
    for level in range(top, bottom, -1):
        improved = True
        steps = 0
        while improved and steps <= upper_slot.shape[0]:
            steps += 1
            improved = False
            slot = upper_slot[node] + level - 1
            if slot < level - 1 or slot >= upper_links.shape[0]:
                break
            for j in range(upper_links.shape[1]):
                v = upper_links[slot, j]
                if v < 0:
                    break
                if v >= upper_slot.shape[0] or v >= arena.shape[0]:
                    continue
                d = query_distance(arena, norms, v, query, q_norm, metric)
                if d < dist:
                    dist = d
                    node = v
                    improved = True
    return node, dist


# (`level` and `report_twins` are plain arguments, not literals: the build walks
# every level, the search level 0, through the one specialisation)
@njit(readonly=("links0", "upper_slot", "upper_links", "twins"), **_JIT)
def beam_search(arena, norms, query, q_norm, metric, links0, upper_slot, upper_links, twins,
                level, n_seeds, ef, report_twins, visited, stamp, pool_d, pool_i, fresh):
    """Unfiltered best-first walk of one level; returns the pool size (<= ef).

    ``pool_d/pool_i[:ef]`` is one array sorted by distance that is both the
    result set and the candidate queue: an entry that needs no expanding
    carries the sign bit (EXPANDED) on its id, and every entry before
    ``cursor`` carries it. Inserting is a binary search and a short shift, and
    the walk ends when no entry is left open, which is HNSW's stopping rule
    (the nearest open candidate is farther than the ef-th result). Seeds are
    ``pool_*[:n_seeds]``, ascending, possibly flagged; the results are left
    there, ascending, flags cleared. With ``report_twins`` the twins of each
    measured node enter the pool beside it, flagged. Rows at or past
    ``visited.shape[0]`` are never measured.
    """
    arena, norms, query, links0 = (unmanaged(arena), unmanaged(norms), unmanaged(query),
                                   unmanaged(links0))
    upper_slot, upper_links, twins, visited = (unmanaged(upper_slot), unmanaged(upper_links),
                                               unmanaged(twins), unmanaged(visited))
    pool_d, pool_i, fresh = unmanaged(pool_d), unmanaged(pool_i), unmanaged(fresh)
    width = links0.shape[1] if level == 0 else upper_links.shape[1]
    n_rows = visited.shape[0]
    for s in range(n_seeds):
        visited[pool_i[s] & ID_MASK] = stamp
    size = n_seeds
    cursor = 0
    while cursor < size and pool_i[cursor] < 0:
        cursor += 1
    while cursor < size:
        node = pool_i[cursor]
        pool_i[cursor] = node | EXPANDED
        # `nxt` is the open entry to expand next; its list is prefetched as
        # soon as it is known, one expansion ahead of its use
        nxt = cursor + 1
        while nxt < size and pool_i[nxt] < 0:
            nxt += 1
        if level == 0 and nxt < size:
            prefetch_row(links0, pool_i[nxt])
        # mark and prefetch every new neighbour before measuring any, so the
        # arena reads overlap instead of waiting on each other
        # the node's list of this level, chosen once per expansion, not per entry
        if level == 0:
            lst = links0[node]
        else:
            lst = upper_links[upper_slot[node] + level - 1]
        n_fresh = 0
        for j in range(width):
            v = lst[j]
            if v < 0:
                break
            if v < n_rows and visited[v] != stamp:
                visited[v] = stamp
                fresh[n_fresh] = v
                n_fresh += 1
                prefetch_row(arena, v)
                prefetch_norm(norms, v, metric)
        for t in range(n_fresh):
            v = fresh[t]
            d = query_distance(arena, norms, v, query, q_norm, metric)
            if size == ef and d >= pool_d[size - 1]:
                continue
            size, pos = bounded_insert(pool_d, pool_i, size, ef, d, v)
            if pos < cursor:
                cursor = pos
            if pos <= nxt:
                nxt = pos
                if level == 0:
                    prefetch_row(links0, v)
            if report_twins and twins[v] != -1:
                twin = ring_next(twins, v)
                while 0 <= twin < n_rows and twin != v and (size < ef or d < pool_d[size - 1]):
                    if visited[twin] != stamp:
                        visited[twin] = stamp
                        size, pos = bounded_insert(pool_d, pool_i, size, ef, d, twin | EXPANDED)
                        if pos <= nxt:
                            nxt += 1
                    twin = ring_next(twins, twin)
        while cursor < size and pool_i[cursor] < 0:
            cursor += 1
    for s in range(size):
        pool_i[s] &= ID_MASK
    return size


@njit(**_JIT)
def filtered_search(arena, norms, query, q_norm, metric, links0, twins, seed, seed_dist, ef,
                    allow, visited, stamp, cand_d, cand_i, res_d, res_i, fresh):
    """Best-first walk of level 0 that returns allowed nodes only.

    Returns the number of results, left in ``res_d/res_i`` as a max-heap of
    at most ``ef`` allowed nodes. Nodes that are not allowed are still
    expanded, so a filter never cuts the graph; the walk ends when the
    nearest open candidate is farther than the ef-th allowed result (so a
    selective filter walks far: the planner sends those to exact search).
    """
    arena, norms, query, links0 = (unmanaged(arena), unmanaged(norms), unmanaged(query),
                                   unmanaged(links0))
    twins, allow, visited = unmanaged(twins), unmanaged(allow), unmanaged(visited)
    cand_d, cand_i, res_d, res_i, fresh = (unmanaged(cand_d), unmanaged(cand_i),
                                           unmanaged(res_d), unmanaged(res_i), unmanaged(fresh))
    visited[seed] = stamp
    n_cand = candidate_push(cand_d, cand_i, 0, seed_dist, seed)
    n_res = _report_allowed(twins, allow, visited, stamp, seed, seed_dist, ef, res_d, res_i, 0)
    while n_cand > 0:
        if n_res == ef and cand_d[0] > res_d[0]:
            break
        node = cand_i[0]
        n_cand = min_pop(cand_d, cand_i, n_cand)
        if n_cand > 0:
            prefetch_row(links0, cand_i[0])
        n_fresh = 0
        for j in range(links0.shape[1]):
            v = links0[node, j]
            if v < 0:
                break
            if v < visited.shape[0] and visited[v] != stamp:
                visited[v] = stamp
                fresh[n_fresh] = v
                n_fresh += 1
                prefetch_row(arena, v)
                prefetch_norm(norms, v, metric)
        for t in range(n_fresh):
            v = fresh[t]
            d = query_distance(arena, norms, v, query, q_norm, metric)
            if n_res < ef or d < res_d[0]:
                n_cand = candidate_push(cand_d, cand_i, n_cand, d, v)
                n_res = _report_allowed(twins, allow, visited, stamp, v, d, ef, res_d, res_i,
                                        n_res)
    return n_res


@njit(**_INLINE)
def _report_allowed(twins, allow, visited, stamp, node, d, ef, res_d, res_i, n_res):
    # the node itself, then the twins in its ring, into the result max-heap
    v = node
    while True:
        if allow[v]:
            n_res = top_k_push(res_d, res_i, n_res, ef, d, v)
        v = ring_next(twins, v)
        if v < 0 or v >= visited.shape[0] or v == node:
            return n_res
        if visited[v] == stamp:
            return n_res
        visited[v] = stamp


# ------------------------------------------------------------------- queries


@njit(readonly=("links0", "upper_slot", "upper_links"), **_JIT)
def _covered_entry(links0, upper_slot, upper_links, entry, top, n_rows):
    # the entry point's first neighbour below n_rows, on the highest level
    # that has one: where a reader whose arena predates the entry starts
    if entry >= links0.shape[0] or entry >= upper_slot.shape[0]:
        return -1, -1
    for level in range(top, -1, -1):
        if level > 0:
            slot = upper_slot[entry] + level - 1
            if slot < level - 1 or slot >= upper_links.shape[0]:
                continue
            lst = upper_links[slot]
        else:
            lst = links0[entry]
        for v in lst:
            if 0 <= v < n_rows:
                return v, level
    return -1, -1


@njit(readonly=_SEARCH_READS, **_JIT)
def search_one(graph, data, query_pair, params, ws, out_rows, out_dist):
    """k nearest allowed nodes to ``query`` into ``out_*``; returns the count.

    The arguments come packed (see ``_SEARCH_READS`` above for each tuple).

    The walk measures ``walk`` rows against ``walk_query`` by ``walk_metric``:
    the arena itself (``walk is arena``), or its int8 codes
    (:mod:`varvedb.kernels.codes`), whose ``rerank`` best candidates are then
    measured exactly from the arena before the best k are kept (a negative
    ``rerank``: its ``-rerank`` best rows are only written to ``out_rows``, for
    the caller to rerank with :func:`rerank_rows`). ``out_dist`` gets exact float64
    scores on pgvector's scale and rows are ranked by (score, row), so a
    caller needs no second pass: the walk's best ``k + tie_spare(k)`` (all of a
    pool holding the whole graph) are scored (into ``exact_*``), so that
    near-ties the float32 walk ordered either way are cut by (float64 score,
    row), as exact search cuts them.

    Returns -1, having searched nothing, when the query is not finite,
    CODE_QUERY_UNFIT when an int8 l2 walk's query is past float32's range (made
    in float32: HnswIndex._walk makes it again, scaled), and -2
    when the arguments do not fit together (the query's length is not the
    arena's width, the mask or the norms cover too few rows, the scratch or
    the output is too small): a caller may pass them unchecked.
    Scratch: ``visited`` holds one uint16 stamp per row and
    ``generation[lane]`` the lane's current stamp; ``res_*`` and ``exact_*``
    need ef entries, ``cand_*`` more than 2 ef (filtered walks only), ``fresh`` 2m.
    """
    links0, upper_slot, upper_links, twins, levels, entry, top, extent = graph
    arena, norms, walk, walk_norms, allow = data
    query, walk_query = query_pair
    metric, walk_metric, rerank, ef, k, use_allow, lane = params
    visited, generation, cand_d, cand_i, res_d, res_i, fresh, exact_i, exact_d = ws
    if query.shape[0] != arena.shape[1] or use_allow and allow.shape[0] < extent \
            or metric == METRIC_COSINE and norms.shape[0] < arena.shape[0] \
            or res_d.shape[0] < ef or out_rows.shape[0] < k or out_dist.shape[0] < k:
        return -2
    if not all_finite(query):
        return -1
    if not code_query_fits(query, walk_query, walk_metric):
        # an int8 walk's query q' = step q (float32) overflowed or underflowed, or a
        # huge l2 query's distances would: the caller makes it in float64, scaled
        return CODE_QUERY_UNFIT
    # a huge or tiny dot or cosine query walks scaled by a power of two (its float32
    # distances would overflow or underflow; the ranking is the same), as exact
    # search scores it; the float64 scores (rerank_rows, _rank_pool) read `query`
    # (a huge l2 query walks with its rows scaled alike: scaled_metric)
    measure = scaled_metric(walk_query, walk_metric)
    walk_query = scaled_query(walk_query, measure)
    # Rows at or past `n_rows` are skipped, so a search that overlaps an add()
    # (which may link rows this caller's arena or mask does not cover yet)
    # stays inside every array it was handed.
    n_rows = min(visited.shape[0], links0.shape[0], twins.shape[0], levels.shape[0],
                 arena.shape[0], walk.shape[0])
    if use_allow:
        n_rows = min(n_rows, allow.shape[0])
    if entry >= n_rows:
        entry, top = _covered_entry(links0, upper_slot, upper_links, entry, top, n_rows)
    q_norm = query_norm(walk_query, measure)
    stamp = next_stamp(visited, generation, lane)
    visited = visited[:n_rows]
    n = 0
    if entry >= 0:
        dist = query_distance(walk, walk_norms, entry, walk_query, q_norm, measure)
        node, dist = greedy_descend(walk, walk_norms, walk_query, q_norm, measure,
                                    upper_slot, upper_links, entry, dist, top, 0)
        if use_allow:
            n = filtered_search(walk, walk_norms, walk_query, q_norm, measure, links0,
                                twins, node, dist, ef, allow, visited, stamp, cand_d, cand_i,
                                res_d, res_i, fresh)
        else:
            res_d[0] = dist
            res_i[0] = node
            n_seeds = 1
            twin = ring_next(twins, node)
            while 0 <= twin < n_rows and twin != node and n_seeds < ef:
                res_d[n_seeds] = dist
                res_i[n_seeds] = twin | EXPANDED
                n_seeds += 1
                twin = ring_next(twins, twin)
            n = beam_search(walk, walk_norms, walk_query, q_norm, measure, links0,
                            upper_slot, upper_links, twins, 0, n_seeds, ef, True, visited,
                            stamp, res_d, res_i, fresh)
    complete = n < ef
    # a pool that holds every node the walk may return (it never filled, or it
    # has room for the whole graph) is ranked whole: ties past the spares (a
    # cosine query of zeros ties every row) are cut by row, as exact search does
    whole = complete or ef >= extent
    if complete:
        # the pool is not full: the walk met every node it can reach, and every
        # one it met is in the pool; the nodes it never reached are measured here
        n = _sweep(walk, walk_norms, walk_query, q_norm, measure, levels, allow,
                   use_allow, visited, stamp, ef, res_d, res_i, n)
    if use_allow:
        max_sort(res_d, res_i, n)      # the filtered walk's pool is a max-heap
    if walk_metric != metric and not whole:     # (a whole pool is ranked below)
        if rerank < 0:
            return _candidates(res_i, min(n, -rerank), out_rows)
        return rerank_rows(arena, norms, query, metric, res_i, min(n, rerank), k, res_d,
                           out_rows, out_dist)
    # a walk as wide as the graph is exact search, coded or not: its whole pool
    # ranked by (float64 score, row), as exact search ranks
    return _rank_pool(arena, query, metric, res_i, n, n if whole else k + tie_spare(k), k,
                      exact_i, exact_d, out_rows, out_dist)


@njit(**_JIT)
def _sweep(walk, walk_norms, walk_query, q_norm, walk_metric, levels, allow, use_allow,
           visited, stamp, ef, pool_d, pool_i, n):
    # every allowed node `visited` has no stamp for, into the pool (the filtered
    # walk's max-heap with use_allow, else the ascending pool), which has room
    # for ef; returns its size
    for r in range(visited.shape[0]):
        if visited[r] == stamp or levels[r] < 0 or use_allow and not allow[r]:
            continue
        d = query_distance(walk, walk_norms, r, walk_query, q_norm, walk_metric)
        if use_allow:
            n = top_k_push(pool_d, pool_i, n, ef, d, r)
        elif n < ef or d < pool_d[n - 1]:
            n, _ = bounded_insert(pool_d, pool_i, n, ef, d, r)
    return n


@njit(**_INLINE)
def tie_spare(k):
    """Candidates past the k-th that a walk scores exactly before it cuts: as many
    as exact search keeps (``spare`` in :func:`varvedb.index.flat.search`)."""
    return max(8, k // 4)


@njit(**_INLINE)
def _rank_pool(arena, query, metric, pool_i, n, scored, k, exact_i, exact_d, out_rows,
               out_dist):
    # the best k of a pool (ascending by the walk's float32 distance) by (float64
    # score, row): its first `scored` scored and sorted, then cut
    # scored as int64 rows, the very specialisation exact search scores with
    # (its rank_rows over int64 rows): equal scores to the bit
    count = min(n, scored)
    for j in range(count):
        exact_i[j] = pool_i[j]
    rank_rows(arena, exact_i[:count], query, metric, exact_d[:count])
    count = min(count, k)
    for j in range(count):
        out_rows[j] = exact_i[j]
        out_dist[j] = exact_d[j]
    return count


@njit(**_INLINE)
def _candidates(rows, n, out_rows):
    """A coded walk's best ``n`` rows into ``out_rows``, for a caller that reranks
    them itself (after asking for their pages: index/prefetch.py)."""
    for j in range(n):
        out_rows[j] = rows[j]
    return n


# -------------------------------------------------------- neighbour selection


@njit(**_JIT)
def select_diverse(arena, norms, metric, cand_d, cand_i, n_cand, max_keep, out):
    """The HNSW diversity heuristic; returns how many ids it wrote to ``out``.

    Candidates come sorted by ascending distance to the base node. One is kept
    when it is nearer to the base than to every node kept before it, so the
    kept links point in different directions and long links survive.
    """
    arena, norms = unmanaged(arena), unmanaged(norms)
    count = 0
    for c in range(n_cand):
        if count == max_keep:
            break
        v = cand_i[c]
        dv = cand_d[c]
        keep = True
        for s in range(count):
            if row_distance(arena, norms, v, out[s], metric) < dv:
                keep = False
                break
        if keep:
            out[count] = v
            count += 1
    return count


@njit(**_INLINE)
def _same_vector(arena, a, b):
    for j in range(arena.shape[1]):
        if arena[a, j] != arena[b, j]:
            return False
    return True


# -------------------------------------------------------------- batch insert


@njit(**_JIT)
def _batch_candidates(arena, level, batch, self_pos, batch_dist, levels, limit, x_d, x_i):
    # other nodes of this batch on this level, nearer than `limit`, ascending;
    # not those bit-identical to this node: they end as twins (of it, or of the
    # node it twins), and a node whose only links went to its own twins would be
    # left with no links and no in-links once join_twins takes those out
    n_x = 0
    own = batch_dist[self_pos]
    u = batch[self_pos]
    for t in range(batch.shape[0]):
        w = batch[t]
        if t != self_pos and levels[w] >= level and batch_dist[t] < limit and not (
                batch_dist[t] == own and _same_vector(arena, w, u)):
            n_x = sorted_insert(x_d, x_i, n_x, batch_dist[t], w)
    return n_x


@njit(**_JIT)
def _find_twin(arena, batch, pos, batch_dist, pool_d, pool_i, n_pool):
    # An identical row gives exactly the distance the node gives itself (the
    # same arithmetic on the same bits), so only those ties are compared.
    u = batch[pos]
    own = batch_dist[pos]
    for j in range(n_pool):
        if pool_d[j] == own and _same_vector(arena, pool_i[j], u):
            return pool_i[j]
    for t in range(pos):
        if batch_dist[t] == own and _same_vector(arena, batch[t], u):
            return batch[t]
    return -1


@njit(**_JIT)
def find_links(arena, norms, metric, batch, levels, links0, upper_slot, upper_links, twins,
               entry, top, m, ef, visited, generation, query, batch_dist,
               pool_d, pool_i, fresh, x_d, x_i, s_d, s_i, fwd, twin_of, tasks, lane, lanes):
    """Phase 1 of a batch, one lane's share: choose and write the out-links of
    the new nodes this lane claims from ``tasks`` (:func:`claim`; the caller
    sets ``tasks[0] = 0`` before the phase's lanes start).

    Reads the graph as it stood before the batch (``entry``, ``top``); fills
    ``fwd[pos, level, :m]`` with the links of ``batch[pos]`` (-1 padded) for
    the reverse pass, and ``twin_of[pos]`` with the row it duplicates or -1.
    Scratch arrays have one row per lane; this share uses row ``lane``. The
    lanes of one batch run at once (each on a thread of its own): each writes
    only its own nodes' lists and ``fwd`` / ``twin_of`` rows.
    """
    seen, row, near_d = visited[lane], query[lane], batch_dist[lane]
    p_d, p_i, new, c_d, c_i, m_d, m_i = (pool_d[lane], pool_i[lane], fresh[lane], x_d[lane],
                                         x_i[lane], s_d[lane], s_i[lane])
    while True:
        pos = claim(tasks)
        if pos >= batch.shape[0]:
            break
        u = batch[pos]
        level_u = levels[u]
        load_row(arena, u, row)
        q_norm = norms[u] if metric == METRIC_COSINE else np.float32(0.0)
        for t in range(batch.shape[0]):
            near_d[t] = query_distance(arena, norms, batch[t], row, q_norm, metric)
        n_seeds = 0
        if top >= 0:
            dist = query_distance(arena, norms, entry, row, q_norm, metric)
            node, dist = greedy_descend(arena, norms, row, q_norm, metric, upper_slot,
                                        upper_links, entry, dist, top, np.int64(level_u))
            p_d[0] = dist
            p_i[0] = node
            n_seeds = 1
        twin_of[pos] = -1
        for level in range(level_u, -1, -1):
            n_w = 0
            if level <= top:
                # the pool this level leaves behind seeds the walk one level down
                stamp = next_stamp(seen, generation, lane)
                n_w = beam_search(arena, norms, row, q_norm, metric, links0, upper_slot,
                                  upper_links, twins, level, n_seeds, ef, False, seen,
                                  stamp, p_d, p_i, new)
                n_seeds = n_w
            if level == 0:
                twin_of[pos] = _find_twin(arena, batch, pos, near_d, p_d, p_i, n_w)
            limit = p_d[n_w - 1] if n_w == ef else FAR
            n_x = _batch_candidates(arena, level, batch, pos, near_d, levels, limit, c_d, c_i)
            n_s = merge_sorted(p_d, p_i, n_w, c_d, c_i, n_x, m_d, m_i)
            out = fwd[pos, level]
            kept = select_diverse(arena, norms, metric, m_d, m_i, n_s, m, out)
            out[kept:] = -1
        if twin_of[pos] >= 0:
            fwd[pos] = -1
            continue
        for level in range(level_u + 1):
            own = _level_list(links0, upper_slot, upper_links, u, level)
            own[:m] = fwd[pos, level]
            own[m:] = -1


@njit(**_JIT)
def join_twins(batch, twin_of, levels, fwd, twins, links0, upper_slot, upper_links):
    """Splice each twin of the batch into its original's ring, then unlink it.

    A node of the batch may have chosen a batch-mate that turned out to be a
    twin; so that no list holds a twin, that link becomes one to the linked
    node of the twin's ring (the same vector) where that is a node on the level
    and not already in the list, else it is taken out of the node's lists (and
    of ``fwd``). Taken out, a node whose only choice was a twin would have no
    links, and so no in-links either.
    """
    for pos in range(batch.shape[0]):
        original = twin_of[pos]
        if original < 0:
            continue
        u = batch[pos]
        after = ring_next(twins, original)
        after = original if after < 0 else after
        twins[original] = u if twins[original] >= -1 else -u - 2
        twins[u] = -after - 2
    for pos in range(batch.shape[0]):
        u = batch[pos]
        for level in range(levels[u] + 1):
            for j in range(fwd.shape[2]):
                v = fwd[pos, level, j]
                if v >= 0 and twins[v] <= -2:
                    own = _level_list(links0, upper_slot, upper_links, u, level)
                    o = _ring_node(twins, v)
                    if o >= 0 and o != u and levels[o] >= level and not _holds(own, o):
                        fwd[pos, level, j] = o
                        _replace_link(own, v, o)
                    else:
                        fwd[pos, level, j] = -1
                        _remove_link(own, v)


@njit(**_INLINE)
def _ring_node(twins, v):
    # the linked node of v's twin ring (the one member whose code is >= 0), or -1
    x = ring_next(twins, v)
    while x >= 0 and x != v:
        if twins[x] >= 0:
            return x
        x = ring_next(twins, x)
    return -1


@njit(**_INLINE)
def _replace_link(lst, v, o):
    for j in range(lst.shape[0]):
        if lst[j] == v:
            lst[j] = o
            return


@njit(**_JIT)
def _remove_link(lst, v):
    gap = 0
    for j in range(lst.shape[0]):
        if lst[j] == v:
            gap = 1
        elif gap:
            lst[j - 1] = lst[j]
    if gap:
        lst[lst.shape[0] - 1] = -1


@njit(**_JIT)
def reverse_edges(batch, levels, fwd):
    """Phase 2a: the reverse links of a batch, grouped by target and level.

    Returns ``(keys, sources, starts)``: ``keys[starts[g]]`` is
    ``target * n_levels + level`` of group g and ``sources[starts[g]:
    starts[g + 1]]`` its new in-links in batch order (a stable sort).
    """
    n_levels = fwd.shape[1]
    count = 0
    for pos in range(batch.shape[0]):
        for level in range(levels[batch[pos]] + 1):
            for j in range(fwd.shape[2]):
                if fwd[pos, level, j] >= 0:
                    count += 1
    keys = np.empty(count, np.int64)
    sources = np.empty(count, np.int32)
    e = 0
    for pos in range(batch.shape[0]):
        u = batch[pos]
        for level in range(levels[u] + 1):
            for j in range(fwd.shape[2]):
                v = fwd[pos, level, j]
                if v >= 0:
                    keys[e] = np.int64(v) * n_levels + level
                    sources[e] = u
                    e += 1
    order = np.argsort(keys, kind="mergesort")
    keys = keys[order]
    sources = sources[order]
    starts = np.empty(count + 1, np.int64)
    n_groups = 0
    for i in range(count):
        if i == 0 or keys[i] != keys[i - 1]:
            starts[n_groups] = i
            n_groups += 1
    starts[n_groups] = count
    return keys, sources, starts[: n_groups + 1]


@njit(**_JIT)
def _link_back(arena, norms, metric, target, level, sources, links0, upper_slot,
               upper_links, query, over_i, union_d, union_i, drops):
    # adds `sources` to the target's list; returns how many ids a re-prune dropped
    # (written to `drops`: the ids that lost this in-link, newcomers included)
    lst = _level_list(links0, upper_slot, upper_links, target, level)
    cap = lst.shape[0]
    count = 0
    while count < cap and lst[count] >= 0:
        count += 1
    n_over = 0
    for s in sources:
        present = False
        for j in range(count):
            if lst[j] == s:
                present = True
                break
        if present:
            continue
        if count < cap:
            lst[count] = s
            count += 1
        else:
            over_i[n_over] = s
            n_over += 1
    if n_over == 0:
        return 0
    # full: re-prune the union of the old list and the newcomers
    load_row(arena, target, query)
    q_norm = norms[target] if metric == METRIC_COSINE else np.float32(0.0)
    n = 0
    for j in range(count + n_over):
        v = lst[j] if j < count else over_i[j - count]
        n = sorted_insert(union_d, union_i, n,
                           query_distance(arena, norms, v, query, q_norm, metric), v)
    kept = select_diverse(arena, norms, metric, union_d, union_i, n, cap, lst)
    lst[kept:] = -1
    # the kept ids are a subsequence of the union (the heuristic keeps them in
    # its order): one pass sets the others apart
    n_drops = 0
    t = 0
    for j in range(n):
        v = union_i[j]
        if t < kept and lst[t] == v:
            t += 1
        else:
            drops[n_drops] = v
            n_drops += 1
    return n_drops


@njit(**_INLINE)
def _holds(lst, v):
    for w in lst:
        if w < 0:
            return False
        if w == v:
            return True
    return False


@njit(**_JIT)
def drop_space(sources, starts, links0):
    """Room for what :func:`apply_reverse_edges` drops: ``(drops, n_drops)``; group
    g writes ``drops[drop_base(g)]`` on (its newcomers plus a full list at most)."""
    n_groups = starts.shape[0] - 1
    return (np.empty(sources.shape[0] + n_groups * links0.shape[1], np.int32),
            np.zeros(n_groups, np.int64))


@njit(**_INLINE)
def drop_base(starts, g, links0):
    return starts[g] + g * links0.shape[1]


@njit(**_JIT)
def apply_reverse_edges(arena, norms, metric, keys, sources, starts, n_levels, links0,
                        upper_slot, upper_links, query, over_i, union_d, union_i,
                        drops, n_drops, tasks, lane, lanes):
    """Phase 2b, one lane's share: add the groups this lane claims from ``tasks``
    (:func:`claim`, set to 0 before the phase) their in-links, each to its own
    target (lanes run at once: no two write one list).

    A target whose list is full chooses it again from the old list and the
    newcomers; the ids that choice drops go to group g's part of ``drops``
    (``n_drops[g]`` of them, from :func:`drop_base`) for :func:`keep_in_links`.
    Scratch arrays have one row per lane; this share uses row ``lane``.
    """
    row, over, u_d, u_i = query[lane], over_i[lane], union_d[lane], union_i[lane]
    while True:
        g = claim(tasks)
        if g >= starts.shape[0] - 1:
            break
        lo = starts[g]
        key = keys[lo]
        base = drop_base(starts, g, links0)
        n_drops[g] = _link_back(arena, norms, metric, key // n_levels, key % n_levels,
                                sources[lo:starts[g + 1]], links0, upper_slot, upper_links,
                                row, over, u_d, u_i, drops[base:])


@njit(**_JIT)
def keep_in_links(keys, starts, n_levels, drops, n_drops, links0, upper_slot, upper_links):
    """Phase 2c: an id a re-prune dropped is linked again where a list has room.

    A dropped node's in-links are looked for where they nearly always are, in
    the lists of its own out-neighbours; when none is found there it is
    appended to the list of the node that dropped it, or of one of its own
    out-neighbours or theirs, the first with room (:func:`_relink`). An entry
    the diversity heuristic chose is given up only when all of those are full,
    and only one whose node keeps another in-link: displacing the farthest
    entry of a full list whatever it was cost inner-product graphs a tenth of
    their recall, for nodes that are seldom anyone's answer. So every node
    keeps an in-link where the graph has any room near it; a walk as wide as
    the graph finds even one that did not (:func:`search_one` measures every
    node a walk that did not fill its pool never reached). Serial, in group order,
    after phase 2b: the graph still depends only on the seed and the insertion
    order.
    """
    for g in range(starts.shape[0] - 1):
        key = keys[starts[g]]
        target, level = key // n_levels, key % n_levels
        base = drop_base(starts, g, links0)
        for d in range(n_drops[g]):
            w = np.int64(drops[base + d])
            if not _has_in_link(links0, upper_slot, upper_links, w, level, -1):
                _relink(links0, upper_slot, upper_links, w, level, target)


@njit(**_JIT)
def _count_in_links(levels, links0, upper_slot, upper_links, level, indeg):
    # indeg[v]: how many level lists hold v
    indeg[:] = 0
    for r in range(levels.shape[0]):
        if levels[r] >= level:
            for v in _level_list(links0, upper_slot, upper_links, r, level):
                if v < 0:
                    break
                indeg[v] += 1


# _has_in_link and _relink take their nodes as int64 from every caller (a list's
# entry is int32, a loop's index int64): one specialisation each, not two
@njit(**_JIT)
def _has_in_link(links0, upper_slot, upper_links, w, level, skip):
    # is `w` in the level list of one of its own out-neighbours (but `skip`)?
    for x in _level_list(links0, upper_slot, upper_links, w, level):
        if x < 0:
            return False
        if x != skip and _holds(_level_list(links0, upper_slot, upper_links, x, level), w):
            return True
    return False


@njit(**_INLINE)
def _append(lst, v):
    # v at the end of a list with room (and not holding it); False when full
    for j in range(lst.shape[0]):
        if lst[j] == v:
            return True
        if lst[j] < 0:
            lst[j] = v
            return True
    return False


@njit(**_JIT)
def _relink(links0, upper_slot, upper_links, w, level, target):
    # w appended where a list has room, nearest first: the level list of
    # `target`, else of one of w's own out-neighbours, else of one of theirs.
    # Only when every one of those is full does w take a place: that of the
    # farthest entry of target's list whose node keeps another in-link, so no
    # node loses its last one. False when not even that is found.
    own = _level_list(links0, upper_slot, upper_links, w, level)
    for o in range(-1, own.shape[0]):
        owner = target if o < 0 else own[o]
        if owner < 0:
            break
        if owner != w and _append(_level_list(links0, upper_slot, upper_links, owner, level), w):
            return True
    for x in own:
        if x < 0:
            break
        for y in _level_list(links0, upper_slot, upper_links, x, level):
            if y < 0:
                break
            if y != w and _append(_level_list(links0, upper_slot, upper_links, y, level), w):
                return True
    if target == w:
        return False
    lst = _level_list(links0, upper_slot, upper_links, target, level)
    for j in range(lst.shape[0] - 1, -1, -1):
        x = lst[j]
        if x >= 0 and _has_in_link(links0, upper_slot, upper_links, np.int64(x), level, target):
            lst[j] = w
            return True
    return False


@njit(**_JIT)
def raise_entry(batch, twin_of, levels, entry, top):
    """The entry point after a batch: its first linked node above ``top``, if any.

    Returns ``(entry, top)``, unchanged when no linked node of the batch is higher.
    """
    for pos in range(batch.shape[0]):
        u = batch[pos]
        if twin_of[pos] < 0 and levels[u] > top:
            entry = u
            top = levels[u]
    return entry, top


@njit(**_JIT)
def link_batch(arena, norms, metric, batch, levels, links0, upper_slot, upper_links, twins,
               entry, top, m, ef, visited, generation, query, batch_dist, pool_d, pool_i,
               fresh, x_d, x_i, s_d, s_i, fwd, twin_of, over_i, union_d, union_i, tasks):
    """A whole batch on the calling thread: both phases, then the entry update.

    For batches too small to pay for waking the threads: it runs
    :func:`find_links`, :func:`join_twins`, :func:`reverse_edges` and
    :func:`apply_reverse_edges` in turn, each as the one lane of one (their
    results do not depend on the number of lanes), in one call, using lane 0
    of the scratch. ``fwd`` and
    ``twin_of`` have one row per batch node; ``tasks`` is the phases' task
    counter (int64, one element). Returns the new ``(entry, top)``.
    """
    tasks[0] = 0
    find_links(arena, norms, metric, batch, levels, links0, upper_slot, upper_links, twins,
               entry, top, m, ef, visited, generation, query, batch_dist, pool_d, pool_i,
               fresh, x_d, x_i, s_d, s_i, fwd, twin_of, tasks, 0, 1)
    join_twins(batch, twin_of, levels, fwd, twins, links0, upper_slot, upper_links)
    keys, sources, starts = reverse_edges(batch, levels, fwd)
    n_levels = fwd.shape[1]
    drops, n_drops = drop_space(sources, starts, links0)
    tasks[0] = 0
    apply_reverse_edges(arena, norms, metric, keys, sources, starts, n_levels, links0,
                        upper_slot, upper_links, query, over_i, union_d, union_i, drops,
                        n_drops, tasks, 0, 1)
    keep_in_links(keys, starts, n_levels, drops, n_drops, links0, upper_slot, upper_links)
    return raise_entry(batch, twin_of, levels, entry, top)


# ------------------------------------------------------------------- repair

# what a repair only reads: the old graph and the renumbering (a graph built in
# this process has them writable, one loaded from a checkpoint read-only: one
# specialisation serves both)
_REPAIR_READS = ("kept", "inv", "old_levels", "old_links0", "old_upper_slot", "old_upper_links")


@njit(**_JIT)
def _add_new(cand, n, v, owner):
    if v < 0 or v == owner:
        return n
    for j in range(n):
        if cand[j] == v:
            return n
    cand[n] = v
    return n + 1


@njit(readonly=_REPAIR_READS + ("task_node", "task_level"), **_JIT)
def repair_lists(arena, norms, metric, kept, inv, old_levels, old_links0, old_upper_slot,
                 old_upper_links, task_node, task_level, links0, upper_slot, upper_links,
                 lane, lanes):
    """Choose again, after a vacuum dropped nodes, the lists that named one.

    The graph was renumbered (new row ``p`` is old row ``kept[p]``, ``inv`` maps
    old rows to new, -1 for a dropped one) with every list kept as it was, less
    its dropped ids; each task (``task_node[t]``, ``task_level[t]``) is a list
    that lost one. Its candidates are its surviving ids and the kept nodes the
    old lists reach through dropped ones (breadth first, up to 8 lists' worth of
    dropped nodes, until twice a list's capacity is found): the neighbours a walk
    would have reached through them. They are ranked by distance and thinned by
    the diversity heuristic into the list. No search: each list reads only the
    old lists around it, and tasks write distinct lists, so lanes run at once.
    This is one lane's share: tasks ``lane``, ``lane + lanes``, ...
    """
    for t in range(lane, task_node.shape[0], lanes):
        p, level = task_node[t], task_level[t]
        src = _level_list(old_links0, old_upper_slot, old_upper_links, kept[p], level)
        cap = src.shape[0]
        want = 2 * cap                    # candidates enough to choose a list from
        budget = 8 * cap                  # dropped nodes looked through, at most
        cand = np.empty(want + cap, np.int32)
        gone = np.empty(budget, np.int32)     # dropped nodes met: a queue, walked in order
        n = n_gone = head = 0
        for v in src:
            if v < 0:
                break
            if inv[v] >= 0:
                n = _add_new(cand, n, inv[v], p)
            elif n_gone < budget:
                n_gone = _add_new(gone, n_gone, v, -1)
        # through dropped nodes, breadth first: where most of a neighbourhood was
        # dropped (rows updated again and again), one hop finds few survivors
        while head < n_gone and n < want:
            v = gone[head]
            head += 1
            if old_levels[v] < level:
                continue
            for w in _level_list(old_links0, old_upper_slot, old_upper_links, v, level):
                if w < 0:
                    break
                if inv[w] >= 0:
                    if n < want + cap:
                        n = _add_new(cand, n, inv[w], p)
                elif n_gone < budget:
                    n_gone = _add_new(gone, n_gone, w, -1)
        dist = np.empty(n, np.float32)
        for j in range(n):
            dist[j] = row_distance(arena, norms, p, cand[j], metric)
        order = np.argsort(dist)
        cand_d = dist[order]
        cand_i = cand[:n][order]
        lst = _level_list(links0, upper_slot, upper_links, p, level)
        out = np.empty(cap, np.int32)
        count = select_diverse(arena, norms, metric, cand_d, cand_i, n, cap, out)
        for j in range(cap):
            lst[j] = out[j] if j < count else -1


@njit(**_JIT)
def link_orphans(levels, links0, upper_slot, upper_links):
    """Link again each node no list holds on one of its levels; returns how
    many were linked.

    For a graph whose lists were chosen again wholesale (:func:`repair_lists`),
    where the in-links of the lists' former members were not followed: per
    level, the in-links are counted over every list, and each node with none
    is linked by :func:`_relink` from its nearest out-neighbour's list on that
    level, or the nearest list with room (as in :func:`keep_in_links`).
    O(nodes x links), serial.
    """
    indeg = np.zeros(levels.shape[0], np.int32)
    top = -1
    for r in range(levels.shape[0]):
        top = max(top, levels[r])
    linked = 0
    for level in range(top + 1):
        _count_in_links(levels, links0, upper_slot, upper_links, level, indeg)
        for w in range(levels.shape[0]):
            if levels[w] < level or indeg[w] > 0:
                continue
            nearest = np.int64(_level_list(links0, upper_slot, upper_links, w, level)[0])
            if nearest >= 0 and _relink(links0, upper_slot, upper_links, w, level, nearest):
                linked += 1
    return linked


@njit(readonly=("lists", "levels", "owners"), **_JIT)
def check_lists(lists, levels, level, owners):
    """Checks the neighbour lists of ``owners`` (one row each) on one ``level`` in one
    pass: 0 if sound, else the first fault found — 1 an id outside ``levels``, 2 a
    gap (an id after a -1), 3 a node linking itself, 4 an id not a node on that
    level. Every id is range-checked before it indexes ``levels`` (the lists may
    come from a crafted file)."""
    n_rows = levels.shape[0]
    for i in range(lists.shape[0]):
        owner = owners[i]
        ended = False
        for j in range(lists.shape[1]):
            v = lists[i, j]
            if v < -1 or v >= n_rows:
                return 1
            if v == -1:
                ended = True
                continue
            if ended:
                return 2
            if v == owner:
                return 3
            if levels[v] < level:
                return 4
    return 0
