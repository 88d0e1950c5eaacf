"""Reading the log: walk its frames and check its commits.

The one reader of the frame log, used by open and `refresh()` (engine.py)
and by `verify` (verify.py). It reads a mapped buffer and writes nothing.

`scan` walks frames by their headers and checks every commit's digest and
chain hash. Where the walk stops with no valid commit frame beyond, the tail
was torn (the writer zeroes it: `LogWriter.cut_tail`); a stop with valid
commits beyond means history is damaged and open refuses the file. A
checkpoint frame a superblock points at is stepped over even when its header
is damaged: a damaged checkpoint costs only the shortcut.

The buffer may map a file another process is appending to (a reader's
`refresh()`, `verify` beside a writer): a frame still being written is not
damage. Only what still fails to check once a commit after it has been read,
and so once its own bytes are final, is (`scan` walks such a stretch again).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from . import format as F


@dataclass
class FrameRef:
    kind: int
    offset: int       # start of the frame header
    length: int       # payload bytes
    digest: bytes
    payload_ok: bool = True

    @property
    def payload_offset(self) -> int:
        return self.offset + F.FRAME_HEADER_SIZE


@dataclass
class LoggedCommit:
    record: F.CommitRecord
    frames: list[FrameRef]
    offset: int       # start of the commit frame
    end: int          # first byte after it
    anchor: bool = False   # a vacuumed file's first commit (its frames hold the base)


@dataclass
class ScanResult:
    commits: list[LoggedCommit]
    end: int                       # end of the last whole commit
    stop_offset: int               # where the walk stopped
    stop_reason: str               # "end", "torn", or a description of damage
    damaged: bool = False          # valid commits exist beyond the stop
    checkpoints: list[FrameRef] = field(default_factory=list)   # checkpoint frames passed
    beyond: int = 0                # the newest well-formed commit past the stop (0: none)


@dataclass
class _Walk:
    commits: list[LoggedCommit]
    checkpoints: list[FrameRef]
    last_end: int
    pos: int
    reason: str
    version: int
    pending: bool


def scan(buf, start: int, version: int, chain: bytes, superblocks=(),
         check_payload: bool = True) -> ScanResult:
    """Walk the log in buf from start, after the commit (version, chain).

    `superblocks` name the checkpoints to step over should their header be damaged.

    buf may map a file a writer is appending to, so a frame read early in the
    walk may have been half written then and whole by the time a commit after
    it is read. The writer writes front to back: a commit seen at some offset
    means every byte before it was final when it was read. So a frame that does
    not check with a commit after it, or a stop with a commit beyond, is walked
    again from the commit before it: a write that was in progress checks now
    and the walk goes on; damage is still there, and only then is it believed."""
    # checkpoints the superblocks vouch for: stepped over even if their header is damaged
    known = {sb.checkpoint_offset: sb.log_end for sb in superblocks
             if sb.checkpoint_offset >= start and sb.log_end > sb.checkpoint_offset}
    commits: list[LoggedCommit] = []
    checkpoints: list[FrameRef] = []
    seen: set[int] = set()
    settled = -1
    while True:
        at = commits[-1] if commits else None
        w = _walk(buf, at.end if at else start, at.record.version if at else version,
                  at.record.chain if at else chain, known, check_payload,
                  first=at is None and start == F.LOG_START and version == 0)
        commits += w.commits
        checkpoints += w.checkpoints
        beyond = newest_beyond(buf, w.pos)
        doubt = _unchecked(commits, checkpoints, w.pos if beyond > w.version else None)
        new = [off for off in doubt if off not in seen]
        # each pass walks again from before the first doubt it had not met: offsets
        # only grow, so a file a writer keeps appending to is read to its end
        if not new or new[0] <= settled:
            break
        settled, seen = new[0], set(doubt)
        commits = [c for c in commits if c.end <= settled]
        resume = commits[-1].end if commits else start
        checkpoints = [f for f in checkpoints if f.offset < resume]
    reason = w.reason
    if w.pending and reason == "end":
        reason = "torn"  # frames of a transaction that never committed
    # A commit beyond the stop that is not the next version cannot be a
    # torn last transaction: history itself is damaged. So is a committed
    # frame whose payload no longer matches its hash, unless it belongs to
    # the last commit (a write the crash tore before it was acknowledged).
    damaged = beyond >= w.version + 2 or any(
        not f.payload_ok for c in commits[:-1] for f in c.frames)
    return ScanResult(commits, w.last_end, w.pos, reason, damaged, checkpoints, beyond)


def _unchecked(commits: list[LoggedCommit], checkpoints: list[FrameRef],
               stop: int | None) -> list[int]:
    """Offsets, in order, of what did not check though a commit was read after it:
    frames of a commit (its commit frame follows them), checkpoints before the
    last commit, and the stop (`stop`: when a later commit lies past it)."""
    last = stop if stop is not None else (commits[-1].offset if commits else -1)
    out = [f.offset for c in commits for f in c.frames if not f.payload_ok]
    out += [f.offset for f in checkpoints if not f.payload_ok and f.offset < last]
    if stop is not None:
        out.append(stop)
    return sorted(out)


def _walk(buf, pos: int, version: int, chain: bytes, known: dict, check_payload: bool,
          first: bool) -> _Walk:
    """One walk of the frames from pos (the end of commit `version`) to where they stop."""
    commits: list[LoggedCommit] = []
    pending: list[FrameRef] = []
    checkpoints: list[FrameRef] = []
    last_end = pos
    size = len(buf)
    reason = "end"
    while pos < size:
        hdr = F.unpack_frame_header(buf[pos:pos + F.FRAME_HEADER_SIZE])
        if hdr is None:
            if pos in known and known[pos] <= size:
                checkpoints.append(FrameRef(F.Kind.CHECKPOINT, pos,
                                            known[pos] - pos - F.FRAME_HEADER_SIZE,
                                            b"", payload_ok=False))
                pos = known[pos]
                continue
            reason = "end" if _is_zero(buf, pos, size) else "bad frame header"
            break
        body = pos + F.FRAME_HEADER_SIZE
        if body + hdr.length > size:
            reason = "truncated frame"
            break
        ref = FrameRef(hdr.kind, pos, hdr.length, hdr.digest)
        if hdr.kind in (F.Kind.COMMIT, F.Kind.ANCHOR):
            # an anchor only opens a log: its chain hash proves what vacuum dropped
            anchor = hdr.kind == F.Kind.ANCHOR
            rec, ok = _check_commit(buf, ref, pending, version, chain, anchor)
            if not ok or (anchor and not (first and not commits)):
                reason = "bad commit frame"
                break
            version, chain = rec.version, rec.chain
            last_end = F.pad(body + hdr.length)
            commits.append(LoggedCommit(rec, pending, pos, last_end, anchor))
            pending = []
        else:
            if check_payload or hdr.kind == F.Kind.CHECKPOINT:
                got = F.frame_hash(hdr.kind, hdr.length, [buf[body:body + hdr.length]])
                # the padding after the payload is not hashed, so check it is zero
                ref.payload_ok = got == hdr.digest and not any(
                    buf[body + hdr.length:min(size, F.pad(body + hdr.length))])
            if hdr.kind == F.Kind.CHECKPOINT:
                checkpoints.append(ref)
                if not pending and ref.payload_ok:   # whole: the log goes on after it
                    last_end = F.pad(body + hdr.length)
            else:
                pending.append(ref)
        pos = F.pad(body + hdr.length)
    return _Walk(commits, checkpoints, last_end, pos, reason, version, bool(pending))


def _check_commit(buf, ref: FrameRef, pending, version, chain, anchor: bool = False):
    body = buf[ref.payload_offset:ref.payload_offset + ref.length]
    if ref.length < F.COMMIT_SIZE or F.frame_hash(ref.kind, ref.length, [body]) != ref.digest:
        return None, False
    rec = F.unpack_commit(body)
    digest = hashlib.sha256(b"".join(f.digest for f in pending)).digest()
    if rec.n_frames != len(pending) or rec.digest != digest:
        return rec, False
    if anchor:   # the version and chain of the oldest version kept, as recorded
        return rec, 1 <= rec.version < 1 << 62
    ok = (rec.version == version + 1 and rec.prev_chain == chain
          and rec.chain == F.chain_hash(chain, digest, rec.version, rec.timestamp_us,
                                        rec.branch))
    return rec, ok


def newest_beyond(buf, pos: int) -> int:
    """The newest version of a well-formed commit anywhere after pos (0: none)."""
    start = F.pad(pos + 1)
    n = (len(buf) - start) // F.ALIGN
    if n <= 0:
        return 0
    newest = 0
    words = np.frombuffer(buf, dtype="<u4", count=n * 16, offset=start)[::16]
    for i in np.flatnonzero(words == F.FRAME_MAGIC):
        off = start + int(i) * F.ALIGN
        hdr = F.unpack_frame_header(buf[off:off + F.FRAME_HEADER_SIZE])
        body = off + F.FRAME_HEADER_SIZE
        if (hdr is not None and hdr.kind == F.Kind.COMMIT and hdr.length >= F.COMMIT_SIZE
                and body + hdr.length <= len(buf)):
            newest = max(newest, F.unpack_commit(buf[body:body + hdr.length]).version)
    return newest


def holds_commit(buf, offset: int | None, version: int, chain: bytes) -> bool:
    """Is the commit (version, chain) whole at offset in buf? A reader asks it of
    the last commit it replayed: a writer whose sync failed zeroes commits other
    processes may already have read. (offset None: a checkpoint's state, durable.)"""
    if offset is None:
        return True
    hdr = F.unpack_frame_header(buf[offset:offset + F.FRAME_HEADER_SIZE])
    body = offset + F.FRAME_HEADER_SIZE
    if hdr is None or hdr.kind not in (F.Kind.COMMIT, F.Kind.ANCHOR) \
            or body + hdr.length > len(buf) or hdr.length < F.COMMIT_SIZE:
        return False
    payload = buf[body:body + hdr.length]
    if F.frame_hash(hdr.kind, hdr.length, [payload]) != hdr.digest:
        return False
    rec = F.unpack_commit(payload)
    return rec.version == version and rec.chain == chain


def _is_zero(buf, pos: int, size: int) -> bool:
    chunk = buf[pos:min(size, pos + F.FRAME_HEADER_SIZE)]
    return not any(chunk)
