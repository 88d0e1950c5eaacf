"""Child processes forked from one Python process that imported varvedb once.

A test that kills a writer needs a real process per kill, but not a fresh
interpreter's imports per kill: a child of `python -c SCRIPT` spent ~0.5 s of
CPU importing numpy, numba and the engine and loading the kernels it calls, of
a crash round's ~0.6 s. A Forker starts one process that runs PRELOAD (imports
and a first use of a file, on a file of its own, closed again: no thread, no
lock, no open file survives it) and then forks a child for each script it is
sent; the child runs the script as `python -c SCRIPT ARGS` would (sys.argv,
__main__, stdout and stderr its own pipes, atexit and non-daemon threads at
its end), from a process state that a fresh interpreter reaches too.

    with Forker() as forker:
        child = forker.popen(SCRIPT, path, seed)      # a Popen's pid, stdout,
        child.send_signal(signal.SIGKILL)             # stderr, poll, wait,
        child.wait(600)                               # returncode, kill
        assert child.returncode == -signal.SIGKILL

The forking process is single-threaded (it checks before each fork) and
reports each child's exit status, as waitpid gives it, to the test's process.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import threading
import time

from conftest import PYTHON, child_env

# Imports and a first use of a vector field on a file of its own: the kernels an
# open, a write and a search load from the cache are loaded once, here.
PRELOAD = r"""
import os, tempfile
import numpy as np
import varvedb as vv
with tempfile.TemporaryDirectory() as d:
    db = vv.connect(os.path.join(d, "preload.varve"))
    c = db.create_collection("c", {"t": vv.Int(index="hash"), "s": "text",
                                   "emb": vv.Vector(8, metric="l2")})
    c.insert({"id": 1, "t": 1, "s": "x", "emb": [0.5] * 8})
    c.find("t = 1", select=["t"])
    c.search(vector=[0.5] * 8, limit=1)
    db.checkpoint()
    db.close()
try:                                    # what `varvedb serve` imports (server_proc.py)
    import varvedb.cli, varvedb.server.run, varvedb.server.app  # noqa: E401, F401
except ImportError:                     # no server extra: served by a fresh process then
    pass
"""

SERVER = r"""
import array, atexit, json, os, select, signal, socket, sys, threading, traceback
control = socket.socket(fileno=int(sys.argv[1]))
exec(compile(sys.argv[2], "<preload>", "exec"), {"__name__": "__preload__"})
children = set()
# a child's exit wakes the loop (SIGCHLD through a wakeup pipe), no polling
woken_r, woken_w = os.pipe()
os.set_blocking(woken_w, False)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.set_wakeup_fd(woken_w)

def reap():
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)
            control.send(json.dumps({"exit": pid, "status": status}).encode())

def to_file(path, fd):
    if path is None:
        return fd
    os.close(fd)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

