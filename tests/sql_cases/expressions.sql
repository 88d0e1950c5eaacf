-- Expressions and clauses beyond the basics that docs/sql.md lists: CASE, coalesce, nullif,
-- ||, ILIKE, casts, json -> / ->>, text and math functions, count(DISTINCT), ORDER BY and
-- GROUP BY positions, scalar subqueries, INSERT ... SELECT, DEFAULT, DROP TABLE a, b.
CREATE TABLE pets (id bigint PRIMARY KEY, name text, kind text, age int, weight double precision,
                   tags jsonb, nick varchar(10));
INSERT INTO pets VALUES
    (1, 'Rex', 'dog', 3, 12.5, '{"color": "brown", "vet": {"city": "Oslo"}}', 'rexy'),
    (2, 'Tom', 'cat', 5, 4.25, '{"color": "grey"}', NULL),
    (3, 'Kiki', 'bird', 1, 0.5, NULL, 'kk'),
    (4, 'Bo', 'dog', NULL, 30, '{"color": "black", "n": 2}', 'bo'),
    (5, 'Mia', 'cat', 9, NULL, '[1, 2, 3]', 'mimi');

-- CASE, coalesce, nullif
SELECT id, CASE WHEN age < 4 THEN 'young' WHEN age < 8 THEN 'adult' ELSE 'old' END AS stage FROM pets ORDER BY id;
-- => [(1, 'young'), (2, 'adult'), (3, 'young'), (4, 'old'), (5, 'old')]
SELECT id, CASE kind WHEN 'dog' THEN 1 WHEN 'cat' THEN 2 END FROM pets ORDER BY id;
-- => [(1, 1), (2, 2), (3, None), (4, 1), (5, 2)]
SELECT id, coalesce(age, 0), coalesce(nick, name) AS shown FROM pets ORDER BY id;
-- => [(1, 3, 'rexy'), (2, 5, 'Tom'), (3, 1, 'kk'), (4, 0, 'bo'), (5, 9, 'mimi')]
SELECT id, nullif(kind, 'dog') FROM pets ORDER BY id;
-- => [(1, None), (2, 'cat'), (3, 'bird'), (4, None), (5, 'cat')]
-- ||, ILIKE, lower / upper / length
SELECT id, name || ' the ' || kind AS title FROM pets WHERE id <= 2 ORDER BY id;
-- => [(1, 'Rex the dog'), (2, 'Tom the cat')]
SELECT id, name || NULL FROM pets WHERE id = 1;
-- => [(1, None)]
-- || beside a type with no || of its own is text's (anytextcat / textanycat): that side's
-- text output; an untyped literal beside jsonb or bytea is read as that type, int || int has none
SELECT 'row ' || 5::bigint, 5 || 'x', 'x' || 1.5, 'x' || true, 'x' || NULL, 'a' || 1 || 2, 'ab' || -3;
-- => [('row 5', '5x', 'x1.5', 'xtrue', None, 'a12', 'ab-3')]
SELECT '{1}' || 2, 'x' || '2024-01-02 03:04:05+00'::timestamptz, 'x' || '{1:1}/3'::sparsevec, 'x' || 'NaN'::float8;
-- => [('{1}2', 'x2024-01-02 03:04:05+00', 'x{1:1}/3', 'xNaN')]
SELECT id, 'pet ' || id || ': ' || name || ' ' || age, weight || 'kg', name || tags, NULL || age, age || NULL::text
FROM pets WHERE id IN (2, 3) ORDER BY id;
-- => [(2, 'pet 2: Tom 5', '4.25kg', 'Tom{"color": "grey"}', None, None),
--     (3, 'pet 3: Kiki 1', '0.5kg', None, None, None)]
SELECT 'x' || tags FROM pets WHERE id = 1;
-- !! 22P02
SELECT 1 || 2;
-- !! 42883
SELECT NULL::int || age FROM pets;
-- !! 42883
SELECT id FROM pets WHERE name ILIKE 'r%' OR name ILIKE '%KI';
-- => [(1,), (3,)]
SELECT id FROM pets WHERE name NOT ILIKE '%o%';
-- => [(1,), (3,), (5,)]
-- POSIX regular expressions (unanchored), OPERATOR(pg_catalog.~) and COLLATE as psql writes them
SELECT id FROM pets WHERE name ~ '^[RT]' ORDER BY id;
-- => [(1,), (2,)]
SELECT id FROM pets WHERE name !~ 'i' ORDER BY id;
-- => [(1,), (2,), (4,)]
SELECT id FROM pets WHERE name ~* '^k(ik)*i$' OR name !~* '[aeiou]' ORDER BY id;
-- => [(3,)]
SELECT id FROM pets WHERE kind OPERATOR(pg_catalog.~) '^(dog|bird)$' COLLATE pg_catalog.default ORDER BY id;
-- => [(1,), (3,), (4,)]
SELECT id, nick ~ 'k' FROM pets WHERE id IN (2, 3) ORDER BY id;
-- => [(2, None), (3, True)]
SELECT name ~ '(' FROM pets;
-- !! 2201B
SELECT lower(name), upper(kind), length(name) FROM pets WHERE id = 3;
-- => [('kiki', 'BIRD', 4)]
-- math
SELECT abs(-3), abs(-2.5), sqrt(16), sqrt(2.25);
-- => [(3, 2.5, 4.0, 1.5)]
SELECT id, abs(age - 5) AS off FROM pets WHERE age IS NOT NULL ORDER BY off, id;
-- => [(2, 0), (1, 2), (3, 4), (5, 4)]
SELECT sqrt(-1);
-- !! 2201F
-- casts
SELECT '42'::int + 1, CAST('2.5' AS double precision) * 2, 7::text || '!', 3.75::int, true::int;
-- => [(43, 5.0, '7!', 4, 1)]
SELECT id, age::double precision / 2 FROM pets WHERE id IN (1, 2) ORDER BY id;
-- => [(1, 1.5), (2, 2.5)]
SELECT 'x'::int;
-- !! 22P02
-- json: -> gives json, ->> gives text
SELECT id, tags -> 'color', tags ->> 'color' FROM pets WHERE id IN (1, 2, 3) ORDER BY id;
-- => [(1, 'brown', 'brown'), (2, 'grey', 'grey'), (3, None, None)]
SELECT id, tags -> 'vet' ->> 'city' FROM pets WHERE id = 1;
-- => [(1, 'Oslo')]
SELECT id, tags -> 1 FROM pets WHERE id = 5;
-- => [(5, 2)]
SELECT id FROM pets WHERE tags ->> 'color' = 'grey';
-- => [(2,)]

