"""The end-to-end demo behind `make demo`: load, search, update, time travel."""
from __future__ import annotations

import os
import time

import numpy as np
from tqdm import tqdm

import varvedb as vv
from .demo_data import make

WORDS = ("river ice varve layer sediment lake summer winter clay silt core year "
         "pollen glacier melt season").split()


def run(path: str = "demo.varve", rows: int = 100_000, dim: int = 128, echo=print) -> None:
    if os.path.exists(path):
        os.remove(path)
    ds = make(rows, dim, queries=1)
    ids = ds.ids
    rng = np.random.default_rng(1)
    words = np.array(WORDS, dtype=object)
    titles = [" ".join(w) for w in words[rng.integers(0, len(WORDS), (rows, 3))]]
    years = 2015 + (ids % 10)

    db = vv.connect(path)
    docs = db.create_collection("docs", {
        "title": "text", "tag": vv.Int(index="hash"), "year": vv.Int(index="sorted"),
        "embedding": vv.Vector(dim, metric="cosine"),
    })
    t0 = time.perf_counter()
    step = 10_000
    with db.transaction(), tqdm(total=rows, unit="rows", desc="loading") as bar:
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            docs.insert_arrays(id=ids[lo:hi], title=titles[lo:hi], tag=ds.tags[lo:hi],
                               year=years[lo:hi], embedding=ds.vectors[lo:hi])
            bar.update(hi - lo)
    load_s = time.perf_counter() - t0
    db.checkpoint()
    echo(f"loaded {rows:,} rows x {dim} dims in {load_s:.2f} s "
         f"({rows / load_s:,.0f} rows/s); file {os.path.getsize(path) / 2**20:.1f} MiB, "
         f"version {db.version}")

    q = ds.queries[0]
    where = "tag < 10 AND year >= 2020"
    hits, ms = _timed(lambda: docs.search(vector=q, where=where, limit=5))
    echo(f"\nsearch where {where!r}, top 5 ({ms:.2f} ms, {hits.plan.brief()}):")
    for h in hits:
        echo(f"  id={h.id:<7} score={h.score:.4f} tag={h['tag']:<3} year={h['year']} "
             f"title={h['title']!r}")

    top = hits[0].id
    doc, ms = _timed(lambda: docs.get(top))
    echo(f"\nget({top}) ({ms:.3f} ms): title={doc['title']!r} tag={doc['tag']} year={doc['year']}")

    before = db.version
    n, ms = _timed(lambda: docs.update({"tag": 99, "title": "moved out of the filter"},
                                       where=f"id = {top}"))
    echo(f"\nupdate id={top} set tag=99 ({ms:.2f} ms, durable commit): {n} row, "
         f"version {before} -> {db.version}")

    now, ms = _timed(lambda: docs.search(vector=q, where=where, limit=5))
    echo(f"\nsame search now ({ms:.2f} ms): ids {now.ids}")
    then, ms = _timed(lambda: docs.search(vector=q, where=where, limit=5, as_of=before))
    echo(f"same search as_of={before} ({ms:.2f} ms): ids {then.ids}")
    echo(f"get({top}, as_of={before}): tag={docs.get(top, as_of=before)['tag']}; "
         f"now: tag={docs.get(top)['tag']}")

    report, ms = _timed(db.verify)
    echo(f"\nverify ({ms:.0f} ms): ok={report.ok}, {report.versions_checked} versions, "
         f"chain {report.chain[:16]}...")
    db.close()
    t0 = time.perf_counter()
    db = vv.connect(path)
    first = db["docs"].search(vector=q, where=where, limit=5)
    echo(f"reopen + first search: {(time.perf_counter() - t0) * 1000:.1f} ms, "
         f"same answer: {first.ids == now.ids}")
    db.close()


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1000
