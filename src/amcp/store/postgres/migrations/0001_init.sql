-- 1: the whole schema of the PostgreSQL adapter, in the SQLite adapter's shape (same table
-- and column names, so amcp.store.sqlfilter's WHERE clauses serve both), plus what SQLite's
-- FTS5 and the vector BLOBs were: a postings table for BM25 and a pgvector column.
-- Every text column compares bytewise (COLLATE "C"), as SQLite's do: ISO timestamps,
-- knowledge-id prefixes and subject orders must not depend on the server's locale.
-- No foreign keys between the index tables and records: every write keeps them in step in
-- one transaction, and whoever can edit rows can drop constraints too; what catches an
-- edit is the seals and the signed census (amcp.store.rowseal, sqlite_census).
CREATE TABLE records (
    rowid         bigint PRIMARY KEY,
    knowledge_id  text COLLATE "C" NOT NULL UNIQUE,
    type          text COLLATE "C" NOT NULL,
    kind          text COLLATE "C",
    subject       text COLLATE "C",
    created_at    text COLLATE "C",
    created_by    text COLLATE "C",
    scopes        text COLLATE "C",
    lifecycle     text COLLATE "C" NOT NULL,
    hlc           bigint NOT NULL,
    superseded_by text COLLATE "C",
    reason        text COLLATE "C",
    expires_at    double precision,
    sensitive     integer NOT NULL DEFAULT 0,
    weight        double precision NOT NULL DEFAULT 0.5,
    checksum      text COLLATE "C",
    envelope      text COLLATE "C",
    content_key   text COLLATE "C",
    stored_at     double precision NOT NULL,
    chain_seq     bigint NOT NULL,
    body          bytea,
    seal          bytea,
    access_count  bigint NOT NULL DEFAULT 0,
    last_access   double precision
);
CREATE INDEX records_lifecycle ON records(lifecycle, type);
CREATE INDEX records_created ON records(created_at);
CREATE INDEX records_subject ON records(subject);
CREATE INDEX records_content ON records(content_key);
CREATE INDEX records_expires ON records(expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX records_ranked ON records(lifecycle, weight DESC, created_at DESC, knowledge_id);

CREATE TABLE record_scopes (rid bigint NOT NULL, scope text COLLATE "C" NOT NULL, PRIMARY KEY (scope, rid));
CREATE INDEX record_scopes_rid ON record_scopes(rid);
CREATE TABLE record_tags (rid bigint NOT NULL, tag text COLLATE "C" NOT NULL, PRIMARY KEY (tag, rid));
CREATE INDEX record_tags_rid ON record_tags(rid);
CREATE TABLE record_events (rid bigint NOT NULL, event text COLLATE "C" NOT NULL, PRIMARY KEY (event, rid));
CREATE INDEX record_events_rid ON record_events(rid);
CREATE TABLE record_links (
    rid bigint NOT NULL, kind text COLLATE "C" NOT NULL, ref text COLLATE "C" NOT NULL, PRIMARY KEY (kind, ref, rid)
);
CREATE INDEX record_links_rid ON record_links(rid);

-- The lexical index: each record's pre-tokenised own text and context (what FTS5 held),
-- and one posting per (term, record) with its frequency in each column and the record's
-- length, so BM25 is one index range scan per query term (amcp.store.postgres.bm25).
CREATE TABLE lexical (
    rowid   bigint PRIMARY KEY,
    terms   text COLLATE "C" NOT NULL,
    context text COLLATE "C" NOT NULL,
    tokens  integer NOT NULL
);
CREATE TABLE postings (
    term   text COLLATE "C" NOT NULL,
    rid    bigint NOT NULL,
    tf_own integer NOT NULL,
    tf_ctx integer NOT NULL,
    doclen integer NOT NULL,
    PRIMARY KEY (term, rid)
);
CREATE INDEX postings_rid ON postings(rid);
-- Whole-index totals (documents, tokens) for BM25's idf and average length: one row, kept
-- in every write's transaction (writers are serialised by the store's advisory lock).
CREATE TABLE lexical_totals (
    id     integer PRIMARY KEY CHECK (id = 1),
    docs   bigint NOT NULL,
    tokens bigint NOT NULL
);
INSERT INTO lexical_totals(id, docs, tokens) VALUES (1, 0, 0);
-- Per-scope statistics of active records, as SQLite's migration 6 (amcp.store.termstats).
CREATE TABLE scope_terms (
    scope text COLLATE "C" NOT NULL, term text COLLATE "C" NOT NULL, docs integer NOT NULL, PRIMARY KEY (scope, term)
);
CREATE TABLE scope_sizes (scope text COLLATE "C" PRIMARY KEY, docs integer NOT NULL, tokens bigint NOT NULL);

-- Vectors: pgvector without a fixed dimension (the embedder decides it); the HNSW cosine
-- index is an expression index created for the dimension in use (PostgresStore).
CREATE TABLE vectors (rowid bigint PRIMARY KEY, vec vector NOT NULL);

CREATE TABLE changes (
    seq          bigint PRIMARY KEY,
    hlc          bigint NOT NULL,
    op           text COLLATE "C" NOT NULL,
    knowledge_id text COLLATE "C" NOT NULL,
    details      bytea NOT NULL,
    hash         text COLLATE "C" NOT NULL
);
CREATE INDEX changes_hlc ON changes(hlc, seq);
CREATE INDEX changes_kid ON changes(knowledge_id, seq);

CREATE TABLE access_daily (
    rid bigint NOT NULL, day integer NOT NULL, count bigint NOT NULL, PRIMARY KEY (rid, day)
);
