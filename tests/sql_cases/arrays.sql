-- Columns of arrays: vector(n)[], vector[] (any dimension), halfvec[], sparsevec[],
-- double precision[], real[], integer[], text[] — written as array literals, ARRAY[...]
-- and casts, read back whole, by subscript and by unnest; an element that does not fit
-- its type is refused as PostgreSQL refuses it. (integer[] and real[] are stored as
-- bigint / double precision elements, as integer and real columns are.)
CREATE TABLE docs (id bigint PRIMARY KEY, embeddings vector(3)[], anydim vector[],
                   halves halfvec[], sparse sparsevec[], weights double precision[],
                   small real[], counts integer[], tags text[]);
INSERT INTO docs VALUES
    (1, '{"[1,2,3]","[4,5,6]"}', '{"[1,2]","[1,2,3,4]"}', '{"[1.5,2]"}', '{"{1:1.5}/3"}',
     '{1.5,NULL,-3}', '{0.25,0.5}', '{1,2,3}', '{a,"b c",NULL}'),
    (2, ARRAY['[0,0,1]']::vector(3)[], NULL, NULL, NULL, ARRAY[2.5, 1], '{}', ARRAY[7], '{}'),
    (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

SELECT id, embeddings, anydim, halves, sparse, weights, small, counts, tags FROM docs ORDER BY id;
-- => [(1, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[1.0, 2.0], [1.0, 2.0, 3.0, 4.0]], [[1.5, 2.0]],
--      ['{1:1.5}/3'], [1.5, None, -3.0], [0.25, 0.5], [1, 2, 3], ['a', 'b c', None]),
--     (2, [[0.0, 0.0, 1.0]], None, None, None, [2.5, 1.0], [], [7], []),
--     (3, None, None, None, None, None, None, None, None)]
SELECT id, embeddings[2], weights[1], counts[3], tags[2], array_length(embeddings, 1)
    FROM docs ORDER BY id;
-- => [(1, [4.0, 5.0, 6.0], 1.5, 3, 'b c', 2), (2, None, 2.5, None, None, 1),
--     (3, None, None, None, None, None)]
SELECT id, unnest(embeddings) AS e FROM docs ORDER BY id;
-- => [(1, [1.0, 2.0, 3.0]), (1, [4.0, 5.0, 6.0]), (2, [0.0, 0.0, 1.0])]
SELECT '{"[1,2,3]"}'::vector(3)[] AS v, '{1,2}'::integer[] AS i, ARRAY[1.5, 2]::float8[] AS f;
-- => [([[1.0, 2.0, 3.0]], [1, 2], [1.5, 2.0])]
UPDATE docs SET counts = '{9,8}', embeddings = ARRAY['[1,1,1]', '[2,2,2]']::vector(3)[] WHERE id = 3;
SELECT counts, embeddings FROM docs WHERE id = 3;
-- => [([9, 8], [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])]

-- refused: an element of another dimension, a value that is no integer, not an array
INSERT INTO docs (id, embeddings) VALUES (4, '{"[1,2]"}');
-- !! 22000
INSERT INTO docs (id, counts) VALUES (4, '{1.5}');
-- !! 22P02
INSERT INTO docs (id, weights) VALUES (4, '{1,x}');
-- !! 22P02
INSERT INTO docs (id, tags) VALUES (4, 'abc');
-- !! 22P02
SELECT count(*) FROM docs;
-- => [(3,)]
-- an element is checked as the element type's input checks it: a halfvec's range
-- (red-team 8 F09)
INSERT INTO docs (id, halves) VALUES (4, '{"[1,70000]"}');
-- !! 22003
INSERT INTO docs (id, halves) VALUES (4, ARRAY['[1,-65600]']::halfvec[]);
-- !! 22003
INSERT INTO docs (id, halves) VALUES (4, '{"[1,65504]"}');
SELECT halves FROM docs WHERE id = 4;
-- => [([[1.0, 65504.0]],)]

-- an array literal as PostgreSQL reads it: a backslash escapes the next character,
-- quoted or not, and an escaped NULL is text; a float8[] prints as float8 does
-- (red-team 8 F10)
CREATE TABLE esc (id bigint PRIMARY KEY, at text[], ad float8[]);
INSERT INTO esc VALUES (1, '{a\,b,c}', '{1e3,-0}'), (2, '{\NULL,e\\f, " q " , x\ }', '{}');
SELECT id, at, array_length(at, 1), at[1] IS NULL FROM esc ORDER BY id;
-- => [(1, ['a,b', 'c'], 2, False), (2, ['NULL', 'e\\f', ' q ', 'x '], 4, False)]
SELECT id, ad::text, at::text FROM esc ORDER BY id;
-- => [(1, '{1000,-0}', '{"a,b",c}'), (2, '{}', '{"NULL","e\\\\f"," q ","x "}')]
SELECT ARRAY[1.5, 1e20, 'NaN', '-Infinity']::float8[]::text AS t;
-- => [('{1.5,1e+20,NaN,-Infinity}',)]

