"""The PostgreSQL store's access statistics: counts buffered in memory, written in batches.

As in the SQLite adapter (``sqlite_access``, whose reasons hold here too): a write
transaction per read would cost more than the read, so counts are buffered and written once
a second (or every 512 records, or on close), and every read of this store adds the buffered
counts to the stored ones (``state``). Other processes see them at most that late; a crash
loses at most that second of advisory statistics. A flush is an ordinary write transaction
(the store's advisory lock), so it never interleaves with a writer's chain append.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from amcp.amf.types import Lifecycle
from amcp.store.base import RecordState
from amcp.store.postgres.database import Connection, Database

log = logging.getLogger(__name__)

_DAY = 86_400
_LIFECYCLES = {lc.value: lc for lc in Lifecycle}
_FLUSH_S = 1.0
_FLUSH_N = 512
_INLINE_N = 4 * _FLUSH_N  # with a background flusher, readers write only this far behind


class _Pending:
    __slots__ = ("count", "days", "last")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self.days: dict[int, int] = {}

    def merge(self, newer: _Pending) -> None:
        self.count += newer.count
        self.last = newer.last
        for day, n in newer.days.items():
            self.days[day] = self.days.get(day, 0) + n


class AccessLog:
    """``touch``, ``access_count_since``, ``flush_in_background`` of one store."""

    def __init__(
        self, db: Database, write: Callable[[], AbstractContextManager[Connection]]
    ) -> None:
        self._db = db
        self._write = write  # the store's atomic(): a flush is one write transaction
        self._lock = threading.RLock()
        self._pending: dict[str, _Pending] = {}
        self._since = 0.0
        self._flusher: threading.Thread | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()

    def state(
        self, kid: str, lifecycle: str, hlc: int, superseded_by: str | None,
        reason: str | None, expires_at: float | None, sensitive: int, weight: float,
        count: int, last: float | None, stored_at: float,
    ) -> RecordState:
        """A row's state columns as a ``RecordState``, buffered counts added."""
        entry = self._pending.get(kid)
        if entry is not None:
            count, last = count + entry.count, entry.last
        return RecordState(
            _LIFECYCLES.get(lifecycle) or Lifecycle(lifecycle), int(hlc), superseded_by, reason,
            expires_at, bool(sensitive), float(weight), int(count), last, float(stored_at),
        )

    def pending(self, kid: str) -> bool:
        return kid in self._pending

    def drop(self, knowledge_id: str) -> None:
        """Forget a purged record's buffered counts."""
        with self._lock:
            self._pending.pop(knowledge_id, None)

    def touch(self, knowledge_ids: Sequence[str], when: float) -> None:
        if not knowledge_ids:
            return
        day = int(when // _DAY)
        with self._lock:
            for kid in knowledge_ids:
                entry = self._pending.get(kid)
                if entry is None:
                    entry = self._pending[kid] = _Pending()
                entry.count += 1
                entry.last = when
                entry.days[day] = entry.days.get(day, 0) + 1
            now = time.monotonic()
            self._since = self._since or now
            due = len(self._pending) >= _FLUSH_N or now - self._since >= _FLUSH_S
            background = self._flusher is not None and len(self._pending) < _INLINE_N
        if due:
            if background:
                self._wake.set()
            else:
                self.flush()

    def flush(self) -> None:
        """Write the buffered counts in one transaction; on failure they stay buffered."""
        with self._lock:
            pending, self._pending, self._since = self._pending, {}, 0.0
        if not pending:
            return
        try:
            with self._write() as conn:
                _write_counts(conn, pending)
        except BaseException:
            with self._lock:
                for kid, entry in pending.items():
                    newer = self._pending.get(kid)
                    if newer is not None:
                        entry.merge(newer)
                    self._pending[kid] = entry
                self._since = self._since or time.monotonic()
            raise

    def access_count_since(self, knowledge_id: str, since: float) -> int:
        since_day = int(since // _DAY)
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT COALESCE(SUM(a.count), 0) FROM access_daily a JOIN records r "
                "ON r.rowid = a.rid WHERE r.knowledge_id = %s AND a.day >= %s",
                (knowledge_id, since_day),
            ).fetchone()
        stored = int(row[0]) if row else 0
        with self._lock:
            entry = self._pending.get(knowledge_id)
            buffered = sum(n for d, n in entry.days.items() if d >= since_day) if entry else 0
        return stored + buffered

    # -- the background flusher -----------------------------------------------------------

    def flush_in_background(self) -> None:
        """For long-running servers: a due flush runs on a daemon thread."""
        with self._lock:
            if self._flusher is None:
                self._flusher = threading.Thread(
                    target=self._loop, name="amcp-pg-access-flush", daemon=True
                )
                self._flusher.start()

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.flush()
            except Exception:
                log.debug("background access flush failed", exc_info=True)

    def stop(self) -> None:
        flusher = self._flusher
        if flusher is None:
            return
        self._stop.set()
        self._wake.set()
        flusher.join(timeout=30)
        self._flusher = None


def _write_counts(conn: Connection, pending: dict[str, _Pending]) -> None:
    kids = list(pending)
    conn.execute(
        "UPDATE records r SET access_count = r.access_count + u.n, last_access = u.last "
        "FROM unnest(%s::text[], %s::bigint[], %s::float8[]) AS u(kid, n, last) "
        "WHERE r.knowledge_id = u.kid",
        (kids, [pending[k].count for k in kids], [pending[k].last for k in kids]),
    )
    days: list[tuple[Any, ...]] = [
        (kid, day, n) for kid, e in pending.items() for day, n in e.days.items()
    ]
    conn.execute(
        "INSERT INTO access_daily(rid, day, count) SELECT r.rowid, u.day, u.n FROM "
        "unnest(%s::text[], %s::int[], %s::bigint[]) AS u(kid, day, n) "
        "JOIN records r ON r.knowledge_id = u.kid AND r.lifecycle != 'purged' "
        "ON CONFLICT (rid, day) DO UPDATE SET count = access_daily.count + excluded.count",
        ([d[0] for d in days], [d[1] for d in days], [d[2] for d in days]),
    )
