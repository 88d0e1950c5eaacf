"""Starting the server: checks before binding, uvicorn, and a clean stop.

Uvicorn (with uvloop and httptools where installed, httptools' protocol writing
each answer in one send() and answering a short single search itself, with no
ASGI call: corked.py) runs the Starlette app: on
this kind of machine it answered 1.4x the requests of granian's ASGI mode at 8
clients and 2x uvicorn's pure-Python h11/asyncio (see the closing note of the
server issue). On SIGTERM or SIGINT uvicorn stops accepting connections and
finishes the requests in flight; then the app's shutdown checkpoints and
closes the file.
"""
from __future__ import annotations

import asyncio
import importlib.util
import ipaddress
import logging
import sys

import uvicorn

from ..errors import OptionError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_options(host: str, token: str | None, tls_cert: str | None,
                  tls_key: str | None) -> None:
    """Refuse, before anything starts, options that would serve unsafely or not at all."""
    if token is not None and not token.strip():
        raise OptionError("the token is empty")
    if not is_loopback(host) and not token:
        raise OptionError(f"refusing to serve on {host}, which is not a loopback address, "
                          "without a token (--token-file, VARVEDB_TOKEN or --token)")
    if (tls_cert is None) != (tls_key is None):
        raise OptionError("TLS needs both --tls-cert and --tls-key")


def warm_kernels() -> None:
    """Compile (or load) every kernel now, so that no request waits on numba."""
    from ..warm import warm
    report = warm(progress=sys.stderr.isatty(), echo=lambda line: print(
        f"varvedb: {line}", file=sys.stderr, flush=True))
    if report.compiled or report.compiled_here:
        print(f"varvedb: {report.summary()}", file=sys.stderr, flush=True)


def serve(path: str, host: str = "127.0.0.1", port: int = 8080, token: str | None = None,
          tls_cert: str | None = None, tls_key: str | None = None,
          max_body: int = 256 << 20, max_results: int = 10_000, timeout: float = 30.0,
          threads: int = 8, durability: str = "commit", log_level: str = "warning",
          warm: bool = True, transaction_idle_timeout: float = 60.0,
          pg_port: int | None = None, replica_of: str | None = None,
          leader_token: str | None = None) -> None:
    """Serve the file at `path` until SIGTERM/SIGINT (blocks). With `warm`, every
    kernel is compiled (or loaded) before the file opens and the port is bound
    (varvedb/warm.py), so no request waits on numba. With `pg_port`, the
    PostgreSQL protocol is served on that port too (varvedb/pgwire), in the same
    event loop, over the same open file. (`serve --workers N`: workers.py.)"""
    import varvedb as vv
    from .app import build_app

    check_options(host, token, tls_cert, tls_key)
    if replica_of is not None and pg_port is not None:
        raise OptionError("a read replica (--replica-of) serves HTTP only, not --pg")
    if warm:
        warm_kernels()
    replica = None
    if replica_of is None:
        db = vv.connect(path, durability=durability)
    else:     # varvedb/replica.py: seeded if new, then following the leader
        from ..replica import Replica
        replica = Replica(replica_of, path, token=leader_token, durability=durability)
        db = replica.open()
        replica.start()
    app = build_app(db, token=token, max_body=max_body, max_results=max_results,
                    timeout=timeout, threads=threads,
                    transaction_idle_timeout=transaction_idle_timeout, replica=replica)
    config = uvicorn_config(app, log_level, host=host, port=port, ssl_certfile=tls_cert,
                     ssl_keyfile=tls_key)
    scheme = "https" if tls_cert else "http"
    where = f"{scheme}://{host}:{port}"
    if pg_port is None:
        server = uvicorn.Server(config)
    else:
        server = with_pg(config, db, token, host, pg_port, tls_cert, tls_key,
                         transaction_idle_timeout, max_body)
        where += f" and postgresql://{host}:{pg_port}"
    if replica_of is not None:
        where += f", a read replica of {replica_of}"
    print(f"varvedb: serving {path} on {where}"
          f"{' (token required)' if token else ''}; SIGTERM or Ctrl-C stops it",
          file=sys.stderr, flush=True)
    server.run()


def uvicorn_config(app, log_level: str, **where) -> uvicorn.Config:
    have = importlib.util.find_spec
    logging.getLogger("varvedb.server").addHandler(logging.StreamHandler(sys.stderr))
    http = "h11"
    if have("httptools"):     # its protocol writing each answer in one send()
        from .corked import CorkedHttpTools, HotHttpTools
        http = HotHttpTools.for_app(app) if hasattr(app, "answer_now") else CorkedHttpTools
    return uvicorn.Config(
        app, log_level=log_level, access_log=False,
        loop="uvloop" if have("uvloop") else "asyncio",
        http=http,
        # no "server: uvicorn" header: a line less to check and write in every answer
        lifespan="on", timeout_keep_alive=75, server_header=False,
        # no X-Forwarded-* rewriting (a middleware's call and a scan of the headers
        # per request): the app reads neither the client's address nor the scheme
        proxy_headers=False, **where)


def with_pg(config, db, token, host: str, pg_port: int, tls_cert, tls_key,
            idle_timeout: float | None, max_body: int | None):
    """HTTP and the PostgreSQL protocol in one server; a pg session's transaction
    idles and its messages are bounded as HTTP's (--transaction-idle-timeout,
    --max-body-mb)."""
    from ..pgwire.server import PgServer
    pg = PgServer(db, token=token, ssl_context=_ssl_context(tls_cert, tls_key),
                  idle_in_transaction_timeout=idle_timeout, max_message=max_body)
    return _WithPg(config, pg, host, pg_port)


def _ssl_context(cert: str | None, key: str | None):
    if cert is None:
        return None
    import ssl
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


class _WithPg(uvicorn.Server):
    """uvicorn's server that also listens for PostgreSQL clients, and ends them
    before the app's shutdown closes the file."""

    def __init__(self, config, pg, host: str, port: int):
        super().__init__(config)
        self.pg, self.pg_host, self.pg_port = pg, host, port

    async def startup(self, sockets=None) -> None:
        try:
            self.pg.start(self.pg_host, self.pg_port)
        except OSError as e:
            print(f"varvedb: cannot listen for PostgreSQL clients on "
                  f"{self.pg_host}:{self.pg_port}: {e.strerror or e}", file=sys.stderr)
            self.should_exit = True
            return
        await super().startup(sockets)

    async def shutdown(self, sockets=None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.pg.stop)
        await super().shutdown(sockets)
