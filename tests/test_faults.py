"""Writes that fail: full disks, I/O errors, short writes and crashes at each operation.

Every test runs the real engine on a real file; `faults.installed` routes the
writer's file operations through a FaultyFile that fails the one chosen.
After a failure the connection must hold exactly the last acknowledged
commit, a fresh open must see the same, and the connection must write again.
"""
from __future__ import annotations

import contextlib
import errno
import os
import threading
import time

import numpy as np
import pytest

import varvedb as vv
from conftest import zero_from
from faults import Crashed, Faults, installed
from varvedb.storage import format as F

DIM = 8
SCHEMA = {"tag": "int", "emb": vv.Vector(DIM, metric="l2")}


def vec(ids) -> np.ndarray:
    """The vector a test writes for each id (so any read can be checked)."""
    ids = np.asarray(ids, np.float32)[:, None]
    return (ids * 0.5 + np.arange(DIM, dtype=np.float32)).astype(np.float32)


def state(db) -> dict:
    docs = db["docs"]
    rows = docs.find(select=["tag", "emb"])
    return {h.id: (h["tag"], None if h["emb"] is None else h["emb"].tolist()) for h in rows}


def expected(ids, tag=1) -> dict:
    return {int(i): (tag, v.tolist()) for i, v in zip(ids, vec(ids))}


def fresh_view(path) -> dict:
    with vv.connect(path, readonly=True) as ro:
        return state(ro)


@pytest.fixture
def faults():
    f = Faults(seed=7)
    with installed(f):
        yield f
    f.kill_all()


def make(path, n_inserts=1, rows=10):
    db = vv.connect(path)
    docs = db.create_collection("docs", SCHEMA)
    for k in range(n_inserts):
        ids = np.arange(k * rows, (k + 1) * rows)
        docs.insert_arrays(id=ids, tag=np.ones(rows, np.int64), emb=vec(ids))
    return db, docs


# ---- 1. checkpoints are all or nothing ------------------------------------------------

@pytest.mark.parametrize("kind", ["efbig", "enospc", "eio"])
def test_failed_checkpoint_changes_nothing_and_later_ones_keep_every_vector(
        db_path, faults, kind):
    # 100 inserts of 30 rows: more runs than a checkpoint lists, so it copies the arena
    db, docs = make(db_path, n_inserts=100, rows=30)
    faults.arm(kind, on="write")
    with pytest.raises(vv.StorageError) as e:
        db.checkpoint()
    assert e.value.errno == errno.__dict__[kind.upper()]
    assert db.engine.log.file.superblock is None
    ids = np.arange(3000, 3010)
    docs.insert_arrays(id=ids, tag=np.ones(10, np.int64), emb=vec(ids))
    db.checkpoint()
    want = expected(range(3010))
    assert state(db) == want
    db.close()
    db = vv.connect(db_path)
    assert state(db) == want
    assert db.verify().ok
    db.close()


def test_failed_sync_of_a_checkpoint_leaves_it_out(db_path, faults):
    db, docs = make(db_path, n_inserts=3)
    faults.arm("eio", on="sync", after=1)     # the superblock's sync
    with pytest.raises(vv.StorageError):
        db.checkpoint()
    assert db.verify().ok                      # no slot names the undone checkpoint
    db.checkpoint()
    db.close()
    assert fresh_view(db_path) == expected(range(30))
    assert vv.verify_file(db_path).ok


def test_checkpoint_inside_a_transaction_is_a_typed_error(db_path):
    db, docs = make(db_path)
    with db.transaction():
        docs.insert_arrays(id=np.array([100]), tag=np.array([1]), emb=vec([100]))
        with pytest.raises(vv.TransactionError):
            db.checkpoint()
    db.close()
    db = vv.connect(db_path)
    assert state(db) == expected([*range(10), 100])
    db.close()


# ---- 2. a failed commit write leaves the connection usable -----------------------------

def count_ops(path, action, setup=make) -> int:
    """How many writes and syncs `action(docs)` makes on a fresh file."""
    f = Faults()
    with installed(f):
        db, docs = setup(path)
        f.arm("eio", after=10**9)
        action(docs)
        left = f.armed[2]
        db.close()
    f.kill_all()
    return 10**9 - left


