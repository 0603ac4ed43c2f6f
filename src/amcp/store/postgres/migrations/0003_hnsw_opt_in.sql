-- 3: the HNSW index the adapter used to create with the first vector goes: recall never
-- queried it (it builds its own index from the vectors), and keeping it up to date cost
-- every write ~8.5 ms inside the store's write lock. PostgresStore(hnsw=True) builds it
-- again for whoever queries pgvector directly (amcp.store.postgres.vectors).
DROP INDEX IF EXISTS vectors_hnsw;
DELETE FROM store_meta WHERE key = 'vectors.hnsw_dim';
