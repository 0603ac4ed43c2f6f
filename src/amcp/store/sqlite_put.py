"""The SQLiteStore's record writes: ``put_many`` stores a batch in one transaction with one
statement per table (``sqlite_batch``), its changes chained in order and each row sealed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from amcp.amf.ids import content_key
from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.keyring import Keyring
from amcp.store import sqlite_census as census
from amcp.store import sqlite_rows as col
from amcp.store import termstats
from amcp.store.base import PutItem, PutResult
from amcp.store.rowstate import new_row
from amcp.store.sqlite_batch import Batch, rewrite_result
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_conn import SQLiteConn
from amcp.store.sqlite_derived import event_rows, link_rows
from amcp.store.sqlite_reads import IN_CHUNK
from amcp.store.sqlite_rows import ROW_COLS
from amcp.store.sqlite_vectors import vector_bytes
from amcp.store.sqlite_verified import Verifier


class RecordWrites:
    """New records: dedup by id (idempotent re-writes), seal, chain, insert in bulk."""

    def __init__(
        self,
        conn: SQLiteConn,
        changes: ChangeLog,
        verifier: Verifier,
        keyring: Keyring,
        content_secret: bytes,
    ) -> None:
        self._db = conn.db
        self._changes = changes
        self._verifier = verifier
        self._keyring = keyring
        self._content_secret = content_secret

    def content_key(self, record: AMFRecord) -> str:
        """The dedup key of ``record`` in this store: keyed, so the stored column cannot be
        used to confirm a guessed statement (``amcp.amf.ids.content_key``)."""
        return content_key(record, self._content_secret)

    def put_many(self, items: Sequence[PutItem]) -> list[PutResult]:
        """Store records in one transaction with one statement per table.

        Row ids are assigned here (max + 1, what SQLite would pick) so the scope, tag,
        event, lexical and vector rows can be inserted in bulk too; the change-log hashes
        are chained in order, exactly as one ``put`` after another would chain them.
        """
        results: list[PutResult] = []
        with self._changes.atomic():
            known = self._known(list(dict.fromkeys(i.record.knowledge_id for i in items)))
            seq, prev = self._changes.last_change()
            top = self._db.execute("SELECT COALESCE(MAX(rowid), 0) FROM records").fetchone()
            rowid = int(top[0])
            batch = Batch()
            counts = termstats.Deltas()  # per-scope term statistics of the active ones
            now = time.time()
            for item in items:
                record = item.record
                kid = record.knowledge_id
                checksum = record.integrity.checksum
                found = known.get(kid)
                if found is not None:
                    results.append(rewrite_result(kid, checksum, found))
                    continue
                seq += 1
                rowid += 1
                prev = self._stage_put(batch, item, rowid, seq, prev, now)
                if (item.index_text or item.index_context) and (
                    item.lifecycle is Lifecycle.ACTIVE
                ):
                    counts.add(
                            record.meta.project_scope, item.index_text or "",
                            item.index_context or "", +1,
                        )
                # A second copy later in the same batch is a re-write of this one.
                known[kid] = (checksum, item.lifecycle.value, item.hlc, rowid)
                results.append(PutResult(kid, created=True, hlc=item.hlc, rowid=rowid))
            if batch.records:
                for key, n in batch.write(self._db).items():
                    self._changes.count(key, n)
                self._changes.moved()
                counts.apply(self._db)
        return results

    def _stage_put(
        self, batch: Batch, item: PutItem, rowid: int, seq: int, prev: str, now: float
    ) -> str:
        """Add one new record's rows to ``batch``; returns its change's chain hash."""
        record = item.record
        kid = record.knowledge_id
        row = new_row(item, seq=seq, prev=prev, now=now, keyring=self._keyring,
                      content_key=self.content_key(record))
        body, values = row.body, row.values
        batch.changes.append(row.change)
        seal = self._verifier.sealer.seal(rowid, values, body)
        if not item.sensitive:
            self._verifier.remember_decoded(kid, seal, record)
        self._changes.resealed(None, seal, rows=1)
        self._changes.count(census.LIFECYCLE + item.lifecycle.value)
        self._changes.count(census.EXPIRING, item.expires_at is not None)
        batch.records.append((rowid, *values, body, seal))
        batch.scopes.extend((rowid, s) for s in record.meta.project_scope)
        batch.tags.extend((rowid, t) for t in record.tags)
        batch.events.extend(event_rows(rowid, record))
        batch.links.extend(link_rows(rowid, record))
        if item.index_text or item.index_context:
            batch.lexical.append((rowid, item.index_text or "", item.index_context or ""))
        if item.vector is not None:
            batch.vectors.append((rowid, vector_bytes(item.vector)))
        return row.hash

    def _known(self, knowledge_ids: list[str]) -> dict[str, tuple[Any, ...]]:
        """(checksum, lifecycle, hlc, rowid) of those ids already stored, from rows whose
        seal verifies: a write decision is never taken on a column nothing checks."""
        found: dict[str, tuple[Any, ...]] = {}
        for start in range(0, len(knowledge_ids), IN_CHUNK):
            chunk = knowledge_ids[start : start + IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(
                f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id IN ({marks})", chunk
            ):
                kid = row[col.KID]
                if not self._verifier.verified(row):
                    raise self._verifier.refuse(kid)
                found[kid] = (row[col.CHECKSUM], row[col.LIFECYCLE], row[col.HLC], row[col.ROWID])
        return found
