"""vacuum, backup and restore: against a dict oracle, under SIGKILL, beside a writer.

The state machine keeps every committed version's documents (id -> fields) and
chain hash. After random writes, `vacuum(keep=k)` and reopens, every kept
version read `as_of` equals the oracle, its chain hash is the one it had
before the vacuum, an older version raises VersionNotFoundError, verify() is
ok, and the graph answers like exact search.
"""
from __future__ import annotations

import datetime
import os
import random
import shutil
import tempfile
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import varvedb as vv
from varvedb.storage import format as F

from conftest import file_digest

SCHEMA = {"n": "int", "t": "text", "v": vv.Vector(4, metric="l2", index=vv.HNSW(m=8))}
IDS = range(12)


def _vec(i: int, r: int) -> list[float]:
    return [float(i), float(r), float(i * r % 7), 1.0]


class VacuumMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "h.varve")
        self.db = vv.connect(self.path)
        self.db.create_collection("docs", SCHEMA)
        self.states = {self.db.version: {}}    # version -> {id: (n, t)}
        self.chains = {h.version: h.chain for h in self.db.history()}
        self.oldest = 1
        self.r = 0

    def teardown(self):
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _commit(self, state):
        self.states[self.db.version] = state
        self.chains[self.db.version] = self.db.history()[-1].chain

    @rule(ids=st.lists(st.sampled_from(IDS), min_size=1, max_size=5, unique=True))
    def upsert(self, ids):
        self.r += 1
        docs = self.db["docs"]
        docs.upsert([{"id": i, "n": self.r, "t": f"r{self.r}", "v": _vec(i, self.r)}
                     for i in ids])
        state = dict(self.states[max(self.states)])
        state.update({i: (self.r, f"r{self.r}") for i in ids})
        self._commit(state)

    @rule(ids=st.lists(st.sampled_from(IDS), min_size=1, max_size=4, unique=True))
    def delete(self, ids):
        state = dict(self.states[max(self.states)])
        gone = [i for i in ids if i in state]
        if not gone:
            return
        self.db["docs"].delete(ids=gone)
        for i in gone:
            del state[i]
        self._commit(state)

    @rule(keep=st.integers(1, 6))
    def vacuum(self, keep):
        newest = self.db.version
        report = self.db.vacuum(keep=keep)
        self.oldest = max(self.oldest, newest - keep + 1)
        assert report.oldest == self.oldest and report.version == newest

    @rule()
    def restore(self):
        kept = [v for v in self.states if v >= self.oldest]
        v = kept[len(kept) // 2]
        self.db.restore(v)
        if self.db.version != max(self.states):
            self._commit(dict(self.states[v]))

    @rule()
    def reopen(self):
        self.db.close()
        self.db = vv.connect(self.path)

    @invariant()
    def kept_versions_read_as_before(self):
        docs = self.db["docs"]
        for v, state in self.states.items():
            if v < self.oldest:
                if v > 0 or self.oldest > 1:
                    with pytest.raises(vv.VersionNotFoundError, match=f"oldest version is "
                                                                      f"{self.oldest}"):
                        docs.count(as_of=v)
                continue
            got = {h.id: (h.fields["n"], h.fields["t"])
                   for h in docs.find(select=["n", "t"], as_of=v, limit=100)}
            assert got == state, f"version {v}"
        history = {h.version: h.chain for h in self.db.history()}
        assert min(history) == self.oldest
        assert all(history[v] == self.chains[v] for v in history)
        assert self.db.verify().ok
        # the rebuilt graph answers like exact search over the current rows
        current = self.states[max(self.states)]
        if current:
            q = np.array(_vec(3, self.r), np.float32)
            hits = docs.search(vector=q, limit=3, ef=64)
            exact = docs.search(vector=q, limit=3, exact=True)
            assert [h.id for h in hits] == [h.id for h in exact]


TestVacuumMachine = VacuumMachine.TestCase
TestVacuumMachine.settings = settings(max_examples=12, stateful_step_count=12, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])


# ---- what vacuum keeps, and what it refuses ---------------------------------------------

def _three_versions(db):
    docs = db.create_collection("docs", SCHEMA)
    docs.insert([{"id": i, "n": 0, "t": "a", "v": _vec(i, 0)} for i in range(50)])
    docs.upsert([{"id": i, "n": 1, "t": "b", "v": _vec(i, 1)} for i in range(25)])
    docs.delete(ids=[40, 41])
    return docs


