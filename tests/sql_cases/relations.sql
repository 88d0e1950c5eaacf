-- Joins (INNER, LEFT, RIGHT, FULL, CROSS; aliases, derived tables, NULL keys, empty
-- sides), UNION [ALL] with ORDER BY / LIMIT, and the ranking window functions.
CREATE TABLE a (id bigint PRIMARY KEY, k int, name text);
CREATE TABLE b (id bigint PRIMARY KEY, k int, label text, w double precision);
CREATE TABLE e (id bigint PRIMARY KEY, k int);
CREATE TABLE docs (id bigint PRIMARY KEY, body text, v vector(2));
INSERT INTO a VALUES (1, 10, 'one'), (2, 20, 'two'), (3, 20, 'three'), (4, NULL, 'four'),
    (5, 50, 'five');
INSERT INTO b VALUES (1, 20, 'x', 1.5), (2, 20, 'y', 2.5), (3, 30, 'z', NULL), (4, NULL, 'n', 0.5),
    (5, 10, 'w', 4.0);
INSERT INTO docs VALUES (1, 'apple pie', '[1,0]'), (2, 'banana bread', '[0,1]'),
    (3, 'cherry tart', '[1,1]'), (4, 'date loaf and apple', '[2,3]'), (5, 'elderflower', '[5,1]');

