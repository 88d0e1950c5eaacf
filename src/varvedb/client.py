"""`Client` and `AsyncClient`: the embedded API's verbs over `varvedb serve`.

    db = vv.Client("http://127.0.0.1:8080", token="s3cret")     # for vv.connect(path)
    docs = db.collection("docs")
    docs.search(vector=q, where="tag = $1", params=[3], limit=10)

Every verb is written once, as a generator that yields the HTTP requests it
needs (a `_Request`) and is sent back each answer (a `_Response`): it builds
the bodies of docs/server.md and turns the answers into the embedded API's
types (Hits of Hit, SqlResult, VersionInfo, VerifyReport) and its typed
errors (wire.error_from_wire). Only the transport differs: `Client` runs the
generators over stdlib http.client, one kept-alive connection per thread;
`AsyncClient` awaits each request on an httpx.AsyncClient pool.

The retry rule (the same for both): a request is sent again, once, only when
the server cannot have acted on it or acting twice changes nothing —
  * a kept-alive connection the server has closed is found before the request
    goes out (the socket is readable while no answer is due) and replaced;
  * a send that failed on a reused connection, or on a new one the server reset
    (a worker of `serve --workers N` that died with it waiting): the request did
    not reach the server whole, so it never ran (any method; twice at most);
  * a read (`_Request.idempotent`: GET, and the POST routes that only read:
    search, find, count, verify) whose kept-alive connection dropped, or whose
    new one was reset, before its answer (twice at most).
A write whose connection drops after it was sent is never resent (it may have
been applied): it raises ServerUnavailableError saying so. A timeout is never
retried.

Reading its own writes: every answer carries the newest version the server saw
(X-Varve-Version); a client keeps the highest it was given and sends it with
each request (X-Varve-Min-Version), so a read worker of `serve --workers N`
answers at that version or later (docs/server.md, "Read workers"): what this
client wrote, any thread of it, any worker reads.

Transactions: `with db.transaction():` opens one on the server (POST
/transactions) and pins this thread's (asyncio task's) calls on this client to
it — a context variable, read as each request is sent, adds its id in
X-Varve-Transaction — until the block commits or rolls it back. SQL's BEGIN
left open in a text, which the server refuses (nothing ran), is run again in a
transaction opened for it, pinned until SQL's COMMIT or ROLLBACK ends it.
An AsyncClient task canceled as a transaction opens, or as its BEGIN's text
runs, rolls it back (the call changes nothing); one canceled as a block
commits sees the commit through and says so (cancel.end_transaction).
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import http.client
import importlib.util
import io
import os
import select
import ssl
import sys
import threading
import time
import weakref
from typing import Any, Generator, Iterable, NamedTuple
from urllib.parse import quote, urlsplit

import msgspec
import numpy as np

from . import cancel
from . import errors as E
from .query.plan import PlanNode, plan_from_dict
from .query.request import REQUESTS, RRF_K, WEIGHTS, Count, Find, Search, as_of_to_wire
from .reports import BranchInfo, Changes, VacuumReport, rows_bar
from .results import Hit, Hits, SqlResult, VersionInfo
from .schema import HNSW, IVFPQ, Field, Schema, batch_length, brief, one_id
from .storage.backup import BackupInfo
from .schema_inference import creation_data, infer_schema
from .tabular import frame_columns
from .storage.verify import Break, VerifyReport
from .wire import (error_from_wire, loads, params_to_wire, parse_timestamp, value_from_wire,
                   vector_read_type)
from .wire import encode as _encode

JSON = "application/json"
ARROW = "application/vnd.apache.arrow.stream"
NPY = "application/x-npy"
TRANSACTION_HEADER = "X-Varve-Transaction"
VERSION_HEADER = "X-Varve-Version"
MIN_VERSION_HEADER = "X-Varve-Min-Version"
BRANCH_HEADER = "X-Varve-Branch"
BAR_STEP = 0.5   # seconds: the longest wait_indexed request while a bar is drawn
BACKUP_VERSION, BACKUP_BYTES = "X-Varve-Backup-Version", "X-Varve-Backup-Bytes"

# the transaction each client's calls run in, per thread (and per asyncio task):
# {client key: _Pin}; None: none anywhere
_PINS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("varvedb_client_pins",
                                                                   default=None)


class _Pin:
    """A transaction a thread's (task's) calls on one client run in. A task made
    inside it copies the context, so this object is shared: once its scope ends
    (`ended`), every copy is dropped at its next call, which runs on its own."""
    __slots__ = ("id", "by_sql", "ended")

    def __init__(self, tid: str, by_sql: bool):
        self.id = tid
        self.by_sql = by_sql          # opened for SQL's BEGIN (not a `with` block)
        self.ended = False


class _Request(NamedTuple):
    method: str
    path: str                       # quoted, with its query string
    body: bytes | None = None
    content_type: str = JSON
    idempotent: bool = False        # safe to send twice (see the module's retry rule)
    accept: str | None = None       # the answer's form asked for (Accept), if not JSON
    sink: Any = None                # a binary file a 200's body is written to, as it comes
    opens: bool = False             # it opens a transaction (AsyncClient._opening)


# open a transaction (for a `with` block, or for SQL's BEGIN)
_OPEN = _Request("POST", "/transactions", opens=True)


class _Response(NamedTuple):
    status: int
    body: bytes                     # b"" when a sink took it
    version: int | None = None      # X-Varve-Version: the newest version the answer saw
    backup: tuple | None = None     # GET /backup: (its version, its bytes) from the headers


# ---- bodies and answers ----------------------------------------------------------

def _body(obj: Any) -> bytes:
    try:
        return _encode(obj)
    except (TypeError, ValueError, OverflowError) as e:
        raise E.FieldTypeError(f"cannot send this value as JSON: {e}") from None


def _post(path: str, obj: Any, idempotent: bool = False, method: str = "POST") -> _Request:
    return _Request(method, path, _body(obj), JSON, idempotent)


def _copy_text(data) -> str:
    """copy_data as the JSON body's text: a str, or bytes (a file object's) in UTF-8."""
    if callable(getattr(data, "read", None)):
        data = data.read()
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise E.SqlError("22021", 'copy_data: invalid byte sequence for encoding "UTF8" '
                                      f"at byte {e.start}") from None
    if not isinstance(data, str):
        raise E.SqlError("22023", f"copy_data is str, bytes or a binary file object, got "
                                  f"{type(data).__name__}")
    return data


class _Seen:
    """The highest version a client's answers carried (X-Varve-Version), across
    its threads: what its next request asks to be answered at, at least."""
    __slots__ = ("value", "_lock")

    def __init__(self):
        self.value = 0
        self._lock = threading.Lock()

    def saw(self, version: int | None) -> None:
        if version is not None and version > self.value:
            with self._lock:     # two threads' answers never lower it
                if version > self.value:
                    self.value = version


def _version_header(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _backup_headers(get) -> tuple | None:
    """(version, bytes) of a GET /backup answer, from its headers (None: absent)."""
    v, n = get(BACKUP_VERSION), get(BACKUP_BYTES)
    if v is None or n is None or not v.isdigit() or not n.isdigit():
        return None
    return int(v), int(n)


def _get(path: str) -> _Request:
    return _Request("GET", path, None, JSON, True)


def _error(resp: _Response) -> E.VarveError:
    """The typed error of an error answer; `http_status` keeps its status."""
    try:
        body = msgspec.json.decode(resp.body) if resp.body else None
    except msgspec.DecodeError:
        body = resp.body[:200].decode(errors="replace")
    exc = error_from_wire(body, resp.status)
    exc.http_status = resp.status
    return exc


def _answer(resp: _Response, decoder=None) -> Any:
    """The decoded body of a 2xx answer; any other status raises its typed error."""
    if not 200 <= resp.status < 300:
        raise _error(resp)
    try:
        return loads(resp.body, decoder)
    except msgspec.DecodeError as e:     # ValidationError too
        raise E.ServerError(f"the server's answer does not read: {e}") from None


class _Answer(msgspec.Struct):
    hits: list[Hit]                 # msgspec builds the Hit structs in C
    plan: dict | None = None


class _BatchAnswer(msgspec.Struct):
    results: list[_Answer]


_HITS = msgspec.json.Decoder(_Answer)
_BATCH = msgspec.json.Decoder(_BatchAnswer)
_BATCH_MSGPACK = msgspec.msgpack.Decoder(_BatchAnswer)
MSGPACK = "application/msgpack"


def _batch_request(path: str, request: Search) -> _Request:
    """A batch of query vectors (request.vectors) sent binary: the block as .npy,
    the other arguments in ?search=, the answer asked for as msgpack."""
    wire = msgspec.structs.replace(request, vectors=None).to_wire()
    return _Request("POST", f"{path}/search?search={quote(_body(wire).decode(), safe='')}",
                    _npy_body(request.vectors), NPY, True, accept=MSGPACK)


def _given(**args) -> dict:
    """A JSON body of the arguments given (None: left to the server's default)."""
    return {k: v for k, v in args.items() if v is not None}


def _query_string(**args) -> str:
    parts = [f"{k}={quote(str(v), safe=',:')}" for k, v in args.items() if v is not None]
    return "?" + "&".join(parts) if parts else ""


def _select_param(select) -> str | None:
    if select is None:
        return None
    if not isinstance(select, (list, tuple)) or not all(isinstance(s, str) for s in select):
        raise E.FieldTypeError(f"select is a list of field names, got {brief(select)}")
    return ",".join(select)           # "" is the empty list: the id alone


def _rows(rows) -> Any:
    """insert/upsert's rows as a JSON array (a wrong shape is sent as it is: the
    server refuses it with the embedded API's error); a table's columns as rows."""
    columns = frame_columns(rows)
    if columns is not None:
        return _json_rows(columns.pop("id", None), columns)
    if isinstance(rows, dict):
        return [rows]
    if isinstance(rows, (list, tuple)):
        return rows
    if hasattr(rows, "__iter__") and not isinstance(rows, (str, bytes, bytearray)):
        return list(rows)
    return rows


def _schema_of(desc: dict) -> Schema:
    """The Schema of a collection from GET /collections/{c}."""
    if isinstance(desc.get("schema"), dict):
        return Schema.from_dict(desc["schema"])
    id_kind = desc.get("id", "int")
    d = {"id": "text" if id_kind == "str" else id_kind, "fields": desc.get("fields", {})}
    for flag in ("id_hidden", "id_required"):
        if flag in desc:
            d[flag] = desc[flag]
    return Schema.from_dict(d)


def _field_spec(spec: Any) -> Any:
    return spec.to_dict() if isinstance(spec, Field) else spec


def _segment(name) -> str:
    """A name as one path segment (a field, a branch): NotFoundError if not a str."""
    if not isinstance(name, str) or not name:
        raise E.NotFoundError(f"a name is a non-empty str, got {brief(name)}")
    return quote(name, safe="")


def _side(side):
    """A side of diff() on the wire (routes.side_from_wire)."""
    if isinstance(side, str):
        return {"branch": side}
    if isinstance(side, (tuple, list)) and len(side) == 2 and isinstance(side[0], str):
        return {"branch": side[0], "as_of": as_of_to_wire(side[1])}
    if isinstance(side, (tuple, list, str, dict)):
        raise E.OptionError(f"a side of a diff is a version, a branch name or (branch, "
                            f"version), got {brief(side)}")
    return {"as_of": as_of_to_wire(side)}


def _branch_info(d: dict) -> BranchInfo:
    return BranchInfo(d["name"], d["parent"], d["fork"], d["created"], d["head"])


def _plain_int(v):
    return v.item() if isinstance(v, np.integer) else v


def _collection_path(name: str) -> str:
    return "/collections/" + quote(name, safe="")


def _convert_hits(hits: list, specs: dict) -> None:
    """Vectors and timestamps (`specs`: those fields) of the hits back from their
    JSON form, in place (a block of vectors becomes one float32 array, its rows
    handed out, as the embedded API's are)."""
    for name in [n for n in hits[0].fields if n in specs]:
        spec = specs[name]
        values = [h.fields[name] for h in hits]
        if spec["kind"] == "vector" and None not in values:
            try:
                block = np.asarray(values, vector_read_type(spec.get("dtype")))
            except ValueError:       # ragged: leave it to value_from_wire one by one
                block = None
            if block is not None and block.ndim == 2:
                for h, row in zip(hits, block):
                    h.fields[name] = row
                continue
        for h, v in zip(hits, values):
            h.fields[name] = value_from_wire(spec["kind"], v, spec.get("dtype"))


# ---- insert_arrays' bodies: Arrow IPC, .npy, or JSON rows ------------------------

@functools.cache
def _arrow_available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


# the kinds whose values come back in a form of their own (wire.value_from_wire)
_TYPED_KINDS = ("vector", "timestamp", "bytes")


def _arrow_body(schema: Schema, id, columns: dict) -> bytes | None:
    """The columns as one Arrow IPC stream (vectors as FixedSizeList<float32>);
    None where a column does not make an Arrow array (then JSON rows go)."""
    import pyarrow as pa
    names, arrays = [], []
    try:
        if id is not None:
            names.append("id")
            arrays.append(pa.array(np.asarray(id) if isinstance(id, range) else id))
        for name, col in columns.items():
            f = schema.fields[name]
            if f.kind in ("json", "bytes"):      # (the server takes no Arrow binary)
                return None
            if f.kind == "vector":
                a = _block(col)
                if a is not None and a.dtype != object and a.ndim == 2:
                    flat = pa.array(np.ascontiguousarray(a, np.float32).reshape(-1))
                    arrays.append(pa.FixedSizeListArray.from_arrays(flat, a.shape[1]))
                else:
                    arrays.append(pa.array(
                        [None if v is None else np.asarray(v, np.float32) for v in col],
                        pa.list_(pa.float32(), f.dim)))
            else:
                arrays.append(pa.array(col))
            names.append(name)
        table = pa.Table.from_arrays(arrays, names)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return None
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def _block(col) -> np.ndarray | None:
    """A vector column as one array; None where it makes none (rows of several
    widths, or a None among them: NULL vectors, which go row by row)."""
    if isinstance(col, np.ndarray):
        return col
    try:
        return np.asarray(col)
    except (ValueError, TypeError):
        return None


def _one_batch(queries: list[dict]) -> Search | None:
    """search_batch's queries as one batch of query vectors, when each has a numpy
    vector= of one dtype and shape and the same other arguments; else None."""
    vectors = [q.get("vector") for q in queries]
    if not vectors or not all(isinstance(v, np.ndarray) and v.ndim == 1 for v in vectors) \
            or len({(v.dtype, v.shape) for v in vectors}) != 1:
        return None
    rest = [{k: v for k, v in q.items() if k != "vector"} for q in queries]
    if any(isinstance(v, np.ndarray) for r in rest for v in r.values()) or \
            any(r != rest[0] for r in rest[1:]):
        return None
    try:
        return Search.of(**rest[0], vectors=np.stack(vectors))
    except E.VarveError:     # what one query alone may be (a rerank=, say): sent as JSON
        return None


def _npy_body(a) -> bytes:
    a = np.asarray(a)
    if a.dtype.kind != "f":
        a = a.astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _json_rows(id, columns: dict) -> list[dict]:
    cols = {k: (v.tolist() if isinstance(v, np.ndarray) else list(v)) for k, v in columns.items()}
    if id is not None:
        cols = {"id": id.tolist() if isinstance(id, np.ndarray) else list(id), **cols}
    names = list(cols)
    return [dict(zip(names, vals)) for vals in zip(*cols.values())] if names else []


# ---- the verbs, written once --------------------------------------------------------

def _blocking(op):
    """A verb of the sync client: the generator run over http.client."""
    @functools.wraps(op)
    def verb(self, *args, **kwargs):
        return self._drive(op(self, *args, **kwargs))
    return verb


def _awaitable(op):
    """A verb of the async client: the same generator, each request awaited."""
    @functools.wraps(op)
    async def verb(self, *args, **kwargs):
        return await self._drive(op(self, *args, **kwargs))
    return verb


Op = Generator[_Request, _Response, Any]
_MANY = object()     # get() without an id: a list of documents


class _CollectionVerbs:
    """One collection's verbs as request generators, and its cached schema."""

    def __init__(self, client, desc: dict):
        self._client = client
        self.name = desc["name"]
        self._path = _collection_path(self.name)
        self._describe(desc)

    def _describe(self, desc: dict) -> None:
        self._schema = _schema_of(desc)
        self._fields = {n: f.to_dict() for n, f in self._schema.fields.items()}
        # the fields whose values do not come back as JSON gives them
        self._typed = {n: spec for n, spec in self._fields.items()
                       if spec["kind"] in _TYPED_KINDS}

    @property
    def schema(self) -> Schema:
        """The collection's schema as last fetched (refetched when an answer or a
        call names a field it does not have)."""
        return self._schema

    def _drive(self, op):
        return self._client._drive(op)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} at {self._client.url}>"

    def _refresh(self) -> Op:
        self._describe(_answer((yield _get(self._path))))

    def _known(self, names) -> Op:
        if not self._fields.keys() >= names - {"id"}:
            yield from self._refresh()

    def _hits(self, answer: _Answer) -> Op:
        hits = answer.hits
        if hits:
            yield from self._known(hits[0].fields.keys())
            if self._typed:
                _convert_hits(hits, self._typed)
        return Hits(hits, plan=None if answer.plan is None else plan_from_dict(answer.plan),
                    fields=self._schema.fields)

    def _doc(self, doc: dict) -> Op:
        yield from self._known(doc.keys())
        for k in self._typed.keys() & doc.keys():
            spec = self._typed[k]
            doc[k] = value_from_wire(spec["kind"], doc[k], spec.get("dtype"))
        return doc

    def _item_path(self, id) -> Op:
        try:
            key = one_id(self._schema, id)
        except E.FieldTypeError:
            yield from self._refresh()        # the collection may have been made anew
            key = one_id(self._schema, id)
        return f"{self._path}/items/{quote(str(key), safe='')}"

    # ---- writes

    def insert(self, rows: dict | Iterable[dict]) -> Op:
        """Insert new documents; an id already taken raises DuplicateIdError. Returns the
        ids. A table (pandas, pyarrow, polars) is sent column-wise, as insert_arrays."""
        columns = frame_columns(rows)
        if columns is not None:
            ids = yield from _CollectionVerbs.insert_arrays(self, **columns)
            return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        return (_answer((yield _post(f"{self._path}/items", _rows(rows)))))["ids"]

    def insert_arrays(self, id=None, **columns) -> Op:
        """Insert documents given column-wise (vectors as an (n, dim) array); `id`
        optional. Sent as Arrow IPC where pyarrow is installed, else as .npy for
        one vector column without ids, else as JSON rows. Returns the ids."""
        yield from self._known(columns.keys())    # the embedded API's errors, before sending
        self._schema.check_names(columns, "insert_arrays")
        batch_length(id, columns)
        path = f"{self._path}/items"
        req = None
        if self._client._bulk in ("auto", "arrow") and _arrow_available():
            body = _arrow_body(self._schema, id, columns)
            if body is not None:
                req = _Request("POST", path, body, ARROW)
        if req is None and self._client._bulk in ("auto", "npy") and id is None \
                and len(columns) == 1:
            (name, col), = columns.items()
            a = _block(col)
            if self._schema.fields[name].kind == "vector" and a is not None and a.ndim == 2 \
                    and a.dtype.kind in "fiu":
                req = _Request("POST", path + _query_string(field=name), _npy_body(a), NPY)
        if req is None:
            req = _post(path, _json_rows(id, columns))
        ids = _answer((yield req))["ids"]
        return np.asarray(ids, np.int64) if self._schema.id_kind == "int" else ids

    def upsert(self, rows: dict | Iterable[dict], merge: bool = True) -> Op:
        """Insert documents, or merge each into the live document with its id (the
        fields a row does not name keep their values); merge=False: `replace`.
        Returns the ids."""
        if merge is not True and merge is not False:
            raise E.OptionError(f"merge is True or False, got {brief(merge)}")
        path = f"{self._path}/items" + ("" if merge else _query_string(merge="false"))
        return (_answer((yield _post(path, _rows(rows), method="PUT"))))["ids"]

    def replace(self, rows: dict | Iterable[dict]) -> Op:
        """Insert documents, each replacing the whole live document with its id
        (`upsert(rows, merge=False)`). Returns the ids."""
        return (yield from _CollectionVerbs.upsert(self, rows, merge=False))

    def update(self, set: dict, where: str | None = None, params: list | tuple = (),
               ids: list | None = None) -> Op:
        """Set fields on the live documents matching `where` (or `ids`). Returns the count."""
        body = _given(set=set, where=where, params=params_to_wire(params), ids=ids)
        return _answer((yield _post(f"{self._path}/update", body)))["updated"]

    def delete(self, ids: list | None = None, where: str | None = None,
               params: list | tuple = ()) -> Op:
        """Delete live documents by id (a list) or by filter. Returns how many were deleted."""
        body = _given(ids=ids, where=where, params=params_to_wire(params))
        return _answer((yield _post(f"{self._path}/delete", body)))["deleted"]

    # ---- reads

    def get(self, id=_MANY, as_of=None, select: list | None = None, *, ids: list | None = None,
            where: str | None = None, params: list | tuple = (), limit: int | None = None,
            offset: int = 0, branch: str | None = None) -> Op:
        """get(id): the document with this id (as of a version or aware datetime),
        or None. Without the id: a list of documents, as Collection.get answers
        (POST .../find?vectors=true with ids: every field the server's schema
        has, vectors too, or `select`'s)."""
        if id is _MANY:
            body = Find.of(where, params, as_of, limit, select, branch, offset, ids).to_wire()
            path = f"{self._path}/find" + ("?vectors=true" if select is None else "")
            resp = yield _post(path, body, idempotent=True)
            hits = yield from self._hits(_answer(resp, _HITS))
            return [{"id": h.id, **h.fields} for h in hits]
        if ids is not None or where is not None or params not in ((), []) or limit is not None \
                or offset != 0 or branch is not None:
            raise E.FieldTypeError("get(id) answers one document; get(ids=[...], where=..., "
                                   "limit=..., offset=...) a list")
        path = (yield from self._item_path(id)) + _query_string(
            as_of=as_of_to_wire(as_of), select=_select_param(select))
        resp = yield _get(path)
        if resp.status == 404:
            err = _error_body(resp)
            if err is not None and "item" in err:     # the item is missing, not the collection
                return None
        return (yield from self._doc(_answer(resp)))

    def count(self, where: str | None = None, params: list | tuple = (), as_of=None,
              branch: str | None = None) -> Op:
        """How many documents are visible (as of a version), optionally filtered."""
        body = Count.of(where, params, as_of, branch).to_wire()
        return _answer((yield _post(f"{self._path}/count", body, idempotent=True)))["count"]

    def find(self, where: str | None = None, params: list | tuple = (), as_of=None,
             limit: int | None = None, select: list | None = None,
             branch: str | None = None, offset: int = 0) -> Op:
        """Documents matching a filter, in insertion order (no scoring): `offset`
        skipped, then at most `limit` (None: all)."""
        body = Find.of(where, params, as_of, limit, select, branch, offset).to_wire()
        resp = yield _post(f"{self._path}/find", body, idempotent=True)
        return (yield from self._hits(_answer(resp, _HITS)))

    def search(self, vector=None, where: str | None = None, params: list | tuple = (),
               limit: int = 10, select: list | None = None, as_of=None,
               field: str | None = None, ef: int | None = None, exact: bool = False,
               metric: str | None = None, *, probes: int | None = None,
               text: str | None = None, match: str = "all",
               text_field: str | None = None, vector_text: str | None = None,
               rerank=None, candidates: int | None = None, rrf_k: int = RRF_K,
               weights: tuple = WEIGHTS, explain: bool = False,
               branch: str | None = None, vectors=None) -> Op:
        """The `limit` best documents: Collection.search's arguments and answers (see
        there), checked here as the embedded API checks them (query/request.py)
        before anything is sent. `hits.plan` is the plan as it ran, as data, with
        explain=True (else None). `vectors=` (a 2-D array, one query a row): a
        batch in one request, answered as a list of Hits in the rows' order."""
        request = Search.of(vector, where, params, limit, select, as_of, field, ef, exact,
                            metric, probes=probes, text=text, text_field=text_field,
                            vector_text=vector_text, rerank=rerank, candidates=candidates,
                            rrf_k=rrf_k, weights=weights, explain=explain,
                            branch=branch, match=match, vectors=vectors)
        if request.vectors is None:
            resp = yield _post(f"{self._path}/search", request.to_wire(), idempotent=True)
            return (yield from self._hits(_answer(resp, _HITS)))
        return (yield from self._batch(request))

    def _batch(self, request: Search) -> Op:
        resp = yield _batch_request(self._path, request)
        out = []
        for answer in _answer(resp, _BATCH_MSGPACK).results:
            out.append((yield from self._hits(answer)))
        return out

    def search_batch(self, queries: list[dict]) -> Op:
        """Several searches in one request (each a dict of search's arguments):
        a list of Hits, in order (a batch of query vectors alone, the rest alike:
        `search(vectors=...)`). It fails whole, before sending, if one query is
        wrong in itself (and at the server if one is wrong for the collection)."""
        if not isinstance(queries, (list, tuple)) or not all(isinstance(q, dict)
                                                              for q in queries):
            raise E.FieldTypeError(f"search_batch takes a list of dicts, got {brief(queries)}")
        try:
            requests = [Search.of(**q) for q in queries]
        except TypeError as e:
            raise E.OptionError(f"a search query: {e}") from None
        batch = _one_batch(queries)
        if batch is not None:        # numpy query vectors, the rest alike: sent binary
            return (yield from self._batch(batch))
        bodies = [r.to_wire() for r in requests]
        resp = yield _post(f"{self._path}/search", {"queries": bodies}, idempotent=True)
        out = []
        for answer in _answer(resp, _BATCH).results:
            out.append((yield from self._hits(answer)))
        return out

    def explain(self, verb: str = "search", /, **args) -> Op:
        """The plan `search(**args)` (or `find`, `count`) would run, built on the
        server without running it: a PlanNode, as Collection.explain's."""
        kind = REQUESTS.get(verb) if isinstance(verb, str) else None
        if kind is None:
            raise E.OptionError(f"explain takes 'search', 'find' or 'count', got {brief(verb)}")
        return (yield from _CollectionVerbs.plan(self, kind.of(**args)))

    def run(self, request: Search | Find | Count) -> Op:
        """Answer a read request (query/request.py): Collection.run; a Count an int."""
        kind = type(request)
        if kind not in (Search, Find, Count):
            raise E.OptionError(f"run takes a Search, Find or Count, got {brief(request)}")
        verb = "search" if kind is Search else "find" if kind is Find else "count"
        resp = yield _post(f"{self._path}/{verb}", request.to_wire(), idempotent=True)
        if kind is Count:
            return _answer(resp)["count"]
        return (yield from self._hits(_answer(resp, _HITS)))

    @property
    def database(self):
        """The client this collection came from (Collection.database's)."""
        return self._client

    def plan(self, request: Search | Find | Count) -> Op:
        """The plan a request (query/request.py) would run, not run: Collection.plan."""
        verb = next((k for k, cls in REQUESTS.items() if type(request) is cls), None)
        if verb is None:
            raise E.OptionError(f"plan takes a Search, Find or Count, got {brief(request)}")
        body = {"verb": verb, **request.to_wire()}
        a = _answer((yield _post(f"{self._path}/explain", body, idempotent=True)))
        return plan_from_dict(a["plan"])

    def create_index(self, field: str, index: HNSW | IVFPQ | str,
                     name: str | None = None) -> Op:
        """Build an index (Collection.create_index): vv.HNSW(...) or vv.IVFPQ(...) on a
        vector field, "hash" or "sorted" on a scalar one."""
        if isinstance(index, (HNSW, IVFPQ)):
            index.check()
            spec = index.to_dict()
        elif isinstance(index, str):
            spec = index
        else:
            raise E.SchemaError(f"create_index takes vv.HNSW(...), vv.IVFPQ(...), 'hash' "
                                f"or 'sorted', got {brief(index)}")
        _answer((yield _post(f"{self._path}/indexes",
                             {"field": field, "index": spec, "name": name})))
        yield from self._refresh()

    def drop_index(self, field: str) -> Op:
        """Drop the index of a field (a vector field's graph, or a scalar index)."""
        _answer((yield _Request("DELETE", f"{self._path}/indexes/{_segment(field)}")))
        yield from self._refresh()

    def index_status(self, field: str | None = None) -> Op:
        """How far a field's deferred index has caught up with the committed rows
        (the server's writer's figures): {"field", "linked", "unlinked",
        "rows_per_s", "eta_s"}."""
        return _answer((yield _get(f"{self._path}/index_status" + _query_string(field=field))))

    def wait_indexed(self, field: str | None = None, timeout: float | None = None,
                     progress: bool | None = None) -> Op:
        """Wait until a field's deferred index covers every row committed before
        this call: True then, False if `timeout` seconds passed first (None: no
        limit). Each request waits at most the server's own timeout; the client
        asks again until its own ends. `progress`: a bar of the rows indexed
        meanwhile, as the embedded wait_indexed draws (None: when 50 000 rows or
        more are left and stderr is a terminal), from index_status asked between
        waits of at most BAR_STEP seconds."""
        if timeout is not None and (isinstance(timeout, bool) or
                                    not isinstance(timeout, (int, float)) or timeout < 0):
            raise E.OptionError(f"timeout is a number of seconds >= 0, got {brief(timeout)}")
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = None
        if progress or (progress is None and sys.stderr is not None and sys.stderr.isatty()):
            status = yield from _CollectionVerbs.index_status(self, field)
            start = status["unlinked"]
            bar = rows_bar(start, f"{status['field']}: waiting for its index", progress)
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                wait = left if bar is None else min(BAR_STEP, BAR_STEP if left is None else left)
                a = _answer((yield _post(f"{self._path}/wait_indexed",
                                         {"field": field, "timeout": wait}, idempotent=True)))
                if bar is not None:
                    status = yield from _CollectionVerbs.index_status(self, field)
                    bar.update(max(0, min(start - status["unlinked"], start) - bar.n))
                if a["indexed"]:
                    return True
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        finally:
            if bar is not None:
                bar.close()

    def vector_memory(self, field: str | None = None) -> Op:
        """Memory of a vector field (Collection.vector_memory's dict)."""
        return _answer((yield _get(f"{self._path}/vector_memory" +
                                   _query_string(field=field))))

    def add_field(self, name: str, spec) -> Op:
        """Add a field ("int", "vector(8)", vv.Int(default=0), ...)."""
        _answer((yield _post(f"{self._path}/fields",
                             {"name": name, "spec": _field_spec(spec)})))
        yield from self._refresh()

    def drop_field(self, name: str) -> Op:
        """Drop a field, its values (at every version) and its indexes."""
        _answer((yield _Request("DELETE", f"{self._path}/fields/{_segment(name)}")))
        yield from self._refresh()

    def rename_field(self, old: str, new: str) -> Op:
        """Rename a field (its values and indexes go with it, at every version)."""
        _answer((yield _post(f"{self._path}/fields/{_segment(old)}/rename", {"new": new})))
        yield from self._refresh()

    def history(self, id) -> Op:
        """Every version of one document: [{"version", "deleted", "doc"}], oldest first."""
        resp = yield _get((yield from self._item_path(id)) + "/history")
        if resp.status == 404:
            err = _error_body(resp)
            if err is not None and "item" in err:
                return []
        out = []
        for e in _answer(resp)["versions"]:
            doc = e.get("doc")
            if doc is not None:
                e["doc"] = yield from self._doc(doc)
            out.append(e)
        return out


