"""Node identity (PROFILE §4, upstream L1): node URI, capability fingerprint, Ed25519 key.

The URI names what a node is and what it can do; the fingerprint ties the name to the
capabilities map it declares in its hello, so a node cannot advertise one capability set in
its address and another in its hello. The Ed25519 key is what the CAPABILITY_RESPONSE
signature proves possession of.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from amcp.amf.canonical import canonical_packb
from amcp.errors import ConfigError, ValidationError


class NodeType(StrEnum):
    AI = "ai"
    DB = "db"
    GATEWAY = "gateway"
    BRIDGE = "bridge"
    RELAY = "relay"


_SEGMENT = re.compile(r"[a-z0-9-]+")
_PRODUCT = re.compile(r"[a-z0-9_-]+")
_FP = re.compile(r"[0-9a-f]{6,16}")
_SCHEME = "amcp://"
# The URI carries the first 8 bytes of the SHA-256; receivers accept 6 hex digits and up
# because upstream's own examples use 6 (PROFILE §4).
FINGERPRINT_HEX_DIGITS = 16
MIN_FINGERPRINT_HEX_DIGITS = 6


def b64url_encode(data: bytes) -> str:
    """base64url without padding, the form keys, nonces and signatures travel in."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Inverse of :func:`b64url_encode`; tolerates padding. Raises ValueError."""
    if not isinstance(text, str) or not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError("not base64url")
    stripped = text.rstrip("=")
    try:
        return base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except binascii.Error as exc:
        raise ValueError(str(exc)) from exc


def capability_fingerprint(capabilities: Mapping[str, Any]) -> bytes:
    """SHA-256 of the canonical MessagePack of the capabilities map (32 bytes)."""
    return hashlib.sha256(canonical_packb(dict(capabilities))).digest()


def fingerprint_hex(capabilities: Mapping[str, Any]) -> str:
    """The 16-hex-digit form a node URI carries."""
    return capability_fingerprint(capabilities)[: FINGERPRINT_HEX_DIGITS // 2].hex()


@dataclass(frozen=True, slots=True)
class NodeURI:
    """``amcp://{node_type}.{vendor}[.{product}].fp-{hex}.{region}``."""

    node_type: NodeType
    vendor: str
    product: str | None
    fingerprint: str
    region: str

    def __post_init__(self) -> None:
        if not _SEGMENT.fullmatch(self.vendor):
            raise ValidationError("node_address.vendor", "must match [a-z0-9-]+")
        if self.product is not None and not _PRODUCT.fullmatch(self.product):
            raise ValidationError("node_address.product", "must match [a-z0-9_-]+")
        if not _FP.fullmatch(self.fingerprint):
            raise ValidationError("node_address.fingerprint", "must be 6-16 lowercase hex digits")
        if not _SEGMENT.fullmatch(self.region):
            raise ValidationError("node_address.region", "must match [a-z0-9-]+")

    @classmethod
    def parse(cls, text: str) -> NodeURI:
        if not isinstance(text, str) or not text.startswith(_SCHEME):
            raise ValidationError("node_address", "must start with amcp://")
        # Segments cannot contain dots, so splitting is unambiguous: 4 parts without a
        # product, 5 with one, and the fingerprint is always the second to last.
        parts = text[len(_SCHEME) :].split(".")
        if len(parts) not in (4, 5):
            raise ValidationError("node_address", f"expected 4 or 5 dot-separated parts: {text!r}")
        try:
            node_type = NodeType(parts[0])
        except ValueError:
            raise ValidationError(
                "node_address.node_type", f"unknown node type {parts[0]!r}"
            ) from None
        fp = parts[-2]
        if not fp.startswith("fp-"):
            raise ValidationError("node_address.fingerprint", "must be written fp-{hex}")
        product = parts[2] if len(parts) == 5 else None
        return cls(node_type, parts[1], product, fp[3:], parts[-1])

    @classmethod
    def for_capabilities(
        cls,
        node_type: NodeType,
        vendor: str,
        capabilities: Mapping[str, Any],
        *,
        region: str = "local",
        product: str | None = None,
    ) -> NodeURI:
        return cls(node_type, vendor, product, fingerprint_hex(capabilities), region)

    def matches(self, capabilities: Mapping[str, Any]) -> bool:
        """Whether the URI's fingerprint is a prefix of the capabilities' SHA-256."""
        return capability_fingerprint(capabilities).hex().startswith(self.fingerprint)

    def same_node(self, other: NodeURI) -> bool:
        """Equal on everything but the fingerprint.

        Certificates bind a node by this part only: the fingerprint changes whenever the
        node's capabilities change, and re-issuing a certificate on every upgrade is not
        something operators will do.
        """
        return (self.node_type, self.vendor, self.product, self.region) == (
            other.node_type,
            other.vendor,
            other.product,
            other.region,
        )

    def __str__(self) -> str:
        middle = self.vendor if self.product is None else f"{self.vendor}.{self.product}"
        return f"{_SCHEME}{self.node_type.value}.{middle}.fp-{self.fingerprint}.{self.region}"


# ---------------------------------------------------------------------------- keys on disk

KEY_FILE = "node_ed25519.pem"


def write_private_pem(path: Path, key: Ed25519PrivateKey) -> Path:
    """Write an unencrypted PKCS#8 PEM readable by its owner only (mode 0600)."""
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Created with 0600 from the start so the key is never briefly world-readable; the
    # fchmod covers a file that already existed with wider permissions.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, pem)
    finally:
        os.close(fd)
    return path


def read_private_pem(path: Path) -> Ed25519PrivateKey:
    """Load an Ed25519 private key, refusing files that group or others can read (like ssh)."""
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read key {path}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"key {path} is accessible by group/others; chmod 600 it")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"key {path} is not an unencrypted PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"key {path} is not an Ed25519 key")
    return key


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@dataclass(frozen=True, slots=True, eq=False)
class NodeIdentity:
    """A node's Ed25519 signing key. Compared by identity: keys are not values to compare."""

    private_key: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> NodeIdentity:
        return cls(Ed25519PrivateKey.generate())

    @property
    def public_key(self) -> bytes:
        """The 32 raw public key bytes."""
        return raw_public_key(self.private_key.public_key())

    @property
    def public_key_b64(self) -> str:
        return b64url_encode(self.public_key)

    def sign(self, data: bytes) -> bytes:
        return self.private_key.sign(data)

    def save(self, key_dir: Path) -> Path:
        return write_private_pem(key_dir / KEY_FILE, self.private_key)

    @classmethod
    def load(cls, key_dir: Path) -> NodeIdentity:
        return cls(read_private_pem(key_dir / KEY_FILE))

    @classmethod
    def load_or_create(cls, key_dir: Path) -> NodeIdentity:
        if (key_dir / KEY_FILE).exists():
            return cls.load(key_dir)
        identity = cls.generate()
        identity.save(key_dir)
        return identity


def verify_signature(public_key: bytes, signature: bytes, data: bytes) -> bool:
    """Ed25519 verification that answers a bool instead of raising (bad input is just False)."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True
