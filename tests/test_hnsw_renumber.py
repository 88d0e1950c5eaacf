"""A renumbered graph (HnswIndex.renumbered, issue 32): a coded graph's nodes in
breadth-first order from the entry, apart from the table's rows, mapped back
for the mask, the rerank and the answer. Against exact search and the graph as
built; filters; format 5 round trips, formats 1-4 open as row-ordered graphs,
crafted maps refused; links and repairs after it; through a database's
checkpoint, replay, as_of after deletes and vacuum."""

import numpy as np
import pytest

import varvedb as vv
from varvedb.index.hnsw import HnswIndex

from test_hnsw_index import clustered, exact_top_k, norms_of, recall
from test_hnsw_quantize import answers, built

N, DIM, K = 3000, 24, 10


@pytest.fixture(scope="module")
def data():
    x = clustered(N, DIM, seed=31)
    x[[700, 1900, 2500]] = x[40]        # a twin ring: its members are nodes no list holds
    return x, clustered(60, DIM, seed=32)


@pytest.mark.parametrize("quant", [{"quantize": "int8"}, {"quantize": "pq", "pq_m": 8}],
                         ids=["int8", "pq"])
@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_a_renumbered_graph_answers_in_rows_as_the_graph_it_came_from(data, metric, quant):
    x, queries = data
    g = built(x, metric, **quant)
    r = g.renumbered()
    assert r.is_renumbered and not g.is_renumbered
    r.validate(N)
    order = r.to_arrays()["node_row"]
    assert sorted(order.tolist()) == list(range(N))       # a permutation of the rows
    assert order[0] == g._entry and r._entry == 0         # breadth first from the entry
    # the same graph under other numbers: the same walk, the same answers
    a_rows, a_dist = answers(g, x, queries)
    b_rows, b_dist = answers(r, x, queries)
    for a, b, da, db in zip(a_rows, b_rows, a_dist, b_dist):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(da, db)
    floor = 0.9 if quant["quantize"] == "pq" else 0.95
    assert recall(np.array(b_rows), exact_top_k(x, queries, metric)) >= floor
    # as wide as the graph: exact search's answer, rows and order
    wide, _ = answers(r, x, queries[:10], ef=N)
    np.testing.assert_array_equal(np.array(wide), exact_top_k(x, queries[:10], metric))
    assert r.contains(N).all() and r.renumbered() is r


def test_a_graph_that_walks_the_vectors_is_not_renumbered(data):
    x, _ = data
    g = built(x, "l2", None)
    assert g.renumbered() is g and not g.is_renumbered


@pytest.mark.parametrize("keep", [0.02, 0.3])
def test_a_filtered_walk_over_row_masks_is_never_short_of_k(data, keep):
    x, queries = data
    r = built(x, "cosine").renumbered()
    allow = np.random.default_rng(5).random(N) < keep
    allow[[40, 700]] = True                 # twins, one allowed through another's ring
    rows, _ = answers(r, x, queries, allow=allow)
    for got in rows:
        assert len(got) == K and allow[got].all()
    truth = exact_top_k(x, queries, "cosine", allow=allow)
    assert recall(np.array(rows), truth) >= 0.9
    few = np.zeros(N, bool)
    few[[3, 700, 2999]] = True              # fewer allowed than k: exactly those
    for got in answers(r, x, queries[:5], allow=few)[0]:
        assert sorted(got.tolist()) == [3, 700, 2999]


