"""CAPABILITY_HELLO and CAPABILITY_RESPONSE payloads (PROFILE §3, §4).

Parsing is strict because the hello is the one message an unauthenticated peer gets to
send: every field is type-checked and anything wrong is a RemoteProtocolError (0x00FF).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from amcp.errors import RemoteProtocolError, Status, ValidationError
from amcp.session.identity import (
    NodeIdentity,
    NodeType,
    NodeURI,
    b64url_decode,
    b64url_encode,
)
from amcp.wire.constants import MAX_PAYLOAD

AMCP_VERSION = "1.0.0"
SUPPORTED_MAJOR = 1
NONCE_SIZE = 16
COMPRESSION_LZ4 = "lz4"
ENCRYPTION_AES_GCM = "aes-256-gcm"
NONE = "none"
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


class TrustLevel(StrEnum):
    LOCAL = "local"
    VERIFIED = "verified"
    FEDERATED = "federated"


def _bad(reason: str, status: Status = Status.PROTOCOL_ERROR) -> RemoteProtocolError:
    return RemoteProtocolError(reason, status=status)


def _get(payload: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = payload.get(key)
    # bool is an int subclass; a True max_payload is a type error, not 1.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise _bad(f"{key} missing or not a {getattr(kind, '__name__', kind)}")
    return value


def _opt(payload: Mapping[str, Any], key: str, kind: type) -> Any:
    value = payload.get(key)
    if value is not None and not isinstance(value, kind):
        raise _bad(f"{key} is not a {kind.__name__}")
    return value


def _b64(payload: Mapping[str, Any], key: str, size: int | None = None) -> bytes:
    try:
        raw = b64url_decode(_get(payload, key, str))
    except ValueError:
        raise _bad(f"{key} is not base64url") from None
    if size is not None and len(raw) != size:
        raise _bad(f"{key} must be {size} bytes")
    return raw


def _feature(payload: Mapping[str, Any], key: str, on: str) -> str:
    """CAPABILITY_RESPONSE ``compression`` / ``encryption`` in any form PROFILE §3 allows.

    The profile's own form is the algorithm name (``"lz4"``, ``"aes-256-gcm"``) or
    ``"none"``; upstream writes capability flags as booleans, and a receiver MUST accept
    those too (``true`` = the algorithm, ``false`` = none). Names are compared without
    case. Another algorithm's name is not an error: that feature is simply not agreed
    (PROFILE §1 — a flag the receiver did not negotiate is then a violation, as usual).
    A missing key or another type (a number, a map) is a violation: the field is required.
    """
    value = payload.get(key)
    if isinstance(value, bool):
        return on if value else NONE
    if not isinstance(value, str):
        raise _bad(f"{key} missing or not a string or boolean")
    name = value.strip().lower()
    return name if name in (on, NONE) else NONE


def check_version(text: str, field_name: str) -> str:
    """Accept ``1.x[.y]``; another major is a violation with status 701."""
    m = _VERSION_RE.fullmatch(text)
    if m is None:
        raise _bad(f"{field_name} {text!r} is not a version")
    if int(m[1]) != SUPPORTED_MAJOR:
        raise _bad(f"AMCP {text} is not supported", Status.VERSION_NOT_SUPPORTED)
    return text


@dataclass(frozen=True, slots=True)
class Hello:
    """A parsed CAPABILITY_HELLO."""

    amcp_version: str
    node_type: NodeType
    node_address: NodeURI
    public_key: bytes
    trust_level: TrustLevel
    capabilities: Mapping[str, Any]
    nonce: bytes
    cert_chain: str | None = None
    bearer: str | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Hello:
        version = check_version(_get(payload, "amcp_version", str), "amcp_version")
        try:
            node_type = NodeType(_get(payload, "node_type", str))
            address = NodeURI.parse(_get(payload, "node_address", str))
            trust = TrustLevel(_get(payload, "trust_level", str))
        except (ValueError, ValidationError) as exc:
            raise _bad(f"hello: {exc}") from None
        if address.node_type is not node_type:
            raise _bad("node_type does not match node_address")
        capabilities = _get(payload, "capabilities", Mapping)
        try:
            matches = address.matches(capabilities)
        except ValidationError as exc:
            raise _bad(f"capabilities cannot be fingerprinted: {exc}") from None
        if not matches:
            raise _bad("capability fingerprint does not match the declared capabilities")
        auth = _opt(payload, "auth", Mapping)
        bearer = None if auth is None else _opt(auth, "bearer", str)
        return cls(
            amcp_version=version,
            node_type=node_type,
            node_address=address,
            public_key=_b64(payload, "public_key", 32),
            trust_level=trust,
            capabilities=dict(capabilities),
            nonce=_b64(payload, "nonce", NONCE_SIZE),
            cert_chain=_opt(payload, "cert_chain", str),
            bearer=bearer,
        )

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "amcp_version": self.amcp_version,
            "node_type": self.node_type.value,
            "node_address": str(self.node_address),
            "public_key": b64url_encode(self.public_key),
            "trust_level": self.trust_level.value,
            "capabilities": dict(self.capabilities),
            "nonce": b64url_encode(self.nonce),
        }
        if self.cert_chain is not None:
            payload["cert_chain"] = self.cert_chain
        if self.bearer is not None:
            payload["auth"] = {"bearer": self.bearer}
        return payload


@dataclass(frozen=True, slots=True)
class CapabilityResponse:
    """A parsed CAPABILITY_RESPONSE. Keys and signatures travel base64url like the hello's."""

    status: int
    accepted_version: str
    signature: bytes
    trust_level: TrustLevel
    max_payload: int
    compression: str
    encryption: str
    x25519: bytes | None = None
    reason: str | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> CapabilityResponse:
        status = _get(payload, "status", int)
        try:
            trust = TrustLevel(_get(payload, "trust_level", str))
        except ValueError:
            raise _bad("trust_level is not local|verified|federated") from None
        max_payload = _get(payload, "max_payload", int)
        if max_payload <= 0:
            raise _bad("max_payload must be positive")
        x25519 = _b64(payload, "x25519", 32) if payload.get("x25519") is not None else None
        return cls(
            status=status,
            accepted_version=_get(payload, "accepted_version", str),
            signature=_b64(payload, "signature", 64),
            trust_level=trust,
            max_payload=max_payload,
            compression=_feature(payload, "compression", COMPRESSION_LZ4),
            encryption=_feature(payload, "encryption", ENCRYPTION_AES_GCM),
            x25519=x25519,
            reason=_opt(payload, "reason", str),
        )

    def to_payload(self, ref_seq: int) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "status": self.status,
            "ref_seq": ref_seq,
            "accepted_version": self.accepted_version,
            "signature": b64url_encode(self.signature),
            "trust_level": self.trust_level.value,
            "max_payload": self.max_payload,
            "compression": self.compression,
            "encryption": self.encryption,
        }
        if self.x25519 is not None:
            payload["x25519"] = b64url_encode(self.x25519)
        if self.reason is not None:
            payload["reason"] = self.reason
        return payload


