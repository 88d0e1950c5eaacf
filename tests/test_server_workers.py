"""`varvedb serve --workers N` (server/workers.py): read workers that follow one
writer, on real processes and real sockets on 127.0.0.1.

A read sent on a new connection lands on whichever worker accepts it; a read
that names the version a write answered (X-Varve-Min-Version) is answered at
that version or later on any of them, as the embedded API would answer it.
Waits wait on the event (a worker answering, a version reached), with a hang
guard of minutes; nothing here asserts on time.
"""
from __future__ import annotations

import asyncio
import http.client as http_client
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varvedb as vv
from server_proc import SRC, ServerProcess
# the server tests that hold with read workers as they do with one process: run
# here again against `served` below (two workers)
from test_server import (TOKEN, Http, fill, insert_then_sigterm,  # noqa: F401
                         test_a_batch_answers_each_query_in_order,
                         test_a_bad_request_is_refused_with_its_type_and_changes_nothing,
                         test_a_missing_or_wrong_token_is_refused,
                         test_an_id_with_a_slash_is_read_from_the_path_as_sent,
                         test_as_of_reads_an_earlier_version,
                         test_create_collection_with_exist_ok_finds_the_one_there,
                         test_one_connection_serves_many_requests,
                         test_put_items_merges_and_replaces_with_merge_false,
                         test_search_answers_what_the_embedded_api_answers,
                         test_sql_and_history_and_verify, test_the_item_404_names_the_item)

GUARD = 300.0        # seconds: a hang guard, never a measure
WORKERS = ["--workers", "2"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("workers") / "served.varve")
    with ServerProcess(path, token=TOKEN, args=["--max-results", "50", "--max-body-mb", "1",
                                                *WORKERS]) as srv:
        http = Http(srv)
        vecs = fill(http)
        yield srv, http, vecs
        http.close()


def once(srv: ServerProcess, method: str, path: str, body=None, headers=None):
    """One request on a new connection: it lands on whichever worker accepts it."""
    h = Http(srv)
    try:
        return h(method, path, body, headers=headers)
    finally:
        h.close()


def health(srv: ServerProcess) -> dict:
    return once(srv, "GET", "/health")[1]


def workers_answering(srv: ServerProcess, n: int = 2) -> dict:
    """{process name: pid} once `n` workers have answered /health (a hang guard)."""
    seen, deadline = {}, time.monotonic() + GUARD
    while len(seen) < n:
        assert time.monotonic() < deadline, seen
        h = health(srv)
        seen[h["process"]] = h["pid"]
    return seen


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not predicate():
        assert time.monotonic() < deadline, f"waited past the hang guard for {what}"
        time.sleep(0.02)


# ---- reads on any worker answer what the writes before them wrote ----------------------

ops = st.lists(st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 15), st.integers(-5, 5)),
    st.tuples(st.just("update"), st.integers(0, 15), st.integers(-5, 5)),
    st.tuples(st.just("delete"), st.integers(0, 15), st.just(0))), min_size=1, max_size=12)

