"""The routes of docs/server.md: each verb reads its request, runs one call of
the embedded API in a session of its own (or in the transaction the request
names: transactions.py; a search or get on main, in its pool thread's kept
read session), and returns (status, JSON bytes).

They run on the server's thread pool (app.Api.endpoint), never on the event
loop. A read's body is read into its request (query/request.py: Search,
Find, Count, whose checks are the embedded API's, so a wrong value raises the
same VarveError) and the collection answers the request (`answer`).
"""
from __future__ import annotations

import io
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator, NamedTuple

import msgspec
import numpy as np

from .. import errors as E
from ..query.bind import select_fields
from ..query.request import REQUESTS, Count, Find, Search, as_of_from_wire
from ..schema import (HNSW, ID_END, IVFPQ, ID_MIN, Field, Vector, brief, index_spec_from_dict,
                      is_int)
from ..tabular import to_arrow
from ..wire import bytes_from_wire, decode, encode, encode_msgpack
from . import arrow_size
from .docs_page import Page
from .follower import WAIT_STEP, WriterNeeded

JSON = "application/json"
ARROW = "application/vnd.apache.arrow.stream"
NPY = "application/x-npy"
MSGPACK = "application/msgpack"
BRANCH_HEADER = "x-varve-branch"     # the branch a request reads and writes (Client.use)


class Stream(NamedTuple):
    """An answer sent as it is made (GET /backup): chunks, held one at a time."""
    chunks: Iterator[bytes]
    headers: dict
    media_type: str = "application/octet-stream"


class Binary(NamedTuple):
    """An answer in a binary form the client asked for (Accept): msgpack or Arrow."""
    body: bytes
    media_type: str


def media_of(payload) -> tuple[str, bytes | str]:
    """(media type, body) of a route's payload, as app.Api and hot.HotPath
    answer it."""
    if isinstance(payload, Binary):      # a search batch answered as msgpack or Arrow
        return payload.media_type, payload.body
    if not isinstance(payload, str):
        return JSON, payload
    return ("text/html; charset=utf-8" if isinstance(payload, Page) else
            "text/plain; version=0.0.4"), payload


class MediaTypeError(E.RequestError):
    """A body of a type the route does not take (HTTP 415)."""


