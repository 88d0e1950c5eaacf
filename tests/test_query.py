"""The query layer on its own: the filter's masks, the planner's plans (compared as
data, never as prose), the executor, explain without running, and Snapshot."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.query.execute import execute
from varvedb.index.vector_index import make_vector_index
from varvedb.query.filter import Filter, Node, Param, Ref, parse
from varvedb.query.plan import Count, Limit, Project, Scan, Strategy, VectorTopK
from varvedb.query.planner import (EXACT_ROWS, Query, choose_vector_strategy, plan_count,
                                   plan_find)
from varvedb.schema import MAX_EF

ROWS = 3000


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    db = vv.connect(str(tmp_path_factory.mktemp("q") / "small.varve"))
    c = db.create_collection("docs", {"tag": vv.Int(index="sorted"), "name": "text",
                                      "meta": "json", "x": "float",
                                      "emb": vv.Vector(2, metric="l2")})
    c.insert([{"id": 1, "tag": 1, "name": "a", "meta": {"k": "p"}, "x": 0.5, "emb": [0, 0]},
              {"id": 2, "tag": 2, "name": "b", "meta": {"k": "q"}, "emb": [1, 0]},
              {"id": 3, "tag": None, "name": None, "meta": None, "x": 2.0, "emb": None},
              {"id": 4, "tag": 4, "name": "a", "meta": {"k": 1}, "x": -1.0, "emb": [0, 1]}])
    yield db, c
    db.close()


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    db = vv.connect(str(tmp_path_factory.mktemp("g") / "graph.varve"))
    c = db.create_collection("items", {"tag": "int", "emb": vv.Vector(4, metric="l2")})
    rng = np.random.default_rng(7)
    c.insert_arrays(id=np.arange(ROWS), tag=np.arange(ROWS) % 10,
                    emb=rng.standard_normal((ROWS, 4)).astype(np.float32))
    c.insert({"id": ROWS, "tag": 0})                 # a row with a null vector
    c.create_index("emb", vv.HNSW(m=8, ef_construction=32, ef_search=24))
    db.checkpoint()        # links every row first (the maintainer would, in the background)
    assert c.index_status()["unlinked"] == 0
    yield db, c
    db.close()


def _mask(c, where, params=()):
    t = c.table
    return np.flatnonzero(Filter(where, t.schema, params).mask(t, t.n)).tolist()


# ---- the filter ---------------------------------------------------------------

def test_parse_builds_a_tree_of_nodes():
    assert parse("tag = 1 AND NOT name IS NULL") == Node("and", (
        Node("cmp", ("eq", Ref("tag"), 1)),
        Node("not", (Node("isnull", (Ref("name"), False)),))))
    assert parse("meta->>'k' IN ('p', $1)") == Node("in", (
        Ref("meta", ("k",), True), ("p", Param(1)), False))


@pytest.mark.parametrize("where,rows", [
    ("tag = 1", [0]), ("tag <> 1", [1, 3]), ("tag > 1", [1, 3]),    # NULL never matches
    ("NOT tag > 1", [0]), ("tag IS NULL", [2]), ("tag IS NOT NULL", [0, 1, 3]),
    ("name = 'a'", [0, 3]), ("name <> 'a'", [1]), ("name LIKE '_'", [0, 1, 3]),
    ("NOT name = 'zz'", [0, 1, 3]), ("meta->>'k' = 'p'", [0]), ("meta->>'k' = '1'", [3]),
    ("meta IS NULL", [2]), ("x < 1", [0, 3]), ("emb IS NULL", [2]), ("id IN (2, 4)", [1, 3]),
    ("tag = 1 OR x > 1", [0, 2]), ("tag > 1 AND x IS NULL", [1]), ("tag = NULL", []),
])
def test_filter_masks_follow_sql_three_valued_logic(small, where, rows):
    assert _mask(small[1], where) == rows


def test_filter_binds_parameters_and_reads_only_the_readers_rows(small):
    _, c = small
    t = c.table
    f = Filter("tag >= $1", t.schema, [2])
    assert f.mask(t, t.n).tolist() == [False, True, False, True]
    assert f.mask(t, 2).tolist() == [False, True]        # a reader's n, not the table's


@pytest.mark.parametrize("where,err", [
    ("nope = 1", vv.UnknownFieldError), ("name > 3", vv.FilterError),
    ("emb = 1", vv.FilterError), ("tag = $2", vv.FilterError), ("tag LIKE 'a'", vv.FilterError),
])
def test_filter_refuses_a_bad_expression_at_bind_or_first_evaluation(small, where, err):
    _, c = small
    t = c.table
    with pytest.raises(err):
        Filter(where, t.schema, [1]).mask(t, t.n)


# ---- the planner -----------------------------------------------------------------

def test_json_values_compare_as_jsonb(tmp_path):
    """where= on a json value compares as jsonb: a quoted literal is read as json (the
    number 1 equals 1.0, an object's keys in any order), a parameter's Python value is
    compared as it is, a boolean never equals a number (Python's True == 1), and the
    ordering ranks kinds (object > array > boolean > number > string > null) — but a
    Python scalar parameter orders only values of its own kind (LangChain's filters)."""
    db = vv.connect(str(tmp_path / "j.varve"))
    c = db.create_collection("c", {"meta": "json"})
    c.insert([{"id": 1, "meta": {"a": 1, "f": True}}, {"id": 2, "meta": {"a": "1", "f": 1}},
              {"id": 3, "meta": {"a": 1.0, "b": True, "f": False}},
              {"id": 4, "meta": {"a": [1, 2], "f": 0}}])

    def ids(where, params=()):
        return sorted(c.find(where, params=params).ids)
    assert ids("meta->'a' = '1'") == [1, 3]
    assert ids("meta->'a' = '\"1\"'") == [2]
    assert ids("meta->'a' = $1", ["1"]) == [2]           # a Python str: the string
    assert ids("meta->'a' = $1", [1]) == [1, 3]
    assert ids("meta->'a' = $1", [[1, 2]]) == [4]
    assert ids("meta = '{\"f\": false, \"b\": true, \"a\": 1}'") == [3]
    assert ids("meta->'f' = true") == [1] and ids("meta->'f' = 1") == [2]
    assert ids("meta->'f' = $1", [True]) == [1] and ids("meta->'f' = $1", [0]) == [4]
    assert ids("meta->'f' IN (1, true)") == [1, 2]
    assert ids("meta->'a' > '1'") == [4]                 # an array above every number
    assert ids("meta->'a' < '1'") == [2]                 # a string below every number
    assert ids("meta->>'a' = '1'") == [1, 2]             # ->> is text, as before
    assert ids("meta->'a' < $1", [2]) == [1, 3]          # a Python number: numbers only
    assert ids("meta->'a' <> $1", [1]) == [2, 4]         # ... but unequal to the others
    assert ids("meta->'f' < $1", [2]) == [2, 4]          # no boolean below a number
    with pytest.raises(vv.FilterError, match="json"):
        c.find("meta->'a' = 'not json'")
    db.close()


def test_vector_strategy_by_selectivity():
    index = make_vector_index("emb", 4, "cosine", vv.HNSW(ef_search=40, quantize=None))
    n = 10 * MAX_EF
    assert choose_vector_strategy(index, 10, n, n, None, False) == (Strategy.GRAPH, 40, "")
    assert choose_vector_strategy(index, 100, n, n, None, False) == (Strategy.GRAPH, 100, "")
    assert choose_vector_strategy(index, 10, n, n, 500, False) == (Strategy.GRAPH, 500, "")
    assert choose_vector_strategy(index, 10, n, n, None, True) == (Strategy.EXACT, None,
                                                                   "exact=True")
    assert choose_vector_strategy(None, 10, n, n, None, False)[2] == "no vector index"
    assert choose_vector_strategy(index, 10, EXACT_ROWS - 1, n, None, False)[2] == \
        "few rows allowed"
    assert choose_vector_strategy(index, 10, n // 60, n, None, False)[2] == "few rows allowed"
    assert choose_vector_strategy(index, MAX_EF + 1, n, n, None, False)[2] == \
        "limit above the widest walk"
    # k is cut to the allowed rows first: a huge limit over few rows is no wide walk
    assert choose_vector_strategy(index, 10**9, EXACT_ROWS, EXACT_ROWS, None, False) == \
        (Strategy.GRAPH, EXACT_ROWS, "")


def test_search_plans_compare_as_data(graph):
    db, c = graph
    v = db.version
    plan = c.explain(vector=[0, 0, 0, 0], where="tag < 8", limit=7, select=["tag"])
    assert plan.to_dict() == {
        "node": "Project", "fields": ["tag"], "input": {
            "node": "VectorTopK", "field": "emb", "metric": "l2", "k": 7,
            "strategy": "graph", "allowed": ROWS * 8 // 10, "ef": 24, "reason": "", "scanned": None, "input": {
                "node": "Filter", "where": "tag < 8", "matched": ROWS * 8 // 10, "input": {
                    "node": "Scan", "collection": "items", "version": v, "rows": ROWS + 1,
                    "visible": ROWS, "nonnull": "emb"}}}}
    exact = c.explain(vector=[0, 0, 0, 0], where="tag = 1", exact=True).find(VectorTopK)
    assert (exact.strategy, exact.ef, exact.reason, exact.allowed) == \
        ("exact", None, "exact=True", ROWS // 10)
    assert [n.NODE for n in plan.walk()] == ["Project", "VectorTopK", "Filter", "Scan"]
    assert str(plan).count("\n") == 3          # one line per node


def test_find_and_count_plans_compare_as_data(small):
    db, c = small
    v = db.version
    scan = {"node": "Scan", "collection": "docs", "version": v, "rows": 4, "visible": 4,
            "nonnull": None}
    assert c.explain("count").to_dict() == {"node": "Count", "input": scan}
    assert c.explain("count", where="tag > 1").to_dict() == {"node": "Count", "input": {
        "node": "Filter", "where": "tag > 1", "matched": None, "input": scan}}
    assert c.explain("find", where="tag > 1", limit=1, select=[]).to_dict() == {
        "node": "Project", "fields": [], "input": {"node": "Limit", "limit": 1, "input": {
            "node": "Filter", "where": "tag > 1", "matched": None, "input": scan}}}
    hits = c.find(where="tag > 1", limit=1, select=[])
    assert hits.ids == [2] and hits.plan == c.explain("find", where="tag > 1", limit=1,
                                                      select=[])
    with pytest.raises(vv.OptionError):
        c.explain("delete", where="tag > 1")
    with pytest.raises(vv.OptionError):
        c.explain(["count"])


def test_explain_does_not_run_the_search_and_hits_plan_is_what_ran(graph):
    db, c = graph
    q = [0.1, 0.2, 0.3, 0.4]
    planned = c.explain(vector=q, limit=5)
    hits = c.search(vector=q, limit=5)
    assert planned.find(VectorTopK).strategy == "graph"
    assert hits.plan == planned                      # a walk that found k: ran as planned
    # The walk falls short when the input allows rows the graph cannot return:
    # here the row with a null vector (never linked). The executor widens the
    # walk, then answers exactly, and the plan it returns says so.
    t = c.table
    snap = c.database.session().snapshot()
    n = snap.n(t)
    scan = Scan("items", snap.version, n, n)         # every row, the null one too
    top = VectorTopK("emb", "l2", n, Strategy.GRAPH, n, scan, 24,
                     query=np.asarray(q, np.float32))
    res = execute(Query(Project((), top), snap, t, {}))
    ran = res.plan.find(VectorTopK)
    assert top.strategy == "graph" and ran.strategy == "graph_then_exact"
    assert ran.ef == 24 * 4 and len(res.rows) == n
    assert list(res.scores) == sorted(res.scores)


def test_explain_takes_the_same_arguments_as_search_and_checks_them(graph):
    _, c = graph
    with pytest.raises(vv.FieldTypeError):
        c.explain(vector=[0, 0, 0, 0], ef=0)
    with pytest.raises(vv.DimensionError):
        c.explain(vector=[0, 0])
    with pytest.raises(vv.UnknownFieldError):
        c.explain(vector=[0, 0, 0, 0], where="nope = 1")


def test_find_and_count_plans_run_to_the_same_answers(small):
    _, c = small
    t = c.table
    snap = c.database.session().snapshot()
    f = Filter("name = 'a'", t.schema)
    assert execute(plan_count(snap, t, f)).count == c.count(where="name = 'a'") == 2
    res = execute(plan_find(snap, t, f, None, ()))
    assert res.rows.tolist() == [0, 3] and res.scores is None
    assert isinstance(res.plan.input, Limit) and isinstance(plan_count(snap, t, None).plan,
                                                            Count)


# ---- the snapshot -------------------------------------------------------------------

def test_snapshot_takes_n_once_after_the_version(tmp_path):
    db = vv.connect(str(tmp_path / "s.varve"))
    c = db.create_collection("d", {"x": "int"})
    c.insert({"id": 1, "x": 1})
    t = c.table
    snap = db.engine.snapshot()
    assert snap.final and snap.current and snap.n(t) == 1
    c.insert({"id": 2, "x": 2})                        # the writer appends meanwhile
    assert snap.n(t) == 1 and snap.visible(t)[1] == 1  # the reader's n does not move
    assert db.engine.snapshot().n(t) == 2
    old = db.engine.snapshot(as_of=snap.version)
    assert old.final and not old.current and old.n(t) == 2 and old.visible(t)[1] == 1
    with db.transaction() as tx:
        c.insert({"id": 3, "x": 3})
        mine = db.engine.snapshot(tx=tx)
        assert not mine.final and mine.version == tx.version and mine.visible(t)[1] == 3
        other = db.engine.snapshot()                  # a reader outside the transaction
        assert other.final and other.visible(t)[1] == 2
        assert db.engine.snapshot(as_of=snap.version, tx=tx).final
    with pytest.raises(vv.VersionNotFoundError):
        db.engine.snapshot(as_of=db.version + 1)
    db.close()


def test_get_by_id_sees_its_snapshot_through_the_live_map_and_past_it(tmp_path):
    db = vv.connect(str(tmp_path / "g.varve"))
    c = db.create_collection("d", {"x": "int"})
    c.insert([{"id": i, "x": i} for i in range(5)])
    v1 = db.version
    c.update({"x": 100}, ids=[2])
    c.delete(ids=[3])
    assert c.get(2)["x"] == 100 and c.get(2, as_of=v1)["x"] == 2
    assert c.get(3) is None and c.get(3, as_of=v1)["x"] == 3
    assert c.get(99) is None
    v2 = db.version
    with db.transaction():
        c.update({"x": 7}, ids=[1])
        c.delete(ids=[4])
        assert c.get(1)["x"] == 7 and c.get(4) is None     # the transaction's own view
        assert c.get(1, as_of=v2)["x"] == 1 and c.get(4, as_of=v2)["x"] == 4
    db.close()


def test_a_where_is_bound_to_the_form_that_fits_it_before_anything_runs():
    """SQL's WHERE: the filter grammar's form when the clause and its values fit
    the schema, else the evaluator's — decided when bound, never by an error
    caught while a mask is computed; the API's where= refuses the same values
    with a FilterError when bound."""
    db = vv.connect(":memory:")
    c = db.create_collection("d", {"n": vv.Int(), "s": "text", "at": "timestamp"})
    c.insert([{"id": 1, "n": 1, "s": "a"}, {"id": 2, "n": 2, "s": "b"}])
    schema = c.table.schema
    fits = {"n = $1": [2], "s = $1": ["a"], "n IN (1, $1)": [3], "s LIKE $1": ["a%"],
            "n = $1 AND s = 'b'": [None]}
    refused = {"n = $1": ["2"], "s = $1": [2], "s LIKE $1": [1], "n LIKE 'a'": [],
               "at > $1": ["not a time"], "n = $2": [1], "nope = 1": []}
    for text, params in fits.items():
        assert Filter.bound(text, parse(text), schema, params) is not None, text
    for text, params in refused.items():
        assert Filter.bound(text, parse(text), schema, params) is None, text
        with pytest.raises(vv.VarveError):
            c.count(where=text, params=params)
    # SQL answers the refused-by-the-grammar ones through its evaluator, with its casts
    assert db.sql("SELECT count(*) FROM d WHERE n = $1", ["2"]).rows == [(1,)]
    db.close()
