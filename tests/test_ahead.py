"""Compiling ahead (kernels/ahead.py) and the lock per kernel (kernels/compile_lock.py).

A collection's first use in a process that did not warm starts one background
compiler for the features its fields use; while that compiler holds a
kernel's lock, a process about to compile the kernel waits and then loads it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numba
import numpy as np
from numba import types

import varvedb as vv
from varvedb import warm
from varvedb.kernels import ahead, compile_lock, jit
from varvedb.schema import Schema
from test_warm import cache_copy

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ,
       "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench"),
                                      os.environ.get("PYTHONPATH", "")])}


def test_a_wait_lasts_while_the_lock_is_held_and_no_longer(tmp_path):
    path = str(tmp_path / "lock")
    compile_lock.wait_for(path)             # no file: nobody ever compiled it, no wait
    waited = threading.Event()

    def waiter():
        compile_lock.wait_for(path)
        waited.set()

    with compile_lock.holding(path):
        thread = threading.Thread(target=waiter)
        thread.start()
        assert not waited.wait(0.3)         # held: still waiting
    thread.join()                           # let go: the wait ends
    assert waited.is_set()
    compile_lock.wait_for(path)             # a file nobody holds: no wait


def test_each_kernel_and_signature_has_its_own_lock(tmp_path):
    f32 = (types.Array(types.float32, 1, "C", readonly=True),)
    f64 = (types.Array(types.float64, 1, "C", readonly=True),)
    paths = {compile_lock.lock_path(str(tmp_path), fn, sig)
             for fn in (warm.first_text_share, warm.run_share) for sig in (f32, f64)}
    assert len(paths) == 4 and all(p.startswith(str(tmp_path)) for p in paths)


def _quadrupled(x):
    return x * 4


def test_a_process_that_started_a_compiler_ahead_holds_a_kernels_lock_while_compiling(
        tmp_path, monkeypatch):
    # so its compiler ahead, reaching the kernel meanwhile, waits and loads it
    # instead of compiling it too; here the other holder is this test
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    kernel = jit.njit(cache=True)(_quadrupled)
    path = compile_lock.lock_path(kernel._cache.folder, _quadrupled, (types.int64,))
    kernel(np.int64(1))                     # no compiler ahead: no lock taken
    assert not os.path.exists(path)
    monkeypatch.setattr(compile_lock, "_started_one", True)
    kernel = jit.njit(cache=True)(_quadrupled)      # a new dispatcher: it loads or compiles
    answer = []
    with compile_lock.holding(path):
        thread = threading.Thread(target=lambda: answer.append(kernel(np.int64(5))))
        thread.start()
        thread.join(0.3)
        assert thread.is_alive() and not answer     # held elsewhere: it waits
    thread.join()
    assert answer == [20]
    assert os.path.exists(path)


def test_the_shares_of_a_schema_are_warms_first_use_shares():
    schema = Schema.parse({"body": vv.Text(fts=True), "title": vv.Text(),
                              "a": vv.Vector(8), "b": vv.Vector(8, dtype="int8"),
                              "c": vv.Vector(64, dtype="bit", metric="hamming")})
    shares = ahead.shares_for(schema.fields.values())
    assert shares == ["bit scan", "f32 scan", "int8 scan", "text"]
    assert set(shares) <= set(warm.AHEAD)
    assert ahead.shares_for(Schema.parse({"n": vv.Int()}).fields.values()) == []
    every = Schema.parse({f"v{d}": vv.Vector(64, dtype=d, metric="hamming" if d == "bit"
                                                 else "cosine")
                             for d in ("f32", "f16", "int8", "bit")})
    assert set(ahead.shares_for(every.fields.values())) | {"text"} == set(warm.AHEAD)


def _spawned(code: str, env: dict) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=1200)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


START = ("import varvedb as vv\n"
         "from varvedb.kernels import ahead\n"
         "db = vv.connect(':memory:')\n"
         "db.create_collection('docs', {'v': vv.Vector(8)})\n"
         "print(len(ahead._procs))\n")


def test_nothing_starts_when_told_not_to_or_when_the_cache_holds_the_marks(tmp_path,
                                                                          monkeypatch):
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    assert _spawned(START, {**env, compile_lock.ENV: "0"}).split() == ["0"]
    assert _spawned(START, {**env, compile_lock.ENV: "worker"}).split() == ["0"]
    # the share's mark (an earlier compile ahead finished it): nothing to start.
    # Its name in that cache, found here (what NUMBA_CACHE_DIR sets in a child)
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    mark = ahead.share_mark("f32 scan")
    monkeypatch.undo()
    assert str(mark).startswith(str(tmp_path / "cache"))
    Path(mark).parent.mkdir(parents=True, exist_ok=True)
    Path(mark).touch()
    assert _spawned(START, env).split() == ["0"]


# the specialisations of varvedb's kernels this process called or compiled, compiled
# or loaded (not the callees a loaded kernel's machine code holds: they come with it)
LOADED = ("def loaded():\n"
          "    from numba.core.registry import CPUDispatcher\n"
          "    return sorted({f'{d.py_func.__module__}.{d.py_func.__qualname__}{sig}'\n"
          "                   for name, m in list(sys.modules.items())\n"
          "                   if name.startswith('varvedb.')\n"
          "                   for d in vars(m).values() if isinstance(d, CPUDispatcher)\n"
          "                   for sig in d.overloads})\n")


def test_a_compiler_ahead_reaches_every_kernel_the_first_use_script_uses(tmp_path, monkeypatch):
    """The shares the first-use script's collection starts call each kernel the
    script calls, for the same argument types, so that on an empty cache a
    compiler ahead leaves the script nothing to compile (a kernel's callees are
    compiled with it). Compared as sets of specialisations, both loaded from a copy
    of the warmed cache: compiling the shares on an empty cache, then counting the
    script's compilations, took 19-20 s of CPU against 2 s (compiling ahead on an
    empty cache is the next test's)."""
    cache_copy(tmp_path / "cache", monkeypatch)
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    schema = Schema.parse({"body": vv.Text(fts=True), "embedding": vv.Vector(64)})
    shares = ahead.shares_for(schema.fields.values())
    code = ("import sys, json\n" + LOADED +
            "from varvedb.warm import compile_ahead\n"
            "compile_ahead(sys.argv[1:])\n"
            "print(json.dumps(loaded()))\n")
    done = subprocess.run([sys.executable, "-c", code, *shares], capture_output=True,
                          text=True, timeout=1200, env={**env, compile_lock.ENV: "worker"})
    assert done.returncode == 0, done.stderr
    reached = set(json.loads(done.stdout))
    code = ("import sys, json\n" + LOADED +
            "from varvedb_bench.first_use import run\n"
            "from varvedb.kernels import ahead\n"
            "run(sys.argv[1])\n"
            "print(json.dumps([loaded(), [ahead.share_mark(s).exists() for s in sys.argv[2:]]]))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "first.varve"), *shares],
                         capture_output=True, text=True, timeout=1200,
                         env={**env, compile_lock.ENV: "0"})
    assert out.returncode == 0, out.stderr
    used, marked = json.loads(out.stdout)
    assert used and set(used) <= reached
    assert marked == [True] * len(shares)