@contextlib.contextmanager
def armed(tmp_path, kind: str, at: int, setup=make):
    """A fresh file made by `setup`, then its `at`-th write or sync from now armed
    to fail with `kind`: yields (path, faults, db, docs, the state before) inside
    the faults' scope; afterwards every descriptor is closed, as a dead process's."""
    path = str(tmp_path / f"{kind}{at}.varve")
    f = Faults(seed=at)
    try:
        with installed(f):
            db, docs = setup(path)
            before = state(db)
            f.arm(kind, after=at)
            yield path, f, db, docs, before
    finally:
        f.kill_all()


def insert_one(docs, i=50):
    docs.insert({"id": i, "tag": 1, "emb": vec([i])[0].tolist()})


@pytest.mark.parametrize("kind", ["enospc", "efbig", "eio"])
def test_every_failed_operation_of_a_commit_rolls_back_and_the_retry_lands(tmp_path, kind):
    n_ops = count_ops(str(tmp_path / "count.varve"), insert_one)
    assert n_ops >= 2        # the commit's write and its sync at least
    for at in range(n_ops):
        with armed(tmp_path, kind, at) as (path, f, db, docs, before):
            try:
                insert_one(docs)
            except vv.StorageError as e:
                assert isinstance(e.os_error, OSError) and e.errno == e.os_error.errno
                assert state(db) == before and docs.get(50) is None
                assert fresh_view(path) == before
                insert_one(docs)               # no DuplicateIdError: nothing is left over
            else:   # the fault hit an operation that is only a shortcut (the prefill)
                assert f.fired
            insert_one(docs, 51)
            want = {**before, **expected([50, 51])}
            assert state(db) == want and fresh_view(path) == want
            db.close()
        db = vv.connect(path)
        assert state(db) == want and db.verify().ok
        db.close()


def test_short_writes_are_finished(db_path, faults):
    db, docs = make(db_path)
    for i in range(20):
        faults.arm("short", on="write", after=i % 3)
        insert_one(docs, 100 + i)
    db.close()
    db = vv.connect(db_path)
    assert state(db) == expected([*range(10), *range(100, 120)]) and db.verify().ok
    db.close()


def test_disk_full_midway_through_a_bulk_load_keeps_the_file_and_frees_the_space(
        db_path, faults):
    db, docs = make(db_path)
    digest_before = fresh_view(db_path)
    ids = np.arange(1000, 1000 + 200_000)          # 6.4 MB of vectors: written before commit
    faults.arm("enospc", on="write", after=0)
    with pytest.raises(vv.StorageError):
        docs.insert_arrays(id=ids, tag=np.ones(len(ids), np.int64), emb=vec(ids))
    assert fresh_view(db_path) == digest_before == state(db)
    docs.insert_arrays(id=ids, tag=np.ones(len(ids), np.int64), emb=vec(ids))
    assert docs.count() == 10 + len(ids)
    db.close()


# ---- 3. a transaction that saw an error cannot commit ----------------------------------

def test_commit_after_an_io_error_inside_a_transaction_is_refused(db_path, faults):
    db, docs = make(db_path)
    before = state(db)
    with pytest.raises(vv.TransactionAbortedError):
        with db.transaction():
            insert_one(docs, 60)
            faults.arm("eio", on="write")
            big = np.arange(10_000, 50_000)     # a frame past 1 MiB is written at once
            with pytest.raises(vv.StorageError):
                docs.insert_arrays(id=big, tag=np.ones(len(big), np.int64), emb=vec(big))
            with pytest.raises(vv.TransactionAbortedError):
                insert_one(docs, 61)
            # the caller swallowed the errors; leaving the block must not commit
    assert state(db) == before and docs.get(60) is None
    insert_one(docs, 60)
    db.close()
    db = vv.connect(db_path)
    assert state(db) == {**before, **expected([60])}
    db.close()


def test_failed_sync_undoes_the_commit_in_memory_too(db_path, faults):
    db, docs = make(db_path)
    before, version = state(db), db.version
    faults.arm("eio", on="sync")
    with pytest.raises(vv.StorageError):
        insert_one(docs, 70)
    assert state(db) == before and db.version == version and docs.get(70) is None
    assert fresh_view(db_path) == before
    insert_one(docs, 70)
    assert db.version == version + 1
    db.close()
    assert fresh_view(db_path) == {**before, **expected([70])}


def test_close_inside_a_transaction_rolls_it_back(db_path):
    db, docs = make(db_path)
    with pytest.raises(vv.ClosedError):
        with db.transaction():
            insert_one(docs, 80)
            db.close()
    assert fresh_view(db_path) == expected(range(10))


# ---- 5. a damaged checkpoint costs only the shortcut ----------------------------------

