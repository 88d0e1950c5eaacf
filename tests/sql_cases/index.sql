-- Indexes: HNSW (with its parameters, per operator class), scalar indexes, DROP INDEX,
-- hnsw.ef_search, and queries after the index exists. The answers are the exact ones: on
-- 30 rows PostgreSQL's planner scans the table, and forced through the HNSW index
-- (enable_seqscan = off) pgvector returns the same rows for every query here (checked).
-- The query vectors are chosen so that no two of the nearest rows tie (gaps >= 0.008).
-- One HNSW index on a column at a time: varvedb keeps one graph per column (a second is
-- 0A000, see unsupported.sql), so the operator classes take turns.
CREATE TABLE docs (id bigint PRIMARY KEY, topic text, embedding vector(4));
INSERT INTO docs VALUES
    (1, 'x', '[-0.5,3,-2,2]'),
    (2, 'y', '[0,0.5,-0.5,-1.5]'),
    (3, 'z', '[-2.5,0,-2,-0.5]'),
    (4, 'x', '[2.5,-0.5,0,2.5]'),
    (5, 'y', '[-0.5,2.5,-2,1]'),
    (6, 'z', '[0.5,-1.5,-1.5,0]'),
    (7, 'x', '[3,-0.5,-0.5,0]'),
    (8, 'y', '[2.5,0,2,0.5]'),
    (9, 'z', '[-1,0,3,-1.5]'),
    (10, 'x', '[2,-2,2.5,0.5]'),
    (11, 'y', '[2.5,-2.5,2,2.5]'),
    (12, 'z', '[-1,3,1.5,-2]'),
    (13, 'x', '[-1,-0.5,0.5,-0.5]'),
    (14, 'y', '[3,0,-1,2]'),
    (15, 'z', '[2.5,-1,-3,-1.5]'),
    (16, 'x', '[2,-3,1,1]'),
    (17, 'y', '[0,-0.5,-1.5,-1.5]'),
    (18, 'z', '[0.5,2.5,-2,-1.5]'),
    (19, 'x', '[-1.5,2.5,1.5,3]'),
    (20, 'y', '[2.5,1.5,2,0]'),
    (21, 'z', '[3,-2.5,-2,-1.5]'),
    (22, 'x', '[0.5,0.5,2,-1.5]'),
    (23, 'y', '[-1,-2.5,0.5,-2]'),
    (24, 'z', '[0,2,1.5,3]'),
    (25, 'x', '[-2.5,1.5,0.5,1.5]'),
    (26, 'y', '[-1,0.5,1.5,-0.5]'),
    (27, 'z', '[1.5,-2.5,-1.5,2.5]'),
    (28, 'x', '[0.5,0,-3,1]'),
    (29, 'y', '[1.5,-0.5,-1.5,-3]'),
    (30, 'z', '[-2.5,1,3,2]');

CREATE INDEX docs_embedding_l2 ON docs USING hnsw (embedding vector_l2_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX ON docs (topic);
CREATE INDEX docs_embedding_l2 ON docs (topic);
-- !! 42P07
CREATE INDEX ON docs (nothing);
-- !! 42703
CREATE INDEX ON nowhere (topic);
-- !! 42P01

SET hnsw.ef_search = 40;
SHOW hnsw.ef_search;
-- => [('40',)]
SET hnsw.ef_search = 100;
SHOW hnsw.ef_search;
-- => [('100',)]
SET hnsw.iterative_scan = relaxed_order;
SHOW hnsw.iterative_scan;
-- => [('relaxed_order',)]
SET hnsw.iterative_scan = off;

SELECT id FROM docs ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(22,), (26,), (9,), (20,), (8,)]
SELECT id, embedding <-> '[-1.2,0.4,1.9,0.8]' AS distance FROM docs ORDER BY distance LIMIT 3;
-- => [(26, 1.37840482), (13, 2.12132023), (30, 2.16794829)]
SELECT id FROM docs ORDER BY embedding <-> '[2.1,-0.7,0.2,1.3]' LIMIT 10;
-- => [(4,), (7,), (14,), (8,), (16,), (10,), (6,), (27,), (11,), (20,)]
-- filtered, through the scalar index and the graph
SELECT id FROM docs WHERE topic = 'x' ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (13,), (10,)]
SELECT id FROM docs WHERE topic = 'z' ORDER BY embedding <-> '[2.1,-0.7,0.2,1.3]' LIMIT 3;
-- => [(6,), (27,), (24,)]
SELECT id, topic FROM docs WHERE topic = 'y' AND id < 10 ORDER BY id;
-- => [(2, 'y'), (5, 'y'), (8, 'y')]
SELECT count(*) FROM docs WHERE topic = 'y';
-- => [(10,)]

