"""kernels.jit's disk cache: keyed on the source of the whole kernels package.

A kernel's machine code holds the constants and inlined helpers of the modules
it imports, so a cache keyed on the kernel's own file alone would serve stale
code after a change to, say, kernels/distance.py.
"""
import shutil
from pathlib import Path

import numba
import numpy as np

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
