"""server/corked.py: an answer's writes in one turn of the event loop go out as
one send(), in order, all of it before a close; a served connection answers
pipelined requests and a Connection: close whole."""
from __future__ import annotations

import asyncio
import socket

import numpy as np

import varvedb as vv
from varvedb.server.corked import SEND_AT_ONCE, CorkedTransport

from server_proc import ServerProcess

HANG = 120.0      # seconds: a hang guard, never a timing


def test_writes_in_one_turn_are_one_send_in_order_and_a_close_sends_them_first():
    async def main():
        accepted: asyncio.Future = asyncio.get_running_loop().create_future()

        class Server(asyncio.Protocol):
            def connection_made(self, transport):
                accepted.set_result(transport)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Server, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.sockets[0].getsockname()[1])
        real = await asyncio.wait_for(accepted, HANG)
        sends = []
        write = real.write
        real.write = lambda data: (sends.append(bytes(data)), write(data))   # counted
        corked = CorkedTransport(real, loop)

        corked.write(b"head ")
        corked.write(b"body")
        assert sends == []                     # the turn has not ended
        await asyncio.sleep(0)
        assert sends == [b"head body"]
        assert await asyncio.wait_for(reader.readexactly(9), HANG) == b"head body"

        big = b"x" * SEND_AT_ONCE
        corked.write(b"a")
        corked.write(big)                      # past the limit: sent at once, in order
        assert sends[1:] == [b"a" + big]
        assert await asyncio.wait_for(reader.readexactly(len(big) + 1), HANG) == b"a" + big

        corked.write(b"last")
        corked.close()                         # what is buffered goes first
        assert await asyncio.wait_for(reader.read(), HANG) == b"last"
        assert sends[2:] == [b"last"]
        writer.close()
        server.close()
    asyncio.run(main())


def _answers(data: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of each HTTP/1.1 answer in `data`, by Content-Length."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next(int(v) for k, _, v in (x.partition(b": ") for x in lines[1:])
                      if k.lower() == b"content-length")
        out.append((int(lines[0].split()[1]), rest[:length]))
        data = rest[length:]
    return out


def test_a_served_connection_answers_pipelined_requests_and_a_close_whole(tmp_path):
    path = str(tmp_path / "c.varve")
    with vv.connect(path) as db:
        db.create_collection("docs", {"emb": vv.Vector(4, metric="l2")}).insert_arrays(
            id=np.arange(8), emb=np.eye(4, dtype=np.float32)[np.arange(8) % 4])
    body = b'{"vector": [1, 0, 0, 0], "limit": 2, "exact": true, "select": []}'
    search = (b"POST /collections/docs/search HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (len(body), body))
    with ServerProcess(path) as srv, socket.create_connection(("127.0.0.1", srv.port),
                                                              timeout=HANG) as s:
        s.sendall(search + b"GET /collections/docs/items/5 HTTP/1.1\r\nHost: x\r\n\r\n"
                  + search.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n"))
        got = b""
        while chunk := s.recv(1 << 16):      # to the server's close
            got += chunk
    answers = _answers(got)
    assert [status for status, _ in answers] == [200, 200, 200]
    hits = b'{"hits":[{"id":0,"score":0.0,"fields":{}},{"id":4,"score":0.0,"fields":{}}]}'
    assert answers[0][1] == answers[2][1] == hits
    assert answers[1][1].startswith(b'{"id":5')
