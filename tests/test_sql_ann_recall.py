"""ANN through db.sql() against pgvector's exact answer to the same SQL.

The case files compare exact queries row for row; an HNSW walk is compared
by recall instead: the same table is loaded into varvedb (with an HNSW
index, so the plan is a graph walk) and into PostgreSQL (no index, so its
answer is exact), and the same statements run on both."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.query.plan import Strategy, VectorTopK

N, DIM, QUERIES, K = 4000, 16, 40, 10


def _data():
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((16, DIM)) * 3
    x = centres[rng.integers(0, 16, N)] + rng.standard_normal((N, DIM))
    q = centres[rng.integers(0, 16, QUERIES)] + rng.standard_normal((QUERIES, DIM))
    return x.astype(np.float32), q.astype(np.float32)


@pytest.mark.parametrize("op, opclass", [("<->", "vector_l2_ops"),
                                         ("<=>", "vector_cosine_ops"),
                                         ("<#>", "vector_ip_ops")])
def test_sql_ann_recall_against_pgvector_exact(tmp_path, pg_conn, op, opclass):
    x, queries = _data()
    tags = np.arange(N) % 4
    db = vv.connect(tmp_path / "ann.varve")
    ddl = f"CREATE TABLE items (id bigint PRIMARY KEY, embedding vector({DIM}), tag int)"
    db.sql(ddl)
    pg_conn.execute(ddl)
    db.collection("items").insert_arrays(id=np.arange(N), embedding=x, tag=tags)
    with pg_conn.cursor().copy("COPY items (id, embedding, tag) FROM STDIN") as copy:
        for i in range(N):
            copy.write_row((i, "[" + ",".join(map(repr, x[i].tolist())) + "]", int(tags[i])))
    db.sql(f"CREATE INDEX ON items USING hnsw (embedding {opclass}) "
           "WITH (m = 16, ef_construction = 64)")
    c = db.collection("items")
    assert c.wait_indexed(timeout=1800)          # the timeout is a hang guard only
    sql_all = f"SELECT id FROM items ORDER BY embedding {op} $1 LIMIT {K}"
    sql_tag = f"SELECT id FROM items WHERE tag < $2 ORDER BY embedding {op} $1 LIMIT {K}"
    # psycopg's %s placeholders are positional: the PostgreSQL text and its
    # parameters are written out in their own order
    pg_all = f"SELECT id FROM items ORDER BY embedding {op} %s::vector LIMIT {K}"
    pg_tag = f"SELECT id FROM items WHERE tag < %s ORDER BY embedding {op} %s::vector LIMIT {K}"
    for sql, params, pg_sql, pg_params in (
            (sql_all, lambda q: [q], pg_all, lambda q: [q]),
            (sql_tag, lambda q: [q, 3], pg_tag, lambda q: [3, q])):
        found = total = 0
        for q in queries:
            r = db.sql(sql, params(q))
            top = r.plan.find(VectorTopK)
            assert top.strategy in (Strategy.GRAPH, Strategy.WIDENED), str(r.plan)
            want = {row[0] for row in pg_conn.execute(pg_sql, pg_params(q)).fetchall()}
            assert len(want) == K and len(r.rows) == K
            found += len(want & {row[0] for row in r.rows})
            total += K
        print(f"recall@{K} {op} {'filtered' if 'tag' in sql else 'all rows'}: {found / total:.4f}")
        assert found / total >= 0.95, (sql, found / total)
    db.close()
