"""`varvedb serve` through raw HTTP: a real server process on 127.0.0.1, real files.

The verbs themselves are the embedded API's (tests/test_client.py runs its
cases through vv.Client); here is what the server adds: the token, the caps,
the status codes and error bodies, nothing applied by a failed request,
concurrency of reads beside a write, SIGKILL during ingest, a clean SIGTERM.
"""
from __future__ import annotations

from http import client as http_client
import io
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from urllib.parse import quote

import numpy as np
import pytest

import varvedb as vv
from conftest import file_digest
from server_proc import ServerProcess

TOKEN = "s3cret-token"


# The server closes a connection idle for 75 s (uvicorn's timeout_keep_alive in
# server/run.py): a module's kept-alive connection, idle that long while other
# tests ran on a busy machine, met a closed socket (BrokenPipeError). Past this
# much idle time it is opened again before a request, as an HTTP client pool does.
IDLE_REOPEN = 30.0


class Http:
    """One kept-alive connection to a server (http.client, as a plain HTTP user)."""

    def __init__(self, srv: ServerProcess, token: str | None = TOKEN, context=None,
                 timeout: float = 1800):     # a hang guard: a first request may compile
        self.token = token
        self.used = time.monotonic()
        if context is not None:
            self.conn = http_client.HTTPSConnection("127.0.0.1", srv.port, timeout=timeout,
                                                    context=context)
        else:
            self.conn = http_client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)

    def __call__(self, method: str, path: str, body=None, ctype="application/json",
                 headers=None):
        h = {"Content-Type": ctype, **(headers or {})}
        if self.token is not None:
            h["Authorization"] = f"Bearer {self.token}"
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        if time.monotonic() - self.used > IDLE_REOPEN:
            self.conn.close()            # the next request connects again
        self.conn.request(method, path, body, h)
        r = self.conn.getresponse()
        data = r.read()
        self.used = time.monotonic()
        ct = r.getheader("Content-Type", "")
        value = json.loads(data) if ct.startswith("application/json") else data.decode()
        return r.status, value, r

    def close(self):
        self.conn.close()


def fill(http: Http, rows: int = 200, dim: int = 8, name: str = "docs") -> np.ndarray:
    status, _, _ = http("POST", "/collections", {"name": name, "schema": {
        "title": {"kind": "text", "fts": True}, "tag": "int",
        "emb": {"kind": "vector", "dim": dim, "metric": "l2", "dtype": "f32",
                "index": {"kind": "hnsw", "m": 8, "ef_construction": 40,
                          "ef_search": 40}}}})
    assert status == 201
    vecs = np.random.default_rng(7).standard_normal((rows, dim)).astype(np.float32)
    status, out, _ = http("POST", f"/collections/{name}/items", [
        {"id": i, "title": f"doc {i} word{i % 5}", "tag": i % 10, "emb": vecs[i].tolist()}
        for i in range(rows)])
    assert status == 201 and out["ids"] == list(range(rows))
    return vecs


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("served") / "served.varve")
    with ServerProcess(path, token=TOKEN, args=["--max-results", "50", "--max-body-mb", "1"]) \
            as srv:
        http = Http(srv)
        vecs = fill(http)
        yield srv, http, vecs
        http.close()


def version_of(http: Http) -> int:
    return http("GET", "/health")[1]["version"]


# ---- answers -------------------------------------------------------------------

def test_search_answers_what_the_embedded_api_answers(served, tmp_path):
    srv, http, vecs = served
    q = vecs[3] + 0.01
    status, out, r = http("POST", "/collections/docs/search",
                          {"vector": q.tolist(), "limit": 5, "where": "tag >= 2", "exact": True})
    assert status == 200 and r.getheader("Content-Type").startswith("application/json")
    d = np.linalg.norm(vecs - q, axis=1)
    allowed = np.flatnonzero(np.arange(len(vecs)) % 10 >= 2)
    want = allowed[np.argsort(d[allowed], kind="stable")[:5]]
    assert [h["id"] for h in out["hits"]] == want.tolist()
    assert set(out["hits"][0]["fields"]) == {"title", "tag"}


def test_a_batch_answers_each_query_in_order(served):
    srv, http, vecs = served
    queries = [{"vector": vecs[i].tolist(), "limit": 1, "exact": True} for i in (5, 9, 2)]
    queries.append({"text": "word3", "limit": 40, "select": []})
    status, out, _ = http("POST", "/collections/docs/search", {"queries": queries})
    assert status == 200
    assert [r["hits"][0]["id"] for r in out["results"][:3]] == [5, 9, 2]
    assert {h["id"] for h in out["results"][3]["hits"]} == {i for i in range(200) if i % 5 == 3}


def npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def arrow(a) -> bytes:
    import pyarrow as pa
    col = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])
    sink = pa.BufferOutputStream()
    table = pa.table({"q": col})
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


SEARCH_ARGS = "?search=" + quote(json.dumps({"limit": 3, "where": "tag >= 2", "exact": True,
                                             "select": ["tag"]}))