-- the index follows writes
INSERT INTO docs VALUES (31, 'x', '[0.5,1,2.5,-0.5]'), (32, 'y', '[2,-0.5,0.5,1.5]');
DELETE FROM docs WHERE id = 22;
UPDATE docs SET embedding = '[-1,0.5,2,1]' WHERE id = 1;
UPDATE docs SET topic = 'w' WHERE id = 4;
SELECT id FROM docs ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(31,), (26,), (9,)]
SELECT id FROM docs ORDER BY embedding <-> '[-1.2,0.4,1.9,0.8]' LIMIT 3;
-- => [(1,), (26,), (13,)]
SELECT id FROM docs WHERE topic = 'x' ORDER BY embedding <-> '[2.1,-0.7,0.2,1.3]' LIMIT 2;
-- => [(7,), (16,)]
SELECT id FROM docs WHERE topic = 'w';
-- => [(4,)]

-- one HNSW index on the column at a time: cosine, then inner product (named by PostgreSQL)
DROP INDEX docs_embedding_l2;
CREATE INDEX docs_embedding_cos ON docs USING hnsw (embedding vector_cosine_ops);
SELECT id FROM docs ORDER BY embedding <=> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(31,), (9,), (26,), (20,), (12,)]
SELECT id FROM docs ORDER BY embedding <=> '[-1.2,0.4,1.9,0.8]' LIMIT 4;
-- => [(1,), (30,), (26,), (19,)]
SELECT id FROM docs WHERE topic = 'z' ORDER BY embedding <=> '[2.1,-0.7,0.2,1.3]' LIMIT 3;
-- => [(27,), (21,), (6,)]
DROP INDEX docs_embedding_cos;
CREATE INDEX ON docs USING hnsw (embedding vector_ip_ops) WITH (m = 8);
SELECT id FROM docs ORDER BY embedding <#> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(9,), (31,), (12,), (20,), (30,)]
SELECT id FROM docs ORDER BY embedding <#> '[2.1,-0.7,0.2,1.3]' LIMIT 3;
-- => [(11,), (4,), (14,)]

-- DROP INDEX: by the name given, or the one PostgreSQL made (table_column_idx)
DROP INDEX docs_embedding_idx;
DROP INDEX docs_topic_idx;
DROP INDEX docs_embedding_l2;
-- !! 42704
DROP INDEX IF EXISTS docs_embedding_l2;
SELECT id FROM docs ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(31,), (26,), (9,)]
SELECT id FROM docs WHERE topic = 'w';
-- => [(4,)]
CREATE INDEX docs_embedding_hnsw ON docs USING hnsw (embedding vector_l2_ops);
DROP TABLE docs;
DROP INDEX docs_embedding_hnsw;
-- !! 42704

-- halfvec: its own operator classes
CREATE TABLE halves (id bigint PRIMARY KEY, h halfvec(3));
INSERT INTO halves VALUES (1, '[1,0.5,0.25]'), (2, '[-1,2,0]'), (3, '[0.75,0.75,-2]'), (4, '[2,-1,1.5]');
CREATE INDEX halves_h ON halves USING hnsw (h halfvec_cosine_ops) WITH (m = 16, ef_construction = 64);
SELECT id FROM halves ORDER BY h <=> '[1,1,1]' LIMIT 3;
-- => [(1,), (4,), (2,)]
DROP INDEX halves_h;
CREATE INDEX ON halves USING hnsw (h halfvec_l2_ops);
SELECT id FROM halves ORDER BY h <-> '[1,1,1]' LIMIT 3;
-- => [(1,), (4,), (2,)]
