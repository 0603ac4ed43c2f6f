"""The embedded default store: one SQLite file in WAL mode.

Every write is one transaction (``atomic`` nests, like sqlite-utils). The change log is
hash-chained and its signed head is witnessed in the key directory (see ``chain.py``); the
integrity check on open walks the chain (from where the last open left off), so a store
edited behind our back is refused before anything is read from it.

``SQLiteStore`` is the core port, composed of parts that share one ``SQLiteConn`` (the
connection and its lock) and nothing else: the change log and its transactions
(``ChangeLog``), the verifying reads (``Verifier``, ``RecordReads``), the writes
(``RecordWrites``, ``StateChanges``), and the capabilities it declares — the lexical index
(``SQLiteLexical``), the vectors (``SQLiteVectors``), the change feed (``SQLiteFeed``), the
access statistics (``SQLiteAccess``) and the raw bodies (``SQLiteBodies``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.errors import AmcpError, StoreError, StoreIntegrityError
from amcp.keyring import Keyring
from amcp.store.base import (
    Capabilities,
    Change,
    ChangeOp,
    IntegrityReport,
    PutItem,
    PutResult,
    RecordFilter,
    StateRow,
    StoredRecord,
    StoreStats,
    SummaryRow,
)
from amcp.store.rowseal import Sealer
from amcp.store.schema import migrate
from amcp.store.sqlite_access import SQLiteAccess
from amcp.store.sqlite_bodies import SQLiteBodies
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_conn import RowidMemo, SQLiteConn, open_db, restrict
from amcp.store.sqlite_derived import backfill
from amcp.store.sqlite_feed import SQLiteFeed
from amcp.store.sqlite_lexical import SQLiteLexical
from amcp.store.sqlite_put import RecordWrites
from amcp.store.sqlite_reads import RecordReads
from amcp.store.sqlite_seals import backfill_head_mac, backfill_seals
from amcp.store.sqlite_state import StateChanges
from amcp.store.sqlite_tiers import SQLiteTiers
from amcp.store.sqlite_vectors import SQLiteVectors
from amcp.store.sqlite_verified import Verifier
from amcp.store.sqlite_verify import verify_since_mark, verify_store
from amcp.store.tuning import SQLiteTuning
from amcp.store.walwatch import WalWatch

if TYPE_CHECKING:
    import numpy as np


def _open(path: Path, timeout_s: float, quick_check: bool) -> tuple[SQLiteConn, int]:
    """The connection, checked and migrated, and the schema version it was migrated from."""
    try:
        db, mode, ok = open_db(path, timeout_s, quick_check=quick_check)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a readable amcp store: {exc}") from exc
    if ok != "ok":
        raise StoreError(f"{path} failed SQLite's integrity check: {ok}")
    if mode.lower() != "wal":
        raise StoreError(f"{path}: could not switch to WAL mode ({mode})")
    try:
        return SQLiteConn(path, db), migrate(db)
    except ValueError as exc:
        raise StoreError(f"{path} {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(str(exc)) from exc


class SQLiteStore:
    """``Store`` over a single SQLite file. Thread-safe through one re-entrant lock.

    Reads serve only rows whose seal verifies (``rowseal``) and records whose body matches
    its id, checksum and envelope; anything else is quarantined — left out of every answer
    and listed by ``quarantined()`` — while the rest of the store is served as usual.

    Its parts are attributes, for code that holds a ``SQLiteStore`` (tests, benches, the
    CLI): ``log`` (the change log), ``verifier``, ``lexical``, ``vectors``, ``feed``, ``access``,
    ``bodies``; the composition root reaches the capabilities through ``capabilities``."""

    def __init__(
        self,
        path: str | Path,
        keyring: Keyring,
        *,
        verify_on_open: bool = True,
        lock_timeout_s: float = 5.0,
        tuning: SQLiteTuning | None = None,
    ) -> None:
        self.path = Path(path)
        self.tuning = tuning or SQLiteTuning()
        self.keyring = keyring
        self.conn, version = _open(self.path, lock_timeout_s, verify_on_open)
        self.log = ChangeLog(self.conn, keyring)
        self.store_id = self.log.ensure_store_id()
        self._content_secret = keyring.derive("content-key")
        self._compose(Sealer(keyring.derive("row-seal"), self.store_id))
        with self.conn.lock:
            backfill_seals(self.log, self.verifier.sealer, self._content_secret)
            backfill_head_mac(self.log)
            backfill(self.log, self.verifier, version)
        # After a write of ours: the -shm file and its header exist by now.
        self.conn.wal_watch = WalWatch.open(self.path)
        restrict(self.path)
        self._pointer_warnings = self.tiers.check()  # the local index, checked on open
        if verify_on_open:
            report = self.verify(incremental=True)
            if not report.ok:
                raise StoreIntegrityError(
                    f"{self.path} failed its integrity check: " + "; ".join(report.problems[:3])
                    + " — run `amcp verify` for the whole report"
                )

    def _compose(self, sealer: Sealer) -> None:
        conn, log = self.conn, self.log
        memo = RowidMemo()
        self.access = SQLiteAccess(conn, log, self.tuning.access)
        self.verifier = Verifier(conn.lock, sealer, self.keyring, self.access.state, conn.db)
        self.vectors = SQLiteVectors(conn, log, self.verifier, memo)
        self.lexical = SQLiteLexical(conn, self.vectors, self.tuning.pruning)
        self.feed = SQLiteFeed(conn, self.store_id)
        self.bodies = SQLiteBodies(conn, self.verifier, self.access, memo)
        self._writes = RecordWrites(
            conn, log, self.verifier, self.keyring, self._content_secret
        )
        self._reads = RecordReads(conn, self.verifier, self._writes.content_key)
        self._states = StateChanges(conn, log, self.verifier, self.access)
        self.tiers = SQLiteTiers(conn, log, self.verifier, self.access, self._states)
        self._capabilities = Capabilities(
            lexical=self.lexical, vectors=self.vectors, feed=self.feed, access=self.access,
            bodies=self.bodies, tiers=self.tiers,
        )

    # ------------------------------------------------------------------ lifecycle

    @property
    def capabilities(self) -> Capabilities:
        """Everything: one SQLite file holds the FTS5 index, the vectors, the change log,
        the access statistics and the raw bodies beside the records."""
        return self._capabilities

    def generation(self) -> int:
        """Moves with every commit, ours or another process's (``SQLiteConn.generation``)."""
        return self.conn.generation()

    def close(self) -> None:
        self.access.stop_flusher()  # first: it takes the lock to write, and the lock closes the db
        with self.conn.lock:
            try:
                with contextlib.suppress(AmcpError):
                    # Locked by another writer: a second of advisory access counts is lost.
                    self.access.flush_access()
            finally:
                self.conn.close()

    def atomic(self) -> AbstractContextManager[None]:
        return self.log.atomic()

    # ------------------------------------------------------------------ writes

    def put(
        self,
        record: AMFRecord,
        *,
        hlc: int,
        vector: np.ndarray | None = None,
        index_text: str | None = None,
        index_context: str | None = None,
        sensitive: bool = False,
        expires_at: float | None = None,
        lifecycle: Lifecycle = Lifecycle.ACTIVE,
    ) -> PutResult:
        item = PutItem(
            record, hlc, vector, index_text, index_context, sensitive, expires_at, lifecycle
        )
        return self.put_many([item])[0]

    def put_many(self, items: Sequence[PutItem]) -> list[PutResult]:
        with self.log.atomic():
            results = self._writes.put_many(items)
            # A record stored again (fetched back, re-pulled) is no longer evicted.
            self.tiers.forget_many([r.knowledge_id for r in results if r.created])
        return results

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
        self._states.set_state(
            knowledge_id, op, hlc=hlc, lifecycle=lifecycle, reason=reason,
            superseded_by=superseded_by,
        )

    def purge(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> None:
        self._states.purge(knowledge_id, hlc=hlc, reason=reason)

    def put_tombstone(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> bool:
        with self.log.atomic():
            self.tiers.forget(knowledge_id)  # purge beats eviction: the pointer goes too
            return self._states.put_tombstone(knowledge_id, hlc=hlc, reason=reason)

    def set_weight(self, knowledge_id: str, weight: float) -> None:
        self._states.set_weight(knowledge_id, weight)

    def set_meta(self, key: str, value: str) -> None:
        with self.log.atomic():
            self.conn.upsert_meta(key, value)

    # ------------------------------------------------------------------ reads

    def get(self, knowledge_id: str) -> StoredRecord | None:
        return self._reads.get(knowledge_id)

    def get_many(self, knowledge_ids: Sequence[str]) -> list[StoredRecord]:
        return self._reads.get_many(knowledge_ids)

    def query(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[StoredRecord]:
        return self._reads.query(flt, limit=limit, after=after)

    def states(
        self, flt: RecordFilter, *, limit: int = 100, ranked: bool = False
    ) -> list[StateRow]:
        return self._reads.states(flt, limit=limit, ranked=ranked)

    def summaries(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[SummaryRow]:
        return self._reads.summaries(flt, limit=limit, after=after)

    def find_same_content(self, record: AMFRecord) -> StoredRecord | None:
        return self._reads.find_same_content(record)

    def find_same_content_many(self, records: Sequence[AMFRecord]) -> list[StoredRecord | None]:
        return self._reads.find_same_content_many(records)

    def due_for_expiry(self, now: float, limit: int = 1000) -> list[str]:
        return self._reads.due_for_expiry(now, limit)

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        return self._reads.ids_with_prefix(prefix, limit)

    def count(self, flt: RecordFilter) -> int:
        return self._reads.count(flt)

    def subjects(self, flt: RecordFilter, *, limit: int | None = None) -> list[str]:
        return self._reads.subjects(flt, limit=limit)

    def stats(self) -> StoreStats:
        return self._reads.stats()

    def get_meta(self, key: str) -> str | None:
        return self.conn.get_meta(key)

    def changes(self, since_hlc: int = 0, limit: int = 1000) -> list[Change]:
        return self.feed.changes(since_hlc, limit)

    def max_hlc(self) -> int:
        return self.feed.max_hlc()

    # ------------------------------------------------------------------ integrity

    def verify(self, *, full: bool = False, incremental: bool = False) -> IntegrityReport:
        """Walk the hash chain; check the signed head (row count and digest included) and
        the witnesses; with ``full``, also every row against its seal and the log and every
        body against its id, checksum, envelope and signature; ``incremental`` (the check on
        open): resume the walk after the last such check's mark. See ``sqlite_verify``."""
        if incremental and not full:
            return verify_since_mark(self.log, self.verifier)
        return verify_store(self.log, self.verifier, full=full)

    def rewitness(self) -> None:
        """Witness the current head in this keyring's places (``amcp verify --rewitness``)."""
        self.log.rewitness()

    def integrity_warnings(self) -> tuple[str, ...]:
        return self.verifier.integrity_warnings() + self._pointer_warnings

    def quarantined(self) -> dict[str, str]:
        return self.verifier.quarantined()
