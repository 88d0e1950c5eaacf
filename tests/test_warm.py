"""`varvedb warm` and the compilation counter (varvedb/warm.py, kernels/compile_log.py).

The counter reads numba's own compile event, so "zero compiled" means no
kernel was compiled in that process: each came from the disk cache. After a
warm, a new process runs the first-use script compiling nothing; a server
whose cache lacks its requests' kernels warms before it listens, and its
requests compile nothing; a process that compiles without having warmed says so once on a
terminal.
"""
from __future__ import annotations

import http.client
import importlib
import json
import os
import pickle
import pty
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np

import varvedb as vv
from server_proc import ServerProcess
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
    # and the compiling thread's CPU seconds, which no other load inflates
    assert all(0 < c.cpu_seconds <= c.seconds + 0.01 for c in done)
    # a new dispatcher of the same function loads both from the disk cache
    again = jit.njit(cache=True)(_tripled)
    assert again(np.int64(2)) == 6 and again(np.float64(1.5)) == 4.5
    assert compile_log.compilation_count() - before == 2


# In warm's workers only (their sitecustomize): the share "f32 scan" waits until
# the calling process has begun its own run of another share, "sparsevec".
GATED_WORKERS = ("import os, time\n"
                 "gate = os.environ.get('VARVEDB_TEST_WARM_GATE')\n"
                 "if gate:\n"
                 "    from varvedb import warm\n"
                 "    scan = warm.SHARES['f32 scan']\n"
                 "    def gated(folder):\n"
                 "        deadline = time.monotonic() + 600\n"     # a hang guard
                 "        while not os.path.exists(gate):\n"
                 "            if time.monotonic() > deadline:\n"
                 "                raise TimeoutError('the calling process ran no share')\n"
                 "            time.sleep(0.05)\n"
                 "        scan(folder)\n"
                 "    warm.SHARES['f32 scan'] = gated\n")


def test_warm_runs_a_share_here_as_soon_as_its_worker_finished_beside_the_others(
        tmp_path, monkeypatch):
    """The calling process's own run of each share (loading its kernels) overlaps
    the workers still compiling, rather than following the last of them on one
    core: a worker's share here waits for the calling process's run of the other
    share, which on a warm that runs the shares here only after every worker has
    finished never comes (the hang guard then fails the worker's share)."""
    from varvedb import warm
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GATED_WORKERS)
    gate = tmp_path / "gate"
    monkeypatch.setenv("VARVEDB_TEST_WARM_GATE", str(gate))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), ENV["PYTHONPATH"]]))
    ran_here = []

    def sparse(folder):
        gate.touch()
        ran_here.append("sparsevec")
        warm.sparse_share(folder)

    monkeypatch.setattr(warm, "SHARES", {"f32 scan": warm.SHARES["f32 scan"],
                                         "sparsevec": sparse})
    # (two shares are no complete warm: its mark goes elsewhere)
    monkeypatch.setattr(warm.ahead, "warmed_mark", lambda: tmp_path / "warmed")
    report = warm.warm(processes=2, progress=False, again=True)
    # (and what it ran here it loaded: its worker had saved all of it)
    assert ran_here == ["sparsevec"] and report.processes == 2 and report.compiled_here == 0


KERNEL = ("import numpy as np\n"
          "from varvedb.kernels.jit import njit\n"
          "@njit(cache=True)\n"
          "def plus(x, y):\n"
          "    return x + y\n"
          "def calls(dtype):\n"     # one specialisation each: 41 of dtype plus 1 of five types
          "    x = np.dtype(dtype).type(41)\n"
          "    return [plus(x, t(1)) for t in (np.int8, np.int16, np.int32, np.int64,"
          " np.float64)]\n")
TYPES = ("int8", "int16", "int32", "int64", "float32", "float64")


def test_processes_saving_one_kernel_at_once_keep_every_specialisation(tmp_path):
    """Six processes compile specialisations of one cached kernel at once (as
    warm's workers do, each for another dtype) and save them into one cache:
    each save is whole (numba's own, unlocked, lost an entry when two picked the
    same free file name, or named the other's machine code), so a later process
    loads all 30, compiling nothing, and each answers right."""
    (tmp_path / "kern.py").write_text(KERNEL)
    env = {**ENV, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), ENV["PYTHONPATH"]])}
    # each imports, says it is ready, and waits for the others: they compile and
    # save together
    call = ("import os, time, kern\n"
            "open(os.path.join({1!r}, 'ready-{0}'), 'w').close()\n"
            "while not os.path.exists(os.path.join({1!r}, 'go')):\n"
            "    time.sleep(0.001)\n"
            "print(sum(int(a) for a in kern.calls('{0}')))\n")
    procs = [subprocess.Popen([sys.executable, "-c", call.format(t, str(tmp_path))], env=env,
                              stdout=subprocess.PIPE, text=True) for t in TYPES]
    while len(list(tmp_path.glob("ready-*"))) < len(TYPES):     # (each child: seconds)
        assert all(p.poll() is None for p in procs)
        time.sleep(0.01)
    (tmp_path / "go").touch()
    assert [p.communicate(timeout=600)[0].strip() for p in procs] == ["210"] * len(TYPES)
    assert all(p.returncode == 0 for p in procs)
    check = ("import kern\n"
             "from varvedb.kernels.compile_log import compilation_count\n"
             f"got = [int(a) for t in {TYPES!r} for a in kern.calls(t)]\n"
             "print(len(got), set(got), compilation_count())\n")
    out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{5 * len(TYPES)} {{42}} 0"


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


