-- 2: one row per indexed term: how many rows hold it (BM25's document frequency, which a
-- COUNT over the term's postings cost 1-3 ms for a common term at 100k) and the ceilings a
-- top-k ranking bounds each term's share of a score with (amcp.store.postgres.bm25.Pruned):
-- its largest frequency in one row per column and the shortest row holding it. Kept in
-- every write's transaction. A purge lowers docs only: a ceiling left loose is still a
-- ceiling (the bound stays safe, it only prunes less).
CREATE TABLE term_stats (
    term    text COLLATE "C" PRIMARY KEY,
    docs    bigint NOT NULL,
    max_own integer NOT NULL,
    max_ctx integer NOT NULL,
    min_len integer NOT NULL
);
INSERT INTO term_stats(term, docs, max_own, max_ctx, min_len)
SELECT term, COUNT(*), MAX(tf_own), MAX(tf_ctx), MIN(doclen) FROM postings GROUP BY term;
