"""SQL's transaction blocks against real PostgreSQL: the same steps (BEGIN, writes,
errors, COMMIT ...) run on PostgreSQL, on db.sql() and over `--pg` (an in-process
PgServer, psycopg's simple query protocol), each step answered alike (its command
tag or its SQLSTATE) and the table left alike."""
from __future__ import annotations

import psycopg
import pytest

import varvedb as vv


def _outcome(run, step):
    try:
        return "ok", run(step)
    except Exception as e:      # a client's or varvedb's error: its SQLSTATE is compared
        return "err", getattr(e, "sqlstate", type(e).__name__)


def _last(cur):
    """psycopg's cursor at a text's last statement's answer (db.sql's)."""
    while cur.nextset():
        pass
    return cur


def _drive(run, steps, read):
    return [_outcome(run, s) for s in steps], sorted(map(tuple, read()))


@pytest.fixture
def wire(tmp_path):
    """psycopg connections (autocommit: the steps' own BEGINs) to an in-process
    `--pg` server on a fresh file."""
    from varvedb.pgwire.server import PgServer
    db = vv.connect(str(tmp_path / "wire.varve"))
    srv = PgServer(db)
    port = srv.start("127.0.0.1", 0)
    conns = []

    def connect():
        c = psycopg.connect(host="127.0.0.1", port=port, user="me", dbname="db",
                            sslmode="disable", autocommit=True, connect_timeout=600)
        conns.append(c)
        return c
    yield connect
    for c in conns:
        c.close()
    srv.stop(60)
    db.close()


def same_everywhere(pg_conn, tmp_path, wire, setup, steps, check="SELECT id FROM t"):
    """Run setup and steps on PostgreSQL, db.sql and --pg; each answer and the table
    after must be PostgreSQL's. Returns PostgreSQL's (answers, rows)."""
    def on_pg(s):
        return _last(pg_conn.execute(s)).statusmessage
    pg_conn.autocommit = True
    for s in setup:
        pg_conn.execute(s)
    want = _drive(on_pg, steps, lambda: pg_conn.execute(check).fetchall())

    db = vv.connect(str(tmp_path / "embedded.varve"))
    for s in setup:
        db.sql(s)
    got = _drive(lambda s: db.sql(s).status, steps, lambda: db.sql(check).rows)
    db.close()
    assert got == want, "db.sql"

    w = wire()
    for s in setup:
        w.execute(s)
    got = _drive(lambda s: _last(w.execute(s)).statusmessage, steps,
                 lambda: w.execute(check).fetchall())
    assert got == want, "--pg"
    return want


T = ["CREATE TABLE t (id int PRIMARY KEY)"]


@pytest.mark.parametrize("bad", ["SELEC 1", "SELECT FROM WHERE"])
def test_a_statement_that_fails_to_compile_fails_the_block(pg_conn, tmp_path, wire, bad):
    # red-team 9 f07: the block went on healthy and COMMIT committed around the error
    answers, rows = same_everywhere(pg_conn, tmp_path, wire, T, [
        "BEGIN", "INSERT INTO t VALUES (1)", bad, "INSERT INTO t VALUES (2)", "COMMIT"])
    assert answers[3] == ("err", "25P02") and answers[4] == ("ok", "ROLLBACK")
    assert rows == []


def test_a_parse_error_of_the_extended_protocol_fails_the_block(tmp_path, wire):
    # red-team 9 f07 over --pg's Parse: psycopg prepares a statement with parameters
    w = wire()
    w.execute("CREATE TABLE t (id int PRIMARY KEY)")
    w.execute("BEGIN")
    w.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(psycopg.errors.SyntaxError):
        w.execute("SELEC %s", [1])
    with pytest.raises(psycopg.errors.InFailedSqlTransaction):
        w.execute("INSERT INTO t VALUES (%s)", [2])
    assert w.execute("COMMIT").statusmessage == "ROLLBACK"
    assert w.execute("SELECT id FROM t").fetchall() == []


def test_a_compile_error_over_http_fails_the_block(tmp_path):
    # red-team 9 f07 over HTTP: Client.sql's BEGIN opens a server transaction
    from server_proc import ServerProcess
    with ServerProcess(str(tmp_path / "http.varve")) as srv:
        c = vv.Client(srv.url)
        c.sql("CREATE TABLE t (id int PRIMARY KEY)")
        c.sql("BEGIN")
        c.sql("INSERT INTO t VALUES (1)")
        with pytest.raises(vv.SqlError):
            c.sql("SELEC 1")
        with pytest.raises(vv.VarveError) as e:
            c.sql("INSERT INTO t VALUES (2)")
        assert e.value.sqlstate == "25P02"
        assert c.sql("COMMIT").status == "ROLLBACK"
        assert c.sql("SELECT id FROM t").rows == []


def test_a_text_over_http_is_one_implicit_transaction_and_answers_before_it_commits(
        tmp_path):
    # red-team 10 f18_text_rollback over POST /sql; f18_http_copy_binary: a binary COPY
    # TO answered 0A000 after the server had committed the INSERT before it
    from server_proc import ServerProcess
    with ServerProcess(str(tmp_path / "http.varve")) as srv:
        c = vv.Client(srv.url)
        c.sql("CREATE TABLE t (id int PRIMARY KEY)")
        c.sql("INSERT INTO t VALUES (1); ROLLBACK; INSERT INTO t VALUES (2)")
        with pytest.raises(vv.VarveError) as e:
            c.sql("INSERT INTO t VALUES (3); COMMIT; INSERT INTO t VALUES (4); SELECT 1/0")
        assert e.value.sqlstate == "22012"
        with pytest.raises(vv.VarveError) as e:
            c.sql("INSERT INTO t VALUES (5); COPY t TO STDOUT (FORMAT binary)")
        assert e.value.sqlstate == "0A000"
        assert sorted(c.sql("SELECT id FROM t").rows) == [(2,), (3,)]


