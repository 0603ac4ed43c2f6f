"""What a context pack takes from the memory firewall (docs/firewall.md, "Context packs").

A pack is delivered into an agent's context as it is, so the firewall decides three things
for each candidate before it is ranked:

- its **trust** (origin × verification, from the record's verified provenance): every
  item is labelled with it, so an agent can tell "from a web page, unverified" from the
  user's own word;
- its **trusted confidence** (``Trust.confidence``): ROI is ranked by what the writer
  stated capped by what its provenance is worth, so a self-raised confidence buys no rank;
- whether it is **instruction-shaped** (the detector's rules): such a record is withheld
  from the pack — never delivered, not even as a pointer — and counted in the pack's
  ``withheld``. Drafts (what the firewall holds) are not loaded at all; this covers the
  user's own flagged records and records stored before the firewall or by a node without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amcp.cse.entry import Entry
    from amcp.firewall.gate import Firewall
    from amcp.firewall.trust import Trust
    from amcp.store.base import RecordState, Store


@dataclass(slots=True)
class PackScreen:
    """One pack's view of the firewall: the trust of each candidate, and what it withheld."""

    firewall: Firewall | None
    store: Store
    withheld: set[str] = field(default_factory=set)

    def trust(self, entry: Entry, state: RecordState) -> Trust | None:
        """``entry``'s trust (None without a firewall). A sensitive entry is a redacted view:
        its stored copy is what the firewall assesses (the redacted text checks against no
        signature)."""
        fw = self.firewall
        if fw is None:
            return None
        known = fw.known(entry.knowledge_id)
        if known is not None:
            return known
        if state.sensitive:
            stored = self.store.get(entry.knowledge_id)
            if stored is None or stored.record is None:
                return None
            return fw.trust(stored.record)
        return fw.trust(entry.record)

    def admits(self, entry: Entry, trust: Trust | None) -> bool:
        """False for an instruction-shaped record: withheld from the pack, and counted."""
        if trust is not None and trust.instruction:
            self.withheld.add(entry.knowledge_id)
            return False
        return True


def confidence(entry: Entry, trust: Trust | None) -> float:
    """The confidence a pack ranks by: the stated one, capped by verified provenance."""
    return entry.confidence if trust is None else trust.confidence(entry.confidence)


__all__ = ["PackScreen", "confidence"]
