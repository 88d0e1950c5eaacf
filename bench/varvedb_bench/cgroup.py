"""A cgroup v1 memory group for one bench worker: the cap of `varvedb bench ann --memory-cap`.

The group is a fresh folder under ROOT (`/sys/fs/cgroup/memory`) with
`memory.limit_in_bytes` set; a process written to its `cgroup.procs` (the
worker, before it runs any Python, and so every server it starts) is charged
for its anonymous memory *and* for the page cache it reads in, so a file
larger than the cap cannot stay cached. Past the limit the kernel reclaims
the group's page cache; when only anonymous memory is left it kills a
process of the group (the report says "OOM at cap"). `remove` moves any
process left back to the parent and deletes the group, also after a failure.
Also here: bytes read from disk (/proc/PID/io) and dropping the page cache.
"""
from __future__ import annotations

import itertools
import os
import re
import time

from varvedb.errors import OptionError

ROOT = "/sys/fs/cgroup/memory"      # tests point it at a folder that is not a cgroup
DROP_CACHES = "/proc/sys/vm/drop_caches"
_serial = itertools.count()
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """'64M', '1G', '512MB', '1048576' -> bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise OptionError(f"{text!r} is not a memory size (e.g. 64M, 1G, 512MB)")
    size = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if size < 2**20:
        raise OptionError(f"a memory cap of {text!r} is under 1 MB")
    return size


class MemoryGroup:
    """One memory cgroup: create(), add(pid), figures, remove()."""

    def __init__(self, limit_bytes: int, label: str = "bench"):
        self.limit = int(limit_bytes)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", label)
        self.path = os.path.join(ROOT, f"varvedb-{name}-{os.getpid()}-{next(_serial)}")
        self.root = ROOT

    def create(self) -> "MemoryGroup":
        """Make the group, or raise OptionError saying why a cap cannot be set here."""
        if not os.path.isfile(os.path.join(self.root, "memory.limit_in_bytes")):
            raise OptionError(f"--memory-cap needs the cgroup v1 memory controller at "
                              f"{self.root} (memory.limit_in_bytes not found there)")
        try:
            os.mkdir(self.path)
        except OSError as e:
            raise OptionError(f"--memory-cap: cannot create a memory cgroup under "
                              f"{self.root}: {e}") from None
        try:
            self._write("memory.limit_in_bytes", self.limit)
        except OSError as e:
            self.remove()
            raise OptionError(f"--memory-cap: cannot set memory.limit_in_bytes in "
                              f"{self.path}: {e}") from None
        return self

    def _write(self, name: str, value) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(f"{value}\n")

    def _read(self, name: str) -> str:
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def add(self, pid: int) -> None:
        self._write("cgroup.procs", pid)

    def join_fn(self):
        """For Popen(preexec_fn=...): the child joins the group before it execs."""
        procs = os.path.join(self.path, "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write("0\n")      # "0": the writing process itself
        return join

    def pids(self) -> list[int]:
        return [int(x) for x in self._read("cgroup.procs").split()]

    def max_usage(self) -> int:
        """Peak bytes charged to the group: anonymous memory plus page cache."""
        return int(self._read("memory.max_usage_in_bytes"))

    def oom_kills(self) -> int:
        """Processes of the group the kernel killed for memory (0 where not counted)."""
        for line in self._read("memory.oom_control").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        """Move what is left to the parent group, then delete the group."""
        if not os.path.isdir(self.path):
            return
        for _ in range(50):
            try:
                for pid in self.pids():
                    try:
                        with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
                            f.write(f"{pid}\n")
                    except OSError:
                        pass        # it exited meanwhile
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)     # a process still exiting holds the group busy
        os.rmdir(self.path)         # the last try raises

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.remove()


def read_bytes(pids: list[int]) -> dict[int, int]:
    """Bytes each process caused to be read from storage (/proc/PID/io read_bytes:
    page cache misses, mapped-file faults included; cache hits are not counted)."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/io") as f:
                for line in f:
                    if line.startswith("read_bytes:"):
                        out[pid] = int(line.split()[1])
                        break
        except OSError:
            pass            # exited
    return out


def evict(folder: str) -> None:
    """sync, then drop the cached pages of every file under folder (posix_fadvise
    DONTNEED; pages a live process maps are kept). A cgroup is charged only for
    the pages it brings into the cache: pages an earlier process left there
    (the build, another round) would be served to a capped worker free of
    charge, so each capped worker starts with the engine's files out of the cache."""
    os.sync()
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def drop_page_cache() -> None:
    """sync, then drop the clean page cache (and dentries, inodes) system-wide.
    Pages a live process maps are kept: callers drop before the process starts."""
    os.sync()
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError as e:
        raise OptionError(f"--cold needs {DROP_CACHES} to be writable (root): {e}") from None
