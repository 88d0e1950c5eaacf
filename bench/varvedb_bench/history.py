"""`varvedb bench history`: what vacuum, compression and backup cost and give.

Three measurements, in one run, on a real disk (`--out`):

* **vacuum**: ROWS x DIM clustered vectors with an HNSW index, every row
  updated UPDATES times (each update: the old version dies, a new one is born);
  the file's size before and after `vacuum(keep=1)` against a fresh load of
  the final state, the vacuum's time against the fresh load + graph build, and
  recall@10 / QPS of the three files (the pre-vacuum file is a copy), queried
  interleaved in one process (before, vacuumed, fresh, then the reverse ...).
* **compress**: DOCS documents of text + json metadata and no vectors (the
  package descriptions' paragraphs `bench text` reads, or `--corpus`): the
  file's bytes before and after a vacuum (which writes text, json and scalar
  columns compressed) against SQLite's file of the same rows (after its own
  VACUUM), and get() latency of the three, interleaved.
* **backup**: a file of about BACKUP_MB (vectors only), a writer committing
  single-row upserts in a thread; the page cache dropped where that is
  allowed, then `backup()`: its time, and the writer's commit latency before
  and during it.

Output: OUT/history-<rows>x<dim>.{json,md}.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import statistics
import threading
import time

import numpy as np

import varvedb as vv

from . import report

K = 10


def _wait_linked(db) -> None:
    while db["docs"].index_status("emb")["unlinked"]:
        time.sleep(0.1)


def _settled(db, t0: float) -> tuple[float, int]:
    """Graph linked, checkpoint written, closed: (seconds since t0, log bytes)."""
    _wait_linked(db)
    db.checkpoint()
    seconds, end = time.perf_counter() - t0, db.engine.log.end
    db.close()
    return seconds, end


def _spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def vacuum_figures(out: str, rows: int, dim: int, updates: int, queries: int, rounds: int,
                   efs: list[int], echo) -> dict:
    rng = np.random.default_rng(14)
    centers = rng.normal(size=(256, dim)).astype(np.float32) * 3
    x0 = centers[rng.integers(0, 256, rows)] + rng.normal(size=(rows, dim)).astype(np.float32)
    q = centers[rng.integers(0, 256, queries)] + rng.normal(size=(queries, dim)).astype(np.float32)
    ids = np.arange(rows)
    spec = vv.HNSW(m=16, ef_construction=200)
    schema = {"r": "int", "emb": vv.Vector(dim, metric="l2", index=spec)}
    upd, before, fresh, repaired = (os.path.join(out, f) for f in (
        "updated.varve", "before.varve", "fresh.varve", "repaired.varve"))
    res: dict = {"rows": rows, "dim": dim, "updates": updates}
    t = time.perf_counter()
    db = vv.connect(upd)
    docs = db.create_collection("docs", schema)
    docs.insert_arrays(id=ids, r=np.zeros(rows, np.int64), emb=x0)
    x = x0
    for r in range(1, updates + 1):
        x = x0 + rng.normal(scale=0.05, size=x0.shape).astype(np.float32)
        with db.transaction():     # an update of every row: old versions die, new ones are born
            docs.delete(ids=ids)
            docs.insert_arrays(id=ids, r=np.full(rows, r, np.int64), emb=x)
    res["updated_load_s"], res["updated_log"] = _settled(db, t)
    res["updated_bytes"] = os.path.getsize(upd)
    shutil.copy(upd, before)
    shutil.copy(upd, repaired)
    echo(f"vacuum: {rows:,} rows updated {updates} times: {res['updated_bytes']:,} bytes")
    db = vv.connect(repaired)
    res["repair_s"] = db.vacuum(keep=1, graphs="repair").seconds
    db.close()
    db = vv.connect(upd)
    rep = db.vacuum(keep=1)
    res["vacuumed_log"] = db.engine.log.end
    db.close()
    res["vacuum_s"] = rep.seconds
    res["rows_dropped"] = rep.rows_dropped
    res["vacuumed_bytes"] = os.path.getsize(upd)
    t = time.perf_counter()
    db = vv.connect(fresh)
    db.create_collection("docs", schema).insert_arrays(id=ids, r=np.full(rows, updates), emb=x)
    res["fresh_load_build_s"], res["fresh_log"] = _settled(db, t)
    res["fresh_bytes"] = os.path.getsize(fresh)
    res["vacuumed_over_fresh"] = res["vacuumed_bytes"] / res["fresh_bytes"]
    d2 = (q ** 2).sum(1)[:, None] - 2 * q @ x.T + (x ** 2).sum(1)[None, :]
    truth = np.argsort(d2, axis=1)[:, :K].tolist()
    conns = {n: vv.connect(p, readonly=True) for n, p in
             (("before", before), ("vacuumed", upd), ("repaired", repaired),
              ("fresh", fresh))}
    try:
        for c in conns.values():
            c["docs"].search(vector=q[0], limit=K)
        res["curves"] = {}
        for ef in efs:
            qps = {n: [] for n in conns}
            recall = {}
            for rnd in range(rounds):
                for n in (list(conns) if rnd % 2 == 0 else list(conns)[::-1]):
                    col = conns[n]["docs"]
                    t = time.perf_counter()
                    got = [col.search(vector=v, limit=K, ef=ef).ids for v in q]
                    qps[n].append(len(q) / (time.perf_counter() - t))
                    recall[n] = float(np.mean([len(set(g) & set(tr)) / K
                                               for g, tr in zip(got, truth)]))
            res["curves"][str(ef)] = {n: {"recall": recall[n], "qps": _spread(qps[n])}
                                      for n in conns}
    finally:
        for c in conns.values():
            c.close()
    for p in (upd, before, fresh, repaired):
        os.remove(p)
    return res


def _corpus_docs(corpus: str | None, n: int) -> tuple[list[dict], str]:
    from .text import load_corpus
    c = load_corpus(corpus)
    docs = []
    # paragraphs, each a document: there are more of them than descriptions
    for name, summary, body in zip(c.ids, c.summaries, c.bodies):
        for k, para in enumerate(p for p in body.split("\n\n") if p.strip()):
            docs.append({"id": len(docs), "name": name, "body": para,
                         "meta": {"package": name, "paragraph": k, "summary": summary,
                                  "words": len(para.split())}})
            if len(docs) >= n:
                return docs, c.source
    return docs, c.source


def compress_figures(out: str, n: int, corpus: str | None, rounds: int, echo) -> dict:
    docs, source = _corpus_docs(corpus, n)
    vpath, spath = os.path.join(out, "docs.varve"), os.path.join(out, "docs.sqlite")
    before = vpath + ".before"
    db = vv.connect(vpath)
    db.create_collection("docs", {"name": "text", "body": "text", "meta": "json"}).insert(docs)
    db.checkpoint()
    log_before = db.engine.log.end
    db.close()
    res: dict = {"documents": len(docs), "corpus": source,
                 "body_chars": sum(len(d["body"]) for d in docs),
                 "bytes_before_vacuum": os.path.getsize(vpath), "log_before_vacuum": log_before}
    shutil.copy(vpath, before)
    con = sqlite3.connect(spath)
    con.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, name TEXT, body TEXT, meta TEXT)")
    con.executemany("INSERT INTO docs VALUES (?, ?, ?, ?)",
                    [(d["id"], d["name"], d["body"], json.dumps(d["meta"])) for d in docs])
    con.commit()
    con.execute("VACUUM")
    res["sqlite_bytes"] = os.path.getsize(spath)
    db = vv.connect(vpath)
    res["vacuum_s"] = db.vacuum(keep=1).seconds
    res["log_after_vacuum"] = db.engine.log.end
    db.close()
    res["bytes_after_vacuum"] = os.path.getsize(vpath)
    res["after_over_sqlite"] = res["bytes_after_vacuum"] / res["sqlite_bytes"]
    res["before_over_sqlite"] = res["bytes_before_vacuum"] / res["sqlite_bytes"]
    echo(f"compress: {len(docs):,} documents: {res['bytes_before_vacuum']:,} -> "
         f"{res['bytes_after_vacuum']:,} bytes; SQLite {res['sqlite_bytes']:,}")
    old, new = vv.connect(before, readonly=True), vv.connect(vpath, readonly=True)
    pick = random.Random(3)
    keys = [pick.randrange(len(docs)) for _ in range(2000)]

    def sqlite_get(k):
        row = con.execute("SELECT name, body, meta FROM docs WHERE id = ?", (k,)).fetchone()
        return row[0], row[1], json.loads(row[2])
    gets = {"before": old["docs"].get, "after": new["docs"].get, "sqlite": sqlite_get}
    lat = {name: [] for name in gets}
    try:
        for k in keys[:200]:
            for get in gets.values():
                get(k)
        for rnd in range(rounds):
            for name in (list(gets) if rnd % 2 == 0 else list(gets)[::-1]):
                get = gets[name]
                t = time.perf_counter()
                for k in keys:
                    get(k)
                lat[name].append((time.perf_counter() - t) / len(keys) * 1e6)
    finally:
        old.close()
        new.close()
        con.close()
    res["get_us"] = {name: _spread(v) for name, v in lat.items()}
    for p in (vpath, before, spath):
        os.remove(p)
    return res


def backup_figures(out: str, megabytes: int, seconds: float, echo) -> dict:
    dim = 256
    rows = max(1000, (megabytes << 20) // (2 * dim * 4))   # the vectors are held twice
    path, dest = os.path.join(out, "big.varve"), os.path.join(out, "copy.varve")
    rng = np.random.default_rng(1)
    db = vv.connect(path)
    docs = db.create_collection("docs", {"n": "int", "emb": vv.Vector(dim, metric="l2")})
    for lo in range(0, rows, 100_000):
        k = min(100_000, rows - lo)
        docs.insert_arrays(id=np.arange(lo, lo + k), n=np.zeros(k, np.int64),
                           emb=rng.normal(size=(k, dim)).astype(np.float32))
    db.checkpoint()
    res: dict = {"file_bytes": os.path.getsize(path)}
    echo(f"backup: a {res['file_bytes']:,}-byte file, a writer committing beside it")
    lat: dict[str, list[float]] = {"idle": [], "backup": []}
    phase = ["idle"]
    stop = threading.Event()

    def writer():
        c = db.session().collection("docs")
        i = 0
        while not stop.is_set():
            v = rng.normal(size=dim).astype(np.float32)
            t = time.perf_counter()
            c.upsert({"id": rows + i % 1000, "n": i, "emb": v})
            lat[phase[0]].append(time.perf_counter() - t)
            i += 1
    w = threading.Thread(target=writer)
    w.start()
    try:
        time.sleep(seconds)
        res["cold"] = _drop_caches()
        phase[0] = "backup"
        t = time.perf_counter()
        info = db.backup(dest)
        res["backup_s"] = time.perf_counter() - t
        phase[0] = "idle"
        time.sleep(seconds / 2)
    finally:
        stop.set()
        w.join()
        db.close()
    res.update(backup_version=info.version, backup_bytes=info.bytes,
               mb_per_s=info.bytes / res["backup_s"] / 1e6)
    for name, xs in lat.items():
        xs = sorted(xs)
        res[f"writer_{name}"] = {"commits": len(xs), "p50_ms": 1e3 * xs[len(xs) // 2],
                                 "p99_ms": 1e3 * xs[int(0.99 * (len(xs) - 1))],
                                 "max_ms": 1e3 * xs[-1]}
    for p in (path, dest):
        os.remove(p)
    return res


def _drop_caches() -> bool:
    """Drop the page cache, so the backup reads from disk (needs root)."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def run(out: str, rows: int = 100_000, dim: int = 128, updates: int = 3, queries: int = 300,
        rounds: int = 5, efs: list[int] | None = None, docs: int = 100_000,
        corpus: str | None = None, backup_mb: int = 1024, writer_seconds: float = 5.0,
        echo=print) -> dict:
    os.makedirs(out, exist_ok=True)
    summary = {"vacuum": vacuum_figures(out, rows, dim, updates, queries, rounds,
                                        efs or [20, 40, 80, 160], echo),
               "compress": compress_figures(out, docs, corpus, rounds, echo),
               "backup": backup_figures(out, backup_mb, writer_seconds, echo)}
    report.write_outputs(summary, os.path.join(out, f"history-{rows}x{dim}"), markdown,
                         lambda s, path: "these figures have no plot", echo)
    return summary


