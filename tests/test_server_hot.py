"""server/hot.py in process: the hot routes' door, called as uvicorn calls it.

A single search whose like (hot.shape) have been short runs on the event loop
itself, no hand-off: it is answered while every pool thread is busy; one whose
like have been long waits for the pool (and so keeps the timeout rule), and so
does every batch and filtered search however short the collection's searches
have been; either way the answer is the pool's.
"""
from __future__ import annotations

import asyncio
import json
import threading

import numpy as np
import pytest

import varvedb as vv
from varvedb.server.app import build_app

HANG = 120.0      # seconds: a hang guard, never a timing
SHAPE = ("docs", None, True, 2)    # hot.shape of `search`'s body: limit 2, exact


@pytest.fixture
def app(tmp_path):
    db = vv.connect(str(tmp_path / "hot.varve"))
    docs = db.create_collection("docs", {"emb": vv.Vector(4, metric="l2"), "tag": "int"})
    docs.insert_arrays(id=np.arange(50), emb=np.eye(4, dtype=np.float32)[np.arange(50) % 4]
                       * np.arange(1, 51, dtype=np.float32)[:, None], tag=np.arange(50))
    app = build_app(db, threads=1)
    yield app
    app.state.api.pool.shutdown(wait=True)
    db.close()


async def call(app, method: str, path: str, body: bytes = b"") -> tuple[int, dict]:
    sent = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 2),
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    await app(scope, receive, send)
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def search(app, vector) -> asyncio.Future:
    body = json.dumps({"vector": vector, "limit": 2, "exact": True, "select": []}).encode()
    return asyncio.ensure_future(call(app, "POST", "/collections/docs/search", body))


async def queued(app, vector) -> asyncio.Future:
    """A search sent while the pool's one thread is taken that is not answered:
    it waits for the pool (its future, to await once the pool is free)."""
    waiting = search(app, vector)
    done, _ = await asyncio.wait({waiting}, timeout=0.2)
    assert not done                          # queued behind the pool's thread
    return waiting


def test_a_short_search_runs_on_the_loop_and_a_long_one_waits_for_the_pool(app):
    api = app.state.api

    async def main():
        first = await asyncio.wait_for(search(app, [0, 0, 0, 3.0]), HANG)
        # rows are e_(i % 4) * (i + 1): [0, 0, 0, 4] and [1, 0, 0, 0] are nearest
        assert first == (200, {"hits": [{"id": 3, "score": 1.0, "fields": {}},
                                         {"id": 0, "score": 10 ** 0.5, "fields": {}}]})
        # the first search always went to the pool, and its time began the average;
        # set as if its searches had been short (never waiting for a measured time)
        assert SHAPE in app.search_seconds
        app.search_seconds[SHAPE] = 0.0
        busy, free = threading.Event(), threading.Event()
        api.pool.submit(lambda: (busy.set(), free.wait(HANG)))    # the pool's one thread
        assert busy.wait(HANG)
        try:
            # on the loop: answered while the pool is taken, the same as the pool's
            assert await asyncio.wait_for(search(app, [0, 0, 0, 3.0]), HANG) == first
            app.search_seconds[SHAPE] = 1.0        # as if its searches had been long
            waiting = await queued(app, [0, 0, 0, 3.0])
        finally:
            free.set()
        assert await asyncio.wait_for(waiting, HANG) == first
        assert app.search_seconds[SHAPE] != 1.0    # its time moved the average

    asyncio.run(main())


def test_an_unknown_collection_is_a_typed_404_and_leaves_no_average(app):
    async def main():
        status, out = await asyncio.wait_for(call(
            app, "POST", "/collections/nope/search", b'{"vector": [1, 0, 0, 0]}'), HANG)
        assert status == 404 and out["error"]["type"] == "NotFoundError"
        assert not any(k[0] == "nope" for k in app.search_seconds)
    asyncio.run(main())


def test_a_malformed_search_body_is_the_routes_typed_refusal(app):
    """A body the loop cannot read as a single search (not JSON, nested past the
    decoder's depth) goes on to the route, which refuses it with a RequestError;
    a nested one raised RecursionError on the loop, answered as a server's bug."""
    async def main():
        for body in (b"[" * 60_000, b"{", b""):
            status, out = await asyncio.wait_for(call(
                app, "POST", "/collections/docs/search", body), HANG)
            assert status == 400 and out["error"]["type"] == "RequestError", body[:8]
    asyncio.run(main())


