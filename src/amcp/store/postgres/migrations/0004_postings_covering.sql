-- 4: the postings' primary key carries the frequencies and the row length, so ranking reads
-- a term's postings from the index alone, in (term, rid) order: as a heap table they were
-- one random page read per posting (17k pages for a four-term question at 100k).
ALTER TABLE postings DROP CONSTRAINT postings_pkey,
    ADD PRIMARY KEY (term, rid) INCLUDE (tf_own, tf_ctx, doclen);
