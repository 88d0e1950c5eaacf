"""kernels.jit's disk cache: keyed on the source of the whole kernels package.

A kernel's machine code holds the constants and inlined helpers of the modules
it imports, so a cache keyed on the kernel's own file alone would serve stale
code after a change to, say, kernels/distance.py.
"""
import math
import shutil
from pathlib import Path

import numba
import numpy as np
import pytest

import varvedb.kernels.jit as jit


def _doubled(x):
    return x * 2


def _compiled(tmp_path, monkeypatch):
    # a new dispatcher of the same function: it loads from the cache if it can
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    kernel = jit.njit(cache=True)(_doubled)
    assert kernel(np.int64(21)) == 42
    return kernel.stats


def test_the_same_sources_hit_and_a_changed_stamp_misses(tmp_path, monkeypatch):
    first = _compiled(tmp_path, monkeypatch)
    assert sum(first.cache_misses.values()) == 1 and not first.cache_hits
    again = _compiled(tmp_path, monkeypatch)
    assert sum(again.cache_hits.values()) == 1 and not again.cache_misses
    monkeypatch.setattr(jit, "source_stamp", lambda: "another kernels package")
    changed = _compiled(tmp_path, monkeypatch)
    assert sum(changed.cache_misses.values()) == 1 and not changed.cache_hits


def test_the_stamp_changes_with_any_module_of_the_package(tmp_path):
    package = Path(jit.__file__).parent
    copy = tmp_path / "kernels"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert jit.source_stamp(copy) == jit.source_stamp(package)
    distance = copy / "distance.py"
    distance.write_text(distance.read_text().replace("METRIC_HAMMING = 4", "METRIC_HAMMING = 5"))
    jit.source_stamp.cache_clear()
    assert jit.source_stamp(copy) != jit.source_stamp(package)
    (copy / "distance.py").unlink()
    jit.source_stamp.cache_clear()
    assert jit.source_stamp(copy) != jit.source_stamp(package)


def _fast_flags(kernel) -> bool:
    return any(" fast " in line or "reassoc" in line or "contract" in line
               for code in kernel.inspect_llvm().values() for line in code.splitlines()
               if " fadd " in line or " fmul " in line)


def _elf_text(obj: bytes, at: int) -> int:
    """The offset in `obj` of the first byte of machine code (the first non-empty
    .text, or .ltext of numba's large code model) of the ELF64 object at `at`."""
    import struct
    shoff, = struct.unpack_from("<Q", obj, at + 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", obj, at + 0x3A)

    def section(i):     # (name offset, file offset, size)
        h = at + shoff + i * shentsize
        return struct.unpack_from("<I", obj, h)[0], *struct.unpack_from("<QQ", obj, h + 24)
    names = section(shstrndx)[1]
    for i in range(shnum):
        name, offset, size = section(i)
        if obj[at + names + name:].startswith((b".text", b".ltext")) and size:
            return at + offset
    raise AssertionError("no .text section")


def test_a_damaged_byte_of_cached_machine_code_that_still_unpickles_is_compiled_again(
        tmp_path, monkeypatch):
    """numba's .nbc files carried no checksum: a byte of machine code damaged on
    disk unpickles as well as a sound one, and the kernel ran it (a cache hit). Each
    file now carries a SHA-256 of its bytes, checked before they are unpickled: the
    damaged one is a miss, compiled again and written over."""
    import pickle
    _compiled(tmp_path, monkeypatch)
    nbc, = (tmp_path / "cache").rglob("*_doubled*.nbc")
    data = bytearray(nbc.read_bytes())
    code = _elf_text(data, data.index(b"\x7fELF"))
    data[code] ^= 0xFF
    nbc.write_bytes(bytes(data))
    tag = b"varvedb-nbc-sha256\n"
    body = bytes(data[len(tag) + 32:] if data.startswith(tag) else data)
    pickle.loads(body)                                  # it still unpickles
    kernel = jit.njit(cache=True)(_doubled)
    kernel.compile((numba.int64,))                      # loaded or compiled, not run
    assert sum(kernel.stats.cache_misses.values()) == 1 and not kernel.stats.cache_hits
    assert kernel(np.int64(21)) == 42
    again = _compiled(tmp_path, monkeypatch)            # written over: sound again
    assert sum(again.cache_hits.values()) == 1 and not again.cache_misses


def test_a_kernel_first_compiled_under_a_fastmath_caller_keeps_its_own_flags():
    # numba gives a callee whose options leave fastmath unset its first caller's
    # flags; jit.njit sets them, so the callee's code (and what the disk cache
    # keeps of it) is the same whoever compiled it first
    def squares(a):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i] * a[i]
        return s

    inner = jit.njit()(squares)

    @jit.njit(fastmath=True)
    def outer(a):
        return inner(a) + a[0] * a[1]

    outer(np.arange(8.0))
    assert not _fast_flags(inner)
    assert _fast_flags(outer)     # the check sees fastmath where it is asked for


