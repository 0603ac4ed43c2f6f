"""``Memory``'s review of what the firewall held: list drafts, confirm, reject (a mixin).

A held record is a ``draft``: stored and logged with the reason it was held, listed here,
by ``amcp drafts``, ``GET /v1/drafts`` and the inspector's queue, and never served into
recall or context. Confirming makes it active (and, for a contradicting update, supersedes
the record it contradicted); rejecting invalidates it with a reason. Both are state
changes in the signed log; nothing is deleted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from amcp.amf.types import Lifecycle
from amcp.errors import ConflictError, Status
from amcp.memory_writes import WriteOutcome
from amcp.store.base import ChangeOp, RecordFilter, StoredRecord

if TYPE_CHECKING:
    import numpy as np

    from amcp.amf.record import AMFRecord
    from amcp.clock import HLC
    from amcp.firewall import Firewall
    from amcp.retrieval.search import HybridSearcher
    from amcp.store.base import Store

_BESIDE = re.compile(r"^contradicts (K-[0-9a-f]{64})\b")
REJECTED = "rejected by the user (held by the memory firewall)"


class ReviewPath:
    store: Store
    clock: HLC
    searcher: HybridSearcher
    firewall: Firewall | None

    def get(self, knowledge_id: str) -> StoredRecord:  # provided by Memory
        raise NotImplementedError

    def atomic(self) -> AbstractContextManager[None]:  # provided by Memory
        raise NotImplementedError

    def _embed_one(self, record: AMFRecord, sensitive: bool) -> np.ndarray | None:
        raise NotImplementedError  # provided by WritePath

    def drafts(
        self, scopes: Sequence[str] | None = None, *, limit: int = 100
    ) -> list[StoredRecord]:
        """Held records (newest state first is not promised: store order), with
        ``state.reason`` saying why each was held."""
        flt = RecordFilter(scopes=tuple(scopes) if scopes else None,
                           lifecycles=(Lifecycle.DRAFT,))
        return self.store.query(flt, limit=limit)

    def _draft(self, knowledge_id: str) -> StoredRecord:
        item = self.get(knowledge_id)
        if item.state.lifecycle is not Lifecycle.DRAFT:
            raise ConflictError(f"{knowledge_id} is {item.state.lifecycle.value}, not a held "
                                "draft; only drafts can be confirmed or rejected")
        return item

    def confirm(self, knowledge_id: str) -> WriteOutcome:
        """The user releases a held record: it becomes active, and if it was held as a
        contradicting update, the record it contradicted is superseded by it."""
        with self.atomic():  # the draft check and the release are one turn
            item = self._draft(knowledge_id)
            beside = _BESIDE.match(item.state.reason or "")
            old = self.store.get(beside.group(1)) if beside else None
            hlc = self.clock.send()
            self.store.set_state(knowledge_id, ChangeOp.CONFIRM, hlc=hlc,
                                 lifecycle=Lifecycle.ACTIVE, reason="confirmed by the user")
            if old is not None and old.state.lifecycle is Lifecycle.ACTIVE:
                self.store.set_state(old.knowledge_id, ChangeOp.SUPERSEDE,
                                     hlc=self.clock.send(), lifecycle=Lifecycle.SUPERSEDED,
                                     superseded_by=knowledge_id)
        self._reindex_confirmed(item)
        if old is not None and old.state.lifecycle is Lifecycle.ACTIVE:
            self.searcher.drop(old.knowledge_id)
        return WriteOutcome(knowledge_id, Status.NO_CONTENT, hlc)

    def _reindex_confirmed(self, item: StoredRecord) -> None:
        """A draft was never in the in-memory vector index (only active rows are)."""
        rowid = self.searcher.rowid_of(item.knowledge_id)
        if rowid is None or item.record is None:
            return
        vector = self._embed_one(item.record, item.state.sensitive)
        if vector is not None:
            self.searcher.added(rowid, vector)

    def reject(self, knowledge_id: str, reason: str | None = None) -> WriteOutcome:
        """The user refuses a held record: invalidated with the reason (kept, never served)."""
        with self.atomic():
            self._draft(knowledge_id)
            hlc = self.clock.send()
            self.store.set_state(knowledge_id, ChangeOp.INVALIDATE, hlc=hlc,
                                 lifecycle=Lifecycle.INVALIDATED,
                                 reason=(reason or "").strip() or REJECTED)
        return WriteOutcome(knowledge_id, Status.NO_CONTENT, hlc)


__all__ = ["REJECTED", "ReviewPath"]
