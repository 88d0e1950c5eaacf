"""`varvedb bench langchain`: the LangChain store against Chroma's, same documents.

Both stores get the same documents and the same vectors: the vectors are made
once (seeded, unit length) and handed out by a lookup `Embeddings`, so model
time is excluded and what is measured is the store. Each round makes a fresh
store of each kind on disk (varvedb: a file, HNSW; Chroma: a persistent
directory, HNSW, cosine) and times `add_documents` of every document, then
the filtered `similarity_search` queries, the two stores alternating query by
query; the rounds alternate which store goes first (A, B, B, A, ...). Figures
are medians over the rounds with their min–max, one process.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time

import numpy as np

from .ab import spread


class LookupEmbeddings:
    """LangChain Embeddings that return precomputed vectors for known texts."""

    def __init__(self, texts: list[str], vectors: np.ndarray):
        self._rows = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors

    def embed_documents(self, texts):
        return self._vectors[[self._rows[t] for t in texts]].tolist()

    def embed_query(self, text):
        return self._vectors[self._rows[text]].tolist()


def make_data(n: int, dim: int, queries: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n + queries, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    texts = [f"document {i} about topic {i % 97}" for i in range(n)]
    qtexts = [f"query {j}" for j in range(queries)]
    metas = [{"tag": i % 100, "src": f"s{i % 7}", "n": i} for i in range(n)]
    return texts, metas, qtexts, vecs


def _lookup(texts, qtexts, vecs):
    from langchain_core.embeddings import Embeddings

    class _Lookup(LookupEmbeddings, Embeddings):
        pass
    return _Lookup(texts + qtexts, vecs)


def _ours(emb, folder: str):
    from varvedb.integrations.langchain import VarveVectorStore
    store = VarveVectorStore(emb, path=os.path.join(folder, "lc.varve"))
    return store, store.close, store.add_documents


def _chroma(emb, folder: str):
    from langchain_chroma import Chroma
    store = Chroma(collection_name="bench", embedding_function=emb,
                   persist_directory=os.path.join(folder, "chroma"),
                   collection_metadata={"hnsw:space": "cosine"})
    # Chroma refuses an add larger than its max batch (5 461 rows in chromadb 1.5),
    # and its LangChain store does not split one: the docs go in batches of that size
    batch = store._client.get_max_batch_size()

    def add(docs):
        for s in range(0, len(docs), batch):
            store.add_documents(docs[s:s + batch])
    return store, lambda: None, add


def chroma_available() -> bool:
    from importlib.util import find_spec
    return all(find_spec(m) is not None for m in ("chromadb", "langchain_chroma"))


def run(out: str | None, n: int = 10_000, dim: int = 384, rounds: int = 5,
        queries: int = 100, k: int = 10, flt: dict | None = None, peers: bool = True,
        workdir: str | None = None, echo=print) -> dict:
    """Run the rounds; write `out`.md and `out`.json when `out` is given."""
    from langchain_core.documents import Document
    flt = {"tag": {"$lt": 10}} if flt is None else flt
    texts, metas, qtexts, vecs = make_data(n, dim, queries)
    emb = _lookup(texts, qtexts, vecs)
    engines = {"varvedb": _ours}
    notes = []
    if peers and chroma_available():
        engines["chroma"] = _chroma
    elif peers:
        notes.append("chromadb / langchain-chroma not installed: Chroma left out")
    names = list(engines)
    add_s = {e: [] for e in names}
    linked_s = []        # varvedb: add_documents until its HNSW graph has every row
    query_ms = {e: [] for e in names}
    overlap = []
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        root = tempfile.mkdtemp(prefix="bench-lc-", dir=workdir)
        try:
            stores = {}
            for e in order:
                folder = os.path.join(root, e)
                os.makedirs(folder)
                store, close, add = engines[e](emb, folder)
                docs = [Document(t, metadata=m) for t, m in zip(texts, metas)]
                t0 = time.perf_counter()
                add(docs)
                add_s[e].append(time.perf_counter() - t0)
                if e == "varvedb":
                    while store.collection.index_status()["unlinked"]:
                        time.sleep(0.005)
                    linked_s.append(time.perf_counter() - t0)
                stores[e] = (store, close)
            per = {e: [] for e in names}
            answers = {e: [] for e in names}
            for j, q in enumerate(qtexts):
                for e in (order if j % 2 == 0 else order[::-1]):
                    t0 = time.perf_counter()
                    got = stores[e][0].similarity_search(q, k=k, filter=flt)
                    per[e].append(time.perf_counter() - t0)
                    answers[e].append([d.page_content for d in got])
            for e in names:
                query_ms[e].append(1000 * float(np.median(per[e])))
            if len(names) == 2:
                a, b = (answers[e] for e in names)
                overlap.append(float(np.mean([len(set(x) & set(y)) / max(1, len(y))
                                              for x, y in zip(a, b)])))
            hits = {e: float(np.mean([len(x) for x in answers[e]])) for e in names}
            for e in names:
                stores[e][1]()
            echo(f"round {r + 1}/{rounds}: " + ", ".join(
                f"{e} add {add_s[e][-1]:.2f} s, query {query_ms[e][-1]:.2f} ms "
                f"({hits[e]:.1f} hits)" for e in names))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    summary = {
        "docs": n, "dim": dim, "rounds": rounds, "queries": queries, "k": k,
        "filter": flt, "engines": names, "notes": notes,
        "add_documents_s": {e: spread(add_s[e]) for e in names},
        "varvedb_add_until_linked_s": spread(linked_s),
        "filtered_search_ms": {e: spread(query_ms[e]) for e in names},
        "top_k_overlap": spread(overlap) if overlap else None,
        "versions": _versions(names),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if out is not None:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out + ".json", "w") as f:
            json.dump(summary, f, indent=2)
        with open(out + ".md", "w") as f:
            f.write(markdown(summary))
        echo(f"wrote {out}.md and {out}.json")
    return summary


def _versions(names) -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for pkg in ("varvedb", "langchain-core", *(["chromadb", "langchain-chroma"]
                                               if "chroma" in names else [])):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def _cell(s: dict, fmt: str) -> str:
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}–{s['max']:{fmt}})"


def markdown(summary: dict) -> str:
    names = summary["engines"]
    add, q = summary["add_documents_s"], summary["filtered_search_ms"]
    lines = [
        f"# LangChain stores: {summary['docs']:,} documents × {summary['dim']}".replace(",", " "),
        "",
        f"Measured {summary['measured']} by `varvedb bench langchain` on "
        f"{summary['machine']['cpus']} cores (Python {summary['machine']['python']}), "
        f"{summary['rounds']} rounds in one process, the stores alternating (which goes first alternates by "
        f"round; queries alternate one by one). Each round: fresh stores on disk, "
        f"`add_documents` of every document (no ids given), then {summary['queries']} "
        f"`similarity_search(k={summary['k']}, filter={json.dumps(summary['filter'])})` "
        f"(10% of the documents pass). Vectors are precomputed (unit length, seeded) and "
        f"handed out by a lookup embedder, so no model time is in any figure. varvedb: one "
        f"file, HNSW (m 16), durable commit; Chroma: a persistent directory, HNSW, "
        f"cosine; its LangChain store refuses one add larger than Chroma's max batch "
        f"(5 461 rows), so its documents go in batches of that size, timed whole. "
        f"Median (min–max) over the rounds.",
        "",
        "| figure | " + " | ".join(names)
        + (f" | {names[1]} ÷ {names[0]} |" if len(names) == 2 else " |"),
        "|---|" + "---|" * (len(names) + (len(names) == 2)),
    ]
    for label, d, fmt in ((f"add_documents, {summary['docs']} docs, s", add, ".2f"),
                          ("filtered similarity_search, ms", q, ".2f")):
        row = f"| {label} | " + " | ".join(_cell(d[e], fmt) for e in names)
        if len(names) == 2:
            row += f" | {d[names[1]]['median'] / d[names[0]]['median']:.1f}×"
        lines.append(row + " |")
    linked = summary["varvedb_add_until_linked_s"]
    lines += ["", f"varvedb's `add_documents` returns at its durable commit; its HNSW graph "
              f"links the rows in the background (a search meanwhile scans the unlinked "
              f"ones exactly, so no answer changes). Until every row was linked: "
              f"{_cell(linked, '.2f')} s. Chroma's add returns with its index built. "
              f"The query figures are measured after both were fully indexed."]
    if summary.get("top_k_overlap"):
        lines += ["", f"Top-{summary['k']} overlap of the two stores' answers: "
                  f"{summary['top_k_overlap']['median']:.3f} (median over rounds)."]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in summary["versions"].items())
              + "."]
    for note in summary["notes"]:
        lines += ["", note]
    return "\n".join(lines) + "\n"
