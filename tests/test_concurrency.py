"""One writer, many readers: readers always see whole commits; writers are serialised.

Reader threads query in a loop while a writer thread commits; every answer
must describe some whole committed version (batch sizes, constant totals,
exact counts as of a version). Threads committing together all land, with
contiguous versions, and survive reopen. A second writer — in this process or
another — gets WriterLockedError; a read-only connection in another process
sees new commits after refresh() and never sees an uncommitted transaction.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter

import numpy as np
import pytest

import varvedb as vv

from conftest import PYTHON, child_env

B = 5                 # rows per batch
RUN_SECONDS = float(os.environ.get("VARVEDB_TEST_RUN_SECONDS", "2.5"))   # per stress test


class Threads:
    """Run functions in threads; re-raise the first exception any of them hit."""

    def __init__(self):
        self.errors: list[BaseException] = []
        self.threads: list[threading.Thread] = []
        self.stop = threading.Event()

    def start(self, fn, *args):
        def run():
            try:
                fn(*args)
            except BaseException as e:       # noqa: BLE001 - reported by join()
                self.errors.append(e)
                self.stop.set()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)

    def join(self, timeout=1800):
        for t in self.threads:
            t.join(timeout)
            assert not t.is_alive(), "a thread hung"
        if self.errors:
            raise self.errors[0]


@pytest.fixture
def fast_switching():
    """Switch threads every few bytecodes, so races between a reader's steps and
    the writer's appends are hit in seconds instead of rarely."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def _batch_schema():
    return {"batch": vv.Int(index="hash"), "title": "text", "meta": "json",
            "emb": vv.Vector(4, metric="l2")}


def _batch_rows(k: int, first_id: int) -> list[dict]:
    return [{"id": first_id + j, "batch": k, "title": f"b{k}" if j % 2 else f"a{k}",
             "meta": {"k": k}, "emb": [k, j, 1, 0]} for j in range(B)]


def test_readers_see_only_whole_batches_while_writer_commits(db_path, fast_switching):
    db = vv.connect(db_path)
    docs = db.create_collection("docs", _batch_schema())
    v0 = db.version
    threads = Threads()
    writer_done = threading.Event()
    written = []

    def writer():
        deadline = time.monotonic() + RUN_SECONDS
        k = 0
        while time.monotonic() < deadline and not threads.stop.is_set():
            with db.transaction():
                for row in _batch_rows(k, k * B):      # one frame per row
                    docs.insert(row)
            k += 1
        written.append(k)
        writer_done.set()

    def reader(seed):
        rng = np.random.default_rng(seed)
        last_version = 0
        checks = 0
        while not writer_done.is_set() and not threads.stop.is_set():
            v = db.version
            assert v >= last_version
            last_version = v
            # as of a fixed version the answer is exact
            assert docs.count(as_of=v) == B * (v - v0)
            # without as_of every answer is some whole version
            assert docs.count() % B == 0
            per_batch = Counter(h.fields["batch"] for h in docs.find(select=["batch"]))
            assert all(c == B for c in per_batch.values()), per_batch
            hits = docs.search(vector=rng.normal(size=4), limit=10_000)
            assert len(hits) % B == 0
            assert docs.count("title LIKE 'b%'") % 2 == 0       # 2 'b' titles per batch
            assert docs.count("meta->>'k' IS NOT NULL") % B == 0
            k = int(rng.integers(0, max(1, v - v0)))
            n_k = docs.count("batch = $1", params=[k])
            assert n_k in (0, B)
            got = docs.get(k * B + int(rng.integers(0, B)))
            assert got is None or got["batch"] == k
            checks += 1
        reader_checks.append(checks)

    reader_checks: list[int] = []
    threads.start(writer)
    for seed in range(3):
        threads.start(reader, seed)
    threads.join()
    assert docs.count() == written[0] * B
    assert written[0] > 20 and min(reader_checks) > 5, (written, reader_checks)
    db.close()


class _Abort(Exception):
    pass


