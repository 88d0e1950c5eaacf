-- A CASE branch that no row takes, and an expression over zero rows (an empty table,
-- a WHERE that keeps nothing), cannot fail: an untyped literal is typed from its text
-- (a vector literal keeps its dimension), a function's constant arguments are read
-- from the query, and nothing is computed for rows that do not exist.
CREATE TABLE t (id int PRIMARY KEY, x int, v vector(3));
CREATE TABLE e (id int PRIMARY KEY, x int, v vector(3));
INSERT INTO t VALUES (1, 1, '[1,2,3]'), (2, 2, '[3,2,1]');

SELECT id, CASE WHEN x > 5 THEN v <-> '[1,2,3]' ELSE -1 END FROM t ORDER BY id;
-- => [(1, -1), (2, -1)]
SELECT id, CASE WHEN x > 5 THEN v <#> '[1,2,3]' ELSE -1 END FROM t ORDER BY id;
-- => [(1, -1), (2, -1)]
SELECT id, CASE WHEN x > 5 THEN v <=> '[1,2,3]' ELSE -1 END FROM t ORDER BY id;
-- => [(1, -1), (2, -1)]
SELECT id, CASE WHEN x > 5 THEN cosine_distance(v, '[1,2,3]') ELSE -1 END FROM t ORDER BY id;
-- => [(1, -1), (2, -1)]
SELECT id, CASE WHEN x > 5 THEN l2_distance(v, '[1,2,3]') ELSE -1 END FROM t ORDER BY id;
-- => [(1, -1), (2, -1)]
SELECT id, CASE WHEN x > 5 THEN inner_product(v, '[1,2,3]') ELSE -1 END FROM t ORDER BY id;
-- => [(1, -1), (2, -1)]
SELECT id, CASE WHEN id = 99 THEN subvector(v, 1, 2) END FROM t ORDER BY id;
-- => [(1, None), (2, None)]
SELECT id, CASE WHEN id = 99 THEN v + '[1,2,3]' ELSE v END FROM t ORDER BY id;
-- => [(1, [1, 2, 3]), (2, [3, 2, 1])]
SELECT id FROM t WHERE CASE WHEN x > 5 THEN v <-> '[1,2,3]' < 1 ELSE x = 2 END;
-- => [(2,)]
SELECT id FROM t WHERE CASE WHEN x > 5 THEN cosine_distance(v, '[1,2,3]') < 1 ELSE true END;
-- => [(1,), (2,)]
SELECT id FROM t WHERE CASE WHEN x > 5 THEN (v <#> '[1,2,3]') < 0 ELSE x = 1 END;
-- => [(1,)]
SELECT count(*) FROM t WHERE CASE WHEN id = 99 THEN subvector(v, 1, 2) = '[1,2]' END;
-- => [(0,)]

-- a branch some rows take: those rows computed, the others not
SELECT id, CASE WHEN x > 1 THEN v <-> '[3,2,1]' ELSE -1 END FROM t ORDER BY id;
-- => [(1, -1), (2, 0)]
SELECT id, CASE WHEN x > 1 THEN subvector(v, 2, 2) ELSE '[0,0]' END FROM t ORDER BY id;
-- => [(1, [0, 0]), (2, [2, 1])]
SELECT id, CASE WHEN x > 1 THEN cosine_distance(v, '[3,2,1]') WHEN x > 5 THEN v <-> '[1,2,3]' END
    FROM t ORDER BY id;
-- => [(1, None), (2, 0)]

-- zero rows: an empty table, and a WHERE that keeps none
SELECT id, v <-> '[1,2,3]', v <#> '[1,2,3]', v <=> '[1,2,3]', cosine_distance(v, '[1,2,3]'),
       subvector(v, 1, 2), v + '[1,2,3]' FROM e;
-- => []
SELECT id, CASE WHEN x > 5 THEN v <-> '[1,2,3]' ELSE -1 END FROM e;
-- => []
SELECT id FROM e WHERE v <-> '[1,2,3]' < 1 OR cosine_distance(v, '[1,2,3]') < 1;
-- => []
SELECT count(*) FROM e WHERE CASE WHEN x > 5 THEN v <-> '[1,2,3]' < 1 END;
-- => [(0,)]
SELECT id, v <-> '[1,2,3]', subvector(v, 2, 2) FROM t WHERE x > 5;
-- => []
SELECT count(*), sum(CASE WHEN x > 5 THEN v <-> '[1,2,3]' ELSE 0 END) FROM e;
-- => [(0, None)]

-- CASE and coalesce results: NULL rows of text are NULL to the functions after them,
-- a vector result has the dimension of the rows that have it
CREATE TABLE w (id int PRIMARY KEY, v vector(3), s text);
INSERT INTO w VALUES (1, NULL, NULL), (2, '[1,2,3]', 'B');
SELECT id, lower(CASE WHEN id > 1 THEN 'A' END), length(CASE WHEN id > 1 THEN s END),
       upper(coalesce(s, NULL)) FROM w ORDER BY id;
-- => [(1, None, None, None), (2, 'a', 1, 'B')]
SELECT id, coalesce(v, '[0,0,0]') FROM w ORDER BY id;
-- => [(1, [0, 0, 0]), (2, [1, 2, 3])]
SELECT id, CASE WHEN id = 5 THEN '[1,2]' ELSE v END FROM w ORDER BY id;
-- => [(1, None), (2, [1, 2, 3])]
