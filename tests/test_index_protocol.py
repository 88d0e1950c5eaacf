"""Every index a table holds answers the one protocol (index/protocol.py): the
table keeps them in one map keyed (field, kind), extends the in-step ones with
each write and truncates them on rollback, leaves the deferred ones to the
maintainer, and a checkpoint's arrays load back into the same index."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.index.protocol import SCALAR_KINDS, TEXT_KINDS, VECTOR_KINDS, Index


class Undo(Exception):
    pass


@pytest.fixture
def db(tmp_path):
    db = vv.connect(str(tmp_path / "p.varve"))
    yield db
    db.close()


def _docs(db, ivf=False):
    spec = vv.IVFPQ(lists=4) if ivf else vv.HNSW(m=8)
    col = db.create_collection("docs", {"body": vv.Text(fts=True), "age": vv.Int(index="sorted"),
                                        "tag": vv.Text(index="hash"),
                                        "emb": vv.Vector(4, index=spec)})
    rng = np.random.default_rng(0)
    col.insert([{"id": i, "body": f"word{i % 7} common", "age": i, "tag": f"t{i % 3}",
                 "emb": rng.standard_normal(4).tolist()} for i in range(1, 201)])
    db.engine.maintainer.finish()
    return col


@pytest.mark.parametrize("ivf", [False, True])
def test_every_index_is_one_of_the_protocol_kinds_keyed_by_field(db, ivf):
    col = _docs(db, ivf)
    t = col.table
    kinds = {f: ix.kind for f, ix in t.index_items()}
    assert kinds == {"body": "fts", "age": "sorted", "tag": "hash",
                     "emb": "ivfpq" if ivf else "hnsw"}
    for f, ix in t.index_items():
        assert isinstance(ix, Index)
        assert ix.in_step == (ix.kind in SCALAR_KINDS)
        assert ix.indexed == t.committed_n == 200
        assert ix.kind in SCALAR_KINDS + TEXT_KINDS + VECTOR_KINDS
        empty = ix.fresh()
        assert type(empty) is type(ix) and empty.indexed == 0
    assert set(t.indexes) == {"age", "tag"} and set(t.text_indexes) == {"body"}
    assert set(t.vector_indexes) == {"emb"}
    with pytest.raises(TypeError):
        t.vector_indexes["emb"] = None        # views: the map changes through the table


def test_a_rollback_truncates_in_step_indexes_and_never_touches_deferred_ones(db):
    col = _docs(db)
    t = col.table
    m = db.engine.maintainer
    with m.hold():
        with pytest.raises(Undo):
            with db.transaction():
                col.insert([{"id": 1000 + i, "body": "fresh", "age": -i, "tag": "new"}
                            for i in range(5)])
                assert t.indexes["age"].indexed == 205       # in step with the writes
                assert t.text_indexes["body"].indexed == 200  # the maintainer's
                assert col.count(where="age < 0") == 4
                assert len(col.search(text="fresh", limit=10)) == 5
                raise Undo
    assert {f: ix.indexed for f, ix in t.index_items()} == dict.fromkeys(
        ["body", "age", "tag", "emb"], 200)
    assert col.count(where="age < 0") == 0 and len(col.search(text="fresh")) == 0


def test_checkpoint_arrays_load_back_into_the_same_answers(db, tmp_path):
    col = _docs(db)
    t = col.table
    q = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    for f, ix in t.index_items():
        back = ix.loaded(ix.to_arrays(), t.n)
        assert type(back) is type(ix) and back.indexed == ix.indexed
    before = (col.search(vector=q, limit=5).ids, col.search(text="word3", limit=5).ids,
              col.count(where="age >= 150"), col.count(where="tag = 't1'"))
    db.checkpoint()
    db.close()
    with vv.connect(str(tmp_path / "p.varve"), readonly=True) as again:
        c = again["docs"]
        assert (c.search(vector=q, limit=5).ids, c.search(text="word3", limit=5).ids,
                c.count(where="age >= 150"), c.count(where="tag = 't1'")) == before


def test_the_undo_record_is_named(db):
    col = _docs(db)
    t = col.table
    with pytest.raises(Undo):
        with db.transaction():
            col.delete([1])
            u = t.undo
            assert (u.n, u.next_int_id, len(u.died_rows), len(u.live_ops)) == (200, 201, 1, 1)
            assert u.indexes is not None and u.schema is t.schema
            raise Undo
