"""What drivers do at connect and around their queries, through `varvedb serve --pg`
with the real drivers: pgvector-python's register_vector (psycopg and asyncpg),
asyncpg's parameter typing, introspection and pool reset, SQLAlchemy's dialect
start-up, psycopg's nested transactions (SAVEPOINT) and COPY FROM STDIN / TO
STDOUT. Each answer is checked against db.sql()'s on the same data."""
from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

import varvedb as vv
from varvedb.errors import NotSupportedError, SqlError

from conftest import lazy_callables, lazy_module
from server_proc import pg_server

# imported by the tests (lazy_module: not at every pytest worker's collection)
asyncpg, sa = lazy_module("asyncpg"), lazy_module("sqlalchemy")
register_vector_asyncpg, = lazy_callables("pgvector.asyncpg", "register_vector")
HalfVector, = lazy_callables("pgvector", "HalfVector")

SETUP = ["CREATE TABLE items (id bigint PRIMARY KEY, tag int, body text, embedding vector(3), "
         "half halfvec(2))",
         "INSERT INTO items VALUES (1, 1, 'a b', '[1,2,3]', '[1,2]'), "
         "(2, 2, 'c d', '[4,5,6]', '[3,4]'), (3, 2, NULL, '[0,0,1]', NULL)"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with pg_server(str(tmp_path_factory.mktemp("pgc") / "db.varve"), SETUP) as srv:
        yield srv


def connect(srv, **kw) -> psycopg.Connection:
    kw.setdefault("autocommit", True)
    return psycopg.connect(host="127.0.0.1", port=srv.pg, user="me", dbname="db",
                           sslmode="disable", connect_timeout=600, **kw)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 600))


def asyncpg_args(srv) -> dict:
    return {"host": "127.0.0.1", "port": srv.pg, "user": "me", "database": "db", "ssl": False}


@contextlib.asynccontextmanager
async def asyncpg_connection(srv):
    conn = await asyncpg.connect(**asyncpg_args(srv))
    try:
        yield conn
    finally:
        await conn.close()


# ---- pgvector-python's register_vector ----------------------------------------------

def test_psycopg_register_vector_sends_and_reads_numpy_vectors(server):
    with connect(server) as conn:
        register_vector(conn)
        rows = conn.execute("SELECT id, embedding FROM items ORDER BY embedding <-> %s LIMIT 2",
                            (np.array([1, 2, 3], dtype=np.float32),)).fetchall()
        assert [r[0] for r in rows] == [1, 3]
        assert rows[0][1].to_list() == [1.0, 2.0, 3.0]
        for binary in (False, True):
            (v,) = conn.execute("SELECT half FROM items WHERE id = 2", binary=binary).fetchone()
            assert v.to_list() == [3.0, 4.0]


def test_bit_strings_travel_as_postgresqls_bit(server):
    """A bit value is PostgreSQL's bit on the wire (its OID, '0101' as text, length and
    packed bits in binary), as pgvector-python's binary quantization reads it."""
    with connect(server) as conn:
        register_vector(conn)
        for binary in (False, True):
            cur = conn.execute("SELECT binary_quantize(embedding), '1011'::bit(4) FROM items "
                               "WHERE id = 2", binary=binary)
            assert [c.type_code for c in cur.description] == [1560, 1560]
            # (psycopg has no binary loader for bit: PostgreSQL's bytes come as they are)
            assert list(cur.fetchone()) == ([b"\0\0\0\3\xe0", b"\0\0\0\4\xb0"] if binary
                                            else ["111", "1011"])
        rows = conn.execute("SELECT id FROM items ORDER BY binary_quantize(embedding)::bit(3) "
                            "<~> binary_quantize(%s::vector), id LIMIT 2",
                            (np.array([1, -2, 3], dtype=np.float32),)).fetchall()
        assert [r[0] for r in rows] == [1, 2]


def test_type_lookups_answer_pgvectors_types_and_none_for_unknown_ones(server):
    with connect(server) as conn:
        info = psycopg.types.TypeInfo.fetch(conn, "vector")
        assert (info.oid, info.array_oid) == (16385, 16395)
        assert psycopg.types.TypeInfo.fetch(conn, "halfvec").oid == 16386
        assert psycopg.types.TypeInfo.fetch(conn, "int8").oid == 20
        assert psycopg.types.TypeInfo.fetch(conn, "no_such_type") is None


@pytest.mark.parametrize("text,params,want", [
    ("SELECT oid, typarray FROM pg_type WHERE typname = %s", ["vector"], [(16385, 16395)]),
    ("SELECT t.typname FROM pg_catalog.pg_type AS t WHERE t.oid = ANY(%s) ORDER BY t.typname",
     [[16385, 16386, 20]], [("halfvec",), ("int8",), ("vector",)]),
    ("SELECT %s::regtype::oid, 'public.halfvec'::regtype::oid", ["vector"], [(16385, 16386)]),
    ("SELECT oid::regtype::text FROM pg_type WHERE oid = to_regtype(%s)", ["vector[]"],
     [("vector[]",)]),
    ("SELECT n.nspname FROM pg_namespace n WHERE n.oid = (SELECT typnamespace FROM pg_type "
     "WHERE typname = %s)", ["vector"], [("public",)]),
    ("SELECT count(*) FROM pg_type WHERE to_regtype(%s) IS NULL", ["no_such_type"],
     [(len(__import__("varvedb.query.pg_types").query.pg_types.TYPES),)]),
])
def test_type_catalog_queries_run_as_sql(server, text, params, want):
    """Variants of the lookups drivers send, run by SQL over pg_type and pg_namespace,
    the same through the wire and through db.sql()."""
    with connect(server) as conn:
        assert conn.execute(text, params).fetchall() == want
    db = vv.connect(":memory:")
    try:
        assert db.sql(text.replace("%s", "$1"), params).rows == want
    finally:
        db.close()
    with pytest.raises(SqlError) as e:
        vv.connect(":memory:").sql("SELECT 'no_such_type'::regtype")
    assert e.value.sqlstate == "42704"


