"""Run the SQL case files on varvedb and on PostgreSQL, and compare.

A case file is a script run top to bottom on a fresh database. A statement
ends with `;` at the end of a line (outside quotes, dollar quotes and
comments). After it, optional expectation lines:

    -- => [(1, 'a'), (2, None)]    the rows, a Python literal; vectors as lists
    -- !! 42P01                    the statement fails with this SQLSTATE

A `-- =>` literal too long for a line goes on over the following `--` lines.
A statement without an expectation must succeed. Rows compare in order when
the statement has a top-level ORDER BY, else as sorted lists. A first line
`-- varvedb-only` keeps a file off PostgreSQL (varvedb's own extensions).

Values are compared after `normalize`:
- numbers by value: int, float and Decimal alike (PostgreSQL's avg(int) and
  sum(bigint) are numeric, which psycopg gives as Decimal; varvedb gives
  float or int), with a relative tolerance of 1e-6 and an absolute one of
  1e-6 near zero (float4 against float8); bool is never a number;
- vectors (numpy arrays, pgvector's HalfVector) as lists of floats; sparse
  vectors (varvedb's or pgvector's SparseVector) as pgvector's text, '{1:1.5}/3';
- timestamps as ISO text in UTC ('2026-11-30 12:00:00+00:00'); a naive one
  (PostgreSQL's `timestamp`) is read as UTC, as varvedb stores it.
The differential run also compares column names and the command tag
(SqlResult.status against psycopg's statusmessage).
"""
from __future__ import annotations

import ast
import datetime as dt
import json
import math
import re
import traceback
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np

from varvedb.sparse import SparseVector, text as sparse_text

VARVEDB_ONLY = "-- varvedb-only"
REL_TOL = ABS_TOL = 1e-6
SHOW_AT_MOST = 25          # mismatches listed in one failure (a crash repeats on each)


class CaseFormatError(Exception):
    """A case file does not follow the format (the message names file and line)."""


@dataclass
class Statement:
    line: int                       # 1-based line of the statement's first character
    sql: str
    rows: list[tuple] | None = None     # expected rows
    sqlstate: str | None = None         # expected error
    ordered: bool = False               # a top-level ORDER BY: rows compare in order

    def brief(self) -> str:
        text = " ".join(self.sql.split())
        return text if len(text) <= 100 else text[:97] + "..."


@dataclass
class Case:
    path: Path
    varvedb_only: bool
    statements: list[Statement] = field(default_factory=list)


@dataclass
class Outcome:
    """What one statement did: rows (normalized) or an error."""
    columns: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    status: str = ""
    sqlstate: str | None = None     # set when the statement failed
    message: str = ""
    crashed: bool = False           # failed with something other than an SQL error

    @property
    def failed(self) -> bool:
        return self.crashed or self.sqlstate is not None or bool(self.message)

    def describe(self) -> str:
        if self.crashed:
            return f"crashed: {self.message}"
        if self.failed:
            return f"error {self.sqlstate}: {self.message}"
        return f"{self.status!r} columns={self.columns} rows={self.rows}"


# ---------------------------------------------------------------- parsing

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def _scan_line(line: str, state: list) -> bool:
    """Advance the lexical state over one line; True when, outside quotes and
    comments, the line's last character is `;`.

    state is [mode, tag, depth]: mode None (plain SQL), "'" (string), "e'"
    (string with backslash escapes), '"' (identifier), "$" (dollar quote with
    tag), "/*" (block comment, depth nested)."""
    i, n, last = 0, len(line), None
    while i < n:
        c, mode = line[i], state[0]
        if mode is None:
            if c == "-" and line.startswith("--", i):
                break                                   # a comment to the end of the line
            if c == "/" and line.startswith("/*", i):
                state[:] = ["/*", None, 1]
                i += 2
                continue
            if c == "'":
                escaped = i > 0 and line[i - 1] in "eE" and (i < 2 or not (
                    line[i - 2].isalnum() or line[i - 2] == "_"))
                state[0] = "e'" if escaped else "'"
            elif c == '"':
                state[0] = '"'
            elif c == "$" and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
                m = _DOLLAR.match(line, i)
                if m:                                   # $tag$ ... $tag$ (not $1)
                    state[:] = ["$", m.group(0), 0]
                    i = m.end()
                    last = None
                    continue
            if not c.isspace():
                last = c
            i += 1
        elif mode in ("'", "e'"):
            if mode == "e'" and c == "\\":
                i += 2
                continue
            if c == "'":
                state[0] = None                         # '' re-enters at once: an escape
            i += 1
            last = None
        elif mode == '"':
            if c == '"':
                state[0] = None
            i += 1
            last = None
        elif mode == "$":
            if line.startswith(state[1], i):
                i += len(state[1])
                state[:] = [None, None, 0]
            else:
                i += 1
            last = None
        else:                                           # block comment
            if line.startswith("/*", i):
                state[2] += 1
                i += 2
            elif line.startswith("*/", i):
                state[2] -= 1
                i += 2
                if state[2] == 0:
                    state[:] = [None, None, 0]
            else:
                i += 1
    return state[0] is None and last == ";"


