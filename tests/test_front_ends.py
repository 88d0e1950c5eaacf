"""One request, four front ends: the embedded API, SQL, raw HTTP and vv.Client
answer the same search, find and count with the same ids and scores.

A file is written once through the embedded API (three versions on main, a
branch with writes of its own) and closed, so its graph is checkpointed; a
real `varvedb serve` (tests/server_proc.py) then holds it, and a read-only
embedded connection reads the same file beside it. Each search case is a dict
of Collection.search's keywords, sent as they are: as keywords to the embedded
API and the client, as the JSON body (docs/server.md) to the server, one by
one and as a batch; the cases SQL can write are run as SQL too. Arguments that
are wrong in themselves are refused by the client with the embedded API's
error before anything is sent: the server's request counters do not move.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import json
from http import client as http_client

import numpy as np
import pytest

import varvedb as vv
from conftest import child_env
from server_proc import ServerProcess
from varvedb.query.request import Search

TOKEN = "front-ends-token"
UTC = dt.timezone.utc
DIM = 8
SLOW = 120      # seconds: a server's first query of a kind may compile its kernel
WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]


def _rows(ids, rng):
    vecs = rng.standard_normal((len(ids), DIM)).astype(np.float32)
    return [{"id": int(i), "title": f"t{i}", "tag": int(i) % 7,
             "body": " ".join(WORDS[(int(i) * k) % len(WORDS)] for k in (1, 2, 3)),
             "emb": vecs[j]} for j, i in enumerate(ids)]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(served file's path, read-only embedded Database, server, versions)."""
    path = str(tmp_path_factory.mktemp("front") / "front.varve")
    rng = np.random.default_rng(27)
    db = vv.connect(path)
    docs = db.create_collection("docs", {
        "title": "text", "tag": "int", "body": vv.Text(fts=True),
        "emb": vv.Vector(DIM, metric="l2", index=vv.HNSW(m=8, ef_construction=40,
                                                         ef_search=16))})
    docs.insert(_rows(range(200), rng))
    v1 = db.version
    docs.insert(_rows(range(200, 300), rng))
    docs.update({"tag": 100}, ids=list(range(0, 300, 10)))
    db.branch("feature")
    db.use("feature")
    db.collection("docs").delete(where="tag = 3")
    db.collection("docs").insert(_rows(range(300, 340), rng))
    db.use("main")
    db.close()
    with ServerProcess(path, token=TOKEN, env=child_env()) as srv:
        local = vv.connect(path, readonly=True)
        yield path, local, srv, {"v1": v1}
        local.close()


@pytest.fixture(scope="module")
def client(world):
    c = vv.Client(world[2].url, token=TOKEN, timeout=SLOW)
    yield c
    c.close()


class Http:
    """Raw HTTP with http.client, as a user of docs/server.md would send it."""

    def __init__(self, srv):
        self.conn = http_client.HTTPConnection("127.0.0.1", srv.port, timeout=SLOW)

    def __call__(self, method: str, path: str, body=None):
        self.conn.request(method, path, None if body is None else json.dumps(body).encode(),
                          {"Content-Type": "application/json",
                           "Authorization": f"Bearer {TOKEN}"})
        r = self.conn.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if r.getheader("Content-Type", "").startswith(
            "application/json") else data.decode())


@pytest.fixture(scope="module")
def http(world):
    h = Http(world[2])
    yield h
    h.conn.close()


def _json(kw: dict) -> dict:
    """Collection.search's keywords as docs/server.md's JSON body, written by hand."""
    out = {}
    for k, v in kw.items():
        if isinstance(v, np.ndarray):
            v = v.tolist()
        elif isinstance(v, tuple):
            v = list(v)
        elif isinstance(v, dt.datetime):
            v = v.isoformat()
        out[k] = v
    return out


Q = np.random.default_rng(5).standard_normal((4, DIM)).astype(np.float32)