def test_vacuum_drops_dead_versions_and_keeps_chain_and_anchors(db_path):
    db = vv.connect(db_path)
    docs = _three_versions(db)
    before = db.history()
    report = db.vacuum(keep=2)
    assert (report.oldest, report.version) == (3, 4)
    assert report.rows_kept == 50 and report.rows_dropped == 25
    assert [(h.version, h.chain, h.timestamp) for h in db.history()] == \
        [(h.version, h.chain, h.timestamp) for h in before[2:]]
    # an anchor kept from before checks; one at the last dropped version too
    assert db.verify(anchor=(4, before[3].chain)).ok
    assert db.verify(anchor=(2, before[1].chain)).ok
    old = db.verify(anchor=(1, before[0].chain))
    assert not old.ok and "vacuumed away" in old.first_break.reason
    with pytest.raises(vv.VersionNotFoundError, match="oldest version is 3"):
        docs.get(1, as_of=2)
    with pytest.raises(vv.VersionNotFoundError, match="oldest version is 3"):
        docs.count(as_of=before[0].timestamp)
    assert docs.count(as_of=3) == 50 and docs.count() == 48
    # ids go on from where they were; new writes land after the kept history
    docs.insert({"n": 9, "t": "new", "v": _vec(1, 9)})
    db.close()
    db = vv.connect(db_path)
    docs = db["docs"]
    assert docs.count() == 49 and max(docs.find(limit=100).ids) == 50
    assert db.verify().ok and db.history()[0].version == 3
    assert db.engine.log.file.format_version == F.FORMAT_VERSION
    db.close()


def test_vacuum_keeps_collections_and_fields_changed_after_the_oldest_kept(db_path):
    db = vv.connect(db_path)
    docs = _three_versions(db)
    other = db.create_collection("other", {"x": "int"})
    other.insert([{"id": 1, "x": 1}])
    oldest = db.version
    docs.rename_field("t", "title")
    docs.add_field("extra", vv.Int(default=7))
    docs.delete(ids=[0])
    db.drop_collection("other")
    db.vacuum(keep=db.version - oldest + 1)
    assert db.history()[0].version == oldest
    assert db.collections() == ["docs"]
    assert docs.get(1) == {"id": 1, "n": 1, "title": "b", "v": pytest.approx(_vec(1, 1)),
                           "extra": 7}
    assert docs.count(as_of=oldest) == 48 and docs.count() == 47
    db.close()
    db = vv.connect(db_path)
    assert db["docs"].count(as_of=oldest) == 48 and db.verify().ok
    db.close()


def test_vacuum_by_datetime_and_keep_all(db_path):
    db = vv.connect(db_path)
    _three_versions(db)
    when = db.history()[1].timestamp
    assert db.vacuum(keep=when).oldest == 2
    assert db.vacuum().oldest == 2            # keep everything: nothing older to drop
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    assert db.vacuum(keep=later).oldest == db.version
    db.close()


@pytest.mark.parametrize("keep", [0, -1, 1.5, "3", True, datetime.datetime(2024, 1, 1)])
def test_vacuum_refuses_bad_keep_and_leaves_the_file(db_path, keep):
    db = vv.connect(db_path)
    _three_versions(db)
    db.checkpoint()
    digest = file_digest(db_path)
    with pytest.raises(vv.OptionError):
        db.vacuum(keep=keep)
    assert file_digest(db_path) == digest and db.history()[0].version == 1
    db.close()


def test_vacuum_inside_a_transaction_and_on_memory_are_refused(db_path):
    db = vv.connect(db_path)
    _three_versions(db)
    with pytest.raises(vv.TransactionError):
        with db.transaction():
            db.vacuum()
    db.close()
    with pytest.raises(vv.OptionError, match="memory"):
        vv.connect(":memory:").vacuum()


def test_reader_follows_the_vacuumed_file_on_refresh(db_path):
    db = vv.connect(db_path)
    docs = _three_versions(db)
    reader = vv.connect(db_path, readonly=True)
    assert reader["docs"].count(as_of=2) == 50
    db.vacuum(keep=1)
    assert reader["docs"].count(as_of=2) == 50      # the old file, until it refreshes
    docs.insert({"id": 99, "n": 5, "t": "x", "v": _vec(9, 9)})
    assert reader.refresh() == db.version
    assert reader["docs"].count() == 49
    with pytest.raises(vv.VersionNotFoundError):
        reader["docs"].count(as_of=2)
    reader.close()
    db.close()


