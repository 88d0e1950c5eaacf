"""`varvedb serve --workers N`: N read-worker processes and one writer.

Why processes: one server process is bound by the GIL (~250 µs of Python a
search around a ~60 µs search kernel), so a second core adds little to one
process; N processes each with their own GIL do. Why this layout:

    supervisor (this module's `serve_workers`: no HTTP, no file open)
      ├─ writer    vv.connect(path): the file's one writer, serving HTTP on a
      │            unix socket in a private 0700 folder (and --pg, if given)
      └─ worker×N  vv.connect(path, readonly=True), each listening on a socket
                   of its own bound to the port with SO_REUSEPORT, following
                   the writer's commits; a write is forwarded to the writer

  * SO_REUSEPORT sockets, one a worker, rather than one listening socket they
    all accept on: on a shared socket the worker whose event loop wakes first
    accepts every connection waiting (asyncio and libuv accept in a loop), so
    8 connections opened together all went to one worker, always (measured);
    the kernel spreads connections over SO_REUSEPORT sockets by their
    addresses' hash. The cost: a connection queued on a worker's socket when
    it dies is reset (the client resends a read). The supervisor holds the
    port with a socket bound and never listening (so it takes no connection).
  * Writes are forwarded by the worker (app.WriterLink), not dispatched by a
    front process: a front would add a hop, and a GIL, to every read.
  * The writer learns nothing new; the workers learn of a commit through the
    VersionBoard, 8 bytes in a small shared mmap the writer sets before it
    answers a write: a worker reads it at each request (a memory load, no
    system call) and refreshes its connection when it is ahead. So a read that
    asks for the version a write answered (min_version) finds it on the board
    already, on any worker.

Lifecycle: SIGTERM or SIGINT to the supervisor is passed to the workers first
(each finishes its requests in flight, forwarded writes included), then to
the writer (which checkpoints and closes the file). A child that dies is
started again (a worker, or the writer: the kernel freed its lock); a child
whose parent dies gets SIGTERM (PR_SET_PDEATHSIG), so none is orphaned.
Metrics are summed over the processes (each keeps its counts in a mapped
file of its own in the private folder: metrics.Counts): see docs/server.md.
"""
from __future__ import annotations

import json
import mmap
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

BOARD_BYTES = 8
LISTEN_BACKLOG = 2048
WRITER_SOCKET = "writer.sock"
READY_TIMEOUT = 600.0       # a hang guard: a cold numba cache compiles at first use
CONFIG_VARIABLE = "VARVEDB_SERVE_CHILD"
RESTART_PAUSE = 0.5         # between restarts of a child that keeps dying at once


class VersionBoard:
    """The newest committed version, in 8 bytes of a file every process maps.

    The writer `publish`es after each commit (before its answer goes out); a
    worker `read`s it per request: one aligned 8-byte load of shared memory."""

    def __init__(self, path: str, create: bool = False):
        if create:
            with open(path, "wb") as f:
                f.write(b"\0" * BOARD_BYTES)
        with open(path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), BOARD_BYTES)
        self._cell = np.frombuffer(self._map, np.int64, 1)

    def read(self) -> int:
        return int(self._cell[0])

    def publish(self, version: int) -> None:
        if version > self._cell[0]:
            self._cell[0] = version


class _Child:
    """One child process (the writer or a worker) and how to start it again."""

    def __init__(self, role: str, config: dict, env: dict):
        self.role, self.config, self.env = role, config, env
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.restarts = 0

    def start(self) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            # not `-m varvedb.server.workers`: the package imports this module first
            [sys.executable, "-c", "from varvedb.server.workers import child_main; child_main()"],
            # the environment, not argv: the token stays out of the process list
            env={**self.env, CONFIG_VARIABLE: json.dumps(self.config)},
            # a terminal's Ctrl-C reaches the supervisor alone, which stops them in order
            start_new_session=True)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)


