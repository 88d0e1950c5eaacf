-- Vectors: literals, the four distance operators in ORDER BY ... LIMIT k (exact: no index),
-- distances as columns, pgvector's functions, halfvec, and the ANN subquery idioms.
-- The vectors lie on a grid of halves (exact in float4 and float16); the query vectors
-- are chosen so that no two rows tie on any of the four distances.
CREATE TABLE items (id bigint PRIMARY KEY, category text, embedding vector(3));
INSERT INTO items VALUES
    (1, 'a', '[2.5,0,-1]'),
    (2, 'b', '[3,0.5,-3]'),
    (3, 'a', '[1.5,3,1.5]'),
    (4, 'b', '[-0.5,1,0.5]'),
    (5, 'a', '[-2.5,-2,1]'),
    (6, 'b', '[-1,1.5,2.5]'),
    (7, 'a', '[-0.5,-2.5,1.5]'),
    (8, 'b', '[-2.5,0,-3]'),
    (9, 'a', '[0,0.5,1]'),
    (10, 'b', '[-3,3,-3]'),
    (11, 'a', NULL);

SELECT id, embedding FROM items WHERE id IN (1, 9, 11) ORDER BY id;
-- => [(1, [2.5, 0.0, -1.0]), (9, [0.0, 0.5, 1.0]), (11, None)]
SELECT '[1,2,3]'::vector, '[1.5, -2, 0]'::vector(3);
-- => [([1.0, 2.0, 3.0], [1.5, -2.0, 0.0])]
-- a vector as text: float4's shortest digits, as pgvector prints it
SELECT embedding::text, CAST(embedding AS text) || '!' FROM items WHERE id = 2;
-- => [('[3,0.5,-3]', '[3,0.5,-3]!')]
SELECT '[-2e-05,0.1,3.3333333,1e+20]'::vector::text;
-- => [('[-2e-05,0.1,3.3333333,1e+20]',)]
SELECT '[1,2,3]'::vector(2);
-- !! 22000
SELECT 'nonsense'::vector;
-- !! 22P02

-- nearest neighbours, each operator: <-> L2, <#> negative inner product, <=> cosine, <+> L1
SELECT id FROM items ORDER BY embedding <-> '[0.3,1.1,2.7]' LIMIT 5;
-- => [(6,), (9,), (4,), (3,), (7,)]
SELECT id FROM items ORDER BY embedding <#> '[0.3,1.1,2.7]' LIMIT 5;
-- => [(6,), (3,), (9,), (4,), (7,)]
SELECT id FROM items ORDER BY embedding <=> '[0.3,1.1,2.7]' LIMIT 5;
-- => [(9,), (6,), (3,), (4,), (7,)]
SELECT id FROM items ORDER BY embedding <+> '[0.3,1.1,2.7]' LIMIT 5;
-- => [(6,), (9,), (4,), (3,), (7,)]
SELECT id FROM items ORDER BY embedding <-> '[-1.2,0.4,1.9]' LIMIT 3;
-- => [(6,), (9,), (4,)]
SELECT id FROM items ORDER BY embedding <#> '[-1.2,0.4,1.9]' LIMIT 3;
-- => [(6,), (5,), (7,)]
SELECT id FROM items ORDER BY embedding <=> '[-1.2,0.4,1.9]' LIMIT 3;
-- => [(6,), (9,), (4,)]
SELECT id FROM items ORDER BY embedding <+> '[-1.2,0.4,1.9]' LIMIT 3;
-- => [(6,), (9,), (4,)]
SELECT id FROM items ORDER BY embedding <-> '[0.3,1.1,2.7]' LIMIT 3 OFFSET 2;
-- => [(4,), (3,), (7,)]
SELECT id FROM items ORDER BY embedding <-> '[0.3,1.1,2.7]'::vector(3) LIMIT 1;
-- => [(6,)]
-- filtered: the k nearest among the rows that pass
SELECT id FROM items WHERE category = 'a' ORDER BY embedding <-> '[0.3,1.1,2.7]' LIMIT 3;
-- => [(9,), (3,), (7,)]
SELECT id FROM items WHERE category = 'b' AND id > 2 ORDER BY embedding <=> '[-1.2,0.4,1.9]' LIMIT 2;
-- => [(6,), (4,)]
SELECT id FROM items WHERE id IN (2, 5, 8) ORDER BY embedding <#> '[0.3,1.1,2.7]' LIMIT 10;
-- => [(5,), (2,), (8,)]
SELECT id FROM items WHERE category = 'z' ORDER BY embedding <-> '[0.3,1.1,2.7]' LIMIT 3;
-- => []

