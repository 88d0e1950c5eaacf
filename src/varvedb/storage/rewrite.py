"""`NewLog`: a new varvedb file written front to back, for vacuum.

Its header carries the old file's id and creation time (it is the same
database); its first commit is an ANCHOR (format.py): the frames of the base
state, under a commit record that gives the version, timestamp and chain hash
of the oldest version kept and the chain hash of the last one dropped. Then
the frames of every later version are copied byte for byte from the old file,
so their digests and chain hashes are unchanged. Nothing of it is durable
before `finish` (fsync); the caller renames it into place.

Its name is the old file's with `.vacuum-` and a random suffix (`new_path`), made
with O_EXCL: a file already at a name (another database a user called
`notes.vacuum`, say) is never the one written or removed. A vacuum cut short
leaves its file behind; `remove_leftovers` removes those and only those (this
database's file id in the header, no one holding its lock).
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import stat

from . import fileio
from . import format as F
from .backup import copy_range
from .file import write_all

LEFTOVER = ".vacuum-"   # path + LEFTOVER + a random suffix: a vacuum's new file


def new_path(path: str) -> str:
    """A name for a vacuum's new file beside `path` (created with O_EXCL by NewLog)."""
    return f"{path}{LEFTOVER}{secrets.token_hex(8)}"


def remove_leftovers(path: str, file_id: bytes) -> None:
    """Remove the new files earlier vacuums of this database left when cut short:
    regular files named exactly as new_path names them (16 hex digits), empty or
    with a header that carries `file_id`, whose lock no one holds. Anything else is
    left as it is (a backup, `notes.vacuum-before`, carries the same file id)."""
    folder, base = os.path.split(path)
    ours = re.compile(re.escape(base + LEFTOVER) + "[0-9a-f]{16}")   # as new_path names
    try:
        names = [n for n in os.listdir(folder or ".") if ours.fullmatch(n)]
    except OSError:
        return
    for name in names:
        p = os.path.join(folder, name)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            # empty: a vacuum killed between making the file and writing its header
            # (nothing in it to lose); else its header must be this database's
            if st.st_size:
                try:
                    head = F.unpack_header(os.pread(fd, F.HEADER_SIZE, 0))
                except ValueError:      # a bad checksum: not provably ours
                    continue
                if head is None or head.file_id != file_id:
                    continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    continue            # held: a live file, whatever its name
                raise
            os.unlink(p)
        except OSError:
            pass                        # a leftover that stays is only space
        finally:
            os.close(fd)


class NewLog:
    def __init__(self, path: str, file_id: bytes, created_us: int):
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self.io = fileio.open_file(fd, path)
        block = bytearray(F.LOG_START)
        block[:F.HEADER_SIZE] = F.pack_header(file_id, created_us)
        self.pos = 0
        self._write([bytes(block)])
        self._digests: list[bytes] = []

    def _write(self, bufs: list) -> None:
        self.pos = write_all(self.io, bufs, self.pos)

    def frame(self, kind: int, parts: list, length: int) -> int:
        """Append one frame of the anchor commit; returns its payload's offset."""
        digest = F.frame_hash(kind, length, parts)
        at = self.pos + F.FRAME_HEADER_SIZE
        gap = F.pad(length) - length
        self._write([F.pack_frame_header(kind, length, digest), *parts]
                    + ([bytes(gap)] if gap else []))
        self._digests.append(digest)
        return at

    def anchor(self, version: int, timestamp_us: int, rows_changed: int, prev_chain: bytes,
               chain: bytes) -> None:
        """The commit record over the frames so far, as the ANCHOR commit."""
        digest = hashlib.sha256(b"".join(self._digests)).digest()
        rec = F.CommitRecord(version, timestamp_us, len(self._digests), rows_changed, digest,
                             prev_chain, chain)
        self.frame(F.Kind.ANCHOR, [F.pack_commit(rec)], F.COMMIT_SIZE)
        self._digests = []

    def copy(self, src_fd: int, start: int, end: int, progress: bool | None) -> None:
        """Append bytes [start, end) of another file (whole frames, aligned)."""
        # copy_file_range writes at its own offsets: shift them by where this log is
        copy_range(src_fd, self.io.fd, start, end, progress, dst_at=self.pos, desc="vacuum: copy")
        self.pos += end - start

    def finish(self) -> None:
        self.io.fsync()
        self.close()

    def close(self) -> None:
        if self.io.fd >= 0:
            self.io.close()
            self.io.fd = -1
