-- Values of every kind through SQL's relational operations: VALUES, UNION, CASE,
-- COALESCE, NULLIF, GREATEST, LEAST, ORDER BY, DISTINCT, GROUP BY, window partitions,
-- joins and IN (SELECT ...), and pgvector's btree order (< <= > >=): element by element,
-- then the dimensions; a sparsevec as its dense form. Typed NULL vectors
-- (NULL::vector(3)); the aggregates of booleans.
CREATE TABLE sv (id bigint PRIMARY KEY, s sparsevec);
INSERT INTO sv VALUES (1, '{1:1}/3'), (2, NULL), (3, '{1:1}/3'), (4, '{2:-1}/3'),
    (5, '{}/3'), (6, '{3:2}/3'), (7, '{}/2'), (8, '{1:1}/2'), (9, '{3:-1}/4'),
    (10, '{1:-2,2:1}/3');
CREATE TABLE sw (id bigint PRIMARY KEY, s sparsevec(3));
INSERT INTO sw VALUES (1, '{2:2}/3'), (2, '{1:1}/3'), (3, NULL);
SELECT column1 FROM (VALUES ('{1:1}/2'::sparsevec), ('{1:1}/3'::sparsevec), (NULL)) t;
-- => [('{1:1}/2',), ('{1:1}/3',), (None,)]
SELECT column1::vector FROM (VALUES ('{1:1}/2'::sparsevec), ('{2:1}/2'::sparsevec)) t;
-- => [([1.0, 0.0],), ([0.0, 1.0],)]
SELECT s FROM sv WHERE id < 3 UNION ALL SELECT s FROM sw;
-- => [('{1:1}/3',), (None,), ('{2:2}/3',), ('{1:1}/3',), (None,)]
SELECT s FROM sv WHERE id < 4 UNION SELECT s FROM sw;
-- => [('{2:2}/3',), ('{1:1}/3',), (None,)]
SELECT s FROM sw UNION ALL SELECT NULL::sparsevec;
-- => [('{2:2}/3',), ('{1:1}/3',), (None,), (None,)]
SELECT s FROM sv WHERE id = 2 UNION ALL SELECT s FROM sw WHERE id = 3;
-- => [(None,), (None,)]
SELECT id, CASE WHEN id < 3 THEN s ELSE '{2:2}/3' END FROM sv ORDER BY id;
-- => [(1, '{1:1}/3'), (2, None), (3, '{2:2}/3'), (4, '{2:2}/3'), (5, '{2:2}/3'),
--     (6, '{2:2}/3'), (7, '{2:2}/3'), (8, '{2:2}/3'), (9, '{2:2}/3'), (10, '{2:2}/3')]
SELECT id, CASE WHEN id = 1 THEN s END FROM sw ORDER BY id;
-- => [(1, '{2:2}/3'), (2, None), (3, None)]
SELECT id, coalesce(s, '{3:3}/3'), nullif(s, '{1:1}/3') FROM sv ORDER BY id;
-- => [(1, '{1:1}/3', None), (2, '{3:3}/3', None), (3, '{1:1}/3', None),
--     (4, '{2:-1}/3', '{2:-1}/3'), (5, '{}/3', '{}/3'), (6, '{3:2}/3', '{3:2}/3'),
--     (7, '{}/2', '{}/2'), (8, '{1:1}/2', '{1:1}/2'), (9, '{3:-1}/4', '{3:-1}/4'),
--     (10, '{1:-2,2:1}/3', '{1:-2,2:1}/3')]
SELECT id FROM sv ORDER BY s, id;
-- => [(10,), (4,), (7,), (9,), (5,), (6,), (8,), (1,), (3,), (2,)]
SELECT id FROM sv ORDER BY s DESC NULLS LAST, id;
-- => [(1,), (3,), (8,), (6,), (5,), (9,), (7,), (4,), (10,), (2,)]
SELECT DISTINCT s FROM sv ORDER BY s;
-- => [('{1:-2,2:1}/3',), ('{2:-1}/3',), ('{}/2',), ('{3:-1}/4',), ('{}/3',), ('{3:2}/3',),
--     ('{1:1}/2',), ('{1:1}/3',), (None,)]
SELECT s, count(*) FROM sv GROUP BY s ORDER BY s;
-- => [('{1:-2,2:1}/3', 1), ('{2:-1}/3', 1), ('{}/2', 1), ('{3:-1}/4', 1), ('{}/3', 1),
--     ('{3:2}/3', 1), ('{1:1}/2', 1), ('{1:1}/3', 2), (None, 1)]
SELECT count(DISTINCT s) FROM sv;
-- => [(8,)]
SELECT id, rank() OVER (ORDER BY s), row_number() OVER (PARTITION BY s ORDER BY id)
    FROM sv ORDER BY id;