def has_top_level_order_by(sql: str) -> bool:
    import pglast
    try:
        stmts = pglast.parse_sql(sql)
    except Exception:           # a statement that must fail to parse: no rows to order
        return False
    return (len(stmts) == 1 and isinstance(stmts[0].stmt, pglast.ast.SelectStmt)
            and bool(stmts[0].stmt.sortClause))


def parse_script(text: str, name: str = "<case>") -> list[Statement]:
    """Split a case script into statements with their expectations."""
    statements: list[Statement] = []
    current: list[str] = []         # lines of the statement being read
    start = 0
    state: list = [None, None, 0]
    pending = None                  # (line, text) of a `-- =>` literal still incomplete

    def fail(lineno: int, why: str):
        raise CaseFormatError(f"{name}:{lineno}: {why}")

    def finish_rows(lineno: int, literal: str) -> bool:
        try:
            value = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            return False
        if not isinstance(value, list) or not all(isinstance(r, (tuple, list)) for r in value):
            fail(lineno, f"`-- =>` wants a list of row tuples, got {literal!r}")
        statements[-1].rows = [tuple(normalize(v) for v in r) for r in value]
        return True

    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if pending is not None:
            if not stripped.startswith("--"):
                fail(pending[0], f"`-- =>` literal does not parse: {pending[1]!r}")
            pending = (pending[0], pending[1] + " " + stripped[2:].strip())
            if finish_rows(pending[0], pending[1]):
                pending = None
            continue
        if not current:
            if not stripped:
                continue
            if stripped.startswith("-- =>") or stripped.startswith("-- !!"):
                if not statements:
                    fail(lineno, "an expectation before any statement")
                last = statements[-1]
                if last.rows is not None or last.sqlstate is not None:
                    fail(lineno, "a second expectation for one statement")
                if stripped.startswith("-- !!"):
                    code = stripped[5:].strip()
                    if not re.fullmatch(r"[0-9A-Z]{5}", code):
                        fail(lineno, f"not an SQLSTATE: {code!r}")
                    last.sqlstate = code
                elif not finish_rows(lineno, stripped[5:].strip()):
                    pending = (lineno, stripped[5:].strip())
                continue
            if stripped.startswith("--"):
                continue                                # a comment between statements
            start = lineno
        elif stripped.startswith("-- =>") or stripped.startswith("-- !!"):
            fail(lineno, f"an expectation inside the statement of line {start} (no `;`?)")
        current.append(line)
        if _scan_line(line, state):
            sql = "\n".join(current).strip()
            statements.append(Statement(start, sql, ordered=has_top_level_order_by(sql)))
            current = []
    if pending is not None:
        fail(pending[0], f"`-- =>` literal does not parse: {pending[1]!r}")
    if current:
        fail(start, "statement not ended by `;` at the end of a line")
    return statements


def parse_case(path) -> Case:
    path = Path(path)
    text = path.read_text()
    first = text.lstrip().splitlines()[0].strip() if text.strip() else ""
    return Case(path, first == VARVEDB_ONLY, parse_script(text, path.name))


def is_varvedb_only(path) -> bool:
    with open(path) as f:
        for line in f:
            if line.strip():
                return line.strip() == VARVEDB_ONLY
    return False


# ---------------------------------------------------------------- values

