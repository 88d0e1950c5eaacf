-- Set-returning functions in a select list (unnest, generate_subscripts,
-- generate_series), as PostgreSQL 10+ evaluates them: each row repeated as often as
-- its longest function yields, the functions side by side, a shorter one NULL past
-- its end; a NULL argument yields nothing. And the aggregates SQLAlchemy's
-- reflection calls: array_agg(x ORDER BY y), bool_and / bool_or, json_build_object and
-- current_setting().
CREATE TABLE parts (id bigint PRIMARY KEY, grp text, n int, ok boolean);
INSERT INTO parts VALUES (1, 'a', 2, true), (2, 'a', 0, false), (3, 'b', 3, true),
    (4, NULL, NULL, NULL);

SELECT generate_series(1, 3) AS x;
-- => [(1,), (2,), (3,)]
SELECT generate_series(1, 3) AS x, generate_series(1, 2) AS y;
-- => [(1, 1), (2, 2), (3, None)]
SELECT id, generate_series(1, n) AS k FROM parts ORDER BY id, k;
-- => [(1, 1), (1, 2), (3, 1), (3, 2), (3, 3)]
SELECT id, generate_series(1, n) AS k, 'x' AS c FROM parts WHERE grp = 'b';
-- => [(3, 1, 'x'), (3, 2, 'x'), (3, 3, 'x')]
SELECT id, generate_series(n, 1, -1) AS k, generate_series(1, 5, 2) AS o FROM parts
    ORDER BY id, o;
-- => [(1, 2, 1), (1, 1, 3), (1, None, 5), (2, None, 1), (2, None, 3), (2, None, 5),
--     (3, 3, 1), (3, 2, 3), (3, 1, 5), (4, None, 1), (4, None, 3), (4, None, 5)]
SELECT id, generate_series(n, NULL) AS k FROM parts;
-- => []
SELECT unnest(ARRAY(SELECT id FROM parts ORDER BY id DESC)) AS v;
-- => [(4,), (3,), (2,), (1,)]
SELECT unnest(ARRAY(SELECT grp FROM parts ORDER BY id)) AS v,
       generate_subscripts(ARRAY(SELECT grp FROM parts ORDER BY id), 1) AS i;
-- => [('a', 1), ('a', 2), ('b', 3), (None, 4)]
SELECT generate_subscripts(ARRAY(SELECT id FROM parts), 2) AS i;
-- => []
SELECT s.v + 1 AS w FROM (SELECT unnest(ARRAY(SELECT n FROM parts ORDER BY id)) AS v) s
    ORDER BY w NULLS FIRST;
-- => [(None,), (1,), (3,), (4,)]
SELECT id FROM parts WHERE unnest(ARRAY(SELECT 1)) = 1;
-- !! 0A000

SELECT grp, array_agg(id ORDER BY id DESC) AS ids, array_agg(n ORDER BY id) AS ns
    FROM parts GROUP BY grp ORDER BY grp;
-- => [('a', [2, 1], [2, 0]), ('b', [3], [3]), (None, [4], [None])]
SELECT array_agg(grp ORDER BY grp DESC NULLS LAST) FROM parts;
-- => [(['b', 'a', 'a', None],)]
SELECT array_agg(id) FROM parts WHERE id > 10;
-- => [(None,)]
SELECT string_agg(grp, ',' ORDER BY id DESC) FROM parts;
-- => [('b,a,a',)]
SELECT grp, bool_and(ok) AS all_ok, bool_or(ok) AS any_ok FROM parts GROUP BY grp ORDER BY grp;
-- => [('a', False, True), ('b', True, True), (None, None, None)]
SELECT bool_and(ok), bool_or(ok), every(ok) FROM parts WHERE id > 10;
-- => [(None, None, None)]

SELECT json_build_object('id', id, 'grp', grp, 'n', n, 'ok', ok) AS j FROM parts
    WHERE id IN (1, 4) ORDER BY id;
-- => [({'id': 1, 'grp': 'a', 'n': 2, 'ok': True},), ({'id': 4, 'grp': None, 'n': None, 'ok': None},)]
SELECT json_build_object('a', 1, 'b');
-- !! 22023

-- current_setting(), as SQLAlchemy's reflection asks for the default table access method
SELECT current_setting('default_table_access_method'), current_setting('no.such', true);
-- => [('heap', None)]
SELECT current_setting('no_such_setting');
-- !! 42704

-- json_build_object writes an array as a JSON array, a float JSON has no number for as
-- its text (red-team 8 F11, F16)
CREATE TABLE jb (id bigint PRIMARY KEY, ai integer[], at text[], j jsonb);
INSERT INTO jb VALUES (1, '{1,2}', '{x,NULL}', NULL);
SELECT json_build_object('a', ARRAY[1, 2], 'ai', ai, 'at', at, 'f', 1.5::float8) FROM jb;
-- => [({'a': [1, 2], 'ai': [1, 2], 'at': ['x', None], 'f': 1.5},)]
SELECT json_build_object('f', 'NaN'::float8, 'g', 'Infinity'::float8,
                         'h', '-Infinity'::float8)::jsonb::text AS t;
-- => [('{"f": "NaN", "g": "Infinity", "h": "-Infinity"}',)]
INSERT INTO jb (id, j) SELECT 2, json_build_object('f', 'NaN'::float8);
SELECT j->>'f' FROM jb WHERE id = 2;
-- => [('NaN',)]

-- a timestamptz in JSON is ISO 8601, as PostgreSQL's to_json writes it (json_build_object,
-- to_json, to_jsonb, an array's elements)
CREATE TABLE jt (id bigint PRIMARY KEY, at timestamptz);
INSERT INTO jt VALUES (1, '2026-11-30 12:00:00+00'), (2, '2026-11-30 12:00:00.25+00'),
    (3, '0099-01-02 03:04:05.000001+00'), (4, NULL);
SELECT id, json_build_object('at', at, 'a', ARRAY[at]) AS j, to_json(at) AS t,
    to_jsonb(at)::text AS b FROM jt ORDER BY id;
-- => [(1, {'at': '2026-11-30T12:00:00+00:00', 'a': ['2026-11-30T12:00:00+00:00']},
--      '2026-11-30T12:00:00+00:00', '"2026-11-30T12:00:00+00:00"'),
--     (2, {'at': '2026-11-30T12:00:00.25+00:00', 'a': ['2026-11-30T12:00:00.25+00:00']},
--      '2026-11-30T12:00:00.25+00:00', '"2026-11-30T12:00:00.25+00:00"'),
--     (3, {'at': '0099-01-02T03:04:05.000001+00:00',
--          'a': ['0099-01-02T03:04:05.000001+00:00']},
--      '0099-01-02T03:04:05.000001+00:00', '"0099-01-02T03:04:05.000001+00:00"'),
--     (4, {'at': None, 'a': [None]}, None, None)]
SELECT json_build_object('t', '2026-01-01 00:00:00+05'::timestamptz) AS j,
    to_json(1.5::float8) AS f, to_json('x'::text) AS s, to_json(2) AS i, to_json(true) AS b;
-- => [({'t': '2025-12-31T19:00:00+00:00'}, 1.5, 'x', 2, True)]