def test_a_text_of_several_statements_is_one_implicit_transaction(pg_conn, tmp_path, wire):
    # red-team 9 f02: the first INSERT stayed although the text answered 23505
    answers, rows = same_everywhere(pg_conn, tmp_path, wire, T, [
        "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2), (2)",
        "INSERT INTO t VALUES (3); INSERT INTO t VALUES (4)"])
    assert answers[0] == ("err", "23505") and rows == [(3,), (4,)]


def test_commit_and_rollback_in_a_text_act_on_its_implicit_transaction(
        pg_conn, tmp_path, wire):
    # red-team 10 f18_text_rollback: a text holding BEGIN, COMMIT or ROLLBACK ran
    # statement by statement, so its ROLLBACK undid nothing before it and a statement
    # after its COMMIT stayed when a later one failed
    answers, rows = same_everywhere(pg_conn, tmp_path, wire, T, [
        "INSERT INTO t VALUES (1); ROLLBACK; INSERT INTO t VALUES (2)",
        "INSERT INTO t VALUES (3); COMMIT; INSERT INTO t VALUES (4); SELECT 1/0",
        "INSERT INTO t VALUES (5); BEGIN; INSERT INTO t VALUES (6); SELECT 1/0",
        "ROLLBACK",
        "INSERT INTO t VALUES (7); ROLLBACK AND CHAIN; INSERT INTO t VALUES (8)",
        "INSERT INTO t VALUES (9); COMMIT AND CHAIN",
        "INSERT INTO t VALUES (10); COMMIT; INSERT INTO t VALUES (11); ROLLBACK"])
    assert [a[1] for a in answers] == ["INSERT 0 1", "22012", "22012", "ROLLBACK", "25P01",
                                       "25P01", "ROLLBACK"]
    assert rows == [(2,), (3,), (10,)]


def test_set_in_an_implicit_transaction_is_undone_with_it(pg_conn, tmp_path, wire):
    # red-team 10 f18_set_implicit, f18_set_local_text: SET in a text that failed stayed,
    # SET LOCAL in a text was ignored (pgvector's `SET LOCAL hnsw.ef_search = ...;
    # SELECT ...`), ROLLBACK TO kept the SETs made since its savepoint
    show = "SHOW ivfflat.probes"
    answers = []
    for run in _three_ways(pg_conn, tmp_path, wire):
        answers.append([_outcome(run, step) for step in [
            "SET ivfflat.probes = 3", "SET ivfflat.probes = 4; SELECT 1/0", show,
            "SET LOCAL ivfflat.probes = 7; SHOW ivfflat.probes", show,
            "SET ivfflat.probes = 5; ROLLBACK", show,
            "SET ivfflat.probes = 6; COMMIT; SELECT 1/0", show,
            "BEGIN", "SAVEPOINT a", "SET ivfflat.probes = 8", "SET LOCAL ivfflat.probes = 9",
            "ROLLBACK TO a", show, "SET ivfflat.probes = 10", "SAVEPOINT b",
            "SET ivfflat.probes = 11", "ROLLBACK TO b", "RELEASE b", "COMMIT", show]])
    assert answers[0] == answers[1] == answers[2]
    assert [a[1] for a in answers[0] if a[1][0] == "show"] == [
        ("show", "3"), ("show", "7"), ("show", "3"), ("show", "3"), ("show", "6"),
        ("show", "6"), ("show", "10")]


def test_set_in_a_pipeline_that_fails_is_undone_at_its_sync(pg_conn, wire):
    # red-team 10 f18_set_implicit: the extended protocol's implicit transaction
    def go(c):
        c.execute("SET ivfflat.probes = 3")
        with pytest.raises(psycopg.errors.DivisionByZero):
            with c.pipeline():
                c.execute("SET ivfflat.probes = 4")
                c.execute("SELECT 1/0")
        return c.execute("SHOW ivfflat.probes").fetchone()[0]
    pg_conn.autocommit = True
    pg_conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    assert go(wire()) == go(pg_conn) == "3"


def test_a_begin_inside_the_block_changes_nothing(pg_conn, tmp_path, wire):
    # red-team 9 f01: the second BEGIN failed the block and COMMIT answered ROLLBACK
    answers, rows = same_everywhere(pg_conn, tmp_path, wire, T, [
        "BEGIN", "INSERT INTO t VALUES (1)", "BEGIN", "INSERT INTO t VALUES (2)", "COMMIT"])
    assert answers[-1] == ("ok", "COMMIT") and rows == [(1,), (2,)]
    # and warns, as PostgreSQL does (psycopg hands a notice to its handlers)
    notices = []
    w = wire()
    w.add_notice_handler(lambda d: notices.append((d.severity, d.sqlstate)))
    w.execute("BEGIN")
    w.execute("BEGIN")
    w.execute("COMMIT")
    w.execute("COMMIT")
    assert notices == [("WARNING", "25001"), ("WARNING", "25P01")]


def _noticing(conn) -> list:
    """The (severity, SQLSTATE, message) of each notice `conn` gets from now on,
    NOTICEs included."""
    notices = []
    conn.execute("SET client_min_messages TO notice")
    conn.add_notice_handler(lambda d: notices.append((d.severity, d.sqlstate,
                                                      d.message_primary)))
    return notices


def test_a_name_past_63_bytes_is_cut_with_a_notice_as_postgresql(pg_conn, wire):
    """An identifier past 63 bytes is cut to 63 (never inside a character) with
    PostgreSQL's NOTICE 42622, and the names PostgreSQL makes (a key's, a CHECK's)
    are cut to fit 63 bytes: the same names and notices as PostgreSQL's (defect: no
    notice, and a long table's key named past 63 characters)."""
    table, col = "t" * 62, "c" * 40
    steps = [f"CREATE TABLE {table} (id int PRIMARY KEY, x int CONSTRAINT {'n' * 70} "
             f"CHECK (x > 0), {col} int CHECK ({col} > 0), "
             f"CONSTRAINT \"{'é' * 40}\" CHECK (x < 9), CHECK (x < 99 AND {col} < 99))",
             f"ALTER TABLE {table} ADD CONSTRAINT {'D' * 64} CHECK (x > 1)",
             f"ALTER TABLE {table} DROP CONSTRAINT {'d' * 70}"]
    got = []
    for conn in (pg_conn, wire()):
        notices = _noticing(conn)
        for step in steps:
            conn.execute(step)
        names = conn.execute("SELECT conname FROM pg_constraint WHERE conrelid = "
                             f"'{table}'::regclass AND contype <> 'n' ORDER BY conname")
        got.append((notices, names.fetchall()))
    assert got[1] == got[0]
    notices, names = got[0]
    assert [n[:2] for n in notices] == [("NOTICE", "42622")] * 4
    assert names == [("n" * 63,), (f"{'t' * 28}_{'c' * 28}_check",), (f"{'t' * 57}_check",),
                     (f"{'t' * 58}_pkey",), ("é" * 31,)]


