"""SIGKILL a writer at random moments: nothing acknowledged is lost, nothing half-written is seen.

The writer is a child process committing transactions of 2-3 single-row inserts
(each row its own frame) that share a batch number, and printing each batch
to stdout only after its commit returned (durability="commit"). The parent
kills it at a random moment, reopens the file and checks:

* every acknowledged row is present;
* every batch present is complete (a partial transaction would show as a
  batch with fewer rows than its size);
* verify() is ok, and the next write works.

Files are sometimes fresh and sometimes reused across kills, so recovery of a
file that was already recovered before is exercised too. The writer also
checkpoints now and then, so kills land inside checkpoints as well.
"""
from __future__ import annotations

import os
import random
import time
from collections import Counter

import numpy as np

import varvedb as vv

from conftest import zero_from
from forker import Child

WRITER = r"""
import random, sys
import varvedb as vv
path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
db = vv.connect(path, durability="commit")
if "docs" not in db.collections():
    db.create_collection("docs", {"batch": vv.Int(index="hash"), "size": "int",
                                  "title": "text", "emb": vv.Vector(8, metric="l2")})
docs = db["docs"]
rows = docs.find(select=["batch"])
next_id = max(rows.ids, default=-1) + 1
batch = max((h.fields["batch"] for h in rows), default=0) + 1
print("ready", flush=True)
while True:
    size = rng.choice((2, 3))
    ids = list(range(next_id, next_id + size))
    with db.transaction():
        for i in ids:
            docs.insert({"id": i, "batch": batch, "size": size,
                         "title": "x" * rng.randrange(0, 3000),
                         "emb": [rng.random() for _ in range(8)]})
    print(batch, size, *ids, flush=True)
    next_id += size
    batch += 1
    if batch % 17 == 0:
        db.checkpoint()
"""


def check_recovered(path: str, acked: dict[int, list[int]], round_no: int) -> int:
    """Reopen after a kill: acked rows present, batches whole, verify ok, writes work."""
    db = vv.connect(path)
    try:
        docs = db["docs"]
        hits = docs.find(select=["batch", "size"])
        present = {h.id: h.fields for h in hits}
        for batch, ids in acked.items():
            for i in ids:
                assert i in present, f"acknowledged row {i} of batch {batch} lost"
                assert present[i]["batch"] == batch
        per_batch = Counter(f["batch"] for f in present.values())
        for h in hits:
            b, size = h.fields["batch"], h.fields["size"]
            assert per_batch[b] == size, f"batch {b} is partial: {per_batch[b]} of {size} rows"
        report = db.verify()
        assert report.ok, report
        assert report.versions_checked == db.version
        v = db.version
        marker = max(present, default=-1) + 1
        docs.insert({"id": marker, "batch": -(round_no + 1), "size": 1})
        assert db.version == v + 1 and docs.get(marker)["batch"] == -(round_no + 1)
        return len(present)
    finally:
        db.close()


def test_sigkill_at_random_moments_loses_no_acknowledged_commit(tmp_path, forker):
    rng = random.Random(20240611)
    acked_by_file: dict[str, dict[int, list[int]]] = {}
    total_acked = 0
    kills = 0
    path = None
    for round_no in range(16):
        if path is None or rng.random() < 0.3:
            path = str(tmp_path / f"crash{round_no}.varve")
            acked_by_file[path] = {}
        child = Child(forker, WRITER, path, round_no)
        child.wait_for("ready")
        time.sleep(rng.uniform(0.0, 0.25))
        lines = child.kill()
        kills += 1
        acked = acked_by_file[path]
        for line in lines[1:]:
            batch, size, *ids = map(int, line.split())
            assert len(ids) == size
            acked[batch] = ids
            total_acked += 1
        rows = check_recovered(path, acked, round_no)
        assert rows >= sum(len(v) for v in acked.values())
    assert kills >= 16
    assert total_acked > 32, "the writer barely ran: kills did not land mid-stream"
    assert len(acked_by_file) >= 2


BULK_WRITER = r"""
import sys, time
import numpy as np
import varvedb as vv
path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = vv.connect(path)
docs = db.create_collection("docs", {"tag": "int", "emb": vv.Vector(8, metric="l2")})
docs.insert([{"id": i, "tag": 1, "emb": [i] * 8} for i in range(10)])
print("committed", db.version, flush=True)
X = np.random.default_rng(0).normal(size=(n, 8)).astype(np.float32)
ids = np.arange(1000, 1000 + n)
if mode == "hold":
    with db.transaction():
        docs.insert_arrays(id=ids, tag=np.full(n, 2), emb=X)
        print("written", flush=True)
        time.sleep(120)
else:
    print("start", flush=True)
    docs.insert_arrays(id=ids, tag=np.full(n, 2), emb=X)
    print("done", db.version, flush=True)
    time.sleep(120)
"""

BULK_ROWS = 600_000      # ids + 8-dim f32 vectors + tags: over 30 MB, past log_writer.FLUSH_BYTES


