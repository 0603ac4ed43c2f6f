"""Trust of a record given as a plain AMF mapping: for readers that hold no ``Firewall``
(the hooks' fast reader over the file, a node's recall answer).

Such a reader cannot re-check a writer's signature cheaply (the Ed25519 library alone
costs a hook more than its budget), and need not: the node admitted the record only after
checking the signature against its writer keys (``Firewall.screen``), and the envelope and
row seal vouch that the claim is the one it checked. So a stored claim with a signature
reads as verified, one without as unverified; a record with no claim is this node's own
when this node's key signed it, else a peer's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from amcp.errors import ValidationError
from amcp.firewall import detector
from amcp.firewall.provenance import EXTENSION, Origin, Provenance
from amcp.firewall.trust import Trust, Verification

if TYPE_CHECKING:
    from typing import Any


def trust_of(claim: Any, text: str, *, local: bool | None) -> Trust | None:
    """``claim``: the record's ``vendor_extensions["x-provenance"]`` (None: it has none);
    ``local``: whether this node's key signed the record (None: the reader cannot tell,
    and a record without a claim then gets no label rather than a guessed one)."""
    rules = detector.flags(text)
    if claim is None:
        if local is None:
            return Trust(Origin.USER, Verification.LOCAL, None, rules) if rules else None
        if local:
            return Trust(Origin.USER, Verification.LOCAL, None, rules)
        return Trust(Origin.PEER, Verification.UNVERIFIED, None, rules)
    try:
        parsed = Provenance.parse(claim)
    except ValidationError:
        return Trust(Origin.PEER, Verification.UNVERIFIED, None, rules)
    verified = Verification.VERIFIED if parsed.signature else Verification.UNVERIFIED
    return Trust(parsed.origin, verified, parsed.writer, rules)


def claim_in(amf: Mapping[str, Any]) -> Any:
    ext = amf.get("vendor_extensions") or {}
    return ext.get(EXTENSION) if isinstance(ext, Mapping) else None


def shown(text: str, trust: Trust | None) -> str:
    """The text a reader may put into an agent's context (instructions withheld)."""
    return detector.neutralise(text) if trust is not None and trust.instruction else text


__all__ = ["claim_in", "shown", "trust_of"]
