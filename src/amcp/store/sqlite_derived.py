"""Index rows ``SQLiteStore`` derives from a record's body — invalidation events
(``record_events``, migration 3) and causal/session links (``record_links``, migration 8) —
and their backfill for stores written before those tables existed.

One derivation for both paths, so a backfilled store holds exactly the rows a fresh write
would have written.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from amcp.store.links import links_of
from amcp.store.schema import SCHEMA_VERSION
from amcp.store.sqlite_rows import KID, ROW_COLS, ROWID

if TYPE_CHECKING:
    from amcp.amf.record import AMFRecord
    from amcp.store.sqlite_changes import ChangeLog
    from amcp.store.sqlite_verified import Verifier

log = logging.getLogger(__name__)

EVENTS_SQL = "INSERT OR IGNORE INTO record_events(rid, event) VALUES (?,?)"
LINKS_SQL = "INSERT OR IGNORE INTO record_links(rid, kind, ref) VALUES (?,?,?)"
_EVENTS_MIGRATION = 3  # the schema version that added record_events
LINKS_PENDING = "backfill.links"  # store_meta marker set by migration 8 (record_links)


def event_rows(rowid: int, record: AMFRecord) -> list[tuple[int, str]]:
    decay = record.meta.decay_model
    events = (decay.invalidation_events or ()) if decay is not None else ()
    return [(rowid, e) for e in events]


def link_rows(rowid: int, record: AMFRecord) -> list[tuple[int, str, str]]:
    return [(rowid, kind, ref) for kind, ref in links_of(record)]


def backfill(changes: ChangeLog, verifier: Verifier, migrated_from: int) -> None:
    """Fill the indexes a migration just added, if the store had records before it; call
    locked, right after ``schema.migrate`` (which returned ``migrated_from``).

    Migrations 3 and 8 are SQL only and cannot read record bodies (which may be sealed with
    the node's key). Migration 8 also writes a marker row in its own transaction, deleted
    here in the backfill's, so a crash in between runs the backfill again on the next open.
    """
    db = changes.conn.db
    events = bool(migrated_from) and migrated_from < _EVENTS_MIGRATION <= SCHEMA_VERSION
    links = db.execute(
        "SELECT 1 FROM store_meta WHERE key=?", (LINKS_PENDING,)
    ).fetchone() is not None
    if not (events or links):
        return
    with changes.atomic():  # read inside it too: no purge may slip in between
        rows = db.execute(f"SELECT {ROW_COLS} FROM records r WHERE r.body IS NOT NULL").fetchall()
        for row in rows:
            # A row that fails verification is quarantined by Verifier.decode (and reported by
            # verify); it must not make the whole store unopenable here. Nothing can find it
            # through these indexes, as nothing finds it by scanning either.
            found = verifier.decode(row)
            if found is None or found.record is None:
                log.warning("backfill skipped %s: it does not verify", row[KID])
                continue
            if events:
                db.executemany(EVENTS_SQL, event_rows(int(row[ROWID]), found.record))
            if links:
                db.executemany(LINKS_SQL, link_rows(int(row[ROWID]), found.record))
        db.execute("DELETE FROM store_meta WHERE key=?", (LINKS_PENDING,))
