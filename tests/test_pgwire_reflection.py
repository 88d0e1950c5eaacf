"""SQLAlchemy 2's reflection through `varvedb serve --pg`, against PostgreSQL +
pgvector's: the same `create_all` (pgvector-python's types, arrays of vectors and
of floats, HNSW indexes with an operator class and WITH, a btree index, a primary
key) on both, then the
inspector's answers compared — columns and their types, indexes, the primary key,
the empty foreign-key / unique / check lists — and MetaData.reflect and automap on
varvedb. Every catalog query the dialect sends runs as SQL over pg_catalog's
relations (set-returning functions in the select list, array_agg(... ORDER BY),
json_build_object, pg_opclass, pg_get_serial_sequence, current_setting)."""
from __future__ import annotations

import pytest

from conftest import lazy_module
from server_proc import pg_server

# imported by the tests (lazy_module: not at every pytest worker's collection)
sa, pgsa = lazy_module("sqlalchemy"), lazy_module("pgvector.sqlalchemy")
postgresql = lazy_module("sqlalchemy.dialects.postgresql")

SCHEMA = "reflect_case"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with pg_server(str(tmp_path_factory.mktemp("reflect") / "db.varve")) as srv:
        yield srv


def metadata() -> sa.MetaData:
    md = sa.MetaData()
    t = sa.Table("refl_items", md,
                 sa.Column("id", sa.BigInteger, primary_key=True),
                 sa.Column("embedding", pgsa.VECTOR(3)), sa.Column("half", pgsa.HALFVEC(3)),
                 sa.Column("sparse", pgsa.SPARSEVEC(3)), sa.Column("bits", pgsa.BIT(3)),
                 sa.Column("name", sa.String(20), nullable=False), sa.Column("body", sa.Text),
                 sa.Column("score", sa.Double), sa.Column("ok", sa.Boolean),
                 sa.Column("meta", postgresql.JSONB),
                 sa.Column("at", sa.DateTime(timezone=True)),
                 sa.Column("embeddings", sa.ARRAY(pgsa.VECTOR(3))),
                 sa.Column("weights", sa.ARRAY(sa.Double)))
    sa.Index("refl_hnsw", t.c.embedding, postgresql_using="hnsw",
             postgresql_with={"m": 8, "ef_construction": 32},
             postgresql_ops={"embedding": "vector_cosine_ops"})
    # a second index on the column (issue 30: schema.Field.more_indexes), listed as its own
    sa.Index("refl_hnsw_l2", t.c.embedding, postgresql_using="hnsw",
             postgresql_ops={"embedding": "vector_l2_ops"})
    sa.Index("refl_half", t.c.half, postgresql_using="hnsw",
             postgresql_ops={"half": "halfvec_l2_ops"})
    sa.Index("refl_name", t.c.name)
    # an expression index (pgvector-python's half-precision index): reflected by
    # pg_get_indexdef(index, ord + 1) over generate_subscripts(indkey), from 0
    sa.Index("refl_x_half", sa.func.cast(t.c.embedding, pgsa.HALFVEC(3)).label("embedding"),
             postgresql_using="hnsw", postgresql_ops={"embedding": "halfvec_l2_ops"})
    return md


def inspected(engine) -> dict:
    """What the inspector says of refl_items, in a form that compares (types by repr)."""
    insp = sa.inspect(engine)
    columns = [{**c, "type": repr(c["type"])} for c in insp.get_columns("refl_items")]
    # (PostgreSQL's list has the other tests' tables in public, on its search path)
    return {"listed": "refl_items" in insp.get_table_names(), "columns": columns,
            "indexes": sorted(insp.get_indexes("refl_items"), key=lambda i: i["name"]),
            "pk": insp.get_pk_constraint("refl_items"),
            "fks": insp.get_foreign_keys("refl_items"),
            "unique": insp.get_unique_constraints("refl_items"),
            "checks": insp.get_check_constraints("refl_items"),
            "has_index": [insp.has_index("refl_items", n) for n in ("refl_hnsw", "nope")]}


