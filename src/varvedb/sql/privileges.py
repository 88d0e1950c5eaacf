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

from pglast import ast
from pglast.visitors import Visitor

from ..errors import SqlError
from ..schema import brief


def server_files(stmt) -> tuple:
    """What a parsed statement would read from the server's files: ("copy", "file",
    path) for a COPY naming a file, and for each embed() given a spec, ("embed",
    "const", spec), ("embed", "param", n) or ("embed", "expr", None)."""
    found = []
    if isinstance(stmt, ast.CopyStmt) and stmt.filename is not None:
        found.append(("copy", "file", stmt.filename))

    class Embeds(Visitor):
        def visit_FuncCall(self, ancestors, node):
            name = node.funcname[-1]
            if getattr(name, "sval", "").lower() != "embed" or len(node.args or ()) != 2:
                return
            spec = node.args[1]
            if isinstance(spec, ast.A_Const) and isinstance(spec.val, ast.String):
                found.append(("embed", "const", spec.val.sval))
            elif isinstance(spec, ast.ParamRef):
                found.append(("embed", "param", spec.number))
            else:
                found.append(("embed", "expr", None))

    Embeds()(stmt)
    return tuple(found)


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
