"""One client's conversation: start-up and authentication, then the simple and
extended query protocols over a Session of its own.

Each connection is a thread of its own with a blocking socket, as each is a
process in PostgreSQL: it reads a message, runs it and answers, so a query
costs one wake-up of one thread; the kernels release the GIL, so connections
search in parallel. Statements run one at a time, in the order they came.
Outside a BEGIN a simple query's text is one implicit transaction (as `db.sql()`
runs one: all of its statements commit, or none where one fails), and the
extended protocol's writes and DDL run in its implicit transaction up to Sync:
a pipeline without BEGIN commits at the Sync, or not at all after an error in
it; a COMMIT in the pipeline commits what ran so far, a BEGIN makes the
implicit transaction the block, and what PostgreSQL refuses in a block (VACUUM,
...) is refused after another Execute in it (25001), as PostgreSQL's. An error answers ErrorResponse
with its SQLSTATE and, in the extended protocol, skips the messages up to
Sync; inside BEGIN the transaction is failed (ReadyForQuery 'E', 25P02) until
ROLLBACK, as PostgreSQL does. Answers to the extended protocol's messages wait
for Sync or Flush and go out in one send — but the rows of a result of more
than ROWS_PER_WRITE, which go out as they are encoded, a write at a time (_stream). Describe of a portal runs no write:
its answer is settled by the message after it (see _settle). A prepared
statement's rows are sent as the column types its Describe announced (a write's
RETURNING too; a column it found no type for, as text): a result of other
columns or types (DDL since, or values its Describe's plan did not show)
answers 0A000, and a write rolls back with the implicit transaction. A portal runs at
most once: one whose run failed answers that error again, never reruns. libpq's execution
of a prepared statement (Bind, Describe and Execute of the unnamed portal,
Sync: one write) is read as one step (_execution), answered as those messages
are one by one.
"""
from __future__ import annotations

import logging
import secrets
import socket
import time
from operator import itemgetter

from pglast.parser import ParseError, scan

from .. import errors as E
from ..cancel import CancelToken, running
from ..query.pg_types import to_regtype
from ..sql import (compile_text, describe_read, describe_write, end_implicit, fail_block,
                   implicit, run_compiled, run_each, run_shaped, shaped)
from ..sql.settings import REPORTED
from ..sql.dml import PGCOPY
from ..results import SqlResult
from ..sql.params import param_types
from . import catalog
from . import messages as M
from .copy import CopyIn
from .messages import Body, ProtocolViolation, Reader
from .scram import MECHANISM, AuthFailed, Exchange
from .types import INT8, TEXT, column_oid, decode_param, encoder, fixed_code

log = logging.getLogger("varvedb.pgwire")

ROWS_PER_WRITE = 1000      # data rows rendered and written at a time
KEPT_DESCRIPTIONS = 8      # row descriptions a prepared statement keeps
FLUSH_AT = 64              # answers (each up to ROWS_PER_WRITE rows) held before Sync
MAX_PARAMS = 65535         # a Bind carries at most this many values (an unsigned count)
# what one connection keeps between messages, far above any driver's statement
# cache (psycopg's and asyncpg's hold a few hundred): beyond, Parse or Bind is
# refused (54000) and the connection goes on
MAX_KEPT = 10_000          # named prepared statements, and named portals, each
MAX_KEPT_BYTES = 64 << 20  # bytes of their statements' text and bound values
_UNKNOWN = object()        # a Prepared's kind not looked up yet


class Prepared:
    __slots__ = ("text", "oids", "params", "answer", "copy_in", "shaped", "compiled",
                 "described", "size", "_kind", "columns", "last")

    def __init__(self, text: str, oids: list[int], params: int, answer=None):
        # a type OID a parameter (0: unspecified)
        self.text, self.params = text, params
        self.oids = oids[:params] + [0] * (params - len(oids))
        self.size = len(text)     # counted against MAX_KEPT_BYTES
        self.answer = answer      # the catalog's, for a driver's catalog query
        self.copy_in = _copy_in_of(text) is not None
        # a statement without parameters as its shape and literals, found at its
        # first run and kept (pgbench -M prepared sends its literals so): its
        # executions scan no text
        self.shaped = None
        self.compiled = None          # its compile_text, kept from its first run
        self.described: dict = {}     # _describe's answers, by columns and formats
        self._kind = _UNKNOWN
        # the (names, type OIDs) of the columns its Describe announced (None: not
        # described; an OID None: a column of no type, text to the client): its
        # executions' rows are sent as those types
        self.columns = None
        # its last execution's columns as described (_Last): an execution whose
        # result has that shape again sends its rows so without describing them anew
        self.last = None

    def kind(self) -> str | None:
        """Its statement's kind (sql's Compiled.kind; None: an empty one), found once:
        every Execute asks whether it writes."""
        if self._kind is _UNKNOWN:
            self._kind = _kind(self.text)
        return self._kind

    def run(self, session, params) -> list:
        if self.answer is not None:
            return self.answer.run(params, session)
        if not params:
            if self.shaped is None:
                self.shaped = shaped(self.text)
            if self.shaped is not None:
                return list(run_shaped(session, self.shaped))
        if self.compiled is None:
            self.compiled = compile_text(self.text)
        return run_compiled(session, self.compiled, params)


