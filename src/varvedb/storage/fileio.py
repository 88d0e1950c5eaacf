"""The one door through which storage changes a file: write, sync, zero, truncate.

Every byte the log writer puts on disk goes through a `FileIO`, so a test can
replace `open_file` with a version that fails the Nth write or sync (ENOSPC,
EFBIG, EIO), writes short, or crashes — the I/O errors that a real disk
produces and that nothing else makes happen on demand. Reads go through the
mapped file and are not routed here.

`zero` turns a byte range back into zeros without changing the file's size:
the log never shrinks under a reader's mapping (a read-only process maps the
whole file and would die of SIGBUS on pages past a truncation), so dead tails
are zeroed instead of cut. It punches a hole where the file system can (no
data written, space given back, so it works on a full disk) and writes zeros
where it cannot.
"""
from __future__ import annotations

import ctypes
import errno
import os

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_ZERO_CHUNK = 1 << 20


def _load_fallocate():
    try:
        # the process's own symbols hold libc's (find_library would run ldconfig)
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fn.restype = ctypes.c_int
    return fn


_fallocate = _load_fallocate()


class FileIO:
    """Positional writes and syncs on one open file descriptor."""

    def __init__(self, fd: int, path: str):
        self.fd = fd
        self.path = path
        self._can_punch = _fallocate is not None

    def pwritev(self, bufs: list, offset: int) -> int:
        """Write bufs at offset; returns the bytes written (may be short)."""
        return os.pwritev(self.fd, bufs, offset)

    def pwrite(self, data, offset: int) -> int:
        return os.pwrite(self.fd, data, offset)

    def fdatasync(self) -> None:
        os.fdatasync(self.fd)

    def fsync(self) -> None:
        os.fsync(self.fd)

    def ftruncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def zero(self, offset: int, length: int) -> None:
        """Make [offset, offset + length) read as zeros; the file keeps its size."""
        if length <= 0:
            return
        if self._can_punch:
            if _fallocate(self.fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE,
                          offset, length) == 0:
                return
            err = ctypes.get_errno()
            if err not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise OSError(err, os.strerror(err), self.path)
            self._can_punch = False
        zeros = bytes(min(length, _ZERO_CHUNK))
        end = offset + length
        while offset < end:
            offset += self.pwrite(zeros[:end - offset], offset)

    def close(self) -> None:
        os.close(self.fd)


def open_file(fd: int, path: str) -> FileIO:
    """The FileIO for a freshly opened descriptor. Tests replace this to inject faults."""
    return FileIO(fd, path)
