"""A collection sharded over varvedb files held by Ray actors, with two-phase
commits across shards (integrations/sharded.py), against one collection holding
the same rows.

The crash cases kill real processes: a shard's actor (ray.kill) and the
coordinator (a child process driving the same Ray, SIGKILLed between prepare
and commit). A shard is a Ray actor, a worker process of its own that takes
seconds to start: the cases are few and long, and start few of them."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import varvedb as vv
from test_hnsw_index import recall
from test_text_deferred import random_doc
from varvedb.errors import (CorruptFileError, DuplicateIdError, FieldTypeError,
                            NotSupportedError, OptionError, TransactionError,
                            WriterLockedError)
from conftest import lazy_module

# imported by the tests (lazy_module: not at every pytest worker's collection)
ray, sharded = lazy_module("ray"), lazy_module("varvedb.integrations.sharded")

pytestmark = pytest.mark.usefixtures("local_ray")
ROOT = Path(__file__).resolve().parents[1]
DIM = 16
HANG = 600.0     # seconds: a hang guard, never a timing
SCHEMA = {"m": "int", "title": "text", "vec": vv.Vector(DIM, metric="l2", index=vv.HNSW())}


def _rows(ids, seed=0) -> list[dict]:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((len(ids), DIM)).astype(np.float32)
    return [{"id": int(i), "m": int(i) % 7, "title": f"doc {i}", "vec": v}
            for i, v in zip(ids, vecs)]


def _single(rows) -> vv.Collection:
    db = vv.connect(":memory:")
    c = db.create_collection("docs", SCHEMA)
    c.insert(rows)
    return c


def test_a_sharded_collection_answers_as_one_collection(tmp_path):
    rows = _rows(range(900))
    single = _single(rows)
    folder = tmp_path / "docs.shards"
    with sharded.ShardedCollection.create(folder, "docs", SCHEMA, shards=3) as sc:
        sc.insert(rows[:300])               # one write spanning every shard
        sc.insert(rows[300:])
        assert sc.count() == 900 and sc.count("m = 3") == single.count("m = 3")
        assert sc.get(5)["title"] == "doc 5" and sc.get(10_000) is None
        assert [d["id"] for d in sc.get(ids=[7, 10_000, 3, 7])] == [7, 3]
        q = np.random.default_rng(9).standard_normal((20, DIM)).astype(np.float32)
        for v in q:
            for where in (None, "m < 3"):
                a = sc.search(vector=v, where=where, limit=10, exact=True)
                b = single.search(vector=v, where=where, limit=10, exact=True)
                assert a.ids == b.ids
                np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6)
                assert [h["title"] for h in a] == [h["title"] for h in b]

        # graphs on each shard: recall within 0.005 of one collection's graph
        def ids(c, **knobs):
            return np.array([c.search(vector=v, limit=10, **knobs).ids for v in q])
        truth = ids(single, exact=True)
        assert recall(ids(sc, ef=20), truth) >= recall(ids(single, ef=20), truth) - 0.005

        # a write one shard refuses changes no shard
        before = sc.version
        with pytest.raises(DuplicateIdError):
            sc.insert(_rows(range(1000, 1060)) + _rows([5]))     # id 5 is taken
        with pytest.raises(FieldTypeError):
            sc.insert([{"id": 2000, "m": "seven"}] + _rows(range(2001, 2030)))
        with pytest.raises(FieldTypeError, match="need their id"):
            sc.insert([{"m": 1}])
        assert sc.version == before and sc.count() == 900 and sc.get(1001) is None
        assert all(os.listdir(f"{p}.2pc") == [] for p in sc.paths)   # no side file left

        # version vectors: a read as of an earlier one sees that state
        sc.delete(where="m = 0")
        sc.upsert([{"id": 1, "title": "changed"}, {"id": 2, "title": "changed"}])
        assert sc.count() == 900 - 129 and sc.get(1)["title"] == "changed"
        assert sc.get(1)["m"] == 1                     # the upsert merged: m kept
        assert sc.count(as_of=before) == 900 and sc.get(1, as_of=before)["title"] == "doc 1"
        assert len(sc.search(vector=q[0], limit=2000, exact=True, as_of=before)) == 900
        sc.delete(ids=[1, 2, 3])
        assert sc.count() == 900 - 129 - 3
        with pytest.raises(FieldTypeError, match="version vector"):
            sc.count(as_of=5)
        with pytest.raises(NotSupportedError):
            sc.search(vectors=q[:2])

        # refused: a second coordinator, a folder already there
        with pytest.raises(WriterLockedError):
            sharded.ShardedCollection.open(folder)
        with pytest.raises(OptionError, match="exists"):
            sharded.ShardedCollection.create(folder, "docs", SCHEMA)
    for k in range(3):          # every row on the shard its id names
        with vv.connect(str(folder / f"shard-{k:03d}.varve"), readonly=True) as db:
            docs = db.collection("docs").get(select=[])
            assert len(docs) > 200 and all(sharded.shard_of(d["id"], 3) == k for d in docs)


TEXT_SCHEMA = {**SCHEMA, "body": vv.Text(fts=True), "vec": vv.Vector(DIM, metric="l2")}
QUERIES = ("apple", "golf hotel", "kil*", '"delta echo"', "apple OR banana -cherry",
           "mike november oscar")


def _text_rows(ids, seed) -> list[dict]:
    rng = random.Random(seed)
    return [{**r, "body": random_doc(rng)} for r in _rows(ids, seed)]


def _hold(shard) -> None:
    """Hold a shard's maintainer back (until _release): its new rows stay unindexed."""
    def hold(s):
        s.held = s.db.engine.maintainer.hold()
        s.held.__enter__()
    ray.get(shard.__ray_call__.remote(hold))


