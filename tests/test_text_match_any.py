"""search(text=..., match="any"): a row holding any of the query's words matches,
ranked by BM25 over every visible row (issue 31).

Held to a plain-Python BM25 oracle (the package's analyzer tokenizes, the rest
is computed here): the ids and scores of the top k, ties by row (insertion
order) ascending, with filters, as_of, deletes and updates, while the
maintainer is behind (rows answered by the covering copy), in hybrid search,
through vv.Client, and through LangChain's text mode.
"""
from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from varvedb.query.plan import TextTopK
from varvedb.query.request import Search
from varvedb.text.analyzer import Analyzer

K1, B = 1.2, 0.75
WORDS = ("how do i read a file line by line the of to in regular expression what is "
         "apple banana cherry").split()
STOPWORDS = ("how", "do", "i", "a", "the", "of", "to", "in", "what", "is", "by")


# ---- the oracle ---------------------------------------------------------------

def terms(text: str) -> list[str]:
    return Analyzer().analyze(text)


def bags(texts: list[str]) -> list[Counter]:
    """Each text's terms counted, the texts analyzed in one batch."""
    batch = Analyzer().analyze_batch(texts)
    out = [Counter() for _ in texts]
    for d, t in zip(batch.doc.tolist(), batch.term.tolist()):
        out[d][batch.vocab[t]] += 1
    return out


def oracle(docs: list[tuple[int, str | None]], query: str, k: int,
           allowed=lambda i: True) -> list[tuple[int, float]]:
    """(id, score) of the k best documents holding any positive word of `query` and
    no -word, by BM25 with the statistics of every document given (rows in the
    order given: ties go to the earlier); `allowed(id)` filters the candidates
    only (the statistics stay every visible row's, as the engine's)."""
    words = query.split()
    positive = [t for w in words if not w.startswith("-") for t in terms(w)]
    negative = {t for w in words if w.startswith("-") for t in terms(w[1:])}
    texts = [(i, text) for i, text in docs if text is not None]
    rows = list(zip([i for i, _ in texts], bags([t for _, t in texts])))
    n = len(rows)
    total = sum(b.total() for _, b in rows)
    avgdl = total / n if n and total else 1.0
    df = {t: sum(t in b for _, b in rows) for t in set(positive)}
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
    out = []
    for row, (i, bag) in enumerate(rows):
        if not allowed(i) or any(t in bag for t in negative) \
                or not any(t in bag for t in positive):
            continue
        score, length = 0.0, bag.total()
        for t in positive:      # in query order, a repeated word repeated (as Lucene)
            tf = bag[t]
            if tf:
                score += idf[t] * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / avgdl))
        out.append((row, i, float(np.float32(score))))
    out.sort(key=lambda x: (-x[2], x[0]))
    return [(i, s) for _, i, s in out[:k]]


def same(hits, want) -> None:
    assert list(hits.ids) == [i for i, _ in want]
    np.testing.assert_allclose(np.asarray(hits.scores, np.float64),
                               [s for _, s in want], rtol=1e-6)


def sentence(rng: random.Random, words=WORDS, most: int = 12) -> str | None:
    if rng.random() < 0.06:
        return None
    return " ".join(rng.choice(words) for _ in range(rng.randint(0, most)))


