"""The README's examples (and those of docs/langchain.md and docs/llama_index.md) run
as written, and the CLI's verbs work on a real file."""
import ast
import asyncio
import inspect
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import varvedb as vv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_python_example_runs(tmp_path, monkeypatch):
    text = open(os.path.join(ROOT, "README.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        _run_example(code, "README.md")
    assert (tmp_path / "notes.varve").exists()
    assert (tmp_path / "async-notes.varve").exists()


def _run_example(code: str, where: str) -> None:
    """An example as a reader runs it: a block with top-level await (the asyncio
    examples, as in an asyncio REPL) on an event loop of its own."""
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, {}))
    else:
        exec(compiled, {})


@pytest.mark.parametrize("doc, made", [("langchain.md", "lc-notes.varve"),
                                       ("llama_index.md", "li-notes.varve")])
def test_integration_docs_examples_run(tmp_path, monkeypatch, doc, made):
    text = open(os.path.join(ROOT, "docs", doc)).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, f"docs/{doc} has no python example"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        _run_example(code, f"docs/{doc}")
    assert (tmp_path / made).exists()


def _varvedb(*args, check=True):
    return subprocess.run([sys.executable, "-m", "varvedb", *args], capture_output=True,
                          text=True, check=check)


@pytest.fixture
def small_file(tmp_path):
    path = str(tmp_path / "small.varve")
    with vv.connect(path) as db:
        c = db.create_collection("docs", {"title": "text", "tag": vv.Int(index="hash"),
                                          "emb": vv.Vector(4)})
        c.insert_arrays(id=np.arange(10), tag=np.arange(10) % 3,
                        title=[f"t{i}" for i in range(10)],
                        emb=np.random.default_rng(0).random((10, 4)))
        c.update({"tag": 7}, where="id = 3")
    return path


def test_cli_info_reports_collections_and_version(small_file):
    out = _varvedb("info", small_file).stdout
    assert "version 3" in out
    assert "docs: 10 documents (11 row versions)" in out


def test_cli_history_lists_every_version(small_file):
    lines = _varvedb("history", small_file).stdout.strip().splitlines()
    assert [int(line.split()[0]) for line in lines] == [1, 2, 3]
    assert lines[1].split()[2] == "10"  # rows changed by the bulk insert


def test_cli_verify_passes_then_catches_a_flipped_byte(small_file):
    ok = _varvedb("verify", small_file)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: 3 versions verified")
    chain = ok.stdout.split()[-1]
    assert _varvedb("verify", small_file, "--anchor", f"3:{chain}").returncode == 0
    assert _varvedb("verify", small_file, "--anchor", f"3:{'0' * 64}",
                    check=False).returncode == 1
    with open(small_file, "r+b") as f:
        f.seek(4096 + 64 + 10)          # inside the first frame's payload (version 1)
        b = f.read(1)
        f.seek(4096 + 64 + 10)
        f.write(bytes([b[0] ^ 0xFF]))
    bad = _varvedb("verify", small_file, check=False)
    assert bad.returncode == 1
    assert "BROKEN at version 1" in bad.stderr


@pytest.mark.parametrize("anchor", ["foo:bar", ":abc", "-1:00", "\u00b2:00"])
def test_cli_verify_refuses_an_anchor_without_a_version(small_file, anchor):
    """A version that is not a number printed a raw ValueError traceback."""
    out = _varvedb("verify", small_file, "--anchor", anchor, check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "Error: Invalid value for '--anchor'" in out.stderr and "VERSION" in out.stderr


def test_cli_demo_small(tmp_path):
    path = str(tmp_path / "demo.varve")
    out = _varvedb("demo", "--file", path, "--rows", "2000", "--dim", "16").stdout
    assert "loaded 2,000 rows" in out
    assert "same answer: True" in out
    assert vv.verify_file(path).ok