_names = iter(range(10 ** 6))


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=ops)
def test_reads_on_random_workers_with_min_version_answer_as_the_embedded_api(served, steps):
    srv, http, _ = served
    name = f"h{next(_names)}"
    oracle = vv.connect(":memory:")
    spec = {"tag": "int", "emb": {"kind": "vector", "dim": 2, "metric": "l2", "dtype": "f32"}}
    oracle.create_collection(name, {"tag": vv.Int(), "emb": vv.Vector(2, metric="l2")})
    status, out, r = http("POST", "/collections", {"name": name, "schema": spec})
    assert status == 201
    expect = oracle[name]
    for op, key, tag in steps:
        if op == "insert":
            row = {"id": key, "tag": tag, "emb": [float(key), float(tag)]}
            try:
                expect.insert([row])
                want = 201
            except vv.DuplicateIdError:
                want = 409
            status, out, r = http("POST", f"/collections/{name}/items", [row])
        elif op == "update":
            n = expect.update({"tag": tag}, ids=[key])
            status, out, r = http("POST", f"/collections/{name}/update",
                                  {"set": {"tag": tag}, "ids": [key]})
            want = 200
            assert out["updated"] == n
        else:
            n = expect.delete(ids=[key])
            status, out, r = http("POST", f"/collections/{name}/delete", {"ids": [key]})
            want = 200
            assert out["deleted"] == n
        assert status == want, out
        version = int(r.getheader("X-Varve-Version"))
        if status != 409:
            assert out["version"] <= version
        # the version the write answered, asked of whichever worker takes a new connection
        at = {"X-Varve-Min-Version": str(version)}
        status, out, r = once(srv, "POST", f"/collections/{name}/find", {}, headers=at)
        assert status == 200 and int(r.getheader("X-Varve-Version")) >= version
        assert {h["id"]: h["fields"]["tag"] for h in out["hits"]} == \
            {h.id: h.fields["tag"] for h in expect.find()}
        status, out, r = once(srv, "GET", f"/collections/{name}/items/{key}", headers=at)
        doc = expect.get(key)
        assert (status, out.get("tag") if status == 200 else None) == \
            ((200, doc["tag"]) if doc is not None else (404, None))
        status, out, _ = once(srv, "POST", f"/collections/{name}/search",
                              {"vector": [float(key), 0.0], "limit": 3, "exact": True},
                              headers=at)
        assert [h["id"] for h in out["hits"]] == \
            [h.id for h in expect.search(vector=[float(key), 0.0], limit=3, exact=True)]
    oracle.close()


def test_both_workers_answer_and_follow_the_writer(served):
    srv, http, _ = served
    pids = workers_answering(srv)
    assert set(pids) == {"worker-0", "worker-1"} and len(set(pids.values())) == 2
    version = int(http("POST", "/collections/docs/update",
                       {"set": {"tag": 3}, "ids": [0]})[2].getheader("X-Varve-Version"))
    # each worker, found on new connections, answers the write without being asked to
    answered = set()
    deadline = time.monotonic() + GUARD
    while answered != set(pids):
        assert time.monotonic() < deadline
        status, out, r = once(srv, "GET", "/collections/docs/items/0")
        assert status == 200 and out["tag"] == 3
        assert int(r.getheader("X-Varve-Version")) >= version
        answered.add(health(srv)["process"])


def test_a_version_no_commit_has_made_is_a_typed_timeout(served):
    srv, http, _ = served
    far = health(srv)["version"] + 1_000_000
    status, out, _ = once(srv, "POST", "/collections/docs/count", {},
                          headers={"X-Varve-Min-Version": str(far)})
    assert status == 504 and out["error"]["type"] == "VersionNotReachedError"
    status, out, _ = once(srv, "POST", "/collections/docs/count", {},
                          headers={"X-Varve-Min-Version": "soon"})
    assert status == 400 and out["error"]["type"] == "RequestError"


def test_sql_that_writes_is_forwarded_and_a_select_is_answered_by_the_worker(served):
    srv, http, _ = served
    status, out, r = once(srv, "POST", "/sql",
                          {"sql": "UPDATE docs SET tag = 42 WHERE id = 1"})
    assert status == 200 and out["rowcount"] == 1
    at = {"X-Varve-Min-Version": r.getheader("X-Varve-Version")}
    status, out, _ = once(srv, "POST", "/sql", {"sql": "SELECT tag FROM docs WHERE id = 1"},
                          headers=at)
    assert status == 200 and out["rows"] == [[42]]


def test_the_client_reads_its_own_writes_from_any_thread(served):
    srv, _, _ = served
    client = vv.Client(srv.url, token=TOKEN)
    docs = client.collection("docs")
    seen = []
    for i in range(20):
        docs.update({"tag": 100 + i}, ids=[2])
        # a new thread: a new connection, on whichever worker accepts it
        t = threading.Thread(target=lambda: seen.append(docs.get(2)["tag"]))
        t.start()
        t.join(GUARD)
    assert seen == [100 + i for i in range(20)]
    client.close()


