"""bytea over the PostgreSQL protocol (issue 30): psycopg against a real `--pg` server
and against the real PostgreSQL the suite starts, the same statements on both —
parameters in the text and the binary format, results in both, COPY in and out in
the text, CSV and binary formats, and the catalog's type."""
from __future__ import annotations

import pytest
from psycopg.types import TypeInfo

from test_pgwire import connect, server  # noqa: F401 (the --pg server fixture)

# every byte, the escapes COPY's text and CSV formats write, an empty value and a NULL
VALUES = [bytes(range(256)), b"a\\b\tc\nd\re,\"f'", b"", None, b"\x00", "é".encode()]
TABLE = "CREATE TABLE blobs (id bigint PRIMARY KEY, b bytea)"


@pytest.fixture
def both(server, pg):
    """(a connection to varvedb, one to PostgreSQL), each with an empty `blobs` table."""
    vv = connect(server)
    real = pg.connect("bytea_wire")
    for con in (vv, real):
        con.execute("DROP TABLE IF EXISTS blobs")
        con.execute(TABLE)
    yield vv, real
    vv.close()
    real.close()


def _rows(con, binary: bool) -> list:
    return con.execute("SELECT id, b FROM blobs ORDER BY id", binary=binary).fetchall()


@pytest.mark.parametrize("mark", ["%s", "%b", "%t"])
def test_parameters_and_results_in_text_and_binary_as_postgres(both, mark):
    """psycopg's bytes, bytearray and memoryview as a bytea parameter (%s: its choice,
    binary; %b binary; %t text, the hex form) come back the same in both result
    formats, as PostgreSQL gives them back."""
    for con in both:
        with con.cursor() as cur:
            for i, v in enumerate(VALUES):
                arg = memoryview(v) if i == 4 else bytearray(v) if i == 5 else v
                cur.execute(f"INSERT INTO blobs VALUES (%s, {mark})", (i, arg))
    want = list(enumerate(VALUES))
    for con in both:
        assert _rows(con, False) == want and _rows(con, True) == want
        cur = con.execute(f"SELECT id FROM blobs WHERE b = {mark} ORDER BY id",
                          (b"\x00",), binary=True)
        assert cur.fetchall() == [(4,)]
        cur = con.execute("SELECT b FROM blobs WHERE id = 2")
        assert cur.description[0].type_code == 17


def test_copy_in_and_out_in_text_csv_and_binary_as_postgres(both):
    """COPY FROM STDIN in each format (psycopg's write_row: escapes for text, a bytea
    field for binary; CSV written here, quoted hex) loads the same rows, and COPY TO
    STDOUT writes the same bytes as PostgreSQL does, in each format."""
    for con in both:
        con.execute("DELETE FROM blobs")
        for fmt, base in (("text", 0), ("csv", 10), ("binary", 20)):
            with con.cursor().copy(f"COPY blobs (id, b) FROM STDIN WITH (FORMAT {fmt})") as cp:
                if fmt == "binary":
                    cp.set_types(["int8", "bytea"])
                for i, v in enumerate(VALUES):
                    if fmt == "csv":    # (write_row writes the text format): hex, quoted
                        cp.write(f'{base + i},"\\x{v.hex()}"\n' if v is not None
                                 else f"{base + i},\n")
                    else:
                        cp.write_row((base + i, v))
    vv, real = both
    assert _rows(vv, True) == _rows(real, True)
    assert len(_rows(vv, False)) == 3 * len(VALUES)
    out = {}
    for fmt in ("text", "csv", "binary"):
        out[fmt] = []
        for con in both:
            with con.cursor().copy(f"COPY (SELECT id, b FROM blobs ORDER BY id) TO STDOUT "
                                   f"WITH (FORMAT {fmt})") as cp:
                out[fmt].append(b"".join(bytes(chunk) for chunk in cp))
        assert out[fmt][0] == out[fmt][1], fmt
    # the hex form, its backslash escaped in the text format and not in CSV
    assert b"\n4\t\\\\x00\n" in out["text"][0] and b"\n4,\\x00\n" in out["csv"][0]


