"""The OpenAPI 3.1 document of the routes (GET /openapi.json).

Written by hand beside routes.py, but for the read requests' bodies, whose
schemas are query/request.py's tables (the one list of a search's arguments).
Held to the routes by the tests: a property test (schemathesis) sends requests
generated from this document and checks every answer against it.
"""
from __future__ import annotations

from .. import __version__
from ..query.request import COUNT_ARGS, FIND_ARGS, SEARCH_ARGS

ANY = {}
NULLABLE_INT = {"type": ["integer", "null"]}
ID = {"type": ["integer", "string"]}
PARAMS = {"type": ["array", "null"], "description": "values of $1, $2, ... in where"}
WHERE = {"type": ["string", "null"], "description": "a filter, as Collection.find's where="}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(props: dict, required: tuple = (), extra: bool = False) -> dict:
    d = {"type": "object", "properties": props, "additionalProperties": extra}
    if required:
        d["required"] = list(required)
    return d


SCHEMAS = {
    "Error": _obj({"error": _obj({
        "type": {"type": "string", "description": "the VarveError subclass"},
        "message": {"type": "string"}, "sqlstate": {"type": "string"},
        "position": NULLABLE_INT, "item": ID}, ("type", "message", "sqlstate"))}, ("error",)),
    "Row": {"type": "object", "description": "a document: field name -> value (id too)",
            "additionalProperties": True},
    "FieldSpec": {"description": "a type name (\"text\", \"int\", \"vector(3)\", ...) or a field "
                                 "spec as GET /collections/{c} shows it",
                  "type": ["string", "object"]},
    "Hit": _obj({"id": ID, "score": {"type": ["number", "null"]},
                 "fields": {"type": "object", "additionalProperties": True}},
                ("id", "score", "fields")),
    "Hits": _obj({"hits": {"type": "array", "items": _ref("Hit")},
                  "plan": {"type": ["object", "null"]}}, ("hits",)),
    "Collection": _obj({"name": {"type": "string"}, "id": {"enum": ["int", "text"]},
                        "fields": {"type": "object", "additionalProperties": {"type": "object"}},
                        "schema": {"type": "object"}, "documents": {"type": "integer"},
                        "version": {"type": "integer"},
                        "indexes": {"type": "object", "description": "per indexed vector field: "
                                    "row versions its graph has linked, and not yet; the "
                                    "rows linked a second lately and the seconds left at "
                                    "that rate (null: not measured yet)",
                                    "additionalProperties": _obj(
                                        {"linked": {"type": "integer"},
                                         "unlinked": {"type": "integer"},
                                         "rows_per_s": {"type": ["number", "null"]},
                                         "eta_s": {"type": ["number", "null"]}},
                                        ("linked", "unlinked"))},
                        "vectors": {"type": "object", "description": "per vector field: its "
                                    "dtype, dim, row versions, bytes per stored vector, arena "
                                    "bytes, graph bytes and graph bytes per vector",
                                    "additionalProperties": {"type": "object"}}},
                       ("name", "id", "fields", "schema", "documents", "version", "indexes")),
    "NewCollection": _obj({"name": {"type": "string"},
                           "schema": {"type": "object",
                                      "additionalProperties": _ref("FieldSpec")},
                           "exist_ok": {"type": "boolean", "default": False,
                                        "description": "answer an existing collection of "
                                                       "this schema (200) instead of a 422; "
                                                       "data is then not inserted"},
                           "data": {"type": "array", "items": _ref("Row"),
                                    "description": "rows inserted in the same commit; "
                                                   "without a schema, the schema is "
                                                   "inferred from them"}},
                          ("name",)),
    "Written": _obj({"ids": {"type": "array", "items": ID}, "version": {"type": "integer"}},
                    ("ids", "version")),
    "Changed": _obj({"updated": {"type": "integer"}, "deleted": {"type": "integer"},
                     "version": {"type": "integer"}}, ("version",)),
    "Version": _obj({"version": {"type": "integer"}}, ("version",)),
    "Update": _obj({"set": {"type": "object"}, "where": WHERE, "params": PARAMS,
                    "ids": {"type": ["array", "null"], "items": ID}}, ("set",)),
    "Delete": _obj({"ids": {"type": ["array", "null"], "items": ID}, "where": WHERE,
                    "params": PARAMS}),
    "Count": _obj(COUNT_ARGS),
    "Find": _obj(FIND_ARGS),
    "Search": _obj(SEARCH_ARGS),
    "SearchBatch": _obj({"queries": {"type": "array", "items": _ref("Search")}}, ("queries",)),
    "Results": _obj({"results": {"type": "array", "items": _ref("Hits")}}, ("results",)),
    "Sql": _obj({"sql": {"type": "string"}, "params": PARAMS,
                 "copy_data": {"type": ["string", "null"],
                               "description": "the data a COPY ... FROM STDIN reads"}},
                ("sql",)),
    "SqlResult": _obj({"columns": {"type": "array", "items": {"type": "string"}},
                       "kinds": {"type": "array", "items": {"type": ["string", "null"]}},
                       "rows": {"type": "array", "items": {"type": "array"}},
                       "status": {"type": "string"}, "rowcount": {"type": "integer"},
                       "copy_data": {"type": "string",
                                     "description": "what a COPY ... TO STDOUT wrote"},
                       "transaction": {"enum": ["open", "failed", "ended"],
                                       "description": "sent in a transaction: its state "
                                       "after the text (ended: its COMMIT or ROLLBACK)"}},
                      ("columns", "kinds", "rows", "status", "rowcount")),
    "Versions": _obj({"versions": {"type": "array", "items": {"type": "object"}}},
                     ("versions",)),
    "Verify": _obj({"anchor": {"type": ["array", "null"], "prefixItems": [
        {"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2}}),
    "Transaction": _obj({"id": {"type": "string"}, "state": {"enum": ["open", "failed"]},
                         "version": {"type": "integer", "description": "the version it "
                                     "commits as (reads in it see its own writes)"}},
                        ("id", "state", "version")),
    "Committed": _obj({"id": {"type": "string"}, "state": {"const": "committed"},
                       "version": {"type": "integer"}}, ("id", "state", "version")),
    "RolledBack": _obj({"id": {"type": "string"}, "state": {"const": "rolled back"}},
                       ("id", "state")),
    "Explain": {"type": "object", "description": "a search, find or count body (as those "
                "routes take it) and the verb: the plan it would run, not run",
                "properties": {"verb": {"enum": ["search", "find", "count"],
                                        "default": "search"},
                               **SEARCH_ARGS, **FIND_ARGS, **COUNT_ARGS},
                "additionalProperties": False},
    "Plan": _obj({"plan": {"type": "object", "description": "the plan's tree as data "
                           "(PlanNode.to_dict: node, its parameters, its input)"}}, ("plan",)),
    "NewIndex": _obj({"field": {"type": "string"},
                      "index": {"description": "'hash' or 'sorted' (a scalar field), or a "
                                "vector index's spec: {kind: hnsw, m, ef_construction, ...} "
                                "or {kind: ivfpq, lists, nprobe, ...}",
                                "type": ["string", "object"]},
                      "name": {"type": ["string", "null"], "description": "a scalar "
                               "index's name"}}, ("field", "index")),
    "IndexStatus": _obj({"field": {"type": "string"}, "linked": {"type": "integer"},
                         "unlinked": {"type": "integer"},
                         "rows_per_s": {"type": ["number", "null"]},
                         "eta_s": {"type": ["number", "null"]}},
                        ("field", "linked", "unlinked"), extra=True),
    "WaitIndexed": _obj({"field": {"type": ["string", "null"]},
                         "timeout": {"type": ["number", "null"], "minimum": 0,
                                     "description": "seconds, at most the server's own "
                                     "timeout (null: that)"}}),
    "Indexed": _obj({"indexed": {"type": "boolean"}}, ("indexed",)),
    "VectorMemory": {"type": "object", "additionalProperties": True,
                     "description": "Collection.vector_memory's figures"},
    "NewField": _obj({"name": {"type": "string"}, "spec": _ref("FieldSpec")},
                     ("name", "spec")),
    "Rename": _obj({"new": {"type": "string"}}, ("new",)),
    "Branch": _obj({"name": {"type": "string"}, "parent": {"type": ["string", "null"]},
                    "fork": {"type": "integer"}, "created": {"type": "integer"},
                    "head": {"type": "integer"}},
                   ("name", "parent", "fork", "created", "head")),
    "Branches": _obj({"branches": {"type": "array", "items": _ref("Branch")}},
                     ("branches",)),
    "NewBranch": _obj({"name": {"type": "string"},
                       "at": {"type": ["integer", "string", "null"], "description":
                              "the version (or RFC 3339 time) of the current branch it "
                              "forks at (null: now)"}}, ("name",)),
    "Merge": _obj({"source": {"type": "string"}}, ("source",)),
    "Diff": _obj({"a": _ref("DiffSide"), "b": _ref("DiffSide")}, ("a", "b")),
    "DiffSide": {"description": "a version of the request's branch, or {branch}, "
                 "{as_of} or both", "oneOf": [
                     {"type": "integer"},
                     _obj({"branch": {"type": "string"},
                           "as_of": {"type": ["integer", "string", "null"]}})]},
    "Changes": _obj({"changes": {"type": "object", "additionalProperties": _obj(
        {"added": {"type": "array", "items": ID}, "changed": {"type": "array", "items": ID},
         "deleted": {"type": "array", "items": ID}}, ("added", "changed", "deleted"))}},
        ("changes",)),
    "Vacuum": _obj({"keep": {"type": ["integer", "string", "null"], "description":
                             "the newest versions kept (a number), or every version "
                             "from an RFC 3339 time on (null: all)"},
                    "graphs": {"enum": ["rebuild", "repair"], "default": "rebuild"}}),
    "VacuumReport": _obj({"oldest": {"type": "integer"}, "version": {"type": "integer"},
                          "rows_kept": {"type": "integer"}, "rows_dropped": {"type": "integer"},
                          "bytes_before": {"type": "integer"},
                          "bytes_after": {"type": "integer"}, "seconds": {"type": "number"}},
                         ("oldest", "version", "rows_kept", "rows_dropped", "bytes_before",
                          "bytes_after", "seconds")),
    "Restore": _obj({"version": {"type": ["integer", "string"], "description":
                                 "a version number or an RFC 3339 time"}}, ("version",)),
    "VerifyReport": _obj({"ok": {"type": "boolean"}, "versions_checked": {"type": "integer"},
                          "first_break": {"type": ["object", "null"]},
                          "chain": {"type": "string"}},
                         ("ok", "versions_checked", "first_break", "chain")),
}


def _json_body(schema: dict, required: bool = True) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


# the error answers of docs/server.md's table; a route lists those it can give
ERRORS = {400: "malformed JSON or body, a bad option, filter, text query or SQL",
          401: "token missing or wrong",
          403: "what only an embedded caller may do: read the server's files",
          404: "unknown collection, item or version, or a transaction not open here",
          409: "id taken, transaction conflict, a failed transaction (25P02), a "
               "transaction statement no transaction holds, a replica's version the "
               "leader's log does not hold", 413: "body over the server's cap",
          415: "a body type the route does not take",
          422: "a value that does not fit the schema, a result over the cap",
          500: "the file or the server failed",
          503: "the writer is busy past the timeout, or the server is stopping",
          504: "the request ran past the server's timeout before it began to write "
               "(a read is canceled)"}
ERROR_HEADERS = {
    401: {"WWW-Authenticate": {"required": True, "schema": {"const": "Bearer"}}},
    503: {"Retry-After": {"required": True, "schema": {"type": "string"}}}}


def _errors(write: bool, inputs: bool, body: bool) -> list[int]:
    """The error statuses of a route: every route can be refused (401), fail (500),
    meet a stopping server (503) or time out before it writes (504); a write can
    conflict; input can be wrong."""
    codes = {401, 500, 503, 504} | ({409} if write else set())
    if inputs:
        codes |= {400, 404, 422}
    if body:
        codes |= {413, 415}
    return sorted(codes)


def _error_response(code: int) -> dict:
    r = {"description": ERRORS[code],
         "content": {"application/json": {"schema": _ref("Error")}}}
    if code in ERROR_HEADERS:
        r["headers"] = ERROR_HEADERS[code]
    return r


def _op(summary: str, ok: int, answer: dict | None, body: dict | None = None,
        params: list | None = None, open_route: bool = False, write: bool = False,
        also: tuple = ()) -> dict:
    content = {"application/json": {"schema": answer}} if answer is not None else None
    ok_response = {"description": "done"}
    if content:
        ok_response["content"] = content
    responses = {str(ok): ok_response}
    if not open_route:
        for code in sorted({*_errors(write, bool(params or body), body is not None), *also}):
            responses[str(code)] = _error_response(code)
    op = {"summary": summary, "responses": responses}
    if body is not None:
        op["requestBody"] = body
    if params:
        op["parameters"] = params
    if open_route:
        op["security"] = []
    return op


def _op_also_ok(op: dict, ok: int, what: str) -> dict:
    """An operation that answers a second success status, with the same body."""
    first = next(v for k, v in op["responses"].items() if k.startswith("2"))
    op["responses"][str(ok)] = {**first, "description": what}
    op["responses"] = dict(sorted(op["responses"].items()))
    return op


# the header that runs a data route in a transaction (POST /transactions)
IN_TRANSACTION = {"name": "X-Varve-Transaction", "in": "header", "required": False,
                  "schema": {"type": "string"},
                  "description": "run in this open transaction (its id from POST "
                                 "/transactions); one not open here is a 404"}


# the header that runs a request on a branch (Client.use): reads, writes, and the
# verbs that act on the current branch (a new branch forks from it, merge into it)
ON_BRANCH = {"name": "X-Varve-Branch", "in": "header", "required": False,
             "schema": {"type": "string"},
             "description": "read and write this branch (default main); an unknown one is "
                            "a 404"}


# the header a read worker (serve --workers N) answers at that version or later by
MIN_VERSION = {"name": "X-Varve-Min-Version", "in": "header", "required": False,
               "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"},
               "description": "answer at this version or later (the X-Varve-Version "
                              "of this client's last answer): a read worker waits for "
                              "it, at most 5 s, then answers 504 VersionNotReachedError"}


# the routes that run on the branch X-Varve-Branch names (and the collection routes)
BRANCHED = ("/sql", "/history", "/transactions", "/merge", "/diff", "/restore")


def _on_branch(op: dict) -> dict:
    """An operation that runs on the branch the branch header names: an unknown
    one is a 404, a dropped one (or a schema change off main) a 409."""
    op["parameters"] = [*op.get("parameters", ()), ON_BRANCH]
    for code in (404, 409):
        op["responses"].setdefault(str(code), _error_response(code))
    op["responses"] = dict(sorted(op["responses"].items()))
    return op


def _in_transaction(op: dict) -> dict:
    """A data route's operation, which the transaction header may run in one: an
    id not open here is a 404, a failed transaction a 409; and which a read worker
    answers at the version the min-version header names (504 past its wait)."""
    op["parameters"] = [*op.get("parameters", ()), IN_TRANSACTION, MIN_VERSION]
    for code in (404, 409, 504):
        op["responses"].setdefault(str(code), _error_response(code))
    op["responses"] = dict(sorted(op["responses"].items()))
    return op


def _path_param(name: str, what: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"},
            "description": what}


def _query_param(name: str, what: str, schema: dict | None = None) -> dict:
    return {"name": name, "in": "query", "required": False,
            "schema": schema or {"type": "string"}, "description": what}


def openapi_document() -> dict:
    C = [_path_param("c", "the collection")]
    I = C + [_path_param("id", "the document's id (an int in an int-id collection)")]
    items_body = {"required": True, "content": {
        "application/json": {"schema": {"type": "array", "items": _ref("Row")}},
        "application/vnd.apache.arrow.stream": {"schema": {"type": "string",
                                                           "format": "binary"}},
        "application/x-npy": {"schema": {"type": "string", "format": "binary"}}}}
    search_body = _json_body({"oneOf": [_ref("Search"), _ref("SearchBatch")]})
    # a batch of query vectors sent binary: the block is the body, the rest ?search=
    search_body["content"].update({
        "application/x-npy": {"schema": {"type": "string", "format": "binary"}},
        "application/vnd.apache.arrow.stream": {"schema": {"type": "string",
                                                           "format": "binary"}}})
    search_args = _query_param("search", "with a binary body (an .npy (n, dim) array or an "
                               "Arrow stream of one fixed-size-list column: the query "
                               "vectors): the search's other keywords, a JSON object")
    search_op = _op("Vector, text or hybrid search; or a batch of them", 200,
                    {"oneOf": [_ref("Hits"), _ref("Results")]}, search_body,
                    C + [search_args])
    # a batch answers msgpack or Arrow (a row a hit) when Accept names it
    search_op["responses"]["200"]["content"].update({
        "application/msgpack": {"schema": _ref("Results")},
        "application/vnd.apache.arrow.stream": {"schema": {"type": "string",
                                                           "format": "binary"}}})
    T = [_path_param("t", "the transaction's id (from POST /transactions)")]
    F = [_path_param("f", "the field")]
    B = [_path_param("b", "the branch")]
    paths = {
        "/health": {"get": _op("Liveness and the newest version (no token needed)", 200,
                               _obj({"status": {"const": "ok"},
                                     "version": {"type": "integer"}},
                                    ("status", "version")), open_route=True)},
        "/openapi.json": {"get": _op("This document", 200, {"type": "object"})},
        "/docs": {"get": {"summary": "This document as an HTML page for people", "responses": {
            "200": {"description": "the page",
                    "content": {"text/html": {"schema": {"type": "string"}}}},
            **{str(c): _error_response(c) for c in _errors(False, False, False)}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics (text format)", "responses": {
            "200": {"description": "metrics",
                    "content": {"text/plain": {"schema": {"type": "string"}}}},
            **{str(c): _error_response(c) for c in _errors(False, False, False)}}}},
        "/collections": {
            "get": _op("The collections' names", 200,
                       _obj({"collections": {"type": "array", "items": {"type": "string"}}},
                            ("collections",))),
            "post": _op_also_ok(_op("Create a collection (201), or with exist_ok find one "
                                    "of this schema (200)", 201, _ref("Collection"),
                                    _json_body(_ref("NewCollection")), write=True,
                                    also=(403,)), 200, "it exists with this schema")},
        "/collections/{c}": {
            "get": _op("A collection's schema and size", 200, _ref("Collection"), params=C),
            "delete": _op("Drop a collection", 200, _ref("Version"), params=C, write=True)},
        "/collections/{c}/items": {
            "post": _op("Insert documents: JSON rows, an Arrow IPC stream, or an .npy block "
                        "of vectors (?field=)", 201, _ref("Written"), items_body,
                        C + [_query_param("field", "the vector field of an .npy body")],
                        write=True),
            "put": _op("Upsert documents (JSON rows): each merged into the live document "
                       "with its id (the fields a row does not name kept), or inserted; "
                       "?merge=false replaces the whole document", 200, _ref("Written"),
                       _json_body({"type": "array", "items": _ref("Row")}),
                       C + [_query_param("merge", "false: replace whole documents "
                                                  "(default true: merge)",
                                         {"type": "string", "enum": ["true", "false"]})],
                       write=True)},
        "/collections/{c}/items/{id}": {
            "get": _op("One document (404 if none has this id)", 200, _ref("Row"), params=I + [
                _query_param("as_of", "a version number or an RFC 3339 timestamp"),
                _query_param("select", "fields to return, comma-separated")]),
            "patch": _op("Set fields of one document", 200, _ref("Changed"),
                         _json_body({"type": "object"}), I, write=True),
            "delete": _op("Delete one document", 200, _ref("Changed"), params=I, write=True)},
        "/collections/{c}/items/{id}/history": {
            "get": _op("Every version of one document", 200, _ref("Versions"), params=I)},
        "/collections/{c}/update": {
            "post": _op("Set fields on the documents matching where or ids", 200,
                        _ref("Changed"), _json_body(_ref("Update")), C, write=True)},
        "/collections/{c}/delete": {
            "post": _op("Delete the documents matching ids or where", 200, _ref("Changed"),
                        _json_body(_ref("Delete")), C, write=True)},
        "/collections/{c}/count": {
            "post": _op("Count documents", 200, _obj({"count": {"type": "integer"}},
                                                     ("count",)),
                        _json_body(_ref("Count"), required=False), C)},
        "/collections/{c}/find": {
            "post": _op("Documents matching a filter, in insertion order", 200, _ref("Hits"),
                        _json_body(_ref("Find"), required=False),
                        C + [_query_param("vectors", "true: with no select, every field, "
                                                     "vectors too (default false: but vectors)",
                                          {"type": "string", "enum": ["true", "false"]})])},
        "/collections/{c}/search": {"post": search_op},
        "/sql": {"post": _op("Run SQL in pgvector's dialect", 200, _ref("SqlResult"),
                             _json_body(_ref("Sql")), write=True, also=(403,))},
        "/history": {"get": _op("Every commit held", 200, _ref("Versions"))},
        "/verify": {"post": _op("Re-read and check the whole file", 200, _ref("VerifyReport"),
                                _json_body(_ref("Verify"), required=False))},
        "/transactions": {"post": _op(
            "Open a transaction that spans requests: it takes the writer (503 while "
            "another holds it past the lock timeout) and is rolled back after the "
            "server's idle timeout", 201, _ref("Transaction"), write=True)},
        "/transactions/{t}": {"get": _op("A transaction's state", 200, _ref("Transaction"),
                                         params=T)},
        "/transactions/{t}/commit": {"post": _op(
            "Commit a transaction (a failed one is rolled back: 409)", 200, _ref("Committed"),
            params=T, write=True)},
        "/transactions/{t}/rollback": {"post": _op("Roll a transaction back", 200,
                                                   _ref("RolledBack"), params=T, write=True)},
        "/collections/{c}/explain": {"post": _op(
            "The plan a search, find or count would run (not run)", 200, _ref("Plan"),
            _json_body(_ref("Explain")), C)},
        "/collections/{c}/indexes": {"post": _op(
            "Build an index: HNSW or IVF-PQ on a vector field, hash or sorted on a scalar",
            200, _ref("Version"), _json_body(_ref("NewIndex")), C, write=True)},
        "/collections/{c}/indexes/{f}": {"delete": _op(
            "Drop a field's index", 200, _ref("Version"), params=C + F, write=True)},
        "/collections/{c}/index_status": {"get": _op(
            "How far a deferred index has linked the committed rows", 200,
            _ref("IndexStatus"), params=C + [_query_param(
                "field", "a vector or full-text field (default: the vector field)")])},
        "/collections/{c}/wait_indexed": {"post": _op(
            "Wait until a deferred index covers every committed row (false: timed out)",
            200, _ref("Indexed"), _json_body(_ref("WaitIndexed"), required=False), C)},
        "/collections/{c}/vector_memory": {"get": _op(
            "Memory of a vector field", 200, _ref("VectorMemory"), params=C + [_query_param(
                "field", "the vector field (default: the only one)")])},
        "/collections/{c}/fields": {"post": _op(
            "Add a field", 200, _ref("Version"), _json_body(_ref("NewField")), C, write=True)},
        "/collections/{c}/fields/{f}": {"delete": _op(
            "Drop a field, its values and indexes", 200, _ref("Version"), params=C + F,
            write=True)},
        "/collections/{c}/fields/{f}/rename": {"post": _op(
            "Rename a field", 200, _ref("Version"), _json_body(_ref("Rename")), C + F,
            write=True)},
        "/branches": {
            "get": _op("Every live branch, main first", 200, _ref("Branches")),
            "post": _op("Fork a branch from the current one (201)", 201, _ref("Branch"),
                        _json_body(_ref("NewBranch")), write=True)},
        "/branches/{b}": {
            "get": _op("One branch", 200, _ref("Branch"), params=B),
            "delete": _op("Drop a branch (a commit on its parent)", 200, _ref("Version"),
                          params=B, write=True)},
        "/merge": {"post": _op("Merge a branch into the current one, as one commit", 200,
                               _ref("Version"), _json_body(_ref("Merge")), write=True)},
        "/diff": {"post": _op("What changed from a to b, per collection", 200,
                              _ref("Changes"), _json_body(_ref("Diff")))},
        "/vacuum": {"post": _op("Compact the server's file, keeping the versions asked for",
                                200, _ref("VacuumReport"),
                                _json_body(_ref("Vacuum"), required=False), write=True)},
        "/restore": {"post": _op("A new commit whose documents equal those as of a version",
                                 200, _ref("Version"), _json_body(_ref("Restore")),
                                 write=True)},
        "/checkpoint": {"post": _op("Write the current state so the next open loads it",
                                    200, _ref("Version"), write=True)},
        "/backup": {"get": {"summary": "A consistent copy of the file as of its newest "
                            "durable commit, streamed (chunked); X-Varve-Backup-Version "
                            "and X-Varve-Backup-Bytes say what it holds", "responses": {
                                "200": {"description": "the file's bytes", "content": {
                                    "application/octet-stream": {
                                        "schema": {"type": "string", "format": "binary"}}}},
                                **{str(c): _error_response(c)
                                   for c in _errors(False, False, False)}}}},
        "/log": {"get": {
            "summary": "A read replica's pull: the file's committed frames after commit "
                       "`after` (whose chain hash is `chain`) up to the newest durable one, "
                       "streamed as they lie; X-Varve-Log-Version names that one, X-Varve-Log-Bytes how many bytes follow. 409 "
                       "LogMismatchError: the file does not hold that commit (re-seed)",
            "parameters": [
                {**_query_param("after", "the replica's version", {"type": "string",
                                                                    "pattern": "^[0-9]+$"}),
                 "required": True},
                {**_query_param("chain", "its chain hash, 64 hex digits"), "required": True},
                _query_param("wait", "seconds to wait for a commit after `after` (at "
                             "most 10; default 0)")],
            "responses": {
                "200": {"description": "the frames' bytes", "content": {
                    "application/octet-stream": {
                        "schema": {"type": "string", "format": "binary"}}}},
                **{str(c): _error_response(c) for c in (400, 401, 409, 500, 503, 504)}}}},
    }
    for path, item in paths.items():
        if path == "/sql" or path.startswith("/collections/{c}") or path == "/collections":
            for method, op in item.items():
                if (path, method) != ("/collections", "get"):
                    _in_transaction(op)
    for path, item in paths.items():
        for method, op in item.items():
            if path in BRANCHED or (path.startswith("/collections") and
                                    (path, method) != ("/collections", "get")) \
                    or (path, method) in (("/branches", "post"), ("/branches/{b}", "delete")):
                _on_branch(op)
    return {
        "openapi": "3.1.0",
        "info": {"title": "varvedb", "version": __version__,
                 "description": "varvedb's HTTP API: the embedded API's verbs over one file."},
        "paths": paths,
        "components": {"schemas": SCHEMAS, "securitySchemes": {
            "token": {"type": "http", "scheme": "bearer"}}},
        "security": [{"token": []}],
    }