def normalize(v):
    """A value as both sides are compared (see the module's docstring)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, Decimal):
        return int(v) if v.is_finite() and v == v.to_integral_value() else float(v)
    if isinstance(v, dt.datetime):
        v = v.replace(tzinfo=dt.timezone.utc) if v.tzinfo is None else v
        return v.astimezone(dt.timezone.utc).isoformat(sep=" ")
    if isinstance(v, np.ndarray) and v.dtype == np.bool_:
        return "".join("1" if x else "0" for x in v.tolist())     # a bit string, as psycopg's
    if isinstance(v, np.ndarray):
        return [float(x) for x in v.ravel().tolist()]
    if isinstance(v, SparseVector) or type(v).__name__ == "SparseVector":
        return sparse_text(SparseVector(v))      # varvedb's or pgvector-python's
    if hasattr(v, "to_list") and type(v).__module__.startswith("pgvector"):
        return [float(x) for x in v.to_list()]          # HalfVector, Vector
    if isinstance(v, (list, tuple)):
        return [normalize(x) for x in v]
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items()}
    return v


def same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _sort_key(v):
    if v is None:
        return (0,)
    if isinstance(v, bool):
        return (1, v)
    if isinstance(v, (int, float)):
        return (2, v)
    if isinstance(v, str):
        return (3, v)
    if isinstance(v, list):
        return (4, tuple(_sort_key(x) for x in v))
    if isinstance(v, dict):
        return (5, json.dumps(v, sort_keys=True, default=str))
    return (6, repr(v))


def same_rows(a: list[tuple], b: list[tuple], ordered: bool) -> bool:
    if len(a) != len(b):
        return False
    if not ordered:
        key = lambda row: tuple(_sort_key(v) for v in row)   # noqa: E731
        a, b = sorted(a, key=key), sorted(b, key=key)
    return all(len(x) == len(y) and all(same(u, v) for u, v in zip(x, y))
               for x, y in zip(a, b))


# ---------------------------------------------------------------- running

def _crash(e: BaseException) -> Outcome:
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
    return Outcome(crashed=True, message=f"{type(e).__name__}: {e}{at}")


def execute_varvedb(case: Case, tmp_path) -> list[Outcome]:
    import varvedb
    from varvedb.errors import VarveError
    out = []
    db = varvedb.connect(Path(tmp_path) / "t.varve")
    try:
        for st in case.statements:
            try:
                res = db.sql(st.sql)
            except VarveError as e:
                code = getattr(e, "sqlstate", None)
                out.append(Outcome(sqlstate=code, message=str(e) or type(e).__name__))
                continue
            except Exception as e:
                out.append(_crash(e))
                continue
            try:
                out.append(Outcome(list(res.columns),
                                   [tuple(normalize(v) for v in r) for r in res.rows],
                                   res.status))
            except Exception as e:
                out.append(_crash(e))
    finally:
        db.close()
    return out


def execute_pg(case: Case, conn) -> list[Outcome]:
    import psycopg
    out = []
    for st in case.statements:
        try:
            cur = conn.execute(st.sql)
            if cur.description is None:
                out.append(Outcome(status=cur.statusmessage or ""))
            else:
                out.append(Outcome([d.name for d in cur.description],
                                   [tuple(normalize(v) for v in r) for r in cur.fetchall()],
                                   cur.statusmessage or ""))
        except psycopg.Error as e:
            out.append(Outcome(sqlstate=e.sqlstate, message=str(e).splitlines()[0]))
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.execute("ROLLBACK")        # a script that left a transaction open
    return out


def expectation_failures(case: Case, outcomes: list[Outcome]) -> list[str]:
    bad = []
    for st, got in zip(case.statements, outcomes):
        where = f"{case.path.name}:{st.line}: {st.brief()}"
        if st.sqlstate is not None:
            if got.crashed or got.sqlstate != st.sqlstate:
                bad.append(f"{where}\n    expected error {st.sqlstate}, got {got.describe()}")
        elif got.failed:
            bad.append(f"{where}\n    expected success, got {got.describe()}")
        elif st.rows is not None and not same_rows(got.rows, st.rows, st.ordered):
            order = "in order" if st.ordered else "as a set"
            bad.append(f"{where}\n    expected rows ({order}) {st.rows}\n"
                       f"    got                {got.rows}")
    return bad


def _assert_none(problems: list[str], title: str) -> None:
    if problems:
        shown = problems[:SHOW_AT_MOST]
        more = len(problems) - len(shown)
        raise AssertionError(f"{title}: {len(problems)} statement(s)\n" + "\n".join(shown)
                             + (f"\n... and {more} more" if more else ""))


def run_case_varvedb(path, tmp_path) -> list[Outcome]:
    """Run a case file on a fresh varvedb file and check its expectations."""
    case = parse_case(path)
    outcomes = execute_varvedb(case, tmp_path)
    _assert_none(expectation_failures(case, outcomes), f"varvedb misses {case.path.name}")
    return outcomes


def run_case_pg(path, conn) -> list[Outcome]:
    """Run a case file on PostgreSQL (conn: an empty schema) and check its expectations."""
    case = parse_case(path)
    outcomes = execute_pg(case, conn)
    _assert_none(expectation_failures(case, outcomes), f"PostgreSQL misses {case.path.name}")
    return outcomes


def differences(case: Case, ours: list[Outcome], theirs: list[Outcome]) -> list[str]:
    """Statement by statement: the same rows, columns and tag, or the same SQLSTATE."""
    diffs = []
    for st, a, b in zip(case.statements, ours, theirs):
        if a.failed or b.failed:
            ok = not a.crashed and a.failed and b.failed and a.sqlstate == b.sqlstate
        else:
            ok = (a.columns == b.columns and a.status == b.status
                  and same_rows(a.rows, b.rows, st.ordered))
        if not ok:
            diffs.append(f"{case.path.name}:{st.line}: {st.brief()}\n"
                         f"    varvedb:    {a.describe()}\n"
                         f"    PostgreSQL: {b.describe()}")
    return diffs


def run_differential(path, tmp_path, conn) -> None:
    """Run a case file on varvedb and on PostgreSQL; every statement must agree."""
    case = parse_case(path)
    if case.varvedb_only:
        raise ValueError(f"{case.path.name} is varvedb-only")
    ours = execute_varvedb(case, tmp_path)
    theirs = execute_pg(case, conn)
    _assert_none(differences(case, ours, theirs), f"varvedb differs from PostgreSQL on "
                                                  f"{case.path.name}")
