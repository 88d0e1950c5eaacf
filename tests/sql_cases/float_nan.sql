-- float8 NaN as PostgreSQL orders it: equal to itself and above every number,
-- Infinity included, in comparisons (a where= filter's and the evaluator's), IN,
-- CASE, ORDER BY, min/max, GROUP BY, DISTINCT, HAVING, window ranks and join keys
CREATE TABLE fx (id bigint PRIMARY KEY, x double precision, k int);
INSERT INTO fx VALUES (1, 1.0, 1), (2, 'NaN', 1), (3, 'Infinity', 2), (4, -1.5, 2), (5, NULL, 3), (6, 'NaN', 3), (7, '-Infinity', 1);
SELECT id FROM fx WHERE x > 1 ORDER BY id;
-- => [(2,), (3,), (6,)]
SELECT id FROM fx WHERE x = 'NaN' ORDER BY id;
-- => [(2,), (6,)]
SELECT id FROM fx WHERE x <> 'NaN' ORDER BY id;
-- => [(1,), (3,), (4,), (7,)]
SELECT id FROM fx WHERE x < 'NaN' ORDER BY id;
-- => [(1,), (3,), (4,), (7,)]
SELECT id FROM fx WHERE x <= 'NaN' ORDER BY id;
-- => [(1,), (2,), (3,), (4,), (6,), (7,)]
SELECT id FROM fx WHERE x >= 'Infinity' ORDER BY id;
-- => [(2,), (3,), (6,)]
SELECT id FROM fx WHERE 'NaN' > x ORDER BY id;
-- => [(1,), (3,), (4,), (7,)]
SELECT id FROM fx WHERE x BETWEEN 0 AND 'NaN' ORDER BY id;
-- => [(1,), (2,), (3,), (6,)]
SELECT id FROM fx WHERE x + 0 > 1 ORDER BY id;
-- => [(2,), (3,), (6,)]
SELECT id FROM fx WHERE x IN (1, 'NaN') ORDER BY id;
-- => [(1,), (2,), (6,)]
SELECT id FROM fx WHERE x NOT IN (1, 'NaN') ORDER BY id;
-- => [(3,), (4,), (7,)]
SELECT id FROM fx WHERE x IN (SELECT x FROM fx WHERE id = 2) ORDER BY id;
-- => [(2,), (6,)]
SELECT id, CASE WHEN x > 0 THEN 'pos' ELSE 'other' END FROM fx ORDER BY id;
-- => [(1, 'pos'), (2, 'pos'), (3, 'pos'), (4, 'other'), (5, 'other'), (6, 'pos'), (7, 'other')]
SELECT id FROM fx ORDER BY x DESC, id;
-- => [(5,), (2,), (6,), (3,), (1,), (4,), (7,)]
SELECT id FROM fx ORDER BY x, id;
-- => [(7,), (4,), (1,), (3,), (2,), (6,), (5,)]
SELECT id FROM fx ORDER BY x DESC NULLS LAST, id LIMIT 3;
-- => [(2,), (6,), (3,)]
SELECT max(x)::text, min(x)::text FROM fx;
-- => [('NaN', '-Infinity')]
SELECT x::text AS v, count(*) FROM fx GROUP BY x ORDER BY x;
-- => [('-Infinity', 1), ('-1.5', 1), ('1', 1), ('Infinity', 1), ('NaN', 2), (None, 1)]
SELECT count(DISTINCT x) FROM fx;
-- => [(5,)]
SELECT k, count(*) FROM fx GROUP BY k HAVING max(x) = 'NaN' ORDER BY k;
-- => [(1, 3), (3, 2)]
SELECT id, rank() OVER (ORDER BY x DESC) FROM fx ORDER BY id;
-- => [(1, 5), (2, 2), (3, 4), (4, 6), (5, 1), (6, 2), (7, 7)]
SELECT a.id, b.id FROM fx a JOIN fx b ON a.x = b.x AND a.id < b.id ORDER BY 1;
-- => [(2, 6)]
-- the same filters over an index on x
CREATE INDEX fx_x ON fx (x);
SELECT id FROM fx WHERE x > 1 ORDER BY id;
-- => [(2,), (3,), (6,)]
SELECT id FROM fx WHERE x = 'NaN' ORDER BY id;
-- => [(2,), (6,)]
SELECT id FROM fx WHERE x < 'NaN' ORDER BY id;
-- => [(1,), (3,), (4,), (7,)]
