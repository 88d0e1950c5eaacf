"""Compiling ahead: a background process compiles what a collection's first use
will need, and a lock per kernel keeps two processes from compiling one twice.

Why: in a process that did not warm, numba compiles each kernel at its first
call, one after another on one core: a first text search and a first vector
search cost seconds each. Knowing a collection's fields, the kernels they will
need are known too, so when a collection with a full-text field or a vector
field is first created or opened in such a process, :func:`start` spawns one
``varvedb warm --ahead SHARE...`` process (warm.py's small workloads for those
features) that compiles them into the disk cache on another core while this
process goes on. The answers never depend on it: a kernel either loads from
the cache or is compiled here, as without it.

While it compiles a kernel it holds that kernel's lock (compile_lock.py), and
so does this process once it started one, so the other, reaching the same
kernel meanwhile, waits and then loads what was saved instead of compiling it
a second time.

Nothing starts when the cache holds a complete warm's mark or the mark of each
share asked for (an earlier compile ahead finished it), when this process is
itself a compiler ahead or a warm's share (:func:`off`), with fewer than two
cores, or with ``VARVEDB_COMPILE_AHEAD=0``.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

from . import jit
from . import compile_lock
from .compile_lock import ENV

_started: set[str] = set()
_off = 0            # > 0: inside off(), nothing starts
_procs: list[subprocess.Popen] = []
_start_lock = threading.Lock()


@functools.cache
def cache_digest() -> str:
    """A hash of everything a kernel's machine code depends on: the package's
    source (its callers decide the types kernels compile for), numba's and
    Python's versions and numba's bounds-check setting.

    Reading and hashing the package's ~150 files cost ~5 ms of a fresh process's
    first collection; the digest is kept in the cache folder under a hash of
    their names, sizes and modification times (and the rest of the key), so a
    process whose files are the ones an earlier process hashed reads it back
    (~0.7 ms); a file changed, touched or copied differs there and is hashed again."""
    import numba
    head = "\0".join([jit.source_stamp(), numba.__version__, sys.version,
                      str(numba.config.BOUNDSCHECK)])
    paths = _sources(str(Path(__file__).parents[1]))
    stamp = hashlib.sha256(head.encode())
    for path in paths:
        st = os.stat(path)
        stamp.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    memo = Path(jit.cache_folder()) / f"varvedb-digest-{stamp.hexdigest()[:24]}"
    with contextlib.suppress(OSError, UnicodeError):
        kept = memo.read_text()
        if len(kept) == 24 and all(c in "0123456789abcdef" for c in kept):
            return kept
    digest = hashlib.sha256(head.encode())
    for path in paths:
        with open(path, "rb") as f:
            digest.update(f.read())
    value = digest.hexdigest()[:24]
    with contextlib.suppress(OSError):      # (no cache folder: hashed again next time)
        part = memo.with_name(f"{memo.name}.{os.getpid()}.part")
        part.write_text(value)
        os.replace(part, memo)
    return value


def _sources(folder: str) -> list[str]:
    """The package's .py files under `folder`, sorted (os.scandir: rglob took ~2 ms)."""
    out = []
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            if entry.name != "__pycache__":
                out += _sources(entry.path)
        elif entry.name.endswith(".py"):
            out.append(entry.path)
    return sorted(out)


def warmed_mark() -> Path:
    """The file whose presence says this cache holds every warm share's kernels."""
    return Path(jit.cache_folder()) / f"varvedb-warmed-{cache_digest()}"


def share_mark(share: str) -> Path:
    """The file whose presence says a compile ahead finished `share` in this cache."""
    slug = "".join(c if c.isalnum() else "-" for c in share)
    return Path(jit.cache_folder()) / f"varvedb-ahead-{slug}-{cache_digest()}"


def shares_for(fields) -> list[str]:
    """The shares (warm.py's AHEAD) a collection of these schema fields uses first:
    the vector fields' scans, then full-text (whose first kernels run in the
    maintainer right after an insert, so the process itself reaches them first)."""
    scans = sorted({f"{f.dtype} scan" for f in fields if f.kind == "vector"})
    return scans + (["text"] if any(f.fts for f in fields) else [])


def start(shares: list[str]) -> None:
    """Start one background process compiling warm's `shares` (in that order),
    unless nothing would come of it (see the module's docstring); each share is
    started at most once per process. The process is ended when this one exits."""
    if _off or not shares or all(s in _started for s in shares):
        return
    with _start_lock:
        todo = [s for s in shares if s not in _started]
        _started.update(todo)
        if not todo or os.environ.get(ENV) in ("0", "worker") \
                or len(os.sched_getaffinity(0)) < 2:
            return
        try:
            if warmed_mark().exists():
                return
            todo = [s for s in todo if not share_mark(s).exists()]
            if not todo:
                return
            cmd = [sys.executable, "-m", "varvedb", "warm"]
            for share in todo:
                cmd += ["--ahead", share]
            # the same varvedb as this process's, whatever put it on sys.path here
            home = str(Path(__file__).parents[2])
            path = os.pathsep.join(filter(None, [home, os.environ.get("PYTHONPATH")]))
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL,
                                    env={**os.environ, ENV: "worker", "PYTHONPATH": path})
        except OSError:
            return        # no cache folder, no interpreter to spawn: compile here, as ever
        if not _procs:
            atexit.register(_stop)
        _procs.append(proc)
        compile_lock.started_one()


@contextlib.contextmanager
def off():
    """No compiler ahead starts in this process for the body: `varvedb warm`
    compiles every share itself, in its own workers (one started beside each
    would compile the same kernels again on a core the warm is using)."""
    global _off
    _off += 1
    try:
        yield
    finally:
        _off -= 1


def _stop() -> None:
    for proc in _procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in _procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
