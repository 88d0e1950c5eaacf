"""Branches: isolation, merge and conflicts against a dict-of-dicts oracle (a
hypothesis state machine over a real file, reopened and checkpointed on the
way), and the edges: errors that write nothing, search through one graph,
SQL's AS OF BRANCH, the CLI, verify, vacuum's refusal, crafted frames."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule)

import varvedb as vv
from varvedb.storage import format as F

IDS = st.integers(1, 6)
NAMES = ("a", "b", "c")


class Line:
    """The oracle's branch: (version, {id: tag}) for every version of its line."""

    def __init__(self, parent, fork, hist):
        self.parent, self.fork, self.hist = parent, fork, hist

    def at(self, v) -> dict:
        state = {}
        for ver, s in self.hist:
            if ver > v:
                break
            state = s
        return state

    @property
    def head(self) -> dict:
        return self.hist[-1][1] if self.hist else {}


def _changes(base: dict, head: dict) -> set:
    return {k for k in base.keys() | head.keys() if base.get(k) != head.get(k)}


def _ancestors(parents: dict, v: int) -> set:
    seen, todo = set(), [v]
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(parents[x])
    return seen


def _merge_bases(parents: dict, a: int, b: int) -> list:
    """The newest commits both a and b descend from: the common ancestors no
    other common ancestor descends from (two or more when merges crossed)."""
    common = _ancestors(parents, a) & _ancestors(parents, b)
    below = set().union(*(_ancestors(parents, x) - {x} for x in common))
    return sorted(common - below)


def _three_way(base: dict, ours: dict, theirs: dict):
    """('conflict', ids changed on both sides to different documents) or
    ('state', ours with theirs' changes since base applied)."""
    mine, yours = _changes(base, ours), _changes(base, theirs)
    clash = sorted(k for k in mine & yours if ours.get(k) != theirs.get(k))
    if clash:
        return "conflict", clash
    state = dict(ours)
    for k in yours - mine:
        if k in theirs:
            state[k] = theirs[k]
        else:
            del state[k]
    return "state", state


class BranchMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="varve-branch-")
        self.path = os.path.join(self.dir, "b.varve")
        self.db = vv.connect(self.path)
        self.db.create_collection("docs", {"tag": vv.Int(index="hash")})
        self.lines = {"main": Line(None, 0, [(1, {})])}
        # the commit graph: version -> the versions it was made from (a merge:
        # its branch's previous commit and the source's head; a fork: the fork)
        self.parents, self.states = {1: ()}, {1: {}}
        self.cur = "main"
        self.last_drop = 0

    def teardown(self):
        assert self.db.verify().ok
        self.db.close()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def docs(self):
        return self.db["docs"]

    def _written(self) -> int:
        return self.db.engine.written

    def _commit(self, name: str, state: dict, *merged: int) -> None:
        hist, v = self.lines[name].hist, self._written()
        self.parents[v], self.states[v] = (hist[-1][0],) + merged, state
        hist.append((v, state))

    @initialize()
    def start_with_a_branch(self):
        """Most runs are about merges: "a" is forked from main before the rules run."""
        self.fork("a", 0)

    @rule(k=IDS, tag=st.integers(0, 3), data=st.data())
    def upsert(self, k, tag, data):
        self._use(data.draw(st.sampled_from(sorted(self.lines))))   # on any line
        self.docs.upsert([{"id": k, "tag": tag}])
        self._commit(self.cur, {**self.lines[self.cur].head, k: tag})

    @rule(k=IDS)
    def delete(self, k):
        state = dict(self.lines[self.cur].head)
        if k not in state:
            return
        self.docs.delete(ids=[k])
        del state[k]
        self._commit(self.cur, state)

    @precondition(lambda self: len(self.lines) < 4)
    @rule(name=st.sampled_from(NAMES), back=st.integers(0, 3))
    def fork(self, name, back):
        if name in self.lines:
            with pytest.raises(vv.OptionError, match="exists already"):
                self.db.branch(name)
            return
        line = self.lines[self.cur]
        versions = [v for v, _ in line.hist]
        at = versions[max(0, len(versions) - 1 - back)]
        info = self.db.branch(name, at=at)
        assert info.created == self._written() and info.fork == at
        hist = [(v, s) for v, s in line.hist if v <= at] + [(info.created, line.at(at))]
        self.lines[name] = Line(self.cur, at, hist)
        self.parents[info.created], self.states[info.created] = (at,), line.at(at)

    @rule(data=st.data())
    def use(self, data):
        # the live lines, and one name not (or no longer) in use
        name = data.draw(st.sampled_from(
            sorted(self.lines) + [n for n in NAMES if n not in self.lines][:1]))
        if name not in self.lines:
            with pytest.raises(vv.NotFoundError):
                self.db.use(name)
            return
        self._use(name)

    @precondition(lambda self: len(self.lines) > 1)
    @rule(data=st.data(), down=st.booleans(), both_ways=st.booleans())
    def merge(self, data, down, both_ways):
        """A merge between a branch and its parent (down: the branch into its
        parent); both_ways: then the other way too (the feature-branch flow: a
        branch takes main, main then takes the branch)."""
        child = data.draw(st.sampled_from(sorted(n for n in self.lines if n != "main")))
        ends = [self.lines[child].parent, child]
        target, source = ends if down else ends[::-1]
        self._use(target)
        if self._merge(source) and both_ways:
            self._use(source)
            self._merge(target)

    def _use(self, name: str) -> None:
        self.db.use(name)
        self.cur = name

    def _merge(self, src) -> bool:
        """A three-way merge from the newest commit both heads descend from in
        the commit graph (where merges crossed, from any one of those). Did it
        go through?"""
        here, there = self.lines[self.cur], self.lines[src]
        head_t, head_s = here.hist[-1][0], there.hist[-1][0]
        allowed = [_three_way(self.states[b], here.head, there.head)
                   for b in _merge_bases(self.parents, head_t, head_s)]
        before = self._written()
        try:
            self.db.merge(src)
        except vv.MergeConflictError as e:
            assert list(e.conflicts) == ["docs"]
            assert ("conflict", e.conflicts["docs"]) in allowed, (e.conflicts, allowed)
            assert self._written() == before
            return False
        got = {d["id"]: d["tag"] for d in self.docs.find(limit=100)}
        assert ("state", got) in allowed, (got, allowed)
        if got == here.head:        # nothing to merge: no commit
            assert self._written() == before
        else:
            assert self._written() > before
            self._commit(self.cur, got, head_s)
        return True

    @rule(name=st.sampled_from(NAMES))
    def drop(self, name):
        line = self.lines.get(name)
        if line is None or name == self.cur or any(
                ln.parent == name for ln in self.lines.values()):
            return
        self.db.drop_branch(name)
        self._commit(line.parent, self.lines[line.parent].head)
        del self.lines[name]
        self.last_drop = self._written()

    @precondition(lambda self: self.cur == "main")
    @rule(keep=st.sampled_from((None, 1, 2, 3)))
    def vacuum(self, keep):
        """Every branch dropped (leaves first), then a vacuum: main's history from the
        oldest kept version (the last drop's, at least) on; each kept version reads
        as before."""
        while len(self.lines) > 1:
            self.drop(next(n for n in self.lines if n != "main" and not any(
                ln.parent == n for ln in self.lines.values())))
        first, newest = self.lines["main"].hist[0][0], self._written()
        want = max(first, 0 if keep is None else newest - keep + 1, self.last_drop)
        report = self.db.vacuum(keep=keep)
        assert report.oldest == want and report.version == newest
        main = self.lines["main"]
        main.hist = [(want, main.at(want))] + [(v, s) for v, s in main.hist if v > want]
        self.parents = {v: (main.hist[i - 1][0],) if i else ()
                        for i, (v, _) in enumerate(main.hist)}
        self.states = dict(main.hist)

    @rule(checkpoint=st.booleans())
    def reopen(self, checkpoint):
        if checkpoint:
            self.db.checkpoint()
        self.db.close()
        self.db = vv.connect(self.path, branch=self.cur)

    @invariant()
    def every_branch_reads_its_oracle(self):
        db = self.db
        for name, line in self.lines.items():
            s = db.session()
            s.use(name)
            docs = s.collection("docs")
            got = {d["id"]: d["tag"] for d in docs.find(limit=100)}
            assert got == line.head, (name, got, line.head)
            versions = [v for v, _ in line.hist]
            assert [h.version for h in _history(db, name)] == versions
            for v in versions[-3:]:
                got = {d["id"]: d["tag"] for d in docs.find(limit=100, as_of=v)}
                assert got == line.at(v), (name, v)
                assert docs.count(where="tag = 1", as_of=v) == \
                    sum(1 for t in line.at(v).values() if t == 1)
            for k in range(1, 7):
                d = docs.get(k)
                assert (d["tag"] if d else None) == line.head.get(k)