-- inner: duplicates on both sides pair up, NULL keys never match
SELECT a.id, b.id FROM a JOIN b ON a.k = b.k;
-- => [(1, 5), (2, 1), (2, 2), (3, 1), (3, 2)]
SELECT a.id, b.id FROM a INNER JOIN b ON a.k = b.k ORDER BY a.id DESC, b.id DESC;
-- => [(3, 2), (3, 1), (2, 2), (2, 1), (1, 5)]
SELECT count(*) FROM a JOIN b ON a.k = b.k;
-- => [(5,)]
-- outer joins keep their side's unmatched rows, NULL opposite
SELECT a.id, b.id FROM a LEFT JOIN b ON a.k = b.k;
-- => [(1, 5), (2, 1), (2, 2), (3, 1), (3, 2), (4, None), (5, None)]
SELECT a.id, b.id FROM a LEFT OUTER JOIN b ON a.k = b.k ORDER BY a.id, b.id NULLS FIRST;
-- => [(1, 5), (2, 1), (2, 2), (3, 1), (3, 2), (4, None), (5, None)]
SELECT a.id, b.id FROM a RIGHT JOIN b ON a.k = b.k;
-- => [(1, 5), (2, 1), (2, 2), (3, 1), (3, 2), (None, 3), (None, 4)]
SELECT a.id, b.id FROM a FULL JOIN b ON a.k = b.k;
-- => [(1, 5), (2, 1), (2, 2), (3, 1), (3, 2), (4, None), (5, None), (None, 3), (None, 4)]
SELECT a.name, b.label, a.k, b.k FROM a FULL OUTER JOIN b ON a.k = b.k WHERE a.k IS NULL OR b.k IS NULL;
-- => [('four', None, None, None), ('five', None, 50, None), (None, 'z', None, 30), (None, 'n', None, None)]
-- cross joins: CROSS JOIN, a FROM list, ON true
SELECT count(*) FROM a CROSS JOIN b;
-- => [(25,)]
SELECT a.id, b.id FROM a, b WHERE a.k = b.k AND b.w > 2;
-- => [(1, 5), (2, 2), (3, 2)]
SELECT count(*), sum(a.id), sum(b.id) FROM a JOIN b ON true;
-- => [(25, 75, 75)]
SELECT x.id, y.id FROM a x, b y, e z;
-- => []
-- aliases, bare names that one relation has, and the ambiguous ones
SELECT x.name, y.label FROM a AS x JOIN b y ON x.k = y.k ORDER BY x.name, y.label;
-- => [('one', 'w'), ('three', 'x'), ('three', 'y'), ('two', 'x'), ('two', 'y')]
SELECT name, label FROM a JOIN b ON a.k = b.k WHERE w < 2 ORDER BY name;
-- => [('three', 'x'), ('two', 'x')]
SELECT id FROM a JOIN b ON a.k = b.k;
-- !! 42702
SELECT a.id FROM a JOIN b ON k = b.k;
-- !! 42702
SELECT a.nothing FROM a JOIN b ON a.k = b.k;
-- !! 42703
SELECT a.id FROM a JOIN b ON a.k = c.k;
-- !! 42P01
SELECT x.id FROM a x JOIN b x ON x.k = x.k;
-- !! 42712
SELECT a.id FROM a JOIN b ON a.name = b.k;
-- !! 42883
-- * and alias.*
SELECT * FROM a JOIN b ON a.k = b.k ORDER BY a.id, b.id LIMIT 2;
-- => [(1, 10, 'one', 5, 10, 'w', 4.0), (2, 20, 'two', 1, 20, 'x', 1.5)]
SELECT b.*, a.name FROM a JOIN b ON a.k = b.k WHERE a.id = 1;
-- => [(5, 10, 'w', 4.0, 'one')]
-- ON beyond equality: the rest is tested on the matched pairs (an outer join keeps the others)
SELECT a.id, b.id FROM a JOIN b ON a.k = b.k AND b.w > 2;
-- => [(1, 5), (2, 2), (3, 2)]
SELECT a.id, b.id FROM a LEFT JOIN b ON a.k = b.k AND b.w > 2 ORDER BY a.id;
-- => [(1, 5), (2, 2), (3, 2), (4, None), (5, None)]
SELECT a.id, b.id FROM a LEFT JOIN b ON a.k = b.k AND a.id > 2 ORDER BY a.id, b.id;
-- => [(1, None), (2, None), (3, 1), (3, 2), (4, None), (5, None)]
SELECT a.id, b.id FROM a JOIN b ON a.k < b.k ORDER BY a.id, b.id;
-- => [(1, 1), (1, 2), (1, 3), (2, 3), (3, 3)]
SELECT a.id, b.id FROM a JOIN b ON a.k = b.k OR a.id = b.id ORDER BY a.id, b.id;
-- => [(1, 1), (1, 5), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3), (4, 4), (5, 5)]
SELECT a.id, b.id FROM a JOIN b ON a.k + 10 = b.k ORDER BY a.id, b.id;
-- => [(1, 1), (1, 2), (2, 3), (3, 3)]
-- keys of int and float, text keys, a self join
SELECT a.id, b.id FROM a JOIN b ON a.id = b.w;
-- => [(4, 5)]
SELECT a.id FROM a JOIN b ON a.name = b.label;
-- => []
SELECT x.id, y.id FROM a x JOIN a y ON x.k = y.k AND x.id < y.id;
-- => [(2, 3)]
-- an empty side
SELECT a.id, e.id FROM a JOIN e ON a.k = e.k;
-- => []
SELECT a.id, e.id FROM a LEFT JOIN e ON a.k = e.k ORDER BY a.id;
-- => [(1, None), (2, None), (3, None), (4, None), (5, None)]
SELECT a.id, e.k FROM e RIGHT JOIN a ON a.k = e.k ORDER BY a.id DESC LIMIT 2;
-- => [(5, None), (4, None)]
SELECT count(*) FROM e FULL JOIN a ON e.k = a.k;
-- => [(5,)]
SELECT count(*) FROM a CROSS JOIN e;
-- => [(0,)]
-- three relations
SELECT a.id, b.id, d.id FROM a JOIN b ON a.k = b.k JOIN docs d ON d.id = b.id ORDER BY 1, 2;
-- => [(1, 5, 5), (2, 1, 1), (2, 2, 2), (3, 1, 1), (3, 2, 2)]
SELECT a.id, b.id, e.id FROM a LEFT JOIN b ON a.k = b.k LEFT JOIN e ON e.id = a.id WHERE b.id IS NULL;
-- => [(4, None, None), (5, None, None)]
-- derived tables, WITH queries, a vector top-k subquery as a join input
SELECT s.id, b.label FROM (SELECT id, k FROM a WHERE id > 1) s JOIN b ON s.k = b.k ORDER BY 1, 2;
-- => [(2, 'x'), (2, 'y'), (3, 'x'), (3, 'y')]
SELECT t.x, t.y, b.id FROM (SELECT 20, 'p') AS t(x, y) JOIN b ON b.k = t.x;
-- => [(20, 'p', 1), (20, 'p', 2)]
WITH big AS (SELECT id, k FROM b WHERE w > 1) SELECT a.name, big.id FROM a JOIN big ON a.k = big.k ORDER BY 1, 2;
-- => [('one', 5), ('three', 1), ('three', 2), ('two', 1), ('two', 2)]
SELECT near.id, b.label FROM (SELECT id FROM docs ORDER BY v <-> '[1,1]' LIMIT 3) near LEFT JOIN b ON b.id = near.id + 1 ORDER BY near.id;
-- => [(1, 'y'), (2, 'z'), (3, 'n')]
-- a function beside other relations: a scalar one is one row, its column named as its alias
SELECT a.id, n FROM a, abs(-3) n WHERE a.id < 3 ORDER BY a.id;
-- => [(1, 3), (2, 3)]
SELECT a.id, u.v FROM a JOIN upper('x') AS u(v) ON a.k = 10;
-- => [(1, 'X')]
-- aggregates, ORDER BY and LIMIT over a join
SELECT a.k, count(*), sum(b.w) FROM a JOIN b ON a.k = b.k GROUP BY a.k ORDER BY a.k;
-- => [(10, 1, 4.0), (20, 4, 8.0)]
SELECT a.name, b.label FROM a LEFT JOIN b ON a.k = b.k ORDER BY b.w DESC NULLS LAST, a.name LIMIT 3;
-- => [('one', 'w'), ('three', 'y'), ('two', 'y')]

