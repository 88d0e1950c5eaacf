"""BM25 scored with statistics a search brings (text/corpus.py CorpusStats):
the mechanism a sharded collection's full-text search stands on, without Ray.
Rows split over several collections, each scored with the parts' statistics
summed, score every row exactly as one collection holding every row does, with
a part's maintainer held back (its newest rows scored by the exact scan) too."""
from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import varvedb as vv
from test_text_deferred import QUERIES, random_doc, text_db
from varvedb.errors import FieldTypeError, OptionError
from varvedb.query.request import Search
from varvedb.text.corpus import CorpusStats


def scored(col, request: Search, corpus: CorpusStats | None = None) -> dict:
    """{id: score} of every match of `request` (scored with `corpus` if given)."""
    if corpus is not None:
        request = msgspec.structs.replace(
            request, text=msgspec.structs.replace(request.text, corpus=corpus))
    hits = col.run(request)
    return dict(zip(hits.ids, hits.scores.tolist()))


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), parts=st.integers(2, 3))
def test_parts_scored_with_summed_statistics_score_as_one_collection(
        tmp_path_factory, seed, parts):
    rng = random.Random(seed)
    base = tmp_path_factory.mktemp("corpus")
    docs = {i: random_doc(rng) for i in range(1, rng.randint(2, 40))}
    behind = {i: random_doc(rng) for i in range(100, 100 + rng.randint(1, 12))}
    whole_db, whole = text_db(str(base / "whole.varve"))
    whole.insert([{"id": i, "body": t} for i, t in {**docs, **behind}.items()])
    split = [text_db(str(base / f"part{p}.varve")) for p in range(parts)]
    for i, t in docs.items():
        split[rng.randrange(parts)][1].insert({"id": i, "body": t})
    held = split[0][0].engine.maintainer
    with held.hold():       # part 0's newest rows not indexed: scored by the exact scan
        split[0][1].insert([{"id": i, "body": t} for i, t in behind.items()])
        assert split[0][1].index_status("body")["unlinked"] >= len(behind)
        for q in QUERIES:
            for match in ("all", "any"):
                request = Search.of(text=q, match=match, limit=1000)
                stats = [c.corpus_stats(request) for _, c in split]
                corpus = sum(stats[1:], stats[0])
                assert corpus == whole.corpus_stats(request)
                want = scored(whole, request)
                got: dict = {}
                for _, c in split:
                    got.update(scored(c, request, corpus))
                assert got == want, (q, match)
                # a collection scored with its own statistics, given, answers as alone
                assert scored(whole, request, whole.corpus_stats(request)) == want
    for db, _ in split:
        db.close()
    whole_db.close()


def test_refused_statistics(tmp_path):
    db, col = text_db(str(tmp_path / "f.varve"))
    col.insert([{"id": 1, "body": "apple banana"}, {"id": 2, "body": "banana"}])
    request = Search.of(text="apple banana", limit=5)
    stats = col.corpus_stats(request)
    assert (stats.docs, stats.length) == (2, 3)
    assert stats == CorpusStats(docs=2, length=3, df={("Term", "apple"): 1,
                                                      ("Term", "banana"): 2})
    prefix = col.corpus_stats(Search.of(text='ban* "apple banana"', limit=5))
    assert prefix.df == {("Prefix", "ban"): 2, ("Phrase", ("apple", "banana")): 1}
    other = col.corpus_stats(Search.of(text="cherry", limit=5))
    with pytest.raises(OptionError, match="another query"):
        scored(col, request, other)
    for bad in ({"docs": -1, "length": 0, "df": {}}, {"docs": 1, "length": 0, "df": {"a": 2}},
                {"docs": 1.0, "length": 0, "df": {}}, {"docs": 1, "length": 0, "df": []}):
        with pytest.raises(FieldTypeError, match="counts"):
            CorpusStats(**bad)
    with pytest.raises(OptionError, match="in process only"):
        msgspec.structs.replace(request, text=msgspec.structs.replace(
            request.text, corpus=stats)).to_wire()
    with pytest.raises(FieldTypeError, match="text query"):
        col.corpus_stats(Search.of(vector=[1.0], limit=5))
    db.close()
