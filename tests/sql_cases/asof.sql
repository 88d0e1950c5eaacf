-- varvedb-only
-- Time travel: AS OF VERSION / AS OF TIMESTAMP at the end of a SELECT, and history as rows.
-- Each statement outside BEGIN is one commit: CREATE TABLE is version 1.
CREATE TABLE docs (id bigint PRIMARY KEY, title text, tag int);
INSERT INTO docs VALUES (1, 'first', 1), (2, 'second', 2);
UPDATE docs SET title = 'FIRST' WHERE id = 1;
DELETE FROM docs WHERE id = 2;
SELECT id, title FROM docs ORDER BY id;
-- => [(1, 'FIRST')]
SELECT id, title FROM docs ORDER BY id AS OF VERSION 2;
-- => [(1, 'first'), (2, 'second')]
SELECT id, title FROM docs ORDER BY id AS OF VERSION 3;
-- => [(1, 'FIRST'), (2, 'second')]
SELECT count(*) FROM docs AS OF VERSION 1;
-- => [(0,)]
-- before the table existed nothing of it was visible; before the first commit of all, nothing
SELECT count(*) FROM docs AS OF TIMESTAMP '2000-01-01 00:00:00+00';
-- => [(0,)]
-- a subquery reads the same version as the statement
SELECT title FROM docs WHERE id IN (SELECT id FROM docs WHERE tag = 2) AS OF VERSION 2;
-- => [('second',)]
SELECT id FROM docs AS OF VERSION 99;
-- !! 22023
SELECT version, rows_changed FROM varvedb_history('docs') ORDER BY version;
-- => [(2, 2), (3, 2), (4, 1)]
SELECT version, deleted, doc FROM varvedb_history('docs', 1) ORDER BY version;
-- => [(2, 3, {'id': 1, 'title': 'first', 'tag': 1}), (3, None, {'id': 1, 'title': 'FIRST', 'tag': 1})]
SELECT version, deleted FROM varvedb_history('docs', 2);
-- => [(2, 4)]
SELECT count(*) FROM varvedb_history();
-- => [(4,)]