# ---- crash during vacuum -------------------------------------------------------------

VACUUMER = r"""
import random, sys
import varvedb as vv
path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
db = vv.connect(path)
docs = db["docs"]
print("ready", flush=True)
while True:
    i = rng.randrange(400)
    docs.upsert({"id": i, "n": rng.randrange(1000), "t": "w", "v": [i, 1, 2, 3]})
    print("acked", db.version, i, docs.get(i)["n"], flush=True)
    print("vacuum", flush=True)
    db.vacuum(keep=rng.choice((1, 2, 5)))
    print("vacuumed", db.history()[0].version, flush=True)
"""


def test_sigkill_during_vacuum_leaves_old_or_new_file_whole(tmp_path, forker):
    from forker import Child
    path = str(tmp_path / "v.varve")
    db = vv.connect(path)
    docs = db.create_collection("docs", SCHEMA)
    docs.insert([{"id": i, "n": 0, "t": "w", "v": [i, 1, 2, 3]} for i in range(400)])
    for r in range(1, 4):
        docs.upsert([{"id": i, "n": r, "t": "w", "v": [i, 1, 2, 3]} for i in range(0, 400, 2)])
    db.close()
    rng = random.Random(7)
    expect: dict[int, int] = {}
    landed = {"mid-vacuum": 0, "between": 0}
    # 20 kills at random moments, then more until 5 of them landed inside a vacuum
    # (~9 in 10 do: the child's vacuum takes ~10 times its upsert; a count of
    # fixed trials could fall short when the machine stalls the child): the
    # trial cap is a hang guard, not a figure
    for trial in range(400):
        if trial >= 20 and landed["mid-vacuum"] >= 5:
            break
        child = Child(forker, VACUUMER, path, trial)
        child.wait_for("ready")
        time.sleep(rng.uniform(0.0, 0.6))
        lines = child.kill()
        for line in lines:
            if line.startswith("acked"):
                _, _, i, n = line.split()
                expect[int(i)] = int(n)
        last = lines[-1] if lines else ""
        landed["mid-vacuum" if last == "vacuum" else "between"] += 1
        db = vv.connect(path)
        try:
            assert db.verify().ok
            docs = db["docs"]
            assert docs.count() == 400
            got = {h.id: h.fields["n"] for h in docs.find(select=["n"], limit=1000)}
            assert all(got[i] == n for i, n in expect.items()), "an acknowledged write lost"
        finally:
            db.close()
    assert landed["mid-vacuum"] >= 5, landed
    db = vv.connect(path)           # the next vacuum removes what the killed ones left
    db.vacuum()
    db.close()
    assert [n for n in os.listdir(tmp_path) if ".vacuum" in n] == []


def test_vacuum_writes_and_removes_only_files_of_its_own(tmp_path):
    """Another database named PATH.vacuum (the name vacuum once used) or PATH.vacuum-x,
    or this one's backup named PATH.vacuum-before (its file id), is never written or
    removed; a new file a vacuum of this database left (its name's 16 hex digits, its
    file id, no lock held) is removed by the next vacuum, one held open is kept."""
    from varvedb.storage.rewrite import NewLog, new_path
    path = str(tmp_path / "notes")
    others = []
    for name in ("notes.vacuum", "notes.vacuum-x"):
        other = vv.connect(str(tmp_path / name))
        other.create_collection("precious", {"x": "int"}).insert([{"id": 1, "x": 42}])
        others.append(other)          # open, writing: its commits must land in its file
    db = vv.connect(path)
    c = db.create_collection("t", {"x": "int"})
    c.insert([{"id": i, "x": i} for i in range(10)])
    c.delete(ids=[1, 2])
    backup = str(tmp_path / "notes.vacuum-before")
    db.backup(backup)               # a backup carries the database's file id
    file = db.engine.log.file
    left, held, empty = new_path(path), new_path(path), new_path(path)
    NewLog(left, file.file_id, file.created_us).io.close()      # as a vacuum cut short
    open(empty, "xb").close()       # one killed before it wrote its header
    keeper = NewLog(held, file.file_id, file.created_us)
    import fcntl
    fcntl.flock(keeper.io.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)    # someone has it open
    digests = {o.path: file_digest(o.path) for o in others}
    db.vacuum()
    assert db["t"].count() == 8 and db.verify().ok
    assert not os.path.exists(left) and not os.path.exists(empty) and os.path.exists(held)
    keeper.io.close()
    for o in others:
        assert file_digest(o.path) == digests[o.path]
        o["precious"].insert([{"id": 2, "x": 7}])                 # acknowledged after
        o.close()
        reopened = vv.connect(o.path)
        assert reopened["precious"].count() == 2
        reopened.close()
    db.vacuum()
    assert not os.path.exists(held)
    db.close()
    assert sorted(n for n in os.listdir(tmp_path) if "vacuum" in n) == \
        ["notes.vacuum", "notes.vacuum-before", "notes.vacuum-x"]
    assert vv.verify_file(backup).ok


