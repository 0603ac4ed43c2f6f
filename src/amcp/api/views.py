"""Typed results of ``Memory`` → the API's response models."""

from __future__ import annotations

from amcp.api import schemas as s
from amcp.firewall import Trust
from amcp.memory import WriteOutcome
from amcp.retrieval.search import Hit
from amcp.store.base import StoredRecord


def state_out(item: StoredRecord) -> s.StateOut:
    st = item.state
    return s.StateOut(
        lifecycle=st.lifecycle,
        reason=st.reason,
        superseded_by=st.superseded_by,
        sensitive=st.sensitive,
        weight=st.weight,
        access_count=st.access_count,
        last_access=st.last_access,
        expires_at=st.expires_at,
    )


def item_out(item: StoredRecord) -> s.ItemOut:
    return s.ItemOut(
        knowledge_id=item.knowledge_id,
        amf=item.record.to_dict() if item.record is not None else None,
        state=state_out(item),
    )


def hit_out(hit: Hit, trust: Trust | None = None) -> s.HitOut:
    item = hit.item
    return s.HitOut(
        knowledge_id=item.knowledge_id,
        amf=item.record.to_dict() if item.record is not None else None,
        state=state_out(item),
        trust=s.TrustOut.model_validate(trust.to_dict()) if trust is not None else None,
        score=round(float(hit.score), 6),
        lexical_rank=hit.lexical_rank,
        vector_rank=hit.vector_rank,
    )


def write_out(outcome: WriteOutcome) -> s.WriteOut:
    return s.WriteOut(
        knowledge_id=outcome.knowledge_id,
        status=int(outcome.status),
        created=outcome.created,
        hlc=outcome.hlc,
        duplicate_of=outcome.duplicate_of,
        near_duplicates=[
            s.NearDuplicate(knowledge_id=k, cosine=c) for k, c in outcome.near_duplicates
        ],
        held=outcome.held,
        beside=outcome.beside,
    )


__all__ = ["hit_out", "item_out", "state_out", "write_out"]
