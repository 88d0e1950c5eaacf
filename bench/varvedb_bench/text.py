"""`varvedb bench text`: full-text search against SQLite FTS5, on one corpus, in one process.

Corpus: the Debian package long descriptions this machine's package lists hold
(every `*_main_i18n_Translation-en.lz4` under /var/lib/apt/lists, read with
apt-helper; one document per package, the first description seen wins): the
id is the package name, the body the long description without its one-line
summary, and the summary is kept apart as the hybrid figure's query. `--corpus
FILE.jsonl` reads {"id", "body", "summary"} lines instead (the test's tiny corpus).

Peer: SQLite FTS5 through the stdlib sqlite3 module, `fts5(body, tokenize=
'unicode61 remove_diacritics 2')` (no prefix index: `word*` is answered from
the main index), BM25 with FTS5's fixed k1 = 1.2, b = 0.75. varvedb: a
collection with text ids and `body: vv.Text(fts=True)`, queried with
`search(text=q, limit=10, select=[])` (ids and scores, as FTS5 gives rowids and bm25).

Figures (every one over alternating rounds, medians and min–max):
* build: varvedb's bulk insert (one insert_arrays, committed) and its checkpoint
  against FTS5's insert (one transaction, committed) and its 'optimize', on
  fresh files, the side that runs first alternating round by round; varvedb
  without fts=True too, so the index's own share is seen.
* bytes: FTS5's file after optimize (it holds the text too; the free pages the
  merge left inside it are reported) and a contentless FTS5 file (content='':
  the index alone); varvedb's file with and without
  fts=True on the same documents after a checkpoint: the difference is what
  the index adds. The ratio the goal reads is varvedb's index bytes over
  FTS5's file, as the issue words it; the like-for-like one (index over index)
  is given beside it.
* latency per query class, each class drawn from the corpus's own statistics
  (seeded): common word (df in the vocabulary's top 1%), rare word (df 2..10),
  two words (both mid-frequency: df rank in the top 10% but not the top 1%, drawn
  from one document so they co-occur), phrase ("w1 w2", a word pair adjacent in
  at least 5 documents) and prefix (`netw*`: 4 or 5 letters of a word of the
  top 1% that is longer). Every query runs on both sides back to back, the side
  that runs first alternating query by query and round by round; a class's
  figure is each side's median µs per query, and the ratio varvedb / FTS5 of
  the per-round medians (goal ≤ 1). The prefix class runs once more against
  FTS5 with a prefix index (prefix='4 5'), what a user of prefix queries adds.
* top-10 overlap with FTS5's ranking for the common, rare and two-word classes:
  |ids in both| / min(10, hits FTS5 returned), the mean over the class's
  queries (FTS5's idf is ln((N - df + 0.5) / (df + 0.5)), floored near 0, the
  contract's ln(1 + ...): single-word rankings agree, multi-word ones can differ).
* any-word questions (`--any-queries`): the summaries of other packages (seeded)
  as questions in plain words, their distinct query words side by side for
  varvedb's `search(text=q, match="any")` and joined by OR for FTS5's `MATCH
  'a OR b OR c'` (ranked by bm25()), interleaved query by query: each side's
  median µs, the ratio (goal ≤ 1) and the top-10 overlap (goal ≥ 0.8).
* hybrid, labelled set: the summaries of `hybrid_queries` packages (seeded) as
  queries, that package as the one relevant document; recall@10 of the text
  leg (the summary's words joined by OR) on both sides over the whole corpus.
  Then, on a sample (the relevant documents plus others drawn at random, up to
  `hybrid_docs`: a small ONNX model embeds about ten descriptions a second on
  this machine's CPUs), with vectors from an embedder spec (varvedb.embed,
  cached in the workdir): text (FTS5, varvedb), vectors (exact cosine), their
  reciprocal-rank fusion computed here (k = 60, 100 candidates a side), and
  varvedb's own `search(text=..., vector=...)` when it exists.

Words in queries are ASCII ([a-z][a-z0-9]*), so the two tokenizers read them alike.
"""
from __future__ import annotations

import cProfile
import gc
import glob
import hashlib
import itertools
import json
import os
import pstats
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
import unicodedata
from dataclasses import dataclass

import numpy as np

from varvedb.errors import FileMissingError, OptionError
from .layers import _ab, _stats
from . import sql as _sql
from .sql import _interleaved, _where

K = 10
APT_LISTS = "/var/lib/apt/lists/*_main_i18n_Translation-en.lz4"
APT_HELPER = "/usr/lib/apt/apt-helper"
FTS5_SCHEMA = ("CREATE VIRTUAL TABLE docs USING fts5(body{}, "
               "tokenize='unicode61 remove_diacritics 2')")
FTS5_QUERY = "SELECT rowid, bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 10"
CLASSES = ("common", "rare", "two_words", "phrase", "prefix")
OVERLAP_CLASSES = ("common", "rare", "two_words")
# unicode61's token characters: letters and digits (underscore separates)
_TOKEN = re.compile(r"[^\W_]+")
_QUERY_WORD = re.compile(r"[a-z][a-z0-9]*")
# words either query syntax could read as an operator
_OPERATORS = {"and", "or", "not", "near"}


@dataclass
class Corpus:
    ids: list[str]
    bodies: list[str]
    summaries: list[str]
    source: str


def parse_translations(text: str) -> list[tuple[str, str, str]]:
    """(package, summary, long description) of each record of a Translation-en file:
    records are separated by blank lines; `Description-en:` holds the summary and
    the lines after it that start with a space the long description (" ." is an
    empty line)."""
    out = []
    for record in text.split("\n\n"):
        name, summary, body, in_desc = None, "", [], False
        for line in record.split("\n"):
            if line.startswith(" ") and in_desc:
                body.append("" if line == " ." else line[1:])
            elif line.startswith("Package:"):
                name, in_desc = line[8:].strip(), False
            elif line.startswith("Description-en:"):
                summary, in_desc = line[15:].strip(), True
            else:
                in_desc = False
        if name:
            out.append((name, summary, "\n".join(body).strip()))
    return out