def test_asyncpg_register_vector_and_typed_parameters(server):
    async def go():
        async with asyncpg_connection(server) as conn:
            await register_vector_asyncpg(conn)
            near = await conn.fetch("SELECT id, embedding FROM items "
                                    "ORDER BY embedding <-> $1 LIMIT 2",
                                    np.array([4, 5, 6], dtype=np.float32))
            # an int compared with an int column, a LIMIT and ANY(array): sent typed
            by_tag = await conn.fetch("SELECT id, body FROM items WHERE tag = $1 ORDER BY id "
                                      "LIMIT $2", 2, 5)
            any_of = await conn.fetch("SELECT id FROM items WHERE id = ANY($1) ORDER BY id",
                                      [1, 3])
            like = await conn.fetchval("SELECT count(*) FROM items WHERE body LIKE $1", "a%")
            return near, by_tag, any_of, like
    near, by_tag, any_of, like = run(go())
    assert [r["id"] for r in near] == [2, 1]
    assert near[0]["embedding"].to_list() == [4.0, 5.0, 6.0]
    assert [(r["id"], r["body"]) for r in by_tag] == [(2, "c d"), (3, None)]
    assert [r["id"] for r in any_of] == [1, 3]
    assert like == 1


def test_asyncpg_sends_a_bit_column_parameter_as_bit(server):
    """A $n a bit(n) column takes is described as bit, so asyncpg sends its BitString
    (pgvector-python's test_asyncpg test_bit; it was described as text, which asyncpg
    refuses to encode a BitString as)."""
    async def go():
        async with asyncpg_connection(server) as conn:
            await conn.execute("CREATE TABLE bits_a (id bigserial PRIMARY KEY, b bit(3))")
            try:
                await conn.execute("INSERT INTO bits_a (b) VALUES ($1), ($2)",
                                   asyncpg.BitString("101"), None)
                rows = await conn.fetch("SELECT b FROM bits_a ORDER BY id")
                text = await conn.fetchval("SELECT b::text FROM bits_a ORDER BY id LIMIT 1")
            finally:
                await conn.execute("DROP TABLE bits_a")
            return rows, text
    rows, text = run(go())
    assert [r["b"] if r["b"] is None else r["b"].as_string() for r in rows] == ["101", None]
    assert text == "101"


def test_vector_array_columns_round_trip_through_psycopg_and_asyncpg(server):
    """A vector[] column (and double precision[], integer[]): pgvector-python's
    register_vector sends a list of numpy vectors (text and binary) and reads vector[]
    back as Vectors, asyncpg sends ARRAY[$1, $2]::vector[] (each $n told a vector);
    the rows are db.sql()'s."""
    from pgvector import Vector
    with connect(server) as conn:
        conn.execute("CREATE TABLE arr_items (id bigserial PRIMARY KEY, e vector[], "
                     "f double precision[], i integer[])")
        try:
            register_vector(conn)
            vs = [np.array([1.5, 2, 3]), np.array([4.5, 5, 6])]
            conn.execute("INSERT INTO arr_items (e, f, i) VALUES (%s, %s, %s)",
                         (vs, [1.5, None], [1, 2]))
            conn.execute("INSERT INTO arr_items (e) VALUES (%s)", ([Vector([7, 8])],),
                         binary=True)

            async def go():
                async with asyncpg_connection(server) as a:
                    await register_vector_asyncpg(a)
                    await a.execute("INSERT INTO arr_items (e) VALUES (ARRAY[$1, $2]::vector[])",
                                    np.array([0, 0, 1.0]), np.array([1, 0, 0.0]))
                    return await a.fetch("SELECT e, f, i FROM arr_items ORDER BY id")
            by_asyncpg = run(go())
            got = {binary: conn.execute("SELECT e, f, i FROM arr_items ORDER BY id",
                                        binary=binary).fetchall() for binary in (False, True)}
        finally:
            conn.execute("DROP TABLE arr_items")
    want = [([Vector([1.5, 2, 3]), Vector([4.5, 5, 6])], [1.5, None], [1, 2]),
            ([Vector([7, 8])], None, None), ([Vector([0, 0, 1]), Vector([1, 0, 0])], None, None)]
    assert got[False] == want and got[True] == want
    assert [tuple(r) for r in by_asyncpg] == want


# a list parameter under an array cast: SQLAlchemy's ARRAY(VECTOR(3)) sends its
# vectors as text in a list (`%(embeddings)s::VECTOR(3)[]`, pgvector-python's
# test_vector_array), register_vector a list of numpy vectors
LIST_CASTS = [("SELECT %s::vector(3)[]", ["[1.0,2.0,3.0]", "[4.0,5.0,6.0]"]),
              ("SELECT %s::halfvec(3)[]", ["[1.0,2.0,3.0]", "[4.0,5.0,6.0]"]),
              ("SELECT %s::vector(3)[]", [np.array([1.5, 2, 3]), np.array([4, 5, 6])]),
              ("SELECT %s::text[]", ["a", "b c"]),
              ("SELECT %s::float8[]", [1.5, 2.0]),
              ("SELECT %s::int[]", [1, 2])]


