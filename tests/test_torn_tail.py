"""Torn tails and flipped bytes: the file opens at the last whole commit, verify finds damage.

A file is built with a few commits, recording after each one the end of the
log (`db.engine.log.end`) and everything a reader sees. Then:

* a copy truncated at every byte inside the last commit opens at the previous
  version with the previous contents, takes a new commit and verifies;
* one flipped byte in any frame (header or payload) makes `verify` report the
  version that frame belongs to; opening refuses the file (CorruptFileError)
  unless the frame belongs to the last commit, which is then indistinguishable
  from a torn, unacknowledged write and is dropped;
* damage before a checkpoint is still reported by verify, and a damaged
  checkpoint costs only the shortcut: open replays the log instead.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import varvedb as vv
from varvedb.storage import format as F
from varvedb.storage import log_reader
from varvedb.storage.file import DatabaseFile
from varvedb.storage.log_writer import LogWriter
from conftest import zero_from

SCHEMA = {"tag": vv.Int(index="hash"), "title": "text", "meta": "json",
          "emb": vv.Vector(4, metric="l2")}
IDS = range(30)


def snapshot(d) -> dict:
    c = d["docs"]
    docs = {}
    for i in IDS:
        x = c.get(i)
        if x is not None:
            docs[i] = {**x, "emb": None if x["emb"] is None else x["emb"].tolist()}
    s = c.search(vector=[1, 0, 0, 1], limit=4)
    return {"version": d.version, "docs": docs, "count": c.count(),
            "tag1": c.find("tag = 1").ids, "search": (s.ids, s.scores.tolist())}


def build(path, last_commit="small"):
    """A file of 5 commits. Returns (ends, states): log end and snapshot per version."""
    d = vv.connect(path)
    c = d.create_collection("docs", SCHEMA)
    ends = {0: F.LOG_START, d.version: d.engine.log.end}
    states = {}

    def done():
        ends[d.version] = d.engine.log.end
        states[d.version] = snapshot(d)

    done()
    c.insert([{"id": i, "tag": i % 3, "title": f"t{i}", "meta": {"i": i},
               "emb": [i, 0, 0, 1]} for i in range(6)])
    done()
    c.update({"title": "upd"}, where="tag = 2")
    done()
    c.delete(ids=[4])
    done()
    with d.transaction():
        if last_commit == "small":
            c.upsert([{"id": 1, "tag": 7, "meta": [1, 2]}, {"id": 9, "tag": 1,
                                                             "emb": [1, 1, 1, 1]}])
            c.insert_arrays(id=[20, 21], tag=[1, 2], emb=np.ones((2, 4), np.float32))
            c.delete(ids=[3])
        else:   # a bulk frame larger than log_writer.BIG_FRAME, written before the commit frame
            n = 40_000
            c.insert_arrays(id=np.arange(100, 100 + n), tag=np.ones(n, np.int64),
                            emb=np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32))
            c.delete(ids=[0])
    done()
    d.close()
    return ends, states


def frames_by_version(path):
    """({version: [(frame offset, payload length)]}, [(offset, length)] of checkpoints).

    Each version's list ends with its commit frame."""
    file = DatabaseFile(path, readonly=True)
    buf = file.map()
    mv = memoryview(buf)
    try:
        scan = log_reader.scan(mv, F.LOG_START, 0, F.genesis_chain(file.file_id),
                               file.superblocks)
        out = {}
        for c in scan.commits:
            commit_len = F.unpack_frame_header(mv[c.offset:c.offset + F.FRAME_HEADER_SIZE]).length
            out[c.record.version] = ([(f.offset, f.length) for f in c.frames]
                                     + [(c.offset, commit_len)])
        return out, [(f.offset, f.length) for f in scan.checkpoints]
    finally:
        mv.release()
        buf.close()
        file.close()


def copy_truncated(raw: bytes, path, offset: int):
    with open(path, "wb") as f:
        f.write(raw[:offset])


def check_opens_at(path, version, state, write=True, durability="commit"):
    d = vv.connect(path, durability=durability)
    try:
        assert d.version == version
        assert snapshot(d) == state
        if write:
            d["docs"].insert({"id": 29, "tag": 5})
            assert d.version == version + 1
            assert d["docs"].get(29) == {"id": 29, "tag": 5, "title": None, "meta": None,
                                         "emb": None}
            # the torn frames were cut, so the new commit follows the previous one
            rep = d.verify()
            assert rep.ok and rep.versions_checked == version + 1, rep
    finally:
        d.close()