def _opens_transaction(resp: _Response) -> bool:
    """Is this the server's refusal of a BEGIN the text leaves open (nothing ran)?"""
    err = _error_body(resp)
    return err is not None and err.get("type") == "TransactionRequiredError" \
        and err.get("sqlstate") == E.TransactionRequiredError.sqlstate


class _TransactionScope:
    """`with db.transaction():` over HTTP — the embedded semantics: the client's
    calls on this thread (task) run in one transaction the server holds open
    (POST /transactions), which commits at a clean exit and rolls back at an
    exception. After a failure inside it (a request past the server's timeout,
    a failed SQL statement after BEGIN, a failed write) its requests answer
    TransactionAbortedError (25P02) and the commit rolls back; a transaction
    idle past the server's --transaction-idle-timeout is rolled back, and what
    follows in the block raises TransactionNotFoundError."""
    __slots__ = ("client", "id", "version")

    def __init__(self, client):
        self.client = client
        self.id: str | None = None
        self.version: int | None = None      # the commit's, once committed

    def __repr__(self) -> str:
        return f"<varvedb client transaction {self.id} at {self.client.url}>"


class ClientTransaction(_TransactionScope):
    __slots__ = ()

    def __enter__(self) -> "ClientTransaction":
        self.client._drive(self.client._open_transaction(self))
        self.client._pin(self.id, by_sql=False)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.client._unpin(self.id)
        self.client._drive(self.client._end_transaction(self, commit=exc_type is None))