def _four_lanes(terms: list) -> float:
    """Four interleaved float64 partial sums (lane l: terms l, l+4, ...), the tail
    into lane 0, then (a0 + a1) + (a2 + a3)."""
    main = len(terms) - len(terms) % 4
    lanes = [0.0, 0.0, 0.0, 0.0]
    for j in range(main):
        lanes[j % 4] += terms[j]
    for j in range(main, len(terms)):
        lanes[0] += terms[j]
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])


def _fixed_order(x: np.ndarray, q: np.ndarray, metric: int) -> float:
    """distance.exact_row_distances' score in plain Python: the terms (and a cosine's
    |row|^2) in four lanes (_four_lanes), the query's norm in one serial sum."""
    from varvedb.kernels import distance as d
    xs, qs = [float(v) for v in x], [float(v) for v in q]
    if metric == d.METRIC_L2:
        terms = [(a - b) * (a - b) for a, b in zip(xs, qs)]
    elif metric == d.METRIC_L1:
        terms = [abs(a - b) for a, b in zip(xs, qs)]
    else:
        terms = [a * b for a, b in zip(xs, qs)]
    s = _four_lanes(terms)
    if metric == d.METRIC_L2:
        return math.sqrt(s)
    if metric in (d.METRIC_L1,):
        return s
    if metric == d.METRIC_DOT:
        return -s
    xx, qq = _four_lanes([a * a for a in xs]), 0.0     # |row|^2 as the dot is summed
    for b in qs:
        qq += b * b
    if xx == 0.0 or qq == 0.0:
        return 1.0
    return 1.0 - min(1.0, max(-1.0, s / (math.sqrt(xx) * math.sqrt(qq))))


def test_exact_scores_are_the_fixed_order_sums_bit_for_bit_in_the_cached_kernels():
    # the suite runs after `varvedb warm`: these kernels are the ones warm cached,
    # compiled beside (and called from) the fastmath walks and scans
    from varvedb.kernels import distance as d
    rng = np.random.default_rng(7)
    metrics = (d.METRIC_L2, d.METRIC_DOT, d.METRIC_COSINE, d.METRIC_L1)
    cases = 0
    for dtype in ("f32", "f16", "int8"):
        for dim in (1, 3, 4, 5, 16, 17, 50, 67, 128):
            if dtype == "int8":
                values = rng.integers(-100, 100, (12, dim)).astype(np.int8)
                arena = values
            else:
                values = rng.standard_normal((12, dim)).astype(
                    np.float16 if dtype == "f16" else np.float32)
                arena = values.view(np.uint16) if dtype == "f16" else values
            query = rng.standard_normal(dim).astype(np.float32)
            rows = np.arange(12, dtype=np.int64)
            for metric in metrics:
                out = np.empty(12)
                d.exact_row_distances(arena, rows, query, metric, out)
                want = [_fixed_order(values[r], query, metric) for r in range(12)]
                assert out.tolist() == want, (dtype, dim, metric)
                ranked_rows, ranked = rows.copy(), np.empty(12)
                d.rank_rows(arena, ranked_rows, query, metric, ranked)
                assert ranked.tolist() == [want[r] for r in ranked_rows], (dtype, dim, metric)
                cases += 1
    assert cases == 3 * 9 * 4


def test_threads_racing_to_a_kernels_first_call_leave_its_calls_on_the_fast_path():
    # a writable array calls the read-only specialisation through the caller's exact
    # types, inserted once: inserted by each racing thread, numba saw two exact
    # matches, called neither, and sent every later call to its compile path
    import threading

    def total(a):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    kernel = jit.njit(readonly=("a",))(total)
    a = np.arange(16.0)
    start = threading.Barrier(8)
    got = []

    def first():
        start.wait(timeout=600)
        got.append(kernel(a))
    threads = [threading.Thread(target=first) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert got == [120.0] * 8
    slow = []
    compile_for_args = kernel._compile_for_args
    kernel._compile_for_args = lambda *args, **kw: slow.append(1) or compile_for_args(*args, **kw)
    assert [kernel(a) for _ in range(20)] == [120.0] * 20
    assert slow == []


def test_a_read_only_or_strided_query_compiles_no_kernel_of_its_own():
    # numba types a read-only or non-contiguous array apart: SQL's literal vector
    # (read-only) compiled a second graph walk and IVF scan on a first SQL query,
    # which warm does not cover; the indexes hand the kernels one flavour of query
    import varvedb as vv
    from varvedb.kernels import hnsw as graph_kernels, ivf as ivf_kernels
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3000, 8)).astype(np.float32)
    db = vv.connect(":memory:")
    for name, index in (("g", vv.HNSW(m=4, quantize=None)), ("i", vv.IVFPQ(lists=4))):
        c = db.create_collection(name, {"v": vv.Vector(8, metric="l2", index=index)})
        c.insert_arrays(id=np.arange(len(x)), v=x)
        assert c.wait_indexed(timeout=600)        # a hang guard only
        c.search(np.ones(8, np.float32), limit=3)
    dispatchers = [graph_kernels.search_one] + [
        getattr(ivf_kernels, k) for k in dir(ivf_kernels)
        if isinstance(getattr(ivf_kernels, k), numba.core.registry.CPUDispatcher)]
    before = [len(d.signatures) for d in dispatchers]
    read_only = np.ones(8, np.float32)
    read_only.flags.writeable = False
    strided = np.ones(16, np.float32)[::2]
    for name in ("g", "i"):
        db.sql(f"SELECT id FROM {name} ORDER BY v <-> '[1,2,3,4,5,6,7,8]' LIMIT 3")
        for q in (read_only, strided):
            assert len(db[name].search(q, limit=3).ids) == 3
    assert [len(d.signatures) for d in dispatchers] == before
    db.close()


