"""The real server (tests/server_proc.py) under heavy or malformed requests: a read
past the timeout is canceled and its pool thread freed, a text query over the
term cap is a 400, and an Arrow column of a type the ingest does not take is a
422 naming the column, with nothing written."""
from __future__ import annotations

import datetime
import decimal
import http.client as http_client
import io
import itertools
import json
import random
import re
import threading

import numpy as np
import pytest

import varvedb as vv
from conftest import child_env
from server_proc import ServerProcess
from test_server import Http

pa = pytest.importorskip("pyarrow")

ARROW = "application/vnd.apache.arrow.stream"


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    assert found, name
    return float(found.group(1))


def test_reads_past_the_timeout_are_canceled_and_free_the_pool(tmp_path):
    """8 heavy text queries (1 000 distinct phrases, just under the term cap: tens of
    seconds of phrase matching each if run to the end) on a server of 2 pool
    threads and a 1 s timeout: all are 504, the ones that began stop at their next
    cancellation check (counted by /metrics), the pool is idle again, and a 9th
    ordinary request is answered. Before cancellation the 2 threads stayed on
    their heavy reads to the end and every other request was a 504."""
    path = str(tmp_path / "heavy.varve")
    rng = random.Random(3)
    db = vv.connect(path)
    db.create_collection("docs", {"body": vv.Text(fts=True)}).insert(
        [{"id": i, "body": " ".join(rng.choice("ab") for _ in range(400))}
         for i in range(1000)])
    db.close()
    phrases = [" ".join(p) for p in itertools.product("ab", repeat=10)][:1000]
    heavy = {"text": " OR ".join(f'"{p}"' for p in phrases), "limit": 5}
    with ServerProcess(path, args=["--timeout", "1", "--threads", "2"],
                       env=child_env()) as srv:
        http = Http(srv, token=None)
        # warm (the kernels load at their first call) until an ordinary read fits
        for _ in range(100):
            status, out, _ = http("POST", "/collections/docs/search",
                                  {"text": '"a b a"', "limit": 3})
            if status == 200:
                break
        assert status == 200 and len(out["hits"]) == 3
        answers = []

        def send():
            h = Http(srv, token=None, timeout=600)
            answers.append(h("POST", "/collections/docs/search", heavy)[:2])
            h.close()

        senders = [threading.Thread(target=send) for _ in range(8)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(600)
        assert len(answers) == 8
        assert all(s == 504 and out["error"]["type"] == "RequestTimeoutError"
                   for s, out in answers), answers
        # the pool is idle again (the scrape counts itself) once the heavy reads stop
        for _ in range(6000):
            status, metrics, _ = http("GET", "/metrics")
            if status == 200 and _metric(metrics, "varvedb_pool_threads_busy") == 1:
                break
        assert status == 200 and _metric(metrics, "varvedb_pool_threads_busy") == 1
        # each of the 2 threads began a heavy read: it was canceled, not finished
        assert _metric(metrics, "varvedb_requests_canceled_total") >= 2
        status, out, _ = http("POST", "/collections/docs/search",
                              {"text": '"a b a"', "limit": 3})
        assert status == 200 and len(out["hits"]) == 3
        assert "Traceback" not in srv.log()
        http.close()


# ---- the term cap over HTTP -----------------------------------------------------------

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("limits") / "served.varve")
    db = vv.connect(path)
    db.create_collection("docs", {"body": vv.Text(fts=True), "tag": vv.Int(),
                                  "score": vv.Float(), "meta": vv.Json(),
                                  "ts": vv.Timestamp(), "emb": vv.Vector(2)}).insert(
        [{"id": i, "body": f"w{i} common", "tag": i} for i in range(10)])
    db.close()
    with ServerProcess(path, env=child_env()) as srv:
        http = Http(srv, token=None)
        yield srv, http
        http.close()


def _state(http) -> tuple[int, int]:
    return (http("GET", "/health")[1]["version"],
            http("GET", "/collections/docs")[1]["documents"])


