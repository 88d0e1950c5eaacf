-- A relation's column aliases, FROM x AS alias (a, b, ...) and WITH name (a, b, ...) AS:
-- the first columns renamed, the rest kept; more aliases than columns: 42P10.
CREATE TABLE items (id bigint PRIMARY KEY, name text, embedding vector(2));
INSERT INTO items VALUES (1, 'a', '[1,2]'), (2, 'b', '[3,4]'), (3, 'c', NULL);
SELECT v FROM (VALUES ('[1,2]'), ('[1,2,3]')) t(v);
-- => [('[1,2]',), ('[1,2,3]',)]
SELECT a, b FROM (VALUES (1, 'x'), (2, 'y')) AS t(a, b) ORDER BY a;
-- => [(1, 'x'), (2, 'y')]
SELECT t.a, column2 FROM (VALUES (1, 'x'), (2, 'y')) AS t(a) ORDER BY 1;
-- => [(1, 'x'), (2, 'y')]
SELECT * FROM (VALUES (1, 'x')) AS t(a, b, c);
-- !! 42P10
SELECT * FROM (SELECT id, name FROM items) AS t(x, y) ORDER BY x;
-- => [(1, 'a'), (2, 'b'), (3, 'c')]
SELECT y FROM (SELECT id, name FROM items) AS t(x, y) WHERE x = 2;
-- => [('b',)]
SELECT id FROM (SELECT id, name FROM items) AS t(x, y);
-- !! 42703
SELECT a FROM (SELECT 1 UNION ALL SELECT 2) AS t(a) ORDER BY a;
-- => [(1,), (2,)]
SELECT k, count(*) FROM (SELECT id % 2, name FROM items) AS t(k) GROUP BY k ORDER BY k;
-- => [(0, 1), (1, 2)]
WITH t(a, b) AS (SELECT id, name FROM items) SELECT a, b FROM t ORDER BY a;
-- => [(1, 'a'), (2, 'b'), (3, 'c')]
WITH t(a) AS (SELECT id, name FROM items) SELECT * FROM t ORDER BY a;
-- => [(1, 'a'), (2, 'b'), (3, 'c')]
WITH t(a, b, c) AS (SELECT id, name FROM items) SELECT * FROM t;
-- !! 42P10
WITH t(a, b) AS (SELECT id, name FROM items)
SELECT t.a, u.name FROM t JOIN items u ON u.id = t.a ORDER BY 1;
-- => [(1, 'a'), (2, 'b'), (3, 'c')]
SELECT i.a, i.b FROM items AS i(a, b) ORDER BY 1;
-- => [(1, 'a'), (2, 'b'), (3, 'c')]
SELECT a, embedding FROM items i(a) WHERE a > 1 ORDER BY a;
-- => [(2, [3.0, 4.0]), (3, None)]
SELECT * FROM items i(a, b, c, d);
-- !! 42P10
SELECT t.x, u.y FROM (VALUES (1), (2)) t(x) JOIN (VALUES (2), (3)) u(y) ON t.x = u.y;
-- => [(2, 2)]
SELECT x FROM generate_series(1, 3) AS g(x) WHERE x > 1 ORDER BY x;
-- => [(2,), (3,)]
SELECT * FROM generate_series(1, 2) AS g(x, y);
-- !! 42P10
SELECT s FROM (VALUES ('{1:1}/3'::sparsevec), (NULL)) v(s) ORDER BY s;
-- => [('{1:1}/3',), (None,)]
-- a new name that a later column has: two columns of that name, each kept by its
-- position; a reference to the name is ambiguous (red-team 8 F08)
CREATE TABLE g (id bigint PRIMARY KEY, i int, b boolean);
INSERT INTO g VALUES (1, 10, true), (3, 30, false);
SELECT * FROM g AS x(a, b) ORDER BY a;
-- => [(1, 10, True), (3, 30, False)]
SELECT x.* FROM g AS x(a, b) WHERE a > 1;
-- => [(3, 30, False)]
SELECT x.b FROM g AS x(a, b);
-- !! 42702
SELECT b FROM g AS x(a, b);
-- !! 42702
SELECT a FROM g AS x(a, b) ORDER BY a;
-- => [(1,), (3,)]
SELECT * FROM (SELECT 1 AS a, 2 AS a) s;
-- => [(1, 2)]
SELECT s.a FROM (SELECT 1 AS a, 2 AS a) s;
-- !! 42702
SELECT * FROM (VALUES (1, 2)) v(column2);
-- => [(1, 2)]
SELECT y.i FROM g AS x(a, b) JOIN g y ON x.a = y.id ORDER BY 1;
-- => [(10,), (30,)]
SELECT x.b FROM g AS x(a, b) JOIN g y ON x.a = y.id;
-- !! 42702
SELECT y.id FROM g AS x(a, b) JOIN g y ON x.b = y.b;
-- !! 42702
