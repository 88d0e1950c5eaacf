"""Grouped prefetch, measured: the time to read a random group of rows of a
mapped file after each way of prefetching them, under a memory cap or none.

    python -m varvedb_bench.prefetch FILE [--rows 1000000] [--dim 768]
        [--cap-mb 1024] [--groups 300] [--sizes 40,100,400] [--how random,fadvise/random,...]

FILE holds rows x dim float32 values; it is written once (random values,
fsynced) if missing. With --cap-mb the process first moves itself into a
cgroup v1 memory group of that limit (the page cache counts against it; the
group is removed at exit) and evicts FILE's pages; without it FILE is read
whole first, so that every page is resident. Per group size, the ways are
interleaved group by group (each group fresh random rows), so that they share
the page cache's state fairly. A group's time is prefetch + reading every row
(a sum of arena[rows]); bytes read and major faults are the process's
(/proc/self/io read_bytes, getrusage ru_majflt) across it. A way is one of
prefetch.HOW, pread (PreadPool) or uring (UringReads), through the plain
mapping; or WAY/random: the same through a second mapping of the file advised
MADV_RANDOM (a fault reads its own page, not the read-around window);
`random` is none/random; `mincore` the residency check alone
(resident_fraction).
"""
from __future__ import annotations

import argparse
import mmap
import os
import resource
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from varvedb.index import prefetch as P
from varvedb.storage.memory import memory_cgroup
from . import cgroup


def write_file(path: str, rows: int, dim: int) -> None:
    rng = np.random.default_rng(13)
    with open(path, "wb") as f:
        for i in range(0, rows, 50_000):
            f.write(rng.standard_normal((min(50_000, rows - i), dim), dtype=np.float32).tobytes())
        f.flush()
        os.fsync(f.fileno())


class MemoryCap:
    """This process inside a fresh cgroup v1 memory group of `limit` bytes
    (varvedb_bench/cgroup.py), moved back to its own group on close."""

    def __init__(self, limit: int):
        self.back = os.path.join(cgroup.ROOT, memory_cgroup().lstrip("/"), "cgroup.procs")
        self.group = cgroup.MemoryGroup(limit, "prefetch").create()
        self.group.add(os.getpid())

    def close(self) -> None:
        with open(self.back, "w") as f:
            f.write(str(os.getpid()))
        self.group.remove()


class PreadPool:
    """The pool way, measured and not kept in index/prefetch.py (it lost to
    fadvise at every size, capped or not): a few threads pread the ranges into
    scratch memory, so that the page cache holds them; `read` waits for all."""

    def __init__(self, threads: int = 8):
        self.threads = threads
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="bench-pread")
        self._scratch = threading.local()

    def _read_some(self, fd: int, offsets: list, lengths: list) -> None:
        buf = getattr(self._scratch, "buf", None)
        if buf is None or len(buf) < max(lengths):
            buf = self._scratch.buf = bytearray(max(max(lengths), 1 << 16))
        view = memoryview(buf)
        for off, k in zip(offsets, lengths):
            os.preadv(fd, [view[:k]], off)

    def read(self, array: np.ndarray, rows: np.ndarray, fd: int) -> None:
        where, starts, lengths = P.page_ranges(array, rows)
        starts = starts + where.file_offset
        parts = min(self.threads, len(starts))
        # interleaved shares: each thread's ranges spread over the whole group
        futures = [self._executor.submit(self._read_some, fd, starts[i::parts].tolist(),
                                         lengths[i::parts].tolist()) for i in range(parts)]
        for f in futures:
            f.result()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)


class UringReads:
    """The io_uring way, measured and not kept: one read per range into
    scratch memory, all submitted in one io_uring_enter and waited for, from
    the `liburing` package (an alpha binding; not a dependency: the way is
    skipped without it)."""

    def __init__(self, entries: int = 1024):
        import liburing
        self.L = liburing
        self.ring = liburing.Ring()
        liburing.io_uring_queue_init(entries, self.ring)
        self.cqe = liburing.Cqe()
        self.entries = entries

    def read(self, array: np.ndarray, rows: np.ndarray, fd: int) -> None:
        L, ring = self.L, self.ring
        where, starts, lengths = P.page_ranges(array, rows)
        starts = (starts + where.file_offset).tolist()
        lengths = lengths.tolist()
        for at in range(0, len(starts), self.entries):
            bufs = []
            for off, k in zip(starts[at:at + self.entries], lengths[at:at + self.entries]):
                buf = bytearray(k)
                bufs.append(buf)
                L.io_uring_prep_read(L.io_uring_get_sqe(ring), fd, buf, off)
            L.io_uring_submit_and_wait(ring, len(bufs))
            seen = 0
            while seen < len(bufs):
                L.io_uring_wait_cqe(ring, self.cqe)
                ready = L.io_uring_cq_ready(ring)
                L.io_uring_cq_advance(ring, ready)
                seen += ready

    def shutdown(self) -> None:
        self.L.io_uring_queue_exit(self.ring)