@pytest.mark.parametrize("distinct", [1024, 1025])
def test_a_text_query_over_the_term_cap_is_a_400(served, distinct):
    _, http = served
    words = " ".join(f"w{i}" for i in range(distinct))
    status, out, _ = http("POST", "/collections/docs/search", {"text": words, "limit": 3})
    if distinct <= 1024:
        assert status == 200 and out["hits"] == []
    else:
        assert status == 400, out
        assert out["error"]["type"] == "QueryTooLargeError"
        assert out["error"]["sqlstate"] == "54000"


# ---- Arrow ingest: every column type is taken or refused by name -----------------------

def _arrow(columns: dict) -> bytes:
    table = pa.table(columns)
    out = io.BytesIO()
    with pa.ipc.new_stream(out, table.schema) as w:
        w.write_table(table)
    return out.getvalue()


def _sparse_union():
    return pa.UnionArray.from_sparse(pa.array([0, 1], pa.int8()),
                                     [pa.array([1, 2]), pa.array(["a", "b"])])


# kind: (the column, a function making the array). Made by the test, not at
# collection: pyarrow's unions import pandas (~0.5 s of CPU at every pytest
# worker's collection)
BAD = {
    "sparse_union": ("meta", _sparse_union),
    "dense_union": ("meta", lambda: pa.UnionArray.from_dense(
        pa.array([0, 1], pa.int8()), pa.array([0, 0], pa.int32()),
        [pa.array([1]), pa.array(["b"])])),
    "union_id": ("id", _sparse_union),
    "list_of_union": ("meta", lambda: pa.ListArray.from_arrays(
        pa.array([0, 1, 2], pa.int32()), _sparse_union())),
    "binary": ("body", lambda: pa.array([b"a", b"b"])),
    "large_binary": ("body", lambda: pa.array([b"a", b"b"], pa.large_binary())),
    "fixed_binary": ("body", lambda: pa.array([b"ab", b"cd"], pa.binary(2))),
    "decimal": ("score", lambda: pa.array([decimal.Decimal("1.5")] * 2, pa.decimal128(5, 2))),
    "struct_of_decimal": ("meta", lambda: pa.array(
        [{"a": decimal.Decimal("1")}] * 2, pa.struct([("a", pa.decimal128(5, 2))]))),
    "time": ("ts", lambda: pa.array([1, 2], pa.time32("s"))),
    "duration": ("tag", lambda: pa.array([1, 2], pa.duration("s"))),
    "interval": ("meta", lambda: pa.array([(1, 2, 3)] * 2, pa.month_day_nano_interval())),
    "dictionary_of_binary": ("body", lambda: pa.array([b"a", b"b"]).dictionary_encode()),
    "extension": ("meta", lambda: pa.ExtensionArray.from_storage(
        pa.uuid(), pa.array([b"0" * 16, b"1" * 16], pa.binary(16)))),
}


@pytest.mark.parametrize("kind", BAD)
def test_an_arrow_column_of_a_type_not_taken_is_a_422_naming_it(served, kind):
    """A sparse union was a 500 (pyarrow's to_numpy raised); every type the ingest
    does not take is refused at the door, naming the column, nothing written."""
    _, http = served
    column, make = BAD[kind]
    before = _state(http)
    cols = {"id": pa.array([100, 101], pa.int64()), column: make()}
    status, out, _ = http("POST", "/collections/docs/items", _arrow(cols), ctype=ARROW)
    assert status == 422, out
    assert out["error"]["type"] == "FieldTypeError"
    assert repr(column) in out["error"]["message"]
    assert _state(http) == before


GOOD = {     # as BAD: kind: (the column, a function making the array)
    "large_string": ("body", lambda: pa.array(["x y", "y z"], pa.large_string())),
    "dictionary_of_string": ("body", lambda: pa.array(["x", "y"]).dictionary_encode()),
    "uint8": ("tag", lambda: pa.array([1, 2], pa.uint8())),
    "float16": ("score", lambda: pa.array(np.array([1.5, 2], np.float16))),
    "null": ("score", lambda: pa.array([None, None], pa.null())),
    "struct": ("meta", lambda: pa.array([{"a": 1}, {"a": 2}])),
    "list_of_lists": ("meta", lambda: pa.array([[[1]], [[2, 3]]])),
    "map": ("meta", lambda: pa.array([[("a", 1)], [("b", 2)]],
                                     pa.map_(pa.string(), pa.int64()))),
    "timestamp": ("ts", lambda: pa.array([datetime.datetime(2020, 1, 1)] * 2,
                                         pa.timestamp("us"))),
    "fixed_size_list": ("emb", lambda: pa.FixedSizeListArray.from_arrays(
        pa.array([1, 2, 3, 4], pa.float32()), 2)),
}


