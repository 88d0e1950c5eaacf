"""The HTTP API (docs/server.md): Starlette routes onto a Database's verbs.

Each request runs in a session of its own (a search or get on main: its
thread's kept read session; or in the transaction its X-Varve-Transaction
header names: transactions.py), on a thread of the server's pool
(the event loop only reads bodies and writes answers): reads run side by side
(the kernels release the GIL), writes meet at the file's single writer.
Errors are VarveErrors carried as {"error": {...}} with the status of
`status_of`; a request that fails has applied nothing. Every answer carries
X-Varve-Version, the newest version the process saw. In a read worker of
`serve --workers N` (follower.py) a request first catches up with the writer's
published version (and the X-Varve-Min-Version it names), and what may write
is forwarded to the writer.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from urllib.parse import unquote_to_bytes

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import errors as E
from ..cancel import CancelToken, running
from ..wire import encode, error_to_wire
from .follower import (MIN_VERSION_HEADER, VERSION_HEADER, Follower, WriterLink, WriterNeeded,
                       min_version)
from .hot import HotPath
from .metrics import Metrics
from .routes import BRANCH_HEADER, JSON, MediaTypeError, Stream, media_of, table
from .transactions import HEADER, Transactions

log = logging.getLogger("varvedb.server")

PUBLISH_EVERY = 0.05      # seconds: the writer's board catches commits made over --pg


class Job:
    """One request's work on the pool, and the race between its timeout and its writes.

    A read past the timeout is abandoned (the client gets 504) and canceled:
    its work stops at its next cancellation check (varvedb.cancel), so the pool
    thread is free again; a write is never abandoned once it has begun, and
    never begins once abandoned, so a 504 always means nothing was applied."""
    __slots__ = ("_lock", "_state", "token", "transaction", "branch", "accept", "seconds")
    current = threading.local()      # the job the calling pool thread runs

    def __init__(self, transaction: str | None = None, branch: str | None = None,
                 accept: str | None = None):
        self._lock = threading.Lock()
        self._state = "queued"       # queued | running | writing | abandoned
        self.token = CancelToken()
        self.transaction = transaction   # the id its X-Varve-Transaction header names
        self.branch = branch             # the branch its X-Varve-Branch header names
        self.accept = accept             # its Accept header (a batch's answer's form)
        self.seconds = 0.0               # how long its work ran (hot.py's inline rule)

    def start(self) -> bool:
        with self._lock:
            if self._state == "abandoned":
                return False
            self._state = "running"
            return True

    def abandon(self) -> bool:
        with self._lock:
            if self._state == "writing":
                return False
            self._state = "abandoned"
            self.token.cancel("the request ran past the server's timeout and was canceled")
            return True

    @classmethod
    def claim_write(cls) -> None:
        """Called by a route before its first write (routes.write_call, SQL writes)."""
        job = getattr(cls.current, "job", None)
        if job is None:
            return
        with job._lock:
            if job._state == "abandoned":
                raise E.RequestTimeoutError("the request ran past the server's timeout "
                                            "before it began")
            job._state = "writing"

    @classmethod
    def transaction_named(cls) -> str | None:
        """The transaction id the calling pool thread's request names, if any."""
        job = getattr(cls.current, "job", None)
        return None if job is None else job.transaction

    @classmethod
    def branch_named(cls) -> str | None:
        """The branch the calling pool thread's request names (X-Varve-Branch), if any."""
        job = getattr(cls.current, "job", None)
        return None if job is None else job.branch

    @classmethod
    def accept_named(cls) -> str | None:
        """The Accept header of the calling pool thread's request, if any."""
        job = getattr(cls.current, "job", None)
        return None if job is None else job.accept


