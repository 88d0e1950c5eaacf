"""`varvedb sql`: run SQL on a file, once or at a prompt in the manner of psql.

Three layers, each usable alone:
* `StatementSplitter` cuts text into statements at `;` outside quotes,
  dollar quotes and comments, fed a line at a time (so a prompt knows when a
  statement is complete);
* the formatters turn a SqlResult into psql's aligned table, JSON or CSV,
  with values in PostgreSQL's (and pgvector's) text forms (query/literals.py);
* `Shell` runs statements and backslash commands (\\d, \\d NAME, \\timing,
  \\q, \\?), from a string, a script or an interactive prompt (readline:
  line editing and history).
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import select
import signal
import sys
import time
import unicodedata

import numpy as np

from .errors import OptionError, VarveError
from .query.literals import (float_text, json_text, timestamp_text,  # noqa: F401 (the shell's API)
                             value_text, vector_text)

PROMPT, PROMPT_CONTINUE = "varvedb=> ", "varvedb-> "     # psql's: =*> in a transaction
HISTORY_LENGTH = 2000
FORMATS = ("table", "json", "csv")

# ---- statements -----------------------------------------------------------------

# In normal text, runs of characters that cannot start a quote, a comment or end
# a statement are skipped by one regex step, not a character at a time.
_PLAIN = re.compile(r"[^;'\"$\-/]+")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")
_QUOTE_END = {"'": re.compile(r"'"), '"': re.compile(r'"')}
_ESCAPED_QUOTE_END = re.compile(r"(?:[^'\\]|\\.)*'", re.S)
_PARTIAL_TAG = re.compile(r"\$[A-Za-z0-9_\x80-\uffff]*")
_BLOCK = re.compile(r"/\*|\*/")


class StatementSplitter:
    """Statements out of text fed in pieces: `feed(text)` returns the statements
    the text completed (each with its `;`); `finish()` returns what is left.

    A `;` ends a statement outside '...' (and E'...' with backslash escapes),
    "...", $tag$...$tag$, -- comments and nested /* */ comments. The scan
    keeps its state between pieces, so a long statement is scanned once."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.buf = ""
        self.pos = 0              # where the scan resumes
        self.start = 0            # where the current statement begins
        self.mode = None          # None (plain), "'", "e'", '"', "$tag$", "--", "/*"
        self.depth = 0            # nesting of /* */
        self.content = False      # the current statement has more than comments

    @property
    def pending(self) -> bool:
        """Text of an unfinished statement (a quote or comment left open counts)."""
        return self.content or self.mode not in (None, "--")

    @property
    def in_quote(self) -> bool:
        return self.mode not in (None, "--", "/*")

    def feed(self, text: str) -> list[str]:
        self.buf += text
        out = []
        buf, i, n = self.buf, self.pos, len(self.buf)
        while i < n:
            mode = self.mode
            if mode is None:
                m = _PLAIN.match(buf, i)
                if m:
                    if not self.content and not m.group().isspace():
                        self.content = True
                    i = m.end()
                    continue
                c = buf[i]
                if i == n - 1 and c in "-/$":
                    break                   # a comment or a dollar quote may begin: wait
                if c == ";":
                    if self.content:
                        out.append(buf[self.start:i + 1].strip())
                    self.start, self.content = i + 1, False
                    i += 1
                elif c in "'\"":
                    self.content = True
                    prev = buf[i - 1] if i > 0 else ""
                    before = buf[i - 2] if i > 1 else ""
                    escaped = c == "'" and prev in "eE" and not (before.isalnum() or before == "_")
                    self.mode = "e'" if escaped else c
                    i += 1
                elif c == "$":
                    m = _DOLLAR_TAG.match(buf, i)
                    prev = buf[i - 1] if i > 0 else ""
                    if m is None and _PARTIAL_TAG.fullmatch(buf, i):
                        break               # $tag not finished yet: wait
                    self.content = True
                    if m and not (prev.isalnum() or prev == "_"):
                        self.mode = m.group()
                        i = m.end()
                    else:
                        i += 1
                elif buf.startswith("--", i):
                    self.mode = "--"
                    i += 2
                elif buf.startswith("/*", i):
                    self.mode, self.depth = "/*", 1
                    i += 2
                else:                       # a lone - or /
                    self.content = True
                    i += 1
            elif mode == "--":
                j = buf.find("\n", i)
                if j < 0:
                    i = n
                else:
                    self.mode, i = None, j + 1
            elif mode == "/*":
                m = _BLOCK.search(buf, i)
                if m is None:
                    i = max(i, n - 1)       # a last * or / may pair with what comes next
                    break
                else:
                    self.depth += 1 if m.group() == "/*" else -1
                    i = m.end()
                    if self.depth == 0:
                        self.mode = None
            elif mode == "e'":
                m = _ESCAPED_QUOTE_END.match(buf, i)
                if m is None or m.end() == n:
                    break                   # open, or '' may follow: wait
                i = m.end()
                if buf[i] == "'":
                    i += 1
                else:
                    self.mode = None
            elif mode in ("'", '"'):
                j = buf.find(mode, i)
                if j < 0:
                    i = n
                elif j == n - 1:
                    i = j                                # '' may follow: wait
                    break
                elif buf.startswith(mode, j + 1):        # '' or "" inside: still quoted
                    i = j + 2
                else:
                    self.mode, i = None, j + 1
            else:                                        # $tag$ ... $tag$
                j = buf.find(mode, i)
                if j < 0:
                    i = max(i, n - len(mode) + 1)
                    break
                self.mode, i = None, j + len(mode)
        # keep only the unfinished statement
        self.buf, self.pos = buf[self.start:], i - self.start
        self.start = 0
        return out

    def finish(self) -> str | None:
        """The unfinished statement (without a `;`), if it has any content; resets."""
        rest = self.buf.strip() if self.content or self.in_quote else ""
        self.reset()
        return rest or None


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) \
        and not isinstance(v, (bool, np.bool_))


