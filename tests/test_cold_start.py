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
