"""`varvedb sql`: psql's output forms, the statement splitter, the one-shot and
script modes (CliRunner and a real process), and the prompt through a real
pseudo-terminal."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

import datetime as dt

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import varvedb as vv
from varvedb.cli import main
from varvedb.shell import (StatementSplitter, aligned_table, float_text, timestamp_text,
                           vector_text)

from conftest import SRC, file_digest


@pytest.fixture
def sql_file(tmp_path):
    path = str(tmp_path / "shell.varve")
    with vv.connect(path) as db:
        db.sql("CREATE TABLE t (id bigint PRIMARY KEY, name text, score double precision, "
               "ok boolean, meta jsonb, at timestamptz, emb vector(3))")
        db.sql("INSERT INTO t VALUES (1, 'a', 2.5, true, '{\"x\": [1, 2]}', "
               "'2026-12-01 12:00:00+00', '[1,2.5,3]'), "
               "(2, NULL, NULL, false, '\"s\"', '2026-12-01 12:00:00.25+00', NULL), "
               "(10, '', 1e15, NULL, NULL, NULL, '[0.1,1e-7,-0.5]')")
        db.sql("CREATE INDEX t_emb_hnsw ON t USING hnsw (emb vector_cosine_ops) "
               "WITH (m = 8, ef_construction = 64)")
        db.create_collection("p", {"score": vv.Float(index="sorted"), "tag": vv.Text(index="hash"),
                                   "h": vv.Vector(2, metric="dot", dtype="f16",
                                                  index=vv.HNSW(m=4))})
    return path


def sql(*args, input=None):
    return CliRunner().invoke(main, ["sql", *args], input=input, catch_exceptions=False)


# ---- values in PostgreSQL's text forms (the expected strings are pgvector 0.8's and
# PostgreSQL 18's output for the same values) ---------------------------------------------

def test_floats_print_as_postgresql_prints_float8():
    got = [float_text(x) for x in (2.5, 1.0, 0.0, -0.0, 1e15, 1e16, 123456789012345.0, 1e-4,
                                   1e-5, -1.5e-7, float("nan"), float("-inf"))]
    assert got == ["2.5", "1", "0", "-0", "1e+15", "1e+16", "123456789012345", "0.0001",
                   "1e-05", "-1.5e-07", "NaN", "-Infinity"]


def test_vectors_print_in_pgvectors_text_form():
    v = np.array([1, 2.5, 3, 100000, 999999, 123456.7, 1e6, 1234567, 123456789, 1e-4, 1.5e-5,
                  0.1, -0.5, 3.4e38], np.float32)
    assert vector_text(v) == ("[1,2.5,3,100000,999999,123456.7,1e+06,1.234567e+06,1.2345679e+08,"
                              "0.0001,1.5e-05,0.1,-0.5,3.4e+38]")
    # every magnitude: the fast path (numpy's digits) agrees with float4's rule one by one
    rng = np.random.default_rng(1)
    for scale in (1e-8, 1e-4, 1e-2, 1.0, 1e4, 1e6, 1e20):
        w = (rng.standard_normal(2000) * scale).astype(np.float32)
        assert vector_text(w) == "[" + ",".join(float_text(x, 6) for x in w.tolist()) + "]"
    # halfvec: the half's value printed as float4, as pgvector does
    assert vector_text(np.array([0.1, 1000], np.float16)) == "[0.099975586,1000]"
    # exact ties between two shortest digit strings go to the even one (float4out's
    # round half to even); a power of two's lower neighbour is half a step away
    ties = np.array([203143.625, 6701.65625, -43286.0625, 2.0 ** 20, 2.0 ** -10], np.float32)
    ties = np.concatenate([ties, np.nextafter(ties, np.float32(0)),
                           np.nextafter(ties, np.float32(np.inf))])
    ties.flags.writeable = False          # as a mapped file's arena hands them
    assert vector_text(ties) == "[" + ",".join(float_text(x, 6) for x in ties.tolist()) + "]"


@settings(deadline=None, max_examples=300)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_every_float4_prints_its_shortest_digits(bits):
    """Any finite float4 bit pattern: the vector's text is float_text's, element by
    element (the kernel's fixed notation and the exponent form left to float_text)."""
    w = np.array(bits, np.uint32).view(np.float32)
    w = w[np.isfinite(w)]
    assert vector_text(w) == "[" + ",".join(float_text(x, 6) for x in w.tolist()) + "]"


def test_timestamps_print_as_timestamptz_in_utc():
    utc = dt.timezone.utc
    assert timestamp_text(dt.datetime(2026, 12, 1, 12, tzinfo=utc)) == "2026-12-01 12:00:00+00"
    assert timestamp_text(dt.datetime(99, 1, 1, 0, 0, 0, 250000, tzinfo=utc)) == \
        "0099-01-01 00:00:00.25+00"
    plus2 = dt.timezone(dt.timedelta(hours=2))
    assert timestamp_text(dt.datetime(2026, 12, 1, 14, tzinfo=plus2)) == "2026-12-01 12:00:00+00"


# ---- the splitter ---------------------------------------------------------------------

SCRIPT = ("SELECT 1; SELECT 'a;''b' AS \"x;y\";\n"
          "-- a comment; still one\n"
          "SELECT $$;$$, $tag$ $$; $tag$, E'\\';', 2 /* c; /* nested; */ ; */ - 1;\n"
          ";;\n"
          "SELECT 3")


def test_splitter_ends_statements_only_at_semicolons_outside_quotes_and_comments():
    sp = StatementSplitter()
    done = sp.feed(SCRIPT)
    assert done == ["SELECT 1;", "SELECT 'a;''b' AS \"x;y\";",
                    "-- a comment; still one\nSELECT $$;$$, $tag$ $$; $tag$, E'\\';', "
                    "2 /* c; /* nested; */ ; */ - 1;"]
    assert sp.pending and sp.finish() == "SELECT 3"
    # fed a character at a time (as a prompt is fed a line at a time): the same cut
    sp, pieces = StatementSplitter(), []
    for c in SCRIPT:
        pieces += sp.feed(c)
    assert pieces == done and sp.finish() == "SELECT 3"


def test_splitter_knows_an_open_quote_or_comment_is_pending():
    sp = StatementSplitter()
    assert sp.feed("SELECT 'a;\n") == [] and sp.pending and sp.in_quote
    assert sp.feed("b';\n") == ["SELECT 'a;\nb';"] and not sp.pending
    assert sp.feed("-- only a comment\n") == [] and not sp.pending
    assert sp.feed("/* open\n") == [] and sp.pending and not sp.in_quote


# ---- one statement, a script: through CliRunner ------------------------------------------

def test_select_prints_psqls_aligned_table(sql_file):
    r = sql(sql_file, "SELECT id, name, score, ok, emb FROM t ORDER BY id")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == (
        " id | name | score | ok |       emb        \n"
        "----+------+-------+----+------------------\n"
        "  1 | a    |   2.5 | t  | [1,2.5,3]\n"
        "  2 |      |       | f  | \n"
        " 10 |      | 1e+15 |    | [0.1,1e-07,-0.5]\n"
        "(3 rows)\n\n")


def test_json_values_print_as_jsonb_where_the_column_kind_is_known():
    out = aligned_table(["meta", "n"], [({"x": [1, 2]}, None), ("s", 1)], kinds=["json", "int"])
    assert out == ('     meta      | n \n---------------+---\n {"x": [1, 2]} |  \n'
                   ' "s"           | 1\n(2 rows)\n')


def test_select_layout_and_footer(sql_file):
    r = sql(sql_file, "SELECT id, name, at FROM t WHERE id <= 2 ORDER BY id")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == " id | name |            at             "
    assert lines[1] == "----+------+---------------------------"
    assert lines[2] == "  1 | a    | 2026-12-01 12:00:00+00"
    assert lines[3] == "  2 |      | 2026-12-01 12:00:00.25+00"
    assert lines[4:] == ["(2 rows)", "", ""]
    one = sql(sql_file, "SELECT 'x' AS v")
    assert one.stdout == " v \n---\n x\n(1 row)\n\n"


def test_multiline_values_continue_with_a_plus(tmp_path):
    path = str(tmp_path / "m.varve")
    r = sql("--create", path, "SELECT 'multi\nline' AS a, 7 AS b")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "   a   | b \n-------+---\n multi+| 7\n line  | \n(1 row)\n\n"


def test_writes_print_their_command_tag_and_returning_prints_rows_then_tag(sql_file):
    r = sql(sql_file, "INSERT INTO t (id, name) VALUES (20, 'x'), (21, 'y'); "
                      "UPDATE t SET name = 'z' WHERE id = 20 RETURNING id, name; "
                      "DELETE FROM t WHERE id = 21")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ("INSERT 0 2\n"
                        " id | name \n----+------\n 20 | z\n(1 row)\n\nUPDATE 1\n"
                        "DELETE 1\n")
    assert sql(sql_file, "SELECT count(*) FROM t").stdout.split("\n")[2].strip() == "4"


def test_json_output_is_an_array_of_objects(sql_file):
    r = sql(sql_file, "--json", "SELECT id, name, ok, meta, at, emb FROM t ORDER BY id")
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows[0] == {"id": 1, "name": "a", "ok": True, "meta": {"x": [1, 2]},
                       "at": "2026-12-01T12:00:00+00:00", "emb": [1, 2.5, 3]}
    assert rows[1]["meta"] == "s" and rows[1]["emb"] is None and rows[1]["name"] is None
    assert rows[2]["emb"] == [0.1, 1e-7, -0.5]        # float4's shortest digits, not 0.100000001
    assert dt.datetime.fromisoformat(rows[1]["at"]) == \
        dt.datetime(2026, 12, 1, 12, 0, 0, 250000, tzinfo=dt.timezone.utc)
    # a statement without rows prints nothing: stdout stays one JSON document
    w = sql(sql_file, "--json", "INSERT INTO t (id) VALUES (30); SELECT id FROM t WHERE id = 30")
    assert w.exit_code == 0 and json.loads(w.stdout) == [{"id": 30}]


def test_csv_output_is_rfc4180(sql_file):
    r = sql(sql_file, "--csv", "SELECT id, name, ok, emb FROM t ORDER BY id")
    assert r.exit_code == 0, r.stderr
    out = r.stdout_bytes.decode()         # .stdout turns CRLF into LF
    assert out.startswith("id,name,ok,emb\r\n1,a,t,\"[1,2.5,3]\"\r\n")
    rows = list(csv.reader(io.StringIO(out, newline="")))
    assert rows == [["id", "name", "ok", "emb"], ["1", "a", "t", "[1,2.5,3]"],
                    ["2", "", "f", ""], ["10", "", "", "[0.1,1e-07,-0.5]"]]
    # NULL is an empty field, the empty string a quoted one
    assert "\r\n2,,f,\r\n" in out and "\r\n10,\"\",,\"[0.1" in out
    assert sql(sql_file, "--csv", "--json", "SELECT 1").exit_code == 2


def test_syntax_error_prints_line_caret_and_sqlstate_and_exits_1(sql_file):
    before = file_digest(sql_file)
    r = sql(sql_file, "SELECT id FROM t;\nSELECT id FROM t WHERE id = = 1")
    assert r.exit_code == 1
    assert r.stdout.startswith(" id \n----\n")             # the first statement ran
    assert r.stderr == ("ERROR:  syntax error at or near \"=\"\n"
                        "LINE 1: SELECT id FROM t WHERE id = = 1\n"
                        "                                    ^\n"
                        "SQLSTATE: 42601\n")
    assert file_digest(sql_file) == before


def test_error_position_on_a_later_line_of_a_long_line_is_cut_as_psql_cuts_it(tmp_path):
    # the expected lines are psql 18's for the same statement
    path = str(tmp_path / "e.varve")
    stmt = "SELECT 1,\n  2 " + "+ 2 " * 30 + "FROM FROM t" + " AND x = 1" * 5
    r = sql("--create", path, stmt)
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        'ERROR:  syntax error at or near "FROM"',
        "LINE 2: ... + 2 + 2 + 2 + 2 + 2 + 2 + 2 + 2 + 2 + 2 + 2 FROM FROM t AND...",
        "                                                             ^",
        "SQLSTATE: 42601"]
    short = sql(path, "SELECT 1,\n  2 " + "+ 2 " * 5 + "FROM FROM t" + " AND x = 1" * 8)
    assert short.stderr.splitlines()[1:3] == [
        "LINE 2:   2 + 2 + 2 + 2 + 2 + 2 FROM FROM t AND x = 1 AND x = 1 AND ...",
        "                                     ^"]