LONG = "a" * 70
NOTICED = [  # red-team 14 p9: texts whose NOTICE 42622 was dropped
    f"CREATE TABLE nt (id int PRIMARY KEY, v int)",
    f"INSERT INTO nt VALUES (1, 2), (2, 3) RETURNING v AS {LONG}",     # (INSERT not scanned)
    f"INSERT INTO nt SELECT 3, 4 RETURNING v AS {LONG}",
    f'SELECT 1 AS U&"{LONG}"',                                          # (U& skipped)
    f'SELECT 1 AS U&"\\0061{"b" * 65}"',
    f"SELECT 1 AS U&\"!0061!+000062{'é' * 40}\" UESCAPE '!'",
    f"SELECT {LONG} FROM nt",                  # fails: the notice comes before its error
    f"SELECT 1 AS b; SELECT 2 AS {LONG}",
    f"COPY (SELECT 1 AS {LONG}) TO STDOUT"]


def _notices_and_errors(conn, texts) -> list:
    notices = _noticing(conn)
    for text in texts:
        try:
            if text.startswith("COPY"):
                with conn.cursor().copy(text) as copy:
                    list(copy)
            else:
                conn.execute(text)
        except psycopg.Error as e:
            notices.append(("ERROR", e.sqlstate))
    return [n[:3] for n in notices]


def test_a_name_past_63_bytes_notices_in_every_statement_as_postgresql(pg_conn, wire,
                                                                       tmp_path):
    """NOTICE 42622 in an INSERT's text (RETURNING ... AS name), a U&"..." name (its
    escapes read, UESCAPE's too), a statement that then fails (the notice first, then
    the error), a text of several statements, as PostgreSQL sends them (red-team 14
    p9: each was dropped); db.sql's result (the last statement's) holds the text's,
    an error its statement's in `notices`."""
    got = _notices_and_errors(wire(), NOTICED)
    want = _notices_and_errors(pg_conn, NOTICED)
    assert got == want
    assert [n[1] for n in got].count("42622") == 8 and ("ERROR", "42703") in got
    db = vv.connect(str(tmp_path / "n.varve"))
    db.sql(NOTICED[0])
    assert [n[0] for n in db.sql(NOTICED[1]).notice] == ["42622"]
    assert [n[0] for n in db.sql(NOTICED[-2]).notice] == ["42622"]
    with pytest.raises(vv.errors.SqlError) as e:
        db.sql(NOTICED[-3])
    assert [n[0] for n in e.value.notices] == ["42622"]
    db.close()


def test_dropping_the_primary_key_says_why_it_cannot(wire):
    """ALTER TABLE t DROP CONSTRAINT t_pkey (PostgreSQL drops it) is refused 0A000
    as docs/sql.md says: the id is the key every row is kept by, and a column named
    id is always the key. The error says so in PostgreSQL's style (a message naming
    the constraint and table, a DETAIL and a HINT: before, a bare 'cannot be
    dropped'), and nothing changed."""
    w = wire()
    w.execute("CREATE TABLE pk (id int PRIMARY KEY, x int)")
    w.execute("INSERT INTO pk VALUES (1, 1)")
    with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
        w.execute("ALTER TABLE pk DROP CONSTRAINT pk_pkey")
    d = e.value.diag
    assert d.message_primary == 'cannot drop constraint "pk_pkey" on table "pk"'
    assert 'column "id" is the key' in d.message_detail
    assert "created without a primary key" in d.message_hint
    assert w.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'pk'::regclass "
                     "AND contype = 'p'").fetchall() == [("pk_pkey",)]
    with pytest.raises(psycopg.errors.UniqueViolation):
        w.execute("INSERT INTO pk VALUES (1, 2)")


def test_drop_constraint_if_exists_of_none_notices_as_postgresql(pg_conn, wire):
    """ALTER TABLE DROP CONSTRAINT IF EXISTS of a constraint the table has not goes
    on with PostgreSQL's NOTICE (SQLSTATE 00000, severity NOTICE, not a WARNING)."""
    got = []
    for conn in (pg_conn, wire()):
        notices = _noticing(conn)
        conn.execute("CREATE TABLE nc (id int PRIMARY KEY, x int CHECK (x > 0))")
        conn.execute("ALTER TABLE nc DROP CONSTRAINT IF EXISTS nope")
        conn.execute("ALTER TABLE nc DROP CONSTRAINT nc_x_check")
        conn.execute("DROP TABLE nc")
        got.append(notices)
    assert got[0] == got[1] == [
        ("NOTICE", "00000", 'constraint "nope" of relation "nc" does not exist, skipping')]


def test_and_chain_opens_the_next_block(pg_conn, tmp_path, wire):
    # red-team 9 f08: AND CHAIN was ignored, so the writes after it committed at once
    answers, rows = same_everywhere(pg_conn, tmp_path, wire, T, [
        "BEGIN", "INSERT INTO t VALUES (1)", "COMMIT AND CHAIN", "INSERT INTO t VALUES (2)",
        "ROLLBACK", "BEGIN", "INSERT INTO t VALUES (3)", "ROLLBACK AND CHAIN",
        "INSERT INTO t VALUES (4)", "ROLLBACK", "COMMIT AND CHAIN",
        "BEGIN", "SELEC", "COMMIT AND CHAIN", "INSERT INTO t VALUES (5)", "COMMIT"])
    assert rows == [(1,), (5,)]


