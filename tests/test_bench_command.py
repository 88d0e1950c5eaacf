"""The product without its bench: the package never imports varvedb_bench, and
`varvedb bench` finds the bench's commands through their entry point, loads them
only when it runs, and says how to install them where they are missing."""
from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import tomllib
from pathlib import Path

from click.testing import CliRunner

import varvedb
from conftest import PYTHON, child_env
from varvedb.cli import main

SUBCOMMANDS = ("ann", "sql", "text", "server", "history", "branch", "langchain", "layers",
               "commit-cpu", "import", "sharded", "replica", "ray", "walk")


def test_the_package_never_imports_its_bench():
    # read from the source, lazy imports inside functions included
    found = []
    for path in Path(varvedb.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "varvedb_bench"]
    assert found == []


def test_help_lists_bench_once_and_loads_none_of_it():
    code = ("import sys\nfrom varvedb.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('loaded:', sorted(m for m in sys.modules if m.startswith('varvedb_bench')))\n")
    out = subprocess.run([PYTHON, "-c", code], env=child_env(), capture_output=True,
                         text=True, check=True).stdout
    commands = [line.split()[0] for line in out.split("Commands:")[1].splitlines()
                if line.startswith("  ")]
    assert "bench" in commands and not [c for c in commands if c.startswith("bench-")]
    assert out.splitlines()[-1] == "loaded: []"


def test_bench_without_its_distribution_says_how_to_install(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **kw: importlib.metadata.EntryPoints(()))
    for args in (["bench"], ["bench", "ann", "--rows", "10"], ["bench", "--help"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 1, (args, r.output)
        assert "pip install -e ./bench" in r.output and "make bench" in r.output


def test_bench_is_found_through_its_entry_point(tmp_path, monkeypatch):
    # a distribution's metadata on sys.path, as an install writes it
    info = tmp_path / "varvedb_bench-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: varvedb-bench\nVersion: 0\n")
    declared = tomllib.loads((Path(__file__).parents[1] / "bench" / "pyproject.toml")
                             .read_text())["project"]["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {ref}\n" for name, ref in eps.items())
        for group, eps in declared.items()))
    monkeypatch.syspath_prepend(str(tmp_path))
    r = CliRunner().invoke(main, ["bench", "--help"])
    assert r.exit_code == 0, r.output
    listed = [line.split()[0] for line in r.output.split("Commands:")[1].splitlines()
              if line.startswith("  ")]
    assert sorted(listed) == sorted(SUBCOMMANDS)
    r = CliRunner().invoke(main, ["bench", "sql", "--help"])
    assert r.exit_code == 0 and "Usage: main bench sql" in r.output and "--rows" in r.output
    r = CliRunner().invoke(main, ["bench", "nosuch"])
    assert r.exit_code == 2 and "No such command 'nosuch'" in r.output