# `make soak` (VARVEDB_SOAK=1): the first use's collection has a full-text field too
SOAK = bool(os.environ.get("VARVEDB_SOAK"))
FIELDS = ("{'body': vv.Text(fts=True), 'v': vv.Vector(8)}" if SOAK else "{'v': vv.Vector(8)}")
ANSWERS = ("import sys, json\n"
           "import numpy as np\n"
           "import varvedb as vv\n"
           "from varvedb.kernels import ahead\n"
           "x = np.load(sys.argv[1])\n"
           "with vv.connect(sys.argv[2]) as db:\n"
           f"    docs = db.create_collection('docs', {FIELDS})\n"
           "    rows = dict(id=np.arange(300), v=x)\n"
           "    if 'body' in docs.table.schema.fields:\n"
           "        rows['body'] = [f'lake w{i % 7} clay w{i % 3}' for i in range(300)]\n"
           "    docs.insert_arrays(**rows)\n"
           "    t = docs.search(text='lake w2', limit=10) if 'body' in rows else []\n"
           "    v = docs.search(vector=x[3], limit=10)\n"
           "    print(len(ahead._procs))\n"
           "    print(json.dumps([[h.id for h in t], [h.score for h in t], "
           "[h.id for h in v], [h.score for h in v]]))\n")