def test_a_read_only_block_refuses_writes(pg_conn, tmp_path, wire):
    # red-team 9 f09: START TRANSACTION READ ONLY was read as a plain BEGIN
    answers, rows = same_everywhere(pg_conn, tmp_path, wire, T, [
        "START TRANSACTION READ ONLY", "SELECT 1", "INSERT INTO t VALUES (1)", "COMMIT",
        "BEGIN READ ONLY", "COMMIT AND CHAIN", "CREATE TABLE u (id int)", "ROLLBACK",
        "BEGIN READ WRITE", "INSERT INTO t VALUES (2)", "COMMIT"])
    assert answers[2] == ("err", "25006") and rows == [(2,)]


def test_a_read_only_block_refuses_the_python_apis_writes_too(tmp_path):
    """red-team 10: a collection.insert inside db.sql("BEGIN READ ONLY") committed (the
    25006 held SQL's statements only): ReadOnlyError, the block fails, nothing kept."""
    db = vv.connect(tmp_path / "r.vv")
    try:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
        before = db.version
        db.sql("BEGIN READ ONLY")
        with pytest.raises(vv.ReadOnlyError) as e:
            db.collection("t").insert({"id": 7, "x": 1})
        assert e.value.sqlstate == "25006"
        with pytest.raises(vv.SqlError) as e:
            db.sql("SELECT 1")
        assert e.value.sqlstate == "25P02"
        db.sql("COMMIT")
        assert db.version == before and db.sql("SELECT count(*) FROM t").rows == [(0,)]
    finally:
        db.close()


def test_drop_branch_and_vacuum_are_refused_inside_a_block(tmp_path):
    """red-team 11 f18b_readonly_api: db.drop_branch() committed inside db.sql("BEGIN
    READ ONLY") (its own session's commit: the block's 25006 did not see it), and
    db.vacuum() ran there (PostgreSQL refuses VACUUM in a block). Both are refused
    in the calling thread's block or transaction, and nothing changes."""
    db = vv.connect(tmp_path / "r.vv")
    try:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
        db.branch("side")
        before = db.version
        for begin in ("BEGIN READ ONLY", "BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ"):
            db.sql(begin)
            for verb in (lambda: db.drop_branch("side"), db.vacuum):
                with pytest.raises(vv.TransactionError):
                    verb()
            assert db.sql("ROLLBACK").status == "ROLLBACK"
        with db.transaction():
            with pytest.raises(vv.TransactionError):     # (was: its own writer lock's wait)
                db.drop_branch("side")
        assert db.version == before and [b.name for b in db.branches()] == ["main", "side"]
        db.drop_branch("side")
        db.vacuum()
        assert [b.name for b in db.branches()] == ["main"]
    finally:
        db.close()


def test_vacuum_in_a_text_of_several_statements_is_refused_as_postgresql_does(
        pg_conn, tmp_path, wire):
    """A text of several statements runs as one implicit transaction block, so what
    PostgreSQL refuses inside a block (VACUUM, DISCARD ALL, CREATE INDEX
    CONCURRENTLY) is 25001 there, and nothing of the text is applied: by db.sql and
    by the simple query protocol over --pg, as PostgreSQL answers (defect: only an
    open transaction refused them, so one before the text's first write, or after
    reads alone, ran; CREATE INDEX CONCURRENTLY ran even inside BEGIN)."""
    answers = []
    for run in _three_ways(pg_conn, tmp_path, wire):
        got = []
        for step in ["CREATE TABLE nb (id int PRIMARY KEY, x int)",
                     "INSERT INTO nb VALUES (1, 1); VACUUM", "VACUUM; SELECT 1",
                     "SELECT 1; DISCARD ALL",
                     "INSERT INTO nb VALUES (2, 2); CREATE INDEX CONCURRENTLY nb_x ON nb (x)",
                     "DROP INDEX nb_x", "DELETE FROM nb", "VACUUM", "DROP TABLE nb"]:
            try:
                got.append(run(step))
            except Exception as e:          # (psycopg's errors and varvedb's alike)
                got.append(("error", e.sqlstate))
        answers.append(got)
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][1:] == [("error", "25001")] * 4 + [
        ("error", "42704"), ("ok", "DELETE 0"), ("ok", "VACUUM"), ("ok", "DROP TABLE")]


def _pipelined(c, steps) -> list:
    """A psycopg pipeline of `steps` (up to its Sync) on a fresh table pv: its error
    (SQLSTATE and message) if any, then the rows it left and the transaction status."""
    c.execute("DROP TABLE IF EXISTS pv")
    c.execute("CREATE TABLE pv (id int PRIMARY KEY)")
    out = []
    try:
        with c.pipeline():
            for step in steps:
                c.execute(step)
    except psycopg.Error as e:
        out.append((e.sqlstate, e.diag.message_primary))
    if c.info.transaction_status.name != "IDLE":
        out.append(c.info.transaction_status.name)
        c.execute("ROLLBACK")
    out.append(c.execute("SELECT count(*) FROM pv").fetchone()[0])
    return out


_PIPELINES = [
    ["INSERT INTO pv VALUES (1)", "VACUUM"], ["SELECT 1", "VACUUM"],
    ["SET ivfflat.probes = 5", "VACUUM"], ["VACUUM", "VACUUM"], ["BEGIN", "VACUUM"],
    ["INSERT INTO pv VALUES (1)", "DISCARD ALL"],
    ["SELECT 1", "CREATE INDEX CONCURRENTLY pv_i ON pv (id)"],
    ["VACUUM"], ["VACUUM", "INSERT INTO pv VALUES (1)"],
    ["VACUUM", "INSERT INTO pv VALUES (1)", "SELECT 1/0"],
    ["INSERT INTO pv VALUES (1)", "COMMIT", "VACUUM"], ["SELECT 1", "ROLLBACK", "VACUUM"],
    ["SELECT 1", "COMMIT", "VACUUM", "INSERT INTO pv VALUES (1)"]]


