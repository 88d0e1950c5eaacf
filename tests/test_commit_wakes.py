"""What a commit wakes: the threads waiting for a version to be visible, and the
maintainer when it waits idle for rows — and no one else. A Condition's
notify is a few µs of Python on the committing thread (issue 28: the CPU of a
one-row commit outside its fdatasync); a commit with no one waiting, or while
the maintainer is in a pass (it looks for new rows when the pass ends),
notifies nothing."""
from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import varvedb as vv
from varvedb.engine.maintainer import Maintainer

HANG = 300      # seconds: a hang guard only


def _notifies(run) -> list:
    """The `self` and the calling function's code of every Condition.notify_all
    made on this thread while `run()` runs."""
    seen = []
    target = threading.Condition.notify_all.__code__

    def prof(frame, event, arg):
        if event == "call" and frame.f_code is target:
            seen.append((frame.f_locals["self"], frame.f_back.f_code))
    sys.setprofile(prof)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen


@pytest.fixture
def db(tmp_path):
    d = vv.connect(str(tmp_path / "w.varve"))
    yield d
    d.close()


def test_a_commit_no_one_waits_for_notifies_no_reader(db):
    c = db.create_collection("t", {"n": "int"})
    c.insert({"id": 0, "n": 0})

    def commits():
        for i in range(1, 21):
            c.insert({"id": i, "n": i})
    seen = _notifies(commits)
    assert not [s for s, _ in seen if s is db.engine.published]
    assert c.count() == 21


def test_a_reader_waiting_for_a_version_is_woken_by_the_commit(db):
    c = db.create_collection("t", {"n": "int"})
    c.insert({"id": 0, "n": 0})
    v = db.engine.visible
    got, waiting = [], threading.Event()

    def wait():
        waiting.set()
        got.append(db.engine.wait_visible(v, HANG))
    th = threading.Thread(target=wait)
    th.start()
    assert waiting.wait(HANG)
    # (it may not be inside wait_visible yet: it then finds the version visible)
    c.insert({"id": 1, "n": 1})
    th.join(HANG)
    assert got == [True] and db.engine.visible == v + 1


def test_a_commit_does_not_notify_the_maintainer_in_a_pass(db):
    dim = 8
    rng = np.random.default_rng(3)
    c = db.create_collection("t", {"v": vv.Vector(dim)})
    c.insert([{"id": i, "v": rng.standard_normal(dim)} for i in range(50)])
    c.create_index("v", vv.HNSW())
    c.wait_indexed()
    m = db.engine.maintainer
    deadline = time.monotonic() + HANG
    while not m.idle:        # the pass that linked them over: its last look for rows
        assert time.monotonic() < deadline       # would wait on the hold below for ever
        time.sleep(0.005)
    with m.hold():                       # a pass begun now waits here, in flight
        before = m.passes
        c.insert({"id": 50, "v": rng.standard_normal(dim)})
        deadline = time.monotonic() + HANG
        while m.passes == before:        # the pass this commit asked for has begun
            assert time.monotonic() < deadline
            time.sleep(0.005)

        def commits():
            for i in range(51, 61):
                c.insert({"id": i, "v": rng.standard_normal(dim)})
        seen = _notifies(commits)
        assert not [s for s, code in seen if code is Maintainer.wake.__code__]
    c.wait_indexed()                     # the pass in flight links them all
    status = db.engine.index_status(c.table, "v")
    assert status["linked"] == 61 and status["unlinked"] == 0