class AsyncClientTransaction(_TransactionScope):
    """A task canceled as the transaction opens holds none (AsyncClient._opening);
    one canceled as it ends sees the end through, and the CancelledError's note
    says how it ended."""
    __slots__ = ()

    async def __aenter__(self) -> "AsyncClientTransaction":
        await self.client._drive(self.client._open_transaction(self))
        self.client._pin(self.id, by_sql=False)
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        self.client._unpin(self.id)
        await cancel.end_transaction(self, self.client._drive(
            self.client._end_transaction(self, commit=exc_type is None)))


def _error_body(resp: _Response) -> dict | None:
    try:
        body = msgspec.json.decode(resp.body)
    except msgspec.DecodeError:
        return None
    err = body.get("error") if isinstance(body, dict) else None
    return err if isinstance(err, dict) else None


class _ClientVerbs:
    """The database-wide verbs as request generators."""
    _collection_class: type

    def create_collection(self, name: str, schema: dict | None = None,
                          exist_ok: bool = False, *, data=None) -> Op:
        """Create a collection with a schema of field name -> type (strings such as
        "text", "vector(3)", or vv field objects). exist_ok=True: one of that name
        and schema is returned; one with another schema raises SchemaError. data
        (rows, a DataFrame, an Arrow table) is inserted in the same commit, and
        without a schema the schema is inferred from it, as the embedded API does."""
        if exist_ok is not False and exist_ok is not True:
            raise E.OptionError(f"exist_ok is True or False, got {brief(exist_ok)}")
        data = creation_data(schema, data)
        if schema is None:
            schema = infer_schema(data)              # before JSON loses the dtypes
        spec = {k: _field_spec(v) for k, v in schema.items()} if isinstance(schema, dict) \
            else schema
        body = {"name": name, "schema": spec, **({"exist_ok": True} if exist_ok else {}),
                **({"data": _rows(data)} if data is not None else {})}
        desc = _answer((yield _post("/collections", body)))
        return self._collection_class(self, desc)

    def get_or_create_collection(self, name: str, schema: dict | None = None, *,
                                 data=None) -> Op:
        """create_collection(name, schema, exist_ok=True, data=data)."""
        return (yield from _ClientVerbs.create_collection(self, name, schema, exist_ok=True,
                                                          data=data))

    def collection(self, name: str) -> Op:
        """An existing collection (NotFoundError if there is none by that name)."""
        if not isinstance(name, str):
            raise E.NotFoundError(f"a collection is named by a str, got {brief(name)}")
        desc = _answer((yield _get(_collection_path(name))))
        return self._collection_class(self, desc)

    def collections(self) -> Op:
        return _answer((yield _get("/collections")))["collections"]

    def drop_collection(self, name: str) -> Op:
        """Drop a collection: its documents are gone for every version."""
        if not isinstance(name, str):
            raise E.NotFoundError(f"a collection is named by a str, got {brief(name)}")
        _answer((yield _Request("DELETE", _collection_path(name))))

    def sql(self, text: str, params: list | tuple = (), copy_data=None) -> Op:
        """Run SQL in pgvector's dialect on the server; returns a SqlResult. `copy_data`
        (str, UTF-8 bytes or a binary file object) is what a COPY ... FROM STDIN reads;
        a COPY ... TO STDOUT's data comes back in the result's copy_data (bytes)."""
        body = {"sql": text, "params": params_to_wire(params)}
        if copy_data is not None:
            body["copy_data"] = _copy_text(copy_data)
        resp = yield _post("/sql", body)
        if resp.status == 409 and self._pinned() is None and _opens_transaction(resp):
            # a BEGIN the text leaves open, which the server runs in no request of its
            # own (nothing ran): open a transaction for this thread's calls and run the
            # text in it; they run in it until SQL's COMMIT or ROLLBACK ends it
            tid = _answer((yield _OPEN))["id"]
            self._pin(tid, by_sql=True)
            resp = yield _post("/sql", body)
        a = _answer(resp)
        if a.get("transaction") == "ended":
            self._unpin(by_sql=True)
        kinds = a.get("kinds") or [None] * len(a["columns"])
        convert = [i for i, k in enumerate(kinds) if k in _TYPED_KINDS]
        rows = [tuple(r) for r in a["rows"]]
        if convert:
            rows = [tuple(value_from_wire(kinds[i], v) if i in convert else v
                          for i, v in enumerate(r)) for r in rows]
        data = a.get("copy_data")
        return SqlResult(a["columns"], rows, a["status"], a.get("rowcount"), kinds=kinds,
                         copy_data=None if data is None else data.encode())

    def history(self) -> Op:
        """Every commit still held: version, timestamp, chain hash, rows changed."""
        a = _answer((yield _get("/history")))
        return [VersionInfo(v["version"], parse_timestamp(v["timestamp"]), v["chain"],
                            v["rows_changed"], v.get("branch", "main")) for v in a["versions"]]

    def verify(self, anchor: tuple[int, str] | None = None) -> Op:
        """The server re-reads its file (see Database.verify); anchor=(version, chain hex)."""
        body = {} if anchor is None else {
            "anchor": list(anchor) if isinstance(anchor, (tuple, list)) else anchor}
        a = _answer((yield _post("/verify", body, idempotent=True)))
        fb = a.get("first_break")
        return VerifyReport(a["ok"], a["versions_checked"],
                            None if fb is None else Break(fb["version"], fb["offset"],
                                                          fb["reason"]), a["chain"])

    def refresh(self) -> Op:
        """Database.refresh's: every answer is at the server's newest already, so
        this only answers the version (as `version`)."""
        return (yield from self._version())

    def _version(self) -> Op:
        branch = self._transport.branch
        if branch is not None:       # use()d: that branch's newest, as Database.version
            return _answer((yield _get(f"/branches/{_segment(branch)}")))["head"]
        return _answer((yield _get("/health")))["version"]

    # ---- branches (Database.branch, branches, use, drop_branch, merge, diff)

    def _not_in_transaction(self, verb: str) -> None:
        if self._pinned() is not None:
            raise E.TransactionError(f"{verb}() inside a transaction: commit or roll back "
                                     "first")

    @property
    def current_branch(self) -> str:
        """The branch this client reads and writes (use())."""
        return self._transport.branch or "main"

    def use(self, name: str) -> Op:
        """Read and write branch `name` from now on (this client's calls, every
        thread: Database.use's per-connection choice); not inside a transaction."""
        self._not_in_transaction("use")
        info = _branch_info(_answer((yield _get(f"/branches/{_segment(name)}"))))
        self._transport.branch = None if info.name == "main" else info.name

    def branch(self, name: str, at=None) -> Op:
        """Fork branch `name` from the current one as of `at` (a version or an aware
        datetime; None: now): Database.branch. Returns its BranchInfo."""
        self._not_in_transaction("branch")
        body = {"name": name, "at": as_of_to_wire(at)}
        return _branch_info(_answer((yield _post("/branches", body))))

    def branches(self) -> Op:
        """Every live branch, main first."""
        return [_branch_info(b) for b in _answer((yield _get("/branches")))["branches"]]

    def drop_branch(self, name: str) -> Op:
        """Drop branch `name` (not main, not the one in use)."""
        self._not_in_transaction("drop_branch")
        _answer((yield _Request("DELETE", f"/branches/{_segment(name)}")))

    def merge(self, source: str) -> Op:
        """Merge branch `source` into the current one as one commit; returns the
        version (MergeConflictError, nothing written, on a conflict)."""
        self._not_in_transaction("merge")
        return _answer((yield _post("/merge", {"source": source})))["version"]

    def diff(self, a, b) -> Op:
        """What changed from `a` to `b`, per collection: {name: Changes}; each side
        a version of the current branch, a branch name, or (branch name, version)."""
        body = {"a": _side(a), "b": _side(b)}
        a = _answer((yield _post("/diff", body, idempotent=True)))["changes"]
        return {name: Changes(c["added"], c["changed"], c["deleted"]) for name, c in a.items()}

    # ---- history operations, on the server's own file

    def vacuum(self, keep=None, progress: bool | None = None, graphs: str = "rebuild") -> Op:
        """Compact the server's file (Database.vacuum); `progress` is the server's
        business (no bar here). Returns a VacuumReport."""
        self._not_in_transaction("vacuum")
        body = {"keep": as_of_to_wire(keep) if keep is not None and not isinstance(
            keep, (int, np.integer)) else _plain_int(keep), "graphs": graphs}
        a = _answer((yield _post("/vacuum", body)))
        return VacuumReport(**a)

    def restore(self, version) -> Op:
        """A new commit on the current branch whose documents equal those as of
        `version` (a number or an aware datetime); returns the new version. Not
        inside a transaction over the client (embedded, it joins one)."""
        self._not_in_transaction("restore")
        a = _answer((yield _post("/restore", {"version": as_of_to_wire(version)})))
        return a["version"]

    def checkpoint(self) -> Op:
        """The server writes its current state so its next open loads it."""
        _answer((yield _Request("POST", "/checkpoint")))

    def backup(self, path: str | os.PathLike, progress: bool | None = None) -> Op:
        """Copy the server's file, as of its newest durable commit, to `path` here
        (a new file; never a path on the server): the bytes stream into PATH.tmp,
        which is checked whole (its size, and storage.verify up to the version it
        was taken at), fsynced and renamed into place, then the folder fsynced.
        A failure leaves no PATH. Returns a BackupInfo."""
        from .storage.backup import place_new, remove_quietly
        from .storage.verify import verify_file
        try:
            dest = os.fspath(path)
        except TypeError:
            raise E.OptionError(f"a backup's path is a str or os.PathLike, got "
                                f"{brief(path)}") from None
        if os.path.exists(dest):
            raise E.OptionError(f"{dest} exists: a backup never overwrites a file")
        tmp = dest + ".tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise E.OptionError(f"{tmp} exists: another backup to {dest} is under way, or "
                                "one was cut short (remove it)") from None
        except ValueError as e:
            raise E.OptionError(f"{dest!r} is not a file path: {e}") from e
        except OSError as e:
            raise E.StorageError(f"{dest}: could not create the backup: {e.strerror or e}",
                                 e) from e
        try:
            with os.fdopen(fd, "wb") as f:
                resp = yield _Request("GET", "/backup", sink=f)
                if resp.status != 200 or resp.backup is None:
                    _answer(resp)
                    raise E.ServerError("the server's backup came without its version")
                version, size = resp.backup
                f.flush()
                if f.tell() != size:
                    raise E.ServerUnavailableError(
                        f"the backup stream ended at {f.tell():,} of {size:,} bytes")
                os.fsync(f.fileno())
            report = verify_file(tmp, expect_version=version)
            if not report.ok:
                raise E.CorruptFileError(f"the backup did not verify ({report.first_break})")
            place_new(tmp, dest)
        except OSError as e:
            remove_quietly(tmp)
            raise E.StorageError(f"{dest}: the backup failed ({e.strerror or e}); nothing "
                                 "was left there", e) from e
        except BaseException:
            remove_quietly(tmp)
            raise
        return BackupInfo(dest, version, size)

    # ---- the transaction this thread's (task's) calls run in

    @property
    def in_transaction(self) -> bool:
        """Whether this thread's (task's) calls run in a server transaction (a
        `transaction()` block, or SQL's BEGIN), as Session.in_transaction says."""
        return self._pinned() is not None

    def _pinned(self) -> _Pin | None:
        pins = _PINS.get()
        pin = None if pins is None else pins.get(self._key)
        if pin is not None and pin.ended:      # a child task's copy of an ended scope
            self._drop_pin()
            return None
        return pin

    def _pin(self, tid: str, by_sql: bool) -> None:
        _PINS.set({**(_PINS.get() or {}), self._key: _Pin(tid, by_sql)})

    def _drop_pin(self) -> None:
        pins = {k: v for k, v in _PINS.get().items() if k != self._key}
        _PINS.set(pins or None)

    def _unpin(self, tid: str | None = None, by_sql: bool | None = None) -> None:
        """End this client's transaction here (only if it is `tid`, or one SQL
        opened, when those are given): for every task that shares it too."""
        pin = self._pinned()
        if pin is None or (tid is not None and pin.id != tid) or \
                (by_sql is not None and pin.by_sql != by_sql):
            return
        pin.ended = True
        self._drop_pin()

    def _lost(self, pin: _Pin) -> None:
        """The server holds no transaction `pin` (ended, or rolled back idle): one SQL
        opened is forgotten (the next calls run on their own, as after ROLLBACK);
        a `with transaction()` block's stays, so the rest of the block fails too."""
        if pin.by_sql:
            self._unpin(pin.id)

    def _open_transaction(self, scope: "_TransactionScope") -> Op:
        if self._pinned() is not None:
            raise E.TransactionError("this thread already has an open transaction on this "
                                     "client")
        scope.id = _answer((yield _OPEN))["id"]

    def _end_transaction(self, scope: "_TransactionScope", commit: bool) -> Op:
        if commit:
            path = f"/transactions/{quote(scope.id, safe='')}/commit"
            scope.version = _answer((yield _Request("POST", path)))["version"]
            return
        yield from self._roll_back(scope.id)

    def _roll_back(self, tid: str) -> Op:
        resp = yield _Request("POST", f"/transactions/{quote(tid, safe='')}/rollback")
        if resp.status != 404:       # 404: it has ended already (nothing left to undo)
            _answer(resp)


