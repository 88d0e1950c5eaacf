-- bigint arithmetic is exact or fails with 22003 (numeric_value_out_of_range), never
-- wraps; sum(bigint) is exact past bigint's range (PostgreSQL's numeric; its text
-- proves every digit, which the float tolerance of `-- =>` would not).
CREATE TABLE n (id bigint PRIMARY KEY, x bigint);
INSERT INTO n VALUES (1, 9223372036854775807), (2, -9223372036854775808), (3, 1), (4, NULL),
                     (5, 9223372036854775807), (6, -9223372036854775808);

SELECT x + 1 FROM n WHERE id = 1;
-- !! 22003
SELECT 1 + x FROM n WHERE id = 1;
-- !! 22003
SELECT x - 1 FROM n WHERE id = 2;
-- !! 22003
SELECT -1 - x FROM n WHERE id = 1;
-- => [(-9223372036854775808,)]
SELECT -2 - x FROM n WHERE id = 1;
-- !! 22003
SELECT x * 2 FROM n WHERE id = 1;
-- !! 22003
SELECT x * -1 FROM n WHERE id = 2;
-- !! 22003
SELECT -1 * x FROM n WHERE id = 2;
-- !! 22003
SELECT x * 3037000500 FROM n WHERE id = 3;
-- => [(3037000500,)]
SELECT (x - 6148914691236517205) * 3 FROM n WHERE id = 1;
-- => [(9223372036854775806,)]
SELECT (x - 6148914691236517204) * 3 FROM n WHERE id = 1;
-- !! 22003
SELECT (x + 6148914691236517205) * 3 FROM n WHERE id = 2;
-- !! 22003
SELECT -x FROM n WHERE id = 2;
-- !! 22003
SELECT abs(x) FROM n WHERE id = 2;
-- !! 22003
SELECT x / -1 FROM n WHERE id = 2;
-- !! 22003
SELECT x % -1, x / 1, x % 1 FROM n WHERE id = 2;
-- => [(0, -9223372036854775808, 0)]
SELECT x / 2, x % 2, x / 7, x % 7, x / -7, x % -7 FROM n WHERE id = 2;
-- => [(-4611686018427387904, 0, -1317624576693539401, -1, 1317624576693539401, -1)]
SELECT x / -7, x % -7, -x, abs(x), x - 1, x * -1 FROM n WHERE id = 1;
-- => [(-1317624576693539401, 0, -9223372036854775807, 9223372036854775807, 9223372036854775806, -9223372036854775807)]
SELECT x + 1, -x, abs(x), x * 2, x / -1 FROM n WHERE id = 4;
-- => [(None, None, None, None, None)]
-- CASE evaluates a branch only on the rows that reach it: no error from the others
SELECT id, CASE WHEN x < 9223372036854775807 THEN x + 1 ELSE x END FROM n WHERE id IN (1, 3) ORDER BY id;
-- => [(1, 9223372036854775807), (3, 2)]
SELECT id, CASE WHEN x = -9223372036854775808 THEN 0 WHEN x > 0 THEN abs(x) END FROM n ORDER BY id;
-- => [(1, 9223372036854775807), (2, 0), (3, 1), (4, None), (5, 9223372036854775807), (6, 0)]
SELECT id, CASE x WHEN 1 THEN x * 2 ELSE -1 END FROM n ORDER BY id;
-- => [(1, -1), (2, -1), (3, 2), (4, -1), (5, -1), (6, -1)]
SELECT id, CASE WHEN x = 1 THEN 0 ELSE 6 / (x - 1) END FROM n WHERE id IN (1, 3) ORDER BY id;
-- => [(1, 0), (3, 0)]
SELECT id, CASE WHEN x > 0 THEN x + 1 END FROM n ORDER BY id;
-- !! 22003
SELECT 9223372036854775807 + 1;
-- !! 22003
SELECT -9223372036854775807 - 2;
-- !! 22003
SELECT '9223372036854775808'::bigint;
-- !! 22003
SELECT '-9223372036854775808'::bigint;
-- => [(-9223372036854775808,)]

-- a write whose value leaves bigint changes nothing
UPDATE n SET x = x + 1 WHERE id = 1;
-- !! 22003
UPDATE n SET x = x + 1;
-- !! 22003
UPDATE n SET x = x * 2 WHERE id = 3 OR id = 5 RETURNING x;
-- !! 22003
INSERT INTO n VALUES (7, 9223372036854775807 + 1);
-- !! 22003
INSERT INTO n SELECT 8, x - 1 FROM n WHERE id = 2;
-- !! 22003
SELECT id, x FROM n ORDER BY id;
-- => [(1, 9223372036854775807), (2, -9223372036854775808), (3, 1), (4, None),
--     (5, 9223372036854775807), (6, -9223372036854775808)]