def load_corpus(path: str | None = None, limit: int | None = None) -> Corpus:
    """The apt lists' package descriptions (path None) or a JSONL file of
    {"id", "body", "summary"}; documents without a body are left out, and an id
    seen before keeps its first document. `limit`: the first N documents."""
    if path is None:
        files = sorted(glob.glob(APT_LISTS))
        if not files or not os.path.exists(APT_HELPER):
            raise FileMissingError(
                "no package descriptions on this machine: run `apt-get update -o "
                "Acquire::Languages=en` (or pass --corpus FILE.jsonl)")
        # the main archive first: its descriptions win over the updates' copies
        files.sort(key=lambda f: ("-security_" in f or "-updates_" in f, f))
        text = "\n\n".join(subprocess.run([APT_HELPER, "cat-file", f], check=True,
                                          capture_output=True, text=True).stdout
                           for f in files)
        records = parse_translations(text)
        source = f"package descriptions of {len(files)} Translation-en lists"
    else:
        if not os.path.exists(path):
            raise FileMissingError(f"corpus {path!r} does not exist")
        records = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        d = json.loads(line)
                        records.append((str(d["id"]), str(d.get("summary") or ""),
                                        str(d["body"])))
                    except (ValueError, KeyError, TypeError) as e:
                        raise OptionError(f"{path}:{n}: not a {{id, body, summary}} "
                                          f"object ({e})") from None
        source = os.path.basename(path)
    seen, ids, bodies, summaries = set(), [], [], []
    for name, summary, body in records:
        if body and name not in seen:
            seen.add(name)
            ids.append(name)
            bodies.append(body)
            summaries.append(summary)
            if limit and len(ids) >= limit:
                break
    if len(ids) < 2:
        raise OptionError(f"the corpus ({source}) has {len(ids)} documents with a body")
    return Corpus(ids, bodies, summaries, source)


def _distinct(x: np.ndarray) -> np.ndarray:
    """x's distinct values, sorted (a sort: numpy's hashed unique is slower here)."""
    x = np.sort(x)
    return x[np.r_[True, x[1:] != x[:-1]]] if len(x) else x


def _fold(text: str) -> str:
    """Lower case with Latin diacritics removed (for the statistics only)."""
    text = text.lower()
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c))


class Stats:
    """The corpus's tokens as arrays (doc, term), a vocabulary, each term's df, and
    each word pair's df (adjacent tokens of a document)."""

    def __init__(self, bodies: list[str]):
        vocab: dict[str, int] = {}
        terms, lengths = [], []
        for body in bodies:
            toks = _TOKEN.findall(_fold(body))
            terms.append([vocab.setdefault(t, len(vocab)) for t in toks])
            lengths.append(len(toks))
        self.vocab = list(vocab)
        self.n_docs = len(bodies)
        v = len(self.vocab)
        self.term = np.fromiter(itertools.chain.from_iterable(terms), np.int64,
                                sum(lengths))
        self.doc = np.repeat(np.arange(len(bodies), dtype=np.int64), lengths)
        pairs = _distinct(self.doc * v + self.term)     # (doc, term), sorted
        self.pair_doc, self.pair_term = pairs // v, pairs % v
        self.doc_start = np.searchsorted(self.pair_doc, np.arange(len(bodies) + 1))
        self.df = np.bincount(self.pair_term, minlength=v)
        same = self.doc[1:] == self.doc[:-1]
        code = self.term[:-1][same] * v + self.term[1:][same]
        n = max(1, self.n_docs)
        if v * v * n >= 2 ** 63:
            raise OptionError(f"{v:,} terms × {n:,} documents: too many for the word-pair "
                              "statistics")
        key = _distinct(code * n + self.doc[1:][same]) // n     # (pair, doc), sorted
        start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        self.bigram, self.bigram_df = key[start], np.diff(np.r_[start, len(key)])
        ok = np.array([bool(_QUERY_WORD.fullmatch(w)) and w not in _OPERATORS
                       for w in self.vocab])
        self.query_word = ok
        order = np.argsort(-self.df, kind="stable")
        self.rank = np.empty(v, np.int64)
        self.rank[order] = np.arange(v)

    def words(self, mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask & self.query_word)


def _draw(rng, pool, n: int) -> list:
    """n distinct items of pool (all of them when it has fewer), in drawn order."""
    pool = list(pool)
    if len(pool) <= n:
        return [pool[i] for i in rng.permutation(len(pool))]
    return [pool[i] for i in rng.choice(len(pool), n, replace=False)]


def query_classes(st: Stats, n: int, seed: int = 0) -> dict[str, dict]:
    """Each class's queries and the df of what they name (its median, min, max)."""
    rng = np.random.default_rng(seed)
    v = len(st.vocab)
    top1, top10 = max(1, int(np.ceil(v * 0.01))), max(2, int(np.ceil(v * 0.10)))
    common = st.words(st.rank < top1)
    rare = st.words((st.df >= 2) & (st.df <= 10))
    mid = st.words((st.rank >= top1) & (st.rank < top10) & (st.df >= 2))
    out: dict[str, dict] = {}

    def put(name, queries, dfs, means):
        out[name] = {"queries": queries, "means": means, "df_each": [int(x) for x in dfs],
                     "df": {"median": float(np.median(dfs)), "min": int(np.min(dfs)),
                            "max": int(np.max(dfs))} if len(dfs) else None}

    pick = _draw(rng, common, n)
    put("common", [st.vocab[t] for t in pick], st.df[pick],
        f"one word of the top 1% by df ({top1} words)")
    pick = _draw(rng, rare, n)
    put("rare", [st.vocab[t] for t in pick], st.df[pick], "one word with df 2..10")
    is_mid = np.zeros(v, bool)
    is_mid[mid] = True
    pairs, seen = [], set()
    for d in rng.permutation(st.n_docs):
        if len(pairs) >= n:
            break
        here = st.pair_term[st.doc_start[d]:st.doc_start[d + 1]]
        here = here[is_mid[here]]
        if len(here) >= 2:
            a, b = (int(x) for x in rng.choice(here, 2, replace=False))
            if (a, b) not in seen and (b, a) not in seen:
                seen.add((a, b))
                pairs.append((a, b))
    put("two_words", [f"{st.vocab[a]} {st.vocab[b]}" for a, b in pairs],
        [min(st.df[a], st.df[b]) for a, b in pairs],
        "two words with df rank in the top 10% but not the top 1%, from one document "
        "(df: the rarer word's)")
    first, second = st.bigram[st.bigram_df >= 5] // v, st.bigram[st.bigram_df >= 5] % v
    dfs = st.bigram_df[st.bigram_df >= 5]
    ok = np.flatnonzero(st.query_word[first] & st.query_word[second])
    pick = _draw(rng, ok, n)
    put("phrase", [f'"{st.vocab[first[i]]} {st.vocab[second[i]]}"' for i in pick],
        dfs[pick], "a quoted word pair adjacent in at least 5 documents (df: the phrase's)")
    long_common = [t for t in common if len(st.vocab[t]) >= 6]
    prefixes: dict[str, int] = {}
    for t in _draw(rng, long_common, len(long_common)):
        p = st.vocab[t][:int(rng.integers(4, 6))]
        prefixes.setdefault(p, t)
        if len(prefixes) >= n:
            break
    put("prefix", [p + "*" for p in prefixes], st.df[list(prefixes.values())],
        "4 or 5 letters of a top-1% word of 6 letters or more, with * (df: that word's)")
    return out


