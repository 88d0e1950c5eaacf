-- What PostgreSQL refuses inside a transaction block (VACUUM, DISCARD ALL, CREATE / DROP
-- INDEX CONCURRENTLY) is refused (25001) in a text of several statements too, which
-- runs as one implicit transaction: nothing of the text is applied.
CREATE TABLE t (id bigint PRIMARY KEY, x int);
INSERT INTO t VALUES (1, 1);
INSERT INTO t VALUES (3, 3); VACUUM;
-- !! 25001
VACUUM; SELECT 1;
-- !! 25001
SELECT 1; DISCARD ALL;
-- !! 25001
INSERT INTO t VALUES (2, 2); CREATE INDEX CONCURRENTLY t_x ON t (x);
-- !! 25001
CREATE INDEX t_x ON t (x); DROP INDEX CONCURRENTLY t_x;
-- !! 25001
SELECT id FROM t ORDER BY id;
-- => [(1,)]
DROP INDEX t_x;
-- !! 42704
BEGIN;
CREATE INDEX CONCURRENTLY t_x ON t (x);
-- !! 25001
ROLLBACK;
BEGIN;
DROP INDEX CONCURRENTLY IF EXISTS t_x;
-- !! 25001
ROLLBACK;
-- alone, each runs
VACUUM;
CREATE INDEX CONCURRENTLY t_x ON t (x);
DROP INDEX CONCURRENTLY t_x;
DISCARD ALL;
