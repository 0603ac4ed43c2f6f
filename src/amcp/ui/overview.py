"""The store page (counts, growth, integrity) and the review queue (drafts, quarantine).

Like ``amcp.ui.data``: typed values from ``Memory`` calls, scoped as the API scopes them.
A caller restricted to some scopes sees the counts of those scopes only, never the
store's totals (the size of someone else's scope is itself information).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from amcp.amf.types import Lifecycle
from amcp.clock import Timestamp
from amcp.errors import ConflictError
from amcp.memory import Memory, WriteOutcome
from amcp.session.policy import Mode
from amcp.store.base import RecordFilter
from amcp.ui.actions import Done
from amcp.ui.data import Locked, Row, row_of, visible
from amcp.web.access import Caller

GROWTH_POINTS = 24
QUEUE_PAGE = 100


@dataclass(frozen=True, slots=True)
class Integrity:
    ok: bool
    checked_changes: int
    problems: tuple[str, ...]
    head: str
    took_ms: float
    damaged: int = 0


@dataclass(frozen=True, slots=True)
class Growth:
    when: str  # ISO date-time of the point
    records: int  # records created up to then (every lifecycle)


@dataclass(frozen=True, slots=True)
class StorePage:
    restricted: bool
    records: int | None
    by_lifecycle: dict[str, int]
    by_type: dict[str, int]
    scopes: dict[str, int]
    vectors: int | None
    changes: int | None
    bytes: int | None
    embedding_model: str | None
    growth: tuple[Growth, ...]
    integrity: Integrity


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def growth(memory: Memory, locked: Locked, scopes: tuple[str, ...] | None) -> list[Growth]:
    """Cumulative records created over time, from the first change-log entry to now:
    one indexed count per point (``created_at`` is indexed), never a scan of bodies."""
    first = locked(memory.store.changes, 0, 1)
    if not first:
        return []
    start = Timestamp.unpack(first[0].hlc).physical_ms / 1000
    now = time.time()
    span = max(now - start, 1.0)
    out = []
    for i in range(GROWTH_POINTS):
        at = start + span * (i + 1) / GROWTH_POINTS
        flt = RecordFilter(scopes=scopes, lifecycles=None, created_before=_iso(at),
                           include_expired=True)
        out.append(Growth(_iso(at)[:16].replace("T", " "), locked(memory.store.count, flt)))
    return out


class IntegrityCache:
    """The last verification and the change-log head it covered. A full walk of the chain
    costs ~1.5 s at 100k records, so the store page repeats it only once the log has moved
    (the head names one commit generation); a store without a change feed is walked every
    time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[Any, Integrity] | None = None

    def get(self, memory: Memory, locked: Locked) -> Integrity:
        feed = memory.store.capabilities.feed
        head = locked(feed.change_head) if feed is not None else None
        with self._lock:
            if head is not None and self._last is not None and self._last[0] == head:
                return self._last[1]
        started = time.perf_counter()
        rep = locked(memory.store.verify)
        took = (time.perf_counter() - started) * 1000
        found = Integrity(rep.ok, rep.checked_changes, tuple(rep.problems), rep.head, took,
                          len(rep.damaged))
        with self._lock:
            self._last = (head, found) if head is not None else None
        return found


def store_page(memory: Memory, locked: Locked, who: Caller,
               checks: IntegrityCache) -> StorePage:
    stats = locked(memory.stats)
    check = checks.get(memory, locked)
    if who.patterns(Mode.READ) is None:
        return StorePage(
            False, stats.records, dict(stats.by_lifecycle), dict(stats.by_type),
            dict(sorted(stats.scopes.items())), stats.vectors, stats.changes, stats.bytes,
            stats.embedding_model, tuple(growth(memory, locked, None)), check,
        )
    mine = {s: n for s, n in sorted(stats.scopes.items()) if who.readable([s])}
    exact = who.exact_read_scopes()
    shown = tuple(growth(memory, locked, tuple(exact))) if exact else ()
    return StorePage(True, None, {}, {}, mine, None, None, None, stats.embedding_model,
                     shown, check)


# ---------------------------------------------------------------------------- review queue


@runtime_checkable
class Review(Protocol):
    """What the queue needs of ``Memory`` to confirm held drafts (the firewall work's
    holding of instruction-shaped or contradicting writes). Until ``Memory`` has it, drafts
    can be rejected (invalidated with a reason) but not confirmed."""

    def confirm(self, knowledge_id: str) -> WriteOutcome: ...


@dataclass(frozen=True, slots=True)
class Damaged:
    """A record the store quarantined: it failed verification, so it is served nowhere and
    its content cannot be shown (or confirmed); ``amcp verify`` reports on it."""

    knowledge_id: str
    why: str


@dataclass(frozen=True, slots=True)
class QueuePage:
    drafts: tuple[Row, ...]
    damaged: tuple[Damaged, ...]  # empty for a caller restricted to some scopes
    can_confirm: bool


def queue_page(memory: Memory, locked: Locked, who: Caller) -> QueuePage:
    scopes = who.exact_read_scopes()
    flt = RecordFilter(scopes=tuple(scopes) if scopes else None, lifecycles=(Lifecycle.DRAFT,))
    drafts = locked(memory.list_records, flt, limit=QUEUE_PAGE)
    rows = tuple(row_of(i) for i in drafts
                 if i.record is not None and who.readable(i.record.meta.project_scope))
    # A damaged record's scopes cannot be read from it: only a caller who may read every
    # scope is shown the quarantine.
    held: dict[str, str] = (
        locked(memory.store.quarantined) if who.patterns(Mode.READ) is None else {}
    )
    damaged = tuple(Damaged(k, v) for k, v in sorted(held.items())[:QUEUE_PAGE])
    review: Any = memory
    return QueuePage(rows, damaged, isinstance(review, Review))


def confirm(memory: Memory, locked: Locked, who: Caller, knowledge_id: str, *,
            base: str) -> Done:
    """Release a held record (``Review.confirm``), if this node's ``Memory`` can."""
    review: Any = memory
    if not isinstance(review, Review):
        raise ConflictError("this node cannot confirm held records yet (Memory has no "
                            "confirm); reject them, or wait for the integrity work")
    marker = int(base) if base.isdigit() else -1

    def run() -> WriteOutcome:
        item = visible(memory, locked, who, knowledge_id)
        assert item.record is not None
        who.check_write(item.record.meta.project_scope)
        if item.state.hlc != marker:
            raise ConflictError(f"{knowledge_id} changed after this page was loaded; reload")
        outcome: WriteOutcome = review.confirm(knowledge_id)
        return outcome

    locked(run)
    return Done(knowledge_id, "confirmed")


__all__ = [
    "Damaged", "Growth", "Integrity", "IntegrityCache", "QueuePage", "Review", "StorePage",
    "confirm", "queue_page", "store_page",
]