# name -> (Collection.search's keywords, the SQL that asks the same or None);
# the vector of an SQL case is its $1, its other params follow; "V1" is the
# first version's number
CASES = {
    "vector": ({"vector": Q[0]},
               "SELECT id, emb <-> $1 FROM docs ORDER BY emb <-> $1 LIMIT 10"),
    "limit": ({"vector": Q[1], "limit": 3},
              "SELECT id, emb <-> $1 FROM docs ORDER BY emb <-> $1 LIMIT 3"),
    "limit_past_rows": ({"vector": Q[1], "limit": 400, "select": []}, None),
    "select": ({"vector": Q[2], "select": ["title", "tag"]}, None),
    "select_none": ({"vector": Q[2], "select": []}, None),
    "where_params": ({"vector": Q[0], "where": "tag = $1", "params": [2]},
                     "SELECT id, emb <-> $1 FROM docs WHERE tag = $2 ORDER BY emb <-> $1 "
                     "LIMIT 10"),
    "where_range": ({"vector": Q[3], "where": "tag >= $1 AND tag < $2", "params": [1, 4],
                     "limit": 7},
                    "SELECT id, emb <-> $1 FROM docs WHERE tag >= $2 AND tag < $3 "
                    "ORDER BY emb <-> $1 LIMIT 7"),
    "metric_cosine": ({"vector": Q[1], "metric": "cosine"},
                      "SELECT id, emb <=> $1 FROM docs ORDER BY emb <=> $1 LIMIT 10"),
    "metric_dot": ({"vector": Q[2], "metric": "dot"},
                   "SELECT id, emb <#> $1 FROM docs ORDER BY emb <#> $1 LIMIT 10"),
    "ef": ({"vector": Q[3], "ef": 64}, None),
    "exact": ({"vector": Q[0], "exact": True, "limit": 20}, None),
    "as_of": ({"vector": Q[1], "as_of": "V1"},
              "SELECT id, emb <-> $1 FROM docs ORDER BY emb <-> $1 LIMIT 10 "
              "AS OF VERSION $2"),
    "as_of_where": ({"vector": Q[2], "as_of": "V1", "where": "tag = $1", "params": [4]},
                    None),
    "text": ({"text": "apple"},
             "SELECT id, bm25(body, $1) FROM docs ORDER BY bm25(body, $1) DESC LIMIT 10"),
    "text_or_where": ({"text": "banana OR fig", "where": "tag < $1", "params": [3],
                       "limit": 15}, None),
    "text_as_of": ({"text": "cherry", "as_of": "V1", "limit": 5}, None),
    "hybrid": ({"vector": Q[0], "text": "apple"},
               "SELECT id FROM docs ORDER BY rrf(bm25(body, $2), emb <-> $1) DESC LIMIT 10"),
    "hybrid_candidates": ({"vector": Q[1], "text": "grape", "candidates": 20}, None),
    "hybrid_weights": ({"vector": Q[2], "text": "date", "weights": (0.3, 1.0)}, None),
    "hybrid_rrf_k": ({"vector": Q[3], "text": "elder OR fig", "rrf_k": 5, "limit": 12},
                     None),
    "rerank": ({"text": "apple OR cherry", "rerank": Q[0], "candidates": 30}, None),
}
SQL_PARAMS = {"where_params": [2], "where_range": [1, 4], "as_of": ["V1"],
              "text": ["apple"], "hybrid": ["apple"]}


def _case(name: str, versions: dict) -> dict:
    kw = dict(CASES[name][0])
    if kw.get("as_of") == "V1":
        kw["as_of"] = versions["v1"]
    return kw


def _answer(hits) -> tuple[list, list, list]:
    return hits.ids, [float(s) for s in hits.scores], [h.fields for h in hits]


def _raw_answer(body: dict) -> tuple[list, list, list]:
    return ([h["id"] for h in body["hits"]], [h["score"] for h in body["hits"]],
            [h["fields"] for h in body["hits"]])


@pytest.mark.parametrize("name", list(CASES))
def test_a_search_answers_the_same_through_every_front_end(world, client, http, name):
    path, local, srv, versions = world
    kw = _case(name, versions)
    want = _answer(local.collection("docs").search(**kw))
    assert want[0], "a case that finds nothing compares nothing"
    got = _answer(client.collection("docs").search(**kw))
    assert got[:2] == want[:2]
    assert [set(f) for f in got[2]] == [set(f) for f in want[2]]
    status, body = http("POST", "/collections/docs/search", _json(kw))
    assert status == 200, body
    assert _raw_answer(body)[:2] == want[:2]
    sql = CASES[name][1]
    if sql is not None:
        params = [kw["vector"]] if "vector" in kw else []
        params += [versions["v1"] if p == "V1" else p for p in SQL_PARAMS.get(name, [])]
        rows = local.sql(sql, params).rows
        assert [r[0] for r in rows] == want[0]
        if len(rows[0]) > 1:
            assert np.allclose([r[1] for r in rows], want[1], rtol=1e-6, atol=1e-6)
        assert client.sql(sql, params).rows == rows       # SQL over HTTP


def test_a_batch_answers_each_case_as_one_search_does(world, client, http):
    path, local, srv, versions = world
    names = list(CASES)
    kws = [_case(n, versions) for n in names]
    want = [_answer(local.collection("docs").search(**kw))[:2] for kw in kws]
    got = [_answer(h)[:2] for h in client.collection("docs").search_batch(kws)]
    assert got == want
    status, body = http("POST", "/collections/docs/search",
                        {"queries": [_json(kw) for kw in kws]})
    assert status == 200
    assert [_raw_answer(r)[:2] for r in body["results"]] == want

    async def through_async_client():
        async with vv.AsyncClient(srv.url, token=TOKEN, timeout=SLOW) as c:
            docs = await c.collection("docs")
            one_by_one = [_answer(await docs.search(**kw))[:2] for kw in kws]
            return one_by_one, [_answer(h)[:2] for h in await docs.search_batch(kws)]
    assert asyncio.run(through_async_client()) == (want, want)


