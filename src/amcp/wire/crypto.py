"""AES-256-GCM frame encryption keyed by X25519 + HKDF-SHA256 (PROFILE §1).

Two decisions PROFILE leaves open, settled here and in docs/wire.md:

* **One key per direction.** X25519 gives both peers the same secret, and both peers number
  their frames from 1, so a single key would reuse (key, nonce) pairs across directions —
  fatal for GCM. Each direction's key is HKDF(secret, salt, info ‖ sender's public key).
* **A per-connection salt.** SEQUENCE_NUMBER restarts at 1 on every connection; if a node
  reuses its X25519 key across connections, only a fresh salt keeps nonces unique. Use
  :func:`handshake_salt` over the two hello nonces.
"""

from __future__ import annotations

import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from amcp.wire.errors import FrameViolationError

KEY_SIZE = 32  # AES-256
TAG_SIZE = 16  # GCM tag appended to every ciphertext; counted in PAYLOAD_LENGTH
DEFAULT_INFO = b"amcp/1.0 frame key"
# 96-bit nonce = 4 zero bytes ‖ SEQUENCE_NUMBER (u64 big-endian), PROFILE §1.
_NONCE = struct.Struct(">4xQ")


def handshake_salt(nonce_a: bytes, nonce_b: bytes) -> bytes:
    """The HKDF salt for one connection: both hello nonces, sorted so both peers agree."""
    low, high = sorted((bytes(nonce_a), bytes(nonce_b)))
    return low + high


def _public_bytes(key: X25519PublicKey) -> bytes:
    return key.public_bytes_raw()


class FrameCipher:
    """Encrypts what we send and decrypts what the peer sends, for one connection.

    ``encrypt``/``decrypt`` take the frame's SEQUENCE_NUMBER (the nonce) and the additional
    authenticated data; the codec passes header bytes 0..45 so a tampered header (type,
    flags, seq, session, clock) fails authentication even when its CRC was fixed up.
    """

    __slots__ = ("_recv", "_send", "own_public", "peer_public")

    def __init__(
        self,
        private_key: X25519PrivateKey,
        peer_public_key: X25519PublicKey | bytes,
        *,
        salt: bytes,
        info: bytes = DEFAULT_INFO,
    ) -> None:
        try:
            peer = (
                peer_public_key
                if isinstance(peer_public_key, X25519PublicKey)
                else X25519PublicKey.from_public_bytes(bytes(peer_public_key))
            )
            # cryptography refuses low-order points (all-zero shared secret) with ValueError.
            secret = private_key.exchange(peer)
        except ValueError as exc:
            raise FrameViolationError(f"unusable X25519 public key: {exc}") from exc
        self.own_public = _public_bytes(private_key.public_key())
        self.peer_public = _public_bytes(peer)
        if self.own_public == self.peer_public:
            # Reflected key: both directions would derive the same key → nonce reuse.
            raise FrameViolationError("peer X25519 key equals our own")
        self._send = AESGCM(_derive(secret, salt, info + self.own_public))
        self._recv = AESGCM(_derive(secret, salt, info + self.peer_public))

    def encrypt(self, seq: int, aad: bytes | None, data: bytes) -> bytes:
        """Ciphertext ‖ 16-byte tag of ``data`` sent as frame ``seq``."""
        return self._send.encrypt(_NONCE.pack(seq), data, aad)

    def decrypt(self, seq: int, aad: bytes | None, data: bytes) -> bytes:
        """Plaintext of the peer's frame ``seq``; a wrong key, nonce, AAD or tag is a violation."""
        try:
            return self._recv.decrypt(_NONCE.pack(seq), data, aad)
        except InvalidTag:
            raise FrameViolationError("frame failed authentication", ref_seq=seq) from None


def _derive(secret: bytes, salt: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_SIZE, salt=salt, info=info).derive(secret)