def _plain_rows(rows) -> list:
    return [[[x.tolist() if hasattr(x, "tolist") else x.to_list()
              if hasattr(x, "to_list") else x for x in v] for v in row] for row in rows]


def test_a_list_parameter_cast_to_an_array_type_is_that_array_as_on_postgresql(server, pg):
    """A list sent as a parameter and cast to an array type (vector(3)[], halfvec(3)[],
    text[] ...) is that array, as PostgreSQL reads it, through psycopg with and
    without register_vector, text and binary — not json, whose cast PostgreSQL
    refuses (42846)."""
    def answers(conn) -> list:
        return [_plain_rows(conn.execute(q, (p,), binary=binary).fetchall())
                for q, p in LIST_CASTS for binary in (False, True)]
    with pg.connect("list_casts") as want_conn, connect(server) as conn:
        register_vector(conn)
        want, got = answers(want_conn), answers(conn)
    assert got == want
    assert got[0] == [[[[1, 2, 3], [4, 5, 6]]]]


def test_asyncpg_without_a_codec_introspects_the_type_and_reads_text(server):
    async def go():
        async with asyncpg_connection(server) as conn:
            return await conn.fetchval("SELECT embedding FROM items WHERE id = 1")
    assert run(go()) == "[1,2,3]"


def test_asyncpg_pool_resets_connections_it_takes_back(server):
    async def go():
        async with asyncpg.create_pool(**asyncpg_args(server), min_size=1,
                                       max_size=1) as pool:
            async with pool.acquire() as conn:
                await conn.execute("SET hnsw.ef_search = 77")
                assert await conn.fetchval("SHOW hnsw.ef_search") == "77"
            async with pool.acquire() as conn:       # the same connection, reset
                return await conn.fetchval("SHOW hnsw.ef_search")
    assert run(go()) == "index default"


def test_asyncpg_writes_in_a_transaction_and_rolls_back(server):
    async def go():
        async with asyncpg_connection(server) as conn:
            try:
                with pytest.raises(RuntimeError):
                    async with conn.transaction():
                        await conn.execute("INSERT INTO items (id, tag) VALUES ($1, $2)",
                                           50, 9)
                        raise RuntimeError("undo")
                async with conn.transaction():
                    await conn.execute("UPDATE items SET tag = $1 WHERE id = $2", 7, 3)
                return (await conn.fetchval("SELECT count(*) FROM items WHERE id = 50"),
                        await conn.fetchval("SELECT tag FROM items WHERE id = 3"))
            finally:
                await conn.execute("UPDATE items SET tag = 2 WHERE id = 3")
    assert run(go()) == (0, 7)


def test_a_prepared_statement_whose_columns_ddl_changed_is_prepared_again(server):
    # red-team 9 f06: the kept statement sent float8 rows under its int8 description
    # (asyncpg decoded them silently wrong); PostgreSQL's 0A000 makes asyncpg prepare
    # it again
    async def go():
        async with asyncpg_connection(server) as conn:
            await conn.execute("CREATE TABLE f06 (id int PRIMARY KEY, n bigint)")
            await conn.execute("INSERT INTO f06 VALUES (1, 7)")
            q = "SELECT id, n FROM f06 WHERE id = $1"       # asyncpg prepares, keeps it
            first = tuple(await conn.fetchrow(q, 1))
            await conn.execute("ALTER TABLE f06 DROP COLUMN n")
            await conn.execute("ALTER TABLE f06 ADD COLUMN n float8")
            await conn.execute("UPDATE f06 SET n = 1.5")
            second = tuple(await conn.fetchrow(q, 1))
            stmt = await conn.prepare(q)
            await conn.execute("ALTER TABLE f06 DROP COLUMN n")
            await conn.execute("ALTER TABLE f06 ADD COLUMN n text")
            with pytest.raises(asyncpg.exceptions.FeatureNotSupportedError):
                await stmt.fetchrow(1)      # a prepared statement of its own: refused
            return first, second
    assert run(go()) == ((1, 7), (1, 1.5))


def test_a_prepared_write_returning_whose_columns_ddl_changed_is_prepared_again(server):
    # red-team 10 f18_returning_after_ddl: an INSERT ... RETURNING * kept by asyncpg
    # sent 3 columns under its 2-column Describe after ADD COLUMN (ProtocolError), its
    # row committed; PostgreSQL's 0A000, with the write rolled back, makes asyncpg
    # prepare it again and retry (a retry of a committed row would be 23505)
    async def go():
        async with asyncpg_connection(server) as a, asyncpg_connection(server) as b:
            await a.execute("CREATE TABLE r18 (id int PRIMARY KEY, x int)")
            q = "INSERT INTO r18 (id, x) VALUES ($1, $2) RETURNING *"
            first = tuple(await a.fetchrow(q, 1, 10))
            await b.execute("ALTER TABLE r18 ADD COLUMN z int DEFAULT 7")
            second = tuple(await a.fetchrow(q, 2, 20))
            return first, second, await b.fetchval("SELECT count(*) FROM r18")
    assert run(go()) == ((1, 10), (2, 20, 7), 2)


