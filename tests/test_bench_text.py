"""`varvedb bench text` on a tiny corpus: the query classes drawn from its
statistics, the FTS5 side's figures, the report's shape, and the varvedb side
when `search(text=...)` exists (a probe says so; without it the report names
the reason and carries FTS5's figures alone)."""
import importlib.util
import json
import zlib

import numpy as np
import pytest
from click.testing import CliRunner

from varvedb_bench import text
from varvedb_bench.cli import bench

WORDS = ("network packet server client library python module data file system tool "
         "free software graphics audio video kernel driver font theme game").split()
TRANSLATIONS = """Package: 7zip
Description-md5: 302b8ff813071cfed09d7b23ac4a0cb3
Description-en: 7-Zip file archiver
 7-Zip is a file archiver.
 .
  * High compression ratio

Package: onlysummary
Description-md5: 0
Description-en: no long description

Package: cafe
Description-en: Café tools
 Brews café au lait.
"""


def _corpus(path, n=240, seed=3):
    """n documents of a Zipf-ish vocabulary (a few common words, many rare ones), some
    sharing the phrase "free software", with a one-line summary each."""
    rng = np.random.default_rng(seed)
    rare = [f"zq{i}x" for i in range(400)]
    with open(path, "w") as f:
        for i in range(n):
            words = list(rng.choice(WORDS, int(rng.integers(8, 30)),
                                    p=np.r_[0.3, 0.2, np.full(len(WORDS) - 2, 0.5 /
                                                              (len(WORDS) - 2))]))
            words += list(rng.choice(rare, 3))
            if i % 4 == 0:
                words += ["free", "software"]
            rng.shuffle(words)
            f.write(json.dumps({"id": f"pkg-{i}", "body": " ".join(words),
                                "summary": " ".join(words[:4])}) + "\n")