@pytest.mark.parametrize("kind", GOOD)
def test_an_arrow_column_of_a_type_taken_is_written(served, kind):
    _, http = served
    column, make = GOOD[kind]
    array = make()
    version, count = _state(http)
    n = 1000 + 2 * list(GOOD).index(kind)
    cols = {"id": pa.array([n, n + 1], pa.int64()), column: array}
    status, out, _ = http("POST", "/collections/docs/items", _arrow(cols), ctype=ARROW)
    assert status == 201, out
    assert out["ids"] == [n, n + 1] and _state(http) == (version + 1, count + 2)
    status, item, _ = http("GET", f"/collections/docs/items/{n}")
    assert status == 200
    want = array.dictionary_decode() if pa.types.is_dictionary(array.type) else array
    first = want.to_pylist()[0]
    if kind == "timestamp":
        assert item[column].startswith("2020-01-01")
    elif kind == "map":
        assert item[column] in ([["a", 1]], {"a": 1})
    else:
        assert item[column] == (json.loads(json.dumps(first)) if first is not None
                                else None)


# ---- an Arrow body's decoded size ---------------------------------------------------

def _ipc(table, **options) -> bytes:
    out = pa.BufferOutputStream()
    with pa.ipc.new_stream(out, table.schema,
                           options=pa.ipc.IpcWriteOptions(**options)) as w:
        w.write_table(table)
    return out.getvalue().to_pybytes()


def test_an_arrow_body_that_decodes_past_the_body_cap_is_a_413(tmp_path):
    """The body cap bounds what an Arrow body decodes to, not only the bytes sent:
    a 64 MB column of zeros sent zstd-compressed (a few kB), and a 60 kB string a
    dictionary column repeats 1 000 times (60 MB), are refused before they are
    decoded (413), nothing written; one under the cap, compressed and
    dictionary-encoded, is written. Both were decoded in full (the red team's:
    400 MB from a 13 kB body). A dictionary index out of range is a 400 (it
    was a raw ArrowIndexError, a 500)."""
    path = str(tmp_path / "bomb.varve")
    with vv.connect(path) as db:
        db.create_collection("docs", {"title": "text", "emb": vv.Vector(2)})
    zeros = _ipc(pa.table({"id": pa.array(np.zeros(8 << 20, np.int64))}), compression="zstd")
    words = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1000, np.int32)),
                                           pa.array(["x" * 60_000]))
    repeated = _ipc(pa.table({"id": pa.array(np.arange(1000)), "title": words}))
    outside = pa.DictionaryArray.from_arrays(pa.array(np.array([0, 1 << 30], np.int32)),
                                             pa.array(["x"]), safe=False)
    fits = pa.table({"id": pa.array([1, 2]), "title": pa.array(["a", "b"]).dictionary_encode(),
                     "emb": pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2, 3, 4]), 2)})
    with ServerProcess(path, args=["--max-body-mb", "1"], env=child_env()) as srv:
        http = Http(srv, token=None)
        for body in (zeros, repeated):
            assert len(body) < 1 << 20
            status, out, _ = http("POST", "/collections/docs/items", body, ctype=ARROW)
            assert status == 413 and out["error"]["type"] == "RequestTooLargeError", out
        status, out, _ = http("POST", "/collections/docs/search", zeros, ctype=ARROW)
        assert status == 413 and out["error"]["type"] == "RequestTooLargeError", out
        status, out, _ = http("POST", "/collections/docs/items", _ipc(pa.table(
            {"id": pa.array([7, 8]), "title": outside})), ctype=ARROW)
        assert status == 400 and out["error"]["type"] == "RequestError", out
        assert http("GET", "/collections/docs")[1]["documents"] == 0
        status, out, _ = http("POST", "/collections/docs/items",
                              _ipc(fits, compression="lz4"), ctype=ARROW)
        assert status == 201 and out["ids"] == [1, 2], out
        assert http("GET", "/collections/docs/items/2")[1]["title"] == "b"
        assert "Traceback" not in srv.log()
        http.close()