def _history(db, name):
    old = db.current_branch
    db.use(name)
    try:
        return db.history()
    finally:
        db.use(old)


TestBranchMachine = BranchMachine.TestCase
TestBranchMachine.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---- the edges ------------------------------------------------------------------

@pytest.fixture
def db(tmp_path):
    d = vv.connect(tmp_path / "e.varve")
    yield d
    d.close()


def _file_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_branch_search_sees_its_rows_through_the_one_graph(db):
    rng = np.random.default_rng(3)
    docs = db.create_collection("docs", {"tag": vv.Int(index="hash"),
                                         "emb": vv.Vector(8, index=vv.HNSW(m=8))})
    vecs = rng.standard_normal((300, 8)).astype(np.float32)
    docs.insert_arrays(id=np.arange(300), tag=np.arange(300) % 3, emb=vecs)
    db.branch("exp")
    db.use("exp")
    moved = np.arange(0, 300, 5)
    docs.update({"tag": 7}, ids=moved.tolist())
    docs.delete(ids=[1, 2])
    docs.insert([{"id": 1000, "tag": 7, "emb": vecs[3].tolist()}])
    db.checkpoint()             # the graph links every branch's rows: one graph
    q = vecs[3]
    for where, want in (("tag = 7", set(moved.tolist()) | {1000}),
                        (None, set(range(300)) - {1, 2} | {1000})):
        hits = docs.search(vector=q, where=where, limit=10)
        exact = docs.search(vector=q, where=where, limit=10, exact=True)
        assert set(hits.ids) <= want and hits.ids == exact.ids
    db.use("main")
    hits = docs.search(vector=q, where="tag = 7", limit=10)
    assert hits.ids == []
    assert 1000 not in docs.search(vector=q, limit=20).ids
    assert docs.count(where="tag = 7") == 0 and docs.count() == 300


def test_errors_write_nothing(db, tmp_path):
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": 1, "tag": 1}])
    db.branch("exp")
    path = tmp_path / "e.varve"
    before = _file_bytes(path)
    for call, error, match in [
            (lambda: db.branch("exp"), vv.OptionError, "exists already"),
            (lambda: db.branch("no way"), vv.OptionError, "invalid branch name"),
            (lambda: db.use("nope"), vv.NotFoundError, "no branch named 'nope'"),
            (lambda: db.merge("nope"), vv.NotFoundError, "no branch named"),
            (lambda: db.drop_branch("main"), vv.BranchError, "main cannot be dropped"),
            (lambda: db.merge("main"), vv.BranchError, "into itself"),
            (lambda: db.branch("late", at=99), vv.VersionNotFoundError, "does not exist")]:
        with pytest.raises(error, match=match):
            call()
    db.use("exp")
    with pytest.raises(vv.BranchError, match="in use"):
        db.drop_branch("exp")
    for ddl in (lambda: db.create_collection("x", {"a": "int"}),
                lambda: docs.add_field("b", "int"),
                lambda: db.drop_collection("docs")):
        with pytest.raises(vv.BranchError, match="changed on main"):
            ddl()
    assert _file_bytes(path)[:len(before)] == before
    with db.transaction():
        docs.insert([{"id": 2, "tag": 2}])
        with pytest.raises(vv.TransactionError):
            db.use("main")
        with pytest.raises(vv.TransactionError):
            db.branch("inner")
    db.use("main")
    with pytest.raises(vv.BranchError, match="merge or drop"):
        db.vacuum(keep=1)
    db.drop_branch("exp")
    with pytest.raises(vv.NotFoundError):
        db.use("exp")
    db.vacuum(keep=1)           # dropped: its rows go with the history
    assert docs.count() == 1 and db.verify().ok and db.branches()[0].name == "main"