def _check_bulk_recovered(path, committed_version, bulk_done: bool | None):
    db = vv.connect(path)
    try:
        docs = db["docs"]
        n = docs.count()
        if bulk_done is None:
            bulk_done = n > 10
        if bulk_done:
            assert db.version == committed_version + 1 and n == 10 + BULK_ROWS
            assert docs.count("tag = 2") == BULK_ROWS
        else:
            assert db.version == committed_version and n == 10
            assert docs.count("tag = 2") == 0
            # the torn bulk frames were zeroed (the file never shrinks under a reader)
            assert zero_from(path, db.engine.log.end)
        assert sorted(docs.find("tag = 1").ids) == list(range(10))
        assert db.verify().ok
        docs.insert({"id": 5_000_000, "tag": 3, "emb": [-50] * 8})
        assert docs.search(vector=[-50] * 8, limit=1).ids == [5_000_000]
    finally:
        db.close()
    db = vv.connect(path, readonly=True)
    assert db["docs"].get(5_000_000)["tag"] == 3
    db.close()


def test_kill_mid_bulk_transaction_after_frames_flushed_keeps_previous_commit(tmp_path, forker):
    path = str(tmp_path / "bulk.varve")
    child = Child(forker, BULK_WRITER, path, "hold", BULK_ROWS)
    child.wait_for("written")
    # the bulk frames are in the file (written before any commit frame)
    assert os.path.getsize(path) > 16 << 20
    lines = child.kill()
    committed = int(lines[0].split()[1])
    _check_bulk_recovered(path, committed, bulk_done=False)


def test_kill_at_random_moment_of_bulk_insert_shows_all_or_nothing(tmp_path, forker):
    rng = random.Random(7)
    outcomes = []
    for k in range(5):
        path = str(tmp_path / f"bulk{k}.varve")
        child = Child(forker, BULK_WRITER, path, "auto", BULK_ROWS)
        child.wait_for("start")
        # the insert takes a few hundred ms (validate, hash, write, apply, commit):
        # spread the kills over all of it and a little after
        time.sleep(rng.uniform(k * 0.08, (k + 1) * 0.08))
        lines = child.kill()
        committed = int(lines[0].split()[1])
        acked = any(line.startswith("done") for line in lines)
        _check_bulk_recovered(path, committed, True if acked else None)
        outcomes.append(acked)
    assert len(outcomes) == 5


GROUP_WRITER = r"""
import sys, threading
import numpy as np
import varvedb as vv
path, seed, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
db = vv.connect(path, durability="commit")
if "docs" not in db.collections():
    db.create_collection("docs", {"thread": "int", "emb": vv.Vector(8, metric="l2")})
    db["docs"].create_index("emb", vv.HNSW(m=8, ef_construction=32))
docs = db["docs"]
start = max(docs.find(select=[]).ids, default=-1) + 1
out = threading.Lock()

def commit_rows(t):
    rng = np.random.default_rng(seed * 100 + t)
    i = start + t
    while True:
        docs.insert({"id": i, "thread": t, "emb": rng.random(8, dtype=np.float32)})
        with out:                       # the ack: written only once insert returned
            sys.stdout.write(f"{t} {i}\n")
            sys.stdout.flush()
        i += threads

print("ready", flush=True)
for t in range(threads):
    threading.Thread(target=commit_rows, args=(t,), daemon=True).start()
threading.Event().wait()
"""


def test_sigkill_inside_group_commits_of_eight_threads_loses_no_acknowledged_commit(tmp_path,
                                                                                 forker):
    """Eight threads commit one row each, over and over, sharing fdatasyncs; the
    process is killed at a random moment (commits written and waiting for the
    group's sync are in flight then). Every acknowledged row survives."""
    rng = random.Random(28)
    acked_by_file: dict[str, set[int]] = {}
    path = None
    for round_no in range(10):
        if path is None or rng.random() < 0.3:
            path = str(tmp_path / f"group{round_no}.varve")
            acked_by_file[path] = set()
        child = Child(forker, GROUP_WRITER, path, round_no, 8)
        child.wait_for("ready")
        want = 1 + rng.randrange(8, 400)     # acks to let pass before the kill
        deadline = time.monotonic() + 300    # a hang guard only
        while len(child.lines) < want and child.proc.poll() is None:
            assert time.monotonic() < deadline, "the writer stalled"
            time.sleep(rng.uniform(0, 0.002))
        lines = child.kill()
        acked = acked_by_file[path]
        for line in lines[1:]:
            _thread, i = map(int, line.split())
            acked.add(i)
        db = vv.connect(path)
        try:
            docs = db["docs"]
            present = set(docs.find(select=[]).ids)
            lost = acked - present
            assert not lost, f"acknowledged rows {sorted(lost)[:10]} lost"
            report = db.verify()
            assert report.ok, report
            assert docs.count() == len(present) >= len(acked)
            assert len(docs.search(vector=docs.get(max(acked))["emb"], limit=3).ids) == 3
        finally:
            db.close()
    assert sum(len(a) for a in acked_by_file.values()) > 80