@pytest.mark.parametrize("body", ["npy", "arrow"])
def test_a_binary_batch_answers_the_json_batch_in_each_form_asked(served, body):
    """The query block as .npy or Arrow, the other arguments in ?search=; the answer
    as JSON, msgpack or Arrow (Accept): the same hits as the JSON batch's."""
    import msgspec
    import pyarrow as pa
    srv, http, vecs = served
    block = vecs[[5, 9, 2]] + np.float32(0.01)
    _, want, _ = http("POST", "/collections/docs/search",
                      {"vectors": block.tolist(), "limit": 3, "where": "tag >= 2",
                       "exact": True, "select": ["tag"]})
    raw = npy(block) if body == "npy" else arrow(block)
    ctype = "application/x-npy" if body == "npy" else "application/vnd.apache.arrow.stream"
    status, out, _ = http("POST", "/collections/docs/search" + SEARCH_ARGS, raw, ctype=ctype)
    assert status == 200 and out == want
    assert [len(r["hits"]) for r in want["results"]] == [3, 3, 3]
    for accept in ("application/msgpack", "application/vnd.apache.arrow.stream"):
        http.conn.request("POST", "/collections/docs/search" + SEARCH_ARGS, raw,
                          {"Content-Type": ctype, "Accept": accept,
                           "Authorization": f"Bearer {TOKEN}"})
        r = http.conn.getresponse()
        data = r.read()
        assert r.status == 200 and r.getheader("Content-Type") == accept
        if accept == "application/msgpack":
            assert msgspec.msgpack.decode(data) == want
        else:
            rows = pa.ipc.open_stream(data).read_all().to_pylist()
            assert rows == [{"query": i, "id": h["id"], "score": h["score"],
                             "tag": h["fields"]["tag"]}
                            for i, res in enumerate(want["results"]) for h in res["hits"]]



def test_an_arrow_answer_converts_as_hits_to_arrow_does(served):
    """Vectors come as a fixed-size-list column of the stored values, as the
    embedded Hits.to_arrow gives them (the answer once held them as plain lists)."""
    import pyarrow as pa
    srv, http, vecs = served
    args = "?search=" + quote(json.dumps({"limit": 2, "exact": True, "select": ["emb", "tag"]}))
    http.conn.request("POST", "/collections/docs/search" + args, npy(vecs[[4, 7]]),
                      {"Content-Type": "application/x-npy",
                       "Accept": "application/vnd.apache.arrow.stream",
                       "Authorization": f"Bearer {TOKEN}"})
    r = http.conn.getresponse()
    table = pa.ipc.open_stream(r.read()).read_all()
    assert r.status == 200 and table.column_names == ["query", "id", "score", "emb", "tag"]
    assert table.schema.field("emb").type == pa.list_(pa.float32(), 8)
    ids = table.column("id").to_pylist()
    assert table.column("query").to_pylist() == [0, 0, 1, 1] and ids[0::2] == [4, 7]
    assert np.array_equal(np.stack(table.column("emb").to_numpy(zero_copy_only=False)),
                          vecs[ids])


def test_an_arrow_answer_keeps_json_fields_as_they_are(served):
    """A json field comes as Arrow's json type, each value its JSON text (as
    Hits.to_arrow gives it): dicts of other keys are not one struct of all their
    keys, and a json 1 beside 2.5 stays 1."""
    import msgspec
    import pyarrow as pa
    srv, http, _ = served
    columns = {"d": [{"a": 1}, {"b": 2}, {}, {"a": [1]}], "k": [1, 2.5, None, 3]}
    assert http("POST", "/collections", {"name": "jsonish", "schema": {
        "d": "json", "k": "json", "emb": {"kind": "vector", "dim": 2}}})[0] == 201
    assert http("POST", "/collections/jsonish/items", [
        {"id": i, "d": columns["d"][i], "k": columns["k"][i], "emb": [float(i), 0.0]}
        for i in range(4)])[0] == 201
    args = "?search=" + quote(json.dumps({"limit": 4, "exact": True, "select": ["d", "k"]}))
    http.conn.request("POST", "/collections/jsonish/search" + args,
                      npy(np.zeros((1, 2), np.float32)),
                      {"Content-Type": "application/x-npy",
                       "Accept": "application/vnd.apache.arrow.stream",
                       "Authorization": f"Bearer {TOKEN}"})
    r = http.conn.getresponse()
    table = pa.ipc.open_stream(r.read()).read_all()
    assert r.status == 200
    for name, values in columns.items():
        assert table.schema.field(name).type.extension_name == "arrow.json"
        got = [None if t is None else msgspec.json.decode(t)
               for t in table.column(name).to_pylist()]
        want = [values[i] for i in table.column("id").to_pylist()]
        assert [(type(v), v) for v in got] == [(type(v), v) for v in want]


BAD_BATCHES = [
    ("npy", b"\x93NUMPY\x01\x00", "", 400, "RequestError"),          # cut short
    ("npy", "3d", "", 400, "RequestError"),                         # not (n, dim)
    ("npy", "dim5", "", 422, "DimensionError"),
    ("npy", "ok", "?search=" + quote("{not json"), 400, "RequestError"),
    ("npy", "ok", "?search=" + quote(json.dumps({"vector": [1.0] * 8})), 400,
     "RequestError"),
    ("npy", "ok", "?search=" + quote(json.dumps({"colour": 1})), 400, "RequestError"),
    ("npy", "ok", "?search=" + quote(json.dumps({"limit": 60})), 422,
     "ResultTooLargeError"),
    ("arrow", b"not arrow", "", 400, "RequestError"),
    ("arrow", "two columns", "", 400, "RequestError"),
]


@pytest.mark.parametrize("kind,body,query,status,error", BAD_BATCHES,
                         ids=[f"{b[0]} {b[1]!s:.12} {b[4]}" for b in BAD_BATCHES])