def test_a_branch_at_an_older_version_is_held_to_the_schema_made_since(db, tmp_path):
    """db.branch(name, at=old) holds the rows its parent held at `old`: one that a
    CHECK or an expression index made since refuses (their checks saw only the
    rows live branches held) refuses the branch — 23514 / 22003, nothing written,
    as restore(old) is refused — where it was made and its merge brought the
    violating row to main (red-team 19)."""
    db.sql("CREATE TABLE t (id int PRIMARY KEY, v int, e vector(3))")
    db.sql("INSERT INTO t VALUES (1, -5, '[1,0,0]'), (2, 3, '[1000000,0,0]')")
    old = db.version
    db.sql("UPDATE t SET v = 5 WHERE id = 1")
    db.sql("ALTER TABLE t ADD CONSTRAINT pos CHECK (v > 0)")
    fits = db.version                        # id 2's vector: past float16, no index yet
    db.sql("UPDATE t SET e = '[0,1,0]' WHERE id = 2")
    db.sql("CREATE INDEX h ON t USING hnsw ((e::halfvec(3)) halfvec_l2_ops)")
    before, path = db.version, tmp_path / "e.varve"
    size = len(_file_bytes(path))
    for at, error in ((old, vv.CheckViolationError), (fits, vv.VectorRangeError)):
        with pytest.raises(error, match=f"branch 'past' at version {at}") as got:
            db.branch("past", at=at)
        assert got.value.sqlstate == {vv.CheckViolationError: "23514",
                                      vv.VectorRangeError: "22003"}[error]
        assert db.version == before and [b.name for b in db.branches()] == ["main"]
        assert len(_file_bytes(path)) == size
    db.sql("INSERT INTO t VALUES (3, 1, '[0,0,1]')")
    db.branch("now", at=before)              # an older version whose rows fit
    db.use("now")
    assert db.sql("SELECT id, v FROM t ORDER BY id").rows == [(1, 5), (2, 3)]
    db.use("main")
    assert [b.name for b in db.branches()] == ["main", "now"]


def test_a_dropped_branch_stops_its_sessions_and_its_name_is_free(db):
    docs = db.create_collection("docs", {"tag": "int"})
    db.branch("exp")
    s = db.session()
    s.use("exp")
    s.collection("docs").insert([{"id": 5, "tag": 5}])
    db.drop_branch("exp")
    with pytest.raises(vv.BranchError, match="dropped"):
        s.collection("docs").get(5)
    db.branch("exp")          # a new branch of the same name sees nothing of the old
    s.use("exp")
    assert s.collection("docs").get(5) is None and docs.get(5) is None


def test_merge_conflict_lists_ids_and_equal_changes_are_no_conflict(db):
    docs = db.create_collection("docs", {"tag": "int", "note": "text", "meta": "json"})
    docs.insert([{"id": i, "tag": 0, "note": "x", "meta": {"k": i}} for i in range(1, 6)])
    db.branch("exp")
    docs.update({"tag": 1}, where="id IN (1, 2)")        # main
    docs.update({"note": "same"}, where="id = 3")
    db.use("exp")
    docs.update({"tag": 2}, where="id = 1")               # both: different
    docs.delete(ids=[2])                                  # both: deleted vs changed
    docs.update({"note": "same"}, where="id = 3")         # both: equal
    docs.update({"meta": {"k": 40}}, where="id = 4")      # exp only
    db.use("main")
    v = db.version
    with pytest.raises(vv.MergeConflictError) as e:
        db.merge("exp")
    assert e.value.conflicts == {"docs": [1, 2]} and "1, 2" in str(e.value)
    assert db.version == v
    db.use("exp")
    docs.upsert([{"id": 1, "tag": 1, "note": "x", "meta": {"k": 1}},
                 {"id": 2, "tag": 1, "note": "x", "meta": {"k": 2}}])
    db.use("main")
    db.merge("exp")
    assert docs.get(4)["meta"] == {"k": 40} and docs.get(1)["tag"] == 1
    assert db.diff("main", "exp") == {"docs": vv.Changes()}
    assert db.merge("exp") == db.version        # nothing new: no commit