def table(api, claim_write, transaction_named=None, branch_named=None,
          accept_named=None) -> list:
    """(path, method, work, endpoint options) for every route of app.Api `api`;
    a write calls `claim_write()` before it begins (app.Job); `transaction_named()`
    is the id of the transaction the request runs in (its X-Varve-Transaction
    header), or None (no transaction_named: never one); `branch_named()` the
    branch it reads and writes (X-Varve-Branch), or None (main); `accept_named()`
    its Accept header, or None (a batch of searches answers JSON)."""
    db = api.db
    if transaction_named is None:
        def transaction_named():
            return None
    if branch_named is None:
        def branch_named():
            return None
    if accept_named is None:
        def accept_named():
            return None
    transactions = api.transactions

    def cap(n: int, what: str) -> None:
        if n > api.max_results:
            raise E.ResultTooLargeError(f"{what} would answer {n:,} rows; this server answers "
                                        f"at most {api.max_results:,} (ask for fewer)")

    def cap_limit(limit) -> None:
        if is_int(limit) and limit > api.max_results:
            raise E.ResultTooLargeError(f"limit {limit:,} is over this server's result cap "
                                        f"of {api.max_results:,}")

    def session_call(fn):
        """Run fn(session) in a fresh session (an open transaction left is rolled
        back), or in the transaction the request names. A client's session may not
        read the server's files (sql/privileges.py)."""
        tid = transaction_named()
        if tid is not None:
            with transactions.using(tid) as t:
                t.check_usable()
                with transactions.running(t) as sess:
                    return fn(sess)
        sess = own_session()
        try:
            return fn(sess)
        finally:
            sess.close()

    def own_session():
        """A session of the request's own, on the branch it names."""
        sess = db.session(server_files=False)
        name = branch_named()
        if name is not None:
            try:
                sess.use(name)
            except BaseException:
                sess.close()
                raise
        return sess

    reading = threading.local()     # a pool thread's read session and its collections

    def read_call(name: str, fn):
        """fn(collection `name`) for a read (search, get). Outside a transaction and
        on main it runs in this thread's kept read session, its collection object
        kept while the table is the same object: a read leaves its session as it
        found it, and making both costs as much as a short search. Else as
        session_call."""
        if transaction_named() is not None or branch_named() is not None:
            return session_call(lambda s: fn(s.collection(name)))
        table = db.engine.table(name)       # NotFoundError where there is none
        try:
            sess, colls = reading.kept
        except AttributeError:
            sess, colls = reading.kept = (db.session(server_files=False), {})
        got = colls.get(name)
        if got is None or got[0] is not table:
            got = colls[name] = (table, sess.collection(name))
        return fn(got[1])

    @contextmanager
    def on_branch():
        """This pool thread's default session on the request's branch, for the
        Database verbs that act on the current branch (branch, merge, diff,
        restore, history); back on its own after."""
        name = branch_named()
        if name is None:
            yield
            return
        ts = db.thread_session()
        was = ts.branch
        ts.use(name)
        try:
            yield
        finally:
            ts.use(was)

    def write_call(fn) -> bytes:
        """Run fn(session) as one transaction; its answer gains the commit's version.
        In the transaction the request names, its answer's version is the one that
        transaction will commit as."""
        tid = transaction_named()
        if tid is not None:
            with transactions.using(tid) as t:
                t.check_usable()
                claim_write()
                with transactions.running(t) as sess:
                    out = fn(sess)
                    out["version"] = sess.version
            return encode(out)
        sess = own_session()
        claim_write()
        sess.begin()
        try:
            out = fn(sess)
            out["version"] = sess.commit()
        finally:
            sess.close()      # rolls back what did not commit
        return encode(out)

    # ---- service -----------------------------------------------------------------

    def health(p, q, ctype, raw):
        if api.replica is not None:
            return 200, encode({"status": "ok", "version": db.engine.visible,
                                **api.replica.state()})
        if api.process is None:
            return 200, encode({"status": "ok", "version": db.engine.visible})
        # serve --workers N: the newest version the writer has published, which
        # process answered, and the version it has caught up to (at each read)
        return 200, encode({"status": "ok", "version": api.board.read(),
                            "process": api.process, "pid": os.getpid(),
                            "caught_up": db.engine.visible})

    def made_once(make):
        """A route answering what make() gives, made at its first request."""
        made = []

        def route(p, q, ctype, raw):
            if not made:
                made.append(make())
            return 200, made[0]
        return route

    def _openapi_bytes():
        from .openapi import openapi_document
        return encode(openapi_document())

    def _docs_page():
        from .docs_page import render
        from .openapi import openapi_document
        return render(openapi_document())

    openapi, docs = made_once(_openapi_bytes), made_once(_docs_page)

    def metrics(p, q, ctype, raw):
        return 200, api.metrics.render()

    # ---- collections -------------------------------------------------------------

    def describe(sess, name: str) -> dict:
        coll = sess.collection(name)
        schema = coll.schema
        return {"name": name, "id": schema.id_kind,
                "fields": {n: f.to_dict() for n, f in schema.fields.items()},
                "schema": schema.to_dict(), "documents": coll.count(),
                "version": sess.version,
                # how far each graph has linked the committed rows (commits return first)
                "indexes": {n: {k: v for k, v in coll.index_status(n).items() if k != "field"}
                            for n in coll.table.vector_indexes},
                # bytes per stored vector (and per graph node) of each vector field
                "vectors": {n: {k: v for k, v in coll.vector_memory(n).items() if k != "field"}
                            for n in schema.vector_fields}}

    def list_collections(p, q, ctype, raw):
        return 200, encode({"collections": db.collections()})

    def create_collection(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "POST /collections"),
                    {"name", "schema", "exist_ok", "data"}, "POST /collections")
        name, spec = body.get("name"), body.get("schema")
        exist_ok, data = body.get("exist_ok", False), body.get("data")
        if not isinstance(name, str):
            raise E.SchemaError(f"a collection's name is a string, got {brief(name)}")
        if not isinstance(spec, dict) and not (spec is None and data is not None):
            raise E.SchemaError("schema is an object of field name -> type (it may be "
                                "left out when data is given: inferred from the rows)")
        if not isinstance(exist_ok, bool):
            raise E.RequestError(f"exist_ok is true or false, got {brief(exist_ok)}")
        if data is not None and not isinstance(data, list):
            raise E.RequestError(f"data is an array of rows, got {brief(data)}")
        if spec is not None:
            spec = {k: field_from_wire(v) for k, v in spec.items()}
        made = []

        def go(s):
            existed = exist_ok and name in s.db.collections()
            s.create_collection(name, spec, exist_ok, data=data)
            made.append(not existed)
            return describe(s, name)
        out = write_call(go)
        return (201 if made[0] else 200), out

    def get_collection(p, q, ctype, raw):
        return 200, encode(session_call(lambda s: describe(s, p["c"])))

    def drop_collection(p, q, ctype, raw):
        def go(s):
            s.drop_collection(p["c"])
            return {}
        return 200, write_call(go)

    # ---- items ---------------------------------------------------------------------

    def insert(p, q, ctype, raw):
        kind = ctype.split(";")[0].strip().lower()
        if kind == ARROW:
            columns = _arrow_columns(raw, api.max_body)

            def run(s):
                coll = s.collection(p["c"])
                ids = columns.pop("id", None)
                return coll.insert_arrays(id=ids, **columns)
        elif kind == NPY:
            field = q.get("field")
            if not field:
                raise E.RequestError("an application/x-npy body names its vector field: "
                                     "?field=NAME")
            block = _npy_array(raw)

            def run(s):
                return s.collection(p["c"]).insert_arrays(**{field: block})
        else:
            rows = json_body(ctype, raw, list, "POST /collections/{c}/items")

            def run(s):
                coll = s.collection(p["c"])
                bytes_from_wire(coll.schema, rows)
                return coll.insert(rows)

        return 201, write_call(lambda s: {"ids": run(s)})

    def upsert(p, q, ctype, raw):
        rows = json_body(ctype, raw, list, "PUT /collections/{c}/items")
        merge = _flag(q.get("merge"), "merge", True)

        def go(s):
            coll = s.collection(p["c"])
            bytes_from_wire(coll.schema, rows)
            return {"ids": coll.upsert(rows, merge)}
        return 200, write_call(go)

    def item_route(p, tail: str):
        """An item route's path has nothing after the id but its own `tail`."""
        if p.get("tail", "") != tail:
            raise E.NotFoundError(f"no route /collections/{p['c']}/items/.../{p['tail']}")

    def get_item_or_history(p, q, ctype, raw):
        # GET .../items/{id} and .../items/{id}/history both match a path whose id
        # holds '/': the path as sent (app.item_params) says which it is
        if p.get("tail") == "history":
            return item_history(p, q, ctype, raw)
        return get_item(p, q, ctype, raw)

    def get_item(p, q, ctype, raw):
        item_route(p, "")
        select = q.get("select")
        select = None if select is None else [f for f in select.split(",") if f]
        as_of = q.get("as_of")
        if as_of is not None and as_of.isascii() and as_of.lstrip("-").isdigit() \
                and len(as_of) < 20:      # isdigit alone takes '²', which int() refuses
            as_of = int(as_of)

        def go(coll):
            key = path_id(coll, p["id"])
            doc = coll.get(key, as_of=as_of_from_wire(as_of), select=select)
            if doc is None:
                raise ItemNotFound(key)
            return doc
        return 200, encode(read_call(p["c"], go))

    def patch_item(p, q, ctype, raw):
        item_route(p, "")
        values = json_body(ctype, raw, dict, "PATCH /collections/{c}/items/{id}")

        def go(s):
            coll = s.collection(p["c"])
            bytes_from_wire(coll.schema, [values])
            return {"updated": coll.update(values, ids=[path_id(coll, p["id"])])}
        return 200, write_call(go)

    def delete_item(p, q, ctype, raw):
        item_route(p, "")
        def go(s):
            coll = s.collection(p["c"])
            return {"deleted": coll.delete(ids=[path_id(coll, p["id"])])}
        return 200, write_call(go)

    def item_history(p, q, ctype, raw):
        item_route(p, "history")
        def go(s):
            coll = s.collection(p["c"])
            return {"versions": coll.history(path_id(coll, p["id"]))}
        return 200, encode(session_call(go))

    def update(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "update"), {"set", "where", "params", "ids"},
                         "update")

        def go(s):
            coll = s.collection(p["c"])
            bytes_from_wire(coll.schema, [body.get("set")])
            n = coll.update(body.get("set"), where=body.get("where"), params=_params(body),
                            ids=body.get("ids"))
            return {"updated": n}
        return 200, write_call(go)

    def delete(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "delete"), {"ids", "where", "params"},
                         "delete")

        def go(s):
            n = s.collection(p["c"]).delete(ids=body.get("ids"), where=body.get("where"),
                                            params=_params(body))
            return {"deleted": n}
        return 200, write_call(go)

    # ---- reads ---------------------------------------------------------------------

    def count(p, q, ctype, raw):
        req = Count.from_wire(json_body(ctype, raw, dict, "count") if raw else {})
        return 200, encode({"count": session_call(lambda s: answer(s, p["c"], req))})

    def find(p, q, ctype, raw):
        req = Find.from_wire(json_body(ctype, raw, dict, "find") if raw else {})
        cap_limit(req.limit)
        # ?vectors=true: no select is every field, vectors too (get(ids=...)'s
        # documents), chosen here: a client's schema may be older than the server's
        vectors = _flag(q.get("vectors"), "vectors", False) and req.select is None

        def go(s):
            r = req if not vectors else msgspec.structs.replace(req, select=select_fields(
                s.collection(p["c"]).table, None, vectors=True))
            if r.ids is not None:     # at most one row an id
                cap(max(0, min(len(r.ids) - r.offset, r.limit if r.limit is not None
                               else len(r.ids))), "find")
            elif r.limit is None:     # all of them: only as many as the cap
                cap(answer(s, p["c"], Count(where=r.where, params=r.params,
                                            as_of=r.as_of, branch=r.branch))
                    - r.offset, "find")
            return answer(s, p["c"], r)
        return 200, encode({"hits": session_call(go)})


    def searched(req: Search, hits) -> dict:
        out = {"hits": hits}
        if req.explain:
            out["plan"] = hits.plan.to_dict() if hits.plan is not None else None
        return out

    def search(p, q, ctype, raw):
        kind = ctype.split(";")[0].strip().lower()
        if kind in (NPY, ARROW):      # a batch: the query vectors are the body
            req = Search.from_wire({**_binary_search_args(q),
                                    "vectors": _query_block_body(kind, raw, api.max_body)})
        else:
            body = json_body(ctype, raw, dict, "search")
            if "queries" in body:
                only(body, {"queries"}, "a batch search")
                queries = body["queries"]
                if not isinstance(queries, list):
                    raise E.RequestError("queries is a JSON array of searches")
                reqs = [Search.from_wire(one) for one in queries]
                cap(sum(r.limit for r in reqs), "a batch of searches")
                return 200, batch_answer(read_call(
                    p["c"], lambda c: [searched(r, c.run(r)) for r in reqs]), accept_named())
            req = Search.from_wire(body)
        if req.vectors is not None:          # a batch of query vectors: results, in order
            cap(req.limit * len(req.vectors), "a batch of searches")
            return 200, batch_answer(read_call(
                p["c"], lambda c: [searched(req, hits) for hits in c.run(req)]),
                accept_named())
        return one_search(p, req)

    def one_search(p, req: Search):
        cap_limit(req.limit)
        return 200, encode(read_call(p["c"], lambda c: searched(req, c.run(req))))

    # hot.py runs a single search from its body decoded on the event loop (once: it
    # reads the body to choose where the search runs, the loop or the pool)
    search.decoded = lambda p, body: one_search(p, Search.from_wire(body))

    # ---- SQL, history, verify ------------------------------------------------------

    def sql(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "POST /sql"), {"sql", "params", "copy_data"},
                    "POST /sql")
        text = body.get("sql")
        if not isinstance(text, str):
            raise E.SqlError("42601", f"sql is a string, got {type(text).__name__}")
        params = _params(body)
        copy_data = body.get("copy_data")       # what a COPY ... FROM STDIN reads
        if copy_data is not None and not isinstance(copy_data, str):
            raise E.SqlError("22023", f"copy_data is a string, got {type(copy_data).__name__}")
        from ..sql import compile_text, fail_block
        from ..sql.select import rows_at_most
        tid = transaction_named()
        try:
            compiled = compile_text(text)
        except E.VarveError:
            if tid is not None:     # SQL's block in it is failed, as by any error in it
                try:
                    with transactions.using(tid) as t:
                        fail_block(t.session)
                except E.VarveError:
                    pass            # none such, or busy: the statement's error answers
            raise
        kinds = {c.kind for c in compiled}
        # a write the server wraps in a transaction of its own, so that an answer
        # over the result cap is refused with nothing applied
        writes = bool(kinds & {"write", "ddl"}) and "transaction" not in kinds
        if (api.writer is not None or api.replica is not None) and kinds - {"select"}:
            raise WriterNeeded     # a read worker: the writer runs what may write

        def go(s):
            if kinds - {"select"}:     # it may write: not abandoned at the timeout from here
                claim_write()
            own_tx = writes and s.tx is None
            if own_tx:
                s.begin()
            try:
                # a SELECT past the cap is refused before its rows are made
                with rows_at_most(api.max_results, lambda n: cap(n, "this statement")):
                    r = s.sql(text, params, copy_data)
                # COPY ... TO STDOUT answers its rows as copy_data
                cap(len(r.rows) if r.copy_data is None else r.rowcount, "this statement")
                out = {"columns": r.columns, "kinds": r.kinds, "rows": r.rows,
                       "status": r.status, "rowcount": r.rowcount}
                if r.copy_data is not None:     # (binary: 0A000, before anything commits)
                    out["copy_data"] = r.copy_text()
                if own_tx:
                    s.commit()
            except BaseException:
                if own_tx:
                    s.rollback()
                raise
            return out

        if tid is None:
            begin_left_open(compiled)
            return 200, encode(session_call(go))
        with transactions.using(tid) as t:
            with transactions.running(t) as s:
                out = go(s)
            out["transaction"] = t.state if s.tx is not None else "ended"
        return 200, encode(out)

    # ---- transactions that span requests (transactions.py) -----------------------

    def open_transaction(p, q, ctype, raw):
        claim_write()       # it takes the writer lock: never abandoned once it waits
        return 201, encode(transactions.open(branch_named()).describe())

    def transaction_state(p, q, ctype, raw):
        return 200, encode(transactions.find(p["t"]).describe())

    def commit_transaction(p, q, ctype, raw):
        with transactions.using(p["t"]) as t:
            claim_write()
            version = transactions.commit(t)
        return 200, encode({"id": t.id, "state": "committed", "version": version})

    def rollback_transaction(p, q, ctype, raw):
        with transactions.using(p["t"]) as t:
            claim_write()
            transactions.rollback(t)
        return 200, encode({"id": t.id, "state": "rolled back"})

    def history(p, q, ctype, raw):
        with on_branch():
            return 200, encode({"versions": db.history()})

    def verify(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "verify") if raw else {}, {"anchor"},
                         "verify")
        anchor = body.get("anchor")
        if isinstance(anchor, list):
            anchor = tuple(anchor)
        return 200, encode(db.verify(anchor=anchor))

    # ---- plans, indexes and fields of a collection -----------------------------------

    def explain(p, q, ctype, raw):
        body = json_body(ctype, raw, dict, "explain")
        verb = body.pop("verb", "search")
        kind = REQUESTS.get(verb) if isinstance(verb, str) else None
        if kind is None:
            raise E.OptionError(f"explain takes 'search', 'find' or 'count', got {brief(verb)}")
        req = kind.from_wire(body)
        return 200, encode({"plan": session_call(
            lambda s: s.collection(p["c"]).plan(req).to_dict())})

    def collection_write(p, verb: str, *args):
        """One Collection verb that answers nothing, run as a write: {"version"}."""
        def go(s):
            getattr(s.collection(p["c"]), verb)(*args)
            return {}
        return 200, write_call(go)

    def collection_read(p, verb: str, *args):
        return 200, encode(session_call(lambda s: getattr(s.collection(p["c"]), verb)(*args)))

    def create_index(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "create_index"), {"field", "index", "name"},
                    "create_index")
        return collection_write(p, "create_index", body.get("field"),
                                index_from_wire(body.get("index")), body.get("name"))

    def drop_index(p, q, ctype, raw):
        return collection_write(p, "drop_index", p["f"])

    def index_status(p, q, ctype, raw):
        return collection_read(p, "index_status", q.get("field"))

    def wait_indexed(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "wait_indexed") if raw else {},
                    {"field", "timeout"}, "wait_indexed")
        timeout = body.get("timeout")
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float)) or timeout < 0):
            raise E.OptionError(f"timeout is a number of seconds >= 0, got {brief(timeout)}")
        # at most the server's own timeout: the answer says False past it
        wait = api.timeout * 0.9 if timeout is None else min(timeout, api.timeout * 0.9)
        return 200, encode({"indexed": session_call(     # (no bar on the server's terminal)
            lambda s: s.collection(p["c"]).wait_indexed(body.get("field"), wait,
                                                        progress=False))})

    def vector_memory(p, q, ctype, raw):
        return collection_read(p, "vector_memory", q.get("field"))

    def add_field(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "add_field"), {"name", "spec"}, "add_field")
        return collection_write(p, "add_field", body.get("name"),
                                field_from_wire(body.get("spec")))

    def drop_field(p, q, ctype, raw):
        return collection_write(p, "drop_field", p["f"])

    def rename_field(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "rename_field"), {"new"}, "rename_field")
        return collection_write(p, "rename_field", p["f"], body.get("new"))

    # ---- branches (Database.branch, branches, drop_branch, merge, diff) -------------

    def list_branches(p, q, ctype, raw):
        return 200, encode({"branches": db.branches()})

    def get_branch(p, q, ctype, raw):
        for b in db.branches():
            if b.name == p["b"]:
                return 200, encode(b)
        db.engine.catalog.named(p["b"])      # its NotFoundError (or BranchError)
        raise E.NotFoundError(f"no branch {brief(p['b'])}")

    def create_branch(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "POST /branches"), {"name", "at"},
                    "POST /branches")
        at = as_of_from_wire(body.get("at"))
        claim_write()
        with on_branch():
            return 201, encode(db.branch(body.get("name"), at))

    def drop_branch(p, q, ctype, raw):
        claim_write()
        with on_branch():
            db.drop_branch(p["b"])
        return 200, encode({"version": db.engine.visible})

    def merge(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "merge"), {"source"}, "merge")
        claim_write()
        with on_branch():
            return 200, encode({"version": db.merge(body.get("source"))})

    def diff(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "diff"), {"a", "b"}, "diff")
        a, b = side_from_wire(body.get("a")), side_from_wire(body.get("b"))
        with on_branch():
            return 200, encode({"changes": db.diff(a, b)})

    # ---- history operations on the server's own file -------------------------------

    def vacuum(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "vacuum") if raw else {}, {"keep", "graphs"},
                    "vacuum")
        keep = body.get("keep")
        if isinstance(keep, str):        # a datetime as RFC 3339
            keep = as_of_from_wire(keep)
        claim_write()
        return 200, encode(db.vacuum(keep, progress=False,
                                     graphs=body.get("graphs", "rebuild")))

    def restore(p, q, ctype, raw):
        body = only(json_body(ctype, raw, dict, "restore"), {"version"}, "restore")
        if "version" not in body:
            raise E.RequestError("restore takes a version (a number or an RFC 3339 timestamp)")
        version = as_of_from_wire(body["version"])
        if version is None:
            raise E.OptionError("restore takes a version number or a timestamp, got null")
        claim_write()
        with on_branch():
            return 200, encode({"version": db.restore(version)})

    def checkpoint(p, q, ctype, raw):
        claim_write()
        db.checkpoint()
        return 200, encode({"version": db.engine.visible})

    def log(p, q, ctype, raw):
        after, chain, wait = log_request(q, api.timeout)
        if api.board is not None and api.follower is not None:
            # a read worker (serve --workers N): the commits come on the writer's board
            deadline = time.monotonic() + wait
            while api.board.read() <= after and time.monotonic() < deadline:
                time.sleep(WAIT_STEP)
            api.follower.catch_up(None)
        else:
            db.engine.wait_visible(after, wait)     # a long poll: answered at a commit
        newest, size, chunks = db.engine.log_after(after, chain)
        return 200, Stream(chunks, {LOG_VERSION_HEADER: str(newest), LOG_BYTES_HEADER: str(size)})

    def backup(p, q, ctype, raw):
        version, size, chunks = db.backup_stream()
        return 200, Stream(chunks, {"X-Varve-Backup-Version": str(version),
                                    "X-Varve-Backup-Bytes": str(size)})

    C, I = "/collections/{c}", "/collections/{c}/items/{id}"
    # the data routes run in the transaction a request names (X-Varve-Transaction)
    TX = {"transactional": True}
    BODY_TX = {"needs_body": True, "transactional": True}
    # what only the writer runs (a read worker forwards it: workers.py); a write
    # that waits for the writer lock waits on a pool of its own (app.Api.pool_for),
    # but what ends a transaction (which frees the lock) never behind them
    TXC = {"writes": True}
    W = {**TXC, "pool": "writes"}
    BODY_W = {**BODY_TX, **W}
    return [
        # the hot routes first: Starlette tries them in order (17 µs a search)
        (C + "/search", "POST", search, BODY_TX),
        (I, "GET", get_item_or_history, TX),
        (C + "/find", "POST", find, BODY_TX),
        (C + "/count", "POST", count, BODY_TX),
        ("/health", "GET", health, {"open_route": True, "inline": True}),
        ("/openapi.json", "GET", openapi, {}),
        ("/docs", "GET", docs, {}),
        ("/metrics", "GET", metrics, {}),
        ("/collections", "GET", list_collections, {}),
        ("/collections", "POST", create_collection, BODY_W),
        (C, "GET", get_collection, TX),
        (C, "DELETE", drop_collection, {**TX, **W}),
        (C + "/items", "POST", insert, BODY_W),
        (C + "/items", "PUT", upsert, BODY_W),
        (I, "PATCH", patch_item, BODY_W),
        (I, "DELETE", delete_item, {**TX, **W}),
        (I + "/history", "GET", get_item_or_history, TX),
        (C + "/update", "POST", update, BODY_W),
        (C + "/delete", "POST", delete, BODY_W),
        ("/sql", "POST", sql, BODY_TX),
        ("/history", "GET", history, {}),
        ("/verify", "POST", verify, {"needs_body": True}),
        ("/transactions", "POST", open_transaction, W),
        ("/transactions/{t}", "GET", transaction_state, TXC),
        ("/transactions/{t}/commit", "POST", commit_transaction, TXC),
        ("/transactions/{t}/rollback", "POST", rollback_transaction, TXC),
        (C + "/explain", "POST", explain, BODY_TX),
        (C + "/indexes", "POST", create_index, BODY_W),
        (C + "/indexes/{f}", "DELETE", drop_index, {**TX, **W}),
        # the writer's maintainer links the rows: its figures are the ones to read
        # (a read replica's own maintainer links its rows: it answers them itself)
        (C + "/index_status", "GET", index_status, {**TX, **W, "maintainer": True}),
        (C + "/wait_indexed", "POST", wait_indexed, {**BODY_W, "maintainer": True}),
        (C + "/vector_memory", "GET", vector_memory, TX),
        (C + "/fields", "POST", add_field, BODY_W),
        (C + "/fields/{f}", "DELETE", drop_field, {**TX, **W}),
        (C + "/fields/{f}/rename", "POST", rename_field, BODY_W),
        ("/branches", "GET", list_branches, {}),
        ("/branches", "POST", create_branch, {"needs_body": True, **W}),
        ("/branches/{b}", "GET", get_branch, {}),
        ("/branches/{b}", "DELETE", drop_branch, W),
        ("/merge", "POST", merge, {"needs_body": True, **W}),
        ("/diff", "POST", diff, {"needs_body": True}),
        ("/vacuum", "POST", vacuum, {"needs_body": True, **W}),
        ("/restore", "POST", restore, {"needs_body": True, **W}),
        ("/checkpoint", "POST", checkpoint, W),
        ("/backup", "GET", backup, {}),
        ("/log", "GET", log, {"pool": "polls"}),      # a long poll: its own pool
    ]


