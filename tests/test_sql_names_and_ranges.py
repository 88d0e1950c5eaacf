"""Names and values a constraint keeps, and the text --pg sends (red-team 13's
p1, p4, p5, p8, p10, p11): a CHECK name holding NUL is refused, and no NUL ever
ends a message's field early; a check value is one the log holds (an int64);
an unnamed CHECK of an older file keeps its name through RENAME COLUMN; the key
gives its name `{table}_pkey` up to a CHECK that has it; a list parameter cast
to bigint[] is range-checked as its elements' literals are. The PostgreSQL side
of the key's name and ADD COLUMN ... CHECK: tests/sql_cases/key_and_check_names.sql."""
from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest

import varvedb as vv
from varvedb.pgwire import messages as M

from server_proc import ServerProcess, free_port


def _fields(body: bytes) -> list[bytes]:
    """An ErrorResponse's fields (code byte + text), as a client splits them."""
    assert body[:1] == b"E"
    return [f for f in body[5:].split(b"\0") if f]


def test_a_message_field_holding_nul_is_one_field():
    """Fields end at NUL: one inside a value's text (or a name) goes out as U+FFFD."""
    got = _fields(M.error({"S": "ERROR", "C": "22P02", "M": 'bad "a\0Cfake\0Mspoofed"'}))
    assert got == [b"SERROR", b"C22P02", 'Mbad "a\ufffdCfake\ufffdMspoofed"'.encode()]
    assert M.cstr("x\0y") == "x\ufffdy".encode() + b"\0" and M.cstr("xy") == b"xy\0"


def test_a_check_name_holding_nul_or_a_value_past_int64_is_refused(tmp_path):
    path = str(tmp_path / "n.varve")
    db = vv.connect(path)
    try:
        for check in [((">", 0, "pos\0Cfake\0Mspoofed"),), ((">", 1 << 63),),
                      (("<", -(1 << 63) - 1, "low"),)]:
            with pytest.raises(vv.SchemaError):
                replace(vv.Int(), check=check)
        with pytest.raises(vv.SchemaError):
            replace(vv.Vector(3), check=(("vector_dims =", 1 << 70, "n"),))
        assert replace(vv.Int(), check=((">", (1 << 63) - 1), ("<", -(1 << 63))))
        # a wider int is kept as its digits ("> numeric": SQL's CHECK (x > 1e20 written
        # out), compared as numeric), never as a wider int (the log's encoding holds none)
        for check in [(("> numeric", 1 << 70),), (("> numeric", "12"),),
                      (("> numeric", "0100000000000000000000"),)]:
            with pytest.raises(vv.SchemaError):
                replace(vv.Int(), check=check)
        assert replace(vv.Int(), check=(("> numeric", str(1 << 70)),))
        # SQL: a typed refusal, nothing made
        for text in ["CREATE TABLE a (id int PRIMARY KEY, v vector(3) "
                     "CHECK (vector_dims(v) = 100000000000000000000))",
                     'CREATE TABLE a (id int PRIMARY KEY, x int, CONSTRAINT "p\0q" CHECK (x > 0))']:
            with pytest.raises(vv.VarveError):
                db.sql(text)
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
        db.sql("ALTER TABLE t ADD CONSTRAINT big CHECK (x < 100000000000000000000)")
        assert db.collections() == ["t"] and list(db["t"].schema.fields) == ["x"]
        assert db["t"].schema.fields["x"].check == (("< numeric", "100000000000000000000", "big"),)
    finally:
        db.close()
    db = vv.connect(path)       # nothing half-written; the wide check read back
    try:
        assert db.collections() == ["t"]
        assert db["t"].schema.fields["x"].check == (("< numeric", "100000000000000000000", "big"),)
    finally:
        db.close()


def test_a_value_holding_nul_in_an_error_comes_whole_over_pg(tmp_path):
    """A text id holding NUL, named in 22P02's message: the client reads that
    SQLSTATE and the whole message, and the connection goes on."""
    path = str(tmp_path / "p.varve")
    db = vv.connect(path)
    db.sql("CREATE TABLE t (id text PRIMARY KEY)")
    db["t"].insert([{"id": "a\0Cfake\0Mspoofed"}])
    db.close()
    pg = free_port()
    with ServerProcess(path, args=["--pg", str(pg)]):
        with psycopg.connect(host="127.0.0.1", port=pg, user="me", dbname="db",
                             sslmode="disable", connect_timeout=600, autocommit=True) as con:
            with pytest.raises(psycopg.Error) as got:
                con.execute("SELECT id::int FROM t")
            assert got.value.diag.sqlstate == "22P02"
            assert "\ufffdCfake\ufffdMspoofed" in got.value.diag.message_primary
            assert con.execute("SELECT 1").fetchall() == [(1,)]


