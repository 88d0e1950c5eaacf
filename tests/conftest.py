"""Shared fixtures and helpers for the varvedb test suite.

Files are created under pytest's tmp_path, which on this project's machines
lies on a real disk (ext4): fsync, flock and truncation behave as in use.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import varvedb as vv

SRC = str(Path(__file__).resolve().parents[1] / "src")
BENCH = str(Path(__file__).resolve().parents[1] / "bench")   # the varvedb-bench distribution


# The files whose tests run longest (a fresh clone's `make test`, longest first:
# test_ahead's processes compile on empty numba caches, the state machines run
# hundreds of examples, test_server_schema and test_client drive real servers)
# start first, so that under `make test`'s workers the others run the rest beside
# them, not after them. xdist hands out whole files in the order collected only
# with --no-loadscope-reorder (the Makefile's): by default it reorders them by
# their number of tests, which put these few-test files last. (Each file's own
# order stays.) The order is by CPU seconds per file, the test process's and its
# children's, the mean of two runs of the whole suite as `make test` runs it (-n 3)
# on a warm cache at load 9-10: test_ahead ~56 (since ~24: kept first, as its
# empty-cache case waits on its compiler ahead), test_state_machine ~51,
# test_server_schema ~39, test_client ~27, test_fault_state_machine ~24,
# test_crafted_files ~24, test_crash ~23, test_hnsw_index ~22, test_server_workers
# ~22, test_readers_under_faults ~17, test_server ~16, test_history_ops ~16,
# test_bench ~14, test_capped_memory ~14, test_bench_sweep ~11, test_vector_search
# ~11, test_bench_server ~11, test_replica ~10; every other file under 10. The two
# runs differed by up to 2x for one file (test_ahead's compiler-ahead race, the
# state machines' random examples): the order is coarse. test_warm is placed by an
# earlier run (~22 s): in both of these, its server case failed early on a cache
# copied from another checkout. test_sharded and test_ray are placed by wall time,
# mostly waiting, which a worker spends beside the others' CPU: test_sharded ~10 s
# of CPU in 158-172 s of wall (a shard's actor killed, a coordinator killed) early,
# test_ray ~9 s in 70 s last.
FIRST = ("test_ahead.py", "test_state_machine.py", "test_server_schema.py", "test_client.py",
         "test_sharded.py", "test_fault_state_machine.py", "test_crafted_files.py",
         "test_crash.py", "test_warm.py", "test_hnsw_index.py", "test_server_workers.py",
         "test_readers_under_faults.py", "test_server.py", "test_history_ops.py",
         "test_bench.py", "test_capped_memory.py", "test_bench_sweep.py",
         "test_vector_search.py", "test_bench_server.py", "test_replica.py", "test_ray.py")


def pytest_collection_modifyitems(items) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))


# VARVEDB_TEST_COMPILES=FILE: each test that made numba compile in this process
# (its setup, call and teardown) appends a line to FILE: the test, then each
# kernel and signature. After `varvedb warm` a test should compile nothing that
# it does not test on purpose: a line there is a specialisation warm missed.
# PYTEST_CPU_TABLE=FILE: each test's CPU seconds (this process's and its waited-for
# children's, user + system: setup, call and teardown) are appended to
# FILE.<worker> as "seconds<TAB>nodeid": where the suite's CPU goes.
def _cpu() -> float:
    import resource
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    report = os.environ.get("VARVEDB_TEST_COMPILES")
    table = os.environ.get("PYTEST_CPU_TABLE")
    if report:
        from varvedb.kernels import compile_log
        before = compile_log.compilation_count()
    cpu = _cpu() if table else 0.0
    yield
    if table:
        with open(f"{table}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "a") as f:
            f.write(f"{_cpu() - cpu:.3f}\t{item.nodeid}\n")
    if report:
        done = compile_log.compilations()[before:]
        if done:
            with open(report, "a") as f:
                f.write(f"{item.nodeid}: {len(done)} compiled, "
                        f"{sum(c.seconds for c in done):.1f} s\n")
                for c in done:
                    f.write(f"    {c.seconds:6.2f} s  {c.kernel}({c.signature})\n")


# One local Ray (2 CPUs, no dashboard) for a Ray test file (test_ray.py,
# test_sharded.py): starting it costs seconds, and its pooled worker processes keep
# varvedb imported between tests. Stopped at the file's end: left running to the
# session's end, its idle daemons took ~3.4 s of CPU a minute (make test's workers
# run the two files apart, each started its own). Workers never compile kernels
# ahead of use.
RAY_ENV = {"env_vars": {"VARVEDB_COMPILE_AHEAD": "0", "PYTHONPATH": os.pathsep.join(sys.path)}}


@pytest.fixture(scope="module")
def local_ray():
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False, runtime_env=RAY_ENV)
    yield ray
    ray.shutdown()


class lazy_module:
    """A module imported at its first attribute read, for a test file's heavy
    imports (pandas, polars, pyarrow, ray, llama-index): every pytest worker
    collects every file, and each such import cost each worker's collection
    ~1-2 s of CPU (~3.5 s of its ~7.5 s) whether or not it ran that file.
    ``pd = lazy_module("pandas")`` then ``pd.DataFrame(...)`` in a test."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("_"):    # pytest's collection asks each module-level object
            raise AttributeError(attr)      # for its markers (_pytestfixturefunction, ...)
        import importlib
        return getattr(importlib.import_module(self._name), attr)


