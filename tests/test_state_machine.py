"""Random sequences of writes, transactions, reopens and checkpoints against a dict oracle.

The oracle keeps the full state (id -> document) of every committed version.
After every step, for the current version and a few earlier ones (as_of),
get / count / find under a set of filters must equal the oracle, and exact
vector search must equal a brute-force numpy ranking of the visible rows that
pass a filter (ids, and scores within 1e-4).

Filters are evaluated in the oracle with SQL's three-valued logic (None is
unknown), so NULL handling, indexes (tag has a sorted index) and json paths
are all compared against a plain Python reading of the same expression.

`HnswMachine` runs the same steps on a collection whose vector field has an
HNSW index, linked in the background while the steps go on (get / count /
find and the API's search at the current version only: the index does not
change how they read, and the planner answers sets this small by exact scan),
and also holds the graph path (the walk below the watermark plus the exact scan above it)
to exact search over the same allowed rows: identical rows when ef is at
least the number of rows, a recall floor otherwise.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile

import numpy as np
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule)

import varvedb as vv
from varvedb.index import flat
from varvedb.engine.branches import main_view

IDS = range(0, 31)
SOAK = 10 if os.environ.get("VARVEDB_SOAK") else 1     # `make soak`: ten times the examples

# ---- three-valued predicates -----------------------------------------------------------


def _cmp(a, op, b):
    return None if a is None else op(a, b)


def _not(x):
    return None if x is None else not x


def _and(x, y):
    if x is False or y is False:
        return False
    return None if x is None or y is None else True


def _or(x, y):
    if x is True or y is True:
        return True
    return None if x is None or y is None else False


def _src(d):
    m = d["meta"]
    return m.get("src") if isinstance(m, dict) else None


FILTERS = {
    "tag = 1": lambda i, d: _cmp(d["tag"], int.__eq__, 1),
    "tag < 2": lambda i, d: _cmp(d["tag"], int.__lt__, 2),
    "tag >= 3": lambda i, d: _cmp(d["tag"], int.__ge__, 3),
    "tag IN (0, 4)": lambda i, d: None if d["tag"] is None else d["tag"] in (0, 4),
    "tag IS NULL": lambda i, d: d["tag"] is None,
    "NOT (tag = 1)": lambda i, d: _not(_cmp(d["tag"], int.__eq__, 1)),
    "title = 'ab'": lambda i, d: _cmp(d["title"], str.__eq__, "ab"),
    "title LIKE 'a%'": lambda i, d: _cmp(d["title"], str.startswith, "a"),
    "meta->>'src' = 'x'": lambda i, d: _cmp(_src(d), str.__eq__, "x"),
    "tag = 2 OR title LIKE 'b%'": lambda i, d: _or(_cmp(d["tag"], int.__eq__, 2),
                                                   _cmp(d["title"], str.startswith, "b")),
    "NOT (tag <> 2 AND meta IS NOT NULL)": lambda i, d: _not(
        _and(_cmp(d["tag"], int.__ne__, 2), d["meta"] is not None)),
    "emb IS NULL": lambda i, d: d["emb"] is None,
    "id < 10 AND tag IS NOT NULL": lambda i, d: _and(i < 10, d["tag"] is not None),
}
WHERE = st.sampled_from(sorted(FILTERS))
SEARCH_FILTERS = [None, "tag < 2", "title LIKE 'a%'", "NOT (tag = 1)"]
QUERIES = [np.array(q, np.float32) for q in ([1, 0.5, -1, 0], [0, 0, 0, 2], [-1.5, 1, 1, 0.5])]


def matches(where, i, d) -> bool:
    return FILTERS[where](i, d) is True


# ---- documents ----------------------------------------------------------------------

ids_st = st.integers(min_value=IDS.start, max_value=IDS.stop - 1)
tag_st = st.none() | st.integers(0, 4)
title_st = st.none() | st.sampled_from(["a", "ab", "b", "ba", "c"])
meta_st = (st.none() | st.just({}) | st.just([1, 2])
           | st.fixed_dictionaries({"src": st.sampled_from(["x", "y"])}))
emb_st = st.none() | st.lists(st.integers(-4, 4).map(lambda x: x / 2), min_size=4, max_size=4)


@st.composite
def doc_st(draw, with_id=True):
    d = {"tag": draw(tag_st), "title": draw(title_st), "meta": draw(meta_st),
         "emb": draw(emb_st)}
    if with_id:
        d["id"] = draw(ids_st)
    return d


rows_st = st.lists(doc_st(), min_size=1, max_size=4, unique_by=lambda d: d["id"])
set_st = st.one_of(                     # the fields an update sets
    st.fixed_dictionaries({"tag": tag_st}), st.fixed_dictionaries({"title": title_st}),
    st.fixed_dictionaries({"meta": meta_st}), st.fixed_dictionaries({"emb": emb_st}),
    st.fixed_dictionaries({"tag": tag_st, "title": title_st}))

op_st = st.one_of(
    st.tuples(st.just("insert"), rows_st),
    st.tuples(st.just("upsert"), rows_st),
    st.tuples(st.just("update_where"), set_st, WHERE),
    st.tuples(st.just("update_ids"), set_st, st.lists(ids_st, max_size=4)),
    st.tuples(st.just("delete_ids"), st.lists(ids_st, max_size=4)),
    st.tuples(st.just("delete_where"), WHERE),
)


def _doc(row) -> dict:
    emb = row.get("emb")
    return {"tag": row.get("tag"), "title": row.get("title"), "meta": row.get("meta"),
            "emb": None if emb is None else tuple(float(np.float32(x)) for x in emb)}


def _from_db(got) -> dict | None:
    if got is None:
        return None
    emb = got["emb"]
    return {"tag": got["tag"], "title": got["title"], "meta": got["meta"],
            "emb": None if emb is None else tuple(emb.tolist())}


def apply_op(coll, state: dict, op) -> dict:
    """Run op against the collection and return the oracle's state after it.

    Raises DuplicateIdError exactly when the oracle says the insert must fail."""
    kind = op[0]
    new = dict(state)
    if kind == "insert":
        rows = op[1]
        clash = [r["id"] for r in rows if r["id"] in state]
        if clash:
            try:
                coll.insert(rows)
            except vv.DuplicateIdError:
                raise
            raise AssertionError(f"insert of live id {clash[0]} did not raise")
        assert coll.insert(rows) == [r["id"] for r in rows]
        new.update({r["id"]: _doc(r) for r in rows})
    elif kind == "upsert":
        coll.upsert(op[1])
        new.update({r["id"]: _doc(r) for r in op[1]})
    elif kind in ("update_where", "update_ids"):
        fields = op[1]
        if kind == "update_where":
            targets = [i for i, d in state.items() if matches(op[2], i, d)]
            n = coll.update(fields, where=op[2])
        else:
            targets = sorted({i for i in op[2] if i in state})
            n = coll.update(fields, ids=op[2])
        assert n == len(targets)
        for i in targets:
            new[i] = _doc({**state[i], **fields})
    elif kind == "delete_ids":
        targets = {i for i in op[1] if i in state}
        assert coll.delete(ids=op[1]) == len(targets)
        for i in targets:
            del new[i]
    elif kind == "delete_where":
        targets = [i for i, d in state.items() if matches(op[1], i, d)]
        assert coll.delete(where=op[1]) == len(targets)
        for i in targets:
            del new[i]
    else:
        raise AssertionError(kind)
    return new


def _distances(metric: str, X: np.ndarray, q: np.ndarray) -> np.ndarray:
    X = X.astype(np.float64)
    q = q.astype(np.float64)
    if metric == "l2":
        return np.sqrt(((X - q) ** 2).sum(axis=1))
    if metric == "dot":
        return -(X @ q)
    denom = np.linalg.norm(X, axis=1) * np.linalg.norm(q)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = 1.0 - (X @ q) / denom
    d[denom == 0] = 1.0
    return d


class Abort(Exception):
    """Raised inside a transaction to roll it back."""


class VarveMachine(RuleBasedStateMachine):
    EMB_INDEX: vv.HNSW | None = None

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="varve-sm-", dir="/tmp")
        self.path = f"{self.dir}/sm.varve"
        self.db = None
        self.coll = None
        self.states: list[dict] = []      # states[v]: id -> doc as of version v

    # ---- setup and bookkeeping --------------------------------------------------------

    @initialize(metric=st.sampled_from(["l2", "cosine", "dot"]),
                durability=st.sampled_from(["commit", "off"]))
    def open_new(self, metric, durability):
        self.metric, self.durability = metric, durability
        self.db = vv.connect(self.path, durability=durability)
        self.coll = self.db.create_collection("docs", {
            "tag": vv.Int(index="sorted"), "title": "text", "meta": "json",
            "emb": vv.Vector(4, metric=metric, index=self.EMB_INDEX)})
        self.states = [{}, {}]            # version 0: empty file; 1: the empty collection
        assert self.db.version == 1

    @property
    def current(self) -> dict:
        return self.states[-1]

    def committed(self, new_state: dict) -> None:
        """Record the state after one write call or transaction that returned."""
        v = self.db.version
        if v == len(self.states):
            self.states.append(new_state)
        else:
            # a write that changed nothing may leave the version where it was
            assert v == len(self.states) - 1 and new_state == self.current, (v, len(self.states))

    def teardown(self):
        if self.db is not None:
            self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- writes ------------------------------------------------------------------------

    @rule(op=op_st)
    def write(self, op):
        v = self.db.version
        try:
            new = apply_op(self.coll, self.current, op)
        except vv.DuplicateIdError:
            assert self.db.version == v         # the failed call committed nothing
            return
        self.committed(new)

    @rule(rows=st.lists(doc_st(), min_size=2, max_size=4))
    def insert_with_duplicate_in_batch(self, rows):
        rows = rows + [dict(rows[0])]           # the first id twice
        v = self.db.version
        try:
            self.coll.insert(rows)
        except vv.DuplicateIdError:
            assert self.db.version == v
            return
        raise AssertionError("an id twice in one batch was accepted")

    @rule(ops=st.lists(op_st, min_size=2, max_size=5), abort=st.booleans())
    def transaction(self, ops, abort):
        state = self.current
        v = self.db.version
        try:
            with self.db.transaction():
                for op in ops:
                    try:
                        state = apply_op(self.coll, state, op)
                    except vv.DuplicateIdError:
                        pass                    # rejected, the rest of the transaction goes on
                    # the writer's own thread reads its pending writes
                    assert self.coll.count() == len(state)
                if abort:
                    raise Abort
        except Abort:
            assert self.db.version == v
            return
        # a transaction that wrote nothing makes no version
        self.committed(state)

    @rule()
    def reopen(self):
        history = [(h.version, h.chain) for h in self.db.history()]
        self.db.close()
        self.db = vv.connect(self.path, durability=self.durability)
        self.coll = self.db["docs"]
        assert self.db.version == len(self.states) - 1
        assert [(h.version, h.chain) for h in self.db.history()] == history

    @rule()
    def checkpoint(self):
        v = self.db.version
        self.db.checkpoint()
        assert self.db.version == v

    @precondition(lambda self: self.db is not None and len(self.states) > 4)
    @rule()
    def verify(self):
        rep = self.db.verify()
        assert rep.ok and rep.versions_checked == self.db.version, rep

    # ---- invariants ---------------------------------------------------------------------

    def versions_to_check(self) -> list[int]:
        last = len(self.states) - 1
        rng = np.random.default_rng(last)
        picks = {last, max(0, last - 1), 0}
        if last > 2:
            picks.update(int(x) for x in rng.integers(0, last, 2))
        return sorted(picks)

    @invariant()
    def reads_match_oracle_at_every_checked_version(self):
        if self.db is None:
            return
        last = len(self.states) - 1
        assert self.db.version == last
        for v in self.versions_to_check():
            as_of = None if v == last else v
            state = self.states[v]
            self.check_rows(state, v, as_of)
            for where in SEARCH_FILTERS:
                for q in QUERIES:
                    self.check_search(state, q, where, as_of)

    def check_rows(self, state, v, as_of):
        for i in IDS:
            assert _from_db(self.coll.get(i, as_of=as_of)) == state.get(i), (v, i)
        assert self.coll.count(as_of=as_of) == len(state)
        for where in FILTERS:
            want = sorted(i for i, d in state.items() if matches(where, i, d))
            got = self.coll.find(where, as_of=as_of)
            assert sorted(got.ids) == want, (v, where)
            assert self.coll.count(where, as_of=as_of) == len(want), (v, where)

    def check_search(self, state, q, where, as_of, limit=5):
        cand = [i for i, d in sorted(state.items()) if d["emb"] is not None
                and (where is None or matches(where, i, d))]
        hits = self.coll.search(vector=q, where=where, limit=limit, as_of=as_of)
        assert len(hits) == min(limit, len(cand)), (where, as_of)
        if not cand:
            return
        X = np.array([state[i]["emb"] for i in cand], np.float32)
        dist = dict(zip(cand, _distances(self.metric, X, q).tolist()))
        best = sorted(dist.values())[:limit]
        assert len(set(hits.ids)) == len(hits)
        for h, want in zip(hits, best):
            assert h.id in dist, (h.id, where)
            assert math.isclose(h.score, dist[h.id], abs_tol=1e-4), (h.id, h.score, dist[h.id])
            assert math.isclose(h.score, want, abs_tol=1e-4), (hits.ids, best)


TestVarveStateMachine = VarveMachine.TestCase
TestVarveStateMachine.settings = settings(
    max_examples=100 * SOAK, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class HnswMachine(VarveMachine):
    EMB_INDEX = vv.HNSW(m=4, ef_construction=16, ef_search=8)
    RECALL_FLOOR = 0.8      # of each invariant's narrow walks together (ef=8, k=5)

    def __init__(self):
        super().__init__()
        self.found = self.wanted = 0
        self.allowed = {}

    @invariant()
    def reads_match_oracle_at_every_checked_version(self):
        self.found = self.wanted = 0
        self.allowed = {}      # (version, where) -> allow mask, for this check's queries
        super().reads_match_oracle_at_every_checked_version()
        if self.wanted:
            assert self.found / self.wanted >= self.RECALL_FLOOR, (self.found, self.wanted)

    def check_rows(self, state, v, as_of):
        # get, count and find read rows the same way whatever the vector field's
        # index: VarveMachine holds them at every checked version of the same
        # steps; here at the current one (at every version: a quarter of this
        # machine's CPU time)
        if as_of is None:
            super().check_rows(state, v, as_of)

    def check_search(self, state, q, where, as_of, limit=5):
        # The planner answers sets this small by exact scan, whatever the index:
        # VarveMachine holds the API's search at every checked version, here at
        # the current one; so the graph path is called directly, with the allow
        # mask the planner would hand it, at every checked version.
        if as_of is None:
            super().check_search(state, q, where, as_of, limit)
        t = self.coll.table
        v = self.db.version if as_of is None else as_of
        n = t.n
        if (v, where) not in self.allowed:     # the same for each of QUERIES
            cand = [i for i, d in state.items() if d["emb"] is not None
                    and (where is None or matches(where, i, d))]
            self.allowed[v, where] = t.visible(main_view(v), n)[0] \
                & np.isin(t.ids.data[:n], cand) & ~t.columns["emb"].nulls.data[:n]
        allow = self.allowed[v, where]
        col, vi = t.columns["emb"], t.vector_indexes["emb"]
        ranked, ranked_d = flat.search(self.metric, col.arena.frozen(n), col.norms.frozen(n),
                                       q, n, allow)      # every allowed row, ranked
        want, want_d = ranked[:limit], ranked_d[:limit]
        rows, dists = vi.search(col, self.metric, q, limit, allow, max(n, limit), n)
        # ef >= rows: exactly what exact search returns, rows and scores, near-ties
        # cut by (float64 score, row) on both paths
        assert rows.tolist() == want.tolist(), (v, where, rows, want, dists, want_d)
        assert dists.tolist() == want_d.tolist(), (v, where, rows, dists, want_d)
        if where is None and as_of is None and len(want):
            rows, dists = vi.search(col, self.metric, q, limit, allow, 8, n)
            assert allow[rows].all() and len(set(rows.tolist())) == len(rows)
            self.found += int(np.count_nonzero(dists <= want_d[-1] + 1e-9))
            self.wanted += len(want)


TestHnswStateMachine = HnswMachine.TestCase
# 100 examples (it ran 200): its steps and row checks are VarveMachine's, which
# runs its own 100; what is its own, the graph path held to exact search, failed
# within the first examples when the exact scan above the watermark skipped one
# row. `make soak` runs ten times as many.
TestHnswStateMachine.settings = settings(
    max_examples=100 * SOAK, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