LOG_VERSION_HEADER = "X-Varve-Log-Version"   # GET /log: the newest version it sends
LOG_BYTES_HEADER = "X-Varve-Log-Bytes"       # GET /log: how many bytes it sends
MAX_LOG_WAIT = 10.0       # seconds GET /log waits at most for a commit after `after`


def log_request(q, timeout: float) -> tuple[int, bytes, float]:
    """GET /log's query: after (a version), chain (its chain hash, hex), wait
    (seconds to wait for a commit after it; 0 by default)."""
    after, chain, wait = q.get("after"), q.get("chain"), q.get("wait", "0")
    if after is None or not (after.isascii() and after.isdigit() and len(after) < 19):
        raise E.RequestError(f"after is a version number, got {brief(after)}")
    try:
        chain_bytes = bytes.fromhex(chain or "")
    except ValueError:
        chain_bytes = b""
    if len(chain_bytes) != 32:
        raise E.RequestError(f"chain is a chain hash, 64 hex digits, got {brief(chain)}")
    try:
        seconds = float(wait)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise E.RequestError(f"wait is a number of seconds, got {brief(wait)}")
    return int(after), chain_bytes, min(seconds, MAX_LOG_WAIT, timeout / 2)


def begin_left_open(compiled) -> None:
    """Refuse, before anything runs, a text sent outside a transaction that leaves
    a BEGIN open at its end (TransactionRequiredError, 25000): a transaction spans
    requests only once opened (vv.Client opens one and sends the text again in
    it). The rest runs as the embedded session runs it: a COMMIT or ROLLBACK with
    no transaction does nothing (PostgreSQL warns), and in a transaction the
    statements after the COMMIT or ROLLBACK that ends it run on their own."""
    block = False
    for c in compiled:
        if c.kind == "transaction" and c.impl.verb in ("BEGIN", "COMMIT", "ROLLBACK"):
            block = c.impl.verb == "BEGIN"
    if block:
        raise E.TransactionRequiredError(
            "BEGIN without COMMIT or ROLLBACK in this request: a transaction spans "
            "requests only once opened (POST /transactions, then send its id in "
            "X-Varve-Transaction; Client.transaction()); nothing ran")