def test_the_map_round_trips_and_older_formats_open_as_rows(data):
    x, queries = data
    g = built(x, "l2")
    r = g.renumbered()
    arrays = {name: np.array(a) for name, a in r.to_arrays().items()}
    assert arrays["params"][0] == 5 and arrays["params"][16] == N
    again = HnswIndex.from_arrays(arrays)
    again.validate(N)
    assert again.is_renumbered
    np.testing.assert_array_equal(np.array(answers(again, x, queries)[0]),
                                  np.array(answers(r, x, queries)[0]))
    # a format-4 file: 16 params, no map, nodes are rows
    old = {name: np.array(a) for name, a in g.to_arrays().items()}
    old["params"] = old["params"][:16].copy()
    old["params"][0] = 4
    four = HnswIndex.from_arrays(old)
    assert not four.is_renumbered
    np.testing.assert_array_equal(np.array(answers(four, x, queries)[0]),
                                  np.array(answers(g, x, queries)[0]))


def _crafted(arrays, **change):
    out = {name: np.array(a) for name, a in arrays.items()}
    out.update(change)
    return out


def test_a_crafted_map_is_refused_before_any_walk(data):
    x, _ = data
    r = built(x, "l2").renumbered()
    arrays = r.to_arrays()
    good = np.array(arrays["node_row"])
    twice = good.copy()
    twice[5] = twice[6]                                 # not a permutation
    high = good.copy()
    high[np.argmax(high)] = N                           # out of range
    low = good.copy()
    low[0] = -1
    for bad in (twice, high, low, good[:-1], good.astype(np.int64)):
        with pytest.raises(ValueError):
            HnswIndex.from_arrays(_crafted(arrays, node_row=bad))
    params = np.array(arrays["params"])
    params[16] = N - 1                                  # a map shorter than the graph
    with pytest.raises(ValueError):
        HnswIndex.from_arrays(_crafted(arrays, params=params))
    without = {name: a for name, a in arrays.items() if name != "node_row"}
    with pytest.raises(ValueError):                     # the params name a map it lacks
        HnswIndex.from_arrays(without)
    plain = {name: np.array(a) for name, a in built(x, "l2", None).to_arrays().items()}
    plain["params"][16] = N                             # a map on a graph of vectors
    with pytest.raises(ValueError):
        HnswIndex.from_arrays(_crafted(plain, node_row=good))


def test_links_and_repairs_after_a_renumbering_work_in_rows(data):
    x, queries = data
    more = np.vstack([x, clustered(500, DIM, seed=33)])
    norms = norms_of(more)
    r = built(x, "l2").renumbered()
    frozen = HnswIndex.from_arrays({k: v for k, v in r.to_arrays().items()})
    frozen.add(more, norms, np.arange(N, N + 500))      # back in row order, then linked
    assert not frozen.is_renumbered and len(frozen) == N + 500
    frozen.validate(N + 500)
    assert r.is_renumbered and r.to_arrays()["levels"].shape == (N,)    # r is unchanged
    rows, _ = answers(frozen, more, queries)
    assert recall(np.array(rows), exact_top_k(more, queries, "l2")) >= 0.95
    again = frozen.renumbered()
    np.testing.assert_array_equal(np.array(answers(again, more, queries)[0]), np.array(rows))
    kept = np.flatnonzero(np.arange(N + 500) % 3 != 0)
    repaired = again.repaired(kept, more[kept], norms[kept])
    repaired.validate(len(kept))
    rows, _ = answers(repaired, more[kept], queries)
    assert recall(np.array(rows), exact_top_k(more[kept], queries, "l2")) >= 0.9


def _graph(c):
    return c.table.vector_indexes["v"].graph