def test_an_unnamed_check_keeps_its_name_through_rename_column(tmp_path):
    """A check without a name (an older file's [op, value], the Python API's (op,
    value)) is t_x_check; RENAME COLUMN x TO z keeps it t_x_check (PostgreSQL's
    constraint keeps its name), never merged into a constraint named t_z_check."""
    path = str(tmp_path / "r.varve")
    db = vv.connect(path)
    q = ("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'c' "
         "ORDER BY 1")
    try:
        db.create_collection("t", {"x": replace(vv.Int(), check=((">", 0),)), "w": vv.Int()})
        db.sql("ALTER TABLE t ADD CONSTRAINT t_z_check CHECK (w > 0)")
        db.sql("ALTER TABLE t RENAME COLUMN x TO z")
        assert db.sql(q).rows == [("t_x_check", "CHECK ((z > 0))"),
                                  ("t_z_check", "CHECK ((w > 0))")]
        db.sql("ALTER TABLE t DROP CONSTRAINT t_z_check")
        with pytest.raises(vv.CheckViolationError, match="t_x_check"):
            db.sql("INSERT INTO t (z, w) VALUES (-1, 1)")
    finally:
        db.close()
    db = vv.connect(path)
    try:
        assert db.sql(q).rows == [("t_x_check", "CHECK ((z > 0))")]
        db.sql("ALTER TABLE t DROP CONSTRAINT t_x_check")
        db.sql("INSERT INTO t (z, w) VALUES (-1, 1)")
    finally:
        db.close()


def test_the_key_gives_its_name_to_a_check_everywhere_it_is_named():
    """pg_class's index and psql's \\d name the key t_pkey1 where a CHECK is t_pkey
    (pg_constraint's: tests/sql_cases/key_and_check_names.sql), and keeps that name
    once the CHECK is dropped, as PostgreSQL's does."""
    db = vv.connect(":memory:")
    try:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int, CONSTRAINT t_pkey CHECK (x > 0))")
        assert db.sql("SELECT relname FROM pg_class WHERE relkind = 'i'").rows == [("t_pkey1",)]
        assert db["t"].schema.key_name("t") == "t_pkey1"
        db.sql("ALTER TABLE t DROP CONSTRAINT t_pkey")
        assert db.sql("SELECT conname FROM pg_constraint").rows == [("t_pkey1",)]
    finally:
        db.close()


BIG = 1 << 70


@pytest.mark.parametrize("text,params", [
    ("SELECT %s::bigint[]", [[BIG]]),
    ("SELECT %s::bigint[]", [[1, -BIG]]),
    ("SELECT %s::int8[]", [[float(BIG)]]),
    ("SELECT %s::float8[]", [[10 ** 400]]),
])
def test_a_list_parameter_past_its_element_type_is_22003(pg_conn, text, params):
    """As '{...}'::bigint[] and $1::bigint are, and as PostgreSQL answers; the
    INSERT into a bigint[] column too (was 22P02)."""
    with pytest.raises(psycopg.Error) as want:
        pg_conn.execute(text, params)
    assert want.value.diag.sqlstate == "22003"
    db = vv.connect(":memory:")
    try:
        with pytest.raises(vv.SqlError) as got:
            db.sql(text, params)
        assert got.value.sqlstate == "22003"
        db.sql("CREATE TABLE t (id int PRIMARY KEY, a bigint[], f float8[])")
        column = "f" if "float" in text else "a"
        with pytest.raises(vv.SqlError) as got:
            db.sql(f"INSERT INTO t (id, {column}) VALUES (1, {text.split()[1]})", params)
        assert got.value.sqlstate == "22003"
        assert db.sql("SELECT count(*) FROM t").rows == [(0,)]
        assert db.sql("SELECT %s::bigint[]", [[(1 << 63) - 1, -(1 << 63)]]).rows == \
            [([(1 << 63) - 1, -(1 << 63)],)]
    finally:
        db.close()


def test_a_name_ending_in_a_newline_is_refused():
    """Every name (a collection's, a field's, an index's) is letters, digits and _
    to its end: the pattern's $ took a final newline ("t\\n" was a collection)."""
    db = vv.connect(":memory:")
    try:
        with pytest.raises(vv.SchemaError):
            db.create_collection("t\n", {"x": vv.Int()})
        with pytest.raises(vv.SchemaError):
            db.create_collection("t", {"x\n": vv.Int()})
        c = db.create_collection("t", {"x": vv.Int()})
        with pytest.raises(vv.SchemaError):
            c.add_field("y\n", vv.Int())
        with pytest.raises(vv.SchemaError):
            c.rename_field("x", "y\n")
        assert db.collections() == ["t"] and list(c.schema.fields) == ["x"]
    finally:
        db.close()