# ---- backup ---------------------------------------------------------------------------

def test_a_backup_never_replaces_a_file_that_took_its_name_during_the_copy(tmp_path, db_path):
    """The copy is named by a hard link, which fails on an existing name (a rename
    replaces it): a file made at DEST while the copy ran is kept, the copy removed."""
    from varvedb.storage.backup import place_new
    db = vv.connect(db_path)
    _three_versions(db)
    dest = str(tmp_path / "b.varve")
    with open(dest + ".tmp", "wb") as f:
        f.write(b"the finished copy")
    with open(dest, "w") as f:
        f.write("precious, not a database")          # took the name meanwhile
    with pytest.raises(vv.OptionError, match="never overwrites"):
        place_new(dest + ".tmp", dest)
    assert open(dest).read() == "precious, not a database"
    assert not os.path.exists(dest + ".tmp")
    os.unlink(dest)
    info = db.backup(dest)                            # and the whole path still works
    assert info.path == dest and not os.path.exists(dest + ".tmp")
    copy = vv.connect(dest, readonly=True)
    assert copy.verify().ok and copy.version == db.version
    copy.close()
    db.close()


def test_backup_while_a_writer_commits_verifies_and_equals_the_original_as_of(tmp_path):
    path = str(tmp_path / "src.varve")
    db = vv.connect(path)
    docs = db.create_collection("docs", SCHEMA)
    docs.insert([{"id": i, "n": 0, "t": "x" * 200, "v": _vec(i, 0)} for i in range(2000)])
    db.checkpoint()
    stop = threading.Event()
    errors = []

    def write():
        s = db.session()
        d = s.collection("docs")
        r = 0
        try:
            while not stop.is_set():
                r += 1
                d.upsert([{"id": r % 2000, "n": r, "t": "y", "v": _vec(r, r)}])
        except Exception as e:     # reported below
            errors.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        copies = []
        for k in range(3):
            time.sleep(0.05)
            copies.append(db.backup(str(tmp_path / f"copy{k}.varve")))
    finally:
        stop.set()
        writer.join()
    assert not errors
    assert copies[0].version < copies[-1].version < db.version
    for info in copies:
        copy = vv.connect(info.path, readonly=True)
        assert copy.version == info.version and copy.verify().ok
        assert [h.chain for h in copy.history()] == \
            [h.chain for h in db.history() if h.version <= info.version]
        mine = {h.id: h.fields["n"] for h in
                db["docs"].find(select=["n"], as_of=info.version, limit=5000)}
        theirs = {h.id: h.fields["n"] for h in copy["docs"].find(select=["n"], limit=5000)}
        assert mine == theirs
        assert copy["docs"].count(as_of=2) == 2000
        copy.close()
    db.close()


def test_backup_refuses_an_existing_destination_and_memory(tmp_path, db_path):
    db = vv.connect(db_path)
    _three_versions(db)
    dest = tmp_path / "taken.varve"
    dest.write_bytes(b"mine")
    with pytest.raises(vv.OptionError, match="never overwrites"):
        db.backup(dest)
    assert dest.read_bytes() == b"mine"
    assert not os.path.exists(str(dest) + ".tmp")
    db.close()
    with pytest.raises(vv.OptionError, match="memory"):
        vv.connect(":memory:").backup(tmp_path / "m.varve")