def json_body(ctype: str, raw: bytes, shape: type, what: str):
    # any body is read as JSON (curl -d sends a form type) but the binary ones
    if ctype.split(";")[0].strip().lower() in (ARROW, NPY):
        raise MediaTypeError(f"{what} takes a JSON body, got {brief(ctype)}")
    if not raw:
        raise E.RequestError(f"{what} takes a JSON body; it was empty")
    try:
        value = decode(raw)
    except RecursionError:     # msgspec's guard against a stack overflow
        raise E.RequestError(f"{what}: the JSON body is nested too deeply") from None
    if not isinstance(value, shape):
        raise E.RequestError(f"{what} takes a JSON {_shape_name(shape)}, got "
                             f"{_shape_name(type(value))}")
    return value


def field_from_wire(spec):
    """A field of POST /collections: a type name as it came, or a spec as GET
    /collections/{c} shows it, where a vector's metric and dtype and its index's
    parameters may be left out (they take vv.Vector's and vv.HNSW's or vv.IVFPQ's
    defaults)."""
    if not isinstance(spec, dict):
        return spec
    if spec.get("kind") == "vector":
        own = {"metric": "hamming"} if spec.get("dtype") == "bit" else {}
        spec = {**_VECTOR_DEFAULTS, **own, **spec}
        if isinstance(spec.get("index"), dict):
            own = IVFPQ() if spec["index"].get("kind") == "ivfpq" else HNSW()
            spec["index"] = {**own.to_dict(), **spec["index"]}
    return Field.from_dict(spec)


