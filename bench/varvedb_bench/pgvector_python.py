"""How many of pgvector-python's own tests pass against `varvedb serve --pg` (issue 30's
"the same coverage as pgvector-python's own test files", measured).

    python -m varvedb_bench.pgvector_python PATH/TO/pgvector-python/tests [FILE ...]
        [-k EXPR] [--show-all] [--json OUT]

The tests are pgvector-python's (not in this repository: give their folder). They are
copied to a work folder with only their connection strings changed: the database
`pgvector_python_test` they name is reached at 127.0.0.1 and the `--pg` port of a
fresh `varvedb serve` started for each file (PGHOST / PGPORT are set too, for a
driver that reads them). Each file runs in a pytest process of its own against its
own server and empty file, as written otherwise. The figure: per file, how many
tests passed, failed (an error in a test's setup counts as failed) and were
skipped; with --show-all, each failure's first line. A file whose driver is not
installed here (psycopg2, pg8000, sqlmodel: bench's `peers` extra) or that cannot
even be imported reports its collection error as one failure.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from .server import VarveServer, free_port

# the files of the list, those that talk to a database through a driver
FILES = ["test_psycopg.py", "test_asyncpg.py", "test_sqlalchemy.py", "test_sqlmodel.py",
         "test_psycopg2.py", "test_pg8000.py"]
DB = "pgvector_python_test"
PYTEST_INI = ("[pytest]\nasyncio_default_fixture_loop_scope = function\n"
              "asyncio_default_test_loop_scope = function\n")


def rewrite(source: str, port: int) -> str:
    """The file with its connection strings pointed at 127.0.0.1:port (nothing else)."""
    source = re.sub(rf"(//(?:[^/@'\"]+@)?)localhost/{DB}", rf"\g<1>127.0.0.1:{port}/{DB}",
                    source)
    # keyword connections: psycopg / psycopg2 (dbname=), asyncpg / pg8000 (database=)
    return re.sub(rf"\b(dbname|database)='{DB}'",
                  rf"\1='{DB}', host='127.0.0.1', port={port}", source)


def run_file(src_dir: str, name: str, workdir: str, k: str | None = None,
             timeout: float = 900.0) -> dict:
    """One test file against a fresh server: {"passed", "failed", "skipped", "failures"}."""
    pg_port = free_port()
    tests = os.path.join(workdir, "tests")
    os.makedirs(tests, exist_ok=True)
    for f in os.listdir(src_dir):         # (the package's __init__, helpers)
        if f.endswith(".py") and not f.startswith("test_"):
            shutil.copy(os.path.join(src_dir, f), tests)
    with open(os.path.join(src_dir, name), encoding="utf-8") as f:
        body = rewrite(f.read(), pg_port)
    with open(os.path.join(tests, name), "w", encoding="utf-8") as f:
        f.write(body)
    with open(os.path.join(workdir, "pytest.ini"), "w") as f:
        f.write(PYTEST_INI)
    report = os.path.join(workdir, name + ".xml")
    server = VarveServer(os.path.join(workdir, name + ".varve"),
                         ["--no-warm", "--pg", str(pg_port)])
    server.start(timeout=600.0)
    try:
        env = {**os.environ, "PGHOST": "127.0.0.1", "PGPORT": str(pg_port)}
        env.pop("PYTHONPATH", None)           # (the tests import the installed pgvector)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-p", "no:randomly", f"--junitxml={report}", f"tests/{name}"]
        if k:
            cmd += ["-k", k]
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        server.stop()
    if not os.path.exists(report):
        return {"passed": 0, "failed": 1, "skipped": 0,
                "failures": [(name, (proc.stdout + proc.stderr).strip()[-300:])]}
    return count(report)


def count(junit_xml: str) -> dict:
    """passed / failed / skipped and each failure's (test, first line) from a JUnit report."""
    out = {"passed": 0, "failed": 0, "skipped": 0, "failures": []}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            out["failed"] += 1
            out["failures"].append((case.get("name") or case.get("classname"), _first_line(bad)))
        elif case.find("skipped") is not None:
            out["skipped"] += 1
        else:
            out["passed"] += 1
    return out


def _first_line(bad) -> str:
    """What a failure says: the last `Type: message` line of its traceback (the
    exception raised), else its message."""
    errors = [line[1:].strip() for line in (bad.text or "").splitlines()
              if re.match(r"E\s+[A-Za-z_][\w.]*: \S", line)]
    message = (bad.get("message") or "").strip().splitlines() or [""]
    return (errors[-1] if errors else message[0])[:200]


def run(src_dir: str, files: list[str] | None = None, k: str | None = None,
        echo=print) -> dict[str, dict]:
    results = {}
    for name in files or FILES:
        workdir = tempfile.mkdtemp(prefix="varve-pgvpy-")
        try:
            r = results[name] = run_file(src_dir, name, workdir, k)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        echo(f"{name:22} {r['passed']:3} passed {r['failed']:3} failed {r['skipped']:3} skipped")
    return results


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tests", help="pgvector-python's tests/ folder")
    ap.add_argument("files", nargs="*", help=f"test files (default: {' '.join(FILES)})")
    ap.add_argument("-k", default=None, help="pytest's -k, for a subset")
    ap.add_argument("--show-all", action="store_true", help="each failure's first line")
    ap.add_argument("--json", default=None, help="write the figures here too")
    args = ap.parse_args(argv)
    results = run(args.tests, args.files or None, args.k)
    passed = sum(r["passed"] for r in results.values())
    failed = sum(r["failed"] for r in results.values())
    print(f"\n{passed} of {passed + failed} tests pass "
          f"({sum(r['skipped'] for r in results.values())} skipped)")
    if args.show_all:
        for name, r in results.items():
            for test, message in r["failures"]:
                print(f"FAILS  {name}::{test}\n       {message}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
