"""The six zones of the context window (upstream L4 context_window_allocation).

Budgets are whole tokens: each zone gets ``floor(budget × share)``, and the few tokens the
flooring leaves over go to WORKING_MEMORY — the conversation's own zone — so the store-backed
zones never get more than their share and the total never exceeds the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from amcp.amf.types import KnowledgeType


class Zone(StrEnum):
    RESERVED = "RESERVED"
    CORE_PRINCIPLES = "CORE_PRINCIPLES"
    HIGH_ROI = "HIGH_ROI"
    MEDIUM_ROI = "MEDIUM_ROI"
    WORKING_MEMORY = "WORKING_MEMORY"
    OVERFLOW_BUFFER = "OVERFLOW_BUFFER"


# Shares in percent, exactly as upstream; integers so the arithmetic is exact everywhere.
SHARE_PERCENT: dict[Zone, int] = {
    Zone.RESERVED: 1,
    Zone.CORE_PRINCIPLES: 4,
    Zone.HIGH_ROI: 25,
    Zone.MEDIUM_ROI: 15,
    Zone.WORKING_MEMORY: 45,
    Zone.OVERFLOW_BUFFER: 10,
}
EVICTABLE: dict[Zone, bool] = {
    Zone.RESERVED: False,
    Zone.CORE_PRINCIPLES: False,
    Zone.HIGH_ROI: True,  # upstream: "partly replaceable"
    Zone.MEDIUM_ROI: True,
    Zone.WORKING_MEMORY: True,  # cleared when the session ends
    Zone.OVERFLOW_BUFFER: True,
}
# PROFILE §7: KT-FACT, KT-PITFALL and KT-PRINCIPLE make up CORE_PRINCIPLES.
CORE_TYPES: tuple[KnowledgeType, ...] = (
    KnowledgeType.PITFALL,
    KnowledgeType.FACT,
    KnowledgeType.PRINCIPLE,
)
# WORKING_MEMORY this full (caller's working_tokens / its budget) counts as "nearly full":
# the lower-ROI half of MEDIUM_ROI is then compressed into OVERFLOW_BUFFER pointers.
NEAR_FULL = 0.8


@dataclass(frozen=True, slots=True)
class ZoneUse:
    budget: int
    used: int

    def __post_init__(self) -> None:
        if not 0 <= self.used <= self.budget:
            raise ValueError(f"zone use {self.used} outside its budget {self.budget}")

    def to_dict(self) -> dict[str, int]:
        return {"budget": self.budget, "used": self.used}


def allocate(budget_tokens: int) -> dict[Zone, int]:
    budgets = {z: budget_tokens * pct // 100 for z, pct in SHARE_PERCENT.items()}
    budgets[Zone.WORKING_MEMORY] += budget_tokens - sum(budgets.values())
    return budgets


__all__ = ["CORE_TYPES", "EVICTABLE", "NEAR_FULL", "SHARE_PERCENT", "Zone", "ZoneUse", "allocate"]
