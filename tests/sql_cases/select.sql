-- SELECT: columns, *, expressions and aliases, WHERE, ORDER BY, LIMIT/OFFSET, DISTINCT.
CREATE TABLE fruit (id bigint PRIMARY KEY, name text, color text, qty int, price double precision,
                    ripe boolean);
INSERT INTO fruit VALUES
    (1, 'apple', 'red', 3, 0.5, true),
    (2, 'banana', 'yellow', 12, 0.25, true),
    (3, 'cherry', 'red', 40, 0.125, false),
    (4, 'date', 'brown', NULL, 2.5, true),
    (5, 'elder', NULL, 7, NULL, NULL),
    (6, 'fig', 'purple', 0, 1.75, false),
    (7, 'Grape', 'purple', 25, 0.75, true);

SELECT * FROM fruit WHERE id = 1;
-- => [(1, 'apple', 'red', 3, 0.5, True)]
SELECT name, id FROM fruit WHERE id < 3;
-- => [('apple', 1), ('banana', 2)]
SELECT * FROM fruit WHERE id = 99;
-- => []
SELECT nothing FROM fruit;
-- !! 42703
SELECT * FROM nowhere;
-- !! 42P01
SELECT name FROM fruit WHERE nothing = 1;
-- !! 42703

-- expressions and aliases
SELECT id, qty * price AS total, qty + 1, price * 2 AS double_price FROM fruit WHERE id <= 3 ORDER BY id;
-- => [(1, 1.5, 4, 1.0), (2, 3.0, 13, 0.5), (3, 5.0, 41, 0.25)]
SELECT id, qty - 10 AS delta, -qty AS neg, qty % 5 AS rest FROM fruit WHERE id IN (1, 2, 3) ORDER BY id;
-- => [(1, -7, -3, 3), (2, 2, -12, 2), (3, 30, -40, 0)]
-- NULL in, NULL out
SELECT id, qty * 2, price + 1 FROM fruit WHERE id IN (4, 5) ORDER BY id;
-- => [(4, None, 3.5), (5, 14, None)]
-- integer division truncates toward zero; a float operand makes it float
SELECT 7 / 2, -7 / 2, 7 % 3, 7.0 / 2, 1 + 2 * 3, (1 + 2) * 3;
-- => [(3, -3, 1, 3.5, 7, 9)]
SELECT id, qty / 5 AS fifths FROM fruit WHERE id IN (1, 2, 3) ORDER BY id;
-- => [(1, 0), (2, 2), (3, 8)]
SELECT 1 / 0;
-- !! 22012
SELECT id, name AS fruit_name FROM fruit WHERE id = 2;
-- => [(2, 'banana')]
SELECT id AS key FROM fruit ORDER BY key DESC LIMIT 2;
-- => [(7,), (6,)]

-- WHERE: comparisons, AND / OR / NOT, IN, BETWEEN, IS [NOT] NULL, LIKE
SELECT id FROM fruit WHERE qty > 5 AND price < 1;
-- => [(2,), (3,), (7,)]
SELECT id FROM fruit WHERE color = 'red' OR qty = 0;
-- => [(1,), (3,), (6,)]
SELECT id FROM fruit WHERE NOT ripe;
-- => [(3,), (6,)]
SELECT id FROM fruit WHERE ripe;
-- => [(1,), (2,), (4,), (7,)]
SELECT id FROM fruit WHERE ripe = false OR ripe IS NULL;
-- => [(3,), (5,), (6,)]
SELECT id FROM fruit WHERE color <> 'red';
-- => [(2,), (4,), (6,), (7,)]
SELECT id FROM fruit WHERE color != 'red' AND qty >= 12;
-- => [(2,), (7,)]
SELECT id FROM fruit WHERE NOT (color = 'red' OR color = 'purple');
-- => [(2,), (4,)]
SELECT id FROM fruit WHERE color IN ('red', 'brown');
-- => [(1,), (3,), (4,)]
SELECT id FROM fruit WHERE color NOT IN ('red', 'brown');
-- => [(2,), (6,), (7,)]
SELECT id FROM fruit WHERE qty BETWEEN 3 AND 12;
-- => [(1,), (2,), (5,)]
SELECT id FROM fruit WHERE qty NOT BETWEEN 3 AND 12;
-- => [(3,), (6,), (7,)]
SELECT id FROM fruit WHERE price BETWEEN 0.25 AND 0.75;
-- => [(1,), (2,), (7,)]
SELECT id FROM fruit WHERE qty IS NULL;
-- => [(4,)]
SELECT id FROM fruit WHERE color IS NULL OR price IS NULL;
-- => [(5,)]
SELECT id FROM fruit WHERE qty IS NOT NULL AND price IS NOT NULL;
-- => [(1,), (2,), (3,), (6,), (7,)]
SELECT id FROM fruit WHERE name LIKE 'c%';
-- => [(3,)]
SELECT id FROM fruit WHERE name LIKE '%e';
-- => [(1,), (4,), (7,)]
SELECT id FROM fruit WHERE name LIKE '_a%';
-- => [(2,), (4,)]
SELECT id FROM fruit WHERE name LIKE 'g%';
-- => []
SELECT id FROM fruit WHERE name NOT LIKE '%a%';
-- => [(3,), (5,), (6,)]
-- three-valued logic: a comparison with NULL is unknown, and so is x IN (.., NULL) when x is not there
SELECT id FROM fruit WHERE color = NULL;
-- => []
SELECT id FROM fruit WHERE qty NOT IN (3, NULL);
-- => []
SELECT id FROM fruit WHERE qty IN (3, NULL);
-- => [(1,)]
SELECT id FROM fruit WHERE NOT (qty > 10);
-- => [(1,), (5,), (6,)]
SELECT id FROM fruit WHERE id = 1 OR NULL;
-- => [(1,)]
SELECT id FROM fruit WHERE 'abc' > 1;
-- !! 22P02