def summary_query(summary: str) -> str | None:
    """A package's one-line summary as a text query: its distinct words joined by OR."""
    words = []
    for w in _TOKEN.findall(_fold(summary)):
        if _QUERY_WORD.fullmatch(w) and w not in _OPERATORS and w not in words:
            words.append(w)
    return " OR ".join(words) or None


def any_questions(c: Corpus, n: int, seed: int = 0) -> list[list[str]]:
    """n packages' summaries (drawn with their own seed) as the words of a question:
    each summary's distinct query words, at least two."""
    rng = np.random.default_rng(seed + 3)
    out = []
    for i in rng.permutation(len(c.ids)):
        q = summary_query(c.summaries[i])
        words = q.split(" OR ") if q else []
        if len(words) >= 2:
            out.append(words)
            if len(out) >= n:
                break
    return out


def labelled_set(c: Corpus, n: int, seed: int = 0) -> list[tuple[str, int]]:
    """(query, index of the relevant document) for n packages with a usable summary."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for i in rng.permutation(len(c.ids)):
        q = summary_query(c.summaries[i])
        if q:
            out.append((q, int(i)))
            if len(out) >= n:
                break
    return out


# -- the two sides ---------------------------------------------------------

def _fs_type(path: str) -> str:
    """The file system under path (from /proc/mounts; '?' where unknown)."""
    path, best, kind = os.path.realpath(path), "", "?"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 2 and (path == parts[1] or path.startswith(
                        parts[1].rstrip("/") + "/")) and len(parts[1]) > len(best):
                    best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


def _fresh(path: str) -> str:
    for p in (path, path + "-journal"):
        if os.path.exists(p):
            os.remove(p)
    return path


def fts5_build(path: str, bodies: list[str], options: str = "") -> dict:
    """Seconds to insert (one transaction, committed) and to optimize, and the file's
    bytes. options: more of fts5's (", content=''": contentless)."""
    con = sqlite3.connect(_fresh(path), isolation_level=None)
    try:
        con.execute(FTS5_SCHEMA.format(options))
        t0 = time.perf_counter()
        con.execute("BEGIN")
        con.executemany("INSERT INTO docs(rowid, body) VALUES (?, ?)",
                        zip(range(1, len(bodies) + 1), bodies))
        con.execute("COMMIT")
        t1 = time.perf_counter()
        con.execute("INSERT INTO docs(docs) VALUES('optimize')")
        t2 = time.perf_counter()
        # optimize leaves the merged segments' pages on the free list, inside the file
        free = (con.execute("PRAGMA freelist_count").fetchone()[0] *
                con.execute("PRAGMA page_size").fetchone()[0])
    finally:
        con.close()
    return {"insert_s": t1 - t0, "optimize_s": t2 - t1, "bytes": os.path.getsize(path),
            "free_bytes": free}


class Fts5:
    def __init__(self, path: str):
        self.con = sqlite3.connect(path, isolation_level=None)
        self.con.execute("SELECT count(*) FROM docs").fetchone()

    def query(self, q: str):
        return self.con.execute(FTS5_QUERY, (q,)).fetchall()

    def top(self, q: str, ids: list[str]) -> list[str]:
        return [ids[r - 1] for r, _ in self.query(q)]

    def count(self, q: str) -> int:
        return self.con.execute("SELECT count(*) FROM docs WHERE docs MATCH ?",
                                (q,)).fetchone()[0]

    def close(self):
        self.con.close()


def varvedb_probe() -> str | None:
    """None when varvedb answers `search(text=...)` on a `Text(fts=True)` field, else why not."""
    import varvedb as vv
    try:
        with vv.connect(":memory:") as db:
            c = db.create_collection("docs", {"id": "text", "body": vv.Text(fts=True)})
            c.insert_arrays(id=["a", "b"], body=["free software", "network tools"])
            hits = c.search(text="network", limit=10)
            if list(hits.ids) != ["b"] or not hits.scores[0] > 0:
                return f"search(text='network') answered {list(hits.ids)} {hits.scores}"
    except Exception as e:      # the feature is missing, whatever form that takes
        return f"varvedb side not run: search(text=...) is not available ({e!r})"
    return None


def _used_bytes(db, path: str) -> int:
    """Where varvedb's log ends (the file is zero-filled ahead of it), else the file size."""
    log = getattr(db.engine, "log", None)
    return int(getattr(log, "end", 0)) or os.path.getsize(path)


def varvedb_build(path: str, c: Corpus, fts: bool) -> dict:
    """Seconds of the bulk insert (committed) and of the checkpoint, and the bytes after it."""
    import varvedb as vv
    db = vv.connect(_fresh(path))
    try:
        col = db.create_collection("docs", {"id": "text", "body": vv.Text(fts=fts)})
        t0 = time.perf_counter()
        col.insert_arrays(id=c.ids, body=c.bodies)
        t1 = time.perf_counter()
        db.checkpoint()
        t2 = time.perf_counter()
        used = _used_bytes(db, path)
    finally:
        db.close()
    return {"insert_s": t1 - t0, "checkpoint_s": t2 - t1, "bytes": used,
            "file_bytes": os.path.getsize(path)}


class Varvedb:
    def __init__(self, path: str):
        import varvedb as vv
        self.db = vv.connect(path)
        self.col = self.db.collection("docs")

    def query(self, q: str):
        # ids and scores, no fields: what FTS5's `SELECT rowid, bm25(docs)` returns
        return self.col.search(text=q, limit=K, select=[])

    def query_any(self, q: str):
        """Any of q's words, ranked by BM25 (FTS5's `MATCH 'a OR b'`)."""
        return self.col.search(text=q, match="any", limit=K, select=[])

    def top(self, q: str, ids=None) -> list[str]:
        return list(self.query(q).ids)

    def close(self):
        self.db.close()


# -- the figures -----------------------------------------------------------

def _side(seconds: list[float]) -> dict:
    return _stats([round(s, 4) for s in seconds])


def _ratio(a: list[float], b: list[float]) -> dict:
    return _stats([x / y for x, y in zip(a, b)])


def profile_build(c: Corpus, path: str, top: int = 15) -> dict:
    """cProfile of one varvedb build (insert + checkpoint) on a fresh file, gc off."""
    prof = cProfile.Profile()
    gc.collect()
    gc.disable()
    try:
        prof.enable()
        varvedb_build(path, c, True)
        prof.disable()
    finally:
        gc.enable()
    st = pstats.Stats(prof).stats
    rows = sorted(st.items(), key=lambda kv: -kv[1][2])[:top]
    return {"total_s": round(sum(v[2] for v in st.values()), 3),
            "by_own_time": [{"function": _where(k), "calls": v[1], "own_s": round(v[2], 4),
                             "inclusive_s": round(v[3], 4)} for k, v in rows]}