def run(request, out_w, err_w):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    out_w = to_file(request["stdout_path"], out_w)
    err_w = to_file(request["stderr_path"], err_w)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd in (out_w, err_w, null, control.fileno(), woken_r, woken_w):
        os.close(fd)
    if request["env"] is not None:
        os.environ.clear()
        os.environ.update(request["env"])
    sys.argv = ["-c", *request["argv"]]
    code = 0
    try:
        exec(compile(request["script"], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException as e:      # the script's traceback, without this frame
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        code = 1
    try:
        threading._shutdown()        # as the interpreter's exit: non-daemon threads,
        atexit._run_exitfuncs()      # then atexit
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc()
        code = code or 1
    os._exit(code)

while True:
    ready, _, _ = select.select([control, woken_r], [], [])
    if woken_r in ready:
        os.read(woken_r, 4096)
        reap()
    if control not in ready:
        continue
    message = control.recv(1 << 20)
    if not message:
        break
    request = json.loads(message)
    assert threading.active_count() == 1, threading.enumerate()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        run(request, out_w, err_w)
    children.add(pid)
    os.close(out_w)
    os.close(err_w)
    socket.send_fds(control, [json.dumps({"pid": pid}).encode()], [out_r, err_r])
    os.close(out_r)
    os.close(err_r)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"""


class Forked:
    """The part of subprocess.Popen the tests use, for a forked child."""

    def __init__(self, forker: "Forker", pid: int, out_fd: int, err_fd: int, text: bool):
        self._forker, self.pid = forker, pid
        mode = "r" if text else "rb"
        self.stdout = os.fdopen(out_fd, mode)
        self.stderr = os.fdopen(err_fd, mode)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            status = self._forker._status(self.pid, 0)
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            status = self._forker._status(self.pid, timeout)
            if status is None:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Forker:
    def __init__(self, preload: str = PRELOAD, env: dict | None = None):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self.env = {**(env or child_env()), "VARVEDB_COMPILE_AHEAD": "0"}
        self.proc = subprocess.Popen([PYTHON, "-c", SERVER, str(theirs.fileno()), preload],
                                     pass_fds=[theirs.fileno()], stdout=subprocess.DEVNULL,
                                     env=self.env)
        theirs.close()
        self._lock = threading.Lock()           # one request at a time
        self._changed = threading.Condition()
        self._exits: dict[int, int] = {}
        self._spawned: list[tuple[int, int, int]] = []
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:                     # one message a datagram; a spawn's carries its pipes
            data, fds, _flags, _addr = socket.recv_fds(self._sock, 1 << 16, 2)
            if not data:
                break
            message = json.loads(data)
            with self._changed:
                if "pid" in message:
                    self._spawned.append((message["pid"], *fds))
                else:
                    self._exits[message["exit"]] = message["status"]
                self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def popen(self, script: str, *args, stdout_path: str | None = None,
              stderr_path: str | None = None, env: dict | None = None, text: bool = True,
              timeout: float = 600) -> Forked:
        """A child running `python -c script *args` forked from the preloaded process;
        its stdout and stderr appended to the files given, else pipes; its
        os.environ env if given (what the preload imported read the forker's)."""
        request = {"script": script, "argv": [str(a) for a in args], "env": env,
                   "stdout_path": None if stdout_path is None else str(stdout_path),
                   "stderr_path": None if stderr_path is None else str(stderr_path)}
        with self._lock, self._changed:
            self._sock.send(json.dumps(request).encode())
            ok = self._changed.wait_for(lambda: self._spawned or self._closed, timeout)
            assert ok and self._spawned, f"the forker did not fork: {self.proc.poll()}"
            pid, out_fd, err_fd = self._spawned.pop()
        return Forked(self, pid, out_fd, err_fd, text)

    def _status(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._closed, timeout)
            return self._exits.get(pid)

    def close(self) -> None:
        if self._sock.fileno() < 0:
            return
        self._sock.shutdown(socket.SHUT_WR)     # the forker kills what is left and exits
        self.proc.wait(600)                     # a hang guard
        self._reader.join(600)
        self._sock.close()

    def __enter__(self) -> "Forker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_shared: Forker | None = None


def shared() -> Forker:
    """This process's forker: started at its first use, closed at exit."""
    global _shared
    if _shared is None:
        _shared = Forker()
        atexit.register(_shared.close)
    return _shared


class Child:
    """A forked child whose stdout lines are collected as they arrive (a writer
    that prints each acknowledgement, killed at some moment). Its stderr goes to
    the file stderr_path when given (read by stderr()), else to a pipe."""

    def __init__(self, forker: Forker, script: str, *args, name: str = "child",
                 stderr_path: str | None = None):
        self.name, self.stderr_path = name, stderr_path
        self.proc = forker.popen(script, *args, stderr_path=stderr_path)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.endswith("\n"):          # a line cut by the kill is not an ack
                self.lines.append(line.rstrip("\n"))

    def stderr(self) -> str:
        """The end of what the child wrote to stderr (all of it once it exited)."""
        if self.stderr_path is not None:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()[-3000:]
        return self.proc.stderr.read()[-3000:] if self.proc.poll() is not None else ""

    def wait_for(self, word: str, count: int = 1, timeout: float = 1800.0) -> None:
        """Until `count` lines start with word (the timeout a hang guard)."""
        deadline = time.monotonic() + timeout
        while sum(line.startswith(word) for line in self.lines) < count:
            if self.proc.poll() is not None:
                self._reader.join(600)
                raise AssertionError(f"{self.name} exited {self.proc.returncode} before "
                                     f"printing {word!r}: {self.stderr()}")
            assert time.monotonic() < deadline, f"{self.name} never printed {word!r}"
            time.sleep(0.002)

    def finish(self, timeout: float = 600.0) -> int:     # a hang guard
        """Wait for the child to exit by itself; its exit status."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(600)
        self._reader.join(600)
        self._close()
        return self.proc.returncode

    def _close(self) -> None:
        self.proc.stdout.close()
        if self.stderr_path is not None:
            self.proc.stderr.close()

    def kill(self) -> list[str]:
        """SIGKILL; the lines it printed, whole."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(600)         # hang guards only
        self._reader.join(600)
        assert self.proc.returncode == -signal.SIGKILL, (self.proc.returncode, self.stderr())
        self._close()
        return self.lines
