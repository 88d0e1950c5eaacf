"""The index maintainer: commits return before their rows are linked, answers never change.

A commit only wakes the background maintainer (engine/maintainer.py); until
it links a row, searches find the row by the exact scan above the graph's
watermark. These tests race it against searches, a close, a checkpoint, a
failed sync that makes the engine reload its tables, and its own failure.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import varvedb as vv
from conftest import counts
from faults import Faults, installed
from varvedb.index import vector_index
from varvedb.index.hnsw import HnswIndex
from varvedb.query.plan import VectorTopK

DIM = 8
ROWS = 3000           # above the planner's exact-scan threshold, so searches walk the graph
WALK_ALL = 4096       # an ef above the row count: the walk must then equal exact search


def vectors(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


HANG = 1800.0        # a hang guard only: numba may compile under load


def caught_up(c, field=None):
    assert c.wait_indexed(field, timeout=HANG), c.index_status(field)


def indexed(path, n=ROWS, **connect):
    db = vv.connect(path, **connect)
    c = db.create_collection("docs", {"tag": "int", "emb": vv.Vector(DIM)})
    c.insert_arrays(id=np.arange(n), tag=np.arange(n) % 5, emb=vectors(n))
    c.create_index("emb", vv.HNSW(m=8, ef_construction=64))
    return db, c


@pytest.fixture
def small_chunks(monkeypatch):
    """Many chunks per build, so closes, checkpoints and reloads land inside one."""
    monkeypatch.setattr(vector_index, "LINK_CHUNK", 64)


def same_as_exact(c, q, version, where=None):
    walk = c.search(vector=q, limit=10, ef=WALK_ALL, as_of=version, where=where, select=[])
    exact = c.search(vector=q, limit=10, exact=True, as_of=version, where=where, select=[])
    assert walk.plan.find(VectorTopK).strategy == "graph", str(walk.plan)
    assert walk.ids == exact.ids, (version, walk.ids, exact.ids)
    assert np.allclose(walk.scores, exact.scores)


def test_commit_returns_before_linking_and_searches_find_the_new_rows(db_path, small_chunks):
    db, c = indexed(db_path)
    st = c.index_status()
    assert st["field"] == "emb" and st["linked"] + st["unlinked"] == ROWS
    target = np.full(DIM, 9.0, np.float32)
    c.insert({"id": 10**6, "tag": 0, "emb": target})     # returns without waiting for a link
    assert c.search(vector=target, limit=1).ids == [10**6]
    caught_up(c)
    assert counts(c.index_status()) == {"field": "emb", "linked": ROWS + 1, "unlinked": 0}
    assert c.search(vector=target, limit=1).ids == [10**6]
    db.close()


def test_background_linking_racing_searches_changes_no_answer(db_path, small_chunks):
    db, c = indexed(db_path)        # the graph is still being built when the race starts
    queries = vectors(16, seed=1)
    errors, checked = [], [0]
    done = threading.Event()

    def searcher(seed):
        rng = np.random.default_rng(seed)
        try:
            while not done.is_set():
                q = queries[rng.integers(len(queries))]
                same_as_exact(c, q, db.version, where="tag < 4" if rng.random() < 0.3 else None)
                checked[0] += 1
        except BaseException as e:    # reported below
            errors.append(e)

    threads = [threading.Thread(target=searcher, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    extra = vectors(200, seed=2)
    try:
        for i in range(200):        # single-row commits, plus some deletes and updates
            c.insert({"id": ROWS + i, "tag": i % 5, "emb": extra[i]})
            if i % 20 == 0:
                c.delete(ids=[i])
                c.update({"tag": 1}, ids=[i + 1])
    finally:
        caught_up(c)
        done.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert checked[0] > 0
    for q in queries:
        same_as_exact(c, q, db.version)
    db.close()


def test_close_while_the_maintainer_links_then_reopen_is_complete(db_path, small_chunks):
    db, c = indexed(db_path)
    c.insert_arrays(id=np.arange(ROWS, ROWS + 500), tag=np.zeros(500, np.int64),
                    emb=vectors(500, seed=3))
    assert c.index_status()["unlinked"] > 0
    db.close()                     # links the rest, checkpoints, stops the thread
    with pytest.raises(vv.ClosedError):
        c.index_status()
    with vv.connect(db_path, readonly=True) as ro:
        rc = ro["docs"]
        assert rc.count() == ROWS + 500
        # the checkpoint close wrote holds the whole graph: nothing left to link
        assert counts(rc.index_status()) == {"field": "emb", "linked": ROWS + 500, "unlinked": 0}
        for q in vectors(8, seed=4):
            same_as_exact(rc, q, ro.version)


def test_checkpoint_after_many_unlinked_rows_writes_a_whole_graph(db_path, small_chunks):
    db, c = indexed(db_path)
    for k in range(5):
        c.insert_arrays(id=np.arange(10**5 + 100 * k, 10**5 + 100 * (k + 1)),
                        tag=np.zeros(100, np.int64), emb=vectors(100, seed=10 + k))
    db.checkpoint()
    assert counts(c.index_status()) == {"field": "emb", "linked": ROWS + 500, "unlinked": 0}
    with vv.connect(db_path, readonly=True) as ro:
        assert ro["docs"].index_status()["unlinked"] == 0
        for q in vectors(8, seed=5):
            same_as_exact(ro["docs"], q, ro.version)
    db.close()


def test_index_status_counts(db_path):
    db = vv.connect(db_path)
    c = db.create_collection("docs", {"tag": "int", "emb": vv.Vector(DIM), "o": vv.Vector(2)})
    with pytest.raises(vv.UnknownFieldError):
        c.index_status()                    # two vector fields: say which
    with pytest.raises(vv.SchemaError):
        c.index_status("emb")               # no index yet
    with pytest.raises(vv.UnknownFieldError):
        c.index_status("tag")
    c.insert_arrays(id=np.arange(30), emb=vectors(30))
    c.insert({"id": 30, "tag": 1})          # a null vector is a row too
    c.create_index("emb", vv.HNSW())
    caught_up_to = {"field": "emb", "linked": 31, "unlinked": 0}
    caught_up(c, "emb")
    assert counts(c.index_status("emb")) == caught_up_to
    with db.transaction():                  # uncommitted rows are not counted
        c.insert_arrays(id=np.arange(40, 50), emb=vectors(10, seed=1))
        assert counts(c.index_status("emb")) == caught_up_to
    c.update({"tag": 2}, ids=[0])           # an update writes a new row version
    caught_up(c, "emb")
    assert counts(c.index_status("emb")) == {"field": "emb", "linked": 42, "unlinked": 0}
    db.checkpoint()
    c.insert_arrays(id=np.arange(60, 63), emb=vectors(3, seed=2))
    with vv.connect(db_path, readonly=True) as ro:
        # a read-only connection never links: rows after the checkpoint are scanned
        assert counts(ro["docs"].index_status("emb")) == {"field": "emb", "linked": 42, "unlinked": 3}
        assert ro["docs"].wait_indexed("emb") is False     # at once: nothing will link them
    db.close()


def test_a_failed_sync_reload_never_links_into_the_replaced_tables(db_path, small_chunks):
    f = Faults(seed=3)
    with installed(f):
        db, c = indexed(db_path)
        old = c.table.vector_indexes["emb"]
        f.arm("eio", on="sync")
        with pytest.raises(vv.StorageError):
            c.insert({"id": 10**6, "tag": 0, "emb": np.ones(DIM, np.float32)})
        # the next write reloads the tables from the file; the old graph stays as it is
        c.insert({"id": 10**6 + 1, "tag": 0, "emb": np.ones(DIM, np.float32)})
        frozen_at = old.linked
        caught_up(c)
        assert c.table.vector_indexes["emb"] is not old
        assert old.linked == frozen_at
        assert c.get(10**6) is None and c.count() == ROWS + 1
        for q in vectors(8, seed=6):
            same_as_exact(c, q, db.version)
        db.close()
    f.kill_all()


def test_a_failure_inside_the_maintainer_is_raised_to_the_next_caller(db_path, monkeypatch):
    db, c = indexed(db_path, n=100)
    caught_up(c)
    real_add, calls = HnswIndex.add, []

    def failing_add(self, *args, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("no room for the graph")
        return real_add(self, *args, **kw)
    monkeypatch.setattr(HnswIndex, "add", failing_add)
    target = np.full(DIM, 5.0, np.float32)
    c.insert({"id": 500, "tag": 0, "emb": target})    # the commit itself succeeds
    with pytest.raises(vv.IndexMaintenanceError) as e:  # the waiter hears of the failure
        c.wait_indexed(timeout=HANG)
    assert isinstance(e.value.__cause__, MemoryError) and calls
    assert c.search(vector=target, limit=1, ef=WALK_ALL).ids == [500]   # found by the scan
    assert c.index_status()["unlinked"] == 1          # reported once; nothing linked yet
    c.insert({"id": 501, "tag": 0, "emb": -target})    # the next commit tries again
    caught_up(c)
    assert c.search(vector=target, limit=1, ef=WALK_ALL).ids == [500]
    db.close()
    with vv.connect(db_path, readonly=True) as ro:
        assert ro["docs"].count() == 102


def test_close_raises_a_failure_it_has_not_reported(db_path, monkeypatch):
    db, c = indexed(db_path, n=100)
    caught_up(c)
    monkeypatch.setattr(HnswIndex, "add", lambda self, *a, **k: 1 / 0)
    c.insert({"id": 500, "tag": 0, "emb": np.ones(DIM, np.float32)})
    with pytest.raises(vv.IndexMaintenanceError):
        db.close()
    with pytest.raises(vv.ClosedError):
        c.count()
    monkeypatch.undo()
    with vv.connect(db_path) as again:      # closed all the same; the next open links it
        assert again["docs"].count() == 101
        caught_up(again["docs"])


def test_wait_indexed_wakes_on_the_maintainers_links_and_not_while_it_is_held(db_path):
    db, c = indexed(db_path, n=200)
    docs = db.create_collection("notes", {"body": vv.Text(fts=True)})
    caught_up(c)
    with db.engine.maintainer.hold():         # nothing links while held
        c.insert_arrays(id=np.arange(200, 260), tag=np.zeros(60, np.int64),
                        emb=vectors(60, seed=4))
        docs.insert_arrays(id=np.arange(50), body=[f"clay {i}" for i in range(50)])
        assert c.wait_indexed(timeout=0.05) is False
        assert counts(c.index_status()) == {"field": "emb", "linked": 200, "unlinked": 60}
        assert docs.wait_indexed("body", timeout=0) is False
    # the rows committed before each call are linked when it returns True
    assert c.wait_indexed(timeout=HANG) is True
    assert counts(c.index_status()) == {"field": "emb", "linked": 260, "unlinked": 0}
    assert docs.wait_indexed("body", timeout=HANG) is True
    assert docs.index_status("body")["unlinked"] == 0
    assert sorted(docs.search(text="clay", limit=100).ids) == list(range(50))
    with pytest.raises(vv.UnknownFieldError):
        c.wait_indexed("tag")
    with pytest.raises(vv.SchemaError):
        db.create_collection("plain", {"v": vv.Vector(2)}).wait_indexed()
    db.close()


# ---- feedback on long work: close(wait=), index_status's rate, the plan's truth ----

BEHIND = 40_000      # rows committed while the maintainer is held: above CLOSE_FINISH_ROWS
EVERY = ROWS + BEHIND   # an ef that walks the whole graph: the answer is exact search's


def _behind(path):
    """A file whose graph links ROWS rows, then BEHIND more committed under hold."""
    db, c = indexed(path)
    caught_up(c)
    status = c.index_status()
    assert status["unlinked"] == 0 and status["eta_s"] == 0.0 and status["rows_per_s"] > 0
    memory = c.vector_memory()
    # (a graph linked in one go holds no spare lists: the two differ by the rounding)
    assert 0 < memory["graph_bytes_per_vector"] <= round(memory["graph_bytes"] / ROWS, 1)
    with db.engine.maintainer.hold():
        c.insert_arrays(id=np.arange(ROWS, ROWS + BEHIND), tag=np.zeros(BEHIND, np.int64),
                        emb=vectors(BEHIND, seed=1))
        status = c.index_status()
        assert status["unlinked"] == BEHIND and status["eta_s"] > 0
        q = vectors(1, seed=2)[0]
        hits = c.search(vector=q, limit=10, ef=EVERY)
        assert hits.plan.find(VectorTopK).unlinked == BEHIND
        assert f"over {ROWS:,} linked rows + exact scan of {BEHIND:,} rows not yet indexed" \
            in str(hits.plan)
        assert hits.plan.find(VectorTopK).to_dict()["linked"] == ROWS
        assert hits.ids == c.search(vector=q, limit=10, exact=True).ids
    return db, c


def test_close_without_waiting_saves_the_graph_as_far_as_it_is_linked(tmp_path, caplog):
    path = str(tmp_path / "partial.varve")
    db, c = _behind(path)
    q = vectors(5, seed=3)
    want = [c.search(vector=x, limit=10, exact=True).ids for x in q]
    with caplog.at_level("INFO", logger="varvedb.engine"):
        db.close(wait=False)
    assert any("left for the next open" in r.getMessage() for r in caplog.records)
    ro = vv.connect(path, readonly=True)        # no maintainer: the graph as saved
    saved = ro["docs"].index_status()
    assert ROWS <= saved["linked"] < ROWS + BEHIND and saved["unlinked"] > 0
    assert [ro["docs"].search(vector=x, limit=10, ef=EVERY).ids for x in q] == want
    ro.close()
    db = vv.connect(path)                       # a writer links the rest in the background
    docs = db["docs"]
    m, ix = db.engine.maintainer, docs.table.vector_indexes["emb"]
    assert m.wait(lambda: ix.linked > saved["linked"], HANG)
    with m.hold():                              # the graph per node, mid-way or not
        mid = docs.vector_memory()["graph_bytes_per_vector"]
    caught_up(docs)
    whole = docs.vector_memory()["graph_bytes_per_vector"]
    assert 0.8 * whole < mid < 1.25 * whole
    assert [db["docs"].search(vector=x, limit=10, ef=EVERY).ids for x in q] == want
    db.close()


def test_close_waiting_links_every_row_first(tmp_path):
    path = str(tmp_path / "whole.varve")
    db, c = _behind(path)
    db.close(wait=True, progress=False)
    ro = vv.connect(path, readonly=True)
    assert ro["docs"].index_status()["unlinked"] == 0
    assert ro["docs"].count() == ROWS + BEHIND
    ro.close()


def test_a_checkpoint_behind_the_graph_says_what_it_waits_for(db_path, capsys, caplog):
    """checkpoint(progress=True) links the rows the graph lacks first, under a bar
    of those rows saying so (on stderr, as on a terminal), and logs it under
    varvedb.index."""
    db, c = indexed(db_path, n=200)
    caught_up(c)
    with db.engine.maintainer.hold():
        c.insert_arrays(id=np.arange(200, 300), tag=np.zeros(100, np.int64),
                        emb=vectors(100, seed=1))
    capsys.readouterr()
    with caplog.at_level("INFO", logger="varvedb"):
        db.checkpoint(progress=True)
    bar = capsys.readouterr().err
    assert "checkpoint: linking the rows not yet indexed" in bar and "100/100" in bar
    assert any("checkpoint: linking" in r.getMessage() and r.name.startswith("varvedb.")
               for r in caplog.records)
    assert counts(c.index_status()) == {"field": "emb", "linked": 300, "unlinked": 0}
    db.close()


def test_waiting_for_an_index_shows_the_rows_it_takes(db_path, capsys):
    """wait_indexed(progress=True): a bar of the rows the index still has to take
    (after create_index over loaded rows, the way to watch the build); a wait cut
    short by its timeout says False, its bar drawn as far as it got."""
    db, c = indexed(db_path, n=200)
    caught_up(c)
    with db.engine.maintainer.hold():       # nothing links while held
        c.insert_arrays(id=np.arange(200, 300), tag=np.zeros(100, np.int64),
                        emb=vectors(100, seed=1))
        capsys.readouterr()
        assert c.wait_indexed(timeout=0, progress=True) is False
        bar = capsys.readouterr().err
        assert "emb: waiting for its index" in bar and "0/100" in bar
    assert c.wait_indexed(progress=True) is True
    assert counts(c.index_status()) == {"field": "emb", "linked": 300, "unlinked": 0}
    db.close()

