-- jsonb's comparison: an untyped literal compared with a json value is read as json
-- (1 = 1.0, keys in any order), a boolean never equals a number, and the ordering ranks
-- kinds (object > array > boolean > number > string > null) before values.
CREATE TABLE t (id bigint PRIMARY KEY, meta jsonb);
INSERT INTO t VALUES (1, '{"a": 1}'), (2, '{"a": "1"}'), (3, '{"a": 1.0, "b": true}'),
    (4, '{"a": [1, 2]}'), (5, '{"a": true}'), (6, '{"a": {"x": 1}}'), (7, '{"b": 2}');
SELECT id FROM t WHERE meta->'a' = '1' ORDER BY id;
-- => [(1,), (3,)]
SELECT id FROM t WHERE meta->'a' = '"1"' ORDER BY id;
-- => [(2,)]
SELECT id FROM t WHERE meta->'a' = '[1,2]' ORDER BY id;
-- => [(4,)]
SELECT id FROM t WHERE meta = '{"b": true, "a": 1}' ORDER BY id;
-- => [(3,)]
SELECT id FROM t WHERE meta->'a' <> '1' ORDER BY id;
-- => [(2,), (4,), (5,), (6,)]
SELECT id FROM t WHERE meta->'a' = 'true' ORDER BY id;
-- => [(5,)]
SELECT id FROM t WHERE meta->'a' IN ('1', '"1"') ORDER BY id;
-- => [(1,), (2,), (3,)]
SELECT id FROM t WHERE meta->'a' > '1' ORDER BY id;
-- => [(4,), (5,), (6,)]
SELECT id FROM t WHERE meta->'a' < '1' ORDER BY id;
-- => [(2,)]
SELECT id FROM t WHERE meta->'a' >= '{}' ORDER BY id;
-- => [(6,)]
SELECT id, meta->'a' = meta->'a' FROM t ORDER BY id;
SELECT id FROM t WHERE meta->>'a' = '1' ORDER BY id;
-- => [(1,), (2,)]
SELECT id FROM t WHERE meta->'a' = 'x';
-- !! 22P02
SELECT id FROM t WHERE meta->'a' = 'NaN';
-- !! 22P02
SELECT id FROM t ORDER BY meta->'a', id;
-- => [(2,), (1,), (3,), (5,), (4,), (6,), (7,)]
SELECT count(DISTINCT meta->'a') FROM t;
SELECT meta->'a', count(*) FROM t GROUP BY meta->'a' ORDER BY 1;
