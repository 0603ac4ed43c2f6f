"""Writer keys, registered per scope: what a provenance signature is checked against.

Kept in ``writers.json`` in the node's key directory (mode 0600), beside the node's own
keys: whoever can rewrite that directory can already re-sign the store (docs/store.md,
"What each setup detects"), so the registry is trusted exactly as far as the store is.
Each writer in a scope may have an Ed25519 public key, an HMAC-SHA256 secret, or both
(the HMAC is agent-memory-integrity's model: one shared secret per writer).

The file is re-read when it changes (one ``stat`` per check), so keys registered with
``amcp writers add`` are seen by a running server at its next write.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amcp.errors import ForbiddenError, StoreError, ValidationError

FILE = "writers.json"
HMAC_PREFIX = "hmac-sha256:"
ED25519_PREFIX = "ed25519:"


@dataclass(frozen=True, slots=True)
class WriterKey:
    scope: str
    writer: str
    ed25519: bytes | None = None  # raw 32-byte public key
    hmac: bytes | None = None  # shared secret

    def check(self, data: bytes, signature: str) -> str | None:
        """The scheme that verified ``signature`` over ``data``, or None."""
        if signature.startswith(ED25519_PREFIX):
            ok = self.ed25519 is not None and _ed25519_ok(self.ed25519, data, signature)
            return "ed25519" if ok else None
        given = signature.removeprefix(HMAC_PREFIX)
        if self.hmac is None:
            return None
        expected = hmac.new(self.hmac, data, hashlib.sha256).hexdigest()
        return "hmac" if hmac.compare_digest(expected, given.lower()) else None


def _ed25519_ok(public: bytes, data: bytes, signature: str) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        raw = base64.b64decode(signature.removeprefix(ED25519_PREFIX), validate=True)
        Ed25519PublicKey.from_public_bytes(public).verify(raw, data)
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


def sign_hmac(secret: bytes, data: bytes) -> str:
    return HMAC_PREFIX + hmac.new(secret, data, hashlib.sha256).hexdigest()


def sign_ed25519(private_key: Any, data: bytes) -> str:
    """``private_key``: a ``cryptography`` Ed25519PrivateKey."""
    return ED25519_PREFIX + base64.b64encode(private_key.sign(data)).decode()


class WriterKeys:
    """The registry of one node (``Keyring.directory / writers.json``)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._keys: dict[str, dict[str, WriterKey]] = {}

    # ------------------------------------------------------------------ reading

    def _current(self) -> dict[str, dict[str, WriterKey]]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._keys = _load(self.path)
                self._stamp = stamp
            return self._keys

    def generation(self) -> tuple[int, int] | None:
        """What changes when the registry file does (None: no file). One ``stat``: a reader
        that caches verdicts compares it, so a key removed by another process (``amcp
        writers remove``) un-verifies that writer's records at the next read."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def key(self, scope: str, writer: str) -> WriterKey | None:
        return self._current().get(scope, {}).get(writer)

    def scopes(self) -> list[str]:
        return sorted(s for s, w in self._current().items() if w)

    def writers(self, scope: str) -> list[WriterKey]:
        return list(self._current().get(scope, {}).values())

    def guarded(self, scopes: Iterable[str]) -> list[str]:
        """Those of ``scopes`` that have writer keys: a user-origin write there must be signed."""
        keys = self._current()
        return [s for s in scopes if keys.get(s)]

    def verify(self, scopes: Iterable[str], writer: str, data: bytes, signature: str) -> str:
        """The scope and scheme a valid signature was checked in (``"scope/hmac"``), or a
        403 naming ``provenance.signature``: every scope of the record must have ``writer``
        registered and its key must verify (a key of scope A proves nothing about B)."""
        keys = self._current()
        schemes: list[str] = []
        for scope in scopes:
            key = keys.get(scope, {}).get(writer)
            if key is None:
                raise ForbiddenError(
                    f"provenance.signature: writer {writer!r} has no key registered for "
                    f"scope {scope!r} (amcp writers add; docs/firewall.md)"
                )
            scheme = key.check(data, signature)
            if scheme is None:
                raise ForbiddenError(
                    f"provenance.signature: does not verify with the key of writer {writer!r} "
                    f"in scope {scope!r}"
                )
            schemes.append(scheme)
        return schemes[0] if schemes else "none"

    # ------------------------------------------------------------------ registering

    def register(self, scope: str, writer: str, *, ed25519_public: bytes | None = None,
                 hmac_secret: bytes | None = None) -> WriterKey:
        if not scope or not writer:
            raise ValidationError("writer", "scope and writer are both required")
        if ed25519_public is None and hmac_secret is None:
            raise ValidationError("key", "give an Ed25519 public key, an HMAC secret, or both")
        if ed25519_public is not None and len(ed25519_public) != 32:
            raise ValidationError("ed25519", "an Ed25519 public key is 32 bytes")
        if hmac_secret is not None and len(hmac_secret) < 16:
            raise ValidationError("hmac", "an HMAC secret needs at least 16 bytes")
        with self._lock:
            data = _load(self.path)
            old = data.get(scope, {}).get(writer)
            key = WriterKey(scope, writer, ed25519_public or (old.ed25519 if old else None),
                            hmac_secret or (old.hmac if old else None))
            data.setdefault(scope, {})[writer] = key
            _save(self.path, data)
            self._stamp = None
        return key

    def remove(self, scope: str, writer: str) -> bool:
        with self._lock:
            data = _load(self.path)
            gone = data.get(scope, {}).pop(writer, None) is not None
            if gone:
                _save(self.path, data)
                self._stamp = None
        return gone


def _load(path: Path) -> dict[str, dict[str, WriterKey]]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        # A registry that cannot be read must not quietly mean "no keys": that would turn
        # every guarded scope back into one where any label is believed.
        raise StoreError(f"cannot read writer keys {path}: {exc}") from exc
    out: dict[str, dict[str, WriterKey]] = {}
    for scope, writers in (raw.get("scopes") or {}).items():
        for writer, k in writers.items():
            out.setdefault(scope, {})[writer] = WriterKey(
                scope, writer,
                base64.b64decode(k["ed25519"]) if k.get("ed25519") else None,
                base64.b64decode(k["hmac"]) if k.get("hmac") else None,
            )
    return out


def _save(path: Path, data: dict[str, dict[str, WriterKey]]) -> None:
    body = {"version": 1, "scopes": {
        scope: {w: {n: base64.b64encode(v).decode() for n, v in
                    (("ed25519", k.ed25519), ("hmac", k.hmac)) if v is not None}
                for w, k in sorted(writers.items())}
        for scope, writers in sorted(data.items()) if writers}}
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(body, out, indent=1, sort_keys=True)
    os.replace(tmp, path)


__all__ = ["WriterKey", "WriterKeys", "sign_ed25519", "sign_hmac"]