@pytest.mark.parametrize("first", ["branch takes main", "main takes branch"])
def test_a_merge_after_one_the_other_way_brings_each_sides_own_work(db, first):
    """Both sides changed, one merged the other, then the other way: the second
    merge brought nothing (no commit) when its base was the first merge's commit,
    which holds the receiving side's own work the giver never had."""
    docs = db.create_collection("docs", {"t": "text"})
    docs.insert([{"id": i, "t": "orig"} for i in (1, 2)])
    db.branch("feature")
    db.use("feature")
    docs.update({"t": "feature work"}, ids=[2])
    docs.insert([{"id": 3, "t": "feature new"}])
    db.use("main")
    docs.update({"t": "main fix"}, ids=[1])
    want = {1: "main fix", 2: "feature work", 3: "feature new"}
    order = ["feature", "main"] if first == "branch takes main" else ["main", "feature"]
    for here, there in (order, order[::-1]):
        db.use(here)
        before = db.version
        assert db.merge(there) > before
        assert {d["id"]: d["t"] for d in docs.find()} == want
    assert db.diff("main", "feature") == {"docs": vv.Changes()}
    # and the next round: only what changed since is merged; a change on both
    # sides since is a conflict
    db.use(order[0])
    docs.update({"t": "again"}, ids=[3])
    db.use(order[1])
    docs.update({"t": "mine"}, ids=[3])
    with pytest.raises(vv.MergeConflictError) as e:
        db.merge(order[0])
    assert e.value.conflicts == {"docs": [3]}


def test_diff_of_versions_and_branches(db):
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": i, "tag": i} for i in range(1, 4)])
    v1 = db.version
    docs.update({"tag": 9}, where="id = 1")
    docs.update({"tag": 2}, where="id = 2")     # same value: no change
    docs.delete(ids=[3])
    docs.insert([{"id": 4, "tag": 4}])
    ch = db.diff(v1, db.version)["docs"]
    assert (ch.added, ch.changed, ch.deleted) == ([4], [1], [3])
    db.branch("exp", at=v1)
    assert db.diff(("exp", db.version), "main")["docs"] == ch
    with pytest.raises(vv.OptionError):
        db.diff(("exp",), "main")


def test_text_ids_and_a_branch_of_a_branch(db):
    docs = db.create_collection("docs", {"id": "text", "tag": "int"})
    docs.insert([{"id": "a", "tag": 1}, {"id": "b", "tag": 2}])
    db.branch("one")
    db.use("one")
    docs.update({"tag": 10}, where="id = 'a'")
    db.branch("two")
    db.use("two")
    docs.delete(ids=["b"])
    docs.insert([{"id": "c", "tag": 3}])
    assert {d["id"] for d in docs.find()} == {"a", "c"} and docs.get("a")["tag"] == 10
    db.use("one")
    assert {d["id"] for d in docs.find()} == {"a", "b"}
    db.merge("two")
    assert {d["id"]: d["tag"] for d in docs.find()} == {"a": 10, "c": 3}
    db.use("main")
    assert {d["id"]: d["tag"] for d in docs.find()} == {"a": 1, "b": 2}
    assert [b.name for b in db.branches()] == ["main", "one", "two"]
    with pytest.raises(vv.BranchError, match="drop them first"):
        db.drop_branch("one")
    h = docs.history("b")
    assert len(h) == 1 and h[0]["deleted"] is None
    db.use("two")
    assert docs.history("b")[0]["deleted"] is not None