def test_readers_see_constant_total_while_writer_replaces_rows(db_path, fast_switching):
    db = vv.connect(db_path)
    docs = db.create_collection("docs", _batch_schema())
    total = 100
    docs.insert([{"id": i, "batch": 0, "title": "t", "emb": [i, 0, 0, 0]} for i in range(total)])
    threads = Threads()
    writer_done = threading.Event()

    def writer():
        oldest, next_id = 0, total
        deadline = time.monotonic() + RUN_SECONDS
        k = 0
        while time.monotonic() < deadline and not threads.stop.is_set():
            k += 1
            with db.transaction():
                docs.insert([{"id": next_id + j, "batch": k, "title": f"t{k}",
                              "emb": [next_id + j, 1, 0, 0]} for j in range(B)])
                docs.delete(ids=list(range(oldest, oldest + B)))
                if k % 3 == 0:
                    docs.update({"title": "u"}, where="batch = $1", params=[k - 1])
            oldest += B
            next_id += B
            if k % 5 == 0:      # a rolled-back transaction is never seen either
                try:
                    with db.transaction():
                        docs.insert([{"id": 10**6 + j, "batch": -1, "title": "gone",
                                      "meta": {"x": j}, "emb": [0, 0, 0, 0]}
                                     for j in range(3 * B)])
                        docs.delete(ids=list(range(oldest, oldest + B)))
                        raise _Abort
                except _Abort:
                    pass
        writer_done.set()

    def reader(seed):
        rng = np.random.default_rng(seed)
        checks = 0
        while not writer_done.is_set() and not threads.stop.is_set():
            checks += 1
            assert docs.count() == total
            assert docs.count("batch >= 0") == total
            assert len(docs.find(select=[])) == total
            assert len(docs.search(vector=rng.normal(size=4), limit=1000)) == total
            assert docs.count("title LIKE 't%' OR title = 'u'") == total
            assert docs.count("meta IS NULL") == total
            assert docs.count("batch = -1") == 0
            v = db.version
            assert docs.count(as_of=v) == total
            assert docs.count(as_of=max(1, v - 3)) in (0, total)
        reader_checks.append(checks)

    reader_checks: list[int] = []
    threads.start(writer)
    for seed in range(3):
        threads.start(reader, seed)
    threads.join()
    assert min(reader_checks) > 5, reader_checks
    assert docs.count() == total
    db.close()


def test_threads_committing_together_all_land_with_contiguous_versions(db_path, fast_switching):
    db = vv.connect(db_path, durability="commit")
    docs = db.create_collection("docs", {"who": "int", "n": "int"})
    v0 = db.version
    n_threads, per_thread = 4, 40
    threads = Threads()
    versions: list[list[int]] = [[] for _ in range(n_threads)]

    def committer(w):
        for n in range(per_thread):
            if n % 4 == 0:
                with db.transaction():
                    docs.insert({"id": w * 1000 + n, "who": w, "n": n})
                    docs.update({"n": -1}, ids=[w * 1000 + n])
            else:
                docs.insert({"id": w * 1000 + n, "who": w, "n": n})
            versions[w].append(db.version)

    for w in range(n_threads):
        threads.start(committer, w)
    threads.join()
    final = v0 + n_threads * per_thread
    assert db.version == final
    hist = [h.version for h in db.history()]
    assert hist == list(range(1, final + 1))
    for w in range(n_threads):
        # each thread sees its own commits in order
        assert versions[w] == sorted(versions[w])
        assert docs.count("who = $1", params=[w]) == per_thread
    before = [(h.version, h.chain) for h in db.history()]
    db.close()
    db = vv.connect(db_path)
    assert [(h.version, h.chain) for h in db.history()] == before
    assert db["docs"].count() == n_threads * per_thread
    assert db["docs"].count("n = -1") == n_threads * per_thread // 4
    assert db.verify().ok
    db.close()


# ---- the write lock ---------------------------------------------------------------

TRY_WRITE = """
import sys, varvedb as vv
try:
    db = vv.connect(sys.argv[1])
    db["docs"].insert({"id": 999, "tag": 9})
    db.close()
    print("wrote")
except vv.VarveError as e:
    print(type(e).__name__)
"""


def _try_write(path) -> str:
    out = subprocess.run([PYTHON, "-c", TRY_WRITE, path], capture_output=True, text=True,
                         env=child_env(), timeout=1800)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_second_writer_is_locked_out_until_the_first_closes(db_path):
    db = vv.connect(db_path)
    db.create_collection("docs", {"tag": "int"}).insert({"id": 1, "tag": 1})
    assert _try_write(db_path) == "WriterLockedError"
    with pytest.raises(vv.WriterLockedError):
        vv.connect(db_path)
    r = vv.connect(db_path, readonly=True)   # readers are never locked out
    assert r["docs"].count() == 1
    r.close()
    db.close()
    assert _try_write(db_path) == "wrote"
    db = vv.connect(db_path)                 # the lock was released by the child's close
    assert db["docs"].get(999)["tag"] == 9
    db.close()


