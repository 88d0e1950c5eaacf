-- ALTER TABLE ADD [CONSTRAINT name] CHECK (...) [NOT VALID]: the rows there are checked
-- first (23514 if one fails, nothing changed; NOT VALID skips that), then every later
-- write is held to it; a NULL passes; several ADDs on one column all hold.
CREATE TABLE a (id bigint PRIMARY KEY, price int, code text);
INSERT INTO a VALUES (1, 1, 'a'), (2, 5, 'b'), (3, NULL, NULL);
ALTER TABLE a ADD CHECK (price > 2);
-- !! 23514
INSERT INTO a VALUES (4, 0, 'c');
ALTER TABLE a ADD CONSTRAINT pos CHECK (price >= 0 AND code <> 'x');
INSERT INTO a VALUES (5, -1, 'c');
-- !! 23514
INSERT INTO a VALUES (5, 1, 'x');
-- !! 23514
INSERT INTO a VALUES (5, 7, 'c');
ALTER TABLE a ADD CHECK (price < 100) NOT VALID;
UPDATE a SET price = 100 WHERE id = 1;
-- !! 23514
ALTER TABLE a ADD CHECK (price > 3) NOT VALID;
INSERT INTO a VALUES (6, 2, 'd');
-- !! 23514
UPDATE a SET code = 'x' WHERE id = 2;
-- !! 23514
-- a row the NOT VALID check never saw is held to it at its next write, whatever it sets
UPDATE a SET code = 'z' WHERE id = 1;
-- !! 23514
INSERT INTO a VALUES (1, 5, 'a') ON CONFLICT (id) DO UPDATE SET code = 'z';
-- !! 23514
BEGIN;
INSERT INTO a VALUES (7, -1, 'e');
-- !! 23514
ROLLBACK;
BEGIN;
DELETE FROM a WHERE id IN (1, 4);
ALTER TABLE a ADD CHECK (price >= 5);
INSERT INTO a VALUES (8, 4, 'f');
-- !! 23514
ROLLBACK;
INSERT INTO a VALUES (8, 4, 'f');
SELECT * FROM a ORDER BY id;
-- => [(1, 1, 'a'), (2, 5, 'b'), (3, None, None), (4, 0, 'c'), (5, 7, 'c'), (8, 4, 'f')]
ALTER TABLE a ADD COLUMN n int, ADD CHECK (n IS NOT NULL);
-- !! 23514
ALTER TABLE a ADD COLUMN n int DEFAULT 0, ADD CHECK (n = 0);
INSERT INTO a VALUES (9, 4, 'g', 1);
-- !! 23514
SELECT id, n FROM a WHERE id > 4 ORDER BY id;
-- => [(5, 0), (8, 0)]
ALTER TABLE missing ADD CHECK (price > 0);
-- !! 42P01
ALTER TABLE a ADD CHECK (nope > 0);
-- !! 42703
