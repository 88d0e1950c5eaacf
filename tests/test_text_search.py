"""Full-text search end to end: vv.Text(fts=True) fields kept current by every
write, BM25 scores against a plain-Python oracle over the rows a snapshot sees,
time travel, rollback, checkpoints (no text analyzed again at open), where=
`@@`, hybrid (reciprocal-rank fusion) and rerank, vectors filled by an
embedder, SQL's @@ / bm25() / snippet() / highlight() / rrf() / embed(), and
the `varvedb search` command."""
from __future__ import annotations

import math
import random
import re
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from conftest import file_digest
from varvedb import embed as vv_embed
from varvedb.errors import QuerySyntaxError

WORDS = ("apple banana cherry delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa").split()


def fold(word: str) -> str:
    """The analyzer's folding for plain Latin words (the oracle's tokenizer)."""
    word = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in word if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    return [fold(w) for w in re.findall(r"\w+", text)]


def oracle(docs: dict, query_terms: list[str], k1=1.2, b=0.75) -> dict:
    """BM25 of every document containing all `query_terms` (docs: id -> text)."""
    toks = {i: tokens(t) for i, t in docs.items() if t is not None}
    n = len(toks)
    avgdl = sum(len(t) for t in toks.values()) / n if n else 0.0
    out = {}
    for i, t in toks.items():
        if not all(q in t for q in query_terms):
            continue
        score = 0.0
        for q in dict.fromkeys(query_terms):
            df = sum(1 for u in toks.values() if q in u)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = t.count(q)
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(t) / avgdl))
        out[i] = score
    return out


def ranked(scores: dict, k: int) -> list:
    return sorted(scores, key=lambda i: (-scores[i], i))[:k]


def text_db(path, **text_opts):
    db = vv.connect(path)
    col = db.create_collection("docs", {"body": vv.Text(fts=True, **text_opts),
                                        "tag": vv.Int(), "emb": vv.Vector(4)})
    return db, col


def random_doc(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))


def check_scores(col, docs: dict, query: str, terms: list, as_of=None, k=10):
    want = oracle(docs, terms)
    hits = col.search(text=query, limit=k, as_of=as_of)
    assert hits.ids == ranked(want, k) or _same_up_to_ties(hits, want, k)
    for h in hits:
        assert h.score == pytest.approx(want[h.id], rel=1e-5)


def _same_up_to_ties(hits, want: dict, k: int) -> bool:
    """float32 scores may order near-equal scores differently; the sets of scores agree."""
    top = sorted(want.values(), reverse=True)[:k]
    return len(hits) == len(top) and np.allclose(sorted(hits.scores, reverse=True), top,
                                                 rtol=1e-5)


# ---- scores and statistics --------------------------------------------------------

def test_bm25_scores_equal_the_reference_on_a_small_corpus(db_path):
    db, col = text_db(db_path)
    docs = {1: "apple banana apple", 2: "banana cherry", 3: "apple cherry cherry delta",
            4: "Échos d'Apple", 5: None, 6: "delta delta delta delta apple"}
    col.insert([{"id": i, "body": t} for i, t in docs.items()])
    for query, terms in (("apple", ["apple"]), ("cherry apple", ["cherry", "apple"]),
                         ("delta", ["delta"]), ("echos", ["echos"])):
        check_scores(col, docs, query, terms)
    assert col.search(text="nothing").ids == []
    db.close()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6))
def test_statistics_stay_exact_through_inserts_updates_and_deletes(tmp_path_factory, seed):
    """After random writes, the live database scores every query as a database
    built from scratch with the documents left (the oracle too)."""
    rng = random.Random(seed)
    path = str(tmp_path_factory.mktemp("fts") / "a.varve")
    db, col = text_db(path)
    docs: dict = {}
    next_id = 1
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        if op < 0.5 or not docs:
            batch = {next_id + j: random_doc(rng) for j in range(rng.randint(1, 8))}
            next_id += len(batch)
            col.insert([{"id": i, "body": t} for i, t in batch.items()])
            docs.update(batch)
        elif op < 0.8:
            i = rng.choice(sorted(docs))
            docs[i] = random_doc(rng)
            col.update({"body": docs[i]}, where="id = $1", params=[i])
        else:
            i = rng.choice(sorted(docs))
            del docs[i]
            col.delete([i])
    fresh_db, fresh = text_db(path + ".fresh")
    if docs:
        fresh.insert([{"id": i, "body": t} for i, t in docs.items()])
    for word in rng.sample(WORDS, 3):
        live, rebuilt = col.search(text=word, limit=50), fresh.search(text=word, limit=50)
        # every match (limit 50 > the documents); equal scores are ordered by row,
        # and an update moved its document to a new row, so compare id -> score
        assert dict(zip(live.ids, live.scores)) == dict(zip(rebuilt.ids, rebuilt.scores))
        assert list(live.scores) == sorted(live.scores, reverse=True)
        check_scores(col, docs, word, [word], k=50)
    db.close()
    fresh_db.close()


