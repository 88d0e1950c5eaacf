"""A file other processes open while its writer vacuums and commits.

Real processes on a real file, no mocks:

* a second process's `vv.connect(path)` racing a vacuum: its open of the path
  is held (through the storage's file door, `fileio.open_file`) between the
  open and the lock while the first process vacuums, so it meets the one
  interleaving that matters every time: it opened the old file, and the
  vacuum renamed the new one over the path and let the old one's lock go.
  It must be refused (the first process holds the file throughout), and no
  commit it had acknowledged may be missing from the file afterwards;
* read-only processes refreshing over and over while this process commits
  bursts of one-row inserts (and vacuums between bursts) must never be told
  that history is damaged, and must end at the writer's last version;
* a read-only connection's refresh() loading the file another process vacuumed:
  its readers on other threads, made to answer while the load is stopped
  midway, get the old state's answers (never "no such collection"), then the
  new state's;
* a file opened through a symlink, or by a relative path before the process
  changes directory: a vacuum renames its new file over that same file (the
  link stays a link, a second writer is still refused, another directory's
  file of the same name is untouched).
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading

import pytest

import varvedb as vv
from varvedb.engine import checkpoint

from conftest import PYTHON, child_env, file_digest

HANG = 120.0   # seconds: a hang guard only


class Child:
    """A child process driven line by line over its stdin and stdout."""

    def __init__(self, script: str, *args):
        self.proc = subprocess.Popen([PYTHON, "-c", script, *map(str, args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=child_env(), text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self) -> str:
        try:
            got = self.lines.get(timeout=HANG)
        except queue.Empty:
            got = None
        if got is None:
            self.proc.kill()
            raise AssertionError(f"the child stopped answering: {self.proc.stderr.read()[-3000:]}")
        return got

    def send(self, text: str) -> None:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def finish(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(HANG) == 0, self.proc.stderr.read()[-3000:]


# ---- a second writer while a vacuum swaps the file ---------------------------------

OPENER = r"""
import sys
import varvedb as vv
from varvedb.storage import fileio
path, rounds = sys.argv[1], int(sys.argv[2])
real, held = fileio.open_file, []

def open_file(fd, p):
    # the first open of each connect waits here, between open and lock, while the
    # other process vacuums
    if not held:
        held.append(True)
        print("opened", flush=True)
        assert sys.stdin.readline() == "go\n"
    return real(fd, p)

fileio.open_file = open_file
for r in range(rounds):
    held.clear()
    try:
        db = vv.connect(path)
    except vv.WriterLockedError:
        print("refused", flush=True)
        continue
    db["t"].insert([{"id": 1000 + r, "x": r}])     # acknowledged: insert returned
    db.close()
    print("acked", 1000 + r, flush=True)
"""

ROUNDS = 3


def test_a_second_writer_opening_during_a_vacuum_is_refused_and_loses_nothing(tmp_path):
    path = str(tmp_path / "v.varve")
    db = vv.connect(path)
    t = db.create_collection("t", {"x": vv.Int()})
    opener = Child(OPENER, path, ROUNDS)
    acked, refused = [], 0
    try:
        for r in range(ROUNDS):
            assert opener.line() == "opened"
            t.insert([{"id": r, "x": r}])
            t.delete(ids=[r])                # a dead version for the vacuum to drop
            db.vacuum(keep=1)                # renames a new file over the path it opened
            opener.send("go")
            answer = opener.line().split()
            if answer[0] == "acked":
                acked.append(int(answer[1]))
            else:
                assert answer == ["refused"]
                refused += 1
        opener.finish()
        t.insert([{"id": 99, "x": 99}])
    finally:
        db.close()
    with vv.connect(path, readonly=True) as ro:
        held = set(ro["t"].find(select=["x"]).ids)
    # no acknowledged commit is lost ...
    assert set(acked) <= held, f"acknowledged commits lost: {sorted(set(acked) - held)}"
    # ... because none was acknowledged: the vacuuming connection held the file throughout
    assert refused == ROUNDS and held == {99}, (acked, held)
    assert vv.verify_file(path).ok


# ---- read-only processes refreshing under bursts of commits ------------------------

REFRESHER = r"""
import os, sys
import varvedb as vv
path, stop = sys.argv[1], sys.argv[2]
ro = vv.connect(path, readonly=True)
print("ready", flush=True)
refreshes = damaged = 0
while not os.path.exists(stop):
    try:
        ro.refresh()
        refreshes += 1
    except vv.CorruptFileError as e:
        damaged += 1
        print("damaged", e, flush=True)
