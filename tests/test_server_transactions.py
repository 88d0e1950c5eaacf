"""Transactions over HTTP (issue 29, item 1): never silently dropped.

A real `varvedb serve` (tests/server_proc.py) per group of cases: a transaction
opened with POST /transactions spans requests that carry its id in
X-Varve-Transaction; /sql honours BEGIN / COMMIT / ROLLBACK in one text and
inside such a transaction as the embedded session does, and refuses a BEGIN
that no transaction can hold; vv.Client.transaction() and SQL's BEGIN over the client run the calls
that follow in one. No wall-clock asserts: the idle timeout is awaited by
polling the transaction's state, under a minutes-long hang guard.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varvedb as vv
from conftest import child_env
from server_proc import ServerProcess
from test_server import Http

TOKEN = "txn-token-42"
HEADER = "X-Varve-Transaction"
HANG_GUARD = 300.0       # seconds: only a hung server takes this long


def _client(srv) -> vv.Client:
    return vv.Client(srv.url, token=TOKEN, timeout=600)


def _fill(c: vv.Client) -> None:
    for name in c.collections():
        c.drop_collection(name)
    c.create_collection("docs", {"tag": "int", "title": "text"}).insert(
        [{"id": i, "tag": i, "title": f"t{i}"} for i in range(1, 6)])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("txn") / "txn.varve")
    with ServerProcess(path, token=TOKEN, env=child_env()) as srv:
        yield srv


@pytest.fixture
def client(server):
    c = _client(server)
    _fill(c)
    yield c
    c.close()


@pytest.fixture
def http(server):
    h = Http(server, token=TOKEN)
    yield h
    h.close()


def _open(http: Http) -> str:
    status, out, _ = http("POST", "/transactions")
    assert status == 201, out
    assert out["state"] == "open"
    return out["id"]


def _in(tid: str) -> dict:
    return {HEADER: tid}


def _tags(c: vv.Client) -> dict:
    return {h.id: h.fields["tag"] for h in c["docs"].find()}


# ---- the example, and SQL's transaction statements ---------------------------

def test_rollback_over_the_client_undoes_the_update(client):
    """db.sql("BEGIN"); UPDATE; ROLLBACK over vv.Client: the update is gone."""
    assert client.sql("BEGIN").status == "BEGIN"
    assert client.sql("UPDATE docs SET tag = 999 WHERE id = 1").rowcount == 1
    assert client["docs"].get(1)["tag"] == 999        # the transaction reads its own write
    assert client.sql("ROLLBACK").status == "ROLLBACK"
    assert client["docs"].get(1)["tag"] == 1
    # and with COMMIT the write stays, as one version
    v = client.version
    client.sql("BEGIN")
    client.sql("UPDATE docs SET tag = 7 WHERE id = 1")
    client["docs"].update({"tag": 8}, ids=[2])
    assert client.sql("COMMIT").status == "COMMIT"
    assert client.version == v + 1
    assert _tags(client) == {1: 7, 2: 8, 3: 3, 4: 4, 5: 5}


def test_another_thread_does_not_see_a_transaction_sql_opened(client):
    import threading
    client.sql("BEGIN")
    client.sql("UPDATE docs SET tag = 50 WHERE id = 3")
    seen = {}
    t = threading.Thread(target=lambda: seen.update(tag=client["docs"].get(3)["tag"]))
    t.start()
    t.join()
    client.sql("ROLLBACK")
    assert seen == {"tag": 3}


def test_begin_update_commit_in_one_text(client, http):
    status, out, _ = http("POST", "/sql", {"sql": "BEGIN; UPDATE docs SET tag = 41 WHERE id = 4;"
                                                  " COMMIT"})
    assert status == 200 and out["status"] == "COMMIT"
    assert client["docs"].get(4)["tag"] == 41
    status, out, _ = http("POST", "/sql", {"sql": "START TRANSACTION; UPDATE docs SET tag = 0;"
                                                  " ROLLBACK"})
    assert status == 200 and out["status"] == "ROLLBACK"
    # a statement that fails inside the block: nothing of the text is applied
    v = client.version
    status, out, _ = http("POST", "/sql", {"sql": "BEGIN; UPDATE docs SET tag = 0; "
                                                  "SELECT 1/0; COMMIT"})
    assert status == 422 and out["error"]["sqlstate"] == "22012"
    assert client.version == v
    assert _tags(client) == {1: 1, 2: 2, 3: 3, 4: 41, 5: 5}


LEFT_OPEN = ["BEGIN", "BEGIN; UPDATE docs SET tag = 0", "UPDATE docs SET tag = 0; BEGIN",
             "BEGIN; COMMIT; BEGIN"]


@pytest.mark.parametrize("text", LEFT_OPEN)
def test_a_begin_a_request_cannot_hold_is_refused_and_runs_nothing(client, http, text):
    v = client.version
    status, out, _ = http("POST", "/sql", {"sql": text})
    assert status == 409, out
    assert out["error"]["type"] == "TransactionRequiredError"
    assert out["error"]["sqlstate"] == "25000"
    assert client.version == v and _tags(client) == {i: i for i in range(1, 6)}


@pytest.mark.parametrize("text", LEFT_OPEN)
def test_the_client_runs_a_begin_left_open_in_a_transaction_of_its_own(client, text):
    v = client.version
    client.sql(text)
    client.sql("UPDATE docs SET tag = 77 WHERE id = 2")
    assert client["docs"].get(2)["tag"] == 77
    assert client.sql("ROLLBACK").status == "ROLLBACK"
    assert client.version == v and _tags(client) == {i: i for i in range(1, 6)}


# each a list of texts run in turn: the embedded session's statuses and end state
SEQUENCES = [
    ["COMMIT"], ["ROLLBACK"], ["END"], ["ABORT"],
    ["UPDATE docs SET tag = 0 WHERE id = 1; ROLLBACK"],          # ROLLBACK: nothing to end
    ["UPDATE docs SET tag = 0 WHERE id = 1; COMMIT"],
    ["BEGIN", "UPDATE docs SET tag = 30 WHERE id = 3",
     "COMMIT; UPDATE docs SET tag = 40 WHERE id = 4", "ROLLBACK"],  # the 4 ran on its own
    ["BEGIN", "UPDATE docs SET tag = 30 WHERE id = 3",
     "ROLLBACK; UPDATE docs SET tag = 40 WHERE id = 4; BEGIN",
     "UPDATE docs SET tag = 50 WHERE id = 5", "COMMIT"],
    ["BEGIN", "SAVEPOINT a", "UPDATE docs SET tag = 20 WHERE id = 2", "RELEASE a; COMMIT"],
]


@pytest.mark.parametrize("texts", SEQUENCES, ids=[" | ".join(t) for t in SEQUENCES])
def test_the_client_runs_transaction_statements_as_the_embedded_api(client, tmp_path, texts):
    """The same texts, the same statuses and the same end state: a COMMIT or
    ROLLBACK with nothing to end does nothing (they were refused 409 and left the
    client's transaction open), statements after the end of a transaction run
    on their own (the client refused them, so a later ROLLBACK lost a commit)."""
    with vv.connect(str(tmp_path / "e.varve")) as emb:
        _fill(emb)
        statuses = {db: [db.sql(t).status for t in texts] for db in (emb, client)}
        assert statuses[client] == statuses[emb]
        assert _tags(client) == _tags(emb)
        assert not client.in_transaction     # no transaction left open on the server


# ---- a transaction that spans requests ------------------------------------------------

def test_a_transaction_spans_requests_until_it_commits(client, http):
    v = client.version
    tid = _open(http)
    status, out, _ = http("POST", "/collections/docs/items", [{"id": 10, "tag": 10}],
                          headers=_in(tid))
    assert status == 201 and out["version"] == v + 1       # the version it will commit as
    status, out, _ = http("PATCH", "/collections/docs/items/1", {"tag": 100}, headers=_in(tid))
    assert status == 200 and out["updated"] == 1
    # inside, its writes are read; outside, not yet
    assert http("GET", "/collections/docs/items/10", headers=_in(tid))[0] == 200
    assert http("GET", "/collections/docs/items/10")[0] == 404
    status, out, _ = http("POST", "/sql", {"sql": "SELECT tag FROM docs WHERE id = 1"},
                          headers=_in(tid))
    assert out["rows"] == [[100]] and out["transaction"] == "open"
    assert http("GET", f"/transactions/{tid}")[1]["state"] == "open"
    status, out, _ = http("POST", f"/transactions/{tid}/commit")
    assert status == 200 and out == {"id": tid, "state": "committed", "version": v + 1}
    assert client.version == v + 1 and _tags(client)[10] == 10 and _tags(client)[1] == 100
    # it has ended: its id is refused, and nothing runs outside it in its place
    status, out, _ = http("PATCH", "/collections/docs/items/1", {"tag": 5}, headers=_in(tid))
    assert status == 404 and out["error"]["type"] == "TransactionNotFoundError"
    assert client["docs"].get(1)["tag"] == 100


def test_a_rollback_route_undoes_every_request_of_it(client, http):
    v = client.version
    tid = _open(http)
    http("POST", "/collections", {"name": "made", "schema": {"n": "int"}}, headers=_in(tid))
    http("POST", "/collections/made/items", [{"n": 1}], headers=_in(tid))
    http("POST", "/collections/docs/delete", {"where": "tag > 2"}, headers=_in(tid))
    assert http("POST", "/collections/docs/count", {}, headers=_in(tid))[1] == {"count": 2}
    status, out, _ = http("POST", f"/transactions/{tid}/rollback")
    assert status == 200 and out["state"] == "rolled back"
    assert client.version == v and client.collections() == ["docs"]
    assert _tags(client) == {i: i for i in range(1, 6)}


def test_requests_of_one_transaction_from_many_connections_run_one_at_a_time(server, client,
                                                                              http):
    """Eight connections write into one transaction at once: its session is used
    by one request at a time, and everything lands in one commit."""
    import threading
    v = client.version
    tid = _open(http)
    answers = []

    def writer(k: int) -> None:
        h = Http(server, token=TOKEN)
        for j in range(10):
            status, out, _ = h("POST", "/collections/docs/items",
                               [{"id": 1000 + 100 * k + j, "tag": 100 + k}], headers=_in(tid))
            answers.append((status, out["version"]))
            status, out, _ = h("POST", "/collections/docs/count", {"where": f"tag = {100 + k}"},
                               headers=_in(tid))
            answers.append((status, out["count"] - j))     # its own rows so far: j + 1
        h.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [(200, 1)] * 80 + [(201, v + 1)] * 80
    assert client["docs"].count() == 5          # nothing is visible outside it yet
    assert http("POST", f"/transactions/{tid}/commit")[1]["version"] == v + 1
    assert client["docs"].count() == 85 and client.version == v + 1


def test_sql_commit_inside_a_transaction_ends_it(client, http):
    tid = _open(http)
    # statements after the end run on their own, as in the embedded session
    status, out, _ = http("POST", "/sql", {"sql": "UPDATE docs SET tag = 8 WHERE id = 4; "
                                                  "COMMIT; SELECT tag FROM docs WHERE id = 4"},
                          headers=_in(tid))
    assert status == 200 and out["rows"] == [[8]] and out["transaction"] == "ended"
    assert http("GET", f"/transactions/{tid}")[0] == 404
    tid = _open(http)
    # BEGIN inside it is accepted (it is the block)
    status, out, _ = http("POST", "/sql", {"sql": "BEGIN; UPDATE docs SET tag = 9 WHERE id = 5"},
                          headers=_in(tid))
    assert status == 200 and out["transaction"] == "open"
    status, out, _ = http("POST", "/sql", {"sql": "END"}, headers=_in(tid))
    assert status == 200 and out["status"] == "COMMIT" and out["transaction"] == "ended"
    assert http("GET", f"/transactions/{tid}")[0] == 404
    assert client["docs"].get(5)["tag"] == 9


def test_an_unknown_id_is_refused_and_runs_nothing(client, http):
    v = client.version
    for tid in ("nope", "x" * 500):
        status, out, _ = http("POST", "/collections/docs/items", [{"id": 77, "tag": 1}],
                              headers=_in(tid))
        assert status == 404 and out["error"]["type"] == "TransactionNotFoundError"
        assert out["error"]["sqlstate"] == "25P01"
        status, out, _ = http("POST", "/sql", {"sql": "UPDATE docs SET tag = 0"},
                              headers=_in(tid))
        assert status == 404 and out["error"]["type"] == "TransactionNotFoundError"
        assert http("GET", "/collections/docs/items/1", headers=_in(tid))[0] == 404
    for method, path in (("GET", "/transactions/nope"), ("POST", "/transactions/nope/commit"),
                         ("POST", "/transactions/nope/rollback")):
        status, out, _ = http(method, path)
        assert status == 404 and out["error"]["type"] == "TransactionNotFoundError"
    assert client.version == v and _tags(client) == {i: i for i in range(1, 6)}


# ---- the 25P02 rule ---------------------------------------------------------------------

def test_after_an_error_inside_begin_every_request_is_refused_until_rollback(client, http):
    tid = _open(http)
    assert http("POST", "/sql", {"sql": "BEGIN"}, headers=_in(tid))[0] == 200
    http("POST", "/sql", {"sql": "UPDATE docs SET tag = 0 WHERE id = 1"}, headers=_in(tid))
    status, out, _ = http("POST", "/sql", {"sql": "SELECT 1/0"}, headers=_in(tid))
    assert status == 422
    assert http("GET", f"/transactions/{tid}")[1]["state"] == "failed"
    status, out, _ = http("POST", "/sql", {"sql": "SELECT 1"}, headers=_in(tid))
    assert status == 409 and out["error"]["sqlstate"] == "25P02"
    status, out, _ = http("POST", "/collections/docs/count", {}, headers=_in(tid))
    assert status == 409 and out["error"]["type"] == "TransactionAbortedError"
    # COMMIT of a failed block rolls back (PostgreSQL's answer)
    status, out, _ = http("POST", "/sql", {"sql": "COMMIT"}, headers=_in(tid))
    assert status == 200 and out["status"] == "ROLLBACK" and out["transaction"] == "ended"
    assert _tags(client) == {i: i for i in range(1, 6)}


def test_a_failed_transactions_commit_route_rolls_back(client, http):
    tid = _open(http)
    http("POST", "/sql", {"sql": "BEGIN; UPDATE docs SET tag = 0"}, headers=_in(tid))
    http("POST", "/sql", {"sql": "SELECT * FROM nosuch"}, headers=_in(tid))
    status, out, _ = http("POST", f"/transactions/{tid}/commit")
    assert status == 409 and out["error"]["type"] == "TransactionAbortedError"
    assert http("GET", f"/transactions/{tid}")[0] == 404
    assert _tags(client) == {i: i for i in range(1, 6)}


def test_client_sql_after_an_error_gets_25p02_until_rollback(client):
    client.sql("BEGIN")
    client.sql("UPDATE docs SET tag = 0 WHERE id = 2")
    with pytest.raises(vv.SqlError):
        client.sql("SELECT nosuch FROM docs")
    with pytest.raises(vv.SqlError) as e:
        client.sql("SELECT 1")
    assert e.value.sqlstate == "25P02"
    with pytest.raises(vv.TransactionAbortedError):
        client["docs"].insert({"id": 99, "tag": 1})
    assert client.sql("ROLLBACK").status == "ROLLBACK"
    assert client.sql("SELECT count(*) FROM docs").rows == [(5,)]     # on its own again
    assert _tags(client) == {i: i for i in range(1, 6)}


# ---- against the embedded API -----------------------------------------------------------

OPS = st.lists(st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 12), st.integers(0, 3)),
    st.tuples(st.just("update"), st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(1, 12)),
    st.tuples(st.just("sql"), st.integers(1, 12), st.integers(0, 3)),
    st.tuples(st.just("read"))), max_size=8)


def _apply(db, docs, op) -> object:
    """One step, on the embedded database or through the client: its answer, or the
    class of the error it raised."""
    try:
        if op[0] == "insert":
            return docs.insert({"id": op[1], "tag": op[2]})
        if op[0] == "update":
            return docs.update({"tag": op[2]}, where="tag = $1", params=[op[1]])
        if op[0] == "delete":
            return docs.delete(ids=[op[1]])
        if op[0] == "sql":
            return db.sql("UPDATE docs SET tag = $1 WHERE id = $2", [op[2], op[1]]).rowcount
        return sorted((h.id, h.fields["tag"]) for h in docs.find())
    except vv.VarveError as e:
        return type(e).__name__


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(ops=OPS, commit=st.booleans())
def test_a_client_transaction_answers_and_ends_as_the_embedded_one(server, ops, commit):
    """The same steps in `with db.transaction()` embedded and over the client:
    the same answers inside, the same state after a commit or an exception."""
    c = _client(server)
    try:
        _fill(c)
        db = vv.connect(":memory:")
        db.create_collection("docs", {"tag": "int", "title": "text"}).insert(
            [{"id": i, "tag": i, "title": f"t{i}"} for i in range(1, 6)])
        seen = []
        for side, docs in ((db, db["docs"]), (c, c["docs"])):
            answers = []
            try:
                with side.transaction():
                    answers = [_apply(side, docs, op) for op in ops]
                    if not commit:
                        raise KeyError("undo")
            except KeyError:
                pass
            seen.append((answers, _apply(side, docs, ("read",))))
        assert seen[1] == seen[0]
        db.close()
    finally:
        c.close()


# ---- the writer lock -------------------------------------------------------------------

def test_a_second_transaction_times_out_on_the_writer_lock_as_embedded(server, client, http):
    tid = _open(http)
    http("PATCH", "/collections/docs/items/1", {"tag": 11}, headers=_in(tid))

    def over_http():
        other = Http(server, token=TOKEN)
        try:
            status, out, r = other("POST", "/transactions")
        finally:
            other.close()
        assert status == 503 and out["error"]["type"] == "LockTimeoutError"
        assert out["error"]["sqlstate"] == "55P03" and r.getheader("Retry-After") == "1"

    # an autocommitted write waits for the same lock, and the client raises the same class
    def autocommitted():
        with pytest.raises(vv.LockTimeoutError):
            client["docs"].insert({"id": 30, "tag": 3})

    def in_a_transaction():
        with pytest.raises(vv.LockTimeoutError):
            with client.transaction():
                pass

    # the three wait out the lock timeout side by side (one after another: three times it)
    with ThreadPoolExecutor(3) as pool:
        for wait in [pool.submit(f) for f in (over_http, autocommitted, in_a_transaction)]:
            wait.result(timeout=HANG_GUARD)
    # reads go on, and see the committed state
    assert client["docs"].get(1)["tag"] == 1
    assert http("POST", f"/transactions/{tid}/commit")[0] == 200
    with client.transaction():
        client["docs"].insert({"id": 30, "tag": 3})
    assert _tags(client) == {1: 11, 2: 2, 3: 3, 4: 4, 5: 5, 30: 3}


# ---- the client's context managers ----------------------------------------------------------

def test_client_transaction_commits_at_a_clean_exit(client):
    docs = client["docs"]
    v = client.version
    with client.transaction() as tx:
        docs.insert([{"id": 20, "tag": 20}])
        docs.update({"tag": 21}, ids=[20])
        docs.delete(ids=[5])
        assert docs.get(20)["tag"] == 21 and docs.count() == 5
        assert client.sql("SELECT count(*) FROM docs").rows == [(5,)]
    assert tx.version == v + 1 == client.version
    assert docs.count(as_of=v) == 5 and _tags(client) == {1: 1, 2: 2, 3: 3, 4: 4, 20: 21}


def test_client_transaction_rolls_back_on_an_exception(client):
    docs = client["docs"]
    v = client.version
    with pytest.raises(KeyError):
        with client.transaction():
            docs.insert([{"id": 20, "tag": 20}])
            client.sql("UPDATE docs SET tag = 0")
            raise KeyError("undo")
    assert client.version == v and _tags(client) == {i: i for i in range(1, 6)}
    # a failed write inside (an id taken) and the exception leaves: nothing stays
    with pytest.raises(vv.DuplicateIdError):
        with client.transaction():
            docs.insert([{"id": 21, "tag": 1}])
            docs.insert([{"id": 1, "tag": 1}])
    assert _tags(client) == {i: i for i in range(1, 6)}


def test_client_transaction_after_sql_commit_inside_fails_its_exit(client):
    """SQL's COMMIT ends the block's transaction; the calls after it are refused,
    never autocommitted, and the block's own commit says it has ended."""
    with pytest.raises(vv.TransactionError):
        with client.transaction():
            client["docs"].update({"tag": 60}, ids=[1])
            client.sql("COMMIT")
            with pytest.raises(vv.TransactionNotFoundError):
                client["docs"].update({"tag": 61}, ids=[2])
    assert _tags(client) == {1: 60, 2: 2, 3: 3, 4: 4, 5: 5}


def test_async_client_transaction_commits_and_rolls_back(server, client):
    async def go():
        async with vv.AsyncClient(server.url, token=TOKEN, timeout=600) as a:
            docs = await a.collection("docs")
            async with a.transaction():
                await docs.insert([{"id": 40, "tag": 40}])
                assert await docs.count() == 6
            with pytest.raises(RuntimeError):
                async with a.transaction():
                    await docs.delete(ids=[40])
                    await a.sql("UPDATE docs SET tag = 0")
                    raise RuntimeError("undo")
            await a.sql("BEGIN")
            await a.sql("UPDATE docs SET tag = 999 WHERE id = 1")
            await a.sql("ROLLBACK")
            return await docs.count()
    assert asyncio.run(go()) == 6
    assert _tags(client) == {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 40: 40}


# ---- idle timeout, timeouts, SIGKILL, SIGTERM: servers of their own -------------------------

def _wait_ended(http: Http, tid: str) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while http("GET", f"/transactions/{tid}")[0] != 404:
        assert time.monotonic() < deadline, "the idle transaction was never rolled back"
        time.sleep(0.05)


def test_an_idle_transaction_is_rolled_back_and_frees_the_writer(tmp_path):
    path = str(tmp_path / "idle.varve")
    with ServerProcess(path, token=TOKEN, env=child_env(),
                       args=["--transaction-idle-timeout", "3"]) as srv:
        c = _client(srv)
        _fill(c)
        http = Http(srv, token=TOKEN)
        tid = _open(http)
        assert http("PATCH", "/collections/docs/items/1", {"tag": 0}, headers=_in(tid))[0] == 200
        _wait_ended(http, tid)
        status, out, _ = http("PATCH", "/collections/docs/items/2", {"tag": 0}, headers=_in(tid))
        assert status == 404 and out["error"]["type"] == "TransactionNotFoundError"
        assert _tags(c) == {i: i for i in range(1, 6)}
        # the writer lock is free: a write and a new transaction go through
        c["docs"].update({"tag": 10}, ids=[1])
        tid = _open(http)
        assert http("POST", f"/transactions/{tid}/commit")[0] == 200
        # a `with` block's transaction rolled back idle: the calls after it raise, and
        # none of them is autocommitted in its place
        with pytest.raises(vv.TransactionNotFoundError):
            with c.transaction():
                c["docs"].update({"tag": 0}, ids=[4])
                deadline = time.monotonic() + HANG_GUARD
                while True:      # the writer lock is free once it is rolled back
                    status, out, _ = http("POST", "/transactions")
                    if status == 201:
                        break
                    assert status == 503 and time.monotonic() < deadline, out
                assert http("POST", f"/transactions/{out['id']}/rollback")[0] == 200
                c["docs"].update({"tag": 0}, ids=[5])
        assert _tags(c) == {1: 10, 2: 2, 3: 3, 4: 4, 5: 5}
        # the client's SQL transaction, rolled back idle: the error once, then on its own
        c.sql("BEGIN")
        c.sql("UPDATE docs SET tag = 0 WHERE id = 3")
        deadline = time.monotonic() + HANG_GUARD
        while True:      # the writer lock is free once it is rolled back
            status, out, _ = http("POST", "/transactions")
            if status == 201:
                break
            assert status == 503 and time.monotonic() < deadline, out
        assert http("POST", f"/transactions/{out['id']}/rollback")[0] == 200
        with pytest.raises(vv.TransactionNotFoundError):
            c.sql("COMMIT")
        assert c.sql("SELECT tag FROM docs WHERE id = 3").rows == [(3,)]
        http.close()
        c.close()


def test_a_request_past_the_timeout_inside_a_transaction_fails_it(tmp_path):
    """--timeout 0.001: requests in the transaction are given up on (504) before
    they answer, some of them; the first one that is makes the transaction failed:
    every later request in it is refused with 25P02 (or given up on too), and its
    commit rolls back, so nothing of it is kept."""
    path = str(tmp_path / "slow.varve")
    db = vv.connect(path)
    db.create_collection("docs", {"tag": "int", "title": vv.Text(fts=True)}).insert(
        [{"id": i, "tag": i % 7, "title": f"word{i % 13} text {i}"} for i in range(20_000)])
    db.close()
    with ServerProcess(path, token=TOKEN, env=child_env(), args=["--timeout", "0.001"]) as srv:
        http = Http(srv, token=TOKEN)

        def answered(method, route, body=None, headers=None):
            """The first answer that is not a 504 (a 504 applied nothing)."""
            for _ in range(10_000):
                status, out, _ = http(method, route, body, headers=headers)
                if status != 504:
                    return status, out
            pytest.fail(f"{method} {route} was always given up on")

        status, out = answered("POST", "/transactions")
        assert status == 201
        tid = out["id"]
        statuses = []
        for _ in range(10_000):
            status, out, _ = http("PATCH", "/collections/docs/items/1", {"tag": 100},
                                  headers=_in(tid))
            statuses.append(status)
            if status == 504:
                break
            status, out, _ = http("POST", "/collections/docs/count",
                                  {"where": "title @@ 'word3 OR text' AND tag > 2"},
                                  headers=_in(tid))
            statuses.append(status)
            if status == 504:
                break
        assert statuses[-1] == 504, "no request ran past a 1 ms timeout"
        assert set(statuses[:-1]) <= {200}
        assert out["error"]["type"] == "RequestTimeoutError"
        status, out = answered("PATCH", "/collections/docs/items/2", {"tag": 100},
                               headers=_in(tid))
        assert status == 409 and out["error"]["sqlstate"] == "25P02"
        status, out = answered("POST", "/sql", {"sql": "SELECT 1"}, headers=_in(tid))
        assert status == 409 and out["error"]["sqlstate"] == "25P02"
        status, out = answered("POST", f"/transactions/{tid}/commit")
        assert status == 409 and out["error"]["type"] == "TransactionAbortedError"
        http.close()
    db = vv.connect(path)
    assert db["docs"].get(1)["tag"] == 1 and db["docs"].get(2)["tag"] == 2
    db.close()


def test_sigkill_mid_transaction_leaves_nothing_of_it(tmp_path):
    path = str(tmp_path / "killed.varve")
    srv = ServerProcess(path, token=TOKEN, env=child_env()).start()
    try:
        c = _client(srv)
        _fill(c)
        v = c.version
        http = Http(srv, token=TOKEN)
        tid = _open(http)
        http("POST", "/collections/docs/items", [{"id": 100 + i, "tag": i} for i in range(500)],
             headers=_in(tid))
        http("POST", "/sql", {"sql": "BEGIN; UPDATE docs SET tag = 0; DELETE FROM docs "
                                     "WHERE id = 1"}, headers=_in(tid))
        http("POST", "/collections", {"name": "made", "schema": {"n": "int"}}, headers=_in(tid))
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait()
        http.close()
        c.close()
    finally:
        srv.kill()
    db = vv.connect(path)
    assert db.version == v and db.collections() == ["docs"]
    assert {d.id: d.fields["tag"] for d in db["docs"].find()} == {i: i for i in range(1, 6)}
    assert db.verify().ok
    db.close()
    with ServerProcess(path, token=TOKEN, env=child_env()) as srv:
        c = _client(srv)
        assert c.version == v and _tags(c) == {i: i for i in range(1, 6)}
        with c.transaction():              # the writer is free after the restart
            c["docs"].insert({"id": 6, "tag": 6})
        c.close()


def test_stopping_the_server_rolls_back_open_transactions(tmp_path):
    path = str(tmp_path / "stopped.varve")
    srv = ServerProcess(path, token=TOKEN, env=child_env()).start()
    try:
        c = _client(srv)
        _fill(c)
        v = c.version
        http = Http(srv, token=TOKEN)
        tid = _open(http)
        http("POST", "/collections/docs/items", [{"id": 9, "tag": 9}], headers=_in(tid))
        http.close()
        c.close()
        # uvicorn ends by raising the signal it caught again, after the shutdown ran
        assert srv.stop() in (0, -signal.SIGTERM)
    finally:
        srv.kill()
    with vv.connect(path, readonly=True) as db:
        # the shutdown went on past the rollback to its checkpoint
        assert db.engine.log.file.superblock.checkpoint_version == db.version == v
        assert db["docs"].get(9) is None and db["docs"].count() == 5
