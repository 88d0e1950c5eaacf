"""`backup`: an online, consistent copy of a file at a commit boundary.

The log is append-only, so the file up to the end of a durable commit is a
whole database as of that commit, and stays so while the writer goes on
appending after it. A backup copies that prefix (in the kernel, with
copy_file_range) into DEST.tmp beside DEST, writes its own superblock
slots — only those naming a checkpoint inside the prefix: a slot the writer
rewrites meanwhile may name one past it — fsyncs the copy, renames it into
place, fsyncs the folder, and verifies it: the copy's chain must reach the
version it was taken at. A failure at any point leaves no DEST.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from ..errors import CorruptFileError, OptionError, StorageError
from . import format as F
from .file import fsync_dir

CHUNK = 64 << 20
PROGRESS_FROM = 256 << 20   # a bar for copies at least this large


@dataclass
class BackupInfo:
    path: str
    version: int       # the copy answers as of this version, and holds nothing newer
    bytes: int


def copy_prefix(src_fd: int, end: int, superblocks, dest: str, progress: bool | None = None
                ) -> int:
    """Copy bytes [0, end) of src_fd into a new file `dest` with its own slots
    (superblocks naming checkpoints before `end`); fsynced, renamed into place.
    Returns the bytes copied."""
    dest = os.fspath(dest)
    if os.path.exists(dest):
        raise OptionError(f"{dest} exists: a backup never overwrites a file")
    tmp = dest + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise OptionError(f"{tmp} exists: another backup to {dest} is under way, or one "
                          "was cut short (remove it)") from None
    except ValueError as e:     # a NUL byte: no file can have that name
        raise OptionError(f"{dest!r} is not a file path: {e}") from e
    except OSError as e:
        raise StorageError(f"{dest}: could not create the backup: {e.strerror or e}", e) from e
    try:
        try:
            os.pwrite(fd, head_bytes(src_fd, end, superblocks), 0)
            copy_range(src_fd, fd, F.LOG_START, end, progress)
            os.fsync(fd)
        finally:
            os.close(fd)
        place_new(tmp, dest)
    except OSError as e:
        remove_quietly(tmp)
        raise StorageError(f"{dest}: the backup failed ({e.strerror or e}); nothing was "
                           "left there", e) from e
    except BaseException:
        remove_quietly(tmp)
        raise
    return end


def place_new(tmp: str, dest: str) -> None:
    """Give the finished copy at `tmp` the name `dest`, never replacing a file that
    took that name meanwhile (a rename would: another backup to it, a user's file):
    a hard link, which fails on an existing name, then the tmp name unlinked; then
    the folder fsynced. OptionError, `tmp` removed, when `dest` exists. Where the
    file system has no hard links, a rename after one more look."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        remove_quietly(tmp)
        raise OptionError(f"{dest} exists: a backup never overwrites a file") from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if os.path.exists(dest):
            remove_quietly(tmp)
            raise OptionError(f"{dest} exists: a backup never overwrites a file") from None
        os.rename(tmp, dest)
    else:
        remove_quietly(tmp)      # (the copy is in place: a tmp name left is only space)
    fsync_dir(dest)


def head_bytes(src_fd: int, end: int, superblocks) -> bytes:
    """The copy's first F.LOG_START bytes: the source's, with its own slots
    (only those naming a checkpoint before `end`)."""
    head = bytearray(os.pread(src_fd, F.LOG_START, 0))
    for off in F.SLOT_OFFSETS:
        head[off:off + F.SLOT_SIZE] = bytes(F.SLOT_SIZE)
    for sb in superblocks:
        if sb.checkpoint_offset and sb.log_end <= end:
            off = F.SLOT_OFFSETS[sb.seq % 2]
            head[off:off + F.SLOT_SIZE] = F.pack_slot(sb)
    return bytes(head)


STREAM_CHUNK = 1 << 20


def stream_prefix(src_fd: int, end: int, superblocks, chunk: int = STREAM_CHUNK):
    """The bytes copy_prefix would write, as an iterator of chunks of at most
    `chunk` bytes (a backup sent over the network: the server's GET /backup).
    It reads from its own duplicate of src_fd, so a close or a vacuum's swap of
    the source meanwhile leaves it reading the same file; it holds one chunk at
    a time. The caller makes the iterator and must exhaust or close it."""
    fd = os.dup(src_fd)      # now, not at the first chunk
    try:
        head = head_bytes(fd, end, superblocks)
    except BaseException:
        os.close(fd)
        raise
    return _chunks(fd, end, head, chunk)


def _chunks(fd: int, end: int, head: bytes, chunk: int):
    try:
        yield head
        yield from _range(fd, F.LOG_START, end, chunk)
    finally:
        os.close(fd)


def read_chunks(src_fd: int, start: int, end: int, chunk: int = STREAM_CHUNK):
    """Bytes [start, end) of src_fd as chunks of at most `chunk` bytes, from a dup
    of the fd made now (a read replica's pull: storage/shipping.py). The caller
    must exhaust or close the iterator."""
    fd = os.dup(src_fd)

    def chunks():
        try:
            yield from _range(fd, start, end, chunk)
        finally:
            os.close(fd)
    return chunks()


def _range(fd: int, pos: int, end: int, chunk: int):
    while pos < end:
        data = os.pread(fd, min(chunk, end - pos), pos)
        if not data:
            raise StorageError(f"the file ended at byte {pos:,}, before {end:,}")
        pos += len(data)
        yield data


def copy_range(src: int, dst: int, start: int, end: int, progress: bool | None,
          dst_at: int | None = None, desc: str = "backup") -> None:
    """Copy [start, end) of src to dst at dst_at (default: the same offsets)."""
    bar = None
    if progress or (progress is None and end - start >= PROGRESS_FROM):
        from tqdm import tqdm
        bar = tqdm(total=end - start, unit="B", unit_scale=True, desc=desc,
                   disable=None if progress is None else False)
    shift = 0 if dst_at is None else dst_at - start
    pos = start
    try:
        while pos < end:
            want = min(CHUNK, end - pos)
            try:
                done = os.copy_file_range(src, dst, want, pos, pos + shift)
            except OSError as e:
                if e.errno not in (18, 22, 38, 95):    # EXDEV, EINVAL, ENOSYS, EOPNOTSUPP
                    raise
                done = os.pwrite(dst, os.pread(src, want, pos), pos + shift)
            if done <= 0:
                raise OSError(5, "the copy made no progress")
            pos += done
            if bar is not None:
                bar.update(done)
    finally:
        if bar is not None:
            bar.close()


def check_copy(dest: str, version: int) -> None:
    """The copy verifies whole up to `version`; else it is removed and
    CorruptFileError raised (the source changed under the copy: a bug)."""
    from .verify import verify_file
    report = verify_file(dest, expect_version=version)
    if not report.ok:
        remove_quietly(dest)
        raise CorruptFileError(f"the backup at {dest} did not verify ({report.first_break}); "
                               "it was removed")


def remove_quietly(path: str) -> None:
    """Remove path if it is there (a copy or a new file a failure left)."""
    try:
        os.unlink(path)
    except OSError:
        pass
