"""The SQLiteStore's access statistics (the ``AccessLog`` capability): counts buffered in
memory and written in batches, in the change log's transactions.

Every read of the store builds its ``RecordState`` through ``SQLiteAccess.state``, so the
buffered counts are visible to this process at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Container, Sequence

from amcp.amf.types import Lifecycle
from amcp.store.base import RecordState
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_conn import SQLiteConn
from amcp.store.tuning import AccessFlush

_DAY = 86_400
# Lifecycle(value) runs Enum's Python-level lookup; every row read builds one.
_LIFECYCLES = {lc.value: lc for lc in Lifecycle}
# Stored windowed counts (``access_count_since``) remembered, until anything is committed:
# every read a node serves reports its record's 7-day count, and the query for it was a
# tenth of a MEMORY_READ's server CPU.
_COUNT_CACHE_MAX = 8192

log = logging.getLogger(__name__)


class _PendingAccess:
    """Access counts of one record not yet written (see ``SQLiteAccess.touch``)."""

    __slots__ = ("count", "days", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self.days: dict[int, int] = {}

    def merge(self, newer: _PendingAccess) -> None:
        self.count += newer.count
        self.last = newer.last
        for day, n in newer.days.items():
            self.days[day] = self.days.get(day, 0) + n


class SQLiteAccess:
    """Access counts: buffered per record, flushed in one transaction, added to every
    state a read builds (``state``)."""

    def __init__(self, conn: SQLiteConn, changes: ChangeLog,
                 flush: AccessFlush | None = None) -> None:
        self._flush = flush or AccessFlush()
        self._conn = conn
        self._lock = conn.lock
        self._changes = changes
        self._pending_access: dict[str, _PendingAccess] = {}
        self._pending_since = 0.0
        # (knowledge_id, first day) -> stored count, valid at ``_counts_at`` (conn.fresh)
        self._stored_counts: dict[tuple[str, int], int] = {}
        self._counts_at = 0
        self._flusher: threading.Thread | None = None
        self._flusher_wake = threading.Event()
        self._flusher_stop = threading.Event()

    def flush_in_background(self) -> None:
        """For long-running servers: a due flush runs on a daemon thread, not on the read
        that made it due. Inline, a flush cost a recall or MEMORY_READ 8-13 ms once a
        second, and ~60 ms when its commit ran a WAL checkpoint: most of an MCP recall's
        p95-p99 tail (docs/store.md). The flush itself is unchanged (same lock, same
        transaction), so what every reader sees is unchanged too."""
        with self._lock:
            if self._flusher is None:
                self._flusher = threading.Thread(
                    target=self._flush_loop, name="amcp-access-flush", daemon=True
                )
                self._flusher.start()

    def _flush_loop(self) -> None:
        while True:
            self._flusher_wake.wait()
            self._flusher_wake.clear()
            if self._flusher_stop.is_set():
                return
            try:
                self.flush_access()
            except Exception:
                # E.g. another writer holds the lock: the counts stay buffered (flush_access
                # puts them back) and the next due touch wakes this thread again.
                log.debug("background access flush failed", exc_info=True)

    def stop_flusher(self) -> None:
        """Stop the background flusher (before the connection closes); idempotent."""
        flusher = self._flusher
        if flusher is None:
            return
        self._flusher_stop.set()
        self._flusher_wake.set()
        flusher.join(timeout=30)
        self._flusher = None

    def drop(self, knowledge_id: str) -> None:
        """Forget a purged record's buffered counts (nothing may be written for it)."""
        self._pending_access.pop(knowledge_id, None)

    def touch(self, knowledge_ids: Sequence[str], when: float) -> None:
        """Count an access. Counts are buffered and written in one transaction per
        ``AccessFlush.after_s`` / ``after_n`` (and on close): a write transaction per read
        was three quarters of a node's MEMORY_READ cost. Every read of this store sees the
        buffered counts (``state``); other processes see them at most a second late, and a
        crash loses at most that second of access statistics, which are advisory."""
        if not knowledge_ids:
            return
        day = int(when // _DAY)
        with self._lock:
            pending = self._pending_access
            for kid in knowledge_ids:
                entry = pending.get(kid)
                if entry is None:
                    entry = pending[kid] = _PendingAccess()
                entry.count += 1
                entry.last = when
                entry.days[day] = entry.days.get(day, 0) + 1
            now = self._flush.clock()
            if not self._pending_since:
                self._pending_since = now
            due = self._flush
            if len(pending) >= due.after_n or now - self._pending_since >= due.after_s:
                if self._flusher is not None and len(pending) < due.inline_n:
                    self._flusher_wake.set()
                else:
                    self.flush_access()

    def flush_access(self) -> None:
        """Write the buffered access counts (one transaction). On failure (another writer
        holds the lock) the counts stay buffered for the next attempt."""
        with self._lock:
            pending = self._pending_access
            if not pending:
                return
            self._pending_access, self._pending_since = {}, 0.0
            try:
                with self._changes.atomic():
                    db = self._conn.db
                    db.executemany(
                        "UPDATE records SET access_count=access_count+?, last_access=? "
                        "WHERE knowledge_id=?",
                        [(e.count, e.last, kid) for kid, e in pending.items()],
                    )
                    db.executemany(
                        "INSERT INTO access_daily(rid, day, count) "
                        "SELECT rowid, ?, ? FROM records WHERE knowledge_id=? "
                        "AND lifecycle != 'purged' "
                        "ON CONFLICT(rid, day) DO UPDATE SET count=count+excluded.count",
                        [(day, n, kid) for kid, e in pending.items() for day, n in e.days.items()],
                    )
            except BaseException:
                for kid, e in pending.items():  # keep them, merged with any newer ones
                    newer = self._pending_access.get(kid)
                    if newer is not None:
                        e.merge(newer)
                    self._pending_access[kid] = e
                self._pending_since = self._pending_since or self._flush.clock()
                raise

    def pending(self) -> Container[str]:
        """The records with counts still buffered (their states are built afresh)."""
        return self._pending_access

    def state(
        self,
        kid: str,
        lifecycle: str,
        hlc: int,
        superseded_by: str | None,
        reason: str | None,
        expires_at: float | None,
        sensitive: int,
        weight: float,
        count: int,
        last: float | None,
        stored_at: float,
    ) -> RecordState:
        """A row's state columns (``STATE_COLS`` order) as a ``RecordState``, with the access
        counts still buffered for ``kid`` added to the stored ones."""
        entry = self._pending_access.get(kid)
        if entry is not None:
            count, last = count + entry.count, entry.last
        return RecordState(
            _LIFECYCLES.get(lifecycle) or Lifecycle(lifecycle), hlc, superseded_by, reason,
            expires_at, bool(sensitive), weight, count, last, stored_at,
        )

    def access_count_since(self, knowledge_id: str, since: float) -> int:
        since_day = int(since // _DAY)
        key = (knowledge_id, since_day)
        with self._lock:
            epoch = self._conn.fresh()
            if epoch is not None and epoch != self._counts_at:
                self._stored_counts.clear()  # something was committed since they were read
                self._counts_at = epoch
            stored = self._stored_counts.get(key) if epoch is not None else None
            if stored is None:
                row = self._conn.db.execute(
                    "SELECT COALESCE(SUM(a.count),0) FROM access_daily a JOIN records r "
                    "ON r.rowid=a.rid WHERE r.knowledge_id=? AND a.day>=?",
                    key,
                ).fetchone()
                stored = int(row[0])
                if epoch is not None:
                    if len(self._stored_counts) >= _COUNT_CACHE_MAX:
                        self._stored_counts.clear()
                    self._stored_counts[key] = stored
            entry = self._pending_access.get(knowledge_id)
            buffered = sum(n for d, n in entry.days.items() if d >= since_day) if entry else 0
        return stored + buffered
