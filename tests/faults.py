"""Fault injection: a FileIO that fails, writes short, or crashes on demand.

`installed()` replaces `varvedb.storage.fileio.open_file` so that every file a
writer opens meanwhile goes through a `FaultyFile`. Faults are armed on the
shared `Faults` object: `arm("enospc", after=3)` makes the fourth write or
sync from now fail with ENOSPC (having written a random prefix of its bytes
first, as a disk that fills mid-write does), once. Kinds:

* "enospc", "efbig", "eio" — the operation raises OSError with that errno;
* "short" — a write returns fewer bytes than asked (no error; the caller must
  finish it);
* "kill" — the process dies at this operation: a random prefix of the write
  reaches the file, then every later operation raises `Crashed` (the file
  keeps everything written, as after SIGKILL);
* "power" — the same, then every write since the last successful fdatasync is
  undone, as after a power cut that lost the page cache.

`on` picks which operations count: "write" (pwrite, pwritev), "sync"
(fdatasync, fsync) or "any". Hole punching (`zero`) and truncation are never
failed: they are how a failure is undone, and a test that fails them too
checks only that the connection then refuses to write.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random

from varvedb.storage import fileio

ERRNOS = {"enospc": errno.ENOSPC, "efbig": errno.EFBIG, "eio": errno.EIO}
KINDS = (*ERRNOS, "short", "kill", "power")


class Crashed(BaseException):
    """The simulated process died at a file operation (BaseException: nothing may
    catch it and carry on writing)."""


class Faults:
    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.files: list[FaultyFile] = []
        self.armed: tuple[str, str, int] | None = None   # kind, on, operations left
        self.fired: dict[str, int] = {}
        self.crashed = False

    def arm(self, kind: str, after: int = 0, on: str = "any") -> None:
        assert kind in KINDS and on in ("write", "sync", "any")
        self.armed = (kind, on, after)

    def disarm(self) -> None:
        self.armed = None

    def _due(self, op: str) -> str | None:
        if self.crashed:
            raise Crashed(op)
        if self.armed is None:
            return None
        kind, on, left = self.armed
        if on != "any" and on != op:
            return None
        if left:
            self.armed = (kind, on, left - 1)
            return None
        self.armed = None
        self.fired[kind] = self.fired.get(kind, 0) + 1
        return kind

    def kill_all(self) -> None:
        """After a crash: close every descriptor (releasing the write lock), as the
        kernel does for a dead process."""
        for f in self.files:
            f.really_close()
        self.files = []
        self.crashed = False


class FaultyFile(fileio.FileIO):
    def __init__(self, fd: int, path: str, faults: Faults):
        super().__init__(fd, path)
        self.faults = faults
        self.closed = False
        self._unsynced: list[tuple[int, bytes]] = []   # (offset, bytes before) since last sync
        self._synced_size = os.fstat(fd).st_size

    # -- writes ----------------------------------------------------------------

    def pwritev(self, bufs: list, offset: int) -> int:
        return self.pwrite(b"".join(bytes(b) for b in bufs), offset)

    def pwrite(self, data, offset: int) -> int:
        data = bytes(data)
        kind = self.faults._due("write")
        if kind is None:
            return self._write(data, offset)
        if kind == "short" and len(data) > 1:
            return self._write(data[:self.faults.rng.randrange(1, len(data))], offset)
        if kind == "short":
            return self._write(data, offset)
        if data:
            self._write(data[:self.faults.rng.randrange(len(data))], offset)
        if kind in ("kill", "power"):
            self._crash(kind)
        raise OSError(ERRNOS[kind], os.strerror(ERRNOS[kind]), self.path)

    def _write(self, data: bytes, offset: int) -> int:
        self._unsynced.append((offset, os.pread(self.fd, len(data), offset)))
        return os.pwrite(self.fd, data, offset)

    # -- syncs -----------------------------------------------------------------

    def fdatasync(self) -> None:
        self._sync(os.fdatasync)

    def fsync(self) -> None:
        self._sync(os.fsync)

    def _sync(self, call) -> None:
        kind = self.faults._due("sync")
        if kind in ("kill", "power"):
            self._crash(kind)
        if kind in ERRNOS:
            raise OSError(ERRNOS[kind], os.strerror(ERRNOS[kind]), self.path)
        call(self.fd)
        self._unsynced = []
        self._synced_size = os.fstat(self.fd).st_size

    # -- the rest ----------------------------------------------------------------

    def zero(self, offset: int, length: int) -> None:
        if self.faults.crashed:
            raise Crashed("zero")
        end = min(offset + length, os.fstat(self.fd).st_size)
        if end > offset:
            self._unsynced.append((offset, os.pread(self.fd, end - offset, offset)))
        super().zero(offset, length)

    def ftruncate(self, size: int) -> None:
        if self.faults.crashed:
            raise Crashed("ftruncate")
        super().ftruncate(size)

    def _crash(self, kind: str) -> None:
        if kind == "power":
            for offset, before in reversed(self._unsynced):
                os.pwrite(self.fd, before, offset)
            os.ftruncate(self.fd, self._synced_size)
        self._unsynced = []
        self.faults.crashed = True
        raise Crashed(kind)

    def close(self) -> None:
        if self.faults.crashed:
            raise Crashed("close")
        self.really_close()

    def really_close(self) -> None:
        if not self.closed:
            self.closed = True
            # a dead process's mmaps hold a dup of the descriptor, and with it the
            # write lock: drop the lock itself, as the kernel does at exit
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


@contextlib.contextmanager
def installed(faults: Faults):
    """Route every file opened for writing meanwhile through a FaultyFile."""
    real = fileio.open_file

    def open_file(fd: int, path: str) -> fileio.FileIO:
        if os.fstat(fd).st_size == 0 or _writable(fd):
            f = FaultyFile(fd, path, faults)
            faults.files.append(f)
            return f
        return real(fd, path)

    fileio.open_file = open_file
    try:
        yield faults
    finally:
        fileio.open_file = real


def _writable(fd: int) -> bool:
    return (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE) != os.O_RDONLY
