"""The database file itself: open and lock it, its header, its two superblock slots.

A `DatabaseFile` is one open descriptor of a varvedb file. A writer holds an
exclusive `flock` on it for as long as it is open, taken on the file the path
names once it is locked (a vacuum renames a new file over the path: a writer
that locked the old one opens the path again); a reader takes none (and
`writer_active` asks, without waiting, whether a writer holds it now). An
empty file opened for writing gets its header block, made durable along
with its directory entry before anything else is written.

The superblock slots (format.py) are read once at open, newest first; the
raw bytes are kept for `verify`. A checkpoint's writer (log_writer.py) puts
the next superblock in the slot the older one is in (`write_slot`), and only
once that is durable does the file take it as its newest (`use_superblock`).

Every byte this module writes goes through the file's `FileIO`
(storage/fileio.py), the door tests replace to inject faults.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import stat
import time
import uuid

from ..errors import (CorruptFileError, FileMissingError, FormatVersionError, NotAVarveFileError,
                      OptionError, StorageError, WriterLockedError)
from . import fileio
from . import format as F
from .memory import memory_limit

MAX_IOV = 512   # buffers per pwritev (the kernel's IOV_MAX is 1024)
LOCK_TRIES = 100   # opens of a path that is replaced each time before it is locked
_HOLE_STEP = 1 << 16   # data_end's search stops halving here and walks the runs left


class DatabaseFile:
    """One open varvedb file: descriptor, write lock, header and superblocks."""

    def __init__(self, path: str, readonly: bool = False):
        self.path = path
        self.readonly = readonly
        for _ in range(LOCK_TRIES):
            self._open()
            try:
                if readonly or self._lock():
                    break
            except BaseException:
                self.io.close()
                raise
            self.io.close()   # locked a file the path no longer names: open it again
        else:
            raise WriterLockedError(f"{path} was replaced {LOCK_TRIES} times while it was "
                                    "being opened: another connection is writing it")
        fd = self.fd
        try:
            size = os.fstat(fd).st_size
            if size == 0 and not readonly:
                self._create()
                size = os.fstat(fd).st_size
            self._read_header(size)
            self.superblocks = self._read_superblocks()
        except BaseException:
            self.io.close()
            raise

    def _open(self) -> None:
        self.fd = _open_regular(self.path, self.readonly)
        self.io = fileio.open_file(self.fd, self.path)

    def _lock(self) -> bool:
        """Take the write lock; False if it was taken on a file the path no longer
        names. A vacuum renames its new file over the path while it holds both
        locks, then lets the old one go: a descriptor opened before the rename
        would get that lock on a file no one reads again. Once the lock is held,
        a path that names the same file keeps naming it (only the holder renames)."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise WriterLockedError(
                    f"{self.path} is open for writing by another connection; "
                    "open it with readonly=True to read it") from None
            raise
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False          # unlinked since the open: open (create) it again
        mine = os.fstat(self.fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino) and mine.st_nlink > 0

    def writer_active(self) -> bool:
        """Does a writer hold this file's write lock right now? (Asks without waiting.)"""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True
            raise
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        return False

    def replaced(self) -> bool:
        """Does the path now name another file than the one open here (a vacuum's)?"""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        mine = os.fstat(self.fd)
        return (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino)

    # ---- header --------------------------------------------------------------

    def _create(self) -> None:
        now = time.time_ns() // 1000
        block = bytearray(F.LOG_START)
        block[:F.HEADER_SIZE] = F.pack_header(uuid.uuid4().bytes, now)
        try:
            self.write_all([bytes(block)], 0)
            self.io.fsync()
            fsync_dir(self.path)
        except OSError as e:
            raise StorageError(f"{self.path}: could not create the file: {e}", e) from e

    def _read_header(self, size: int) -> None:
        head = os.pread(self.fd, F.HEADER_SIZE, 0)
        try:
            header = F.unpack_header(head)
        except ValueError:
            raise NotAVarveFileError(f"{self.path}: the header is damaged") from None
        if header is None:
            raise NotAVarveFileError(f"{self.path} is not a varvedb file")
        if header.format_version > F.FORMAT_VERSION:
            raise FormatVersionError(
                f"{self.path} has format version {header.format_version}; this varvedb "
                f"reads up to {F.FORMAT_VERSION}: upgrade varvedb")
        if size < F.LOG_START:
            raise CorruptFileError(f"{self.path} is shorter than its header block")
        self.file_id = header.file_id
        self.created_us = header.created_us
        self.format_version = header.format_version

    def upgrade_header(self) -> None:
        """Stamp the header with this format before the file first holds what an
        older varvedb cannot read (it then refuses the file instead of misreading
        it). One 64-byte write inside the first block, synced."""
        if self.format_version >= F.FORMAT_VERSION:
            return
        try:
            self.write_all([F.pack_header(self.file_id, self.created_us)], 0)
            self.io.fsync()
        except OSError as e:
            raise StorageError(f"{self.path}: could not upgrade the header: {e}", e) from e
        self.format_version = F.FORMAT_VERSION

    # ---- superblocks ---------------------------------------------------------

    @property
    def superblock(self) -> F.Superblock | None:
        """The newest valid superblock (None before the first checkpoint)."""
        return self.superblocks[0] if self.superblocks else None

    def _read_superblocks(self) -> list[F.Superblock]:
        """Valid superblocks, newest first (the raw slots are kept for verify)."""
        self.raw_slots = {off: os.pread(self.fd, F.SLOT_SIZE, off) for off in F.SLOT_OFFSETS}
        slots = [F.unpack_slot(raw) for raw in self.raw_slots.values()]
        return sorted((sb for sb in slots if sb), key=lambda sb: -sb.seq)

    def next_seq(self) -> int:
        return self.superblock.seq + 1 if self.superblock else 1

    @staticmethod
    def slot_of(seq: int) -> int:
        """The slot offset superblock number seq is written to (they alternate)."""
        return F.SLOT_OFFSETS[seq % 2]

    def write_slot(self, sb: F.Superblock) -> None:
        """Write sb into its slot (not synced; raises OSError)."""
        self.write_all([F.pack_slot(sb)], self.slot_of(sb.seq))

    def zero_slot(self, offset: int) -> None:
        self.write_all([bytes(F.SLOT_SIZE)], offset)

    def use_superblock(self, sb: F.Superblock) -> None:
        """sb is durable: it is the newest now, the one before it the fallback."""
        self.superblocks = [sb] + [s for s in self.superblocks if s.seq != sb.seq][:1]

    def torn_slots(self) -> tuple[int, ...]:
        """Offsets of slots that hold bytes but no valid superblock (a slot write
        cut short; the other slot holds the previous one)."""
        return tuple(off for off in F.SLOT_OFFSETS
                     if any(raw := os.pread(self.fd, F.SLOT_SIZE, off)) and not F.unpack_slot(raw))

    # ---- bytes ---------------------------------------------------------------

    def write_all(self, bufs: list, pos: int) -> int:
        """Write bufs at pos, finishing short writes; returns the end position."""
        return write_all(self.io, bufs, pos)

    def map(self) -> mmap.mmap | None:
        """A read-only map of the file's data as it is now (None if empty).

        The map ends where the file's last data ends (`data_end`): a punched
        dead tail (a rolled-back bulk load, a failed sync's undo) is a hole to
        the file's end, and mapping it would populate gigabytes of zero pages at
        every open and refresh. A hole *inside* the data is mapped and reads as
        the zeros it holds: a copy tool (`cp`, `rsync -S`, `tar -S`) stores any
        run of zero bytes as a hole, and a zero run inside the log is data
        (zero vectors, padding), so the first hole is not the log's end.
        MAP_POPULATE maps every page up front: one call instead of a page
        fault per 4 KiB on first touch, which costs more than the read itself.
        Only for a file that fits in half the memory this process may use: a
        larger one would be read whole at every open, and evicted as it is."""
        size = min(max(self.data_end(), F.LOG_START), os.fstat(self.fd).st_size)
        if not size:
            return None
        flags = mmap.MAP_SHARED
        if 2 * size <= memory_limit():
            flags |= getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(self.fd, size, flags=flags, prot=mmap.PROT_READ)

    def data_end(self) -> int:
        """Where the file's last data ends: past it, to its size, the file reads as
        zeros (the file's size where holes cannot be told).

        A dead tail is punched: a hole, but for the partial block at the file's
        end, which a punch zeroes in place. So a short last run of data that
        holds only zeros is passed over too, and the search goes on before it."""
        fd = self.fd
        size = below = os.fstat(fd).st_size
        try:
            while below > 0:
                run = _last_data_run(fd, below)
                if run is None:
                    return 0
                start, end = run
                if end - start > _HOLE_STEP or any(os.pread(fd, end - start, start)):
                    return end
                below = start
            return 0
        except (OSError, AttributeError):   # no SEEK_DATA here: all of it
            return size

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def close(self) -> None:
        """Close the descriptor, releasing the write lock first: a mapping of the
        file (which arrays a caller still holds keep alive) holds its own copy of
        the descriptor, and with it the lock, until it is collected."""
        if self.fd < 0:
            return
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        except OSError:
            pass   # closing releases it anyway
        self.io.close()
        self.fd = -1