def build(c: Corpus, workdir: str, rounds: int, with_varvedb: bool, profile: bool = True,
          echo=print) -> dict:
    """Build time over alternating rounds on fresh files, and each side's bytes."""
    fts_path = os.path.join(workdir, "fts5.sqlite")
    vv_path = os.path.join(workdir, "fts.varve")
    fts_runs, vv_runs = [], []

    def fts_round():
        fts_runs.append(fts5_build(fts_path, c.bodies))
        return 0.0

    def vv_round():
        vv_runs.append(varvedb_build(vv_path, c, True))
        return 0.0
    if with_varvedb:
        # untimed: compiles varvedb's kernels (numba caches them on disk after the first run)
        varvedb_build(vv_path, Corpus(c.ids[:200], c.bodies[:200], c.summaries[:200], ""),
                      True)
        _ab(vv_round, fts_round, rounds)
    else:
        for _ in range(rounds):
            fts_round()
    f = fts_runs[-1]
    echo(f"bench text: FTS5 insert {f['insert_s']:.2f} s + optimize {f['optimize_s']:.2f} s, "
         f"{f['bytes']:,} bytes")
    contentless = fts5_build(os.path.join(workdir, "fts5-contentless.sqlite"), c.bodies,
                             ", content=''")
    fts5 = {"insert_s": _side([r["insert_s"] for r in fts_runs]),
            "optimize_s": _side([r["optimize_s"] for r in fts_runs]),
            "total_s": _side([r["insert_s"] + r["optimize_s"] for r in fts_runs])}
    out = {"figure": f"index build, {len(c.ids):,} documents, fresh files"
                     + (", rounds alternating the side that runs first" if with_varvedb else ""),
           "unit": "s", "fts5": fts5, "varvedb": None,
           "bytes": {"fts5_file": f["bytes"], "fts5_contentless_file": contentless["bytes"],
                     "fts5_free_pages": {"file": f["free_bytes"],
                                         "contentless_file": contentless["free_bytes"],
                                         "means": "bytes of free pages inside each file after "
                                                  "optimize (a VACUUM would drop them)"}}}
    if not with_varvedb:
        return out
    plain = varvedb_build(os.path.join(workdir, "plain.varve"), c, False)
    tot_vv = [r["insert_s"] + r["checkpoint_s"] for r in vv_runs]
    tot_fts = [r["insert_s"] + r["optimize_s"] for r in fts_runs]
    out["varvedb"] = {"insert_s": _side([r["insert_s"] for r in vv_runs]),
                      "checkpoint_s": _side([r["checkpoint_s"] for r in vv_runs]),
                      "total_s": _side(tot_vv),
                      "without_fts": {"insert_s": round(plain["insert_s"], 4),
                                      "checkpoint_s": round(plain["checkpoint_s"], 4)}}
    out["ratio"] = {"insert": _ratio([r["insert_s"] for r in vv_runs],
                                     [r["insert_s"] for r in fts_runs]),
                    "total": _ratio(tot_vv, tot_fts),
                    "means": "varvedb's seconds over FTS5's, per round (goal ≤ 1: insert "
                             "against insert + commit; total adds checkpoint and optimize)"}
    v = vv_runs[-1]
    index = v["bytes"] - plain["bytes"]
    out["bytes"].update({
        "varvedb_with_fts": v["bytes"], "varvedb_without_fts": plain["bytes"],
        "varvedb_index": index,
        "varvedb_file_sizes": {"with_fts": v["file_bytes"], "without_fts": plain["file_bytes"]},
        "ratio_index_over_fts5_file": index / f["bytes"],
        "ratio_index_over_fts5_contentless": index / contentless["bytes"],
        "ratio_files": v["bytes"] / f["bytes"],
        "means": "varvedb bytes: where its log ends after the checkpoint (the file is "
                 "zero-filled ahead of it, file_sizes); index = with fts - without. The goal "
                 "(≤ 0.8) reads index over FTS5's file after optimize"})
    echo(f"bench text: varvedb insert {v['insert_s']:.2f} s + checkpoint "
         f"{v['checkpoint_s']:.2f} s, index {index:,} bytes")
    out["goal"] = "met" if out["ratio"]["total"]["median"] <= 1 else "missed"
    if out["goal"] == "missed" and profile:
        out["profile"] = profile_build(c, vv_path)
    return out


def profile(vv: Varvedb, queries: list[str], top: int = 12, run=None) -> dict:
    """cProfile of varvedb's search over queries (gc off; `run`: the search to run,
    default vv.query): the functions by own time, per query (the profiler inflates
    every figure: read the shares)."""
    run = vv.query if run is None else run
    prof = cProfile.Profile()
    gc.collect()
    gc.disable()
    try:
        prof.enable()
        for q in queries:
            run(q)
        prof.disable()
    finally:
        gc.enable()
    st = pstats.Stats(prof).stats
    n = len(queries)
    rows = sorted(st.items(), key=lambda kv: -kv[1][2])[:top]
    return {"queries": n, "total_us": round(sum(v[2] for v in st.values()) / n * 1e6, 1),
            "by_own_time": [{"function": _where(k), "calls_per_query": round(v[1] / n, 2),
                             "own_us": round(v[2] / n * 1e6, 2),
                             "inclusive_us": round(v[3] / n * 1e6, 2)} for k, v in rows]}


def latency(classes: dict, fts: Fts5, vv: Varvedb | None, rounds: int,
            profile_queries: int = 200) -> dict:
    """Per class: each side's median µs per query (interleaved), ratio over rounds;
    a cProfile of varvedb's side where the class misses its goal."""
    out = {}
    for name in CLASSES:
        queries = classes[name]["queries"]
        if not queries:
            out[name] = "no queries of this class in the corpus"
            continue
        for q in queries:       # untimed pass: the statement cache, the pages, the kernels
            fts.query(q)
            if vv is not None:
                vv.query(q)
        if vv is None:
            ta = None
            tb = np.empty((rounds, len(queries)), np.int64)
            for r in range(rounds):
                for i, q in enumerate(queries):
                    t0 = time.perf_counter_ns()
                    fts.query(q)
                    tb[r, i] = time.perf_counter_ns() - t0
        else:
            ta, tb = _interleaved(vv.query, fts.query, queries, rounds)
        per_fts = [float(np.median(t)) / 1e3 for t in tb]
        fig = {"queries": len(queries), "fts5_us": {"median": float(np.median(tb)) / 1e3,
                                                    "per_round_median": _stats(per_fts)}}
        if ta is not None:
            per_vv = [float(np.median(t)) / 1e3 for t in ta]
            fig["varvedb_us"] = {"median": float(np.median(ta)) / 1e3,
                                 "per_round_median": _stats(per_vv)}
            fig["ratio"] = _ratio(per_vv, per_fts)
            fig["goal"] = "met" if fig["ratio"]["median"] <= 1 else "missed"
            if fig["goal"] == "missed" and profile_queries:
                fig["profile"] = profile(vv, queries[:profile_queries])
        out[name] = fig
    return out