def test_text_queries_travel_in_time(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": 1, "body": "apple banana"}, {"id": 2, "body": "apple"}])
    v1 = db.version
    col.update({"body": "cherry"}, where="id = 2")
    col.insert([{"id": 3, "body": "apple apple cherry"}])
    v2 = db.version
    col.delete([1])
    at_v1 = {1: "apple banana", 2: "apple"}
    at_v2 = {1: "apple banana", 2: "cherry", 3: "apple apple cherry"}
    now = {2: "cherry", 3: "apple apple cherry"}
    check_scores(col, at_v1, "apple", ["apple"], as_of=v1)
    check_scores(col, at_v2, "apple", ["apple"], as_of=v2)
    check_scores(col, now, "apple", ["apple"])
    check_scores(col, at_v2, "cherry", ["cherry"], as_of=v2)
    assert col.search(text="cherry", as_of=v1).ids == []
    db.close()


def test_a_rolled_back_transaction_leaves_no_postings(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": 1, "body": "apple"}])
    with pytest.raises(RuntimeError):
        with db.transaction():
            col.insert([{"id": 2, "body": "apple banana"}])
            assert col.search(text="banana").ids == [2]      # the transaction sees its rows
            raise RuntimeError("undo")
    assert col.search(text="banana").ids == []
    col.insert([{"id": 3, "body": "banana split"}])
    check_scores(col, {1: "apple", 3: "banana split"}, "banana", ["banana"])
    db.close()


def test_checkpoint_and_reopen_answer_the_same_without_analyzing_again(db_path, monkeypatch):
    db, col = text_db(db_path)
    rng = random.Random(7)
    col.insert([{"id": i, "body": random_doc(rng)} for i in range(1, 400)])
    col.update({"body": "golf golf hotel"}, where="id < 20")
    queries = ["golf", "hotel india", '"golf hotel"', "kil*", "apple OR banana -cherry"]
    before = [(h.ids, list(h.scores)) for h in (col.search(text=q, limit=20) for q in queries)]
    db.checkpoint()
    db.close()
    from varvedb.text.analyzer import Analyzer

    def refuse(self, texts):
        raise AssertionError("open analyzed text again")
    monkeypatch.setattr(Analyzer, "analyze_batch", refuse)
    with vv.connect(db_path, readonly=True) as db2:
        col2 = db2["docs"]
        after = [(h.ids, list(h.scores)) for h in (col2.search(text=q, limit=20)
                                                    for q in queries)]
    assert after == before


def test_reopen_without_a_checkpoint_replays_into_the_same_index(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": i, "body": f"apple {WORDS[i % 16]} {WORDS[(i * 7) % 16]}"}
                for i in range(1, 200)])
    col.delete([5, 6, 7])
    before = col.search(text="apple mike", limit=30)
    db.close()
    with vv.connect(db_path) as db2:
        after = db2["docs"].search(text="apple mike", limit=30)
    assert after.ids == before.ids and np.array_equal(after.scores, before.scores)


# ---- query syntax --------------------------------------------------------------

def test_phrase_prefix_or_not_and_parentheses(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": 1, "body": "the quick brown fox"}, {"id": 2, "body": "brown quick fox"},
                {"id": 3, "body": "quickly browned"}, {"id": 4, "body": "lazy dog"},
                {"id": 5, "body": "quick dog"}])

    def ids(q):
        return sorted(col.search(text=q, limit=100).ids)
    assert ids('"quick brown"') == [1]
    assert ids("quick brown") == [1, 2]
    assert ids("quick*") == [1, 2, 3, 5]
    assert ids("fox OR dog") == [1, 2, 4, 5]
    assert ids("quick -fox") == [5]
    assert ids("(fox OR lazy) -brown") == [4]
    db.close()