class Portal:
    __slots__ = ("stmt", "params", "formats", "result", "columns", "encoders", "fixed",
                 "sent", "size", "error")

    def __init__(self, stmt: Prepared, params: list, formats: list[int], size: int):
        self.stmt, self.params, self.formats = stmt, params, formats
        self.size = size + stmt.size    # its Bind's bytes; it keeps its statement alive
        self.result = None        # the SqlResult, once run (Execute, or Describe of a SELECT)
        self.columns = self.encoders = self.fixed = None
        self.sent = 0             # rows sent so far (Execute with a row limit)
        # the error its run raised: the portal is not run again (a Describe settled
        # after it answers NoData, an Execute after it this error)
        self.error: E.VarveError | None = None


class Connection:
    def __init__(self, server, sock: socket.socket):
        self.server = server
        self.sock = sock
        self.reader = Reader(sock, server.max_message)
        self.pid = server.next_pid()
        self.secret = secrets.randbits(31)
        self.session = None
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.kept_bytes = 0        # the sizes of statements and portals kept
        # a Describe of a portal not yet run, and its answer's index in the answers:
        # filled after the Execute that follows it, else without running a write
        self.pending: Portal | None = None
        self.pending_at = 0
        # the connection's statements run under one token, cleared as each begins:
        # a cancel request stops the statement running when it comes (none: no-op)
        self.token = CancelToken()
        self.skipping = False      # an extended-protocol error: skip to Sync
        # since when it has waited for the client inside a transaction (None: not
        # waiting, or no transaction open): the server ends it past its timeout
        self.idle_since: float | None = None

    # ---- the conversation (on the connection's thread) ---------------------------

    def run(self) -> None:
        """Start-up, then the conversation; the server hangs up a start-up that
        outlives its deadline (PgServer.startup_timeout)."""
        try:
            if self._startup():
                with running(self.token):
                    self._serve()
        except (ConnectionError, OSError):
            pass                                  # the client went away (or timed out)
        except ProtocolViolation as e:
            self._fatal("08P01", str(e))
        except AuthFailed as e:
            self._fatal("28P01", str(e))
        except Exception:                         # a bug: this connection only
            log.exception("pgwire connection %d failed", self.pid)
            self._fatal("XX000", "internal error; see the server's log")
        finally:
            self.server.unregister(self)
            s, self.session = self.session, None
            if s is not None:
                s.close()                         # rolls an open transaction back
            try:
                self.sock.close()
            except OSError:
                pass

    def _startup(self) -> bool:
        while True:
            code, body = self.reader.startup()
            if code == M.SSL_REQUEST:
                ctx = self.server.ssl_context
                if self.reader.pending():   # bytes sent before the handshake: refused
                    raise ProtocolViolation("received unencrypted data after SSL request")
                self.sock.sendall(b"S" if ctx is not None else b"N")
                if ctx is not None:     # the handshake on self.sock: hang_up reaches it
                    self.sock = ctx.wrap_socket(self.sock, server_side=True,
                                                do_handshake_on_connect=False)
                    self.reader = Reader(self.sock)
                    self.sock.do_handshake()
                continue
            if code == M.GSS_REQUEST:
                self.sock.sendall(b"N")
                continue
            if code == M.CANCEL_REQUEST:
                b = Body(body)
                self.server.cancel(b.int32(), b.int32())
                return False
            if code != M.PROTOCOL_3:
                self._fatal("0A000", f"unsupported frontend protocol {code >> 16}."
                                     f"{code & 0xFFFF}: server supports 3.0")
                return False
            params = M.startup_params(body)
            break
        if self.server.verifier is not None:
            self._authenticate()
        if not self.server.register(self):
            self._fatal("53300", "sorry, too many clients already")
            return False
        self.session = self.server.db.session(server_files=False)
        self.session.deallocate = self._deallocate
        user = params.get("user", "varvedb")
        out = [M.auth(0)]
        for name, value in (("server_version", REPORTED["server_version"]),
                            ("server_encoding", "UTF8"),
                            ("client_encoding", "UTF8"), ("DateStyle", "ISO, MDY"),
                            ("TimeZone", "UTC"), ("integer_datetimes", "on"),
                            ("standard_conforming_strings", "on"),
                            ("IntervalStyle", "postgres"), ("is_superuser", "on"),
                            ("session_authorization", user),
                            ("application_name", params.get("application_name", ""))):
            out.append(M.parameter_status(name, value))
        out += [M.backend_key(self.pid, self.secret), M.ready(b"I")]
        self.sock.sendall(b"".join(out))
        return True

    def _authenticate(self) -> None:
        self.sock.sendall(M.auth(10, M.cstr(MECHANISM) + b"\0"))
        kind, body = self.reader.message(M.MAX_STARTUP)
        if kind != b"p":
            raise ProtocolViolation("expected a SASL response")
        b = Body(body)
        if b.cstr() != MECHANISM:
            raise AuthFailed(f"only {MECHANISM} authentication is supported")
        n = b.int32()
        exchange = Exchange(self.server.verifier)
        first = exchange.first(b.take(n).decode(errors="replace") if n >= 0 else "")
        self.sock.sendall(M.auth(11, first.encode()))
        kind, body = self.reader.message(M.MAX_STARTUP)
        if kind != b"p":
            raise ProtocolViolation("expected a SASL response")
        self.sock.sendall(M.auth(12, exchange.final(body.decode(errors="replace")).encode()))

    def _serve(self) -> None:
        out: list[bytes] = []          # the extended protocol's answers, up to Sync/Flush
        message = self.reader.message
        while True:
            s = self.session
            if s is not None and s.in_transaction and not self.reader.has_message():
                self.idle_since = time.monotonic()
                kind, body = message()
                self.idle_since = None
            else:
                kind, body = message()
            if kind == b"B" and body[:1] == b"\0" and not self.skipping \
                    and self.reader.skip(_EXECUTION):     # the unnamed portal
                self._execution(body, out)
                self.sock.sendall(b"".join(out))
                out = []
                continue
            if kind == b"X":
                return
            if self.pending is not None and kind != b"E":
                self._settle(out)
            step = _EXTENDED.get(kind)
            if step is not None:        # Parse, Bind, Describe, Execute, Close
                if self.skipping:
                    continue
                try:
                    # (an Execute's rows go into `out` as they are encoded: _stream)
                    got = step(self, Body(body)) if kind != b"E" else \
                        self.execute(Body(body), out)
                except E.VarveError as e:
                    self.skipping = True
                    got = self._failed(e)
                if type(got) is list:
                    out += got
                else:
                    out.append(got)
                if kind == b"D" and self.pending is not None:
                    self.pending_at = len(out) - 1
                elif kind == b"E" and self.pending is not None:
                    self._settle(out)
                # a long pipeline: its answers so far (a pending Describe waits
                # for the next message)
                if len(out) >= FLUSH_AT and self.pending is None:
                    self._send(out)
                    out = []
            elif kind == b"S":
                self._end_implicit(out, self.skipping)
                self.skipping = False
                out.append(self._ready())
                self.sock.sendall(b"".join(out))
                out = []
            elif kind == b"Q":
                self._end_implicit(out, self.skipping)
                self.skipping = False
                b = Body(body)
                text = b.cstr()
                b.end()
                self._send(out)         # (before a COPY's CopyInResponse, or rows streamed)
                out = []
                self._simple(text, out)
                out.append(self._ready())
                self._send(out)
                out = []
            elif kind == b"H":
                self._send(out)
                out = []
            elif kind in (b"d", b"c", b"f"):
                continue                # copy messages outside a copy: ignored
            else:
                raise ProtocolViolation(f"invalid frontend message type {kind[0]}")

    def _send(self, chunks: list[bytes]) -> None:
        if chunks:
            self.sock.sendall(b"".join(chunks))

    def _ready(self) -> bytes:
        s = self.session
        if s is None or not s.in_transaction:
            return M.ready(b"I")
        return M.ready(b"E" if s.sql_failed else b"T")

    def _fatal(self, sqlstate: str, message: str) -> None:
        try:
            self.sock.sendall(M.error({"S": "FATAL", "V": "FATAL", "C": sqlstate,
                                       "M": message}))
        except OSError:
            pass

    def cancel(self) -> None:
        """From another thread: stop the running statement at its next check."""
        self.token.cancel("canceling statement due to user request")

    def expire_idle(self) -> None:
        """From the listener's thread: the session sat idle in a transaction past the
        server's timeout; tell the client (without waiting on it) and hang up (the
        connection's thread then rolls the transaction back)."""
        try:
            self.sock.send(M.error({"S": "FATAL", "V": "FATAL", "C": "25P03",
                                    "M": "terminating connection due to "
                                         "idle-in-transaction timeout"}),
                           socket.MSG_DONTWAIT)
        except OSError:
            pass
        self.hang_up()

    def hang_up(self) -> None:
        """From another thread (the server stopping): end the conversation; the
        connection's thread finds its socket shut and closes its session."""
        self.cancel()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- the simple query protocol ------------------------------------------------

    def _simple(self, text: str, out: list[bytes]) -> None:
        """A simple query's answers, into `out` (a large result's rows sent as they
        are encoded: _stream)."""
        impl = _copy_in_of(text)
        copy = CopyIn(self.reader, self) if impl is not None else None
        if copy is not None:
            self.sock.sendall(M.copy_response(b"G", 0, impl.format == "binary"))
        self.token.reason = None
        self._simple_run(text, copy, out)
        if copy is not None:
            copy.drain()        # a statement that failed early: the rest of its data

    def _simple_run(self, text: str, copy_data, out: list[bytes]) -> None:
        ran = False
        answer = catalog.answer_for(text)
        try:
            for result in (answer.run([], self.session) if answer is not None
                           else run_each(self.session, text, copy_data=copy_data)):
                ran = True
                self._render(result, out)
        except E.VarveError as e:
            out.append(_error(e))
            self.skipping = False
            return
        if not ran:
            out.append(M.EMPTY_QUERY)

    def _render(self, result, out: list[bytes]) -> None:
        """A simple query's statement: its rows in text, then its command tag."""
        if result.copy_data is not None:
            out += _copy_out(result)
            return
        if not result.columns:
            out += _tag(result)
            return
        head, encoders, _ = _describe(result, [])
        out.append(head)
        self._stream(out, result.rows, 0, len(result.rows), encoders, None)
        out += _tag(result)

    def _stream(self, out: list[bytes], rows: list, start: int, end: int, encoders,
                fixed) -> None:
        """DataRows of rows[start:end] into `out`. More rows than one write's
        (ROWS_PER_WRITE) are sent as they are encoded, a write at a time after the
        answers before them, so that the server holds the bytes of one write, not
        of the whole result and their joined copy — but where a Describe's answer
        is still to be settled among them (its place in `out` held), as before."""
        if end - start <= ROWS_PER_WRITE or self.pending is not None:
            out += _data_rows(rows, start, end, encoders, fixed)
            return
        send = self.sock.sendall
        for at in range(start, end, ROWS_PER_WRITE):
            out += _data_rows(rows, at, min(end, at + ROWS_PER_WRITE), encoders, fixed)
            send(b"".join(out))
            out.clear()

    # ---- the extended query protocol ------------------------------------------------

    def parse(self, b: Body) -> bytes:
        name, text = b.cstr(), b.cstr()
        oids = list(b.int32s())
        b.end()
        if name and name in self.statements:
            raise E.SqlError("42P05", f'prepared statement "{name}" already exists')
        answer = catalog.answer_for(text)
        if answer is not None:
            given = answer.param_oids
            oids = [o or (given[i] if i < len(given) else 0) for i, o in enumerate(oids)] \
                + list(given[len(oids):])
        elif len(compile_text(text)) > 1:          # a syntax error answers here
            raise E.SqlError("42601", "cannot insert multiple commands into a prepared "
                                      "statement")
        named = _params_named(text)
        n = max(max(named, default=0), len(oids))
        if n > MAX_PARAMS:      # a Bind could not supply it (PostgreSQL's answer too)
            raise E.SqlError("42P02", f"there is no parameter ${n}")
        if answer is None and (len(oids) < n or 0 in oids):
            # one the text never names and the client left untyped has no type at all
            untyped = [i for i in range(1, n + 1) if i not in named
                       and (i > len(oids) or not oids[i - 1])]
            if untyped:
                raise E.SqlError("42P18", "could not determine data type of parameter "
                                          f"${untyped[0]}")
            oids = self._typed(text, oids, n)
        self._keep(self.statements, name, Prepared(text, oids, n, answer),
                   "prepared statement")
        return M.PARSE_COMPLETE

    def _typed(self, text: str, oids: list[int], n: int) -> list[int]:
        """The client's parameter types, each it left unspecified typed by what the
        statement does with it where it says (sql/params.py), else unknown."""
        found = param_types(self.session.engine, text)
        out = []
        for i in range(n):
            oid = oids[i] if i < len(oids) else 0
            if not oid and i + 1 in found:
                t = to_regtype(found[i + 1])
                oid = t.oid if t is not None else 0
            out.append(oid)
        return out

    def bind(self, b: Body) -> bytes:
        self._bind(b.data)
        return M.BIND_COMPLETE

    def _bind(self, data: bytes) -> Portal:
        """A Bind's portal, kept under its name (_execution's, without a Body)."""
        portal, name, formats, values, result_formats = M.bind_fields(data)
        stmt = self._statement(name)
        n = len(values)
        if n != stmt.params:
            raise E.SqlError("08P01", f"bind message supplies {n} parameters, but "
                                      f"prepared statement \"{name}\" requires {stmt.params}")
        if len(formats) != n:
            if len(formats) > 1:
                raise ProtocolViolation("bind message has a wrong number of parameter formats")
            formats = (formats[0] if formats else 0,) * n
        params = [decode_param(v, oid, code == 1)
                  for v, oid, code in zip(values, stmt.oids, formats)]
        if portal and portal in self.portals:
            raise E.SqlError("42P03", f'cursor "{portal}" already exists')
        got = Portal(stmt, params, result_formats, len(data))
        self._keep(self.portals, portal, got, "portal")
        return got

    def describe(self, b: Body) -> bytes:
        what, name = b.take(1), b.cstr()
        b.end()
        if what == b"S":
            stmt = self._statement(name)
            oids = [oid or TEXT for oid in stmt.oids]
            return M.parameter_description(oids) + self._statement_rows(stmt)
        if what != b"P":
            raise ProtocolViolation("Describe names neither a statement nor a portal")
        portal = self._portal(name)
        if portal.result is not None:
            return portal.columns if portal.columns is not None else M.NO_DATA
        self.pending = portal           # answered by _settle; b"" holds its place
        return b""

    def _settle(self, out: list[bytes]) -> None:
        """The pending Describe's answer: the columns of the Execute that followed
        it, else (a Describe never runs a write, as in PostgreSQL) a write's
        RETURNING columns, the columns of a SELECT run with the portal's parameters
        (kept for its Execute), or NoData for any other statement."""
        portal, at = self.pending, self.pending_at
        self.pending = None
        if portal.result is None:
            stmt = portal.stmt
            if portal.error is None and stmt.answer is None and stmt.kind() == "write":
                got = self._returning(stmt, portal.params)     # as PostgreSQL: not run
                out[at] = _describe(got, portal.formats)[0] if got is not None and \
                    got.columns else M.NO_DATA
                return
            if portal.error is not None or stmt.answer is None and stmt.kind() != "select":
                out[at] = M.NO_DATA
                return
            try:
                self._execute(portal)
            except E.VarveError:        # its Execute answers the error
                out[at] = M.NO_DATA
                return
        out[at] = portal.columns if portal.columns is not None else M.NO_DATA

    def _execution(self, bind: bytes, out: list[bytes]) -> None:
        """Bind, then Describe and Execute of the unnamed portal and Sync (how libpq
        sends a prepared statement's execution, PQsendQueryPrepared): answered into
        `out` as those messages one by one are, without reading and dispatching
        each."""
        if self.pending is not None:
            self._settle(out)
        failed = False
        try:
            portal = self._bind(bind)
            out += _BOUND                # BindComplete; the Describe's answer, settled below
            self.pending, self.pending_at = portal, len(out) - 1
            self._run(portal, 0, out)    # (which settles the Describe once it ran)
        except E.VarveError as e:
            out.append(self._failed(e))
            failed = True
        if self.pending is not None:
            self._settle(out)
        self._end_implicit(out, failed)
        out.append(self._ready())

    def _failed(self, e: E.VarveError) -> bytes:
        """An extended-protocol message's error: its answer; in a transaction block
        (BEGIN's) the block is failed too, whichever message failed (a Parse's
        syntax error, a Bind's), as PostgreSQL fails it."""
        if self.session is not None:
            fail_block(self.session)
        return _error(e)

    def _end_implicit(self, out: list[bytes], failed: bool) -> None:
        """At a Sync: the implicit transaction's writes commit together, or, after an
        error in the pipeline (its answers skipped to here), none of them does."""
        if self.session is not None:
            try:
                end_implicit(self.session, failed)
            except E.VarveError as e:
                out.append(_error(e))

    def execute(self, b: Body, out: list[bytes]) -> list[bytes]:
        name, limit = b.cstr(), b.int32()
        b.end()
        self._run(self._portal(name), limit, out)
        return []

    def _run(self, portal: Portal, limit: int, out: list[bytes]) -> None:
        """Execute's answer into `out`: the portal's rows (up to `limit`, 0: all) and
        its tag. A Describe of this portal waiting for it (_settle's first case) is
        answered its columns once it ran, before its rows (which may be sent as
        they are encoded: _stream)."""
        self._execute(portal)
        if self.pending is portal:
            self.pending = None
            out[self.pending_at] = portal.columns if portal.columns is not None \
                else M.NO_DATA
        result = portal.result
        if result.copy_data is not None:
            out += _copy_out(result)
            return
        rows = result.rows
        end = len(rows) if limit <= 0 else min(len(rows), portal.sent + limit)
        if end - portal.sent <= ROWS_PER_WRITE:     # (a query's few rows: one write)
            out += _data_rows(rows, portal.sent, end, portal.encoders, portal.fixed)
        else:
            self._stream(out, rows, portal.sent, end, portal.encoders, portal.fixed)
        portal.sent = end
        if result.columns and end < len(rows):
            out.append(M.PORTAL_SUSPENDED)
        else:
            out += _tag(result)

    def close(self, b: Body) -> bytes:
        what, name = b.take(1), b.cstr()
        b.end()
        if what == b"S":
            self._drop(self.statements, name)
        elif what == b"P":
            self._drop(self.portals, name)
        else:
            raise ProtocolViolation("Close names neither a statement nor a portal")
        return M.CLOSE_COMPLETE

    def _keep(self, kept: dict, name: str, item, what: str) -> None:
        """Keep a statement or portal under its name; a named one past MAX_KEPT or
        MAX_KEPT_BYTES is refused (the unnamed one replaces itself, so it always
        fits)."""
        old = kept.get(name)
        size = self.kept_bytes + item.size - (old.size if old is not None else 0)
        if name and (len(kept) - ("" in kept) >= MAX_KEPT or size > MAX_KEPT_BYTES):
            raise E.SqlError("54000", f"too many {what}s kept by this connection (at most "
                                      f"{MAX_KEPT}, {MAX_KEPT_BYTES >> 20} MB in all); "
                                      f"close some")
        kept[name] = item
        self.kept_bytes = size

    def _deallocate(self, name: str | None) -> bool:
        """SQL's DEALLOCATE: the named statement (False: none of that name), or every
        named one (the unnamed statement is the protocol's own, as in PostgreSQL)."""
        if name is not None:
            if name not in self.statements:
                return False
            self._drop(self.statements, name)
            return True
        for n in [n for n in self.statements if n]:
            self._drop(self.statements, n)
        return True

    def _drop(self, kept: dict, name: str) -> None:
        item = kept.pop(name, None)
        if item is not None:
            self.kept_bytes -= item.size

    def _statement(self, name: str) -> Prepared:
        stmt = self.statements.get(name)
        if stmt is None:
            raise E.SqlError("26000", f'prepared statement "{name}" does not exist')
        return stmt

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise E.SqlError("34000", f'portal "{name}" does not exist')
        return portal

    def _execute(self, portal: Portal) -> None:
        if portal.result is not None:
            return
        s = self.session
        # it ran and failed: the same answer, not a rerun (in a transaction failed
        # since, the run answers 25P02, running nothing)
        if portal.error is not None and not (s.in_transaction and s.sql_failed):
            raise portal.error
        if portal.stmt.copy_in:
            raise E.SqlError("0A000", "COPY FROM STDIN runs in the simple query protocol "
                                      "(a Query message), not the extended one")
        self.token.reason = None        # a statement begins: an older cancel is spent
        stmt = portal.stmt
        # the implicit transaction, up to the Sync (DDL is transactional too): SQL's
        # BEGIN, COMMIT and ROLLBACK in the pipeline act on it, as on PostgreSQL's
        # an Execute ran before this one in it: PostgreSQL's implicit block, which
        # VACUUM and the like refuse (25001, sql's Context.outside_block)
        s.sql_pipelined = s.sql_implicit
        implicit(s, stmt.answer is None and stmt.kind() in ("write", "ddl"))
        try:
            results = stmt.run(s, portal.params)
            result = results[-1] if results else None
            if result is None:
                raise E.SqlError("42601", "the statement is empty")
            if result.columns:
                last = stmt.last
                if last is not None and last.fits(result, portal.formats, stmt.columns):
                    portal.columns, portal.encoders, portal.fixed = last.described
                else:
                    announced = None
                    if stmt.columns is not None:
                        announced = _announced(stmt.columns, result)
                    got = _describe(result, portal.formats, stmt.described, announced)
                    portal.columns, portal.encoders, portal.fixed = got
                    stmt.last = _Last.of(result, portal.formats, stmt.columns, announced, got)
            elif stmt.columns is not None:
                _announced(stmt.columns, result)
        except E.VarveError as e:
            portal.error = e
            raise
        finally:
            s.sql_pipelined = False
        portal.result = result

    def _statement_rows(self, stmt: Prepared) -> bytes:
        """A statement's RowDescription before it runs: a SELECT's columns as
        describe_read finds them (planned with NULL parameters, not run, failing
        no block; what PostgreSQL's Parse refuses is answered as its error), a
        write by its RETURNING's columns (it is not run), any other statement as
        returning no rows."""
        if stmt.answer is None and stmt.kind() == "write":
            got = self._returning(stmt, [None] * stmt.params)
            if got is None:
                return M.NO_DATA
            # its executions' rows are checked against these (_announced: DDL since)
            stmt.columns = _announcing(got)
            return M.NO_DATA if not got.columns else _described(got, stmt.columns)
        if stmt.answer is None and stmt.kind() != "select":
            return M.NO_DATA
        self.token.reason = None
        if stmt.answer is None:
            if stmt.compiled is None:
                stmt.compiled = compile_text(stmt.text)
            got = describe_read(self.session, stmt.compiled, [None] * stmt.params)
            results = [] if got is None else [got]
        else:
            try:        # a catalog answer given None gives its columns alone
                results = stmt.answer.run(None, self.session)
            except E.VarveError:
                return M.NO_DATA
        if not results or not results[-1].columns:
            stmt.columns = ((), ())
            return M.NO_DATA
        stmt.columns = _announcing(results[-1])
        return _described(results[-1], stmt.columns)

    def _returning(self, stmt: Prepared, params):
        """A write's RETURNING columns as a result without rows (sql.describe_write:
        the write is not run); a result of no columns where it returns none; None
        where they cannot be told (its error is its Execute's to answer)."""
        try:
            if stmt.compiled is None:
                stmt.compiled = compile_text(stmt.text)
            got = describe_write(self.session, stmt.compiled, params)
        except E.VarveError:
            return None
        return got if got is not None else SqlResult([], [], "")