def test_the_async_client_reads_its_own_writes(served):
    srv, _, _ = served

    async def go():
        async with vv.AsyncClient(srv.url, token=TOKEN, max_connections=4) as client:
            docs = await client.collection("docs")
            for i in range(10):
                await docs.update({"tag": 200 + i}, ids=[4])
                got = await asyncio.gather(*[docs.get(4) for _ in range(4)])
                assert [d["tag"] for d in got] == [200 + i] * 4
    asyncio.run(go())


def test_a_transaction_runs_on_the_writer_and_rolls_back(served):
    srv, _, _ = served
    client = vv.Client(srv.url, token=TOKEN)
    docs = client.collection("docs")
    before = docs.get(5)["tag"]
    with pytest.raises(RuntimeError):
        with client.transaction():
            docs.update({"tag": before + 1}, ids=[5])
            assert docs.get(5)["tag"] == before + 1      # read in it, on the writer
            raise RuntimeError("undo")
    assert docs.get(5)["tag"] == before
    client.close()


def test_metrics_sum_the_workers_requests(served):
    srv, _, _ = served
    workers_answering(srv)

    def counted() -> float:
        text = once(srv, "GET", "/metrics")[1]
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith('varvedb_http_requests_total{method="POST",'
                                      'route="/collections/{c}/count",status="200"}'))
    before = counted()
    answered = set()
    for _ in range(40):
        assert once(srv, "POST", "/collections/docs/count", {})[0] == 200
        answered.add(health(srv)["process"])
    assert counted() == before + 40



def test_metrics_totals_over_the_workers_equal_the_searches_sent(served):
    """The hot search path (answered by the protocol itself on a kept
    connection, or the ASGI way) counts each search once, in whichever worker
    took it: the requests, the histogram's count and +Inf bucket all rise by
    the searches sent, and the busy gauge counts the scrape alone."""
    srv, _, vecs = served
    workers_answering(srv)
    labels = 'method="POST",route="/collections/{c}/search",status="200"'

    def figures() -> dict:
        text = once(srv, "GET", "/metrics")[1]
        out = {}
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
        return out

    def search_figures(f: dict) -> tuple:
        return (f.get(f"varvedb_http_requests_total{{{labels}}}", 0.0),
                f.get(f"varvedb_http_request_duration_seconds_count{{{labels}}}", 0.0),
                f.get(f'varvedb_http_request_duration_seconds_bucket{{le="+Inf",{labels}}}',
                      0.0),
                f.get(f"varvedb_http_request_duration_seconds_sum{{{labels}}}", 0.0))
    before = search_figures(figures())
    kept = Http(srv)
    try:
        for i in range(60):
            body = {"vector": vecs[i].tolist(), "limit": 5}
            status = (kept("POST", "/collections/docs/search", body) if i % 2 else
                      once(srv, "POST", "/collections/docs/search", body))[0]
            assert status == 200
    finally:
        kept.close()
    after = figures()
    got = search_figures(after)
    assert got[:3] == (before[0] + 60, before[1] + 60, before[2] + 60)
    assert got[3] > before[3]
    assert after["varvedb_pool_threads_busy"] == 1.0
    assert after["varvedb_requests_canceled_total"] == 0.0

# ---- lifecycle ---------------------------------------------------------------------------

