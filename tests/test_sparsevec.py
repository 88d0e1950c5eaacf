"""Sparse vectors (pgvector's sparsevec; varvedb/sparse.py, kernels/sparse.py,
query/sparse_funcs.py): the value and its forms, the kernels against dense
numpy, the stored rows across reopen, as_of and rollback, bad values refused
with the file unchanged, a crafted stored row refused (a crafted file:
test_crafted_files.py), psycopg over `--pg` with pgvector-python's
SparseVector in text and binary, parameters and results, and COPY, asyncpg's
binary codec, pgvector's README and pgvector-python's sparse example as
written, and the text form at the HTTP, Arrow and export edges. (What
PostgreSQL + pgvector answer alike: tests/sql_cases/sparsevec.sql.)"""
from __future__ import annotations

import os

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings, strategies as st
from pgvector import SparseVector as PgSparseVector
from pgvector.psycopg import register_vector

import varvedb as vv
from varvedb import sparse
from varvedb.errors import CorruptFileError, SqlError
from varvedb.pgwire import types as T
from varvedb.query import sparse_funcs

from server_proc import ServerProcess, free_port


def test_the_value_in_each_form_and_its_stored_bytes():
    want = vv.SparseVector({0: 1.5, 2: 2.0}, 5)
    assert str(want) == "{1:1.5,3:2}/5" and want.dim == 5
    for same in ("{3:2,1:1.5}/5", [1.5, 0, 2, 0, 0], np.array([1.5, 0, 2, 0, 0]),
                 PgSparseVector({0: 1.5, 2: 2.0}, 5), want):
        assert vv.SparseVector(same) == want
    assert vv.SparseVector.from_blob(want.to_blob()) == want
    assert len(want.to_blob()) == 4 + 8 * 2
    assert np.array_equal(want.to_dense(), [1.5, 0, 2, 0, 0])
    assert vv.SparseVector("{1:0,2:1}/3").indices.tolist() == [1]     # zeros not stored
    for bad, state in [("{1:1,1:2}/3", "22000"), ("{4:1}/3", "22000"), ("{1:1}/0", "22000"),
                       ("{1:NaN}/3", "22000"), ("{1:1e40}/3", "22003"), ("{1:1}", "22P02"),
                       ("{1:1}/1000000001", "54000"), ("nonsense", "22P02")]:
        with pytest.raises(SqlError) as e:
            vv.SparseVector(bad)
        assert e.value.sqlstate == state, bad


_ROWS = st.lists(st.lists(st.sampled_from([0.0, 0.0, 0.0, 1.0, -2.5, 0.5, 3.0]),
                          min_size=6, max_size=6), min_size=1, max_size=8)


