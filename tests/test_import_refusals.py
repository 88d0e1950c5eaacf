"""`varvedb import` refuses what it cannot read as it was written, with a typed
VarveError and nothing written: a csv's vectors of different lengths or not one
bracketed list a row, files of two columns of one name, malformed .npy headers and
JSON nested past any limit; and an import that fails in its first chunk leaves no
new collection behind (it is made in the commit of its first rows)."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import varvedb as vv
from varvedb.transfer import import_file


def _import(db_path, path, name="docs", **kw):
    with vv.connect(db_path) as db:
        return import_file(db, name, str(path), progress=False, **kw)


def _state(db_path):
    """The collections of the file and its version (what a refused import must keep)."""
    with vv.connect(db_path, readonly=True) as db:
        return {n: db.collection(n).count() for n in db.collections()}, db.version


@pytest.mark.parametrize("text, error, says", [
    ('"[4]"', vv.DimensionError, "row 3: 1 numbers, not 2 (the first row's)"),
    ('"[1,2,3]"', vv.DimensionError, "row 3: 3 numbers, not 2"),
    ('"[[1,2]]"', vv.FieldTypeError, "row 3: a vector is written"),
    ("5", vv.FieldTypeError, "row 3: a vector is written"),
    ('"[1,]"', vv.FieldTypeError, "vectors are lists of numbers"),
    ('"[1,x]"', vv.FieldTypeError, "vectors are lists of numbers"),
])
def test_a_csv_vector_is_one_bracketed_list_of_as_many_numbers(tmp_path, text, error, says):
    """Each row's numbers are counted: [1,2] then [4] was re-cut into [1,2] [4,?]
    (the numbers joined, only their total checked); a null vector between them
    is skipped in the count but not in the row named."""
    src = tmp_path / "in.csv"
    src.write_text(f'id,emb\n1,"[1,2]"\n2,\n3,{text}\n')
    db = tmp_path / "t.varve"
    with pytest.raises(error, match=re.escape(says)):
        _import(db, src, vector="emb")
    assert _state(db) == ({}, 0)
    with vv.connect(db) as d:          # an existing collection keeps its rows alone
        d.create_collection("docs", {"emb": "vector(2)"}).insert([{"id": 9, "emb": [1, 1]}])
    with pytest.raises(error):
        _import(db, src, vector="emb")
    assert _state(db) == ({"docs": 1}, 2)


def test_a_csv_of_right_vectors_with_spaces_and_nulls(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text('id,emb\n1," [1, 2.5] "\n2,\n3,"[-1e3,4]"\n')
    db = tmp_path / "t.varve"
    assert _import(db, src, vector="emb", dim=2) == 3
    with vv.connect(db, readonly=True) as d:
        got = {r["id"]: r["emb"] for r in d.collection("docs").get()}
    assert got[1].tolist() == [1, 2.5] and got[2] is None and got[3].tolist() == [-1000, 4]


def _jsonl(rows):
    return "".join(r + "\n" for r in rows)


@pytest.mark.parametrize("name, write", [
    ("dup.jsonl", lambda p: p.write_text(_jsonl(['{"id": 1, "e": [1, 2]}',
                                                 '{"id": 1, "e": [3, 4]}']))),
    ("nan.jsonl", lambda p: p.write_text(_jsonl(['{"id": 1, "e": [1, 2]}',
                                                 '{"id": 2, "e": [NaN, 4]}']))),
    ("big.jsonl", lambda p: p.write_text(_jsonl(['{"id": 1, "n": 1}',
                                                 '{"id": 2, "n": 99999999999999999999}']))),
    ("nan.csv", lambda p: p.write_text('id,e\n1,"[1,2]"\n2,"[nan,2]"\n')),
    ("nan.npy", lambda p: np.save(p, np.array([[1, 2], [np.nan, 4]], np.float32))),
    ("nan.parquet", lambda p: pq.write_table(pa.table({"e": pa.FixedSizeListArray.from_arrays(
        pa.array([1, 2, np.nan, 4], pa.float32()), 2)}), p)),
])
def test_a_failed_first_chunk_leaves_no_new_collection(tmp_path, name, write):
    """The collection is made in the commit of its first rows: refused rows leave
    neither it nor its inferred schema (it was made, empty, before the insert)."""
    src = tmp_path / name
    write(src)
    db = tmp_path / "t.varve"
    with pytest.raises(vv.VarveError):
        _import(db, src, vector="e" if name.endswith(".csv") else None)
    assert _state(db) == ({}, 0)


def test_a_failure_after_committed_chunks_keeps_them(tmp_path, monkeypatch):
    """As documented: each chunk is its own commit, so those before a bad one stay."""
    import varvedb.transfer as transfer
    monkeypatch.setattr(transfer, "CHUNK", 2)
    src = tmp_path / "in.jsonl"
    src.write_text(_jsonl(['{"id": 1, "n": 1}', '{"id": 2, "n": 2}', '{"id": 3, "n": "x"}']))
    db = tmp_path / "t.varve"
    with pytest.raises(vv.FieldTypeError):
        _import(db, src)
    assert _state(db) == ({"docs": 2}, 1)


@pytest.mark.parametrize("name, data, schema", [
    ("empty.npy", b"", None),
    ("header.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4', 'fortran_order': False, "
                   b"'shape': (9, 9), }" + b" " * 10 + b"\n", None),
    ("huge.npy", b"\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, "
                 b"'shape': (100000000000, 9), }" + b" " * 49 + b"\n", None),
    ("deep.jsonl", b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b"}\n", None),
    ("deep.csv", b"id,j\n1," + b"[" * 100000 + b"\n", {"j": "json"}),
])
def test_malformed_files_are_typed_errors(tmp_path, name, data, schema):
    """An empty or crafted .npy (numpy raised EOFError, tokenize.TokenError) and
    JSON nested 100 000 deep (RecursionError) are FieldTypeErrors naming the file
    or column; nothing is written."""
    src = tmp_path / name
    src.write_bytes(data)
    db = tmp_path / "t.varve"
    with vv.connect(db) as d:
        if schema:
            d.create_collection("docs", schema)
    before = _state(db)
    with pytest.raises(vv.FieldTypeError, match="npy array|nested too deeply"):
        _import(db, src)
    assert _state(db) == before


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_two_columns_of_one_name_are_refused(tmp_path, suffix):
    """A dict of the columns kept one of the two (the last), the other's values
    silently lost; so did insert of such an Arrow table."""
    src = tmp_path / f"in{suffix}"
    if suffix == ".csv":
        src.write_text("id,price,price\n1,10,99\n")
    else:
        pq.write_table(pa.Table.from_arrays([pa.array([1]), pa.array([10]), pa.array([99])],
                                            names=["id", "price", "price"]), src)
    db = tmp_path / "t.varve"
    with pytest.raises(vv.FieldTypeError, match="columns named alike: \\['price'\\]"):
        _import(db, src)
    assert _state(db) == ({}, 0)
    with vv.connect(db) as d:     # an Arrow table given to insert: the same refusal
        docs = d.create_collection("docs", {"price": "int"})
        with pytest.raises(vv.FieldTypeError, match="columns named alike"):
            docs.insert(pa.Table.from_arrays([pa.array([10]), pa.array([99])],
                                             names=["price", "price"]))
        assert docs.count() == 0


def test_an_import_inside_a_transaction_joins_it(tmp_path):
    """The new collection's commit is the caller's transaction when one is open:
    it commits or rolls back with it (it is not refused as a second one)."""
    src = tmp_path / "in.jsonl"
    src.write_text(_jsonl(['{"id": 1, "n": 1}', '{"id": 2, "n": 2}']))
    with vv.connect(tmp_path / "t.varve") as db:
        with pytest.raises(KeyError):
            with db.transaction():
                assert import_file(db, "docs", str(src), progress=False) == 2
                assert db.collection("docs").count() == 2
                raise KeyError("roll back")
        assert db.collections() == [] and db.version == 0
        with db.transaction():
            import_file(db, "docs", str(src), progress=False)
            import_file(db, "more", str(src), progress=False)
        assert db.version == 1 and db.collection("more").count() == 2