_VECTOR_DEFAULTS = {k: v for k, v in Vector(1).to_dict().items() if k != "dim"}


def index_from_wire(spec):
    """create_index's index: "hash" or "sorted", or a vector index's spec as
    vv.HNSW / vv.IVFPQ's to_dict() writes it (parameters left out: their defaults)."""
    if isinstance(spec, str):
        return spec
    if not isinstance(spec, dict):
        raise E.SchemaError(f"index is 'hash', 'sorted' or an HNSW / IVFPQ spec, got "
                            f"{brief(spec)}")
    own = IVFPQ() if spec.get("kind") == "ivfpq" else HNSW()
    return index_spec_from_dict({**own.to_dict(), **spec})


def side_from_wire(side):
    """A side of POST /diff: {"branch": name} (its newest), {"as_of": version or
    RFC 3339} (the request's branch), or both; a bare number is a version."""
    if is_int(side):
        return side
    if not isinstance(side, dict) or not side or set(side) - {"branch", "as_of"}:
        raise E.OptionError(f"a side of a diff is a version, {{\"branch\": name}}, "
                            f"{{\"as_of\": version}} or both, got {brief(side)}")
    as_of = as_of_from_wire(side.get("as_of"))
    if "branch" not in side:
        return as_of
    if as_of is None:
        return side["branch"]
    return (side["branch"], as_of)


