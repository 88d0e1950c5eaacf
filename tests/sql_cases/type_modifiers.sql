-- Type modifiers: vector(n), halfvec(n), bit(n), varchar(n), char(n), numeric(p, s),
-- timestamp(p) are checked as PostgreSQL and pgvector check them, with their limits
-- (22023), a modifier that is no int4 (22P02, 22003) or no constant (42601), and a
-- modifier on a type that takes none (42601).
CREATE EXTENSION IF NOT EXISTS vector;

-- pgvector: 1 to 16000 dimensions
CREATE TABLE v1 (id int PRIMARY KEY, v vector(99999999999));
-- !! 22003
CREATE TABLE v2 (id int PRIMARY KEY, v vector(-99999999999));
-- !! 22003
CREATE TABLE v3 (id int PRIMARY KEY, v vector(2147483648));
-- !! 22003
CREATE TABLE v4 (id int PRIMARY KEY, v vector(2147483647));
-- !! 22023
CREATE TABLE v5 (id int PRIMARY KEY, v vector(16001));
-- !! 22023
CREATE TABLE v6 (id int PRIMARY KEY, v vector(0));
-- !! 22023
CREATE TABLE v7 (id int PRIMARY KEY, v vector(-1));
-- !! 22023
CREATE TABLE v8 (id int PRIMARY KEY, v vector('a'));
-- !! 22P02
CREATE TABLE v9 (id int PRIMARY KEY, v vector(1.5));
-- !! 22P02
CREATE TABLE v10 (id int PRIMARY KEY, v vector(1e3));
-- !! 22P02
CREATE TABLE v11 (id int PRIMARY KEY, v vector(x));
-- !! 22P02
CREATE TABLE v12 (id int PRIMARY KEY, v vector(3, 4));
-- !! 22023
CREATE TABLE v13 (id int PRIMARY KEY, v vector(NULL));
-- !! 42601
CREATE TABLE v14 (id int PRIMARY KEY, v vector(+3));
-- !! 42601
CREATE TABLE v15 (id int PRIMARY KEY, v vector(true));
-- !! 42601
CREATE TABLE v16 (id int PRIMARY KEY, v vector(3 + 1));
-- !! 42601
CREATE TABLE h1 (id int PRIMARY KEY, v halfvec(16001));
-- !! 22023
CREATE TABLE h2 (id int PRIMARY KEY, v halfvec(0));
-- !! 22023
CREATE TABLE h3 (id int PRIMARY KEY, v halfvec(99999999999));
-- !! 22003

-- bit: 1 to 83886080 bits
CREATE TABLE b1 (id int PRIMARY KEY, v bit(83886081));
-- !! 22023
CREATE TABLE b2 (id int PRIMARY KEY, v bit(0));
-- !! 22023
CREATE TABLE b3 (id int PRIMARY KEY, v bit(99999999999));
-- !! 22003
CREATE TABLE b4 (id int PRIMARY KEY, v bit(3, 4));
-- !! 22023

-- varchar(n), char(n): 1 to 10485760 characters
CREATE TABLE c1 (id int PRIMARY KEY, v varchar(10485761));
-- !! 22023
CREATE TABLE c2 (id int PRIMARY KEY, v character varying(0));
-- !! 22023
CREATE TABLE c3 (id int PRIMARY KEY, v char(10485761));
-- !! 22023
CREATE TABLE c4 (id int PRIMARY KEY, v character(0));
-- !! 22023
CREATE TABLE c5 (id int PRIMARY KEY, v bpchar(10485761));
-- !! 22023
CREATE TABLE c6 (id int PRIMARY KEY, v varchar(99999999999));
-- !! 42601
CREATE TABLE c7 (id int PRIMARY KEY, v varchar('a'));
-- !! 42601

-- numeric(p, s), timestamp(p); no modifier on a type that takes none
CREATE TABLE n1 (id int PRIMARY KEY, v numeric(1001));
-- !! 22023
CREATE TABLE n2 (id int PRIMARY KEY, v numeric(10, 1001));
-- !! 22023
CREATE TABLE n3 (id int PRIMARY KEY, v numeric(1, 2, 3));
-- !! 22023
CREATE TABLE n4 (id int PRIMARY KEY, v timestamptz('a'));
-- !! 22P02
CREATE TABLE n5 (id int PRIMARY KEY, v timestamp(1, 2));
-- !! 42601
CREATE TABLE n6 (id int PRIMARY KEY, v text(3));
-- !! 42601
CREATE TABLE n7 (id int PRIMARY KEY, v int8(3));
-- !! 42601
CREATE TABLE n8 (id int PRIMARY KEY, v jsonb(2));
-- !! 42601
CREATE TABLE n9 (id int PRIMARY KEY, v bool(1));
-- !! 42601

-- the limits themselves, a quoted modifier and one with spaces are taken
CREATE TABLE ok (id int PRIMARY KEY, a vector(16000), b halfvec(16000), c vector('3'),
                 d vector(' 2 '), e bit(64), f varchar(10485760), g char(3),
                 h numeric(10, 2), i timestamp(3), j timestamptz(6));
INSERT INTO ok (id, c, d, f, g, h) VALUES (1, '[1,2,3]', '[4,5]', 'abc', 'xyz', 1.5);
SELECT id, c, d, f, g, h FROM ok;
-- => [(1, [1.0, 2.0, 3.0], [4.0, 5.0], 'abc', 'xyz', 1.5)]
INSERT INTO ok (id, c) VALUES (2, '[1,2]');
-- !! 22000
INSERT INTO ok (id, g) VALUES (3, 'abcd');
-- !! 22001

-- a cast's modifier is checked the same way
SELECT '[1,2]'::vector(99999999999);
-- !! 22003
SELECT '[1,2]'::vector(16001);
-- !! 22023
SELECT '[1,2]'::vector(0);
-- !! 22023
SELECT '[1,2]'::vector(1.5);
-- !! 22P02
SELECT '[1,2]'::halfvec(16001);
-- !! 22023
SELECT 'ab'::varchar(0);
-- !! 22023
SELECT '[1,2]'::vector(2);
-- => [([1.0, 2.0],)]