-- => [(1, 8, 1), (2, 10, 1), (3, 8, 2), (4, 2, 1), (5, 5, 1), (6, 6, 1), (7, 3, 1),
--     (8, 7, 1), (9, 4, 1), (10, 1, 1)]
SELECT a.id, b.id FROM sv a JOIN sv b ON a.s = b.s AND a.id < b.id;
-- => [(1, 3)]
SELECT sv.id, sw.id FROM sv JOIN sw ON sv.s = sw.s;
-- => [(1, 2), (3, 2)]
SELECT sv.id, sw.s FROM sv LEFT JOIN sw ON sw.id = sv.id + 1 WHERE sv.id < 4 ORDER BY 1;
-- => [(1, '{1:1}/3'), (2, None), (3, None)]
SELECT id FROM sv WHERE s IN (SELECT s FROM sw) ORDER BY id;
-- => [(1,), (3,)]
SELECT id FROM sv WHERE s NOT IN (SELECT s FROM sv WHERE id = 8) ORDER BY id;
-- => [(1,), (3,), (4,), (5,), (6,), (7,), (9,), (10,)]
SELECT id, s < '{2:1}/3', s >= '{1:1}/3', s > '{}/3', s <= '{1:1}/2' FROM sv ORDER BY id;
-- => [(1, False, True, True, False), (2, None, None, None, None),
--     (3, False, True, True, False), (4, True, False, False, True),
--     (5, True, False, False, True), (6, True, False, True, True),
--     (7, True, False, False, True), (8, False, False, True, True),
--     (9, True, False, False, True), (10, True, False, False, True)]
SELECT min(s) FROM sv;
-- !! 42883
CREATE TABLE dv (id bigint PRIMARY KEY, e vector(2), h halfvec(2), b bit(3));
INSERT INTO dv VALUES (1, '[1,2]', '[1,2]', '101'), (2, '[-1,3]', '[-1,3]', '011'),
    (3, '[0,0]', '[0,0]', '000'), (4, '[-0.5,1]', '[-0.5,1]', '111'), (5, NULL, NULL, NULL),
    (6, '[-0,0]', '[-0,0]', '101');
SELECT id FROM dv ORDER BY e, id;
-- => [(2,), (4,), (3,), (6,), (1,), (5,)]
SELECT id FROM dv ORDER BY h DESC, id;
-- => [(5,), (1,), (3,), (6,), (4,), (2,)]
SELECT id FROM dv ORDER BY b, id;
-- => [(3,), (2,), (1,), (6,), (4,), (5,)]
SELECT DISTINCT e FROM dv ORDER BY e;
-- => [([-1.0, 3.0],), ([-0.5, 1.0],), ([0.0, 0.0],), ([1.0, 2.0],), (None,)]
SELECT e, count(*) FROM dv GROUP BY e ORDER BY e;
-- => [([-1.0, 3.0], 1), ([-0.5, 1.0], 1), ([0.0, 0.0], 2), ([1.0, 2.0], 1), (None, 1)]
SELECT id, e < '[0,1]', e >= '[0,0]', e > '[0,0,1]', h <= '[-0.5,1]', b < '100' FROM dv
    ORDER BY id;