def test_a_first_use_with_its_compiler_ahead_answers_as_one_without(tmp_path, monkeypatch):
    """On an empty cache, a first use starts its compiler ahead and answers as a
    process without one does. That one runs on a copy of this machine's cache
    (`make test` warmed it): it loads what a warm compiled, where an empty
    cache of its own compiled the same kernels a second time (~25 s of CPU).
    The collection has a vector field: one share ("f32 scan"), compiled on the
    empty cache by the process and its compiler ahead together, each waiting on
    the other's lock where both reach a kernel. `make soak` adds a full-text
    field (the "text" share too: ~30 s of CPU against ~13). Which shares a
    schema starts, and that they reach every kernel the first-use script
    calls, are the tests above."""
    x = np.random.default_rng(4).standard_normal((300, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    cache_copy(tmp_path / "cache-alone", monkeypatch)
    out = {}
    for label, setting in (("ahead", "1"), ("alone", "0")):
        env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path / f"cache-{label}"),
               compile_lock.ENV: setting}
        proc = subprocess.run([sys.executable, "-c", ANSWERS, str(tmp_path / "x.npy"),
                               str(tmp_path / f"{label}.varve")],
                              capture_output=True, text=True, env=env, timeout=1200)
        assert proc.returncode == 0, proc.stderr
        out[label] = proc.stdout.split("\n")
    cores = len(os.sched_getaffinity(0))
    assert out["ahead"][0] == ("1" if cores >= 2 else "0") and out["alone"][0] == "0"
    assert out["ahead"][1] == out["alone"][1]


DIGEST = ("import sys, hashlib, numba\n"
          "from pathlib import Path\n"
          "from varvedb.kernels import ahead, jit\n"
          "head = '\\0'.join([jit.source_stamp(), numba.__version__, sys.version,\n"
          "                  str(numba.config.BOUNDSCHECK)])\n"
          "d = hashlib.sha256(head.encode())\n"
          "for p in sorted(Path(ahead.__file__).parents[1].rglob('*.py')):\n"
          "    d.update(p.read_bytes())\n"
          "print(ahead.cache_digest(), d.hexdigest()[:24])\n")


def test_the_cache_digest_is_the_sources_hash_kept_under_their_stat(tmp_path):
    """cache_digest hashes the package's sources once for a set of files' names,
    sizes and times, and keeps the result in the cache folder: a later process
    reads it there (~0.7 ms, not ~5 ms); a damaged one is hashed again."""
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path)}

    def digests() -> list[str]:
        return subprocess.run([sys.executable, "-c", DIGEST], env=env, capture_output=True,
                              text=True, check=True).stdout.split()
    first = digests()
    assert len(first) == 2 and first[0] == first[1]     # the sources' hash, as it was
    kept = list(tmp_path.rglob("varvedb-digest-*"))
    assert len(kept) == 1 and kept[0].read_text() == first[0]
    kept[0].write_text("0" * 24)                        # read back, not hashed again
    assert digests() == ["0" * 24, first[1]]
    kept[0].write_text("not a digest")                  # damaged: hashed again, kept
    assert digests() == first and kept[0].read_text() == first[0]
    assert [p.name for p in tmp_path.rglob("*.part")] == []