def lazy_callables(module: str, *names: str) -> tuple:
    """Functions (or classes, called) of `module` imported at their first call,
    as lazy_module's attributes are: ``read_varve, = lazy_callables(...)``."""
    lazy = lazy_module(module)

    def one(name):
        def call(*args, **kwargs):
            return getattr(lazy, name)(*args, **kwargs)
        call.__name__ = name
        return call
    return tuple(one(name) for name in names)


@pytest.fixture
def db_path(tmp_path) -> str:
    return str(tmp_path / "test.varve")


@pytest.fixture
def db(db_path):
    d = vv.connect(db_path)
    yield d
    d.close()


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes (to prove a failed call changed nothing)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def restamp(path, version: int) -> None:
    """The file's header stamped with format `version`, as a varvedb of that format
    wrote it (what a newer frame must upgrade first)."""
    from varvedb.storage import format as F
    with open(path, "r+b") as f:
        header = F.unpack_header(f.read(F.HEADER_SIZE))
        f.seek(0)
        f.write(F.pack_header(header.file_id, header.created_us, version=version))


def stamped(path) -> int:
    """The format version the file's header says."""
    from varvedb.storage import format as F
    with open(path, "rb") as f:
        return F.unpack_header(f.read(F.HEADER_SIZE)).format_version


def counts(status: dict) -> dict:
    """index_status's counts (field, linked, unlinked), without its rate and ETA,
    which depend on how fast this machine linked."""
    return {k: status[k] for k in ("field", "linked", "unlinked")}


def zero_from(path: str, offset: int) -> bool:
    """Is every byte of the file from offset on zero? (A dead tail is zeroed, never cut.)"""
    with open(path, "rb") as f:
        f.seek(offset)
        return not any(f.read())


def log_end(db) -> int:
    """End of the last whole commit in db's file (the log's append position)."""
    return db.engine.log.end


def child_env() -> dict:
    """Environment for a subprocess that imports varvedb and its bench from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join((SRC, BENCH, env.get("PYTHONPATH", "")))
    env["PYTHONUNBUFFERED"] = "1"
    return env


PYTHON = sys.executable


@pytest.fixture(scope="session")
def forker():
    """One process that imported varvedb, forking the children a test kills
    (tests/forker.py): a kill needs a process, not a fresh interpreter's imports."""
    import forker as forking
    return forking.shared()


# ---- PostgreSQL + pgvector for the differential SQL tests (tests/pg_server.py)

@pytest.fixture(scope="session")
def pg():
    """One real PostgreSQL + pgvector server for the session, stopped at its end;
    skipped, with the reason, where it cannot start."""
    from pg_server import PgServer, Unavailable
    try:
        server = PgServer()
    except Unavailable as e:
        pytest.skip(str(e))
    yield server
    server.stop()


_schemas = iter(range(1, 1 << 30))


@pytest.fixture
def pg_conn(pg):
    """A new connection to pg whose search_path starts at an empty schema of its own."""
    con = pg.connect(f"case_{next(_schemas)}")
    yield con
    con.close()



def hnsw_arrays_of_format(arrays: dict, fmt: int) -> dict:
    """An HnswIndex's ``to_arrays()`` as a file of the older format ``fmt`` (1-3)
    holds them: params cut to that format's length, each upper node a slot of
    every level (its unused levels -1), the slots in an order that is not the
    rows' (as a build's insertion order leaves them)."""
    a = {name: np.array(array) for name, array in arrays.items()}
    levels, start, flat = a["levels"], a["upper_slot"], a["upper_links"]
    upper = np.flatnonzero(levels > 0)
    slotted = np.full((len(upper), int(a["params"][12]), flat.shape[1]), -1, np.int32)
    slot = np.full(levels.shape, -1, np.int32)
    slot[upper] = np.arange(len(upper))[::-1]
    for r in upper:
        slotted[slot[r], :levels[r]] = flat[start[r]:start[r] + levels[r]]
    a["upper_slot"], a["upper_links"] = slot, slotted
    a["params"] = a["params"][:{1: 13, 2: 15, 3: 16}[fmt]]
    a["params"][0], a["params"][11] = fmt, len(upper)
    return a
