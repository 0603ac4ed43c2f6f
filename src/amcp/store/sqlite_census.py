"""The census the signed head carries (``chain.Head.census``), counted from the tables.

Each count is one indexed ``COUNT`` (milliseconds at 100k records), so the check on open can
afford all of them. They catch what the set digest of seals cannot see without re-checking
every row: a state column edited to *hide* a live record (its lifecycle, its expiry — the
stored seal is unchanged, so the sum of seals is too), and index rows added or deleted
behind the node's back (a record left out of every scoped search). Writers keep the counts
by deltas in the transaction that changes them (``ChangeLog.count``).
"""

from __future__ import annotations

from typing import Any

LIFECYCLE = "lc:"  # + the lifecycle value
EXPIRING = "expiring"
SCOPES, TAGS, LEXICAL, VECTORS = "scope_rows", "tag_rows", "lexical_rows", "vector_rows"

_INDEX_TABLES = ((SCOPES, "record_scopes"), (TAGS, "record_tags"), (VECTORS, "vectors"))


def census_of(db: Any, *, lexical_table: str = "records_fts_docsize") -> dict[str, int]:
    """The counts as the tables hold them now (call inside the caller's snapshot). ``db``
    is any DB-API connection with ``execute`` (the statements take no parameters, so
    SQLite and psycopg run them alike); ``lexical_table`` has one row per indexed record
    (FTS5's docsize table here, the PostgreSQL adapter's ``lexical``)."""
    counts = {
        LIFECYCLE + str(lc): int(n)
        for lc, n in db.execute("SELECT lifecycle, COUNT(*) FROM records GROUP BY lifecycle")
    }
    counts[EXPIRING] = int(
        db.execute("SELECT COUNT(*) FROM records WHERE expires_at IS NOT NULL").fetchone()[0]
    )
    for key, table in (*_INDEX_TABLES, (LEXICAL, lexical_table)):
        counts[key] = int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    return {k: v for k, v in counts.items() if v}


def differences(signed: dict[str, int], found: dict[str, int]) -> list[str]:
    """What differs, as ``name: signed N, found M`` (empty when the census matches)."""
    return [
        f"{key}: signed {signed.get(key, 0)}, found {found.get(key, 0)}"
        for key in sorted(signed.keys() | found.keys())
        if signed.get(key, 0) != found.get(key, 0)
    ]


__all__ = ["EXPIRING", "LEXICAL", "LIFECYCLE", "SCOPES", "TAGS", "VECTORS", "census_of",
           "differences"]
