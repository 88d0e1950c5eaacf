-- CHECK constraints: on a column, and a table's CHECK that is an AND of conditions each
-- on one column (what varvedb keeps: comparisons with constants, IS [NOT] NULL), enforced
-- on INSERT, UPDATE, ON CONFLICT DO UPDATE and ADD COLUMN (23514); a NULL passes.
CREATE TABLE p (id bigint PRIMARY KEY, price float CHECK (price > 0), code text, n int,
    CHECK (n >= 0 AND n < 10 AND code <> 'x'));
INSERT INTO p VALUES (1, 2.5, 'a', 3);
INSERT INTO p VALUES (2, -1, 'a', 3);
-- !! 23514
INSERT INTO p VALUES (2, 0, 'a', 3);
-- !! 23514
INSERT INTO p VALUES (3, NULL, NULL, NULL);
INSERT INTO p VALUES (4, 1, 'x', 3);
-- !! 23514
INSERT INTO p VALUES (4, 1, 'y', 10);
-- !! 23514
INSERT INTO p VALUES (4, 1, 'y', 9), (5, 1, 'y', -1);
-- !! 23514
UPDATE p SET n = 10 WHERE id = 1;
-- !! 23514
UPDATE p SET n = 9 WHERE id = 1;
UPDATE p SET price = price - 10;
-- !! 23514
INSERT INTO p (id) VALUES (5);
INSERT INTO p VALUES (1, -5, 'b', 1) ON CONFLICT (id) DO UPDATE SET price = excluded.price;
-- !! 23514
INSERT INTO p VALUES (1, 5, 'b', 1) ON CONFLICT (id) DO UPDATE SET price = excluded.price;
SELECT * FROM p ORDER BY id;
-- => [(1, 5.0, 'a', 9), (3, None, None, None), (5, None, None, None)]
ALTER TABLE p ADD COLUMN q int DEFAULT -1 CHECK (q >= 0);
-- !! 23514
ALTER TABLE p ADD COLUMN q int DEFAULT 1 CHECK (q >= 0);
INSERT INTO p (id, q) VALUES (6, -2);
-- !! 23514
SELECT id, q FROM p ORDER BY id;
-- => [(1, 1), (3, 1), (5, 1)]
CREATE TABLE r (id bigint PRIMARY KEY, flag bool CHECK (flag IS NOT NULL));
INSERT INTO r VALUES (1, true);
INSERT INTO r VALUES (2, NULL);
-- !! 23514
SELECT * FROM r;
-- => [(1, True)]
-- a float's CHECK in PostgreSQL's float8 order: NaN equals NaN and is above every number
-- (red-team 8 F05)
CREATE TABLE k (id bigint PRIMARY KEY, f float8 CHECK (f > 0), g float8 CHECK (g < 1),
    h float8 CHECK (h <> 2));
INSERT INTO k VALUES (1, 'NaN', 0, 'NaN');
INSERT INTO k VALUES (2, 1, 'NaN', 0);
-- !! 23514
INSERT INTO k VALUES (3, 'Infinity', '-Infinity', 0);
UPDATE k SET f = 'NaN', h = 'NaN' WHERE id = 3;
SELECT id, f::text FROM k ORDER BY id;
-- => [(1, 'NaN'), (3, 'NaN')]
-- ADD COLUMN's CHECK is tested on the rows there are: none once all are deleted; the
-- next row is checked (red-team 8 F14)
CREATE TABLE gone (id bigint PRIMARY KEY, n int);
INSERT INTO gone VALUES (1, 1), (2, 2);
DELETE FROM gone;
ALTER TABLE gone ADD COLUMN w int CHECK (w IS NOT NULL);
INSERT INTO gone (id, n) VALUES (3, 3);
-- !! 23514
INSERT INTO gone VALUES (3, 3, 1);
SELECT * FROM gone;
-- => [(3, 3, 1)]
-- the catalog shows each field's CHECK, as SQLAlchemy's reflection reads it (red-team 8 F12)
CREATE TABLE cat (id bigint PRIMARY KEY, n int CHECK (n > 0), m int CHECK (m IS NOT NULL));
SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = 'cat'::regclass AND contype IN ('c', 'p') ORDER BY conname;
-- => [('cat_m_check', 'c', 'CHECK ((m IS NOT NULL))'), ('cat_n_check', 'c', 'CHECK ((n > 0))'),
--     ('cat_pkey', 'p', 'PRIMARY KEY (id)')]
SELECT a.attname FROM pg_constraint c
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
    WHERE c.conrelid = 'cat'::regclass AND c.contype = 'c' ORDER BY 1;
-- => [('m',), ('n',)]
SELECT opcname, amname FROM pg_opclass o JOIN pg_am a ON a.oid = o.opcmethod
    WHERE amname IN ('hnsw', 'ivfflat') ORDER BY 2, 1;
