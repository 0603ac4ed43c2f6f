"""Three-tier recall for agents: pointers first, summaries when relevant, full AMF on demand.

An agent's context is the scarce resource, so it is spent in three steps:

1. **pointer** — one line per record: ``K-1a2b3c4d5e6f [KT-FACT · project:x · 0.80] text…``
   (id prefix, type, first scope, learned weight, the start of the text);
2. **summary** — one sentence, only for records relevant to the task (relevance at least
   ``RELEVANT``, or placed in HIGH_ROI);
3. **full** — the AMF record, fetched by id when the agent asks (``Memory.read``).

Records carrying AMP kinds (``x-kind``) come in the AMP compiler's order: intent → facts →
pattern → invalidation → discovery → events; records without one follow, in pack order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amcp.cse.lines import pointer, pointer_line, summary

if TYPE_CHECKING:
    from amcp.cse.pack import Pack, PackItem
    from amcp.ports import MemoryReader

RELEVANT = 0.3
AMP_ORDER: tuple[str, ...] = ("intent", "facts", "pattern", "invalidation", "discovery", "events")
_AMP_ALIAS = {"fact": "facts", "event": "events"}


def amp_rank(kind: str | None) -> int:
    k = _AMP_ALIAS.get((kind or "").lower(), (kind or "").lower())
    return AMP_ORDER.index(k) if k in AMP_ORDER else len(AMP_ORDER)


def amp_sorted(items: Sequence[PackItem]) -> list[PackItem]:
    """Stable: AMP kinds first in their order, then everything else as it came."""
    return sorted(items, key=lambda it: amp_rank(it.kind))


@dataclass(frozen=True, slots=True)
class Tiers:
    pointers: tuple[str, ...]
    summaries: tuple[tuple[str, str], ...]  # (knowledge_id, one sentence), relevant only
    ids: tuple[str, ...]  # full knowledge ids, in pointer order

    def to_dict(self) -> dict[str, Any]:
        return {
            "pointers": list(self.pointers),
            "summaries": dict(self.summaries),
            "ids": list(self.ids),
        }


def tiers_of(pack: Pack) -> Tiers:
    from amcp.cse.zones import Zone

    ordered = amp_sorted(pack.items)
    summaries = tuple(
        (it.knowledge_id, summary(it.record))
        for it in ordered
        if it.record is not None and (it.relevance >= RELEVANT or it.zone is Zone.HIGH_ROI)
    )
    return Tiers(
        pointers=tuple(it.pointer for it in ordered),
        summaries=summaries,
        ids=tuple(it.knowledge_id for it in ordered),
    )


def full(memory: MemoryReader, knowledge_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Tier 3: the AMF of the records asked for (a read: it counts as an access)."""
    return [s.record.to_dict() for s in memory.read(list(knowledge_ids)) if s.record is not None]


__all__ = [
    "AMP_ORDER", "RELEVANT", "Tiers", "amp_rank", "amp_sorted", "full", "pointer",
    "pointer_line", "summary", "tiers_of",
]