def _checkpoint_file(path, commits_after: int) -> tuple[dict, int, int]:
    db, docs = make(path, n_inserts=10)
    db.checkpoint()
    ck = db.engine.log.file.superblock.checkpoint_offset
    for k in range(commits_after):
        ids = np.arange(1000 + 10 * k, 1010 + 10 * k)
        docs.insert_arrays(id=ids, tag=np.ones(10, np.int64), emb=vec(ids))
    want, version = state(db), db.version
    db.close()
    return want, version, ck


@pytest.mark.parametrize("commits_after", [1, 3])
@pytest.mark.parametrize("where", ["header", "payload"])
def test_flipped_bit_in_a_checkpoint_costs_only_the_shortcut(tmp_path, commits_after, where):
    path = str(tmp_path / "ck.varve")
    want, version, ck = _checkpoint_file(path, commits_after)
    raw = bytearray(open(path, "rb").read())
    at = ck + (20 if where == "header" else F.FRAME_HEADER_SIZE + 100)
    raw[at] ^= 0x10
    open(path, "wb").write(bytes(raw))
    report = vv.verify_file(path)
    assert not report.ok                     # verify names the altered checkpoint
    for readonly in (True, False):
        db = vv.connect(path, readonly=readonly)
        assert db.version == version and state(db) == want
        db.close()


def test_superblock_naming_a_damaged_checkpoint_falls_back_to_the_older_one(tmp_path):
    path = str(tmp_path / "two.varve")
    db, docs = make(path, n_inserts=3)
    db.checkpoint()
    insert_one(docs, 500)
    db.checkpoint()
    newest = db.engine.log.file.superblock.checkpoint_offset
    insert_one(docs, 501)
    want = state(db)
    db.close()
    raw = bytearray(open(path, "rb").read())
    raw[newest + F.FRAME_HEADER_SIZE + 8] ^= 1
    open(path, "wb").write(bytes(raw))
    db = vv.connect(path)
    assert state(db) == want
    db.close()


# ---- 6. no commit is acknowledged without its sync -----------------------------------

def test_commit_after_a_rolled_back_flushed_transaction_is_synced(db_path, faults):
    db = vv.connect(db_path, durability="batch", batch_ms=30)
    docs = db.create_collection("docs", SCHEMA)
    insert_one(docs, 1)                   # schedules the batch sync
    with pytest.raises(RuntimeError):
        with db.transaction():
            big = np.arange(10_000, 50_000)   # written at once, before any commit
            docs.insert_arrays(id=big, tag=np.ones(len(big), np.int64), emb=vec(big))
            time.sleep(0.15)                  # the batch sync runs while they are in the file
            raise RuntimeError("roll back")
    time.sleep(0.1)                           # past the batch window: the next commit syncs
    log = db.engine.log
    insert_one(docs, 2)
    assert log.synced_end == log.commit_end   # its own fdatasync covered it
    db.close()


def test_sync_target_is_the_last_commit_not_an_open_transaction(db_path, faults):
    db = vv.connect(db_path)
    docs = db.create_collection("docs", SCHEMA)
    insert_one(docs, 1)
    log = db.engine.log
    ready, go = threading.Event(), threading.Event()

    def writer():
        with pytest.raises(RuntimeError):
            with db.transaction():
                big = np.arange(10_000, 50_000)
                docs.insert_arrays(id=big, tag=np.ones(len(big), np.int64), emb=vec(big))
                ready.set()
                go.wait(600)          # hang guards only
                raise RuntimeError("roll back")

    t = threading.Thread(target=writer)
    t.start()
    assert ready.wait(600)
    assert log.end > log.commit_end
    with log._sync_lock:                      # a group-commit sync while frames are open
        log._sync()
    assert log.synced_end == log.commit_end
    go.set()
    t.join()
    insert_one(docs, 2)
    assert log.synced_end == log.commit_end
    db.close()


# ---- a crash at every operation of a checkpoint ----------------------------------------

@pytest.mark.parametrize("kind", ["kill", "power"])
def test_crash_at_each_operation_of_a_checkpoint_keeps_the_last_commit(tmp_path, kind):
    def setup(path):
        return make(path, n_inserts=70, rows=5)   # > 64 runs: the arena is copied

    n_ops = count_ops(str(tmp_path / "count.varve"), lambda docs: docs.database.checkpoint(), setup)
    assert n_ops >= 4      # frame write, its sync, the slot write, its sync
    for at in range(n_ops):
        with armed(tmp_path, kind, at, setup) as (path, _, db, _, want):
            with pytest.raises(Crashed):
                db.checkpoint()
        db = vv.connect(path)
        assert state(db) == want and db.verify().ok
        insert_one(db["docs"], 999)
        db.checkpoint()
        db.close()
        assert fresh_view(path) == {**want, **expected([999])}


