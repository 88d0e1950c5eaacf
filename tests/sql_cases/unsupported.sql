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
-- one vector index per column (PostgreSQL would build a second, for another operator class)
CREATE INDEX items_l2 ON items USING hnsw (embedding vector_l2_ops);
CREATE INDEX items_cos ON items USING hnsw (embedding vector_cosine_ops);
-- !! 0A000
