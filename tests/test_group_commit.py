"""Group commit: threads committing together share one fdatasync, and a failed
sync fails every commit of its group.

Each test holds the first fdatasync of the file (a `GatedFile`, a FileIO that
waits on an event before syncing), lets seven more threads write their
commits while it is held, then releases it: the held sync covers the first
commit only (it began before the others were written), and the next one
covers all seven. Every commit returns only after its own bytes were synced.
The waits are on the state itself (commits written), with hang guards of
minutes, never on elapsed time.
"""
from __future__ import annotations

import errno
import os
import threading
import time

import numpy as np
import pytest

import varvedb as vv
from varvedb.errors import StorageError
from varvedb.storage import fileio

THREADS = 8
GUARD_S = 600.0     # a hang guard only


class GatedFile(fileio.FileIO):
    """A real file whose fdatasync waits for `release` while `hold` is set (then
    fails with EIO if `fail_held` is set), and fails with EIO (once) when
    `fail_next` is set; counts the syncs that reached the disk."""

    def __init__(self, fd: int, path: str, gate: "Gate"):
        super().__init__(fd, path)
        self.gate = gate

    def fdatasync(self) -> None:
        g = self.gate
        if g.hold:
            g.hold = False
            g.held.set()
            assert g.release.wait(GUARD_S)
            if g.fail_held:
                raise OSError(errno.EIO, os.strerror(errno.EIO), self.path)
        elif g.fail_next:
            g.fail_next = False
            raise OSError(errno.EIO, os.strerror(errno.EIO), self.path)
        super().fdatasync()
        g.synced.append(1)


class Gate:
    def __init__(self):
        self.hold = False
        self.fail_held = False
        self.fail_next = False
        self.held = threading.Event()
        self.release = threading.Event()
        self.synced: list[int] = []


@pytest.fixture
def gate(monkeypatch):
    g = Gate()
    monkeypatch.setattr(fileio, "open_file", lambda fd, path: GatedFile(fd, path, g))
    return g


def _open(path: str):
    db = vv.connect(path, durability="commit")
    docs = db.create_collection("docs", {"t": "int", "emb": vv.Vector(4, metric="l2")})
    docs.create_index("emb", vv.HNSW(m=8, ef_construction=32))
    docs.insert({"id": 0, "t": -1, "emb": [0.0] * 4})
    return db, docs


def _wait(cond) -> None:
    deadline = time.monotonic() + GUARD_S
    while not cond():
        assert time.monotonic() < deadline, "hang guard"
        time.sleep(0.001)


def _commit_in_threads(db, docs, gate) -> tuple[set, dict, list]:
    """Thread 0 commits and is held in its sync; threads 1..7 then commit
    (written, waiting for durability) before the sync is let go.
    Returns (threads acknowledged, {thread: its error}, the threads)."""
    acked, failed = set(), {}

    def commit(t):
        try:
            docs.insert({"id": 1 + t, "t": t, "emb": np.full(4, t, np.float32)})
            acked.add(t)
        except StorageError as e:
            failed[t] = e

    base = db.engine.written
    gate.hold = True
    first = threading.Thread(target=commit, args=(0,))
    first.start()
    assert gate.held.wait(GUARD_S)
    rest = [threading.Thread(target=commit, args=(t,)) for t in range(1, THREADS)]
    for th in rest:
        th.start()
    _wait(lambda: db.engine.written == base + THREADS)   # all written, none synced
    assert not acked
    return acked, failed, [first, *rest]


def test_eight_committing_threads_share_two_fdatasyncs(tmp_path, gate):
    db, docs = _open(str(tmp_path / "g.varve"))
    try:
        gate.synced.clear()
        acked, failed, threads = _commit_in_threads(db, docs, gate)
        gate.release.set()
        for th in threads:
            th.join(GUARD_S)
        assert not failed and sorted(acked) == list(range(THREADS))
        # the held sync covered thread 0's commit; one more covered the other seven
        assert len(gate.synced) == 2
        assert docs.count() == 1 + THREADS
    finally:
        db.close()
    db = vv.connect(str(tmp_path / "g.varve"))
    assert sorted(db["docs"].find(select=["t"]).ids) == list(range(1 + THREADS))
    assert db.verify().ok
    db.close()


