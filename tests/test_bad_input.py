"""Bad input raises its own VarveError subclass, names the problem, and changes nothing.

Every rejected call is checked three ways: the error's type, words of its
message, and the file's bytes (compared while the database is open, since
writes go straight to the file), plus the version and visible rows.
"""
from __future__ import annotations

import os
import struct
import subprocess
import warnings
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varvedb as vv
from varvedb.storage import format as F

from conftest import PYTHON, child_env, file_digest

SCHEMA = {"title": "text", "tag": vv.Int(index="hash"), "year": vv.Int(index="sorted"),
          "meta": "json", "ts": "timestamp", "flag": "bool", "score": "float",
          "emb": vv.Vector(4, metric="l2"), "half": vv.Vector(2, dtype="f16")}


@pytest.fixture
def loaded(db_path):
    d = vv.connect(db_path)
    docs = d.create_collection("docs", SCHEMA)
    docs.insert([{"id": i, "title": f"t{i}", "tag": i % 3, "year": 2000 + i,
                  "meta": {"i": i}, "flag": bool(i % 2), "score": i / 2,
                  "emb": [i, 0, 0, 1], "half": [1, i]} for i in range(5)])
    yield d, docs, db_path
    d.close()


def _state(d, docs):
    return (d.version, docs.count(),
            [(h.id, h.fields) for h in docs.find()],
            [h.version for h in d.history()])


def assert_rejected(loaded, call, exc, *words):
    """call() raises exc (and no other VarveError) naming words; nothing changes."""
    d, docs, path = loaded
    before_bytes = file_digest(path)
    before = _state(d, docs)
    with pytest.raises(exc) as info:
        call()
    assert type(info.value) is exc, f"{type(info.value).__name__}: {info.value}"
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in message {msg!r}"
    assert file_digest(path) == before_bytes
    assert _state(d, docs) == before
    # and a good write still works afterwards
    good = "ok" if docs.schema.id_kind == "text" else 1000
    docs.upsert({"id": good, "tag": 1})
    assert docs.get(good)["tag"] == 1
    docs.delete(ids=[good])


# ---- vectors ------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda docs: docs.insert({"id": 10, "emb": [1, 2, 3]}),
    lambda docs: docs.insert([{"id": 10, "emb": [1, 2, 3, 4]}, {"id": 11, "emb": [1, 2, 3, 4, 5]}]),
    lambda docs: docs.insert({"id": 10, "emb": [[1, 2, 3, 4]]}),
    lambda docs: docs.upsert({"id": 1, "emb": [1, 2]}),
    lambda docs: docs.update({"emb": [1, 2, 3, 4, 5]}, ids=[1]),
    lambda docs: docs.insert_arrays(id=[10, 11], emb=np.zeros((2, 3), np.float32)),
    lambda docs: docs.insert_arrays(id=[10, 11, 12, 13], emb=np.zeros(4, np.float32)),
], ids=["insert-short", "insert-long-in-batch", "insert-nested", "upsert", "update",
        "arrays-3", "arrays-1d"])
def test_wrong_vector_dimension_raises_dimension_error(loaded, make):
    assert_rejected(loaded, lambda: make(loaded[1]), vv.DimensionError, "emb")


def test_query_vector_of_wrong_dimension_raises_dimension_error(loaded):
    assert_rejected(loaded, lambda: loaded[1].search(vector=[1, 2, 3], field="emb"),
                    vv.DimensionError, "(4,)")