def question(rng: random.Random) -> str:
    words = [rng.choice(WORDS + ["zebra"]) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.3:
        words.append("-" + rng.choice(WORDS))
    return " ".join(words)


def text_db(path=":memory:"):
    db = vv.connect(path)
    return db, db.create_collection("docs", {"body": vv.Text(fts=True), "tag": vv.Int()})


# ---- the request ----------------------------------------------------------------

def test_match_is_a_field_of_the_request_and_its_wire_form():
    req = Search.of(text="read a file", match="any")
    assert req.text.match == "any"
    assert req.to_wire()["match"] == "any"
    assert Search.from_wire(req.to_wire()) == req
    assert "match" not in Search.of(text="read").to_wire()      # the default left out
    assert Search.of(text="read", match=np.str_("any")).text.match == "any"
    with pytest.raises(vv.OptionError):
        Search.of(text="read", match="some")
    with pytest.raises(vv.OptionError):
        Search.of(text="read", match=["any"])
    with pytest.raises(vv.FieldTypeError):
        Search.of(vector=[1.0, 2.0], match="any")     # no text to match


def test_a_question_in_plain_words_finds_what_all_words_would_not():
    db, col = text_db()
    col.insert([{"id": 1, "body": "read a text file one line at each pass"},
                {"id": 2, "body": "regular expressions for pattern matching"},
                {"id": 3, "body": "banana bread recipe"}])
    q = "how do I read a file line by line"
    assert list(col.search(text=q).ids) == []
    assert list(col.search(text=q, match="any").ids) == [1]
    assert list(col.search(text="what's a regular expression?", match="any").ids) == [2, 1]
    # -word still excludes; OR, phrases and prefixes keep their meaning
    assert list(col.search(text="bread regular -banana", match="any").ids) == [2]
    assert sorted(col.search(text='"text file" recipe', match="any").ids) == [1, 3]
    assert sorted(col.search(text="ban* express*", match="any").ids) == [2, 3]
    db.close()


def test_the_plan_says_which_words_match():
    db, col = text_db()
    col.insert([{"id": 1, "body": "apple"}])
    plan = col.explain("search", text="apple banana", match="any")
    assert "match=any" in str(plan) and plan.find(TextTopK).to_dict()["match"] == "any"
    assert "match=any" in str(col.search(text="apple banana", match="any").plan)
    assert "match=" not in str(col.explain("search", text="apple banana"))
    db.close()


# ---- against the oracle ---------------------------------------------------------

def answers_equal_the_oracle(col, docs: dict, rng: random.Random, as_of=None,
                             queries: int = 12) -> None:
    """Random questions, limits and filters: the engine's top k is the oracle's."""
    rows = list(docs.items())
    for _ in range(queries):
        q, k = question(rng), rng.choice([1, 3, 10, 1000])
        same(col.search(text=q, match="any", limit=k, as_of=as_of), oracle(rows, q, k))
        tag = rng.randrange(3)
        same(col.search(text=q, match="any", limit=k, as_of=as_of,
                        where="tag <> $1", params=[tag]),
             oracle(rows, q, k, lambda i: i % 3 != tag))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_top_k_equals_a_plain_bm25_over_every_visible_row(seed):
    """Inserts, updates and deletes (dead rows stay in the index: the statistics
    must not count them), a version read back with as_of."""
    rng = random.Random(seed)
    db, col = text_db()
    docs: dict = {}
    next_id = 1
    past = None
    for _ in range(rng.randint(1, 5)):
        batch = {next_id + j: sentence(rng) for j in range(rng.randint(1, 40))}
        col.insert([{"id": i, "body": t, "tag": i % 3} for i, t in batch.items()])
        docs.update(batch)
        next_id += len(batch)
        for i in rng.sample(sorted(docs), min(len(docs), rng.randint(0, 3))):
            if rng.random() < 0.5:
                col.delete([i])
                del docs[i]
            else:       # an update: a new row, last in row order
                docs.pop(i)
                docs[i] = sentence(rng)
                col.update({"body": docs[i]}, where="id = $1", params=[i])
        if past is None and rng.random() < 0.4:
            past = (db.version, dict(docs))
    answers_equal_the_oracle(col, docs, rng)
    if past is not None:
        answers_equal_the_oracle(col, past[1], rng, as_of=past[0], queries=4)
    db.close()


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_rows_the_maintainer_has_not_indexed_are_answered_the_same(tmp_path_factory,
                                                                   seed):
    rng = random.Random(seed)
    db, col = text_db(str(tmp_path_factory.mktemp("behind") / "b.varve"))
    first = {i: sentence(rng) for i in range(1, rng.randint(2, 60))}
    col.insert([{"id": i, "body": t, "tag": i % 3} for i, t in first.items()])
    db.engine.maintainer.finish()
    docs = dict(first)
    with db.engine.maintainer.hold():
        more = {len(first) + 1 + j: sentence(rng) for j in range(rng.randint(1, 40))}
        col.insert([{"id": i, "body": t, "tag": i % 3} for i, t in more.items()])
        docs.update(more)
        assert col.index_status("body")["unlinked"] > 0
        answers_equal_the_oracle(col, docs, rng)
    db.engine.maintainer.finish()
    assert col.index_status("body")["unlinked"] == 0
    answers_equal_the_oracle(col, docs, rng, queries=4)
    db.close()


def test_long_lists_pruned_by_their_blocks_give_the_exact_top_k():
    """Thousands of rows: lists of many blocks, where MaxScore drops the stopwords'
    lists from the candidates; the answer is still every row's exact BM25."""
    rng = random.Random(7)
    rare = [f"rare{j}" for j in range(40)]
    db, col = text_db()
    docs = {i: " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
            + (f" {rng.choice(rare)}" if rng.random() < 0.05 else "")
            for i in range(1, 4001)}
    col.insert([{"id": i, "body": t, "tag": i % 3} for i, t in docs.items()])
    rows = list(docs.items())
    for q in ("how do i read a file line by line", "what is a regular expression",
              "the of to in a is", "rare3 rare7 the", "apple rare1 -banana", "zebra rare2"):
        for k in (1, 10, 100):
            same(col.search(text=q, match="any", limit=k), oracle(rows, q, k))
    db.close()


# ---- hybrid, the client, LangChain ------------------------------------------------

def test_hybrid_fuses_the_any_word_ranking():
    """With the vector leg weighed 0, the fused order is the text leg's: the
    any-word BM25 ranking of the oracle."""
    rng = random.Random(5)
    db = vv.connect(":memory:")
    col = db.create_collection("docs", {"body": vv.Text(fts=True), "tag": vv.Int(),
                                        "v": vv.Vector(2)})
    docs = {i: sentence(rng) for i in range(1, 300)}
    col.insert([{"id": i, "body": t, "tag": i % 3, "v": [1.0, i / 300]}
                for i, t in docs.items()])
    rows = list(docs.items())
    for q in ("how do i read a file", "what is a regular expression", "banana -apple"):
        want = [i for i, _ in oracle(rows, q, 10)]
        hits = col.search(text=q, match="any", vector=[1.0, 0.0], weights=(1.0, 0.0))
        assert list(hits.ids) == want
        text_leg = hits.plan.find(TextTopK)
        assert text_leg.match == "any"
        filtered = col.search(text=q, match="any", vector=[1.0, 0.0], weights=(1.0, 0.0),
                              where="tag = 1")
        assert list(filtered.ids) == [i for i, _ in oracle(rows, q, 10, lambda i: i % 3 == 1)]
        # rerank orders the any-word candidates by distance
        assert set(col.search(text=q, match="any", rerank=[1.0, 0.0], candidates=10).ids) \
            == set(want)
    db.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from conftest import child_env
    from server_proc import ServerProcess
    path = str(tmp_path_factory.mktemp("served") / "served.varve")
    with ServerProcess(path, token="t-any", env=child_env()) as srv:
        yield srv


def test_the_client_and_the_async_client_send_match(served):
    import asyncio
    rng = random.Random(9)
    docs = {i: sentence(rng) for i in range(1, 200)}
    rows = list(docs.items())
    with vv.Client(served.url, token="t-any", timeout=120) as c:
        col = c.create_collection("docs", {"body": vv.Text(fts=True), "tag": vv.Int()})
        col.insert([{"id": i, "body": t, "tag": i % 3} for i, t in docs.items()])
        for _ in range(6):
            q, k = question(rng), rng.choice([1, 10, 50])
            same(col.search(text=q, match="any", limit=k), oracle(rows, q, k))
            same(col.search(text=q, match="any", limit=k, where="tag = 2"),
                 oracle(rows, q, k, lambda i: i % 3 == 2))
        [batch] = col.search_batch([{"text": "read a file", "match": "any"}])
        same(batch, oracle(rows, "read a file", 10))
        with pytest.raises(vv.OptionError):
            col.search(text="read", match="most")       # refused before sending
        # the server refuses it too (a raw body, past the client's check)
        import json
        import urllib.request
        req = urllib.request.Request(
            f"{served.url}/collections/docs/search", method="POST",
            data=json.dumps({"text": "read", "match": "most"}).encode(),
            headers={"Authorization": "Bearer t-any", "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=120)
        assert refused.value.code == 400

    async def main():
        async with vv.AsyncClient(served.url, token="t-any") as a:
            hits = await (await a.collection("docs")).search(text="read a file", match="any")
            same(hits, oracle(rows, "read a file", 10))
    asyncio.run(main())


def test_langchain_text_mode_answers_a_stopword_heavy_question(tmp_path):
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from varvedb.integrations.langchain import VarveVectorStore
    store = VarveVectorStore(DeterministicFakeEmbedding(size=8), path=str(tmp_path / "lc.varve"),
                             fts=True)
    store.add_texts(["A regular expression is a pattern that matches text.",
                     "Read the file one line at a time with a for loop.",
                     "Bananas are yellow."], ids=["re", "io", "fruit"])
    found = store.similarity_search("what's a regular expression?", k=2, mode="text")
    assert [d.id for d in found] == ["re", "io"]        # "a": in both, "regular": one
    assert store.similarity_search("what's a regular expression?", k=2, mode="text",
                                   match="all") == []
    hybrid = store.similarity_search("how do I read a file line by line", k=3, mode="hybrid")
    assert "io" in [d.id for d in hybrid]


# ---- SQL: PostgreSQL's query constructors -----------------------------------------

TSQUERIES = [
    ("to_tsquery", "apple | banana"), ("to_tsquery", "apple & !banana"),
    ("to_tsquery", "(apple | cherry) & line"), ("to_tsquery", "regular <-> expression"),
    ("to_tsquery", "ban:* | file"), ("to_tsquery", "how | do | i | read | a | file"),
    ("to_tsquery", "'apple' | !(banana & cherry) & file"),
    ("websearch_to_tsquery", "apple or banana"), ("websearch_to_tsquery", "apple -banana"),
    ("websearch_to_tsquery", '"regular expression" or cherry line'),
    ("websearch_to_tsquery", "how do i read a file"),
    ("plainto_tsquery", "read a file"), ("plainto_tsquery", "apple OR banana"),
]


def test_sql_reads_the_tsquery_constructors_into_the_query_syntax():
    """A tsquery's text is PostgreSQL's (the default configuration, english, drops
    its stop words); a varvedb column asked `body @@ q` reads the words as written,
    in varvedb's query syntax."""
    from varvedb.text import tsquery
    db, col = text_db()
    rows = db.sql("SELECT to_tsquery('a | b & !c'), to_tsquery('simple', NULL), "
                  "websearch_to_tsquery('\"a b\" or -c d'), plainto_tsquery('OR x*'), "
                  "to_tsquery(NULL), to_tsquery('simple', 'a | b & !c')").rows
    assert rows == [("'b' & !'c'", None, "'b' | !'c' & 'd'", "'x'", None,
                     "'a' | 'b' & !'c'")]
    for fn, text, want in (("to_tsquery", "a | b & !c", "a OR b -c"),
                           ("websearch_to_tsquery", '"a b" or -c d', '"a b" OR -c d'),
                           ("plainto_tsquery", "OR x*", '"OR" "x*"')):
        assert tsquery.varvedb_text(tsquery.CONSTRUCTORS[fn]("simple", text)) == want
    for bad, state in (("to_tsquery('a:A')", "0A000"), ("to_tsquery('a &')", "42601"),
                       ("to_tsquery('english', 'fat cat')", "42601"),
                       ("to_tsquery('french', 'a')", "0A000"),
                       ("to_tsquery('nosuch', 'a')", "42704"), ("to_tsquery(1)", "42883")):
        with pytest.raises(vv.SqlError) as e:
            db.sql(f"SELECT {bad}")
        assert e.value.sqlstate == state, bad
    # what varvedb's syntax has no form for, asked of a varvedb column
    for bad in ("to_tsquery('simple', 'a <2> b')", "to_tsquery('simple', '!a')",
                "websearch_to_tsquery('simple', 'a or -b')"):
        with pytest.raises(vv.SqlError) as e:
            db.sql(f"SELECT id FROM docs WHERE body @@ {bad}")
        assert e.value.sqlstate == "0A000", bad
    db.close()


def test_sql_or_forms_rank_as_match_any():
    rng = random.Random(4)
    db, col = text_db()
    docs = {i: sentence(rng) for i in range(1, 300)}
    col.insert([{"id": i, "body": t, "tag": i % 3} for i, t in docs.items()])
    want = oracle(list(docs.items()), "how do i read a file", 10)
    for form in ("to_tsquery('how | do | i | read | a | file')",
                 "websearch_to_tsquery('how or do or i or read or a or file')"):
        got = db.sql(f"SELECT id, bm25(body, {form}) FROM docs "
                     f"ORDER BY bm25(body, {form}) DESC LIMIT 10").rows
        assert [i for i, _ in got] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-6)
    db.close()


def test_sql_tsquery_matches_the_rows_postgresql_matches(pg_conn):
    """No ranking: the rows each query matches, PostgreSQL's 'simple' configuration
    (no stopwords, no stemming) against the column's analyzer, on the same texts."""
    rng = random.Random(12)
    docs = {i: sentence(rng) or "" for i in range(1, 120)}
    db, col = text_db()
    col.insert([{"id": i, "body": t, "tag": 0} for i, t in docs.items()])
    pg_conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text)")
    with pg_conn.cursor() as cur:
        cur.executemany("INSERT INTO docs VALUES (%s, %s)", list(docs.items()))
    found = 0
    for fn, q in TSQUERIES:
        want = [r[0] for r in pg_conn.execute(
            f"SELECT id FROM docs WHERE to_tsvector('simple', body) @@ {fn}('simple', %s) "
            "ORDER BY id", (q,)).fetchall()]
        got = [r[0] for r in db.sql(f"SELECT id FROM docs WHERE body @@ {fn}('simple', $1) "
                                    "ORDER BY id", [q]).rows]
        assert got == want, (fn, q)
        found += bool(want)
    assert found >= len(TSQUERIES) - 3      # the OR forms find rows; long ANDs may not
    db.close()