def test_the_catalog_names_bytea_as_postgres(both):
    """pg_type's bytea (oid 17, its array 1001), psycopg's TypeInfo.fetch, and the
    column's type in pg_attribute and format_type."""
    got = []
    for con in both:
        info = TypeInfo.fetch(con, "bytea")
        row = con.execute("SELECT t.oid::int, t.typarray::int, format_type(a.atttypid, "
                          "a.atttypmod) FROM pg_attribute a JOIN pg_type t ON t.oid = "
                          "a.atttypid WHERE a.attrelid = 'blobs'::regclass AND "
                          "a.attname = 'b'").fetchone()
        got.append((info.oid, info.array_oid, row))
    assert got[0] == got[1] == (17, 1001, (17, 1001, "bytea"))


def test_asyncpg_binary_codec_round_trips_bytea(both, server):
    """asyncpg (binary results and parameters, its types found by its own catalog
    queries) writes and reads bytea, a bytes parameter compared with the column too."""
    import asyncio

    import asyncpg

    async def run():
        conn = await asyncpg.connect(host="127.0.0.1", port=server.pg, user="me",
                                     database="db", ssl=False)
        try:
            await conn.executemany("INSERT INTO blobs VALUES ($1, $2)", list(enumerate(VALUES)))
            return (await conn.fetch("SELECT id, b FROM blobs ORDER BY id"),
                    await conn.fetchval("SELECT id FROM blobs WHERE b = $1", b"\x00"))
        finally:
            await conn.close()
    rows, found = asyncio.run(run())
    assert [(r["id"], r["b"]) for r in rows] == list(enumerate(VALUES)) and found == 4


def _answers(con, statements, binary: bool) -> list:
    """Each statement's (result type OID, rows) or its SQLSTATE."""
    out = []
    for s in statements:
        try:
            cur = con.execute(s, binary=binary)
            out.append((cur.description[0].type_code, cur.fetchall()))
        except Exception as e:      # (psycopg's error, with the server's SQLSTATE)
            out.append(getattr(e, "sqlstate", None) or repr(e))
            con.rollback()
    return out


def test_arrays_of_bytea_and_hex_input_whitespace_as_postgres(both):
    """array_agg and ARRAY[] over bytea are bytea[] (OID 1001) of bytes in text and
    binary results, a subscript of one a bytea, array_to_string and ::text their
    elements' hex form; hex input takes whitespace between
    digit pairs only, the same SQLSTATE as PostgreSQL's where it refuses."""
    for con in both:
        con.execute(r"INSERT INTO blobs VALUES (1, '\x00ff'), (2, '\x5c'), (3, NULL)")
        con.commit()
    statements = ["SELECT array_agg(b ORDER BY id) FROM blobs",
                  "SELECT ARRAY[b, b] FROM blobs WHERE id = 2",
                  "SELECT (array_agg(b ORDER BY id))[1] FROM blobs",
                  "SELECT array_to_string(array_agg(b ORDER BY id), ',') FROM blobs",
                  "SELECT array_agg(b ORDER BY id)::text FROM blobs",
                  r"SELECT '\x0 1'::bytea", r"SELECT '\x 01 02 '::bytea",
                  r"SELECT '\x012'::bytea", r"SELECT '\x01 2 3'::bytea"]
    for binary in (False, True):
        got, want = (_answers(con, statements, binary) for con in both)
        assert got == want, binary
    assert want[0] == (1001, [([b"\x00\xff", b"\\", None],)])
    assert want[5:8] == ["22023", (17, [(b"\x01\x02",)]), "22023"]
    # an untyped literal beside one (PostgreSQL reads it as bytea[]) is refused, not
    # compared as text
    assert _answers(both[0], [r"""SELECT array_agg(b) = '{"\\x5c"}' FROM blobs"""],
                    False) == ["0A000"]