def test_a_file_that_does_not_exist_is_refused_unless_create(tmp_path):
    path = tmp_path / "typo.varve"
    r = sql(str(path), "SELECT 1")
    assert r.exit_code == 1 and r.stderr.startswith("Error: ") and "--create" in r.stderr
    assert not path.exists()
    assert sql("--create", str(path), "SELECT 1").exit_code == 0 and path.exists()


def test_undefined_table_reports_its_sqlstate(tmp_path):
    r = sql("--create", str(tmp_path / "u.varve"), "SELECT * FROM nosuch")
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.splitlines() == ['ERROR:  relation "nosuch" does not exist',
                                     "SQLSTATE: 42P01"]


def test_script_on_stdin_runs_statement_by_statement_and_stops_at_an_error(tmp_path):
    path = str(tmp_path / "s.varve")
    script = ("CREATE TABLE k (id bigint PRIMARY KEY, v text);\n"
              "INSERT INTO k VALUES (1, 'a;b'),\n  (2, 'c');\n"
              "\\d\n"
              "SELECT v FROM k ORDER BY id;\n"
              "INSERT INTO k VALUES (1, 'dup');\n"
              "INSERT INTO k VALUES (3, 'never');\n")
    r = sql("--create", path, input=script)
    assert r.exit_code == 1
    assert r.stdout.startswith("CREATE TABLE\nINSERT 0 2\n    List of tables\n")
    assert "\n  v  \n-----\n a;b\n c\n(2 rows)\n" in r.stdout
    assert "SQLSTATE: 23505" in r.stderr
    ok = sql(path, "--json", "SELECT id FROM k ORDER BY id")
    assert json.loads(ok.stdout) == [{"id": 1}, {"id": 2}]
    # a last statement without its ; still runs
    assert sql(path, input="SELECT 'end' AS e").stdout == "  e  \n-----\n end\n(1 row)\n\n"