def _last_data_run(fd: int, below: int) -> tuple[int, int] | None:
    """(start, end) of the last run of data that starts before `below` (its end cut
    at `below`), or None. A binary search over SEEK_DATA (is there data in
    [p, below)?) finds it in a few dozen calls however many holes lie before it;
    a writer appending meanwhile only adds data past what it finds."""
    def data_from(p: int) -> int | None:
        try:
            d = os.lseek(fd, p, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return None
            raise
        return d if d < below else None

    if data_from(0) is None:
        return None
    lo, hi = 0, below          # data in [lo, below); none in [hi, below)
    while hi - lo > _HOLE_STEP:
        mid = (lo + hi) // 2
        if data_from(mid) is None:
            hi = mid
        else:
            lo = mid
    run = None
    pos = lo
    while pos < below and (start := data_from(pos)) is not None:   # the runs left
        pos = min(os.lseek(fd, start, os.SEEK_HOLE), below)
        run = (start, pos)
    return run


def write_all(io, bufs: list, pos: int) -> int:
    """Write bufs at pos through a FileIO, however large (one call writes at most
    ~2 GiB) and however short a write comes back; returns the end position."""
    if len(bufs) == 1 and type(bufs[0]) in (bytes, bytearray):   # a commit's frames, as one
        done = io.pwritev(bufs, pos)
        if done == len(bufs[0]):
            return pos + done
        if done <= 0:
            raise OSError(errno.EIO, "write made no progress", io.path)
        return write_all(io, [memoryview(bufs[0])[done:]], pos + done)
    views = [v for v in (memoryview(b).cast("B") for b in bufs) if len(v)]
    i = 0
    while i < len(views):
        done = io.pwritev(views[i:i + MAX_IOV], pos)
        if done <= 0:
            raise OSError(errno.EIO, "write made no progress", io.path)
        pos += done
        while i < len(views) and done >= len(views[i]):
            done -= len(views[i])
            i += 1
        if done:                  # short inside a buffer: the rest of it goes next
            views[i] = views[i][done:]
    return pos


def nbytes(bufs: list) -> int:
    if len(bufs) == 1 and type(bufs[0]) is bytes:     # a commit's frames, joined
        return len(bufs[0])
    return sum(len(b) if isinstance(b, (bytes, bytearray)) else b.nbytes for b in bufs)


def real_path(path: str) -> str:
    """The path with its symlinks followed, made absolute: what a connection names
    its file by from its open on (a link renamed over, or another working
    directory, would name another file later). A NUL byte is an OptionError."""
    try:
        return os.path.realpath(path)
    except ValueError as e:
        raise _not_a_path(path, e) from e


def _not_a_path(path: str, e: ValueError) -> OptionError:
    return OptionError(f"{path!r} is not a file path: {e}")    # no file has that name


def _open_regular(path: str, readonly: bool) -> int:
    """A descriptor of the regular file at path (created for a writer), or a typed
    error naming the path with the operating system's error as its cause. Opened
    without blocking (a FIFO with no writer would wait forever) and refused unless
    it is a regular file (a reader's O_RDONLY opens a directory or a device)."""
    flags = os.O_RDONLY if readonly else os.O_RDWR | os.O_CREAT
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    except ValueError as e:     # a NUL byte
        raise _not_a_path(path, e) from e
    except FileNotFoundError as e:
        raise FileMissingError(f"{path} does not exist; a read-only connection opens an "
                               "existing file" if readonly else
                               f"{path} cannot be created: its folder does not exist") from e
    except OSError as e:        # a directory, a path under a file, no permission, ...
        raise StorageError(f"{path}: cannot open it ({e.strerror or e})", e) from e
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        e = (IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
             if stat.S_ISDIR(mode) else OSError(errno.EINVAL, "not a regular file", path))
        raise StorageError(f"{path}: cannot open it ({e.strerror})", e) from e
    os.set_blocking(fd, True)
    return fd


def fsync_dir(path: str) -> None:
    d = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(d)
    finally:
        os.close(d)