def test_asyncpg_reads_halfvec_and_bit_a_write_returns_and_a_select_of_no_row(server):
    # red-team 10 f18_describe_types: the statement's Describe named a halfvec or bit
    # column vector (its type read off no rows), so pgvector's codecs failed on every
    # row, after the INSERT had committed
    async def go():
        async with asyncpg_connection(server) as conn:
            await conn.execute("CREATE TABLE d18 (id int PRIMARY KEY, h halfvec(3), b bit(3))")
            await register_vector_asyncpg(conn)
            h = await conn.fetchval("INSERT INTO d18 (id, h) VALUES ($1, $2) RETURNING h",
                                    1, HalfVector([1, 2, 3]))
            b = await conn.fetchval("INSERT INTO d18 (id, b) VALUES ($1, $2) RETURNING b",
                                    2, asyncpg.BitString("101"))
            # (Described with NULL parameters, these find no row)
            h2 = await conn.fetchval("SELECT h FROM d18 WHERE id = $1", 1)
            b2 = await conn.fetchval("SELECT b FROM d18 WHERE id = $1", 2)
            return h, b, h2, b2
    h, b, h2, b2 = run(go())
    assert h.to_list() == h2.to_list() == [1.0, 2.0, 3.0]
    assert b == b2 == asyncpg.BitString("101")


# ---- SQLAlchemy ----------------------------------------------------------------------

def test_sqlalchemy_connects_and_runs_core_and_text_queries(server):
    engine = sa.create_engine(f"postgresql+psycopg://me@127.0.0.1:{server.pg}/db")
    items = sa.Table("items", sa.MetaData(), sa.Column("id", sa.BigInteger, primary_key=True),
                     sa.Column("tag", sa.Integer), sa.Column("body", sa.Text))
    try:
        with engine.connect() as c:
            assert c.execute(sa.select(items.c.id).where(items.c.tag == 2)
                             .order_by(items.c.id)).scalars().all() == [2, 3]
            assert c.execute(sa.text("SELECT body FROM items WHERE id = :i"),
                             {"i": 1}).scalar() == "a b"
        with engine.begin() as c:
            c.execute(items.insert().values(id=60, tag=6, body="sa"))
        with engine.connect() as c:
            assert c.execute(sa.select(items.c.body).where(items.c.id == 60)).scalar() == "sa"
            c.execute(items.delete().where(items.c.id == 60))
            c.commit()
    finally:
        engine.dispose()


def test_sqlalchemy_with_pgvectors_types_creates_indexes_and_orders_by_distance(server):
    """pgvector-python's SQLAlchemy types as its own tests use them: create_all and
    drop_all (the dialect's catalog queries name pg_catalog's columns by schema and
    table and use = ANY (ARRAY[...])), an HNSW index with an operator class and
    WITH, the ORM's distance methods and aggregates, and psycopg's DEALLOCATE ALL
    after the DDL (it drops the statements it prepared: the queries that follow)."""
    from pgvector import SparseVector
    from pgvector.sqlalchemy import BIT, HALFVEC, SPARSEVEC, VECTOR, avg, sum as vsum
    from sqlalchemy.orm import DeclarativeBase, Session, mapped_column

    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = "sa_item"
        id = mapped_column(sa.Integer, primary_key=True)
        embedding = mapped_column(VECTOR(3))
        half_embedding = mapped_column(HALFVEC(3))
        binary_embedding = mapped_column(BIT(3))
        sparse_embedding = mapped_column(SPARSEVEC(3))

    engine = sa.create_engine(f"postgresql+psycopg://me@127.0.0.1:{server.pg}/db")
    try:
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
        assert sa.inspect(engine).get_table_names().count("sa_item") == 1
        sa.Index("sa_item_index", Item.embedding, postgresql_using="hnsw",
                 postgresql_with={"m": 16, "ef_construction": 64},
                 postgresql_ops={"embedding": "vector_l2_ops"}).create(engine)
        with Session(engine) as session:
            for i, (v, bits) in enumerate((([1, 1, 1], "000"), ([2, 2, 2], "101"),
                                          ([1, 1, 2], "111")), 1):
                session.add(Item(id=i, embedding=v, half_embedding=v, binary_embedding=bits,
                                 sparse_embedding=SparseVector(v)))
            session.commit()

        def order(expr) -> list:
            with Session(engine) as session:
                return [item.id for item in session.query(Item).order_by(expr).limit(5)]
        assert order(Item.embedding.l2_distance([1, 1, 1])) == [1, 3, 2]
        assert order(Item.embedding.max_inner_product([1, 1, 1])) == [2, 3, 1]
        assert order(Item.embedding.cosine_distance([1, 1, 1])) == [1, 2, 3]
        assert order(Item.embedding.l1_distance([1, 1, 1])) == [1, 3, 2]
        assert order(Item.half_embedding.l2_distance([1, 1, 1])) == [1, 3, 2]
        assert order(Item.binary_embedding.hamming_distance("101")) == [2, 3, 1]
        assert order(Item.sparse_embedding.l2_distance(SparseVector([1, 1, 1]))) == [1, 3, 2]
        with Session(engine) as session:
            near = sa.select(Item).filter(Item.embedding.l2_distance([1, 1, 1]) < 1)
            assert [item.id for item in session.scalars(near)] == [1]
            assert np.allclose(session.query(avg(Item.embedding)).first()[0], [4 / 3, 4 / 3, 5 / 3])
            assert np.allclose(session.query(vsum(Item.embedding)).first()[0], [4, 4, 5])
        Base.metadata.drop_all(engine)
        assert "sa_item" not in sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_deallocate_drops_a_connections_prepared_statements(server):
    with connect(server) as conn:
        query = "SELECT 1 + %s"
        assert conn.execute(query, (1,), prepare=True).fetchone() == (2,)
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            conn.execute("DEALLOCATE no_such_statement")
        conn.execute("DEALLOCATE _pg3_0")      # psycopg's name for its first one
        # psycopg still believes it prepared and binds it by name: the server dropped it
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            conn.execute(query, (2,), prepare=True)
        # DEALLOCATE ALL and DISCARD ALL: psycopg forgets its own on either answer
        for command in ("DEALLOCATE ALL", "DISCARD ALL"):
            conn.execute(command)
            assert conn.execute(query, (3,), prepare=True).fetchone() == (4,)


