"""Event-triggered invalidation (upstream L6 ``decay_model.invalidation_events``).

``fire_event(memory, "OKX.API.VERSION_CHANGE")`` invalidates every active record whose decay
model lists that event name (exact, case-sensitive match), with reason ``event:<name>``, so
the event is recorded in the change log — and synced — through those invalidations. The
store keeps an index of event names (schema migration 3), so firing reads only the records
that listen for the event, never every body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amcp.amf.types import Lifecycle
from amcp.errors import ValidationError
from amcp.store.base import RecordFilter

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter

MAX_EVENT_NAME = 256  # an event is a name such as 'OKX.API.VERSION_CHANGE', not a document
REASON_PREFIX = "event:"


def check_event_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("event", "an event name is a non-empty string")
    if len(name) > MAX_EVENT_NAME:
        raise ValidationError("event", f"longer than {MAX_EVENT_NAME} characters")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError("event", "is not valid UTF-8 (lone surrogate)") from exc
    return name


def listening(memory: MemoryWriter, name: str) -> list[str]:
    """Ids of the active records that ``name`` would invalidate (no body is decoded)."""
    flt = RecordFilter(events=(check_event_name(name),), lifecycles=(Lifecycle.ACTIVE,),
                       include_expired=True)
    store = memory.store
    return [row.knowledge_id for row in store.states(flt, limit=max(1, store.count(flt)))]


def fire_event(memory: MemoryWriter, name: str) -> list[str]:
    """Invalidate every active record listening for ``name``; return their ids.

    Idempotent: invalidated records are no longer active, so a second firing finds nothing.
    All invalidations commit together or not at all.
    """
    targets = listening(memory, name)
    reason = f"{REASON_PREFIX}{name}"
    if not targets:
        return []
    try:
        with memory.atomic():
            for kid in targets:
                memory.invalidate(kid, reason)
    except BaseException:
        memory.searcher.reset()  # the derived vector index may have dropped rolled-back rows
        raise
    return targets