# ---- the sync transport: http.client, one kept-alive connection per thread ------------

def _dropped(sock) -> bool:
    """Has the server closed this idle connection? (Readable while no answer is due.)"""
    try:
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(sock, select.POLLIN)
            return bool(p.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _unavailable(url: str, e: Exception, sent: bool = False) -> E.ServerUnavailableError:
    what = (f"the connection to {url} failed after the request was sent "
            f"(it may or may not have been applied): ") if sent else \
        f"cannot reach the server at {url}: "
    return E.ServerUnavailableError(what + (f"{type(e).__name__}: {e}" if str(e)
                                            else type(e).__name__))


def _early_answer(conn) -> _Response | None:
    """The answer a server sent before it stopped reading the request, if any."""
    if conn.sock is None:
        return None
    try:
        resp = conn.getresponse()
        return _Response(resp.status, resp.read())
    except (OSError, http.client.HTTPException):
        return None


class _OneSend:
    """http.client sends a request's head and its body in two sends; one is
    cheaper, and a request then either left whole or failed while leaving."""

    def _send_output(self, message_body=None, encode_chunked=False):
        if not isinstance(message_body, bytes):
            return super()._send_output(message_body, encode_chunked)
        self._buffer.extend((b"", message_body))
        msg = b"\r\n".join(self._buffer)
        del self._buffer[:]
        self.send(msg)


class _HTTPConnection(_OneSend, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_OneSend, http.client.HTTPSConnection):
    pass


_TRANSPORTS: weakref.WeakSet = weakref.WeakSet()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: [t._forget() for t in list(_TRANSPORTS)])