def created(url: str, **kw) -> sa.Engine:
    engine = sa.create_engine(url, **kw)
    md = metadata()
    md.drop_all(engine)
    md.create_all(engine)
    return engine


def test_the_inspector_answers_as_postgresqls(server, pg):
    with pg.connect(SCHEMA):        # (a fresh schema on PostgreSQL, its tables alone)
        pass
    pg_engine = created(pg.uri.replace("postgresql://", "postgresql+psycopg://"),
                        connect_args={"options": f"-c search_path={SCHEMA},public"})
    engine = created(f"postgresql+psycopg://me@127.0.0.1:{server.pg}/db")
    try:
        want, got = inspected(pg_engine), inspected(engine)
    finally:
        pg_engine.dispose()
        engine.dispose()
    assert got["columns"][1]["type"] == "VECTOR(dim=3)"
    assert [c["type"] for c in got["columns"][-2:]] == ["ARRAY(VECTOR(dim=3))",
                                                        "ARRAY(DOUBLE_PRECISION(precision=53))"]
    assert [i["dialect_options"]["postgresql_ops"] for i in got["indexes"][:2]] == [
        {"half": "halfvec_l2_ops"}, {"embedding": "vector_cosine_ops"}]
    assert got["indexes"][1]["dialect_options"]["postgresql_with"] == {
        "m": "8", "ef_construction": "32"}
    assert got == want


def test_reflect_and_automap_build_the_table_and_classes(server):
    from sqlalchemy.ext.automap import automap_base
    from sqlalchemy.orm import Session

    engine = created(f"postgresql+psycopg://me@127.0.0.1:{server.pg}/db")
    try:
        md = sa.MetaData()
        md.reflect(engine, only=["refl_items"])
        t = md.tables["refl_items"]
        made = metadata().tables["refl_items"]
        assert t.c.keys() == made.c.keys()
        # (a bit(n) column is PostgreSQL's BIT type, as PostgreSQL's reflection gives it)
        assert [type(c.type) for c in t.c][:5] == [sa.BIGINT, pgsa.VECTOR, pgsa.HALFVEC,
                                                   pgsa.SPARSEVEC, postgresql.BIT]
        assert (t.c.embedding.type.dim, t.c.half.type.dim, t.c.name.type.length) == (3, 3, 20)
        assert [c.name for c in t.primary_key] == ["id"] and not t.c.name.nullable
        assert {(i.name, tuple(c.name for c in i.columns)) for i in t.indexes} == {
            ("refl_hnsw", ("embedding",)), ("refl_hnsw_l2", ("embedding",)),
            ("refl_half", ("half",)), ("refl_name", ("name",)), ("refl_x_half", ())}
        x_half = next(i for i in t.indexes if i.name == "refl_x_half")
        assert [str(x) for x in x_half.expressions] == ["(embedding::halfvec(3))"]

        Base = automap_base()
        Base.prepare(autoload_with=engine)
        Item = Base.classes.refl_items
        with Session(engine) as session:
            session.add_all([Item(id=1, name="a", embedding=[1, 0, 0]),
                             Item(id=2, name="b", embedding=[0, 1, 0])])
            session.commit()
            near = session.scalars(sa.select(Item).order_by(
                Item.embedding.cosine_distance([0, 1, 0.1])).limit(1)).one()
            assert (near.id, near.name) == (2, "b")
    finally:
        engine.dispose()


def test_an_integer_column_reflects_as_the_bigint_it_is_stored_as(server):
    """Every integer column is stored as int8 (docs/sql.md): reflected, an Integer
    is a BIGINT, where PostgreSQL keeps integer."""
    engine = sa.create_engine(f"postgresql+psycopg://me@127.0.0.1:{server.pg}/db")
    md = sa.MetaData()
    sa.Table("refl_ints", md, sa.Column("id", sa.Integer, primary_key=True),
             sa.Column("n", sa.SmallInteger))
    try:
        md.create_all(engine)
        assert [repr(c["type"]) for c in sa.inspect(engine).get_columns("refl_ints")] == [
            "BIGINT()", "BIGINT()"]
    finally:
        md.drop_all(engine)
        engine.dispose()