def answer(sess, name: str, req: Search | Find | Count):
    """Collection `name`'s answer to a read request, in the route's session `sess`
    (the request's branch, when it names one: an unknown one is a NotFoundError)."""
    return sess.collection(name).run(req)


def only(body: dict, allowed: set, what: str) -> dict:
    unknown = set(body) - allowed
    if unknown:
        raise E.RequestError(f"{what} does not take {', '.join(sorted(map(str, unknown)))};"
                             f" it takes {', '.join(sorted(allowed))}")
    return body


def path_id(coll, text: str):
    """An id from a path: an int in an int-id collection, else the string."""
    if coll.schema.id_kind == "int":
        digits = text[1:] if text[:1] == "-" else text
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
            raise E.FieldTypeError(f"this collection's ids are ints, got {brief(text)}")
        v = int(text)
        if not ID_MIN <= v < ID_END:
            raise E.FieldTypeError(f"id {v} is out of range")
        return v
    return text


def _shape_name(t: type) -> str:
    return {dict: "object", list: "array", str: "string", int: "number", float: "number",
            bool: "boolean", type(None): "null"}.get(t, t.__name__)


class ItemNotFound(E.NotFoundError):
    """No document has this id (GET /items/{id}): a 404 whose body names the item,
    so a client tells it from an unknown collection."""

    def __init__(self, key):
        super().__init__(f"no document with id {brief(key)}")
        self.item = key


