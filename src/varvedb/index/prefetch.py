"""Grouped prefetch: ask the kernel for the pages of a group of mapped rows at once.

Why: when the database file is larger than memory, a rerank reads R random rows
of a vector arena that lives in the file mapping, and each row that is not
resident is a page fault that waits for its read alone: R reads one after the
other. Requesting all of their pages first lets the device serve the reads
together, and the faults that follow find the pages in the page cache.

`prefetch_rows(array, rows)` does it for a 2-D array (rows x dim; or 1-D,
such as the norms) that is a numpy view on an mmap of a file; for any other
array (in memory, or an anonymous mapping) it returns at once (~3 us). The
rows' pages are coalesced into ranges (adjacent pages join) and each range is
advised WILLNEED from a kernel, without waiting: the reads are queued
together and the faults that follow find their pages.

What `python -m varvedb_bench.prefetch` found, 1M x 768 f32 (2.9 GiB) under
a 1 GiB cap, 400 random rows a group, medians: plain faults 53 ms, fadvise
10 ms; a pool of pread threads 18 ms and io_uring reads 10 ms (neither kept:
no better, and threads or an alpha dependency); a mincore check cost about
as much as the advice, so `auto` judges by the file's size against the
memory limit instead: with every page resident the advice costs ~1 us a
range. Through a mapping not advised MADV_RANDOM (`advise_random`) a fault
reads the device's read-around window (8 MiB there): fadvise's p99 was 172 ms
there against 36 ms with it.
"""
from __future__ import annotations

import mmap
import os
import threading
import weakref

import numpy as np
from numba import types

from ..errors import OptionError
from ..kernels.jit import njit
from ..storage.memory import memory_limit

PAGE = mmap.PAGESIZE

#: the ways to request the pages: none (plain faults), or per coalesced range
#: madvise(MADV_WILLNEED) by address or posix_fadvise(POSIX_FADV_WILLNEED) on
#: the file (madvise where the file cannot be opened); auto, the default:
#: fadvise when the mapped file is larger than half the memory this process
#: may use, else none (its pages then stay resident: advice only costs)
HOW = ("auto", "none", "madvise", "fadvise")
DEFAULT = "auto"


class _Mapping:
    """What a file mapping is: its first byte's address, the file behind it and
    the file offset of that byte."""

    __slots__ = ("addr", "file_offset", "path", "inode", "fd", "fits", "random",
                 "__weakref__")

    def __init__(self, addr: int, file_offset: int, path: str, inode: int):
        self.addr = addr
        self.file_offset = file_offset
        self.path = path
        self.inode = inode
        self.fd = None        # opened on first use by fadvise; -1: cannot be
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0
        # judged once per mapping (a checkpoint or reopen maps the file anew)
        self.fits = 2 * size <= memory_limit()
        self.random = {}      # array start -> bytes advised MADV_RANDOM so far

    def file_fd(self) -> int:
        """A descriptor of the mapped file, or -1 if it cannot be opened or its
        path now names another file (replaced since it was mapped)."""
        if self.fd is None:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                fd = -1
            if fd >= 0 and os.fstat(fd).st_ino != self.inode:
                os.close(fd)
                fd = -1
            with _lock:
                if self.fd is None:
                    self.fd = fd
                    if fd >= 0:
                        weakref.finalize(self, os.close, fd)
                elif fd >= 0:
                    os.close(fd)
        return self.fd


