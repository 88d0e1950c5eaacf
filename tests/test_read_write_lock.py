"""index/vector_index.ReadWriteLock: readers (every search) and the writer (the
maintainer linking rows) never hold it together, a waiting writer is not starved
by a stream of readers, and nobody waits forever — with real threads switching
every microsecond."""
from __future__ import annotations

import sys
import threading

import pytest

from varvedb.index.vector_index import ReadWriteLock

HANG_GUARD = 600.0      # seconds: a deadlock fails the test instead of hanging CI


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def test_readers_and_writers_never_hold_the_lock_together(fast_switching):
    lock = ReadWriteLock()
    count = threading.Lock()
    state = {"readers": 0, "writing": 0, "bad": [], "reads": 0, "writes": 0}
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            lock.acquire_read()
            try:
                with count:
                    state["readers"] += 1
                    if state["writing"]:
                        state["bad"].append("a reader beside a writer")
                with count:
                    state["readers"] -= 1
                    state["reads"] += 1
            finally:
                lock.release_read()

    def writer():
        for _ in range(300):
            with lock.write():
                with count:
                    if state["readers"] or state["writing"]:
                        state["bad"].append("a writer beside a reader or a writer")
                    state["writing"] += 1
                with count:
                    state["writing"] -= 1
                    state["writes"] += 1

    readers = [threading.Thread(target=reader) for _ in range(4)]
    writers = [threading.Thread(target=writer) for _ in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:              # the writers finish although readers never stop
        t.join(HANG_GUARD)
        assert not t.is_alive(), "a writer starved or deadlocked"
    stop.set()
    for t in readers:
        t.join(HANG_GUARD)
        assert not t.is_alive(), "a reader deadlocked"
    assert state["bad"] == []
    assert state["writes"] == 600 and state["reads"] > 0