def test_a_failed_group_sync_fails_every_commit_of_the_group(tmp_path, gate):
    path = str(tmp_path / "f.varve")
    db, docs = _open(path)
    try:
        acked, failed, threads = _commit_in_threads(db, docs, gate)
        v0 = db.engine.written - THREADS          # before the eight commits
        gate.fail_next = True                     # the sync after the held one: the group's
        gate.release.set()
        for th in threads:
            th.join(GUARD_S)
        # thread 0's commit was synced before the group was written: acknowledged;
        # the other seven were written after it, and the sync covering them failed
        assert acked == {0}
        assert sorted(failed) == list(range(1, THREADS))
        # file and memory are back at the last acknowledged commit
        assert db.version == v0 + 1
        assert sorted(docs.find(select=[]).ids) == [0, 1]
        assert docs.search(vector=[0.0] * 4, limit=8).ids[0] == 0
        docs.insert({"id": 100, "t": 100, "emb": [9.0] * 4})    # writes again
        assert db.version == v0 + 2
    finally:
        db.close()
    db = vv.connect(path)
    assert sorted(db["docs"].find(select=[]).ids) == [0, 1, 100]
    assert db.verify().ok
    db.close()


def test_a_transaction_begun_on_a_commit_whose_sync_fails_never_builds_on_it(tmp_path, gate):
    """A transaction may begin on a commit still being synced (the writer lock is let
    go first: group commit). When that sync fails, the failed committer returns
    its StorageError at once — it does not wait for the open transaction's writer
    lock to put memory back (before: it waited for as long as that transaction
    stayed open) — and the transaction's next read or write is refused
    (TransactionAbortedError) with memory back at the last acknowledged commit:
    it never reads or writes on the undone one, nor does any reader, nor a
    checkpoint. Waits are on the events themselves, with hang guards only."""
    path = str(tmp_path / "t.varve")
    db, docs = _open(path)
    try:
        v0 = db.version
        gate.hold = gate.fail_held = True
        errors = []

        def commit(i):
            try:
                docs.insert({"id": i, "t": i, "emb": [1.0] * 4})
            except StorageError as e:
                errors.append(e)
        first = threading.Thread(target=commit, args=(1,))
        first.start()
        assert gate.held.wait(GUARD_S)
        other = db.session()
        other.begin()                       # on the commit being synced
        mine = other.collection("docs")
        assert mine.get(1)["t"] == 1        # (group commit's window: not yet failed)
        assert docs.get(1) is None          # not published to readers
        gate.release.set()
        first.join(GUARD_S)                 # returns while `other` holds the lock
        assert not first.is_alive() and len(errors) == 1
        # memory still holds the failed commit (the lock is `other`'s): no checkpoint of it
        assert db.engine.written == v0 + 1
        with pytest.raises(StorageError, match="no checkpoint was written"):
            db.engine.log.write_checkpoint([b""], 0, db.engine.written)
        with pytest.raises(vv.TransactionAbortedError):
            mine.get(1)
        assert mine.get(1) is None and mine.count() == 1 and db.engine.written == v0
        with pytest.raises(vv.TransactionAbortedError):
            mine.insert({"id": 1, "t": 2, "emb": [2.0] * 4})
        other.rollback()
        assert docs.get(1) is None and db.version == v0
        docs.insert({"id": 1, "t": 3, "emb": [3.0] * 4})    # writes again
        db.checkpoint()
        # the next one begins after the failure, with nothing open: memory is back first
        gate.hold = gate.fail_held = True
        gate.held.clear()
        gate.release.clear()
        first = threading.Thread(target=commit, args=(5,))
        first.start()
        assert gate.held.wait(GUARD_S)
        gate.release.set()
        first.join(GUARD_S)
        assert not first.is_alive() and len(errors) == 2
        with db.transaction():
            assert docs.get(1)["t"] == 3 and docs.get(5) is None
            docs.insert({"id": 2, "t": 4, "emb": [4.0] * 4})
        assert db.version == v0 + 2
    finally:
        db.close()
    db = vv.connect(path)
    assert [d["t"] for d in db["docs"].get(ids=[0, 1, 2])] == [-1, 3, 4]
    assert db.verify().ok
    db.close()
