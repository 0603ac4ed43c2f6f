"""The PostgreSQL store's record writes: puts, lifecycle changes, purge, tombstones,
weights and vectors — each in one write transaction that appends its change, reseals the
row and moves the signed head (``changes.HeadDelta``), as the SQLite adapter does
(``sqlite.py``, ``sqlite_state.py``; the write rules are the same and so are the results).

A write decision is never taken on a row whose seal does not verify: it is refused as a
store problem (``StoreIntegrityError``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.errors import ValidationError
from amcp.keyring import Keyring
from amcp.store import sqlite_census as census
from amcp.store import sqlite_rows as col
from amcp.store import termstats
from amcp.store.base import ChangeOp, PutItem, PutResult
from amcp.store.postgres.access import AccessLog
from amcp.store.postgres.changes import ChangeLog
from amcp.store.postgres.database import Connection, insert_rows
from amcp.store.postgres.lexical import LexicalIndex
from amcp.store.postgres.rows import GET_BY_ID, GET_MANY, INSERT_SEALED, UPDATE_SEALED
from amcp.store.postgres.vectors import VectorSource
from amcp.store.postgres.verified import RowVerifier
from amcp.store.rowseal import SEALED, Sealer
from amcp.store.rowstate import (
    after_purge,
    after_state,
    after_weight,
    new_row,
    state_details,
    tombstone,
)
from amcp.store.sqlite_batch import rewrite_result
from amcp.store.sqlite_derived import event_rows, link_rows

if TYPE_CHECKING:
    import numpy as np


class _Batch:
    """The rows one ``put_many`` inserts, table by table."""

    __slots__ = ("changes", "events", "lexical", "links", "records", "scopes", "tags", "vectors")

    def __init__(self) -> None:
        self.records: list[tuple[Any, ...]] = []
        self.changes: list[tuple[Any, ...]] = []
        self.scopes: list[tuple[int, str]] = []
        self.tags: list[tuple[int, str]] = []
        self.events: list[tuple[int, str]] = []
        self.links: list[tuple[int, str, str]] = []
        self.lexical: list[tuple[int, str, str]] = []
        self.vectors: list[tuple[int, np.ndarray]] = []


def _no_nul(kid: str, values: Sequence[Any]) -> None:
    """PostgreSQL text cannot hold NUL: one clear error, not a driver one, and nothing is
    written (the sealed columns must round-trip exactly, so they are not altered)."""
    for name, value in zip(SEALED, values, strict=True):
        if isinstance(value, str) and "\0" in value:
            raise ValidationError(
                name, f"{kid} holds a NUL character, which PostgreSQL text cannot store"
            )


class Writing(Protocol):
    """``Commits.writing``: a write transaction that nests, pipelined on request."""

    def __call__(self, *, pipelined: bool = False) -> AbstractContextManager[Connection]: ...


class RecordWrites:
    """Every write of one store (see the module docstring)."""

    def __init__(
        self, *, keyring: Keyring, log: ChangeLog, rows: RowVerifier, lexical: LexicalIndex,
        vectors: VectorSource, access: AccessLog,
        atomic: Writing,
        content_key: Callable[[AMFRecord], str],
    ) -> None:
        self._keyring = keyring
        self._log = log
        self._rows = rows
        self._lexical = lexical
        self._vectors = vectors
        self._access = access
        self._atomic = atomic
        self._content_key = content_key
        self.sealer: Sealer | None = None  # set once the store id is known

    @property
    def _sealer(self) -> Sealer:
        assert self.sealer is not None
        return self.sealer

    # -- puts -----------------------------------------------------------------------------

    def put_many(self, items: Sequence[PutItem]) -> list[PutResult]:
        """Store records in one transaction; the change-log hashes are chained in order,
        exactly as one ``put`` after another would chain them.

        Pipelined (``Database.transaction``): the id check is the one read, so the lock is
        held for it and for COMMIT's round trip, which carries every insert. Nothing here
        can fail on the server: ids already stored are answered from that read, under the
        lock, and NUL characters are refused before anything is sent."""
        results: list[PutResult] = []
        with self._atomic(pipelined=True) as conn:
            known = self._known(conn, list(dict.fromkeys(i.record.knowledge_id for i in items)))
            delta = self._log.delta  # the tip read under the lock
            seq, prev, rowid = delta.tip
            batch = _Batch()
            counts = termstats.Deltas()
            now = time.time()
            for item in items:
                kid, checksum = item.record.knowledge_id, item.record.integrity.checksum
                found = known.get(kid)
                if found is not None:
                    results.append(rewrite_result(kid, checksum, found))
                    continue
                seq += 1
                rowid += 1
                prev = self._stage(batch, item, rowid, seq, prev, now)
                if (item.index_text or item.index_context) and item.lifecycle is Lifecycle.ACTIVE:
                    counts.add(item.record.meta.project_scope, *batch.lexical[-1][1:], +1)
                known[kid] = (checksum, item.lifecycle.value, item.hlc, rowid)
                results.append(PutResult(kid, created=True, hlc=item.hlc, rowid=rowid))
            if batch.records:
                delta.tip = (seq, prev, rowid)
                self._write(conn, batch)  # queued: sent with COMMIT (or the next read)
                self._lexical.apply(conn, counts)
        return results

    def _stage(
        self, batch: _Batch, item: PutItem, rowid: int, seq: int, prev: str, now: float
    ) -> str:
        """Add one new record's rows to ``batch``; returns its change's chain hash."""
        record = item.record
        kid = record.knowledge_id
        row = new_row(item, seq=seq, prev=prev, now=now, keyring=self._keyring,
                      content_key=self._content_key(record))
        body, values = row.body, row.values
        batch.changes.append(row.change)
        _no_nul(kid, values)
        seal = self._sealer.seal(rowid, values, body)
        if not item.sensitive:
            self._rows.remember(kid, seal, record)
        delta = self._log.delta
        delta.resealed(None, seal, rows=1)
        delta.count(census.LIFECYCLE + item.lifecycle.value)
        delta.count(census.EXPIRING, int(item.expires_at is not None))
        batch.records.append((rowid, *values, body, seal))
        batch.scopes.extend((rowid, s) for s in record.meta.project_scope)
        batch.tags.extend((rowid, t) for t in record.tags)
        batch.events.extend(event_rows(rowid, record))
        batch.links.extend(link_rows(rowid, record))
        if item.index_text or item.index_context:
            # NUL separates tokens, as FTS5's tokenizer reads it; PostgreSQL text cannot hold it.
            batch.lexical.append((rowid, (item.index_text or "").replace("\0", " "),
                                  (item.index_context or "").replace("\0", " ")))
        if item.vector is not None:
            batch.vectors.append((rowid, item.vector))
        return row.hash

    def _write(self, conn: Connection, batch: _Batch) -> None:
        self._log.write_changes(conn, batch.changes)
        insert_rows(conn, INSERT_SEALED, batch.records)
        delta = self._log.delta
        for key, table, cols, rows in (
            (census.SCOPES, "record_scopes", "rid, scope", list(dict.fromkeys(batch.scopes))),
            (census.TAGS, "record_tags", "rid, tag", list(dict.fromkeys(batch.tags))),
            ("", "record_events", "rid, event", batch.events),
            ("", "record_links", "rid, kind, ref", batch.links),
        ):
            if not rows:
                continue
            types = ["bigint", "text", "text"][: len(rows[0])]
            conn.execute(
                f"INSERT INTO {table}({cols}) SELECT * FROM unnest("
                + ", ".join(f"%b::{t}[]" for t in types)  # binary arrays: see ``lexical``
                + ") ON CONFLICT DO NOTHING",
                tuple(list(c) for c in zip(*rows, strict=True)),
            )
            if key:  # the rows are new (new row ids, duplicates dropped above)
                delta.count(key, len(rows))
        self._lexical.add(conn, batch.lexical)
        self._vectors.add(conn, batch.vectors)

    def _known(self, conn: Connection, knowledge_ids: list[str]) -> dict[str, tuple[Any, ...]]:
        """(checksum, lifecycle, hlc, rowid) of those ids already stored, from verified rows."""
        found: dict[str, tuple[Any, ...]] = {}
        if not knowledge_ids:
            return found
        for row in conn.execute(GET_MANY, (knowledge_ids,)).fetchall():
            kid = row[col.KID]
            if not self._rows.verified(row):
                raise self._rows.refused(kid)
            found[kid] = (row[col.CHECKSUM], row[col.LIFECYCLE], row[col.HLC], row[col.ROWID])
        return found

    # -- state changes --------------------------------------------------------------------

    def _rewrite(self, conn: Connection, row: Any, values: list[Any], body: bytes | None) -> None:
        seal = self._sealer.seal(row[col.ROWID], values, body)
        conn.execute(UPDATE_SEALED, (*values[1:], body, seal, row[col.ROWID]))
        self._log.delta.resealed(row[col.SEAL], seal)

    def set_state(
        self, knowledge_id: str, op: ChangeOp, *, hlc: int, lifecycle: Lifecycle,
        reason: str | None = None, superseded_by: str | None = None,
    ) -> None:
        with self._atomic(pipelined=True) as conn:  # its INSERT and UPDATE cannot fail there
            row = self._rows.live(conn, knowledge_id)
            active = lifecycle is Lifecycle.ACTIVE
            if (row[col.LIFECYCLE] == Lifecycle.ACTIVE) != active:
                self._lexical.count_rows(conn, [row[col.ROWID]], +1 if active else -1)
            details = state_details(lifecycle, reason, superseded_by)
            seq = self._log.append(conn, op, knowledge_id, hlc, details)
            self._log.delta.count(census.LIFECYCLE + str(row[col.LIFECYCLE]), -1)
            self._log.delta.count(census.LIFECYCLE + lifecycle.value)
            values = after_state(row[col.FACTS], lifecycle=lifecycle, hlc=hlc, reason=reason,
                                 superseded_by=superseded_by, seq=seq)
            self._rewrite(conn, row, values, row[col.BODY])

    def put_tombstone(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> bool:
        """Record that ``knowledge_id`` was purged elsewhere; False if it already is here."""
        with self._atomic(pipelined=True) as conn:  # ``purge`` leaves pipeline mode
            row = conn.execute(GET_BY_ID, (knowledge_id,)).fetchone()
            if row is not None:
                if row[col.LIFECYCLE] == Lifecycle.PURGED and self._rows.verified(row):
                    return False
                self.purge(knowledge_id, hlc=hlc, reason=reason)
                return True
            seq = self._log.append(conn, ChangeOp.PURGE, knowledge_id, hlc, {"reason": reason})
            values = tombstone(knowledge_id, hlc=hlc, reason=reason, seq=seq, now=time.time())
            rowid = self._log.delta.next_rowid()
            seal = self._sealer.seal(rowid, values, None)
            insert_rows(conn, INSERT_SEALED, [(rowid, *values, None, seal)])
            self._log.delta.resealed(None, seal, rows=1)
            self._log.delta.count(census.LIFECYCLE + Lifecycle.PURGED.value)
        return True

    def purge(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> None:
        # Not pipelined: the tags' and vectors' DELETEs count what they removed (rowcount).
        with self._atomic() as conn:
            row = self._rows.live(conn, knowledge_id, allow_purged=True)
            rowid = int(row[col.ROWID])
            if row[col.LIFECYCLE] == Lifecycle.ACTIVE:
                self._lexical.count_rows(conn, [rowid], -1)  # before its lexical row goes
            seq = self._log.append(conn, ChangeOp.PURGE, knowledge_id, hlc, {"reason": reason})
            self._log.delta.count(census.LIFECYCLE + str(row[col.LIFECYCLE]), -1)
            self._log.delta.count(census.LIFECYCLE + Lifecycle.PURGED.value)
            values = after_purge(row[col.FACTS], hlc=hlc, reason=reason, seq=seq)
            self._rewrite(conn, row, values, None)
            self._drop_derived(conn, rowid)
            self._access.drop(knowledge_id)

    def _drop_derived(self, conn: Connection, rowid: int) -> None:
        """A purged record's index rows go (its scopes stay, for the tombstone)."""
        self._lexical.drop(conn, rowid)
        self._vectors.drop(conn, rowid)
        gone = conn.execute("DELETE FROM record_tags WHERE rid=%s", (rowid,)).rowcount
        self._log.delta.count(census.TAGS, -gone)
        for table in ("record_events", "record_links", "access_daily"):
            conn.execute(f"DELETE FROM {table} WHERE rid=%s", (rowid,))

    def set_weight(self, knowledge_id: str, weight: float) -> None:
        with self._atomic(pipelined=True) as conn:
            row = self._rows.live(conn, knowledge_id)
            if row[col.WEIGHT] == float(weight):
                return
            seq = self._log.append(
                conn, ChangeOp.WEIGHT, knowledge_id, row[col.HLC], {"weight": float(weight)}
            )
            values = after_weight(row[col.FACTS], weight=weight, seq=seq)
            self._rewrite(conn, row, values, row[col.BODY])