@pytest.mark.parametrize("make", [
    lambda docs: docs.insert({"id": 10, "emb": [1, float("nan"), 0, 0]}),
    lambda docs: docs.insert({"id": 10, "emb": [1, 0, float("inf"), 0]}),
    lambda docs: docs.insert([{"id": 10, "emb": [0, 0, 0, 0]},
                              {"id": 11, "emb": [0, -float("inf"), 0, 0]}]),
    lambda docs: docs.update({"emb": [float("nan")] * 4}, where="tag = 1"),
    lambda docs: docs.insert_arrays(id=[10, 11], emb=np.array([[0, 0, 0, 0],
                                                              [np.nan, 0, 0, 0]], np.float32)),
], ids=["nan", "inf", "-inf-second-row", "update", "arrays"])
def test_nan_or_inf_in_a_vector_raises_non_finite_error(loaded, make):
    assert_rejected(loaded, lambda: make(loaded[1]), vv.NonFiniteVectorError, "emb", "NaN or inf")


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_value_that_overflows_f16_raises_range_error(loaded):
    # 22003 as pgvector's halfvec input (tests/sql_cases/index_exprs.sql); still a
    # NonFiniteVectorError to those who catch that
    assert_rejected(loaded, lambda: loaded[1].insert({"id": 10, "half": [1e6, 0]}),
                    vv.VectorRangeError, "half", "f16")
    assert issubclass(vv.VectorRangeError, vv.NonFiniteVectorError)


@pytest.mark.parametrize("q", [[np.nan, 0, 0, 0], [0, 0, np.inf, 0]])
def test_non_finite_query_vector_raises_non_finite_error(loaded, q):
    assert_rejected(loaded, lambda: loaded[1].search(vector=q, field="emb"),
                    vv.NonFiniteVectorError, "query vector")


def test_a_query_list_past_float32_is_refused_and_its_largest_value_kept(loaded):
    # a list (JSON's form) is read as float64 and bounded before its float32 cast:
    # what rounds to float32's inf is refused, float32's largest value is kept, and
    # numpy warns of no overflow on the way
    docs = loaded[1]
    top = float(np.finfo(np.float32).max)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for big in (1e39, -1e39, 2.0 ** 128 - 2.0 ** 103, 10 ** 40):
            assert_rejected(loaded, lambda: docs.search(vector=[big, 0, 0, 0], field="emb"),
                            vv.NonFiniteVectorError, "query vector")
        for fine in (top, -top, np.nextafter(2.0 ** 128 - 2.0 ** 103, 0)):
            # answered as the float32 array holding float32's largest value is
            as_array = np.array([np.sign(fine) * top, 0, 0, 0], np.float32)
            assert docs.search(vector=[fine, 0, 0, 0], field="emb", exact=True) == \
                docs.search(vector=as_array, field="emb", exact=True)
        assert_rejected(loaded, lambda: docs.search(vector=[1, 2, 3], field="emb"),
                        vv.DimensionError, "shape")


def test_non_numeric_query_vector_raises_field_type_error(loaded):
    assert_rejected(loaded, lambda: loaded[1].search(vector=["a", "b", "c", "d"], field="emb"),
                    vv.FieldTypeError, "numeric")


def test_non_numeric_vector_raises_field_type_error(loaded):
    assert_rejected(loaded, lambda: loaded[1].insert({"id": 10, "emb": ["a", "b", "c", "d"]}),
                    vv.FieldTypeError, "emb")


# ---- fields and types ------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda docs: docs.insert({"id": 10, "nope": 1}),
    lambda docs: docs.insert([{"id": 10}, {"id": 11, "tag": 1, "colour": "red"}]),
    lambda docs: docs.upsert({"id": 1, "nope": 1}),
    lambda docs: docs.update({"nope": 1}, ids=[1]),
    lambda docs: docs.insert_arrays(id=[10], nope=[1]),
    lambda docs: docs.find(select=["nope"]),
    lambda docs: docs.search(vector=[0, 0, 0, 0], field="nope"),
], ids=["insert", "insert-second-row", "upsert", "update", "arrays", "select", "search-field"])
def test_unknown_field_raises_unknown_field_error(loaded, make):
    def call():
        make(loaded[1])
    d, docs, path = loaded
    with pytest.raises(vv.UnknownFieldError) as info:
        call()
    assert "nope" in str(info.value) or "colour" in str(info.value)
    assert_rejected(loaded, call, vv.UnknownFieldError)