def test_server_version_and_settings_drivers_ask_for(server):
    db = vv.connect(":memory:")
    try:
        assert db.sql("SELECT version()").rows[0][0].startswith("PostgreSQL 16.6 ")
        assert db.sql("SELECT pg_catalog.current_schema()").rows == [("public",)]
        assert db.sql("SHOW standard_conforming_strings").rows == [("on",)]
        assert db.sql("SHOW TRANSACTION ISOLATION LEVEL").rows == [("serializable",)]
        with pytest.raises(SqlError, match="takes no arguments"):
            db.sql("SELECT version(1)")
    finally:
        db.close()
    with connect(server) as conn:
        assert conn.info.server_version == 160006
        assert conn.execute("SHOW server_version_num").fetchone() == ("160006",)


# ---- savepoints ----------------------------------------------------------------------

def test_psycopg_nested_transactions_use_savepoints(server):
    with connect(server, autocommit=False) as conn:
        with conn.transaction():
            with conn.transaction():                 # SAVEPOINT ... RELEASE
                conn.execute("UPDATE items SET body = 'nested' WHERE id = 3")
            with pytest.raises(ZeroDivisionError):
                with conn.transaction():             # nothing written: rolled back to
                    conn.execute("SELECT 1")
                    raise ZeroDivisionError
            assert conn.execute("SELECT body FROM items WHERE id = 3").fetchone() == ("nested",)
        assert conn.execute("SELECT body FROM items WHERE id = 3").fetchone() == ("nested",)
        conn.execute("UPDATE items SET body = NULL WHERE id = 3")
        conn.commit()


def test_savepoint_rules_embedded():
    db = vv.connect(":memory:")
    try:
        for s in SETUP:
            db.sql(s)
        s = db.session()
        with pytest.raises(SqlError) as e:
            s.sql("SAVEPOINT a")
        assert e.value.sqlstate == "25P01"
        s.sql("BEGIN")
        s.sql("SAVEPOINT a")
        s.sql("UPDATE items SET tag = 10 WHERE id = 1")
        s.sql("SAVEPOINT b")
        with pytest.raises(SqlError):
            s.sql("SELECT nope FROM items")          # fails the transaction ...
        assert s.sql("ROLLBACK TO SAVEPOINT b").status == "ROLLBACK"   # ... b undoes that
        assert s.sql("SELECT tag FROM items WHERE id = 1").rows == [(10,)]
        with pytest.raises(SqlError) as e:
            s.sql("RELEASE SAVEPOINT nope")
        assert e.value.sqlstate == "3B001"
        s.sql("ROLLBACK")
        s.sql("BEGIN")
        s.sql("SAVEPOINT a")
        s.sql("UPDATE items SET tag = 11 WHERE id = 1")
        # undoing part of the writes is refused, and the transaction can only end whole
        with pytest.raises(NotSupportedError, match="would undo writes"):
            s.sql("ROLLBACK TO a")
        with pytest.raises(SqlError) as e:
            s.sql("SELECT 1")
        assert e.value.sqlstate == "25P02"
        assert s.sql("COMMIT").status == "ROLLBACK"
        assert db.sql("SELECT tag FROM items WHERE id = 1").rows == [(1,)]
        s.close()
    finally:
        db.close()


# ---- COPY ----------------------------------------------------------------------------

def test_copy_from_stdin_and_to_stdout(server):
    with connect(server) as conn:
        with conn.cursor().copy("COPY items (id, tag, body) FROM STDIN") as cp:
            for i in range(100, 3100):
                cp.write_row((i, i % 7, f"row {i}"))
        assert conn.execute("SELECT count(*), sum(tag) FROM items WHERE id >= 100").fetchone() \
            == (3000, sum(i % 7 for i in range(100, 3100)))
        with conn.cursor().copy("COPY (SELECT id, body FROM items WHERE id < 103 ORDER BY id) "
                                "TO STDOUT") as cp:
            out = b"".join(bytes(chunk) for chunk in cp)
        assert out == b"1\ta b\n2\tc d\n3\t\\N\n100\trow 100\n101\trow 101\n102\trow 102\n"
        # its CopyOutResponse says how many columns there are: psycopg splits a row by it
        # (pgvector-python's test_text_copy_to; a CopyData holds many rows here, and
        # psycopg's rows() reads one a message: one row asked for)
        with conn.cursor().copy("COPY (SELECT id, body FROM items WHERE id = 1) "
                                "TO STDOUT") as cp:
            assert list(cp.rows()) == [("1", "a b")]
        # a bad row: the statement fails whole, nothing of it is kept
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            with conn.cursor().copy("COPY items (id, tag) FROM STDIN") as cp:
                cp.write_row((5000, 1))
                cp.write_row((5001, "x"))
        # a client that cancels its COPY (CopyFail): nothing kept either
        with pytest.raises(psycopg.errors.QueryCanceled):
            with conn.cursor().copy("COPY items (id, tag) FROM STDIN") as cp:
                cp.write_row((5002, 1))
                raise psycopg.errors.QueryCanceled("stop")
        assert conn.execute("SELECT count(*) FROM items WHERE id >= 5000").fetchone() == (0,)
        conn.execute("DELETE FROM items WHERE id >= 100")