# ---- a failure or a crash at each operation of a bulk insert ---------------------------

BULK_IDS = np.arange(1000, 41_000)     # a 2 MB insert frame: written at once, uncopied


def insert_bulk(docs):
    docs.insert_arrays(id=BULK_IDS, tag=np.ones(len(BULK_IDS), np.int64), emb=vec(BULK_IDS))


@pytest.mark.parametrize("kind", ["eio", "kill", "power"])
def test_each_operation_of_a_bulk_insert_failing_keeps_the_last_commit(tmp_path, kind):
    """The large frame, the commit frame, the sync: a failed one rolls the insert
    back (nothing of it is seen, the retry lands); a crash at any of them (a random
    prefix of that write in the file) opens at the last commit, or with the whole
    insert where its commit frame reached the file (never acknowledged: the sync
    had not returned)."""
    n_ops = count_ops(str(tmp_path / "count.varve"), insert_bulk)
    assert n_ops >= 3       # the frame, the commit frame, the sync
    for at in range(n_ops):
        with armed(tmp_path, kind, at) as (path, f, db, docs, before):
            if kind == "eio":
                try:
                    insert_bulk(docs)
                except vv.StorageError:
                    assert state(db) == before and fresh_view(path) == before
                    insert_bulk(docs)
                else:       # the fault hit a shortcut (the prefill)
                    assert f.fired
            else:
                with pytest.raises(Crashed):
                    insert_bulk(docs)
        db = vv.connect(path)
        got = state(db)
        whole = {**before, **expected(BULK_IDS)}
        assert got == whole if kind == "eio" else got in (before, whole), (kind, at)
        assert db.verify().ok
        insert_one(db["docs"], 999)
        db.close()
        assert fresh_view(path) == {**got, **expected([999])}


def test_a_file_opened_after_a_failed_write_is_byte_identical_below_the_commit(db_path, faults):
    db, docs = make(db_path)
    end = db.engine.log.commit_end
    head = open(db_path, "rb").read()[:end]
    faults.arm("enospc", on="write")
    with pytest.raises(vv.StorageError):
        insert_one(docs)
    assert open(db_path, "rb").read()[:end] == head and zero_from(db_path, end)
    db.close()


# ---- the kernel's own EFBIG (RLIMIT_FSIZE), in a child process --------------------------