def test_a_read_worker_runs_a_short_search_on_the_loop_only_when_it_is_current(tmp_path):
    """serve --workers N: a read worker at the writer's newest version answers a
    short search on the loop; one behind the published version (a refresh to
    make, under the linker's lock) sends it to the pool."""
    from varvedb.server.workers import VersionBoard
    path = str(tmp_path / "w.varve")
    with vv.connect(path) as db:
        db.create_collection("docs", {"emb": vv.Vector(4, metric="l2")}).insert_arrays(
            id=np.arange(8), emb=np.eye(4, dtype=np.float32)[np.arange(8) % 4])
    db = vv.connect(path, readonly=True)
    board = VersionBoard(str(tmp_path / "board"), create=True)
    board.publish(db.engine.visible)
    app = build_app(db, threads=1, board=board, worker=1,
                    writer_socket=str(tmp_path / "writer.sock"))
    api = app.state.api
    busy, free = threading.Event(), threading.Event()

    async def main():
        first = await asyncio.wait_for(search(app, [1.0, 0, 0, 0]), HANG)
        assert first[0] == 200 and [h["id"] for h in first[1]["hits"]] == [0, 4]
        app.search_seconds[SHAPE] = 0.0          # as if its searches had been short
        api.pool.submit(lambda: (busy.set(), free.wait(HANG)))    # the pool's one thread
        assert busy.wait(HANG)
        try:
            assert await asyncio.wait_for(search(app, [1.0, 0, 0, 0]), HANG) == first
            board.publish(db.engine.visible + 1)  # the writer published a newer version
            app.search_seconds[SHAPE] = 0.0
            waiting = await queued(app, [1.0, 0, 0, 0])
        finally:
            free.set()
        assert await asyncio.wait_for(waiting, HANG) == first

    try:
        asyncio.run(main())
    finally:
        free.set()
        api.pool.shutdown(wait=True)
        api.follower.stop()
        db.close()


def test_the_kept_read_session_sees_each_commit_and_a_collection_made_again(app):
    """A search or get on main runs in its thread's kept read session and
    collection object (routes.read_call): a commit made since is seen, and a
    collection dropped and made again under its name is the new one."""
    db = app.state.api.db

    async def ids(vector) -> list:
        status, out = await asyncio.wait_for(search(app, vector), HANG)
        assert status == 200
        return [h["id"] for h in out["hits"]]

    async def main():
        assert await ids([0, 0, 0, 3.0]) == [3, 0]
        db.collection("docs").insert({"id": 100, "emb": [0, 0, 0, 3.0], "tag": 1})
        assert await ids([0, 0, 0, 3.0]) == [100, 3]
        status, doc = await asyncio.wait_for(call(app, "GET", "/collections/docs/items/100"),
                                             HANG)
        assert status == 200 and doc["tag"] == 1
        db.drop_collection("docs")
        status, out = await asyncio.wait_for(search(app, [0, 0, 0, 3.0]), HANG)
        assert status == 404 and out["error"]["type"] == "NotFoundError"
        db.create_collection("docs", {"emb": vv.Vector(4, metric="l2")}).insert(
            [{"id": 7, "emb": [0, 0, 0, 2.0]}, {"id": 8, "emb": [9.0, 0, 0, 0]}])
        assert await ids([0, 0, 0, 3.0]) == [7, 8]
        status, out = await asyncio.wait_for(call(app, "GET", "/collections/docs/items/100"),
                                             HANG)
        assert status == 404 and out["error"]["type"] == "NotFoundError"
    asyncio.run(main())


@pytest.mark.parametrize("body", [
    {"queries": [{"vector": [0, 0, 0, 3.0], "limit": 2}] * 3},
    {"vectors": [[0, 0, 0, 3.0]] * 3, "limit": 2},
    {"vector": [0, 0, 0, 3.0], "limit": 2, "exact": True, "where": "tag > 1"},
    {"vector": [0, 0, 0, 3.0], "limit": 2, "exact": True, "as_of": 1},
], ids=["queries", "vectors", "where", "as_of"])
def test_a_batch_or_filtered_search_waits_for_the_pool_and_its_timeout(tmp_path, body):
    """However short a collection's searches have been, a batch or a search with
    a filter (whose cost is the request's own) is never run on the event loop:
    with the pool's one thread taken it waits, another client is answered
    meanwhile, and it ends at the server's timeout (504). On the loop, a slow
    one stalled every client and escaped the timeout."""
    db = vv.connect(str(tmp_path / "t.varve"))
    db.create_collection("docs", {"emb": vv.Vector(4, metric="l2"), "tag": "int"}).insert_arrays(
        id=np.arange(8), emb=np.eye(4, dtype=np.float32)[np.arange(8) % 4], tag=np.arange(8))
    app = build_app(db, threads=1, timeout=1.0)
    api = app.state.api
    busy, free = threading.Event(), threading.Event()

    async def main():
        status, _ = await asyncio.wait_for(search(app, [0, 0, 0, 3.0]), HANG)
        assert status == 200
        for key in list(app.search_seconds):       # as if every search had been short
            app.search_seconds[key] = 0.0
        api.pool.submit(lambda: (busy.set(), free.wait(HANG)))    # the pool's one thread
        assert busy.wait(HANG)
        try:
            waiting = asyncio.ensure_future(call(app, "POST", "/collections/docs/search",
                                                 json.dumps(body).encode()))
            health = await asyncio.wait_for(call(app, "GET", "/health"), HANG)
            assert health[0] == 200 and not waiting.done()
            status, out = await asyncio.wait_for(waiting, HANG)
        finally:
            free.set()
        assert status == 504 and out["error"]["type"] == "RequestTimeoutError"

    try:
        asyncio.run(main())
    finally:
        free.set()
        api.pool.shutdown(wait=True)
        db.close()
