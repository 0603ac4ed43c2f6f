"""Shared helpers for the frame-layer tests: cipher pairs, feeding modes, payload makers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from amcp.wire import Frame, FrameCipher, FrameDecoder, handshake_salt

FEED_MODES = ("whole", "bytewise", "trailing")
# The start of a next frame: a decoder must keep it buffered and not judge it yet.
TRAILING = b"AMC"


def cipher_pair(salt: bytes | None = None) -> tuple[FrameCipher, FrameCipher]:
    """(sender's cipher, receiver's cipher) for one connection."""
    a, b = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    salt = handshake_salt(os.urandom(16), os.urandom(16)) if salt is None else salt
    return FrameCipher(a, b.public_key(), salt=salt), FrameCipher(b, a.public_key(), salt=salt)


def feed(decoder: FrameDecoder, data: bytes, mode: str) -> list[Frame]:
    """Feed ``data`` the way ``mode`` says and collect every frame that comes out."""
    out: list[Frame] = []
    if mode == "whole":
        out += decoder.feed(data)
    elif mode == "bytewise":
        for i in range(len(data)):
            out += decoder.feed(data[i : i + 1])
    elif mode == "trailing":
        out += decoder.feed(data + TRAILING)
        assert decoder.buffered == len(TRAILING)
    else:  # pragma: no cover - a typo in a parametrisation
        raise ValueError(mode)
    return out


def feed_chunks(decoder: FrameDecoder, data: bytes, cuts: Iterable[int]) -> list[Frame]:
    """Feed ``data`` split at the given offsets."""
    out: list[Frame] = []
    start = 0
    for cut in sorted(set(cuts)):
        if 0 < cut < len(data):
            out += decoder.feed(data[start:cut])
            start = cut
    out += decoder.feed(data[start:])
    return out


def noise(size: int, seed: int = 7) -> bytes:
    """Deterministic incompressible bytes."""
    import random

    return random.Random(seed).randbytes(size)


DecoderFactory = Callable[[], FrameDecoder]


def payload_text(size: int) -> dict[str, Any]:
    """A compressible payload of roughly ``size`` bytes."""
    return {"text": "remember the milk " * (size // 18 + 1)}