# after a Bind: Describe and Execute of the unnamed portal, then Sync (libpq's
# PQsendQueryPrepared; Connection._execution)
_EXECUTION = M.message(b"D", b"P\0") + M.message(b"E", b"\0" + bytes(4)) + M.message(b"S")
_BOUND = (M.BIND_COMPLETE, b"")
_EXTENDED = {b"P": Connection.parse, b"B": Connection.bind, b"D": Connection.describe,
             b"E": Connection.execute, b"C": Connection.close}


def _format(formats: list[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i]


def _describe(result, formats: list[int], kept: dict | None = None,
              oids: tuple | None = None) -> tuple:
    """(RowDescription, one encoder a column, FixedRows or None) of a result;
    `kept`: a prepared statement's, which its executions find them in (their
    columns the same); `oids`: the column types its statement's Describe announced
    (_announced), else its own values' (_oids)."""
    if oids is None:
        oids = _oids(result)
    key = (tuple(result.columns), tuple(result.kinds), oids, tuple(formats))
    got = kept.get(key) if kept is not None else None
    if got is not None:
        return got
    cols, encoders, codes = [], [], []
    for i, (name, kind) in enumerate(zip(result.columns, result.kinds)):
        fmt = _format(formats, i)
        cols.append((name, oids[i], fmt))
        # a column announced as text sends any value as its text form (exact)
        encoders.append(encoder(oids[i], kind, fmt == 1 and oids[i] != TEXT))
        codes.append(fixed_code(oids[i], fmt == 1))
    got = (M.row_description(cols), encoders,
           M.FixedRows(codes) if None not in codes else None)
    if kept is not None:
        if len(kept) >= KEPT_DESCRIPTIONS:
            kept.clear()
        kept[key] = got
    return got


class _Last:
    """A prepared statement's last execution's columns as described (_describe's
    answer) and what that answer followed from: its result's column names, kinds
    and elements, the Bind's result formats and the columns its Describe announced.
    An execution whose result has them again gets the same answer — where no
    column's type depends on its values but for an int column's (numeric past
    int64), which `fits` looks at (column_oid); a vector or array column of no
    declared type is described anew each time (its values' type)."""
    __slots__ = ("names", "kinds", "elements", "formats", "announced", "ints", "described")

    @classmethod
    def of(cls, result, formats, columns, announced, described) -> "_Last | None":
        """The record of a result described as `described` (None: none can be kept —
        a column whose type its values tell, or one sent as other than its own)."""
        for kind, element in zip(result.kinds, result.elements):
            if element is None and kind in ("vector", "array"):
                return None
        if columns is not None and announced != columns[1]:
            return None         # an untyped column sent as text, or NULLs as announced
        last = cls()
        last.names, last.kinds, last.elements = result.columns, result.kinds, result.elements
        last.formats, last.announced, last.described = formats, columns, described
        last.ints = tuple([i for i, kind in enumerate(result.kinds) if kind == "int"])
        return last

    def fits(self, result, formats, columns) -> bool:
        """Is `result` (Bound with `formats`, its statement announcing `columns`)
        described as this record's was?"""
        if formats != self.formats or columns is not self.announced \
                or result.columns != self.names or result.kinds != self.kinds \
                or result.elements != self.elements:
            return False
        rows = result.rows
        for i in self.ints:
            if column_oid("int", rows, i) != INT8:
                return False
        return True


def _oids(result) -> tuple:
    """The type OID of each of a result's columns, by its kind and values."""
    rows = result.rows
    return tuple([column_oid(kind, rows, i, element)
                  for i, (kind, element) in enumerate(zip(result.kinds, result.elements))])


def _announcing(result) -> tuple:
    """What a statement's Describe announces of a result's columns, kept to send
    its executions' rows by (_announced): (names, type OIDs), None for a column of
    no type (text to the client) — an array column of no declared element type
    among no rows too (a Describe's: its elements' type is its values')."""
    untold = not result.rows
    return (tuple(result.columns), tuple(
        [None if kind is None or untold and kind == "array" and element is None else oid
         for kind, element, oid in zip(result.kinds, result.elements, _oids(result))]))


def _described(result, columns: tuple) -> bytes:
    """A statement Describe's RowDescription: the columns _announcing kept
    (`columns`), which its executions' rows are sent as (a column of no type as
    text), not the types of the result's own values."""
    return _describe(result, [], None, tuple([TEXT if a is None else a
                                              for a in columns[1]]))[0]


def _announced(columns: tuple, result) -> tuple:
    """The column types an execution's rows are sent as: those its statement's
    Describe announced (`columns`: names, OIDs), which the client decodes them by.
    A column announced as of no type (None: text) takes any value, as its text
    form; a result of other names or of another type in a column — DDL since, or
    a type the NULLs of the Describe did not show — is refused, as PostgreSQL
    refuses a plan whose result type changed (drivers then prepare the statement
    again), rather than sent as bytes the client would read as the announced type."""
    names, announced = columns
    oids = _oids(result)
    if tuple(result.columns) != names or oids != announced and any(
            a is not None and a != got and not _untyped(result, i)
            for i, (a, got) in enumerate(zip(announced, oids))):
        e = E.SqlError("0A000", "cached plan must not change result type")
        e.routine = "RevalidateCachedQuery"     # PostgreSQL's: asyncpg's cue
        raise e
    if oids == announced:       # (no None among them: the common case, no new tuple)
        return oids
    return tuple([TEXT if a is None else a for a in announced])


def _untyped(result, i: int) -> bool:
    """Does column `i` fit any type: of no kind, or arrays of no element type, its
    values each NULL or an array without elements?"""
    kind = result.kinds[i]
    if kind is not None and (kind != "array" or result.elements[i] is not None):
        return False
    return all(v is None or type(v) is list and not v
               for v in map(itemgetter(i), result.rows))


def _data_rows(rows: list, start: int, end: int, encoders, fixed=None) -> list[bytes]:
    def slow(row):
        return M.data_row([enc(v) for enc, v in zip(encoders, row)])
    if fixed is not None and start == 0 and end == len(rows) <= ROWS_PER_WRITE:
        return [fixed.rows(rows, slow)]      # a query's few rows: no slice
    out = []
    for at in range(start, end, ROWS_PER_WRITE):
        chunk = rows[at:min(end, at + ROWS_PER_WRITE)]
        out.append(fixed.rows(chunk, slow) if fixed is not None
                   else b"".join([slow(row) for row in chunk]))
    return out


def _tag(result) -> list[bytes]:
    """A statement's CommandComplete, after its WARNINGs and NOTICEs where it has
    them (SqlResult.notice)."""
    tag = M.command_complete(result.status)
    notice = result.notice
    if notice is None:
        return [tag]
    return [*_notices(notice), tag]


def _notices(notice) -> list[bytes]:
    """A NoticeResponse for each (SQLSTATE, message): a NOTICE or a WARNING."""
    out = []
    for sqlstate, message in notice:
        severity = "NOTICE" if sqlstate in _NOTICES else "WARNING"
        out.append(M.error({"S": severity, "V": severity, "C": sqlstate, "M": message},
                           notice=True))
    return out


# the SQLSTATEs PostgreSQL reports as a NOTICE (any other a statement's notice has:
# a WARNING): DROP ... IF EXISTS of none, an identifier cut to 63 bytes
_NOTICES = ("00000", "42622")


def _kind(text: str) -> str | None:
    """A statement's kind (sql.Compiled.kind), None for an empty one."""
    compiled = compile_text(text)
    return compiled[0].kind if compiled else None


def _params_named(text: str) -> set[int]:
    """The $n the statement names (pglast's scanner: not inside strings or
    comments; its offsets are characters', not bytes)."""
    try:
        tokens = scan(text)
    except ParseError:
        return set()
    named = set()
    for t in tokens:
        if t.name == "PARAM":
            try:
                named.add(int(text[t.start + 1:t.end + 1]))
            except ValueError:
                pass
    return named


def _error(e: E.VarveError) -> bytes:
    fields = {"S": "ERROR", "V": "ERROR", "C": getattr(e, "sqlstate", "XX000") or "XX000",
              "M": str(e)}
    position = getattr(e, "position", None)
    if position:
        fields["P"] = str(position)
    for code, name in (("D", "detail"), ("H", "hint"), ("R", "routine")):
        got = getattr(e, name, None)
        if got:
            fields[code] = got
    notices = getattr(e, "notices", None)      # (its text's parsing's: sent before it)
    return M.error(fields) if not notices else b"".join(
        [*_notices(notices), M.error(fields)])


def _copy_out(result) -> list[bytes]:
    """COPY ... TO STDOUT: its NOTICEs, CopyOutResponse, its data in CopyData
    messages (one a row, as PostgreSQL sends them: psycopg's copy.rows() reads a
    row from each), CopyDone."""
    data, ends = result.copy_data, result.copy_ends
    return [*_notices(result.notice or ()),     # (its parsing's: before the copy)
            M.copy_response(b"H", len(result.columns), data.startswith(PGCOPY)),
            *(M.copy_data(data[at:end]) for at, end in zip((0, *ends), ends)),
            M.COPY_DONE, M.command_complete(result.status)]


def _copy_in_of(text: str):
    """The statement if the text is one COPY ... FROM STDIN, else None. (A cheap look
    first: a simple query is compiled once more only where it starts with COPY.)"""
    if text.lstrip()[:4].lower() != "copy":
        return None
    try:
        compiled = compile_text(text)
    except E.VarveError:
        return None
    impl = compiled[0].impl if len(compiled) == 1 else None
    if getattr(impl, "is_from", False) and impl.filename is None:
        return impl
    return None
