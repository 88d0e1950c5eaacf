"""server/corked.HotHttpTools in process: uvicorn's httptools protocol that
answers a short single search itself, with no ASGI cycle, task or app call.

The protocol is fed bytes as the event loop would feed it (data_received) on a
transport that records its writes: a short search is answered before
data_received returns, in one write, with the bytes the ASGI way answers; what
it declines (a first search whose like is unknown, a token not the server's,
an unknown collection, a query string, a body too large, a Connection: close)
goes the ASGI way and is answered as before; pipelined requests keep their order.
"""
from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from uvicorn.server import ServerState

import varvedb as vv
from varvedb.server.app import build_app
from varvedb.server.corked import HotHttpTools
from varvedb.server.hot import INLINE_BODY
from varvedb.server.run import uvicorn_config

HANG = 120.0      # seconds: a hang guard, never a timing
BODY = b'{"vector": [1, 0, 0, 0], "limit": 2, "exact": true, "select": []}'


class Transport(asyncio.Transport):
    """What the protocol writes, each write apart."""

    def __init__(self):
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name, default=None):
        return {"sockname": ("127.0.0.1", 8080), "peername": ("127.0.0.1", 5000)}.get(
            name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def request(body: bytes = BODY, path: bytes = b"/collections/docs/search",
            headers: bytes = b"") -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s"
            b"Content-Length: %d\r\n\r\n%s" % (path, headers, len(body), body))