def test_sql_as_of_branch(db):
    db.sql("CREATE TABLE t (id bigint PRIMARY KEY, tag int)")
    db.sql("INSERT INTO t VALUES (1, 1), (2, 2)")
    fork = db.version
    db.branch("exp")
    db.use("exp")
    db.sql("UPDATE t SET tag = 10 WHERE id = 1")
    with pytest.raises(vv.VarveError) as e:
        db.sql("CREATE TABLE u (id bigint PRIMARY KEY)")
    assert e.value.sqlstate == "0A000"
    db.use("main")
    q = "SELECT id, tag FROM t ORDER BY id"
    assert db.sql(q).rows == [(1, 1), (2, 2)]
    assert db.sql(q + " AS OF BRANCH 'exp'").rows == [(1, 10), (2, 2)]
    assert db.sql(q + f" AS OF BRANCH 'exp' VERSION {fork}").rows == [(1, 1), (2, 2)]
    assert db.sql(q + " AS OF BRANCH $1", ["exp"]).rows == [(1, 10), (2, 2)]
    hist = db.sql("SELECT version FROM varvedb_history() AS OF BRANCH 'exp'").rows
    assert [v for (v,) in hist] == [h.version for h in _history(db, "exp")]
    assert [v for (v,) in db.sql("SELECT version FROM varvedb_history()").rows] == \
        [h.version for h in db.history()] != [v for (v,) in hist]
    with pytest.raises(vv.NotFoundError):
        db.sql(q + " AS OF BRANCH 'nope'")
    with pytest.raises(vv.SqlError) as e:
        db.sql(q + " AS OF BRANCH $1", [3])
    assert e.value.sqlstate == "22023"