def tokens_agree(rare: dict, fts: Fts5, vv: Varvedb | None) -> dict:
    """How many rare-word queries each side finds in exactly as many documents as
    the statistics' df (df <= 10, so varvedb's top 10 is every match): a check
    that both tokenizers read the words as the statistics do."""
    dfs = rare.get("df_each", [])
    out = {"queries": len(dfs),
           "fts5": sum(fts.count(q) == df for q, df in zip(rare["queries"], dfs))}
    if vv is not None:
        out["varvedb"] = sum(len(vv.query(q)) == df for q, df in zip(rare["queries"], dfs))
    return out


def prefix_index(c: Corpus, prefix: dict, fts: Fts5, vv: Varvedb | None, workdir: str,
                 rounds: int) -> dict | str:
    """The prefix class against FTS5 with a prefix index (`prefix='4 5'`, what a user
    who runs prefix queries would add), interleaved with varvedb (FTS5 without one
    when varvedb is not measured)."""
    queries = prefix["queries"]
    if not queries:
        return "no prefix queries"
    path = os.path.join(workdir, "fts5-prefix.sqlite")
    built = fts5_build(path, c.bodies, ", prefix='4 5'")
    fp = Fts5(path)
    try:
        other, name = (vv, "varvedb") if vv is not None else (fts, "fts5")
        for q in queries:
            fp.query(q)
            other.query(q)
        ta, tb = _interleaved(other.query, fp.query, queries, rounds)
    finally:
        fp.close()
    per_a = [float(np.median(t)) / 1e3 for t in ta]
    per_b = [float(np.median(t)) / 1e3 for t in tb]
    return {"fts5_table": FTS5_SCHEMA.format(", prefix='4 5'"),
            "build_s": round(built["insert_s"] + built["optimize_s"], 3),
            "bytes": built["bytes"], "queries": len(queries),
            f"{name}_us": {"median": float(np.median(ta)) / 1e3,
                           "per_round_median": _stats(per_a)},
            "fts5_prefix_index_us": {"median": float(np.median(tb)) / 1e3,
                                     "per_round_median": _stats(per_b)},
            "ratio": _ratio(per_a, per_b),
            "means": f"{name}'s per-round median over FTS5-with-prefix-index's"}


def overlap(classes: dict, fts: Fts5, vv: Varvedb, ids: list[str]) -> dict:
    """Mean top-10 overlap with FTS5's ranking, per class."""
    out = {}
    for name in OVERLAP_CLASSES:
        got = []
        for q in classes[name]["queries"]:
            want = fts.top(q, ids)
            if want:
                got.append(len(set(want) & set(vv.top(q))) / min(K, len(want)))
        out[name] = {"mean": float(np.mean(got)) if got else None,
                     "min": float(np.min(got)) if got else None, "queries": len(got)}
    out["means"] = "|ids in both top-10s| / min(10, hits FTS5 returned), mean over the class"
    vals = [v["mean"] for k, v in out.items() if k != "means" and v["mean"] is not None]
    out["goal"] = "met" if vals and min(vals) >= 0.8 else "missed"
    return out


def any_words(c: Corpus, fts: Fts5, vv: Varvedb | None, n: int, rounds: int,
              seed: int = 0, profile_queries: int = 200) -> dict | str:
    """Questions in plain words: varvedb's match="any" against FTS5's OR query,
    interleaved query by query (latency, ratio per round, top-10 overlap); a
    cProfile of varvedb's side when the ratio misses its goal."""
    questions = any_questions(c, n, seed)
    if not questions:
        return "no summaries with two query words"
    plain = [" ".join(w) for w in questions]
    ors = [" OR ".join(w) for w in questions]
    fts_of = dict(zip(plain, ors))

    def fts_query(q):
        return fts.query(fts_of[q])
    out = {"queries": len(plain), "examples": plain[:3],
           "words": {"median": float(np.median([len(w) for w in questions])),
                     "max": max(len(w) for w in questions)},
           "varvedb_query": f"collection.search(text='w1 w2 ...', match='any', limit={K}, "
                            "select=[])",
           "fts5_query": "MATCH 'w1 OR w2 OR ...' ORDER BY bm25(docs) LIMIT 10"}
    if vv is None:
        return out
    for q in plain:      # untimed pass: statement cache, pages, kernels
        fts_query(q)
        vv.query_any(q)
    ta, tb = _interleaved(vv.query_any, fts_query, plain, rounds)
    per_vv = [float(np.median(t)) / 1e3 for t in ta]
    per_fts = [float(np.median(t)) / 1e3 for t in tb]
    out["varvedb_us"] = {"median": float(np.median(ta)) / 1e3,
                         "per_round_median": _stats(per_vv)}
    out["fts5_us"] = {"median": float(np.median(tb)) / 1e3,
                      "per_round_median": _stats(per_fts)}
    out["ratio"] = _ratio(per_vv, per_fts)
    got = []
    for q in plain:
        want = [c.ids[r - 1] for r, _ in fts_query(q)]
        if want:
            got.append(len(set(want) & set(vv.query_any(q).ids)) / min(K, len(want)))
    out["overlap"] = {"mean": float(np.mean(got)) if got else None,
                      "min": float(np.min(got)) if got else None, "queries": len(got)}
    out["goal"] = {"latency": "met" if out["ratio"]["median"] <= 1 else "missed",
                   "overlap": "met" if got and np.mean(got) >= 0.8 else "missed"}
    if out["goal"]["latency"] == "missed" and profile_queries:
        out["profile"] = profile(vv, plain[:profile_queries], run=vv.query_any)
    return out


def hybrid(c: Corpus, fts: Fts5, vv: Varvedb | None, n: int, workdir: str,
           embedder: str | None, sample_docs: int, seed: int = 0, echo=print) -> dict:
    """recall@10 on the labelled set (summary -> its package): the text leg on the whole
    corpus, then text, vectors and their fusion on a sample (embedding the whole
    corpus takes too long on a CPU)."""
    labelled = labelled_set(c, n, seed)
    out = {"queries": len(labelled),
           "means": "each query is a package's one-line summary (the text leg: its words "
                    "joined by OR; the vector leg: the summary embedded); the relevant "
                    "document is that package; recall@10 = share of queries whose package "
                    "is in the top 10",
           "example": labelled[0][0] if labelled else None,
           "text_recall@10": {"fts5": float(np.mean([c.ids[i] in fts.top(q, c.ids)
                                                      for q, i in labelled]))}}
    if vv is not None:
        out["text_recall@10"]["varvedb"] = float(np.mean([c.ids[i] in vv.top(q)
                                                           for q, i in labelled]))
    if not embedder:
        out["sample"] = "vector leg not run (no --embedder)"
        return out
    try:
        from importlib import import_module
        embed = import_module("varvedb.embed")
        model = embed.resolve(embedder)
    except Exception as e:      # the module, the model or its packages are missing
        out["sample"] = f"vector leg not run: embedder {embedder!r} unavailable ({e!r})"
        return out
    out["sample"] = on_sample(c, labelled, vv is not None, embed, model, workdir,
                              sample_docs, seed, echo)
    return out