-- count(DISTINCT), ORDER BY / GROUP BY by position and by output name
SELECT count(DISTINCT kind), count(kind), count(DISTINCT age) FROM pets;
-- => [(3, 5, 4)]
SELECT kind, count(*) FROM pets GROUP BY 1 ORDER BY 2 DESC, 1;
-- => [('cat', 2), ('dog', 2), ('bird', 1)]
SELECT kind AS k, max(age) AS oldest FROM pets GROUP BY k ORDER BY oldest DESC NULLS LAST;
-- => [('cat', 9), ('dog', 3), ('bird', 1)]
SELECT name, age FROM pets ORDER BY 2 NULLS FIRST, 1;
-- => [('Bo', None), ('Kiki', 1), ('Rex', 3), ('Tom', 5), ('Mia', 9)]
SELECT name FROM pets ORDER BY 3;
-- !! 42P10

-- scalar subqueries
SELECT id, name FROM pets WHERE age = (SELECT max(age) FROM pets);
-- => [(5, 'Mia')]
SELECT (SELECT count(*) FROM pets WHERE kind = 'dog') AS dogs, (SELECT min(weight) FROM pets) AS lightest;
-- => [(2, 0.5)]
SELECT id FROM pets WHERE weight > (SELECT avg(weight) FROM pets) ORDER BY id;
-- => [(1,), (4,)]

-- INSERT ... SELECT, DEFAULT
CREATE TABLE old_pets (id bigint PRIMARY KEY, name text, age int DEFAULT 1);
INSERT INTO old_pets SELECT id, name, age FROM pets WHERE age >= 5;
INSERT INTO old_pets (id, name) SELECT id + 100, upper(name) FROM pets WHERE kind = 'bird' RETURNING *;
-- => [(103, 'KIKI', 1)]
INSERT INTO old_pets VALUES (50, 'Zed', DEFAULT);
SELECT * FROM old_pets ORDER BY id;
-- => [(2, 'Tom', 5), (5, 'Mia', 9), (50, 'Zed', 1), (103, 'KIKI', 1)]
INSERT INTO old_pets SELECT id, name, age FROM pets WHERE id = 2;
-- !! 23505

-- DROP TABLE of several
CREATE TABLE t1 (id bigint PRIMARY KEY);
CREATE TABLE t2 (id bigint PRIMARY KEY);
DROP TABLE t1, t2;
SELECT * FROM t1;
-- !! 42P01
DROP TABLE IF EXISTS t1, old_pets;
SELECT * FROM old_pets;
-- !! 42P01

-- syntax errors
SELEC 1;
-- !! 42601
SELECT id FROM pets WHERE;
-- !! 42601

-- varchar(n) holds at most n characters
CREATE TABLE codes (id bigint PRIMARY KEY, code varchar(3));
INSERT INTO codes VALUES (1, 'abc');
INSERT INTO codes VALUES (2, 'abcd');
-- !! 22001
SELECT id, code FROM codes;
-- => [(1, 'abc')]

