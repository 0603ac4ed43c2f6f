"""FrameCipher: the key schedule and nonce layout docs/wire.md promises, and its refusals."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from amcp.errors import RemoteProtocolError
from amcp.wire import FrameCipher, handshake_salt
from amcp.wire.crypto import DEFAULT_INFO

SALT = handshake_salt(b"n" * 16, b"m" * 16)


def keys() -> tuple[X25519PrivateKey, X25519PrivateKey]:
    return X25519PrivateKey.generate(), X25519PrivateKey.generate()


def test_key_schedule_and_nonce_layout_are_as_documented() -> None:
    a, b = keys()
    cipher = FrameCipher(a, b.public_key(), salt=SALT)
    secret = a.exchange(b.public_key())
    info = DEFAULT_INFO + a.public_key().public_bytes_raw()
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=SALT, info=info).derive(secret)
    nonce = bytes(4) + (0x0102030405060708).to_bytes(8, "big")
    expected = AESGCM(key).encrypt(nonce, b"payload", b"aad")
    assert cipher.encrypt(0x0102030405060708, b"aad", b"payload") == expected


def test_peers_interoperate_and_directions_use_different_keys() -> None:
    a, b = keys()
    alice = FrameCipher(a, b.public_key(), salt=SALT)
    bob = FrameCipher(b, a.public_key().public_bytes_raw(), salt=SALT)
    sealed = alice.encrypt(1, b"h", b"hello")
    assert bob.decrypt(1, b"h", sealed) == b"hello"
    # Same seq from the other direction must not be the same keystream.
    assert bob.encrypt(1, b"h", b"hello") != sealed
    with pytest.raises(RemoteProtocolError):
        alice.decrypt(1, b"h", sealed)


@pytest.mark.parametrize(
    ("seq", "aad"), [(2, b"h"), (1, b"H"), (1, None)], ids=["seq", "aad", "no-aad"]
)
def test_wrong_nonce_or_aad_fails_authentication(seq: int, aad: bytes | None) -> None:
    a, b = keys()
    sealed = FrameCipher(a, b.public_key(), salt=SALT).encrypt(1, b"h", b"data")
    with pytest.raises(RemoteProtocolError) as info:
        FrameCipher(b, a.public_key(), salt=SALT).decrypt(seq, aad, sealed)
    assert getattr(info.value, "ref_seq", None) == seq


def test_salt_separates_connections() -> None:
    a, b = keys()
    sealed = FrameCipher(a, b.public_key(), salt=SALT).encrypt(1, None, b"data")
    with pytest.raises(RemoteProtocolError):
        FrameCipher(b, a.public_key(), salt=b"another connection").decrypt(1, None, sealed)


def test_handshake_salt_is_symmetric() -> None:
    assert handshake_salt(b"x", b"y") == handshake_salt(b"y", b"x") == b"xy"


@pytest.mark.parametrize("peer", [bytes(32), b"\x01" + bytes(31), b"short"], ids=str)
def test_unusable_peer_keys_are_violations(peer: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        FrameCipher(X25519PrivateKey.generate(), peer, salt=SALT)


def test_reflected_key_is_refused() -> None:
    a = X25519PrivateKey.generate()
    with pytest.raises(RemoteProtocolError):
        FrameCipher(a, a.public_key(), salt=SALT)
