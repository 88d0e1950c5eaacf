"""Each frame kind: encode → decode gives the frame back; a truncated or altered
record is refused with CorruptFileError (engine/frames.py, docs/file-format.md)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varvedb as vv
from varvedb.engine import frames
from varvedb.errors import CorruptFileError
from varvedb.schema import Schema
from varvedb.storage import record

SCHEMA = {"n": "int", "x": "float", "ok": "bool", "title": "text", "meta": "json",
          "at": "timestamp", "v": vv.Vector(3)}


@pytest.fixture
def engine():
    db = vv.connect(":memory:")
    db.create_collection("docs", SCHEMA)
    yield db.engine
    db.close()


def roundtrip(engine, frame, base=4096):
    parts, length, _ = frames.encode(frame)
    payload = b"".join(bytes(p) for p in parts)
    assert len(payload) == length
    return frames.decode(engine, frame.KIND, payload, base), payload


def an_insert(engine, n=3) -> frames.Insert:
    t = engine.table("docs")
    cols = {"n": (np.arange(n, dtype=np.int64), np.zeros(n, bool)),
            "x": (np.linspace(0, 1, n), np.array([False, True, False][:n])),
            "ok": (np.ones(n, bool), np.zeros(n, bool)),
            "title": (["a", None, "c"][:n], None),
            "meta": ([{"k": [1, 2]}, None, 3][:n], None),
            "at": (np.full(n, 1_700_000_000_000_000, np.int64), np.zeros(n, bool)),
            "v": (np.arange(3 * n, dtype=np.float32).reshape(n, 3), np.zeros(n, bool))}
    return frames.Insert(t.cid, t.n, np.arange(10, 10 + n, dtype=np.int64), cols)


def test_create_collection_round_trip():
    db = vv.connect(":memory:")
    frame = frames.CreateCollection(1, "docs", Schema.parse(SCHEMA))
    back, _ = roundtrip(db.engine, frame)
    assert (back.cid, back.name) == (1, "docs")
    assert back.schema.to_dict() == frame.schema.to_dict()


def test_insert_round_trip_keeps_every_column(engine):
    frame = an_insert(engine)
    back, _ = roundtrip(engine, frame, base=8192)
    assert back.cid == frame.cid and back.first == frame.first
    np.testing.assert_array_equal(back.ids, frame.ids)
    assert back.columns.keys() == frame.columns.keys()
    for name, (vals, nulls) in frame.columns.items():
        bvals, bnulls = back.columns[name]
        if isinstance(vals, list):
            assert bvals == vals
        else:
            np.testing.assert_array_equal(bvals, vals)
            np.testing.assert_array_equal(bnulls, nulls)
    # the vector block's place in the file: the record's base plus its offset
    _, _, offsets = frames.encode(frame)
    assert back.offset("v") == 8192 + offsets["v:v"]


def test_delete_and_create_index_round_trip(engine):
    t = engine.table("docs")
    db_tx = engine.begin()
    engine.write(db_tx, an_insert(engine))
    back, _ = roundtrip(engine, frames.Delete(t.cid, np.array([0, 2], np.int64)))
    np.testing.assert_array_equal(back.rows, [0, 2])
    back, _ = roundtrip(engine, frames.CreateIndex(t.cid, "v", vv.HNSW(m=8)))
    # a frame that holds quantize="auto" is read as the field decides it (3-d: None)
    assert (back.field, back.spec) == ("v", vv.HNSW(m=8, quantize=None))
    back, _ = roundtrip(engine, frames.CreateIndex(t.cid, "v", vv.HNSW(m=8, quantize="pq",
                                                                       pq_m=3)))
    assert back.spec == vv.HNSW(m=8, quantize="pq", pq_m=3)
    engine.rollback(db_tx)


def test_a_full_text_index_of_a_configuration_round_trips_and_its_alterations_are_refused(
        engine):
    t = engine.table("docs")
    back, _ = roundtrip(engine, frames.CreateScalarIndex(t.cid, "title", "fts", None,
                                                         "english"))
    assert (back.field, back.kind, back.ts_config) == ("title", "fts", "english")
    for meta in ({"c": t.cid, "field": "title", "kind": "fts"},                  # no config
                 {"c": t.cid, "field": "title", "kind": "fts", "ts_config": "french"},
                 {"c": t.cid, "field": "n", "kind": "fts", "ts_config": "simple"},
                 {"c": t.cid, "field": "title", "kind": "fts", "ts_config": "simple",
                  "name": "x"}):
        parts, _, _ = record.encode(meta, {})
        with pytest.raises(CorruptFileError):
            frames.decode(engine, frames.CreateScalarIndex.KIND,
                          b"".join(bytes(p) for p in parts), 0)


@pytest.mark.parametrize("keep", [0, 3, 40, 200, -62])
def test_a_truncated_record_is_refused(engine, keep):
    # the last array (3 null flags) is padded to 64 bytes: cutting 62 reaches into it
    _, payload = roundtrip(engine, an_insert(engine))
    with pytest.raises(CorruptFileError):
        frames.decode(engine, frames.Insert.KIND, payload[:keep], 0)


def altered(frame_meta_arrays, change):
    meta, arrays = frame_meta_arrays
    change(meta, arrays)
    parts, _, _ = record.encode(meta, arrays)
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("change", [
    lambda m, a: m.update(first=1),                      # not the table's row count
    lambda m, a: m.update(n=4),                          # more rows than ids
    lambda m, a: m.update(c=99),                         # no such collection
    lambda m, a: m.update(fields=["n", "n"]),            # a field twice
    lambda m, a: m.update(fields=m["fields"] + ["nope"]),
    lambda m, a: m["lists"].pop("title"),                # a text column missing
    lambda m, a: m["lists"].update(title=[1, 2, 3]),     # text values not str
    lambda m, a: a.update(ids=a["ids"].astype(np.int32)),
    lambda m, a: a.update({"v:v": a["v:v"][:, :2]}),      # wrong dimension
    lambda m, a: a.update({"v:at": np.full(3, 2**62, np.int64)}),   # past year 9999
    lambda m, a: a.update(extra=np.zeros(1)),            # an array no kind writes
    lambda m, a: m.update(first=True),                   # a bool is not an int
], ids=["first", "n", "cid", "dup-field", "unknown-field", "missing-list", "list-type",
        "id-dtype", "dim", "timestamp", "extra-array", "bool-int"])
def test_an_altered_insert_is_refused(engine, change):
    payload = altered(an_insert(engine).encode(), change)
    with pytest.raises(CorruptFileError):
        frames.decode(engine, frames.Insert.KIND, payload, 0)


def test_altered_delete_create_index_and_collection_are_refused(engine):
    t = engine.table("docs")
    cases = [
        (frames.Delete.KIND, {"c": t.cid}, {"rows": np.array([0], np.int64)}),  # no row 0 yet
        (frames.Delete.KIND, {"c": t.cid}, {"rows": np.array([0], np.int32)}),
        (frames.CreateIndex.KIND, {"c": t.cid, "field": "n", "spec": vv.HNSW().to_dict()}, {}),
        (frames.CreateIndex.KIND, {"c": t.cid, "field": "v",
                                   "spec": {**vv.HNSW().to_dict(), "m": 1000}}, {}),
        (frames.CreateCollection.KIND, {"cid": t.cid, "name": "other",
                                        "schema": Schema.parse(SCHEMA).to_dict()}, {}),
        (frames.CreateCollection.KIND, {"cid": 5, "name": "docs",
                                        "schema": Schema.parse(SCHEMA).to_dict()}, {}),
        (frames.CreateCollection.KIND, {"cid": 5, "name": "x", "schema": {"a": 1}}, {}),
        (99, {}, {}),
    ]
    for kind, meta, arrays in cases:
        parts, _, _ = record.encode(meta, arrays)
        with pytest.raises(CorruptFileError):
            frames.decode(engine, kind, b"".join(bytes(p) for p in parts), 0)


_DTYPE_CHOICES = ["<i8", "<i4", "|i1", "<u2", "<f8", "<f4", "<f2", "|b1", ">f4", ">i8"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_DTYPE_CHOICES),
                          st.lists(st.integers(0, 40), min_size=0, max_size=3),
                          st.booleans()), max_size=6),
       st.dictionaries(st.text(max_size=4), st.one_of(st.integers(-2**63, 2**63 - 1), st.text(max_size=30)),
                       max_size=3),
       st.integers(0, 2**40))
def test_a_small_record_is_the_general_paths_bytes(arrays, meta, seed):
    """record.encode's one-buffer path for small records (a one-row insert) writes
    byte for byte what the general path writes (`packed` given, compressing
    nothing, takes it), big-endian and strided arrays included, and decodes
    back to the same arrays at the offsets it reports."""
    rng = np.random.default_rng(seed)
    named = {}
    for i, (dt, shape, strided) in enumerate(arrays):
        a = (rng.integers(0, 100, size=[*shape, 2] if strided else shape)).astype(dt)
        named[f"a{i}"] = a[..., 0] if strided else a
    meta = {k: v for k, v in meta.items() if k != "_arrays"}
    parts, length, offsets = record.encode(meta, named)
    ref_parts, ref_length, ref_offsets = record.encode(meta, named, packed=lambda n: False)
    raw = b"".join(bytes(memoryview(p).cast("B")) for p in parts)
    assert raw == b"".join(bytes(memoryview(p).cast("B")) for p in ref_parts)
    assert length == ref_length == len(raw) and offsets == ref_offsets
    back_meta, back, back_offsets = record.decode(raw)
    assert back_meta == meta and back_offsets == offsets
    for name, a in named.items():
        assert back[name].dtype.newbyteorder("=") == a.dtype.newbyteorder("=")
        assert np.array_equal(back[name], np.atleast_1d(a))   # 0-d: written as (1,)


def test_a_record_whose_meta_is_large_is_written_whole():
    """A few small arrays beside a meta past SMALL_RECORD (a batch's texts): the
    meta's encoding made for the small path is handed on to the general one,
    which writes it uncompressed (nothing is packed) with the arrays after it."""
    meta = {"lists": {"body": ["x" * 1000] * 80}}
    arrays = {"ids": np.arange(80, dtype=np.int64), "n:tag": np.zeros(80, bool)}
    parts, length, offsets = record.encode(meta, arrays)
    raw = b"".join(bytes(memoryview(p).cast("B")) for p in parts)
    assert length == len(raw) > record.SMALL_RECORD
    word = int.from_bytes(raw[:4], "little")
    assert not word & record.PACKED_META and offsets["ids"] == (4 + word + 63) // 64 * 64
    back_meta, back, back_offsets = record.decode(raw)
    assert back_meta == meta and back_offsets == offsets
    assert np.array_equal(back["ids"], arrays["ids"]) and not back["n:tag"].any()