def _width(s: str) -> int:
    """Display columns of a string (wide East Asian characters take two)."""
    if s.isascii():
        return len(s)
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


# ---- results -------------------------------------------------------------------------

def column_kinds(result) -> list[str | None]:
    """The kind of each column of a SqlResult where its plan knew it (int, float,
    json, ...), else None (the values tell)."""
    return list(result.kinds)


def aligned_table(columns: list[str], rows: list[tuple], title: str | None = None,
                  footer: bool = True, kinds: list[str | None] | None = None) -> str:
    """psql's aligned format: centred header, a rule, rows (numbers right-aligned,
    a multi-line value continued with + at its right), "(N rows)"."""
    kinds = kinds or [None] * len(columns)
    cells = [[value_text(v, k) for v, k in zip(row, kinds)] for row in rows]
    right = [k in ("int", "float") if k not in (None, "null", "unknown") else
             bool(rows) and all(r[j] is None or _is_number(r[j]) for r in rows)
             and any(r[j] is not None for r in rows) for j, k in enumerate(kinds)]
    widths = [_width(c) for c in columns]
    split = [[(c or "").split("\n") for c in row] for row in cells]
    for row in split:
        for j, lines in enumerate(row):
            widths[j] = max(widths[j], max(_width(x) for x in lines))
    last = len(columns) - 1
    out = []
    if title is not None:
        total = sum(widths) + 3 * last + 2 if columns else len(title)
        out.append(" " * max(0, (total - _width(title)) // 2) + title)
    if columns:
        head = []
        for j, name in enumerate(columns):
            pad = widths[j] - _width(name)
            head.append(" " + " " * (pad // 2) + name + " " * (pad - pad // 2) + " ")
        out.append("|".join(head))
        out.append("+".join("-" * (w + 2) for w in widths))
    else:
        out.append("--")
    for row in split:
        height = max((len(x) for x in row), default=1)
        for k in range(height):
            parts = []
            for j, lines in enumerate(row):
                text = lines[k] if k < len(lines) else ""
                more = k < len(lines) - 1
                pad = " " * (widths[j] - _width(text))
                body = pad + text if right[j] else text + pad
                if j == last and not more:
                    # psql pads the last column only when it is right-aligned
                    body = body if right[j] and k < len(lines) else text
                    parts.append(" " + body)
                else:
                    parts.append(" " + body + ("+" if more else " "))
            out.append("|".join(parts))
    if footer:
        out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out) + "\n"


def _json_value(v):
    if isinstance(v, np.ndarray):
        # through float4's shortest text, so 0.1 stays 0.1 rather than 0.10000000149011612
        text = vector_text(v)
        return [float(x) for x in text[1:-1].split(",")] if len(text) > 2 else []
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    if isinstance(v, (float, np.floating)):
        v = float(v)
        return v if math.isfinite(v) else float_text(v)    # "NaN", as PostgreSQL's to_json
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def json_rows(columns: list[str], rows: list[tuple]) -> str:
    """A JSON array with one object per row, one row a line."""
    if not rows:
        return "[]\n"
    lines = [json.dumps({c: _json_value(v) for c, v in zip(columns, r)}, ensure_ascii=False,
                        allow_nan=False, default=str) for r in rows]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def _csv_field(s: str | None) -> str:
    if s is None:
        return ""                  # NULL: an empty field; an empty string is ""
    if s == "" or any(c in s for c in ',"\r\n'):
        return '"' + s.replace('"', '""') + '"'
    return s


def csv_rows(columns: list[str], rows: list[tuple], kinds: list[str | None] | None = None) -> str:
    """RFC 4180: a header line, then the rows, CRLF line ends; values in their text form."""
    kinds = kinds or [None] * len(columns)
    lines = [",".join(_csv_field(c) for c in columns)]
    lines += [",".join(_csv_field(value_text(v, k)) for v, k in zip(r, kinds)) for r in rows]
    return "".join(line + "\r\n" for line in lines)


_ROW_TAGS = ("INSERT", "UPDATE", "DELETE", "MERGE")


def format_result(result, fmt: str = "table") -> str:
    """What the shell prints for one statement's SqlResult."""
    status = result.status or ""
    if result.copy_data is not None:      # COPY ... TO STDOUT: its data, as psql prints it
        return result.copy_text() + (status + "\n" if fmt == "table" else "")
    has_rows = bool(result.columns) or status.startswith("SELECT")
    if fmt != "table":
        # machine formats carry only data; a statement without rows prints nothing
        if not has_rows:
            return ""
        if fmt == "json":
            return json_rows(result.columns, result.rows)
        return csv_rows(result.columns, result.rows, column_kinds(result))
    if not has_rows:
        return "" if status == "EMPTY" else status + "\n"
    text = aligned_table(result.columns, result.rows, kinds=column_kinds(result)) + "\n"
    if status.startswith(_ROW_TAGS):          # INSERT ... RETURNING: the rows, then the tag
        text += status + "\n"
    return text


# ---- errors ------------------------------------------------------------------------

_DISPLAY, _RIGHT_CUT = 60, 10      # psql's error-position window


def error_text(e: BaseException, statement: str | None = None) -> str:
    """psql's report of an error: ERROR:  message, for a known position the line
    with a caret under it, then the SQLSTATE."""
    if isinstance(e, VarveError):
        message, state = str(e), getattr(e, "sqlstate", "XX000")
    else:                                # a bug below: reported, the session goes on
        message, state = f"internal error: {type(e).__name__}: {e}", "XX000"
    lines = [f"ERROR:  {message}"]
    pos = getattr(e, "position", None)
    if statement and isinstance(pos, int) and 1 <= pos <= len(statement) + 1:
        before = statement[:pos - 1]
        lineno = before.count("\n") + 1
        line_start = before.rfind("\n") + 1
        line_end = statement.find("\n", line_start)
        line = statement[line_start:line_end if line_end >= 0 else len(statement)]
        col = pos - 1 - line_start
        beg, end = 0, len(line)
        cut_left = cut_right = False
        if end > _DISPLAY:
            if col + _RIGHT_CUT < _DISPLAY:
                end, cut_right = _DISPLAY, True
            else:
                if col + _RIGHT_CUT < end:
                    end, cut_right = col + _RIGHT_CUT, True
                if end - beg > _DISPLAY:
                    beg, cut_left = end - _DISPLAY, True
        prefix = f"LINE {lineno}: " + ("..." if cut_left else "")
        lines.append(prefix + line[beg:end] + ("..." if cut_right else ""))
        lines.append(" " * (len(prefix) + _width(line[beg:col])) + "^")
    lines.append(f"SQLSTATE: {state}")
    return "\n".join(lines) + "\n"


# ---- describing tables (\d) ----------------------------------------------------------

OPCLASS = {"l2": "l2_ops", "dot": "ip_ops", "cosine": "cosine_ops", "hamming": "hamming_ops"}


def sql_type(field) -> str:
    """A field's type in SQL: int -> bigint, json -> jsonb, vector(n) / halfvec(n), ..."""
    if field.kind == "vector":
        name = {"f16": "halfvec", "bit": "bit"}.get(field.dtype, "vector")
        return f"{name}({field.dim})"
    if field.kind == "sparsevec":
        return f"sparsevec({field.dim})" if field.dim else "sparsevec"
    return {"int": "bigint", "float": "double precision", "bool": "boolean", "text": "text",
            "json": "jsonb", "timestamp": "timestamp with time zone", "bytes": "bytea"}[field.kind]


def _literal(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return value_text(v)
    text = value_text(v)
    return "'" + text.replace("'", "''") + "'"


def describe_tables(db) -> str:
    names = db.collections()
    if not names:
        return "Did not find any tables.\n"
    rows = []
    for name in names:
        coll = db[name]
        schema = coll.table.schema
        rows.append((name, coll.count(), len(schema.fields) + (0 if schema.id_hidden else 1)))
    return aligned_table(["Name", "Rows", "Columns"], rows, title="List of tables") + "\n"


def describe_table(db, name: str) -> str | None:
    """Columns (SQL type, nullability, default) and indexes of one table; None if
    there is no such table."""
    if name not in db.collections():
        return None
    schema = db[name].table.schema
    rows = []
    if not schema.id_hidden:
        rows.append(("id", "bigint" if schema.id_kind == "int" else "text", "not null", None))
    for fname, f in schema.fields.items():
        default = f.default
        rows.append((fname, sql_type(f), "not null" if f.not_null else None,
                     None if default is None else _literal(default)))
    out = aligned_table(["Column", "Type", "Nullable", "Default"], rows,
                        title=f'Table "{name}"', footer=False)
    indexes = []
    if not schema.id_hidden:
        indexes.append(f'"{schema.key_name(name)}" PRIMARY KEY (id)')
    for fname, f in schema.fields.items():
        for spec in f.vector_specs if f.kind == "vector" else ():    # (its own first)
            metric = spec.metric or f.metric
            opclass = {"f16": "halfvec_", "bit": "bit_"}.get(f.dtype, "vector_") + \
                OPCLASS.get(metric, f"{metric}_ops")
            how = f" WITH (m = {spec.m}, ef_construction = {spec.ef_construction})" \
                if hasattr(spec, "ef_construction") else ""
            method = "hnsw" if how else "ivfflat" if spec.pq_m is None else "ivfpq"
            indexes.append(f'"{spec.name or f"{name}_{fname}_idx"}" {method} ({fname} {opclass})'
                           + how)
        if f.kind != "vector" and f.index:
            indexes.append(f'"{f.index_name or f"{name}_{fname}_idx"}" {f.index} ({fname})')
        if f.fts:
            indexes.append(f"full-text ({fname})")
    if indexes:
        out += "Indexes:\n" + "".join(f"    {x}\n" for x in indexes)
    return out + "\n"


HELP = """\
General
  \\q                 quit (also Ctrl-D)
  \\?                 this help
Informational
  \\d                 list tables: name, rows, columns
  \\d NAME            describe a table: columns, their SQL types, indexes
Query
  \\timing [on|off]   print the time each statement took
  \\r                 reset (clear) the statement being typed
SQL statements end with ";" (one inside quotes or a comment does not count)
and may span several lines.
"""


# ---- the shell ---------------------------------------------------------------------

class _ScriptData:
    """A binary file object over a script's next lines, up to a line `\\.` or the
    script's end: what a COPY ... FROM STDIN of the script reads. A statement
    that reads no data takes no line."""

    def __init__(self, lines):
        self.lines, self.rest, self.started, self.done = lines, b"", False, False

    def read(self, n: int = -1) -> bytes:
        self.started = True
        parts, size = [self.rest], len(self.rest)
        while not self.done and (n < 0 or size < n):
            line = next(self.lines, None)
            if line is None or line.rstrip("\r\n") == "\\.":
                self.done = True
                break
            b = (line if line.endswith("\n") else line + "\n").encode("utf-8", "surrogateescape")
            parts.append(b)
            size += len(b)
        data = b"".join(parts)
        if n < 0:
            self.rest = b""
            return data
        self.rest = data[n:]
        return data[:n]

    def drain(self) -> None:
        while not self.done:
            self.read(1 << 20)


class Shell:
    """Statements and backslash commands against one database.

    `out(text)` and `err(text)` receive what is printed (text ends with its
    newline). Each `run_*` returns the exit status: 0, or 1 after an error."""

    def __init__(self, db, out, err, fmt: str = "table", timing: bool = False):
        if fmt not in FORMATS:
            raise OptionError(f"fmt is one of {FORMATS}, got {fmt!r}")
        self.db, self.out, self.err, self.fmt, self.timing = db, out, err, fmt, timing
        self.splitter = StatementSplitter()
        self.quit = False
        self._script = None         # the lines of a script being run: COPY FROM STDIN's data

    # one statement / one command
    def statement(self, text: str) -> bool:
        """Run one SQL statement and print its result (or its error); True if it ran."""
        t0 = time.perf_counter()
        data = None if self._script is None else _ScriptData(self._script)
        try:
            result = self.db.sql(text, copy_data=data)
        except KeyboardInterrupt:
            self.err("ERROR:  canceling statement due to user request\nSQLSTATE: 57014\n")
            return False
        except Exception as e:          # noqa: BLE001 — every failure is reported, not raised
            self.err(error_text(e, text))
            return False
        finally:
            if data is not None and data.started:
                data.drain()        # a COPY that failed midway: the rest of its data too
        elapsed = time.perf_counter() - t0
        text_out = format_result(result, self.fmt)
        if text_out:
            self.out(text_out)
        if self.timing:               # beside JSON or CSV on stdout it goes to stderr
            (self.out if self.fmt == "table" else self.err)(f"Time: {elapsed * 1e3:.3f} ms\n")
        return True

    def command(self, line: str) -> bool:
        """Run one backslash command; True unless it failed."""
        word, _, arg = line.strip().partition(" ")
        arg = arg.strip().rstrip(";").strip()
        word = word.rstrip(";")
        if word == "\\q":
            self.quit = True
        elif word == "\\?":
            self.out(HELP)
        elif word == "\\r":
            self.splitter.reset()
            self.out("Query buffer reset (cleared).\n")
        elif word == "\\timing":
            if arg.lower() in ("on", "off"):
                self.timing = arg.lower() == "on"
            elif arg:
                self.err(f'unrecognized value "{arg}" for "\\timing": Boolean expected\n')
                return False
            else:
                self.timing = not self.timing
            self.out(f"Timing is {'on' if self.timing else 'off'}.\n")
        elif word in ("\\d", "\\dt", "\\d+"):
            try:
                if not arg:
                    self.out(describe_tables(self.db))
                else:
                    if arg.startswith('"'):        # quoted: exactly this name
                        text = describe_table(self.db, arg[1:-1].replace('""', '"'))
                    else:                           # SQL folds it to lower case
                        text = describe_table(self.db, arg.lower())
                        if text is None and arg != arg.lower():
                            text = describe_table(self.db, arg)   # a Python API name
                    if text is None:
                        self.err(f'Did not find any relation named "{arg}".\n')
                        return False
                    self.out(text)
            except Exception as e:      # noqa: BLE001
                self.err(error_text(e))
                return False
        else:
            self.err(f"invalid command {word}\nTry \\? for help.\n")
            return False
        return True

    def line(self, text: str, stop_on_error: bool = False) -> bool:
        """One line of input: a backslash command, or SQL whose completed
        statements run now. False if something failed; with stop_on_error the
        statements after a failed one on the same line are dropped."""
        if not self.splitter.in_quote and text.lstrip().startswith("\\"):
            return self.command(text)
        ok = True
        for stmt in self.splitter.feed(text if text.endswith("\n") else text + "\n"):
            if not self.statement(stmt):
                ok = False
                if stop_on_error:
                    self.splitter.reset()
                    break
        return ok

    def run_lines(self, lines, stop_on_error: bool = True) -> int:
        """A script (lines of a string, or a file object such as stdin, read as
        it arrives); a last statement without `;` runs at the end. Stops at the
        first error unless told otherwise. A COPY ... FROM STDIN reads the lines
        after it, up to a line `\\.`, as its data (as psql does)."""
        lines = self._script = iter(lines)
        try:
            return self._run_lines(lines, stop_on_error)
        finally:
            self._script = None

    def _run_lines(self, lines, stop_on_error: bool) -> int:
        status = 0
        for text in lines:
            if not self.line(text, stop_on_error):
                status = 1
                if stop_on_error:
                    return status
            if self.quit:
                return status
        rest = self.splitter.finish()
        if rest is not None and not self.statement(rest):
            status = 1
        return status

    def run_text(self, text: str, stop_on_error: bool = True) -> int:
        return self.run_lines(text.splitlines(keepends=True), stop_on_error)

    # the prompt
    def _transaction_mark(self) -> str:
        """psql's %x: * inside BEGIN ... COMMIT, ! once a statement in it failed."""
        session = self.db.thread_session()
        if not session.in_transaction:
            return ""
        return "!" if session.sql_failed else "*"

    def _completions(self, prefix: str) -> list[str]:
        """Tab completion: backslash commands, tables, their columns, keywords."""
        if prefix.startswith("\\"):
            return [c for c in COMMANDS if c.startswith(prefix)]
        words = set()
        try:
            for name in self.db.collections():
                words.add(name)
                words.update(self.db[name].table.schema.fields)
        except VarveError:
            pass
        low = prefix.lower()
        names = sorted(w for w in words if w.startswith(prefix))
        keys = [k if prefix[:1].isupper() else k.lower() for k in KEYWORDS
                if k.lower().startswith(low)]
        return names + keys

    def interactive(self, banner: str = "", history: str | None = None,
                    line_editing: bool = True) -> int:
        """Read lines at a prompt until \\q or Ctrl-D; errors are printed and the
        session goes on. Ctrl-C drops the statement being typed. line_editing=False
        reads plain lines (psql's --no-readline)."""
        history = history or os.environ.get("VARVEDB_HISTORY") or \
            os.path.join(os.path.expanduser("~"), ".varvedb_history")
        readline = _readline(history, self._completions) if line_editing else None
        plain = PlainLines.open(self.out) if readline is None else None
        read = plain.read if plain is not None else input
        if banner:
            self.out(banner)
        try:
            while not self.quit:
                prompt = (PROMPT_CONTINUE if self.splitter.pending else PROMPT) \
                    .replace(">", self._transaction_mark() + ">")
                try:
                    text = read(prompt)
                except KeyboardInterrupt:
                    self.splitter.reset()
                    self.out("\n")
                    continue
                except EOFError:
                    self.out("\n")
                    break
                self.line(text)
        finally:
            if plain is not None:
                plain.close()
            if readline is not None:
                try:
                    readline.write_history_file(history)
                except OSError:
                    pass
        return 0


class PlainLines:
    """Lines typed at a terminal, without line editing, where Ctrl-C is never lost.

    input() writes the prompt, then blocks in read(): a SIGINT that lands between
    the two runs Python's handler but interrupts no call, so the read waits on
    and the KeyboardInterrupt comes only after the next Enter (seen on a loaded
    machine, where the gap is long). Here the signal also writes a byte to a
    pipe the wait watches (signal.set_wakeup_fd), so the wait ends at once and
    the handler's KeyboardInterrupt is raised."""

    def __init__(self, fd: int, out, wake_r: int, wake_w: int, previous: int):
        self.fd, self.out = fd, out
        self.wake_r, self.wake_w, self.previous = wake_r, wake_w, previous
        self.pending = b""

    @classmethod
    def open(cls, out) -> "PlainLines | None":
        """Reading sys.stdin's terminal; None where there is no such descriptor or
        this is not the main thread (then input() reads)."""
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            return None
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        try:
            previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        except ValueError:                      # not the main thread
            os.close(wake_r)
            os.close(wake_w)
            return None
        return cls(fd, out, wake_r, wake_w, previous)

    def read(self, prompt: str) -> str:
        """One line without its newline, as input(); EOFError at Ctrl-D."""
        self.out(prompt)
        try:
            while b"\n" not in self.pending:
                ready, _, _ = select.select([self.fd, self.wake_r], [], [])
                if self.wake_r in ready:        # a signal: its handler runs next
                    try:
                        os.read(self.wake_r, 64)
                    except BlockingIOError:
                        pass
                if self.fd in ready:
                    data = os.read(self.fd, 65536)
                    if not data:
                        if not self.pending:
                            raise EOFError
                        data = b"\n"           # Ctrl-D after text ends that line
                    self.pending += data
        except KeyboardInterrupt:
            self.pending = b""                  # the terminal dropped its line too
            raise
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode(sys.stdin.encoding or "utf-8", "replace")

    def close(self) -> None:
        signal.set_wakeup_fd(self.previous)
        os.close(self.wake_r)
        os.close(self.wake_w)


COMMANDS = ("\\d", "\\q", "\\?", "\\r", "\\timing")
KEYWORDS = ("SELECT", "FROM", "WHERE", "ORDER BY", "GROUP BY", "HAVING", "LIMIT", "OFFSET",
            "INSERT INTO", "VALUES", "RETURNING", "UPDATE", "SET", "DELETE FROM", "CREATE",
            "TABLE", "INDEX", "USING", "hnsw", "DROP", "ALTER", "EXPLAIN", "ANALYZE", "BEGIN",
            "COMMIT", "ROLLBACK", "DISTINCT", "COUNT", "AND", "OR", "NOT", "NULL", "IS", "IN",
            "AS OF VERSION", "AS OF TIMESTAMP", "vector", "halfvec", "bigint", "text",
            "double precision", "boolean", "jsonb", "timestamptz", "PRIMARY KEY")


def _readline(history: str, complete=None):
    """The stdlib readline (line editing, history from `history`, Tab completing
    through `complete(prefix) -> words`), if it exists here."""
    try:
        import readline
    except ImportError:             # not on every platform: the prompt still works
        return None
    readline.set_history_length(HISTORY_LENGTH)
    if complete is not None:
        matches: list[str] = []

        def completer(text: str, state: int):
            if state == 0:
                matches[:] = complete(text)
            return matches[state] if state < len(matches) else None

        readline.set_completer(completer)
        readline.set_completer_delims(" \t\n(),;=<>+-*/'\"")
        if "libedit" in (readline.__doc__ or ""):         # macOS's readline
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    return readline


def main(path: str, statement: str | None, fmt: str, readonly: bool,
         stdin=None, out=None, err=None, line_editing: bool = True) -> int:
    """`varvedb sql`: the exit status of running STATEMENT, the script on stdin,
    or the prompt when stdin is a terminal."""
    from .database import connect
    stdin = sys.stdin if stdin is None else stdin
    out = out or (lambda s: (sys.stdout.write(s), sys.stdout.flush()))
    err = err or (lambda s: (sys.stderr.write(s), sys.stderr.flush()))
    try:
        db = connect(path, readonly=readonly)
    except Exception as e:              # noqa: BLE001 — a file we cannot open is one error line
        err(error_text(e))
        return 1
    with db:
        shell = Shell(db, out, err, fmt)
        try:
            if statement is not None:
                return shell.run_text(statement)
            if not _is_terminal(stdin):
                return shell.run_lines(stdin)
        except UnicodeDecodeError:
            err('ERROR:  invalid byte sequence for encoding "UTF8"\nSQLSTATE: 22021\n')
            return 1
        except BrokenPipeError:          # `varvedb sql ... | head`: the reader has gone
            _quiet_stdout()
            return 1
        from . import __version__
        mode = " (read-only)" if readonly else ""
        return shell.interactive(f"varvedb {__version__}: {path}{mode}\n"
                                 f'Type "\\?" for help.\n\n',
                                 line_editing=line_editing)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the flush at exit does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # not a real file (a test's capture)
        pass


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