def test_copy_from_stdin_in_a_script_reads_its_lines_up_to_the_end_marker(tmp_path):
    """As psql: a COPY ... FROM STDIN takes the script's next lines up to `\\.` as its
    data; a failed COPY takes the rest of its data too (never run as SQL); COPY ...
    TO STDOUT prints the data, then its tag (the data only with --csv/--json)."""
    path = str(tmp_path / "s.varve")
    script = ("CREATE TABLE k (id bigint PRIMARY KEY, v text);\n"
              "COPY k FROM STDIN;\n1\ta\\tb\n2\t\\N\n\\.\n"
              "COPY k (id) FROM STDIN WITH (FORMAT csv);\n3\n\\.\n"
              "SELECT count(*) FROM k;\n"
              "COPY (SELECT * FROM k ORDER BY id) TO STDOUT;\n"
              "COPY k FROM STDIN;\n4\tx\n5\nSELECT 'data, not SQL';\n\\.\n"
              "SELECT 'never';\n")
    r = sql("--create", path, input=script)
    assert r.exit_code == 1, r.stdout
    assert r.stdout.startswith("CREATE TABLE\nCOPY 2\nCOPY 1\n count \n-------\n     3\n")
    assert r.stdout.endswith("(1 row)\n\n1\ta\\tb\n2\t\\N\n3\t\\N\nCOPY 3\n"), r.stdout
    assert "SQLSTATE: 22P04" in r.stderr and "COPY k, line 2" in r.stderr
    out = sql(path, "--csv", "COPY (SELECT * FROM k ORDER BY id) TO STDOUT WITH (FORMAT csv)")
    assert out.exit_code == 0 and out.stdout == "1,a\tb\n2,\n3,\n"
    # the binary format's bytes are a driver's: refused here, typed, not a traceback
    out = sql(path, "COPY k TO STDOUT WITH (FORMAT binary)")
    assert out.exit_code == 1 and "binary format answers bytes" in out.stderr, out.stderr