def _scaled_sum(a, f):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * f
    return s


def test_direct_types_the_arguments_once_per_set_of_types():
    # a one-shot search (index/flat.py) asks direct for its kernel each call: typing
    # its 13 arguments and looking the signature up took ~240 us, for a ~3 us scan
    kernel = jit.njit(readonly=("a",))(_scaled_sum)
    typed = []
    typeof = kernel.typeof_pyval
    kernel.typeof_pyval = lambda v: typed.append(v) or typeof(v)
    f64 = jit.direct(kernel, np.arange(4.0), 2)
    assert f64(np.arange(4.0), 2) == 12.0 and len(typed) == 2
    assert jit.direct(kernel, np.ones(3), 5) is f64 and len(typed) == 2   # same types: found
    read_only = np.arange(4.0)
    read_only.flags.writeable = False
    for other in (np.arange(4, dtype=np.float32), np.arange(8.0)[::2], read_only):
        code = jit.direct(kernel, other, 2)              # other types: typed, their own code
        assert code(other, 2) == 2 * float(other.sum())
    assert len(typed) == 8 and jit.direct(kernel, np.arange(8.0)[::2], 3) is not f64
    assert len(typed) == 8


def test_direct_refuses_an_array_of_the_other_byte_order():
    # numba's fingerprints do not tell '>f4' from '<f4': after a native call, direct
    # handed a big-endian array the native code (byte-swapped floats, no error)
    kernel = jit.njit(readonly=("a",))(_scaled_sum)
    native = np.arange(4, dtype=np.float32)
    assert jit.direct(kernel, native, 2)(native, 2) == 12.0
    swapped = native.astype(native.dtype.newbyteorder())
    with pytest.raises(TypeError, match="byte order"):
        jit.direct(kernel, swapped, 2)


_SUM_MODULE = '''
from varvedb.kernels.jit import njit


@njit(cache=True)
def total(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s
'''

_SUM_CALLS = '''
import numpy as np, swapped_sum as k
print(k.total(np.arange(10, dtype=np.float32)), k.total(np.arange(10, dtype=np.int64) * 2),
      k.total(np.arange(10, dtype=np.float64) * 3))
print(sum(k.total.stats.cache_hits.values()), sum(k.total.stats.cache_misses.values()))
'''


def test_two_swapped_data_files_of_a_kernel_are_compiled_again(tmp_path):
    """Two .nbc files of one kernel swapped on disk (each its own sound bytes and
    their digest): the digest covered a file's bytes only, so each was loaded for
    the other's signature, and every later process failed its calls (TypeError:
    can't unbox array...) and never compiled again. The digest covers the file's
    name too: each swapped file is a miss, compiled again and written over. In real
    processes, as a later run finds a cache."""
    import subprocess
    import sys
    from conftest import child_env
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "swapped_sum.py").write_text(_SUM_MODULE)
    env = child_env()
    env["PYTHONPATH"] = str(tmp_path / "mod") + ":" + env["PYTHONPATH"]
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")

    def run():
        r = subprocess.run([sys.executable, "-c", _SUM_CALLS], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        sums, counts = r.stdout.splitlines()
        return sums, tuple(map(int, counts.split()))

    sums, counts = run()
    assert sums == "45.0 90.0 135.0" and counts == (0, 3)
    files = sorted((tmp_path / "cache").rglob("*swapped_sum*.nbc"))
    assert len(files) == 3
    a, b = files[0].read_bytes(), files[1].read_bytes()
    assert a != b
    files[0].write_bytes(b)
    files[1].write_bytes(a)
    assert run() == (sums, (1, 2))          # the swapped two compiled again
    assert run() == (sums, (3, 0))          # and written over: all three load