@pytest.mark.parametrize("row,field", [
    ({"tag": "3"}, "tag"),              # str into int
    ({"tag": 3.5}, "tag"),              # float into int
    ({"tag": 3.0}, "tag"),              # even a whole float
    ({"tag": True}, "tag"),             # bool is not an int here
    ({"tag": [1]}, "tag"),
    ({"tag": 2 ** 63}, "tag"),          # outside int64
    ({"title": 5}, "title"),            # int into text
    ({"title": b"bytes"}, "title"),
    ({"title": {"a": 1}}, "title"),
    ({"score": "1.5"}, "score"),        # str into float
    ({"flag": 1}, "flag"),              # int into bool
    ({"flag": "true"}, "flag"),
    ({"ts": 12345}, "ts"),              # int into timestamp
    ({"ts": "yesterday"}, "ts"),
    ({"meta": {1: "a"}}, "meta"),       # non-str json key
    ({"meta": {1, 2}}, "meta"),         # a set is not JSON
    ({"meta": [float("nan")]}, "meta"),
    ({"meta": object()}, "meta"),
])
def test_value_of_wrong_type_raises_field_type_error(loaded, row, field):
    assert_rejected(loaded, lambda: loaded[1].insert([{"id": 10, "tag": 1}, {"id": 11, **row}]),
                    vv.FieldTypeError, field)


@pytest.mark.parametrize("row,field", [
    ({"meta": 2 ** 70}, "meta"),                     # an int no encoder can store
    ({"meta": {"a": [-(2 ** 65)]}}, "meta"),
    ({"title": "bad \ud800 surrogate"}, "title"),    # not encodable as UTF-8
    ({"meta": {"k": "\udfff"}}, "meta"),
    ({"meta": {"\ud800": 1}}, "meta"),
])
def test_value_the_file_cannot_encode_raises_field_type_error(loaded, row, field):
    assert_rejected(loaded, lambda: loaded[1].insert({"id": 10, **row}), vv.FieldTypeError, field)


def test_values_at_the_edges_of_what_the_file_stores_are_accepted(loaded):
    d, docs, path = loaded
    edge = {"big": 2 ** 64 - 1, "small": -(2 ** 63), "text": "naïve 🚀 ß \u0000 end"}
    docs.insert({"id": 10, "title": "Grüße 🚀 \u2028", "meta": edge})
    d.close()
    d2 = vv.connect(path)
    got = d2["docs"].get(10)
    assert got["meta"] == edge and got["title"] == "Grüße 🚀 \u2028"
    assert d2["docs"].count("title LIKE 'Grüße%'") == 1
    d2.close()


def test_an_id_of_the_other_kind_is_told_the_schema_that_takes_it(loaded, db_path):
    d, docs, _ = loaded
    assert_rejected(loaded, lambda: docs.insert({"id": "doc-1", "tag": 1}),
                    vv.FieldTypeError, "integers", "'doc-1'", '{"id": "text"')
    assert_rejected(loaded, lambda: docs.insert_arrays(id=np.array(["a", "b"]), tag=[1, 2]),
                    vv.FieldTypeError, "integers", '{"id": "text"')
    named = d.create_collection("named", {"id": "text", "tag": "int"})
    assert_rejected((d, named, db_path), lambda: named.insert({"id": 7, "tag": 1}),
                    vv.FieldTypeError, "text, got 7", "str(n)")


def test_unencodable_text_id_raises_field_type_error(db_path):
    d = vv.connect(db_path)
    docs = d.create_collection("docs", {"id": "text", "tag": "int"})
    assert_rejected((d, docs, db_path), lambda: docs.insert({"id": "\ud800", "tag": 1}),
                    vv.FieldTypeError, "id")
    d.close()


