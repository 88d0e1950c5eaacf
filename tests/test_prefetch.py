"""Grouped prefetch (index/prefetch.py): a no-op off file mappings, the pages
it asks for cover the rows, rows read back the same after it, bad rows refused
before any system call, a replaced file falls back to advice by address, and
under a memory cap a prefetched group costs no more major faults than plain
reads."""
from __future__ import annotations

import mmap
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from varvedb.errors import OptionError
from varvedb.index import prefetch as P
from varvedb.storage.memory import memory_cgroup, memory_limit

DIM = 768


def write_rows(path, n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)
    with open(path, "wb") as f:
        f.write(rows.tobytes())
        f.flush()
        os.fsync(f.fileno())
    return rows


@pytest.fixture
def mapped(tmp_path):
    """(the rows written, an mmap of the file, the arena view on it)."""
    path = tmp_path / "rows.f32"
    rows = write_rows(path, 2000)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    yield rows, m, np.frombuffer(m, np.float32).reshape(-1, DIM)


@pytest.mark.parametrize("how", P.HOW)
def test_an_in_memory_array_is_a_no_op(how):
    arena = np.ones((100, 8), np.float32)
    assert P.prefetch_rows(arena, np.array([3, 50, 99]), how) is None
    assert P.page_ranges(arena, [3, 50])[0] is None
    anonymous = mmap.mmap(-1, 1 << 16)   # a mapping, but of no file
    on_anon = np.frombuffer(anonymous, np.float32).reshape(-1, 16)
    assert P.prefetch_rows(on_anon, [1, 2], how) is None
    assert P.page_ranges(on_anon, [1])[0] is None
    assert P.resident_fraction(arena, [1]) == 1.0