def _sample(c: Corpus, labelled: list, size: int, seed: int) -> tuple[Corpus, list]:
    """The labelled set's documents plus others drawn at random, up to size, and the
    labelled set re-indexed into it."""
    keep = {i for _, i in labelled}
    rest = np.setdiff1d(np.arange(len(c.ids)), np.fromiter(keep, np.int64))
    more = np.random.default_rng(seed + 2).permutation(rest)[:max(0, size - len(keep))]
    rows = np.sort(np.r_[np.fromiter(keep, np.int64), more])
    where = {int(r): j for j, r in enumerate(rows)}
    sub = Corpus([c.ids[r] for r in rows], [c.bodies[r] for r in rows],
                 [c.summaries[r] for r in rows], f"{len(rows):,}-document sample")
    return sub, [(q, where[i], c.summaries[i]) for q, i in labelled]


def _vectors(embed, model, texts: list[str], workdir: str) -> tuple[np.ndarray, float | None]:
    """The texts' vectors and the seconds they took (None: read from workdir's cache)."""
    h = hashlib.sha1(f"{model.name}\0{model.dim}".encode())
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    path = os.path.join(workdir, f"vectors-{h.hexdigest()[:16]}.npy")
    if os.path.exists(path):
        return np.load(path), None
    t0 = time.perf_counter()
    vecs = embed.embed_batched(model, texts, progress=None)
    took = time.perf_counter() - t0
    np.save(path, vecs)
    return vecs, took


def _rrf(*rankings: list[int], k: int = 60, limit: int = K) -> list[int]:
    """Reciprocal-rank fusion: sum of 1 / (k + rank), rank from 1; ties by document."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, d in enumerate(ranking, 1):
            score[d] = score.get(d, 0.0) + 1.0 / (k + r)
    return sorted(score, key=lambda d: (-score[d], d))[:limit]


def hybrid_probe() -> str | None:
    """None when varvedb answers `search(text=..., vector=...)`, else why not."""
    import varvedb as vv
    try:
        with vv.connect(":memory:") as db:
            c = db.create_collection("docs", {"id": "text", "body": vv.Text(fts=True),
                                              "embedding": vv.Vector(2)})
            c.insert_arrays(id=["a", "b"], body=["free software", "network tools"],
                            embedding=np.array([[1, 0], [0, 1]], np.float32))
            hits = c.search(text="network", vector=np.array([0, 1], np.float32), limit=10)
            if list(hits.ids)[:1] != ["b"]:
                return f"search(text=, vector=) answered {list(hits.ids)}"
    except Exception as e:      # the feature is missing, whatever form that takes
        return f"varvedb hybrid not run: search(text=..., vector=...) is not available ({e!r})"
    return None


def on_sample(c: Corpus, labelled: list, with_varvedb: bool, embed, model, workdir: str,
              size: int, seed: int, echo=print) -> dict:
    """recall@10 of text, vectors (exact cosine) and fusion on a sample of the corpus."""
    sub, lab = _sample(c, labelled, size, seed)
    echo(f"bench text: hybrid on {len(sub.ids):,} documents: embedding them "
         f"({model.name}, {model.dim} dimensions)")
    docs, docs_s = _vectors(embed, model, sub.bodies, workdir)
    qvecs, q_s = _vectors(embed, model, [s for _, _, s in lab], workdir)
    cand = 100
    fts = _sample_fts5(sub, workdir)
    try:
        text_top = [[r - 1 for (r,) in fts.con.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
            (q, cand))] for q, _, _ in lab]
    finally:
        fts.close()
    sims = qvecs @ docs.T
    vec_top = [list(np.argsort(-row, kind="stable")[:cand]) for row in sims]
    want = [j for _, j, _ in lab]

    def recall(tops):
        return float(np.mean([w in list(t)[:K] for w, t in zip(want, tops)]))
    out = {"documents": len(sub.ids), "queries": len(lab), "embedder": model.name,
           "dim": model.dim,
           "embed_s": {"documents": None if docs_s is None else round(docs_s, 1),
                       "queries": None if q_s is None else round(q_s, 1),
                       "means": "seconds to embed; null: vectors cached in the workdir"},
           "recall@10": {"text, fts5": recall(text_top),
                         "vectors, exact cosine": recall(vec_top),
                         "fusion of the two above (RRF k=60, 100 a side, computed here)":
                             recall([_rrf(t, v) for t, v in zip(text_top, vec_top)])}}
    if not with_varvedb:
        return out
    skipped = hybrid_probe()
    import varvedb as vv
    path = _fresh(os.path.join(workdir, "hybrid.varve"))
    with vv.connect(path) as db:
        col = db.create_collection("docs", {"id": "text", "body": vv.Text(fts=True),
                                            "embedding": vv.Vector(model.dim)})
        col.insert_arrays(id=sub.ids, body=sub.bodies, embedding=docs)
        index = {d: j for j, d in enumerate(sub.ids)}
        out["recall@10"]["text, varvedb"] = recall(
            [[index[d] for d in col.search(text=q, limit=K).ids] for q, _, _ in lab])
        if skipped:
            out["varvedb_hybrid"] = skipped
        else:
            out["recall@10"]["hybrid, varvedb search(text=, vector=)"] = recall(
                [[index[d] for d in col.search(text=q, vector=v, limit=K).ids]
                 for (q, _, _), v in zip(lab, qvecs)])
    return out


def _sample_fts5(sub: Corpus, workdir: str) -> Fts5:
    path = os.path.join(workdir, "hybrid-fts5.sqlite")
    fts5_build(path, sub.bodies)
    return Fts5(path)


def run(corpus: str | None = None, limit: int | None = None, queries: int = 200,
        rounds: int = 7, build_rounds: int = 3, hybrid_queries: int = 500, seed: int = 0,
        workdir: str | None = None, with_varvedb: bool = True, embedder: str | None = "onnx",
        hybrid_docs: int = 5000, profile_queries: int = 200, any_queries: int = 0,
        echo=print) -> dict:
    """Every figure as a dict; progress on `echo`."""
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="varvedb-text-", dir=os.getcwd())
    os.makedirs(workdir, exist_ok=True)
    t0 = time.perf_counter()
    c = load_corpus(corpus, limit)
    echo(f"bench text: {len(c.ids):,} documents ({c.source}) read in "
         f"{time.perf_counter() - t0:.1f} s")
    skipped = varvedb_probe() if with_varvedb else "varvedb side not run (--no-varvedb)"
    if skipped:
        echo(f"bench text: {skipped}")
    t0 = time.perf_counter()
    st = Stats(c.bodies)
    classes = query_classes(st, queries, seed)
    echo(f"bench text: {len(st.term):,} tokens, {len(st.vocab):,} terms; query classes "
         f"drawn in {time.perf_counter() - t0:.1f} s")
    out = {"config": {"documents": len(c.ids), "corpus": c.source, "tokens": int(len(st.term)),
                      "terms": len(st.vocab), "queries_per_class": queries, "rounds": rounds,
                      "build_rounds": build_rounds, "seed": seed,
                      "workdir_fs": _fs_type(workdir), "sqlite": sqlite3.sqlite_version,
                      "fts5_table": FTS5_SCHEMA.format(""), "fts5_query": FTS5_QUERY,
                      "varvedb_query": f"collection.search(text=q, limit={K}, select=[])"},
           "varvedb_skipped": skipped,
           "classes": {k: {"means": v["means"], "queries": len(v["queries"]), "df": v["df"],
                           "examples": v["queries"][:5]} for k, v in classes.items()}}
    fts = vv = None
    try:
        echo(f"bench text: build ({build_rounds} rounds)")
        out["build"] = build(c, workdir, build_rounds, not skipped, profile_queries > 0, echo)
        fts = Fts5(os.path.join(workdir, "fts5.sqlite"))
        vv = None if skipped else Varvedb(os.path.join(workdir, "fts.varve"))
        echo(f"bench text: latency ({rounds} rounds × {queries} queries a class)")
        out["latency"] = latency(classes, fts, vv, rounds, profile_queries)
        for name, fig in out["latency"].items():
            if isinstance(fig, dict):
                vvs = (f"varvedb {fig['varvedb_us']['median']:.1f} µs, ratio "
                       f"{fig['ratio']['median']:.2f}" if "ratio" in fig else "")
                echo(f"bench text:   {name}: FTS5 {fig['fts5_us']['median']:.1f} µs {vvs}")
        out["prefix_index"] = prefix_index(c, classes["prefix"], fts, vv, workdir, rounds)
        px = out["prefix_index"]
        if isinstance(px, dict):
            echo(f"bench text:   prefix, FTS5 with prefix='4 5': "
                 f"{px['fts5_prefix_index_us']['median']:.1f} µs ({px['bytes']:,} bytes)")
        out["tokens_agree"] = tokens_agree(classes["rare"], fts, vv)
        echo(f"bench text: rare words found in as many documents as their df: "
             f"{out['tokens_agree']}")
        if vv is not None:
            out["overlap"] = overlap(classes, fts, vv, c.ids)
        if any_queries:
            echo(f"bench text: any-word questions ({rounds} rounds × {any_queries} queries)")
            out["any_words"] = aw = any_words(c, fts, vv, any_queries, rounds, seed,
                                              profile_queries)
            if isinstance(aw, dict) and "ratio" in aw:
                echo(f"bench text:   any: FTS5 {aw['fts5_us']['median']:.1f} µs, varvedb "
                     f"{aw['varvedb_us']['median']:.1f} µs, ratio {aw['ratio']['median']:.2f}, "
                     f"overlap {aw['overlap']['mean']:.3f}")
        out["hybrid"] = hybrid(c, fts, vv, hybrid_queries, workdir, embedder, hybrid_docs,
                               seed, echo)
        sm = out["hybrid"]["sample"]
        echo(f"bench text: text recall@10 on the labelled set "
             f"{out['hybrid']['text_recall@10']}; on the sample: "
             f"{sm['recall@10'] if isinstance(sm, dict) else sm}")
    finally:
        for side in (fts, vv):
            if side is not None:
                side.close()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def _mm(s: dict, fmt: str = "{:.1f}") -> str:
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def _us(side: dict) -> str:
    """A side's median µs, then the min–max of its per-round medians."""
    r = side["per_round_median"]
    return f"{side['median']:.1f} ({r['min']:.1f}–{r['max']:.1f})"