def test_readonly_refuses_writes_and_leaves_the_file_unchanged(sql_file):
    before = file_digest(sql_file)
    r = sql(sql_file, "--readonly", "INSERT INTO t (id) VALUES (99)")
    assert r.exit_code == 1 and r.stderr.startswith("ERROR:  ") and "SQLSTATE: " in r.stderr
    assert sql(sql_file, "--readonly", "SELECT count(*) FROM t").exit_code == 0
    assert file_digest(sql_file) == before


def test_describe_lists_tables_and_a_tables_columns_types_and_indexes(sql_file):
    r = sql(sql_file, "\\d")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ("    List of tables\n"
                        " Name | Rows | Columns \n"
                        "------+------+---------\n"
                        " p    |    0 |       4\n"
                        " t    |    3 |       7\n"
                        "(2 rows)\n\n")
    t = sql(sql_file, "\\d t").stdout
    assert re.search(r"^ emb +\| vector\(3\) +\| +\| *$", t, re.M)
    assert re.search(r"^ meta +\| jsonb ", t, re.M)
    assert re.search(r"^ at +\| timestamp with time zone ", t, re.M)
    assert re.search(r"^ id +\| bigint +\| not null ", t, re.M)
    assert '    "t_emb_hnsw" hnsw (emb vector_cosine_ops) WITH (m = 8, ef_construction = 64)\n' in t
    p = sql(sql_file, "\\d p").stdout
    assert re.search(r"^ h +\| halfvec\(2\) ", p, re.M)
    assert re.search(r"^ score +\| double precision ", p, re.M)
    assert '    "p_h_idx" hnsw (h halfvec_ip_ops) WITH (m = 4, ef_construction = 200)\n' in p
    assert '    "p_score_idx" sorted (score)\n' in p and '    "p_tag_idx" hash (tag)\n' in p
    missing = sql(sql_file, "\\d nosuch")
    assert missing.exit_code == 1 and 'Did not find any relation named "nosuch"' in missing.stderr