def _release(shard) -> None:
    ray.get(shard.__ray_call__.remote(lambda s: s.held.__exit__(None, None, None)))


def test_text_and_hybrid_search_score_as_one_collection(tmp_path):
    """BM25 with the whole corpus's statistics on every shard: the same ids and
    scores as one collection, text (all / any words, a filter), hybrid and reranked, with
    one shard's maintainer held back (its newest rows scored by the exact scan)."""
    rows = _text_rows(range(600), seed=1)
    late = _text_rows(range(600, 700), seed=2)
    db = vv.connect(":memory:")
    single = db.create_collection("docs", TEXT_SCHEMA)
    single.insert(rows + late)
    q = np.random.default_rng(3).standard_normal((3, DIM)).astype(np.float32)
    with sharded.ShardedCollection.create(tmp_path / "t.shards", "docs", TEXT_SCHEMA,
                                          shards=3) as sc:
        sc.insert(rows)
        sc.wait_indexed("body")
        _hold(sc.actors[0])
        try:        # released before close, which waits for the maintainer
            sc.insert(late)
            seen = []
            for text in QUERIES:
                for knobs in ({"match": "all"}, {"match": "any", "where": "m < 4"},
                              {"vector": q[len(seen) % 3], "exact": True, "match": "any"},
                              {"vector": q[0], "exact": True, "weights": (2.0, 0.5),
                               "candidates": 20, "rrf_k": 5},
                              {"rerank": q[len(seen) % 3], "match": "any"},
                              {"rerank": q[1], "candidates": 7, "where": "m < 4"}):
                    a = sc.search(text=text, limit=15, **knobs)
                    b = single.search(text=text, limit=15, **knobs)
                    assert a.ids == b.ids, (text, knobs)
                    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6)
                    assert [h["body"] for h in a] == [h["body"] for h in b]
                    seen.append(len(a))
            assert max(seen) == 15 and sum(seen) > 200
            # the held shard's newest rows were not indexed, and were scored
            status = ray.get(sc.actors[0].__ray_call__.remote(
                lambda s: s.coll.index_status("body")))
            assert status["unlinked"] > 0
        finally:
            _release(sc.actors[0])
    db.close()


def test_the_ray_module_names_it_too():
    from varvedb.integrations import ray as vray
    assert vray.ShardedCollection is sharded.ShardedCollection