@pytest.mark.parametrize("make", [
    lambda docs: docs.update({"tag": "x"}, ids=[1]),
    lambda docs: docs.update({"id": 5}, ids=[1]),
    lambda docs: docs.update({}, ids=[1]),
    lambda docs: docs.insert_arrays(id=[10, 11], tag=np.array([1.5, 2.0])),
    lambda docs: docs.insert_arrays(id=[10, 11], tag=np.array([1, 2, 3])),
    lambda docs: docs.insert_arrays(id=[10, 11], ts=np.array([1, 2])),
    lambda docs: docs.insert_arrays(id=np.array([1.0, 2.0]), tag=np.array([1, 2])),
    lambda docs: docs.insert(["not a dict"]),
    lambda docs: docs.insert({"id": "ten"}),
    lambda docs: docs.delete(ids=["one"]),
    lambda docs: docs.delete(),
    lambda docs: docs.search(vector=[0, 0, 0, 0], field="emb", limit=-1),
], ids=["update-type", "update-id", "update-empty", "arrays-float-int", "arrays-length",
        "arrays-ts-int", "arrays-float-ids", "non-dict-row", "str-id", "delete-str-id",
        "delete-nothing-named", "negative-limit"])
def test_malformed_call_raises_field_type_error(loaded, make):
    assert_rejected(loaded, lambda: make(loaded[1]), vv.FieldTypeError)


# ---- ids ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make,dup", [
    (lambda docs: docs.insert({"id": 3, "tag": 1}), "3"),
    (lambda docs: docs.insert([{"id": 10}, {"id": 4}]), "4"),
    (lambda docs: docs.insert([{"id": 10}, {"id": 11}, {"id": 10}]), "10"),
    (lambda docs: docs.upsert([{"id": 12}, {"id": 12}]), "12"),
    (lambda docs: docs.insert_arrays(id=[20, 2], tag=[1, 1]), "2"),
    (lambda docs: docs.insert_arrays(id=[20, 21, 20], tag=[1, 1, 1]), "20"),
], ids=["existing", "existing-in-batch", "twice-in-batch", "upsert-twice", "arrays-existing",
        "arrays-twice"])
def test_duplicate_id_raises_duplicate_id_error(loaded, make, dup):
    assert_rejected(loaded, lambda: make(loaded[1]), vv.DuplicateIdError, dup)


def test_id_of_a_deleted_document_may_be_inserted_again(loaded):
    d, docs, _ = loaded
    docs.delete(ids=[3])
    docs.insert({"id": 3, "tag": 9})
    assert docs.get(3)["tag"] == 9


# ---- filters -----------------------------------------------------------------------------

@pytest.mark.parametrize("where", [
    "tag = = 1", "tag +", "", "   ", "tag = 1; DROP TABLE docs", "tag = 1 ORDER BY tag",
    "tag + 1", "tag BETWEEN 1 AND 2", "(SELECT 1)", "lower(title) = 'a'", "tag",
    "tag = 'x'", "title > 3", "tag LIKE 'a%'", "tag->>'a' = 'x'", "flag = 1",
    "ts > 'not a time'", "meta @> '{}'", "emb = 1", "title LIKE 3",
])
def test_malformed_filter_raises_filter_error(loaded, where):
    d, docs, _ = loaded
    calls = [lambda: docs.find(where), lambda: docs.count(where),
             lambda: docs.search(vector=[0, 0, 0, 0], field="emb", where=where),
             lambda: docs.update({"tag": 1}, where=where), lambda: docs.delete(where=where)]
    for call in calls:
        assert_rejected(loaded, call, vv.FilterError)


@pytest.mark.parametrize("where", ["colour = 'red'", "tag = 1 AND colour IS NULL",
                                   "NOT (colour LIKE 'r%')", "colour->>'a' = 'b'"])
def test_unknown_field_in_filter_raises_unknown_field_error(loaded, where):
    d, docs, _ = loaded
    for call in [lambda: docs.find(where), lambda: docs.count(where),
                 lambda: docs.search(vector=[0, 0, 0, 0], field="emb", where=where),
                 lambda: docs.update({"tag": 1}, where=where), lambda: docs.delete(where=where)]:
        assert_rejected(loaded, call, vv.UnknownFieldError, "colour")