FSIZE_CHILD = r"""
import json, os, resource, signal, sys
import numpy as np
import varvedb as vv

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # EFBIG instead of death
path, mode = sys.argv[1], sys.argv[2]
dim = 8
vec = lambda ids: (np.asarray(ids, np.float32)[:, None] * 0.5 + np.arange(dim)).astype(np.float32)
db = vv.connect(path)
docs = db.create_collection("docs", {"tag": "int", "emb": vv.Vector(dim, metric="l2")})
for k in range(100):
    ids = np.arange(k * 30, k * 30 + 30)
    docs.insert_arrays(id=ids, tag=np.ones(30, np.int64), emb=vec(ids))
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (db.engine.log.end + 4096, hard))   # disk full
out = {}
big = np.arange(10_000, 60_000)
try:
    if mode == "checkpoint":
        db.checkpoint()
    else:
        docs.insert_arrays(id=big, tag=np.ones(len(big), np.int64), emb=vec(big))
    out["failed"] = None
except Exception as e:
    out["failed"] = type(e).__name__
    out["errno"] = getattr(e, "errno", None)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))                     # space is back
try:
    if mode != "checkpoint":
        docs.insert_arrays(id=big, tag=np.ones(len(big), np.int64), emb=vec(big))
    out["retry"] = "ok"
except Exception as e:
    out["retry"] = type(e).__name__
ids = np.arange(3000, 3010)
docs.insert_arrays(id=ids, tag=np.ones(10, np.int64), emb=vec(ids))
db.checkpoint()
db.close()
db = vv.connect(path)
docs = db["docs"]
hits = docs.find(select=["emb"])
want = {i: vec([i])[0].tolist() for i in hits.ids}
out["wrong_vectors"] = sum(h["emb"].tolist() != want[h.id] for h in hits)
out["count"] = docs.count()
out["verify"] = db.verify().ok
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode", ["insert", "checkpoint"])
def test_real_efbig_from_a_full_file_limit_loses_and_corrupts_nothing(tmp_path, mode):
    import json
    import subprocess

    from conftest import PYTHON, child_env
    out = subprocess.run([PYTHON, "-c", FSIZE_CHILD, str(tmp_path / "full.varve"), mode],
                         env=child_env(), capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["failed"] == "StorageError" and got["errno"] == errno.EFBIG
    assert got["retry"] == "ok"
    rows = 3010 + (50_000 if mode == "insert" else 0)
    assert got == {**got, "wrong_vectors": 0, "count": rows, "verify": True}


# ---- batch mode: a background sync that fails ---------------------------------------

def _wait_for(condition, seconds: float = 600.0) -> None:     # a hang guard
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_failed_background_sync_undoes_its_window_and_readers_follow(db_path, faults):
    # The window is wide and each step waits for what it needs, rather than
    # sleeping a guess: on a loaded machine the background sync fires late,
    # and a commit meant to sync at once landed in its window instead.
    db = vv.connect(db_path, durability="batch", batch_ms=300)
    log = db.engine.log
    docs = db.create_collection("docs", SCHEMA)
    insert_one(docs, 1)
    _wait_for(lambda: log.synced_end == log.commit_end)
    time.sleep(0.35)                # the window has passed: the next commit syncs at once
    insert_one(docs, 2)
    assert log.synced_end == log.commit_end
    durable = state(db)
    reader = vv.connect(db_path, readonly=True)
    faults.arm("eio", on="sync")
    insert_one(docs, 3)             # acknowledged in batch mode; its sync comes later
    assert log.synced_end < log.commit_end
    reader.refresh()
    assert 3 in state(reader)       # another process can read it before it is durable
    _wait_for(lambda: log.failure is not None)   # the background fdatasync fails: undone
    with pytest.raises(vv.StorageError):
        insert_one(docs, 4)         # the next write reports it, once
    assert state(db) == durable
    reader.refresh()
    assert state(reader) == durable  # the reader drops the commit that was undone
    insert_one(docs, 4)
    reader.refresh()
    assert state(reader) == {**durable, **expected([4])}
    reader.close()
    db.close()
    assert fresh_view(db_path) == {**durable, **expected([4])}


def test_a_rolled_back_bulk_leaves_a_hole_that_open_does_not_map(db_path):
    db, docs = make(db_path)
    big = np.arange(10_000, 400_000)                 # ~12 MB written before the commit
    with pytest.raises(RuntimeError):
        with db.transaction():
            docs.insert_arrays(id=big, tag=np.ones(len(big), np.int64), emb=vec(big))
            raise RuntimeError("roll back")
    db.close()
    size = os.path.getsize(db_path)
    assert size > 10 << 20 and zero_from(db_path, 64 << 10)   # the file kept its size
    for readonly in (True, False):
        db = vv.connect(db_path, readonly=readonly)
        assert len(db.engine._map) < 4 << 20 and state(db) == expected(range(10))
        db.close()


# ---- a vacuum failing at each of its operations ----------------------------------------

@pytest.mark.parametrize("kind", ["enospc", "efbig", "eio"])
def test_every_failed_operation_of_a_vacuum_keeps_the_state_and_the_next_write_lands(
        tmp_path, kind):
    """Whichever write or sync of a vacuum fails — the new file's, its checkpoint's,
    or the old file's once the new one has its name — the connection and a fresh
    open read the acknowledged state, and the next commit is in the file (a failed
    last sync of the replaced file left the engine on the new file with the old
    state, appending over the new log's start)."""
    def setup(path):
        db, docs = make(path, n_inserts=3)
        docs.update({"tag": 2}, where="id < 5")     # a version for the vacuum to drop
        return db, docs

    n_ops = count_ops(str(tmp_path / "count.varve"), lambda docs: docs.database.vacuum(keep=1),
                      setup)
    assert n_ops >= 4
    for at in range(n_ops):
        with armed(tmp_path, kind, at, setup) as (path, f, db, docs, before):
            try:
                db.vacuum(keep=1, progress=False)
            except vv.StorageError:
                pass
            f.disarm()
            assert state(db) == before and fresh_view(path) == before
            insert_one(docs)
            want = {**before, **expected([50])}
            assert state(db) == want and fresh_view(path) == want
            db.close()
        db = vv.connect(path)
        assert state(db) == want and db.verify().ok
        db.close()