def serve_workers(path: str, workers: int, *, host: str, port: int, token: str | None,
                  tls_cert: str | None, tls_key: str | None, pg_port: int | None,
                  warm: bool = True, durability: str = "commit", log_level: str = "warning",
                  **app_options) -> None:
    """Serve `path` with one writer and `workers` read workers until SIGTERM/SIGINT
    (blocks); see the module's docstring. `app_options`: app.build_app's."""
    from ..errors import OptionError
    from .run import check_options, warm_kernels

    check_options(host, token, tls_cert, tls_key)
    if warm:
        warm_kernels()      # once, here: the children load the kernels from the cache
    app_options.update(durability=durability, log_level=log_level)
    folder = tempfile.mkdtemp(prefix="varvedb-serve-")     # 0700: this user's alone
    try:
        try:
            # bound, never listening: it holds the port (and finds it, for port 0)
            # for the workers' sockets, and takes no connection itself
            held = port_socket(host, port)
        except OSError as e:
            raise OptionError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        port = held.getsockname()[1]
        VersionBoard(os.path.join(folder, "version"), create=True)
        os.mkdir(os.path.join(folder, "metrics"))
        from .metrics import ENV
        env = {**os.environ, ENV: os.path.join(folder, "metrics")}
        common = {"path": path, "folder": folder, "token": token, "parent": os.getpid(),
                  "options": app_options}
        writer = _Child("writer", {**common, "role": "writer", "pg_port": pg_port,
                                   "host": host}, env)
        readers = [_Child(f"worker-{i}", {**common, "role": "worker", "index": i, "host": host,
                                          "port": port, "tls_cert": tls_cert,
                                          "tls_key": tls_key}, env)
                   for i in range(workers)]
        _supervise(writer, readers, folder, f"{host}:{port}", path,
                   token is not None, tls_cert is not None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _supervise(writer: _Child, readers: list[_Child], folder: str, where: str, path: str,
               with_token: bool, tls: bool) -> None:
    stopping = []

    def stop(signum, frame):
        stopping.append(signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        writer.start()
        _wait_for_writer(writer, folder, stopping)
        for r in readers:
            r.start()
        scheme = "https" if tls else "http"
        print(f"varvedb: serving {path} on {scheme}://{where} with {len(readers)} read "
              f"workers and a writer{' (token required)' if with_token else ''}; "
              "SIGTERM or Ctrl-C stops it", file=sys.stderr, flush=True)
        children = [writer, *readers]
        while not stopping:
            for child in children:
                if child.proc.poll() is not None and not stopping:
                    _restart(child, folder)
            time.sleep(0.1)
    finally:
        # the workers first: their requests in flight may be writes the writer runs
        _end(readers)
        _end([writer])
        for s, handler in old.items():
            signal.signal(s, handler)


def _restart(child: _Child, folder: str) -> None:
    print(f"varvedb: {child.role} (pid {child.proc.pid}) ended with "
          f"{child.proc.returncode}; starting it again", file=sys.stderr, flush=True)
    from .metrics import mark_dead
    mark_dead(os.path.join(folder, "metrics"), child.proc.pid)
    if time.monotonic() - child.started < RESTART_PAUSE:
        time.sleep(RESTART_PAUSE)      # a child that dies at start: not a busy loop
    child.restarts += 1
    child.start()


def _wait_for_writer(writer: _Child, folder: str, stopping: list) -> None:
    sock_path = os.path.join(folder, WRITER_SOCKET)
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline and not stopping:
        if writer.proc.poll() is not None:
            raise SystemExit(f"varvedb: the writer exited with {writer.proc.returncode} "
                             "before it served")
        if os.path.exists(sock_path):
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(sock_path)
                    return
                except OSError:
                    pass
        time.sleep(0.02)


def _end(children: list[_Child]) -> None:
    for c in children:
        c.signal(signal.SIGTERM)
    for c in children:
        if c.proc is not None:
            try:
                c.proc.wait(120)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()


# ---- in a child ----------------------------------------------------------------------

def port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) with SO_REUSEPORT: each worker listens on
    one, and the kernel spreads new connections over them."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((host, port))
    return s


def serve_role(config: dict) -> None:
    """A child (run by _Child.start): the writer, serving the file on a unix socket
    in the supervisor's private folder (and --pg), or a read worker, serving it
    read-only on the listening socket the supervisor passed."""
    import uvicorn

    import varvedb as vv
    from ..warm import die_with_parent
    from .app import build_app
    from .run import uvicorn_config, with_pg

    die_with_parent(config["parent"])
    options = dict(config["options"])
    durability, log_level = options.pop("durability"), options.pop("log_level")
    folder = config["folder"]
    board = VersionBoard(os.path.join(folder, "version"))
    writer_socket = os.path.join(folder, WRITER_SOCKET)
    if config["role"] == "writer":
        db = vv.connect(config["path"], durability=durability)
        board.publish(db.engine.visible)
        app = build_app(db, token=config["token"], board=board, **options)
        conf = uvicorn_config(app, log_level, uds=writer_socket)
        pg_port = config.get("pg_port")
        server = uvicorn.Server(conf) if pg_port is None else \
            with_pg(conf, db, config["token"], config["host"], pg_port, None, None,
                    options.get("transaction_idle_timeout"), options.get("max_body"))
        server.run()
        return
    db = vv.connect(config["path"], readonly=True)
    app = build_app(db, token=config["token"], board=board, worker=config["index"],
                    writer_socket=writer_socket, **options)
    conf = uvicorn_config(app, log_level, ssl_certfile=config.get("tls_cert"),
                          ssl_keyfile=config.get("tls_key"))
    listener = port_socket(config["host"], config["port"])
    listener.listen(LISTEN_BACKLOG)
    uvicorn.Server(conf).run(sockets=[listener])


def child_main() -> None:
    """The entry of a child process: its role's configuration is in the environment."""
    serve_role(json.loads(os.environ.pop(CONFIG_VARIABLE)))