def _copy_in(s) -> None:
    """Start up on socket s and begin a COPY into items (id, tag) from STDIN."""
    body = struct.pack("!i", 196608) + b"user\0me\0\0"
    s.sendall(struct.pack("!i", len(body) + 4) + body)
    _read_until(s, b"Z")
    q = b"COPY items (id, tag) FROM STDIN\0"
    s.sendall(b"Q" + struct.pack("!i", 4 + len(q)) + q)
    assert _read_until(s, b"G")[-1][0] == b"G"


def test_a_client_gone_mid_copy_leaves_nothing_and_the_server_serves_on(server):
    with socket.create_connection(("127.0.0.1", server.pg), timeout=600) as s:
        _copy_in(s)
        row = b"7000\t1\n"
        s.sendall(b"d" + struct.pack("!i", 4 + len(row)) + row)
    with connect(server) as conn:      # the server answers, and the row is not there
        assert conn.execute("SELECT count(*) FROM items WHERE id = 7000").fetchone() == (0,)


def test_a_statement_waiting_for_its_client_keeps_no_other_client_waiting(server):
    """A COPY waiting for its data holds its own connection only: another
    client's queries (a pipeline among them) are answered meanwhile, and the
    COPY then ends with its rows."""
    with connect(server) as copying, connect(server) as other:
        with copying.cursor().copy("COPY items (id, tag) FROM STDIN") as cp:
            cp.write_row((8000, 1))
            assert other.execute("SELECT count(*) FROM items WHERE id >= 8000").fetchone() \
                == (0,)
            with other.pipeline():
                curs = [other.execute("SELECT id FROM items WHERE id = %s", (i,))
                        for i in (1, 2, 3)]
            assert [c.fetchall() for c in curs] == [[(1,)], [(2,)], [(3,)]]
            cp.write_row((8001, 2))
        assert other.execute("SELECT count(*) FROM items WHERE id >= 8000").fetchone() == (2,)
        copying.execute("DELETE FROM items WHERE id >= 8000")


def test_a_copy_streamed_faster_than_it_is_read_arrives_whole(server):
    """Thousands of CopyData messages sent at once, faster than the statement
    reads them: every row arrives, and the answers after it too."""
    n = 3000
    with socket.create_connection(("127.0.0.1", server.pg), timeout=600) as s:
        _copy_in(s)
        rows = [f"{9000 + i}\t{i % 5}\n".encode() for i in range(n)]
        count = b"SELECT count(*), sum(tag) FROM items WHERE id >= 9000\0"
        s.sendall(b"".join(b"d" + struct.pack("!i", 4 + len(r)) + r for r in rows)
                  + b"c" + struct.pack("!i", 4))
        got = _read_until(s, b"Z")
        assert [k for k, _ in got] == [b"C", b"Z"] and got[0][1] == b"COPY %d\0" % n
        s.sendall(b"Q" + struct.pack("!i", 4 + len(count)) + count)
        got = _read_until(s, b"Z")
        row = next(b for k, b in got if k == b"D")
        total = str(sum(i % 5 for i in range(n))).encode()
        assert row == struct.pack("!hi", 2, len(str(n))) + str(n).encode() \
            + struct.pack("!i", len(total)) + total
    with connect(server) as conn:
        conn.execute("DELETE FROM items WHERE id >= 9000")


def _read_until(sock, kind: bytes) -> list[tuple[bytes, bytes]]:
    out, buf = [], b""
    while True:
        while len(buf) < 5 or len(buf) < 1 + struct.unpack("!i", buf[1:5])[0]:
            chunk = sock.recv(65536)
            assert chunk, f"the server closed before {kind!r}: {out}"
            buf += chunk
        n = struct.unpack("!i", buf[1:5])[0]
        out.append((buf[:1], buf[5:1 + n]))
        buf = buf[1 + n:]
        if out[-1][0] == kind:
            return out


# ---- a NULL query vector (what a driver's Describe runs) ------------------------------

def test_a_null_query_vector_orders_nothing_as_postgresql_does():
    db = vv.connect(":memory:")
    try:
        for s in SETUP:
            db.sql(s)
        r = db.sql("SELECT id, embedding <-> $1 AS d FROM items ORDER BY embedding <-> $1 "
                   "LIMIT 2", [None])
        assert r.columns == ["id", "d"] and len(r.rows) == 2
        assert all(d is None for _, d in r.rows)
        r = db.sql("SELECT id, embedding <-> $1 AS d FROM items ORDER BY embedding <-> $1 "
                   "LIMIT 2", ["[0,0,1]"])
        assert r.rows[0] == (3, 0.0)
    finally:
        db.close()