def test_a_malformed_binary_batch_is_a_typed_4xx(served, kind, body, query, status, error):
    import pyarrow as pa
    srv, http, vecs = served
    if body == "3d":
        body = npy(vecs[:4].reshape(2, 2, 8))
    elif body == "dim5":
        body = npy(vecs[:2, :5])
    elif body == "ok":
        body = npy(vecs[:2])
    elif body == "two columns":
        sink = pa.BufferOutputStream()
        table = pa.table({"a": [1, 2], "b": [3, 4]})
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        body = sink.getvalue().to_pybytes()
    ctype = "application/x-npy" if kind == "npy" else "application/vnd.apache.arrow.stream"
    got, out, _ = http("POST", "/collections/docs/search" + query, body, ctype=ctype)
    assert (got, out["error"]["type"]) == (status, error), out


def test_as_of_reads_an_earlier_version(served):
    srv, http, _ = served
    before = version_of(http)
    status, out, _ = http("PATCH", "/collections/docs/items/4", {"tag": 99})
    assert status == 200 and out == {"updated": 1, "version": before + 1}
    _, now, _ = http("GET", "/collections/docs/items/4?select=tag")
    _, then, _ = http("GET", f"/collections/docs/items/4?select=tag&as_of={before}")
    assert now == {"id": 4, "tag": 99} and then == {"id": 4, "tag": 4}
    _, hist, _ = http("GET", "/collections/docs/items/4/history")
    assert [v["doc"]["tag"] for v in hist["versions"]] == [4, 99]
    http("PATCH", "/collections/docs/items/4", {"tag": 4})


def test_put_items_merges_and_replaces_with_merge_false(served):
    srv, http, vecs = served
    before = version_of(http)
    status, out, _ = http("PUT", "/collections/docs/items", [{"id": 6, "tag": 66}])
    assert status == 200 and out == {"ids": [6], "version": before + 1}
    _, doc, _ = http("GET", "/collections/docs/items/6")
    assert doc["tag"] == 66 and doc["title"] == "doc 6 word1" and doc["emb"] == \
        vecs[6].tolist()
    status, out, _ = http("PUT", "/collections/docs/items?merge=false",
                          [{"id": 6, "title": "doc 6 word1", "emb": vecs[6].tolist()}])
    _, doc, _ = http("GET", "/collections/docs/items/6")
    assert status == 200 and doc["tag"] is None and doc["title"] == "doc 6 word1"
    http("PUT", "/collections/docs/items?merge=true", [{"id": 6, "tag": 6}])
    _, hits, _ = http("POST", "/collections/docs/find", {"ids": [6, 999, 5], "select": ["tag"]})
    assert [(h["id"], h["fields"]) for h in hits["hits"]] == [(6, {"tag": 6}), (5, {"tag": 5})]


def test_create_collection_with_exist_ok_finds_the_one_there(served):
    srv, http, _ = served
    spec = {"name": "made_once", "schema": {"n": "int"}, "exist_ok": True}
    status, made, _ = http("POST", "/collections", spec)
    assert status == 201 and made["documents"] == 0
    before = version_of(http)
    status, found, _ = http("POST", "/collections", spec)
    assert status == 200 and found["name"] == "made_once" and version_of(http) == before
    status, _, _ = http("POST", "/collections", {**spec, "exist_ok": False})
    assert status == 422
    assert http("DELETE", "/collections/made_once")[0] == 200


def test_sql_and_history_and_verify(served):
    srv, http, _ = served
    status, out, _ = http("POST", "/sql", {"sql": "SELECT count(*) AS n FROM docs WHERE tag = $1",
                                           "params": [3]})
    assert status == 200 and out["rows"] == [[20]] and out["columns"] == ["n"]
    _, hist, _ = http("GET", "/history")
    assert [v["version"] for v in hist["versions"]] == list(range(1, version_of(http) + 1))
    status, rep, _ = http("POST", "/verify", {})
    assert status == 200 and rep["ok"] is True and rep["versions_checked"] == version_of(http)
    last = hist["versions"][-1]
    status, rep, _ = http("POST", "/verify", {"anchor": [last["version"], last["chain"]]})
    assert rep["ok"] is True
    status, rep, _ = http("POST", "/verify", {"anchor": [last["version"], "00" * 32]})
    assert status == 200 and rep["ok"] is False


