"""vv.AsyncClient's transactions under cancellation and child tasks, against a real
`varvedb serve`, each case beside vv.AsyncDatabase's answer to it.

A task canceled while its transaction opens or commits must not leave the server
holding it open, nor hide a commit it made; a task made inside a block that calls
after the block runs on its own. To cancel at the one moment that matters (the
server acted, the client has not heard) the client talks through a relay on
127.0.0.1 that passes requests at once and can hold the server's answers.
"""
from __future__ import annotations

import asyncio
import http.client

import msgspec
import pytest

import varvedb as vv
from conftest import child_env
from server_proc import ServerProcess

TOKEN = "test-token-async"
GUARD = 300.0      # seconds: a hang guard, never a measure


class HeldAnswers:
    """A TCP relay to the server: requests pass at once; while holding, an answer
    waits here (`held` is set, `answer` is its bytes) until release()."""

    def __init__(self, port: int):
        self.upstream = port
        self.holding = False
        self.held = asyncio.Event()
        self._released = asyncio.Event()
        self.answer = b""

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def release(self) -> None:
        self.holding = False
        self._released.set()

    async def _relay(self, reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def pipe(src, dst, answers: bool):
            while data := await src.read(1 << 16):
                if answers and self.holding:
                    self.answer = data
                    self.held.set()
                    await self._released.wait()
                dst.write(data)
                await dst.drain()
        try:
            await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))
        except OSError:       # the client dropped a canceled request's connection
            pass
        finally:
            writer.close()
            up_writer.close()

    async def close(self) -> None:
        self._server.close()
        await self._server.wait_closed()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("served") / "served.varve")
    with ServerProcess(path, token=TOKEN, env=child_env()) as srv:
        yield srv


@pytest.fixture
def sync(server):
    c = vv.Client(server.url, token=TOKEN, timeout=GUARD)
    for name in c.collections():
        c.drop_collection(name)
    c.create_collection("c", {"n": "int"})
    yield c
    c.close()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, GUARD))


def transaction_state(server, tid: str) -> tuple[int, dict]:
    """GET /transactions/{tid} straight to the server: (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=GUARD)
    conn.request("GET", f"/transactions/{tid}", headers={"Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    out = resp.status, msgspec.json.decode(resp.read())
    conn.close()
    return out


def answer_body(raw: bytes) -> dict:
    return msgspec.json.decode(raw.split(b"\r\n\r\n", 1)[1])


def test_a_task_canceled_while_its_transaction_opens_leaves_none_open(server, sync):
    async def main():
        relay = HeldAnswers(server.port)
        ac = vv.AsyncClient(await relay.start(), token=TOKEN, timeout=GUARD)
        relay.holding = True
        task = asyncio.create_task(ac.transaction().__aenter__())
        await relay.held.wait()             # opened on the server; the client not told
        tid = answer_body(relay.answer)["id"]
        task.cancel()
        relay.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        status, body = transaction_state(server, tid)
        assert status == 404 and body["error"]["type"] == "TransactionNotFoundError", body
        sync.collection("c").insert({"id": 1, "n": 1})      # the writer lock is free
        await ac.aclose()
        await relay.close()
    run(main())


@pytest.mark.parametrize("when", ["as it goes out", "once the server committed"])
def test_a_task_canceled_as_its_transaction_commits_says_it_committed(server, sync, when):
    """The commit is seen through: the task's CancelledError comes after it, the
    scope's version set and a note saying it committed, as AsyncDatabase's does
    (tests/test_async_database.py); the server holds nothing open."""
    async def main():
        relay = HeldAnswers(server.port)
        ac = vv.AsyncClient(await relay.start(), token=TOKEN, timeout=GUARD)
        c = await ac.collection("c")
        body_done = asyncio.Event()
        scope = []

        async def work():
            async with ac.transaction() as t:
                scope.append(t)
                await c.insert([{"id": i, "n": i} for i in range(100)])
                relay.holding = when != "as it goes out"
                body_done.set()
            return "not canceled"

        task = asyncio.create_task(work())
        await (body_done.wait() if when == "as it goes out" else relay.held.wait())
        task.cancel()
        relay.release()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        t, = scope
        assert t.version is not None and t.version == sync.version
        assert f"committed (version {t.version})" in " ".join(caught.value.__notes__)
        assert transaction_state(server, t.id)[0] == 404
        assert sync.collection("c").count() == 100
        sync.collection("c").insert({"id": 5000, "n": 1})   # the writer lock is free
        await ac.aclose()
        await relay.close()
    run(main())


@pytest.mark.parametrize("kind", ["AsyncClient", "AsyncDatabase"])
def test_a_task_made_in_a_block_that_calls_after_it_runs_on_its_own(server, sync, tmp_path,
                                                                     kind):
    async def main():
        if kind == "AsyncClient":
            db = vv.AsyncClient(server.url, token=TOKEN, timeout=GUARD)
        else:
            db = await vv.connect_async(str(tmp_path / "e.varve"))
            await db.create_collection("c", {"n": "int"})
        c = await db.collection("c")
        go = asyncio.Event()

        async def later():
            await go.wait()
            return await c.insert({"id": 7, "n": 7}), await c.count()

        async with db.transaction():
            await c.insert({"id": 1, "n": 1})
            child = asyncio.create_task(later())
        go.set()
        assert await child == ([7], 2)
        async with db.transaction():          # and this task's next block is its own
            await c.insert({"id": 8, "n": 8})
        assert await c.count() == 3
        await db.aclose()
    run(main())