def possession_message(peer_nonce: bytes, own_address: NodeURI) -> bytes:
    """What a CAPABILITY_RESPONSE signs: ``peer_nonce ‖ own node_address (UTF-8)``."""
    return peer_nonce + str(own_address).encode("utf-8")


@dataclass(frozen=True, slots=True, eq=False)
class LocalNode:
    """What this side declares in its hello and offers in its response."""

    identity: NodeIdentity
    address: NodeURI
    capabilities: Mapping[str, Any]
    trust_level: TrustLevel = TrustLevel.LOCAL
    cert_chain: str | None = None
    bearer: str | None = None
    compression: bool = True
    encryption: bool = False
    max_payload: int = MAX_PAYLOAD

    def __post_init__(self) -> None:
        # Catch our own misconfiguration here rather than have every peer call it a violation.
        if not self.address.matches(self.capabilities):
            raise ValidationError("node_address", "fingerprint does not match capabilities")
        if self.trust_level is not TrustLevel.LOCAL and self.cert_chain is None:
            raise ValidationError("cert_chain", f"trust_level {self.trust_level} needs one")

    def response(
        self,
        peer: Hello,
        status: int,
        trust: TrustLevel,
        x25519: X25519PrivateKey | None,
        reason: str | None = None,
    ) -> CapabilityResponse:
        """Our CAPABILITY_RESPONSE to ``peer``'s hello, signing its nonce with our address."""
        return CapabilityResponse(
            status=status,
            accepted_version=AMCP_VERSION,
            signature=self.identity.sign(possession_message(peer.nonce, self.address)),
            trust_level=trust,
            max_payload=self.max_payload,
            compression=COMPRESSION_LZ4 if self.compression else NONE,
            encryption=ENCRYPTION_AES_GCM if self.encryption else NONE,
            x25519=x25519_public(x25519) if x25519 is not None else None,
            reason=reason,
        )

    def hello(self, nonce: bytes) -> Hello:
        return Hello(
            amcp_version=AMCP_VERSION,
            node_type=self.address.node_type,
            node_address=self.address,
            public_key=self.identity.public_key,
            trust_level=self.trust_level,
            capabilities=self.capabilities,
            nonce=nonce,
            cert_chain=self.cert_chain,
            bearer=self.bearer,
        )


def x25519_public(key: X25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@dataclass(frozen=True, slots=True, eq=False)
class Negotiated:
    """The outcome of the handshake, for the driver to configure the frame codec with.

    ``x25519_private`` and ``peer_x25519`` are set only when encryption was agreed; the
    codec derives the AES-256-GCM key from them (HKDF-SHA256, PROFILE §1).
    """

    peer: Hello
    granted_trust: TrustLevel  # what we granted the peer
    trust_granted_to_us: TrustLevel  # what the peer's response says it granted us
    accepted_version: str
    compression: bool
    encryption: bool
    max_payload: int
    peer_x25519: bytes | None = None
    x25519_private: X25519PrivateKey | None = field(default=None, repr=False)


def negotiate(
    local: LocalNode,
    peer: Hello,
    granted: TrustLevel,
    resp: CapabilityResponse,
    x25519: X25519PrivateKey | None,
) -> Negotiated:
    """A feature is on only when both sides offered it (encryption: both sent an X25519 key)."""
    encryption = (
        x25519 is not None and resp.encryption == ENCRYPTION_AES_GCM and resp.x25519 is not None
    )
    return Negotiated(
        peer=peer,
        granted_trust=granted,
        trust_granted_to_us=resp.trust_level,
        accepted_version=resp.accepted_version,
        compression=local.compression and resp.compression == COMPRESSION_LZ4,
        encryption=encryption,
        max_payload=min(local.max_payload, resp.max_payload),
        peer_x25519=resp.x25519 if encryption else None,
        x25519_private=x25519 if encryption else None,
    )
