-- CREATE / DROP / ALTER TABLE, each type the SQL layer maps onto a schema kind.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE everything (
    id bigint PRIMARY KEY,
    small smallint,
    medium int,
    large integer,
    big bigint,
    r real,
    d double precision,
    f float,
    flag boolean,
    name text,
    label varchar,
    doc json,
    docb jsonb,
    at timestamp,
    attz timestamptz,
    embedding vector(3),
    half halfvec(3)
);

INSERT INTO everything VALUES (1, 1, 2, 3, 4, 0.5, 0.25, 1.5, true, 'one', 'uno',
    '{"a": 1}', '{"b": [1, 2]}', '2026-11-30 12:00:00', '2026-11-30 12:00:00+00',
    '[1,2,3]', '[0.5,1,2]');
INSERT INTO everything (id) VALUES (2);
SELECT * FROM everything ORDER BY id;
-- => [(1, 1, 2, 3, 4, 0.5, 0.25, 1.5, True, 'one', 'uno', {'a': 1}, {'b': [1, 2]},
--      '2026-11-30 12:00:00+00:00', '2026-11-30 12:00:00+00:00', [1.0, 2.0, 3.0], [0.5, 1.0, 2.0]),
--     (2, None, None, None, None, None, None, None, None, None, None, None, None,
--      None, None, None, None)]

-- a table that exists
CREATE TABLE everything (id bigint PRIMARY KEY);
-- !! 42P07
CREATE TABLE IF NOT EXISTS everything (id bigint PRIMARY KEY);
SELECT count(*) FROM everything;
-- => [(2,)]

-- NOT NULL and DEFAULT
CREATE TABLE people (id bigint PRIMARY KEY, name text NOT NULL, age int DEFAULT 30,
                     active boolean NOT NULL DEFAULT true, city text DEFAULT 'Oslo');
INSERT INTO people (id, name) VALUES (1, 'ada');
INSERT INTO people (id, name, age, active, city) VALUES (2, 'bob', 41, false, NULL);
SELECT id, name, age, active, city FROM people ORDER BY id;
-- => [(1, 'ada', 30, True, 'Oslo'), (2, 'bob', 41, False, None)]
INSERT INTO people (id, age) VALUES (3, 20);
-- !! 23502

-- ALTER TABLE: ADD COLUMN (old rows read NULL, or the DEFAULT), RENAME COLUMN, DROP COLUMN
ALTER TABLE people ADD COLUMN score double precision;
ALTER TABLE people ADD COLUMN tier int DEFAULT 1;
SELECT id, score, tier FROM people ORDER BY id;
-- => [(1, None, 1), (2, None, 1)]
ALTER TABLE people RENAME COLUMN city TO town;
SELECT id, town FROM people ORDER BY id;
-- => [(1, 'Oslo'), (2, None)]
SELECT city FROM people;
-- !! 42703
ALTER TABLE people DROP COLUMN age;
SELECT * FROM people ORDER BY id;
-- => [(1, 'ada', True, 'Oslo', None, 1), (2, 'bob', False, None, None, 1)]
SELECT age FROM people;
-- !! 42703
ALTER TABLE people DROP COLUMN age;
-- !! 42703
ALTER TABLE people RENAME COLUMN nothing TO something;
-- !! 42703
ALTER TABLE people ADD COLUMN name text;
-- !! 42701
ALTER TABLE nowhere ADD COLUMN x int;
-- !! 42P01
-- SET STORAGE (pgvector's advice for exact scans): values are always inline here
ALTER TABLE people ALTER COLUMN town SET STORAGE PLAIN;
ALTER TABLE people ALTER COLUMN nothing SET STORAGE PLAIN;
-- !! 42703
SELECT id, town FROM people ORDER BY id;
-- => [(1, 'Oslo'), (2, None)]
-- ALTER EXTENSION vector UPDATE: the types are built in, nothing to update
ALTER EXTENSION vector UPDATE;
ALTER EXTENSION no_such_extension UPDATE;
-- !! 42704

-- DROP TABLE [IF EXISTS]
DROP TABLE people;
SELECT * FROM people;
-- !! 42P01
DROP TABLE people;
-- !! 42P01
DROP TABLE IF EXISTS people;
INSERT INTO nowhere VALUES (1);
-- !! 42P01

-- a dropped name can be made again, with another schema
CREATE TABLE people (id bigint PRIMARY KEY, nick text);
INSERT INTO people VALUES (7, 'x');
SELECT * FROM people;
-- => [(7, 'x')]

-- unknown type
CREATE TABLE bad (id bigint PRIMARY KEY, x notatype);
-- !! 42704
-- ALTER COLUMN ... TYPE of the type the column keeps its values as changes nothing
-- (varvedb's integers are 64-bit: int to bigint; text to varchar); the rows stay
CREATE TABLE retype (id int PRIMARY KEY, x int, t text, e vector(2));
INSERT INTO retype VALUES (1, 5, 'a', '[1,2]');
ALTER TABLE retype ALTER COLUMN x TYPE bigint, ALTER COLUMN t TYPE varchar,
    ALTER COLUMN e TYPE vector(2), ALTER COLUMN id TYPE bigint;
ALTER TABLE retype ALTER COLUMN x TYPE bigint USING x;
SELECT * FROM retype;
-- => [(1, 5, 'a', [1.0, 2.0])]
ALTER TABLE retype ALTER COLUMN nope TYPE bigint;
-- !! 42703