-- => [(1, False, True, True, False, False), (2, True, False, False, True, True),
--     (3, True, True, False, False, True), (4, True, False, False, True, False),
--     (5, None, None, None, None, None), (6, True, True, False, False, False)]
SELECT id, rank() OVER (ORDER BY e DESC) FROM dv ORDER BY id;
-- => [(1, 2), (2, 6), (3, 3), (4, 5), (5, 1), (6, 3)]
SELECT NULL::vector(3), NULL::halfvec(3), CAST(NULL AS bit(3)), NULL::sparsevec(3);
-- => [(None, None, None, None)]
SELECT vector_dims(NULL::vector(3));
-- => [(None,)]
SELECT '[1,2,3]'::vector(3) UNION ALL SELECT NULL::vector(3);
-- => [([1.0, 2.0, 3.0],), (None,)]
SELECT NULL::vector(2) UNION ALL SELECT '[1,2,3]'::vector(3);
-- => [(None,), ([1.0, 2.0, 3.0],)]
SELECT coalesce(NULL::vector(3), '[1,2,3]');
-- => [([1.0, 2.0, 3.0],)]
SELECT id, coalesce(e, NULL::vector(2), '[9,9]') FROM dv WHERE id > 3 ORDER BY id;
-- => [(4, [-0.5, 1.0]), (5, [9.0, 9.0]), (6, [-0.0, 0.0])]
SELECT id FROM dv WHERE e IN (SELECT e FROM dv WHERE id < 3) ORDER BY id;
-- => [(1,), (2,)]
-- an untyped literal meeting a halfvec is a halfvec (float16's rounding), a bit string's
-- a bit string
CREATE TABLE hv (id bigint PRIMARY KEY, h halfvec(3), b bit(3), f boolean);
INSERT INTO hv VALUES (1, '[1,2,3]', '101', true), (2, NULL, NULL, NULL), (3, NULL, '011', false);
SELECT id, coalesce(h, '[1.0001,2,3]'), CASE WHEN id = 2 THEN '[1.0001,2,3]' ELSE h END
    FROM hv ORDER BY id;
-- => [(1, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), (2, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
--     (3, [1.0, 2.0, 3.0], None)]
SELECT h FROM hv UNION ALL SELECT '[1.0001,2,3]' ORDER BY 1;
-- => [([1.0, 2.0, 3.0],), ([1.0, 2.0, 3.0],), (None,), (None,)]
SELECT id, coalesce(b, '111'), nullif(b, '101') FROM hv ORDER BY id;
-- => [(1, '101', None), (2, '111', None), (3, '011', '011')]
SELECT min(h) FROM hv;
-- !! 42883
SELECT max(b) FROM hv;
-- !! 42883
-- booleans: min / max do not exist, bool_and / bool_or / every do
SELECT min(f) FROM hv;
-- !! 42883
SELECT bool_and(f), bool_or(f), every(f), bool_and(f) FILTER (WHERE id > 2),
    bool_or(DISTINCT f) FROM hv;
-- => [(False, True, False, False, True)]
SELECT id % 2, bool_and(f), bool_or(f) FROM hv GROUP BY id % 2 ORDER BY 1;
-- => [(0, None, None), (1, False, True)]
SELECT bool_and(f) FROM hv WHERE false;
-- => [(None,)]
SELECT bool_or(id) FROM hv;
-- !! 42883
-- GREATEST / LEAST in each kind's order, NULLs skipped (NULL where all are)
SELECT greatest(1, 2), least(1, 2.5), greatest(NULL, 3), least(NULL::int, NULL),
    greatest('b', 'a', 'c');
-- => [(2, 1, 3, None, 'c')]
SELECT greatest(1, true);
-- !! 42804
SELECT id, greatest(s, '{3:1}/3'), least(s, '{3:1}/3', '{1:-1}/3') FROM sw ORDER BY id;
-- => [(1, '{2:2}/3', '{1:-1}/3'), (2, '{1:1}/3', '{1:-1}/3'), (3, '{3:1}/3', '{1:-1}/3')]
SELECT id, greatest(e, '[0,9]'), least(e, '[0,9]', '[-2,0]') FROM dv ORDER BY id;
-- => [(1, [1.0, 2.0], [-2.0, 0.0]), (2, [0.0, 9.0], [-2.0, 0.0]),
--     (3, [0.0, 9.0], [-2.0, 0.0]), (4, [0.0, 9.0], [-2.0, 0.0]),
--     (5, [0.0, 9.0], [-2.0, 0.0]), (6, [0.0, 9.0], [-2.0, 0.0])]
SELECT id, greatest(h, '[1,2,2]') FROM hv ORDER BY id;
-- => [(1, [1.0, 2.0, 3.0]), (2, [1.0, 2.0, 2.0]), (3, [1.0, 2.0, 2.0])]
SELECT max(greatest(id, 3)), min(least(id, 2)) FROM dv;
-- => [(6, 1)]
-- jsonb in PostgreSQL's order: object > array > boolean > number > string (a top-level
-- empty array first); objects by their number of pairs, then pair by pair in jsonb's key
-- order; arrays by length, then element by element
CREATE TABLE js (id bigint PRIMARY KEY, d jsonb);
INSERT INTO js VALUES (1, '{"a": 1}'), (2, '[1, 2]'), (3, '"x"'), (4, '2'), (5, 'true'),
    (7, '{"b": 0, "a": 2}'), (8, '[3]'), (9, '10'), (10, '"ab"'), (11, NULL), (12, 'false'),
    (13, '[]'), (14, '{}'), (15, '{"aa": 1, "b": 1}'), (16, '{"b": 1, "c": 1}'),
    (17, '{"a": 1, "bb": 1}'), (18, '[[]]'), (19, '[null]'), (20, '2.5'), (21, '"é"'),
    (22, '"z"'), (23, '{"b": [1]}'), (24, '{"b": {"c": 1}}'), (25, '[[], 1]'),
    (26, '{"a": null}'), (27, '{"ab": 1, "c": 2}'), (28, '{"c": 1, "ab": 2}'), (29, '2.50'),
    (30, '[2.0]');
SELECT id FROM js ORDER BY d, id;
-- => [(13,), (10,), (3,), (22,), (21,), (4,), (20,), (29,), (9,), (12,), (5,), (19,),
--     (30,), (8,), (18,), (2,), (25,), (14,), (26,), (1,), (23,), (24,), (17,), (7,),
--     (15,), (16,), (28,), (27,), (11,)]
SELECT id, rank() OVER (ORDER BY d DESC) FROM js ORDER BY id;
-- => [(1, 10), (2, 14), (3, 27), (4, 24), (5, 19), (7, 6), (8, 16), (9, 21), (10, 28),
--     (11, 1), (12, 20), (13, 29), (14, 12), (15, 5), (16, 4), (17, 7), (18, 15), (19, 18),
--     (20, 22), (21, 25), (22, 26), (23, 9), (24, 8), (25, 13), (26, 11), (27, 2), (28, 3),
--     (29, 22), (30, 17)]
SELECT d, count(*) FROM js GROUP BY d ORDER BY d;
-- => [([], 1), ('ab', 1), ('x', 1), ('z', 1), ('é', 1), (2, 1), (2.5, 2), (10, 1),
--     (False, 1), (True, 1), ([None], 1), ([2.0], 1), ([3], 1), ([[]], 1), ([1, 2], 1),
--     ([[], 1], 1), ({}, 1), ({'a': None}, 1), ({'a': 1}, 1), ({'b': [1]}, 1),
--     ({'b': {'c': 1}}, 1), ({'a': 1, 'bb': 1}, 1), ({'a': 2, 'b': 0}, 1),
--     ({'b': 1, 'aa': 1}, 1), ({'b': 1, 'c': 1}, 1), ({'c': 1, 'ab': 2}, 1),
--     ({'c': 2, 'ab': 1}, 1), (None, 1)]
SELECT id, greatest(d, '[1]'), least(d, '[1]') FROM js WHERE id < 6 ORDER BY id;
-- => [(1, {'a': 1}, [1]), (2, [1, 2], [1]), (3, [1], 'x'), (4, [1], 2), (5, [1], True)]
SELECT id, d < '[1]', d >= '2', d > '{}', d <= '"x"' FROM js WHERE id < 6 ORDER BY id;
-- => [(1, False, True, True, False), (2, False, True, False, False),
--     (3, True, False, False, True), (4, True, True, False, False),
--     (5, True, True, False, False)]
SELECT id FROM js WHERE d BETWEEN '1' AND '[5]' ORDER BY id;
-- => [(4,), (5,), (8,), (9,), (12,), (19,), (20,), (29,), (30,)]
