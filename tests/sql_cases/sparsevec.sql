-- sparsevec (pgvector's sparse vectors): the text form and its errors, the four distance
-- operators in ORDER BY ... LIMIT k (an exact scan) and as columns, the functions, casts
-- to and from vector and halfvec, = and <>, sparsevec(n) and sparsevec columns, writes.
CREATE TABLE items (id bigint PRIMARY KEY, embedding sparsevec(5));
INSERT INTO items VALUES (1, '{1:2.5,3:-1}/5'), (2, '{1:3,2:0.5,3:-3}/5'),
    (3, '{2:3,4:1.5}/5'), (4, '{1:-0.5,2:1,5:0.5}/5'), (5, '{1:-2.5,2:-2,3:1}/5'),
    (6, '{}/5'), (7, '{3:1.5,5:2}/5'), (8, NULL);
SELECT id, embedding FROM items ORDER BY id;
-- => [(1, '{1:2.5,3:-1}/5'), (2, '{1:3,2:0.5,3:-3}/5'), (3, '{2:3,4:1.5}/5'),
--     (4, '{1:-0.5,2:1,5:0.5}/5'), (5, '{1:-2.5,2:-2,3:1}/5'), (6, '{}/5'),
--     (7, '{3:1.5,5:2}/5'), (8, None)]
SELECT id, embedding::text FROM items WHERE id IN (1, 6, 8) ORDER BY id;
-- => [(1, '{1:2.5,3:-1}/5'), (6, '{}/5'), (8, None)]
SELECT id FROM items ORDER BY embedding <-> '{1:0.3,2:1.1,5:2.7}/5' LIMIT 5;
-- => [(7,), (4,), (6,), (3,), (1,)]
SELECT id FROM items ORDER BY embedding <#> '{1:0.3,2:1.1,5:2.7}/5' LIMIT 5;
-- => [(7,), (3,), (4,), (2,), (1,)]
SELECT id FROM items WHERE id <> 6 ORDER BY embedding <=> '{1:0.3,2:1.1,5:2.7}/5' LIMIT 5;
-- => [(7,), (4,), (3,), (2,), (1,)]
SELECT id FROM items ORDER BY embedding <+> '{1:0.3,2:1.1,5:2.7}/5' LIMIT 5;
-- => [(4,), (7,), (6,), (3,), (1,)]
SELECT id, embedding <-> '{1:0.3,2:1.1,5:2.7}/5', embedding <#> '{1:0.3,2:1.1,5:2.7}/5',
    embedding <+> '{1:0.3,2:1.1,5:2.7}/5' FROM items ORDER BY id;
-- => [(1, 3.7868193, -0.75000003, 7.0000001), (2, 4.892852, -1.45, 9.0000001),
--     (3, 3.6386811, -3.3000001, 6.4), (4, 2.343075, -2.3, 3.1000001),
--     (5, 5.0734604, 2.9500001, 9.6000001), (6, 2.9308702, -0.0, 4.1000001),
--     (7, 2.0099752, -5.4000001, 3.6000001), (8, None, None, None)]
SELECT id, cosine_distance(embedding, '{1:0.3,2:1.1,5:2.7}/5') FROM items
    WHERE id < 6 ORDER BY id;
-- => [(1, 0.90496235), (2, 0.88419162), (3, 0.66430792), (4, 0.35925441), (5, 1.3000884)]
SELECT id, l2_distance(embedding, '{2:1}/5'), inner_product(embedding, '{2:1}/5'),
    l1_distance(embedding, '{2:1}/5') FROM items WHERE id < 4 ORDER BY id;
-- => [(1, 2.8722813, 0.0, 4.5), (2, 4.2720019, 0.5, 6.5), (3, 2.5, 3.0, 3.5)]
SELECT id, l2_norm(embedding), l2_normalize(embedding) FROM items
    WHERE id IN (3, 6, 8) ORDER BY id;
-- => [(3, 3.354102, '{2:0.8944272,4:0.4472136}/5'), (6, 0.0, '{}/5'), (8, None, None)]
SELECT id FROM items WHERE embedding = '{2:3,4:1.5}/5';
-- => [(3,)]
SELECT count(*) FROM items WHERE embedding <> '{2:3,4:1.5}/5';
-- => [(6,)]
SELECT embedding::vector FROM items WHERE id = 4;
-- => [([-0.5, 1.0, 0.0, 0.0, 0.5],)]
SELECT '[0,1.5,0,-2]'::vector::sparsevec, '[0,1.5,0]'::halfvec::sparsevec;
-- => [('{2:1.5,4:-2}/4', '{2:1.5}/3')]
SELECT '{2:1.5}/3'::sparsevec::vector, '{2:1.5}/3'::sparsevec::halfvec;
-- => [([0.0, 1.5, 0.0], [0.0, 1.5, 0.0])]
SELECT '{1:0.1,2:1e-7,3:123456789}/3'::sparsevec::text;
-- => [('{1:0.1,2:1e-07,3:1.2345679e+08}/3',)]
-- float4's shortest digits, fixed notation for exponents -4 to 5
SELECT '{1:3.3333333,2:-2e-05,3:1e+20,4:0.00012345,5:999999.9,6:1000000,7:0.0001}/7'::sparsevec;
-- => [('{1:3.3333333,2:-2e-05,3:1e+20,4:0.00012345,5:999999.9,6:1e+06,7:0.0001}/7',)]
-- the input's indices in any order (sorted), spaces, zeros (not stored)
SELECT ' { 3 : 1 , 1 : 2 } / 3 '::sparsevec;
-- => [('{1:2,3:1}/3',)]
SELECT '{1:0,2:1}/3'::sparsevec;
-- => [('{2:1}/3',)]
-- cosine with a zero vector: NaN (0/0), as pgvector
SELECT ('{1:1,2:2}/3'::sparsevec <=> '{}/3')::text;
-- => [('NaN',)]
-- the errors: pgvector's SQLSTATEs
SELECT '{1:1}/3'::sparsevec <-> '{1:1}/4';
-- !! 22000
SELECT '{1:1,1:2}/3'::sparsevec;
-- !! 22000
SELECT '{0:1}/3'::sparsevec;
-- !! 22000
SELECT '{4:1}/3'::sparsevec;
-- !! 22000
SELECT '{1:NaN}/3'::sparsevec;
-- !! 22000
SELECT '{1:inf}/3'::sparsevec;
-- !! 22000
SELECT '{1:1e40}/3'::sparsevec;
-- !! 22003
SELECT '{1:1}/0'::sparsevec;
-- !! 22000
SELECT '{1:1}/1000000001'::sparsevec;
-- !! 54000
SELECT '{1:1'::sparsevec;
-- !! 22P02
SELECT '{1:1}'::sparsevec;
-- !! 22P02
SELECT '{1:1}/3x'::sparsevec;
-- !! 22P02
SELECT '{1.5:1}/3'::sparsevec;
-- !! 22P02
SELECT '{1:1}/3'::sparsevec(4);
-- !! 22000
SELECT '{1:1,2:2}/3'::sparsevec::vector(2);
-- !! 22000
SELECT '[1,2]'::vector::sparsevec(3);
-- !! 22000
SELECT '{2:1e6}/3'::sparsevec::halfvec;
-- !! 22003
SELECT '{1:1}/3'::sparsevec(0);
-- !! 22023
-- writes: a value of another dimension or a bad one is refused; a vector is cast
INSERT INTO items VALUES (9, '{1:1}/4');
-- !! 22000
INSERT INTO items VALUES (9, '{1:1,1:1}/5');
-- !! 22000
INSERT INTO items VALUES (9, '[0,0,2,0,0]'::vector) RETURNING embedding;
-- => [('{3:2}/5',)]
UPDATE items SET embedding = '{5:4}/5' WHERE id = 1 RETURNING id, embedding;
-- => [(1, '{5:4}/5')]
DELETE FROM items WHERE embedding <-> '{5:4}/5' < 1;
SELECT count(*) FROM items;
-- => [(8,)]
-- a sparsevec column without a dimension holds any
CREATE TABLE anydim (id bigint PRIMARY KEY, v sparsevec);
INSERT INTO anydim VALUES (1, '{1:1}/4'), (2, '{2:2}/6');
SELECT id, v FROM anydim ORDER BY id;
-- => [(1, '{1:1}/4'), (2, '{2:2}/6')]
SELECT v <-> '{1:1}/4' FROM anydim;
-- !! 22000
SELECT '{1:1}/3'::sparsevec * 2;
-- !! 42883
SELECT vector_dims('{1:1}/3'::sparsevec);
-- !! 42883