def test_backup_stream_is_the_bytes_backup_writes_held_a_chunk_at_a_time(tmp_path, db_path):
    """Database.backup_stream (GET /backup's source): the same bytes as backup(),
    in chunks no larger than storage/backup.STREAM_CHUNK, from its own handle on
    the file: a commit and a close after it is made change nothing it yields."""
    from varvedb.storage.backup import STREAM_CHUNK
    db = vv.connect(db_path)
    _three_versions(db)
    db["docs"].insert([{"id": 1000 + i, "t": "x" * 4000} for i in range(600)])
    info = db.backup(tmp_path / "file.varve")
    version, size, chunks = db.backup_stream()
    assert (version, size) == (info.version, info.bytes) and size > 2 * STREAM_CHUNK
    db["docs"].insert({"id": 5000})                # after the stream was made
    db.close()
    parts = list(chunks)
    assert max(map(len, parts)) <= STREAM_CHUNK and len(parts) > 2
    assert b"".join(parts) == (tmp_path / "file.varve").read_bytes()
    with pytest.raises(vv.OptionError, match="memory"):
        vv.connect(":memory:").backup_stream()


def test_backup_of_a_vacuumed_file_opens_and_verifies(tmp_path, db_path):
    db = vv.connect(db_path)
    _three_versions(db)
    db.vacuum(keep=2)
    info = db.backup(tmp_path / "b.varve")
    copy = vv.connect(info.path)
    assert copy.history()[0].version == 3 and copy.verify().ok
    assert copy["docs"].count(as_of=3) == 50
    copy.close()
    db.close()


# ---- restore --------------------------------------------------------------------------

def test_restore_is_a_new_commit_and_is_undone_by_restoring(db_path):
    db = vv.connect(db_path)
    docs = _three_versions(db)
    docs.insert({"id": 77, "n": 7, "t": "later", "v": _vec(7, 7)})
    state = lambda v=None: {h.id: (h.fields["n"], h.fields["t"])  # noqa: E731
                            for h in docs.find(select=["n", "t"], as_of=v, limit=100)}
    at2, at5 = state(2), state(5)            # version 1 created the collection, empty
    assert len(at2) == 50 and at2 != at5
    v = db.restore(2)
    assert v == 6 and state() == at2 and state(5) == at5
    assert {h.id for h in docs.search(vector=_vec(3, 0), limit=60, exact=True)} == set(at2)
    assert {h.id for h in docs.search(vector=_vec(3, 0), limit=60, ef=100)} == set(at2)
    assert db.restore(5) == 7 and state() == at5
    assert db.restore(7) == 7                  # nothing differs: no new version
    assert db.restore(db.history()[0].timestamp) == 8 and state() == {}
    with pytest.raises(vv.VersionNotFoundError):
        db.restore(99)
    db.close()


# ---- the CLI verbs ----------------------------------------------------------------------

def test_cli_vacuum_backup_restore(tmp_path, db_path):
    db = vv.connect(db_path)
    _three_versions(db)
    db.close()
    from click.testing import CliRunner
    from varvedb.cli import main
    run = lambda *a: CliRunner().invoke(main, list(a))  # noqa: E731
    out = run("backup", db_path, str(tmp_path / "b.varve"))
    assert out.exit_code == 0 and "backed up version 4" in out.output, out.output
    out = run("restore", db_path, "2")
    assert out.exit_code == 0 and "now version 5" in out.output, out.output
    out = run("vacuum", db_path, "--keep", "2", "--graphs", "repair")
    assert out.exit_code == 0 and "kept versions 4..5" in out.output, out.output
    out = run("vacuum", db_path, "--keep", "soon")
    assert out.exit_code != 0 and "not a count" in out.output
    out = run("backup", db_path, str(tmp_path / "b.varve"))
    assert out.exit_code != 0 and "never overwrites" in out.output
    with vv.connect(db_path, readonly=True) as db:
        assert db.history()[0].version == 4 and db["docs"].count() == 50
    out = run("info", db_path)
    assert "history kept from version 4" in out.output
    assert f"format {F.FORMAT_VERSION}" in out.output


# ---- crafted files: an anchor where none may be, a BASE that maps rows twice -------------

def _frames(raw: bytes):
    """(offset, header) of every frame in the log, in order."""
    from varvedb.storage import format as F
    out, pos = [], F.LOG_START
    while pos + F.FRAME_HEADER_SIZE <= len(raw):
        hdr = F.unpack_frame_header(raw[pos:pos + F.FRAME_HEADER_SIZE])
        if hdr is None:
            break
        out.append((pos, hdr))
        pos = F.pad(pos + F.FRAME_HEADER_SIZE + hdr.length)
    return out


