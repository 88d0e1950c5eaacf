"""One-row update and delete take shortcuts on the commit path (issue 28): the
rows an `ids=` write targets skip np.unique when there is one, the row-bounds
check reads the one row instead of two reductions, and a one-row update's
values are not repeated. These pin that the shortcuts decide as the general
path does: the same rows changed, the same refusals, nothing written when refused."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.errors import VarveError


@pytest.fixture
def items(db):
    c = db.create_collection("items", {"tag": "int", "name": "text", "embedding": vv.Vector(4)})
    c.insert([{"id": i, "tag": i, "name": f"n{i}", "embedding": [float(i), 1.0, 0.0, 0.0]}
              for i in range(6)])
    return c


def _state(c) -> list:
    return sorted((d["id"], d["tag"], d["name"], list(d["embedding"]))
                  for d in c.find(limit=100, select=["tag", "name", "embedding"]))


def test_one_row_update_and_delete_by_id(db, items):
    assert items.update({"tag": 50, "name": "x", "embedding": [9.0, 0, 0, 0]}, ids=[2]) == 1
    assert items.update({"tag": 60}, ids=[3, 3]) == 1        # an id twice: one row
    assert items.update({"tag": 70}, ids=[99]) == 0          # no such id: nothing
    assert items.delete(ids=[4]) == 1
    assert items.delete(ids=[4]) == 0
    assert items.delete(ids=[5, 5, 99]) == 1
    got = {d["id"]: d for d in _as_dicts(items)}
    assert sorted(got) == [0, 1, 2, 3]
    assert (got[2]["tag"], got[2]["name"], got[2]["embedding"]) == (50, "x", [9.0, 0, 0, 0])
    assert got[3]["tag"] == 60 and got[3]["name"] == "n3"
    before = _state(items)
    db.close()
    with vv.connect(db.path) as again:          # the log replays to the same rows
        assert _state(again.collection("items")) == before


def _as_dicts(c) -> list:
    return [{"id": d["id"], "tag": d["tag"], "name": d["name"],
             "embedding": [float(x) for x in d["embedding"]]}
            for d in c.find(limit=100, select=["tag", "name", "embedding"])]


@pytest.mark.parametrize("rows", [[6], [-1], [2**40], [0, 6], [-1, 0], np.array([7], np.uint64)])
def test_rows_outside_the_table_are_refused(db, items, rows):
    t = items.table
    before, version = _state(items), db.version
    for write in (lambda tx: db.engine.delete(tx, t, np.asarray(rows)),
                  lambda tx: db.engine.update(tx, t, np.asarray(rows),
                                              {"tag": (np.array([1]), np.zeros(1, bool))})):
        with pytest.raises(VarveError, match="outside"):
            with db.transaction() as tx:
                write(tx)
    assert _state(items) == before and db.version == version


def test_a_one_row_update_keeps_its_value_its_own(db, items):
    """The coerced value of a one-row update goes to the table as it is (no
    repeat): a second update's value does not change the first's row."""
    v = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    items.update({"embedding": v}, ids=[0])
    v[:] = 7.0
    items.update({"embedding": v}, ids=[1])
    got = {d["id"]: d["embedding"] for d in _as_dicts(items)}
    assert got[0] == [1.0, 2.0, 3.0, 4.0] and got[1] == [7.0] * 4
