"""`varvedb warm` and the compilation counter (varvedb/warm.py, kernels/compile_log.py).

The counter reads numba's own compile event, so "zero compiled" means no
kernel was compiled in that process: each came from the disk cache. After a
warm, a new process runs the first-use script compiling nothing; a server
started on an empty cache warms before it listens, and its requests compile
nothing; a process that compiles without having warmed says so once on a
terminal.
"""
from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np

from varvedb.kernels import compile_log, jit

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench"),
                                      os.environ.get("PYTHONPATH", "")])}


def _tripled(x):
    return x * 3


def test_the_counter_counts_each_compilation_once_and_no_cache_load(tmp_path, monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    before = compile_log.compilation_count()
    kernel = jit.njit(cache=True)(_tripled)
    assert kernel(np.int64(2)) == 6 and kernel(np.int64(3)) == 9
    assert kernel(np.float64(1.5)) == 4.5
    done = compile_log.compilations()[before:]
    assert compile_log.compilation_count() - before == len(done) == 2
    assert {c.kernel for c in done} == {f"{__name__}._tripled"}
    assert {c.signature for c in done} == {"int64", "float64"}
    assert all(c.seconds > 0 for c in done)
    # a new dispatcher of the same function loads both from the disk cache
    again = jit.njit(cache=True)(_tripled)
    assert again(np.int64(2)) == 6 and again(np.float64(1.5)) == 4.5
    assert compile_log.compilation_count() - before == 2


COMPILES = ("from varvedb.kernels.jit import njit\n"
            "njit()(lambda x: x + 1)(1)\n"
            "njit()(lambda x: x - 1)(1)\n")


def _stderr_on_a_terminal(code: str) -> str:
    main, child = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-c", code], stderr=child,
                              stdout=subprocess.DEVNULL, env=ENV, timeout=600)
    finally:
        os.close(child)
    assert proc.returncode == 0
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:         # EIO: the child's end is closed and all was read
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return out.decode()


def test_a_process_that_compiles_without_warming_says_so_once_on_a_terminal():
    out = _stderr_on_a_terminal(COMPILES)
    assert out.count(compile_log.NOTICE.strip()) == 1
    # not on a pipe (a log, a service's journal), and not through logging
    piped = subprocess.run([sys.executable, "-c", COMPILES], capture_output=True, text=True,
                           env=ENV, timeout=600)
    assert piped.returncode == 0 and compile_log.NOTICE.strip() not in piped.stderr
    # a process that compiles on purpose (warm's workers) says nothing
    quiet = _stderr_on_a_terminal("from varvedb.kernels import compile_log\n"
                                  "compile_log.quiet()\n" + COMPILES)
    assert compile_log.NOTICE.strip() not in quiet
