-- 5: the records' primary key carries each row's seal, so the check on open sums the seals
-- from the index alone (an index-only scan: ~45 bytes an entry) instead of walking the
-- heap past every body to the last column (~1.6 kB a row; 1M rows were 1.5 GB read per
-- open). Like migration 4 for the postings. Only pages the visibility map marks
-- all-visible are served from the index; the rest are read from the heap, so what is
-- summed is always the snapshot's rows (amcp.store.postgres.verify).
ALTER TABLE records DROP CONSTRAINT records_pkey,
    ADD PRIMARY KEY (rowid) INCLUDE (seal);