def test_branches_survive_a_crash_and_verify_proves_them(tmp_path):
    path = tmp_path / "c.varve"
    code = f"""
import os, varvedb as vv
db = vv.connect({str(path)!r})
docs = db.create_collection("docs", {{"tag": "int"}})
docs.insert([{{"id": 1, "tag": 1}}])
db.branch("exp"); db.use("exp")
docs.update({{"tag": 2}}, where="id = 1")
print(db.history()[-1].chain, flush=True)
os._exit(9)        # no close, no checkpoint
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    chain = out.stdout.strip()
    with vv.connect(path, branch="exp") as db:
        assert db["docs"].get(1)["tag"] == 2 and db.history()[-1].chain == chain
        assert db.verify(anchor=(db.version, chain)).ok
        db.use("main")
        assert db["docs"].get(1)["tag"] == 1
        assert db.engine.log.file.format_version == F.FORMAT_VERSION
    raw = bytearray(_file_bytes(path))
    # the branch id lies in the commit's last 4 bytes: flip it and verify breaks
    commits = [i for i in range(4096, len(raw), 64) if raw[i:i + 4] == b"VFRM"
               and raw[i + 4] == 1]
    last = commits[-1]
    raw[last + 64 + 124] ^= 1
    with open(path, "wb") as f:
        f.write(raw)
    assert not vv.verify_file(str(path)).ok


def test_cli_mirrors_the_branch_verbs(tmp_path):
    path = str(tmp_path / "cli.varve")
    with vv.connect(path) as db:
        db.create_collection("docs", {"tag": "int"}).insert([{"id": 1, "tag": 1}])

    # in this process, as test_history_ops runs the CLI's verbs (a spawned
    # `python -m varvedb` apiece cost a fresh interpreter's imports, ~1.5 s each;
    # tests/test_cli_and_docs.py runs the entry point itself)
    from click.testing import CliRunner
    from varvedb.cli import main

    def cli(*args, ok=True):
        r = CliRunner().invoke(main, list(args))
        assert (r.exit_code == 0) == ok, r.output
        return r.output
    assert "forked from main at version 2" in cli("branch", path, "exp")
    with vv.connect(path, branch="exp") as db:
        db["docs"].update({"tag": 5}, where="id = 1")
    assert "exp" in cli("branches", path)
    assert "changed [1]" in cli("diff", path, "main", "exp")
    assert "merged exp into main" in cli("merge", path, "exp")
    assert "exp" in cli("history", path, "--branch", "exp")
    assert "dropped branch exp" in cli("drop-branch", path, "exp")
    assert "no branch named" in cli("merge", path, "exp", ok=False)
    with vv.connect(path) as db:
        assert db["docs"].get(1)["tag"] == 5


def test_text_search_on_a_branch_sees_its_rows(db):
    docs = db.create_collection("docs", {"body": vv.Text(fts=True), "tag": "int"})
    docs.insert([{"id": i, "body": f"plain words {i}", "tag": 0} for i in range(20)])
    db.branch("exp")
    db.use("exp")
    docs.update({"body": "rare heron sighting"}, where="id IN (3, 4)")
    docs.delete(ids=[5])
    assert sorted(docs.search(text="heron", limit=10).ids) == [3, 4]
    assert docs.count(where="body @@ 'plain'") == 17
    db.use("main")
    assert docs.search(text="heron", limit=10).ids == []
    assert docs.count(where="body @@ 'plain'") == 20
    assert db.sql("SELECT count(*) FROM docs WHERE body @@ 'heron' "
                  "AS OF BRANCH 'exp'").rows == [(2,)]


def test_an_older_file_opens_and_is_upgraded_only_when_it_gets_a_branch(tmp_path):
    import struct
    import zlib
    path = tmp_path / "old.varve"
    with vv.connect(path) as db:
        db.create_collection("docs", {"tag": "int"}).insert([{"id": 1, "tag": 1}])
    with open(path, "r+b") as f:           # stamp it as a format-2 file
        head = f.read(F.HEADER_SIZE)
        magic, _, flags, file_id, created = F._HEADER.unpack(head[:F._HEADER.size])
        body = F._HEADER.pack(magic, 2, flags, file_id, created)
        f.seek(0)
        f.write(body + struct.pack("<I", zlib.crc32(body)))
    with vv.connect(path) as db:
        db["docs"].insert([{"id": 2, "tag": 2}])        # a main commit: format 2 still
        assert db.engine.log.file.format_version == 2
    assert F.unpack_header(_file_bytes(path)[:64]).format_version == 2
    with vv.connect(path) as db:
        db.branch("exp")
        assert db.engine.log.file.format_version == F.FORMAT_VERSION
    assert F.unpack_header(_file_bytes(path)[:64]).format_version == F.FORMAT_VERSION
    with vv.connect(path, branch="exp") as db:
        assert db["docs"].count() == 2 and db.verify().ok


def test_a_reader_in_another_connection_follows_the_branches(tmp_path):
    path = tmp_path / "ro.varve"
    db = vv.connect(path)
    docs = db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": 1, "tag": 1}])
    ro = vv.connect(path, readonly=True)
    db.branch("exp")
    db.use("exp")
    docs.update({"tag": 2}, where="id = 1")
    with pytest.raises(vv.NotFoundError):
        ro.use("exp")
    ro.refresh()
    ro.use("exp")
    assert ro["docs"].get(1)["tag"] == 2 and ro.current_branch == "exp"
    with pytest.raises(vv.ReadOnlyError):
        ro.branch("other")
    ro.use("main")
    assert ro["docs"].get(1)["tag"] == 1
    ro.close()
    db.close()


def test_automatic_retention_waits_while_a_branch_lives(tmp_path):
    import warnings
    db = vv.connect(tmp_path / "r.varve", retain=1, retain_dead=0.5)
    docs = db.create_collection("docs", {"n": "int"})
    docs.insert([{"id": i, "n": 0} for i in range(50)])
    db.branch("exp")
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no "automatic vacuum failed" warning either
        for r in range(1, 4):
            docs.update({"n": r}, where="n >= 0")
            db.engine.retention.stop()
    assert db.history()[0].version == 1      # nothing vacuumed
    db.drop_branch("exp")
    docs.update({"n": 9}, where="n >= 0")
    db.engine.retention.stop()
    assert db.history()[0].version == db.version and docs.count(where="n = 9") == 50
    db.close()


def _readme_flow(path) -> vv.Database:
    """README "Branches" as written, with a bulk of rows the branch adds and deletes
    again (so the file outgrows its first allocation and a vacuum has bytes to free)."""
    db = vv.connect(path)
    items = db.create_collection("items", {"price": vv.Int(index="sorted"),
                                           "emb": vv.Vector(2, metric="l2")})
    items.insert([{"id": i, "price": 10 * i, "emb": [i, 1]} for i in range(1, 6)])
    db.branch("sale")
    db.use("sale")
    items.update({"price": 5}, where="id = 2")
    items.delete(ids=[5])
    bulk = np.arange(100, 60_100)
    items.insert_arrays(id=bulk, price=bulk, emb=np.ones((len(bulk), 2), np.float32))
    items.delete(ids=bulk.tolist())
    db.use("main")
    items.update({"price": 25}, where="id = 3")
    db.merge("sale")
    assert items.get(2)["price"] == 5 and items.get(5) is None and items.get(3)["price"] == 25
    db.drop_branch("sale")
    assert db.verify().ok
    return db


def _content(db, as_of=None) -> dict:
    return {d["id"]: (d["price"], d["emb"].tolist())
            for d in db["items"].find(limit=1000, as_of=as_of, select=["price", "emb"])}


@pytest.mark.parametrize("keep", [None, 2])
def test_vacuum_after_the_readme_merge_and_drop(tmp_path, keep):
    """vacuum() and vacuum(keep=2) after merge() + drop_branch() raised
    CorruptFileError / BranchError: the kept commits named a branch the new file
    does not hold. The base is now the last drop's state at least."""
    path = tmp_path / "catalog.varve"
    db = _readme_flow(path)
    merged, drop = _content(db), db.version
    before = os.path.getsize(path)
    report = db.vacuum(keep=keep)
    assert report.oldest == drop and report.version == drop and report.rows_dropped > 60_000
    assert os.path.getsize(path) < before and report.bytes_after < report.bytes_before
    assert db.verify().ok and _content(db) == merged
    assert _content(db, as_of=drop) == merged
    with pytest.raises(vv.VersionNotFoundError):
        db["items"].find(as_of=drop - 1)
    assert [b.name for b in db.branches()] == ["main"]
    db["items"].insert({"id": 7, "price": 70, "emb": [7, 1]})    # writes go on
    db.close()
    db = vv.connect(path)
    assert db.verify().ok and {k: v for k, v in _content(db).items() if k != 7} == merged
    assert _content(db, as_of=drop) == merged
    assert db["items"].search([2, 1], limit=1).ids == [2]
    assert db.vacuum(keep=keep).oldest == (drop if keep is None else db.version - 1)
    assert db.verify().ok
    db.close()


