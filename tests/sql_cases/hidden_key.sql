-- A table declared without a key: its rows' hidden key has no name in SQL, so `id`
-- is a column that does not exist (42703) wherever a statement names it, and
-- SELECT * shows the declared columns alone; a statement refused changes nothing.
CREATE TABLE nokey (a integer, b text);
INSERT INTO nokey VALUES (1, 'x'), (2, 'y');
SELECT * FROM nokey ORDER BY a;
-- => [(1, 'x'), (2, 'y')]
SELECT id FROM nokey;
-- !! 42703
SELECT a FROM nokey WHERE id = 1;
-- !! 42703
SELECT a FROM nokey ORDER BY id;
-- !! 42703
SELECT n.id FROM nokey n;
-- !! 42703
SELECT count(id) FROM nokey;
-- !! 42703
SELECT (SELECT max(id) FROM nokey);
-- !! 42703
SELECT a FROM nokey WHERE a IN (SELECT id FROM nokey);
-- !! 42703
UPDATE nokey SET a = 3 WHERE id = 1;
-- !! 42703
UPDATE nokey SET a = 3 RETURNING id;
-- !! 42703
DELETE FROM nokey WHERE id = 1;
-- !! 42703
DELETE FROM nokey RETURNING id;
-- !! 42703
INSERT INTO nokey VALUES (5, 'z') RETURNING id;
-- !! 42703
INSERT INTO nokey (id, a) VALUES (9, 9);
-- !! 42703
SELECT * FROM nokey ORDER BY a;
-- => [(1, 'x'), (2, 'y')]
INSERT INTO nokey VALUES (5, 'z') RETURNING *;
-- => [(5, 'z')]
UPDATE nokey SET b = 'w' WHERE a = 5 RETURNING a, b;
-- => [(5, 'w')]
-- a column the user named id is a column like any other
CREATE TABLE keyed (id bigint PRIMARY KEY, a integer);
INSERT INTO keyed VALUES (1, 10), (2, 20);
SELECT id, a FROM keyed WHERE id = 2 ORDER BY id;
-- => [(2, 20)]
SELECT k.id, n.b FROM keyed k JOIN nokey n ON n.a = k.id - 1 + 1 ORDER BY k.id;
-- => [(1, 'x'), (2, 'y')]

-- an ORDER BY name that two items of the select list have, of two values: 42702
SELECT a AS x, b AS x FROM nokey ORDER BY x;
-- !! 42702
SELECT a AS x, a AS x FROM nokey ORDER BY x;
-- => [(1, 1), (2, 2), (5, 5)]
