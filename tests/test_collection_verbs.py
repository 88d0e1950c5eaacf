"""The verbs users of Chroma and LanceDB reach for first (issue 31):
create_collection(exist_ok=True) / get_or_create_collection, get(ids=[...]) with
where / limit / offset / as_of / select answering a list in the order of the ids,
and find(offset=); search(vectors=2-D array), a batch answered as a list of Hits
equal to the searches one at a time. get(ids=) is held to a plain-Python oracle
(hypothesis).

The cases that take `db` run through vv.Client too (tests/test_client.py).
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv

SCHEMA = {"tag": vv.Int(index="hash"), "title": "text", "emb": vv.Vector(2, metric="l2")}


def _plain(docs: list) -> list:
    return [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
            for d in docs]


def _docs(db):
    docs = db.create_collection("docs", SCHEMA)
    docs.insert([{"id": i, "tag": i % 3, "title": f"t{i}", "emb": [i, 1]} for i in range(10)])
    return docs


def test_exist_ok_returns_the_collection_of_the_same_schema(db):
    docs = _docs(db)
    again = db.create_collection("docs", SCHEMA, exist_ok=True)
    assert again.count() == 10 and again.schema == docs.schema
    assert db.get_or_create_collection("docs", SCHEMA).count() == 10
    # an index created since is no difference; the schema as strings is the same one
    docs2 = db.get_or_create_collection("plain", {"n": "int", "v": "vector(2)"})
    docs2.insert({"id": 1, "n": 1, "v": [1, 0]})
    db.sql("CREATE INDEX ON plain (n)")
    assert db.create_collection("plain", {"n": "int", "v": "vector(2)"},
                                exist_ok=True).get(1)["n"] == 1
    assert sorted(db.collections()) == ["docs", "plain"]


def test_exist_ok_refuses_another_schema_naming_the_difference(db):
    _docs(db)
    version = db.version
    cases = [({"tag": "text", "title": "text", "emb": vv.Vector(2, metric="l2")}, "'tag'"),
             ({"tag": vv.Int(index="hash"), "title": "text"}, "'emb'"),
             ({**SCHEMA, "extra": "int"}, "'extra'"),
             ({**SCHEMA, "emb": vv.Vector(3, metric="l2")}, "'emb'"),
             ({**SCHEMA, "tag": vv.Int(index="sorted")}, "'tag'"),
             ({"id": "text", **SCHEMA}, "text ids")]
    for schema, named in cases:
        with pytest.raises(vv.SchemaError, match=named):
            db.create_collection("docs", schema, exist_ok=True)
    with pytest.raises(vv.SchemaError, match="already exists"):
        db.create_collection("docs", SCHEMA)
    assert db.version == version and db["docs"].count() == 10


def test_get_of_many_ids_answers_their_documents_in_their_order(db):
    docs = _docs(db)
    got = docs.get(ids=[5, 2, 99, 7, 2])
    assert _plain(got) == [{"id": 5, "tag": 2, "title": "t5", "emb": [5.0, 1.0]},
                           {"id": 2, "tag": 2, "title": "t2", "emb": [2.0, 1.0]},
                           {"id": 7, "tag": 1, "title": "t7", "emb": [7.0, 1.0]}]
    assert docs.get(ids=[]) == [] and docs.get(ids=[42]) == []
    assert docs.get(ids=[5, 2, 7], where="tag = 2", select=["title"]) == \
        [{"id": 5, "title": "t5"}, {"id": 2, "title": "t2"}]
    assert docs.get(ids=[9, 8, 7, 6], offset=1, limit=2, select=[]) == [{"id": 8}, {"id": 7}]
    assert docs.get(ids=[1, 4], where="tag = $1", params=[1], select=["tag"]) == \
        [{"id": 1, "tag": 1}, {"id": 4, "tag": 1}]
    # without ids: every document (or where's) in insertion order
    assert [d["id"] for d in docs.get(where="tag = 0", offset=1, limit=2)] == [3, 6]
    assert len(docs.get()) == 10
    assert docs.get(3)["title"] == "t3" and docs.get(99) is None     # one id: as before
    with pytest.raises(vv.FieldTypeError):
        docs.get(3, ids=[3])
    with pytest.raises(vv.FieldTypeError):
        docs.get(ids=[[1]])
    with pytest.raises(vv.FieldTypeError):
        docs.get(ids=["a"])                     # this collection's ids are ints
    with pytest.raises(vv.FieldTypeError):
        docs.get(ids=[1], offset=-1)


def test_get_of_many_ids_travels_in_time(db):
    docs = _docs(db)
    before = db.version
    docs.upsert({"id": 4, "title": "new"})
    docs.delete(ids=[5])
    docs.insert({"id": 11, "tag": 0, "title": "t11"})
    assert docs.get(ids=[4, 5, 11], select=["title"]) == [{"id": 4, "title": "new"},
                                                         {"id": 11, "title": "t11"}]
    assert docs.get(ids=[4, 5, 11], select=["title"], as_of=before) == \
        [{"id": 4, "title": "t4"}, {"id": 5, "title": "t5"}]


def test_get_of_many_text_ids(db):
    docs = db.create_collection("named", {"id": "text", "n": "int"})
    docs.insert([{"id": "a", "n": 1}, {"id": "b", "n": 2}, {"id": "c", "n": 3}])
    before = db.version
    docs.delete(ids=["b"])
    assert docs.get(ids=["c", "b", "zz", "a"]) == [{"id": "c", "n": 3}, {"id": "a", "n": 1}]
    assert docs.get(ids=["c", "b"], as_of=before) == [{"id": "c", "n": 3}, {"id": "b", "n": 2}]


def test_find_offset_skips_rows_before_the_limit(db):
    docs = _docs(db)
    assert docs.find(offset=3, limit=4).ids == [3, 4, 5, 6]
    assert docs.find(where="tag = 1", offset=1).ids == [4, 7]
    assert docs.find(offset=20).ids == []
    with pytest.raises(vv.FieldTypeError):
        docs.find(offset=-2)


def test_search_of_a_batch_of_vectors_equals_each_search(db):
    docs = _docs(db)
    queries = np.array([[3.2, 1], [0, 0.5], [9, 2], [5, 1]], np.float32)
    for kw in ({"limit": 3}, {"limit": 2, "where": "tag = $1", "params": [1]},
               {"limit": 4, "select": ["title"], "exact": True}, {"limit": 0}):
        batch = docs.search(vectors=queries, **kw)
        assert isinstance(batch, list) and len(batch) == len(queries)
        for q, hits in zip(queries, batch):
            one = docs.search(q, **kw)
            assert hits.ids == one.ids and hits.to_dicts() == one.to_dicts()
    # a list of lists is the same batch; as_of reads the past
    v = db.version
    docs.delete(ids=[3])
    assert docs.search(vectors=queries.tolist(), limit=1)[0].ids == [4]
    assert [h.ids for h in docs.search(vectors=queries, limit=1, as_of=v)][0] == [3]
    assert docs.search(vectors=np.zeros((0, 2)), limit=3) == []


def test_search_of_a_batch_refuses_a_wrong_batch_whole(db):
    docs = _docs(db)
    for bad, error in (([1, 2], vv.FieldTypeError), ("xy", vv.FieldTypeError),
                       ([[1, 2], [3]], vv.FieldTypeError),
                       (np.zeros((2, 3)), vv.DimensionError)):
        with pytest.raises(error):
            docs.search(vectors=bad)
    with pytest.raises(vv.FieldTypeError, match="vectors="):
        docs.search([1, 2], vectors=[[1, 2]])
    with pytest.raises(vv.FieldTypeError, match="vectors="):
        docs.search(text="t1", vectors=[[1, 2]])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 14), max_size=10), st.one_of(st.none(), st.integers(0, 2)),
       st.integers(0, 4), st.one_of(st.none(), st.integers(0, 5)), st.booleans())
def test_get_of_many_ids_matches_an_oracle(ids, tag, offset, limit, old):
    db = vv.connect(":memory:")
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": i, "tag": i % 3} for i in range(12)])
    first = {i: i % 3 for i in range(12)}
    v = db.version
    docs.delete(ids=[1, 2])
    docs.upsert([{"id": 4, "tag": 2}, {"id": 13, "tag": 1}])
    now = {i: t for i, t in first.items() if i not in (1, 2)} | {4: 2, 13: 1}
    state = first if old else now
    seen, want = set(), []
    for i in ids:
        if i in state and i not in seen and (tag is None or state[i] == tag):
            want.append({"id": i, "tag": state[i]})
        seen.add(i)
    want = want[offset:][:limit] if limit is not None else want[offset:]
    got = docs.get(ids=ids, where=None if tag is None else f"tag = {tag}", offset=offset,
                   limit=limit, as_of=v if old else None)
    assert got == want
    db.close()


# ---- a collection created from its first data (schema inferred) --------------------

FROM_DATA = [{"id": "a", "n": 1, "x": 0.5, "ok": True, "title": "first",
              "meta": {"k": [1, 2]}, "at": dt.datetime(2026, 1, 2, 3, 4, 5),
              "emb": [1.0, 0.0, 0.0]},
             {"id": "b", "n": 2, "x": 2, "ok": False, "title": None,
              "meta": None, "at": None, "emb": [0.0, 1.0, 0.0]}]


def _fields(coll) -> dict:
    return {n: f.kind for n, f in coll.schema.fields.items()}


def test_a_collection_created_from_rows_takes_its_types_and_ids_from_them(db):
    version = db.version
    docs = db.create_collection("docs", data=FROM_DATA)
    assert docs.schema.id_kind == "text"
    assert _fields(docs) == {"n": "int", "x": "float", "ok": "bool", "title": "text",
                             "meta": "json", "at": "timestamp", "emb": "vector"}
    assert docs.schema.fields["emb"].dim == 3
    assert db.version == version + 1                 # created and filled in one commit
    assert docs.get("a")["meta"] == {"k": [1, 2]} and docs.get("b")["x"] == 2.0
    assert [h.id for h in docs.search([0.0, 1.0, 0.0], limit=1)] == ["b"]
    # int ids, or none (assigned): the default int ids
    assert db.create_collection("ints", data=[{"id": 7, "v": "x"}]).schema.id_kind == "int"
    assert db.create_collection("auto", data=[{"v": "x"}]).find()[0]["v"] == "x"


def test_get_or_create_from_rows_inserts_once(db):
    docs = db.get_or_create_collection("docs", data=FROM_DATA)
    version = db.version
    again = db.get_or_create_collection("docs", data=FROM_DATA)   # no duplicate ids
    assert again.count() == 2 and db.version == version
    # a schema given beside the data keeps its types
    typed = db.create_collection("typed", {"id": "text", "n": "float"},
                                 data=[{"id": "a", "n": 1}])
    assert _fields(typed) == {"n": "float"} and typed.get("a")["n"] == 1.0
    assert docs.count() == 2


def test_a_collection_from_data_that_fails_is_not_created(db):
    version, names = db.version, sorted(db.collections())
    bad = [{"id": i, "n": i} for i in range(1000)] + [{"id": 1000, "n": "late text"}]
    with pytest.raises(vv.FieldTypeError, match="'n'"):     # past the sample: insert refuses
        db.create_collection("docs", data=bad)
    cases = [(vv.FieldTypeError, "no rows", []),
             (vv.FieldTypeError, "ids are float", [{"id": 1.5, "n": 1}]),
             (vv.FieldTypeError, "a row is a dict", [[1, 2]]),
             (vv.OptionError, "needs a schema", None)]
    for error, message, data in cases:
        with pytest.raises(error, match=message):
            db.create_collection("docs", data=data)
    assert db.version == version and sorted(db.collections()) == names


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_collection_from_data_that_fails_in_a_transaction_leaves_nothing(tmp_path, where):
    """Inside db.transaction() the refused rows raised, yet the collection was
    committed with the block. The call now leaves nothing; the block goes on."""
    path = str(tmp_path / "t.varve") if where == "file" else ":memory:"
    db = vv.connect(path)
    keep = db.create_collection("keep", {"n": "int"})
    big = [{"id": i, "n": i} for i in range(3000)]
    with db.transaction():
        keep.insert([{"id": 1, "n": 1}])
        for name, schema, rows, error in (
                ("x", None, [{"id": 1, "n": 1}, {"id": 1, "n": 2}], vv.DuplicateIdError),
                ("x", None, big + [{"id": 3000, "n": "late text"}], vv.FieldTypeError),
                ("y", {"n": vv.Int(not_null=True)}, [{"id": 1, "n": None}],
                 vv.NotNullViolationError)):
            with pytest.raises(error):
                db.create_collection(name, schema, data=rows)
            assert name not in db.collections()
        again = db.create_collection("x", data=big)           # the name is free
        keep.insert([{"id": 2, "n": 2}])
    want = {"keep": [1, 2], "x": list(range(3000))}

    def check(d):
        assert sorted(d.collections()) == sorted(want)
        for name, ids in want.items():
            assert sorted(r["id"] for r in d.collection(name).find(limit=5000)) == ids
        assert d.verify().ok

    check(db)
    assert again.count() == 3000
    db.close()
    if where == "file":
        with vv.connect(path) as db:
            check(db)


def test_a_creation_undone_after_its_frames_were_written(tmp_path):
    """The engine's undo of a creation whose rows it had already written (a
    frame past 1 MiB goes to the file at once): those bytes are zeroed and the
    transaction's next frames and its commit read back, reopened."""
    from varvedb.schema import Schema
    path = str(tmp_path / "w.varve")
    db = vv.connect(path)
    keep = db.create_collection("keep", {"n": "int"})
    eng = db.engine
    vecs = np.ones((3000, 128), np.float32)

    def fill(t):
        eng.insert(tx, t, np.arange(3000), {"emb": (vecs, np.zeros(3000, bool))})
        assert eng.log.end > eng.log.commit_end            # written, not pending
        eng.insert(tx, t, np.array([1]), {"emb": (vecs[:1], np.zeros(1, bool))})  # a duplicate

    with db.transaction() as tx:
        with pytest.raises(vv.DuplicateIdError):
            eng.create_collection(tx, "x", Schema.parse({"emb": vv.Vector(128)}), fill)
        keep.insert([{"id": 1, "n": 1}])
    assert db.collections() == ["keep"]
    db.close()
    with vv.connect(path) as db:
        assert db.collections() == ["keep"] and db.collection("keep").count() == 1
        assert db.verify().ok


