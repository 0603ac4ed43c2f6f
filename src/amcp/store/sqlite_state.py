"""The SQLiteStore's state changes: lifecycle, purge, tombstones, weights.

Each one reads the record's row *verified* (its seal), appends its change to the log,
rewrites the row's sealed columns with a new seal and moves the signed head's set digest by
the difference (``rowseal``), in one transaction. A state change on a row that fails
verification is refused as a store problem (``StoreIntegrityError``), never applied on top of
a column nothing checks.
"""

from __future__ import annotations

import time
from typing import Any

from amcp.amf.types import Lifecycle
from amcp.store import sqlite_census as census
from amcp.store import sqlite_rows as col
from amcp.store import termpeaks, termstats
from amcp.store.base import ChangeOp
from amcp.store.rowstate import after_purge, after_state, after_weight, state_details, tombstone
from amcp.store.sqlite_access import SQLiteAccess
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_conn import SQLiteConn
from amcp.store.sqlite_rows import GET_BY_ID, INSERT_SEALED, UPDATE_SEALED
from amcp.store.sqlite_verified import Verifier


class StateChanges:
    """Lifecycle changes, purges, tombstones and weights, each one logged transaction."""

    def __init__(
        self, conn: SQLiteConn, changes: ChangeLog, verifier: Verifier, access: SQLiteAccess
    ) -> None:
        self._db = conn.db
        self._changes = changes
        self._verifier = verifier
        self._access = access

    def _rewrite(self, row: Any, values: list[Any], body: bytes | None) -> None:
        """Write a row's new sealed columns and body with their new seal."""
        seal = self._verifier.sealer.seal(row[col.ROWID], values, body)
        self._db.execute(UPDATE_SEALED, (*values[1:], body, seal, row[col.ROWID]))
        self._changes.resealed(row[col.SEAL], seal)

    def set_state(
        self,
        knowledge_id: str,
        op: ChangeOp,
        *,
        hlc: int,
        lifecycle: Lifecycle,
        reason: str | None = None,
        superseded_by: str | None = None,
    ) -> None:
        with self._changes.atomic():
            row = self._verifier.live_row(knowledge_id)
            rowid = row[col.ROWID]
            active = lifecycle is Lifecycle.ACTIVE
            if (row[col.LIFECYCLE] == Lifecycle.ACTIVE) != active:
                # Leaving (or re-entering) the active set leaves (re-enters) its scopes' counts.
                termstats.count_rows(self._db, [rowid], +1 if active else -1)
            details = state_details(lifecycle, reason, superseded_by)
            seq = self._changes.append(op, knowledge_id, hlc, details)
            self._changes.count(census.LIFECYCLE + str(row[col.LIFECYCLE]), -1)
            self._changes.count(census.LIFECYCLE + lifecycle.value)
            values = after_state(row[col.FACTS], lifecycle=lifecycle, hlc=hlc, reason=reason,
                                 superseded_by=superseded_by, seq=seq)
            self._rewrite(row, values, row[col.BODY])

    def put_tombstone(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> bool:
        """Record that ``knowledge_id`` was purged elsewhere, so it can never arrive later.

        Returns False when the id is already a tombstone here."""
        with self._changes.atomic():
            row = self._db.execute(GET_BY_ID, (knowledge_id,)).fetchone()
            if row is not None:
                if row[col.LIFECYCLE] == Lifecycle.PURGED and self._verifier.verified(row):
                    return False
                self.purge(knowledge_id, hlc=hlc, reason=reason)
                return True
            seq = self._changes.append(ChangeOp.PURGE, knowledge_id, hlc, {"reason": reason})
            values = tombstone(knowledge_id, hlc=hlc, reason=reason, seq=seq, now=time.time())
            # The row id is chosen here (as put_many does): the seal covers it.
            top = self._db.execute("SELECT COALESCE(MAX(rowid), 0) FROM records").fetchone()
            rowid = int(top[0]) + 1
            seal = self._verifier.sealer.seal(rowid, values, None)
            self._db.execute(INSERT_SEALED, (rowid, *values, None, seal))
            self._changes.resealed(None, seal, rows=1)
            self._changes.count(census.LIFECYCLE + Lifecycle.PURGED.value)
        return True

    def purge(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> None:
        with self._changes.atomic():
            row = self._verifier.live_row(knowledge_id, allow_purged=True)
            rowid = row[col.ROWID]
            if row[col.LIFECYCLE] == Lifecycle.ACTIVE:
                termstats.count_rows(self._db, [rowid], -1)  # before its FTS row goes
            seq = self._changes.append(ChangeOp.PURGE, knowledge_id, hlc, {"reason": reason})
            self._changes.count(census.LIFECYCLE + str(row[col.LIFECYCLE]), -1)
            self._changes.count(census.LIFECYCLE + Lifecycle.PURGED.value)
            values = after_purge(row[col.FACTS], hlc=hlc, reason=reason, seq=seq)
            self._rewrite(row, values, None)
            self.drop_derived(rowid)
            self._access.drop(knowledge_id)

    def drop_derived(self, rowid: int) -> None:
        """Delete a purged record's index rows (lexical, vector, tags, events, links,
        access days); its scopes stay, for the tombstone's visibility."""
        fts = self._db.execute(
            "SELECT terms, context FROM records_fts WHERE rowid=?", (rowid,)
        ).fetchone()
        self._db.execute("DELETE FROM records_fts WHERE rowid=?", (rowid,))
        if fts is not None:
            termpeaks.forget_gone(self._db, *fts)
            self._changes.count(census.LEXICAL, -1)
        for key, table in ((census.VECTORS, "vectors WHERE rowid"),
                           (census.TAGS, "record_tags WHERE rid"), ("", "record_events WHERE rid"),
                           ("", "record_links WHERE rid"), ("", "access_daily WHERE rid")):
            gone = self._db.execute(f"DELETE FROM {table}=?", (rowid,)).rowcount
            if key:
                self._changes.count(key, -gone)

    def set_weight(self, knowledge_id: str, weight: float) -> None:
        """A learned weight, logged (``ChangeOp.WEIGHT``) and sealed like any other state."""
        with self._changes.atomic():
            row = self._verifier.live_row(knowledge_id)
            if row[col.WEIGHT] == float(weight):
                return  # unchanged: nothing to log
            seq = self._changes.append(
                ChangeOp.WEIGHT, knowledge_id, row[col.HLC], {"weight": float(weight)}
            )
            values = after_weight(row[col.FACTS], weight=weight, seq=seq)
            self._rewrite(row, values, row[col.BODY])

