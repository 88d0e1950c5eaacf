-- Expression and partial HNSW indexes (pgvector's README: half-precision and binary
-- quantized indexing, subvectors, partial indexes) and vector_l1_ops, on the 30 rows of index.sql with a
-- column n = id % 3. On so few rows both engines scan exactly; tests/test_index_exprs.py
-- holds that varvedb's searches walk the graph on more rows, and their recall.
CREATE TABLE docs (id bigint PRIMARY KEY, topic text, embedding vector(4), n int);
INSERT INTO docs VALUES
    (1, 'x', '[-0.5,3,-2,2]', 1),
    (2, 'y', '[0,0.5,-0.5,-1.5]', 2),
    (3, 'z', '[-2.5,0,-2,-0.5]', 0),
    (4, 'x', '[2.5,-0.5,0,2.5]', 1),
    (5, 'y', '[-0.5,2.5,-2,1]', 2),
    (6, 'z', '[0.5,-1.5,-1.5,0]', 0),
    (7, 'x', '[3,-0.5,-0.5,0]', 1),
    (8, 'y', '[2.5,0,2,0.5]', 2),
    (9, 'z', '[-1,0,3,-1.5]', 0),
    (10, 'x', '[2,-2,2.5,0.5]', 1),
    (11, 'y', '[2.5,-2.5,2,2.5]', 2),
    (12, 'z', '[-1,3,1.5,-2]', 0),
    (13, 'x', '[-1,-0.5,0.5,-0.5]', 1),
    (14, 'y', '[3,0,-1,2]', 2),
    (15, 'z', '[2.5,-1,-3,-1.5]', 0),
    (16, 'x', '[2,-3,1,1]', 1),
    (17, 'y', '[0,-0.5,-1.5,-1.5]', 2),
    (18, 'z', '[0.5,2.5,-2,-1.5]', 0),
    (19, 'x', '[-1.5,2.5,1.5,3]', 1),
    (20, 'y', '[2.5,1.5,2,0]', 2),
    (21, 'z', '[3,-2.5,-2,-1.5]', 0),
    (22, 'x', '[0.5,0.5,2,-1.5]', 1),
    (23, 'y', '[-1,-2.5,0.5,-2]', 2),
    (24, 'z', '[0,2,1.5,3]', 0),
    (25, 'x', '[-2.5,1.5,0.5,1.5]', 1),
    (26, 'y', '[-1,0.5,1.5,-0.5]', 2),
    (27, 'z', '[1.5,-2.5,-1.5,2.5]', 0),
    (28, 'x', '[0.5,0,-3,1]', 1),
    (29, 'y', '[1.5,-0.5,-1.5,-3]', 2),
    (30, 'z', '[-2.5,1,3,2]', 0);

CREATE INDEX docs_half ON docs USING hnsw ((embedding::halfvec(4)) halfvec_l2_ops);
-- the catalog says so: indkey 0 (an expression), indexprs set (red-team 8 F12)
SELECT indkey::text, indexprs IS NOT NULL, indpred IS NULL FROM pg_index
    WHERE indexrelid = 'docs_half'::regclass;
-- => [('0', True, True)]
-- an int2vector's subscripts start at 0, and pg_get_indexdef's column 1 of an
-- expression index is the expression in parentheses ('' past its columns): what
-- SQLAlchemy's index reflection reads (pgvector-python's test_automap)
SELECT c.relname, i.indkey[0], i.indkey[1], generate_subscripts(i.indkey, 1) AS ord,
       array_upper(i.indkey, 1), array_length(i.indkey, 1),
       pg_get_indexdef(i.indexrelid, 1, true), pg_get_indexdef(i.indexrelid, 2, true)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'docs'::regclass ORDER BY c.relname;
-- => [('docs_half', 0, None, 0, 0, 1, '(embedding::halfvec(4))', ''),
--     ('docs_pkey', 1, None, 0, 0, 1, 'id', '')]
SELECT id FROM docs ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(22,), (26,), (9,), (20,), (8,)]
SELECT id FROM docs ORDER BY embedding::halfvec(4) <-> '[2.1,-0.7,0.2,1.3]'::halfvec LIMIT 4;
-- => [(4,), (7,), (14,), (8,)]
SELECT id FROM docs WHERE topic = 'x' ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (13,), (10,)]
-- another operator than the index's: sorted, the same answer
SELECT id FROM docs ORDER BY embedding::halfvec(4) <=> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (9,), (26,)]
-- the column itself: no index of its own, scanned
SELECT id FROM docs ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (26,), (9,)]
DROP INDEX docs_half;

