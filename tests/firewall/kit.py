"""Helpers for the firewall tests: a store with writer keys and signed claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from amcp.firewall import payload, sign_ed25519, sign_hmac
from amcp.memory import Memory

SECRET = b"alice-shared-secret-0123456789ab"
SCOPE = "user:alice"


def memory(tmp_path: Path, *, keys: bool = True) -> Memory:
    mem = Memory(tmp_path / "m.db", embedder="hashing")
    if keys:
        assert mem.firewall is not None
        mem.firewall.keys.register(SCOPE, "alice", hmac_secret=SECRET)
    return mem


def hmac_claim(text: str, writer: str = "alice", origin: str = "user",
               secret: bytes = SECRET) -> dict[str, Any]:
    return {"origin": origin, "writer": writer,
            "signature": sign_hmac(secret, payload(writer, origin, text))}


def ed25519_writer() -> tuple[Ed25519PrivateKey, bytes]:
    key = Ed25519PrivateKey.generate()
    return key, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def ed25519_claim(key: Ed25519PrivateKey, text: str, writer: str,
                  origin: str = "user") -> dict[str, Any]:
    return {"origin": origin, "writer": writer,
            "signature": sign_ed25519(key, payload(writer, origin, text))}