READS = {
    "all": {},
    "where": {"where": "tag = $1", "params": [5]},
    "as_of": {"as_of": "V1", "where": "tag < $1", "params": [2]},
    "limit_select": {"where": "tag <> $1", "params": [0], "limit": 17, "select": ["title"]},
    "offset": {"where": "tag <> $1", "params": [0], "limit": 5, "offset": 7,
               "select": ["title"]},
}


@pytest.mark.parametrize("name", list(READS))
def test_find_and_count_answer_the_same_through_every_front_end(world, client, http, name):
    path, local, srv, versions = world
    kw = {k: versions["v1"] if v == "V1" else v for k, v in READS[name].items()}
    count_kw = {k: v for k, v in kw.items() if k not in ("limit", "select", "offset")}
    docs = local.collection("docs")
    want_find = docs.find(**kw)
    want_count = docs.count(**count_kw)
    assert want_count > 0 and want_find.ids
    remote = client.collection("docs")
    assert remote.count(**count_kw) == want_count
    found = remote.find(**kw)
    assert found.ids == want_find.ids
    assert [h.fields for h in found] == [h.fields for h in want_find]
    assert http("POST", "/collections/docs/count", _json(count_kw)) == \
        (200, {"count": want_count})
    status, body = http("POST", "/collections/docs/find", _json(kw))
    assert status == 200 and [h["id"] for h in body["hits"]] == want_find.ids
    where = f" WHERE {kw['where']}" if "where" in kw else ""
    as_of = f" AS OF VERSION {kw['as_of']}" if "as_of" in kw else ""
    assert local.sql(f"SELECT count(*) FROM docs{where}{as_of}",
                     kw.get("params", [])).rows == [(want_count,)]
    if "limit" not in kw:       # SQL promises no order without ORDER BY
        rows = local.sql(f"SELECT id FROM docs{where} ORDER BY id{as_of}",
                         kw.get("params", [])).rows
        assert [r[0] for r in rows] == sorted(want_find.ids)


def test_get_of_ids_answers_the_same_through_every_front_end(world, client, http):
    path, local, srv, versions = world
    docs, remote = local.collection("docs"), client.collection("docs")
    ids = [x.id for x in docs.find(limit=40)][::-3] + [10 ** 9]
    for kw in ({"ids": ids, "select": ["tag", "title"]},
               {"ids": ids, "where": "tag <> $1", "params": [0], "offset": 2, "limit": 6,
                "select": ["title"]},
               {"ids": ids, "as_of": versions["v1"], "select": ["tag"]}):
        want = docs.get(**kw)
        assert want and [d["id"] for d in want] != sorted(d["id"] for d in want)
        assert remote.get(**kw) == want
        status, body = http("POST", "/collections/docs/find", _json(kw))
        assert status == 200 and [{"id": h["id"], **h["fields"]} for h in body["hits"]] == want


def test_a_branch_is_read_through_every_front_end(world, client, http):
    path, local, srv, versions = world
    session = local.session()
    session.use("feature")
    on_branch = session.collection("docs")
    kw = {"vector": Q[0], "where": "tag <> $1", "params": [100], "limit": 15}
    want = _answer(on_branch.search(**kw))[:2]
    assert _answer(local.collection("docs").search(**kw, branch="feature"))[:2] == want
    assert want != _answer(local.collection("docs").search(**kw))[:2]
    assert any(i >= 300 for i in want[0])       # rows only the branch has
    remote = client.collection("docs")
    assert _answer(remote.search(**kw, branch="feature"))[:2] == want
    status, body = http("POST", "/collections/docs/search", _json({**kw, "branch": "feature"}))
    assert status == 200 and _raw_answer(body)[:2] == want
    # a batch whose queries read different branches: each its own
    got = remote.search_batch([{**kw, "branch": "feature"}, kw])
    assert [_answer(h)[:2] for h in got] == \
        [want, _answer(local.collection("docs").search(**kw))[:2]]
    assert remote.count(branch="feature") == on_branch.count()
    assert remote.find(where="id >= $1", params=[300], branch="feature").ids == \
        list(range(300, 340))
    status, body = http("POST", "/collections/docs/search",
                        {"vector": Q[0].tolist(), "branch": "nope"})
    assert status == 404 and body["error"]["type"] == "NotFoundError"
    with pytest.raises(vv.NotFoundError) as embedded:
        local.collection("docs").search(vector=Q[0], branch="nope")
    with pytest.raises(vv.NotFoundError) as e:
        remote.search(vector=Q[0], branch="nope")
    assert str(e.value) == str(embedded.value)


