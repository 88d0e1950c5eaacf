"""Fill numba's disk cache before the test workers start: `make test` runs this
twice at once, `python tests/warm_kernels.py vectors` and `... text`.

Why: on a fresh clone every kernel is compiled on first use, and the two
pytest workers start at the same moment, so each compiled most of the same
kernels (measured: 150 s of a 340 s cold run; 190 s warm). Here each kernel
family is compiled once, the two halves side by side (the graphs of every
dtype in one, text, SQL and one small graph in the other: 93 s and 36 s), by the same public
calls the tests make (so with the same argument types), and the workers load
them from the cache. Nothing here is a test: a failure is printed and the
suite runs anyway (it compiles what is missing and reports the failure).
"""
from __future__ import annotations

import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

import varvedb as vv


def _graphs(work: Path, dtypes: tuple[str, ...], reopen: bool) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 16)).astype(np.float32)
    path = work / f"v-{'-'.join(dtypes)}.varve"
    with vv.connect(path) as db:
        for dtype in dtypes:
            if dtype in ("int8", "bit"):
                d = db.create_collection(f"d_{dtype}", {
                    "v": vv.Vector(16, dtype=dtype, index=vv.HNSW(m=8))})
                rows = rng.integers(-3, 3, (600, 16)) if dtype == "int8" \
                    else rng.integers(0, 2, (600, 16))
                d.insert_arrays(id=np.arange(600), v=rows)
                while d.index_status()["unlinked"]:
                    time.sleep(0.01)
                q = rows[0].astype(np.float32) if dtype == "int8" else rows[0]
                d.search(vector=q, limit=5, select=[])
                d.search(vector=q, limit=5, exact=True, select=[])
                continue
            for metric in ("cosine", "l2", "dot"):
                for quantize in (None, "int8"):
                    c = db.create_collection(f"{metric}_{dtype}_{quantize}", {
                        "tag": vv.Int(index="sorted"),
                        "v": vv.Vector(16, metric=metric, dtype=dtype,
                                       index=vv.HNSW(m=8, ef_construction=32,
                                                     quantize=quantize))})
                    c.insert_arrays(id=np.arange(600), tag=np.arange(600) % 10, v=x)
                    c.insert({"id": 600, "tag": 1, "v": x[0]})        # a one-row link
                    while c.index_status()["unlinked"]:
                        time.sleep(0.01)
                    c.search(vector=x[1], limit=5, select=[])
                    c.search(vector=x[1], limit=5, where="tag = 3", select=[])
                    c.search(vector=x[1], limit=5, exact=True)
        db.checkpoint()
    if not reopen:
        return
    with vv.connect(path) as db:                    # mapped, read-only arrays
        for c in (name for name in db.collections() if not name.startswith("d_")):
            db[c].search(vector=x[2], limit=5, select=[])
            db[c].search(vector=x[2], limit=5, where="tag < 5", select=[])
            db[c].search(vector=x[2], limit=5, metric="l1", select=[])


def _vectors(work: Path) -> None:
    _graphs(work, ("f32", "f16", "int8", "bit"), reopen=True)


def _text(work: Path) -> None:
    rng = np.random.default_rng(1)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    bodies = [" ".join(rng.choice(words, 12)) for _ in range(400)]
    with vv.connect(work / "t.varve") as db:
        c = db.create_collection("docs", {"body": vv.Text(fts=True), "n": vv.Int(),
                                          "v": vv.Vector(8, index=vv.HNSW())})
        c.insert_arrays(id=np.arange(400), body=bodies, n=np.arange(400),
                        v=rng.normal(size=(400, 8)).astype(np.float32))
        for q in ("alpha", "alpha beta", '"alpha beta"', "gam*", "alpha -beta"):
            c.search(text=q, limit=5)
        c.search(text="alpha", vector=np.ones(8, np.float32), limit=5)
        c.search(text="alpha", where="n > 10", limit=5)
        db.sql("SELECT id FROM docs WHERE n < 20 ORDER BY v <-> '[1,0,0,0,0,0,0,0]' LIMIT 3")
        db.sql("SELECT count(*) FROM docs WHERE body LIKE '%alpha%'")
        db.checkpoint()
    with vv.connect(work / "t.varve") as db:
        db["docs"].search(text="beta", limit=5)
        db.verify()


if __name__ == "__main__":
    part = {"vectors": _vectors, "text": _text}[sys.argv[1]]
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as work:
            part(Path(work))
    except Exception:                      # the suite will show it where it matters
        traceback.print_exc()
    print(f"warm_kernels {sys.argv[1]}: {time.perf_counter() - start:.0f} s")