def test_a_worker_killed_under_load_comes_back_and_nothing_is_lost(tmp_path):
    path = str(tmp_path / "kill.varve")
    with ServerProcess(path, token=TOKEN, args=WORKERS) as srv:
        http = Http(srv)
        fill(http, rows=50)
        http.close()
        stop = threading.Event()
        errors, reads, acked, unsure = [], [0], [], []

        def read():
            client = vv.Client(srv.url, token=TOKEN)
            docs = client.collection("docs")
            while not stop.is_set():
                try:
                    assert docs.count() >= 50
                    assert len(docs.search(vector=[0.1] * 8, limit=5)) == 5
                    reads[0] += 1
                except Exception as e:      # noqa: BLE001 (asserted empty below)
                    errors.append(e)
            client.close()

        def write():
            client = vv.Client(srv.url, token=TOKEN)
            docs = client.collection("docs")
            batch = 0
            while not stop.is_set():
                ids = list(range(1000 + 10 * batch, 1010 + 10 * batch))
                try:
                    docs.insert([{"id": i, "tag": 1, "emb": [0.5] * 8} for i in ids])
                    acked.extend(ids)
                except vv.ServerUnavailableError:   # forwarded by the worker killed
                    unsure.extend(ids)
                batch += 1
            client.close()

        threads = [threading.Thread(target=read) for _ in range(3)] + \
            [threading.Thread(target=write)]
        for t in threads:
            t.start()
        wait_until(lambda: reads[0] > 20 and len(acked) > 20, "the load to run")
        victims = workers_answering(srv)
        os.kill(victims["worker-0"], signal.SIGKILL)
        wait_until(lambda: gone(victims["worker-0"]), "the worker to die")

        def back() -> bool:
            try:
                h = health(srv)
            except (ConnectionError, http_client.HTTPException):
                return False    # accepted on the killed worker's socket: not back yet
            return h["process"] == "worker-0" and h["pid"] != victims["worker-0"]
        wait_until(back, "worker-0 to be started again")
        after = reads[0]
        wait_until(lambda: reads[0] > after + 20, "reads after the restart")
        stop.set()
        for t in threads:
            t.join(GUARD)
        assert errors == []
        # every acknowledged write is there; one whose answer the kill lost may be
        client = vv.Client(srv.url, token=TOKEN)
        present = {h.id for h in client.collection("docs").find(where="id >= 1000")}
        assert set(acked) <= present <= set(acked) | set(unsure)
        client.close()


def test_a_writer_killed_is_started_again_and_keeps_what_it_acknowledged(tmp_path):
    with ServerProcess(str(tmp_path / "writer.varve"), token=TOKEN, args=WORKERS) as srv:
        client = vv.Client(srv.url, token=TOKEN)
        docs = client.create_collection("docs", {"tag": vv.Int()})
        docs.insert([{"id": i, "tag": i} for i in range(10)])
        workers = set(workers_answering(srv).values())
        writer, = set(children(srv.proc.pid)) - workers
        os.kill(writer, signal.SIGKILL)
        wait_until(lambda: gone(writer), "the writer to die")
        # reads go on meanwhile; writes are refused (503, nothing applied) until a new
        # writer serves, then applied
        assert docs.count() == 10

        def written() -> bool:
            try:
                docs.insert([{"id": 10, "tag": 10}])
                return True
            except vv.ServerUnavailableError:
                return False
        wait_until(written, "a new writer to take the write")
        assert {h.id: h.fields["tag"] for h in docs.find()} == {i: i for i in range(11)}
        assert len(set(children(srv.proc.pid)) - workers) == 1
        client.close()


def test_sigterm_drains_every_process_then_checkpoints(tmp_path):
    path = str(tmp_path / "term.varve")
    srv = ServerProcess(path, args=WORKERS).start()
    http = Http(srv, token=None)
    fill(http, rows=100)
    http.close()
    kids = children(srv.proc.pid)
    assert len(kids) == 3
    answer = insert_then_sigterm(srv, 60_000)
    assert answer.get("status") == 201 and len(answer["out"]["ids"]) == 60_000
    assert srv.proc.wait(GUARD) == 0
    assert all(gone(k) for k in kids)
    with vv.connect(path, readonly=True) as db:
        assert db.engine.log.file.superblock.checkpoint_version == db.version
        assert db["docs"].count() == 60_100


def test_the_supervisors_death_ends_its_children(tmp_path):
    srv = ServerProcess(str(tmp_path / "orphan.varve"), args=WORKERS).start()
    kids = children(srv.proc.pid)
    assert len(kids) == 3
    srv.kill()
    wait_until(lambda: all(gone(k) for k in kids), "the children to end")