def _reads_served(http) -> float:
    """The server's count of requests to the read routes (its /metrics)."""
    status, text = http("GET", "/metrics")
    assert status == 200
    total = 0.0
    for line in text.splitlines():
        if line.startswith("varvedb_http_requests_total{") and any(
                f'route="/collections/{{c}}/{r}"' in line for r in ("search", "find", "count")):
            total += float(line.split()[-1])
    return total


NAIVE = dt.datetime(2024, 1, 1)
BAD = [
    ("search", {}),
    ("search", {"vector": Q[0], "rerank": Q[1], "text": "apple"}),
    ("search", {"vector": Q[0], "vector_text": "apple"}),
    ("search", {"rerank": Q[0]}),
    ("search", {"vector": Q[0], "ef": 0}),
    ("search", {"vector": Q[0], "probes": -1}),
    ("search", {"vector": Q[0], "metric": "manhattan"}),
    ("search", {"vector": Q[0], "limit": -1}),
    ("search", {"vector": Q[0], "limit": 2.5}),
    ("search", {"vector": Q[0], "exact": "yes"}),
    ("search", {"vector": Q[0], "text": "apple", "weights": (1.0,)}),
    ("search", {"vector": Q[0], "text": "apple", "weights": (1.0, -2.0)}),
    ("search", {"vector": Q[0], "text": "apple", "rrf_k": 0}),
    ("search", {"vector": Q[0], "text": "apple", "candidates": 0}),
    ("search", {"vector": Q[0], "select": "title"}),
    ("search", {"vector": Q[0], "where": 3}),
    ("search", {"vector": Q[0], "where": "tag = $1", "params": "2"}),
    ("search", {"text": 5}),
    ("search", {"vector": Q[0], "as_of": NAIVE}),
    ("search", {"vector": Q[0], "branch": 7}),
    ("search", {"vector": Q[0], "as_of": dt.datetime(1, 1, 1, tzinfo=dt.timezone(
        dt.timedelta(hours=2)))}),
    ("search", {"vector": Q[0], "as_of": "2024-01-01T00:00:00+00:00"}),
    ("find", {"limit": -3}),
    ("find", {"select": [1, 2]}),
    ("find", {"where": "tag = $1", "params": 7}),
    ("find", {"as_of": NAIVE}),
    ("find", {"as_of": True}),
    ("find", {"offset": -1}),
    ("get", {"ids": 7}),
    ("get", {"ids": [1.5]}),
    ("get", {"ids": [1], "offset": "2"}),
    ("count", {"where": ["tag = 1"]}),
    ("count", {"as_of": NAIVE}),
    ("count", {"branch": ["feature"]}),
]


@pytest.mark.parametrize("verb,kw", BAD, ids=[f"{v}-{i}" for i, (v, _) in enumerate(BAD)])
def test_bad_arguments_are_refused_by_the_client_before_anything_is_sent(world, client, http,
                                                                          verb, kw):
    path, local, srv, versions = world
    remote = client.collection("docs")
    before = _reads_served(http)
    # a plan kept for the default shape (query/prepared.py) skips no check
    local.collection("docs").search(vector=Q[1])
    with pytest.raises(vv.VarveError) as embedded:
        getattr(local.collection("docs"), verb)(**kw)
    with pytest.raises(vv.VarveError) as remote_error:
        getattr(remote, verb)(**kw)
    assert type(remote_error.value) is type(embedded.value)
    assert str(remote_error.value) == str(embedded.value)
    if verb == "search":
        with pytest.raises(type(embedded.value)):
            remote.search_batch([{"vector": Q[0]}, kw])
    assert _reads_served(http) == before


def test_an_as_of_before_the_year_1000_travels_whole(world, client, http):
    path, local, srv, versions = world
    docs, remote = local.collection("docs"), client.collection("docs")
    for when in (dt.datetime(999, 12, 31, 23, 59, 59, 123456, tzinfo=UTC),
                 dt.datetime(5, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))):
        req = Search.of(vector=Q[0], as_of=when)
        assert req.to_wire()["as_of"].startswith(f"{when.astimezone(UTC).year:04d}-")
        assert Search.from_wire(req.to_wire()) == req
        # the server reads the timestamp (no version is that old) and answers as the
        # embedded API does, where a year of three digits was not a timestamp to it
        assert remote.count(as_of=when) == docs.count(as_of=when)
        assert remote.search(vector=Q[0], as_of=when).ids == \
            docs.search(vector=Q[0], as_of=when).ids
        assert remote.find(as_of=when).ids == docs.find(as_of=when).ids
        assert remote.get(1, as_of=when) == docs.get(1, as_of=when)
        assert http("POST", "/collections/docs/count", {"as_of": when.isoformat()}) == \
            (200, {"count": docs.count(as_of=when)})