-- UNION removes duplicate rows (NULLs are equal there), UNION ALL keeps them
SELECT k FROM a UNION SELECT k FROM b ORDER BY k;
-- => [(10,), (20,), (30,), (50,), (None,)]
SELECT k FROM a UNION ALL SELECT k FROM b ORDER BY k;
-- => [(10,), (10,), (20,), (20,), (20,), (20,), (30,), (50,), (None,), (None,)]
SELECT k FROM a UNION SELECT k FROM b ORDER BY k DESC LIMIT 2;
-- => [(None,), (50,)]
SELECT k FROM a UNION ALL SELECT k FROM b ORDER BY 1 LIMIT 3 OFFSET 1;
-- => [(10,), (20,), (20,)]
SELECT k, name FROM a UNION SELECT k, label FROM b ORDER BY name DESC LIMIT 3;
-- => [(30, 'z'), (20, 'y'), (20, 'x')]
SELECT id AS key FROM a WHERE id < 3 UNION ALL SELECT id FROM b WHERE id > 3 ORDER BY key;
-- => [(1,), (2,), (4,), (5,)]
SELECT 1 AS x UNION SELECT 2 UNION SELECT 1;
-- => [(1,), (2,)]
SELECT NULL::int UNION SELECT NULL::int;
-- => [(None,)]
-- a NULL vector has no width: it unions with vectors of any
SELECT NULL::vector UNION SELECT v FROM docs WHERE id < 3 ORDER BY 1 NULLS FIRST;
-- => [(None,), ([0.0, 1.0],), ([1.0, 0.0],)]
SELECT v FROM docs WHERE id = 3 UNION ALL SELECT NULL::vector;
-- => [([1.0, 1.0],), (None,)]
-- an int column meets a float one: float
SELECT k FROM a UNION SELECT w FROM b ORDER BY 1;
-- => [(0.5,), (1.5,), (2.5,), (4.0,), (10.0,), (20.0,), (50.0,), (None,)]
SELECT id FROM a UNION SELECT id, k FROM b;
-- !! 42601
SELECT name FROM a UNION SELECT k FROM b;
-- !! 42804
(SELECT id FROM a ORDER BY id LIMIT 2) UNION ALL (SELECT id FROM b ORDER BY id DESC LIMIT 1) ORDER BY 1;
-- => [(1,), (2,), (5,)]
SELECT count(*) FROM (SELECT k FROM a UNION SELECT k FROM b) u;
-- => [(5,)]
SELECT u.k, a.name FROM (SELECT k FROM b UNION SELECT 50) u JOIN a ON a.k = u.k ORDER BY a.name;
-- => [(50, 'five'), (10, 'one'), (20, 'three'), (20, 'two')]