print("done", ro.refresh(), ro["t"].count(), refreshes, damaged, flush=True)
"""

READERS = 3
BURSTS = 600        # each: the readers stopped, two commits, the readers let go, one more
VACUUM_EVERY = 150


def test_readers_refreshing_under_bursts_of_commits_never_see_damage(tmp_path):
    """Each reader is stopped (SIGSTOP) at whatever point of its refresh loop it has
    reached, two commits land, and it goes on: a refresh that had read the end of
    the log before them then finds whole commits past it. That is a commit in
    progress, not damage."""
    path, stop = str(tmp_path / "r.varve"), str(tmp_path / "stop")
    db = vv.connect(path, durability="off")
    t = db.create_collection("t", {"x": vv.Int()})
    readers = [Child(REFRESHER, path, stop) for _ in range(READERS)]
    pids = [r.proc.pid for r in readers]
    try:
        for r in readers:
            assert r.line() == "ready"
        n = 0
        for burst in range(BURSTS):
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            for pid in pids:
                _, status = os.waitpid(pid, os.WUNTRACED)
                assert os.WIFSTOPPED(status), status
            for _ in range(2):
                t.insert([{"id": n, "x": n}])
                n += 1
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            t.insert([{"id": n, "x": n}])
            n += 1
            if burst % VACUUM_EVERY == VACUUM_EVERY - 1:
                t.delete(ids=[n - 1])
                n -= 1
                db.vacuum(keep=2)
        version = db.version
    finally:
        open(stop, "w").close()
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        db.close()
    for r in readers:
        lines = []
        while not (lines and lines[-1].startswith("done")):
            lines.append(r.line())
        r.finish()
        damaged = [line for line in lines if line.startswith("damaged")]
        assert not damaged, (f"{len(damaged)} refreshes said a healthy file was damaged: "
                             f"{damaged[:3]}")
        _, seen, count, refreshes, _ = lines[-1].split()
        assert (int(seen), int(count)) == (version, n) and int(refreshes) > 0


# ---- readers on threads while refresh() loads a vacuumed file ------------------------

VACUUMER = r"""
import sys
import varvedb as vv
path = sys.argv[1]
for line in sys.stdin:      # one commit, then a vacuum that keeps it alone
    with vv.connect(path) as db:
        db["t"].insert([{"id": int(line), "x": 0}])
        db.vacuum(keep=1)
    print("vacuumed", flush=True)
"""

ROWS, REFRESHES, READER_THREADS, ANSWERS_HELD = 100, 3, 2, 20


class Hold:
    """One refresh's load, stopped until every reader has answered ANSWERS_HELD times."""

    def __init__(self):
        self.answers = [[] for _ in range(READER_THREADS)]
        self.done = [threading.Event() for _ in range(READER_THREADS)]


