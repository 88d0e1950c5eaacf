"""A query under a memory cgroup smaller than the file answers as without one.

The child process loads every kernel on a small file first, then joins a
cgroup v1 memory group (what it allocated before stays charged where it
was: only what it reads from now on counts), drops the big file from the page
cache and opens it: the file does not fit, so it is mapped without
MAP_POPULATE, the IVF-PQ rerank prefetches its candidates through an arena
advised MADV_RANDOM, and the PQ-coded HNSW walk hands its candidates back to be
prefetched before their rerank. Its answers must equal an uncapped child's."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import varvedb as vv
from varvedb_bench.cgroup import ROOT, MemoryGroup

# an 80 MB arena (and a 4 MB one) under a 64 MB cap: room for what the child
# loads after it joins (the prefetch and rerank kernels of a file that does not fit)
N, DIM, CAP, GRAPH_ROWS = 40_000, 512, 64 << 20, 2000
SPEC = vv.IVFPQ(lists=32, pq_m=32, nprobe=8)
GRAPH = vv.HNSW(m=8, ef_construction=40, quantize="pq", pq_m=32)

CHILD = r"""
import json, os, sys
import numpy as np
import varvedb as vv
from varvedb.storage.memory import memory_limit
big, warm, procs = sys.argv[1], sys.argv[2], sys.argv[3]
queries = np.load(sys.argv[4])
with vv.connect(warm, readonly=True) as db:           # every kernel loaded before the cap
    db.collection("docs").search(vector=queries[0], limit=10)
    db.collection("graph").search(vector=queries[0], limit=10)
if procs != "-":
    with open(procs, "w") as f:
        f.write("0\n")
fd = os.open(big, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)    # nothing of the file cached
os.close(fd)
with vv.connect(big, readonly=True) as db:
    c = db.collection("docs")
    ids = [c.search(vector=q, limit=10).ids for q in queries]
    filtered = [c.search(vector=q, limit=10, where="tag = 3", probes=16).ids
                for q in queries[:10]]
    g = db.collection("graph")
    walked = [g.search(vector=q, limit=10).ids for q in queries]
print(json.dumps({"ids": ids, "filtered": filtered, "walked": walked, "limit": memory_limit(),
                  "size": os.path.getsize(big)}))
"""


def clustered(n, dim, seed):
    centres = np.random.default_rng(0).normal(size=(64, dim))
    rng = np.random.default_rng(seed)
    return (centres[rng.integers(64, size=n)] + 0.5 * rng.normal(size=(n, dim))).astype(
        np.float32)


def _build(path, n, seed):
    db = vv.connect(path)
    c = db.create_collection("docs", {"v": vv.Vector(DIM, metric="l2"), "tag": vv.Int()})
    # in blocks, as a bulk load goes: the checkpoint writes this 80 MB arena as one
    # run, which open maps (runs would be joined in memory, beyond the cap)
    x = clustered(n, DIM, seed=seed)
    with db.transaction():
        for lo in range(0, n, 10_000):
            c.insert_arrays(id=np.arange(lo, min(n, lo + 10_000)), v=x[lo:lo + 10_000],
                            tag=np.arange(lo, min(n, lo + 10_000)) % 7)
    c.create_index("v", SPEC)
    g = db.create_collection("graph", {"v": vv.Vector(DIM, metric="l2", index=GRAPH)})
    rows = min(n, GRAPH_ROWS)
    g.insert_arrays(id=np.arange(rows), v=clustered(rows, DIM, seed=seed + 1))
    db.checkpoint()
    db.close()


@pytest.mark.skipif(not os.access(os.path.join(ROOT, "cgroup.procs"), os.W_OK),
                    reason="needs a writable cgroup v1 memory controller")
def test_answers_under_a_cap_smaller_than_the_file_equal_the_uncapped_ones(tmp_path):
    big, warm = str(tmp_path / "big.varve"), str(tmp_path / "warm.varve")
    _build(big, N, seed=1)
    _build(warm, 1100, seed=9)          # enough to train the lists: 4 a code
    queries = str(tmp_path / "q.npy")
    np.save(queries, clustered(40, DIM, seed=5))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def child(procs: str) -> dict:
        out = subprocess.run([sys.executable, "-c", CHILD, big, warm, procs, queries],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    free = child("-")
    with MemoryGroup(CAP, "capped-test") as group:
        capped = child(os.path.join(group.path, "cgroup.procs"))
        peak = group.max_usage()
    assert capped["limit"] <= CAP < free["limit"]
    assert capped["size"] > capped["limit"]        # the file did not fit
    assert peak <= CAP
    assert capped["ids"] == free["ids"]
    assert capped["filtered"] == free["filtered"]
    assert capped["walked"] == free["walked"]
    assert all(len(ids) == 10 for ids in free["ids"])
