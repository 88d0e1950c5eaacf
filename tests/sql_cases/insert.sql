-- INSERT: multi-row VALUES, column lists, RETURNING, ON CONFLICT, assigned ids, errors.
CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int DEFAULT 0,
                    price double precision, embedding vector(3));

INSERT INTO items VALUES (1, 'apple', 3, 0.5, '[1,0,0]'), (2, 'pear', 5, 0.75, '[0,1,0]');
INSERT INTO items (id, name) VALUES (3, 'fig') RETURNING id, name, qty, price, embedding;
-- => [(3, 'fig', 0, None, None)]
INSERT INTO items (name, id, price) VALUES ('kiwi', 4, 1.25), ('lime', 5, 2.5) RETURNING *;
-- => [(4, 'kiwi', 0, 1.25, None), (5, 'lime', 0, 2.5, None)]
INSERT INTO items (id, name, qty) VALUES (6, 'plum', 2) RETURNING id * 10 AS tens, qty + 1;
-- => [(60, 3)]
SELECT id, name, qty, price, embedding FROM items ORDER BY id;
-- => [(1, 'apple', 3, 0.5, [1.0, 0.0, 0.0]), (2, 'pear', 5, 0.75, [0.0, 1.0, 0.0]),
--     (3, 'fig', 0, None, None), (4, 'kiwi', 0, 1.25, None), (5, 'lime', 0, 2.5, None),
--     (6, 'plum', 2, None, None)]

-- duplicate ids: in the table, or twice in one statement (nothing of it is kept)
INSERT INTO items (id, name) VALUES (1, 'again');
-- !! 23505
INSERT INTO items (id, name) VALUES (7, 'a'), (7, 'b');
-- !! 23505
SELECT count(*) FROM items;
-- => [(6,)]

-- ON CONFLICT (id) DO NOTHING: the conflicting row is skipped, the others go in
INSERT INTO items (id, name) VALUES (1, 'skipped'), (7, 'cherry') ON CONFLICT (id) DO NOTHING;
INSERT INTO items (id, name) VALUES (2, 'skipped') ON CONFLICT (id) DO NOTHING RETURNING id;
-- => []
INSERT INTO items (id, name) VALUES (2, 'skipped') ON CONFLICT DO NOTHING;
SELECT id, name FROM items WHERE id IN (1, 2, 7) ORDER BY id;
-- => [(1, 'apple'), (2, 'pear'), (7, 'cherry')]

-- ON CONFLICT (id) DO UPDATE SET col = EXCLUDED.col: the old row's other columns stay
INSERT INTO items (id, name, qty) VALUES (1, 'apple', 30), (8, 'grape', 8)
    ON CONFLICT (id) DO UPDATE SET qty = EXCLUDED.qty;
INSERT INTO items (id, name, price) VALUES (2, 'pear2', 9.5)
    ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, price = EXCLUDED.price
    RETURNING id, name, qty, price;
-- => [(2, 'pear2', 5, 9.5)]
SELECT id, name, qty, price FROM items WHERE id IN (1, 2, 8) ORDER BY id;
-- => [(1, 'apple', 30, 0.5), (2, 'pear2', 5, 9.5), (8, 'grape', 8, None)]

-- NOT NULL: left out, or given as NULL (the id too)
INSERT INTO items (id, qty) VALUES (9, 1);
-- !! 23502
INSERT INTO items (id, name) VALUES (9, NULL);
-- !! 23502
INSERT INTO items (id, name) VALUES (NULL, 'nobody');
-- !! 23502

-- bad values
INSERT INTO items (id, name, qty) VALUES (9, 'x', 'abc');
-- !! 22P02
INSERT INTO items (id, name) VALUES ('ten', 'x');
-- !! 22P02
INSERT INTO items (id, name, price) VALUES (9, 'x', 'cheap');
-- !! 22P02
INSERT INTO items (id, name, embedding) VALUES (9, 'x', 'abc');
-- !! 22P02
INSERT INTO items (id, name, embedding) VALUES (9, 'x', '[1,2]');
-- !! 22000
INSERT INTO items (id, nothing) VALUES (9, 1);
-- !! 42703
INSERT INTO items (id, name) VALUES (9, 'x', 3);
-- !! 42601
SELECT count(*) FROM items;
-- => [(8,)]

-- bigserial / serial: ids are assigned in order
CREATE TABLE notes (id bigserial PRIMARY KEY, body text);
INSERT INTO notes (body) VALUES ('a'), ('b') RETURNING id, body;
-- => [(1, 'a'), (2, 'b')]
INSERT INTO notes (body) VALUES ('c') RETURNING id;
-- => [(3,)]
CREATE TABLE tags (id serial PRIMARY KEY, tag text);
INSERT INTO tags (tag) VALUES ('x');
INSERT INTO tags (tag) VALUES ('y'), ('z');
SELECT id, tag FROM tags ORDER BY id;
-- => [(1, 'x'), (2, 'y'), (3, 'z')]
-- a bigserial id without PRIMARY KEY (pgvector-python's loading example)
CREATE TABLE loaded (id bigserial, embedding vector(3));
INSERT INTO loaded (embedding) VALUES ('[1,2,3]'), ('[4,5,6]');
SELECT id, embedding FROM loaded ORDER BY embedding <-> '[4,5,5]';
-- => [(2, [4.0, 5.0, 6.0]), (1, [1.0, 2.0, 3.0])]
