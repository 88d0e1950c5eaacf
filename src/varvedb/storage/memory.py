"""The memory this process may use: physical memory, or its memory cgroup's limit.

Why: what fits in memory decides how a mapped file is read. The database file
is mapped with every page populated only when it fits (storage/file.py), and
the rows of a file that does not fit are prefetched in groups before a rerank
reads them (index/prefetch.py). Under a container's or a test's memory cgroup
(cgroup v1 `memory.limit_in_bytes`, v2 `memory.max`) the page cache counts
against the group's limit, so that limit, not the machine's RAM, is what fits.
"""
from __future__ import annotations

import os


def memory_cgroup() -> str:
    """This process's cgroup v1 memory group ("/a/b"), or v2's group if none."""
    v2 = "/"
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(","):
                    return path
                if controllers == "":
                    v2 = path
    except OSError:
        pass
    return v2


def memory_limit() -> int:
    """The bytes this process may use: physical memory, or less where its
    memory cgroup (or one above it) has a lower limit (v1 or v2)."""
    limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    group = memory_cgroup()
    for root, name in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
                       ("/sys/fs/cgroup", "memory.max")):
        path = group
        while True:
            try:
                with open(f"{root}{path.rstrip('/')}/{name}") as f:
                    text = f.read().strip()
                if text.isdigit():
                    limit = min(limit, int(text))
            except OSError:
                pass
            if path in ("/", ""):
                break
            path = path.rsplit("/", 1)[0] or "/"
    return limit