@pytest.mark.parametrize("query", ['"unclosed', "(apple", "apple OR", "-", "", "   "])
def test_a_malformed_query_is_a_typed_error_and_changes_nothing(db_path, query):
    db, col = text_db(db_path)
    col.insert([{"id": 1, "body": "apple"}])
    db.close()
    digest = file_digest(db_path)
    with vv.connect(db_path) as db2:
        with pytest.raises(QuerySyntaxError) as e:
            db2["docs"].search(text=query)
        assert e.value.position is not None and 1 <= e.value.position <= max(1, len(query) + 1)
        with pytest.raises(QuerySyntaxError):
            db2["docs"].find(where="body @@ $1", params=[query])
    assert file_digest(db_path) == digest


def test_stemming_accents_and_cjk(db_path):
    db = vv.connect(db_path)
    col = db.create_collection("docs", {"body": vv.Text(fts=True, stem="english"),
                                        "plain": vv.Text(fts=True)})
    col.insert([{"id": 1, "body": "running runners", "plain": "Café crème"},
                {"id": 2, "body": "the runner ran", "plain": "東京大学の研究"},
                {"id": 3, "body": "swimming", "plain": "Straße"}])
    assert sorted(col.search(text="run", text_field="body").ids) == [1]
    assert sorted(col.search(text="runner", text_field="body").ids) == [1, 2]
    assert col.search(text="cafe", text_field="plain").ids == [1]
    assert col.search(text="CRÈME", text_field="plain").ids == [1]
    assert col.search(text="strasse", text_field="plain").ids == [3]
    assert col.search(text="京大", text_field="plain").ids == [2]
    assert col.search(text="東京大学", text_field="plain").ids == [2]
    with pytest.raises(vv.UnknownFieldError):
        col.search(text="run")                  # two full-text fields: say which
    with pytest.raises(vv.VarveError):
        vv.Text(fts=True, stem="klingon")
    db.close()


# ---- filters, hybrid, rerank ---------------------------------------------------

def test_a_filtered_text_query_is_never_short_of_k(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": i, "body": "apple " * (1 + i % 5), "tag": i % 10} for i in range(1, 3001)])
    hits = col.search(text="apple", where="tag = 7", limit=50)
    assert len(hits) == 50
    assert all(i % 10 == 7 for i in hits.ids)
    every = col.search(text="apple", where="tag = 7", limit=1000)
    assert len(every) == 300
    assert hits.ids == every.ids[:50]
    db.close()


def test_at_at_in_a_filter_is_the_text_match_with_sql_nulls(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": 1, "body": "apple pie"}, {"id": 2, "body": None},
                {"id": 3, "body": "banana"}])
    assert col.find(where="body @@ 'apple'").ids == [1]
    assert col.find(where="NOT (body @@ 'apple')").ids == [3]      # null stays unknown
    assert col.count(where="body @@ 'apple OR banana'") == 2
    with pytest.raises(vv.FilterError):
        col.find(where="tag @@ 'apple'")
    db.close()


def _unit(v):
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v)


def test_hybrid_fuses_the_two_rankings_by_reciprocal_rank(db_path):
    db, col = text_db(db_path)
    rng = np.random.default_rng(3)
    r = random.Random(3)
    rows = [{"id": i, "body": random_doc(r), "emb": _unit(rng.normal(size=4))}
            for i in range(1, 301)]
    col.insert(rows)
    q = _unit(rng.normal(size=4))
    text = col.search(text="apple", limit=40)
    vec = col.search(q, limit=40, exact=True)
    fused: dict = {}
    for w, leg in ((1.0, text.ids), (2.0, vec.ids)):
        for rank, i in enumerate(leg, 1):
            fused[i] = fused.get(i, 0.0) + w / (60 + rank)
    want = sorted(fused, key=lambda i: (-fused[i], i))[:10]
    hits = col.search(q, text="apple", limit=10, candidates=40, weights=(1.0, 2.0), exact=True)
    assert hits.ids == want
    assert np.allclose(hits.scores, [fused[i] for i in want])
    plan = col.explain("search", vector=q, text="apple", limit=10, candidates=40)
    d = plan.to_dict()
    fusion = d["input"]["input"]
    assert fusion["node"] == "Fusion" and fusion["rrf_k"] == 60
    assert [leg["node"] for leg in fusion["input"]] == ["TextTopK", "VectorTopK"]
    assert "Fusion rrf k=60" in str(plan) and "TextTopK body" in str(plan)
    db.close()


