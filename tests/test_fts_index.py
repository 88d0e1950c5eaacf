"""FtsIndex (index/fts.py, kernels/bm25.py) against a plain-Python BM25 oracle."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varvedb.index.fts import FtsIndex

# ---------------------------------------------------------------- stand-ins
# The analyzer and query nodes of varvedb.text have the same interface; the
# index dispatches on node class names, so these serve in their place.


class Batch:
    pass


class WordAnalyzer:
    def analyze(self, text):
        return re.findall(r"\w+", text.lower())

    def analyze_batch(self, texts):
        vocab: dict[str, int] = {}
        doc, pos, term, lengths = [], [], [], []
        for d, text in enumerate(texts):
            words = self.analyze(text)
            lengths.append(len(words))
            for p, w in enumerate(words):
                doc.append(d)
                pos.append(p)
                term.append(vocab.setdefault(w, len(vocab)))
        b = Batch()
        b.doc = np.array(doc, np.int32)
        b.pos = np.array(pos, np.int32)
        b.term = np.array(term, np.int32)
        b.vocab = list(vocab)
        b.lengths = np.array(lengths, np.int32)
        return b


# the query language's own nodes (the index dispatches on their class names)
from varvedb.text.query import And, Not, Or, Phrase, Prefix, Term  # noqa: E402


# ---------------------------------------------------------------- the oracle

K1, B = 1.2, 0.75


def leaf_tf(node, words):
    if isinstance(node, Term):
        return words.count(node.text)
    if isinstance(node, Prefix):
        return sum(w.startswith(node.text) for w in words)
    m = len(node.terms)
    return sum(tuple(words[p:p + m]) == node.terms for p in range(len(words) - m + 1))


def oracle_match(node, words):
    if words is None:
        return False
    if isinstance(node, And):
        return all(oracle_match(c, words) for c in node.children)
    if isinstance(node, Or):
        return any(oracle_match(c, words) for c in node.children)
    if isinstance(node, Not):
        return not oracle_match(node.child, words)
    return leaf_tf(node, words) > 0


def scored_leaves(node, negated=False):
    if isinstance(node, (And, Or)):
        return [x for c in node.children for x in scored_leaves(c, negated)]
    if isinstance(node, Not):
        return []
    return [node]


def oracle_scores(node, docs, visible):
    """BM25 of every row (0 where not matching), written straight from the formula."""
    seen = [i for i, d in enumerate(docs) if d is not None and i < len(visible) and visible[i]]
    N = len(seen)
    total = sum(len(docs[i]) for i in seen)
    avgdl = total / N if N and total else 1.0
    out = []
    for words in docs:
        if not oracle_match(node, words):
            out.append(0.0)
            continue
        s = 0.0
        for leaf in scored_leaves(node):
            tf = leaf_tf(leaf, words)
            if tf:
                df = sum(1 for i in seen if leaf_tf(leaf, docs[i]) > 0)
                idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
                s += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(words) / avgdl))
        out.append(s)
    return np.array(out)


def build(texts, pieces=(None,)):
    """An index over `texts` (None = null), extended at the cut points `pieces`."""
    words = sorted({t for t in texts if t is not None})
    codes = np.array([-1 if t is None else words.index(t) for t in texts], np.int64)
    ix = FtsIndex("body", WordAnalyzer(), K1, B)
    cuts = sorted({0, len(texts), *[c for c in pieces if c is not None and c <= len(texts)]})
    for lo, hi in zip(cuts, cuts[1:]):
        ix.add(lo, hi, codes[lo:hi], words)
    return ix


def tokenized(texts):
    return [None if t is None else WordAnalyzer().analyze(t) for t in texts]


CORPUS = [
    "the cat sat on the mat",
    "a dog and a cat",
    None,
    "the quick brown fox jumps over the lazy dog",
    "",
    "cat cat cat",
    "dogma and dogs",
    "the cat sat on the mat",
    "Mat the cat",
]

QUERIES = [
    Term("cat"), Term("the"), Term("nothing"), Prefix("dog"), Prefix("ca"),
    Phrase(("the", "cat")), Phrase(("cat", "cat")), Phrase(("sat", "the")),
    And((Term("cat"), Term("the"))), Or((Term("fox"), Term("mat"))),
    And((Term("cat"), Not(Term("dog")))), And((Prefix("do"), Not(Phrase(("a", "dog"))))),
    Or((And((Term("cat"), Term("mat"))), Term("dogs"))), Or((Term("lazy"), Not(Term("cat")))),
]


def test_bm25_equals_the_reference_on_a_small_corpus():
    ix = build(CORPUS)
    docs = tokenized(CORPUS)
    everyone = np.ones(len(CORPUS), bool)
    partial = np.array([True, True, True, False, True, True, False, True, True])
    for visible in (everyone, partial):
        for q in QUERIES:
            want = oracle_scores(q, docs, visible)
            got = ix.score_rows(q, np.arange(len(CORPUS)), visible)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
            match = np.array([oracle_match(q, d) for d in docs])
            assert (ix.match(q, everyone) == match).all()
            rows, scores = ix.top_k(q, 4, visible, visible)
            hits = [i for i in range(len(docs)) if match[i] and visible[i]]
            ranked = sorted(hits, key=lambda i: (-np.float32(want[i]), i))[:4]
            assert list(rows) == ranked
            np.testing.assert_allclose(scores, want[ranked], rtol=1e-6)


def test_stats_are_the_visible_rows():
    ix = build(CORPUS)
    s = ix.stats(np.ones(len(CORPUS), bool))
    assert s.docs == 8 and s.avgdl == pytest.approx(35 / 8)
    visible = np.zeros(len(CORPUS), bool)
    visible[[0, 5]] = True
    s = ix.stats(visible)
    assert s.docs == 2 and s.avgdl == pytest.approx(4.5)
    assert list(ix.doc_lengths()) == [6, 5, 0, 9, 0, 3, 3, 6, 3]
    # the filter (allow) never changes the scores, visibility does
    everyone = np.ones(len(CORPUS), bool)
    only5 = np.zeros(len(CORPUS), bool)
    only5[5] = True
    assert ix.top_k(Term("cat"), 3, only5, everyone)[1][0] == ix.score_rows(
        Term("cat"), np.array([5]), everyone)[0]
    assert ix.top_k(Term("cat"), 3, only5, only5)[1][0] != ix.score_rows(
        Term("cat"), np.array([5]), everyone)[0]


def test_phrase_and_prefix_semantics():
    texts = ["a a a", "b a b a", "ab abc a", "a b", "b a"]
    ix = build(texts)
    every = np.ones(len(texts), bool)
    assert list(ix.match(Phrase(("a", "a")), every)) == [True, False, False, False, False]
    assert list(ix.match(Phrase(("a", "b")), every)) == [False, True, False, True, False]
    assert list(ix.match(Phrase(("b", "a", "b")), every)) == [False, True, False, False, False]
    assert list(ix.match(Prefix("ab"), every)) == [False, False, True, False, False]
    assert list(ix.match(Prefix("a"), every)) == [True] * 5
    docs = tokenized(texts)
    for q in (Phrase(("a", "a")), Prefix("a"), Prefix("ab"), Phrase(("b", "a"))):
        np.testing.assert_allclose(ix.score_rows(q, np.arange(5), every),
                                   oracle_scores(q, docs, every), rtol=1e-6)
    # "a a" occurs twice in "a a a" (overlapping starts): tf 2 beats a tf-1 row
    assert leaf_tf(Phrase(("a", "a")), docs[0]) == 2


# ---------------------------------------------------------------- random corpora

WORDS = ["a", "b", "c", "ab", "abc", "ba", "d", "cd"]
text_st = st.one_of(st.none(), st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join))


def leaf_st():
    return st.one_of(
        st.sampled_from(WORDS + ["zz"]).map(Term),
        st.sampled_from(["a", "ab", "b", "c", "z"]).map(Prefix),
        st.lists(st.sampled_from(WORDS[:4]), min_size=2, max_size=3).map(
            lambda w: Phrase(tuple(w))),
    )


query_st = st.recursive(
    leaf_st(),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda c: And(tuple(c))),
        st.lists(inner, min_size=1, max_size=3).map(lambda c: Or(tuple(c))),
        st.tuples(inner, inner).map(lambda c: And((c[0], Not(c[1])))),
    ),
    max_leaves=5,
)


@st.composite
def corpus_st(draw):
    # some corpora long enough for posting lists of several blocks
    n = draw(st.sampled_from([5, 40, 300]))
    texts = draw(st.lists(text_st, min_size=n, max_size=n))
    pieces = draw(st.lists(st.integers(0, n), max_size=4))
    return texts, pieces


def masks(draw, n):
    kind = draw(st.sampled_from(["all", "random", "short"]))
    if kind == "all":
        return np.ones(n, bool)
    m = n if kind == "random" else draw(st.integers(0, n))
    bits = draw(st.lists(st.booleans(), min_size=m, max_size=m))
    return np.array(bits, bool)


SLOW = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SLOW
@given(corpus_st(), st.lists(query_st, min_size=1, max_size=3), st.data())
def test_random_queries_against_the_oracle(corpus, queries, data):
    texts, pieces = corpus
    ix = build(texts, pieces)
    docs = tokenized(texts)
    n = len(texts)
    visible = masks(data.draw, n)
    bits = data.draw(st.lists(st.booleans(), min_size=len(visible), max_size=len(visible)))
    allow = visible & np.array(bits, bool) if data.draw(st.booleans()) else visible
    for q in queries:
        assert list(ix.match(q, np.ones(n, bool))) == [oracle_match(q, d) for d in docs]
        want = oracle_scores(q, docs, visible)
        np.testing.assert_allclose(ix.score_rows(q, np.arange(n), visible), want,
                                   rtol=1e-5, atol=1e-6)
        k = data.draw(st.sampled_from([1, 3, 10, 1000]))
        rows, scores = ix.top_k(q, k, allow, visible, exhaustive=True)
        pruned = ix.top_k(q, k, allow, visible)
        assert list(pruned[0]) == list(rows)
        assert list(pruned[1]) == list(scores)
        hits = [i for i in range(len(allow)) if allow[i] and oracle_match(q, docs[i])]
        assert len(rows) == min(k, len(hits))     # never short of k
        assert set(rows) <= set(hits)
        np.testing.assert_allclose(scores, want[rows], rtol=1e-5, atol=1e-6)
        assert all(scores[:-1] >= scores[1:])


def answers(ix, n, queries):
    every = np.ones(n, bool)
    half = np.arange(n) % 2 == 0
    out = []
    for q in queries:
        out.append(ix.match(q, every).tolist())
        for vis in (every, half):
            r, s = ix.top_k(q, 5, vis, vis)
            out.append((r.tolist(), s.tolist()))
            out.append(ix.score_rows(q, np.arange(n), vis).tolist())
    out.append(ix.doc_lengths().tolist())
    return out


@SLOW
@given(corpus_st(), st.lists(query_st, min_size=1, max_size=3))
def test_extend_in_pieces_equals_one_extend(corpus, queries):
    texts, pieces = corpus
    assert answers(build(texts, pieces), len(texts), queries) == answers(
        build(texts), len(texts), queries)


@SLOW
@given(corpus_st(), st.lists(text_st, min_size=1, max_size=50), st.integers(0, 300),
       st.lists(query_st, min_size=1, max_size=3))
def test_truncate_then_extend_equals_never_extended(corpus, junk, cut, queries):
    texts, pieces = corpus
    cut = min(cut, len(texts))
    ix = build(texts[:cut], pieces)
    words = sorted({t for t in texts + junk if t is not None})
    codes = np.array([-1 if t is None else words.index(t) for t in texts + junk])
    ix.add(cut, cut + len(junk), codes[cut:cut + len(junk)], words)
    ix.truncate(cut)
    ix.add(cut, len(texts), codes[cut:len(texts)], words)
    fresh = build(texts)
    assert answers(ix, len(texts), queries) == answers(fresh, len(texts), queries)
    assert ix._terms == fresh._terms or set(ix._terms) >= set(fresh._terms)


def read_only(arrays):
    out = {}
    for k, v in arrays.items():
        v = v.copy()
        v.flags.writeable = False
        out[k] = v
    return out


@SLOW
@given(corpus_st(), st.lists(query_st, min_size=1, max_size=3))
def test_from_arrays_answers_identically(corpus, queries):
    texts, pieces = corpus
    ix = build(texts, pieces)
    arrays = read_only(ix.to_arrays())
    back = FtsIndex.from_arrays("body", WordAnalyzer(), K1, B, arrays, ix.n)
    assert answers(back, len(texts), queries) == answers(ix, len(texts), queries)
    assert back.nbytes() == ix.nbytes()
    # it extends (copying what it maps, never writing into it)
    before = {k: v.copy() for k, v in arrays.items()}
    back.add(back.n, back.n + 2, np.array([0, -1]), ["a b c"])
    back.truncate(len(texts) + 1)
    back.add(back.n, back.n + 1, np.array([0]), ["ab"])
    for k in arrays:
        assert np.array_equal(arrays[k], before[k])
    assert back.match(Term("ab"), np.ones(back.n, bool))[-1]


def test_from_arrays_refuses_damage():
    texts = ["a b c a"] * 150 + ["b c", "c d", None, "d"]
    ix = build(texts, [150])
    assert len(good_segments := ix._segments) == 2, good_segments
    good = ix.to_arrays()
    FtsIndex.from_arrays("body", WordAnalyzer(), K1, B, good, ix.n)

    def broken(**change):
        arrays = dict(good)
        arrays.update(change)
        with pytest.raises(ValueError):
            FtsIndex.from_arrays("body", WordAnalyzer(), K1, B, arrays, ix.n)

    post = good["post"]
    broken(post=post[:-1])
    broken(post=post.astype(np.int32))
    broken(lengths=good["lengths"][:-1])
    broken(lengths=np.full_like(good["lengths"], 1))           # tf above the length
    broken(seg_hi=good["seg_hi"] + 1)
    broken(seg_lo=good["seg_lo"][::-1].copy())
    broken(term_ids=good["term_ids"] + len(ix._terms))
    broken(term_post=good["term_post"][::-1].copy())
    broken(off_post=good["off_post"] - 1)
    broken(term_df=good["term_df"] + 1)
    broken(blk_last=good["blk_last"] - 1)
    broken(blk_maxtf=good["blk_maxtf"] + 1)
    broken(vocab=np.frombuffer(b"\xff\xfe", np.uint8))
    del_one = dict(good)
    del del_one["posb"]
    with pytest.raises(ValueError):
        FtsIndex.from_arrays("body", WordAnalyzer(), K1, B, del_one, ix.n)
    last = post.copy()
    last[-1] |= 0x80                                            # a varint runs off the end
    broken(post=last)
    # random damage: refused or answered, never a crash
    rng = np.random.default_rng(7)
    for _ in range(200):
        arrays = dict(good)
        name = rng.choice(sorted(k for k, v in good.items() if len(v)))
        a = arrays[name].copy()
        a[rng.integers(len(a))] ^= a.dtype.type(1 << int(rng.integers(8)))
        arrays[name] = a
        try:
            back = FtsIndex.from_arrays("body", WordAnalyzer(), K1, B, arrays, ix.n)
        except ValueError:
            continue
        every = np.ones(ix.n, bool)
        back.top_k(Or((Term("a"), Term("d"))), 5, every, every)


def test_masks_shorter_than_n_are_a_snapshot():
    ix = build(CORPUS)
    docs = tokenized(CORPUS)
    visible = np.ones(5, bool)
    rows, scores = ix.top_k(Term("cat"), 10, visible, visible)
    assert list(rows) == [1, 0]
    np.testing.assert_allclose(scores, oracle_scores(Term("cat"), docs[:5], visible)[[1, 0]],
                               rtol=1e-6)
    assert ix.match(Term("cat"), visible).shape == (5,)
    with pytest.raises(ValueError):
        ix.top_k(Term("cat"), 3, np.ones(20, bool), np.ones(20, bool))
    with pytest.raises(ValueError):
        ix.add(3, 4, np.array([0]), ["x"])


def test_cached_statistics_follow_the_mask():
    ix = build(CORPUS)
    visible = np.ones(len(CORPUS), bool)
    visible.flags.writeable = False
    first = ix.top_k(Term("cat"), 3, visible, visible)
    assert ix.top_k(Term("cat"), 3, visible, visible)[1].tolist() == first[1].tolist()
    other = visible.copy()
    other[5] = False
    assert ix.top_k(Term("cat"), 3, other, other)[1].tolist() != first[1].tolist()
    # a change to the index is a new generation: nothing stale is served
    ix.add(ix.n, ix.n + 1, np.array([0]), ["cat"])
    again = ix.top_k(Term("cat"), 3, visible, visible)
    assert again[0].tolist() == first[0].tolist()


def test_pruned_equals_exhaustive_on_zipf_corpora():
    """Long lists (many blocks, several segments), skewed words: pruning bites."""
    rng = np.random.default_rng(11)
    vocab = [f"w{i}" for i in range(60)] + ["wa", "wab", "wabc"]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    texts = [" ".join(rng.choice(vocab, size=rng.integers(0, 30), p=p)) for _ in range(3000)]
    ix = build(texts, [1000, 2500, 2900, 2990])
    assert len(ix._segments) >= 2
    leaves = [Term("w0"), Term("w1"), Term("w7"), Term("w40"), Prefix("wa"), Prefix("w1"),
              Phrase(("w0", "w1")), Phrase(("w0", "w0"))]
    n = len(texts)
    for trial in range(120):
        picks = [leaves[i] for i in rng.choice(len(leaves), size=rng.integers(1, 4))]
        shape = trial % 4
        q = (picks[0] if shape == 0 else Or(tuple(picks)) if shape == 1 else
             And(tuple(picks)) if shape == 2 else And((Or(tuple(picks)), Not(Term("w3")))))
        visible = rng.random(n) < (1.0 if trial % 3 == 0 else 0.8)
        allow = visible & (rng.random(n) < (1.0 if trial % 2 else 0.3))
        k = int(rng.choice([1, 5, 10, 100]))
        want = ix.top_k(q, k, allow, visible, exhaustive=True)
        got = ix.top_k(q, k, allow, visible)
        assert got[0].tolist() == want[0].tolist(), q
        assert got[1].tolist() == want[1].tolist(), q


def test_one_row_extends_equal_one_extend():
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(0, 60))) for _ in range(400)]
    texts[17] = None
    ix = build(texts, range(400))
    assert len(ix._segments) <= 12
    queries = [Term("a"), Prefix("ab"), Phrase(("a", "b")), Or((Term("d"), Term("cd"))),
               And((Term("c"), Not(Term("ba"))))]
    assert answers(ix, len(texts), queries) == answers(build(texts), len(texts), queries)
    ix.truncate(250)
    assert answers(ix, 250, queries) == answers(build(texts[:250]), 250, queries)


def test_term_lookups_follow_extend_and_truncate():
    # the per-term segment lookups are cached: primed, then the segments change
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(1, 30))) for _ in range(300)]
    other = [" ".join(rng.choice(["zz", "yy", "a"], size=3)) for _ in range(50)]
    queries = [Term("a"), Term("zz"), And((Term("a"), Term("b"))), Or((Term("yy"), Term("c")))]
    words = sorted(set(texts + other))
    codes = np.array([words.index(t) for t in texts + other])
    ix = build(texts[:200])
    assert answers(ix, 200, queries) == answers(build(texts[:200]), 200, queries)
    ix.add(200, 300, codes[200:300], words)
    assert answers(ix, 300, queries) == answers(build(texts), 300, queries)
    ix.truncate(150)
    assert answers(ix, 150, queries) == answers(build(texts[:150]), 150, queries)
    ix.add(150, 200, codes[300:], words)     # new terms take the ids forgotten
    mixed = texts[:150] + other
    assert answers(ix, 200, queries) == answers(build(mixed), 200, queries)


def test_malformed_trees_are_value_errors():
    ix = build(CORPUS)
    every = np.ones(len(CORPUS), bool)
    for bad in (And(()), Or((Term("cat"), Or(()))), "cat", Not(None)):
        with pytest.raises(ValueError):
            ix.top_k(bad, 3, every, every)
        with pytest.raises(ValueError):
            ix.match(bad, every)
    assert ix.top_k(Phrase(()), 3, every, every)[0].tolist() == []


def test_readers_beside_a_writer_see_their_snapshot():
    """A query over n rows gives the answer of an index of just those rows,
    while another thread extends (kernels run without the GIL)."""
    import threading
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(1, 20))) for _ in range(1500)]
    words = sorted(set(texts))
    codes = np.array([words.index(t) for t in texts])
    ix = FtsIndex("body", WordAnalyzer(), K1, B)
    ix.add(0, 100, codes[:100], words)
    seen = []
    done = threading.Event()
    queries = [Or((Term("a"), Term("cd"))), And((Prefix("a"), Term("d")))]

    def read():
        while not done.is_set():
            m = ix.n
            vis = np.ones(m, bool)
            for q in queries:
                r, s = ix.top_k(q, 5, vis, vis)
                seen.append((m, q, r.tolist(), s.tolist()))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for lo in range(100, 1500, 7):
            hi = min(lo + 7, 1500)
            ix.add(lo, hi, codes[lo:hi], words)
    finally:
        done.set()
        reader.join()
    assert seen
    for m, q, rows, scores in seen[::max(1, len(seen) // 12)]:
        fresh = build(texts[:m])
        vis = np.ones(m, bool)
        r, s = fresh.top_k(q, 5, vis, vis)
        assert (rows, scores) == (r.tolist(), s.tolist())