def test_an_id_outside_64_bits_is_refused_as_the_embedded_api_refuses_it():
    for bad in (2**63, -2**63 - 1):
        with pytest.raises(FieldTypeError, match="64-bit"):
            sharded.shard_of(bad, 4)
    assert 0 <= sharded.shard_of(2**63 - 1, 4) < 4 and 0 <= sharded.shard_of(-2**63, 4) < 4


def test_refused_arguments_and_folders(tmp_path):
    with pytest.raises(OptionError):
        sharded.ShardedCollection.create(tmp_path / "a", "docs", SCHEMA, shards=0)
    with pytest.raises(OptionError, match="not a sharded collection"):
        sharded.ShardedCollection.open(tmp_path)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "shards.json").write_text('{"format": 1, "shards": "x"}')
    with pytest.raises(CorruptFileError):
        sharded.ShardedCollection.open(tmp_path / "bad")


def _kill(actor) -> None:
    """Kill a shard's actor and wait until it is dead (ray.kill returns at once, and
    a call made just after may still be answered)."""
    ray.kill(actor)
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:        # a hang guard, not a timing
        try:
            ray.get(actor.version.remote(), timeout=HANG)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("a killed actor still answers")


def _parts(sc, rows) -> dict:
    return {k: {"verb": "insert", "rows": rs} for k, rs in sc._by_shard(rows).items()}


def test_a_shard_killed_between_prepare_and_commit(tmp_path):
    """Killed after its prepare: without a decision the next open drops every part;
    with the decision recorded the write is finished (the actor started again, its
    part applied from its side file, once)."""
    folder = tmp_path / "s"
    sc = sharded.ShardedCollection.create(folder, "docs", SCHEMA, shards=2)
    sc.insert(_rows(range(30)))                 # a two-phase write (both shards)
    for txn, decided in (("t1", False), ("t2", True)):
        parts = _parts(sc, _rows(range(100, 160)))
        assert len(parts) == 2
        sc._prepare(txn, parts)
        ray.kill(sc.actors[0])
        if decided:
            sc._decide(txn)
            sc._finish(txn, parts, list(sc.version))
            assert sc.count() == 90
        sc.close()              # undecided: the coordinator ends here
        sc = sharded.ShardedCollection.open(folder)
        assert sc.count() == (90 if decided else 30)
        assert (sc.get(130) is not None) == decided
        assert all(os.listdir(f"{p}.2pc") == [] for p in sc.paths)
    # a one-shard write whose process ends: its outcome is not guessed, the shard
    # reopens, and reads see what it holds (the write is sent once the actor is
    # known dead, so it never ran)
    row = next(r for r in _rows(range(500, 600)) if sharded.shard_of(r["id"], 2) == 1)
    _kill(sc.actors[1])
    with pytest.raises(TransactionError, match="may or may not"):
        sc.insert(row)
    assert sc.get(row["id"]) is None
    sc.insert(row)
    assert sc.get(row["id"])["title"] == row["title"]
    sc.close()
    for k in range(2):        # each shard committed each write once (t1 never)
        with vv.connect(str(folder / f"shard-{k:03d}.varve"), readonly=True) as db:
            assert db.collection(sharded.TXNS).count() == 2


# a coordinator in its own process: opens the folder (printing what recovery left),
# prepares a write over every shard, records the decision if told to, and waits
_COORDINATOR = textwrap.dedent("""
    import sys, time
    import ray
    from conftest import RAY_ENV
    from varvedb.integrations.sharded import ShardedCollection
    from test_sharded import _parts, _rows
    ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False,
             runtime_env=RAY_ENV)
    sc = ShardedCollection.open(sys.argv[2])
    print(sc.count(), flush=True)
    txn, first = sys.argv[3], int(sys.argv[4])
    sc._prepare(txn, _parts(sc, _rows(range(first, first + 60))))
    if sys.argv[5] == "decided":
        sc._decide(txn)
    print("ready", flush=True)
    time.sleep(600)
""")