def test_rerank_orders_the_text_candidates_by_exact_distance(db_path):
    db, col = text_db(db_path)
    rng = np.random.default_rng(5)
    r = random.Random(5)
    vecs = {i: _unit(rng.normal(size=4)) for i in range(1, 201)}
    col.insert([{"id": i, "body": random_doc(r), "emb": v} for i, v in vecs.items()])
    col.insert([{"id": 500, "body": "apple apple apple", "emb": None}])
    q = _unit(rng.normal(size=4))
    cands = col.search(text="apple", limit=30).ids
    want = sorted((i for i in cands if i in vecs),
                  key=lambda i: (1 - float(np.dot(vecs[i], q)), i))[:10]
    hits = col.search(text="apple", rerank=q, candidates=30, limit=10)
    assert hits.ids == want
    rerank = hits.plan.to_dict()["input"]["input"]
    assert rerank["node"] == "Rerank" and rerank["input"]["node"] == "TextTopK"
    db.close()


def test_search_argument_errors(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": 1, "body": "apple", "emb": [1, 0, 0, 0]}])
    with pytest.raises(vv.VarveError):
        col.search(text=3)
    with pytest.raises(vv.VarveError):
        col.search(rerank=[1, 0, 0, 0])                 # rerank needs text=
    with pytest.raises(vv.VarveError):
        col.search([1, 0, 0, 0], text="apple", rerank=[1, 0, 0, 0])
    with pytest.raises(vv.VarveError):
        col.search([1, 0, 0, 0], text="apple", weights=(1, -1))
    with pytest.raises(vv.VarveError):
        col.search(text="apple", vector_text="apple")   # emb names no embedder
    other = db.create_collection("plain", {"body": vv.Text()})
    with pytest.raises(vv.UnknownFieldError):
        other.search(text="apple")
    db.close()


# ---- embedders --------------------------------------------------------------------

class HashingEmbedder:
    """A small deterministic embedder: hashed bag of words (a user's own embedder
    registered by name, as the Embedder protocol allows)."""
    name = "test-hashing"
    dim = 8

    def __init__(self):
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in tokens(t):
                out[i, sum(map(ord, w)) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


_HASHING = HashingEmbedder()


@pytest.fixture
def hashing():
    vv_embed.register("test-hashing", _HASHING)     # a name is registered once: the same one
    return _HASHING


def test_vectors_are_filled_from_their_source_text(db_path, hashing):
    db = vv.connect(db_path)
    col = db.create_collection("docs", {
        "body": vv.Text(fts=True),
        "emb": vv.Vector(8, embed="test-hashing", source="body")})
    col.insert([{"id": 1, "body": "apple banana"}, {"id": 2, "body": "cherry"},
                {"id": 3, "body": None}, {"id": 4, "body": "given", "emb": [1] * 8}])
    got = {h.id: h["emb"] for h in col.find(select=["emb"])}
    assert np.allclose(got[1], hashing.embed(["apple banana"])[0])
    assert got[3] is None and np.allclose(got[4], np.ones(8))
    col.update({"body": "cherry"}, where="id = 1")          # the text changed: embedded again
    assert np.allclose(col.get(1, select=["emb"])["emb"], hashing.embed(["cherry"])[0])
    alone = col.search(vector_text="cherry", limit=2)          # a vector search by text
    assert alone.ids[0] in (1, 2) and "VectorTopK" in str(alone.plan)
    assert "TextTopK" not in str(alone.plan)
    hits = col.search(vector_text="cherry", text="cherry", limit=5)
    assert hits.ids[:2] == [1, 2] or hits.ids[:2] == [2, 1]
    with pytest.raises(vv.SchemaError):
        col.drop_field("body")                  # it is what emb embeds
    with pytest.raises(vv.SchemaError):
        vv.Vector(8, embed="test-hashing")      # no source
    with pytest.raises(vv.SchemaError):
        db.create_collection("bad", {"emb": vv.Vector(8, embed="test-hashing", source="nope")})
    db.close()
    with vv.connect(db_path) as db2:            # the schema keeps both names
        f = db2["docs"].table.schema.fields["emb"]
        assert (f.embed, f.source) == ("test-hashing", "body")


# ---- SQL ------------------------------------------------------------------------------

def test_sql_match_bm25_snippet_highlight_and_rrf(db_path, hashing):
    db = vv.connect(db_path)
    db.sql("CREATE TABLE notes (id bigint PRIMARY KEY, body text, emb vector(8))")
    db.sql("ALTER TABLE notes DROP COLUMN body")
    db["notes"].add_field("body", vv.Text(fts=True))
    col = db["notes"]
    docs = {1: "Apple pie with apple cream", 2: "banana bread", 3: "an apple a day",
            4: "cherry and apple and banana tarts for the whole family"}
    col.insert([{"id": i, "body": t, "emb": hashing.embed([t])[0]} for i, t in docs.items()])
    r = db.sql("SELECT id FROM notes WHERE body @@ 'apple' ORDER BY id")
    assert r.rows == [(1,), (3,), (4,)]
    r = db.sql("SELECT id, bm25(body, $1) AS s FROM notes ORDER BY bm25(body, $1) DESC LIMIT 2",
               ["apple"])
    api = col.search(text="apple", limit=2)
    assert [row[0] for row in r.rows] == api.ids
    assert np.allclose([row[1] for row in r.rows], api.scores)
    assert "TextTopK" in str(r.plan)
    # bm25() in a select list scores as the top-k does
    r2 = db.sql("SELECT id, bm25(body, 'apple') FROM notes WHERE id = $1", [api.ids[0]])
    assert r2.rows[0][1] == pytest.approx(api.scores[0], rel=1e-6)
    r = db.sql("SELECT highlight(body, 'apple'), snippet(body, 'banana', '[', ']', '..', 4) "
               "FROM notes WHERE id = 4")
    hl, sn = r.rows[0]
    assert hl == "cherry and [apple] and banana tarts for the whole family".replace(
        "[apple]", "<b>apple</b>")
    assert "[banana]" in sn and sn.startswith("..") and sn.endswith("..")
    r = db.sql("SELECT id FROM notes ORDER BY rrf(bm25(body, 'apple'), "
               "emb <=> embed('apple', 'test-hashing')) DESC LIMIT 3")
    assert len(r.rows) == 3 and "Fusion" in str(r.plan)
    fused = col.search(hashing.embed(["apple"])[0], text="apple", limit=3)
    assert [row[0] for row in r.rows] == fused.ids
    with pytest.raises(vv.VarveError) as e:     # emb names no embedder: say which
        db.sql("SELECT id FROM notes ORDER BY emb <=> embed('apple') LIMIT 3")
    assert e.value.sqlstate == "42883"
    with pytest.raises(vv.VarveError) as e:
        db.sql("SELECT id FROM notes WHERE body @@ '(apple'")
    assert e.value.sqlstate == "42601"
    with pytest.raises(vv.VarveError):
        db.sql("SELECT bm25(id, 'x') FROM notes")
    db.close()


# ---- the command ---------------------------------------------------------------------

def test_varvedb_search_command(db_path):
    db, col = text_db(db_path)
    col.insert([{"id": 1, "body": "apple pie", "tag": 1}, {"id": 2, "body": "apple", "tag": 2}])
    db.close()
    # the CLI in this process (a spawned python apiece cost its imports; the entry
    # point itself is tests/test_cli_and_docs.py's)
    from click.testing import CliRunner
    from varvedb.cli import main
    out = CliRunner().invoke(main, ["search", db_path, "docs", "--text", "apple",
                                    "--where", "tag = 2"])
    assert out.exit_code == 0, out.output
    assert out.stdout.split()[1] == "2" and len(out.stdout.splitlines()) == 1
    bad = CliRunner().invoke(main, ["search", db_path, "docs", "--text", '"x'])
    assert bad.exit_code == 1 and "quote" in bad.stderr.lower()