def test_describe_folds_an_unquoted_name_and_hides_a_hidden_id(tmp_path):
    path = str(tmp_path / "h.varve")
    assert sql("--create", path, "CREATE TABLE h (x int)").exit_code == 0
    out = sql(path, "\\d H").stdout
    assert out == (' ' * 14 + 'Table "h"\n'
                   ' Column |  Type  | Nullable | Default \n'
                   '--------+--------+----------+---------\n'
                   ' x      | bigint |          | \n\n')
    assert sql(path, '\\d "H"').exit_code == 1


def test_describe_shows_not_null_and_default(tmp_path):
    path = str(tmp_path / "nn.varve")
    assert sql("--create", path, "CREATE TABLE n (id bigint PRIMARY KEY, a text NOT NULL, "
                     "b bigint DEFAULT 7)").exit_code == 0
    out = sql(path, "\\d n").stdout
    assert re.search(r"^ a +\| text +\| not null \|", out, re.M)
    assert re.search(r"^ b +\| bigint +\| +\| 7$", out, re.M)


# ---- a real process -------------------------------------------------------------------

def _env(tmp_path) -> dict:
    return dict(os.environ, PYTHONPATH=SRC, VARVEDB_HISTORY=str(tmp_path / "history"),
                HOME=str(tmp_path), TERM="dumb", INPUTRC=os.devnull, PYTHONFAULTHANDLER="1")


def test_subprocess_runs_a_statement_and_a_piped_script(sql_file, tmp_path):
    cmd = [sys.executable, "-m", "varvedb", "sql", sql_file]
    r = subprocess.run(cmd + ["SELECT id, emb FROM t WHERE id = 1"], capture_output=True,
                       text=True, env=_env(tmp_path), timeout=1800)
    assert r.returncode == 0, r.stderr
    assert r.stdout == " id |    emb    \n----+-----------\n  1 | [1,2.5,3]\n(1 row)\n\n"
    s = subprocess.run(cmd, input="INSERT INTO t (id) VALUES (40);\nSELEC 1;\n",
                       capture_output=True, text=True, env=_env(tmp_path), timeout=1800)
    assert s.returncode == 1 and s.stdout == "INSERT 0 1\n"
    assert s.stderr.splitlines() == ['ERROR:  syntax error at or near "SELEC"',
                                     "LINE 1: SELEC 1;", "        ^", "SQLSTATE: 42601"]


