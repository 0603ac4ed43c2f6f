"""What a record's provenance is worth: origin × verification → a trust tier and a label.

The tier orders recall (``serve.order``) and answers trust filters; the label is what every
answer shows beside the item ("from a web page, unverified"). Both come from the verified
record and the node's writer-key registry, never from a tag or field the writer set.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from amcp.firewall.provenance import Origin

if TYPE_CHECKING:
    from typing import Any


class Verification(StrEnum):
    VERIFIED = "verified"  # the writer's signature checked against a registered key
    LOCAL = "local"  # no claim, written and signed by this node's own process
    UNVERIFIED = "unverified"  # a claim nothing here can check


# Higher is more trusted. A user claim only counts as the user's when it verifies (or was
# written by this node's own process, which holds the keys anyway); an unverified "user"
# label is worth what an agent's word is.
_BASE = {Origin.USER: 2, Origin.AGENT: 2, Origin.IMPORT: 2, Origin.PEER: 2,
         Origin.TOOL: 1, Origin.EXTERNAL: 1}
TOP = 4
# The most confidence a record's own ``core.confidence`` can carry at each tier: what the
# writer stated, capped by what its verified provenance is worth. An unverified writer can
# state 1.0; it is read as at most 0.7 (0.5 from a web page), so a self-raised confidence
# never passes a filter (``WHERE confidence > 0.8``) or buys pack rank (ROI) that only a
# verified writer's statement can. The tier-4 ceiling is 1.0: the verified user's own word.
CONFIDENCE_CEILING = {4: 1.0, 3: 0.9, 2: 0.7, 1: 0.5}

_SAID = {Origin.USER: "from the user", Origin.AGENT: "from the agent",
         Origin.TOOL: "from a tool result", Origin.EXTERNAL: "from a web page or document",
         Origin.IMPORT: "imported", Origin.PEER: "from another node"}


class Trust(NamedTuple):
    origin: Origin
    verification: Verification
    writer: str | None = None
    instruction: tuple[str, ...] = ()  # detector rules the text trips
    stuffed: bool = False  # term-density outlier (``density``)

    @property
    def tier(self) -> int:
        if self.verification is not Verification.UNVERIFIED:
            return TOP if self.origin is Origin.USER else _BASE[self.origin] + 1
        return _BASE[self.origin]

    @property
    def verified(self) -> bool:
        return self.verification is not Verification.UNVERIFIED

    def confidence(self, stated: float) -> float:
        """The trusted confidence of a record whose writer stated ``stated``: the one every
        confidence filter and confidence-weighted rank reads (AMQL, context packs, distill)."""
        return min(float(stated), CONFIDENCE_CEILING[self.tier])

    def label(self) -> str:
        """One phrase for an agent: where the item came from and whether that is checked."""
        said = _SAID[self.origin]
        if self.verification is Verification.LOCAL:
            said = "written on this node"
        out = f"{said}, {self.verification.value}"
        if self.writer and self.verification is Verification.VERIFIED:
            out += f" ({self.writer})"
        if self.instruction:
            out += "; instruction-shaped: " + ", ".join(self.instruction)
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"origin": self.origin.value,
                               "verification": self.verification.value,
                               "tier": self.tier, "label": self.label()}
        if self.writer:
            out["writer"] = self.writer
        if self.instruction:
            out["instruction"] = list(self.instruction)
        if self.stuffed:
            out["stuffed"] = True
        return out


__all__ = ["CONFIDENCE_CEILING", "TOP", "Trust", "Verification"]