def read_bytes() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def run(args) -> None:
    if not os.path.exists(args.file):
        write_file(args.file, args.rows, args.dim)
    cap = MemoryCap(args.cap_mb << 20) if args.cap_mb else None
    try:
        measure(args)
    finally:
        if cap is not None:
            cap.close()


def measure(args) -> None:
    f = open(args.file, "rb")
    size = os.fstat(f.fileno()).st_size
    if args.cap_mb:
        os.posix_fadvise(f.fileno(), 0, size, os.POSIX_FADV_DONTNEED)   # start cold
    else:
        while f.read(64 << 20):   # every page resident
            pass
    plain = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    rand = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    rand.madvise(mmap.MADV_RANDOM)
    arenas = {m: np.frombuffer(m, np.float32).reshape(-1, args.dim) for m in (plain, rand)}
    a_plain, a_rand = arenas[plain], arenas[rand]
    n = len(a_plain)
    hows = args.how.split(",")
    readers = {"pread": PreadPool()}
    if any(h.startswith("uring") for h in hows):
        try:
            readers["uring"] = UringReads()
        except ImportError:
            print("no liburing: the uring way is skipped")
            hows = [h for h in hows if not h.startswith("uring")]
    rng = np.random.default_rng(7)
    print(f"file {size / 2**30:.2f} GiB, {n} x {args.dim} f32, cap "
          f"{str(args.cap_mb) + ' MiB' if args.cap_mb else 'none'}, {args.groups} groups"
          f" per way, warm-up {args.warmup}", flush=True)
    for r in [int(x) for x in args.sizes.split(",")]:
        res = {h: ([], [], [], []) for h in hows}   # total ms, prefetch ms, bytes, majflt
        for g in range(args.warmup + args.groups):
            order = hows[g % len(hows):] + hows[:g % len(hows)]   # rotate who goes first
            for h in order:
                rows = rng.integers(0, n, r)
                way, _, mapping = h.partition("/")
                if h == "random":
                    way, mapping = "none", "random"
                arena = a_rand if mapping == "random" else a_plain
                b0, f0 = read_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_majflt
                t0 = time.perf_counter_ns()
                if way == "mincore":
                    P.resident_fraction(arena, rows)
                    t1 = t2 = time.perf_counter_ns()
                else:
                    if way in readers:
                        readers[way].read(arena, rows, f.fileno())
                    elif way != "none":
                        P.prefetch_rows(arena, rows, way)
                    t1 = time.perf_counter_ns()
                    arena[rows].sum()
                    t2 = time.perf_counter_ns()
                if g >= args.warmup:
                    out = res[h]
                    out[0].append((t2 - t0) / 1e6)
                    out[1].append((t1 - t0) / 1e6)
                    out[2].append(read_bytes() - b0)
                    out[3].append(resource.getrusage(resource.RUSAGE_SELF).ru_majflt - f0)
        print(f"\nR = {r}: ms per group (prefetch + read), median [p99] (min-max);"
              " prefetch part median; KiB read and major faults per group, median (mean)")
        for h in hows:
            tot, pre, by, mf = (np.array(x) for x in res[h])
            print(f"  {h:14s} {np.median(tot):8.3f} [{np.percentile(tot, 99):8.3f}] "
                  f"({tot.min():.3f}-{tot.max():.3f})  pre {np.median(pre):7.3f}  "
                  f"KiB {np.median(by) / 1024:8.0f} ({by.mean() / 1024:8.0f})  "
                  f"majflt {statistics.median(mf.tolist()):6.0f} ({mf.mean():6.1f})", flush=True)
    for reader in readers.values():
        reader.shutdown()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--cap-mb", type=int, default=0)
    p.add_argument("--groups", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--sizes", default="40,100,400")
    p.add_argument("--how", default="random,madvise/random,fadvise/random,pread/random,mincore")
    run(p.parse_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