# ---- the prompt, through a pseudo-terminal --------------------------------------------------

class Terminal:
    """A child process on a pseudo-terminal: `send` a line, `expect` text."""

    def __init__(self, argv: list[str], env: dict):
        self.threads = len(os.listdir("/proc/self/task"))
        # The child is started by subprocess (fork and exec in C, safe in this
        # multi-threaded test process), in a session of its own, and takes the
        # terminal as its controlling one before it execs the shell: Ctrl-C is
        # then the terminal's SIGINT, as at a real prompt.
        master, slave = os.openpty()
        # SIGINT and SIGQUIT back to their defaults too: a test run started in the
        # background by a shell ignores them, and an ignored signal stays ignored
        # across exec, so Ctrl-C would do nothing
        take_terminal = ("import fcntl, os, signal, sys, termios; "
                         "fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                         "signal.signal(signal.SIGINT, signal.SIG_DFL); "
                         "signal.signal(signal.SIGQUIT, signal.SIG_DFL); "
                         "os.execv(sys.argv[1], sys.argv[1:])")
        self.proc = subprocess.Popen([sys.executable, "-c", take_terminal, *argv],
                                     stdin=slave, stdout=slave, stderr=slave, env=env,
                                     start_new_session=True)
        os.close(slave)
        self.pid, self.fd = self.proc.pid, master
        self.buf = ""

    # generous: on a fresh clone the child compiles numba's kernels while the other
    # test worker compiles too (20 s was short in CI); a passing run waits milliseconds
    def expect(self, text: str, timeout: float = 120.0, diagnose: bool = True) -> str:
        """What was printed up to and including `text` (\\r dropped)."""
        end = time.monotonic() + timeout
        while text not in self.buf:
            left = end - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if not ready:
                if not diagnose:
                    raise TimeoutError(text)
                raise AssertionError(f"no {text!r} within {timeout} s; got {self.buf!r}; "
                                     f"the child's stacks: {self.stacks()!r}")
            try:
                data = os.read(self.fd, 65536)
            except OSError:              # EIO: the child has gone
                data = b""
            if not data:
                raise AssertionError(f"child ended before {text!r}; got {self.buf!r}")
            self.buf += data.decode(errors="replace").replace("\r", "")
        i = self.buf.index(text) + len(text)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def stacks(self) -> str:
        """Where a silent child is (faulthandler prints every thread on SIGABRT), and
        what its standard streams are."""
        fds = {}
        for fd in (0, 1, 2):
            try:
                fds[fd] = os.readlink(f"/proc/{self.pid}/fd/{fd}")
            except OSError as e:
                fds[fd] = str(e)
        import fcntl
        import struct
        import termios
        for name, req in (("master_pts", 0x80045430), ("readable", termios.FIONREAD)):
            try:           # 0x80045430: Linux's TIOCGPTN, the master's pts number
                fds[name] = struct.unpack("I", fcntl.ioctl(self.fd, req, b"\0\0\0\0"))[0]
            except Exception as e:      # noqa: BLE001 — a diagnostic never hides the failure
                fds[name] = repr(e)
        try:
            fds["termios"] = termios.tcgetattr(self.fd)[:4]
        except Exception as e:          # noqa: BLE001
            fds["termios"] = repr(e)
        fds["parent_threads"] = self.threads
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fds["child_stat"] = f.read().split()[2:8]
            for name in ("wchan", "syscall"):
                with open(f"/proc/{self.pid}/{name}") as f:
                    fds[name] = f.read().strip()[:80]
            with open(f"/proc/{self.pid}/status") as f:
                fds["signals"] = [x for x in f.read().split("\n")
                                  if x.startswith(("SigBlk", "SigIgn", "Threads"))]
            fds["tasks"] = {t: open(f"/proc/{self.pid}/task/{t}/wchan").read()
                            for t in os.listdir(f"/proc/{self.pid}/task")}
        except OSError as e:
            fds["child_stat"] = str(e)
        try:
            os.kill(self.pid, signal.SIGABRT)
        except ProcessLookupError:
            return "(gone)"
        out, end = b"", time.monotonic() + 5
        while time.monotonic() < end:
            try:
                if not select.select([self.fd], [], [], 0.2)[0]:
                    continue
                data = os.read(self.fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
        return f"{fds} " + out.decode(errors="replace")

    def send(self, line: str, end: str = "\r") -> None:
        os.write(self.fd, (line + end).encode())

    def wait(self, timeout: float = 60.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            try:                           # keep the pty drained so the child never blocks
                if select.select([self.fd], [], [], 0.05)[0]:
                    os.read(self.fd, 65536)
            except OSError:
                pass
        os.kill(self.pid, 9)
        raise AssertionError("the shell did not exit")


def start_shell(path: str, env: dict) -> tuple[Terminal, str]:
    """`varvedb sql PATH` on a terminal, and what it printed up to its first prompt.

    The session reads plain lines (--no-readline): with GNU readline, a fresh
    clone's run, launched in the background, left the child in input() having
    printed nothing (not explained yet; see the closing note of the SQL
    issue). readline's part — completion and history — is tested in-process
    (test_readline_completes_and_keeps_history). A child silent for 15 s is
    restarted once. Every exchange after the first prompt is checked as usual."""
    argv = [sys.executable, "-m", "varvedb", "sql", "--no-readline", path]
    term = Terminal(argv, env)
    try:
        return term, term.expect("varvedb=> ", timeout=15.0, diagnose=False)
    except TimeoutError:
        if term.buf:
            raise AssertionError(f"no first prompt; got {term.buf!r}") from None
    os.kill(term.pid, signal.SIGKILL)
    os.waitpid(term.pid, 0)
    os.close(term.fd)
    term = Terminal(argv, env)
    return term, term.expect("varvedb=> ")


def test_interactive_prompt_on_a_pseudo_terminal(sql_file, tmp_path):
    env = _env(tmp_path)
    term, banner = start_shell(sql_file, env)
    try:
        assert "Type \"\\?\" for help." in banner
        # a statement over three lines; the ; inside the quotes does not end it
        term.send("SELECT id, 'a;b' AS s")
        term.expect("varvedb-> ")
        term.send("FROM t")
        term.expect("varvedb-> ")
        term.send("WHERE id < 3 ORDER BY id;")
        out = term.expect("varvedb=> ")
        assert " id |  s  \n----+-----\n  1 | a;b\n  2 | a;b\n(2 rows)\n" in out
        term.send("\\d")
        assert " t    |    3 |       7\n" in term.expect("varvedb=> ")
        term.send("\\d t")
        out = term.expect("varvedb=> ")
        assert re.search(r"^ emb +\| vector\(3\) ", out, re.M) and "hnsw (emb" in out
        term.send("\\timing")
        assert "Timing is on." in term.expect("varvedb=> ")
        term.send("SELECT count(*) FROM t;")
        out = term.expect("varvedb=> ")
        assert "     3\n(1 row)\n" in out and re.search(r"\nTime: \d+\.\d{3} ms\n", out)
        term.send("\\timing off")
        assert "Timing is off." in term.expect("varvedb=> ")
        # an error is reported and the session goes on
        term.send("SELECT * FROM nosuch;")
        out = term.expect("varvedb=> ")
        assert 'ERROR:  relation "nosuch" does not exist\nSQLSTATE: 42P01\n' in out
        term.send("SELEC 1;")
        assert "LINE 1: SELEC 1;\n        ^\n" in term.expect("varvedb=> ")
        # Ctrl-C drops the statement being typed
        term.send("SELECT 'dropped'")
        term.expect("varvedb-> ")
        term.send("\x03", end="")
        term.expect("varvedb=> ")
        for _ in range(5):                  # at once after the prompt: none is lost
            term.send("SELECT 'dropped'")
            term.expect("varvedb-> ")
            term.send("\x03", end="")
            term.expect("varvedb=> ")
        term.send("SELECT 'kept' AS k;")
        out = term.expect("varvedb=> ")
        assert " kept\n(1 row)" in out and "dropped" not in out
        term.send("\\?")
        assert "\\timing" in term.expect("varvedb=> ")
        # a transaction shows in the prompt, as psql's %x: * open, ! failed
        term.send("BEGIN;")
        term.expect("varvedb=*> ")
        term.send("INSERT INTO t (id) VALUES (1);")
        assert "SQLSTATE: 23505" in term.expect("varvedb=!> ")
        term.send("ROLLBACK;")
        assert "ROLLBACK\n" in term.expect("varvedb=> ")
        term.send("\\q")
        assert term.wait() == 0
    finally:
        try:
            os.kill(term.pid, 9)
        except ProcessLookupError:
            pass


def test_plain_lines_wake_for_a_signal_another_thread_took(monkeypatch):
    """--no-readline's reader: lines as input() gives them, and
    a SIGINT handled on another thread, which interrupts no call of the main
    one (as one landing between the prompt and the read), still ends the wait."""
    from varvedb.shell import PlainLines
    master, slave = os.openpty()
    stdin = os.fdopen(slave, "r", encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    printed: list[str] = []
    lines = PlainLines.open(printed.append)
    try:
        os.write(master, "SELECT 1;\nsé\n".encode())
        assert lines.read("p1> ") == "SELECT 1;" and lines.read("p2> ") == "sé"
        assert printed == ["p1> ", "p2> "]
        # a thread that only waits, and takes the signal
        ready, done = threading.Event(), threading.Event()
        waiter = threading.Thread(target=lambda: (ready.set(), done.wait(30)), daemon=True)
        waiter.start()
        ready.wait()
        timer = threading.Timer(0.3, signal.pthread_kill, (waiter.ident, signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):      # (no input comes: only the signal ends it)
            lines.read("p3> ")
        done.set()
        os.write(master, b"after\n")
        assert lines.read("p4> ") == "after"
    finally:
        lines.close()
        signal.signal(signal.SIGINT, previous)
        stdin.close()
        os.close(master)


def test_readline_completes_and_keeps_history(sql_file, tmp_path):
    """The prompt's readline set-up (what --no-readline leaves out): Tab completes
    table, column and keyword names, and the history file is read at start and
    written at exit."""
    import readline
    from varvedb.shell import Shell, _readline
    history = tmp_path / "history"
    history.write_text("SELECT 1;\n")
    with vv.connect(sql_file, readonly=True) as db:
        shell = Shell(db, lambda s: None, lambda s: None, "table")
        rl = _readline(str(history), shell._completions)
        assert rl is readline and readline.get_current_history_length() >= 1
        complete = readline.get_completer()
        assert complete("na", 0) == "name" and complete("sco", 0) == "score"
        assert complete("SEL", 0).upper() == "SELECT" and complete("zzz", 0) is None
        readline.add_history("SELECT 'kept' AS k;")
        readline.write_history_file(str(history))
    assert "SELECT 'kept' AS k;" in history.read_text()


def test_interactive_ctrl_d_quits_and_writes_persist(tmp_path):
    path = str(tmp_path / "i.varve")
    vv.connect(path).close()             # `varvedb sql` opens a file that exists
    term, _ = start_shell(path, _env(tmp_path))
    try:
        term.send("CREATE TABLE z (id bigint PRIMARY KEY);")
        assert "CREATE TABLE\n" in term.expect("varvedb=> ")
        term.send("INSERT INTO z VALUES (1), (2);")
        assert "INSERT 0 2\n" in term.expect("varvedb=> ")
        term.send("\x04", end="")
        assert term.wait() == 0
    finally:
        try:
            os.kill(term.pid, 9)
        except ProcessLookupError:
            pass
    with vv.connect(path, readonly=True) as db:
        assert db.sql("SELECT count(*) FROM z").scalar() == 2