def test_sql_may_not_read_the_servers_files(served, tmp_path):
    """COPY FROM a file and embed() naming a model folder read the server's machine:
    an embedded caller's privilege, refused to every client (42501, 403), before
    anything is read; the same statements run embedded."""
    srv, http, _ = served
    secret = tmp_path / "secret.txt"
    secret.write_text("the server's secret\n")
    before, digest = version_of(http), file_digest(srv.path)
    refused = [(f"COPY docs (title) FROM '/proc/self/cmdline'", []),
               (f"COPY docs (title) FROM '{secret}'", []),
               (f"COPY docs (title) FROM '{secret}' WITH (FORMAT csv)", []),
               (f"SELECT 1; COPY docs (title) FROM '{secret}'", []),
               (f"SELECT embed('x', 'onnx:{tmp_path}')", []),
               ("SELECT embed('x', $1)", [f"sentence-transformers:{tmp_path}"]),
               # a DEFAULT is evaluated when the statement runs, after the check
               (f"CREATE TABLE e (id int PRIMARY KEY, x text DEFAULT "
                f"embed('x', 'onnx:{tmp_path}')::text)", []),
               (f"ALTER TABLE docs ADD COLUMN x text DEFAULT embed('x', 'onnx:{tmp_path}')::text",
                [])]
    for statement, params in refused:
        status, out, _ = http("POST", "/sql", {"sql": statement, "params": params})
        assert status == 403, (statement, out)
        assert (out["error"]["type"], out["error"]["sqlstate"]) == ("SqlError", "42501")
    with vv.Client(srv.url, token=TOKEN) as client:
        with pytest.raises(vv.SqlError) as e:
            client.sql(f"COPY docs (title) FROM '{secret}'")
        assert e.value.sqlstate == "42501"
    assert version_of(http) == before and file_digest(srv.path) == digest
    status, out, _ = http("POST", "/sql", {"sql": "SELECT count(*) FROM docs WHERE title "
                                                  "NOT LIKE 'doc %'"})
    assert out["rows"] == [[0]]
    # nor by a collection whose vector field would load it (at each write, and embed(x))
    for spec, status in ((f"onnx:{tmp_path}", 403), ("onnx", 201)):
        got, out, _ = http("POST", "/collections", {"name": "embedded", "schema": {
            "t": "text", "v": {"kind": "vector", "dim": 384, "embed": spec, "source": "t"}}})
        assert got == status and (status == 201 or out["error"]["sqlstate"] == "42501"), out
        if status == 403:
            assert "embedded" not in http("GET", "/collections")[1]["collections"]
    assert out["fields"]["v"]["embed"] == "onnx"
    assert http("DELETE", "/collections/embedded")[0] == 200
    # embedded, the same COPY reads the file
    with vv.connect(tmp_path / "embedded.varve") as db:
        db.sql("CREATE TABLE docs (title text)")
        assert db.sql(f"COPY docs (title) FROM '{secret}'").status == "COPY 1"
        assert db.sql("SELECT title FROM docs").rows == [("the server's secret",)]


def test_copy_from_stdin_and_to_stdout_work_for_every_client(served, tmp_path):
    """The COPY forms whose data travels with the request (copy_data) need no
    privilege: FROM STDIN loads, TO STDOUT answers, under the result cap; a file
    stays refused (42501) and a bad row changes nothing."""
    srv, http, _ = served
    sql = lambda body: http("POST", "/sql", body)[:2]      # noqa: E731
    assert sql({"sql": "CREATE TABLE cp (id int PRIMARY KEY, s text, v vector(2))"})[0] == 200
    status, out = sql({"sql": "COPY cp FROM STDIN", "copy_data": "1\ta\\tb \u00e9\t[1,2]\n"
                                                               "2\t\\N\t[3,4.5]\n"})
    assert status == 200 and (out["status"], out["rowcount"]) == ("COPY 2", 2), out
    status, out = sql({"sql": "COPY cp TO STDOUT WITH (FORMAT csv, HEADER)"})
    assert status == 200 and out["status"] == "COPY 2"
    assert sorted(out["copy_data"].splitlines()) == sorted(
        ["id,s,v", '1,a\tb \u00e9,"[1,2]"', '2,,"[3,4.5]"'])
    before, digest = version_of(http), file_digest(srv.path)
    (tmp_path / "rows").write_text("3\tc\t[5,6]\n")
    for body, status, sqlstate in [
            ({"sql": "COPY cp FROM STDIN", "copy_data": "3\tc\t[5,6]\n4\td\t[7,x]\n"},
             422, "22P02"),
            ({"sql": "COPY cp FROM STDIN"}, 422, "22023"),
            ({"sql": "COPY cp FROM STDIN", "copy_data": ["3\tc\t[5,6]\n"]}, 422, "22023"),
            ({"sql": f"COPY cp FROM '{tmp_path}/rows'"}, 403, "42501"),
            ({"sql": f"COPY cp TO '{tmp_path}/out'"}, 400, "0A000")]:
        got, out = sql(body)
        assert (got, out["error"]["sqlstate"]) == (status, sqlstate), (body, out)
    assert "line 2, column v" in sql({"sql": "COPY cp FROM STDIN",
                                      "copy_data": "3\tc\t[5,6]\n4\td\t[7,x]\n"})[1][
        "error"]["message"]
    assert not (tmp_path / "out").exists()
    # the result cap (50 here) holds for the rows a COPY TO STDOUT answers
    got, out = sql({"sql": "COPY docs TO STDOUT"})
    assert got == 422 and out["error"]["type"] == "ResultTooLargeError", out
    assert version_of(http) == before and file_digest(srv.path) == digest
    # vv.Client: bytes out, and back in through a file object
    with vv.Client(srv.url, token=TOKEN) as client:
        data = client.sql("COPY cp TO STDOUT").copy_data
        assert isinstance(data, bytes) and sorted(data.splitlines()) == [
            b"1\ta\\tb \xc3\xa9\t[1,2]", b"2\t\\N\t[3,4.5]"]
        client.sql("CREATE TABLE cp2 (id int PRIMARY KEY, s text, v vector(2))")
        assert client.sql("COPY cp2 FROM STDIN", copy_data=io.BytesIO(data)).rowcount == 2
        assert client.sql("COPY (SELECT * FROM cp2 ORDER BY id) TO STDOUT").copy_data == \
            client.sql("COPY (SELECT * FROM cp ORDER BY id) TO STDOUT").copy_data
        with pytest.raises(vv.SqlError) as e:
            client.sql("COPY cp2 FROM STDIN", copy_data=b"5\t\xff\t[1,2]\n")
        assert e.value.sqlstate == "22021"
    assert sql({"sql": "DROP TABLE cp; DROP TABLE cp2"})[0] == 200


