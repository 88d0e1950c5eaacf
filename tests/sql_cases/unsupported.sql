-- varvedb-only
-- What varvedb refuses on purpose, where PostgreSQL would go on: 0A000 "not supported".
CREATE TABLE items (id bigint PRIMARY KEY, embedding vector(3));
INSERT INTO items VALUES (1, '[1,2,3]');
-- an index method varvedb does not have
CREATE INDEX ON items USING brin (embedding vector_l2_ops);
-- !! 0A000
-- the failed statement left the table as it was
SELECT id, embedding FROM items;
-- => [(1, [1.0, 2.0, 3.0])]

-- a vector or halfvec column without a dimension (pgvector's rows of any dimension, whose
-- HNSW index pgvector refuses: "column does not have dimensions"): varvedb keeps a
-- column's vectors in one array of one dimension, so it asks for vector(n)
CREATE TABLE anydim (id bigint PRIMARY KEY, embedding vector);
-- !! 0A000
CREATE TABLE anydim (id bigint PRIMARY KEY, embedding halfvec);
-- !! 0A000
ALTER TABLE items ADD COLUMN other vector;
-- !! 0A000
-- (the table is as it was, and casts without a dimension still work)
SELECT id, embedding::vector, embedding::halfvec FROM items;
-- => [(1, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])]

-- an "id" column that is neither the primary key nor a serial (its values must be unique)
CREATE TABLE plain (id int, x int);
-- !! 0A000

-- joins, set operations and window functions past what varvedb has (sql/relations.py):
-- each is refused naming the feature
CREATE TABLE a (id bigint PRIMARY KEY, k int);
INSERT INTO a VALUES (1, 10), (2, 20);
SELECT a.id FROM a, LATERAL (SELECT b.id FROM a b WHERE b.k = a.k) s;
-- !! 0A000
WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r;
-- !! 0A000
SELECT id FROM a INTERSECT SELECT id FROM a;
-- !! 0A000
SELECT id FROM a EXCEPT SELECT id FROM a;
-- !! 0A000
SELECT * FROM a x NATURAL JOIN a y;
-- !! 0A000
SELECT * FROM a x JOIN a y USING (id);
-- !! 0A000
SELECT id, sum(k) OVER (ORDER BY id) FROM a;
-- !! 0A000
SELECT id, lag(k) OVER (ORDER BY id) FROM a;
-- !! 0A000
SELECT id, row_number() OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM a;
-- !! 0A000
SELECT id, rank() OVER w FROM a WINDOW w AS (ORDER BY id);
-- !! 0A000
SELECT x.id FROM a x JOIN a y ON x.id = y.id, abs(-3) WITH ORDINALITY g;
-- !! 0A000
SELECT k FROM a UNION SELECT id FROM a ORDER BY k + 1;
-- !! 0A000
-- correlated subqueries: a scalar, EXISTS or ARRAY one reads the outer row; IN (SELECT ...)
-- does not, nor a bare outer column (a name is always its own level's)
SELECT x.id FROM a x WHERE x.id IN (SELECT y.id FROM a y WHERE y.k = x.k);
-- !! 0A000
SELECT id, (SELECT count(*) FROM a y WHERE y.k = k) FROM a ORDER BY id;
-- => [(1, 2), (2, 2)]
-- arrays: one subscript, not slices; one dimension; series of integers only
SELECT (ARRAY(SELECT id FROM a))[1:2];
-- !! 0A000
SELECT '{{1,2},{3,4}}'::int[];
-- !! 0A000
SELECT * FROM generate_series(1.5, 3);
-- !! 0A000
SELECT string_agg(DISTINCT 'x', ',');
-- !! 0A000
-- partitioned tables and their partitions (a partial HNSW index is pgvector's other way)
CREATE TABLE parted (id bigint PRIMARY KEY, category_id int) PARTITION BY LIST (category_id);
-- !! 0A000
CREATE TABLE items_1 PARTITION OF items FOR VALUES IN (1);
-- !! 0A000
-- a result column of vectors of different dimensions (PostgreSQL's may mix them)
SELECT '[1,2,3]'::vector UNION SELECT '[1,2]'::vector;
-- !! 0A000
SELECT column1::vector FROM (VALUES ('[1,2]'), ('[1,2,3]')) t;
-- !! 0A000
SELECT CASE WHEN column1 THEN '[1,2]'::vector ELSE '[1,2,3]'::vector END
    FROM (VALUES (true), (false)) t;
-- !! 0A000
-- rows a statement builds that no table holds are bounded (MAX_BUILT_ROWS, 10 million):
-- a series or a join's pairs past it is 54000 before anything is allocated
SELECT count(*) FROM generate_series(1, 10000001) g;
-- !! 54000
SELECT count(*) FROM generate_series(1, 10000000) g;
-- => [(10000000,)]
SELECT count(*) FROM generate_series(1, 4000) a, generate_series(1, 3000) b;
-- !! 54000
-- tsvector || and tsquery || (an untyped literal beside one: a KeyError was raised);
-- text beside either is text's concatenation, as PostgreSQL's
SELECT 'x' || to_tsquery('simple', 'a');
-- !! 0A000
SELECT to_tsvector('simple', 'a') || 'b';
-- !! 0A000
SELECT to_tsquery('simple', 'a') || to_tsquery('simple', 'b');
-- !! 0A000
SELECT 'x'::text || to_tsquery('simple', 'a');
-- => [("x'a'",)]