CREATE INDEX docs_bits ON docs USING hnsw ((binary_quantize(embedding)::bit(4)) bit_hamming_ops);
SELECT id, binary_quantize(embedding)::bit(4) <~> binary_quantize('[1,-1,1,1]'::vector) AS d FROM docs
    ORDER BY d, id LIMIT 6;
-- => [(8, 0.0), (10, 0.0), (11, 0.0), (16, 0.0), (4, 1.0), (14, 1.0)]
-- pgvector's binary quantize, then rerank
SELECT id FROM (
    SELECT * FROM docs ORDER BY binary_quantize(embedding)::bit(4) <~> binary_quantize('[1,-1,1,1]'::vector) LIMIT 30
) ORDER BY embedding <=> '[1,-1,1,1]' LIMIT 5;
-- => [(11,), (10,), (16,), (8,), (4,)]
SELECT id FROM (
    SELECT * FROM docs ORDER BY binary_quantize(embedding)::bit(4) <~> binary_quantize('[-1,1,-1,-1]'::vector) LIMIT 30
) s ORDER BY embedding <=> '[-1,1,-1,-1]' LIMIT 3;
-- => [(3,), (18,), (2,)]
DROP INDEX docs_bits;

CREATE INDEX docs_sub ON docs USING hnsw ((subvector(embedding, 2, 2)::vector(2)) vector_cosine_ops);
SELECT id FROM docs ORDER BY subvector(embedding, 2, 2)::vector(2) <=> subvector('[9,1,2,9]'::vector, 2, 2), id LIMIT 4;
-- => [(26,), (30,), (20,), (22,)]
SELECT id FROM (
    SELECT * FROM docs ORDER BY subvector(embedding, 2, 2)::vector(2) <=> subvector('[9,1,2,9]'::vector, 2, 2) LIMIT 30
) ORDER BY embedding <=> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (9,), (26,)]
DROP INDEX docs_sub;
CREATE INDEX ON docs USING hnsw ((subvector(embedding, 1, 2)::halfvec(2)) halfvec_l2_ops);
SELECT id FROM docs ORDER BY subvector(embedding, 1, 2)::halfvec(2) <-> subvector('[0.3,1.1,2.7,-0.6]'::halfvec, 1, 2) LIMIT 3;
-- => [(22,), (2,), (24,)]
DROP INDEX docs_subvector_idx;

-- partial: only rows with n = 1 are in the graph; a query whose WHERE implies it uses it
CREATE INDEX docs_part ON docs USING hnsw ((embedding::vector(4)) vector_l2_ops) WHERE (n = 1);
-- the catalog says so: its predicate in indpred (red-team 8 F12)
SELECT indkey::text, indexprs IS NOT NULL, indpred IS NOT NULL,
       pg_get_expr(indpred, indrelid) FROM pg_index WHERE indexrelid = 'docs_part'::regclass;
-- => [('3', False, True, '(n = 1)')]
SELECT id FROM docs WHERE n = 1 ORDER BY embedding::vector(4) <-> '[2.1,-0.7,0.2,1.3]' LIMIT 3;
-- => [(4,), (7,), (16,)]
SELECT id FROM docs WHERE n = 1 ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 4;
-- => [(22,), (13,), (10,), (25,)]
SELECT id FROM docs WHERE topic = 'x' AND n = 1 ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 2;
-- => [(22,), (13,)]
SELECT id FROM docs WHERE n = 2 ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(26,), (20,), (8,)]
SELECT id FROM docs ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (26,), (9,)]
-- updates move rows in and out
UPDATE docs SET n = 1 WHERE id IN (22, 26);
UPDATE docs SET n = 0 WHERE id = 31;
INSERT INTO docs VALUES (31, 'x', '[0.5,1,2.5,-0.5]', 1);
UPDATE docs SET n = 2 WHERE id = 31;
SELECT id FROM docs WHERE n = 1 ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 4;
-- => [(22,), (26,), (13,), (10,)]
SELECT id FROM docs WHERE n = 2 ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(31,), (20,), (8,)]
DROP INDEX docs_part;
CREATE INDEX docs_part2 ON docs USING hnsw ((embedding::halfvec(4)) halfvec_l2_ops) WHERE (topic = 'y' AND n >= 1);
SELECT id FROM docs WHERE n >= 1 AND topic = 'y' ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(26,), (20,), (8,)]
SELECT id FROM docs WHERE topic = 'y' ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(26,), (20,), (8,)]
DROP INDEX docs_part2;

-- vector_l1_ops (a graph of l2 neighbours here, ranked by l1)
CREATE INDEX docs_l1 ON docs USING hnsw (embedding vector_l1_ops);
SELECT id FROM docs ORDER BY embedding <+> '[0.3,1.1,2.7,-0.6]' LIMIT 4;
-- => [(31,), (22,), (26,), (9,)]
SELECT id, embedding <+> '[2.1,-0.7,0.2,1.3]' AS d FROM docs ORDER BY d LIMIT 3;
-- => [(4, 2.0), (7, 3.1), (16, 3.5)]
SELECT id FROM docs ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(31,), (22,), (26,)]
CREATE INDEX ON docs USING ivfflat (embedding vector_l1_ops);
-- !! 42704
DROP INDEX docs_l1;