-- a float8 as text: the shortest digits that read back, in exponent form from 1e15 or below 1e-4
SELECT 1e15::float8::text, 0.1::float8::text, 1e-5::float8::text, 123456.5::float8::text, (-2.5)::float8::text;
-- => [('1e+15', '0.1', '1e-05', '123456.5', '-2.5')]

-- round: halves away from zero (numeric's), to a scale of the value's shortest decimal; ceil, floor, trunc
SELECT round(2.5), round(-2.5), round(2.675, 2), round(5), round(1234.5678, -2), round(12.345, 1), round(NULL::float8);
-- => [(3, -3, 2.68, 5, 1200, 12.3, None)]
SELECT ceil(2.1), floor(-2.1), trunc(-2.7), ceiling(3), round(100.0 * 3 / nullif(7, 0), 1);
-- => [(3, -3, -2, 3, 42.9)]
SELECT round(0.49999999999999994), 0.49999999999999994::int, (-0.49999999999999994)::bigint, 2.5::int, (-2.5)::int;
-- => [(0, 0, 0, 3, -3)]
SELECT round('x');
-- !! 22P02
SELECT round('x'::text);
-- !! 42883

-- a text or json text cast to a number where some rows are NULL: those rows NULL
CREATE TABLE docs (id bigint PRIMARY KEY, s text, meta jsonb);
INSERT INTO docs VALUES (1, '2024', '{"year": "2024"}'), (2, NULL, '{}'), (3, '7', '{"year": "1999"}');
SELECT id, (meta->>'year')::int, s::bigint FROM docs ORDER BY id;
-- => [(1, 2024, 2024), (2, None, None), (3, 1999, 7)]
SELECT id FROM docs WHERE (meta->>'year')::int > 2000;
-- => [(1,)]
-- a function given the wrong number of arguments does not exist
SELECT lower('a', 'b');
-- !! 42883
SELECT abs();
-- !! 42883
SELECT quote_ident(5);
-- !! 42883
-- a float8 cast to an integer rounds halves to even (rint); a numeric literal, away from zero
CREATE TABLE halves (id bigint PRIMARY KEY, x double precision);
INSERT INTO halves VALUES (1, 0.5), (2, 1.5), (3, 2.5), (4, -2.5), (5, 3.7), (6, -0.5);
SELECT id, x::int, x::bigint, CAST(x AS integer) FROM halves ORDER BY id;
-- => [(1, 0, 0, 0), (2, 2, 2, 2), (3, 2, 2, 2), (4, -2, -2, -2), (5, 4, 4, 4), (6, 0, 0, 0)]
SELECT 2.5::float8::int, 0.5::float8::bigint, (-2.5)::float8::int, 2.5::int, (-2.5)::int, (1.5 + 1)::int;
-- => [(2, 0, -2, 3, -3, 3)]
SELECT id FROM halves WHERE x::int = 2 ORDER BY id;
-- => [(2,), (3,)]
-- jsonb keeps a number as numeric writes it, never in exponent form: a float8's
-- shortest digits (123456789012345680), -0 as 0; a jsonb's text, ->> and #>> alike
SELECT to_jsonb(1e-7::float8)::text, to_jsonb(1.5e-5::float8)::text,
    to_jsonb(123456789012345678::float8)::text, to_jsonb(1e15::float8)::text,
    to_jsonb(1e20::float8)::text, to_jsonb(-0.0::float8)::text, to_jsonb(0.1::float4)::text,
    to_jsonb(-1.5e-10::float8)::text;
-- => [('0.0000001', '0.000015', '123456789012345680', '1000000000000000',
--      '100000000000000000000', '0', '0.1', '-0.00000000015')]
SELECT '{"a": 1e-7, "b": "é", "c": [2.5, -2e-5, 1e21]}'::jsonb::text,
    '{"a": 1e-7}'::jsonb ->> 'a', '{"a": {"b": 2.5e-9, "c": "é"}}'::jsonb ->> 'a',
    to_jsonb(ARRAY[1e-7::float8, 3]) ->> 0;
-- => [('{"a": 0.0000001, "b": "é", "c": [2.5, -0.00002, 1000000000000000000000]}',
--      '0.0000001', '{"b": 0.0000000025, "c": "é"}', '0.0000001')]
-- a regclass as text is the relation's name (its key's, its index's, a catalog's)
CREATE TABLE rc (id int PRIMARY KEY, e vector(2));
CREATE INDEX ON rc USING hnsw (e vector_l2_ops);
SELECT 'rc'::regclass::text, '"rc"'::regclass::text, 'rc_pkey'::regclass::text,
    'rc_e_idx'::regclass::text, 'pg_class'::regclass::text, NULL::regclass::text;
-- => [('rc', 'rc', 'rc_pkey', 'rc_e_idx', 'pg_class', None)]
SELECT 'rc'::regclass::text = 'rc', ('rc'::regclass)::varchar;
-- => [(True, 'rc')]
SELECT 'nope'::regclass::text;
-- !! 42P01
