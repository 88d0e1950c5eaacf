"""Cold start: what `import varvedb` pulls in, and how a cached kernel is loaded.

Each check runs in a fresh interpreter, since both are about a process's first
moments; they assert on sys.modules, never on times.
"""
import os
import subprocess
import sys

import pytest

from conftest import child_env

SRC = os.path.join(os.path.dirname(__file__), os.pardir, "src")


def _python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(SRC))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout


def test_import_leaves_out_what_a_first_query_does_not_need():
    loaded = _python(
        "import sys, varvedb\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pglast', 'tqdm', 'click') or m.startswith(('varvedb_bench', 'varvedb.cli', "
        "'varvedb.demo')))))\n").split()
    assert loaded == []


def test_open_and_a_vector_search_import_no_sql_parser(tmp_path):
    """pglast (~36 ms of CPU) is loaded by SQL, a filter, or quote_ident's first
    call; the engine's import reached it for quote_ident's keywords."""
    out = _python(
        "import sys, numpy as np, varvedb as vv\n"
        f"path = {str(tmp_path / 'v.varve')!r}\n"
        "with vv.connect(path) as db:\n"
        "    c = db.create_collection('d', {'v': vv.Vector(4)})\n"
        "    c.insert_arrays(id=np.arange(5), v=np.eye(5, 4, dtype=np.float32))\n"
        "with vv.connect(path) as db:\n"
        "    hits = db['d'].search(np.ones(4), limit=2)\n"
        "print(len(hits), 'pglast' in sys.modules)\n"
        "from varvedb.query.catalog_funcs import quote_ident\n"
        "print(quote_ident('select'), quote_ident('abc'), 'pglast' in sys.modules)\n")
    assert out.split() == ["2", "False", '"select"', "abc", "True"]


def test_a_filter_still_imports_its_parser(tmp_path):
    out = _python(
        "import sys, numpy as np, varvedb as vv\n"
        f"db = vv.connect({str(tmp_path / 'f.varve')!r})\n"
        "c = db.create_collection('d', {'tag': 'int'})\n"
        "c.insert_arrays(id=np.arange(5), tag=np.arange(5))\n"
        "print(c.count(where='tag >= 3'), 'pglast' in sys.modules)\n")
    assert out.split() == ["2", "True"]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_cached_kernel_loads_without_numba_compiler_setup(dtype):
    # The first run may compile (and so set numba's compiler up); the second
    # must find the kernel on disk and load it without importing numba's
    # typing and lowering registries (numba.np.linalg is one of them).
    code = (
        "import sys, numpy as np\n"
        "from varvedb.index import flat\n"
        "rng = np.random.default_rng(0)\n"
        f"arena = rng.normal(size=(50, 8)).astype(np.{dtype})\n"
        "q = rng.normal(size=8).astype(np.float32)\n"
        "norms = np.linalg.norm(arena.astype(np.float32), axis=1).astype(np.float32)\n"
        "rows, got = flat.search('l2', arena, norms, q, 7, None)\n"
        "want = np.linalg.norm(arena[rows].astype(np.float64) - q, axis=1)\n"
        "assert np.allclose(got, want, rtol=1e-6), (got, want)\n"
        "print('numba.np.linalg' in sys.modules)\n")
    _python(code)
    assert _python(code).split() == ["False"]


def test_cold_bench_measures_every_figure(tmp_path, monkeypatch):
    from varvedb_bench import cold
    path = str(tmp_path / "cold.varve")
    cold.build(path, 300, 8)
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])   # for its child processes
    res = cold.run(path, 1)
    assert len(res) == 12 and all(len(v) == 1 for v in res.values())
    assert all(v[0] > 0 for k, v in res.items() if "over numba" not in k)


_FIRST_SEARCH = (
    "import sys, numpy as np\n"
    "from varvedb.index import flat\n"
    "arena = np.eye(6, 4, dtype=np.float32)\n"
    "norms = np.ones(6, np.float32)\n"
    "rows, _ = flat.search('l2', arena, norms, arena[2].copy(), 2, None)\n"
    "assert rows[0] == 2, rows\n")


def test_a_first_kernel_call_loads_no_numpy_ma_and_no_numba_extensions():
    """numba's typing of an ndarray imports numpy.ma (~10 ms) and its first call of
    a dispatcher reads every installed distribution's entry points (~10 ms): a
    cached kernel needs neither (kernels/jit.py's _first_call_lighter)."""
    code = _FIRST_SEARCH + (
        "import numba.core.entrypoints as ep\n"
        "print('numpy.ma' in sys.modules, ep._already_initialized)\n")
    _python(code)      # (may compile, which loads the extensions)
    assert _python(code).split() == ["False", "False"]


def test_numba_runtime_is_linked_from_the_cache_not_compiled():
    """The runtime's functions (numba's nrtdynmod, ~20 ms of LLVM in every process)
    are compiled once and linked from the kernels' cache folder after; a damaged
    file is compiled and written again. A new numba function compiled in such a
    process links against them (it allocates: NRT_MemInfo)."""
    where = _python(
        "from numba.core.registry import cpu_target\n"
        "from varvedb.kernels import jit, runtime\n"
        "print(runtime.path(cpu_target.target_context, jit.cache_folder()))\n").strip()
    _python(_FIRST_SEARCH)
    assert os.path.getsize(where) > 0
    no_compiler = (
        "from numba.core.runtime import nrtdynmod\n"
        "def refused(ctx):\n"
        "    raise AssertionError('the runtime was compiled')\n"
        "nrtdynmod.create_nrt_module = refused\n")
    out = _python(no_compiler + _FIRST_SEARCH + (
        "import numba\n"
        "print(numba.njit(lambda n: np.arange(n) * 2)(4).tolist())\n"))
    assert out.split() == ["[0,", "2,", "4,", "6]"]
    with open(where, "wb") as f:
        f.write(b"not a pickle")
    _python(_FIRST_SEARCH)      # compiled and saved again
    _python(no_compiler + _FIRST_SEARCH)


def test_numba_runtime_damaged_machine_code_in_the_cache_is_compiled_again():
    """The runtime's cached file damaged where it still unpickles (its object code's
    .text bytes made int3): every new process linked it and died of SIGTRAP. Its
    payload's sha256 no longer matches, so it is compiled and written again."""
    import struct
    where = _python(
        "from numba.core.registry import cpu_target\n"
        "from varvedb.kernels import jit, runtime\n"
        "print(runtime.path(cpu_target.target_context, jit.cache_folder()))\n").strip()
    _python(_FIRST_SEARCH)
    with open(where, "rb") as f:
        data = bytearray(f.read())
    elf = data.index(b"\x7fELF")        # the object code, as the pickle holds its bytes
    shoff, = struct.unpack_from("<Q", data, elf + 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, elf + 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, elf + shoff + i * shentsize)
                for i in range(shnum)]
    names = sections[shstrndx][4]
    damaged = 0
    for name, _, _, _, offset, size in sections:
        start = elf + names + name
        if bytes(data[start:data.index(0, start)]) in (b".text", b".ltext") and size:
            data[elf + offset:elf + offset + size] = b"\xcc" * size
            damaged += size
    assert damaged
    with open(where, "wb") as f:
        f.write(data)
    _python(_FIRST_SEARCH)              # (check=True: it ran, and answered right)
    with open(where, "rb") as f:
        assert f.read() != bytes(data)  # written again
    _python(_FIRST_SEARCH)