def _reseal(raw: bytearray, pos: int, kind: int, payload: bytes) -> None:
    from varvedb.storage import format as F
    digest = F.frame_hash(kind, len(payload), [payload])
    raw[pos:pos + F.FRAME_HEADER_SIZE] = F.pack_frame_header(kind, len(payload), digest)
    raw[pos + F.FRAME_HEADER_SIZE:pos + F.FRAME_HEADER_SIZE + len(payload)] = payload


def _open_refuses(raw: bytearray, tmp_path, match: str) -> str:
    """Write raw without its checkpoints (so replay meets the edit); open raises."""
    from varvedb.storage import format as F
    for off in F.SLOT_OFFSETS:
        raw[off:off + F.SLOT_SIZE] = bytes(F.SLOT_SIZE)
    bad = str(tmp_path / "crafted.varve")
    with open(bad, "wb") as f:
        f.write(bytes(raw))
    with pytest.raises(vv.CorruptFileError, match=match):
        vv.connect(bad)
    return bad


def test_an_anchor_after_the_first_commit_is_damage(tmp_path, db_path):
    from varvedb.storage import format as F
    db = vv.connect(db_path)
    _three_versions(db)
    db.close()
    raw = bytearray(open(db_path, "rb").read())
    commits = [(pos, h) for pos, h in _frames(raw) if h.kind == F.Kind.COMMIT]
    pos, hdr = commits[1]
    body = raw[pos + F.FRAME_HEADER_SIZE:pos + F.FRAME_HEADER_SIZE + hdr.length]
    rec = F.unpack_commit(body)
    forged = F.CommitRecord(rec.version, rec.timestamp_us, rec.n_frames, rec.rows_changed,
                            rec.digest, rec.prev_chain, bytes(32))
    _reseal(raw, pos, F.Kind.ANCHOR, F.pack_commit(forged))
    bad = _open_refuses(raw, tmp_path, "damaged at version 2")
    assert not vv.verify_file(bad).ok


def test_a_base_whose_rows_are_not_increasing_is_refused(tmp_path, db_path):
    import hashlib
    from varvedb.storage import format as F
    from varvedb.storage import record
    db = vv.connect(db_path)
    _three_versions(db)
    db.vacuum(keep=1)
    db.close()
    raw = bytearray(open(db_path, "rb").read())
    frames = _frames(raw)
    anchor = next(i for i, (_, h) in enumerate(frames) if h.kind == F.Kind.ANCHOR)
    base_pos, base_hdr = frames[anchor - 1]
    assert base_hdr.kind == F.Kind.BASE
    payload = bytes(raw[base_pos + F.FRAME_HEADER_SIZE:
                        base_pos + F.FRAME_HEADER_SIZE + base_hdr.length])
    meta, arrays, _ = record.decode(payload)
    rows = {k: np.array(a)[::-1].copy() for k, a in arrays.items()}    # same bytes, reversed
    meta = {k: v for k, v in meta.items() if k != "_arrays"}
    parts, length, _ = record.encode(meta, rows)
    assert length == base_hdr.length
    _reseal(raw, base_pos, F.Kind.BASE, b"".join(bytes(p) for p in parts))
    # the anchor's digest is over its frames' hashes: seal it again too
    digests = [h.digest for _, h in frames[:anchor - 1]]
    digests.append(F.unpack_frame_header(raw[base_pos:base_pos + F.FRAME_HEADER_SIZE]).digest)
    pos, hdr = frames[anchor]
    rec = F.unpack_commit(raw[pos + F.FRAME_HEADER_SIZE:pos + F.FRAME_HEADER_SIZE + hdr.length])
    rec.digest = hashlib.sha256(b"".join(digests)).digest()
    _reseal(raw, pos, F.Kind.ANCHOR, F.pack_commit(rec))
    _open_refuses(raw, tmp_path, "not increasing")