class _Connections:
    def __init__(self, url: str, token: str | None, timeout: float,
                 ssl_context: ssl.SSLContext | None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise E.OptionError(f"the server's URL is http://host:port or https://..., "
                                f"got {brief(url)}")
        self.url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._ssl = ssl_context
        self._headers = {}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._local = threading.local()
        self._all: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        self.branch: str | None = None      # the client's use(): None is main
        _TRANSPORTS.add(self)

    def _forget(self) -> None:
        """In a forked child: the parent's connections are the parent's."""
        self._local = threading.local()
        self._all = weakref.WeakSet()
        self._lock = threading.Lock()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                conn = _HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                        context=self._ssl)
            else:
                conn = _HTTPConnection(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
            with self._lock:
                self._all.add(conn)
        return conn

    def send(self, req: _Request, transaction: str | None = None,
             min_version: int = 0) -> _Response:
        if self._closed:
            raise E.ClosedError("the client was closed")
        conn = self._connection()
        path = self._prefix + req.path
        headers = self._headers if req.body is None else {
            **self._headers, "Content-Type": req.content_type}
        if req.accept is not None:
            headers = {**headers, "Accept": req.accept}
        if transaction is not None:
            headers = {**headers, TRANSACTION_HEADER: transaction}
        if min_version:
            headers = {**headers, MIN_VERSION_HEADER: str(min_version)}
        if self.branch is not None:
            headers = {**headers, BRANCH_HEADER: self.branch}
        for attempt in range(3):
            reused = conn.sock is not None
            if reused and _dropped(conn.sock):
                conn.close()
                reused = False
            try:
                conn.request(req.method, path, req.body, headers)
            except (OSError, http.client.HTTPException) as e:
                early = None if isinstance(e, TimeoutError) else _early_answer(conn)
                conn.close()
                if early is not None:     # refused before the body was read (a 413, say)
                    return early
                if attempt < 2 and not isinstance(e, TimeoutError) and \
                        (reused or isinstance(e, ConnectionResetError)):
                    continue          # not sent whole: the server cannot have run it
                    # (reset on a new connection: a worker of `serve --workers N`
                    # died with the connection waiting on its socket)
                raise _unavailable(self.url, e) from None
            try:
                resp = conn.getresponse()
                version = _version_header(resp.getheader(VERSION_HEADER))
                if req.sink is not None and resp.status == 200:
                    while chunk := resp.read(1 << 20):
                        req.sink.write(chunk)
                    return _Response(200, b"", version, _backup_headers(resp.getheader))
                return _Response(resp.status, resp.read(), version)
            except TimeoutError as e:
                conn.close()
                raise _unavailable(self.url, e, sent=not req.idempotent) from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if attempt < 2 and req.idempotent and \
                        (reused or isinstance(e, ConnectionResetError)):
                    continue          # a read: asking again changes nothing
                raise _unavailable(self.url, e, sent=not req.idempotent) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._closed = True
        with self._lock:
            conns = list(self._all)
        for c in conns:
            c.close()


# ---- the clients -----------------------------------------------------------------------

class RemoteCollection(_CollectionVerbs):
    """A collection on the server, with Collection's verbs (from Client.collection)."""
    insert = _blocking(_CollectionVerbs.insert)
    insert_arrays = _blocking(_CollectionVerbs.insert_arrays)
    upsert = _blocking(_CollectionVerbs.upsert)
    replace = _blocking(_CollectionVerbs.replace)
    update = _blocking(_CollectionVerbs.update)
    delete = _blocking(_CollectionVerbs.delete)
    get = _blocking(_CollectionVerbs.get)
    count = _blocking(_CollectionVerbs.count)
    find = _blocking(_CollectionVerbs.find)
    search = _blocking(_CollectionVerbs.search)
    search_batch = _blocking(_CollectionVerbs.search_batch)
    history = _blocking(_CollectionVerbs.history)
    explain = _blocking(_CollectionVerbs.explain)
    plan = _blocking(_CollectionVerbs.plan)
    run = _blocking(_CollectionVerbs.run)
    create_index = _blocking(_CollectionVerbs.create_index)
    drop_index = _blocking(_CollectionVerbs.drop_index)
    index_status = _blocking(_CollectionVerbs.index_status)
    wait_indexed = _blocking(_CollectionVerbs.wait_indexed)
    vector_memory = _blocking(_CollectionVerbs.vector_memory)
    add_field = _blocking(_CollectionVerbs.add_field)
    drop_field = _blocking(_CollectionVerbs.drop_field)
    rename_field = _blocking(_CollectionVerbs.rename_field)

    def __len__(self) -> int:
        return self.count()


class Client(_ClientVerbs):
    """A varvedb served by `varvedb serve`, with the embedded Database's verbs.

        db = vv.Client("http://127.0.0.1:8080", token="s3cret")

    Thread-safe: each thread keeps one connection alive. `timeout` is the socket
    timeout in seconds (None: wait for ever, and save the poll a timed socket makes
    before each send and receive); `ssl_context` is used for https:// URLs."""
    _collection_class = RemoteCollection

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0, *,
                 ssl_context: ssl.SSLContext | None = None):
        self.url = url.rstrip("/")
        self._transport = _Connections(self.url, token, timeout, ssl_context)
        self._bulk = "auto"       # insert_arrays' body: auto | arrow | npy | json (tests)
        self._key = object()      # this client's entry in the pinned transactions
        self._seen = _Seen()

    def _drive(self, op):
        send = self._transport.send
        seen = self._seen
        pin = None
        try:
            req = next(op)
            while True:
                pin = self._pinned()
                resp = send(req, pin.id if pin is not None else None, seen.value)
                seen.saw(resp.version)
                req = op.send(resp)
        except StopIteration as done:
            return done.value
        except E.TransactionNotFoundError:
            if pin is not None:
                self._lost(pin)
            raise

    def transaction(self) -> ClientTransaction:
        """Group this thread's calls on this client into one transaction the server
        holds (`with db.transaction(): ...`): it commits at a clean exit and rolls
        back at an exception, as Database.transaction() does (see _TransactionScope)."""
        return ClientTransaction(self)

    create_collection = _blocking(_ClientVerbs.create_collection)
    get_or_create_collection = _blocking(_ClientVerbs.get_or_create_collection)
    collection = _blocking(_ClientVerbs.collection)
    __getitem__ = collection
    collections = _blocking(_ClientVerbs.collections)
    drop_collection = _blocking(_ClientVerbs.drop_collection)
    sql = _blocking(_ClientVerbs.sql)
    history = _blocking(_ClientVerbs.history)
    verify = _blocking(_ClientVerbs.verify)
    use = _blocking(_ClientVerbs.use)
    branch = _blocking(_ClientVerbs.branch)
    branches = _blocking(_ClientVerbs.branches)
    drop_branch = _blocking(_ClientVerbs.drop_branch)
    merge = _blocking(_ClientVerbs.merge)
    diff = _blocking(_ClientVerbs.diff)
    vacuum = _blocking(_ClientVerbs.vacuum)
    restore = _blocking(_ClientVerbs.restore)
    checkpoint = _blocking(_ClientVerbs.checkpoint)
    refresh = _blocking(_ClientVerbs.refresh)
    backup = _blocking(_ClientVerbs.backup)

    @property
    def version(self) -> int:
        """The server's newest version (GET /health: a commit on any branch); after
        use(name), that branch's newest."""
        return self._drive(self._version())

    def close(self) -> None:
        """Close every connection; the client is not usable after."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<varvedb.Client {self.url}>"


# ---- async: the same verbs over httpx ------------------------------------------------

class _AsyncConnections:
    def __init__(self, url: str, token: str | None, timeout: float,
                 ssl_context: ssl.SSLContext | None, max_connections: int):
        import httpx
        self._httpx = httpx
        if urlsplit(url).scheme not in ("http", "https"):
            raise E.OptionError(f"the server's URL is http://host:port or https://..., "
                                f"got {brief(url)}")
        self.url = url
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(
            headers=headers, timeout=timeout, verify=ssl_context or True,
            limits=httpx.Limits(max_connections=max_connections,
                                max_keepalive_connections=max_connections))
        self._closed = False
        self.branch: str | None = None      # the client's use(): None is main

    async def send(self, req: _Request, transaction: str | None = None,
                   min_version: int = 0) -> _Response:
        if self._closed:
            raise E.ClosedError("the client was closed")
        httpx = self._httpx
        headers = None if req.body is None else {"Content-Type": req.content_type}
        if req.accept is not None:
            headers = {**(headers or {}), "Accept": req.accept}
        if transaction is not None:
            headers = {**(headers or {}), TRANSACTION_HEADER: transaction}
        if min_version:
            headers = {**(headers or {}), MIN_VERSION_HEADER: str(min_version)}
        if self.branch is not None:
            headers = {**(headers or {}), BRANCH_HEADER: self.branch}
        for attempt in range(3):
            try:
                if req.sink is not None:
                    return await self._streamed(req, headers)
                r = await self._http.request(req.method, self.url + req.path,
                                             content=req.body, headers=headers)
                return _Response(r.status_code, r.content,
                                 _version_header(r.headers.get(VERSION_HEADER)))
            except httpx.TimeoutException as e:
                raise _unavailable(self.url, e, sent=not req.idempotent) from None
            except (httpx.WriteError, httpx.ConnectError) as e:
                if attempt < 2:
                    continue          # not sent whole: the server cannot have run it
                raise _unavailable(self.url, e) from None
            except (httpx.RemoteProtocolError, httpx.ReadError) as e:
                if attempt < 2 and req.idempotent:
                    continue          # a read: asking again changes nothing
                raise _unavailable(self.url, e, sent=not req.idempotent) from None
            except httpx.TransportError as e:
                raise _unavailable(self.url, e) from None
        raise AssertionError("unreachable")

    async def _streamed(self, req: _Request, headers) -> _Response:
        """A 200's body written to req.sink as it comes (GET /backup)."""
        async with self._http.stream(req.method, self.url + req.path, content=req.body,
                                     headers=headers) as r:
            version = _version_header(r.headers.get(VERSION_HEADER))
            if r.status_code != 200:
                return _Response(r.status_code, await r.aread(), version)
            async for chunk in r.aiter_bytes(1 << 20):
                req.sink.write(chunk)
            return _Response(200, b"", version, _backup_headers(r.headers.get))

    async def close(self) -> None:
        self._closed = True
        await self._http.aclose()


