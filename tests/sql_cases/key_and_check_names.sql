-- The primary key's name gives way to a CHECK of the table that has it: a CHECK named
-- t_pkey makes the key t_pkey1 (t_pkey2 where that is a CHECK's too), and DROP
-- CONSTRAINT t_pkey drops the CHECK, not the key.
-- ADD COLUMN ... CHECK that reads another column adds the column and the CHECK, checked
-- on the rows so far. (contype 'p' and 'c': PostgreSQL 18 lists NOT NULL ones too.)
CREATE TABLE t (id int PRIMARY KEY, x int, CONSTRAINT t_pkey CHECK (x > 0));
SELECT conname, contype FROM pg_constraint WHERE conrelid = 't'::regclass
    AND contype IN ('p', 'c') ORDER BY conname;
-- => [('t_pkey', 'c'), ('t_pkey1', 'p')]
ALTER TABLE t ADD CONSTRAINT t_pkey1 CHECK (x > 1);
-- !! 42710
INSERT INTO t VALUES (1, -5);
-- !! 23514
ALTER TABLE t DROP CONSTRAINT t_pkey;
INSERT INTO t VALUES (1, -5);
-- the key keeps the name it was given (it was t_pkey again once the CHECK was gone)
SELECT conname, contype FROM pg_constraint WHERE conrelid = 't'::regclass
    AND contype IN ('p', 'c') ORDER BY conname;
-- => [('t_pkey1', 'p')]
SELECT relname FROM pg_class WHERE relname LIKE 't\_%' AND pg_table_is_visible(oid) ORDER BY 1;
-- => [('t_pkey1',)]
-- a key's name is none of the schema's relations and constraints: another table's,
-- an index's, another table's CHECK; a table's name is no index's either (42P07)
CREATE TABLE u_pkey (id int PRIMARY KEY);
CREATE TABLE u (id int PRIMARY KEY);
CREATE TABLE a (id int PRIMARY KEY, x int CONSTRAINT v_pkey CHECK (x > 0));
CREATE TABLE v (id int PRIMARY KEY);
CREATE TABLE b (id int PRIMARY KEY, e vector(2));
CREATE INDEX k_pkey ON b USING hnsw (e vector_l2_ops);
CREATE TABLE k (id bigserial PRIMARY KEY, x int);
-- (this file's tables only: the PostgreSQL these cases run on is shared with other tests)
SELECT conrelid::regclass::text, conname FROM pg_constraint
    WHERE contype = 'p' AND pg_table_is_visible(conrelid)
      AND conrelid::regclass::text IN ('a', 'b', 'k', 't', 'u', 'u_pkey', 'v') ORDER BY 2;
-- => [('a', 'a_pkey'), ('b', 'b_pkey'), ('k', 'k_pkey1'), ('t', 't_pkey1'),
--     ('u', 'u_pkey1'), ('u_pkey', 'u_pkey_pkey'), ('v', 'v_pkey1')]
ALTER TABLE k ADD CONSTRAINT k_pkey1 CHECK (x > 0);
-- !! 42710
CREATE TABLE k_pkey1 (x int);
-- !! 42P07
CREATE TABLE b_pkey (x int);
-- !! 42P07
CREATE TABLE k_id_seq (x int);
-- !! 42P07
CREATE TABLE IF NOT EXISTS k_pkey (x int);
SELECT relname, relkind FROM pg_class WHERE relname = 'k_pkey' AND pg_table_is_visible(oid);
-- => [('k_pkey', 'i')]
CREATE TABLE w (id int PRIMARY KEY, x int CHECK (x > 0), CONSTRAINT w_pkey1 CHECK (x > 1),
    CONSTRAINT w_pkey CHECK (x > 2));
SELECT conname, contype FROM pg_constraint WHERE conrelid = 'w'::regclass
    AND contype IN ('p', 'c') ORDER BY conname;
-- => [('w_pkey', 'c'), ('w_pkey1', 'c'), ('w_pkey2', 'p'), ('w_x_check', 'c')]
CREATE TABLE z (id int PRIMARY KEY, x int);
ALTER TABLE z ADD CONSTRAINT z_pkey CHECK (x > 0);
-- !! 42710
INSERT INTO z VALUES (1, 5);
ALTER TABLE z ADD COLUMN y int CHECK (x > 0);
ALTER TABLE z ADD COLUMN u int CHECK (x > 0 AND u > 0), ADD COLUMN v int CHECK (v > 0);
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'z'::regclass
    AND contype = 'c' ORDER BY conname;
-- => [('z_check', 'CHECK (((x > 0) AND (u > 0)))'), ('z_v_check', 'CHECK ((v > 0))'),
--     ('z_x_check', 'CHECK ((x > 0))')]
INSERT INTO z (id, x) VALUES (2, -1);
-- !! 23514
ALTER TABLE z ADD COLUMN q int CHECK (x > 9);
-- !! 23514
ALTER TABLE z ADD COLUMN q int CONSTRAINT z_x_check CHECK (x > 0);
-- !! 42710
SELECT count(*) FROM pg_attribute WHERE attrelid = 'z'::regclass AND attname = 'q';
-- => [(0,)]
-- to_json of an untyped literal: which type's JSON is it? (42804)
SELECT to_json('abc');
-- !! 42804
SELECT to_jsonb('abc');
-- !! 42804
SELECT to_json(NULL);
-- !! 42804
SELECT to_jsonb(NULL::int), to_json(CASE WHEN false THEN 1 END);
-- => [(None, None)]
SELECT to_json('abc'::text), to_jsonb(1);
-- => [('abc', 1)]
-- an index's name is none of the schema's relations either: a default one a table has
-- takes the next free (ib_e_idx1), a given one a relation has is 42P07
CREATE TABLE ib (id int PRIMARY KEY, e vector(2), x int, y int);
CREATE TABLE ib_e_idx (x int);
CREATE TABLE ib_x_idx (x int);
CREATE INDEX ON ib USING hnsw (e vector_l2_ops);
CREATE INDEX ON ib USING hnsw (e vector_cosine_ops);
CREATE INDEX ON ib (x);
CREATE INDEX ON ib (y);
CREATE INDEX ib_pkey ON ib (y);
-- !! 42P07
CREATE INDEX ib_x_idx ON ib (y);
-- !! 42P07
CREATE INDEX ib_x_idx1 ON ib (y);
-- !! 42P07
SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'ib'::regclass ORDER BY 1;
-- => [('ib_e_idx1',), ('ib_e_idx2',), ('ib_pkey',), ('ib_x_idx1',), ('ib_y_idx',)]
CREATE TABLE ic (id int PRIMARY KEY, e vector(2));
CREATE INDEX ON ic USING hnsw ((binary_quantize(e)::bit(2)) bit_hamming_ops);
CREATE TABLE ic_binary_quantize_idx1 (x int);
CREATE INDEX ON ic USING hnsw ((binary_quantize(e)::bit(2)) bit_hamming_ops);
SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'ic'::regclass ORDER BY 1;
-- => [('ic_binary_quantize_idx',), ('ic_binary_quantize_idx2',), ('ic_pkey',)]