def answers(data: bytes) -> list[tuple[int, dict, bytes]]:
    """(status, headers, body) of each HTTP/1.1 answer in `data`, by Content-Length."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        headers = {k.lower(): v for k, _, v in (x.partition(b": ") for x in lines[1:])}
        length = int(headers[b"content-length"])
        out.append((int(lines[0].split()[1]), headers, rest[:length]))
        data = rest[length:]
    return out


@pytest.fixture(params=[None, "secret"], ids=["open", "token"])
def served(tmp_path, request):
    db = vv.connect(str(tmp_path / "hotproto.varve"))
    docs = db.create_collection("docs", {"emb": vv.Vector(4, metric="l2")})
    docs.insert_arrays(id=np.arange(8), emb=np.eye(4, dtype=np.float32)[np.arange(8) % 4])
    app = build_app(db, threads=1, token=request.param)
    loop = asyncio.new_event_loop()
    config = uvicorn_config(app, "warning", host="127.0.0.1", port=0)
    state = ServerState()

    def connect():
        protocol = config.http(config=config, server_state=state, app_state={}, _loop=loop)
        # as in the server, whose logging setup (access_log=False) leaves the access
        # logger without handlers; here pytest's own on the root logger would count
        protocol.access_log = False
        transport = Transport()
        protocol.connection_made(transport)
        return protocol, transport
    yield app, loop, state, connect, request.param
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    app.state.api.pool.shutdown(wait=True)
    db.close()


def settle(loop, state) -> None:
    """Run the loop until the ASGI tasks under way have answered."""
    async def wait():
        while state.tasks:
            await asyncio.wait(set(state.tasks), timeout=HANG)
        await asyncio.sleep(0)      # the corked writes of the last turn
    loop.run_until_complete(wait())


def short(app) -> None:
    """As if the searches of each shape seen had been short (never waiting for a
    measured time: the first of a shape went the ASGI way and began its average)."""
    assert app.search_seconds
    for shape in app.search_seconds:
        app.search_seconds[shape] = 0.0


def auth(token) -> bytes:
    return b"" if token is None else b"Authorization: Bearer %s\r\n" % token.encode()


def test_the_protocol_is_the_hot_one_for_the_served_app(served):
    app, loop, state, connect, token = served
    protocol, _ = connect()
    assert isinstance(protocol, HotHttpTools) and protocol.hot is app


def test_a_short_search_is_answered_at_once_in_one_write_as_the_asgi_way_answers(served):
    app, loop, state, connect, token = served
    protocol, transport = connect()
    protocol.data_received(request(headers=auth(token)))     # its like unknown: ASGI
    assert state.tasks
    settle(loop, state)
    (status, headers, body), = answers(b"".join(transport.writes))
    assert status == 200
    n = len(transport.writes)
    short(app)
    protocol.data_received(request(headers=auth(token)))     # now short: answered here
    assert not state.tasks and len(transport.writes) == n + 1
    (status2, headers2, body2), = answers(transport.writes[-1])
    assert (status2, body2) == (status, body) and headers2 == headers
    assert json.loads(body2)["hits"][0]["id"] == 0
    assert state.total_requests == 2 and not transport.closed
    # split anywhere, the same answer once the body has ended
    whole = request(headers=auth(token))
    for cut in (10, len(whole) - len(BODY), len(whole) - 3):
        short(app)
        protocol.data_received(whole[:cut])
        assert len(transport.writes) == n + 1
        protocol.data_received(whole[cut:])
        assert len(transport.writes) == n + 2 and transport.writes[-1] == transport.writes[-2]
        n += 1


def test_what_it_declines_goes_the_asgi_way_in_order(served):
    app, loop, state, connect, token = served
    protocol, transport = connect()
    good = request(headers=auth(token))
    protocol.data_received(good)
    settle(loop, state)
    transport.writes.clear()
    short(app)
    declined = [
        request(path=b"/collections/nope/search", headers=auth(token)),       # 404
        request(path=b"/collections/docs/search?x=1", headers=auth(token)),   # ignored
        request(body=b'{"vector": [1, 0, 0, 0], "limit": 2, "exact": true, "select": [], '
                     b'"where": "id > 0"}', headers=auth(token)),
        request(body=b"{" + b" " * INLINE_BODY + b"}", headers=auth(token)),  # 422: no vector
        request(body=b"[1", headers=auth(token)),                            # 400
        good,
        request(headers=auth(token) + b"Connection: close\r\n"),
    ]
    if token is not None:
        declined.insert(0, request(headers=b"Authorization: Bearer wrong\r\n"))
    protocol.data_received(b"".join(declined))        # pipelined
    settle(loop, state)
    got = answers(b"".join(transport.writes))
    want = [404, 200, 200, 422, 400, 200, 200]
    if token is not None:
        want.insert(0, 401)
    assert [s for s, _, _ in got] == want
    assert got[-2][2] == got[-1][2]           # the same search, here and the ASGI way
    assert transport.closed                   # the last asked for a close


def test_a_shutdown_while_a_body_comes_closes_once_it_is_answered(served):
    app, loop, state, connect, token = served
    protocol, transport = connect()
    protocol.data_received(request(headers=auth(token)))
    settle(loop, state)
    whole = request(headers=auth(token))
    short(app)
    protocol.data_received(whole[:-5])
    protocol.shutdown()
    assert not transport.closed
    protocol.data_received(whole[-5:])
    assert transport.closed and answers(transport.writes[-1])[0][0] == 200


def test_a_body_over_the_servers_limit_is_refused_as_the_asgi_way_refuses_it(tmp_path):
    db = vv.connect(str(tmp_path / "limit.varve"))
    db.create_collection("docs", {"emb": vv.Vector(4, metric="l2")}).insert_arrays(
        id=np.arange(4), emb=np.eye(4, dtype=np.float32))
    app = build_app(db, threads=1, max_body=len(BODY) - 1)
    loop = asyncio.new_event_loop()
    try:
        config = uvicorn_config(app, "warning", host="127.0.0.1", port=0)
        state = ServerState()
        protocol = config.http(config=config, server_state=state, app_state={}, _loop=loop)
        protocol.access_log = False
        transport = Transport()
        protocol.connection_made(transport)
        app.search_seconds[("docs", None, True, 2)] = 0.0     # as if short: inline
        protocol.data_received(request())
        settle(loop, state)
        (status, _, body), = answers(b"".join(transport.writes))
        assert status == 413 and json.loads(body)["error"]["type"] == "RequestTooLargeError"
    finally:
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
        app.state.api.pool.shutdown(wait=True)
        db.close()


def test_while_writes_are_paused_a_search_waits_the_asgi_way(served):
    app, loop, state, connect, token = served
    protocol, transport = connect()
    protocol.data_received(request(headers=auth(token)))
    settle(loop, state)
    n = len(transport.writes)
    protocol.pause_writing()            # the client reads no answers: flow control
    short(app)
    protocol.data_received(request(headers=auth(token)))
    assert state.tasks and len(transport.writes) == n      # not answered here
    protocol.resume_writing()
    settle(loop, state)
    assert [s for s, _, _ in answers(b"".join(transport.writes[n:]))] == [200]