def test_one_connection_serves_many_requests(served):
    srv, http, _ = served
    conn = http.conn
    for _ in range(30):
        status, _, r = http("GET", "/health")
        assert status == 200 and r.getheader("Connection", "keep-alive") != "close"
    assert http.conn is conn and conn.sock is not None


def test_metrics_use_prometheus_names(served):
    srv, http, _ = served
    http("GET", "/collections/docs")
    status, text, r = http("GET", "/metrics")
    assert status == 200 and r.getheader("Content-Type").startswith("text/plain")
    lines = text.splitlines()
    assert any(line.startswith('varvedb_http_requests_total{method="GET",'
                               'route="/collections/{c}",status="200"}') for line in lines)
    assert any(line.startswith("varvedb_http_request_duration_seconds_bucket{")
               and 'route="/collections/{c}"' in line for line in lines)
    docs = [line for line in lines if line.startswith('varvedb_documents{collection="docs"}')]
    assert docs and float(docs[0].split()[-1]) == 200
    for name in ("varvedb_file_bytes ", "varvedb_memory_bytes{", "varvedb_build_info{",
                 "varvedb_version "):
        assert any(line.startswith(name) for line in lines), name
    assert "# TYPE varvedb_http_requests_total counter" in text
    for name in ("varvedb_vacuums_total ", "varvedb_backups_total ",
                 "varvedb_maintainer_passes_total ", "process_cpu_seconds_total ",
                 "process_resident_memory_bytes ", "python_info{"):
        assert any(line.startswith(name) for line in lines), name
    behind = [line for line in lines if line.startswith("varvedb_index_unindexed_rows{")]
    assert behind and all(float(line.split()[-1]) >= 0 for line in behind)


def test_docs_page_lists_every_route(served):
    srv, http, _ = served
    status, page, r = http("GET", "/docs")
    assert status == 200 and r.getheader("Content-Type").startswith("text/html")
    from varvedb.server.openapi import openapi_document
    for path, methods in openapi_document()["paths"].items():
        for method in methods:
            assert f'id="{method}{path}"' in page, (method, path)
    assert "<script" not in page and "http://" not in page and "https://" not in page


# ---- errors: typed, with their status, and nothing applied -------------------------

BAD = [
    ("POST", "/collections/docs/items", b"[{oops", 400, "RequestError"),
    ("POST", "/collections/docs/items", [{"id": 900, "emb": [1.0, 2.0]}], 422, "DimensionError"),
    ("POST", "/collections/docs/items", [{"id": 1, "tag": 1}], 409, "DuplicateIdError"),
    ("POST", "/collections/docs/items", [{"id": 901, "tag": "x"}], 422, "FieldTypeError"),
    ("POST", "/collections/docs/items", [{"id": 902, "nope": 1}], 422, "UnknownFieldError"),
    ("POST", "/collections/nope/items", [{"id": 1}], 404, "NotFoundError"),
    ("POST", "/collections/docs/items", {"id": 1}, 400, "RequestError"),
    ("PUT", "/collections/docs/items", [{"id": 903, "emb": [1e39] * 8}], 422,
     "VectorRangeError"),       # past float32's range: 22003, as pgvector refuses it
    ("POST", "/collections/docs/update", {"set": {"tag": 1}, "where": "tag >>> 2"}, 400,
     "FilterError"),
    ("POST", "/collections/docs/search", {"text": "\"unclosed"}, 400, "QuerySyntaxError"),
    ("POST", "/collections/docs/search", {"vector": [1.0] * 8, "limit": 51}, 422,
     "ResultTooLargeError"),
    ("POST", "/collections/docs/search", {"vector": [1.0] * 8, "colour": 1}, 400,
     "RequestError"),
    ("POST", "/collections/docs/find", {}, 422, "ResultTooLargeError"),
    ("POST", "/sql", {"sql": "SELEC 1"}, 400, "SqlError"),
    ("POST", "/sql", {"sql": "INSERT INTO docs (id, tag) SELECT id + 1000, tag FROM docs "
                             "RETURNING id"}, 422, "ResultTooLargeError"),
    ("POST", "/sql", {"sql": "SELECT * FROM missing"}, 404, "SqlError"),
    ("POST", "/collections", {"name": "docs", "schema": {"a": "int"}}, 422, "SchemaError"),
    ("POST", "/collections", {"name": "docs", "schema": {"a": "int"}, "exist_ok": True}, 422,
     "SchemaError"),
    ("POST", "/collections", {"name": "docs", "schema": {}, "exist_ok": 1}, 400,
     "RequestError"),
    ("PUT", "/collections/docs/items?merge=no", [{"id": 1, "tag": 1}], 400, "RequestError"),
    ("PUT", "/collections/docs/items", [{"id": 1, "tag": 1}, {"id": 904}, {"id": 1}], 409,
     "DuplicateIdError"),
    ("POST", "/collections/docs/find", {"ids": [1, "x"]}, 422, "FieldTypeError"),
    ("POST", "/collections/docs/find", {"offset": -1}, 422, "FieldTypeError"),
    ("POST", "/collections", {"name": "x", "schema": {"a": "colour"}}, 422, "SchemaError"),
    ("DELETE", "/collections/nope", None, 404, "NotFoundError"),
    ("GET", "/collections/docs/items/abc", None, 422, "FieldTypeError"),
    ("POST", "/collections/docs/count", {"as_of": 10 ** 6}, 404, "VersionNotFoundError"),
    ("POST", "/collections/docs/items", b"\x93NUMPY", 415, "RequestError"),
    ("GET", "/no/such/route", None, 404, "NotFoundError"),
    ("POST", "/collections/docs/items", b"x" * (1 << 20 | 1), 413, "RequestTooLargeError"),
]