def test_a_checkpoint_of_a_file_with_branches_is_what_open_loads(tmp_path):
    """The checkpoint did not hold the branches its history names, so every open
    of a file that ever had one replayed the whole log and rebuilt every graph.
    A read-only open never links: a graph linked in full came from the checkpoint."""
    from varvedb.engine import checkpoint
    path = tmp_path / "ck.varve"
    rng = np.random.default_rng(5)
    with vv.connect(path) as db:
        docs = db.create_collection("docs", {"tag": "int", "emb": vv.Vector(8, index=vv.HNSW(m=8))})
        docs.insert_arrays(id=np.arange(200), tag=np.zeros(200, np.int64),
                           emb=rng.standard_normal((200, 8)).astype(np.float32))
        for k, name in enumerate(("merged", "dropped", "kept")):
            db.branch(name)
            db.use(name)
            docs.update({"tag": 1}, ids=[k])
            db.use("main")
        db.merge("merged")
        db.drop_branch("dropped")
        db.checkpoint()
        want = {d["id"]: d["tag"] for d in docs.find(limit=300)}
        sb = db.engine.log.file.superblock
    state = checkpoint.load(memoryview(path.read_bytes()), sb.checkpoint_offset, sb)
    assert sorted(b.name for b in state.catalog.live()) == ["kept", "main", "merged"]
    with vv.connect(path, readonly=True) as db:
        docs = db.collection("docs")
        assert docs.index_status("emb")["unlinked"] == 0
        assert {d["id"]: d["tag"] for d in docs.find(limit=300)} == want
        assert [b.name for b in db.branches()] == ["main", "merged", "kept"]
        db.use("kept")
        assert docs.count(where="tag = 1") == 1