def item_params(scope: dict) -> dict:
    """c, id and what follows the id ("" or "history") of /collections/{c}/items/{id}...,
    read from the path as sent (an ASGI scope's): a '/' inside the id is %2F there."""
    raw = scope.get("raw_path") or scope["path"].encode()
    segments = [unquote_to_bytes(s).decode("utf-8", "surrogateescape")
                for s in raw.split(b"?", 1)[0].split(b"/")]
    # ['', 'collections', c, 'items', id, *tail]
    return {"c": segments[2], "id": segments[4], "tail": "/".join(segments[5:])}


def _run_job(job: Job, work, parts, metrics, follower=None, wanted=None):
    if not job.start():
        raise E.RequestTimeoutError("the request waited past the server's timeout")
    Job.current.job = job
    metrics.work_started()
    try:
        if follower is not None:
            follower.catch_up(wanted)
        t0 = time.perf_counter()
        try:
            with running(job.token):
                return work(*parts)
        finally:
            job.seconds = time.perf_counter() - t0
    except E.QueryCanceledError:
        metrics.work_canceled()
        raise
    finally:
        metrics.work_ended()
        Job.current.job = None


def _retrieve(fut) -> None:
    if not fut.cancelled():
        fut.exception()


# the VarveError classes and their HTTP status; the first match in this order wins
_STATUS = [
    (MediaTypeError, 415),
    (E.AuthenticationError, 401), (E.RequestTooLargeError, 413), (E.RequestError, 400),
    (E.ReplicaReadOnlyError, 421), (E.LogMismatchError, 409),
    (E.ReadOnlyError, 403), (E.VersionNotFoundError, 404), (E.NotFoundError, 404),
    (E.DuplicateIdError, 409), (E.LockTimeoutError, 503), (E.TransactionError, 409),
    (E.MergeConflictError, 409), (E.BranchError, 409),
    (E.ClosedError, 503), (E.ServerUnavailableError, 503), (E.RequestTimeoutError, 504),
    (E.QueryCanceledError, 504),
    (E.ResultTooLargeError, 422),
    (E.DimensionError, 422), (E.NonFiniteVectorError, 422), (E.FieldTypeError, 422),
    (E.UnknownFieldError, 422), (E.SchemaError, 422), (E.NotNullViolationError, 422),
    (E.CheckViolationError, 422),
    (E.OptionError, 400), (E.FilterError, 400), (E.QuerySyntaxError, 400),
    (E.StorageError, 500), (E.CorruptFileError, 500), (E.IndexMaintenanceError, 500),
]
# SQL errors carry PostgreSQL's SQLSTATE; its class decides
_SQL_CLASS_STATUS = {"42P01": 404, "42501": 403, "23": 409, "22": 422, "42": 400, "0A": 400, "25": 409,
                     "55": 503, "54": 422}


def status_of(exc: E.VarveError) -> int:
    if isinstance(exc, E.SqlError):
        code = exc.sqlstate or ""
        return _SQL_CLASS_STATUS.get(code, _SQL_CLASS_STATUS.get(code[:2], 400))
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


