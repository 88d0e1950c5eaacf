-- Aggregates: count(*), count(col), sum, avg, min, max; GROUP BY, HAVING; empty tables.
-- PostgreSQL's types: count → bigint; sum(int) → bigint, sum(bigint) → numeric,
-- sum(real) → real; avg(int) → numeric, avg(float) → double; min/max keep the column's type.
CREATE TABLE sales (id bigint PRIMARY KEY, region text, units int, amount double precision,
                    big bigint, ok boolean);
INSERT INTO sales VALUES
    (1, 'north', 3, 1.5, 10, true),
    (2, 'north', 5, 2.25, 20, false),
    (3, 'south', 2, 4.0, 30, true),
    (4, 'south', NULL, 0.75, NULL, true),
    (5, 'east', 10, NULL, 50, NULL),
    (6, NULL, 1, 0.5, 60, false);

SELECT count(*) FROM sales;
-- => [(6,)]
SELECT count(units), count(amount), count(region), count(id) FROM sales;
-- => [(5, 5, 5, 6)]
SELECT sum(units), sum(amount), sum(big) FROM sales;
-- => [(21, 9.0, 170)]
SELECT avg(units), avg(amount), avg(big) FROM sales;
-- => [(4.2, 1.8, 34)]
SELECT min(units), max(units), min(amount), max(amount), min(region), max(region) FROM sales;
-- => [(1, 10, 0.5, 4.0, 'east', 'south')]
SELECT count(*), sum(units) FROM sales WHERE region = 'north';
-- => [(2, 8)]
SELECT count(*) AS n, max(amount) AS top FROM sales WHERE units > 2;
-- => [(3, 2.25)]
SELECT sum(units * 2), max(amount + 1) FROM sales;
-- => [(42, 5.0)]
SELECT count(*) FROM sales WHERE ok;
-- => [(3,)]

-- GROUP BY (NULL is a group of its own)
SELECT region, count(*), sum(units) FROM sales GROUP BY region;
-- => [('east', 1, 10), ('north', 2, 8), ('south', 2, 2), (None, 1, 1)]
SELECT region, count(*) AS n, avg(amount) AS mean FROM sales GROUP BY region ORDER BY region;
-- => [('east', 1, None), ('north', 2, 1.875), ('south', 2, 2.375), (None, 1, 0.5)]
SELECT region, min(units), max(units) FROM sales WHERE units IS NOT NULL GROUP BY region ORDER BY region DESC;
-- => [(None, 1, 1), ('south', 2, 2), ('north', 3, 5), ('east', 10, 10)]
SELECT ok, count(*) FROM sales GROUP BY ok ORDER BY ok;
-- => [(False, 2), (True, 3), (None, 1)]
SELECT region, ok, count(*) FROM sales GROUP BY region, ok ORDER BY region, ok;
-- => [('east', None, 1), ('north', False, 1), ('north', True, 1), ('south', True, 2), (None, False, 1)]
SELECT region, count(*) FROM sales GROUP BY region ORDER BY count(*) DESC, region;
-- => [('north', 2), ('south', 2), ('east', 1), (None, 1)]
SELECT region, sum(units) AS total FROM sales GROUP BY region ORDER BY total DESC NULLS LAST LIMIT 2;
-- => [('east', 10), ('north', 8)]
SELECT count(*) FROM sales GROUP BY region;
-- => [(1,), (2,), (2,), (1,)]

-- HAVING
SELECT region, count(*) FROM sales GROUP BY region HAVING count(*) > 1;
-- => [('north', 2), ('south', 2)]
SELECT region, sum(amount) FROM sales GROUP BY region HAVING sum(amount) >= 3.5 ORDER BY region;
-- => [('north', 3.75), ('south', 4.75)]
SELECT region FROM sales GROUP BY region HAVING max(units) < 3;
-- => [('south',), (None,)]

-- FILTER (WHERE ...) narrows one aggregate's rows
SELECT count(*) FILTER (WHERE units > 2), sum(units) FILTER (WHERE region = 'north'), count(*) FROM sales;
-- => [(3, 8, 6)]

-- a column neither grouped nor aggregated
SELECT region, units FROM sales GROUP BY region;
-- !! 42803
SELECT sum(nothing) FROM sales;
-- !! 42703
SELECT sum(region) FROM sales;
-- !! 42883

-- empty input: one row without GROUP BY (count 0, the others NULL), none with it
CREATE TABLE empty (id bigint PRIMARY KEY, region text, units int, amount double precision);
SELECT count(*), count(units), sum(units), avg(units), min(units), max(amount) FROM empty;
-- => [(0, 0, None, None, None, None)]
SELECT region, count(*) FROM empty GROUP BY region;
-- => []
SELECT count(*), sum(units) FROM sales WHERE id > 100;
-- => [(0, None)]
SELECT region, count(*) FROM sales WHERE id > 100 GROUP BY region;
-- => []