-- sum(bigint) is exact, past bigint too
SELECT sum(x)::text FROM n WHERE id IN (1, 3);
-- => [('9223372036854775808',)]
SELECT sum(x)::text FROM n WHERE id IN (1, 5);
-- => [('18446744073709551614',)]
SELECT sum(x)::text FROM n WHERE id IN (2, 6);
-- => [('-18446744073709551616',)]
SELECT sum(x)::text FROM n WHERE id IN (1, 3, 5, 4);
-- => [('18446744073709551615',)]
SELECT sum(x) FROM n;
-- => [(-1,)]
SELECT (sum(x) - 9223372036854775807)::text, (sum(x) + 1)::text FROM n WHERE id IN (1, 5);
-- => [('9223372036854775807', '18446744073709551615')]
SELECT id > 4 AS late, sum(x)::text FROM n GROUP BY id > 4 ORDER BY late;
-- => [(False, '0'), (True, '-1')]
SELECT id % 2 AS odd, sum(x)::text FROM n GROUP BY id % 2 ORDER BY sum(x);
-- => [(0, '-18446744073709551616'), (1, '18446744073709551615')]
SELECT avg(x) FROM n WHERE id IN (1, 5);
-- => [(9223372036854775807,)]
SELECT sum(s)::text, max(s)::text, min(s)::text
    FROM (SELECT id % 2 AS odd, sum(x) AS s FROM n GROUP BY id % 2) q;
-- => [('-1', '18446744073709551615', '-18446744073709551616')]
SELECT CASE WHEN id = 1 THEN 0 ELSE id END, CASE WHEN id = 1 THEN 'y' ELSE 'x'::text END,
       CASE WHEN id = 1 THEN 0 ELSE abs(x) END, CASE WHEN id = 1 THEN 0 END FROM n WHERE id = 3;
-- => [(3, 'x', 1, None)]

-- an exact sum past bigint keeps every digit through coalesce, arithmetic, comparisons
-- and ORDER BY; made a bigint again (a cast, a column's value) it is 22003
CREATE TABLE s (id bigint PRIMARY KEY, x bigint);
INSERT INTO s VALUES (1, 9223372036854775807), (2, 9223372036854775807), (3, -5);
SELECT coalesce(sum(x), 0)::text FROM s;
-- => [('18446744073709551609',)]
SELECT coalesce(sum(x), sum(x))::text, coalesce(NULL, sum(x))::text FROM s;
-- => [('18446744073709551609', '18446744073709551609')]
SELECT id > 2 AS k, coalesce(sum(x), 0)::text FROM s GROUP BY id > 2 ORDER BY k;
-- => [(False, '18446744073709551614'), (True, '-5')]
SELECT coalesce(sum(x), 0) > 9223372036854775807 FROM s;
-- => [(True,)]
SELECT sum(x)::bigint FROM s;
-- !! 22003
SELECT coalesce(sum(x), 0)::bigint FROM s;
-- !! 22003
SELECT sum(x)::bigint FROM s WHERE id > 1;
-- => [(9223372036854775802,)]
SELECT (sum(x) - 9223372036854775807)::bigint FROM s WHERE id < 3;
-- => [(9223372036854775807,)]
SELECT (sum(x) - 9223372036854775806)::bigint FROM s WHERE id < 3;
-- !! 22003
SELECT (sum(x) + 1)::text, (sum(x) - 1)::text, (sum(x) * 2)::text, (-sum(x))::text,
       abs(-sum(x))::text, (sum(x) % 7)::text, (sum(x) % -10)::text FROM s;
-- => [('18446744073709551610', '18446744073709551608', '36893488147419103218',
--      '-18446744073709551609', '18446744073709551609', '2', '9')]
SELECT (sum(x) / 2)::bigint, (sum(x) / -2)::bigint FROM s WHERE id < 3;
-- => [(9223372036854775807, -9223372036854775807)]
SELECT (sum(x) / 2 + 1)::bigint FROM s WHERE id < 3;
-- !! 22003
SELECT (sum(x) * sum(x))::text, (sum(x) + x)::text FROM s GROUP BY x ORDER BY x;
-- => [('25', '-10'), ('340282366920938463389587631136930004996', '27670116110564327421')]
SELECT sum(x) > 9223372036854775807, sum(x) < 0, sum(x) = sum(x) + 0, sum(x) IN (1, 2),
       sum(x) BETWEEN 0 AND 9223372036854775807 FROM s;
-- => [(True, False, True, False, False)]
SELECT id > 2 AS k, sum(x)::text FROM s GROUP BY id > 2 ORDER BY sum(x) DESC;
-- => [(False, '18446744073709551614'), (True, '-5')]
SELECT id > 2 AS k FROM s GROUP BY id > 2 HAVING sum(x) > 9223372036854775807;
-- => [(False,)]
INSERT INTO s (id, x) SELECT 100, sum(x) FROM s;
-- !! 22003
UPDATE s SET x = (SELECT sum(x) FROM s);
-- !! 22003
UPDATE s SET x = (SELECT sum(x) FROM s) WHERE id = 3 RETURNING x;
-- !! 22003
INSERT INTO s (id, x) SELECT 100, sum(x) - 9223372036854775807 FROM s WHERE id < 3;
UPDATE s SET x = (SELECT sum(x) - 9223372036854775807 - 1 FROM s WHERE id < 3) WHERE id = 3;
SELECT id, x FROM s ORDER BY id;
-- => [(1, 9223372036854775807), (2, 9223372036854775807), (3, 9223372036854775806),
--     (100, 9223372036854775807)]