# ---- SQL parameters ------------------------------------------------------------------------

@pytest.mark.parametrize("sql", ["SELECT $1", "UPDATE docs SET tag = $1 WHERE id = 1",
                                 "SELECT id FROM docs LIMIT $1"])
@pytest.mark.parametrize("value", [2 ** 64, 2 ** 63, -(2 ** 63) - 1])
def test_sql_int_parameter_outside_bigint_raises_sql_error(loaded, sql, value):
    # it was an OverflowError from numpy (POST /sql answered 500)
    d = loaded[0]

    def call():
        try:
            d.sql(sql, [value])
        except vv.SqlError as e:
            assert e.sqlstate == "22003", e.sqlstate
            raise
    assert_rejected(loaded, call, vv.SqlError, "out of range for type bigint")
    assert d.sql("SELECT $1", [2 ** 63 - 1]).rows == [(2 ** 63 - 1,)]


def test_like_pattern_of_many_percents_answers_at_once(loaded):
    # LIKE became a backtracking regex: '%' * 10000 + 'a' (or '%a' * 20 + '%b' on a
    # long string) ran for ever in a server thread, and held its shutdown. (No clock:
    # a backtracking matcher does not come back from these at all.)
    d, docs, _ = loaded
    docs.insert({"id": 50, "title": "a" * 200})
    assert docs.count("title LIKE $1", ["%" * 10000 + "a"]) == 1
    assert docs.count("title LIKE $1", ["%a" * 20 + "%b"]) == 0
    assert d.sql("SELECT count(*) FROM docs WHERE title LIKE $1", ["%a" * 30 + "%b"]).rows \
        == [(0,)]
    assert docs.count("title LIKE $1", ["%a_a%"]) == 1 and docs.count("title LIKE 't%'") == 5


def _like_reference(pattern: str, s: str) -> bool:
    """LIKE by dynamic programming over (pattern position, string position)."""
    toks, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            toks.append(("lit", pattern[i + 1]))
            i += 2
        else:
            toks.append(("any", None) if pattern[i] == "%" else ("one", None)
                        if pattern[i] == "_" else ("lit", pattern[i]))
            i += 1
    ok = {0}
    for kind, ch in toks:
        if kind == "any":
            ok = set(range(min(ok), len(s) + 1)) if ok else set()
        else:
            ok = {j + 1 for j in ok if j < len(s) and (kind == "one" or s[j] == ch)}
    return len(s) in ok


@settings(max_examples=300, deadline=None, derandomize=True)
@given(pattern=st.text("ab%_\\", max_size=8), s=st.text("ab%_", max_size=8))
def test_like_regex_matches_as_like_does(pattern, s):
    from varvedb.query.filter import like_regex
    assert (like_regex(pattern).fullmatch(s) is not None) == _like_reference(pattern, s)


def test_text_query_nested_too_deeply_raises_query_syntax_error(db):
    # it was a RecursionError (POST /search answered 500)
    col = db.create_collection("notes", {"body": vv.Text(fts=True)})
    col.insert([{"id": 1, "body": "hello world"}])
    for query in ["(" * 5000 + "hello" + ")" * 5000, "-(" * 3000 + "hello" + ")" * 3000]:
        with pytest.raises(vv.QuerySyntaxError, match="nested more than 64 levels") as info:
            col.search(text="world " + query)
        text = "world " + query
        nth = [i for i, c in enumerate(text) if c == "("][64]
        assert info.value.position == nth + 1       # the 65th '(', 1-based
    deep = "(" * 64 + "hello" + ")" * 64
    assert col.search(text=deep).ids == [1]


@pytest.mark.parametrize("anchor", [(-1, ""), (10 ** 9, ""), (1, ""), (1, "ab"), (1, "g" * 64),
                                    (-1, "0" * 64), (1, "0" * 65)])
def test_verify_anchor_without_a_chain_hash_raises_option_error(loaded, anchor):
    # (n, "") matched the "" of a version the file does not hold: verify said ok
    assert_rejected(loaded, lambda: loaded[0].verify(anchor=anchor), vv.OptionError, "anchor")


