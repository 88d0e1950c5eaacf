"""A bytes field (vv.Bytes(); SQL's bytea, issue 30) through the Python API: typed
errors for what is not bytes (nothing written), values kept in the file across
reopen (checkpoint and log replay), vacuum, backup and AS OF, filters, defaults,
and no scalar index."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.bytea import parse_bytea

from conftest import file_digest

BLOBS = [bytes(range(256)), b"", b"\x00\x00", None, "é".encode()]


def _rows(db) -> list:
    return db.sql("SELECT id, b FROM blobs ORDER BY id").rows


def test_values_survive_reopen_vacuum_and_backup_and_as_of(tmp_path):
    path, copy = str(tmp_path / "b.varve"), str(tmp_path / "backup.varve")
    with vv.connect(path) as db:
        blobs = db.create_collection("blobs", {"b": vv.Bytes(), "n": "int"})
        blobs.insert([{"id": i, "b": b, "n": i} for i, b in enumerate(BLOBS[:3])])
        first = db.version
        db.checkpoint()                 # rows 0..2 from the checkpoint, the rest from the log
        blobs.insert_arrays(id=[3, 4], b=np.array(BLOBS[3:], dtype=object), n=[3, 4])
        blobs.update({"b": bytearray(b"new")}, where="id = 1")
        blobs.insert([{"id": 5, "b": memoryview(b"mv")}])
        want = [(i, b) for i, b in enumerate(BLOBS)]
        want[1] = (1, b"new")
        want.append((5, b"mv"))
        assert _rows(db) == want
        assert db.sql(f"SELECT b FROM blobs WHERE id = 1 AS OF VERSION {first}").rows == [(b"",)]
        assert db.collection("blobs").get(0)["b"] == bytes(range(256))
    with vv.connect(path) as db:
        assert _rows(db) == want
        db.sql("DELETE FROM blobs WHERE id = 2")
        db.vacuum()
        want.remove((2, b"\x00\x00"))
        assert _rows(db) == want
        db.backup(copy)
    for p in (path, copy):
        with vv.connect(p) as db:
            assert _rows(db) == want
            assert all(type(b) is bytes for _, b in want if b is not None)


@pytest.mark.parametrize("bad", ["text", 1, 1.5, True, [1, 2], {"a": 1},
                                 np.array([1, 2], np.uint8)])
def test_a_value_that_is_not_bytes_is_a_field_type_error_and_writes_nothing(db, db_path, bad):
    blobs = db.create_collection("blobs", {"b": vv.Bytes()})
    blobs.insert([{"id": 1, "b": b"ok"}])
    before = file_digest(db_path)
    with pytest.raises(vv.FieldTypeError, match="is bytes"):
        blobs.insert([{"id": 2, "b": b"fine"}, {"id": 3, "b": bad}])
    with pytest.raises(vv.FieldTypeError):
        blobs.insert_arrays(id=[2], b=[bad])
    assert file_digest(db_path) == before and blobs.count() == 1


def test_a_fixed_width_array_and_an_oversized_value_are_refused(db):
    """(An oversized value is ValueTooLargeError, 54000, through the API and SQL.)"""
    blobs = db.create_collection("blobs", {"b": vv.Bytes()})
    with pytest.raises(vv.FieldTypeError, match="object array"):   # S strips trailing zeros
        blobs.insert_arrays(id=[1], b=np.array([b"a\x00"]))
    with pytest.raises(vv.ValueTooLargeError, match="over the limit"):
        blobs.insert([{"id": 1, "b": bytes(16 << 20) + b"x"}])
    with pytest.raises(vv.FieldTypeError) as e:     # a limit of varvedb's: 54000, not 22P02
        db.sql("INSERT INTO blobs (id, b) VALUES (1, $1)", [bytes(16 << 20) + b"x"])
    assert e.value.sqlstate == "54000"
    assert blobs.count() == 0


def test_filters_defaults_not_null_and_no_scalar_index(db, tmp_path):
    blobs = db.create_collection("blobs", {"b": vv.Bytes(), "d": vv.Bytes(default=b"\x01"),
                                           "m": vv.Bytes(not_null=True, default=b"")})
    blobs.insert([{"id": 1, "b": b"abc"}, {"id": 2, "b": b"ab"}, {"id": 3}])
    assert [h.id for h in blobs.find("b = $1", [b"abc"])] == [1]
    assert [h.id for h in blobs.find("b < $1", [b"abc"])] == [2]
    assert [h.id for h in blobs.find("b IS NULL")] == [3]
    # a str compared with a bytes field is bytea's text, as SQL reads an untyped value
    assert [h.id for h in blobs.find("b = $1", ["\\x616263"])] == [1]
    assert [h.id for h in blobs.find("b IN ($1, 'ab')", ["abc"])] == [1, 2]
    for bad in ["\\x0 1", "\\xg0", 1]:
        with pytest.raises(vv.FilterError, match="is bytes"):
            blobs.find("b = $1", [bad])
    assert blobs.get(3) == {"id": 3, "b": None, "d": b"\x01", "m": b""}
    with pytest.raises(vv.NotNullViolationError):
        blobs.insert([{"id": 4, "m": None}])
    with pytest.raises(vv.SchemaError, match="bytes field cannot carry"):
        blobs.create_index("b", "hash")
    with pytest.raises(vv.FieldTypeError):      # (as vv.Int(default="text"))
        vv.Bytes(default="text")
    with pytest.raises(vv.SqlError) as e:
        db.sql("CREATE INDEX ON blobs (b)")
    assert e.value.sqlstate == "0A000"
    assert db.create_collection("named", {"b": "bytea"}).schema.fields["b"].kind == "bytes"


@pytest.mark.parametrize("text,want", [
    ("\\x", b""), ("\\x00Ff", b"\x00\xff"), ("\\x 01\n02 ", b"\x01\x02"), ("abc", b"abc"),
    ("a\\\\b", b"a\\b"), ("\\001\\377x", b"\x01\xffx"), ("é", "é".encode())])
def test_bytea_input_reads_the_hex_and_the_escape_forms(text, want):
    assert parse_bytea(text) == want


@pytest.mark.parametrize("text,state", [("\\x0", "22023"), ("\\xg0", "22023"),
                                        ("\\x0 1", "22023"), ("\\x 0 1", "22023"),
                                        ("\\X00", "22P02"), ("a\\", "22P02"),
                                        ("\\400", "22P02"), ("\\01", "22P02")])
def test_bytea_input_errors_are_postgresqls(text, state):
    with pytest.raises(vv.SqlError) as e:
        parse_bytea(text)
    assert e.value.sqlstate == state


def test_over_http_bytes_travel_as_base64_and_an_sql_parameter_as_bytea_text(tmp_path):
    """vv.Client: insert (JSON rows and insert_arrays), upsert, update, get, find and
    SQL (a bytes parameter, a bytea result) give and take bytes as the embedded API
    does; a raw request's bytes field is base64, and text that is not is a typed
    error that writes nothing."""
    from server_proc import ServerProcess
    with ServerProcess(str(tmp_path / "h.varve")) as srv:
        client = vv.Client(srv.url)
        blobs = client.create_collection("blobs", {"b": vv.Bytes(), "n": "int"})
        blobs.insert([{"id": 1, "b": b"\x00\xff"}, {"id": 2, "b": None}])
        blobs.insert_arrays(id=[3], b=[b""], n=[3])
        blobs.upsert([{"id": 4, "b": bytearray(b"up")}])
        blobs.update({"b": b"new"}, where="id = 2")
        assert blobs.get(1)["b"] == b"\x00\xff"
        assert sorted((h.id, h.fields["b"]) for h in blobs.find()) == \
            [(1, b"\x00\xff"), (2, b"new"), (3, b""), (4, b"up")]
        client.sql("INSERT INTO blobs (id, b) VALUES ($1, $2)", [5, b"\\x\x01"])
        res = client.sql("SELECT id, b FROM blobs WHERE b = $1 OR id = 1 ORDER BY id",
                         [b"\\x\x01"])
        assert res.rows == [(1, b"\x00\xff"), (5, b"\\x\x01")]
        with pytest.raises(vv.FieldTypeError, match="base64"):
            blobs.insert([{"id": 6, "b": "not base64!"}])
        assert client.sql("SELECT count(*) FROM blobs").rows == [(5,)]


def test_over_http_a_bytes_filter_parameter_answers_as_embedded(tmp_path):
    """find, count, get, update and delete with a bytes $n parameter over vv.Client
    (sent as bytea's text, as SQL's are) match the same documents as the embedded
    API, one that looks like base64 too."""
    from server_proc import ServerProcess

    def run(db):
        blobs = db.create_collection("blobs", {"b": vv.Bytes(), "n": "int"})
        blobs.insert([{"id": 1, "b": b"\x00\xff", "n": 1}, {"id": 2, "b": b"aGk=", "n": 2},
                      {"id": 3, "b": b"", "n": 3}])
        out = [[h.id for h in blobs.find("b = $1", [b"\x00\xff"])],
               [h.id for h in blobs.find("b = $1", (bytearray(b"aGk="),))],
               blobs.count("b < $1", [memoryview(b"a")]),
               [d["id"] for d in blobs.get(where="b = $1", params=[b""])],
               blobs.update({"n": 9}, where="b = $1", params=[b"aGk="]),
               blobs.delete(where="b = $1", params=[b""])]
        return out + [sorted((h.id, h.fields["n"]) for h in blobs.find())]
    with vv.connect(str(tmp_path / "e.varve")) as db:
        want = run(db)
    assert want == [[1], [2], 2, [3], 1, 1, [(1, 1), (2, 9)]]
    with ServerProcess(str(tmp_path / "h.varve")) as srv:
        client = vv.Client(srv.url)
        try:
            assert run(client) == want
        finally:
            client.close()


def test_a_bytes_field_stamps_the_files_format_first(tmp_path):
    """An older varvedb cannot read a bytes field: the header is stamped with this
    format (5) before the frame that makes one, by a new collection or an added
    field, so that it refuses the file as newer instead of calling it corrupt."""
    from varvedb.storage import format as F

    def stamp(path, version=None):
        with open(path, "r+b") as f:
            header = F.unpack_header(f.read(F.HEADER_SIZE))
            if version is not None:    # as an older varvedb wrote it
                f.seek(0)
                f.write(F.pack_header(header.file_id, header.created_us, version=version))
        return header.format_version

    for make in ({"b": vv.Bytes()}, None):
        path = tmp_path / f"{make is None}.vv"
        vv.connect(path).close()
        stamp(path, 4)
        db = vv.connect(path)
        c = db.create_collection("c", {"n": "int"})
        assert stamp(path) == 4
        if make is None:
            c.add_field("b", vv.Bytes())
        else:
            db.create_collection("d", make)
        db.close()
        assert stamp(path) == F.FORMAT_VERSION >= 5
