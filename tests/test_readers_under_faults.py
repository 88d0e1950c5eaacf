"""Read-only processes and `verify` beside a writer that rolls back, checkpoints and dies.

Real processes on a real file, no mocks:

* a writer rolls back transactions whose frames (>= 1 MiB, written before
  commit) are already in the file, while two read-only processes refresh and
  query in a loop and a third verifies the file over and over. Every reader
  answer must be some committed state, no process may die of a signal (a
  writer that truncated the file under a reader's mapping killed the reader
  with SIGBUS), and the file must verify and reopen at the end;
* a writer that alternates commits and large checkpoints is SIGKILLed at
  random moments after it announced a checkpoint: the reopened file holds
  exactly the last commit it acknowledged, every row of it, verifies, and
  takes new writes;
* `verify` run again and again beside a writer that commits, rolls back big
  transactions and checkpoints must never report a break.

KNOWN FAILURE (left failing on purpose): verify_file reports a break at a frame
the writer is still appending (a frame of an open transaction, or a checkpoint no
superblock points at yet) — 'truncated frame' or 'checkpoint does not match its
hash' — on a healthy file. The first and third tests hit it at random beside a
live writer; test_verify_of_frames_still_being_appended_is_not_a_break freezes
the same three states and fails every time. Every other check passes.

Children import the same varvedb the test process imported (so running the
suite with PYTHONPATH=<an older checkout>/src runs the children on it too).
Row k of every collection here has tag k % 7 and a vector derived from k
(`vec`), so any process can check any row it reads.
"""
from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import varvedb as vv

from conftest import PYTHON, child_env, log_end, zero_from
from forker import Child, Forker

DIM = 64
LEAK = 10**7          # ids at and above this are only ever inserted by rolled-back transactions

VEC = r"""
import numpy as np
DIM = 64
def vec(ids):
    # splitmix64 of (id, component): distinct pseudo-random vectors, the same in every process
    x = np.asarray(ids, np.uint64).reshape(-1, 1) * np.uint64(DIM)
    x = x + np.arange(DIM, dtype=np.uint64)
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(40)).astype(np.float32) / np.float32(1 << 24) - np.float32(0.5)
"""
exec(VEC)             # defines vec() here exactly as in the children