def test_verify_anchor_takes_its_chain_in_either_case(loaded):
    d, _, path = loaded
    last = d.history()[-1]
    assert d.verify(anchor=(last.version, last.chain.upper())).ok
    assert not d.verify(anchor=(last.version + 5, last.chain)).ok
    with pytest.raises(vv.OptionError, match="anchor"):
        vv.verify_file(path, anchor=(10 ** 9, ""))


@pytest.mark.parametrize("sql", ["SELECT " + "+".join(["1"] * 5000),
                                 "SELECT " + " || ".join(["'a'"] * 5000),
                                 "SELECT id FROM docs WHERE " + " * ".join(["tag"] * 3000)
                                 + " = 1"])
def test_sql_nested_too_deeply_raises_sql_error_54001(loaded, sql):
    # the server compiles a statement before it runs it (to wrap a write in its own
    # transaction): compile_text's RecursionError was a 500 there
    from varvedb.sql import compile_text
    assert_rejected(loaded, lambda: loaded[0].sql(sql), vv.SqlError, "nested too deeply")
    with pytest.raises(vv.SqlError, match="nested too deeply") as info:
        compile_text(sql)
    assert info.value.sqlstate == "54001"


# ---- failed calls inside a transaction -----------------------------------------------------

def test_failed_call_inside_transaction_leaves_the_rest_of_it_intact(loaded):
    d, docs, path = loaded
    v0 = d.version
    with d.transaction():
        docs.insert({"id": 10, "tag": 1})
        for bad in [lambda: docs.insert({"id": 11, "emb": [1]}),
                    lambda: docs.insert({"id": 10}),
                    lambda: docs.update({"tag": 1}, where="colour = 1"),
                    lambda: docs.insert({"id": 12, "meta": 2 ** 70})]:
            with pytest.raises(vv.VarveError):
                bad()
        docs.insert({"id": 13, "tag": 2})
    assert d.version == v0 + 1
    assert docs.get(10)["tag"] == 1 and docs.get(13)["tag"] == 2
    assert docs.get(11) is None and docs.get(12) is None
    d.close()
    d2 = vv.connect(path)
    assert sorted(h.id for h in d2["docs"].find()) == [0, 1, 2, 3, 4, 10, 13]
    assert d2.verify().ok
    d2.close()


# ---- files -------------------------------------------------------------------------------

