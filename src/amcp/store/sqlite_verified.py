"""The SQLiteStore's verifying read path: seals, bodies, quarantine.

Every row a read serves passes ``verified`` (not quarantined, its seal checks) and every
body ``open_body`` (its id, checksum and envelope recomputed, once per seal: the decoded
copy is kept by seal). A row or body that fails is quarantined, never raised: one bad record
must not make a request fail (``docs/store.md``, "What the node serves").
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from amcp.amf.ids import verify_integrity
from amcp.amf.record import AMFRecord
from amcp.amf.summary import RecordSummary, open_summary
from amcp.amf.types import Lifecycle
from amcp.errors import AmcpError, GoneError, IntegrityError, NotFoundError, StoreIntegrityError
from amcp.keyring import Keyring
from amcp.store import sqlite_rows as col
from amcp.store.base import RecordState, StoredRecord, SummaryRow
from amcp.store.rowseal import Sealer
from amcp.store.sqlite_rows import GET_BY_ID

log = logging.getLogger(__name__)

_DECODED_CACHE = 20_000  # decoded records kept; ~2 KB each


class Verifier:
    """Which rows and bodies may be served, the records quarantined, and the decoded
    records kept by seal."""

    def __init__(
        self, lock: threading.RLock, sealer: Sealer, keyring: Keyring,
        state: Callable[..., RecordState], db: sqlite3.Connection | None = None,
    ) -> None:
        # Store-agnostic but for ``live_row`` (``db``): the PostgreSQL adapter composes
        # the same checks (store/postgres/verified.py), so both serve the same records.
        self._db = db
        self._lock = lock
        self.sealer = sealer
        self._keyring = keyring
        self._state = state
        self._quarantine: dict[str, str] = {}
        self._index_warnings: tuple[str, ...] = ()
        self._decoded: OrderedDict[tuple[str, bytes], AMFRecord] = OrderedDict()

    def integrity_warnings(self) -> tuple[str, ...]:
        """Store-level findings that refuse nothing but must be said with every answer
        (index rows that do not add up to the signed census)."""
        return self._index_warnings

    def set_warnings(self, warnings: Sequence[str]) -> None:
        """What the last integrity check found (``sqlite_verify``)."""
        self._index_warnings = tuple(warnings)

    def quarantined(self) -> dict[str, str]:
        """Records that failed verification, with why: left out of every answer."""
        with self._lock:
            return dict(self._quarantine)

    def quarantine_add(self, knowledge_id: str, reason: str) -> None:
        with self._lock:
            if knowledge_id not in self._quarantine:
                log.warning("quarantined %s: %s", knowledge_id, reason)
                self._quarantine[knowledge_id] = reason

    def verified(self, row: Sequence[Any]) -> bool:
        """Whether a row may be served: not quarantined, and its seal verifies."""
        kid = row[col.KID]
        if kid in self._quarantine:
            return False
        if self.sealer.check(row[col.ROWID], row[col.FACTS], row[col.BODY], row[col.SEAL]):
            return True
        self.quarantine_add(kid, "its row does not match its seal (changed outside amcp)")
        return False

    def row_state(self, row: Sequence[Any]) -> RecordState:
        return self._state(
            row[col.KID], row[col.LIFECYCLE], row[col.HLC], row[col.SUPERSEDED_BY], row[col.REASON],
            row[col.EXPIRES_AT], row[col.SENSITIVE], row[col.WEIGHT], row[col.ACCESS_COUNT],
            row[col.LAST_ACCESS], row[col.STORED_AT],
        )

    def decode(self, row: Sequence[Any], *, full: bool = False) -> StoredRecord | None:
        """Row → StoredRecord, or None (quarantined) for a row whose seal does not verify or
        whose body does not match its id, checksum and envelope.

        The seal covers the body's bytes, so a cached decode (by id and seal) is as good as
        a fresh one; a fresh decode also recomputes id, checksum and envelope from content.
        Reads skip the Ed25519 signature (verified when the record entered the store);
        ``full`` re-checks it."""
        if not self.verified(row):
            return None
        kid, body = row[col.KID], row[col.BODY]
        state = self.row_state(row)
        if body is None:
            return StoredRecord(kid, state, None)
        key = (kid, row[col.SEAL])
        with self._lock:  # the node reads from a thread pool
            cached = None if full else self._decoded.get(key)
            if cached is not None:
                self._decoded.move_to_end(key)
        if cached is not None:
            return StoredRecord(kid, state, cached)
        try:
            record = self.open_body(row, signature=full)
        except (ValueError, AmcpError, msgpack.UnpackException) as exc:
            self.quarantine_add(kid, f"its body does not verify: {exc}")
            return None
        if not row[col.SENSITIVE] and not full:
            self.remember_decoded(kid, row[col.SEAL], record)
        return StoredRecord(kid, state, record)

    def summarise(self, row: Sequence[Any]) -> SummaryRow | None:
        """Row → SummaryRow, or None (quarantined) as for ``decode``: the seal checked, the
        body re-hashed (``amf.summary.open_summary``), only the summary's sections parsed.
        A record decoded lately is summarised from that decode (same seal, same bytes).
        Sensitive bodies and tombstones get no summary; nothing is added to the decode
        cache (a listing of every record would only push out what the node reads)."""
        if not self.verified(row):
            return None
        kid, body = row[col.KID], row[col.BODY]
        state = self.row_state(row)
        if body is None or row[col.SENSITIVE]:
            return SummaryRow(kid, state, None)
        with self._lock:
            cached = self._decoded.get((kid, row[col.SEAL]))
        if cached is not None:
            return SummaryRow(kid, state, RecordSummary.of_record(cached))
        try:
            summary = open_summary(
                msgpack.unpackb(body, raw=False), kid, row[col.CHECKSUM], row[col.ENVELOPE]
            )
        except (ValueError, TypeError, AmcpError, msgpack.UnpackException) as exc:
            self.quarantine_add(kid, f"its body does not verify: {exc}")
            return None
        return SummaryRow(kid, state, summary)

    def remember_decoded(self, kid: str, seal: bytes, record: AMFRecord) -> None:
        """Keep ``record`` as the decode of the row sealed ``seal``. Writers call this with
        the verified record they have just sealed a row for: reading it back (an import's
        verification, a recall right after a write) then skips decoding and re-hashing a
        body whose bytes are that record's encoding. A lookup still reads the row and
        checks its seal first, so an entry for a row rolled back or changed is never used.
        Sensitive records are never kept decoded."""
        with self._lock:
            self._decoded[(kid, seal)] = record
            if len(self._decoded) > _DECODED_CACHE:
                self._decoded.popitem(last=False)

    def open_body(self, row: Sequence[Any], *, signature: bool) -> AMFRecord:
        kid, body = row[col.KID], row[col.BODY]
        raw = self._keyring.open(body, kid.encode()) if row[col.SENSITIVE] else body
        record = AMFRecord.from_dict(msgpack.unpackb(raw, raw=False))
        if (
            record.knowledge_id != kid
            or record.integrity.checksum != row[col.CHECKSUM]
            or record.integrity.envelope != row[col.ENVELOPE]
        ):
            raise IntegrityError(f"stored record {kid} does not match its row")
        verify_integrity(record, signature=signature)
        return record


    def refuse(self, knowledge_id: str) -> StoreIntegrityError:
        """The error a write decision on a row that failed verification raises."""
        return StoreIntegrityError(
            f"stored record {knowledge_id} failed verification and is quarantined: "
            f"{self._quarantine.get(knowledge_id, '')}; run `amcp verify`"
        )

    def live_row(self, knowledge_id: str, *, allow_purged: bool = False) -> Any:
        """The verified row of ``knowledge_id`` for a state change (call in a transaction):
        a change is never applied on top of a column nothing checks."""
        assert self._db is not None, "live_row reads the SQLite connection"
        row = self._db.execute(GET_BY_ID, (knowledge_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no record {knowledge_id}")
        if not self.verified(row):
            raise self.refuse(knowledge_id)
        if row[col.LIFECYCLE] == Lifecycle.PURGED and not allow_purged:
            raise GoneError(f"{knowledge_id} was purged")
        return row
