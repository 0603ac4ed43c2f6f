"""Numbered SQLite schema migrations. Append only: a released migration never changes.

``PRAGMA user_version`` records how many have run; each runs in its own transaction, so a
crash between two leaves a store at a well-defined version.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from amcp.store import termpeaks, termstats

if TYPE_CHECKING:
    from collections.abc import Callable

MIGRATIONS: tuple[str, ...] = (
    # Plain rowid tables, not WITHOUT ROWID: SQLite 3.40's quick_check misreports NOT NULL
    # columns of WITHOUT ROWID tables as NULL, which would fail our integrity check on open.
    # 1: records, scopes, tags, lexical and vector indexes, the change log, store metadata.
    """
    CREATE TABLE records (
        rowid         INTEGER PRIMARY KEY,
        knowledge_id  TEXT NOT NULL UNIQUE,
        type          TEXT NOT NULL,
        kind          TEXT,
        subject       TEXT,
        created_at    TEXT,
        created_by    TEXT,
        lifecycle     TEXT NOT NULL,
        hlc           INTEGER NOT NULL,
        superseded_by TEXT,
        reason        TEXT,
        expires_at    REAL,
        sensitive     INTEGER NOT NULL DEFAULT 0,
        checksum      TEXT,
        content_key   TEXT,
        body          BLOB,
        weight        REAL NOT NULL DEFAULT 0.5,
        access_count  INTEGER NOT NULL DEFAULT 0,
        last_access   REAL,
        stored_at     REAL NOT NULL,
        chain_seq     INTEGER NOT NULL
    );
    CREATE INDEX records_lifecycle ON records(lifecycle, type);
    CREATE INDEX records_created ON records(created_at);
    CREATE INDEX records_subject ON records(subject);
    CREATE INDEX records_content ON records(content_key);
    CREATE INDEX records_expires ON records(expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE record_scopes (
        rid INTEGER NOT NULL REFERENCES records(rowid),
        scope TEXT NOT NULL,
        PRIMARY KEY (scope, rid)
    );
    CREATE TABLE record_tags (
        rid INTEGER NOT NULL REFERENCES records(rowid),
        tag   TEXT NOT NULL,
        PRIMARY KEY (tag, rid)
    );
    CREATE VIRTUAL TABLE records_fts USING fts5(
        terms, context, tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TABLE vectors (
        rowid INTEGER PRIMARY KEY REFERENCES records(rowid),
        vec   BLOB NOT NULL
    );
    CREATE TABLE changes (
        seq          INTEGER PRIMARY KEY,
        hlc          INTEGER NOT NULL,
        op           TEXT NOT NULL,
        knowledge_id TEXT NOT NULL,
        details      BLOB NOT NULL,
        hash         TEXT NOT NULL
    );
    CREATE INDEX changes_hlc ON changes(hlc);
    CREATE INDEX changes_kid ON changes(knowledge_id);
    CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 2: per-day access counts, so "accessed in the last 7 days" is exact, not estimated.
    """
    CREATE TABLE access_daily (
        rid INTEGER NOT NULL REFERENCES records(rowid),
        day   INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (rid, day)
    );
    """,
    # 3: invalidation event names per record (meta.decay_model.invalidation_events), so
    # firing an event finds its records through an index instead of decoding every body.
    """
    CREATE TABLE record_events (
        rid   INTEGER NOT NULL REFERENCES records(rowid),
        event TEXT NOT NULL,
        PRIMARY KEY (event, rid)
    );
    """,
    # 4: a vocabulary view of the lexical index, so a query can drop terms that occur in a
    # large share of records before asking FTS5 to score them (common terms cost the most
    # and rank the least).
    """
    CREATE VIRTUAL TABLE records_fts_vocab USING fts5vocab(records_fts, 'row');
    """,
    # 5: the pointer tier in index order (active records by learned weight, then recency,
    # with the columns its filters read), so "the top 40 of a scope" stops after about 40
    # index entries instead of reading and sorting every record of the scope (~60 ms at 10k
    # records: the rows carry their bodies). The session-start hook pays this on every start;
    # the second index serves the same for one kind (the user's preferences).
    """
    CREATE INDEX records_ranked ON records(
        lifecycle, weight DESC, created_at DESC, knowledge_id, sensitive, expires_at, kind
    );
    CREATE INDEX records_ranked_kind ON records(
        kind, lifecycle, weight DESC, created_at DESC, knowledge_id, sensitive, expires_at
    );
    """,
    # 6: per-scope term statistics (document frequency per term, document and token counts
    # per scope), so a recall filtered to a scope is scored with that scope's IDF and
    # common terms, not the whole store's (amcp.store.termstats; backfilled below).
    """
    CREATE TABLE scope_terms (
        scope TEXT NOT NULL,
        term  TEXT NOT NULL,
        docs  INTEGER NOT NULL,
        PRIMARY KEY (scope, term)
    );
    CREATE TABLE scope_sizes (
        scope  TEXT PRIMARY KEY,
        docs   INTEGER NOT NULL,
        tokens INTEGER NOT NULL
    );
    """,
    # 7: per-term frequency ceilings (largest count in one row, per FTS column), so pruned
    # BM25 can bound a term's share of a row's score tightly (amcp.store.termpeaks;
    # backfilled below). The empty term holds the slack for text FTS5 may split otherwise.
    """
    CREATE TABLE term_peaks (
        term TEXT PRIMARY KEY,
        own  INTEGER NOT NULL,
        ctx  INTEGER NOT NULL
    );
    """,
    # 8: causal links and work-session marks per record (amcp.store.links), so AMQL's
    # caused_by and session_id() find their records through an index instead of decoding
    # every body. SQLiteStore backfills it on open (the bodies may be encrypted) while the
    # marker row says so, and drops the marker in the backfill's own transaction.
    """
    CREATE TABLE record_links (
        rid  INTEGER NOT NULL REFERENCES records(rowid),
        kind TEXT NOT NULL,
        ref  TEXT NOT NULL,
        PRIMARY KEY (kind, ref, rid)
    );
    INSERT OR REPLACE INTO store_meta(key, value) VALUES ('backfill.links', 'pending');
    """,
    # 9: row seals (amcp.store.rowseal): the sealed scopes and envelope columns and each
    # row's HMAC seal; the signed head gains the row count and set digest. SQLite cannot
    # compute them (the key is the node's), so SQLiteStore seals every row on open while
    # the marker says so, in the backfill's own transaction (sqlite_seals.backfill_seals).
    # The columns are added by ``_add_seal_columns`` (below), which skips those present.
    """
    INSERT OR REPLACE INTO store_meta(key, value) VALUES ('backfill.seals', 'pending');
    """,
    # 10: a narrow index for counting vector rows. The signed head's census counts them on
    # every open (the store's and the hooks' fast reader's); without it COUNT(*) walks the
    # table, whose rows carry 1.5 KB vectors: ~80 ms at 100k records, ~0.1 ms with it. And
    # the head gains its MAC (store/headtext.py): SQLiteStore re-stores the signed head with
    # it on open while the marker says so (sqlite_seals.backfill_head_mac).
    """
    CREATE INDEX IF NOT EXISTS vectors_count ON vectors(rowid);
    INSERT OR REPLACE INTO store_meta(key, value) VALUES ('backfill.head-mac', 'pending');
    """,
    # 11: tier 0's local index of evicted records (store/sqlite_tiers.py): one pointer per
    # record whose body was dropped because a higher-tier peer holds it. ``seq`` is the
    # signed ``evict`` change the pointer's checked facts are read against.
    """
    CREATE TABLE IF NOT EXISTS evicted (
        knowledge_id TEXT PRIMARY KEY,
        seq          INTEGER NOT NULL,
        subject      TEXT NOT NULL,
        tags         TEXT NOT NULL,
        text         TEXT NOT NULL,
        size         INTEGER NOT NULL,
        holder       TEXT NOT NULL,
        tier         INTEGER NOT NULL,
        evicted_at   REAL NOT NULL
    );
    """,
)

# Python run after a migration's SQL, in the same transaction: a backfill that needs what
# SQL cannot do (tokens of the stored text), so a crash never leaves a migrated store with
# its new tables empty.
def _add_seal_columns(db: sqlite3.Connection) -> None:
    """Migration 9's columns, each unless present (ALTER TABLE has no IF NOT EXISTS)."""
    have = {row[1] for row in db.execute("PRAGMA table_info(records)")}
    for name, kind in (("scopes", "TEXT"), ("envelope", "TEXT"), ("seal", "BLOB")):
        if name not in have:
            db.execute(f"ALTER TABLE records ADD COLUMN {name} {kind}")
    # The check on open sums every seal: a covering index makes that a walk of ~3 MB at
    # 100k records instead of the table itself, whose rows carry the bodies (~60 MB).
    db.execute("CREATE INDEX IF NOT EXISTS records_seal ON records(seal)")


BACKFILLS: dict[int, Callable[[sqlite3.Connection], None]] = {
    6: termstats.backfill,
    7: termpeaks.backfill,
    9: _add_seal_columns,
}

SCHEMA_VERSION = len(MIGRATIONS)


def split_sql(script: str) -> list[str]:
    """A migration's statements (they contain no ';' inside literals or triggers)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations ``db`` lacks, each in its own transaction; the version it had.

    Raises ValueError for a store newer than this code, and sqlite3.Error (message naming
    the migration) when one fails — that migration is rolled back, earlier ones stay.
    """
    first = int(db.execute("PRAGMA user_version").fetchone()[0])
    if first == SCHEMA_VERSION:
        return first  # versions only grow: nothing to do, and no write lock taken
    while True:
        # The version is read inside the write transaction: several processes opening a new
        # store at once each see the migrations the others have already committed, instead
        # of all applying migration 1 ("table records already exists").
        db.execute("BEGIN IMMEDIATE")
        number = int(db.execute("PRAGMA user_version").fetchone()[0])
        if number > SCHEMA_VERSION:
            db.execute("ROLLBACK")
            raise ValueError(
                f"has schema v{number}; this amcp knows up to v{SCHEMA_VERSION} — upgrade amcp"
            )
        if number == SCHEMA_VERSION:
            db.execute("COMMIT")
            return first
        try:
            for statement in split_sql(MIGRATIONS[number]):
                db.execute(statement)
            if number + 1 in BACKFILLS:
                BACKFILLS[number + 1](db)
            db.execute(f"PRAGMA user_version={number + 1}")
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            db.execute("ROLLBACK")
            raise sqlite3.Error(f"migration {number + 1} failed: {exc}") from exc
        except BaseException:  # a backfill interrupted: nothing of this migration stays
            db.execute("ROLLBACK")
            raise
