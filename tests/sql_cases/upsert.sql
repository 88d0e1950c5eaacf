-- INSERT ... ON CONFLICT (id) DO UPDATE SET: only the columns SET names change (the
-- merge upsert() makes); EXCLUDED is the proposed row with its defaults; a proposed
-- row is checked (NOT NULL) before its conflict is; a row twice in one statement.
CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int DEFAULT 0,
                    price double precision, note text DEFAULT 'none', embedding vector(3));
INSERT INTO items VALUES (1, 'apple', 3, 0.5, 'red', '[1,0,0]'),
                         (2, 'pear', 5, 0.75, 'green', '[0,1,0]');

-- the columns SET does not name are kept, the vector too
INSERT INTO items (id, name) VALUES (2, 'pear2') ON CONFLICT (id) DO UPDATE
    SET name = EXCLUDED.name RETURNING id, name, qty, price, note, embedding;
-- => [(2, 'pear2', 5, 0.75, 'green', [0.0, 1.0, 0.0])]

-- EXCLUDED.col of a column the INSERT leaves out is the column's default (or NULL)
INSERT INTO items (id, name) VALUES (1, 'apple') ON CONFLICT (id) DO UPDATE
    SET qty = EXCLUDED.qty, note = EXCLUDED.note, price = EXCLUDED.price
    RETURNING id, name, qty, price, note;
-- => [(1, 'apple', 0, None, 'none')]

-- SET reads the existing row by the table's name, EXCLUDED the proposed one
INSERT INTO items (id, name, qty) VALUES (2, 'x', 4) ON CONFLICT (id) DO UPDATE
    SET qty = items.qty + EXCLUDED.qty, name = items.name || '+' RETURNING id, name, qty;
-- => [(2, 'pear2+', 9)]
-- unqualified, a column is both: refused before anything runs (a new id too)
INSERT INTO items (id, name, qty) VALUES (2, 'x', 4), (12, 'n', 1) ON CONFLICT (id)
    DO UPDATE SET qty = qty + 1;
-- !! 42702
INSERT INTO items (id, name) VALUES (2, 'x') ON CONFLICT (id) DO UPDATE SET qty = nope + 1;
-- !! 42703
INSERT INTO items (id, name) VALUES (13, 'x') ON CONFLICT (id) DO UPDATE SET qty = nope + 1;
-- !! 42703

-- SET col = DEFAULT
INSERT INTO items (id, name) VALUES (2, 'y') ON CONFLICT (id) DO UPDATE
    SET note = DEFAULT, qty = DEFAULT RETURNING note, qty;
-- => [('none', 0)]

-- a new id and a conflicting one in one statement, in the order given
INSERT INTO items (id, name, qty) VALUES (3, 'fig', 1), (1, 'apple!', 2)
    ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name RETURNING id, name, qty;
-- => [(3, 'fig', 1), (1, 'apple!', 0)]

-- the proposed row is checked first: NOT NULL broken by it is refused though it conflicts
INSERT INTO items (id, qty) VALUES (1, 5) ON CONFLICT (id) DO UPDATE SET qty = EXCLUDED.qty;
-- !! 23502
INSERT INTO items (id, qty) VALUES (1, 5) ON CONFLICT (id) DO NOTHING;
-- !! 23502
INSERT INTO items (id, name) VALUES (1, NULL) ON CONFLICT (id) DO UPDATE SET qty = 7;
-- !! 23502

-- the SET's own value must keep NOT NULL
INSERT INTO items (id, name) VALUES (1, 'z') ON CONFLICT (id) DO UPDATE SET name = NULL;
-- !! 23502

-- a row twice in one statement: DO UPDATE refuses it, DO NOTHING keeps the first
INSERT INTO items (id, name) VALUES (10, 'a'), (10, 'b') ON CONFLICT (id) DO UPDATE
    SET name = EXCLUDED.name;
-- !! 21000
INSERT INTO items (id, name) VALUES (11, 'a'), (11, 'b') ON CONFLICT (id) DO NOTHING
    RETURNING id, name;
-- => [(11, 'a')]

-- nothing the refused statements proposed was written
SELECT id, name, qty, price, note, embedding FROM items ORDER BY id;
-- => [(1, 'apple!', 0, None, 'none', [1.0, 0.0, 0.0]),
--     (2, 'pear2+', 0, 0.75, 'none', [0.0, 1.0, 0.0]), (3, 'fig', 1, None, 'none', None),
--     (11, 'a', 0, None, 'none', None)]