class HashedWords:
    """A small real embedder: each word a fixed random direction (seeded by the word),
    a text the sum of its words' (so texts sharing words point alike)."""
    name, dim = "bench-text-hashed-words", 32

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i] += np.random.default_rng(zlib.crc32(w.encode())).normal(size=self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


HASHED = HashedWords()      # one instance: a name registers one embedder per process


def test_translation_records_parse():
    recs = text.parse_translations(TRANSLATIONS)
    assert recs[0] == ("7zip", "7-Zip file archiver",
                       "7-Zip is a file archiver.\n\n * High compression ratio")
    assert recs[1] == ("onlysummary", "no long description", "")
    assert recs[2] == ("cafe", "Café tools", "Brews café au lait.")


def test_query_classes_follow_the_statistics(tmp_path):
    _corpus(tmp_path / "c.jsonl")
    c = text.load_corpus(str(tmp_path / "c.jsonl"))
    st = text.Stats(c.bodies)
    classes = text.query_classes(st, 20, seed=1)
    assert classes == text.query_classes(st, 20, seed=1)       # seeded
    vocab = {w: i for i, w in enumerate(st.vocab)}
    for w in classes["rare"]["queries"]:
        assert 2 <= st.df[vocab[w]] <= 10
    top = sorted(st.df, reverse=True)[max(1, int(np.ceil(len(st.vocab) * 0.01))) - 1]
    assert all(st.df[vocab[w]] >= top for w in classes["common"]["queries"])
    bodies = [set(b.split()) for b in c.bodies]
    for q in classes["two_words"]["queries"]:
        a, b = q.split()
        assert any(a in d and b in d for d in bodies)           # they co-occur
    for q in classes["phrase"]["queries"]:
        assert q.startswith('"') and q.endswith('"')
        assert sum(f" {q[1:-1]} " in f" {b} " for b in c.bodies) >= 5
    for q in classes["prefix"]["queries"]:
        assert q.endswith("*") and 4 <= len(q) - 1 <= 5
    assert all(classes[k]["queries"] for k in text.CLASSES)


def test_bench_text_reports_the_figures(tmp_path):
    _corpus(tmp_path / "c.jsonl")
    out = tmp_path / "text.json"
    has_embed = importlib.util.find_spec("varvedb.embed") is not None
    if has_embed:
        from varvedb import embed
        embed.register(HASHED.name, HASHED)
    res = CliRunner().invoke(bench, [
        "text", "--corpus", str(tmp_path / "c.jsonl"), "--queries", "15",
        "--rounds", "2", "--build-rounds", "2", "--hybrid-queries", "40",
        "--hybrid-docs", "120", "--embedder", HASHED.name, "--any-queries", "20",
        "--workdir", str(tmp_path / "work"), "--out", str(out)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads(out.read_text())
    md = (tmp_path / "text.md").read_text()
    assert report["config"]["documents"] == 240
    b = report["build"]
    assert b["fts5"]["total_s"]["rounds"] == 2 and b["fts5"]["insert_s"]["median"] > 0
    # the contentless table holds the index without the text
    assert 0 < b["bytes"]["fts5_contentless_file"] < b["bytes"]["fts5_file"]
    for name in text.CLASSES:
        fig = report["latency"][name]
        assert fig["queries"] > 0 and fig["fts5_us"]["per_round_median"]["rounds"] == 2
        assert 0 < fig["fts5_us"]["median"] < 1e6
    px = report["prefix_index"]
    assert px["fts5_prefix_index_us"]["median"] > 0 and px["bytes"] > 0
    assert "with a prefix index" in md
    t = report["tokens_agree"]
    assert t["queries"] == report["classes"]["rare"]["queries"] > 0 and t["fts5"] == t["queries"]
    a = report["any_words"]
    # the questions: match="any" on varvedb's side, FTS5's OR query on the other
    assert a["queries"] == 20 and a["words"]["median"] >= 2
    if "ratio" in a:
        assert a["fts5_us"]["per_round_median"]["rounds"] == 2 and a["varvedb_us"]["median"] > 0
        assert 0 < a["overlap"]["mean"] <= 1 and a["overlap"]["queries"] > 0
        assert "match=\"any\" against FTS5's OR" in md
    h = report["hybrid"]
    # each query is its document's own first words: FTS5 finds most of them
    assert h["queries"] == 40 and h["text_recall@10"]["fts5"] >= 0.5
    assert "## Latency per query class" in md and "FTS5 contentless" in md
    sm = h["sample"]
    if has_embed:
        assert sm["documents"] == 120 and sm["queries"] == 40
        r = sm["recall@10"]
        assert r["text, fts5"] >= 0.5 and 0 < r["vectors, exact cosine"] <= 1
        assert "fusion of the two above" in md
    else:
        assert "vector leg not run" in sm

    if report["varvedb_skipped"]:
        assert "not available" in report["varvedb_skipped"]
        assert text.varvedb_probe() is not None
        pytest.skip(f"varvedb's half: {report['varvedb_skipped']}")
    v = b["varvedb"]
    assert v["total_s"]["rounds"] == 2 and b["ratio"]["total"]["median"] > 0
    assert ("profile" in b) == (b["goal"] == "missed")
    assert b["bytes"]["varvedb_with_fts"] > b["bytes"]["varvedb_without_fts"]
    for name in text.CLASSES:
        fig = report["latency"][name]
        assert fig["varvedb_us"]["median"] > 0 and fig["goal"] in ("met", "missed")
        assert ("profile" in fig) == (fig["goal"] == "missed")
        if fig["goal"] == "missed":
            assert fig["profile"]["by_own_time"] and f"{name} missed its goal" in md
    # same BM25 parameters and the same tokens: single-word rankings agree
    o = report["overlap"]
    assert t["varvedb"] == t["queries"] and o["rare"]["mean"] == 1.0 and o["common"]["mean"] >= 0.6
    assert h["text_recall@10"]["varvedb"] >= 0.5
    assert "## Top-10 overlap with FTS5" in md
