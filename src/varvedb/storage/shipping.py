"""Log shipping: a file's committed frames after a commit, sent to a read replica.

The leader's side, `commit_end`: where the commit (version, chain) ends in the
leader's mapped file, found by walking frame headers (no payload is read) from
the nearest point known to lie at or below it — the log's start, a
superblock's checkpoint, a commit served before — and checking that commit's
chain hash. None: the file does not hold that commit with that chain (another
file, a tampered one, or a version its vacuum dropped). The bytes from there
to the newest durable commit are then sent as they lie, a chunk at a time
(backup.read_chunks).

The follower's side, `Unshipper`: the stream's chunks in, whole commits out —
each frame's header and payload checked against its hash, the leader's
checkpoint frames (shortcuts naming its own offsets) passed over. The
follower appends a commit's frames to its own file through LogWriter
(`append`, then `commit_shipped`, which checks the digest and the chain hash
against its own log). A stream that ends inside a commit gives nothing of it.
"""
from __future__ import annotations

from ..errors import CorruptFileError
from . import format as F


def commit_end(buf, start: int, at: int, end: int, version: int, chain: bytes) -> int | None:
    """The offset just past commit `version` whose chain hash is `chain`, walking
    frame headers in buf[start:end) (start: the end of commit `at` <= version)."""
    if version == at and not (at == 0 and _anchored(buf, start, end)):
        return start
    pos = start
    while pos + F.FRAME_HEADER_SIZE <= end:
        hdr = F.unpack_frame_header(buf[pos:pos + F.FRAME_HEADER_SIZE])
        if hdr is None:
            return None
        body = pos + F.FRAME_HEADER_SIZE
        nxt = F.pad(body + hdr.length)
        if hdr.kind in (F.Kind.COMMIT, F.Kind.ANCHOR):
            if body + F.COMMIT_SIZE > end or hdr.length < F.COMMIT_SIZE:
                return None
            rec = F.unpack_commit(buf[body:body + hdr.length])
            if rec.version >= version:
                return nxt if rec.version == version and rec.chain == chain else None
        pos = nxt
    return None


def _anchored(buf, pos: int, end: int) -> bool:
    """Does the log from pos open with an anchor commit (a vacuumed file, whose
    versions before the anchor's are gone)?"""
    while pos + F.FRAME_HEADER_SIZE <= end:
        hdr = F.unpack_frame_header(buf[pos:pos + F.FRAME_HEADER_SIZE])
        if hdr is None or hdr.kind == F.Kind.COMMIT:
            return False
        if hdr.kind == F.Kind.ANCHOR:
            return True
        pos = F.pad(pos + F.FRAME_HEADER_SIZE + hdr.length)
    return False


class Unshipper:
    """A shipped stream of `size` bytes (what the leader announced), read back into
    whole, checked commits. Nothing past `size` is taken: a frame header whose
    length runs past it is refused before its bytes are waited for, so a damaged
    or crafted length cannot make the follower buffer without end."""

    def __init__(self, size: int):
        self._buf = bytearray()
        self._frames: list[tuple[int, bytes]] = []    # the open commit's, so far
        self._left = size       # stream bytes not yet fed
        self._at = 0            # the stream offset of _buf[0]

    def feed(self, chunk: bytes) -> list[tuple[list[tuple[int, bytes]], F.CommitRecord]]:
        """Take the stream's next bytes; return the commits they complete, each as
        ([(kind, payload), ...], its commit record). Raises CorruptFileError when a
        frame does not check, or the stream runs past its announced size (nothing
        of its commit is returned)."""
        if len(chunk) > self._left:
            raise CorruptFileError(f"the leader sent more than the {self._at + len(self._buf) + self._left:,} "
                                   "bytes it announced")
        self._left -= len(chunk)
        self._buf += chunk
        end = self._at + len(self._buf) + self._left      # the stream's announced end
        out = []
        pos, buf = 0, self._buf
        while len(buf) - pos >= F.FRAME_HEADER_SIZE:
            hdr = F.unpack_frame_header(buf[pos:pos + F.FRAME_HEADER_SIZE])
            if hdr is None:
                raise CorruptFileError("the leader sent a frame header that does not check")
            body = pos + F.FRAME_HEADER_SIZE
            nxt = F.pad(body + hdr.length)
            if self._at + nxt > end:
                raise CorruptFileError(f"a frame the leader sent ({hdr.length:,} bytes) runs "
                                       f"past the {end:,} bytes it announced")
            if len(buf) < nxt:
                break       # the rest of the frame comes in a later chunk
            payload = bytes(buf[body:body + hdr.length])
            if F.frame_hash(hdr.kind, hdr.length, [payload]) != hdr.digest or \
                    any(buf[body + hdr.length:nxt]):
                raise CorruptFileError(f"a frame the leader sent (kind {hdr.kind}, "
                                       f"{hdr.length:,} bytes) does not match its hash")
            pos = nxt
            if hdr.kind == F.Kind.CHECKPOINT:
                continue        # the leader's shortcut: offsets in its file, not ours
            if hdr.kind == F.Kind.ANCHOR:
                raise CorruptFileError("the leader sent an anchor commit, which only opens "
                                       "a file")
            if hdr.kind == F.Kind.COMMIT:
                if hdr.length < F.COMMIT_SIZE:
                    raise CorruptFileError("the leader sent a commit frame too short to be one")
                out.append((self._frames, F.unpack_commit(payload)))
                self._frames = []
            else:
                self._frames.append((hdr.kind, payload))
        del buf[:pos]
        self._at += pos
        return out

    @property
    def pending(self) -> bool:
        """Bytes of a commit not yet whole (a stream that ends here was cut short)."""
        return bool(self._buf or self._frames)
