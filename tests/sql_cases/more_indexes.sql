-- A second vector index on one column (issue 30; Field.more_indexes): pgvector-python's
-- SQLAlchemy test and pgvector's README create an l2 and a cosine index (and more) on one
-- column; each ORDER BY operator is answered through the index of its metric
-- (tests/test_more_indexes.py holds that on enough rows it walks that graph), DROP INDEX
-- of one keeps the others, and the catalog lists every one. The 30 rows of index_exprs.sql.
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

-- an l2 index, a cosine one beside it, more by name; a name taken is 42P07, the same
-- operator class twice is allowed (PostgreSQL's rule), unnamed ones are named docs_embedding_idx,
-- docs_embedding_idx1, ... as PostgreSQL names them
CREATE INDEX ON docs USING hnsw (embedding vector_l2_ops);
CREATE INDEX ON docs USING hnsw (embedding vector_cosine_ops);
CREATE INDEX docs_ip ON docs USING hnsw (embedding vector_ip_ops);
CREATE INDEX docs_ip ON docs USING hnsw (embedding vector_l1_ops);
-- !! 42P07
CREATE INDEX docs_l2_again ON docs USING hnsw (embedding vector_l2_ops);
CREATE INDEX ON docs USING hnsw (embedding vector_l1_ops);
-- the catalog lists every one
SELECT c.relname, am.amname, oc.opcname, i.indkey::text, pg_get_expr(i.indpred, i.indrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
    JOIN pg_opclass oc ON oc.oid::text = i.indclass::text WHERE i.indrelid = 'docs'::regclass ORDER BY 1;
-- => [('docs_embedding_idx', 'hnsw', 'vector_l2_ops', '3', None),
--     ('docs_embedding_idx1', 'hnsw', 'vector_cosine_ops', '3', None),
--     ('docs_embedding_idx2', 'hnsw', 'vector_l1_ops', '3', None),
--     ('docs_ip', 'hnsw', 'vector_ip_ops', '3', None),
--     ('docs_l2_again', 'hnsw', 'vector_l2_ops', '3', None),
--     ('docs_pkey', 'btree', 'int8_ops', '1', None)]
-- each operator ranks as its own metric (through the index of that metric)
SELECT id FROM docs ORDER BY embedding <-> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(22,), (26,), (9,), (20,), (8,)]
SELECT id FROM docs ORDER BY embedding <=> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(22,), (9,), (26,), (20,), (12,)]
SELECT id FROM docs ORDER BY embedding <#> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(9,), (12,), (20,), (30,), (22,)]
SELECT id FROM docs ORDER BY embedding <+> '[0.3,1.1,2.7,-0.6]' LIMIT 5;
-- => [(22,), (26,), (9,), (20,), (2,)]
-- dropping one keeps the others: the next takes the column's place
DROP INDEX docs_embedding_idx;
SELECT id FROM docs ORDER BY embedding <=> '[2.1,-0.7,0.2,1.3]' LIMIT 4;
-- => [(4,), (14,), (11,), (7,)]
SELECT id FROM docs ORDER BY embedding <-> '[2.1,-0.7,0.2,1.3]' LIMIT 4;
-- => [(4,), (7,), (14,), (8,)]
DROP INDEX docs_embedding_idx1, docs_l2_again;
SELECT c.relname, am.amname, oc.opcname, i.indkey::text, pg_get_expr(i.indpred, i.indrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
    JOIN pg_opclass oc ON oc.oid::text = i.indclass::text WHERE i.indrelid = 'docs'::regclass ORDER BY 1;
-- => [('docs_embedding_idx2', 'hnsw', 'vector_l1_ops', '3', None),
--     ('docs_ip', 'hnsw', 'vector_ip_ops', '3', None),
--     ('docs_pkey', 'btree', 'int8_ops', '1', None)]
SELECT id FROM docs ORDER BY embedding <#> '[2.1,-0.7,0.2,1.3]' LIMIT 4;
-- => [(11,), (4,), (14,), (27,)]
-- expression and partial indexes beside the column's own
DROP INDEX docs_embedding_idx;
-- !! 42704
CREATE INDEX ON docs USING hnsw ((embedding::halfvec(4)) halfvec_cosine_ops);
CREATE INDEX docs_half_l2 ON docs USING hnsw ((embedding::halfvec(4)) halfvec_l2_ops) WHERE (n = 1);
SELECT c.relname, am.amname, oc.opcname, i.indkey::text, pg_get_expr(i.indpred, i.indrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
    JOIN pg_opclass oc ON oc.oid::text = i.indclass::text WHERE i.indrelid = 'docs'::regclass ORDER BY 1;
-- => [('docs_embedding_idx', 'hnsw', 'halfvec_cosine_ops', '0', None),
--     ('docs_embedding_idx2', 'hnsw', 'vector_l1_ops', '3', None),
--     ('docs_half_l2', 'hnsw', 'halfvec_l2_ops', '0', '(n = 1)'),
--     ('docs_ip', 'hnsw', 'vector_ip_ops', '3', None),
--     ('docs_pkey', 'btree', 'int8_ops', '1', None)]
SELECT id FROM docs ORDER BY embedding::halfvec(4) <=> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (9,), (26,)]
SELECT id FROM docs WHERE n = 1 ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (13,), (10,)]
SELECT id FROM docs ORDER BY embedding::halfvec(4) <-> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (26,), (9,)]
SELECT id FROM docs ORDER BY embedding <+> '[0.3,1.1,2.7,-0.6]' LIMIT 3;
-- => [(22,), (26,), (9,)]
