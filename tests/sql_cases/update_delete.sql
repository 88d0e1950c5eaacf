-- UPDATE ... SET ... WHERE ... RETURNING and DELETE ... WHERE ... RETURNING.
CREATE TABLE stock (id bigint PRIMARY KEY, name text NOT NULL, qty int, price real,
                    embedding vector(3));
INSERT INTO stock VALUES
    (1, 'bolt', 10, 0.5, '[1,0,0]'),
    (2, 'nut', 20, 0.25, '[0,1,0]'),
    (3, 'gear', 5, 4, '[0,0,1]'),
    (4, 'cog', NULL, 2, NULL),
    (5, 'pin', 0, 0.125, '[1,1,1]');

UPDATE stock SET qty = qty + 1 WHERE id = 1;
UPDATE stock SET qty = qty * 2, price = price / 2 WHERE qty >= 10 RETURNING id, qty, price;
-- => [(1, 22, 0.25), (2, 40, 0.125)]
-- no row matches; NULL never matches a comparison
UPDATE stock SET qty = 1 WHERE id = 99;
UPDATE stock SET price = 9 WHERE qty > 100 RETURNING id;
-- => []
UPDATE stock SET qty = 7 WHERE qty IS NULL RETURNING id, name, qty;
-- => [(4, 'cog', 7)]
UPDATE stock SET embedding = '[2,2,2]', name = 'big pin' WHERE id = 5 RETURNING *;
-- => [(5, 'big pin', 0, 0.125, [2.0, 2.0, 2.0])]
UPDATE stock SET qty = NULL WHERE id = 3 RETURNING qty;
-- => [(None,)]
SELECT id, name, qty, price, embedding FROM stock ORDER BY id;
-- => [(1, 'bolt', 22, 0.25, [1.0, 0.0, 0.0]), (2, 'nut', 40, 0.125, [0.0, 1.0, 0.0]),
--     (3, 'gear', None, 4.0, [0.0, 0.0, 1.0]), (4, 'cog', 7, 2.0, None),
--     (5, 'big pin', 0, 0.125, [2.0, 2.0, 2.0])]

-- without WHERE: every row
UPDATE stock SET price = price + 1;
SELECT id, price FROM stock ORDER BY id;
-- => [(1, 1.25), (2, 1.125), (3, 5.0), (4, 3.0), (5, 1.125)]

-- errors leave the rows as they were
UPDATE stock SET name = NULL WHERE id = 1;
-- !! 23502
UPDATE stock SET qty = 'many' WHERE id = 1;
-- !! 22P02
UPDATE stock SET embedding = '[1,2]' WHERE id = 1;
-- !! 22000
UPDATE stock SET nothing = 1;
-- !! 42703
UPDATE stock SET qty = 1 WHERE nothing = 1;
-- !! 42703
UPDATE nowhere SET qty = 1;
-- !! 42P01
SELECT id, name, qty FROM stock WHERE id = 1;
-- => [(1, 'bolt', 22)]

DELETE FROM stock WHERE id = 2;
DELETE FROM stock WHERE qty < 10 RETURNING id, name;
-- => [(4, 'cog'), (5, 'big pin')]
DELETE FROM stock WHERE id = 99 RETURNING *;
-- => []
DELETE FROM stock WHERE nothing = 1;
-- !! 42703
SELECT id FROM stock ORDER BY id;
-- => [(1,), (3,)]
-- a deleted id can be inserted again
INSERT INTO stock (id, name) VALUES (2, 'new nut');
SELECT id, name, qty FROM stock ORDER BY id;
-- => [(1, 'bolt', 22), (2, 'new nut', None), (3, 'gear', None)]
DELETE FROM stock RETURNING id;
-- => [(1,), (2,), (3,)]
SELECT count(*) FROM stock;
-- => [(0,)]
DELETE FROM nowhere;
-- !! 42P01