def _env() -> dict:
    """child_env(), but importing varvedb from wherever this process imported it."""
    env = child_env()
    src = str(Path(vv.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="module")
def forker():
    """The children are forked from one process that imported this varvedb once
    (tests/forker.py), not each a fresh interpreter's imports."""
    with Forker(env=_env()) as f:
        yield f


class Proc(Child):
    """A child running one of the scripts below, its stderr kept in tmp_path."""

    @classmethod
    def script(cls, forker: Forker, tmp_path, name: str, script: str, *args) -> "Proc":
        return cls(forker, VEC + script, *args, name=name,
                   stderr_path=str(tmp_path / f"{name}.stderr"))


def _describe(code: int) -> str:
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit {code}"


def _check_children_clean(procs: list[Proc]) -> None:
    codes = {p.name: p.finish() for p in procs}
    bad = {n: _describe(c) for n, c in codes.items() if c != 0}
    assert not bad, "children did not exit cleanly: " + "; ".join(
        f"{n}: {d}: {next(p for p in procs if p.name == n).stderr()[-600:]}"
        for n, d in bad.items())


# ---- read-only processes while the writer rolls back written frames ------------------------

READER = r"""
import os, sys
import varvedb as vv
path, stop = sys.argv[1], sys.argv[2]
seed, n0, step = map(int, sys.argv[3:6])
LEAK = 10**7
rng = np.random.default_rng(seed)
db = vv.connect(path, readonly=True)
docs = db["docs"]
print("ready", db.version, docs.count(), flush=True)
last = 0
while not os.path.exists(stop):
    v = db.refresh()
    assert v >= last, (v, last)
    last = v
    n = docs.count()
    # every committed state holds rows 0..n-1, n = n0 + step * (commits since the load)
    assert n >= n0 and (n - n0) % step == 0, n
    assert docs.count("tag = -1") == 0, "a rolled-back row is visible"
    k = int(rng.integers(0, n))
    q = vec([k])[0]
    hits = docs.search(vector=q, limit=5)
    assert len(hits) == 5 and hits.ids[0] == k, (k, hits.ids)
    assert all(i < LEAK for i in hits.ids), ("rolled-back rows found", hits.ids)
    doc = docs.get(k)
    assert doc["tag"] == k % 7 and np.array_equal(doc["emb"], q), (k, doc)
    assert docs.get(n) is None and docs.get(LEAK + k) is None
    print(v, n, k, flush=True)
print("done", flush=True)
"""

VERIFIER = r"""
import os, sys
import varvedb as vv
path, stop = sys.argv[1], sys.argv[2]
runs = 0
print("ready", flush=True)
while not os.path.exists(stop):
    r = vv.verify_file(path)
    print("ok" if r.ok else "BROKEN", r.versions_checked, r.first_break, flush=True)
    runs += 1
print("done", runs, flush=True)
"""

N0 = 16_384           # committed before the readers start
STEP = 256            # rows per small committed transaction
BLOCK = 8192          # rows per rolled-back block: 8192 x 64 f32 = 2 MiB, written at once
ROUNDS = 15


class _Rollback(Exception):
    pass


def _start_readers(forker, tmp_path, path, stop, n0, step):
    procs = [Proc.script(forker, tmp_path, f"reader{i}", READER, path, stop, i, n0, step)
             for i in range(2)]
    procs.append(Proc.script(forker, tmp_path, "verifier", VERIFIER, path, stop))
    for p in procs:
        p.wait_for("ready")
    return procs


def _verify_runs(p: Proc) -> list[str]:
    return [line for line in p.lines if line.startswith(("ok ", "BROKEN "))]


def _wait_runs(p: Proc, count: int, timeout: float = 1800.0) -> None:
    """Until the verifier has reported `count` runs (a hang guard of `timeout`)."""
    deadline = time.monotonic() + timeout
    while len(_verify_runs(p)) < count:
        assert p.proc.poll() is None, p.stderr()
        assert time.monotonic() < deadline, f"{p.name} reported {len(_verify_runs(p))} runs"
        time.sleep(0.01)


def _checkpoint_offsets(path: str) -> set[int]:
    """Offsets of the checkpoint frames in the file (to say which breaks hit one)."""
    from varvedb.storage import format as F
    from varvedb.storage import log_reader
    from varvedb.storage.file import DatabaseFile
    file = DatabaseFile(path, readonly=True)
    try:
        buf = file.map()
        mv = memoryview(buf)
        scan = log_reader.scan(mv, F.LOG_START, 0, F.genesis_chain(file.file_id),
                               file.superblocks, check_payload=False)
        return {c.offset for c in scan.checkpoints}
    finally:
        file.close()


def _verify_failure(path: str, broken: list[str], runs: int) -> str:
    """verify_file reports a break at a frame the writer is still appending — one of
    an open transaction, or a checkpoint no superblock points at yet: 'truncated
    frame' where its map of the file ends inside that frame, 'checkpoint does not
    match its hash' where the map holds the frame but not yet all of its bytes —
    though the file is healthy and opens at its last commit."""
    cks = _checkpoint_offsets(path)
    on_ck = sum(int(line.split("offset=")[1].split(",")[0]) in cks for line in broken)
    return (f"verify reported a break beside a healthy writer in {len(broken)} of {runs} "
            f"runs ({on_ck} at a checkpoint frame being written, {len(broken) - on_ck} at "
            f"frames of an open transaction); first: {broken[:3]}. "
            f"Known bug: {' '.join(_verify_failure.__doc__.split())}")


def _reader_states(p: Proc) -> list[tuple[int, int]]:
    return [tuple(map(int, line.split()[:2])) for line in p.lines
            if line and line[0].isdigit()]


# FAILS on the current code, at its last assertion only: verify's false breaks (see top).
def test_readers_never_fault_while_writer_rolls_back_large_transactions(tmp_path, forker):
    path = str(tmp_path / "rb.varve")
    stop = str(tmp_path / "stop")
    rng = random.Random(1107)
    db = vv.connect(path)
    docs = db.create_collection("docs", {"tag": vv.Int(), "emb": vv.Vector(DIM, metric="l2")})
    ids = np.arange(N0)
    docs.insert_arrays(id=ids, tag=ids % 7, emb=vec(ids))
    committed = {db.version: N0}                # version -> count, every committed state
    n = N0
    procs = _start_readers(forker, tmp_path, path, stop, N0, STEP)
    rolled_back = 0
    try:
        for r in range(ROUNDS):
            version, end = db.version, log_end(db)
            try:
                with db.transaction():
                    for b in range(1 + (r % 3 == 0)):        # sometimes two blocks
                        first = LEAK + (2 * r + b) * BLOCK
                        bids = np.arange(first, first + BLOCK)
                        # copies of committed vectors: a leak would show in every search
                        docs.insert_arrays(id=bids, tag=np.full(BLOCK, -1),
                                           emb=vec(bids % n))
                    # the frames are in the file before any commit
                    assert db.engine.log.end > end + BLOCK * DIM * 4
                    time.sleep(rng.uniform(0.0, 0.06))       # more work, then it fails
                    raise _Rollback
            except _Rollback:
                rolled_back += 1
            assert db.version == version and docs.count() == n
            assert log_end(db) == end and zero_from(path, end)    # the dead tail is zeroed
            if r % 4 == 3:
                ids = np.arange(n, n + STEP)
                docs.insert_arrays(id=ids, tag=ids % 7, emb=vec(ids))
                n += STEP
                committed[db.version] = n
            time.sleep(rng.uniform(0.0, 0.03))
        # the readers keep going a little after the last write: they must reach it
        deadline = time.monotonic() + 600        # a hang guard only
        while time.monotonic() < deadline and not all(
                _reader_states(p) and _reader_states(p)[-1][0] == db.version
                for p in procs[:2]):
            if any(p.proc.poll() is not None for p in procs):
                break
            time.sleep(0.01)
    finally:
        Path(stop).touch()
        _check_children_clean(procs)
    assert rolled_back == ROUNDS
    final_version = db.version
    db.close()

    for p in procs[:2]:
        states = _reader_states(p)
        assert len(states) > 50, f"{p.name} made little progress: {len(states)} refreshes"
        for v, c in states:
            assert committed.get(v) == c, f"{p.name} saw {c} rows at version {v}: {committed}"
        assert [v for v, _ in states] == sorted(v for v, _ in states)
        assert states[-1][0] == final_version, (p.name, states[-1], final_version)
        assert len({v for v, _ in states}) >= 4, "readers never saw the commits in between"

    db = vv.connect(path, readonly=True)
    try:
        assert db.version == final_version
        assert db["docs"].count() == n and db["docs"].count("tag = -1") == 0
        assert db.verify().ok
        k = n - 1
        assert db["docs"].search(vector=vec([k])[0], limit=1).ids == [k]
    finally:
        db.close()

    runs = _verify_runs(procs[2])
    broken = [line for line in runs if not line.startswith("ok ")]
    print(f"\nreaders refreshed {[len(_reader_states(p)) for p in procs[:2]]} times, "
          f"verify ran {len(runs)} times, {len(broken)} reported a break")
    assert len(runs) >= 10, f"verify ran only {len(runs)} times"
    assert all(int(line.split()[1]) in committed for line in runs if line.startswith("ok "))
    # Last, so that everything above is checked first. FAILS on the current code:
    # verify_file reports 'truncated frame' when its map ends inside a frame of the
    # open transaction the writer is appending (see _verify_failure, and
    # test_verify_of_frames_still_being_appended_is_not_a_break for the same, frozen).
    assert not broken, _verify_failure(path, broken, len(runs))


# ---- SIGKILL inside a checkpoint ------------------------------------------------------

CK_WRITER = r"""
import sys, time
import varvedb as vv
path, build, small = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
db = vv.connect(path)
if "docs" not in db.collections():
    db.create_collection("docs", {"tag": vv.Int(), "emb": vv.Vector(DIM, metric="l2")})
docs = db["docs"]
n = docs.count()
print("ready", db.version, n, flush=True)
def insert(k):
    global n
    ids = np.arange(n, n + k)
    docs.insert_arrays(id=ids, tag=ids % 7, emb=vec(ids))
    n += k
    print("committed", db.version, n, flush=True)
if n == 0:
    for _ in range(70):        # a fresh file: a large arena in 70 runs
        insert(build)
while True:
    # more than 64 inserts since the last checkpoint: it writes the whole arena again
    for _ in range(66):
        insert(small)
    print("checkpoint start", db.version, flush=True)
    t = time.monotonic()
    db.checkpoint()
    print("checkpoint done", db.version, round(time.monotonic() - t, 4), flush=True)
"""

CK_BUILD = 2400       # 70 x 2400 rows x 64 f32: a 43 MB arena, copied into each checkpoint
CK_SMALL = 8
CK_ROUNDS = 6


def _ck_durations(lines: list[str]) -> list[float]:
    return [float(line.split()[3]) for line in lines if line.startswith("checkpoint done")]


def _last_committed(lines: list[str]) -> tuple[int, int]:
    """(version, count) of the last commit the writer acknowledged."""
    for line in reversed(lines):
        word, *nums = line.split()
        if word in ("ready", "committed"):
            return int(nums[0]), int(nums[1])
    raise AssertionError(f"no commit acknowledged: {lines[:3]}")


def _checkpoint_phase(path: str, version: int) -> str:
    """Where in its checkpoint a kill landed, read from the file before anything repairs it."""
    from varvedb.storage import format as F
    from varvedb.storage import log_reader
    from varvedb.storage.file import DatabaseFile
    file = DatabaseFile(path, readonly=True)
    try:
        if file.superblock is not None and file.superblock.checkpoint_version == version:
            return "checkpoint durable, not acknowledged"
        mv = memoryview(file.map())
        scan = log_reader.scan(mv, F.LOG_START, 0, F.genesis_chain(file.file_id),
                               file.superblocks, check_payload=False)
        end = scan.commits[-1].end          # a checkpoint frame of this version starts here
        assert scan.commits[-1].record.version == version
        if any(c.offset == end and c.payload_ok for c in scan.checkpoints):
            return "frame written, superblock not"
        return "frame being written" if any(bytes(mv[end:end + 64])) else "before the frame"
    finally:
        file.close()


def _check_ck_recovered(path: str, version: int, n: int, rng: random.Random) -> None:
    db = vv.connect(path)
    try:
        docs = db["docs"]
        assert db.version == version, f"reopened at {db.version}, acknowledged {version}"
        assert docs.count() == n and docs.get(n) is None and docs.get(n - 1) is not None
        sample = sorted(rng.sample(range(n), 200)) + [0, n - 1]
        for k in sample:
            doc = docs.get(k)
            assert doc["tag"] == k % 7 and np.array_equal(doc["emb"], vec([k])[0]), k
        assert docs.search(vector=vec([n - 1])[0], limit=1).ids == [n - 1]
        report = db.verify()
        assert report.ok and report.versions_checked == version, report
        # and it takes a new insert and a checkpoint, which a reopen finds
        ids = np.arange(n, n + 5)
        docs.insert_arrays(id=ids, tag=ids % 7, emb=vec(ids))
        db.checkpoint()
    finally:
        db.close()
    with vv.connect(path, readonly=True) as db:
        assert db.version == version + 1 and db["docs"].count() == n + 5
        assert np.array_equal(db["docs"].get(n + 4)["emb"], vec([n + 4])[0])
        assert db.engine.log.file.superblock.checkpoint_version == version + 1
        assert db.verify().ok


def test_sigkill_inside_a_checkpoint_keeps_the_last_commit(tmp_path, forker):
    rng = random.Random(424242)
    inside = 0
    phases: list[str] = []
    delays = []
    durations: list[float] = []        # of every checkpoint seen to finish
    path = None
    for round_no in range(CK_ROUNDS):
        if round_no % 3 == 0:       # a fresh file, then two rounds on the recovered one
            path = str(tmp_path / f"ck{round_no}.varve")
        child = Proc.script(forker, tmp_path, f"ck{round_no}", CK_WRITER, path, CK_BUILD,
                            CK_SMALL)
        if not durations:           # learn how long a checkpoint takes here
            child.wait_for("checkpoint done")
        counted = len(durations)
        durations += _ck_durations(child.lines)
        starts = sum(line.startswith("checkpoint start") for line in child.lines)
        child.wait_for("checkpoint start", starts + 1)
        # kill somewhere in the checkpoint: the quickest one seen bounds the delay
        delay = rng.uniform(0.0, 0.8 * min(durations))
        delays.append(round(delay, 3))
        time.sleep(delay)
        lines = child.kill()
        durations[counted:] = _ck_durations(lines)
        last_start = max(i for i, line in enumerate(lines)
                         if line.startswith("checkpoint start"))
        landed_inside = not any(line.startswith("checkpoint done")
                                for line in lines[last_start:])
        inside += landed_inside
        version, n = _last_committed(lines)
        if landed_inside:
            # nothing is committed inside a checkpoint: its version is the last acknowledged
            assert int(lines[last_start].split()[2]) == version
            phases.append(_checkpoint_phase(path, version))
        else:
            # killed after the checkpoint: a commit may have landed before it was printed
            phases.append("after it")
            with vv.connect(path, readonly=True) as peek:
                if peek.version == version + 1:
                    version, n = version + 1, n + CK_SMALL
        _check_ck_recovered(path, version, n, rng)
    print(f"\ncheckpoints took {sorted(durations)} s; kills inside a checkpoint: {inside} of "
          f"{CK_ROUNDS}; delays {delays}; where: {phases}")
    assert inside >= CK_ROUNDS - 2, f"only {inside} of {CK_ROUNDS} kills landed in a checkpoint"


# ---- verify beside a writer -----------------------------------------------------------

VB_ROUNDS = 280
VB_SMALL = 16


# FAILS on the current code: verify's false breaks (see top).
def test_verify_beside_a_writer_never_reports_a_break(tmp_path, forker):
    path = str(tmp_path / "vb.varve")
    stop = str(tmp_path / "stop")
    db = vv.connect(path)
    docs = db.create_collection("docs", {"tag": vv.Int(), "emb": vv.Vector(DIM, metric="l2")})
    ids = np.arange(40_000)
    docs.insert_arrays(id=ids, tag=ids % 7, emb=vec(ids))
    n = len(ids)
    verifier = Proc.script(forker, tmp_path, "verifier", VERIFIER, path, stop)
    verifier.wait_for("ready")
    cli: list[tuple[int, str]] = []

    def run_cli():
        while not os.path.exists(stop):
            out = subprocess.run([PYTHON, "-m", "varvedb.cli", "verify", path], env=_env(),
                                 capture_output=True, text=True, timeout=1800)
            cli.append((out.returncode, (out.stdout + out.stderr).strip()))

    t = threading.Thread(target=run_cli, daemon=True)
    t.start()
    checkpoints = rollbacks = 0
    try:
        for r in range(VB_ROUNDS):
            ids = np.arange(n, n + VB_SMALL)
            docs.insert_arrays(id=ids, tag=ids % 7, emb=vec(ids))     # one run each
            n += VB_SMALL
            if r % 5 == 2:
                try:
                    with db.transaction():
                        bids = np.arange(LEAK + r * BLOCK, LEAK + (r + 1) * BLOCK)
                        docs.insert_arrays(id=bids, tag=np.full(BLOCK, -1), emb=vec(bids))
                        docs.delete(ids=[0, 1, 2])
                        raise _Rollback
                except _Rollback:
                    rollbacks += 1
            if r % 70 == 69:         # > 64 runs since the last: the arena is written whole
                db.checkpoint()
                checkpoints += 1
            if r % 10 == 9:          # a verify beside each stretch of writes, however long
                # verify takes here (it replays the log to each checkpoint)
                _wait_runs(verifier, r // 10 + 1)
        version = db.version
        while len(cli) < 3 and t.is_alive():
            time.sleep(0.05)
    finally:
        Path(stop).touch()
        t.join(120)
        _check_children_clean([verifier])
    assert checkpoints == 4 and rollbacks == VB_ROUNDS // 5
    assert db["docs"].count() == n and db.verify().ok
    db.close()

    db = vv.connect(path, readonly=True)
    try:
        assert db.version == version and db["docs"].count() == n
        assert db["docs"].count("tag = -1") == 0 and db["docs"].get(0)["tag"] == 0
        assert np.array_equal(db["docs"].get(n - 1)["emb"], vec([n - 1])[0])
        assert db.verify().ok
    finally:
        db.close()

    runs = _verify_runs(verifier)
    broken = [line for line in runs if not line.startswith("ok ")]
    # the CLI prints "ok: N versions verified, ..." or "BROKEN at version V (offset O): ..."
    bad_cli = [out for code, out in cli if code != 0 or not out.startswith("ok:")]
    print(f"\nverify_file ran {len(runs)} times, {len(broken)} reported a break; "
          f"`varvedb verify` ran {len(cli)} times, {len(bad_cli)} reported a break")
    assert len(runs) >= 20 and len(cli) >= 3
    assert all(code in (0, 1) for code, _ in cli), cli     # never a signal
    versions = [int(line.split()[1]) for line in runs if line.startswith("ok ")]
    assert versions == sorted(versions) and versions and versions[-1] <= version
    # Fails on the current code: see _verify_failure.
    broken += [f"{out} offset={out.split('(offset ')[1].split(')')[0]}, (CLI)"
               for out in bad_cli if "(offset " in out]
    assert not broken and not bad_cli, _verify_failure(path, broken, len(runs) + len(cli))


# ---- the break verify reports beside a writer, made deterministic -------------------------

# FAILS on the current code: verify's false breaks (see top), deterministically.
def test_verify_of_frames_still_being_appended_is_not_a_break(tmp_path):
    """What `verify` maps while the writer is mid-append, frozen: a copy of the file cut
    inside a frame (i) of an open transaction, (ii) of a checkpoint whose superblock is
    not written yet, (iii) the same checkpoint written over a zeroed tail the file
    already spans. All open at the last commit; while a writer holds the file, verify
    must call them ok (they are what it is appending), and with no writer, a break.

    Before the fix verify reported 'truncated frame' for (i) and (ii) and 'checkpoint
    does not match its hash' for (iii) even beside a live writer, which is what the
    tests above hit at random."""
    from varvedb.storage import format as F
    path = str(tmp_path / "a.varve")
    db = vv.connect(path)
    docs = db.create_collection("docs", {"tag": vv.Int(), "emb": vv.Vector(DIM, metric="l2")})
    for k in range(70):                      # 70 runs: the checkpoint copies the arena
        ids = np.arange(k * 300, (k + 1) * 300)
        docs.insert_arrays(id=ids, tag=ids % 7, emb=vec(ids))
    version, end = db.version, log_end(db)
    cuts = {}
    try:
        with db.transaction():
            bids = np.arange(LEAK, LEAK + BLOCK)
            docs.insert_arrays(id=bids, tag=np.full(BLOCK, -1), emb=vec(bids))
            assert os.path.getsize(path) > end + BLOCK * DIM * 4     # written before commit
            cuts["open transaction"] = open(path, "rb").read()[:end + (1 << 20)]
            raise _Rollback
    except _Rollback:
        pass
    assert db.version == version
    before = open(path, "rb").read()
    db.checkpoint()
    after = open(path, "rb").read()
    db.close()
    assert before[:F.LOG_START] != after[:F.LOG_START]          # the superblock moved
    # the header block (superblock slots) as it was, the checkpoint frame half written
    cuts["checkpoint frame"] = before[:F.LOG_START] + after[F.LOG_START:end + (2 << 20)]
    # the same, over a zeroed tail that the file already spans (a rolled-back transaction
    # bigger than the checkpoint): the map holds the whole frame, half of it still zero
    cuts["checkpoint over a zeroed tail"] = (cuts["checkpoint frame"]
                                             + bytes(len(after) - end - (2 << 20)))
    reports, static = {}, {}
    for what, image in cuts.items():
        cut = tmp_path / f"cut-{what.replace(' ', '-')}.varve"
        cut.write_bytes(image)
        with vv.connect(str(cut), readonly=True) as r:
            assert r.version == version and r["docs"].count() == 70 * 300
        # with no writer holding the file, an unfinished tail is a break ...
        static[what] = vv.verify_file(str(cut))
        # ... while one does (its write lock), it is what the writer is appending
        fd = os.open(str(cut), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            reports[what] = vv.verify_file(str(cut))
        finally:
            os.close(fd)
    bad = {w: (r.first_break.reason, r.first_break.offset) for w, r in reports.items() if not r.ok}
    assert not bad, f"verify reports a healthy file as broken: {bad}"
    assert all(r.versions_checked == version for r in reports.values())
    assert not any(r.ok for r in static.values())
