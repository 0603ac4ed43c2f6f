"""Sub-keys derived from a node's data key (stdlib only: the hooks' fast reader uses it)."""

from __future__ import annotations

import hashlib
import hmac


def derive_key(data_key: bytes, purpose: str) -> bytes:
    """A 32-byte key for one purpose (``"row-seal"``, ``"content-key"``): HMAC-SHA256 of the
    data key over a label, so a key for one use reveals nothing of another's."""
    return hmac.new(data_key, f"amcp/{purpose}/v1".encode(), hashlib.sha256).digest()


__all__ = ["derive_key"]
