"""Statement shapes: a text that repeats another's but for its literals runs the
other's compiled form, its literals bound as parameters, instead of paying a
parse and a compile of its own.

Clients of the wire protocol's simple query protocol (pgbench, ORMs that inline
values) send `SELECT ... WHERE id = 17`, then `... WHERE id = 18`: each a new
text, so `compile_text`'s cache (keyed by the text) never hits. Here a text's
key is its tokens (pglast's scanner, comments dropped) with each plain literal
(a decimal number, with the unary minus before it, or a '...' string without
escapes) replaced by its token kind. The first text of a key is parsed, and
its tree says which of its literals are values an expression evaluates —
those become `$n` — and which
the statement's shape reads (ORDER BY / GROUP BY positions, LIMIT, OFFSET, a
function in FROM, the text of a vector or regtype cast, what an integer cast
rounds, type modifiers, a json
path step `meta->>'k'`, which the where= grammar reads as a field): those
stay in the text, so each value of theirs compiles once. The parameterised text
is compiled by `compile_text` (its cache is shared with clients that prepare
the same `$n` form; equal values are one parameter, so that `x + 1 ... GROUP BY
x + 1` still matches), and run with the literals' values as its parameters: a
parameter and a constant of the same value evaluate alike (query/expr.py's
`const_val`), so the answer is the one the text's own compile gives.

`sql.run_each` (the wire protocol's path: simple and unnamed extended queries
without parameters) takes this path; `sql.run` (db.sql()) does not — its
callers pass values as parameters, and a result's plan would show `$n` where
the text wrote a literal. Only one SELECT without parameters or AS OF takes
it. A key is refused for good (the text is compiled as it is) where the tree
holds a number or string constant not written as a plain literal (`E'...'`,
`-(5)`, `0x1F`), VALUES, a statement that reads server files, or where the
parameterised text does not compile; a text whose equal literals differ in type
(1 and 1.0) is compiled as it is. Nothing here holds a
plan: a compiled statement binds to the table's current schema each time it
runs, so a schema change needs no invalidation (as for `compile_text`). The
keys are kept in an LRU of MAX_SHAPES, each of at most MAX_TOKENS tokens.
"""
from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict

from pglast.parser import ParseError, parse_sql_json, scan

from ..errors import VarveError

MAX_SHAPES = 1024
MAX_TOKENS = 2000        # a text of more tokens (literals counted) takes no shape

_COMMENTS = frozenset(("SQL_COMMENT", "C_COMMENT"))
_NUMBERS = frozenset(("ICONST", "FCONST"))
_PLAIN_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", re.ASCII)
# a token after which a '-' is a binary minus (the end of an operand); after any
# other, a '-' directly before a number is its sign (the parser folds the two
# into one constant, located at the sign)
_OPERAND_ENDS = frozenset(("IDENT", "ICONST", "FCONST", "SCONST", "USCONST", "BCONST",
                           "XCONST", "PARAM", "ASCII_41", "ASCII_93", "NULL_P", "TRUE_P",
                           "FALSE_P", "CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP",
                           "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_USER", "SESSION_USER",
                           "USER", "CURRENT_ROLE", "CURRENT_CATALOG", "CURRENT_SCHEMA"))
# a literal's place in a key: its kind, as no token's text is
_MARKS = {k: (k,) for k in ("ICONST", "FCONST", "SCONST", "-ICONST", "-FCONST")}
_JSON_STEPS = ([{"String": {"sval": "->"}}], [{"String": {"sval": "->>"}}])
_REFUSED = None          # a key's verdict: the text is compiled as it is
_UNKNOWN = object()      # a key not seen yet (or evicted)


class _Key:
    """A scanned text: its key, and each literal's (start, end) in the text and
    value."""
    __slots__ = ("key", "spans", "values")

    def __init__(self, key, spans, values):
        self.key, self.spans, self.values = key, spans, values


_lock = threading.Lock()
_verdicts: OrderedDict = OrderedDict()      # key -> each literal a parameter? | _REFUSED
_counts = {"hits": 0, "learned": 0, "refused": 0}
enabled = True


def stats() -> dict:
    """How often a text found its shape (hits), how many shapes were learned and
    how many keys refused, and how many keys are kept (size)."""
    with _lock:
        return {**_counts, "size": len(_verdicts)}


def clear() -> None:
    with _lock:
        _verdicts.clear()
        for k in _counts:
            _counts[k] = 0