def _raw(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("content", [
    b"hello, this is not a database\n" * 10,
    b"SQLite format 3\x00" + bytes(4080),
    bytes(range(256)) * 64,
    b"VARVEDB",                      # a prefix of the magic
], ids=["text", "sqlite", "binary", "short-magic"])
def test_file_that_is_not_varvedb_raises_not_a_varve_file(tmp_path, content, readonly):
    path = tmp_path / "other.bin"
    path.write_bytes(content)
    with pytest.raises(vv.NotAVarveFileError) as info:
        vv.connect(str(path), readonly=readonly)
    assert "not a varvedb file" in str(info.value) and str(path) in str(info.value)
    assert _raw(path) == content
    with pytest.raises(vv.NotAVarveFileError):
        vv.verify_file(str(path))


def _file_with_data(path):
    d = vv.connect(path)
    d.create_collection("docs", {"tag": "int"}).insert([{"id": 1, "tag": 1}])
    d.close()


def test_damaged_header_raises_not_a_varve_file(db_path):
    _file_with_data(db_path)
    raw = bytearray(_raw(db_path))
    raw[20] ^= 0x01             # inside the file id: the header crc no longer matches
    with open(db_path, "wb") as f:
        f.write(raw)
    with pytest.raises(vv.NotAVarveFileError, match="header"):
        vv.connect(db_path)
    assert _raw(db_path) == raw


def test_file_shorter_than_header_block_raises_corrupt_file(db_path):
    _file_with_data(db_path)
    raw = _raw(db_path)[:2000]
    with open(db_path, "wb") as f:
        f.write(raw)
    with pytest.raises(vv.CorruptFileError, match="shorter"):
        vv.connect(db_path)
    assert _raw(db_path) == raw


def _set_format_version(path, version: int) -> None:
    with open(path, "r+b") as f:
        head = f.read(F.HEADER_SIZE)
        magic, _fmt, flags, file_id, created = F._HEADER.unpack(head[:F._HEADER.size])
        body = F._HEADER.pack(magic, version, flags, file_id, created)
        f.seek(0)
        f.write(body + struct.pack("<I", zlib.crc32(body)))


@pytest.mark.parametrize("readonly", [False, True])
def test_newer_format_version_raises_format_version_error(db_path, readonly):
    _file_with_data(db_path)
    _set_format_version(db_path, F.FORMAT_VERSION + 1)
    raw = _raw(db_path)
    with pytest.raises(vv.FormatVersionError) as info:
        vv.connect(db_path, readonly=readonly)
    msg = str(info.value)
    assert f"format version {F.FORMAT_VERSION + 1}" in msg and "upgrade" in msg
    assert _raw(db_path) == raw
    with pytest.raises(vv.FormatVersionError):
        vv.verify_file(db_path)
    # the same file with its own version number opens (the patch itself is sound)
    _set_format_version(db_path, F.FORMAT_VERSION)
    d = vv.connect(db_path)
    assert d["docs"].get(1) == {"id": 1, "tag": 1}
    d.close()


def test_second_writer_in_same_process_raises_writer_locked(loaded):
    d, docs, path = loaded
    before = file_digest(path)
    with pytest.raises(vv.WriterLockedError) as info:
        vv.connect(path)
    assert path in str(info.value) and "readonly" in str(info.value)
    assert file_digest(path) == before
    docs.insert({"id": 50, "tag": 1})      # the first writer is unaffected
    assert docs.get(50)["tag"] == 1


def test_second_writer_in_another_process_raises_writer_locked(loaded):
    d, docs, path = loaded
    before = file_digest(path)
    script = ("import sys, varvedb as vv\n"
              "try:\n"
              "    vv.connect(sys.argv[1])\n"
              "except vv.VarveError as e:\n"
              "    print(type(e).__name__); print(e)\n")
    out = subprocess.run([PYTHON, "-c", script, path], capture_output=True, text=True,
                         env=child_env(), timeout=1800)
    lines = out.stdout.splitlines()
    assert lines and lines[0] == "WriterLockedError", out.stdout + out.stderr
    assert path in lines[1]
    assert file_digest(path) == before


def test_empty_existing_file_becomes_a_new_database(tmp_path):
    path = tmp_path / "empty.varve"
    path.write_bytes(b"")
    d = vv.connect(str(path))
    assert d.version == 0 and d.collections() == []
    d.close()
    assert os.path.getsize(path) >= F.LOG_START
    assert vv.verify_file(str(path)).ok


def test_readonly_open_of_a_missing_file_raises_file_missing(tmp_path):
    path = str(tmp_path / "absent.varve")
    with pytest.raises(vv.FileMissingError) as info:
        vv.connect(path, readonly=True)
    assert path in str(info.value)
    assert isinstance(info.value, FileNotFoundError)   # still caught as the builtin
    assert not os.path.exists(path)                    # and nothing was created


@pytest.mark.parametrize("option", [{"durability": "fast"}, {"durability": None},
                                    {"batch_ms": -1}, {"batch_ms": "50"}])
def test_bad_connect_option_raises_option_error(loaded, tmp_path, option):
    d, docs, path = loaded
    before = file_digest(path)
    with pytest.raises(vv.OptionError) as info:
        vv.connect(path, readonly=True, **option)
    assert next(iter(option)) in str(info.value)
    fresh = str(tmp_path / "fresh.varve")
    with pytest.raises(vv.OptionError):
        vv.connect(fresh, **option)
    assert not os.path.exists(fresh) and file_digest(path) == before
