"""Random writes, transactions, checkpoints, reopens and injected faults against a dict oracle.

The oracle holds the acknowledged state (id -> document). Any step may meet a
fault armed by an earlier one: a write or sync failing with ENOSPC, EFBIG or
EIO, a short write, or a crash (SIGKILL-like: what was written stays; or a
power cut: what was not synced is lost). After every step:

* the writer connection reads exactly the oracle;
* a fresh read-only open of the file reads exactly the oracle;
* `verify_file` finds the file whole
(the last two once for each state of the file's bytes and the oracles: on the
same bytes they answer the same).

A failed call must leave the oracle as it was; a crash may keep or lose the
one commit in flight, and nothing else. A branch ("exp") comes and goes under
the same faults: made, written, dropped; the oracle holds each branch's state
and every invariant reads every branch. Frames are made to flush often (tiny
FLUSH_BYTES and BIG_FRAME) so that faults land between a transaction's frames.

SQL statements run under the same faults: an UPDATE ... RETURNING whose answer
fails on a row it changed, and COPY FROM a file with perhaps a malformed line;
a statement that fails leaves the oracle as it is (nothing of it is written).
A vacuum runs (under the same faults) while a thread tries `vv.connect` on the
file over and over: every try must be refused with WriterLockedError, before,
during and after the swap of the files. A read-only connection kept open from
the start refreshes after the writes and must read exactly main's oracle.

CI runs about 2 000 steps; `make soak` (VARVEDB_SOAK=1) runs twenty times more.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading

import numpy as np
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import varvedb as vv
from faults import KINDS, Crashed, Faults, installed
from varvedb.storage import log_writer

SOAK = bool(os.environ.get("VARVEDB_SOAK"))
DIM = 4
SCHEMA = {"tag": vv.Int(index="sorted"), "title": "text", "meta": "json",
          "emb": vv.Vector(DIM, metric="l2", index=vv.HNSW(m=4, ef_construction=16))}
IDS = st.integers(0, 40)
FIELDS = ("tag", "title", "meta", "emb")       # a document as _doc's tuple holds them
DOC = st.fixed_dictionaries({
    "tag": st.one_of(st.none(), st.integers(0, 4)),
    "title": st.one_of(st.none(), st.sampled_from(["a", "b", "ab"])),
    "meta": st.one_of(st.none(), st.fixed_dictionaries({"k": st.integers(0, 3)})),
    "emb": st.one_of(st.none(), st.lists(st.integers(-3, 3), min_size=DIM, max_size=DIM)),
})
# a fault armed just before a step: (kind, operations to let through, which operations)
FAULT = st.one_of(st.none(), st.tuples(st.sampled_from(KINDS), st.integers(0, 6),
                                       st.sampled_from(["any", "write", "sync"])))
# a malformed COPY line: (SQLSTATE, the line)
BAD_COPY_LINES = {
    "columns": ("22P04", b"7\t1"),
    "vector": ("22P02", b"7\t1\t[1,x,2,3]"),
    "dimension": ("22000", b"7\t1\t[1,2]"),
    "integer": ("22P02", b"7\tone\t[1,2,3,4]"),
    "utf-8": ("22021", b"7\t1\t[1,2,3,4]\t\xff"),
    "escape": ("22P04", b"7\t1\t[1,2,3,4]\\"),
}
TALLY = {"steps": 0, "faults_fired": 0, "crashes": 0, "storage_errors": 0, "aborted": 0,
         "kept_in_flight": 0, "vacuums": 0, "openers_refused": 0, "refreshes": 0,
         "failed_statements": 0, "unchanged": 0}


def _doc(d) -> tuple:
    emb = None if d["emb"] is None else tuple(float(x) for x in d["emb"])
    return (d["tag"], d["title"], None if d["meta"] is None else dict(d["meta"]), emb)


def read_state(db) -> dict:
    docs = db["docs"]
    out = {}
    for h in docs.find(select=["tag", "title", "meta", "emb"]):
        out[h.id] = _doc(h)
    return out


class FaultMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="varve-faults-")
        self.path = os.path.join(self.dir, "f.varve")
        self.saved = (log_writer.FLUSH_BYTES, log_writer.BIG_FRAME, log_writer.PREFILL_BYTES)
        log_writer.FLUSH_BYTES, log_writer.BIG_FRAME, log_writer.PREFILL_BYTES = \
            2048, 1024, 8192
        self.faults = Faults(seed=len(self.dir))
        self.scope = installed(self.faults)
        self.scope.__enter__()
        self.db = vv.connect(self.path)
        self.db.create_collection("docs", SCHEMA)
        self.oracles: dict = {"main": {}}    # branch -> its acknowledged state
        self.ro = vv.connect(self.path, readonly=True)   # follows the file by refresh()
        self.cur = "main"
        self.next_bulk = 1000
        self.checked = None     # (file digest, oracles) the last full check passed with

    @property
    def oracle(self) -> dict:
        return self.oracles[self.cur]

    @oracle.setter
    def oracle(self, state: dict) -> None:
        self.oracles[self.cur] = state

    def teardown(self):
        TALLY["faults_fired"] += sum(self.faults.fired.values())
        try:
            self.ro.close()
            if not self.faults.crashed:
                self.faults.disarm()
                self.db.close()
        finally:
            self.faults.kill_all()
            self.scope.__exit__(None, None, None)
            log_writer.FLUSH_BYTES, log_writer.BIG_FRAME, log_writer.PREFILL_BYTES = \
                self.saved
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- running one acknowledged-or-not change -----------------------------------

    def _change(self, write, after: dict) -> None:
        """Run `write`; if it returns, the oracle becomes `after`; if it raises a
        StorageError or TransactionAbortedError, the oracle stays; a crash may
        keep `after` or not."""
        try:
            write()
        except Crashed:
            self._crashed(after)
        except (vv.StorageError, vv.TransactionAbortedError) as e:
            TALLY["aborted" if isinstance(e, vv.TransactionAbortedError)
                  else "storage_errors"] += 1
        else:
            self.oracle = after

    def _crashed(self, in_flight: dict | None) -> None:
        TALLY["crashes"] += 1
        self._restart()
        seen = read_state(self.db)
        if in_flight is not None and seen == in_flight and seen != self.oracle:
            TALLY["kept_in_flight"] += 1
            self.oracle = in_flight
        assert seen == self.oracle

    def _restart(self) -> None:
        """After a simulated crash: the writer opens the file again, and the reader
        too (a power cut may have cut the file under its map: it died as well)."""
        self.faults.kill_all()
        self.faults.disarm()
        self.ro.close()
        self.db = vv.connect(self.path, branch=self.cur)
        self.ro = vv.connect(self.path, readonly=True)

    def _rows(self, ids, docs) -> list[dict]:
        return [{"id": i, **d} for i, d in zip(ids, docs)]

    # ---- rules ---------------------------------------------------------------

    @rule(ids=st.lists(IDS, min_size=1, max_size=5, unique=True), docs=st.lists(DOC, min_size=5,
                                                                                max_size=5), fault=FAULT)
    def insert(self, ids, docs, fault):
        self._arm(fault)
        ids = [i for i in ids if i not in self.oracle]
        if not ids:
            return
        rows = self._rows(ids, docs)
        after = {**self.oracle, **{r["id"]: _doc(r) for r in rows}}
        self._change(lambda: self.db["docs"].insert(rows), after)

    @rule(ids=st.lists(IDS, min_size=1, max_size=5, unique=True), docs=st.lists(DOC, min_size=5,
                                                                                max_size=5), fault=FAULT)
    def upsert(self, ids, docs, fault):
        self._arm(fault)
        rows = self._rows(ids, docs)
        after = {**self.oracle, **{r["id"]: _doc(r) for r in rows}}
        self._change(lambda: self.db["docs"].upsert(rows), after)

    @rule(ids=st.lists(IDS, min_size=1, max_size=5, unique=True), docs=st.lists(DOC, min_size=5,
                                                                                max_size=5),
          named=st.lists(st.sets(st.sampled_from(FIELDS)), min_size=5, max_size=5), fault=FAULT)
    def upsert_some_fields(self, ids, docs, named, fault):
        """upsert merges: a live document keeps the fields a row does not name."""
        self._arm(fault)
        rows = [{"id": i, **{k: v for k, v in d.items() if k in which}}
                for i, d, which in zip(ids, docs, named)]
        after = dict(self.oracle)
        for r in rows:
            old = after.get(r["id"])
            cur = dict.fromkeys(FIELDS) if old is None else dict(zip(FIELDS, old))
            after[r["id"]] = _doc({**cur, **{k: v for k, v in r.items() if k != "id"}})
        self._change(lambda: self.db["docs"].upsert(rows), after)

    @rule(ids=st.lists(IDS, min_size=1, max_size=6), fault=FAULT)
    def delete(self, ids, fault):
        self._arm(fault)
        after = {k: v for k, v in self.oracle.items() if k not in ids}
        self._change(lambda: self.db["docs"].delete(ids=ids), after)

    @rule(old=st.integers(0, 4), new=st.integers(0, 4), fault=FAULT)
    def update(self, old, new, fault):
        self._arm(fault)
        after = {k: ((new,) + v[1:] if v[0] == old else v) for k, v in self.oracle.items()}
        self._change(lambda: self.db["docs"].update({"tag": new}, where=f"tag = {old}"), after)

    @rule(old=st.integers(0, 4), zero_at=st.integers(0, 5), fault=FAULT)
    def update_returning(self, old, zero_at, fault):
        """UPDATE ... RETURNING whose answer divides by zero on a row it changed:
        the statement fails with 22012 and nothing of it is written."""
        self._arm(fault)
        fails = old + 1 == zero_at and any(v[0] == old for v in self.oracle.values())
        after = self.oracle if fails else {
            k: ((old + 1,) + v[1:] if v[0] == old else v) for k, v in self.oracle.items()}
        self._change(lambda: self._statement(
            f"UPDATE docs SET tag = tag + 1 WHERE tag = {old} RETURNING id, 1 / (tag - {zero_at})",
            "22012" if fails else None), after)

    @rule(n=st.integers(1, 30), bad=st.one_of(st.none(), st.tuples(
        st.integers(0, 29), st.sampled_from(sorted(BAD_COPY_LINES)))), fault=FAULT)
    def copy_from_a_file(self, n, bad, fault):
        """COPY ... FROM a file of n rows, one of them perhaps malformed: all the
        rows are written, or (a typed error naming the line) none of them."""
        self._arm(fault)
        ids = range(self.next_bulk, self.next_bulk + n)
        self.next_bulk += n
        lines = [b"%d\t%d\t[%d,1,2,3]" % (i, i % 5, i % 7) for i in ids]
        sqlstate = None
        if bad is not None and bad[0] < n:
            sqlstate, lines[bad[0]] = BAD_COPY_LINES[bad[1]]
        path = os.path.join(self.dir, "rows.copy")
        with open(path, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        after = self.oracle if sqlstate else {
            **self.oracle, **{i: (i % 5, None, None, (float(i % 7), 1.0, 2.0, 3.0)) for i in ids}}
        self._change(lambda: self._statement(
            f"COPY docs (id, tag, emb) FROM '{path}'", sqlstate), after)

    def _statement(self, sql: str, sqlstate: str | None) -> None:
        """Run one statement that must succeed, or fail with `sqlstate` (and so
        leave the oracle as it is: `_change`'s after is the oracle then)."""
        try:
            self.db.sql(sql)
        except vv.SqlError as e:
            assert e.sqlstate == sqlstate, (sql, e)
            TALLY["failed_statements"] += 1
        else:
            assert sqlstate is None, f"{sql} did not fail with {sqlstate}"

    @rule(n=st.integers(10, 100), fault=FAULT)
    def bulk(self, n, fault):
        self._arm(fault)
        ids, tags, emb, docs = self._bulk_rows(n)
        after = {**self.oracle, **docs}
        self._change(lambda: self.db["docs"].insert_arrays(id=ids, tag=tags, emb=emb), after)

    def _bulk_rows(self, n):
        ids = np.arange(self.next_bulk, self.next_bulk + n)
        self.next_bulk += n
        emb = (ids[:, None] % 7 + np.arange(DIM)).astype(np.float32)
        tags = ids % 5
        docs = {int(i): (int(t), None, None, tuple(float(x) for x in e))
                for i, t, e in zip(ids, tags, emb)}
        return ids, tags, emb, docs

    @rule(ids=st.lists(IDS, min_size=1, max_size=4, unique=True),
          docs=st.lists(DOC, min_size=4, max_size=4), drop=st.lists(IDS, max_size=3),
          commit=st.booleans(), bulk=st.integers(0, 60), fault=FAULT,
          fail_bulk=st.one_of(st.none(), st.sampled_from(["enospc", "efbig", "eio"])))
    def transaction(self, ids, docs, drop, commit, bulk, fault, fail_bulk):
        """Several writes in one transaction; `fail_bulk` fails the write of its
        bulk rows, which are flushed before the commit."""
        self._arm(fault)
        rows = self._rows(ids, docs)
        bulk_ids, tags, emb, bulk_docs = self._bulk_rows(bulk)
        after = {**self.oracle, **{r["id"]: _doc(r) for r in rows}, **bulk_docs}
        after = {k: v for k, v in after.items() if k not in drop}
        failed, committing = [], []
        try:
            with self.db.transaction():
                coll = self.db["docs"]
                # the bulk rows are flushed to the file before the commit
                def bulk_step():
                    if fail_bulk and bulk >= 40:
                        self.faults.arm(fail_bulk, on="write")
                    coll.insert_arrays(id=bulk_ids, tag=tags, emb=emb)

                for step in (lambda: coll.upsert(rows), bulk_step, lambda: coll.delete(ids=drop)):
                    try:
                        step()
                    except vv.StorageError:
                        failed.append(True)      # swallowed: the commit must still refuse
                    except vv.TransactionAbortedError:
                        assert failed, "aborted without a failed write"
                if not commit:
                    raise _Rollback
                committing.append(True)
        except _Rollback:
            return
        except Crashed:
            self._crashed(after if committing and not failed else None)
            return
        except (vv.StorageError, vv.TransactionAbortedError) as e:
            assert failed or isinstance(e, vv.StorageError)
            TALLY["aborted" if failed else "storage_errors"] += 1
            return
        assert not failed, "a transaction that saw an error committed"
        self.oracle = after

    @rule(fault=FAULT)
    def fork(self, fault):
        """Make branch "exp" from the current branch (when there is none)."""
        if "exp" in self.oracles:
            return
        self._arm(fault)
        self._branch_change(lambda: self.db.branch("exp"), True, dict(self.oracle))

    @rule(name=st.sampled_from(["main", "exp"]))
    def switch(self, name):
        if name in self.oracles:
            self.db.use(name)
            self.cur = name

    @rule(fault=FAULT)
    def drop(self, fault):
        if "exp" not in self.oracles or self.cur != "main":
            return
        self._arm(fault)
        self._branch_change(lambda: self.db.drop_branch("exp"), False, None)

    def _branch_change(self, change, made: bool, state) -> None:
        """A branch made (or dropped) exists afterwards (or not) if acknowledged,
        is as it was if the call failed, and either after a crash."""
        try:
            change()
        except Crashed:
            TALLY["crashes"] += 1
            self._restart()
            if ("exp" in [b.name for b in self.db.branches()]) == made:
                self._set_exp(made, state)
        except (vv.StorageError, vv.TransactionAbortedError):
            TALLY["storage_errors"] += 1
        else:
            self._set_exp(made, state)
        assert ("exp" in [b.name for b in self.db.branches()]) == ("exp" in self.oracles)

    def _set_exp(self, made: bool, state) -> None:
        if made:
            self.oracles["exp"] = state
        else:
            self.oracles.pop("exp", None)

    @rule(fault=FAULT)
    def checkpoint(self, fault):
        self._arm(fault)
        self._change(self.db.checkpoint, self.oracle)

    # a vacuum keeps main's line only: it refuses while a branch lives
    @precondition(lambda self: "exp" not in self.oracles)
    @rule(fault=FAULT, keep=st.sampled_from([None, 1, 3]))
    def vacuum_with_a_second_opener(self, fault, keep):
        """A vacuum while another connection tries to open the file for writing:
        it is refused every time (the vacuum hands its lock from the old file to
        the new one), and the vacuum changes no document."""
        done = threading.Event()
        got: list = []

        def opener():
            while not done.is_set():
                try:
                    vv.connect(self.path).close()
                    got.append("opened")
                except vv.WriterLockedError:
                    TALLY["openers_refused"] += 1
                except Crashed:
                    return
                except BaseException as e:   # noqa: BLE001 — reported below
                    got.append(repr(e))
                done.wait(0.0005)    # paces the tries over the whole vacuum

        def vacuum():
            # the opener stops before a crash is handled (which lets the lock go)
            thread = threading.Thread(target=opener)
            thread.start()
            try:
                self.db.vacuum(keep=keep, progress=False)
            finally:
                done.set()
                thread.join()

        TALLY["vacuums"] += 1
        self._arm(fault)
        self._change(vacuum, self.oracle)
        assert not got, f"a second writer's connect did not get WriterLockedError: {got[:3]}"

    @rule()
    def refresh_the_reader(self):
        """The read-only connection kept open follows the writes, vacuums and
        crashes: after refresh() it reads exactly main's acknowledged state."""
        TALLY["refreshes"] += 1
        self.ro.refresh()
        assert read_state(self.ro) == self.oracles["main"]

    @rule(fault=FAULT)
    def reopen(self, fault):
        self._arm(fault)
        try:
            self.db.close()
        except vv.StorageError:
            TALLY["storage_errors"] += 1
        except Crashed:
            self._crashed(None)
            return
        self.db = vv.connect(self.path, branch=self.cur)

    def _arm(self, fault) -> None:
        if fault is not None:
            kind, after, on = fault
            self.faults.arm(kind, after=after, on=on)

    # ---- the invariant ----------------------------------------------------------

    @invariant()
    def acknowledged_state_is_what_a_fresh_open_sees(self):
        TALLY["steps"] += 1
        assert read_state(self.db) == self.oracle
        # A fresh open and verify_file read the file alone: on the bytes and against
        # the oracles the last check passed with, they answer as they did then.
        # ~60 % of the steps leave both so (a step that failed before it wrote, an
        # aborted transaction, a refresh): those skip them.
        with open(self.path, "rb") as f:
            checked = (hashlib.sha256(f.read()).digest(), repr(self.oracles))
        if checked == self.checked:
            TALLY["unchanged"] += 1
            return
        for name, state in self.oracles.items():
            with vv.connect(self.path, readonly=True, branch=name) as ro:
                assert read_state(ro) == state, name
        report = vv.verify_file(self.path)
        assert report.ok, report
        self.checked = checked


class _Rollback(Exception):
    pass


FaultMachine.TestCase.settings = settings(
    max_examples=1000 if SOAK else 60, stateful_step_count=50, deadline=None,
    suppress_health_check=list(HealthCheck))
TestFaultMachine = FaultMachine.TestCase


def test_zz_report_the_tally():
    """Prints what the state machine survived (run with -s to see it)."""
    print(f"\nfault state machine: {TALLY}")
    assert TALLY["steps"] >= (40_000 if SOAK else 2_000)
