"""One compilation of a kernel at a time across processes: a lock per kernel and
argument types, held by a process compiling ahead (kernels/ahead.py) and by
the process that started it.

Why: a compiler ahead and the process that started it reach many of the same
kernels; without a lock both would compile a kernel the other is compiling,
and the second core buys nothing. Each of the two holds an exclusive
``flock`` on a file named by the kernel and its argument types (in the
kernels' cache folder) from before it looks in the disk cache until it has
saved what it compiled (:func:`holding`, from kernels/jit.py's compile), so
the other, reaching that kernel meanwhile, waits and then loads what it saved.
(When only the compiler ahead held them, a kernel the process was compiling
when the compiler ahead reached it was compiled twice: a first use of a text
and a vector field on an empty cache compiled 79-90 specialisations in the two
processes, 77 with both holding.)
Every other process about to compile that kernel for those types first waits
while such a lock is held (:func:`wait_for`), then loads what the holder
saved.

Saving is locked too, per kernel (:func:`saving`): numba saves an overload by
reading the kernel's index, taking the first free data file name, writing
the index, then the data. Two processes saving overloads of one kernel at once
(warm's workers, each compiling another dtype's) took the same name: one
entry was lost (compiled again later), and with the writes interleaved the
index could name the other overload's machine code.

No two processes can wait on each other: a process holds locks only along its
own chain of nested compilations (a caller, then its callees), and kernels
never call each other round a loop. Within a process, a kernel's lock is taken
under numba's compiler lock (kernels/jit.py), so that one thread never holds a
kernel's lock while waiting for numba's lock held by another thread that waits
for that kernel. A holder that dies releases its locks
with its file descriptors, and a wait gives up after :data:`WAIT_SECONDS`
(a hang guard) and compiles, as it would have without the lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time

ENV = "VARVEDB_COMPILE_AHEAD"    # "0": start no compiler ahead; "worker": this is one
WAIT_SECONDS = 600.0
_POLL_SECONDS = 0.02
_started_one = False             # this process started a compiler ahead


def is_worker() -> bool:
    """Whether this process compiles ahead."""
    return os.environ.get(ENV) == "worker"


def started_one() -> None:
    """Say that this process started a compiler ahead: it holds kernels' locks from now on."""
    global _started_one
    _started_one = True


def holds_locks() -> bool:
    """Whether this process holds a kernel's lock while compiling it: a compiler
    ahead, or a process that started one."""
    return _started_one or is_worker()


def lock_path(folder: str, fn, sig) -> str:
    """The lock file, in the cache `folder`, of kernel `fn` compiled for argument
    types `sig`."""
    key = hashlib.sha1(f"{fn.__module__}.{fn.__qualname__}{sig}".encode()).hexdigest()[:20]
    return os.path.join(folder, f"varvedb-compiling-{fn.__name__}-{key}")


def wait_for(path: str) -> None:
    """Wait while another process holds the lock at `path`; at once when none does
    (no such file: no compiler ahead ever compiled that kernel)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return
                time.sleep(_POLL_SECONDS)
    finally:
        os.close(fd)


@contextlib.contextmanager
def saving(path: str):
    """Hold the lock at `path` for the body, waiting for it as long as another
    process holds it (a save takes milliseconds); where it cannot be had (no
    cache folder), the body runs without it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def holding(path: str):
    """Hold the lock at `path` for the body (after waiting out another holder); a
    lock that cannot be had (no cache folder) is simply not held."""
    fd = None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            wait_for(path)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)