def markdown(s: dict) -> str:
    v, c, b = s["vacuum"], s["compress"], s["backup"]
    lines = [f"### vacuum: {v['rows']:,} x {v['dim']} with HNSW, every row updated "
             f"{v['updates']} times, then vacuum(keep=1)", "",
             "| file | bytes |", "|---|---|",
             f"| updated | {v['updated_bytes']:,} |", f"| vacuumed | {v['vacuumed_bytes']:,} |",
             f"| fresh load of the final state | {v['fresh_bytes']:,} |", "",
             f"vacuumed / fresh: {v['vacuumed_over_fresh']:.3f}; vacuum {v['vacuum_s']:.1f} s "
             f"(graph rebuilt; {v['repair_s']:.1f} s with graphs=\"repair\") against a fresh "
             f"load + build {v['fresh_load_build_s']:.1f} s; "
             f"{v['rows_dropped']:,} row versions dropped.", "",
             "| ef | before: recall / QPS | vacuumed (rebuilt) | vacuumed (repaired) | fresh |",
             "|---|---|---|---|---|"]
    for ef, row in v["curves"].items():
        lines.append(f"| {ef} | " + " | ".join(
            f"{row[n]['recall']:.3f} / {row[n]['qps']['median']:,.0f} "
            f"({row[n]['qps']['min']:,.0f}–{row[n]['qps']['max']:,.0f})"
            for n in ("before", "vacuumed", "repaired", "fresh")) + " |")
    g = c["get_us"]
    lines += ["", f"### compress: {c['documents']:,} documents of text + json, no vectors "
                  f"({c['corpus']})", "",
              "| file | bytes | get() µs |", "|---|---|---|",
              f"| varvedb, loaded | {c['bytes_before_vacuum']:,} | "
              f"{g['before']['median']:.2f} ({g['before']['min']:.2f}–{g['before']['max']:.2f}) |",
              f"| varvedb, vacuumed (compressed) | {c['bytes_after_vacuum']:,} | "
              f"{g['after']['median']:.2f} ({g['after']['min']:.2f}–{g['after']['max']:.2f}) |",
              f"| SQLite (after VACUUM) | {c['sqlite_bytes']:,} | "
              f"{g['sqlite']['median']:.2f} ({g['sqlite']['min']:.2f}–{g['sqlite']['max']:.2f}) |",
              "", f"vacuumed / SQLite: {c['after_over_sqlite']:.2f}; loaded / SQLite: "
                  f"{c['before_over_sqlite']:.2f}.", "",
              f"### backup of a {b['file_bytes']:,}-byte file beside a committing writer", "",
              f"{b['backup_s']:.2f} s ({b['mb_per_s']:.0f} MB/s, fsync and verify included; "
              f"page cache {'dropped first' if b['cold'] else 'not dropped'}).", "",
              "| writer | commits | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for name in ("idle", "backup"):
        w = b[f"writer_{name}"]
        lines.append(f"| {'without' if name == 'idle' else 'during the'} backup | "
                     f"{w['commits']:,} | {w['p50_ms']:.2f} | {w['p99_ms']:.2f} | "
                     f"{w['max_ms']:.1f} |")
    lines += ["", "File bytes are the files' sizes: varvedb's grows in steps of 1 MiB (zeros "
              "kept ahead of the log so that commits do not grow the file)."]
    return "\n".join(lines) + "\n"