def test_binary_copy_as_pgvector_python_loads(server):
    """pgvector-python's bulk-load example: COPY ... WITH (FORMAT BINARY), each
    type set, numpy vectors written as they are."""
    from pgvector import HalfVector
    with connect(server) as conn:
        register_vector(conn)
        vectors = np.random.default_rng(1).standard_normal((500, 3)).astype(np.float32)
        with conn.cursor().copy("COPY items (id, tag, body, embedding, half) FROM STDIN "
                                "WITH (FORMAT BINARY)") as cp:
            cp.set_types(["int8", "int4", "text", "vector", "halfvec"])
            for i, v in enumerate(vectors):
                cp.write_row((8000 + i, i % 3, None if i % 2 else f"b{i}", v,
                              HalfVector([i, 1]) if i % 5 == 0 else None))
        got = conn.execute("SELECT id, tag, body, embedding, half FROM items "
                           "WHERE id >= 8000 ORDER BY id").fetchall()
        assert len(got) == 500
        assert [g[0] for g in got] == list(range(8000, 8500))
        assert np.array_equal(np.array([g[3].to_numpy() for g in got]), vectors)
        assert got[5][4].to_list() == [5.0, 1.0] and got[1][4] is None and got[1][2] is None
        conn.execute("DELETE FROM items WHERE id >= 8000")


def test_binary_copy_to_as_pgvector_python_reads(server):
    """COPY ... TO STDOUT WITH (FORMAT BINARY) read by psycopg's copy.rows(), each
    type set (pgvector-python's test_binary_copy_to_set_types): a binary
    CopyOutResponse, then a CopyData a row (the header with the first), each
    vector, halfvec and NULL as sent."""
    from pgvector import HalfVector, Vector
    with connect(server) as conn:
        register_vector(conn)
        conn.execute("INSERT INTO items (id, embedding, half) VALUES "
                     "(9001, '[1.5,2,3]', '[4,5]'), (9002, NULL, NULL)")
        with conn.cursor().copy("COPY (SELECT id, embedding, half FROM items WHERE id > 9000 "
                                "ORDER BY id) TO STDOUT WITH (FORMAT BINARY)") as cp:
            cp.set_types(["int8", "vector", "halfvec"])
            got = list(cp.rows())
        assert got[0][0] == 9001 and got[0][1] == Vector([1.5, 2, 3])
        assert got[0][2] == HalfVector([4, 5]) and got[1] == (9002, None, None)
        # and the text format, a row a message too (copy.rows() reads one from each)
        with conn.cursor().copy("COPY (SELECT id, embedding FROM items WHERE id > 9000 "
                                "ORDER BY id) TO STDOUT") as cp:
            assert list(cp.rows()) == [("9001", "[1.5,2,3]"), ("9002", None)]
        conn.execute("DELETE FROM items WHERE id > 9000")


def _pgcopy(rows: list[list[bytes | None]], signature=b"PGCOPY\n\xff\r\n\0") -> bytes:
    out = [signature, struct.pack("!ii", 0, 0)]
    for r in rows:
        out.append(struct.pack("!h", len(r)))
        for f in r:
            out.append(struct.pack("!i", -1) if f is None else struct.pack("!i", len(f)) + f)
    out.append(struct.pack("!h", -1))
    return b"".join(out)


def test_binary_copy_refuses_bad_data_and_writes_nothing(tmp_path):
    db = vv.connect(str(tmp_path / "b.varve"))
    try:
        db.sql("CREATE TABLE t (id bigint PRIMARY KEY, x float8, v vector(2))")
        vec = struct.pack("!hh", 2, 0) + struct.pack("!ff", 1.5, 2.5)
        good = _pgcopy([[struct.pack("!q", 1), struct.pack("!d", 0.5), vec],
                        [struct.pack("!q", 2), None, None]])
        sql = "COPY t FROM STDIN (FORMAT binary)"
        assert db.sql(sql, copy_data=good).status == "COPY 2"
        rows = db.sql("SELECT id, x, v FROM t ORDER BY id").rows
        assert rows[0][:2] == (1, 0.5) and rows[0][2].tolist() == [1.5, 2.5]
        assert rows[1] == (2, None, None)
        bad = {
            "signature": _pgcopy([], signature=b"PGCOPY\n\xff\r\n\1"),
            "field count": _pgcopy([[struct.pack("!q", 3)]]),
            "width": _pgcopy([[struct.pack("!q", 4), b"\0" * 3, None]]),
            "dimensions": _pgcopy([[struct.pack("!q", 5), None,
                                    struct.pack("!hh", 3, 0) + b"\0" * 12]]),
            "truncated": good[:-7],
            "no trailer": good[:-2],
        }
        for why, data in bad.items():
            before = db.sql("SELECT count(*) FROM t").rows
            with pytest.raises(SqlError) as e:
                db.sql(sql, copy_data=data)
            assert e.value.sqlstate in ("22P04", "22P03", "22000"), why
            assert db.sql("SELECT count(*) FROM t").rows == before, why
        with pytest.raises(SqlError) as e:
            db.sql("COPY t FROM STDIN (FORMAT binary, DELIMITER ',')", copy_data=good)
        assert e.value.sqlstate == "42601"
    finally:
        db.close()


