"""The hash chain over a store's change log, and its signed head (store-agnostic).

Each change's hash covers the previous hash and the change itself, so editing, deleting or
reordering any entry breaks every hash after it. The head (last seq + hash) is signed with
the node key and also written to a witness file in the key directory: truncating the log
(rollback) or replacing the whole file is caught by comparing against the witness.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import b64url, b64url_decode

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

GENESIS = "0" * 64


def link_hash(prev: str, seq: int, hlc: int, op: str, knowledge_id: str, details: Any) -> str:
    body = canonical_packb([seq, hlc, op, knowledge_id, details])
    return hashlib.sha256(bytes.fromhex(prev) + body).hexdigest()


def head_message(store_id: str, seq: int, head: str) -> bytes:
    return f"amcp-chain-head:{store_id}:{seq}:{head}".encode()


def sign_head(key: Ed25519PrivateKey, store_id: str, seq: int, head: str) -> str:
    return b64url(key.sign(head_message(store_id, seq, head)))


def verify_head(
    public: Ed25519PublicKey, store_id: str, seq: int, head: str, signature: str
) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        public.verify(b64url_decode(signature), head_message(store_id, seq, head))
    except (InvalidSignature, ValueError):
        return False
    return True