def _flag(value, name: str, default: bool) -> bool:
    """A true/false query parameter (None: absent, the default)."""
    if value is None:
        return default
    if value in ("true", "false"):
        return value == "true"
    raise E.RequestError(f"?{name}= is true or false, got {brief(value)}")


def _params(body: dict):
    params = body.get("params")
    if params is None:
        return ()
    if not isinstance(params, list):
        raise E.RequestError(f"params is a JSON array, got {type(params).__name__}")
    return params


def _binary_search_args(q) -> dict:
    """A binary batch's search arguments but its vectors: ?search=, a JSON object."""
    text = q.get("search")
    if text is None:
        return {}
    args = json_body(JSON, text.encode(), dict, "?search=")
    given = {"vector", "vectors", "queries"} & set(args)
    if given:
        raise E.RequestError(f"a binary batch's query vectors are its body; ?search= does "
                             f"not take {', '.join(sorted(given))}")
    return args


def _query_block_body(kind: str, raw: bytes, limit: int) -> np.ndarray:
    """A batch's query vectors from a binary body: an (n, dim) .npy array, or an
    Arrow IPC stream of one column of fixed-size lists of numbers (decoding to at
    most `limit` bytes)."""
    if kind == NPY:
        return _npy_array(raw)
    columns = _arrow_columns(raw, limit)
    block = next(iter(columns.values())) if len(columns) == 1 else None
    if not isinstance(block, np.ndarray) or block.ndim != 2:
        raise E.RequestError("an Arrow body of a batch of searches is one column of "
                             "fixed-size lists of numbers (no nulls), one query a row")
    return block


def batch_answer(results: list, accept: str | None):
    """A batch's {"results": [...]} in the form Accept asks for: msgpack, Arrow
    (one row a hit: query, id, score and the selected fields) or JSON."""
    accept = (accept or "").lower()
    if ARROW in accept:
        return Binary(_arrow_results(results), ARROW)
    if MSGPACK in accept or "application/x-msgpack" in accept:
        return Binary(encode_msgpack({"results": results}), MSGPACK)
    return encode({"results": results})


