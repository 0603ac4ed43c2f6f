"""The memory firewall: what the write path and recall consult before trusting a record.

Narrow on purpose: ``Firewall.screen`` (called once by ``memory_writes.admit_write``) and
``Firewall.trust`` / ``trust.order`` (called by ``Memory.recall`` and the views that label
items). Provenance (``provenance``), writer keys (``keys``), instruction-shaped content
(``detector``, ``rules``), term stuffing (``density``) and contradicting updates
(``contradiction``) are its parts. docs/firewall.md describes the whole.
"""

from __future__ import annotations

from amcp.firewall.gate import Firewall, Verdict
from amcp.firewall.keys import WriterKeys, sign_ed25519, sign_hmac
from amcp.firewall.provenance import EXTENSION, Origin, Provenance, payload
from amcp.firewall.trust import Trust, Verification, order

__all__ = [
    "EXTENSION", "Firewall", "Origin", "Provenance", "Trust", "Verdict", "Verification",
    "WriterKeys", "order", "payload", "sign_ed25519", "sign_hmac",
]