def _child(code: str, *args: str) -> subprocess.CompletedProcess:
    """A python running `code` with `args`, after it ended well."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


# a file larger than memory's first rerank: the pages of its rows asked for
# (fadvise, or madvise by address) through an arena advised MADV_RANDOM, forced
# here on the first-use script's file (test_capped_memory's child compiled these
# under its cap: warm did not reach them)
LARGER = ("import sys\n"
          "import numpy as np\n"
          "import varvedb as vv\n"
          "from varvedb.index import prefetch\n"
          "from varvedb.kernels.compile_log import compilation_count\n"
          "with vv.connect(sys.argv[1]) as db:\n"
          "    db.checkpoint()\n"
          "with vv.connect(sys.argv[1]) as db:\n"
          "    t = db['docs'].table\n"
          "    arena = t.columns['embedding'].arena.frozen(t.n)\n"
          "    assert prefetch.page_ranges(arena, [0])[0] is not None\n"    # mapped
          "    for how in ('fadvise', 'madvise'):\n"
          "        prefetch.prefetch_rows(arena, np.arange(0, t.n, 7), how)\n"
          "    prefetch.advise_random(arena, force=True)\n"
          "print(compilation_count())\n")


def test_after_warm_the_first_use_script_compiles_nothing(tmp_path):
    warm = subprocess.run([sys.executable, "-m", "varvedb", "warm"], capture_output=True,
                          text=True, env=ENV, timeout=3600)
    assert warm.returncode == 0, warm.stderr
    assert "varvedb warm: " in warm.stdout
    code = ("import sys\n"
            "from varvedb_bench.first_use import run\n"
            "from varvedb.kernels.compile_log import compilation_count\n"
            "steps = run(sys.argv[1])\n"
            "print(sorted(steps), compilation_count())\n")
    first = _child(code, str(tmp_path / "first.varve"))
    assert first.stdout.split("\n")[0] == "['insert', 'sql', 'text search', 'vector search'] 0"
    # and it said nothing of compiling (it had nothing to compile)
    assert compile_log.NOTICE.strip() not in first.stderr
    # nor does a file larger than memory's first rerank
    assert _child(LARGER, str(tmp_path / "first.varve")).stdout.strip() == "0"


def _compilations_reported(srv: ServerProcess) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return int(float(re.search(r"^varvedb_kernel_compilations_total (\S+)$", text,
                               re.M).group(1)))


def _overloads(index: Path) -> dict:
    """numba's index file of one kernel: {argument types: machine-code file name}
    (the file: a version, then (stamp, {key: file name}), a key's first item the
    argument types)."""
    with open(index, "rb") as f:
        pickle.load(f)
        _, overloads = pickle.loads(f.read())
    return {key[0]: name for key, name in overloads.items()}


def cache_copy(folder: Path, monkeypatch) -> Path:
    """Fill the kernel cache that NUMBA_CACHE_DIR=folder gives a process with this
    process's cached kernels (`make test`'s warm made them), less warm's mark of
    a complete warm; that cache's kernel folder, which jit.cache_folder() names
    until the test ends. (A copy: what a child compiles stays out of the
    checkout's cache, which the tests of warm's coverage read.)"""
    source = Path(jit.cache_folder())
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(folder))
    target = Path(jit.cache_folder())
    target.mkdir(parents=True, exist_ok=True)
    for f in source.glob("*.nb[ic]") if source.is_dir() else ():
        shutil.copyfile(f, target / f.name)
    return target


def _machine_code(folder: Path, kernel: str, wanted) -> Path:
    """The file in the kernel cache `folder` that holds the machine code of the one
    specialisation of `kernel` ("hnsw.search_one") whose argument types `wanted`
    accepts (numba's index file: a version, then (stamp, {key: file name}), a
    key's first item the argument types)."""
    # numba names the index by the kernel's first line: an edit that moved the
    # kernel leaves the old line's index beside it in a cache that outlived it
    module, name = kernel.split(".")
    line = getattr(importlib.import_module(f"varvedb.kernels.{module}"), name
                   ).py_func.__code__.co_firstlineno
    index = folder / f"{kernel}-{line}.py{sys.version_info.major}{sys.version_info.minor}.nbi"
    [name] = [name for sig, name in _overloads(index).items() if wanted(sig)]
    return folder / name


def _f32_walked_as_itself(sig) -> bool:
    arena, walk = sig[1].types[0], sig[1].types[2]      # data: (arena, norms, walk, ...)
    return arena.dtype == walk.dtype == numba.float32


def _strategy(plan) -> str:
    """The strategy of the vector top-k in a plan: as JSON from the server, or as
    the PlanNode the client builds from it."""
    if not isinstance(plan, dict):
        plan = plan.to_dict()
    while "strategy" not in plan:
        plan = plan["input"]
    return plan["strategy"]


def test_a_server_on_a_cache_lacking_a_kernel_warms_before_it_listens_and_requests_compile_nothing(
        tmp_path, monkeypatch):
    """The server's cache is this machine's (which `make test`'s warm filled) less
    the graph walk's kernel for the requests below (the specialisation of an f32
    arena walked as itself) and warm's mark: its warm compiles that walk before
    it listens, and says so, and once it listens no request compiles anything:
    its first, a graph search of a collection above the planner's exact-scan
    threshold (warm's indexed shares hold more rows than that, so they walk the
    graph), filtered or not, then full-text, exact scans, an index made and SQL.
    (Leaving out every kernel those requests reach, so that this warm compiled
    them all again, cost this test ~40 s of CPU; that the checkout's warm covers
    the first use's kernels is test_after_warm_the_first_use_script_compiles_nothing's
    claim.) One server for both claims: each of its warms runs every share twice."""
    from varvedb.query.planner import EXACT_ROWS
    rows = 2 * EXACT_ROWS
    rng = np.random.default_rng(4)
    path = str(tmp_path / "served.varve")
    with vv.connect(path) as db:          # (this process's cache holds what it needs)
        walked = db.create_collection("walked", {"tag": vv.Int(index="sorted"),
                                                 "v": vv.Vector(16)})
        walked.insert_arrays(id=np.arange(rows), tag=np.arange(rows) % 4,
                             v=rng.standard_normal((rows, 16)).astype(np.float32))
        walked.create_index("v", vv.HNSW(m=8, ef_construction=32))
        assert walked.wait_indexed(timeout=600)
        db.checkpoint()
    cache = tmp_path / "cache"
    folder = cache_copy(cache, monkeypatch)
    # its index stays: a load of that one finds no machine code, and compiles it
    _machine_code(folder, "hnsw.search_one", _f32_walked_as_itself).unlink()
    with ServerProcess(path, env={"NUMBA_CACHE_DIR": str(cache)}, warm=True) as srv:
        assert "compiling kernels, first run on this machine" in srv.log()
        # the server's own pass after its workers' loaded or compiled before listening
        listening = _compilations_reported(srv)
        q = rng.standard_normal(16).tolist()
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
        conn.request("POST", "/collections/walked/search",
                     json.dumps({"vector": q, "limit": 10, "explain": True}),
                     {"Content-Type": "application/json"})
        answer = json.loads(conn.getresponse().read())
        conn.close()
        assert len(answer["hits"]) == 10 and _strategy(answer["plan"]) == "graph"
        client = vv.Client(srv.url)
        hits = client.collection("walked").search(vector=q, where="tag < 3", limit=10,
                                                  explain=True)
        assert len(hits) == 10 and _strategy(hits.plan) == "graph"
        docs = client.create_collection("docs", {"body": vv.Text(fts=True),
                                                 "embedding": vv.Vector(16)})
        docs.insert([{"id": i, "body": f"lake clay river {i % 7}",
                      "embedding": rng.standard_normal(16).tolist()} for i in range(300)])
        assert len(docs.search(text="clay", limit=10)) == 10
        assert len(docs.search(vector=rng.standard_normal(16).tolist(), limit=10)) == 10
        client.sql("CREATE INDEX ON docs USING hnsw (embedding vector_cosine_ops)")
        assert len(docs.search(vector=rng.standard_normal(16).tolist(), limit=10)) == 10
        assert client.sql("SELECT count(*) FROM docs WHERE body @@ 'lake'").rows == [(300,)]
        assert _compilations_reported(srv) == listening
        client.close()
    # the walk was compiled into the server's cache: by its warm, before it listened
    assert _machine_code(folder, "hnsw.search_one", _f32_walked_as_itself).exists()