class Api:
    """The routes' work, on one open Database."""

    def __init__(self, db, *, token: str | None = None, max_body: int = 256 << 20,
                 max_results: int = 10_000, timeout: float = 30.0, threads: int = 8,
                 transaction_idle_timeout: float = 60.0, board=None,
                 worker: int | None = None, writer_socket: str | None = None, replica=None):
        self.db = db
        # serve --replica-of URL (varvedb/replica.py): reads wait for a min_version
        # on the replica's pulls; what writes is refused, naming the leader
        self.replica = replica
        # serve --workers N (workers.py): the writer publishes its commits on the
        # board; a read worker follows them and forwards what writes to the writer
        self.board = board
        self.process = "writer" if board is not None and worker is None else \
            None if worker is None else f"worker-{worker}"
        self.follower = replica if replica is not None else \
            None if worker is None else Follower(db, board, timeout)
        self.writer = None if writer_socket is None else WriterLink(writer_socket, timeout)
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.max_results = max_results
        self.timeout = timeout
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="varvedb-request")
        # the long waits have pools of their own, so that reads are served while
        # they wait: a write waiting for the writer lock (an open transaction holds
        # it up to --timeout), a GET /log long poll (up to MAX_LOG_WAIT). Not what
        # runs in a transaction, nor ends one: behind the writes that wait for its
        # lock, it would wait for them (pool_for)
        self.writes = ThreadPoolExecutor(threads, thread_name_prefix="varvedb-write")
        self.polls = ThreadPoolExecutor(threads, thread_name_prefix="varvedb-poll")
        # the writer's requests all come through a worker, which counts them
        self.metrics = Metrics(db, count_requests=self.process != "writer", replica=replica)
        self.transactions = Transactions(db, transaction_idle_timeout, wait=timeout)

    # ---- the door: token, body, thread, errors, metrics ----------------------------

    def authorized(self, given: str) -> bool:
        """Whether `given`, a request's Authorization header ("" when absent), carries
        this server's token."""
        if self.token is None:
            return True
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(),
                                                                  self.token)

    def refusal(self, given: str) -> E.AuthenticationError:
        """Why a request whose Authorization header is `given` is not authorized:
        no token sent, or the wrong one."""
        if not given.partition(" ")[2].strip():
            return E.AuthenticationError("this server needs a token: send "
                                         "'Authorization: Bearer TOKEN'")
        return E.AuthenticationError("the token sent is not this server's token (or not "
                                     "in the form 'Authorization: Bearer TOKEN')")

    async def body(self, length: str | None, receive) -> bytes:
        """The request's body, read from ASGI's `receive` (`length`: its
        Content-Length header, if any)."""
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise E.RequestTooLargeError(f"the body is {int(length):,} bytes; this server "
                                         f"takes at most {self.max_body:,}")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":   # the client's mistake, not a bug
                raise E.RequestError("the client closed the connection before the body "
                                     "ended")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise E.RequestTooLargeError(f"the body is over {self.max_body:,} bytes, "
                                             "this server's limit")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def run_work(self, job: Job, work, parts, min_version_given: str | None,
                       pool: ThreadPoolExecutor | None = None):
        """`work(*parts)` on `pool` (None: the request pool), in the transaction and
        on the branch the request names (`job`), at most `timeout` seconds unless it
        has begun to write (see Job): its (status, payload)."""
        wanted = min_version(min_version_given)     # refused when malformed, workers or not
        if self.follower is None:
            wanted = None                # one process: every answer is the newest
        fut = asyncio.get_running_loop().run_in_executor(pool or self.pool, _run_job, job,
                                                         work, parts, self.metrics,
                                                         self.follower, wanted)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except asyncio.TimeoutError:
            if job.abandon():
                if job.transaction is not None:    # its statement was not run
                    self.transactions.fail(job.transaction, "a request in it ran "
                                           "past the server's timeout")
                # its work ends in QueryCanceledError or RequestTimeoutError,
                # which no one awaits: read it, so asyncio logs no traceback
                fut.add_done_callback(_retrieve)
                raise E.RequestTimeoutError(
                    f"the request ran past this server's {self.timeout:g} s "
                    "timeout; nothing was applied") from None
            return await fut      # a write under way: it ends, then answers

    def pool_for(self, pool: str | None, transaction: str | None) -> ThreadPoolExecutor:
        """The pool a request runs on: the route's own ("writes", "polls") or the
        request pool, which is also a named transaction's (see __init__)."""
        if pool is None or transaction is not None:
            return self.pool
        return self.writes if pool == "writes" else self.polls

    def endpoint(self, template: str, work, needs_body: bool = False, open_route: bool = False,
                 inline: bool = False, transactional: bool = False, writes: bool = False,
                 pool: str | None = None, maintainer: bool = False):
        """An ASGI endpoint: checks the token, reads the body, runs `work(request
        parts)` on the pool (at most `timeout` seconds, unless it has begun to
        write: see Job), answers with the status and bytes `work` returns.
        transactional: the route runs in the transaction its X-Varve-Transaction
        header names (Job.transaction). writes: a read worker forwards it to the
        writer, as it does any request in a transaction and any `work` that
        raises WriterNeeded. pool: "writes" or "polls", a pool of the route's own
        (pool_for). maintainer: the file's maintainer answers it (its figures): a read
        worker forwards it to the writer, a read replica answers it from its own."""
        observe = self.metrics.observe
        by_raw_path = "{id}" in template
        writer = self.writer
        if self.replica is not None and maintainer:
            writes = False

        async def run(request: Request) -> Response:
            t0 = time.perf_counter()
            headers = request.headers
            try:
                if not open_route and not self.authorized(headers.get("authorization", "")):
                    raise self.refusal(headers.get("authorization", ""))
                raw = await self.body(headers.get("content-length"), request.receive) \
                    if needs_body else b""
                if (writer is not None or self.replica is not None) and \
                        (writes or HEADER in headers):
                    return await self._forward(template, request, raw, t0)
                params = item_params(request.scope) if by_raw_path else request.path_params
                parts = (params, request.query_params, headers.get("content-type", JSON), raw)
                if inline:     # trivial work (health): no hand-off, no queue behind a read
                    code, payload = work(*parts)
                else:
                    job = Job(headers.get(HEADER) if transactional else None,
                              headers.get(BRANCH_HEADER), headers.get("accept"))
                    code, payload = await self.run_work(job, work, parts,
                                                        headers.get(MIN_VERSION_HEADER),
                                                        self.pool_for(pool, job.transaction))
                return self._answer(template, request, code, payload, t0)
            except WriterNeeded:
                try:
                    return await self._forward(template, request, raw, t0)
                except E.VarveError as e:
                    response = self.error_response(e)
            except E.VarveError as e:
                response = self.error_response(e)
            except Exception as e:   # a bug: say so, keep serving
                log.exception("request %s %s failed", request.method, request.url.path)
                response = self.error_response(E.ServerError(f"{type(e).__name__}: {e}"))
            observe(template, request.method, response.status_code, time.perf_counter() - t0)
            return response

        return run

    def run_here(self, job: Job, work, parts, min_version_given: str | None):
        """`work(*parts)` in the calling thread (hot.py: a short search on the event
        loop, in a server of one process): no hand-off, and no timeout."""
        min_version(min_version_given)      # refused when malformed
        return _run_job(job, work, parts, self.metrics)

    def _answer(self, template: str, request: Request, code: int, payload, t0: float):
        if isinstance(payload, Stream):      # GET /backup: chunked, one chunk held at a time
            self.metrics.observe(template, request.method, code, time.perf_counter() - t0)
            return StreamingResponse(payload.chunks, code, media_type=payload.media_type,
                                     headers={VERSION_HEADER: str(self.db.engine.visible),
                                              **payload.headers})
        media, payload = media_of(payload)
        response = Response(payload, code, media_type=media,
                            headers={VERSION_HEADER: str(self.answer_version())})
        self.metrics.observe(template, request.method, code, time.perf_counter() - t0)
        return response

    def answer_version(self) -> int:
        """The version an answer carries, published first by the writer of `serve
        --workers N` (see workers.VersionBoard)."""
        version = self.db.engine.visible
        if self.board is not None and self.follower is None:
            self.board.publish(version)
        return version

    async def _forward(self, template: str, request: Request, raw: bytes, t0: float):
        """A read worker's answer to a request only the writer can run: the writer's
        (a replica's: ReplicaReadOnlyError, naming its leader)."""
        if self.replica is not None:
            raise self.replica.refusal()
        response = await self.writer.send(request, raw)
        self.metrics.observe(template, request.method, response.status_code,
                             time.perf_counter() - t0)
        return response

    def error_response(self, exc: E.VarveError) -> Response:
        status = status_of(exc)
        headers = {VERSION_HEADER: str(self.db.engine.visible)}
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        elif status == 503:
            headers["Retry-After"] = "1"
        return Response(encode(error_to_wire(exc)), status, headers=headers, media_type=JSON)