# ---- truncation -----------------------------------------------------------------------

def test_truncation_at_every_byte_of_last_commit_opens_previous_version(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    raw = open(src, "rb").read()
    last = max(ends)
    prev_end, last_end = ends[last - 1], ends[last]
    frames, _ = frames_by_version(src)
    assert len(frames[last]) == 5               # delete, insert (upsert), arrays, delete, commit
    commit_off, commit_len = frames[last][-1]
    whole = commit_off + F.FRAME_HEADER_SIZE + commit_len   # the commit frame's last byte + 1
    assert prev_end < whole <= last_end
    cut = str(tmp_path / "cut.varve")
    for off in range(prev_end, last_end):
        copy_truncated(raw, cut, off)
        # (fsync adds nothing to what this checks, and there are ~1700 offsets)
        if off < whole:
            check_opens_at(cut, last - 1, states[last - 1], durability="off")
        else:     # only the commit frame's alignment padding is missing
            check_opens_at(cut, last, states[last], durability="off")


def test_truncation_in_zero_tail_keeps_last_commit(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    raw = open(src, "rb").read()
    last = max(ends)
    assert len(raw) > ends[last]                # the file is prefilled beyond the log
    assert not any(raw[ends[last]:])
    offsets = list(range(ends[last], ends[last] + 130)) + list(
        np.random.default_rng(1).integers(ends[last], len(raw), 40)) + [len(raw)]
    cut = str(tmp_path / "cut.varve")
    for off in offsets:
        copy_truncated(raw, cut, int(off))
        check_opens_at(cut, last, states[last])


def test_truncation_inside_earlier_commits_opens_at_the_commit_before(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    raw = open(src, "rb").read()
    cut = str(tmp_path / "cut.varve")
    rng = np.random.default_rng(2)
    frames, _ = frames_by_version(src)
    for v in range(2, max(ends)):
        commit_off, commit_len = frames[v][-1]
        whole = commit_off + F.FRAME_HEADER_SIZE + commit_len
        for off in [ends[v - 1], whole - 1, *rng.integers(ends[v - 1], whole, 10)]:
            copy_truncated(raw, cut, int(off))
            check_opens_at(cut, v - 1, states[v - 1], write=False)


def test_truncation_inside_bulk_frame_opens_previous_version(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src, last_commit="bulk")
    raw = open(src, "rb").read()
    last = max(ends)
    prev_end, last_end = ends[last - 1], ends[last]
    assert last_end - prev_end > (1 << 20)
    frames, _ = frames_by_version(src)
    edges = []
    for off, length in frames[last]:
        body = off + F.FRAME_HEADER_SIZE
        edges += [off, off + 1, body - 1, body, body + length - 1, body + length]
    rng = np.random.default_rng(3)
    commit_off, commit_len = frames[last][-1]
    whole = commit_off + F.FRAME_HEADER_SIZE + commit_len
    offsets = sorted({prev_end, whole - 1, *edges, *rng.integers(prev_end, whole, 60)})
    cut = str(tmp_path / "cut.varve")
    for off in offsets:
        if off >= whole:
            continue
        copy_truncated(raw, cut, int(off))
        check_opens_at(cut, last - 1, states[last - 1])


def test_readonly_open_of_torn_file_sees_previous_version_and_leaves_it(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    raw = open(src, "rb").read()
    last = max(ends)
    cut = str(tmp_path / "cut.varve")
    frames, _ = frames_by_version(src)
    commit_off, commit_len = frames[last][-1]
    for off in (ends[last - 1] + 1, (ends[last - 1] + ends[last]) // 2,
                commit_off + F.FRAME_HEADER_SIZE + commit_len - 1):
        copy_truncated(raw, cut, off)
        r = vv.connect(cut, readonly=True)
        assert r.version == last - 1 and snapshot(r) == states[last - 1]
        r.close()
        assert open(cut, "rb").read() == raw[:off]


# ---- flipped bytes ----------------------------------------------------------------------

def _sample_offsets(off: int, length: int, rng) -> list[int]:
    body = off + F.FRAME_HEADER_SIZE
    # header bytes covered by its crc: magic, kind, flags, length, digest, the crc itself
    header = [off, off + 4, off + 6, off + 8, off + 16, off + 47, off + 48, off + 51]
    payload = [body, body + length // 2, body + length - 1,
               *(body + rng.integers(0, length, 3))]
    return sorted({int(x) for x in header + payload})


def _flip(raw: bytes, path, offset: int) -> None:
    b = bytearray(raw)
    b[offset] ^= 0x5A
    with open(path, "wb") as f:
        f.write(b)


def test_flipped_byte_in_any_frame_is_reported_at_its_version(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    raw = open(src, "rb").read()
    last = max(ends)
    frames, _ = frames_by_version(src)
    assert sorted(frames) == list(range(1, last + 1))
    bad = str(tmp_path / "bad.varve")
    rng = np.random.default_rng(4)
    checked = 0
    for version, flist in frames.items():
        for off, length in flist:
            for pos in _sample_offsets(off, length, rng):
                _flip(raw, bad, pos)
                rep = vv.verify_file(bad)
                assert not rep.ok, (version, pos)
                assert rep.first_break.version == version, (version, pos, rep)
                assert rep.versions_checked == version - 1
                if version < last:
                    # later commits exist: the damage is history, never a torn tail
                    with pytest.raises(vv.CorruptFileError, match="damaged"):
                        vv.connect(bad)
                    with pytest.raises(vv.CorruptFileError):
                        vv.connect(bad, readonly=True)
                else:
                    # the last commit's frames could be a write torn before it was
                    # acknowledged: it is dropped, everything before it is intact
                    r = vv.connect(bad, readonly=True)
                    assert r.version == last - 1 and snapshot(r) == states[last - 1]
                    r.close()
                checked += 1
    assert checked > 100


def test_refused_open_releases_the_file_so_a_repaired_copy_opens(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    raw = open(src, "rb").read()
    frames, _ = frames_by_version(src)
    off, length = frames[2][0]
    _flip(raw, src, off + F.FRAME_HEADER_SIZE + length // 2)
    for _ in range(3):      # each refusal must give back the fd and the write lock
        with pytest.raises(vv.CorruptFileError):
            vv.connect(src)
    with open(src, "wb") as f:
        f.write(raw)
    d = vv.connect(src)     # not WriterLockedError from a leaked lock
    assert d.version == max(ends) and snapshot(d) == states[max(ends)]
    d.close()


def test_verify_of_intact_file_is_ok_with_every_version(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    rep = vv.verify_file(src)
    assert rep.ok and rep.first_break is None and rep.versions_checked == max(ends)
    d = vv.connect(src, readonly=True)
    assert rep.chain == d.history()[-1].chain
    d.close()


def _build_with_checkpoint(path):
    """Commits 1-3, a checkpoint, commits 4-5. Returns (states, checkpoint offset)."""
    d = vv.connect(path)
    c = d.create_collection("docs", SCHEMA)
    c.insert([{"id": i, "tag": i % 3, "title": f"t{i}", "emb": [i, 1, 0, 0]} for i in range(8)])
    c.update({"meta": {"x": 1}}, where="tag = 1")
    d.checkpoint()
    ck_version = d.version
    c.delete(ids=[2])
    c.insert({"id": 20, "tag": 1, "emb": [0, 0, 0, 1]})
    state = snapshot(d)
    d.close()
    return state, ck_version


def test_flipped_byte_before_checkpoint_is_reported_by_verify(tmp_path):
    src = str(tmp_path / "src.varve")
    state, ck_version = _build_with_checkpoint(src)
    raw = open(src, "rb").read()
    frames, checkpoints = frames_by_version(src)
    assert len(checkpoints) == 1 and ck_version == 3
    bad = str(tmp_path / "bad.varve")
    rng = np.random.default_rng(5)
    for version in range(1, ck_version + 1):
        for off, length in frames[version]:
            assert off < checkpoints[0][0]
            for pos in _sample_offsets(off, length, rng):
                _flip(raw, bad, pos)
                rep = vv.verify_file(bad)
                assert not rep.ok and rep.first_break.version == version, (version, pos, rep)
                # open trusts the intact checkpoint and replays only what follows it:
                # every commit, including the later ones, is still there. (Vector
                # arenas are mapped from their insert frames, which open does not
                # re-hash; a flip there changes a vector and only verify sees it.)
                d = vv.connect(bad, readonly=True)
                assert d.version == 5
                assert _without_vectors(snapshot(d)) == _without_vectors(state)
                d.close()


def _without_vectors(snap: dict) -> dict:
    docs = {i: {k: v for k, v in x.items() if k != "emb"} for i, x in snap["docs"].items()}
    return {**snap, "docs": docs, "search": None}


def test_damaged_checkpoint_is_reported_and_open_replays_the_log(tmp_path):
    src = str(tmp_path / "src.varve")
    state, ck_version = _build_with_checkpoint(src)
    raw = open(src, "rb").read()
    _, checkpoints = frames_by_version(src)
    (ck_off, ck_len), = checkpoints
    bad = str(tmp_path / "bad.varve")
    for pos in (ck_off + F.FRAME_HEADER_SIZE, ck_off + F.FRAME_HEADER_SIZE + ck_len // 2,
                ck_off + F.FRAME_HEADER_SIZE + ck_len - 1):
        _flip(raw, bad, pos)
        rep = vv.verify_file(bad)
        assert not rep.ok and rep.first_break.offset == ck_off
        assert "checkpoint" in rep.first_break.reason
        assert rep.first_break.version == ck_version + 1
        d = vv.connect(bad)
        assert d.version == 5 and snapshot(d) == state
        d["docs"].insert({"id": 29, "tag": 5})
        d.close()
        d = vv.connect(bad, readonly=True)
        assert d.version == 6 and d["docs"].get(29)["tag"] == 5
        d.close()


def test_damaged_superblock_slot_falls_back_and_keeps_every_commit(tmp_path):
    src = str(tmp_path / "src.varve")
    d = vv.connect(src)
    c = d.create_collection("docs", SCHEMA)
    c.insert([{"id": i, "tag": i % 3} for i in range(5)])
    d.checkpoint()
    c.insert({"id": 10, "tag": 1})
    d.checkpoint()            # second checkpoint: both superblock slots are in use
    c.delete(ids=[0])
    state, state_version = snapshot(d), d.version
    d.close()
    raw = open(src, "rb").read()
    bad = str(tmp_path / "bad.varve")
    for slot in F.SLOT_OFFSETS:
        _flip(raw, bad, slot + 3)
        # verify names the altered slot; the log's versions are all intact
        report = vv.verify_file(bad)
        assert not report.ok and report.first_break.offset == slot
        assert report.first_break.version == 0 and report.versions_checked == state_version
        d = vv.connect(bad)
        assert snapshot(d) == state
        d.close()


def test_new_commit_after_torn_tail_does_not_resurrect_torn_frames(tmp_path):
    src = str(tmp_path / "src.varve")
    ends, states = build(src)
    raw = open(src, "rb").read()
    last = max(ends)
    cut = str(tmp_path / "cut.varve")
    # keep every frame of the last commit except its commit frame
    frames, _ = frames_by_version(src)
    commit_off = frames[last][-1][0]
    copy_truncated(raw, cut, commit_off)
    d = vv.connect(cut)
    assert d.version == last - 1
    assert zero_from(cut, ends[last - 1])              # the torn frames were zeroed at once
    d["docs"].insert({"id": 29, "tag": 5})
    d.close()
    d = vv.connect(cut)
    assert d.version == last
    assert d["docs"].get(20) is None and d["docs"].get(3) is not None
    assert d.verify().ok
    d.close()
    shutil.copy(cut, str(tmp_path / "again.varve"))
    assert vv.verify_file(str(tmp_path / "again.varve")).versions_checked == last


# ---- copies: sparse, cut short ----------------------------------------------------------

def _build_sparse_prone(path) -> None:
    """Version 7, 1005 rows: 1000 zero vectors (a run of zeros inside the log a copy
    tool stores as a hole), five one-row commits, then a rolled-back transaction
    whose punched frames make the file look sparse to a plain `cp`."""
    d = vv.connect(path)
    c = d.create_collection("t", {"v": vv.Vector(128), "x": "int"})
    c.insert_arrays(id=np.arange(1000), v=np.zeros((1000, 128), np.float32),
                    x=np.arange(1000))
    for i in range(5):
        c.insert([{"id": 10_000 + i, "x": i, "v": np.ones(128, np.float32)}])
    with pytest.raises(RuntimeError):
        with d.transaction():
            c.insert_arrays(id=np.arange(20_000, 30_000), v=np.ones((10_000, 128), np.float32),
                            x=np.arange(10_000))
            raise RuntimeError("roll back")
    assert (d.version, c.count()) == (7, 1005)
    d.close()


@pytest.mark.parametrize("cp_args", [[], ["--sparse=always"]], ids=["cp", "cp-sparse"])
def test_a_copy_with_holes_inside_its_log_opens_with_every_commit(tmp_path, cp_args):
    """`cp` (coreutils' default on a file that looks sparse, or --sparse=always)
    stores the zero runs inside the log as holes: they read as the zeros they hold,
    every acknowledged commit is served, and a writer's next commit follows them."""
    src, dst = str(tmp_path / "src.varve"), str(tmp_path / "copy.varve")
    _build_sparse_prone(src)
    subprocess.run(["cp", *cp_args, src, dst], check=True)
    fd = os.open(dst, os.O_RDONLY)
    try:     # the premise: a hole lies before the last commit
        first_hole = os.lseek(fd, 0, os.SEEK_HOLE)
    finally:
        os.close(fd)
    ends, _ = frames_by_version(src)
    assert first_hole < ends[7][-1][0]
    d = vv.connect(dst, readonly=True)
    assert (d.version, d["t"].count()) == (7, 1005) and d.verify().ok
    d.close()
    d = vv.connect(dst)
    assert (d.version, d["t"].count()) == (7, 1005)
    d["t"].insert({"id": 99_999, "x": 1})
    d.close()
    d = vv.connect(dst, readonly=True)
    assert (d.version, d["t"].count()) == (8, 1006)
    assert d["t"].get(10_004)["x"] == 4 and not d["t"].get(999)["v"].any()
    rep = d.verify()
    assert rep.ok and rep.versions_checked == 8, rep
    d.close()


def test_cut_tail_never_zeroes_commits_past_what_was_read(tmp_path):
    """A torn tail is only ever the last, unacknowledged transaction: a writer told
    its log ends at version 3 refuses to zero the commits after it, whether it
    read them (version 5 lies past) or not (data past the bytes it read)."""
    src = str(tmp_path / "src.varve")
    build(src)
    raw = open(src, "rb").read()
    frames, _ = frames_by_version(src)
    file = DatabaseFile(src, readonly=True)
    m = file.map()
    scan = log_reader.scan(memoryview(m), F.LOG_START, 0, F.genesis_chain(file.file_id))
    v3 = next(c for c in scan.commits if c.record.version == 3)
    del scan
    m.close()
    file.close()
    for read in ("all", "into version 4"):
        w = LogWriter.open(src)
        try:
            w.adopt(v3.end, 3, v3.record.chain, v3.offset)
            buf = w.file.map()
            if read != "all":
                buf = memoryview(buf)[:frames[4][-1][0]]    # version 4's frames, no commit
            with pytest.raises(vv.CorruptFileError, match="not a torn tail"):
                w.cut_tail(buf)
            del buf
        finally:
            w.close()
        assert open(src, "rb").read() == raw
    d = vv.connect(src, readonly=True)
    assert d.version == 5 and d.verify().ok
    d.close()


def test_a_file_cut_short_below_its_checkpoint_is_refused(tmp_path):
    """The superblock vouches for the checkpoint's version and log end; a copy cut at
    an earlier commit (a partial copy, a full disk) is refused, not opened as the
    older database it looks like (whose next commit would take a lost version's
    number), and the refused file is left as it was."""
    src = str(tmp_path / "src.varve")
    d = vv.connect(src)
    c = d.create_collection("t", {"x": "int"})
    for i in range(6):
        c.insert([{"id": i, "x": i}])
    d.checkpoint()
    c.insert([{"id": 100, "x": 1}])
    d.close()
    raw = open(src, "rb").read()
    frames, (ck, *_) = frames_by_version(src)
    cut = str(tmp_path / "cut.varve")
    ck_end = F.pad(ck[0] + F.FRAME_HEADER_SIZE + ck[1])
    for at in (F.pad(frames[3][-1][0] + F.FRAME_HEADER_SIZE + frames[3][-1][1]),  # v3's end
               ck[0] + F.FRAME_HEADER_SIZE + ck[1] // 2,       # inside the checkpoint
               ck_end - 1):                                     # the log end not reached
        copy_truncated(raw, cut, at)
        for readonly in (True, False):
            with pytest.raises(vv.CorruptFileError, match="truncated: the superblock vouches "
                                                          "for version 7"):
                vv.connect(cut, readonly=readonly)
        assert open(cut, "rb").read() == raw[:at]
        assert not vv.verify_file(cut).ok
    copy_truncated(raw, cut, ck_end)     # the checkpoint whole, version 8 torn off: opens
    d = vv.connect(cut)
    assert d.version == 7 and d["t"].count() == 6
    d.close()
