# Every target sets up what it needs: a fresh clone runs `make demo` or `make test`.
PYTHON ?= python3

# An environment may set PYTHONDONTWRITEBYTECODE (this machine's does, and CI runs
# in it), and the venv is installed --no-compile (below): every Python process
# would then compile the source of every module it imports (numpy's, numba's,
# pyarrow's, ...) again, and the suite starts hundreds (pytest's workers, each
# server, crash and cold-start child): test_crash + test_cold_start took 70-85 s
# of CPU against 28-29 s with the bytecode written once, by the first process
# that imports a module.
unexport PYTHONDONTWRITEBYTECODE

VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test soak boundscheck bench compare clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# One stamp per set of extras, redone when a pyproject.toml changes. The bench is
# its own distribution in bench/ (varvedb-bench): installed beside the package by
# the targets that run it or its tests. --no-compile: pip byte-compiled every
# module of every package (pandas, pyarrow, sqlalchemy, llama-index, ...), about
# half of the test extras' install time; Python compiles the modules a process
# imports when it first imports them.
PIP := $(BIN)/python -m pip install -q --no-compile

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml bench/pyproject.toml | $(BIN)/python
	$(PIP) -e ".[test]" -e "./bench[test]"
	touch $@

$(VENV)/.installed-bench: pyproject.toml bench/pyproject.toml | $(BIN)/python
	$(PIP) -e . -e "./bench[plot]"
	touch $@

$(VENV)/.installed-compare: pyproject.toml bench/pyproject.toml | $(BIN)/python
	$(PIP) -e ".[test]" -e "./bench[test,peers]"
	touch $@

# `varvedb warm` first: numba compiles every kernel once per machine, on every
# core, into its disk cache (seconds when it is already there), so the demo's
# first search and the test workers load kernels instead of compiling them.
demo: $(VENV)/.installed-base
	$(BIN)/varvedb warm
	$(BIN)/varvedb demo --file demo.varve

# Each file whole on one worker (module fixtures and file order stay as written),
# handed out in the order collected: tests/conftest.py's FIRST, the longest files,
# first. Three workers on two cores: on two, a quiet fresh clone's pytest took
# 8.5 min for ~610 s of CPU (1.2 cores busy): its tests also wait (servers and Ray
# starting, children, fsync, a child under a memory cap), and a third worker runs
# meanwhile; each worker collects the whole suite. The suite is collected once
# beside the warm first: a fresh venv holds no bytecode (--no-compile above), and
# a first collection compiled the imported modules' (29 s of CPU, a later one 8.5
# s), which each worker, started together, would compile again. (A collection
# leaves the frameworks only some files use, llama-index, pandas, polars, ray,
# sqlalchemy, to those files' tests: 17 s of CPU on empty bytecode, 4.8 s after.)
# -rs: a skipped test says why in the summary (a skip is never a pass).
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q --collect-only > /dev/null & \
	$(BIN)/varvedb warm && wait $$!
	$(BIN)/python -m pytest -q -rs -n 3 --dist loadfile --no-loadscope-reorder

# The fault-injection state machine at twenty times CI's length (about 50 000 steps),
# the oracle state machines at ten times (each step's invariant at every picked
# version), the crafted-files fuzz at 3000 files (CI: 400), a first use's
# compiler ahead on an empty cache with a text and a vector field (CI: a vector),
# the server's generated requests at 150 an operation (CI: 24), and the bench's
# copy of the package's walk without its prefetches (CI: the bench's own walks).
soak: $(VENV)/.installed-test
	VARVEDB_SOAK=1 $(BIN)/python -m pytest -q -s tests/test_fault_state_machine.py \
		tests/test_state_machine.py tests/test_crafted_files.py tests/test_ahead.py \
		tests/test_server_schema.py tests/test_bench_walk.py

# The kernels' tests with numba's bounds checks compiled in (numba checks no index
# otherwise): an index past an array's end raises instead of reading or writing
# past it. Its own cache, so the checked kernels never mix with the fast ones.
boundscheck: $(VENV)/.installed-test
	NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=.numba-boundscheck $(BIN)/python -m pytest -q -n 2 \
		tests/test_hnsw_index.py tests/test_heaps.py tests/test_text_analyzer.py \
		tests/test_fts_index.py tests/test_vector_search.py tests/test_l1_metric.py

# Extra options go through BENCH_ARGS, e.g. make compare BENCH_ARGS="--rows 1000000 --runs 1"
BENCH_ARGS ?=

bench: $(VENV)/.installed-bench
	$(BIN)/varvedb bench ann --peers sqlite $(BENCH_ARGS)

compare: $(VENV)/.installed-compare
	$(BIN)/varvedb bench ann --peers all $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo.varve bench-results .pytest_cache .numba-boundscheck