@settings(deadline=None, max_examples=60)
@given(_ROWS, st.lists(st.sampled_from([0.0, 1.0, -1.5, 2.0]), min_size=6, max_size=6))
def test_the_kernels_agree_with_dense_numpy(rows, query):
    dense = np.array(rows, np.float32)
    q = np.array(query, np.float32)
    block = sparse.SparseBlock.of_values([vv.SparseVector(r) for r in dense])
    qb = sparse.SparseBlock.broadcast(vv.SparseVector(q), len(dense))
    nulls = np.zeros(len(dense), bool)
    d, x = dense.astype(np.float64), q.astype(np.float64)
    dots = d @ x
    norms = np.linalg.norm(d, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = 1 - np.clip(dots / (norms * np.linalg.norm(x)), -1, 1)
    for name, want in [("<->", np.linalg.norm(d - x, axis=1)), ("<#>", -dots),
                       ("inner_product", dots), ("<+>", np.abs(d - x).sum(axis=1)),
                       ("<=>", cosine)]:
        got = sparse_funcs.distance(name, block, qb, nulls)
        assert np.allclose(got, want, equal_nan=True), name
    assert np.allclose(sparse_funcs.norms(block), norms)
    assert np.array_equal(sparse_funcs.to_dense(block, nulls), dense)
    assert np.array_equal(sparse_funcs.to_dense(sparse_funcs.from_dense(dense), nulls), dense)
    assert sparse_funcs.equal(block, block).all()
    assert np.array_equal(sparse_funcs.equal(block, sparse_funcs.from_dense(dense)),
                          np.ones(len(dense), bool))
    normal = sparse_funcs.to_dense(sparse_funcs.normalize(block), nulls)
    assert np.allclose(normal, d / np.where(norms > 0, norms, 1)[:, None], atol=1e-6)


_MIXED = st.lists(st.lists(st.sampled_from([0.0, 0.0, 0.0, 1.0, -1.0, 2.0]), min_size=1,
                           max_size=5), min_size=1, max_size=12)


@settings(deadline=None, max_examples=80)
@given(_MIXED, _MIXED)
def test_the_btree_order_is_the_dense_forms_then_the_dimensions(rows, others):
    """pgvector's sparsevec_cmp is the dense forms compared element by element over
    the lesser dimension, then the dimensions: Python's order of tuples. The ranks
    (of one block, and of two concatenated: what < compares by) and concat (of a
    stored block, a take of a few rows and a broadcast one) agree with it."""
    values = [vv.SparseVector(np.array(r, np.float32)) for r in rows]
    block = sparse.SparseBlock.of_values(values)
    key = [tuple(r) for r in rows]
    distinct = sorted(set(key))
    assert sparse_funcs.ranks(block).tolist() == [distinct.index(k) for k in key]
    other = [vv.SparseVector(np.array(r, np.float32)) for r in others]
    few = sparse.SparseBlock.of_values(other)[np.arange(min(2, len(other)))]
    wide = sparse.SparseBlock.broadcast(values[0], 3)
    both = sparse.SparseBlock.concat([block, few, wide])
    assert both.values(np.zeros(len(both), bool)) == values + other[:2] + [values[0]] * 3
    n = min(len(rows), len(others))
    r = sparse_funcs.ranks(sparse.SparseBlock.concat([block[np.arange(n)],
                                                      sparse.SparseBlock.of_values(other[:n])]))
    assert np.sign(r[:n] - r[n:]).tolist() == [(a > b) - (a < b) for a, b in
                                               zip(key[:n], [tuple(r) for r in others[:n]])]


def _version(db) -> int:
    return db.sql("SELECT count(*) FROM items").rows[0][0], db.version


def test_stored_across_reopen_as_of_and_rollback_and_bad_values_leave_the_file(tmp_path):
    path = str(tmp_path / "s.varve")
    with vv.connect(path) as db:
        db.sql("CREATE TABLE items (id bigint PRIMARY KEY, v sparsevec(4), w sparsevec)")
        db.sql("INSERT INTO items VALUES (1, '{1:1.5,4:-2}/4', '{2:1}/9'), (2, NULL, NULL)")
        first = db.version
        items = db.collection("items")
        items.insert([{"id": 3, "v": PgSparseVector({1: 0.25}, 4)}])
        db.checkpoint()             # rows 1..3 from the checkpoint, the next from the log
        db.sql("UPDATE items SET v = '{2:7}/4' WHERE id = 1")
        before = _version(db)
        for bad in ("INSERT INTO items VALUES (4, '{1:1}/5', NULL)",
                    "INSERT INTO items VALUES (4, '{1:NaN}/4', NULL)",
                    "INSERT INTO items VALUES (4, '{9:1}/4', NULL)",
                    "INSERT INTO items VALUES (4, 'junk', NULL)",
                    "UPDATE items SET v = '{1:1,1:1}/4'"):
            with pytest.raises(vv.VarveError) as e:
                db.sql(bad)
            assert e.value.sqlstate in ("22000", "22P02"), bad
        for bad in ({"id": 4, "v": 7}, {"id": 4, "v": "{1:1}/5"}, {"id": 4, "v": [1.0, np.nan, 0, 0]}):
            with pytest.raises(vv.VarveError):
                items.insert([bad])
        assert _version(db) == before
        with db.transaction():
            db.sql("INSERT INTO items VALUES (5, '{3:3}/4', NULL)")
        with pytest.raises(vv.DimensionError) as e:     # the whole transaction undone
            with db.transaction():
                db.sql("INSERT INTO items VALUES (6, '{3:3}/4', NULL)")
                db.sql("INSERT INTO items VALUES (7, '{3:3}/5', NULL)")
        assert e.value.sqlstate == "22000"
    with vv.connect(path) as db:
        rows = db.sql("SELECT id, v::text, w::text FROM items ORDER BY id").rows
        assert rows == [(1, "{2:7}/4", "{2:1}/9"), (2, None, None), (3, "{2:0.25}/4", None),
                        (5, "{3:3}/4", None)]
        assert db.collection("items").get(1)["v"] == vv.SparseVector("{2:7}/4")
        assert [h.id for h in db.collection("items").find(where="v IS NULL")] == [2]
        with pytest.raises(vv.FilterError):     # a filter tests a sparsevec for NULL only
            db.collection("items").find(where="v > 1")
        old = db.sql(f"SELECT v FROM items WHERE id = 1 AS OF VERSION {first}").rows
        assert old == [(vv.SparseVector("{1:1.5,4:-2}/4"),)]
        near = db.sql("SELECT id FROM items ORDER BY v <-> '{2:6}/4' LIMIT 2").rows
        assert near == [(1,), (3,)]


def test_a_crafted_stored_row_is_refused():
    good = vv.SparseVector("{1:1,3:2}/4").to_blob()
    assert sparse.stored_ok([good, None], 4) and sparse.stored_ok([good], 0)
    words = np.frombuffer(good, "<i4").copy()
    for bad in [good[:-1], b"", "text", 5, good + good[4:12]]:
        assert not sparse.stored_ok([bad], 0), bad
    assert not sparse.stored_ok([good], 5)                     # another dimension
    for i, v in [(1, 2), (1, 9), (1, -1), (0, 0)]:             # order, range, dim
        w = words.copy()
        w[i] = v
        assert not sparse.stored_ok([w.tobytes()], 0), (i, v)
    w = words.copy()
    w[3:] = np.array([np.inf, 1], np.float32).view(np.int32)
    assert not sparse.stored_ok([w.tobytes()], 0)


# ---- over the wire -------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pg") / "db.varve")
    with ServerProcess(path, args=["--pg", str(free_port())]) as srv:
        srv.pg = int(srv.args[-1])
        yield srv


def _connect(srv, register: bool = True) -> psycopg.Connection:
    conn = psycopg.connect(host="127.0.0.1", port=srv.pg, user="me", dbname="db",
                           sslmode="disable", connect_timeout=600, autocommit=True)
    if register:
        register_vector(conn)
    return conn


def test_psycopg_round_trips_sparsevector_in_text_and_binary(server):
    with _connect(server) as conn:
        conn.execute("CREATE TABLE sv (id bigserial PRIMARY KEY, embedding sparsevec(5))")
        given_ = [PgSparseVector({0: 1.0, 2: 2.0, 4: 3.0}, 5), PgSparseVector({1: 0.5}, 5),
                  PgSparseVector([0, 0, 0, 0, 0])]
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                cur.executemany("INSERT INTO sv (embedding) VALUES (%s)",
                                [(v,) for v in given_])
                cur.execute("SELECT embedding FROM sv ORDER BY id DESC LIMIT 3")
                got = [r[0] for r in cur.fetchall()][::-1]
                assert got == given_, binary
                cur.execute("SELECT id FROM sv ORDER BY embedding <-> %s LIMIT 1",
                            (PgSparseVector({1: 0.5}, 5),))
                assert cur.fetchone()[0] in (2, 5)
                cur.execute("SELECT %s::sparsevec", (PgSparseVector({3: -1.25}, 4),))
                assert cur.fetchone()[0] == PgSparseVector({3: -1.25}, 4)
        [(oid, array)] = conn.execute("SELECT oid, typarray FROM pg_type "
                                      "WHERE typname = 'sparsevec'").fetchall()
        assert (oid, array) == (T.SPARSEVEC, T.ARRAYS[T.SPARSEVEC]) and oid >= 16384
        info = psycopg.types.TypeInfo.fetch(conn, "sparsevec")
        assert (info.oid, info.array_oid) == (oid, array)
        with pytest.raises(psycopg.errors.DataException):
            conn.execute("INSERT INTO sv (embedding) VALUES (%s)",
                         (PgSparseVector({0: 1.0}, 6),))


def test_copy_in_text_and_binary_and_out(server):
    with _connect(server) as conn:
        conn.execute("CREATE TABLE cp (id bigint PRIMARY KEY, embedding sparsevec(3))")
        with conn.cursor().copy("COPY cp (id, embedding) FROM STDIN") as copy:
            copy.write_row((1, PgSparseVector({0: 1.5}, 3)))
            copy.write_row((2, None))
        with conn.cursor().copy("COPY cp (id, embedding) FROM STDIN WITH (FORMAT BINARY)"
                                ) as copy:
            copy.set_types(["int8", "sparsevec"])
            copy.write_row((3, PgSparseVector({2: -2.0}, 3)))
        with conn.cursor().copy("COPY cp (id, embedding) FROM STDIN WITH (FORMAT CSV)") as copy:
            copy.write(b'4,"{1:1,3:0.5}/3"\n')
        rows = conn.execute("SELECT id, embedding FROM cp ORDER BY id").fetchall()
        assert rows == [(1, PgSparseVector({0: 1.5}, 3)), (2, None),
                        (3, PgSparseVector({2: -2.0}, 3)), (4, PgSparseVector({0: 1, 2: 0.5}, 3))]
        with conn.cursor().copy("COPY cp TO STDOUT") as copy:
            out = b"".join(bytes(b) for b in copy)
        assert out == b"1\t{1:1.5}/3\n2\t\\N\n3\t{3:-2}/3\n4\t{1:1,3:0.5}/3\n"
        with conn.cursor().copy("COPY (SELECT embedding FROM cp WHERE id = 4) TO STDOUT "
                                "WITH (FORMAT CSV)") as copy:
            assert b"".join(bytes(b) for b in copy) == b'"{1:1,3:0.5}/3"\n'
        with pytest.raises(psycopg.errors.DataException):    # a bad row: nothing of it kept
            with conn.cursor().copy("COPY cp (id, embedding) FROM STDIN") as copy:
                copy.write(b"5\t{1:1}/3\n6\t{1:1,1:2}/3\n")
        assert conn.execute("SELECT count(*) FROM cp").fetchone()[0] == 4


def test_binary_forms_round_trip_and_bad_bytes_are_refused():
    v = vv.SparseVector("{1:1.5,5:-2}/7")
    data = T.encoder(T.SPARSEVEC, "sparsevec", True)(v)
    assert data == PgSparseVector({0: 1.5, 4: -2.0}, 7).to_binary()
    assert T.decode_param(data, T.SPARSEVEC, True) == v
    for bad in (data[:-1], data[:8], data[:4] + b"\0\0\0\x09" + data[8:]):
        with pytest.raises(SqlError):
            T.decode_param(bad, T.SPARSEVEC, True)
    # pgvector's recv refuses what its text input sorts or drops (PostgreSQL + pgvector
    # answered each so, through psycopg): unsorted or repeated indices, a zero, NaN
    for dim, indices, values in [(7, [4, 0], [1.0, 2.0]), (7, [0, 0], [1.0, 2.0]),
                                 (7, [0, 9], [1.0, 2.0]), (7, [0, 1], [1.0, 0.0]),
                                 (7, [0], [float("nan")]), (0, [], [])]:
        data = PgSparseVector._from_parts(dim, indices, values).to_binary()
        with pytest.raises(SqlError) as e:
            T.decode_param(data, T.SPARSEVEC, True)
        assert e.value.sqlstate == "22000", (indices, values)


README = [      # pgvector's README, "Sparse Vectors", as written
    "CREATE TABLE items (id bigserial PRIMARY KEY, embedding sparsevec(5))",
    "INSERT INTO items (embedding) VALUES ('{1:1,3:2,5:3}/5'), ('{1:4,3:5,5:6}/5')",
    "SELECT * FROM items ORDER BY embedding <-> '{1:3,3:1,5:2}/5' LIMIT 5",
]


def test_pgvectors_readme_and_pgvector_pythons_sparse_example_run_unchanged(server, tmp_path):
    want = [(1, "{1:1,3:2,5:3}/5"), (2, "{1:4,3:5,5:6}/5")]
    db = vv.connect(str(tmp_path / "readme.varve"))
    for s in README:
        got = db.sql(s)
    assert [(i, str(v)) for i, v in got.rows] == want
    # the README's index is refused, typed, rather than answered approximately
    with pytest.raises(vv.NotSupportedError, match="sparsevec"):
        db.sql("CREATE INDEX ON items USING hnsw (embedding sparsevec_l2_ops)")
    # pgvector-python's examples/sparse_search, with a stand-in for its model
    rng = np.random.default_rng(3)
    docs = ["The dog is barking", "The cat is purring", "The bear is growling"]
    dense = np.zeros((4, 30522), np.float32)
    for row in dense:
        row[rng.choice(30522, 40, replace=False)] = rng.random(40, dtype=np.float32) + 0.1
    with _connect(server, register=False) as conn:     # the example registers
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS documents")
        conn.execute("CREATE TABLE documents (id bigserial PRIMARY KEY, content text, "
                     "embedding sparsevec(30522))")
        for content, embedding in zip(docs, dense):
            conn.execute("INSERT INTO documents (content, embedding) VALUES (%s, %s)",
                         (content, PgSparseVector(embedding)))
        result = conn.execute("SELECT content FROM documents ORDER BY embedding <#> "
                              "%(embedding)s LIMIT 5",
                              {"embedding": PgSparseVector(dense[3])}).fetchall()
        order = np.argsort(-(dense[:3] @ dense[3]), kind="stable")
        assert [r[0] for r in result] == [docs[i] for i in order]
        for s in README[:2]:
            conn.execute(s.replace("items", "readme_items"))
        rows = conn.execute(README[2].replace("items", "readme_items")).fetchall()
        assert [(i, v.to_text()) for i, v in rows] == [(1, "{1:1.0,3:2.0,5:3.0}/5"),
                                                       (2, "{1:4.0,3:5.0,5:6.0}/5")]


def test_http_export_and_arrow_carry_pgvectors_text_which_a_write_takes_back(tmp_path):
    from varvedb.transfer import export_file, import_file
    with ServerProcess(str(tmp_path / "h.varve")) as srv:
        client = vv.Client(srv.url)
        docs = client.create_collection("docs", {"v": "sparsevec(5)"})
        docs.insert([{"id": 1, "v": "{1:1.5,4:-2}/5"}, {"id": 2, "v": None}])
        assert docs.get(1)["v"] == "{1:1.5,4:-2}/5"
        assert client.sql("SELECT v <-> '{1:1.5}/5' FROM docs WHERE id = 1").rows == [(2.0,)]
    db = vv.connect(str(tmp_path / "e.varve"))
    docs = db.create_collection("docs", {"v": vv.SparseVec(5)})
    docs.insert([{"id": 1, "v": "{1:1.5,4:-2}/5"}, {"id": 2, "v": None}])
    assert db.sql("SELECT v FROM docs ORDER BY id").to_arrow().column("v").to_pylist() == \
        ["{1:1.5,4:-2}/5", None]
    for ext in ("jsonl", "csv", "parquet"):
        path = str(tmp_path / f"out.{ext}")
        assert export_file(db, "docs", path) == 2
        again = vv.connect(str(tmp_path / f"back_{ext}.varve"))
        again.create_collection("docs", {"v": vv.SparseVec(5)})
        assert import_file(again, "docs", path) == 2
        assert again.sql("SELECT id, v::text FROM docs ORDER BY id").rows == \
            [(1, "{1:1.5,4:-2}/5"), (2, None)], ext


def test_asyncpg_with_pgvectors_binary_codec(server):
    import asyncio

    import asyncpg
    from pgvector.asyncpg import register_vector as register_async

    async def run():
        conn = await asyncpg.connect(host="127.0.0.1", port=server.pg, user="me",
                                     database="db", ssl=False)
        try:
            await register_async(conn)
            await conn.execute("CREATE TABLE apg (id bigserial PRIMARY KEY, v sparsevec(4))")
            await conn.executemany("INSERT INTO apg (v) VALUES ($1)",
                                   [(PgSparseVector({0: 1.0}, 4),),
                                    (PgSparseVector({3: -2.5}, 4),), (None,)])
            return await conn.fetch("SELECT id, v, v <-> $1 AS d FROM apg ORDER BY d, id",
                                    PgSparseVector({3: -2.0}, 4))
        finally:
            await conn.close()
    rows = asyncio.run(run())
    assert [(r["id"], r["v"], r["d"]) for r in rows] == [
        (2, PgSparseVector({3: -2.5}, 4), 0.5), (1, PgSparseVector({0: 1.0}, 4), 5 ** 0.5),
        (3, None, None)]