def test_rowmap_translates_both_ways_and_refuses_dropped_rows():
    from varvedb.engine.rowmap import RowMap
    rm = RowMap(np.array([1, 4, 5, 9], np.int64), 12)
    mem = np.arange(8)
    log = rm.to_log(mem)
    assert log.tolist() == [1, 4, 5, 9, 12, 13, 14, 15]
    assert rm.to_memory(log).tolist() == mem.tolist()
    assert rm.log_n(4) == 12 and rm.log_n(6) == 14
    for dropped in (0, 2, 8, 11):
        assert rm.to_memory(np.array([dropped])) is None


def test_automatic_retention_vacuums_once_dead_versions_pass_the_fraction(db_path):
    db = vv.connect(db_path, retain=1, retain_dead=0.6)
    docs = db.create_collection("docs", {"n": "int"})
    docs.insert([{"id": i, "n": 0} for i in range(100)])
    docs.update({"n": 1}, where="n >= 0")   # 100 of 200 row versions droppable: not yet
    db.engine.retention.stop()
    assert db.history()[0].version == 1
    docs.update({"n": 2}, where="n >= 0")   # 200 of 300: past 0.6, a vacuum starts
    db.engine.retention.stop()             # wait for it
    assert db.history()[0].version == db.version == 4
    assert docs.count() == 100 and docs.count(where="n = 2") == 100 and db.verify().ok
    db.close()
    db = vv.connect(db_path)
    assert db.history()[0].version == 4 and db["docs"].count() == 100
    db.close()


@pytest.mark.parametrize("retain, dead", [(0, 0.5), ("2", 0.5), (2, 0), (2, 1.5),
                                          (datetime.timedelta(days=-1), 0.5)])
def test_retention_refuses_bad_settings(db_path, retain, dead):
    with pytest.raises(vv.OptionError):
        vv.connect(db_path, retain=retain, retain_dead=dead)
    vv.connect(db_path).close()     # the file was closed again: no lock left behind
    with pytest.raises(vv.OptionError, match="file opened for writing"):
        vv.connect(":memory:", retain=3)


# ---- compression: text, json and scalars packed; vectors raw ------------------------------

def test_vacuum_and_checkpoint_compress_text_json_and_scalars_not_vectors(tmp_path):
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    rows = [{"id": i, "body": " ".join(words[(i + k) % 5] for k in range(40)),
             "meta": {"tags": words[: i % 5], "n": i}, "n": i % 3,
             "v": [float(i), 1.0, 2.0, 3.0]} for i in range(3000)]
    path = str(tmp_path / "c.varve")
    db = vv.connect(path)
    docs = db.create_collection("docs", {"body": "text", "meta": "json", "n": "int",
                                         "v": vv.Vector(4, metric="l2")})
    docs.insert(rows)
    raw_bytes = db.engine.log.end
    db.vacuum(keep=1)          # the insert becomes the base: written again, packed
    packed_bytes = db.engine.log.end
    assert packed_bytes < raw_bytes / 3, (packed_bytes, raw_bytes)
    for r in rows[::97]:
        got = docs.get(r["id"])
        assert got["body"] == r["body"] and got["meta"] == r["meta"] and got["n"] == r["n"]
    db.close()
    db = vv.connect(path)
    docs = db["docs"]
    assert docs.get(2999)["meta"] == rows[2999]["meta"] and db.verify().ok
    # the vectors stayed raw: the arena is a view of the mapped file, not a copy
    arena = db.engine.tables[1].columns["v"].arena.view()
    assert arena.base is not None and not arena.flags.owndata
    db.close()


def test_a_compressed_array_that_claims_another_size_or_a_bomb_is_refused(monkeypatch):
    from varvedb.errors import CorruptFileError
    from varvedb.storage import record
    parts, _, _ = record.encode({}, {"x": np.zeros(100_000, np.int64)},
                                packed=lambda n: True)
    good = b"".join(bytes(p) for p in parts)
    meta, arrays, _ = record.decode(good)
    assert (arrays["x"] == 0).all() and not arrays["x"].flags.writeable
    # the same frame declared as a larger array
    import msgspec
    mlen = int.from_bytes(good[:4], "little")
    head = msgspec.msgpack.decode(good[4:4 + mlen])
    head["_arrays"][0][2] = [200_000]
    new_head = msgspec.msgpack.encode(head)
    body = good[record.pad(4 + mlen):]
    forged = (len(new_head).to_bytes(4, "little") + new_head).ljust(
        record.pad(4 + len(new_head)), b"\0") + body
    with pytest.raises(CorruptFileError, match="not 1600000"):
        record.decode(forged)
    # a part that expands past MAX_RATIO times its stored bytes (the writer pads its
    # parts to the default; a lower cap shows the check)
    monkeypatch.setattr(record, "MAX_RATIO", 16)
    with pytest.raises(CorruptFileError, match="says it holds"):
        record.decode(good)


