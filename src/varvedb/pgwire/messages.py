"""The protocol's framing: reading a client's messages (bounded) and building
the server's.

Every message after start-up is a type byte, a 4-byte big-endian length that
counts itself, then the body; start-up messages have no type byte. A length
below 4 or above the limit closes the connection (ProtocolViolation): the
body is never read, so a crafted length costs nothing.
"""
from __future__ import annotations

import struct

MAX_STARTUP = 10_000          # bytes: PostgreSQL's own bound on a start-up packet
MAX_MESSAGE = 1 << 30         # bytes: PostgreSQL's bound on any other message

SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
CANCEL_REQUEST = 80877102
PROTOCOL_3 = 196608

_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")
_U16 = struct.Struct("!H")
_HEAD = struct.Struct("!ci")


class ProtocolViolation(Exception):
    """A client broke the protocol: the connection answers 08P01 and closes."""


class Reader:
    """Blocking, buffered reads of one client's socket: one recv() brings in
    whatever the client has sent (a pipeline of messages, usually), and each
    message is cut from it at an offset (what remains is not copied a message).
    `limit`: the longest message after start-up (the server's body limit)."""
    __slots__ = ("sock", "data", "at", "limit")

    def __init__(self, sock, limit: int = MAX_MESSAGE):
        self.sock = sock
        self.data = b""
        self.at = 0
        self.limit = limit

    def pending(self) -> int:
        """Bytes received and not yet read."""
        return len(self.data) - self.at

    def has_message(self) -> bool:
        """Is a whole message received and not yet read (reading it waits for nothing)?"""
        at = self.at
        if len(self.data) - at < 5:
            return False
        return len(self.data) >= at + 1 + _HEAD.unpack_from(self.data, at)[1]

    def _fill(self, n: int) -> None:
        """At least n bytes received and not yet read."""
        have = len(self.data) - self.at
        if not have:            # all read (a query's wait, mostly): nothing to join
            chunk = self.sock.recv(max(1 << 16, min(n, 1 << 24)))
            if not chunk:
                raise ConnectionError("the client closed the connection")
            self.data, self.at = chunk, 0
            if len(chunk) >= n:
                return
            have = len(chunk)
        parts = [self.data[self.at:]]
        while have < n:
            chunk = self.sock.recv(max(1 << 16, min(n - have, 1 << 24)))
            if not chunk:
                raise ConnectionError("the client closed the connection")
            parts.append(chunk)
            have += len(chunk)
        self.data, self.at = b"".join(parts), 0

    def exactly(self, n: int) -> bytes:
        if len(self.data) - self.at < n:
            self._fill(n)
        at = self.at
        self.at = at + n
        return self.data[at:at + n]

    def skip(self, data: bytes) -> bool:
        """Whether `data` is what was received next (then read past it); nothing is
        waited for."""
        if not self.data.startswith(data, self.at):
            return False
        self.at += len(data)
        return True

    def startup(self) -> tuple[int, bytes]:
        """(code, body) of a start-up packet (protocol version or a special request)."""
        length, code = struct.unpack("!ii", self.exactly(8))
        if not 8 <= length <= MAX_STARTUP:
            raise ProtocolViolation(f"invalid length of startup packet: {length}")
        return code, self.exactly(length - 8)

    def message(self, limit: int | None = None) -> tuple[bytes, bytes]:
        """(type byte, body) of the next message (at most `limit` bytes, else the
        reader's own)."""
        if len(self.data) - self.at < 5:
            self._fill(5)
        at = self.at
        kind, length = _HEAD.unpack_from(self.data, at)
        if not 4 <= length <= (self.limit if limit is None else limit):
            raise ProtocolViolation(f"invalid message length {length} for message type "
                                    f"{kind!r}")
        end = at + 1 + length
        if len(self.data) < end:            # the body not all received yet
            self.at = at + 5
            return kind, self.exactly(length - 4)
        self.at = end
        return kind, self.data[at + 5:end]