# ---- /sql's result cap ----------------------------------------------------------------

def _peak_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmHWM"))


def test_a_select_past_the_result_cap_is_refused_before_its_rows_are_made(tmp_path):
    """A cross join of 9 000 000 rows past a cap of 10 answers the cap's 422, its
    rows never made as Python values: the server's peak memory grows by a few
    hundred MB of arrays, not the ~1 GB of rows it grew by when the cap was
    checked after the whole result was made (the red team's: 2.6 GB). A count
    over the same join (one row) is answered."""
    path = str(tmp_path / "join.varve")
    with vv.connect(path) as db:
        db.create_collection("docs", {"tag": "int"}).insert_arrays(
            id=np.arange(3000) + 10 ** 6, tag=np.arange(3000) % 7)
    with ServerProcess(path, args=["--max-results", "10"], env=child_env()) as srv:
        http = Http(srv, token=None)
        status, out, _ = http("POST", "/sql", {"sql": "SELECT count(*) FROM docs a, docs b"})
        assert status == 200 and out["rows"] == [[9_000_000]], out
        before = _peak_mb(srv.proc.pid)
        status, out, _ = http("POST", "/sql",
                              {"sql": "SELECT a.id, b.tag FROM docs a, docs b"})
        assert status == 422 and out["error"]["type"] == "ResultTooLargeError", out
        assert "9,000,000 rows" in out["error"]["message"]
        assert _peak_mb(srv.proc.pid) - before < 600      # MB: the rows were ~1 000
        http.close()


# ---- long waits off the request pool --------------------------------------------------

def test_reads_are_answered_while_long_polls_and_waiting_writes_fill_the_pool(tmp_path):
    """With --threads 2, two GET /log long polls and then two writes waiting for
    the writer lock (an open transaction holds it) wait on pools of their own:
    a read is answered while they wait (before, each took a request-pool thread
    and the read waited for them). The long polls answer at the next commit,
    the writes once the transaction ends."""
    path = str(tmp_path / "waits.varve")
    with vv.connect(path) as db:
        db.create_collection("docs", {"tag": "int"}).insert({"id": 1, "tag": 1})
        newest = db.history()[-1]
    with ServerProcess(path, args=["--threads", "2"], env=child_env()) as srv:
        http = Http(srv, token=None)
        answers: list = []

        def send(method, path, body=None):
            h = http_client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
            h.request(method, path, None if body is None else json.dumps(body))
            r = h.getresponse()
            answers.append((path, r.status, r.read()[:300]))
            h.close()

        def started(*args) -> threading.Thread:
            t = threading.Thread(target=send, args=args)
            t.start()
            return t

        poll = f"/log?after={newest.version}&chain={newest.chain}&wait=10"
        polls = [started("GET", poll) for _ in range(2)]
        status, out, _ = http("GET", "/collections/docs")
        assert status == 200 and out["documents"] == 1
        assert all(t.is_alive() for t in polls) and not answers    # still waiting
        status, tx, _ = http("POST", "/transactions")
        assert status == 201
        writes = [started("POST", "/collections/docs/items", [{"id": 10 + i}])
                  for i in range(2)]
        status, out, _ = http("GET", "/collections/docs/items/1")
        assert status == 200 and out["tag"] == 1
        assert all(t.is_alive() for t in writes)
        status, _, _ = http("POST", f"/transactions/{tx['id']}/rollback")
        assert status == 200
        for t in polls + writes:
            t.join(600)
        assert sorted(a[:2] for a in answers) == sorted(
            [(poll, 200)] * 2 + [("/collections/docs/items", 201)] * 2), answers
        http.close()
