"""The package's surfaces stay narrow, and its layers call only downwards.

1. No module reaches another's private names: an AST walk over src/varvedb
   fails on any `from .m import _name`, and any `x._name` where `x` is not
   `self`/`cls` and `_name` is not defined in that same module (a def, a class, an assignment, an attribute
   set on self, a parameter, an import). A test may reach the privates of the
   module it tests (its file name names it) and those in ALLOWED below.
2. The layers of docs/architecture.md (the ```layers block, read from the
   doc, so the doc and this test cannot drift apart): a module imports only
   from its own layer or below.

Read from the source, so nothing is imported to check it.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import varvedb
from test_import_graph import import_graph, parsed

ROOT = Path(varvedb.__file__).parent
TESTS = Path(__file__).parent
DOC = TESTS.parent / "docs" / "architecture.md"

# Privates of other libraries that a kernel needs (numba has no public way):
SOURCE_ALLOWED = {
    ("kernels/jit.py", "_insert"),      # Dispatcher._insert: a second type key for one compile
    ("kernels/jit.py", "_code"),        # numba type codes, the dispatcher's keys
    ("kernels/distance.py", "_getvalue"),   # the LLVM struct of an array built in an intrinsic
    ("kernels/jit.py", "_cache"),       # the dispatcher's cache: ours loads without compiling
    ("kernels/jit.py", "_source_stamp"),    # the cache's staleness stamp: the whole package's
    ("kernels/jit.py", "_types_active_call"),   # keeps the types a first call's typing made
    ("kernels/jit.py", "_compilation_chain_init_hook"),  # loads extensions: not to load
    # the cache file's data read and write, headed by our digest (numba's own
    # helpers for the pickle, the path and the atomic write)
    ("kernels/jit.py", "_save_data"), ("kernels/jit.py", "_load_data"),
    ("kernels/jit.py", "_dump"), ("kernels/jit.py", "_open_for_write"),
    ("kernels/jit.py", "_data_path"),
}
# Tests that reach a private of a module they do not test, and why:
TEST_ALLOWED = {
    "test_faults.py": {"_sync", "_sync_lock", "_map"},   # inject faults at the fsync and map
    "test_ddl.py": {"_apply"},          # replays a frame as recovery does
    "test_values_at_the_door.py": {"_tx"},   # no transaction left open by a refused value
    "test_branches.py": {"_HEADER"},    # crafts files of an older format
    "test_bad_input.py": {"_HEADER"},   # crafts files with a bad header
    "test_one_row_coercion.py": {"_NOT_NULL"},   # the shared one-row mask stays unwritten
}


def defined_names(tree: ast.AST) -> set[str]:
    """Every name a module defines (itself or on its own objects)."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            names.update(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) \
                and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
            names.add(n.attr)
        elif isinstance(n, ast.alias):
            names.add((n.asname or n.name).split(".")[0])
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                             for t in n.targets):
            names.update(c.value for c in ast.walk(n.value) if isinstance(c, ast.Constant))
    return names


@functools.cache
def privates_defined(path: Path) -> frozenset[str]:
    """The private names a file defines; parsed once for all of this module's
    tests (each test file's modules were parsed again for each: ~6 s of CPU)."""
    return frozenset(n for n in defined_names(parsed(path)) if n.startswith("_"))


def private_reaches(path: Path) -> list[tuple[int, str]]:
    """(line, `x._name`) for each reach into a private this module does not define."""
    tree = parsed(path)
    own = defined_names(tree)
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module != "__future__" \
                and (n.level or (n.module or "").startswith("varvedb")):
            out += [(n.lineno, f"import {a.name}") for a in n.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") \
                and not (n.attr.startswith("__") and n.attr.endswith("__")):
            if isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
                continue
            if n.attr not in own:
                out.append((n.lineno, ast.unparse(n)))
    return out


def source_files() -> dict[str, Path]:
    return {p.relative_to(ROOT).as_posix(): p for p in sorted(ROOT.rglob("*.py"))}


def test_no_module_reaches_anothers_privates():
    bad = [f"{rel}:{line}: {what}" for rel, p in source_files().items()
           for line, what in private_reaches(p)
           if (rel, what.rpartition(".")[2]) not in SOURCE_ALLOWED]
    assert bad == []


def privates_under_test(test: Path, files: dict[str, Path]) -> set[str]:
    """The privates of the modules a test file names (test_hnsw_index: hnsw.py, index/)."""
    words = set(test.stem.removeprefix("test_").split("_"))
    names = set()
    for rel, p in files.items():
        parts = set(Path(rel).with_suffix("").parts) - {"__init__"}
        if parts & words:
            names |= privates_defined(p)
    return names


def test_tests_reach_only_the_privates_of_what_they_test():
    files = source_files()
    ours = set()       # privates defined anywhere in the package: other libraries' are theirs
    for p in files.values():
        ours |= privates_defined(p)
    bad = []
    for test in sorted(TESTS.glob("*.py")):
        mine = privates_under_test(test, files) | TEST_ALLOWED.get(test.name, set())
        for line, what in private_reaches(test):
            name = what.rpartition(".")[2].removeprefix("import ")
            if name in ours and name not in mine:
                bad.append(f"{test.name}:{line}: {what}")
    assert bad == []


def test_a_reach_is_found(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("class A:\n    def f(self, other):\n"
                 "        self._mine = 1\n        return other._hidden, other._mine, self._x\n")
    assert private_reaches(p) == [(4, "other._hidden")]


# ---- layers -----------------------------------------------------------------------

def layers() -> list[list[str]]:
    """The doc's ```layers block, top layer first: `name: module prefixes`."""
    block = re.search(r"```layers\n(.*?)```", DOC.read_text(), re.S)
    assert block, "docs/architecture.md has no ```layers block"
    return [line.split(":", 1)[1].split() for line in block.group(1).splitlines()
            if ":" in line]


def layer_of(module: str, table: list[list[str]]) -> int | None:
    """0 for the bottom layer; the longest prefix decides (varvedb.query.request)."""
    rel = module.removeprefix("varvedb").lstrip(".") or "varvedb"
    best = None
    for depth, prefixes in enumerate(reversed(table)):
        for p in prefixes:
            if (rel == p or rel.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), depth)
    return None if best is None else best[1]


def test_every_module_has_a_layer():
    table = layers()
    assert [m for m in import_graph() if layer_of(m, table) is None] == []


def test_imports_go_down_the_layers():
    table, graph = layers(), import_graph()
    up = [f"{a} -> {b}" for a, targets in sorted(graph.items()) for b in sorted(targets)
          if layer_of(a, table) < layer_of(b, table)]
    assert up == []


def test_an_upward_import_is_found():
    table = [["collection"], ["engine"]]
    assert layer_of("varvedb.engine.table", table) < layer_of("varvedb.collection", table)