-- distances as output columns
SELECT id, embedding <-> '[1,1,1]' AS distance FROM items WHERE id <= 4 ORDER BY id;
-- => [(1, 2.6925824), (2, 4.5), (3, 2.12132034), (4, 1.58113883)]
SELECT id, embedding <-> '[1,1,1]' AS distance FROM items ORDER BY distance LIMIT 3;
-- => [(9, 1.11803399), (4, 1.58113883), (3, 2.12132034)]
SELECT id, embedding <#> '[1,1,1]' AS neg_ip, embedding <=> '[1,1,1]' AS cos,
       embedding <+> '[1,1,1]' AS l1 FROM items WHERE id IN (3, 7) ORDER BY id;
-- => [(3, -6.0, 0.0571909584, 3.0), (7, 1.5, 1.29277002, 5.5)]
SELECT id, embedding <-> '[0.3,1.1,2.7]' AS d FROM items ORDER BY embedding <-> '[0.3,1.1,2.7]' LIMIT 2;
-- => [(6, 1.37477262), (9, 1.82756673)]
SELECT id, embedding <-> '[1,1,1]' FROM items WHERE id = 11;
-- => [(11, None)]
SELECT embedding <-> '[1,2]' FROM items;
-- !! 22000

-- functions
SELECT id, l2_distance(embedding, '[1,1,1]'), cosine_distance(embedding, '[1,1,1]'),
       inner_product(embedding, '[1,1,1]'), l1_distance(embedding, '[1,1,1]')
    FROM items WHERE id IN (1, 4) ORDER BY id;
-- => [(1, 2.6925824, 0.67836624, 1.5, 4.5), (4, 1.58113883, 0.528595479, 1.0, 2.0)]
SELECT id, vector_dims(embedding), vector_norm(embedding) FROM items WHERE id IN (1, 3, 11) ORDER BY id;
-- => [(1, 3, 2.6925824), (3, 3, 3.67423461), (11, None, None)]
SELECT l2_normalize('[3,0,4]'::vector), subvector('[1,2,3,4,5]'::vector, 2, 3);
-- => [([0.6, 0.0, 0.8], [2.0, 3.0, 4.0])]
SELECT id, subvector(embedding, 1, 2) FROM items WHERE id = 3;
-- => [(3, [1.5, 3.0])]
SELECT vector_dims('[1,2,3,4]'::vector), vector_norm('[3,4]'::vector);
-- => [(4, 5.0)]
SELECT id FROM items ORDER BY l2_distance(embedding, '[0.3,1.1,2.7]') LIMIT 3;
-- => [(6,), (9,), (4,)]
SELECT id FROM items WHERE embedding <-> '[1,1,1]' < 2 ORDER BY id;
-- => [(4,), (9,)]
SELECT '[1,2,3]'::vector <-> '[1,2,5]'::vector, '[1,1]'::vector <#> '[2,3]'::vector;
-- => [(2.0, -5.0)]