_lock = threading.Lock()
# mmap object -> its _Mapping, or None for an anonymous mapping (nothing to prefetch)
_mappings: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _owner(array: np.ndarray):
    """The mmap object `array`'s memory belongs to, or None."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def _mapping(array: np.ndarray) -> _Mapping | None:
    m = _owner(array)
    if m is None:
        return None
    try:
        return _mappings[m]
    except KeyError:
        pass
    addr = np.frombuffer(m, np.uint8).ctypes.data
    found = None
    with open("/proc/self/maps") as maps:   # once per mapping: the file and offset
        for line in maps:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= addr < hi:
                path = fields[5].rstrip("\n") if len(fields) == 6 else ""
                # a file's (an anonymous one has no name, or "/dev/zero (deleted)"
                # when shared; a file unlinked since is left alone too)
                if path.startswith("/") and not path.endswith(" (deleted)"):
                    found = _Mapping(addr, int(fields[2], 16) + addr - lo, path, int(fields[4]))
                break
    with _lock:
        _mappings[m] = found
    return found


def _checked(array: np.ndarray, rows) -> np.ndarray:
    """`rows` as int64 row numbers of `array`, or OptionError."""
    rows = np.asarray(rows)
    if array.ndim not in (1, 2):
        raise OptionError(f"prefetch needs a 1-D or 2-D array of rows, not {array.ndim}-D")
    if rows.dtype.kind not in "iu":
        raise OptionError(f"row numbers must be integers, not {rows.dtype}")
    rows = rows.reshape(-1).astype(np.int64, copy=False)
    bad = _first_out_of_range(rows, array.shape[0])
    if bad >= 0:
        raise OptionError(f"row {int(rows[bad])} is out of range for an array of "
                          f"{array.shape[0]} rows")
    return rows


def _ranges(where: _Mapping, array: np.ndarray, rows: np.ndarray):
    width = array.shape[1] if array.ndim == 2 else 1   # a 1-D array: rows of one value
    if not len(rows) or not width:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if width > 1 and array.strides[1] != array.itemsize:
        raise OptionError("prefetch needs each row's values stored together")
    start = np.sort(array.ctypes.data - where.addr + rows * array.strides[0])
    first = start // PAGE
    last = (start + width * array.itemsize - 1) // PAGE
    # a range starts where a row's first page is past the previous row's last + 1
    new = np.empty(len(first), bool)
    new[0] = True
    new[1:] = first[1:] > last[:-1] + 1
    lo = first[new]
    hi = np.maximum.reduceat(last, np.flatnonzero(new))
    return lo * PAGE, (hi - lo + 1) * PAGE


def page_ranges(array: np.ndarray, rows) -> tuple[_Mapping | None, np.ndarray, np.ndarray]:
    """(mapping, starts, lengths): the page-aligned byte ranges, relative to the
    mapping's first byte, that hold `rows` of `array`; adjacent pages coalesced.
    (None, empty, empty) when `array` is not a view on a file mapping."""
    rows = _checked(array, rows)
    where = _mapping(array)
    if where is None:
        return None, np.empty(0, np.int64), np.empty(0, np.int64)
    return (where,) + _ranges(where, array, rows)


def pays(array: np.ndarray) -> bool:
    """Would `prefetch_rows(array, ...)` (auto) ask for anything: is `array` a view
    on a file mapping larger than half the memory this process may use? (Judged
    once per mapping; a caller that reranks inside one kernel splits it then.)"""
    where = _mapping(array)
    return where is not None and not where.fits


def prefetch_rows(array: np.ndarray, rows, how: str = DEFAULT) -> None:
    """Request the pages of `rows` of `array` together (see the module's doc),
    without waiting for them. Returns at once for an array that is not a view
    on a file mapping; out-of-range rows raise OptionError before any call."""
    if how not in HOW:
        raise OptionError(f"unknown prefetch {how!r}: one of {', '.join(HOW)}")
    rows = _checked(array, rows)
    where = _mapping(array)
    if where is None or how == "none" or how == "auto" and where.fits:
        return
    if not where.fits and where.random.get(array.ctypes.data, 0) < array.nbytes:
        advise_random(array)        # once per array: its faults then read no read-around
        where.random[array.ctypes.data] = array.nbytes
    starts, lengths = _ranges(where, array, rows)
    if not len(starts):
        return
    fd = where.file_fd() if how != "madvise" else -1
    if fd >= 0:
        _fadvise_ranges(fd, starts + where.file_offset, lengths, os.POSIX_FADV_WILLNEED)
    else:   # no descriptor for the file behind it: the same advice by address
        # (the array holds the mmap's buffer: it cannot be unmapped under us)
        _madvise_ranges(where.addr, starts, lengths, mmap.MADV_WILLNEED)


def advise_random(array: np.ndarray, force: bool = False) -> None:
    """madvise(MADV_RANDOM) over the pages of `array` when it is a view on a
    file mapping larger than half the memory this process may use (any size
    with `force`): a fault there then reads its own page, not the read-around
    window (the device's read-ahead, 8 MiB on the bench machine: there a
    group of 100 plain faults under a 1 GiB cap read 455 MiB). Not for an
    array that is also scanned in order: a cold scan then faults page by page."""
    where = _mapping(array)
    if where is None or not array.nbytes or where.fits and not force:
        return
    lo = (array.ctypes.data - where.addr) // PAGE * PAGE
    hi = array.ctypes.data - where.addr + array.nbytes
    _madvise_ranges(where.addr, np.array([lo], np.int64), np.array([hi - lo], np.int64),
                    mmap.MADV_RANDOM)


def resident_fraction(array: np.ndarray, rows) -> float:
    """The fraction of the pages of `rows` of `array` that are resident
    (mincore per coalesced range); 1.0 for an array not on a file mapping."""
    where, starts, lengths = page_ranges(array, rows)
    if where is None or not len(starts):
        return 1.0
    vec = np.empty(int(lengths.max()) // PAGE, np.uint8)
    present = _resident_pages(where.addr, starts, lengths, vec)
    if present < 0:
        raise OSError("mincore failed")
    return present / (int(lengths.sum()) // PAGE)


# the system calls, made from kernels: a Python loop of them cost ~0.9 us a
# range against ~0.5 us (400 resident ranges: 0.36 ms against 0.21 ms)
_fadvise = types.ExternalFunction(
    "posix_fadvise", types.int32(types.int32, types.int64, types.int64, types.int32))
# addresses as int64 (user space is below 2**47): uintp + int64 would be a float
_madvise = types.ExternalFunction("madvise", types.int32(types.int64, types.int64, types.int32))
_mincore = types.ExternalFunction("mincore", types.int32(types.int64, types.int64, types.uintp))


@njit(cache=True, nogil=True)
def _first_out_of_range(rows, n):
    """The first i with rows[i] outside [0, n), or -1 (one pass, where numpy's
    min and max took two and ~6 us for 40 rows: most of a no-op's cost)."""
    for i in range(len(rows)):
        if rows[i] < 0 or rows[i] >= n:
            return i
    return -1


@njit(cache=True, nogil=True)
def _fadvise_ranges(fd, offsets, lengths, advice):
    """posix_fadvise each range; it is advice, so a failure is ignored."""
    for i in range(len(offsets)):
        _fadvise(fd, offsets[i], lengths[i], advice)


@njit(cache=True, nogil=True)
def _madvise_ranges(base, offsets, lengths, advice):
    """madvise each range of the mapping at `base`; advice: failures ignored."""
    for i in range(len(offsets)):
        _madvise(base + offsets[i], lengths[i], advice)


@njit(cache=True, nogil=True)
def _resident_pages(base, offsets, lengths, vec):
    """Pages resident over the ranges (mincore), or -1 where a call failed."""
    present = 0
    for i in range(len(offsets)):
        if _mincore(base + offsets[i], lengths[i], vec.ctypes.data) != 0:
            return -1
        for j in range(lengths[i] // PAGE):
            present += vec[j] & 1
    return present