def bound(text: str, compile_text):
    """(the compiled statements of the text's shape, its literals as parameters),
    or None: compile the text as it is. `compile_text` compiles a text (sql's
    cached one)."""
    scanned = _scan(text)
    if scanned is None:
        return None
    with _lock:
        verdict = _verdicts.get(scanned.key, _UNKNOWN)
        if verdict is not _UNKNOWN:
            _verdicts.move_to_end(scanned.key)
    if verdict is _UNKNOWN:
        verdict = _learn(text, scanned, compile_text)
        if verdict is _UNKNOWN:
            return None         # (undecided by this text: the next of its key decides)
        with _lock:
            _verdicts[scanned.key] = verdict
            _counts["learned" if verdict is not _REFUSED else "refused"] += 1
            while len(_verdicts) > MAX_SHAPES:
                _verdicts.popitem(last=False)
        if verdict is _REFUSED:
            return None
        return _compiled(text, scanned, verdict, compile_text)
    if verdict is _REFUSED:
        return None
    got = _compiled(text, scanned, verdict, compile_text)
    if got is not None:
        with _lock:
            _counts["hits"] += 1
    return got


def _compiled(text: str, scanned: _Key, verdict: tuple, compile_text):
    """The text with its parameter literals as $n, compiled, and their values; equal
    values are one parameter (so that `x + 1 ... GROUP BY x + 1` still matches).
    None where two equal values differ in type (1 and 1.0 are equal constants)."""
    parts, params, slots, pos = [], [], {}, 0
    for (start, end), masked, value in zip(scanned.spans, verdict, scanned.values):
        if not masked:
            continue
        slot = slots.setdefault(value, len(params))
        if slot == len(params):
            params.append(value)
        else:
            first = params[slot]
            if type(first) is not type(value) or repr(first) != repr(value):
                return None
        parts.append(text[pos:start])
        parts.append(f" ${slot + 1} ")
        pos = end
    parts.append(text[pos:])
    try:
        return compile_text("".join(parts)), params
    except VarveError:          # (a learned shape compiled: only a full cache evicts it)
        return None


def _scan(text: str) -> _Key | None:
    """The text's key and literals, or None (no SELECT, a text with $n parameters,
    or one the scanner refuses: compiling it says why)."""
    head = text[:40].lstrip()[:6].lower()
    if head != "select" and head[:4] != "with":
        return None             # (a bulk INSERT's megabytes are not scanned twice)
    try:
        toks = scan(text)
    except (ParseError, UnicodeEncodeError, RecursionError):
        return None
    key, spans, values = [], [], []
    minus = 0
    before = prev = None            # the names of the two tokens before this one
    for t in toks:
        name = t.name
        if name in _COMMENTS:
            continue
        src = text[t.start:t.end + 1]
        if name in _NUMBERS and len(src) < 100 and _PLAIN_NUMBER.fullmatch(src):
            value = int(src) if src.isdigit() else float(src)
            start = t.start
            if prev == "ASCII_45" and before not in _OPERAND_ENDS:
                key.pop()       # (the key still says it: -3::text is -(3::text))
                name = "-" + name
                start = minus
                value = -value
        elif name == "SCONST" and src[0] == "'" and "\x00" not in src \
                and "'" not in src[1:-1].replace("''", ""):
            value = src[1:-1].replace("''", "'")
            start = t.start
        else:
            if name == "PARAM":
                return None
            if name == "ASCII_45":
                minus = t.start
            key.append(src)
            before, prev = prev, name
            continue
        key.append(_MARKS[name])
        spans.append((start, t.end + 1))
        values.append(value)
        before, prev = prev, name
    if len(key) > MAX_TOKENS:
        return None             # (a long IN list: its keys would fill the cache's memory)
    return _Key(tuple(key), spans, values)


# ---- learning a shape: which literals are parameters ------------------------------

class _Refuse(Exception):
    pass