-- window ranks: ties share a rank, partitions restart
SELECT id, k, rank() OVER (ORDER BY k), dense_rank() OVER (ORDER BY k) FROM a ORDER BY id;
-- => [(1, 10, 1, 1), (2, 20, 2, 2), (3, 20, 2, 2), (4, None, 5, 4), (5, 50, 4, 3)]
SELECT id, row_number() OVER (ORDER BY id DESC) FROM a ORDER BY id;
-- => [(1, 5), (2, 4), (3, 3), (4, 2), (5, 1)]
SELECT id, k, row_number() OVER (PARTITION BY k ORDER BY id DESC) AS n FROM b ORDER BY id;
-- => [(1, 20, 2), (2, 20, 1), (3, 30, 1), (4, None, 1), (5, 10, 1)]
SELECT id, rank() OVER (ORDER BY w DESC) FROM b ORDER BY id;
-- => [(1, 4), (2, 3), (3, 1), (4, 5), (5, 2)]
SELECT id, rank() OVER (ORDER BY w DESC NULLS LAST), dense_rank() OVER (ORDER BY k NULLS FIRST) FROM b ORDER BY id;
-- => [(1, 3, 3), (2, 2, 3), (3, 5, 4), (4, 4, 1), (5, 1, 2)]
SELECT id, rank() OVER (), dense_rank() OVER (PARTITION BY k) FROM a ORDER BY id;
-- => [(1, 1, 1), (2, 1, 1), (3, 1, 1), (4, 1, 1), (5, 1, 1)]
SELECT max(r) FROM (SELECT row_number() OVER () AS r FROM a) s;
-- => [(5,)]
SELECT id FROM a ORDER BY rank() OVER (ORDER BY name);
-- => [(5,), (4,), (1,), (3,), (2,)]
SELECT id, row_number() OVER (ORDER BY id) FROM a ORDER BY id DESC LIMIT 2;
-- => [(5, 5), (4, 4)]
SELECT a.id, b.id, rank() OVER (PARTITION BY a.id ORDER BY b.w DESC) FROM a JOIN b ON a.k = b.k ORDER BY 1, 2;
-- => [(1, 5, 1), (2, 1, 2), (2, 2, 1), (3, 1, 2), (3, 2, 1)]
SELECT k, count(*), rank() OVER (ORDER BY count(*) DESC) FROM b GROUP BY k ORDER BY k;
-- => [(10, 1, 2), (20, 2, 1), (30, 1, 2), (None, 1, 2)]
SELECT id FROM a WHERE rank() OVER (ORDER BY id) < 3;
-- !! 42P20
-- over a vector top-k: ranks in its own order, or over every row
SELECT id, rank() OVER (ORDER BY v <-> '[1,1]') FROM docs ORDER BY v <-> '[1,1]' LIMIT 3;
-- => [(3, 1), (1, 2), (2, 2)]
SELECT id, row_number() OVER (ORDER BY id DESC) FROM docs ORDER BY v <-> '[0.1,0]' LIMIT 2;
-- => [(1, 5), (2, 4)]
SELECT id, rank() OVER (ORDER BY v <-> NULL) FROM docs ORDER BY v <-> NULL LIMIT 2;
-- => [(1, 1), (2, 1)]
-- the hybrid search idiom: two ranked halves, fused by reciprocal rank over a FULL JOIN
WITH semantic AS (
    SELECT id, rank() OVER (ORDER BY v <=> '[1,0]') AS rank FROM docs ORDER BY v <=> '[1,0]' LIMIT 3
), keyword AS (
    SELECT id, rank() OVER (ORDER BY length(body) DESC) AS rank FROM docs WHERE body LIKE '%a%'
    ORDER BY length(body) DESC LIMIT 3
)
SELECT COALESCE(semantic.id, keyword.id) AS id,
       COALESCE(1.0 / (60 + semantic.rank), 0.0) + COALESCE(1.0 / (60 + keyword.rank), 0.0) AS score
FROM semantic FULL OUTER JOIN keyword ON semantic.id = keyword.id
ORDER BY score DESC, id LIMIT 5;
-- => [(3, 0.031746031746031744), (1, 0.01639344262295082), (4, 0.01639344262295082), (2, 0.016129032258064516), (5, 0.016129032258064516)]
-- a derived table that is itself a join, joined: its own WHERE and SELECT read columns the
-- outer statement does not (SQLAlchemy's reflection writes its catalog queries so)
INSERT INTO e VALUES (1, 20), (2, 30);
SELECT e.id, x.label FROM e JOIN (SELECT b.k AS k, b.label AS label FROM a JOIN b ON a.k = b.k
    WHERE a.name LIKE 't%' AND b.w > 2) AS x ON x.k = e.k ORDER BY e.id;
-- => [(1, 'y'), (1, 'y')]
-- a derived table's column aliases, AS v(a, b): the first columns renamed (SQLAlchemy's
-- insertmanyvalues writes INSERT ... SELECT p0, p1 FROM (VALUES ...) AS imp_sen(p0, p1, ...))
SELECT v.a, v.b FROM (VALUES (1, 'x'), (2, 'y')) AS v(a, b) ORDER BY v.a DESC;
-- => [(2, 'y'), (1, 'x')]
SELECT a, column2 FROM (VALUES (1, 'x')) AS v(a);
-- => [(1, 'x')]
SELECT * FROM (VALUES (1)) AS v(a, b);
-- !! 42P10
INSERT INTO e (id, k) SELECT p0, p1 FROM (VALUES (10, 1, 0), (11, 2, 1))
    AS imp_sen(p0, p1, sen_counter) ORDER BY sen_counter RETURNING e.id, e.k;
-- => [(10, 1), (11, 2)]
-- insertmanyvalues' casts of a VALUES column that is NULL in every row: NULLs of that type
CREATE TABLE vecs (id bigint PRIMARY KEY, e vector(3), h halfvec(2));
INSERT INTO vecs (id, e, h) SELECT p0, p1::vector(3), p2::halfvec(2)
    FROM (VALUES (1, '[1,2,3]', NULL, 0), (2, NULL, NULL, 1)) AS imp_sen(p0, p1, p2, sen_counter)
    ORDER BY sen_counter RETURNING vecs.id;
-- => [(1,), (2,)]
SELECT id, e, h FROM vecs ORDER BY id;
-- => [(1, [1.0, 2.0, 3.0], None), (2, None, None)]
