"""What a warm search leaves behind for the process: nothing for the garbage
collector to walk, no wake-up of an idle maintainer, and (the first connect()
of a process) the modules numba and the kernels loaded frozen out of full
collections (engine.freeze_loaded_modules). Issue 28's tail latency: the
slowest warm searches were full collections over numba's ~50 000 objects.
Asserts on the mechanisms, never on time."""
from __future__ import annotations

import gc
import subprocess
import sys
import time

import numpy as np

import varvedb as vv

DIM = 8


def indexed(path, n=400):
    db = vv.connect(path)
    c = db.create_collection("docs", {"tag": "int", "emb": vv.Vector(DIM)})
    rng = np.random.default_rng(0)
    c.insert_arrays(id=np.arange(n), tag=np.arange(n) % 5,
                    emb=rng.standard_normal((n, DIM)).astype(np.float32))
    c.create_index("emb", vv.HNSW(m=8, ef_construction=32))
    db.engine.maintainer.finish()
    assert c.index_status()["unlinked"] == 0
    return db, c


def test_a_warm_search_leaves_nothing_for_the_collector(tmp_path):
    db, c = indexed(tmp_path / "a.varve")
    queries = np.random.default_rng(1).standard_normal((50, DIM)).astype(np.float32)
    shapes = [dict(limit=10, ef=10, select=[]), dict(limit=10, ef=10),
              dict(limit=5, where="tag = 3")]
    for _ in range(3):                      # plans kept, kernels loaded, workspaces made
        for q in queries:
            for shape in shapes:
                c.search(vector=q, **shape)
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]          # tracked allocations less deallocations
        for _ in range(10):
            for q in queries:
                for shape in shapes:
                    hits = c.search(vector=q, **shape)
                    assert len(hits)
                    del hits
        grown = gc.get_count()[0] - before
    finally:
        gc.enable()
    # 1 500 searches: what each one allocated it freed again (by refcount); one
    # object left per search would read 1 500
    assert grown < 30, grown
    db.close()


def test_an_idle_maintainer_does_not_wake(tmp_path):
    db, c = indexed(tmp_path / "a.varve")
    m = db.engine.maintainer
    deadline = time.monotonic() + 300        # a hang guard only
    while m.passes < 1:                      # the pass that linked the rows above ends
        assert time.monotonic() < deadline
        time.sleep(0.002)
    passes = m.passes
    q = np.ones(DIM, np.float32)
    for _ in range(300):
        c.search(vector=q, limit=10, ef=10, select=[])
    time.sleep(0.1)                         # room for a timed wake-up, were there one
    assert m.passes == passes
    c.insert({"id": 10_000, "tag": 1, "emb": q})
    deadline = time.monotonic() + 300        # a hang guard only
    while m.passes == passes:                # a commit does wake it
        assert time.monotonic() < deadline
        time.sleep(0.002)
    db.close()


FRESH = """
import gc, sys
import varvedb as vv
from varvedb.engine.engine import freeze_loaded_modules
db = vv.connect(sys.argv[1])
frozen = gc.get_freeze_count()
db.close()
db = vv.connect(sys.argv[1])
assert gc.get_freeze_count() <= frozen and not freeze_loaded_modules()  # once
print(frozen, len(gc.get_objects()), 'numba' in sys.modules)
"""


def test_the_first_connect_freezes_what_the_imports_left(tmp_path):
    """In a fresh process: numba's and the kernels' objects are frozen at the first
    open, once, and the unfrozen heap a full collection walks is a small part."""
    db, _ = indexed(tmp_path / "a.varve")
    db.close()
    out = subprocess.run([sys.executable, "-c", FRESH, str(tmp_path / "a.varve")],
                         capture_output=True, text=True, check=True)
    frozen, unfrozen, numba_loaded = out.stdout.split()
    assert numba_loaded == "True"
    assert int(frozen) > 20_000
    assert int(unfrozen) < int(frozen) // 2