@pytest.mark.parametrize("method,path,body,status,kind", BAD,
                         ids=[f"{b[0]} {b[1]} {b[4]}" for b in BAD])
def test_a_bad_request_is_refused_with_its_type_and_changes_nothing(served, method, path, body,
                                                                     status, kind):
    srv, http, _ = served
    ctype = "application/x-npy" if body == b"\x93NUMPY" else "application/json"
    if body == b"\x93NUMPY":      # a binary body where only JSON is taken
        path = "/collections/docs/find"
    before, digest = version_of(http), file_digest(srv.path)
    got, out, _ = http(method, path, body, ctype=ctype)
    assert (got, out["error"]["type"]) == (status, kind), out
    assert out["error"]["message"] and out["error"]["sqlstate"]
    assert version_of(http) == before and file_digest(srv.path) == digest
    assert http("POST", "/collections/docs/count", {})[1] == {"count": 200}


def test_a_syntax_error_carries_its_position(served):
    srv, http, _ = served
    _, out, _ = http("POST", "/collections/docs/search", {"text": "a OR"})
    assert out["error"]["type"] == "QuerySyntaxError" and out["error"]["position"] == 3
    _, out, _ = http("POST", "/sql", {"sql": "SELECT FROM WHERE"})
    assert out["error"]["sqlstate"] == "42601" and isinstance(out["error"]["position"], int)


def test_an_id_with_a_slash_is_read_from_the_path_as_sent(served):
    srv, http, _ = served
    http("POST", "/collections", {"name": "urls", "schema": {"id": "text", "n": "int"}})
    http("POST", "/collections/urls/items", [{"id": "x/y", "n": 1}, {"id": "x", "n": 2}])
    assert http("GET", "/collections/urls/items/x%2Fy")[:2] == (200, {"id": "x/y", "n": 1})
    status, out, _ = http("GET", "/collections/urls/items/x%2Fy/history")
    assert status == 200 and [v["doc"]["n"] for v in out["versions"]] == [1]
    assert http("PATCH", "/collections/urls/items/x%2Fy", {"n": 5})[1]["updated"] == 1
    # a '/' as sent is a separator: no route has two segments after items/
    for method in ("GET", "PATCH", "DELETE"):
        status, out, _ = http(method, "/collections/urls/items/x/y",
                              {"n": 1} if method == "PATCH" else None)
        assert status == 404 and out["error"]["type"] == "NotFoundError"
        assert "item" not in out["error"]
    assert http("DELETE", "/collections/urls/items/x%2Fy")[1]["deleted"] == 1
    assert http("GET", "/collections/urls/items/x")[1] == {"id": "x", "n": 2}
    http("DELETE", "/collections/urls")


def test_the_item_404_names_the_item(served):
    srv, http, _ = served
    status, out, _ = http("GET", "/collections/docs/items/12345")
    assert status == 404 and out["error"]["item"] == 12345
    status, out, _ = http("GET", "/collections/gone/items/1")
    assert status == 404 and "item" not in out["error"]


def test_a_missing_or_wrong_token_is_refused(served):
    srv, http, _ = served
    for token in (None, "wrong", TOKEN + "x", ""):
        anon = Http(srv, token=token)
        status, out, r = anon("GET", "/collections")
        assert status == 401 and out["error"]["type"] == "AuthenticationError"
        # a wrong token is told so; a missing one is told to send one
        assert ("is not this server's token" in out["error"]["message"]) == bool(token)
        assert r.getheader("WWW-Authenticate") == "Bearer"
        status, out, _ = anon("GET", "/no/such/route")
        assert status == 401
        assert anon("GET", "/collections/")[0] == 401     # no redirect round the token
        assert anon("GET", "/docs")[0] == 401             # with a token set, /docs needs it
        assert anon("GET", "/health")[0] == 200
        anon.close()


# ---- concurrency -----------------------------------------------------------------

def test_reads_are_answered_while_a_write_runs(tmp_path):
    with ServerProcess(str(tmp_path / "c.varve")) as srv:
        http = Http(srv, token=None)
        fill(http, rows=50)
        rows = [{"title": "bulk " * 20, "tag": 1, "emb": [0.5] * 8}] * 60_000
        body = json.dumps(rows).encode()
        done = {}

        def write():
            w = Http(srv, token=None)
            status, out, _ = w("POST", "/collections/docs/items", body)
            done["write"] = time.perf_counter()
            done["status"] = status
            w.close()

        t = threading.Thread(target=write)
        t.start()
        reads = []
        while t.is_alive() and len(reads) < 200:
            status, out, _ = http("POST", "/collections/docs/count", {"where": "tag = 3"})
            assert status == 200 and out == {"count": 5}
            reads.append(time.perf_counter())
        t.join()
        assert done["status"] == 201
        # reads went on being answered before the write finished
        assert sum(r < done["write"] for r in reads) >= 3, (len(reads), done)
        http.close()