def test_a_checkpoint_writes_the_graph_renumbered_through_replay_as_of_and_vacuum(
        tmp_path, data):
    x, queries = data
    path = tmp_path / "r.varve"
    ids = np.arange(N)

    def found(c, **kw):
        return [c.search(vector=q, limit=K, ef=64, select=[], **kw).ids for q in queries[:15]]

    with vv.connect(path) as db:
        c = db.create_collection("items", {
            "tag": vv.Int(),
            "v": vv.Vector(DIM, metric="l2", index=vv.HNSW(m=8, ef_construction=64,
                                                           quantize="int8"))})
        c.insert_arrays(id=ids, tag=ids % 4, v=x)
        first = db.version
        c.delete(where="tag = 0")
        db.checkpoint()
        assert _graph(c).is_renumbered                  # kept as written
        before, then = found(c, where="tag != 1"), found(c, as_of=first)
        c.insert_arrays(id=np.arange(N, N + 100), tag=np.full(100, 2), v=x[:100] + 0.01)
        after_insert = found(c)
    with vv.connect(path) as db:            # the checkpoint's graph, the insert replayed
        c = db["items"]
        assert found(c, where="tag != 1") != [] and found(c) == after_insert
        assert found(c, as_of=first) == then
        db.checkpoint()
        assert _graph(c).is_renumbered
    with vv.connect(path) as db:
        c = db["items"]
        assert _graph(c).is_renumbered and found(c) == after_insert
        assert found(c, as_of=first) == then
        db.vacuum(graphs="repair")                      # every version kept
        c = db["items"]
        assert _graph(c).is_renumbered and found(c) == after_insert
        assert found(c, as_of=first) == then
        db.vacuum(keep=1, graphs="repair")              # the deleted rows dropped
        c = db["items"]
        assert _graph(c).is_renumbered and found(c) == after_insert
    with vv.connect(path) as db:
        c = db["items"]
        assert _graph(c).is_renumbered and found(c) == after_insert
        db.vacuum(keep=1)                               # rebuilt, then written renumbered
        assert _graph(db["items"]).is_renumbered and found(db["items"]) == after_insert
    # the filtered search before all this: live rows of tag 2 or 3 only, and near
    live = ids[ids % 4 >= 2]
    assert all(int(i) % 4 >= 2 for f in before for i in f)
    truth = live[exact_top_k(x[live], queries[:15], "l2")]
    assert recall(np.array([np.asarray(f) for f in before]), truth) >= 0.9


@pytest.mark.parametrize("case", ["twice", "out of range", "missing"])
def test_a_crafted_map_in_a_checkpoint_is_refused_at_open_and_the_graph_built_again(
        tmp_path, data, case):
    """The file's node_row edited: open refuses the graph before anything walks it
    (its rows are searched exactly), and a writer links them again."""
    from test_crafted_files import Frame, Layout, array_index, edited_checkpoint, write
    x, queries = data
    path = str(tmp_path / "m.varve")
    with vv.connect(path) as db:
        c = db.create_collection("docs", {"v": vv.Vector(DIM, metric="l2", index=vv.HNSW(
            m=8, ef_construction=32, quantize="int8"))})
        c.insert_arrays(id=np.arange(N), v=x)
        db.checkpoint()
        assert _graph(c).is_renumbered
        c.insert({"id": N, "v": x[0] + 100})        # a commit after it, replayed
    with open(path, "rb") as f:
        layout = Layout.parse(f.read())
    while isinstance(layout.items[-1], Frame):      # the checkpoint close() wrote
        layout.items.pop()

    def edit(meta, blobs):
        i = array_index(meta, "1.vx.v.g.node_row")
        if case == "missing":
            meta["_arrays"][i][0] = "1.vx.v.g.node_rows"
            return
        a = np.frombuffer(blobs[i], np.int32).copy()
        a[3] = a[4] if case == "twice" else N
        blobs[i] = a.tobytes()
    bad = write(tmp_path, edited_checkpoint(layout.build(), edit))
    exact = [int(i) for i in exact_top_k(x, queries[:5], "l2", k=5)[:, 0]]
    with vv.connect(bad, readonly=True) as db:
        vi = db["docs"].table.vector_indexes["v"]
        assert vi.linked == 0 and len(vi.graph) == 0          # refused at open
        assert [db["docs"].search(vector=q, limit=5, select=[]).ids[0]
                for q in queries[:5]] == exact
    with vv.connect(bad) as db:
        assert db["docs"].wait_indexed(timeout=1800)         # a hang guard only
        assert len(_graph(db["docs"])) == N + 1
