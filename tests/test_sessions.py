"""Sessions: a transaction owned by a session, not by a thread.

Two sessions on one thread are isolated; a session may begin on one thread
and commit on another; a second writer waits up to its timeout, then raises
LockTimeoutError having written nothing; a session dropped mid-transaction
leaves nothing behind and frees the writer lock.
"""
from __future__ import annotations

import gc
import threading
import time

import pytest

import varvedb as vv

from conftest import file_digest


@pytest.fixture
def docs_db(db):
    db.create_collection("docs", {"n": "int"})
    return db


def ns(coll) -> list:
    return sorted(h.fields["n"] for h in coll.find())


def test_two_sessions_on_one_thread_are_isolated(docs_db):
    a, b = docs_db.session(), docs_db.session()
    with a.transaction():
        a.collection("docs").insert([{"n": 1}, {"n": 2}])
        assert a.collection("docs").count() == 2
        assert b.collection("docs").count() == 0        # a's rows are not b's to see
        assert docs_db["docs"].count() == 0              # nor the default session's
        assert b.version == a.version - 1
    assert b.collection("docs").count() == 2
    assert ns(docs_db["docs"]) == [1, 2]


def test_a_second_writer_on_the_same_thread_times_out_and_writes_nothing(docs_db, db_path):
    a, b = docs_db.session(), docs_db.session(timeout=0.2)
    a.begin()
    a.collection("docs").insert({"n": 1})
    before = docs_db.version
    t0 = time.monotonic()
    with pytest.raises(vv.LockTimeoutError) as e:
        with b.transaction():
            b.collection("docs").insert({"n": 2})
    assert time.monotonic() - t0 >= 0.2
    assert e.value.sqlstate == "55P03"
    assert not b.in_transaction
    a.commit()
    assert docs_db.version == before + 1
    assert ns(docs_db["docs"]) == [1]


def test_a_writer_on_another_thread_waits_then_gets_the_lock(docs_db):
    a = docs_db.session()
    a.begin()
    a.collection("docs").insert({"n": 1})
    got = []

    def other():
        b = docs_db.session(timeout=600)       # a hang guard: a commits soon
        with b.transaction():
            got.append(b.collection("docs").count())   # a's commit, seen by b's writes
    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.1)
    assert t.is_alive()                 # waiting for a
    a.commit()
    t.join(600)
    assert got == [1]


def test_timeout_is_checked_at_the_door(docs_db):
    for bad in (-1, "5", float("nan"), float("inf"), True):
        with pytest.raises(vv.OptionError):
            docs_db.session(timeout=bad)
    with pytest.raises(vv.OptionError):
        vv.connect(":memory:", timeout=-0.5)


def test_a_session_may_begin_on_one_thread_and_commit_on_another(docs_db, db_path):
    s = docs_db.session()
    coll = s.collection("docs")
    s.begin()
    coll.insert({"n": 7})

    def finish():
        coll.insert({"n": 8})        # the same transaction, from another thread
        s.commit()
    t = threading.Thread(target=finish)
    t.start()
    t.join(600)
    assert not s.in_transaction
    assert ns(docs_db["docs"]) == [7, 8]
    assert docs_db.history()[-1].rows_changed == 2      # one commit
    docs_db.close()
    with vv.connect(db_path) as again:
        assert ns(again["docs"]) == [7, 8]


def test_a_session_dropped_mid_transaction_leaves_nothing(docs_db, db_path):
    before, digest_end = docs_db.version, docs_db.engine.log.end

    def abandon():
        s = docs_db.session()
        s.begin()
        s.collection("docs").insert([{"n": i} for i in range(100)])
    abandon()
    gc.collect()
    assert docs_db.version == before
    assert docs_db["docs"].count() == 0
    assert docs_db.engine.log.end == digest_end
    with docs_db.session(timeout=0.5).transaction():   # the lock is free again
        docs_db["docs"].count()
    docs_db.close()
    digest = file_digest(db_path)
    with vv.connect(db_path) as again:
        assert again["docs"].count() == 0
        assert again.version == before
    assert file_digest(db_path) == digest


def test_session_close_and_errors(docs_db):
    s = docs_db.session()
    with pytest.raises(vv.TransactionError):
        s.commit()
    s.begin()
    with pytest.raises(vv.TransactionError):
        s.begin()
    s.collection("docs").insert({"n": 1})
    s.close()                              # rolls back
    assert docs_db["docs"].count() == 0
    with s.transaction():
        s.collection("docs").insert({"n": 2})
        with pytest.raises(vv.TransactionError):
            with s.transaction():          # nested: refused, the outer one stays open
                pass
    assert ns(docs_db["docs"]) == [2]
    with pytest.raises(vv.NotFoundError):
        s.collection("nope")


def test_exception_in_a_session_transaction_rolls_back(docs_db):
    s = docs_db.session()
    with pytest.raises(RuntimeError):
        with s.transaction():
            s.collection("docs").insert({"n": 1})
            raise RuntimeError("boom")
    assert docs_db["docs"].count() == 0
    assert not s.in_transaction


def test_closing_the_database_rolls_back_this_threads_transaction(docs_db):
    s = docs_db.session()
    s.begin()
    s.collection("docs").insert({"n": 1})
    docs_db.close()
    with pytest.raises(vv.ClosedError):
        s.commit()
    with pytest.raises(vv.ClosedError):
        s.begin()


def test_maintenance_times_out_on_another_threads_open_transaction(db_path):
    """close(), checkpoint() and vacuum() waited for ever while a session begun on
    another thread held an idle transaction (a write timed out). They now time
    out as a write does, the database left open and whole; once that
    transaction ends they run, and its commit survives the close."""
    db = vv.connect(db_path, timeout=0.2)
    db.create_collection("docs", {"n": "int"}).insert({"n": 1})
    s = db.session()
    began, end = threading.Event(), threading.Event()

    def other():
        s.begin()
        s.collection("docs").insert({"n": 2})
        began.set()
        end.wait(600)                  # idle, its transaction open
        s.commit()
    t = threading.Thread(target=other)
    t.start()
    assert began.wait(600)
    for verb in (db.checkpoint, db.vacuum, db.close):
        done, got = threading.Event(), []

        def attempt(verb=verb, done=done, got=got):
            try:
                verb()
            except vv.VarveError as e:
                got.append(e)
            done.set()
        threading.Thread(target=attempt, daemon=True).start()
        assert done.wait(600), f"{verb.__name__} hung"        # a hang guard, not a timing
        assert type(got[0]) is vv.LockTimeoutError and verb.__name__ in str(got[0])
    assert not db.engine.closed and ns(db["docs"]) == [1]
    end.set()
    t.join(600)
    assert ns(db["docs"]) == [1, 2]
    db.checkpoint()
    assert db.vacuum().version == db.version
    db.close()
    with vv.connect(db_path) as again:
        assert ns(again["docs"]) == [1, 2]