# ---- process: limits of the command, SIGKILL, SIGTERM -----------------------------

def test_a_non_loopback_address_needs_a_token(tmp_path):
    r = subprocess.run([sys.executable, "-m", "varvedb", "serve", str(tmp_path / "x.varve"),
                        "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True,
                       timeout=1800, env=ServerProcess(str(tmp_path / "x.varve")).env)
    assert r.returncode != 0 and "without a token" in r.stderr
    assert not os.path.exists(tmp_path / "x.varve")


def test_the_token_can_come_from_a_file(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    with ServerProcess(str(tmp_path / "t.varve"), args=["--token-file", str(token_file)]) as srv:
        assert Http(srv, token="from-a-file")("GET", "/collections")[0] == 200
        assert Http(srv, token=None)("GET", "/collections")[0] == 401


def test_the_token_can_come_from_the_environment(tmp_path):
    """VARVEDB_TOKEN keeps the token off the command line (ps, /proc/PID/cmdline)."""
    with ServerProcess(str(tmp_path / "e.varve"), env={"VARVEDB_TOKEN": "from-env"}) as srv:
        assert Http(srv, token="from-env")("GET", "/collections")[0] == 200
        assert Http(srv, token=None)("GET", "/collections")[0] == 401
        assert Http(srv, token="from-envx")("GET", "/collections")[0] == 401
        with open(f"/proc/{srv.proc.pid}/cmdline", "rb") as f:
            assert b"from-env" not in f.read()
    # an option given wins over the environment
    with ServerProcess(str(tmp_path / "e.varve"), token="from-option",
                       env={"VARVEDB_TOKEN": "from-env"}) as srv:
        assert Http(srv, token="from-option")("GET", "/collections")[0] == 200
        assert Http(srv, token="from-env")("GET", "/collections")[0] == 401


def test_tls(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    with ServerProcess(str(tmp_path / "tls.varve"), token=TOKEN,
                       args=["--tls-cert", str(cert), "--tls-key", str(key)]) as srv:
        http = Http(srv, context=ssl.create_default_context(cafile=str(cert)))
        assert http("GET", "/collections")[:2] == (200, {"collections": []})
        with pytest.raises((http_client.HTTPException, OSError)):
            Http(srv, timeout=2)("GET", "/health")     # plain HTTP to a TLS port
        # an idle kept-alive TLS connection holds a SIGTERM's shutdown for asyncio's
        # 30 s TLS-close timeout: a client that is done closes it
        http.close()


def test_sigkill_during_ingest_loses_no_acknowledged_batch(tmp_path):
    path = str(tmp_path / "kill.varve")
    srv = ServerProcess(path).start()
    http = Http(srv, token=None)
    fill(http, rows=10)
    acked, stop = [], threading.Event()
    rng = np.random.default_rng(3)

    def ingest():
        w = Http(srv, token=None)
        batch = 0
        while not stop.is_set():
            ids = list(range(1000 + batch * 500, 1000 + (batch + 1) * 500))
            body = [{"id": i, "tag": batch, "emb": rng.standard_normal(8).tolist()} for i in ids]
            try:
                status, out, _ = w("POST", "/collections/docs/items", body)
            except (OSError, http_client.HTTPException):
                return
            assert status == 201
            acked.append(ids)
            batch += 1

    t = threading.Thread(target=ingest)
    t.start()
    while len(acked) < 8:
        time.sleep(0.01)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    stop.set()
    t.join()
    srv.start()
    http = Http(srv, token=None)
    status, rep, _ = http("POST", "/verify", {})
    assert rep["ok"] is True
    # batch b holds ids 1000 + 500 b ... + 499, acknowledged in order: every id of
    # every acknowledged batch is present (a batch in flight at the kill may have
    # landed too, whole or not at all)
    end = 1000 + 500 * len(acked)
    assert acked[-1][-1] == end - 1
    count = "SELECT count(*) FROM docs WHERE id >= $1 AND id < $2"
    assert http("POST", "/sql", {"sql": count, "params": [1000, end]})[1]["rows"] == [[end - 1000]]
    _, out, _ = http("POST", "/sql", {"sql": count, "params": [end, 10 ** 9]})
    assert out["rows"][0][0] in (0, 500)
    srv.stop()


def insert_then_sigterm(srv: ServerProcess, rows: int) -> dict:
    """POST `rows` rows to docs from a thread, SIGTERM the server while the insert
    is on its way or running, and return its answer ({status, out}) once it came."""
    body = json.dumps([{"tag": 7, "emb": [0.25] * 8} for _ in range(rows)]).encode()
    answer = {}

    def write():
        w = Http(srv, token=None)
        answer["status"], answer["out"], _ = w("POST", "/collections/docs/items", body)

    t = threading.Thread(target=write)
    t.start()
    time.sleep(0.3)            # the body is sent; the insert is running
    srv.proc.send_signal(signal.SIGTERM)
    t.join(600)               # hang guards only
    return answer


def test_sigterm_finishes_the_request_in_flight_then_checkpoints(tmp_path):
    path = str(tmp_path / "term.varve")
    srv = ServerProcess(path).start()
    http = Http(srv, token=None)
    fill(http, rows=100)
    answer = insert_then_sigterm(srv, 80_000)
    assert answer.get("status") == 201 and len(answer["out"]["ids"]) == 80_000
    # uvicorn ends by raising the signal it caught again, after the shutdown ran
    assert srv.proc.wait(600) in (0, -signal.SIGTERM)
    with vv.connect(path, readonly=True) as db:
        # checkpointed at the last version, graph whole: a restart rebuilds nothing
        assert db.engine.log.file.superblock.checkpoint_version == db.version
        assert db["docs"].count() == 80_100
        assert db["docs"].index_status("emb")["unlinked"] == 0


def test_a_request_past_the_timeout_is_504_applies_nothing_and_the_server_goes_on(tmp_path):
    with ServerProcess(str(tmp_path / "slow.varve")) as srv:
        http = Http(srv, token=None)
        fill(http, rows=20_000, dim=64)
        http.close()
        srv.args = ["--timeout", "0.02"]
        srv.restart()
        http = Http(srv, token=None)
        q = np.ones(64).tolist()
        status, out, _ = http("POST", "/collections/docs/search", {
            "queries": [{"vector": q, "exact": True, "where": f"tag != {i}"}
                        for i in range(400)]})
        assert status == 504 and out["error"]["type"] == "RequestTimeoutError"
        # a write that has not begun by the timeout (its 8 MB body is still being
        # decoded) is dropped whole
        before = version_of(http)
        rows = [{"tag": 1, "emb": q} for _ in range(20_000)]
        status, out, _ = http("POST", "/collections/docs/items", rows)
        if status == 504:
            assert version_of(http) == before
            want = 20_000
        else:      # it began in time: then it finished and says so
            assert status == 201 and out["version"] == before + 1
            want = 40_000
        # the server goes on: once the dropped work is off its threads, a count (well
        # under the 20 ms) is answered again
        for _ in range(200):
            status, out, _ = http("POST", "/collections/docs/count", {})
            if status == 200:
                break
            assert status == 504
            time.sleep(0.05)
        assert status == 200 and out["count"] == want


def test_metrics_sum_each_process_counts_and_drop_a_dead_ones_busy(tmp_path, monkeypatch):
    """serve --workers N: each process's counts in a file of its own in the
    folder, summed at the scrape; a dead process's counts stay, its busy
    threads leave (metrics.mark_dead); many keys outgrow the first array."""
    from varvedb.server import metrics as M

    def value(text, name):
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith(name))
    monkeypatch.setenv(M.ENV, str(tmp_path))
    db = vv.connect(str(tmp_path / "m.varve"))
    try:
        one, two = M.Metrics(db), M.Metrics(db)      # two "processes"
        for i in range(300):        # 300 keys of 18 values: past the first 4096
            for m in (one, two):
                m.observe("/r", "GET", 200 + i, 0.0007)
        one.observe("/r", "GET", 200, 100.0)
        one.work_started()
        two.work_started()
        two.work_canceled()
        text = one.render()
        assert value(text, 'varvedb_http_requests_total{method="GET",route="/r",') == 601
        assert value(text, 'varvedb_http_request_duration_seconds_count{method="GET",'
                           'route="/r",status="200"}') == 3
        assert value(text, 'varvedb_http_request_duration_seconds_bucket{le="0.0005",') == 0
        assert value(text, 'varvedb_http_request_duration_seconds_bucket{le="0.001",') == 600
        assert value(text, 'varvedb_http_request_duration_seconds_bucket{le="+Inf",') == 601
        assert value(text, 'varvedb_http_request_duration_seconds_sum{method="GET",'
                           'route="/r",status="200"}') == pytest.approx(100.0014)
        assert value(text, "varvedb_pool_threads_busy ") == 2
        assert value(text, "varvedb_requests_canceled_total ") == 1
        M.mark_dead(str(tmp_path), os.getpid())       # both "processes" end
        text = M.Metrics(db).render()
        assert value(text, 'varvedb_http_requests_total{method="GET",route="/r",') == 601
        assert value(text, "varvedb_pool_threads_busy ") == 0
        assert value(text, "varvedb_requests_canceled_total ") == 1
    finally:
        db.close()

def test_metrics_count_vacuums_backups_and_unindexed_rows(tmp_path):
    from varvedb.server.metrics import Metrics

    def value(text, name):
        return [float(line.split()[-1]) for line in text.splitlines()
                if line.startswith(name)]
    db = vv.connect(str(tmp_path / "m.varve"))
    try:
        docs = db.create_collection("docs", {"body": vv.Text(fts=True),
                                             "emb": vv.Vector(4, index=vv.HNSW())})
        docs.insert([{"body": f"w{i}", "emb": [1.0, i, 0, 0]} for i in range(50)])
        docs.wait_indexed(timeout=600)
        docs.wait_indexed("body", timeout=600)
        m = Metrics(db)
        text = m.render()
        assert value(text, "varvedb_vacuums_total ") == [0.0]
        assert value(text, 'varvedb_index_unindexed_rows{collection="docs",field="emb"}') \
            == [0.0]
        assert value(text, 'varvedb_index_unindexed_rows{collection="docs",field="body"}') \
            == [0.0]
        db.vacuum()
        db.backup(str(tmp_path / "copy.varve"))
        text = m.render()
        assert value(text, "varvedb_vacuums_total ") == [1.0]
        assert value(text, "varvedb_backups_total ") == [1.0]
    finally:
        db.close()