-- a CHECK of a vector's dimension (pgvector's README: ALTER TABLE items ADD CHECK
-- (vector_dims(embedding::vector) = 3)): every vector of a vector(n) or halfvec(n)
-- column has n dimensions, so it holds for a row or, where n makes it false, for a
-- NULL alone; checked against the rows there are when added
CREATE TABLE dims (id bigint PRIMARY KEY, embedding vector(3), h halfvec(2));
INSERT INTO dims VALUES (1, '[1,2,3]', NULL), (2, NULL, NULL);
ALTER TABLE dims ADD CHECK (vector_dims(embedding::vector) = 3);
ALTER TABLE dims ADD CHECK (vector_dims(embedding) < 3);
-- !! 23514
ALTER TABLE dims ADD CHECK (4 = vector_dims(h));
INSERT INTO dims VALUES (3, '[4,5,6]', NULL);
INSERT INTO dims VALUES (4, '[4,5,6]', '[1,2]');
-- !! 23514
UPDATE dims SET h = '[1,2]' WHERE id = 3;
-- !! 23514
-- pgvector has no vector_dims(bit)
CREATE TABLE dbit (id bigint PRIMARY KEY, b bit(3) CHECK (vector_dims(b) = 3));
-- !! 42883
CREATE TABLE dims2 (id bigint PRIMARY KEY, e vector(2) CHECK (vector_dims(e) >= 2 AND vector_dims(e) <> 5));
INSERT INTO dims2 VALUES (1, '[1,2]');
SELECT id FROM dims ORDER BY id;
-- => [(1,), (2,), (3,)]
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid = 'dims2'::regclass AND contype = 'c';
-- => [('dims2_e_check', 'CHECK (((vector_dims(e) >= 2) AND (vector_dims(e) <> 5)))')]
-- pg_get_constraintdef and psql's \d show a CHECK as it was written: a constant first
-- stays first, a cast of the column in vector_dims stays (a halfvec's and a vector's)
CREATE TABLE written (id bigint PRIMARY KEY, h halfvec(3), e vector(3), x int, f float8,
    t text, CHECK (vector_dims(h::vector) = 3), CHECK (3 = vector_dims(h)),
    CHECK (2 < vector_dims(e::halfvec)), CHECK (vector_dims(e::vector) <= 3),
    CHECK (0 < x), CHECK (1.5 <= f), CHECK ('a' <> t), CHECK (-1 < x AND x < 9));
SELECT conname, pg_get_constraintdef(oid), pg_get_constraintdef(oid, true) FROM pg_constraint
    WHERE conrelid = 'written'::regclass AND contype = 'c' ORDER BY conname;
-- => [('written_e_check', 'CHECK ((2 < vector_dims((e)::halfvec)))',
--      'CHECK (2 < vector_dims(e::halfvec))'),
--     ('written_e_check1', 'CHECK ((vector_dims((e)::vector) <= 3))',
--      'CHECK (vector_dims(e::vector) <= 3)'),
--     ('written_f_check', 'CHECK (((1.5)::double precision <= f))',
--      'CHECK (1.5::double precision <= f)'),
--     ('written_h_check', 'CHECK ((vector_dims((h)::vector) = 3))',
--      'CHECK (vector_dims(h::vector) = 3)'),
--     ('written_h_check1', 'CHECK ((3 = vector_dims(h)))', 'CHECK (3 = vector_dims(h))'),
--     ('written_t_check', "CHECK (('a'::text <> t))", "CHECK ('a'::text <> t)"),
--     ('written_x_check', 'CHECK ((0 < x))', 'CHECK (0 < x)'),
--     ('written_x_check1', 'CHECK (((\'-1\'::integer < x) AND (x < 9)))',
--      "CHECK ('-1'::integer < x AND x < 9)")]
INSERT INTO written (id, x) VALUES (1, 0);
-- !! 23514
INSERT INTO written (id, f) VALUES (1, 1.0);
-- !! 23514
INSERT INTO written (id, t) VALUES (1, 'a');
-- !! 23514
INSERT INTO written (id, x, f, t) VALUES (1, 1, 1.5, 'b');
-- a constant wider than 64 bits: PostgreSQL compares as numeric (every bigint is below
-- 99999999999999999999), a float8 column's as float8; shown as PostgreSQL shows it
CREATE TABLE wide (id bigint PRIMARY KEY, x bigint CHECK (x < 99999999999999999999),
    y bigint CHECK (y > -99999999999999999999), z bigint CHECK (99999999999999999999 > z),
    w bigint CHECK (w <> 9223372036854775808), f float8 CHECK (f < 99999999999999999999));
SELECT conname, pg_get_constraintdef(oid), pg_get_constraintdef(oid, true) FROM pg_constraint
    WHERE conrelid = 'wide'::regclass AND contype = 'c' ORDER BY conname;
-- => [('wide_f_check', "CHECK ((f < ('99999999999999999999'::numeric)::double precision))",
--      "CHECK (f < '99999999999999999999'::numeric::double precision)"),
--     ('wide_w_check', "CHECK (((w)::numeric <> '9223372036854775808'::numeric))",
--      "CHECK (w::numeric <> '9223372036854775808'::numeric)"),
--     ('wide_x_check', "CHECK (((x)::numeric < '99999999999999999999'::numeric))",
--      "CHECK (x::numeric < '99999999999999999999'::numeric)"),
--     ('wide_y_check', "CHECK (((y)::numeric > '-99999999999999999999'::numeric))",
--      "CHECK (y::numeric > '-99999999999999999999'::numeric)"),
--     ('wide_z_check', "CHECK (('99999999999999999999'::numeric > (z)::numeric))",
--      "CHECK ('99999999999999999999'::numeric > z::numeric)")]
INSERT INTO wide VALUES (1, 9223372036854775807, -9223372036854775808, 5, 9223372036854775807,
    1e19);
INSERT INTO wide (id, f) VALUES (2, 1e21);
-- !! 23514
CREATE TABLE wide2 (id bigint PRIMARY KEY, x bigint CHECK (x > 99999999999999999999),
    y bigint CHECK (y = -9223372036854775809));
INSERT INTO wide2 VALUES (1, 5, NULL);
-- !! 23514
INSERT INTO wide2 VALUES (1, NULL, 5);
-- !! 23514
INSERT INTO wide2 VALUES (1, NULL, NULL);
ALTER TABLE wide ADD CHECK (x >= 99999999999999999999);
-- !! 23514
ALTER TABLE wide ADD CHECK (x <= 99999999999999999999);
SELECT count(*) FROM pg_constraint WHERE conrelid = 'wide'::regclass AND contype = 'c';
-- => [(6,)]
