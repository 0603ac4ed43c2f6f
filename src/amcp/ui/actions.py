"""Corrections from the inspector, through the same ``Memory`` rules as every other writer.

Edit = supersede (a new signed record; the old one kept, superseded), forget = invalidate
with a reason, purge = privacy erasure after the record's short id is typed back, reject
(review queue) = invalidate with a reason. Each is one change in the signed log.

Concurrent edits: every form carries the HLC of the state it was rendered from. Under the
store lock the action re-reads the record and refuses (409, ``EditConflict``) when that
state has moved on — so of two people editing one record, the second is told who got
there first, and the text they typed is handed back to them, not lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from amcp.amf.types import Lifecycle
from amcp.errors import ConflictError, ValidationError
from amcp.memory import Memory, WriteOutcome
from amcp.store.base import StoredRecord
from amcp.ui.data import Locked, visible
from amcp.web.access import Caller

MAX_REASON = 2000


class EditConflict(ConflictError):
    """The record changed since the form was rendered; ``text`` is what was submitted."""

    def __init__(self, message: str, *, knowledge_id: str, text: str) -> None:
        super().__init__(message)
        self.knowledge_id = knowledge_id
        self.text = text


@dataclass(frozen=True, slots=True)
class Done:
    knowledge_id: str  # the record to show next (the new version after an edit)
    message: str


def short_id(knowledge_id: str) -> str:
    """What a purge asks to be typed back: the id's first 10 characters (``K-`` + 8 hex)."""
    return knowledge_id[:10]


def _base(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValidationError("base", "the form's state marker is missing; reload") from None


def _current(memory: Memory, locked: Locked, who: Caller, kid: str, base: int,
             text: str = "") -> StoredRecord:
    item = visible(memory, locked, who, kid)
    assert item.record is not None
    who.check_write(item.record.meta.project_scope)
    st = item.state
    if st.hlc != base or st.lifecycle not in (Lifecycle.ACTIVE, Lifecycle.DRAFT):
        what = st.lifecycle.value + (f" by {st.superseded_by}" if st.superseded_by else "")
        raise EditConflict(
            f"{kid} changed after this page was loaded (it is now {what}); nothing was "
            "written — your text is below", knowledge_id=st.superseded_by or kid, text=text,
        )
    return item


def supersede(memory: Memory, locked: Locked, who: Caller, kid: str, *, text: str,
              base: str) -> Done:
    if not text.strip():
        raise ValidationError("text", "the new version needs text")
    marker = _base(base)

    def run() -> WriteOutcome:
        item = _current(memory, locked, who, kid, marker, text)
        if item.record is not None and item.record.text == text:
            # Memory would store it (a new created_at is new content): a version that
            # says nothing new only lengthens the lineage.
            raise ValidationError("text", "the text is unchanged; nothing to save")
        return memory.supersede(kid, text)

    out: WriteOutcome = locked(run)
    return Done(out.knowledge_id, f"saved as a new version; {kid} is kept, superseded")


def forget(memory: Memory, locked: Locked, who: Caller, kid: str, *, reason: str,
           base: str) -> Done:
    if not reason.strip():
        raise ValidationError("reason", "say why this is wrong")
    if len(reason) > MAX_REASON:
        raise ValidationError("reason", f"longer than {MAX_REASON} characters")
    marker = _base(base)

    def run() -> WriteOutcome:
        _current(memory, locked, who, kid, marker)
        return memory.invalidate(kid, reason)

    locked(run)
    return Done(kid, "invalidated: kept with the reason, no longer recalled")


def purge(memory: Memory, locked: Locked, who: Caller, kid: str, *, confirm: str,
          reason: str) -> Done:
    if confirm.strip() != short_id(kid):
        raise ValidationError("confirm", f"type {short_id(kid)} to confirm the purge")

    def run() -> WriteOutcome:
        item = visible(memory, locked, who, kid)
        assert item.record is not None
        who.check_write(item.record.meta.project_scope)
        return memory.purge(kid, reason.strip() or None)

    locked(run)
    return Done(kid, "purged: the content is erased, a tombstone stays")


__all__ = ["Done", "EditConflict", "forget", "purge", "short_id", "supersede"]
