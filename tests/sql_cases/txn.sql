-- Transactions: BEGIN / COMMIT / ROLLBACK, and a failed transaction (25P02 until it ends).
CREATE TABLE acct (id bigint PRIMARY KEY, owner text NOT NULL, balance int);
INSERT INTO acct VALUES (1, 'ann', 100), (2, 'ben', 50);

-- ROLLBACK undoes inserts, updates and deletes; inside, the transaction sees its own writes
BEGIN;
INSERT INTO acct VALUES (3, 'cat', 10);
UPDATE acct SET balance = balance - 30 WHERE id = 1;
DELETE FROM acct WHERE id = 2;
SELECT id, balance FROM acct ORDER BY id;
-- => [(1, 70), (3, 10)]
ROLLBACK;
SELECT id, owner, balance FROM acct ORDER BY id;
-- => [(1, 'ann', 100), (2, 'ben', 50)]

-- COMMIT keeps them
BEGIN;
INSERT INTO acct VALUES (3, 'cat', 10);
UPDATE acct SET balance = balance + 5 WHERE id = 2 RETURNING balance;
-- => [(55,)]
COMMIT;
SELECT id, balance FROM acct ORDER BY id;
-- => [(1, 100), (2, 55), (3, 10)]
START TRANSACTION;
DELETE FROM acct WHERE id = 3;
COMMIT;
SELECT count(*) FROM acct;
-- => [(2,)]

-- an error inside a transaction: every later statement fails with 25P02 until ROLLBACK,
-- and the writes before the error are gone too
BEGIN;
INSERT INTO acct VALUES (4, 'dan', 1);
INSERT INTO acct VALUES (1, 'dup', 0);
-- !! 23505
SELECT count(*) FROM acct;
-- !! 25P02
INSERT INTO acct VALUES (5, 'eve', 2);
-- !! 25P02
ROLLBACK;
SELECT id FROM acct ORDER BY id;
-- => [(1,), (2,)]

-- the same after an error of another kind; COMMIT of a failed transaction rolls it back
BEGIN;
UPDATE acct SET balance = 0 WHERE id = 1;
SELECT nothing FROM acct;
-- !! 42703
UPDATE acct SET balance = 1 WHERE id = 2;
-- !! 25P02
COMMIT;
SELECT id, balance FROM acct ORDER BY id;
-- => [(1, 100), (2, 55)]

-- outside a transaction a failed statement changes nothing and the next one runs
INSERT INTO acct VALUES (6, 'fay', 6), (1, 'dup', 0);
-- !! 23505
SELECT id FROM acct ORDER BY id;
-- => [(1,), (2,)]
UPDATE acct SET owner = NULL;
-- !! 23502
SELECT owner FROM acct ORDER BY id;
-- => [('ann',), ('ben',)]

-- CREATE INDEX is DDL: undone with the text of several statements it is in when one
-- fails (the index is not there: DROP INDEX is 42704), refused in a READ ONLY block
CREATE INDEX acct_balance ON acct (balance); SELECT 1 / 0;
-- !! 22012
DROP INDEX acct_balance;
-- !! 42704
BEGIN READ ONLY;
CREATE INDEX acct_balance ON acct (balance);
-- !! 25006
ROLLBACK;