def test_ranges_cover_the_rows_pages_coalesced(mapped):
    _, m, arena = mapped
    rng = np.random.default_rng(3)
    row_bytes = DIM * 4
    for size in (1, 5, 40, 400):
        rows = rng.integers(0, len(arena), size)
        where, starts, lengths = P.page_ranges(arena, rows)
        assert where is not None and where.file_offset == 0
        want = set()
        for r in rows.tolist():
            want |= set(range(r * row_bytes // P.PAGE, ((r + 1) * row_bytes - 1) // P.PAGE + 1))
        got = [p for s, k in zip(starts, lengths) for p in range(s // P.PAGE, (s + k) // P.PAGE)]
        assert sorted(got) == sorted(want)          # every page once, no other
        assert np.all(starts % P.PAGE == 0) and np.all(lengths % P.PAGE == 0)
        assert np.all(starts[1:] > starts[:-1] + lengths[:-1])   # adjacent ones joined
    _, starts, lengths = P.page_ranges(arena, np.arange(10, 30))
    assert len(starts) == 1 and starts[0] == 10 * row_bytes // P.PAGE * P.PAGE


@pytest.mark.parametrize("how", P.HOW)
def test_rows_read_back_identical_after_prefetch(mapped, how):
    rows, _, arena = mapped
    pick = np.random.default_rng(5).integers(0, len(arena), 300)
    P.prefetch_rows(arena, pick, how)
    assert np.array_equal(arena[pick], rows[pick])
    assert P.resident_fraction(arena, pick) == 1.0   # read: so resident


def test_a_mapping_at_a_file_offset_is_found(tmp_path):
    path = tmp_path / "rows.f32"
    rows = write_rows(path, 600)
    at = 2 * mmap.ALLOCATIONGRANULARITY
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ, offset=at)
    arena = np.frombuffer(m, np.float32, count=len(m) // 4 // DIM * DIM).reshape(-1, DIM)
    where = P.page_ranges(arena, [0])[0]
    assert where.file_offset == at and where.path == str(path)
    for how in P.HOW:
        P.prefetch_rows(arena, [0, 7, 100], how)
    flat = rows.reshape(-1)[at // 4:]
    assert np.array_equal(arena[[0, 7, 100]], np.stack([flat[i * DIM:(i + 1) * DIM]
                                                          for i in (0, 7, 100)]))


def test_bad_rows_are_refused_before_any_system_call(mapped):
    _, m, arena = mapped
    n = len(arena)
    for bad in ([0, n], [-1], [5, n + 10**9]):
        for how in P.HOW:
            with pytest.raises(OptionError, match="out of range"):
                P.prefetch_rows(arena, np.array(bad, np.int64), how)
    with pytest.raises(OptionError, match="integers"):
        P.prefetch_rows(arena, np.array([1.0, 2.0]))
    with pytest.raises(OptionError, match="2-D"):
        P.prefetch_rows(arena.reshape(1, 1, -1), [0])
    with pytest.raises(OptionError, match="unknown prefetch"):
        P.prefetch_rows(arena, [1], "mmap")
    # the checks came first: the mapping was never looked up (nor its file opened)
    assert m not in P._mappings


def test_a_replaced_file_falls_back_to_advice_by_address(tmp_path):
    path = tmp_path / "rows.f32"
    rows = write_rows(path, 300)
    arenas = []
    for _ in range(2):
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        arenas.append(np.frombuffer(m, np.float32).reshape(-1, DIM))
    where = P.page_ranges(arenas[0], [0])[0]         # looked up while the name is its file's
    write_rows(tmp_path / "other", 300, seed=1)
    os.replace(tmp_path / "other", path)              # the name now is another file's
    assert where.path == str(path) and where.file_fd() == -1   # the other file: not used
    assert P.page_ranges(arenas[1], [0])[0] is None   # looked up after: "(deleted)", skipped
    for arena in arenas:
        P.prefetch_rows(arena, [3, 200])
        assert np.array_equal(arena[[3, 200]], rows[[3, 200]])


def test_auto_leaves_a_file_that_fits_alone(tmp_path):
    path = tmp_path / "rows.f32"
    write_rows(path, 2000)
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    arena = np.frombuffer(m, np.float32).reshape(-1, DIM)
    pick = np.arange(0, 2000, 97)
    assert P.page_ranges(arena, pick)[0].fits     # 6 MiB: it fits in memory
    P.prefetch_rows(arena, pick)                  # auto: nothing asked for
    assert P.resident_fraction(arena, pick) == 0.0
    P.prefetch_rows(arena, pick, "fadvise")       # asked: read in the background
    deadline = time.monotonic() + 600        # a hang guard only (the read is the kernel's)
    while P.resident_fraction(arena, pick) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert P.resident_fraction(arena, pick) == 1.0


def test_memory_limit_is_at_most_physical_memory():
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < memory_limit() <= physical
    assert memory_cgroup().startswith("/")


def test_a_reopened_databases_arena_is_seen_as_its_file(tmp_path):
    # the arena the rerank reads: after a checkpoint and reopen, a view on the map
    import varvedb as vv
    path = tmp_path / "db.varve"
    x = np.random.default_rng(2).standard_normal((3000, 64), dtype=np.float32)
    with vv.connect(path) as db:
        db.create_collection("items", {"v": vv.Vector(64)}).insert_arrays(id=np.arange(3000), v=x)
        db.checkpoint()
    with vv.connect(path) as db:
        column = db.engine.table("items").columns["v"]
        arena, norms = column.frozen(3000)
        where, starts, _ = P.page_ranges(arena, [0, 2999])
        assert where is not None and where.path == str(path) and len(starts) == 2
        pick = np.array([5, 1000, 2999])
        P.prefetch_rows(arena, pick, "fadvise")
        P.prefetch_rows(arena, pick, "madvise")
        assert np.array_equal(arena[pick], x[pick])
        where, starts, lengths = P.page_ranges(norms, pick)   # the norms: 1-D rows
        assert where is not None
        at = norms.ctypes.data - where.addr + pick * norms.itemsize
        assert all(np.any((starts <= a) & (a + norms.itemsize <= starts + lengths)) for a in at)
        P.prefetch_rows(norms, pick)


def test_advise_random_keeps_the_rows(mapped):
    rows, _, arena = mapped
    P.advise_random(arena[10:500])          # fits in memory: left as it is
    P.advise_random(arena[10:500], force=True)
    P.advise_random(np.zeros((4, 4)))       # not mapped: nothing to advise
    pick = np.array([11, 12, 499, 1999])
    P.prefetch_rows(arena, pick)
    assert np.array_equal(arena[pick], rows[pick])


_CAPPED = """
import mmap, os, resource, sys
import numpy as np
from varvedb.index import prefetch as P
path, cgroup = sys.argv[1], sys.argv[2]
f = open(path, "rb")
warm = np.frombuffer(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ), np.float32).reshape(-1, 768)
P.prefetch_rows(warm, [0], "fadvise")        # kernels loaded before the cap
with open(cgroup + "/cgroup.procs", "w") as g:
    g.write(str(os.getpid()))
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)   # looked up under the cap
m.madvise(mmap.MADV_RANDOM)          # a fault reads its own page, not its neighbours'
arena = np.frombuffer(m, np.float32).reshape(-1, 768)
os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)   # cold
rng = np.random.default_rng(11)
out = [int(P.page_ranges(arena, [0])[0].fits)]
for how in ("none", "auto", "none", "auto"):
    rows = rng.integers(0, len(arena), 100)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    P.prefetch_rows(arena, rows, how)
    arena[rows].sum()
    out.append(resource.getrusage(resource.RUSAGE_SELF).ru_majflt - before)
print(*out)
"""


def _real_disk(path) -> bool:
    with open("/proc/mounts") as f:
        mounts = [line.split()[1:3] for line in f]
    best = max((mp for mp, _ in mounts if str(path).startswith(mp)), key=len, default="/")
    return dict(mounts).get(best) not in ("tmpfs", "ramfs")


@pytest.mark.skipif(not os.access("/sys/fs/cgroup/memory", os.W_OK),
                    reason="needs a writable cgroup v1 memory controller")
def test_under_a_memory_cap_a_prefetched_group_faults_no_more(tmp_path):
    if not _real_disk(tmp_path):
        pytest.skip("major faults need a file on a disk, not tmpfs")
    path = tmp_path / "rows.f32"
    write_rows(path, (64 << 20) // (DIM * 4))               # 64 MiB
    cgroup = f"/sys/fs/cgroup/memory/varvedb-test-prefetch-{os.getpid()}"
    os.mkdir(cgroup)
    try:
        with open(cgroup + "/memory.limit_in_bytes", "w") as g:
            g.write(str(16 << 20))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(_CAPPED), str(path), cgroup],
                              capture_output=True, text=True, env=env, timeout=1800)
        assert done.returncode == 0, done.stderr
        fits, plain1, pre1, plain2, pre2 = map(int, done.stdout.split())
        assert not fits                         # 64 MiB under a 16 MiB cap: auto prefetches
        assert plain1 >= 50 and plain2 >= 50                # cold rows did fault
        assert pre1 <= plain1 and pre2 <= plain2
    finally:
        os.rmdir(cgroup)