def test_a_null_scalar_subquery_vector_and_the_readme_settings():
    """pgvector's README, in order: after `DELETE ... WHERE id = 1`, ordering by the
    distance to row 1's (now missing) embedding gives NULL distances, not an error;
    its planner settings are accepted; its extension check answers."""
    db = vv.connect(":memory:")
    try:
        db.sql("CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3))")
        db.sql("INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]')")
        db.sql("DELETE FROM items WHERE id = 1")
        assert db.sql("SELECT id FROM items WHERE id != 1 ORDER BY embedding <-> "
                      "(SELECT embedding FROM items WHERE id = 1) LIMIT 5").rows == [(2,)]
        for s in ("SET hnsw.scan_mem_multiplier = 2", "SET ivfflat.max_probes = 100",
                  "SET max_parallel_workers_per_gather = 4"):
            assert db.sql(s).status == "SET"
        assert db.sql("SELECT extversion FROM pg_extension WHERE extname = 'vector'").rows \
            == [("0.8.6",)]
    finally:
        db.close()


# ---- rows sent as the types their statement's Describe announced --------------------

# asyncpg prepares (Parse, Describe of the statement: varvedb plans it with NULL
# parameters, run over no rows) and then asks binary rows by that description: where those NULLs find no
# row, or fail (a division by zero), the description must still hold the column's
# type (red-team 11 f18b)
DESCRIBED = [("SELECT 10 / coalesce($1::int, 0)", 2),
             ("SELECT array_agg(x) FROM described WHERE x > $1::int", 0),
             ("SELECT array_agg(v) FROM described WHERE x > $1::int", 0),
             ("SELECT array_agg(s) FROM described WHERE x > $1::int", 0),
             ("SELECT max(x), min(v) FROM described WHERE x > $1::int", 0),
             ("SELECT nullif($1::int, 0)", 3)]


def test_asyncpg_and_psycopg_binary_read_what_postgresql_gives_after_describing(server, pg):
    async def asyncpg_answers(conn) -> list:
        await conn.execute("DROP TABLE IF EXISTS described")
        await conn.execute("CREATE TABLE described (x int, s text, v float8)")
        await conn.execute("INSERT INTO described VALUES (1, 'a', 1.5), (2, 'b', 2.5)")
        return [tuple(await conn.fetchrow(q, p)) for q, p in DESCRIBED]

    async def both():
        async with asyncpg_connection(server) as conn:
            got = await asyncpg_answers(conn)
        conn = await asyncpg.connect(pg.uri)
        try:
            want = await asyncpg_answers(conn)
        finally:
            await conn.close()
        return got, want
    got, want = run(both())
    assert got == want == [(5,), ([1, 2],), ([1.5, 2.5],), (["a", "b"],), (2, 1.5), (3,)]
    with connect(server) as con:
        cur = con.cursor(binary=True)
        assert [cur.execute(q.replace("$1", "%s"), (p,), prepare=True).fetchone()
                for q, p in DESCRIBED] == want


def test_a_prepared_statements_executions_each_describe_their_own_values(server):
    # psycopg's prepared executions (no Describe of the statement) are each told their
    # columns' types: an execution like the one before reuses its description, but an
    # int sum past int64 is numeric (then int8 again)
    with connect(server) as con:
        con.execute("CREATE TABLE past2 (x int, n bigint)")
        con.execute("INSERT INTO past2 VALUES (1, 9223372036854775807), "
                    "(2, 9223372036854775807)")
        cur = con.cursor()          # (numeric's binary output is not sent)
        q = "SELECT sum(n) FROM past2 WHERE x > %s"
        got = [cur.execute(q, (x,), prepare=True).fetchone()[0] for x in (1, 1, 0, 1, 0)]
        assert got == [9223372036854775807] * 2 + [2 * 9223372036854775807,
                                                  9223372036854775807, 2 * 9223372036854775807]
        cur = con.cursor(binary=True)
        assert cur.execute(q, (1,), prepare=True).fetchone()[0] == 9223372036854775807
        with pytest.raises(psycopg.errors.FeatureNotSupported):     # (not int8's bytes)
            cur.execute(q, (0,), prepare=True)
        assert cur.execute(q, (1,), prepare=True).fetchone()[0] == 9223372036854775807


def test_a_result_of_another_type_than_the_describe_announced_is_refused(server):
    # the statement's NULLs find no row (an int sum); its rows then hold a sum past
    # int64 (numeric): sent under the int8 description they would read as garbage
    async def go():
        async with asyncpg_connection(server) as conn:
            await conn.execute("CREATE TABLE past (x int, n bigint)")
            await conn.execute("INSERT INTO past VALUES (1, 9223372036854775807), "
                               "(2, 9223372036854775807)")
            stmt = await conn.prepare("SELECT sum(n) FROM past WHERE x > $1::int")
            assert await stmt.fetchval(3) is None
            with pytest.raises(asyncpg.exceptions.InvalidCachedStatementError) as e:
                await stmt.fetchval(0)      # PostgreSQL's 0A000 "cached plan must not
            assert e.value.sqlstate == "0A000"      # change result type", as asyncpg says it
            # a WHERE that divides by zero for the NULLs: the Describe runs no WHERE
            # (the statement's plan over no rows), so its column's type is told
            return await conn.fetchval(
                "SELECT x FROM past WHERE x / coalesce($1::int, 0) > 0 ORDER BY x", 1)
    assert run(go()) == 1