def _arrow_results(results: list) -> bytes:
    try:
        import pyarrow as pa
    except ImportError:
        raise E.RequestError("this server has no pyarrow: ask for JSON or msgpack "
                             "(Accept: application/msgpack)") from None
    if any("plan" in r for r in results):
        raise E.RequestError("an Arrow answer holds hits, not plans: ask for explain's "
                             "plans as JSON or msgpack")
    hits = [(i, h) for i, r in enumerate(results) for h in r["hits"]]
    fields = list(dict.fromkeys(k for _, h in hits for k in h.fields))
    names = ["query", "id", "score"]
    clash = next((f for f in fields if f in names), None)
    if clash is not None:
        raise E.RequestError(f"field {brief(clash)} would be two columns of the Arrow "
                             "answer: ask for JSON or msgpack")
    # the same conversion as Hits.to_arrow's (vectors as fixed-size lists, an int
    # past int64 a decimal, json fields Arrow's json type)
    columns = [np.array([i for i, _ in hits], np.int32), [h.id for _, h in hits],
               np.array([h.score for _, h in hits], np.float64)]
    columns += [[h.fields.get(f) for _, h in hits] for f in fields]
    table = to_arrow(names + fields, columns,
                     json=frozenset().union(*(r["hits"].json_fields for r in results)))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _npy_array(raw: bytes) -> np.ndarray:
    f = io.BytesIO(raw)
    try:
        # the header first: np.load would allocate the shape it declares, however
        # few bytes follow it
        fmt = np.lib.format
        version = fmt.read_magic(f)
        header = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
        if version not in header:
            raise ValueError(f".npy format version {version} (this server reads 1.0 and 2.0)")
        shape, _, dtype = header[version](f)
        if dtype.hasobject:
            raise ValueError("an object array")
        want = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if want != len(raw) - f.tell():
            raise ValueError(f"its header declares {want:,} bytes of data, "
                             f"{len(raw) - f.tell():,} follow")
        f.seek(0)
        a = np.load(f, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise E.RequestError(f"the body is not a .npy array: {e}") from None
    if a.ndim != 2 or a.dtype.kind not in "fiu":
        raise E.RequestError(f"an application/x-npy body is an (n, dim) numeric array, got "
                             f"shape {a.shape} of {a.dtype}")
    return a


def _arrow_columns(raw: bytes, limit: int) -> dict:
    """The columns of an Arrow IPC body, refused (413) where they would decode to
    over `limit` bytes (arrow_size.py)."""
    try:
        import pyarrow as pa
    except ImportError:
        raise E.RequestError("this server has no pyarrow: send rows as JSON, or vectors as "
                             "application/x-npy") from None
    total = arrow_size.stream_bytes(raw, limit)
    try:
        t = pa.ipc.open_stream(raw).read_all()
        # its offsets and dictionary indices in range: read_all checks the framing,
        # not the data, and dictionary_decode of a crafted index crashed the process
        t.validate(full=True)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:     # a name not UTF-8
        raise E.RequestError(f"the body is not an Arrow IPC stream: {e}") from None
    out, arrays = {}, {}
    for name, col in zip(t.column_names, t.columns):
        if name in arrays:      # a dict would keep the last one quietly
            raise E.RequestError(f"the Arrow stream has two columns named {brief(name)}")
        arr = arrays[name] = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        _arrow_type_taken(name, arr.type)
        if pa.types.is_dictionary(arr.type):
            total += arrow_size.dictionary_growth(arr)
            arrow_size.check(total, limit)
    for name, arr in arrays.items():
        out[name] = _arrow_column(name, arr)
    return out


def _arrow_taken(typ, top: bool = True) -> bool:
    """Whether an Arrow type maps onto the values a field takes: numbers, bools,
    strings, timestamps and dates, nulls, and lists, structs and maps of these
    (vectors, JSON); dictionary-encoded scalars as a column's own type (so its
    decoded size is found before it is decoded: arrow_size.dictionary_growth).
    Binary, decimal, time, duration, interval, union and extension types do not
    (a union's values have no one type to coerce)."""
    import pyarrow as pa
    t = pa.types
    if _arrow_scalar(typ):
        return True
    if t.is_dictionary(typ):
        return top and _arrow_scalar(typ.value_type)
    if t.is_list(typ) or t.is_large_list(typ) or t.is_fixed_size_list(typ):
        return _arrow_taken(typ.value_type, False)
    if t.is_struct(typ):
        return all(_arrow_taken(typ.field(i).type, False) for i in range(typ.num_fields))
    if t.is_map(typ):
        return _arrow_taken(typ.key_type, False) and _arrow_taken(typ.item_type, False)
    return False


def _arrow_scalar(typ) -> bool:
    import pyarrow as pa
    t = pa.types
    return (t.is_null(typ) or t.is_boolean(typ) or t.is_integer(typ) or t.is_floating(typ)
            or t.is_string(typ) or t.is_large_string(typ) or t.is_timestamp(typ)
            or t.is_date(typ))


def _arrow_type_taken(name: str, typ) -> None:
    if not _arrow_taken(typ):
        raise E.FieldTypeError(f"column {brief(name)}: Arrow type {typ} is not one this "
                               "server takes (numbers, bools, strings, timestamps, dates, "
                               "and lists, structs and maps of these; dictionary-encoded "
                               "scalars as a column)")


def _arrow_column(name: str, arr):
    import pyarrow as pa
    typ = arr.type
    if pa.types.is_dictionary(typ):
        arr, typ = arr.dictionary_decode(), typ.value_type
    if pa.types.is_fixed_size_list(typ) and (pa.types.is_floating(typ.value_type)
                                             or pa.types.is_integer(typ.value_type)):
        if arr.null_count:
            return [None if v is None else v for v in arr.to_pylist()]
        flat = arr.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(arr), typ.list_size)
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        try:
            return arr.to_pylist()
        except (OverflowError, ValueError):   # past the years 1..9999 of datetime
            raise E.FieldTypeError(f"field {brief(name)}: a {typ} value is outside the "
                                   "years 1..9999") from None
    if arr.null_count or pa.types.is_string(typ) or pa.types.is_large_string(typ) \
            or pa.types.is_struct(typ) or pa.types.is_list(typ) or pa.types.is_map(typ):
        return arr.to_pylist()
    return arr.to_numpy(zero_copy_only=False)

