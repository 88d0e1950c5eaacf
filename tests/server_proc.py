"""A real `varvedb serve` in a child process on 127.0.0.1, for the server tests.

    with ServerProcess(path, token="t") as srv:
        client = vv.Client(srv.url, token=srv.token)

It picks a free port, waits for GET /health to answer, and on exit stops the
server with SIGTERM (as a service manager would) and waits for it. The server
is forked from the suite's forker (tests/forker.py), which imported varvedb and
the server once, unless its environment changes numba's settings or it warms:
a fresh `python -m varvedb serve` spent ~0.6 s of CPU starting. It serves
with --no-warm unless asked to warm: a test file run alone (not after `make
test`'s `varvedb warm`) then compiles at its first requests instead of at start.
"""
from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import forker

SRC = str(Path(__file__).resolve().parents[1] / "src")
# `python -m varvedb serve ...` in a child forked from the suite's forker
SERVE = """
import sys
from varvedb.cli import main
main(args=sys.argv[1:], prog_name="varvedb")
"""
START_TIMEOUT = 600.0    # a hang guard: a cold numba cache compiles kernels at open


@contextlib.contextmanager
def pg_server(path: str, setup: tuple | list = ()):
    """`varvedb serve --pg` over the file at `path` after `setup`'s statements ran
    there embedded; the ServerProcess's `pg` is the wire's port."""
    import varvedb as vv
    db = vv.connect(path)
    try:
        for statement in setup:
            db.sql(statement)
    finally:
        db.close()
    port = free_port()
    with ServerProcess(path, args=["--pg", str(port)]) as srv:
        srv.pg = port
        yield srv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, path: str, token: str | None = None, args: list[str] = (),
                 env: dict | None = None, warm: bool = False):
        self.path, self.token, self.args = path, token, list(args)
        self.warm = warm
        # a VARVEDB_TOKEN of the caller's would protect a server a test leaves open
        inherited = {k: v for k, v in os.environ.items() if k != "VARVEDB_TOKEN"}
        self.env = {**inherited, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.env["PYTHONPATH"] = SRC + os.pathsep + self.env.get("PYTHONPATH", "")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = f"{path}.server.log"

    @property
    def url(self) -> str:
        scheme = "https" if "--tls-cert" in self.args else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> "ServerProcess":
        # a fresh clone's server compiles its kernels at its first requests (tens of
        # seconds on a busy machine): past the 30 s default, a read would be a 504
        timeout = [] if "--timeout" in self.args else ["--timeout", "600"]
        cmd = [sys.executable, "-m", "varvedb", "serve", self.path, "--port", str(self.port),
               *timeout, *([] if self.warm else ["--no-warm"]), *self.args]
        if self.token is not None:
            cmd += ["--token", self.token]
        self._log = open(self.log_path, "ab")
        if self._forkable():
            self.proc = forker.shared().popen(SERVE, *cmd[3:], stdout_path=self.log_path,
                                              stderr_path=self.log_path, env=self.env)
        else:
            self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                         env=self.env)
        # a warm on an empty cache compiles every kernel first: many minutes when busy
        deadline = time.monotonic() + START_TIMEOUT * (3 if self.warm else 1)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n"
                                   f"{self.log()}")
            try:
                if "--tls-cert" in self.args:
                    c = http.client.HTTPSConnection(
                        "127.0.0.1", self.port, timeout=2,
                        context=ssl._create_unverified_context())
                else:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    c.close()
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the server did not answer /health in time:\n"
                           f"{self.log()}")

    def _forkable(self) -> bool:
        """Forked from the suite's forker (tests/forker.py: ~0.5 s of CPU less a
        start) unless the server's environment changes what the forker's imports
        read once (numba's settings) or the server warms (test_warm's own cache)."""
        changed = {k for k in self.env.keys() | self.forker_env().keys()
                   if self.env.get(k) != self.forker_env().get(k)}
        return not self.warm and not any(k.startswith("NUMBA_") for k in changed)

    @staticmethod
    def forker_env() -> dict:
        return forker.shared().env

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait: the server finishes in-flight requests and closes the file."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self._log.close()

    def restart(self) -> "ServerProcess":
        self.stop()
        return self.start()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self.kill()
