"""upsert merges (issue 31): a live document keeps the fields a row does not name,
as SQL's INSERT ... ON CONFLICT (id) DO UPDATE SET of the named fields does; an id
not live is inserted with its defaults; `replace` / `upsert(merge=False)` replace
the whole document. Held to a plain-Python dict-of-dicts oracle (hypothesis), with
a failed batch changing nothing, the indexes answering the kept vector and text,
and an earlier version still showing the old document.

The cases that take `db` run through vv.Client too (tests/test_client.py).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from conftest import file_digest
from varvedb import embed

SCHEMA = {"tag": "int", "title": "text", "n": vv.Int(default=7), "meta": "json",
          "emb": vv.Vector(2, metric="l2")}
FIELDS = ("tag", "title", "n", "meta", "emb")
DEFAULTS = {"tag": None, "title": None, "n": 7, "meta": None, "emb": None}


def _plain(doc: dict | None) -> dict | None:
    """A document with its vector as a list (numpy arrays compare elementwise)."""
    if doc is None:
        return None
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in doc.items()}


def test_upsert_merges_the_fields_a_row_names_and_keeps_the_rest(db):
    docs = db.create_collection("docs", SCHEMA)
    docs.insert([{"id": 1, "tag": 1, "title": "a", "meta": {"k": 1}, "emb": [1, 0]},
                 {"id": 2, "tag": 2, "title": "b", "n": 2, "emb": [0, 1]}])
    assert docs.upsert([{"id": 1, "tag": 10}]) == [1]
    assert _plain(docs.get(1)) == {"id": 1, "tag": 10, "title": "a", "n": 7,
                                   "meta": {"k": 1}, "emb": [1.0, 0.0]}
    # rows of one call name different fields; None given is null; a new id gets defaults
    docs.upsert([{"id": 2, "title": None}, {"id": 3, "tag": 3},
                 {"id": 1, "emb": [2, 2], "n": 1}])
    assert _plain(docs.get(1)) == {"id": 1, "tag": 10, "title": "a", "n": 1,
                                   "meta": {"k": 1}, "emb": [2.0, 2.0]}
    assert _plain(docs.get(2)) == {"id": 2, "tag": 2, "title": None, "n": 2, "meta": None,
                                   "emb": [0.0, 1.0]}
    assert _plain(docs.get(3)) == {"id": 3, "tag": 3, "title": None, "n": 7, "meta": None,
                                   "emb": None}
    assert docs.count() == 3


def test_replace_and_merge_false_replace_the_whole_document(db):
    docs = db.create_collection("docs", SCHEMA)
    docs.insert([{"id": 1, "tag": 1, "title": "a", "n": 1, "emb": [1, 0]},
                 {"id": 2, "tag": 2, "title": "b", "n": 2, "emb": [0, 1]}])
    assert docs.replace([{"id": 1, "tag": 5}]) == [1]
    assert _plain(docs.get(1)) == {"id": 1, "tag": 5, "title": None, "n": 7, "meta": None,
                                   "emb": None}
    assert docs.upsert({"id": 2, "title": "b2"}, merge=False) == [2]
    assert _plain(docs.get(2)) == {"id": 2, "tag": None, "title": "b2", "n": 7, "meta": None,
                                   "emb": None}
    with pytest.raises(vv.OptionError, match="merge"):
        docs.upsert({"id": 2, "tag": 1}, merge="yes")
    assert docs.get(2)["tag"] is None


def test_a_failed_upsert_changes_nothing(db, db_path):
    docs = db.create_collection("docs", {"tag": "int", "name": vv.Text(not_null=True),
                                         "emb": vv.Vector(2)})
    docs.insert([{"id": i, "tag": i, "name": f"n{i}", "emb": [i, 1]} for i in range(5)])
    before = [_plain(docs.get(i)) for i in range(8)]
    version, digest = db.version, file_digest(db_path)
    bad_batches = [
        # row 3 of 5 a new id without the not_null field (the live ones may omit it)
        [{"id": 0, "tag": 9}, {"id": 1, "tag": 9}, {"id": 6, "tag": 9},
         {"id": 2, "tag": 9}, {"id": 3, "tag": 9}],
        # row 3 of 5 sets the not_null field to null on a live document
        [{"id": 0, "tag": 9}, {"id": 1, "tag": 9}, {"id": 2, "name": None},
         {"id": 3, "tag": 9}, {"id": 7, "tag": 9, "name": "x"}],
        # row 3 of 5 a value of the wrong type, or a vector of the wrong width
        [{"id": 0, "tag": 9}, {"id": 1, "tag": 9}, {"id": 2, "tag": "nine"},
         {"id": 3, "tag": 9}, {"id": 4, "tag": 9}],
        [{"id": 0, "tag": 9}, {"id": 1, "tag": 9}, {"id": 2, "emb": [1, 2, 3]},
         {"id": 3, "tag": 9}, {"id": 4, "tag": 9}],
        # an id twice in one batch
        [{"id": 0, "tag": 9}, {"id": 1, "tag": 9}, {"id": 0, "name": "y"}],
    ]
    errors = (vv.NotNullViolationError, vv.FieldTypeError, vv.DimensionError,
              vv.DuplicateIdError)
    for batch in bad_batches:
        with pytest.raises(errors):
            docs.upsert(batch)
        assert [_plain(docs.get(i)) for i in range(8)] == before
        assert db.version == version
    assert file_digest(db_path) == digest
    db.close()
    again = vv.connect(db_path)
    try:
        assert [_plain(again["docs"].get(i)) for i in range(8)] == before
    finally:
        again.close()


def test_as_of_an_earlier_version_shows_the_document_before_the_merge(db):
    docs = db.create_collection("docs", SCHEMA)
    docs.insert({"id": 1, "tag": 1, "title": "a", "emb": [1, 0]})
    v1 = db.version
    docs.upsert({"id": 1, "title": "a2"})
    v2 = db.version
    docs.upsert({"id": 1, "emb": None})
    assert _plain(docs.get(1, as_of=v1)) == {"id": 1, "tag": 1, "title": "a", "n": 7,
                                             "meta": None, "emb": [1.0, 0.0]}
    assert _plain(docs.get(1, as_of=v2)) == {"id": 1, "tag": 1, "title": "a2", "n": 7,
                                             "meta": None, "emb": [1.0, 0.0]}
    assert docs.get(1)["emb"] is None and docs.get(1)["title"] == "a2"
    assert [h["version"] for h in docs.history(1)] == [v1, v2, db.version]


def test_a_merged_document_is_found_by_its_kept_vector_and_text(db):
    docs = db.create_collection("docs", {"tag": "int", "body": vv.Text(fts=True),
                                         "emb": vv.Vector(2, metric="l2", index=vv.HNSW())})
    docs.insert([{"id": i, "tag": 0, "body": f"word{i} common", "emb": [i, 1]}
                 for i in range(20)])
    docs.upsert([{"id": 7, "tag": 1}, {"id": 8, "tag": 1, "body": "fresh common"}])
    assert docs.search(vector=[7, 1], limit=1).ids == [7]
    assert docs.search(vector=[8, 1], limit=1, where="tag = 1").ids == [8]
    assert docs.search(text="word7").ids == [7]
    assert docs.search(text="word8").ids == []          # its text was replaced
    assert docs.search(text="fresh").ids == [8]
    assert sorted(docs.search(text="common", where="tag = 1").ids) == [7, 8]


# ---- the embedded engine's own: its indexes and embedders -----------------------------

def test_the_graph_and_the_text_index_answer_a_merged_document(tmp_path):
    db = vv.connect(str(tmp_path / "g.varve"))
    docs = db.create_collection("docs", {"tag": "int", "body": vv.Text(fts=True),
                                         "emb": vv.Vector(2, metric="l2", index=vv.HNSW())})
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3000, 2)).astype(np.float32)
    docs.insert_arrays(id=np.arange(3000), tag=np.zeros(3000, np.int64),
                       body=[f"w{i}" for i in range(3000)], emb=x)
    docs.upsert([{"id": i, "tag": 1} for i in range(0, 3000, 3)])
    assert docs.wait_indexed(timeout=1800) and docs.wait_indexed("body", timeout=1800)
    hits = docs.search(vector=x[300], limit=1)
    assert hits.ids == [300] and "graph" in str(hits.plan).lower()
    assert docs.get(300)["emb"].tolist() == x[300].tolist()
    assert docs.search(text="w300").ids == [300]
    assert docs.count(where="tag = 1") == 1000
    db.close()
    again = vv.connect(str(tmp_path / "g.varve"))
    assert again["docs"].search(vector=x[300], limit=1).ids == [300]
    again.close()


class _Lengths:
    """An embedder whose vector of a text is (len, 1) normalized, counting its texts."""
    name = "test-upsert-lengths"
    dim = 2

    def __init__(self):
        self.texts: list = []

    def embed(self, texts):
        self.texts.extend(texts)
        return np.array([[len(t), 1.0] for t in texts], np.float32)


_LENGTHS = _Lengths()


def _ratio(v) -> float:
    return round(float(v[0] / v[1]), 3)


def test_a_new_source_text_is_embedded_again_and_a_kept_one_keeps_its_vector(tmp_path):
    embed.register(_LENGTHS.name, _LENGTHS)
    db = vv.connect(str(tmp_path / "e.varve"))
    docs = db.create_collection("docs", {"tag": "int", "body": vv.Text(),
                                         "emb": vv.Vector(2, embed=_LENGTHS.name,
                                                          source="body")})
    docs.insert([{"id": 1, "body": "aa"}, {"id": 2, "body": "bbb"}, {"id": 3, "body": "c"},
                 {"id": 5, "body": "eeeeeee"}])
    _LENGTHS.texts = []
    docs.upsert([{"id": 1, "tag": 1},                        # neither: the vector kept
                 {"id": 2, "body": "bbbbb"},                 # a new text: embedded again
                 {"id": 3, "body": "cccc", "emb": [9, 1]},   # both: the vector given
                 {"id": 4, "body": "dddddd"},                # new: embedded
                 {"id": 5, "body": "eeeeeee", "tag": 5}])    # the same text: kept
    assert sorted(_LENGTHS.texts) == ["bbbbb", "dddddd"]
    assert {i: _ratio(docs.get(i)["emb"]) for i in (1, 2, 3, 4, 5)} == \
        {1: 2.0, 2: 5.0, 3: 9.0, 4: 6.0, 5: 7.0}
    docs.upsert({"id": 2, "body": None})                     # no text: no vector
    assert docs.get(2)["emb"] is None and _ratio(docs.get(1)["emb"]) == 2.0
    # the engine's verb alone (a text that changed after the rows were prepared, which
    # it embeds under the writer lock) keeps and makes vectors by the same rule
    _LENGTHS.texts = []
    s = db.session()
    with s.transaction():
        t = db.engine.table("docs")
        texts = ["aa", "zzz", "new one"]
        db.engine.upsert(s.tx, t, [1, 3, 9], {"body": (texts, np.zeros(3, bool))})
    assert sorted(_LENGTHS.texts) == ["new one", "zzz"]
    assert {i: _ratio(docs.get(i)["emb"]) for i in (1, 3, 9)} == {1: 2.0, 3: 3.0, 9: 7.0}
    assert docs.get(1)["tag"] == 1
    db.close()


# ---- against an oracle -----------------------------------------------------------------

_values = {"tag": st.one_of(st.none(), st.integers(-5, 5)),
           "title": st.one_of(st.none(), st.sampled_from(["a", "b", "ü"])),
           "n": st.one_of(st.none(), st.integers(0, 3)),
           "meta": st.one_of(st.none(), st.dictionaries(st.sampled_from("xy"),
                                                        st.integers(0, 2), max_size=2)),
           "emb": st.one_of(st.none(), st.tuples(st.integers(-3, 3), st.integers(-3, 3)))}
_row = st.fixed_dictionaries({"id": st.integers(0, 6)},
                             optional={k: v for k, v in _values.items()})
_batch = st.lists(_row, min_size=1, max_size=4, unique_by=lambda r: r["id"])
_op = st.one_of(st.tuples(st.just("insert"), _batch), st.tuples(st.just("upsert"), _batch),
                st.tuples(st.just("replace"), _batch),
                st.tuples(st.just("delete"), st.lists(st.integers(0, 6), max_size=3)),
                st.tuples(st.just("bad"), _batch, st.integers(0, 3)))


def _row_value(k, v):
    return list(map(float, v)) if k == "emb" and v is not None else v


def _apply(oracle: dict, kind: str, rows) -> None:
    if kind == "delete":
        for i in rows:
            oracle.pop(i, None)
        return
    if kind == "insert" and any(r["id"] in oracle for r in rows):
        return      # refused whole (DuplicateIdError): the caller checks
    for r in rows:
        given = {k: _row_value(k, v) for k, v in r.items() if k != "id"}
        if kind == "upsert" and r["id"] in oracle:
            oracle[r["id"]].update(given)
        else:
            oracle[r["id"]] = {**DEFAULTS, **given}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=12))
def test_writes_match_a_dict_of_dicts_oracle(ops):
    db = vv.connect(":memory:")
    docs = db.create_collection("docs", SCHEMA)
    oracle: dict = {}
    versions = []
    for op in ops:
        kind, rows = op[0], op[1]
        if kind == "bad":   # a bad value in one row refuses the whole batch
            bad = [dict(r) for r in rows]
            bad[min(op[2], len(bad) - 1)]["emb"] = [1.0, float("nan")]
            with pytest.raises(vv.VarveError):
                docs.upsert(bad)
        elif kind == "insert" and any(r["id"] in oracle for r in rows):
            with pytest.raises(vv.DuplicateIdError):
                docs.insert(rows)
        elif kind == "delete":
            assert docs.delete(ids=rows) == len(set(rows) & set(oracle))
            _apply(oracle, kind, rows)
        else:
            assert getattr(docs, kind)(rows) == [r["id"] for r in rows]
            _apply(oracle, kind, rows)
        versions.append((db.version, {i: dict(d) for i, d in oracle.items()}))
        for i in range(7):
            want = None if i not in oracle else {"id": i, **oracle[i]}
            assert _plain(docs.get(i)) == want, (i, op)
    for version, state in versions:     # every version as it was
        got = {i: _plain(docs.get(i, as_of=version)) for i in range(7)}
        assert got == {i: (None if i not in state else {"id": i, **state[i]})
                       for i in range(7)}
    db.close()


def test_a_merge_on_a_branch_leaves_main_and_get_of_ids_reads_either(tmp_path):
    db = vv.connect(str(tmp_path / "b.varve"))
    docs = db.create_collection("docs", SCHEMA)
    docs.insert([{"id": i, "tag": i, "title": f"t{i}", "emb": [i, 0]} for i in range(4)])
    db.branch("exp")
    db.use("exp")
    docs.upsert([{"id": 1, "tag": 10}, {"id": 2, "title": None}])
    docs.delete(ids=[3])
    on_exp = _plain_list(docs.get(ids=[3, 2, 1], select=["tag", "title", "emb"]))
    assert on_exp == [{"id": 2, "tag": 2, "title": None, "emb": [2.0, 0.0]},
                      {"id": 1, "tag": 10, "title": "t1", "emb": [1.0, 0.0]}]
    on_main = _plain_list(docs.get(ids=[3, 2, 1], select=["tag", "title"], branch="main"))
    assert on_main == [{"id": 3, "tag": 3, "title": "t3"}, {"id": 2, "tag": 2, "title": "t2"},
                       {"id": 1, "tag": 1, "title": "t1"}]
    db.use("main")
    assert docs.get(1)["tag"] == 1 and docs.get(2)["title"] == "t2"
    db.close()


def _plain_list(docs: list) -> list:
    return [_plain(d) for d in docs]
