"""Rendering records for people (rich) and for programs (JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amcp.cli.common import out

if TYPE_CHECKING:  # only for annotations: `amcp --help` imports this module
    from amcp.firewall import Trust
    from amcp.retrieval.search import Hit
    from amcp.store.base import StoredRecord


def item_json(item: StoredRecord) -> dict[str, Any]:
    st = item.state
    return {
        "knowledge_id": item.knowledge_id,
        "amf": item.record.to_dict() if item.record else None,
        "state": {
            "lifecycle": st.lifecycle.value,
            "reason": st.reason,
            "superseded_by": st.superseded_by,
            "sensitive": st.sensitive,
            "weight": st.weight,
            "access_count": st.access_count,
            "last_access": st.last_access,
            "expires_at": st.expires_at,
        },
    }


def hit_json(hit: Hit, trust: Trust | None = None) -> dict[str, Any]:
    data = item_json(hit.item)
    if trust is not None:
        data["trust"] = trust.to_dict()
    data["score"] = round(hit.score, 6)
    data["lexical_rank"] = hit.lexical_rank
    data["vector_rank"] = hit.vector_rank
    return data


def print_item(item: StoredRecord) -> None:
    st = item.state
    out.print(f"[bold]{item.knowledge_id}[/bold]  \\[{st.lifecycle.value}]")
    if item.record is None:
        out.print(
            "  purged: content erased, tombstone kept" + (f" ({st.reason})" if st.reason else "")
        )
        return
    r = item.record
    out.print(f"  type       {r.type.value}", markup=False)
    out.print(f"  text       {r.text}", markup=False)
    triple = f"{r.core.subject} {r.core.predicate.value} {r.core.object[:80]}"
    out.print(f"  triple     {triple}", markup=False)
    out.print(f"  confidence {r.core.confidence}", markup=False)
    out.print(f"  scope      {', '.join(r.meta.project_scope)}", markup=False)
    out.print(f"  created    {r.meta.created_at} by {r.meta.created_by}", markup=False)
    if r.tags:
        out.print(f"  tags       {', '.join(r.tags)}", markup=False)
    if st.reason:
        out.print(f"  reason     {st.reason}", markup=False)
    if st.superseded_by:
        out.print(f"  superseded by {st.superseded_by}", markup=False)
    out.print(
        f"  checksum   {r.integrity.checksum}" + ("  (signed)" if r.integrity.signature else "")
    )
