"""`verify`: prove a file's history is the one that was written.

Re-reads every frame from the start of the log, recomputes each frame's
SHA-256, each commit's digest and the chain, checks every checkpoint frame
and both superblock slots (each either empty or pointing at a whole
checkpoint frame whose version and chain hash are the log's at that point),
and reports the first break: the version it belongs to and its byte offset.
It never trusts a checkpoint: a checkpoint's hash anyone can recompute, so
the state each one a slot names holds is compared with the log's, replayed to
its version (`states`: the engine's check, passed in by database.verify_file,
which is `vv.verify_file`). It opens the file without the write lock,
so it can run beside a writer: while one holds the file, an unfinished tail
past the last commit (frames being appended) is not a break.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import OptionError
from . import format as F
from . import log_reader
from .file import DatabaseFile


@dataclass
class Break:
    version: int       # the first version that is not intact (0: the header block)
    offset: int        # byte offset of the damaged frame
    reason: str


@dataclass
class VerifyReport:
    ok: bool
    versions_checked: int      # versions whose frames all checked out
    first_break: Break | None
    chain: str                 # hex chain hash of the last intact version

    def __bool__(self) -> bool:
        return self.ok


LIVE_RETRIES = 3   # looks at a file a writer holds before a break is believed
_CHAIN_HEX = re.compile(r"[0-9a-fA-F]{64}")   # a SHA-256 as history() shows it


def verify_file(path: str, anchor: tuple[int, str] | None = None,
                expect_version: int | None = None, states=None) -> VerifyReport:
    """Verify the file at path (see the module docstring).

    `states(path, mv, commits, superblocks)`: the check of what the checkpoints
    hold against the log (engine.checkpoint_breaks, which storage cannot
    import: database.verify_file passes it), run once the bytes all check;
    it returns (version, offset, reason) of a break, or None.

    Beside a live writer the bytes change while they are read (a rolled-back
    tail zeroed and written over), so a break seen then is looked at again:
    damage stays where it is, a writer's progress does not."""
    if anchor is not None:
        version, chain = anchor
        # an empty chain matched the "" of a version the file does not hold: ok
        if version < 0 or not isinstance(chain, str) or not _CHAIN_HEX.fullmatch(chain):
            raise OptionError(f"anchor is (version, chain hex): a version >= 0 and the 64 "
                              f"hex digits history() gave, got {tuple(anchor)!r:.80}")
        anchor = (int(version), chain.lower())
    for _ in range(LIVE_RETRIES):
        report, live = _verify_once(path, anchor, expect_version, states)
        if report.ok or not live:
            break
    return report


def _verify_once(path: str, anchor, expect_version, states) -> tuple[VerifyReport, bool]:
    file = DatabaseFile(path, readonly=True)
    try:
        live = file.writer_active()
        buf = file.map()
        mv = memoryview(buf) if buf is not None else memoryview(b"")
        genesis = F.genesis_chain(file.file_id)
        scan = log_reader.scan(mv, F.LOG_START, 0, genesis, file.superblocks,
                               check_payload=True)
        chains = {0: genesis}
        brk = None
        good = 0
        for c in scan.commits:
            bad = next((f for f in c.frames if not f.payload_ok), None)
            if bad is not None:
                brk = Break(c.record.version, bad.offset, "frame contents do not match their hash")
                break
            good = c.record.version
            if c.anchor:   # vacuumed: the chain hash of the last version dropped, as recorded
                chains[good - 1] = c.record.prev_chain
            chains[good] = c.record.chain
        # While a writer holds the file, what lies past the last commit may be
        # what it is appending right now (frames of an open transaction, a
        # checkpoint no superblock names yet): a tail, not history — unless a
        # whole commit of a later version follows (a commit frame is written
        # after its frames; the scan read the stop again after it). With no
        # writer, an unclean tail is a break.
        live = live or file.writer_active()
        if brk is None and scan.stop_reason not in ("end", "torn") and (
                not live or scan.beyond > good):
            brk = Break(good + 1, scan.stop_offset, scan.stop_reason)
        history_end = scan.commits[-1].end if scan.commits else F.LOG_START
        named = {sb.checkpoint_offset for sb in file.superblocks}
        bad_ck = next((f for f in scan.checkpoints if not f.payload_ok and (
            not live or f.offset < history_end or f.offset in named)), None)
        if brk is None and bad_ck is not None:
            before = [c.record.version for c in scan.commits if c.offset < bad_ck.offset]
            brk = Break((before[-1] if before else 0) + 1, bad_ck.offset,
                        "checkpoint does not match its hash")
        if brk is None:
            brk = _check_slots(file, scan, chains)
        if brk is None and states is not None:
            found = states(path, mv, scan.commits, file.superblocks)
            brk = Break(*found) if found is not None else None
        if brk is None and expect_version is not None and good < expect_version:
            brk = Break(good + 1, scan.end, f"the log ends at version {good}, "
                                            f"expected {expect_version}")
        if brk is None and anchor is not None:
            version, chain = anchor
            kept = scan.commits[0].record.version - 1 if scan.commits and \
                scan.commits[0].anchor else 0
            if version < kept:
                # nothing here is damaged: the anchor names history this file no longer holds
                brk = Break(0, 0, f"version {version} was vacuumed away: the file "
                            f"holds the chain hashes of versions {kept} and later")
            elif chains.get(version, b"").hex() != chain:
                brk = Break(version, 0, "chain hash differs from the anchor: "
                            "history was rewritten or truncated")
        if brk is not None and brk.version:
            good = min(good, brk.version - 1)
        return VerifyReport(brk is None, good, brk, chains.get(good, genesis).hex()), live
    finally:
        buf = None
        mv = None
        file.close()


def _check_slots(file: DatabaseFile, scan, chains: dict) -> Break | None:
    """Each superblock slot is empty, or names a whole checkpoint of the log."""
    frames = {f.offset: f for f in scan.checkpoints}
    # the slots as read at open, before the map: a checkpoint a slot names was
    # durable before the slot was written, so it lies whole inside the map
    for off, raw in file.raw_slots.items():
        if not any(raw):
            continue
        sb = F.unpack_slot(raw)
        if sb is None:
            return Break(0, off, "superblock slot is damaged")
        if not sb.checkpoint_offset:
            continue
        f = frames.get(sb.checkpoint_offset)
        whole = f is not None and f.payload_ok and F.pad(f.payload_offset + f.length) == sb.log_end
        if not whole or chains.get(sb.checkpoint_version) != sb.chain:
            return Break(0, off, f"superblock slot names no whole checkpoint at offset "
                                 f"{sb.checkpoint_offset} for version {sb.checkpoint_version}")
    return None
