"""Full-text indexing deferred to the maintainer: while it is held back, the rows
it has not indexed are answered by an exact scan of their text, and every score
equals that of a database built in one go over the same rows with its index
whole (document frequencies and the average length included), live, as_of,
inside a transaction and after a rollback; checkpoint, reopen and vacuum keep
the answers."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from conftest import counts
from varvedb.index import fts

WORDS = ("apple banana cherry delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa").split()
QUERIES = ("apple", "golf hotel", "kil*", '"delta echo"', "apple OR banana -cherry",
           "mike november", "oscar")


class Undo(Exception):
    """Raised inside a transaction to roll it back."""


def text_db(path):
    db = vv.connect(path)
    col = db.create_collection("docs", {"body": vv.Text(fts=True), "tag": vv.Int()})
    return db, col


def random_doc(rng: random.Random):
    if rng.random() < 0.08:
        return None
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10)))


def answers(db, col, as_of=None) -> list:
    """Every query's matches as {id: score}, from the API and from SQL."""
    out = []
    for q in QUERIES:
        hits = col.search(text=q, limit=1000, as_of=as_of)
        out.append(dict(zip(hits.ids, hits.scores)))
        if as_of is None:
            rows = db.sql("SELECT id, bm25(body, $1) FROM docs WHERE body @@ $1", [q]).rows
            out.append(dict(rows))
            out.append(col.count(where="body @@ $1", params=[q]))
    return out


def built_in_one_go(path, docs: dict) -> list:
    """The answers of a new database holding `docs`, its index built whole."""
    db, col = text_db(path)
    if docs:
        col.insert([{"id": i, "body": t} for i, t in docs.items()])
    db.engine.maintainer.finish()
    assert col.index_status("body")["unlinked"] == 0
    got = answers(db, col)
    db.close()
    return got


def _write(col, docs: dict, rng: random.Random, next_id: int, op: float | None = None
           ) -> int:
    """One random write (insert batch, update, delete) applied to `docs` too."""
    op = rng.random() if op is None else op
    if op < 0.5 or not docs:
        batch = {next_id + j: random_doc(rng) for j in range(rng.randint(1, 6))}
        col.insert([{"id": i, "body": t} for i, t in batch.items()])
        docs.update(batch)
        return next_id + len(batch)
    i = rng.choice(sorted(docs))
    if op < 0.8:
        docs[i] = random_doc(rng)
        col.update({"body": docs[i]}, where="id = $1", params=[i])
    else:
        del docs[i]
        col.delete([i])
    return next_id


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_scores_while_the_maintainer_is_behind_equal_an_index_built_in_one_go(
        tmp_path_factory, monkeypatch, seed):
    monkeypatch.setattr(fts, "EXTEND_CHUNK", 3)     # a chunk ends between commits
    rng = random.Random(seed)
    base = tmp_path_factory.mktemp("deferred")
    db, col = text_db(str(base / "live.varve"))
    m = db.engine.maintainer
    docs: dict = {}
    past = None                                     # (version, its documents)
    next_id = 1
    with m.hold():
        for step in range(rng.randint(3, 9)):
            kind = rng.random()
            if kind < 0.15:
                # one chunk indexed, in this thread, while the maintainer stays held
                db.engine.table("docs").link_indexes()
            elif kind < 0.3:
                # a transaction rolled back: its rows never count
                try:
                    with db.transaction():
                        inside = dict(docs)
                        _write(col, inside, rng, next_id + 1000)
                        # its own rows are read too, scored as if committed
                        assert answers(db, col) == built_in_one_go(
                            str(base / f"tx{step}.varve"), inside)
                        raise Undo
                except Undo:
                    pass
            else:
                next_id = _write(col, docs, rng, next_id)
            if past is None and rng.random() < 0.3:
                past = (db.version, dict(docs))
        next_id = _write(col, docs, rng, next_id, op=0.0)   # rows never indexed yet
        status = col.index_status("body")
        assert status["unlinked"] > 0 and status["linked"] + status["unlinked"] == \
            db.engine.table("docs").committed_n
        assert answers(db, col) == built_in_one_go(str(base / "now.varve"), docs)
        if past is not None:
            version, then = past
            assert answers(db, col, as_of=version) == \
                built_in_one_go(str(base / "then.varve"), then)[::3]
    m.finish()
    assert col.index_status("body")["unlinked"] == 0
    assert answers(db, col) == built_in_one_go(str(base / "after.varve"), docs)
    db.close()