def _coordinator(folder, txn: str, first: int, decided: bool) -> int:
    """Run a coordinator to its prepared write, SIGKILL it; what it counted at open."""
    child = subprocess.Popen(
        [sys.executable, "-c", _COORDINATOR, ray.get_runtime_context().gcs_address,
         str(folder), txn, str(first), "decided" if decided else "undecided"],
        stdout=subprocess.PIPE, text=True, cwd=str(ROOT / "tests"),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        counted = int(child.stdout.readline())
        assert child.stdout.readline().strip() == "ready"    # every shard prepared
        assert [len(os.listdir(f"{folder}/shard-{k:03d}.varve.2pc")) for k in range(2)] \
            == [1, 1]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=600)
    return counted


def test_the_coordinator_killed_between_prepare_and_commit(tmp_path):
    """SIGKILLed after every shard prepared: its shards' actors die with it (their
    files' locks with them: the next open's shards wait for that); the next open
    commits the write if the decision was recorded, and drops it if not."""
    folder = tmp_path / "s"
    with sharded.ShardedCollection.create(folder, "docs", SCHEMA, shards=2) as sc:
        sc.insert(_rows(range(30)))
    assert _coordinator(folder, "t1", 100, decided=True) == 30
    assert _coordinator(folder, "t2", 200, decided=False) == 90      # t1 finished
    with sharded.ShardedCollection.open(folder) as again:
        assert again.count() == 90                                   # t2 dropped
        assert again.get(159) is not None and again.get(200) is None


def test_ids_come_back_in_the_rows_order_and_bad_ids_are_refused_as_one_collection(tmp_path):
    """insert / upsert return the ids in the rows' order (they came grouped by
    shard); a str given as ids= is one bad argument, not a list of one-character
    ids (delete(ids="ab") deleted "a" and "b"); a lone surrogate, a number for
    ids= and a number for rows are FieldTypeErrors (they were raw Python errors);
    each as one collection answers, and nothing is written."""
    schema = {"id": "text", "n": "int"}
    rows = [{"id": s, "n": k} for k, s in enumerate(["a", "b", "ab", "c", "d", "e", "f"])]
    single = vv.connect(":memory:").create_collection("docs", schema)
    with sharded.ShardedCollection.create(tmp_path / "s", "docs", schema, shards=2) as sc:
        order = [r["id"] for r in rows]     # interleaved over the shards: grouping reorders
        assert sorted(order, key=lambda i: sharded.shard_of(i, 2)) != order
        assert sc.insert(list(reversed(rows))) == single.insert(list(reversed(rows))) \
            == [r["id"] for r in reversed(rows)]
        again = [{"id": r["id"], "n": 0} for r in rows]
        assert sc.upsert(iter(again)) == single.upsert(again) == [r["id"] for r in rows]
        before = sc.version
        for call, refused in [(lambda c: c.delete(ids="ab"), "ids is a list"),
                              (lambda c: c.get(ids="ab"), "ids is a list"),
                              (lambda c: c.delete(ids=5), "ids is a list"),
                              (lambda c: c.get(ids=5), "ids is a list"),
                              (lambda c: c.insert(5), "rows are a dict"),
                              (lambda c: c.upsert("ab"), "rows are a dict"),
                              (lambda c: c.insert({"id": "\ud800", "n": 1}), "not valid Unicode"),
                              (lambda c: c.get("\ud800"), "not valid Unicode"),
                              (lambda c: c.delete(ids=["g", "\ud800"]), "not valid Unicode")]:
            with pytest.raises(FieldTypeError, match=refused):
                call(sc)
            with pytest.raises(FieldTypeError):
                call(single)
        assert sc.version == before and sc.count() == len(single) == 7
        assert [d["id"] for d in sc.get(ids=np.array(["ab", "zz", "a"]))] == ["ab", "a"]
        sc.delete(ids=("a", "b"))
        assert sorted(d["id"] for d in sc.get(ids=[r["id"] for r in rows])) == \
            ["ab", "c", "d", "e", "f"]