def test_a_table_infers_the_schema_its_rows_do(db):
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    rows = [{k: v for k, v in r.items() if k != "meta"} for r in FROM_DATA]
    frame = pd.DataFrame(rows)
    frame["emb"] = list(np.asarray([r["emb"] for r in rows], np.float32))
    tables = {"rows": rows, "pandas": frame,
              "arrow": pa.Table.from_pylist(rows), "polars": pl.from_dicts(rows)}
    want = None
    for name, data in tables.items():
        coll = db.create_collection(name, data=data)
        got = (coll.schema.id_kind, _fields(coll), coll.schema.fields["emb"].dim,
               _plain(coll.get(ids=["a", "b"])))
        assert want is None or got == want, name
        want = got


_VALUES = {"int": st.integers(-2**40, 2**40), "float": st.floats(-1e6, 1e6).filter(
               lambda x: x != int(x)),
           "bool": st.booleans(), "text": st.text(max_size=5),
           "json": st.dictionaries(st.text(max_size=2), st.integers(-2**63, 2**63 - 1),
                                   max_size=2)}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.dictionaries(st.sampled_from("abcde"), st.sampled_from(sorted(_VALUES)),
                             min_size=1, max_size=4),
       data=st.data())
def test_inferred_types_are_the_values_types_and_the_rows_read_back(kinds, data, tmp_path):
    """The oracle: a column's type is its values' (nulls aside; all null: text), and
    the rows read back as given."""
    n = data.draw(st.integers(1, 6))
    rows = [{"id": i, **{c: data.draw(st.none() | _VALUES[k]) for c, k in kinds.items()}}
            for i in range(n)]
    db = vv.connect(str(tmp_path / f"p{len(list(tmp_path.iterdir()))}.varve"))
    coll = db.create_collection("docs", data=rows)
    want = {c: (k if any(r[c] is not None for r in rows) else "text")
            for c, k in kinds.items()}
    assert _fields(coll) == want
    got = {d["id"]: d for d in coll.find()}
    assert [{c: got[r["id"]][c] for c in kinds} for r in rows] == \
        [{c: r[c] for c in kinds} for r in rows]
    db.close()


def test_async_create_from_rows(tmp_path):
    import asyncio

    async def go():
        db = await vv.connect_async(str(tmp_path / "a.varve"))
        docs = await db.get_or_create_collection("docs", data=FROM_DATA)
        again = await db.get_or_create_collection("docs", data=FROM_DATA)
        n = await again.count()
        await db.aclose()
        return docs, n
    docs, n = asyncio.run(go())
    assert n == 2