def build_app(db, *, token: str | None = None, max_body: int = 256 << 20,
              max_results: int = 10_000, timeout: float = 30.0, threads: int = 8,
              transaction_idle_timeout: float = 60.0, board=None, worker: int | None = None,
              writer_socket: str | None = None, replica=None) -> HotPath:
    """The ASGI application serving `db` (see docs/server.md): the hot routes'
    own door (hot.py) in front of the Starlette application. `board`,
    `worker`, `writer_socket`: a process of `serve --workers N` (workers.py) —
    the writer has the board alone; a read worker its index and the writer's
    socket too."""
    api = Api(db, token=token, max_body=max_body, max_results=max_results, timeout=timeout,
              threads=threads, transaction_idle_timeout=transaction_idle_timeout,
              board=board, worker=worker, writer_socket=writer_socket, replica=replica)
    routes = table(api, Job.claim_write, Job.transaction_named, Job.branch_named,
                   Job.accept_named)

    @asynccontextmanager
    async def lifespan(app):
        publisher = None
        if api.process == "writer":      # commits that no HTTP answer publishes (--pg)
            publisher = asyncio.get_running_loop().create_task(_publish_commits(api))
        yield
        if publisher is not None:
            publisher.cancel()
        if api.writer is not None:
            await api.writer.close()
        # SIGTERM: uvicorn has finished the requests in flight; let the pool's
        # threads end, then the maintainer links what is committed, the state is
        # checkpointed and the file closed (a restart opens without a rebuild)
        await asyncio.get_running_loop().run_in_executor(None, _shutdown, api)

    async def not_found(request: Request, exc: HTTPException) -> Response:
        given = request.headers.get("authorization", "")
        if not api.authorized(given) and request.url.path != "/health":
            return api.error_response(api.refusal(given))
        if exc.status_code == 405:
            err = E.RequestError(f"{request.method} is not a method of {request.url.path}")
        elif exc.status_code == 404:
            err = E.NotFoundError(f"no route {request.url.path}")
        else:
            err = E.RequestError(str(exc.detail))
        r = api.error_response(err)
        r.status_code = exc.status_code
        if exc.status_code == 405:    # every method of the path (each Route holds one)
            r.headers["Allow"] = ", ".join(sorted({m for route in app.routes
                                                   if route.path_regex.match(request.url.path)
                                                   for m in route.methods}))
        return r

    # an item's id may hold '/' (sent as %2F, decoded before routing): its routes
    # match the rest of the path, and item_params reads the id from the raw path
    app = Starlette(routes=[Route(path.replace("{id}", "{id:path}"),
                                  api.endpoint(path, work, **opts), methods=[method])
                            for path, method, work, opts in routes],
                    exception_handlers={HTTPException: not_found}, lifespan=lifespan)
    app.router.redirect_slashes = False     # /collections/ is a 404 (a 307 skipped the token)
    app.state.api = api
    return HotPath(app, api, {(path, method): work for path, method, work, _ in routes},
                   item_params, Job)


async def _publish_commits(api: Api) -> None:
    while True:
        await asyncio.sleep(PUBLISH_EVERY)
        if not api.db.engine.closed:
            api.board.publish(api.db.engine.visible)


def _shutdown(api: Api) -> None:
    for pool in (api.pool, api.writes, api.polls):
        pool.shutdown(wait=True)
    if api.follower is not None:
        api.follower.stop()
    db = api.db
    try:
        api.transactions.close()      # open ones roll back (and free the writer lock)
        if db.path is not None and not db.engine.readonly:
            db.checkpoint()
    except E.VarveError:
        log.exception("the checkpoint at shutdown failed (nothing is lost: the log has it)")
    finally:
        db.close()

