-- bytea: the hex and escape input forms and their errors, hex output (bytea_output's
-- default), NULL, =, <>, ORDER BY (bytewise, a prefix first), length / octet_length,
-- ||, casts to and from text, a DEFAULT, writes, and the type errors PostgreSQL raises.
CREATE TABLE files (id bigint PRIMARY KEY, data bytea, name text);
INSERT INTO files VALUES (1, '\x0102ff', 'a'), (2, 'abc', 'b'), (3, NULL, 'c'),
    (4, '\x', 'd'), (5, 'a\\b\001', 'e'), (6, '\x 61 62', 'f');
SELECT id, data FROM files ORDER BY id;
-- => [(1, b'\x01\x02\xff'), (2, b'abc'), (3, None), (4, b''), (5, b'a\\b\x01'), (6, b'ab')]
SELECT id, data::text FROM files ORDER BY id;
-- => [(1, '\\x0102ff'), (2, '\\x616263'), (3, None), (4, '\\x'), (5, '\\x615c6201'),
--     (6, '\\x6162')]
SELECT id FROM files WHERE data = '\x616263';
-- => [(2,)]
SELECT id FROM files WHERE data = 'abc'::bytea;
-- => [(2,)]
SELECT id FROM files WHERE data <> 'abc' ORDER BY id;
-- => [(1,), (4,), (5,), (6,)]
SELECT id FROM files WHERE data > 'ab' ORDER BY id;
-- => [(2,)]
SELECT id FROM files WHERE data IS NULL;
-- => [(3,)]
SELECT id, length(data), octet_length(data) FROM files ORDER BY id;
-- => [(1, 3, 3), (2, 3, 3), (3, None, None), (4, 0, 0), (5, 4, 4), (6, 2, 2)]
SELECT id FROM files ORDER BY data, id;
-- => [(4,), (1,), (5,), (6,), (2,), (3,)]
SELECT id FROM files ORDER BY data DESC LIMIT 3;
-- => [(3,), (2,), (6,)]
SELECT data || '\x00' FROM files WHERE id = 2;
-- => [(b'abc\x00',)]
SELECT count(DISTINCT data) FROM files;
-- => [(5,)]
SELECT 'abc'::bytea, '\x00ff'::bytea::text, 'abc'::text::bytea, octet_length('é');
-- => [(b'abc', '\\x00ff', b'abc', 2)]
SELECT 'é'::bytea;
-- => [(b'\xc3\xa9',)]
SELECT NULL::bytea IS NULL;
-- => [(True,)]
UPDATE files SET data = '\xdead' WHERE id = 3;
SELECT data FROM files WHERE id = 3;
-- => [(b'\xde\xad',)]
DELETE FROM files WHERE data = '\x';
SELECT count(*) FROM files;
-- => [(5,)]
INSERT INTO files VALUES (7, '\x00', 'g') RETURNING data;
-- => [(b'\x00',)]
CREATE TABLE blobs (id bigint PRIMARY KEY, b bytea NOT NULL DEFAULT '\x0a0b');
INSERT INTO blobs (id) VALUES (1);
SELECT b FROM blobs;
-- => [(b'\n\x0b',)]
-- the errors: PostgreSQL's SQLSTATEs
SELECT '\xzz'::bytea;
-- !! 22023
SELECT '\x123'::bytea;
-- !! 22023
SELECT 'a\b'::bytea;
-- !! 22P02
SELECT '\X00'::bytea;
-- !! 22P02
SELECT 'a\400'::bytea;
-- !! 22P02
INSERT INTO files VALUES (8, 42, 'h');
-- !! 42804
INSERT INTO files VALUES (8, 'x'::text, 'h');
-- !! 42804
INSERT INTO blobs VALUES (2, NULL);
-- !! 23502
SELECT id FROM files WHERE data = 1;
-- !! 42883
SELECT id FROM files WHERE data = name;
-- !! 42883
SELECT 1.5::bytea;
-- !! 42846
SELECT data + 1 FROM files;
-- !! 42883
-- the output setting: hex, PostgreSQL's default (a client may set it so)
SHOW bytea_output;
-- => [('hex',)]
SET bytea_output = 'hex';
SET bytea_output TO DEFAULT;
SELECT '\x01'::bytea::text;
-- => [('\\x01',)]
-- max(bytea) and min(bytea)
SELECT max(data), min(data) FROM files;
-- => [(b'\xde\xad', b'\x00')]
