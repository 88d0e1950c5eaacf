"""The async embedded API (vv.connect_async): the same answers as the sync verbs,
the event loop never held by a verb, a transaction per task, and cancellation
that leaves nothing half-applied."""
from __future__ import annotations

import asyncio
import inspect
import random

import numpy as np
import pytest

import varvedb as vv
from varvedb.async_database import COLLECTION_VERBS
from varvedb.collection import Collection

GUARD = 300.0      # seconds: a hang guard, never a measure
SCHEMA = {"tag": vv.Int(), "emb": vv.Vector(8)}


def rows(ids, seed=0):
    rng = np.random.default_rng(seed)
    return [{"id": i, "tag": i % 5, "emb": rng.random(8)} for i in ids]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, GUARD))


def test_every_collection_verb_is_awaitable_or_named_here():
    # the writer's two-step bulk path takes a sync transaction object: not a task's verb
    excused = {"prepare_rows", "insert_prepared", "prepared_now"}
    public = {n for n, v in inspect.getmembers(Collection, inspect.isfunction)
              if not n.startswith("_")}
    assert public == set(COLLECTION_VERBS) | excused, public ^ (set(COLLECTION_VERBS) | excused)
    for name in COLLECTION_VERBS:
        assert inspect.iscoroutinefunction(getattr(vv.AsyncCollection, name)), name


def test_many_concurrent_calls_answer_as_the_sync_api(tmp_path):
    path = str(tmp_path / "a.varve")
    queries = np.random.default_rng(7).random((60, 8))

    async def main():
        db = await vv.connect_async(path)
        docs = await db.create_collection("docs", SCHEMA)
        await asyncio.gather(*[docs.insert(rows(range(i, i + 50), seed=i))
                               for i in range(0, 500, 50)])
        hits = await asyncio.gather(*[docs.search(vector=q, where="tag != 3", limit=5)
                                      for q in queries])
        counts = await asyncio.gather(*[docs.count(where=f"tag = {t}") for t in range(5)])
        got = await docs.get(ids=[1, 2, 499])
        sync = db.db.collection("docs")
        assert [h.ids for h in hits] == \
            [sync.search(vector=q, where="tag != 3", limit=5).ids for q in queries]
        assert counts == [sync.count(where=f"tag = {t}") for t in range(5)] == [100] * 5
        assert [d["id"] for d in got] == [1, 2, 499]
        assert await db.collections() == ["docs"]
        await db.aclose()
        with pytest.raises(vv.ClosedError):
            await docs.count()
    run(main())
    assert vv.connect(path, readonly=True)["docs"].count() == 500


def test_a_verb_waiting_on_the_writer_lock_does_not_hold_the_loop():
    async def main():
        db = await vv.connect_async(":memory:", timeout=GUARD)
        docs = await db.create_collection("docs", SCHEMA)
        await docs.insert(rows(range(10)))
        other = db.db.session()            # another writer holds the lock meanwhile
        other.begin()
        other.collection("docs").insert(rows([100]))
        waiting = asyncio.create_task(docs.insert(rows([200])))
        # the loop runs other tasks' verbs while the insert waits on its thread
        assert await docs.count() == 10
        assert not waiting.done()
        await asyncio.get_running_loop().run_in_executor(None, other.commit)
        assert len(await waiting) == 1
        assert await docs.count() == 12
        await db.aclose()
    run(main())


def test_a_transaction_belongs_to_its_task():
    async def main():
        db = await vv.connect_async(":memory:")
        docs = await db.create_collection("docs", SCHEMA)
        inside, go_on = asyncio.Event(), asyncio.Event()

        async def writer():
            async with db.transaction() as t:
                await docs.insert(rows([1, 2]))
                # a child task of the block runs in its transaction too
                assert await asyncio.gather(docs.count(), docs.count()) == [2, 2]
                inside.set()
                await go_on.wait()
            return t.version

        task = asyncio.create_task(writer())
        await inside.wait()
        assert await docs.count() == 0       # another task: not yet committed
        go_on.set()
        version = await task
        assert version == await db.version() and await docs.count() == 2

        with pytest.raises(KeyError):
            async with db.transaction():
                await docs.delete(ids=[1])
                assert await docs.count() == 1
                raise KeyError("rolls back")
        assert await docs.count() == 2

        async with db.transaction():
            with pytest.raises(vv.TransactionError):
                async with db.transaction():
                    pass
        assert await docs.count() == 2
        await db.aclose()
    run(main())


def test_sql_begin_holds_its_session_for_the_task_until_commit():
    async def main():
        db = await vv.connect_async(":memory:")
        await db.sql("CREATE TABLE t (id bigint PRIMARY KEY, v int)")
        await db.sql("BEGIN")
        await db.sql("INSERT INTO t VALUES (1, 10), (2, 20)")
        assert (await db.sql("SELECT count(*) FROM t")).rows == [(2,)]
        seen = await asyncio.create_task(_count_elsewhere(db))
        # a task created here copies the pin: it runs inside the open transaction
        assert seen == [(2,)]
        await db.sql("ROLLBACK")
        assert (await db.sql("SELECT count(*) FROM t")).rows == [(0,)]
        await db.sql("BEGIN")
        await db.sql("INSERT INTO t VALUES (3, 30)")
        await db.sql("COMMIT")
        other = asyncio.create_task(_count_elsewhere(db))
        assert await other == [(1,)]
        await db.aclose()

    async def _count_elsewhere(db):
        return (await db.sql("SELECT count(*) FROM t")).rows
    run(main())


