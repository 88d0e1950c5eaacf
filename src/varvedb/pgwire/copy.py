"""COPY ... FROM STDIN over the protocol: the client's CopyData messages as the
file object the statement reads (sql/dml.py reads its copy_data in chunks).

The statement runs on the connection's thread and reads the socket itself, one
CopyData message a read(), so nothing of a COPY waits in memory beyond the
message being parsed: a client streaming gigabytes holds one message here.
"""
from __future__ import annotations

import time

from ..errors import SqlError
from .messages import ProtocolViolation, Reader


class CopyIn:
    def __init__(self, reader: Reader, waiter=None):
        """`waiter`: the connection, whose idle_since says since when it has
        waited for its client: a COPY that stalls holds the writer lock as an
        open transaction does, and the server's idle-in-transaction timeout
        ends it too (25P03, the COPY rolled back)."""
        self._reader = reader
        self._waiter = waiter
        self.ended = False          # CopyDone or CopyFail read

    def _message(self) -> tuple[bytes, bytes]:
        waiter = self._waiter
        if waiter is None or self._reader.has_message():
            return self._reader.message()
        waiter.idle_since = time.monotonic()
        try:
            return self._reader.message()
        finally:
            waiter.idle_since = None

    def read(self, n: int = -1) -> bytes:
        while not self.ended:
            kind, body = self._message()
            if kind == b"d":
                if body:
                    return body
            elif kind == b"c":
                self.ended = True
            elif kind == b"f":
                self.ended = True
                message = body.rstrip(b"\0").decode(errors="replace")
                raise SqlError("57014", f"COPY from stdin failed: "
                                        f"{message or 'the client cancelled it'}")
            elif kind not in (b"H", b"S"):      # PostgreSQL ignores these in a COPY
                raise ProtocolViolation(f"unexpected message type {kind[0]} during COPY "
                                        "from stdin")
        return b""

    def drain(self) -> None:
        """The statement ended before the data did (a bad row): what the client
        still sends up to CopyDone or CopyFail is read and dropped."""
        while not self.ended:
            try:
                self.read()
            except SqlError:
                pass
