"""The pgvector-python tests harness (varvedb_bench.pgvector_python) on test files of
its own, written as pgvector-python's are (a connection at import to the database
`pgvector_python_test`, by keyword and by URL): only the connection strings are
changed, each file runs against a fresh `varvedb serve --pg`, and the counts and
failures come back per file."""
from __future__ import annotations

import textwrap

from varvedb_bench import pgvector_python

PSYCOPG = textwrap.dedent('''
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(dbname='pgvector_python_test', autocommit=True)
    conn.execute('CREATE EXTENSION IF NOT EXISTS vector')
    conn.execute('DROP TABLE IF EXISTS psycopg_items')
    conn.execute('CREATE TABLE psycopg_items (id bigserial PRIMARY KEY, embedding vector(3))')
    register_vector(conn)


    class TestPsycopg:
        def test_vector(self):
            conn.execute('INSERT INTO psycopg_items (embedding) VALUES (%s)', (np.array([1.5, 2, 3]),))
            res = conn.execute('SELECT embedding FROM psycopg_items ORDER BY id').fetchone()
            assert res[0].to_list() == [1.5, 2, 3]

        def test_fails(self):
            conn.execute('SELECT no_such_function(1)')
''')

SQLALCHEMY = textwrap.dedent('''
    from sqlalchemy import create_engine, text

    engine = create_engine('postgresql+psycopg://localhost/pgvector_python_test')


    def test_connects():
        with engine.connect() as c:
            assert c.execute(text('SELECT 1')).scalar() == 1


    def test_skipped():
        import pytest
        pytest.skip('not here')
''')


def test_each_file_runs_against_its_own_server_and_is_counted(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "test_psycopg.py").write_text(PSYCOPG)
    (tmp_path / "test_sqlalchemy.py").write_text(SQLALCHEMY)
    (tmp_path / "test_unimportable.py").write_text("import no_such_driver\n")
    lines = []
    got = pgvector_python.run(str(tmp_path), ["test_psycopg.py", "test_sqlalchemy.py",
                                              "test_unimportable.py"], echo=lines.append)
    assert {k: (v["passed"], v["failed"], v["skipped"]) for k, v in got.items()} == {
        "test_psycopg.py": (1, 1, 0), "test_sqlalchemy.py": (1, 0, 1),
        "test_unimportable.py": (0, 1, 0)}
    (test, message), = got["test_psycopg.py"]["failures"]
    assert test == "test_fails" and "no_such_function" in message
    (_, message), = got["test_unimportable.py"]["failures"]
    assert "No module named 'no_such_driver'" in message
    assert lines[0].split() == ["test_psycopg.py", "1", "passed", "1", "failed", "0", "skipped"]


def test_only_the_connection_strings_change():
    src = ("conn = psycopg.connect(dbname='pgvector_python_test', autocommit=True)\n"
           "e = create_engine(f'postgresql+pg8000://{getuser()}@localhost/pgvector_python_test')\n"
           "c = Connection(getuser(), database='pgvector_python_test')\n"
           "x = 'localhost'\n")
    assert pgvector_python.rewrite(src, 5999) == (
        "conn = psycopg.connect(dbname='pgvector_python_test', host='127.0.0.1', port=5999, "
        "autocommit=True)\n"
        "e = create_engine(f'postgresql+pg8000://{getuser()}@127.0.0.1:5999/pgvector_python_test')\n"
        "c = Connection(getuser(), database='pgvector_python_test', host='127.0.0.1', "
        "port=5999)\n"
        "x = 'localhost'\n")