def test_serve_killed_during_its_warm_leaves_no_compiler_running(tmp_path):
    # an empty kernel cache: the warm's pool compiles for minutes, in processes of its own
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "varvedb", "serve",
                             str(tmp_path / "w.varve"), "--port", "0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: len(children(proc.pid)) >= 2, "the warm's pool to start")
        kids = children(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    wait_until(lambda: all(gone(k) for k in kids), "the warm's processes to end")


def test_a_worker_links_the_rows_it_follows_into_its_graph(served):
    srv, http, _ = served
    rows = [{"id": 5000 + i, "tag": 1, "title": "x", "emb": [float(i % 7)] * 8}
            for i in range(300)]
    status, out, r = http("POST", "/collections/docs/items", rows)
    assert status == 201
    at = {"X-Varve-Min-Version": r.getheader("X-Varve-Version")}
    pending = set(workers_answering(srv))

    def linked() -> bool:
        h = Http(srv)      # one connection: the same worker answers both
        try:
            status, out, _ = h("GET", "/collections/docs", headers=at)
            assert status == 200
            if out["indexes"]["emb"]["unlinked"] == 0:
                pending.discard(h("GET", "/health")[1]["process"])
        finally:
            h.close()
        return not pending
    # each worker's graph comes to hold the rows (the exact tail scan found them meanwhile)
    wait_until(linked, "both workers to link the new rows")


def test_the_clients_maintenance_verbs_through_read_workers(served, tmp_path):
    """Index, branch, merge, restore and backup through vv.Client on `--workers 2`:
    what writes is forwarded to the writer (its maintainer links the graph), and
    each worker answers a branch's read and an explain at the version written."""
    srv, _, _ = served
    c = vv.Client(srv.url, token=TOKEN, timeout=GUARD)
    try:
        d = c.create_collection("par", {"tag": "int", "emb": vv.Vector(3, metric="l2")})
        d.insert([{"id": i, "tag": i % 3, "emb": [i, 1.0, 0.0]} for i in range(40)])
        d.create_index("emb", vv.HNSW(m=8, ef_construction=32))
        assert d.wait_indexed(timeout=GUARD)           # a hang guard
        assert d.index_status()["unlinked"] == 0
        before = c.version
        c.branch("wb")
        c.use("wb")
        d.insert({"id": 100, "tag": 9, "emb": [0.0, 0.0, 1.0]})
        c.use("main")
        assert d.get(100) is None
        written = c.version
        answered, deadline = set(), time.monotonic() + GUARD
        while answered != {"worker-0", "worker-1"}:
            assert time.monotonic() < deadline, answered
            h = Http(srv)          # a new connection: whichever worker accepts it
            try:
                at = {"X-Varve-Min-Version": str(written), "X-Varve-Branch": "wb"}
                status, out, _ = h("GET", "/collections/par/items/100", headers=at)
                assert status == 200 and out["tag"] == 9, out
                status, out, _ = h("POST", "/collections/par/explain",
                                   {"verb": "count", "where": "tag = 9"}, headers=at)
                assert status == 200 and out["plan"]["node"] == "Count", out
                answered.add(h("GET", "/health")[1]["process"])
            finally:
                h.close()
        assert c.diff("main", "wb")["par"] == vv.Changes(added=[100])
        c.merge("wb")
        assert d.get(100)["tag"] == 9                   # read at the merge's version
        info = c.backup(tmp_path / "w.varve")           # streamed by a worker
        with vv.connect(str(tmp_path / "w.varve"), readonly=True) as copy:
            assert copy.version == info.version and copy["par"].count() == 41
        c.restore(before)
        assert d.get(100) is None and d.count() == 40
        c.drop_branch("wb")
        assert [b.name for b in c.branches()] == ["main"]
        # a vacuum swaps the writer's file without a new version: a worker learns of
        # it at the next commit (the board's version bump), and answers from the
        # vacuumed file from then on; the same documents throughout
        report = c.vacuum(keep=1)
        d.insert({"id": 200, "tag": 0, "emb": [1.0, 1.0, 1.0]})
        pending = {"worker-0", "worker-1"}

        def followed() -> bool:
            h = Http(srv)
            try:
                at = {"X-Varve-Min-Version": str(c.version)}
                status, out, _ = h("POST", "/collections/par/count", {}, headers=at)
                assert status == 200 and out["count"] == 41
                status, out, _ = h("GET", "/history", headers=at)
                assert status == 200
                if out["versions"][0]["version"] == report.oldest:
                    pending.discard(h("GET", "/health")[1]["process"])
            finally:
                h.close()
            return not pending
        wait_until(followed, "both workers to follow the vacuumed file")
    finally:
        c.close()