-- arrays compared: an untyped literal read as the array's type, element by element
-- (a NULL element above every value), vectors by their numbers (red-team 8 F02, F13)
CREATE TABLE cmp (id bigint PRIMARY KEY, ai integer[], ad double precision[],
                  av vector(2)[], v vector(2), at text[]);
INSERT INTO cmp VALUES (1, '{1,2}', '{1.5,2}', '{"[1,2]"}', '[1,2]', '{a,NULL}'),
    (2, '{1,NULL}', '{3}', '{"[1,3]",NULL}', '[1,3]', '{b}');
SELECT id, ai = '{1,2}', ai < '{3}', ai IN ('{1,2}'), '{1,2}' = ai, at = '{a,NULL}'
    FROM cmp ORDER BY id;
-- => [(1, True, True, True, True, True), (2, False, True, False, False, False)]
SELECT id FROM cmp WHERE ad = '{1.5,2}';
-- => [(1,)]
SELECT id, av = av, v = ANY(av), least(av, av) = av, av = '{"[1,2]"}' FROM cmp ORDER BY id;
-- => [(1, True, True, True, True), (2, True, True, True, False)]
SELECT id FROM cmp ORDER BY ai DESC;
-- => [(2,), (1,)]
SELECT id FROM cmp ORDER BY av DESC;
-- => [(2,), (1,)]
SELECT id, ai > ARRAY[1], ai > ARRAY[1, 2] FROM cmp ORDER BY id;
-- => [(1, True, False), (2, True, True)]
SELECT ai = '{x}' FROM cmp;
-- !! 22P02

-- a double precision[] takes NaN and infinity, as float8 does (red-team 8 F03)
CREATE TABLE nf (id bigint PRIMARY KEY, ad double precision[]);
INSERT INTO nf VALUES (1, '{1.5,NaN,Infinity,-Infinity}');
INSERT INTO nf VALUES (2, ARRAY['NaN'::float8, 2]);
SELECT id, ad::text, json_build_object('x', ad)::jsonb::text AS j FROM nf ORDER BY id;
-- => [(1, '{1.5,NaN,Infinity,-Infinity}', '{"x": [1.5, "NaN", "Infinity", "-Infinity"]}'),
--     (2, '{NaN,2}', '{"x": ["NaN", 2]}')]
SELECT id FROM nf WHERE ad = '{NaN,2}';
-- => [(2,)]

-- a vector element past float32's range is out of range (22003, as pgvector's input
-- says), NaN or an infinity written as such is 22000; an empty element (`{a,,b}`) is a
-- malformed literal (22P02)
INSERT INTO docs (id, anydim) VALUES (40, '{"[1e39,1]"}');
-- !! 22003
SELECT '[1,-1e39]'::vector;
-- !! 22003
INSERT INTO docs (id, anydim) VALUES (40, '{"[NaN,1]"}');
-- !! 22000
SELECT '{a,,b}'::text[];
-- !! 22P02
SELECT '{1,}'::integer[];
-- !! 22P02
SELECT '{,}'::text[];
-- !! 22P02
SELECT '{"",b}'::text[] AS t;
-- => [(['', 'b'],)]
-- array || element and element || array (array_append / array_prepend): a NULL array
-- takes the element, a NULL element is appended; an int beside float8[] is a float, a
-- float8 beside integer[] makes float8[]; an untyped literal beside an array is an array
CREATE TABLE app (id bigint PRIMARY KEY, i int, f double precision, tx text, a int[], fa float8[], ta text[]);
INSERT INTO app VALUES (1, 2, 1.5, 'hi', '{1,2}', '{0.5}', '{a,b}'), (2, NULL, NULL, NULL, NULL, NULL, NULL),
    (3, 4, 2, 'x', '{}', '{}', '{}');
SELECT id, a || i, i || a, a || 5, fa || f, fa || i, tx || ta, ta || tx, a || NULL::int, a || f FROM app ORDER BY id;
-- => [(1, [1, 2, 2], [2, 1, 2], [1, 2, 5], [0.5, 1.5], [0.5, 2.0], ['hi', 'a', 'b'], ['a', 'b', 'hi'], [1, 2, None], [1.0, 2.0, 1.5]),
--     (2, [None], [None], [5], [None], [None], [None], [None], [None], [None]),
--     (3, [4], [4], [5], [2.0], [4.0], ['x'], ['x'], [None], [2.0])]
SELECT '{1}'::int[] || 2, 2 || '{1}'::int[], '{1}'::int[] || '{2}', ARRAY['a'] || 'b'::text;
-- => [([1, 2], [2, 1], [1, 2], ['a', 'b'])]
SELECT tx || a FROM app;
-- !! 42883
SELECT a || true FROM app;
-- !! 42883
SELECT ARRAY['a'] || 'b';
-- !! 22P02