-- ORDER BY: ASC puts NULLs last, DESC puts them first, unless told
SELECT id, qty FROM fruit ORDER BY qty;
-- => [(6, 0), (1, 3), (5, 7), (2, 12), (7, 25), (3, 40), (4, None)]
SELECT id, qty FROM fruit ORDER BY qty DESC;
-- => [(4, None), (3, 40), (7, 25), (2, 12), (5, 7), (1, 3), (6, 0)]
SELECT id, qty FROM fruit ORDER BY qty ASC NULLS FIRST;
-- => [(4, None), (6, 0), (1, 3), (5, 7), (2, 12), (7, 25), (3, 40)]
SELECT id, qty FROM fruit ORDER BY qty DESC NULLS LAST;
-- => [(3, 40), (7, 25), (2, 12), (5, 7), (1, 3), (6, 0), (4, None)]
SELECT id, price FROM fruit ORDER BY price DESC, id;
-- => [(5, None), (4, 2.5), (6, 1.75), (7, 0.75), (1, 0.5), (2, 0.25), (3, 0.125)]
-- text sorts by code point here (the C collation): 'Grape' before 'apple'
SELECT name FROM fruit ORDER BY name;
-- => [('Grape',), ('apple',), ('banana',), ('cherry',), ('date',), ('elder',), ('fig',)]
SELECT color, id FROM fruit ORDER BY color, id DESC;
-- => [('brown', 4), ('purple', 7), ('purple', 6), ('red', 3), ('red', 1), ('yellow', 2), (None, 5)]
SELECT id, ripe FROM fruit ORDER BY ripe, id;
-- => [(3, False), (6, False), (1, True), (2, True), (4, True), (7, True), (5, None)]
SELECT id FROM fruit ORDER BY qty * price DESC NULLS LAST, id LIMIT 3;
-- => [(7,), (3,), (2,)]
SELECT id FROM fruit ORDER BY nothing;
-- !! 42703

-- LIMIT / OFFSET
SELECT id FROM fruit ORDER BY id LIMIT 3;
-- => [(1,), (2,), (3,)]
SELECT id FROM fruit ORDER BY id LIMIT 3 OFFSET 2;
-- => [(3,), (4,), (5,)]
SELECT id FROM fruit ORDER BY id OFFSET 5;
-- => [(6,), (7,)]
SELECT id FROM fruit ORDER BY id LIMIT 0;
-- => []
SELECT id FROM fruit ORDER BY id LIMIT 10 OFFSET 10;
-- => []
SELECT id FROM fruit ORDER BY price LIMIT 2;
-- => [(3,), (2,)]
SELECT id FROM fruit ORDER BY id LIMIT -1;
-- !! 2201W

-- DISTINCT (NULL is one value)
SELECT DISTINCT color FROM fruit;
-- => [('brown',), ('purple',), ('red',), ('yellow',), (None,)]
SELECT DISTINCT color FROM fruit ORDER BY color;
-- => [('brown',), ('purple',), ('red',), ('yellow',), (None,)]
SELECT DISTINCT ripe, color FROM fruit WHERE ripe IS NOT NULL ORDER BY ripe, color;
-- => [(False, 'purple'), (False, 'red'), (True, 'brown'), (True, 'purple'), (True, 'red'), (True, 'yellow')]
SELECT DISTINCT color FROM fruit ORDER BY color LIMIT 2;
-- => [('brown',), ('purple',)]

-- a SELECT without FROM
SELECT 1 AS one, 'x' AS letter, true AS yes, NULL AS nothing;
-- => [(1, 'x', True, None)]