def test_vacuum_and_drop_branch_are_refused_inside_the_tasks_transaction(tmp_path):
    """As the sync verbs are: inside the task's transaction (SQL's BEGIN, `async with
    db.transaction()`) vacuum() and drop_branch() are TransactionError and change
    nothing (defect: they ran on a pool thread, whose own session had nothing open,
    so a vacuum replaced the file and a drop committed inside the block)."""
    async def main():
        db = await vv.connect_async(str(tmp_path / "v.varve"))
        await db.sql("CREATE TABLE t (id int PRIMARY KEY)")
        await db.branch("side")
        before = await db.version()

        async def refused():
            for verb in (lambda: db.drop_branch("side"), db.vacuum):
                with pytest.raises(vv.TransactionError, match="inside a transaction"):
                    await verb()
        for begin in ("BEGIN", "BEGIN READ ONLY"):
            await db.sql(begin)
            await refused()
            assert (await db.sql("ROLLBACK")).status == "ROLLBACK"
        async with db.transaction():
            await refused()
        assert await db.version() == before
        assert [b.name for b in await db.branches()] == ["main", "side"]
        await db.drop_branch("side")
        await db.vacuum()
        assert [b.name for b in await db.branches()] == ["main"]
        await db.aclose()
    run(main())


def test_a_task_canceled_inside_its_transaction_changes_nothing():
    async def main():
        db = await vv.connect_async(":memory:", timeout=GUARD)
        docs = await db.create_collection("docs", SCHEMA)
        await docs.insert(rows(range(5)))
        inside = asyncio.Event()

        async def writer():
            async with db.transaction():
                await docs.insert(rows([50, 51]))
                await docs.delete(ids=[0])
                inside.set()
                await asyncio.Event().wait()        # until canceled

        task = asyncio.create_task(writer())
        await inside.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(d["id"] for d in await docs.get(ids=list(range(60)))) == [0, 1, 2, 3, 4]
        # the writer lock is free again: a new transaction commits
        async with db.transaction():
            await docs.insert(rows([60]))
        assert await docs.count() == 6
        await db.aclose()
    run(main())


def test_a_task_canceled_as_its_transaction_commits_says_it_committed():
    """The commit, once on its thread, runs to its end: the task still gets its
    CancelledError, after the commit, with the version set and a note saying so
    (never a CancelledError that hides a commit)."""
    async def main():
        db = await vv.connect_async(":memory:", timeout=GUARD)
        docs = await db.create_collection("docs", SCHEMA)
        body_done = asyncio.Event()
        scope = []

        async def writer():
            async with db.transaction() as t:
                scope.append(t)
                await docs.insert(rows(range(2000)))
                body_done.set()
            return "not canceled"

        task = asyncio.create_task(writer())
        await body_done.wait()     # the block's end is next: its commit
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        t, = scope
        assert t.version is not None and t.version == await db.version()
        assert await docs.count() == 2000
        assert f"committed (version {t.version})" in " ".join(caught.value.__notes__)
        async with db.transaction():          # the writer lock is free again
            await docs.insert(rows([5000]))
        assert await docs.count() == 2001
        await db.aclose()
    run(main())


@pytest.mark.parametrize("threads", [1, None])
def test_concurrent_tasks_commit_or_roll_back_as_a_set_oracle_says(threads):
    """More transactions than pool threads, each waiting for the writer lock: the
    one that holds it still gets a thread to commit on (each runs on its own)."""
    rng = random.Random(3)
    plans = [(i, rng.random() < 0.3) for i in range(40)]     # (task, fails inside)

    async def main():
        db = await vv.connect_async(":memory:", threads=threads, timeout=GUARD)
        docs = await db.create_collection("docs", SCHEMA)

        async def one(i, fails):
            ids = [1000 * i + k for k in range(3)]
            try:
                async with db.transaction():
                    await docs.insert(rows(ids, seed=i))
                    await asyncio.sleep(0)
                    if fails:
                        raise ValueError(i)
                    await docs.delete(ids=ids[:1])
            except ValueError:
                pass
        await asyncio.gather(*[one(i, f) for i, f in plans])
        got = {d["id"] for d in await docs.find(limit=1000)}
        assert got == {1000 * i + k for i, f in plans if not f for k in (1, 2)}
        await db.aclose()
    run(main())


def test_bad_options_are_refused():
    async def main():
        with pytest.raises(vv.OptionError):
            await vv.connect_async(":memory:", threads=0)
        with pytest.raises(vv.OptionError):
            vv.AsyncDatabase("not a database")
        with pytest.raises(vv.OptionError):
            await vv.connect_async("")
    run(main())
