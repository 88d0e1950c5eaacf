"""psycopg's placeholders in db.sql(): `%s` and `%(name)s` (and their `%b` / `%t`
forms) become `$1, $2, ...`, and `%%` a `%`, so that a statement written for
psycopg runs unchanged with the same parameters (a list for `%s`, a dict for
`%(name)s`). As in psycopg they apply only where parameters are given, and
everywhere in the text, quoted strings included: a LIKE pattern written for
psycopg says 'a%%', and says it here too. A text that numbers its parameters
($1, $2, ...) is PostgreSQL's form and is left as it is, its % signs too.
"""
from __future__ import annotations

import re

from ..errors import SqlError

_PLACEHOLDER = re.compile(r"%(?:\(([^)]*)\))?(.)|%$", re.S)
_PSYCOPG = re.compile(r"%[sbt(]")
_NUMBERED = re.compile(r"\$[0-9]")


def applies(text: str) -> bool:
    """Is this a text with psycopg's placeholders (and none of PostgreSQL's)?"""
    return _PSYCOPG.search(text) is not None and _NUMBERED.search(text) is None


def convert(text: str, params) -> tuple[str, list]:
    """(text with $n placeholders, the parameters as a list in $n order)."""
    names: dict[str, int] = {}
    positional = 0

    def one(m: re.Match) -> str:
        nonlocal positional
        name, kind = m.group(1), m.group(2)
        if kind == "%" and name is None:
            return "%"
        if kind not in ("s", "b", "t"):
            raise SqlError("42601", f"only %s, %b, %t and %(name)s are placeholders, not "
                                    f"{m.group(0)!r} (a literal % is %%)")
        if name is None:
            if names:
                raise SqlError("42601", "a statement's placeholders are all %s or all "
                                        "%(name)s, not both")
            positional += 1
            return f"${positional}"
        if positional:
            raise SqlError("42601", "a statement's placeholders are all %s or all "
                                    "%(name)s, not both")
        return f"${names.setdefault(name, len(names) + 1)}"
    return _PLACEHOLDER.sub(one, text), _values(params, positional, names)


def _values(params, positional: int, names: dict) -> list:
    if names:
        if not isinstance(params, dict):
            raise SqlError("22023", f"%(name)s placeholders take a dict of parameters, got "
                                    f"{type(params).__name__}")
        missing = [k for k in names if k not in params]
        if missing:
            raise SqlError("22023", f"no parameter named {missing[0]!r}")
        return [params[k] for k in names]
    if isinstance(params, dict):
        raise SqlError("22023", "a dict of parameters is for %(name)s placeholders")
    if len(params) != positional:
        raise SqlError("22023", f"the statement has {positional} placeholders but "
                                f"{len(params)} parameters were given")
    return list(params)