-- what pgvector refuses
CREATE INDEX ON docs USING hnsw ((embedding::halfvec(4)) vector_l2_ops);
-- !! 42804
CREATE INDEX ON docs USING hnsw ((embedding::halfvec(3)) halfvec_l2_ops);
-- !! 22000

-- a row without a vector, under an expression index: its NULL distance sorts last and a
-- LIMIT past the rows with one reaches it; a NULL query vector ranks nothing
CREATE INDEX docs_half3 ON docs USING hnsw ((embedding::halfvec(4)) halfvec_l2_ops);
INSERT INTO docs VALUES (99, 'x', NULL, 1);
SELECT id FROM (SELECT id FROM docs ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 1000) s WHERE id = 99;
-- => [(99,)]
SELECT count(*) = (SELECT count(*) FROM docs) FROM (SELECT id FROM docs ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 1000) s;
-- => [(True,)]
SELECT count(*) = (SELECT count(*) FROM docs) FROM (SELECT id FROM docs ORDER BY embedding::halfvec(4) <-> NULL::halfvec(4) LIMIT 1000) s;
-- => [(True,)]
DROP INDEX docs_half3;

-- a value past half precision where an index casts it to halfvec: the write is refused
-- whole (22003, as pgvector's cast), a row the index leaves out (a partial index's, a cut's)
-- is not; an index over a table holding one is refused and not made
CREATE TABLE big (id bigint PRIMARY KEY, embedding vector(3), n int);
CREATE INDEX big_half ON big USING hnsw ((embedding::halfvec(3)) halfvec_l2_ops);
INSERT INTO big VALUES (1, '[1,2,3]', 1), (2, '[1e6,0,0]', 1);
-- !! 22003
SELECT count(*) FROM big;
-- => [(0,)]
INSERT INTO big VALUES (1, '[1,2,3]', 1), (2, '[65519,0,-65519]', 1), (3, '[0,0,70]', 1);
SELECT id FROM big ORDER BY embedding::halfvec(3) <-> '[0,0,0]' LIMIT 5;
-- => [(1,), (3,), (2,)]
UPDATE big SET embedding = '[0,-70000,0]' WHERE id = 1;
-- !! 22003
INSERT INTO big VALUES (1, '[0,65520,0]', 1) ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding;
-- !! 22003
SELECT id, embedding FROM big WHERE id = 1;
-- => [(1, [1.0, 2.0, 3.0])]
DROP INDEX big_half;
CREATE INDEX big_bits ON big USING hnsw ((binary_quantize(embedding)::bit(3)) bit_hamming_ops);
INSERT INTO big VALUES (4, '[1e6,-1e6,1]', 2);
DROP INDEX big_bits;
CREATE INDEX big_sub ON big USING hnsw ((subvector(embedding, 3, 1)::halfvec(1)) halfvec_l2_ops);
INSERT INTO big VALUES (5, '[1,1,1e6]', 2);
-- !! 22003
DROP INDEX big_sub;
CREATE INDEX big_part ON big USING hnsw ((embedding::halfvec(3)) halfvec_l2_ops) WHERE (n = 1);
INSERT INTO big VALUES (5, '[1e6,1,1]', 1);
-- !! 22003
UPDATE big SET n = 1 WHERE id = 4;
-- !! 22003
UPDATE big SET embedding = '[1,2,4]' WHERE id = 1;
UPDATE big SET embedding = '[1,2,3]' WHERE id = 1;
SELECT id FROM big WHERE n = 1 ORDER BY embedding::halfvec(3) <-> '[0,0,0]' LIMIT 5;
-- => [(1,), (3,), (2,)]
DROP INDEX big_part;
CREATE INDEX big_half2 ON big USING hnsw ((embedding::halfvec(3)) halfvec_l2_ops);
-- !! 22003
INSERT INTO big VALUES (6, '[1e6,1,1]', 1);
DELETE FROM big WHERE id IN (4, 6);
CREATE INDEX big_half2 ON big USING hnsw ((embedding::halfvec(3)) halfvec_l2_ops);
SELECT id FROM big ORDER BY embedding::halfvec(3) <-> '[0,0,0]' LIMIT 5;
-- => [(1,), (3,), (2,)]
CREATE TABLE halves2 (id bigint PRIMARY KEY, h halfvec(2));
INSERT INTO halves2 VALUES (1, '[70000,1]');
-- !! 22003
