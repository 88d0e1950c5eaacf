"""The hot routes' own door: search (one or a batch), get an item, insert.

A plain ASGI callable in front of the Starlette app answers them itself, with
the routes' own work (routes.table) on the same pool, under the same token,
body limit, timeout, errors and metrics (app.Api). What it leaves out is the
framework's per-request machinery: no walk of the route list, no Request,
Headers or Response objects; the path is split once, the headers read into
one dict, and the answer sent as its status, three headers and the bytes.
Everything else — every other route, a HEAD, a read worker's request that the
writer must run — goes on to the Starlette app unchanged.

A single search whose like have been short of late (a running average under
INLINE_BELOW) runs on the event loop itself: handing it to a pool thread and
back (a futex wake, the loop's wake-up, two context switches) costs more CPU
than a graph search, and the kernels release the GIL anyway. Such a search is
not abandoned at --timeout, and every other client waits while it runs, so
only a search whose cost its like bound may: one JSON object of a vector and
the knobs in INLINE_KEYS (no batch, no filter, no text leg, no as_of: their
cost is the request's own, so a slow one after many short ones would stall the
loop past the timeout), its "like" being its collection, field, exact and
power of two of max(limit, ef, probes) (`shape`). Not in a transaction (which
may wait for its lock), and in a read worker only when it is at the writer's
newest version and the read names no min_version (catching up takes the
follower's lock, which its linker holds a chunk at a time, and a min_version
may wait): the rest goes to the pool. The average keeps a shape whose searches
turn long (no index, many deleted rows) on the pool.

Such a search may not even reach this ASGI callable: the HTTP protocol
(corked.HotHttpTools) asks `search_target` of each request line and
`answer_now` of the whole request, which answers it by the same rule, with the
same status, headers and bytes, or declines it (None), and then it comes here.
"""
from __future__ import annotations

import logging
import time

import msgspec
from starlette.datastructures import QueryParams

from .. import errors as E
from .follower import MIN_VERSION_HEADER
from .routes import ARROW, BRANCH_HEADER, JSON, NPY, media_of
from .transactions import HEADER

log = logging.getLogger("varvedb.server")

SEARCH, ITEMS = "/collections/{c}/search", "/collections/{c}/items"
ITEM = "/collections/{c}/items/{id}"
INLINE_BELOW = 0.002   # seconds: a shape's searches this short on average run inline
AVERAGE = 0.2          # the weight of each search's time in its shape's average
# what a search that may run inline names (`shape`), and its body's size at most
INLINE_KEYS = frozenset({"vector", "limit", "select", "field", "exact", "ef", "probes"})
INLINE_BODY = 64 << 10
_NO_QUERY = QueryParams("")
_OK = b"HTTP/1.1 200 OK\r\n"
_JSON = JSON.encode()
# the request headers the hot routes read, as ASGI gives them (lower case bytes)
_AUTH, _LENGTH, _TYPE = b"authorization", b"content-length", b"content-type"
_TX, _BRANCH, _ACCEPT = HEADER.encode(), BRANCH_HEADER.encode(), b"accept"
_MIN_VERSION = MIN_VERSION_HEADER.lower().encode()