class AsyncRemoteCollection(_CollectionVerbs):
    """A collection on the server, its verbs as coroutines (from AsyncClient.collection)."""
    insert = _awaitable(_CollectionVerbs.insert)
    insert_arrays = _awaitable(_CollectionVerbs.insert_arrays)
    upsert = _awaitable(_CollectionVerbs.upsert)
    replace = _awaitable(_CollectionVerbs.replace)
    update = _awaitable(_CollectionVerbs.update)
    delete = _awaitable(_CollectionVerbs.delete)
    get = _awaitable(_CollectionVerbs.get)
    count = _awaitable(_CollectionVerbs.count)
    find = _awaitable(_CollectionVerbs.find)
    search = _awaitable(_CollectionVerbs.search)
    search_batch = _awaitable(_CollectionVerbs.search_batch)
    history = _awaitable(_CollectionVerbs.history)
    explain = _awaitable(_CollectionVerbs.explain)
    plan = _awaitable(_CollectionVerbs.plan)
    run = _awaitable(_CollectionVerbs.run)
    create_index = _awaitable(_CollectionVerbs.create_index)
    drop_index = _awaitable(_CollectionVerbs.drop_index)
    index_status = _awaitable(_CollectionVerbs.index_status)
    wait_indexed = _awaitable(_CollectionVerbs.wait_indexed)
    vector_memory = _awaitable(_CollectionVerbs.vector_memory)
    add_field = _awaitable(_CollectionVerbs.add_field)
    drop_field = _awaitable(_CollectionVerbs.drop_field)
    rename_field = _awaitable(_CollectionVerbs.rename_field)