def _profile_lines(p: dict, intro: str) -> list[str]:
    """A search profile (`profile`'s dict) as a markdown table after `intro`."""
    return [f"{intro} ({p['total_us']} µs a query under the profiler, gc off):", "",
            "| function | calls/query | own µs | inclusive µs |", "|---|---|---|---|",
            *[f"| `{r['function']}` | {r['calls_per_query']} | {r['own_us']} | "
              f"{r['inclusive_us']} |" for r in p["by_own_time"]], ""]


def markdown(report: dict) -> str:
    """The figures as a short markdown note."""
    c = report["config"]
    lines = [f"# bench text: {c['documents']:,} documents, varvedb against SQLite FTS5", "",
             f"Corpus: {c['corpus']} ({c['tokens']:,} tokens, {c['terms']:,} terms). "
             f"SQLite {c['sqlite']}: `{c['fts5_table']}`; `{c['fts5_query']}`. varvedb: "
             f"`{c['varvedb_query']}`. Files on {c['workdir_fs']}.", ""]
    if report["varvedb_skipped"]:
        lines += [f"**{report['varvedb_skipped']}**: FTS5's figures only.", ""]
    b = report["build"]
    lines += ["## Build", "", f"{b['figure']}; seconds, median (min–max) over "
              f"{b['fts5']['total_s']['rounds']} rounds.", "",
              "| | insert, committed | optimize / checkpoint | total |", "|---|---|---|---|",
              f"| FTS5 | {_mm(b['fts5']['insert_s'], '{:.2f}')} | "
              f"{_mm(b['fts5']['optimize_s'], '{:.2f}')} | {_mm(b['fts5']['total_s'], '{:.2f}')} |"]
    if b["varvedb"]:
        v = b["varvedb"]
        lines += [f"| varvedb | {_mm(v['insert_s'], '{:.2f}')} | "
                  f"{_mm(v['checkpoint_s'], '{:.2f}')} | {_mm(v['total_s'], '{:.2f}')} |",
                  f"| varvedb without fts | {v['without_fts']['insert_s']:.2f} | "
                  f"{v['without_fts']['checkpoint_s']:.2f} | |",
                  f"| ratio varvedb / FTS5 (goal ≤ 1) | {_mm(b['ratio']['insert'], '{:.2f}')} "
                  f"| | {_mm(b['ratio']['total'], '{:.2f}')} |"]
    if b.get("profile"):
        p = b["profile"]
        lines += ["", f"The build missed its goal: cProfile of one varvedb build ({p['total_s']} "
                  "s under the profiler, gc off):", "",
                  "| function | calls | own s | inclusive s |", "|---|---|---|---|"]
        lines += [f"| `{r['function']}` | {r['calls']} | {r['own_s']} | {r['inclusive_s']} |"
                  for r in p["by_own_time"]]
    by = b["bytes"]
    lines += ["", "## Bytes", "", "| | bytes |", "|---|---|",
              f"| FTS5 file after optimize (text + index) | {by['fts5_file']:,} |",
              f"| FTS5 contentless file (index only) | {by['fts5_contentless_file']:,} |",
              f"| free pages inside them after optimize | {by['fts5_free_pages']['file']:,}; "
              f"{by['fts5_free_pages']['contentless_file']:,} |"]
    if "varvedb_index" in by:
        lines += [f"| varvedb with fts=True | {by['varvedb_with_fts']:,} |",
                  f"| varvedb without | {by['varvedb_without_fts']:,} |",
                  f"| varvedb index (the difference) | {by['varvedb_index']:,} |", "",
                  f"Index over FTS5's file (goal ≤ 0.8): "
                  f"**{by['ratio_index_over_fts5_file']:.2f}**; over the contentless file: "
                  f"{by['ratio_index_over_fts5_contentless']:.2f}; file over file: "
                  f"{by['ratio_files']:.2f}. {by['means']}."]
    lines += ["", "## Latency per query class", "",
              f"{c['queries_per_class']} queries a class × {c['rounds']} rounds, interleaved "
              "query by query (first side alternating per query and per round); µs per "
              "query, median (min–max of the per-round medians).", "",
              "| class | queries | df median | FTS5 µs | varvedb µs | ratio (goal ≤ 1) |",
              "|---|---|---|---|---|---|"]
    for name, fig in report["latency"].items():
        cl = report["classes"][name]
        if not isinstance(fig, dict):
            lines.append(f"| {name} | 0 | | {fig} | | |")
            continue
        df = cl["df"]["median"] if cl["df"] else 0
        vvs = _us(fig["varvedb_us"]) if "varvedb_us" in fig else ""
        ratio = f"{_mm(fig['ratio'], '{:.2f}')} {fig['goal']}" if "ratio" in fig else ""
        lines.append(f"| {name} | {fig['queries']} | {df:g} | {_us(fig['fts5_us'])} | {vvs} | "
                     f"{ratio} |")
    lines += ["", "Classes: " + "; ".join(f"{k}: {v['means']}, e.g. "
                                         f"{', '.join(f'`{q}`' for q in v['examples'][:3])}"
                                         for k, v in report["classes"].items()) + ".", ""]
    for name, fig in report["latency"].items():
        p = fig.get("profile") if isinstance(fig, dict) else None
        if p:
            lines += _profile_lines(p, f"{name} missed its goal: cProfile of varvedb's search "
                                       f"over {p['queries']} of its queries")
    px = report.get("prefix_index")
    if isinstance(px, dict):
        side = "varvedb" if "varvedb_us" in px else "fts5"
        lines += [f"Prefix class against FTS5 with a prefix index (`{px['fts5_table']}`: "
                  f"{px['bytes']:,} bytes, built in {px['build_s']} s), interleaved with "
                  f"{'varvedb' if side == 'varvedb' else 'FTS5 without one'}: "
                  f"{_us(px['fts5_prefix_index_us'])} µs against "
                  f"{_us(px[side + '_us'])}; ratio {_mm(px['ratio'], '{:.2f}')}.", ""]
    t = report.get("tokens_agree")
    if t:
        lines += [f"Tokenizer check: of {t['queries']} rare-word queries, FTS5 finds "
                  f"{t['fts5']} in exactly their df's documents"
                  + (f", varvedb {t['varvedb']}" if "varvedb" in t else "") + ".", ""]
    o = report.get("overlap")
    if o:
        lines += ["## Top-10 overlap with FTS5", "", "| class | mean | min | queries |",
                  "|---|---|---|---|"]
        lines += [f"| {k} | {v['mean']:.3f} | {v['min']:.2f} | {v['queries']} |"
                  for k, v in o.items() if isinstance(v, dict) and v["mean"] is not None]
        lines += ["", f"{o['means']}; goal ≥ 0.8: **{o['goal']}**.", ""]
    a = report.get("any_words")
    if isinstance(a, dict) and "ratio" in a:
        lines += ["## Questions in plain words: match=\"any\" against FTS5's OR", "",
                  f"{a['queries']} summaries of packages as questions ({a['words']['median']:g} "
                  f"words median, {a['words']['max']} at most; e.g. "
                  f"{', '.join(f'`{q}`' for q in a['examples'])}): varvedb "
                  f"`{a['varvedb_query']}`, FTS5 `{a['fts5_query']}`, interleaved query by "
                  f"query over {c['rounds']} rounds.", "",
                  "| FTS5 µs | varvedb µs | ratio (goal ≤ 1) | top-10 overlap mean (min) "
                  "(goal ≥ 0.8) |", "|---|---|---|---|",
                  f"| {_us(a['fts5_us'])} | {_us(a['varvedb_us'])} | "
                  f"{_mm(a['ratio'], '{:.2f}')} {a['goal']['latency']} | "
                  f"{a['overlap']['mean']:.3f} ({a['overlap']['min']:.2f}) "
                  f"{a['goal']['overlap']} |", ""]
        p = a.get("profile")
        if p:
            lines += _profile_lines(p, f"The latency missed its goal: cProfile of varvedb's "
                                       f"side over {p['queries']} questions")
    elif a:
        lines += [f"Questions in plain words: {a}", ""]
    h = report["hybrid"]
    lines += ["## Hybrid: labelled set", "", f"{h['queries']} queries; {h['means']}; e.g. "
              f"`{h['example']}`.", "", "| | recall@10 |", "|---|---|"]
    lines += [f"| text, {side} | {r:.3f} |" for side, r in h["text_recall@10"].items()]
    lines.append("")
    sm = h.get("sample")
    if isinstance(sm, dict):
        lines += [f"On a sample of {sm['documents']:,} documents (the {sm['queries']} "
                  f"relevant ones and others drawn at random; embedding every document "
                  f"takes too long on a CPU), vectors from `{sm['embedder']}` "
                  f"({sm['dim']} dimensions; the documents "
                  + ("were embedded by an earlier run (cached in the workdir)"
                     if sm["embed_s"]["documents"] is None else
                     f"took {sm['embed_s']['documents']} s to embed") + "):", "",
                  "| leg | recall@10 |", "|---|---|"]
        lines += [f"| {leg} | {r:.3f} |" for leg, r in sm["recall@10"].items()]
        if sm.get("varvedb_hybrid"):
            lines += ["", sm["varvedb_hybrid"]]
        lines.append("")
    elif sm:
        lines += [sm, ""]
    return "\n".join(lines)


def write(report: dict, out: str) -> str:
    """OUT (JSON) and OUT with .md: returns the markdown's path."""
    return _sql.write(report, out, markdown)