class Body:
    """A message body read field by field; running past its end is a violation."""
    __slots__ = ("data", "at")

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def cstr(self) -> str:
        end = self.data.find(b"\0", self.at)
        if end < 0:
            raise ProtocolViolation("a string of the message has no terminator")
        text = self.data[self.at:end]
        self.at = end + 1
        try:
            return text.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation("invalid byte sequence for encoding UTF8") from None

    def int16(self) -> int:
        return self._unpack(_I16)

    def count(self) -> int:
        """A count of the fields that follow: unsigned, up to 65 535 (as PostgreSQL
        reads it)."""
        return self._unpack(_U16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def int32s(self) -> tuple[int, ...]:
        """A count, then that many int32 (a Parse's parameter types)."""
        return self._array("i", 4)

    def _array(self, code: str, width: int) -> tuple[int, ...]:
        n = self.count()
        if not n:
            return ()
        if self.at + n * width > len(self.data):
            raise ProtocolViolation("the message is shorter than its fields say")
        out = struct.unpack_from(f"!{n}{code}", self.data, self.at)
        self.at += n * width
        return out

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ProtocolViolation("the message is shorter than its fields say")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def _unpack(self, s: struct.Struct) -> int:
        if self.at + s.size > len(self.data):
            raise ProtocolViolation("the message is shorter than its fields say")
        (v,) = s.unpack_from(self.data, self.at)
        self.at += s.size
        return v

    def end(self) -> None:
        if self.at != len(self.data):
            raise ProtocolViolation("the message is longer than its fields say")


def bind_fields(data: bytes) -> tuple[str, str, tuple, list, tuple]:
    """A Bind message's fields in one pass (a query's every execution reads one):
    (portal, statement, parameter format codes, values (None: NULL), result
    format codes). Its checks are Body's."""
    end = data.find(b"\0")
    stop = data.find(b"\0", end + 1) if end >= 0 else -1
    if stop < 0:
        raise ProtocolViolation("a string of the message has no terminator")
    try:
        portal, name = data[:end].decode(), data[end + 1:stop].decode()
    except UnicodeDecodeError:
        raise ProtocolViolation("invalid byte sequence for encoding UTF8") from None
    size, unpack = len(data), _I32.unpack_from
    formats, at = _codes(data, stop + 1, size)
    if at + 2 > size:
        raise ProtocolViolation("the message is shorter than its fields say")
    (count,) = _U16.unpack_from(data, at)
    at += 2
    values = []
    for _ in range(count):
        if at + 4 > size:
            raise ProtocolViolation("the message is shorter than its fields say")
        (n,) = unpack(data, at)
        at += 4
        if n == -1:
            values.append(None)
            continue
        if n < 0 or at + n > size:
            raise ProtocolViolation("the message is shorter than its fields say")
        values.append(data[at:at + n])
        at += n
    results, at = _codes(data, at, size)
    if at != size:
        raise ProtocolViolation("the message is longer than its fields say")
    return portal, name, formats, values, results


def _codes(data: bytes, at: int, size: int) -> tuple[tuple[int, ...], int]:
    """A count, then that many int16 format codes, at `at`: (the codes, the end)."""
    if at + 2 > size:
        raise ProtocolViolation("the message is shorter than its fields say")
    (n,) = _U16.unpack_from(data, at)
    end = at + 2 + 2 * n
    if end > size:
        raise ProtocolViolation("the message is shorter than its fields say")
    if n == 1:
        return _I16.unpack_from(data, at + 2), end
    return (struct.unpack_from(f"!{n}h", data, at + 2) if n else ()), end


def startup_params(body: bytes) -> dict[str, str]:
    """The name/value pairs of a StartupMessage's body."""
    b, out = Body(body), {}
    while b.at < len(body) and body[b.at] != 0:
        name = b.cstr()
        out[name] = b.cstr()
    return out


# ---- the server's messages -----------------------------------------------------

def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _I32.pack(len(body) + 4) + body


def cstr(text: str) -> bytes:
    """A string field of a message: its UTF-8 and the NUL that ends it. A NUL inside
    (a value's text in an error message, a name the Python API or a file gave)
    would end the field early and let what follows be read as further fields: it
    goes out as U+FFFD (PostgreSQL's own text never holds one)."""
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    return text.encode() + b"\0"


def auth(code: int, data: bytes = b"") -> bytes:
    return message(b"R", _I32.pack(code) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!ii", pid, secret))


def ready(status: bytes) -> bytes:
    return READY[status]


def command_complete(tag: str) -> bytes:
    got = _TAGS.get(tag)
    if got is None:
        got = message(b"C", cstr(tag))
        if len(_TAGS) < MAX_TAGS:       # SELECT 10, INSERT 0 1 ...: a few, mostly
            _TAGS[tag] = got
    return got


MAX_TAGS = 4096                 # command tags kept built
_TAGS: dict[str, bytes] = {}


def row_description(columns: list[tuple[str, int, int]]) -> bytes:
    """columns: (name, type OID, format code) each."""
    parts = [_I16.pack(len(columns))]
    for name, oid, fmt in columns:
        parts.append(cstr(name) + struct.pack("!ihihih", 0, 0, oid, -1, -1, fmt))
    return message(b"T", b"".join(parts))


def data_row(values: list[bytes | None]) -> bytes:
    return message(b"D", _I16.pack(len(values)) + b"".join(
        [_NULL if v is None else _I32.pack(len(v)) + v for v in values]))


_NULL = _I32.pack(-1)


class FixedRows:
    """DataRows of binary fixed-width columns (struct codes q i h d f), each row
    packed in one call (a search's ids and distances, mostly); a row holding a
    NULL goes to `slow`."""
    __slots__ = ("struct", "widths", "length")

    def __init__(self, codes: list[str]):
        self.struct = struct.Struct("!cih" + "".join("i" + c for c in codes))
        self.widths = [struct.calcsize("!" + c) for c in codes]
        self.length = self.struct.size - 1

    def rows(self, rows: list, slow) -> bytes:
        pack, length, n = self.struct.pack, self.length, len(self.widths)
        if n == 1:
            w = self.widths[0]
            return b"".join([slow(r) if r[0] is None else pack(b"D", length, 1, w, r[0])
                             for r in rows])
        widths = self.widths
        return b"".join([slow(r) if None in r else
                         pack(b"D", length, n, *[x for pair in zip(widths, r) for x in pair])
                         for r in rows])


def parameter_description(oids: list[int]) -> bytes:
    """At most 65 535 parameters (connection.MAX_PARAMS): the count is unsigned."""
    return message(b"t", _U16.pack(len(oids)) + b"".join(_I32.pack(o) for o in oids))


def error(fields: dict[str, str], notice: bool = False) -> bytes:
    body = b"".join(code.encode() + cstr(value) for code, value in fields.items())
    return message(b"N" if notice else b"E", body + b"\0")


def copy_response(kind: bytes, columns: int, binary: bool = False) -> bytes:
    """CopyInResponse (G) or CopyOutResponse (H), every column in one format."""
    code = 1 if binary else 0
    return message(kind, bytes([code]) + _I16.pack(columns) + _I16.pack(code) * columns)


def copy_data(data: bytes) -> bytes:
    return message(b"d", data)


PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
EMPTY_QUERY = message(b"I")
PORTAL_SUSPENDED = message(b"s")
COPY_DONE = message(b"c")
READY = {status: message(b"Z", status) for status in (b"I", b"T", b"E")}