def test_sql_vacuum(db_path):
    db = vv.connect(db_path)
    _three_versions(db)
    assert db.sql("VACUUM").status == "VACUUM" and db.history()[0].version == 1
    assert db.sql("VACUUM (KEEP 2)").status == "VACUUM" and db.history()[0].version == 3
    db.sql("VACUUM (FULL, KEEP '2999-01-01T00:00:00+00:00')")
    assert db.history()[0].version == db.version
    for bad, state in (("VACUUM docs", "0A000"), ("VACUUM (KEEP 0)", "22023"),
                       ("VACUUM (KEEP 'tomorrow')", "22007"), ("VACUUM (PARALLEL 2)", "0A000")):
        with pytest.raises(vv.SqlError) as e:
            db.sql(bad)
        assert e.value.sqlstate == state, bad
    db.sql("BEGIN")
    with pytest.raises(vv.SqlError) as e:
        db.sql("VACUUM")
    assert e.value.sqlstate == "25001"
    db.sql("ROLLBACK")
    db.close()


@pytest.mark.parametrize("kind", ["enospc", "eio"])
def test_a_failed_write_or_sync_during_vacuum_leaves_the_file_and_the_connection(db_path, kind):
    from faults import Faults, installed
    db = vv.connect(db_path)
    docs = _three_versions(db)
    db.checkpoint()
    failures = 0
    for after in range(0, 40, 3):
        digest = file_digest(db_path)
        with installed(Faults(after)) as faults:
            faults.arm(kind, after=after)
            try:
                db.vacuum(keep=1)
            except vv.StorageError as e:
                failures += 1
                assert "as it was" in str(e) or "back at" in str(e), e
                assert file_digest(db_path) == digest
                assert [n for n in os.listdir(os.path.dirname(db_path)) if ".vacuum" in n] == []
                assert db.history()[0].version == 1 and docs.count(as_of=2) == 50
                docs.insert({"id": 500 + after, "n": 1, "t": "after", "v": _vec(1, 1)})
                continue
            faults.disarm()   # it fell past the vacuum's last write: the new file is in use
        break
    assert failures >= 3
    assert db.history()[0].version == db.version and db.verify().ok
    db.close()
    assert vv.connect(db_path)["docs"].get(500)["t"] == "after"


def test_vacuum_repairs_the_graph_when_asked_and_answers_as_exact_search(tmp_path):
    rng = np.random.default_rng(8)
    path = str(tmp_path / "rep.varve")
    db = vv.connect(path)
    docs = db.create_collection("docs", {"tag": "int",
                                         "emb": vv.Vector(8, metric="l2", index=vv.HNSW(m=8))})
    x = rng.standard_normal((3000, 8)).astype(np.float32)
    docs.insert_arrays(id=np.arange(3000), tag=np.zeros(3000, np.int64), emb=x)
    for r in range(2):            # two thirds of the row versions die
        x = x + rng.normal(scale=0.1, size=x.shape).astype(np.float32)
        docs.upsert([{"id": i, "tag": r + 1, "emb": x[i]} for i in range(3000)])
    db.checkpoint()
    before = open(path, "rb").read()
    with pytest.raises(vv.OptionError, match="rebuild' or 'repair"):
        db.vacuum(keep=1, graphs="mend")
    assert open(path, "rb").read() == before
    report = db.vacuum(keep=1, graphs="repair")
    assert report.rows_dropped == 6000
    t = docs.table
    vi = t.vector_indexes["emb"]
    vi.graph.validate(t.n)
    assert vi.linked == t.n == 3000 and len(vi.graph) == 3000
    q = rng.standard_normal((50, 8)).astype(np.float32)
    hits = [docs.search(vector=v, limit=10, ef=200).ids for v in q]
    exact = [docs.search(vector=v, limit=10, exact=True).ids for v in q]
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(hits, exact)]) >= 0.98
    db.close()
    with vv.connect(path) as db:      # the checkpoint holds the repaired graph
        assert db["docs"].count(where="tag = 2") == 3000 and db.verify().ok
