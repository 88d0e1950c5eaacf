"""Statements that read files of the machine they run on, and who may run them.

`COPY t FROM 'file'` reads a file of the server's machine, and `embed(text,
spec)` with a spec that loads a model from its filesystem ('onnx:/folder',
'sentence-transformers:PATH', 'fastembed:MODEL') reads a folder there: in
PostgreSQL that is a superuser's privilege (pg_read_server_files). An
embedded caller runs on its own machine and has it; a session of the server
has not (Session.server_files, which server/routes.py sets False), and such a
statement is refused with SQLSTATE 42501 before it runs. What a statement
reads is found in its parsed tree when it is compiled, never in its text; an
embed() spec given as a parameter is checked against the value sent. (A field
whose embedder is such a spec is refused to the same sessions when it is made,
by whatever verb: engine/embedding.py's check_embedders.)
"""
from __future__ import annotations

import functools

from pglast import ast

from ..errors import SqlError
from ..schema import brief


def server_files(stmt) -> tuple:
    """What a parsed statement would read from the server's files: ("copy", "file",
    path) for a COPY naming a file, and for each embed() given a spec, ("embed",
    "const", spec), ("embed", "param", n) or ("embed", "expr", None)."""
    found = []
    if isinstance(stmt, ast.CopyStmt) and stmt.filename is not None:
        found.append(("copy", "file", stmt.filename))
    for node in _calls(stmt):
        name = node.funcname[-1]
        if getattr(name, "sval", "").lower() != "embed" or len(node.args or ()) != 2:
            continue
        spec = node.args[1]
        if isinstance(spec, ast.A_Const) and isinstance(spec.val, ast.String):
            found.append(("embed", "const", spec.val.sval))
        elif isinstance(spec, ast.ParamRef):
            found.append(("embed", "param", spec.number))
        else:
            found.append(("embed", "expr", None))
    return tuple(found)


def _calls(stmt):
    """Every function call in a parsed statement, at any depth: each node's members
    that may hold nodes are walked, but not a constant's (an A_Const holds no call:
    a bulk INSERT's VALUES are mostly those, so this walk costs a tenth of pglast's
    Visitor, which yields every node with its ancestors)."""
    todo = [stmt]
    while todo:
        node = todo.pop()
        if type(node) is tuple:
            todo.extend(node)
            continue
        if not isinstance(node, ast.Node):
            continue
        if type(node) is ast.FuncCall:
            yield node
        for member in _members(type(node)):
            value = getattr(node, member)
            if value is not None:
                todo.append(value)


@functools.cache
def _members(cls) -> tuple:
    """The members of a node class that may hold nodes (or tuples of them)."""
    if cls is ast.A_Const:
        return ()
    return tuple(name for name, slot in cls.__slots__.items()
                 if any(t in (list, tuple) or (isinstance(t, type) and issubclass(t, ast.Node))
                        for t in (slot.py_type if isinstance(slot.py_type, tuple)
                                  else (slot.py_type,))))


def check(needs: tuple, params) -> None:
    """Refuse (42501) a statement of a session without the privilege that reads what
    `needs` (server_files) names."""
    from ..embed import names_files
    for what, how, value in needs:
        if what == "copy":
            raise SqlError("42501", f'permission denied to COPY from a file ("{value}"): '
                                    "a server's session may not read the server's files; "
                                    "COPY FROM a file runs only embedded")
        if how == "param":
            if not 1 <= value <= len(params):
                continue        # evaluation raises 42P02
            value = params[value - 1]
        if how == "expr" or (isinstance(value, str) and names_files(value)):
            spec = "a spec computed by an expression" if how == "expr" else f"{brief(value)}"
            raise SqlError("42501", "permission denied to load an embedder from the "
                                    f"server's files ({spec}): a server's session "
                                    "may use 'onnx', a registered embedder, or a table's "
                                    "own (embed(text) without a spec)")
