"""No two modules of the package import each other, directly or round a loop.

Read from the source (every import statement, those inside functions too:
a lazy import is still a dependency), so nothing is imported to check it."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import varvedb

ROOT = Path(varvedb.__file__).parent


def module_name(path: Path) -> str:
    parts = ("varvedb",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once for every test of the process that
    reads it (this file's and test_private_names', which parsed each module up to
    four times: ~1 s of CPU each time)."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Each module and the package's modules it imports (read, not changed, by the
    tests that share it)."""
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # `from pkg import name` imports pkg.name where that is a module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                           for a in node.names]
            else:
                continue
            graph[mod] |= {t for t in targets if t in files and t != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One loop per strongly connected component of more than one module."""
    found, state = [], {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                found.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n, stack)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return found


def test_the_graph_is_read():
    g = import_graph()
    assert "varvedb.storage.format" in g["varvedb.storage.log_writer"]
    assert "varvedb.engine.checkpoint" in g["varvedb.engine.engine"]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