-- the ANN subquery idiom: the k nearest, re-ordered outside
SELECT * FROM (SELECT id, embedding <-> '[0.3,1.1,2.7]' AS d FROM items ORDER BY d LIMIT 5) s ORDER BY id;
-- => [(3, 2.54754789), (4, 2.34307496), (6, 1.37477262), (7, 3.87814376), (9, 1.82756673)]
SELECT id FROM (SELECT id, category FROM items ORDER BY embedding <=> '[-1.2,0.4,1.9]' LIMIT 4) s WHERE category = 'b';
-- => [(6,), (4,)]
SELECT id, category FROM items WHERE id IN (SELECT id FROM items ORDER BY embedding <-> '[0.3,1.1,2.7]' LIMIT 3) ORDER BY id;
-- => [(4, 'b'), (6, 'b'), (9, 'a')]
SELECT id FROM items WHERE id IN (SELECT id FROM items WHERE category = 'b') AND id < 7;
-- => [(2,), (4,), (6,)]
SELECT id FROM items WHERE id NOT IN (SELECT id FROM items WHERE category = 'a');
-- => [(2,), (4,), (6,), (8,), (10,)]

-- halfvec
CREATE TABLE halves (id bigint PRIMARY KEY, h halfvec(3));
INSERT INTO halves VALUES (1, '[1,0.5,0.25]'), (2, '[-1,2,0]'), (3, '[0.75,0.75,-2]'), (4, NULL);
SELECT id, h FROM halves ORDER BY id;
-- => [(1, [1.0, 0.5, 0.25]), (2, [-1.0, 2.0, 0.0]), (3, [0.75, 0.75, -2.0]), (4, None)]
SELECT id FROM halves ORDER BY h <-> '[1,1,1]' LIMIT 2;
-- => [(1,), (2,)]
SELECT id, h <-> '[1,1,1]' AS d, h <=> '[1,1,1]' AS c FROM halves WHERE id <= 3 ORDER BY id;
-- => [(1, 0.901387819, 0.118082896), (2, 2.44948974, 0.74180111), (3, 3.02076149, 1.12751534)]
SELECT id, l2_distance(h, '[0,0,0]'::halfvec), vector_dims(h) FROM halves WHERE id = 3;
-- => [(3, 2.26384628, 3)]
INSERT INTO halves VALUES (5, '[1,2]');
-- !! 22000

-- pgvector's aggregates: element-wise sum and avg, in the input's type, NULLs skipped
SELECT category, sum(embedding), avg(embedding), count(embedding) FROM items GROUP BY category ORDER BY category;
-- => [('a', [1.0, -1.0, 4.0], [0.2, -0.2, 0.8], 5), ('b', [-4.0, 6.0, -6.0], [-0.8, 1.2, -1.2], 5)]
SELECT avg(embedding), sum(embedding) FROM items WHERE id > 100;
-- => [(None, None)]
-- pgvector's operators on vectors: + - * of one dimension, || concatenation; halfvec stays halfvec
SELECT embedding + '[1,1,1]', embedding - embedding, embedding * '[2,0.5,1]', embedding || '[7]'::vector
  FROM items WHERE id = 2;
