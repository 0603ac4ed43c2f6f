"""The memory firewall: what the write path and recall consult before trusting a record.

Narrow on purpose: ``Firewall.screen`` (called once by ``memory_writes.admit_write``) and
``Firewall.trust`` / ``serve.screen_hits`` (called by ``Memory.recall``; the views label
items with the ``Trust`` it returns). Provenance (``provenance``), writer keys (``keys``),
instruction-shaped content (``detector``, ``rules``), term stuffing (``density``) and
contradicting updates (``contradiction``) are its parts. docs/firewall.md describes the
whole.

The names below load on first use (PEP 562): the hooks' fast path imports
``amcp.firewall.labels`` alone, and must not pay for the write side's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amcp.firewall.gate import Firewall, Verdict
    from amcp.firewall.keys import WriterKeys, sign_ed25519, sign_hmac
    from amcp.firewall.provenance import EXTENSION, Origin, Provenance, payload
    from amcp.firewall.trust import Trust, Verification

_WHERE = {
    "Firewall": "gate", "Verdict": "gate", "WriterKeys": "keys", "sign_ed25519": "keys",
    "sign_hmac": "keys", "EXTENSION": "provenance", "Origin": "provenance",
    "Provenance": "provenance", "payload": "provenance", "Trust": "trust",
    "Verification": "trust",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'amcp.firewall' has no attribute {name!r}")
    return getattr(importlib.import_module(f"amcp.firewall.{where}"), name)


__all__ = [
    "EXTENSION", "Firewall", "Origin", "Provenance", "Trust", "Verdict", "Verification",
    "WriterKeys", "payload", "sign_ed25519", "sign_hmac",
]