class AsyncClient(_ClientVerbs):
    """Client's verbs as coroutines, over a pool of kept-alive httpx connections.

        async with vv.AsyncClient("http://127.0.0.1:8080", token=...) as db:
            docs = await db.collection("docs")
            hits = await docs.search(vector=q)
    """
    _collection_class = AsyncRemoteCollection

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0, *,
                 ssl_context: ssl.SSLContext | None = None, max_connections: int = 16):
        self.url = url.rstrip("/")
        self._transport = _AsyncConnections(self.url, token, timeout, ssl_context,
                                             max_connections)
        self._bulk = "auto"
        self._key = object()
        self._seen = _Seen()

    async def _drive(self, op):
        send = self._transport.send
        seen = self._seen
        pin = before = self._pinned()
        try:
            req = next(op)
            while True:
                pin = self._pinned()
                tid = pin.id if pin is not None else None
                resp = await (self._opening(req) if req.opens else send(req, tid, seen.value))
                seen.saw(resp.version)
                req = op.send(resp)
        except StopIteration as done:
            return done.value
        except E.TransactionNotFoundError:
            if pin is not None:
                self._lost(pin)
            raise
        except asyncio.CancelledError as canceled:
            opened = self._pinned()
            if opened is not None and opened is not before:
                # SQL's BEGIN opened it in this call, which may or may not have run
                # its text: a canceled call changes nothing
                self._unpin(opened.id)
                await self._undo(opened.id, canceled)
            raise

    async def _opening(self, req: _Request) -> _Response:
        """POST /transactions, its answer read though this task be canceled
        meanwhile (the server may have opened it, taking the writer lock): what
        it opened is then rolled back, and the cancellation raised."""
        fut, canceled = await cancel.to_its_end(self._transport.send(req, None, self._seen.value))
        if canceled is None:
            return fut.result()
        if fut.exception() is None and fut.result().status == 201:
            await self._undo(_answer(fut.result())["id"], canceled)
        raise canceled

    async def _undo(self, tid: str, canceled: BaseException) -> None:
        undo, _ = await cancel.to_its_end(self._drive(self._roll_back(tid)))
        if undo.exception() is not None:
            canceled.add_note(f"rolling back transaction {tid}, which the canceled call "
                              f"opened, failed: {undo.exception()}")

    def transaction(self) -> AsyncClientTransaction:
        """`async with db.transaction(): ...`: Client.transaction()'s semantics, for
        this task's calls on this client."""
        return AsyncClientTransaction(self)

    create_collection = _awaitable(_ClientVerbs.create_collection)
    get_or_create_collection = _awaitable(_ClientVerbs.get_or_create_collection)
    collection = _awaitable(_ClientVerbs.collection)
    collections = _awaitable(_ClientVerbs.collections)
    drop_collection = _awaitable(_ClientVerbs.drop_collection)
    sql = _awaitable(_ClientVerbs.sql)
    history = _awaitable(_ClientVerbs.history)
    verify = _awaitable(_ClientVerbs.verify)
    use = _awaitable(_ClientVerbs.use)
    branch = _awaitable(_ClientVerbs.branch)
    branches = _awaitable(_ClientVerbs.branches)
    drop_branch = _awaitable(_ClientVerbs.drop_branch)
    merge = _awaitable(_ClientVerbs.merge)
    diff = _awaitable(_ClientVerbs.diff)
    vacuum = _awaitable(_ClientVerbs.vacuum)
    restore = _awaitable(_ClientVerbs.restore)
    checkpoint = _awaitable(_ClientVerbs.checkpoint)
    refresh = _awaitable(_ClientVerbs.refresh)
    backup = _awaitable(_ClientVerbs.backup)

    async def version(self) -> int:
        """The server's newest version (GET /health: a commit on any branch); after
        use(name), that branch's newest."""
        return await self._drive(self._version())

    async def aclose(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<varvedb.AsyncClient {self.url}>"