def _learn(text: str, scanned: _Key, compile_text):
    """The verdict of a new key: for each literal whether it is a parameter (else it
    is kept in the text), or _REFUSED."""
    if not scanned.spans:
        return _REFUSED         # nothing to bind: compile_text's cache serves it
    try:                        # (AS OF is no SQL: a text that has it is refused here)
        tree = json.loads(parse_sql_json(text))
    except (ParseError, UnicodeEncodeError, RecursionError, ValueError):
        return _REFUSED
    stmts = tree.get("stmts", ())
    if len(stmts) != 1 or set(stmts[0].get("stmt", {})) != {"SelectStmt"}:
        return _REFUSED
    consts: list = []
    try:
        _Walk(consts).node("SelectStmt", stmts[0]["stmt"]["SelectStmt"], True)
    except (_Refuse, RecursionError, VarveError, KeyError, TypeError, ValueError):
        return _REFUSED         # (a tree this walk does not know: compiled as it is)
    # the tree's locations are byte offsets, the scanner's character offsets
    byte = (lambda i: i) if text.isascii() else (lambda i: len(text[:i].encode()))
    at = {byte(start): i for i, (start, _) in enumerate(scanned.spans)}
    masked = [False] * len(scanned.spans)
    for loc, value, param in consts:
        i = at.get(loc)
        if i is None or not param:
            if param:
                return _REFUSED     # a constant that is no plain literal: `-(5)`, E'x'
            continue
        v = scanned.values[i]
        if type(v) is not type(value) or repr(v) != repr(value):
            return _REFUSED
        masked[i] = True
    if not any(masked):
        return _REFUSED         # every literal is the shape's: compile_text's cache serves it
    verdict = tuple(masked)
    if _clash(scanned, verdict):
        return _UNKNOWN
    got = _compiled(text, scanned, verdict, compile_text)
    if got is None:
        return _REFUSED
    compiled = got[0]
    if len(compiled) != 1 or compiled[0].kind != "select" or compiled[0].files \
            or compiled[0].as_of is not None:
        return _REFUSED
    return verdict


def _clash(scanned: _Key, verdict: tuple) -> bool:
    """Do two equal parameter values differ in type (1 and 1.0)?"""
    seen: dict = {}
    for masked, value in zip(verdict, scanned.values):
        if masked:
            first = seen.setdefault(value, value)
            if type(first) is not type(value) or repr(first) != repr(value):
                return True
    return False


def _const_value(body: dict):
    """A JSON A_Const's value as sql/expressions.py's `literal` reads it, or None
    for one a literal token never writes (a bit string, a boolean)."""
    if "ival" in body:
        return int(body["ival"].get("ival", 0))
    if "fval" in body:
        f = body["fval"].get("fval", "0")
        return int(f) if re.fullmatch(r"-?\d+", f) else float(f)
    if "sval" in body:
        return body["sval"].get("sval", "")
    return None


class _Walk:
    """Collects the constants of a SELECT's JSON tree: (location, value, whether it
    may be a parameter)."""

    def __init__(self, consts: list):
        self.consts = consts

    def visit(self, x, param: bool) -> None:
        if type(x) is list:
            for y in x:
                self.visit(y, param)
            return
        if type(x) is not dict:
            return
        if len(x) == 1:
            (k, body), = x.items()
            if k[:1].isupper() and type(body) is dict:
                self.node(k, body, param)
                return
        for v in x.values():
            self.visit(v, param)

    def node(self, kind: str, body: dict, param: bool) -> None:
        if kind == "A_Const":
            if body.get("isnull"):
                return
            value = _const_value(body)
            if value is not None:
                self.consts.append((body.get("location", -1), value, param))
            return
        if kind == "TypeCast":
            from .types import type_kind
            names = [n["String"]["sval"] for n in body["typeName"]["names"]]
            cast = type_kind(names)[0]
            # a vector cast's text and regtype's name are read as the cast's own; a
            # number cast to an integer type rounds as numeric (halves away from
            # zero), a parameter as float8 (to even): it stays the literal it is
            self.visit(body.get("arg"), param and cast not in ("vector", "regtype", "int"))
            self.visit(body.get("typeName"), False)
            return
        if kind == "SelectStmt":
            if body.get("valuesLists"):
                raise _Refuse
            for k, v in body.items():
                if k in ("sortClause", "groupClause"):
                    for item in v:
                        node = item.get("SortBy", {}).get("node") if "SortBy" in item else item
                        # ORDER BY 2 / GROUP BY 2: a position in the select list
                        position = set(node or ()) == {"A_Const"} and "ival" in node["A_Const"]
                        self.visit(item, not position)
                elif k in ("limitCount", "limitOffset"):
                    self.visit(v, False)
                else:
                    self.visit(v, True)
            return
        if kind == "RangeFunction":
            self.visit(body, False)
            return
        if kind == "A_Expr" and body.get("name") in _JSON_STEPS:
            # a json path step: the where= grammar reads `meta->>'k'` as a field
            # path only with its step written (a $n step is the evaluator's)
            self.visit(body.get("lexpr"), param)
            self.visit(body.get("rexpr"), False)
            return
        self.visit(body, param)