-- => [([4.0, 1.5, -2.0], [0.0, 0.0, 0.0], [6.0, 0.25, -3.0], [3.0, 0.5, -3.0, 7.0])]
SELECT h + h, h || h FROM halves WHERE id = 1;
-- => [([2.0, 1.0, 0.5], [1.0, 0.5, 0.25, 1.0, 0.5, 0.25])]
SELECT embedding + '[1,1]' FROM items WHERE id = 2;
-- !! 22000
SELECT embedding = '[1,1]', embedding <> '[1,1]', embedding = '[3,0.5,-3]' FROM items WHERE id = 2;
-- => [(False, True, True)]
SELECT '[3e38]'::vector + '[3e38]'::vector;
-- !! 22003
SELECT '[1e-30]'::vector * '[1e-30]'::vector;
-- !! 22003
-- bit strings: stored, printed and compared as PostgreSQL's bit(n); pgvector's
-- <~> (hamming), <%> (jaccard) and binary_quantize
CREATE TABLE bits (id bigint PRIMARY KEY, b bit(4));
INSERT INTO bits VALUES (1, '1010'), (2, '0110'), (3, '0000'), (4, NULL);
SELECT id, b, b::text, b <~> '1110', b <%> '1110' FROM bits ORDER BY id;
-- => [(1, '1010', '1010', 1.0, 0.333333333), (2, '0110', '0110', 1.0, 0.333333333),
--     (3, '0000', '0000', 3.0, 1.0), (4, None, None, None, None)]
SELECT id FROM bits ORDER BY b <%> '0010', id LIMIT 2;
-- => [(1,), (2,)]
SELECT jaccard_distance(b, '0000'), hamming_distance(b, '1111') FROM bits WHERE id = 3;
-- => [(1.0, 4.0)]
SELECT binary_quantize(embedding), binary_quantize('[1,-2,3]'::vector) FROM items WHERE id = 2;
-- => [('110', '101')]
SELECT id FROM items ORDER BY binary_quantize(embedding)::bit(3) <~> binary_quantize('[1,-2,3]'::vector), id LIMIT 3;
-- => [(1,), (3,), (5,)]
SELECT b || '11' FROM bits WHERE id = 1;
-- => [('101011',)]
SELECT '101'::bit(4), '10110'::bit(4);
-- => [('1010', '1011')]
INSERT INTO bits VALUES (5, '101');
-- !! 22026
SELECT b + b FROM bits;
-- !! 42883
-- bit alone is bit(1), as PostgreSQL has it
CREATE TABLE one_bit (id bigint PRIMARY KEY, b bit);
INSERT INTO one_bit VALUES (1, '1'), (2, '0'), (3, NULL);
SELECT id, b FROM one_bit ORDER BY id;
-- => [(1, '1'), (2, '0'), (3, None)]
INSERT INTO one_bit VALUES (4, '10');
-- !! 22026
SELECT sum(b) FROM bits;
-- !! 42883
-- halfvec casts: float16's values, and its range
SELECT '[1.1,2]'::halfvec, '[1.1,2]'::vector::halfvec(2), embedding::halfvec FROM items WHERE id = 2;
-- => [([1.099609375, 2.0], [1.099609375, 2.0], [3.0, 0.5, -3.0])]
SELECT '[70000]'::halfvec;
-- !! 22003
-- IN (subquery) of vectors and json values compares whole values; of other kinds, 42883
CREATE TABLE vin (id bigint PRIMARY KEY, v vector(3), j jsonb, n int);
INSERT INTO vin VALUES (1, '[1,2,3]', '{"a": 1}', 1), (2, NULL, NULL, 2), (7, '[9,9,9]', '[1]', 3);
SELECT id FROM vin WHERE v IN (SELECT v FROM vin) ORDER BY id;
-- => [(1,), (7,)]
SELECT id FROM vin WHERE j IN (SELECT j FROM vin WHERE id > 1) ORDER BY id;
-- => [(7,)]
SELECT id FROM vin WHERE v NOT IN (SELECT v FROM vin WHERE id = 1) ORDER BY id;
-- => [(7,)]
SELECT id FROM vin WHERE id IN (SELECT v FROM vin);
-- !! 42883
UPDATE vin SET n = 100 WHERE v IN (SELECT v FROM vin);
SELECT id, n FROM vin ORDER BY id;
-- => [(1, 100), (2, 2), (7, 100)]
-- a NULL vector: grouped, sorted and coalesced as any NULL; jaccard is bit's only
SELECT count(*) FROM vin GROUP BY NULL::vector;
-- => [(3,)]
SELECT id FROM vin ORDER BY NULL::vector, id;
-- => [(1,), (2,), (7,)]
SELECT id, coalesce(v, NULL::vector) FROM vin WHERE id < 3 ORDER BY id;
-- => [(1, [1.0, 2.0, 3.0]), (2, None)]
SELECT coalesce(v, 1) FROM vin;
-- !! 42804
SELECT jaccard_distance(v, v) FROM vin;
-- !! 42883
SELECT l2_distance(v) FROM vin;
-- !! 42883
CREATE TABLE huge (id bigint PRIMARY KEY, v vector(2));
INSERT INTO huge VALUES (1, '[3e38,1]'), (2, '[3e38,2]');
SELECT sum(v) FROM huge;
-- !! 22003
SELECT avg(v) FROM huge;
-- => [([3e38, 1.5],)]
SELECT sum(h), avg(h) FROM halves;
-- => [([0.75, 3.25, -1.75], [0.25, 1.0830078125, -0.58349609375])]
-- ORDER BY / DISTINCT / GROUP BY a vector compare element by element as floats
-- (pgvector's vector_cmp): negative before positive, -0 equal to 0
CREATE TABLE vord (id bigint PRIMARY KEY, e vector(2), h halfvec(2));
INSERT INTO vord VALUES (1, '[1,2]', '[1,2]'), (2, '[0,5]', '[0,5]'), (3, '[-1,9]', '[-1,9]'),
    (4, '[1,1.5]', '[1,1.5]'), (5, '[0,1]', '[0,1]'), (6, '[-0,1]', '[-0,1]'), (7, NULL, NULL);
SELECT id FROM vord ORDER BY e, id;
-- => [(3,), (5,), (6,), (2,), (4,), (1,), (7,)]
SELECT id FROM vord ORDER BY e DESC, id;
-- => [(7,), (1,), (4,), (2,), (5,), (6,), (3,)]
SELECT id FROM vord ORDER BY h, id;
-- => [(3,), (5,), (6,), (2,), (4,), (1,), (7,)]
SELECT count(*) FROM (SELECT DISTINCT e FROM vord) s;
-- => [(6,)]
SELECT e::text, count(*) FROM vord GROUP BY e ORDER BY e;

-- ORDER BY a distance [LIMIT k]: a NULL vector's distance is NULL, sorted last (first
-- with NULLS FIRST or DESC), and its row is returned once the rows with a vector run
-- out, OFFSET counting it too
CREATE TABLE vn (id bigint PRIMARY KEY, e vector(2));
INSERT INTO vn VALUES (1, '[0,0]'), (2, NULL), (3, '[1,1]'), (4, NULL), (5, '[3,3]');
SELECT id FROM (SELECT id FROM vn ORDER BY e <-> '[0,0]' LIMIT 10) s ORDER BY id;
-- => [(1,), (2,), (3,), (4,), (5,)]
SELECT count(*) FROM (SELECT id FROM vn ORDER BY e <-> '[0,0]' LIMIT 4 OFFSET 2) s;
-- => [(3,)]
SELECT id, e <-> '[1,1]' IS NULL FROM vn WHERE id <> 4 ORDER BY e <-> '[1,1]' LIMIT 10;
-- => [(3, False), (1, False), (5, False), (2, True)]
SELECT id FROM vn WHERE id <> 4 ORDER BY e <-> '[0,0]' LIMIT 2 OFFSET 3;
-- => [(2,)]
SELECT id FROM vn WHERE id <> 4 ORDER BY e <-> '[0,0]';
-- => [(1,), (3,), (5,), (2,)]
SELECT id FROM vn WHERE id < 4 ORDER BY e <-> '[0,0]' NULLS FIRST LIMIT 2;
-- => [(2,), (1,)]
SELECT id FROM vn WHERE id <> 4 ORDER BY e <-> '[0,0]' DESC LIMIT 3;
-- => [(2,), (5,), (3,)]
SELECT id FROM vn WHERE id <> 4 ORDER BY e <#> '[1,2]' NULLS LAST LIMIT 4;
-- => [(5,), (3,), (1,), (2,)]
SELECT id FROM vn ORDER BY e <-> '[0,0]' LIMIT 3;
-- => [(1,), (3,), (5,)]
-- a NULL query vector: every distance NULL, every row (NULL::vector(n) is NULL, of no width)
SELECT count(*) FROM (SELECT id FROM vn ORDER BY e <-> NULL::vector(2) LIMIT 10) s;
-- => [(5,)]
SELECT NULL::vector(3) IS NULL, NULL::halfvec(2) IS NULL, (NULL::vector(2) <-> e) IS NULL FROM vn WHERE id = 1;
-- => [(True, True, True)]