# ---- a read-only connection in another process ----------------------------------------

READER = r"""
import sys, varvedb as vv
db = vv.connect(sys.argv[1], readonly=True)
docs = db["docs"]
def show():
    print(db.version, docs.count(), docs.count("tag = 2"), docs.count("tag = 3"),
          docs.count("id < 10 AND tag IS NOT NULL"), flush=True)
show()
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "refresh":
        db.refresh()
    elif cmd == "quit":
        break
    show()
"""


class ReaderProcess:
    def __init__(self, path):
        self.proc = subprocess.Popen([PYTHON, "-c", READER, path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=child_env())

    def read(self) -> tuple:
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()
        return tuple(map(int, line.split()))

    def send(self, cmd: str) -> tuple:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        assert self.proc.wait(600) == 0, self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc.stdin.close()


def _expect(db, docs):
    return (db.version, docs.count(), docs.count("tag = 2"), docs.count("tag = 3"),
            docs.count("id < 10 AND tag IS NOT NULL"))


def test_readonly_process_sees_new_commits_after_refresh(db_path):
    db = vv.connect(db_path)
    docs = db.create_collection("docs", {"tag": vv.Int(index="hash"),
                                         "emb": vv.Vector(8, metric="l2")})
    docs.insert([{"id": i, "tag": 1} for i in range(5)])
    reader = ReaderProcess(db_path)
    try:
        assert reader.read() == _expect(db, docs)
        old = _expect(db, docs)
        docs.insert([{"id": i, "tag": 2} for i in range(5, 9)])
        docs.delete(ids=[0])
        assert reader.send("peek") == old            # a snapshot until refreshed
        assert reader.send("refresh") == _expect(db, docs)
        # a bulk insert grows the file past the reader's map; a checkpoint in between
        db.checkpoint()
        n = 200_000
        docs.insert_arrays(id=np.arange(100, 100 + n), tag=np.full(n, 2),
                           emb=np.ones((n, 8), np.float32))
        docs.update({"tag": 3}, where="tag = 1")
        assert reader.send("refresh") == _expect(db, docs)
        # frames of an open transaction are in the file but never visible
        committed = _expect(db, docs)
        size = os.path.getsize(db_path)
        with db.transaction():
            m = 700_000                              # > 16 MB: flushed before commit
            docs.insert_arrays(id=np.arange(10**7, 10**7 + m), tag=np.full(m, 2),
                               emb=np.zeros((m, 8), np.float32))
            assert os.path.getsize(db_path) > size + (16 << 20)
            assert reader.send("refresh") == committed
            assert _committed_view(db_path) == committed
        assert reader.send("refresh") == _expect(db, docs)
        assert reader.send("refresh") == _expect(db, docs)       # idempotent
    finally:
        reader.close()
        db.close()


def _committed_view(path):
    """What a fresh read-only connection sees: only committed versions."""
    r = vv.connect(path, readonly=True)
    try:
        return _expect(r, r["docs"])
    finally:
        r.close()


def test_readonly_refresh_in_same_process_follows_the_writer(db_path):
    db = vv.connect(db_path)
    docs = db.create_collection("docs", {"tag": "int"})
    r = vv.connect(db_path, readonly=True)
    rdocs = r["docs"]
    for k in range(20):
        docs.insert({"id": k, "tag": k % 3})
        if k % 4 == 0:
            assert r.refresh() == db.version
            assert rdocs.count() == docs.count()
            assert rdocs.find("tag = 1").ids == docs.find("tag = 1").ids
    assert r.refresh() == db.version == 21
    assert [h.chain for h in r.history()] == [h.chain for h in db.history()]
    r.close()
    db.close()


def test_readers_in_threads_never_block_on_a_long_transaction(db_path):
    db = vv.connect(db_path)
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": i, "tag": 1} for i in range(10)])
    inside = threading.Event()
    release = threading.Event()

    def writer():
        with db.transaction():
            docs.insert({"id": 100, "tag": 2})
            inside.set()
            release.wait(600)       # a hang guard only

    t = threading.Thread(target=writer)
    t.start()
    assert inside.wait(600)
    # were reads to wait for the writer, they would return only after it gave
    # up waiting and committed, and see 11 rows
    assert docs.count() == 10 and docs.get(100) is None     # not yet committed
    assert docs.count("tag = 2") == 0
    release.set()
    t.join(600)
    assert docs.count() == 11 and docs.get(100)["tag"] == 2
    db.close()