def test_readers_on_threads_see_a_whole_state_while_refresh_loads_a_vacuumed_file(
        tmp_path, monkeypatch):
    path = str(tmp_path / "r.varve")
    with vv.connect(path) as db:
        db.create_collection("t", {"x": vv.Int()}).insert(
            [{"id": i, "x": i} for i in range(ROWS)])
    ro = vv.connect(path, readonly=True)
    held: list[Hold] = []       # one a refresh that loaded a file, in order
    now: list[Hold | None] = [None]
    real = checkpoint.load

    def load(*args):
        # inside the load of the vacuumed file (it ends in a checkpoint), the
        # connection's readers answer before it goes on
        hold = Hold()
        held.append(hold)
        now[0] = hold
        for done in hold.done:
            assert done.wait(HANG), "a reader stopped answering"
        now[0] = None
        return real(*args)

    monkeypatch.setattr(checkpoint, "load", load)
    stop = threading.Event()
    seen: list[list] = [[] for _ in range(READER_THREADS)]

    def reader(i):
        while not stop.is_set():
            hold = now[0]
            try:
                got = ro["t"].count()
            except Exception as e:       # (main's answer here: NotFoundError)
                got = f"{type(e).__name__}: {e}"
            seen[i].append(got)
            if hold is not None and now[0] is hold:    # asked and answered inside it
                hold.answers[i].append(got)
                if len(hold.answers[i]) >= ANSWERS_HELD:
                    hold.done[i].set()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(READER_THREADS)]
    for th in threads:
        th.start()
    vacuumer = Child(VACUUMER, path)
    try:
        for r in range(REFRESHES):
            vacuumer.send(str(ROWS + r))
            assert vacuumer.line() == "vacuumed"
            assert ro.refresh() == r + 3     # created, the rows, then one a round
    finally:
        stop.set()
        for th in threads:
            th.join(HANG)
        vacuumer.finish()
    try:
        assert len(held) == REFRESHES        # each refresh loaded the new file
        for r, hold in enumerate(held):      # while it loaded: the old state, whole
            assert all(got == ROWS + r for answers in hold.answers for got in answers), \
                (r, [sorted(set(map(str, answers))) for answers in hold.answers])
        for answers in seen:                 # and every answer some whole state's
            assert set(answers) <= set(range(ROWS, ROWS + REFRESHES + 1)), \
                sorted(set(map(str, answers)) - set(map(str, range(ROWS, ROWS + REFRESHES + 1))))
        assert ro["t"].count() == ROWS + REFRESHES
    finally:
        ro.close()


# ---- the file a connection opened, whatever names it later ---------------------------

def test_a_vacuum_through_a_symlink_keeps_the_link_and_the_file_locked(tmp_path):
    real, link = str(tmp_path / "real.varve"), str(tmp_path / "link.varve")
    with vv.connect(real) as db:
        db.create_collection("t", {"x": vv.Int()}).insert([{"id": 1, "x": 1}])
    os.symlink(real, link)
    db = vv.connect(link)
    try:
        db.vacuum()        # its new file renamed over the target, not over the link
        assert os.path.islink(link) and os.path.realpath(link) == os.path.realpath(real)
        with pytest.raises(vv.WriterLockedError):   # the target is still this one's
            vv.connect(real)
        db["t"].insert([{"id": 2, "x": 2}])
    finally:
        db.close()
    with vv.connect(link, readonly=True) as ro:
        assert sorted(ro["t"].find().ids) == [1, 2] and ro.verify().ok


def test_a_relative_path_names_its_file_after_the_process_changes_directory(
        tmp_path, monkeypatch):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    mine, other = str(tmp_path / "x" / "rel.varve"), str(tmp_path / "y" / "rel.varve")
    with vv.connect(other) as db:     # the same history's shape, other ids
        t = db.create_collection("t", {"x": vv.Int()})
        for i in range(4):
            t.insert([{"id": 1000 + i, "x": i}])
    before = file_digest(other)
    monkeypatch.chdir(tmp_path / "x")
    db = vv.connect("rel.varve")
    try:
        t = db.create_collection("t", {"x": vv.Int()})
        for i in range(4):
            t.insert([{"id": i, "x": i}])
        monkeypatch.chdir(tmp_path / "y")
        db.vacuum(keep=2)      # of x's file still, not y's of the same name
        assert sorted(t.find().ids) == [0, 1, 2, 3]
        t.insert([{"id": 7, "x": 7}])
    finally:
        db.close()
    assert file_digest(other) == before
    with vv.connect(mine, readonly=True) as ro:
        assert sorted(ro["t"].find().ids) == [0, 1, 2, 3, 7] and ro.verify().ok
    assert db.path == os.path.realpath(mine)      # the file it opened, named whole
