"""Reading the log: walk its frames and check its commits.

The one reader of the frame log, used by open and `refresh()` (engine.py)
and by `verify` (verify.py). It reads a mapped buffer and writes nothing.

`scan` walks frames by their headers and checks every commit's digest and
chain hash. Where the walk stops with no valid commit frame beyond, the tail
was torn (the writer zeroes it: `LogWriter.cut_tail`); a stop with valid
commits beyond means history is damaged and open refuses the file. A
checkpoint frame a superblock points at is stepped over even when its header
is damaged: a damaged checkpoint costs only the shortcut.
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


def scan(buf, start: int, version: int, chain: bytes, superblocks=(),
         check_payload: bool = True) -> ScanResult:
    """Walk the log in buf from start, after the commit (version, chain).

    `superblocks` name the checkpoints to step over should their header be damaged."""
    commits: list[LoggedCommit] = []
    pending: list[FrameRef] = []
    checkpoints: list[FrameRef] = []
    # checkpoints the superblocks vouch for: stepped over even if their header is damaged
    known = {sb.checkpoint_offset: sb.log_end for sb in superblocks
             if sb.checkpoint_offset >= start and sb.log_end > sb.checkpoint_offset}
    pos = last_end = start
    size = len(buf)
    reason = "end"
    while True:
        hdr = F.unpack_frame_header(buf[pos:pos + F.FRAME_HEADER_SIZE])
        if hdr is None:
            if pos in known and known[pos] <= size:
                checkpoints.append(FrameRef(F.Kind.CHECKPOINT, pos,
                                            known[pos] - pos - F.FRAME_HEADER_SIZE,
                                            b"", payload_ok=False))
                pos = known[pos]
                if pos >= size:
                    break
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
            first = start == F.LOG_START and not commits and version == 0
            rec, ok = _check_commit(buf, ref, pending, version, chain, anchor)
            if not ok or (anchor and not first):
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
        if pos >= size:
            reason = "end"
            break
    if pending and reason == "end":
        reason = "torn"  # frames of a transaction that never committed
    # A commit beyond the stop that is not the next version cannot be a
    # torn last transaction: history itself is damaged. So is a committed
    # frame whose payload no longer matches its hash, unless it belongs to
    # the last commit (a write the crash tore before it was acknowledged).
    damaged = commit_beyond(buf, pos, version + 2) or any(
        not f.payload_ok for c in commits[:-1] for f in c.frames)
    return ScanResult(commits, last_end, pos, reason, damaged, checkpoints)


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


def commit_beyond(buf, pos: int, min_version: int) -> bool:
    """Is there a well-formed commit of min_version or later anywhere after pos?"""
    start = F.pad(pos + 1)
    n = (len(buf) - start) // F.ALIGN
    if n <= 0:
        return False
    words = np.frombuffer(buf, dtype="<u4", count=n * 16, offset=start)[::16]
    for i in np.flatnonzero(words == F.FRAME_MAGIC):
        off = start + int(i) * F.ALIGN
        hdr = F.unpack_frame_header(buf[off:off + F.FRAME_HEADER_SIZE])
        body = off + F.FRAME_HEADER_SIZE
        if (hdr is not None and hdr.kind == F.Kind.COMMIT and hdr.length >= F.COMMIT_SIZE
                and body + hdr.length <= len(buf)
                and F.unpack_commit(buf[body:body + hdr.length]).version >= min_version):
            return True
    return False


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