def test_vacuum_after_another_execute_in_a_pipeline_is_refused_as_postgresql_does(
        pg_conn, wire):
    """The extended protocol's Executes up to a Sync after the first run in
    PostgreSQL's implicit transaction block: VACUUM (DISCARD ALL, CREATE INDEX
    CONCURRENTLY) there answers 25001 and nothing of the pipeline is applied; first
    in it, or after its COMMIT or ROLLBACK, it runs. Each pipeline answers and
    leaves as on PostgreSQL (defect: varvedb refused it only after a write, so
    after a SELECT or SET it ran)."""
    pg_conn.autocommit = True
    want = [_pipelined(pg_conn, steps) for steps in _PIPELINES]
    w = wire()
    got = [_pipelined(w, steps) for steps in _PIPELINES]
    assert got == want
    refused = [("25001", f"{what} cannot run inside a transaction block")
               for what in ("VACUUM",) * 5 + ("DISCARD ALL", "CREATE INDEX CONCURRENTLY")]
    assert want == [[r, 0] for r in refused[:4]] + [[refused[4], "INERROR", 0]] + [
        [r, 0] for r in refused[5:]] + [[0], [1], [("22012", "division by zero"), 0],
                                        [1], [0], [1]]


def test_set_in_a_block_is_undone_by_rollback_and_set_local_lasts_to_its_end(
        pg_conn, tmp_path, wire):
    # red-team 9 f04: SET survived ROLLBACK, SET LOCAL survived COMMIT
    show = "SHOW ivfflat.probes"
    answers = []
    for run in _three_ways(pg_conn, tmp_path, wire):
        got = []
        for step in ["SET ivfflat.probes = 3", "BEGIN", "SET ivfflat.probes = 5", show,
                     "ROLLBACK", show, "BEGIN", "SET LOCAL ivfflat.probes = 7", show,
                     "COMMIT", show, "BEGIN", "SET ivfflat.probes = 8",
                     "SET LOCAL ivfflat.probes = 9", show, "COMMIT", show,
                     "SET LOCAL ivfflat.probes = 2", show]:
            got.append(run(step))
        answers.append(got)
    assert answers[0] == answers[1] == answers[2]
    assert [a for a in answers[0] if a[0] == "show"] == [
        ("show", "5"), ("show", "3"), ("show", "7"), ("show", "3"), ("show", "9"),
        ("show", "8"), ("show", "8")]


def _two_sessions(steps, a, b):
    """Steps of two sessions ("A" or "B", sql), each answered ("ok", rows or None,
    command tag) or ("err", SQLSTATE); `a` and `b` run one and answer (rows, tag)."""
    return [_outcome(a if who == "A" else b, sql) for who, sql in steps]


def _two_sessions_on_postgres(pg, pg_conn, setup, steps):
    """_two_sessions on PostgreSQL: pg_conn (A, after the setup) and another
    connection (B) to the same schema."""
    other = pg.psycopg.connect(pg.uri, autocommit=True)
    try:
        pg_conn.autocommit = True
        other.execute("SET search_path TO " + pg_conn.execute("SELECT current_schema()")
                      .fetchone()[0])
        for s in setup:
            pg_conn.execute(s)
        return _two_sessions(steps, _psycopg_runner(pg_conn), _psycopg_runner(other))
    finally:
        other.close()


def _psycopg_runner(conn):
    def run(sql):
        cur = conn.execute(sql)
        return (cur.fetchall() if cur.description else None), cur.statusmessage
    return run


def _sql_runner(session):
    def run(sql):
        r = session.sql(sql)
        return (r.rows if r.columns else None), r.status
    return run