class HotPath:
    """The ASGI application `varvedb serve` runs: the hot routes answered here,
    the rest by `app` (whose `state` it shares). `works`: routes.table's work by
    (path, method); `item_params` and `job`: app.item_params and app.Job."""

    def __init__(self, app, api, works: dict, item_params, job):
        self.app, self.api, self.state = app, api, app.state
        self.search, self.insert = works[(SEARCH, "POST")], works[(ITEMS, "POST")]
        self.get = works[(ITEM, "GET")]
        self.item_params, self.job = item_params, job     # app's, which imports this
        self._version = (-1, b"")      # the last X-Varve-Version sent, and its bytes
        # where a search may run on the loop (see the module's docstring)
        self.follower = api.follower
        self.search_seconds: dict[tuple, float] = {}   # a shape's (`shape`), averaged
        self.decoded_search = works[(SEARCH, "POST")].decoded
        self._defaults: tuple = (None, b"")    # uvicorn's default headers, and as bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/collections/"):
            route = self.route(scope)
            if route is not None:
                return await self.serve(scope, receive, send, *route)
        await self.app(scope, receive, send)

    def route(self, scope):
        """(template, work, path parameters, needs a body, writes) of a hot route,
        or None."""
        parts = scope["path"].split("/")      # ['', 'collections', c, ...]
        if not parts[2]:
            return None
        method = scope["method"]
        if method == "POST" and len(parts) == 4:
            if parts[3] == "search":
                return SEARCH, self.search, {"c": parts[2]}, True, False
            if parts[3] == "items":
                return ITEMS, self.insert, {"c": parts[2]}, True, True
        elif method == "GET" and len(parts) >= 5 and parts[3] == "items":
            # its id may hold '/' (%2F): read from the path as sent
            return ITEM, self.get, self.item_params(scope), False, False
        return None

    async def serve(self, scope, receive, send, template, work, params, needs_body, writes):
        api = self.api
        t0 = time.perf_counter()
        headers = dict(reversed(scope["headers"]))      # the first of a repeated one wins
        if (api.writer is not None or api.replica is not None) and \
                (writes or _TX in headers):
            return await self.app(scope, receive, send)    # the writer runs it: forwarded
        try:
            if api.token is not None:
                given = headers.get(_AUTH, b"").decode("latin-1")
                if not api.authorized(given):
                    raise api.refusal(given)
            raw = b""
            if needs_body:
                length = headers.get(_LENGTH)
                raw = await api.body(None if length is None else length.decode("latin-1"),
                                     receive)
            query = scope["query_string"]
            ctype = headers.get(_TYPE)
            parts = (params, QueryParams(query.decode("latin-1")) if query else _NO_QUERY,
                     JSON if ctype is None else ctype.decode("latin-1"), raw)
            tx = _text(headers.get(_TX))
            job = self.job(tx, _text(headers.get(_BRANCH)), _text(headers.get(_ACCEPT)))
            given = _text(headers.get(_MIN_VERSION))
            known = shape(params["c"], parts[2], raw) if template == SEARCH and tx is None \
                else None
            if known is not None and \
                    self.search_seconds.get(known[0], INLINE_BELOW) < INLINE_BELOW and \
                    (self.follower is None or given is None and self.follower.current()):
                code, payload = api.run_here(job, self.decoded_search,
                                             (params, known[1]), given)
            elif known is not None:     # its body decoded here already: not again there
                code, payload = await api.run_work(job, self.decoded_search,
                                                   (params, known[1]), given)
            else:
                code, payload = await api.run_work(job, work, parts, given, api.pool_for(
                    "writes" if writes else None, tx))
            if known is not None:      # its shape's searches' running average
                seconds = self.search_seconds.get(known[0], job.seconds)
                self.search_seconds[known[0]] = seconds + (job.seconds - seconds) * AVERAGE
        except E.VarveError as e:
            return await self.refuse(scope, receive, send, template, e, t0)
        except Exception as e:      # a bug: say so, keep serving
            log.exception("request %s %s failed", scope["method"], scope["path"])
            return await self.refuse(scope, receive, send, template,
                                     E.ServerError(f"{type(e).__name__}: {e}"), t0)
        media, body = self.media_of(payload)
        await send({"type": "http.response.start", "status": code,
                    "headers": [(b"content-type", media),
                                (b"content-length", b"%d" % len(body)),
                                (b"x-varve-version", self.version_bytes())]})
        await send({"type": "http.response.body", "body": body})
        api.metrics.observe(template, scope["method"], code, time.perf_counter() - t0)

    # ---- the protocol's own door (corked.HotHttpTools): no ASGI at all ----------

    @staticmethod
    def search_target(method: bytes, url: bytes) -> str | None:
        """The collection of a request line's `POST /collections/{c}/search` with
        nothing more (no query, no escape), or None: the requests that
        `answer_now` may answer."""
        if method != b"POST" or not url.startswith(b"/collections/") or \
                not url.endswith(b"/search"):
            return None
        c = url[13:-7]
        if not c or not c.isascii() or any(x in c for x in (b"/", b"%", b"?", b"#")):
            return None
        return c.decode("ascii")

    def answer_now(self, collection: str, headers: dict, raw: bytes,
                   default_headers: list) -> bytes | None:
        """The whole HTTP answer to a `search_target` request (`headers` as
        `serve` reads them, `raw` its body), run here on the event loop; or None
        where it must go the ASGI way (`serve`): where `serve` would not run it
        inline (the module's docstring), a token not this server's, a body over
        the server's limit (`serve` refuses it, 413), or a search
        that fails (`serve` runs it again and refuses it, typed: a read, so
        nothing is done twice). `default_headers`: uvicorn's (its Date)."""
        api = self.api
        t0 = time.perf_counter()
        if api.token is not None and not api.authorized(_text(headers.get(_AUTH)) or ""):
            return None
        if len(raw) > api.max_body or _TX in headers or _MIN_VERSION in headers or \
                (self.follower is not None and not self.follower.current()):
            return None
        ctype = headers.get(_TYPE)
        known = shape(collection, JSON if ctype is None else ctype.decode("latin-1"), raw)
        if known is None or self.search_seconds.get(known[0], INLINE_BELOW) >= INLINE_BELOW:
            return None
        job = self.job(None, _text(headers.get(_BRANCH)), _text(headers.get(_ACCEPT)))
        try:
            code, payload = api.run_here(job, self.decoded_search, ({"c": collection},
                                                                    known[1]), None)
        except Exception:       # noqa: BLE001 - `serve` refuses it (or logs the bug)
            return None
        seconds = self.search_seconds.get(known[0], job.seconds)
        self.search_seconds[known[0]] = seconds + (job.seconds - seconds) * AVERAGE
        if code != 200:
            return None
        media, body = self.media_of(payload)
        if default_headers is not self._defaults[0]:    # uvicorn's, new each second
            self._defaults = (default_headers, b"".join(
                b"%s: %s\r\n" % pair for pair in default_headers))
        answer = b"".join((_OK, self._defaults[1], b"content-type: ", media,
                           b"\r\ncontent-length: %d\r\nx-varve-version: " % len(body),
                           self.version_bytes(), b"\r\n\r\n", body))
        api.metrics.observe(SEARCH, "POST", 200, time.perf_counter() - t0)
        return answer

    def media_of(self, payload) -> tuple[bytes, bytes]:
        if type(payload) is bytes:      # JSON, the common answer
            return _JSON, payload
        media, body = media_of(payload)
        return media.encode(), body

    def version_bytes(self) -> bytes:
        version = self.api.answer_version()
        if version != self._version[0]:
            self._version = (version, b"%d" % version)
        return self._version[1]

    async def refuse(self, scope, receive, send, template, exc, t0) -> None:
        response = self.api.error_response(exc)
        await response(scope, receive, send)
        self.api.metrics.observe(template, scope["method"], response.status_code,
                                 time.perf_counter() - t0)


def shape(collection: str, ctype: str, raw: bytes) -> tuple | None:
    """(the shape a single search's time is averaged under, its body decoded), or
    None where it may not run inline (the module's docstring): a body that is
    binary, large, not JSON, or names what INLINE_KEYS does not (a malformed
    value goes to the pool, which refuses it)."""
    if len(raw) > INLINE_BODY or ctype.split(";")[0].strip().lower() in (ARROW, NPY):
        return None
    try:
        body = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):    # the route refuses it, typed
        return None
    if type(body) is not dict or not body.keys() <= INLINE_KEYS:
        return None
    widths = (body.get("limit", 10), body.get("ef") or 0, body.get("probes") or 0)
    field, exact = body.get("field"), body.get("exact", False)
    if any(type(w) is not int for w in widths) or type(exact) is not bool or \
            not (field is None or type(field) is str):
        return None
    return (collection, field, exact, max(widths).bit_length()), body


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
