"""Trust of a record given as a plain AMF mapping: for readers that hold no ``Firewall``
(the hooks' fast reader over the file, a node's recall answer).

A stored signature is not taken at its word. The node admitted the record only after
checking it (``Firewall.screen``), and the envelope and row seal vouch that the claim is
the one it checked — but the writer's key may have been removed since, and a record may
have come in through a node without the firewall. So a signed claim reads as verified only
when the reader checks it again against the writer-key registry (``Registry``: the
node's ``writers.json``, read with the standard library on first need): an HMAC signature
is recomputed, an Ed25519 one verified (loading ``cryptography`` only then). Without a
registry to check against (a node's answer the hook cannot re-check) a signed claim reads
as unverified; the node's own verdict, when it sends one, is used instead
(``from_verdict``). A record with no claim is this node's own when this node's key signed
it, else a peer's.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from amcp.errors import ValidationError
from amcp.firewall import detector
from amcp.firewall.provenance import EXTENSION, Origin, Provenance, payload
from amcp.firewall.trust import Trust, Verification

if TYPE_CHECKING:
    from typing import Any


class Registry:
    """The node's writer keys as a reader without a ``Firewall`` checks them: ``writers.json``
    (amcp.firewall.keys) read once, on the first signed claim shown. One that cannot be read
    verifies nothing."""

    def __init__(self, key_dir: str) -> None:
        self.path = os.path.join(key_dir, "writers.json")
        self._scopes: Mapping[str, Any] | None = None

    def _load(self) -> Mapping[str, Any]:
        if self._scopes is None:
            try:
                with open(self.path, encoding="utf-8") as fh:
                    scopes = json.load(fh).get("scopes")
            except (OSError, ValueError, AttributeError):
                scopes = None
            self._scopes = scopes if isinstance(scopes, Mapping) else {}
        return self._scopes

    def verifies(self, scope: str, claim: Provenance, text: str) -> bool:
        """Whether ``claim``'s signature over ``text`` checks with its writer's key in
        ``scope`` now."""
        if claim.writer is None or claim.signature is None:
            return False
        entry = (self._load().get(scope) or {}).get(claim.writer)
        if not isinstance(entry, Mapping):
            return False
        data = payload(claim.writer, claim.origin.value, text)
        sig = claim.signature
        try:
            if sig.startswith("ed25519:"):
                if not isinstance(entry.get("ed25519"), str):
                    return False
                from amcp.firewall.keys import WriterKey  # loads cryptography on use only

                key = WriterKey(scope, claim.writer, binascii.a2b_base64(entry["ed25519"]))
                return key.check(data, sig) is not None
            secret = entry.get("hmac")
            if not isinstance(secret, str):
                return False
            want = hmac.new(binascii.a2b_base64(secret), data, hashlib.sha256).hexdigest()
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(want, sig.removeprefix("hmac-sha256:").lower())


def trust_of(claim: Any, text: str, *, local: bool | None,
             registry: Registry | None = None, scope: str | None = None) -> Trust | None:
    """``claim``: the record's ``vendor_extensions["x-provenance"]`` (None: it has none);
    ``local``: whether this node's key signed the record (None: the reader cannot tell,
    and a record without a claim then gets no label rather than a guessed one);
    ``registry``/``scope``: where a signed claim is checked (None: it reads as unverified).
    ``text`` is the record's text as signed (its annotation); a signature over anything
    else does not verify."""
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
    ok = (parsed.signature is not None and registry is not None and scope is not None
          and registry.verifies(scope, parsed, text))
    return Trust(parsed.origin, Verification.VERIFIED if ok else Verification.UNVERIFIED,
                 parsed.writer, rules)


def from_verdict(verdict: Any, text: str) -> Trust | None:
    """The node's own verdict on a record it served (``Trust.to_dict()`` in its recall
    answer), or None when it sent none or a malformed one; the instruction flags are the
    reader's own scan of the text it shows."""
    if not isinstance(verdict, Mapping):
        return None
    try:
        origin = Origin(str(verdict.get("origin")))
        verification = Verification(str(verdict.get("verification")))
    except ValueError:
        return None
    writer = verdict.get("writer")
    return Trust(origin, verification, writer if isinstance(writer, str) else None,
                 detector.flags(text), verdict.get("stuffed") is True)


def claim_in(amf: Mapping[str, Any]) -> Any:
    ext = amf.get("vendor_extensions") or {}
    return ext.get(EXTENSION) if isinstance(ext, Mapping) else None


def shown(text: str, trust: Trust | None) -> str:
    """The text a reader may put into an agent's context (instructions withheld)."""
    return detector.neutralise(text) if trust is not None and trust.instruction else text


__all__ = ["Registry", "claim_in", "from_verdict", "shown", "trust_of"]