def test_a_repeatable_read_block_takes_the_lock_at_its_first_write(pg, pg_conn, tmp_path,
                                                                   wire):
    # defect: REPEATABLE READ and SERIALIZABLE took the writer lock at BEGIN, so a
    # block that only read kept every other session's write waiting (55P03). Now its
    # first write takes it, refused (40001) where a commit came since its BEGIN, as
    # PostgreSQL refuses a write to a row changed since; its reads see BEGIN's state
    setup = ["CREATE TABLE t (id int PRIMARY KEY, a int)", "INSERT INTO t VALUES (1, 1), (2, 2)"]
    steps = [("A", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
             ("A", "SELECT id, a FROM t ORDER BY id"),
             ("B", "UPDATE t SET a = 10 WHERE id = 1"),        # not kept waiting
             ("B", "INSERT INTO t VALUES (3, 3)"),
             ("A", "SELECT id, a FROM t ORDER BY id"),         # BEGIN's state
             ("A", "SELECT count(*) FROM t WHERE a > 1"),
             ("A", "UPDATE t SET a = 20 WHERE id = 1"),        # 40001
             ("A", "SELECT 1"),                                # 25P02
             ("A", "COMMIT"),                                  # ROLLBACK
             ("A", "BEGIN ISOLATION LEVEL SERIALIZABLE"),
             ("A", "SELECT id, a FROM t ORDER BY id"),
             ("A", "UPDATE t SET a = 30 WHERE id = 2"),        # nothing came since
             ("A", "SELECT id, a FROM t ORDER BY id"),
             ("A", "COMMIT"),
             ("B", "SELECT id, a FROM t ORDER BY id")]
    want = _two_sessions_on_postgres(pg, pg_conn, setup, steps)
    assert want[6] == ("err", "40001") and want[8] == ("ok", (None, "ROLLBACK"))
    assert want[14] == ("ok", ([(1, 10), (2, 30), (3, 3)], "SELECT 3"))

    db = vv.connect(str(tmp_path / "rr.varve"), timeout=0.2)
    for s in setup:
        db.sql(s)
    a, b = db.session(), db.session()
    assert _two_sessions(steps, _sql_runner(a), _sql_runner(b)) == want, "db.sql"
    db.close()

    w = wire()
    for s in setup:
        w.execute(s)
    assert _two_sessions(steps, _psycopg_runner(w), _psycopg_runner(wire())) == want, "--pg"


def test_a_repeatable_read_block_is_refused_a_write_after_any_commit(tmp_path):
    # conservative first-committer-wins (docs/sql.md, docs/pgwire.md): a commit of
    # any row of its branch since its BEGIN refuses the block's write, where
    # PostgreSQL refuses a write to a row changed since; a read-only block never
    # keeps a writer waiting
    db = vv.connect(str(tmp_path / "rr.varve"), timeout=0.2)
    db.sql("CREATE TABLE t (id int PRIMARY KEY, a int)")
    db.sql("INSERT INTO t VALUES (1, 1), (2, 2)")
    a, b = db.session(), db.session()
    a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    assert a.sql("SELECT a FROM t WHERE id = 2").rows == [(2,)]
    b.sql("UPDATE t SET a = 20 WHERE id = 2")
    assert a.sql("SELECT a FROM t WHERE id = 2").rows == [(2,)]
    assert a.sql("COMMIT").status == "COMMIT"
    a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
    b.sql("UPDATE t SET a = 21 WHERE id = 2")
    with pytest.raises(vv.SqlError) as e:
        a.sql("UPDATE t SET a = 10 WHERE id = 1")      # another row: PostgreSQL takes it
    assert e.value.sqlstate == "40001"
    assert a.sql("ROLLBACK").status == "ROLLBACK"
    b.sql("INSERT INTO t VALUES (3, 3)")        # the refused block holds no lock
    assert db.sql("SELECT id, a FROM t ORDER BY id").rows == [(1, 1), (2, 21), (3, 3)]
    db.close()


def test_a_repeatable_read_block_reads_its_version_across_a_vacuum(pg, pg_conn, tmp_path,
                                                                  wire):
    # red-team 11 f18b_rr_vacuum: another session's VACUUM (KEEP 1) dropped the version
    # the block reads (22023 at its next read); PostgreSQL's VACUUM never removes what
    # an open snapshot sees. The vacuum keeps it, and lets it go at the block's end
    setup = ["CREATE TABLE t (id int PRIMARY KEY, x int)",
             "INSERT INTO t SELECT g, g FROM generate_series(1, 10) g"]
    steps = [("A", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
             ("A", "SELECT count(*) FROM t"),
             ("B", "DELETE FROM t WHERE id <= 5"),
             ("B", "UPDATE t SET x = 0"),
             ("B", "VACUUM"),
             ("A", "SELECT count(*), sum(x) FROM t"),
             ("A", "COMMIT"),
             ("A", "SELECT count(*), sum(x) FROM t")]
    want = _two_sessions_on_postgres(pg, pg_conn, setup, steps)
    assert want[5] == ("ok", ([(10, 55)], "SELECT 1"))
    ours = [(who, "VACUUM (KEEP 1)" if sql == "VACUUM" else sql) for who, sql in steps]

    db = vv.connect(str(tmp_path / "rr.varve"))
    for s in setup:
        db.sql(s)
    a, b = db.session(), db.session()
    assert _two_sessions(ours, _sql_runner(a), _sql_runner(b)) == want, "db.sql"
    newest = db.version
    assert db.engine.oldest_version() < newest       # the block's version was kept
    db.vacuum(keep=1)                                # the block ended: nothing holds it
    assert db.engine.oldest_version() == newest
    db.close()

    w = wire()
    for s in setup:
        w.execute(s)
    assert _two_sessions(ours, _psycopg_runner(w), _psycopg_runner(wire())) == want, "--pg"


def test_a_vacuum_lets_go_of_a_closed_or_dropped_block_and_refuses_what_it_cannot_keep(
        tmp_path):
    """A block holds its version to its first write, COMMIT, ROLLBACK or close, or
    until its session is collected. One that began before the last drop_branch()
    (whose history a vacuum never keeps) makes the vacuum a TransactionError that
    leaves the file as it was, the block reading on."""
    import gc
    db = vv.connect(str(tmp_path / "p.varve"))
    try:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
        db.sql("INSERT INTO t VALUES (1, 1)")
        a = db.session()
        a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        pinned = db.version
        db.branch("b")
        db.drop_branch("b")
        db.sql("DELETE FROM t")
        with pytest.raises(vv.TransactionError, match=f"version {pinned}"):
            db.vacuum(keep=1)
        assert db.engine.oldest_version() == 1 and db.engine.vacuums == 0
        assert a.sql("SELECT x FROM t").rows == [(1,)]
        a.close()                                   # lets go of it
        db.vacuum(keep=1)
        assert db.engine.oldest_version() == db.version

        for end in ("dropped", "written"):
            db.sql("INSERT INTO t VALUES (2, 2)")
            a = db.session()
            a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
            assert a.sql("SELECT x FROM t").rows == [(2,)]
            db.sql("UPDATE t SET x = 3")
            if end == "dropped":
                del a
                gc.collect()
            else:
                with pytest.raises(vv.SqlError) as e:    # a commit came since: 40001
                    a.sql("UPDATE t SET x = 4")
                assert e.value.sqlstate == "40001"
            db.vacuum(keep=1)
            assert db.engine.oldest_version() == db.version, end
            db.sql("DELETE FROM t")
    finally:
        db.close()


def test_a_failed_repeatable_read_block_lets_its_version_go_unless_a_savepoint_keeps_it(
        pg, tmp_path):
    """PostgreSQL's aborted transaction ("idle in transaction (aborted)") holds no
    snapshot (its backend_xmin is NULL) unless a savepoint leaves its top
    transaction alive: a failed block that held its BEGIN's version to ROLLBACK
    kept a vacuum from reclaiming anything meanwhile. The failed block lets it go
    (its reads, the Python API's too, are refused: 25P02); one with a savepoint
    keeps it and reads on after ROLLBACK TO."""
    def pg_holds(savepoint: bool) -> bool:
        a = pg.psycopg.connect(pg.uri, autocommit=True)
        b = pg.psycopg.connect(pg.uri, autocommit=True)
        try:
            a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            a.execute("SELECT 1")
            if savepoint:
                a.execute("SAVEPOINT s")
            with pytest.raises(psycopg.Error):
                a.execute("SELECT 1 / 0")
            pid = a.info.backend_pid
            xmin, = b.execute("SELECT backend_xmin FROM pg_stat_activity WHERE pid = %s",
                              (pid,)).fetchone()
            a.execute("ROLLBACK")
            return xmin is not None
        finally:
            a.close()
            b.close()
    assert pg_holds(savepoint=False) is False and pg_holds(savepoint=True) is True

    db = vv.connect(str(tmp_path / "f.varve"))
    try:
        db.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
        db.sql("INSERT INTO t VALUES (1, 1)")
        t = db.create_collection("docs", {"n": "int"})
        t.insert({"id": 1, "n": 1})
        a = db.session()
        a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert a.sql("SELECT x FROM t").rows == [(1,)]
        with pytest.raises(vv.SqlError) as e:
            a.sql("SELECT 1 / 0")
        assert e.value.sqlstate == "22012"
        db.sql("UPDATE t SET x = 2")
        db.vacuum(keep=1)                               # reclaims while the block is failed
        assert db.engine.oldest_version() == db.version
        with pytest.raises(vv.SqlError) as e:
            a.sql("SELECT x FROM t")
        assert e.value.sqlstate == "25P02"
        with pytest.raises(vv.TransactionAbortedError):  # not the newest state instead
            a.collection("docs").find()
        assert a.sql("ROLLBACK").status == "ROLLBACK"   # still ends it cleanly
        assert a.sql("SELECT x FROM t").rows == [(2,)]
        assert a.collection("docs").count() == 1

        a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert a.sql("SELECT x FROM t").rows == [(2,)]
        a.sql("SAVEPOINT s")
        with pytest.raises(vv.SqlError):
            a.sql("SELECT 1 / 0")
        db.sql("UPDATE t SET x = 3")
        kept = db.version - 1
        db.vacuum(keep=1)                                # the savepoint keeps it
        assert db.engine.oldest_version() == kept
        a.sql("ROLLBACK TO SAVEPOINT s")
        assert a.sql("SELECT x FROM t").rows == [(2,)]
        assert a.sql("COMMIT").status == "COMMIT"
        db.vacuum(keep=1)
        assert db.engine.oldest_version() == db.version
    finally:
        db.close()


def test_a_repeatable_read_block_of_another_connection_refuses_once_a_vacuum_dropped_its_state(
        tmp_path):
    """Pins are a connection's: a read-only connection (another process's, as the
    server's read workers are) holding a REPEATABLE READ block pins nothing in the
    writer's, whose vacuum drops the block's version. The block reads the old
    file until its connection's refresh() loads the vacuumed one; then it fails
    with 40001 (retry the block), where it answered 22023 naming a version it was
    never given, and never reads another version's rows; ROLLBACK ends it and the
    next block reads the new state."""
    path = str(tmp_path / "x.varve")
    w = vv.connect(path)
    r = vv.connect(path, readonly=True)
    try:
        w.sql("CREATE TABLE t (id int PRIMARY KEY, x int)")
        w.sql("INSERT INTO t SELECT g, g FROM generate_series(1, 10) g")
        w.create_collection("docs", {"n": "int"}).insert({"id": 1, "n": 1})
        r.refresh()
        a = r.session()
        a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert a.sql("SELECT count(*), sum(x) FROM t").rows == [(10, 55)]
        w.sql("DELETE FROM t WHERE id <= 5")
        w.sql("UPDATE t SET x = 0")
        w.vacuum(keep=1)
        assert a.sql("SELECT count(*), sum(x) FROM t").rows == [(10, 55)]   # the old file
        r.refresh()
        with pytest.raises(vv.SqlError) as e:
            a.sql("SELECT count(*), sum(x) FROM t")
        assert e.value.sqlstate == "40001" and "vacuum" in str(e.value)
        with pytest.raises(vv.SqlError) as e:
            a.sql("SELECT 1")
        assert e.value.sqlstate == "25P02"              # the block failed
        a.sql("ROLLBACK")
        a.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert a.sql("SELECT count(*), sum(x) FROM t").rows == [(5, 0)]
        a.sql("COMMIT")

        b = r.session()                                 # the Python API's read too
        b.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert b.collection("docs").count() == 1
        w.collection("docs").insert({"id": 2, "n": 2})
        w.vacuum(keep=1)
        r.refresh()
        with pytest.raises(vv.SqlError) as e:
            b.collection("docs").count()
        assert e.value.sqlstate == "40001"
        b.sql("ROLLBACK")
        assert b.collection("docs").count() == 2
    finally:
        r.close()
        w.close()


def _libpq(conn, send) -> list:
    """The results of one libpq request (`send(pgconn)`, psycopg's pq, which its
    Connection never sends for a statement Describe): (SQLSTATE or None, column
    names) each, waited for on the socket (a minutes-long hang guard)."""
    import select
    import time
    pgconn = conn.pgconn
    send(pgconn)
    guard = time.monotonic() + 600
    while pgconn.flush() or (pgconn.consume_input() or pgconn.is_busy()):
        assert time.monotonic() < guard, "no answer"
        select.select([pgconn.socket], [pgconn.socket], [], 1)
    out = []
    while (r := pgconn.get_result()) is not None:
        state = r.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
        out.append((state and state.decode(), [r.fname(i).decode() for i in range(r.nfields)]))
    return out


def test_a_parameter_neither_named_nor_typed_is_42p18_at_parse(pg_conn, wire):
    """Parse of `SELECT $2::int` leaving $1 untyped (0, or no type given): nothing
    types $1, and PostgreSQL answers 42P18 at the Parse; one the text names, or the
    client types, is fine (defect: varvedb typed $1 text, and the Bind of one value
    was 08P01)."""
    cases = [(b"SELECT $2::int", [0]), (b"SELECT $2::int", []), (b"SELECT 1", [0]),
             (b"SELECT $3::int, $1::int", [0]), (b"SELECT $2::int", [23]),
             (b"SELECT $1", [0]), (b"SELECT $1::int", [0, 23])]
    answers = []
    for conn in (pg_conn, wire()):
        got = []
        for k, (text, types) in enumerate(cases):
            got += _libpq(conn, lambda c: c.send_prepare(b"p%d" % k, text, types))
        answers.append(got)
    assert answers[0] == answers[1] == [("42P18", [])] * 4 + [(None, [])] * 3


def _describe_in_block(conn, prepare: bytes) -> list:
    """In a block that wrote a row: Parse a statement, Describe it (the first error
    of the two ends them), insert a row, COMMIT: what each answered, and the rows."""
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (1)")
    got = _libpq(conn, lambda c: c.send_prepare(b"s", prepare))
    if got[0][0] is None:
        got += _libpq(conn, lambda c: c.send_describe_prepared(b"s"))
    got.append(_outcome(lambda s: conn.execute(s).statusmessage, "INSERT INTO t VALUES (2)"))
    got.append(conn.execute("COMMIT").statusmessage)
    got.append(sorted(conn.execute("SELECT id FROM t").fetchall()))
    conn.execute("DELETE FROM t")
    conn.execute("DEALLOCATE ALL")
    return got


@pytest.mark.parametrize("text", ["SELECT 1 / 0 AS x, $1::int AS y",
                                  "SELECT id FROM t WHERE id = $1 AS OF BRANCH 'main'",
                                  "SELECT nosuch FROM t WHERE id = $1"])
def test_a_statement_describe_fails_no_block(pg_conn, wire, text):
    # defect: --pg's Describe of a prepared SELECT ran it with NULL parameters, and
    # the run's error (one PostgreSQL's Describe never meets: it runs nothing) failed
    # the open block, so its COMMIT rolled back; a name that does not exist is
    # refused by PostgreSQL's Parse (varvedb's Describe), which fails the block
    pg_text = text.replace(" AS OF BRANCH 'main'", "")
    pg_conn.autocommit = True
    pg_conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    want = _describe_in_block(pg_conn, pg_text.encode())
    w = wire()
    w.execute("CREATE TABLE t (id int PRIMARY KEY)")
    got = _describe_in_block(w, text.encode())
    if want[0][0] is not None:      # refused by PostgreSQL's Parse: by the Describe here
        assert want[0] == ("42703", []) and got[0] == (None, []) and got[1] == want[0]
        got = got[1:]
    else:
        assert want[-1] == [(1,), (2,)] and want[1][1]
    assert got == want


def _three_ways(pg_conn, tmp_path, wire):
    """A step runner for PostgreSQL, db.sql and --pg each: ("show", value) for a
    step that ends in a SHOW, else the command tag."""
    def of(execute):
        def run(step):
            r = execute(step)
            shows = step.split(";")[-1].strip().startswith("SHOW")     # (its last)
            return ("show", str(r[0][0][0])) if shows else ("ok", r[1])
        return run
    pg_conn.autocommit = True
    pg_conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    db = vv.connect(str(tmp_path / "settings.varve"))
    w = wire()

    def on(conn):
        def execute(step):
            cur = _last(conn.execute(step))
            return (cur.fetchall() if cur.description else None), cur.statusmessage
        return execute
    yield of(on(pg_conn))
    yield of(lambda step: ((r := db.sql(step)).rows, r.status))
    yield of(on(w))
    db.close()


def test_a_block_that_only_reads_keeps_no_writer_waiting(tmp_path, wire):
    # red-team 9 f10: BEGIN took the writer lock, so psycopg's default mode (a block
    # opened at its first SELECT) made every other session's write fail with 55P03
    db = vv.connect(str(tmp_path / "locks.varve"), timeout=0.2)
    db.sql("CREATE TABLE t (id int PRIMARY KEY)")
    reader, writer = db.session(), db.session()
    reader.sql("BEGIN")
    assert reader.sql("SELECT count(*) FROM t").rows == [(0,)]
    with pytest.raises(vv.TransactionError):     # the block is open, as it was before
        with reader.transaction():
            pass
    writer.sql("INSERT INTO t VALUES (1)")              # no lock held: it commits
    # READ COMMITTED: each statement reads the newest commit
    assert reader.sql("SELECT id FROM t").rows == [(1,)]
    reader.sql("INSERT INTO t VALUES (2)")              # its first write takes the lock
    with pytest.raises(vv.LockTimeoutError):
        writer.sql("INSERT INTO t VALUES (3)")
    assert reader.sql("SELECT id FROM t ORDER BY id").rows == [(1,), (2,)]
    assert writer.sql("SELECT id FROM t ORDER BY id").rows == [(1,)]
    assert reader.sql("COMMIT").status == "COMMIT"
    writer.sql("INSERT INTO t VALUES (3)")
    # a block that wrote nothing ends without a transaction; one that failed answers
    # ROLLBACK; REPEATABLE READ reads its BEGIN's state throughout, and takes the
    # lock at its first write too (below)
    reader.sql("BEGIN")
    with pytest.raises(vv.SqlError):
        reader.sql("SELECT nosuch FROM t")
    assert reader.sql("COMMIT").status == "ROLLBACK"
    reader.sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
    writer.sql("INSERT INTO t VALUES (4)")
    assert reader.sql("COMMIT").status == "COMMIT"
    assert sorted(db.sql("SELECT id FROM t").rows) == [(1,), (2,), (3,), (4,)]
    db.close()

    # over --pg: psycopg's default mode, a reading connection left idle in its block
    w = wire()
    w.execute("CREATE TABLE t (id int PRIMARY KEY)")
    r = wire()
    r.autocommit = False
    assert r.execute("SELECT count(*) FROM t").fetchall() == [(0,)]   # psycopg: BEGIN
    assert w.execute("INSERT INTO t VALUES (1)").statusmessage == "INSERT 0 1"
    assert r.execute("SELECT id FROM t").fetchall() == [(1,)]
    r.rollback()