def test_checkpoint_and_reopen_finish_the_index_and_answer_the_same(tmp_path):
    rng = random.Random(3)
    db, col = text_db(str(tmp_path / "a.varve"))
    docs: dict = {}
    with db.engine.maintainer.hold():
        next_id = 1
        for _ in range(40):
            next_id = _write(col, docs, rng, next_id)
        assert col.index_status("body")["unlinked"] > 0
        before = answers(db, col)
    db.checkpoint()                     # finishes the index: the checkpoint holds it whole
    assert col.index_status("body")["unlinked"] == 0
    assert answers(db, col) == before
    with db.engine.maintainer.hold():
        for _ in range(10):             # rows after the checkpoint, not indexed
            next_id = _write(col, docs, rng, next_id)
        behind = answers(db, col)
        # a reader opening now replays them and indexes them itself
        with vv.connect(str(tmp_path / "a.varve"), readonly=True) as ro:
            assert ro["docs"].index_status("body")["unlinked"] == 0
            assert answers(ro, ro["docs"]) == behind
    db.close()
    with vv.connect(str(tmp_path / "a.varve")) as again:
        assert answers(again, again["docs"]) == behind
    assert behind == built_in_one_go(str(tmp_path / "fresh.varve"), docs)


def test_vacuum_while_behind_keeps_every_answer(tmp_path):
    rng = random.Random(11)
    db, col = text_db(str(tmp_path / "v.varve"))
    docs: dict = {}
    next_id = 1
    for _ in range(20):
        next_id = _write(col, docs, rng, next_id)
    with db.engine.maintainer.hold():
        for _ in range(20):
            next_id = _write(col, docs, rng, next_id)
        before = answers(db, col)
    db.vacuum(keep=1)
    assert answers(db, col) == before == built_in_one_go(str(tmp_path / "f.varve"), docs)
    db.close()


def test_an_added_text_field_is_indexed_by_the_maintainer(tmp_path):
    db = vv.connect(str(tmp_path / "n.varve"))
    col = db.create_collection("docs", {"tag": vv.Int()})
    col.insert([{"id": i, "tag": i} for i in range(1, 6)])
    with db.engine.maintainer.hold():
        col.add_field("body", vv.Text(fts=True))
        col.update({"body": "apple banana"}, where="id < 3")
        assert col.index_status("body")["unlinked"] > 0
        assert sorted(col.search(text="apple").ids) == [1, 2]
    db.engine.maintainer.finish()
    assert counts(col.index_status("body")) == {"field": "body", "linked": col.table.committed_n,
                                         "unlinked": 0}
    assert sorted(col.search(text="banana").ids) == [1, 2]
    db.close()


@pytest.mark.parametrize("rows", [0, 5])
def test_a_covering_copy_leaves_the_index_untouched(tmp_path, rows):
    db, col = text_db(str(tmp_path / "c.varve"))
    col.insert([{"id": i, "body": f"apple w{i}"} for i in range(1, rows + 1)])
    db.engine.maintainer.finish()
    t = db.engine.table("docs")
    ix = t.text_indexes["body"]
    with db.engine.maintainer.hold():
        col.insert([{"id": 100 + i, "body": f"apple new{i}"} for i in range(4)])
        terms, n = ix.nbytes(), ix.n
        cover = t.text_index("body", t.n)
        assert cover is not ix and cover.n == t.n and ix.n == n == rows
        assert ix.nbytes() == terms
        assert t.text_index("body", t.n) is cover      # kept for the next read
        assert t.text_index("body", rows) is ix
    db.close()


def test_readers_beside_the_maintainer_see_every_committed_row(tmp_path, monkeypatch):
    """Readers at each version while commits land and the maintainer indexes them a
    few rows at a time: every read counts exactly that version's rows."""
    import threading
    monkeypatch.setattr(fts, "EXTEND_CHUNK", 3)
    db, col = text_db(str(tmp_path / "r.varve"))
    col.insert({"id": 0, "body": "seed"})
    base = db.version
    stop = threading.Event()
    errors: list = []

    def read():
        while not stop.is_set():
            v = db.version
            try:
                got = col.search(text="common", limit=10_000, as_of=v)
                assert len(got) == v - base, (len(got), v - base)
            except BaseException as e:      # reported by the main thread
                errors.append(e)
                return

    readers = [threading.Thread(target=read) for _ in range(2)]
    for r in readers:
        r.start()
    for i in range(1, 150):
        col.insert({"id": i, "body": f"common w{i % 5}"})
    stop.set()
    for r in readers:
        r.join()
    assert not errors, errors[0]
    db.engine.maintainer.finish()
    assert len(col.search(text="common", limit=10_000)) == 149
    db.close()
