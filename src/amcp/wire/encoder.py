"""Frame → wire bytes: MessagePack, then LZ4, then AES-GCM, then the header and CRC.

Fragmentation is decided on the MessagePack bytes before compression, so every wire frame
carries at most ``max_payload`` bytes *after* it is decrypted and inflated. That one rule
lets the receiver bound each inflate by its own ``max_payload`` (see docs/wire.md).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import google_crc32c
import msgpack

from amcp.errors import LocalProtocolError, Status
from amcp.wire.compress import maybe_compress
from amcp.wire.constants import (
    COMPRESS_THRESHOLD,
    MAGIC,
    MAX_PAYLOAD,
    RESERVED_FLAG_MASK,
    VERSION_1_0,
    Flag,
    MsgType,
)
from amcp.wire.crypto import TAG_SIZE, FrameCipher
from amcp.wire.frame import ZERO_SESSION, Frame
from amcp.wire.header import CHECKSUM, HEADER_PREFIX, SUPPORTED_MAJOR, frame_checksum

# Below this a fragment could not make progress once the GCM tag is taken off; real
# deployments negotiate megabytes, tests use a few hundred bytes.
MIN_MAX_PAYLOAD = 64
# The encoder owns these bits; whatever the caller's Frame carries for them is recomputed.
TRANSPORT_FLAGS = Flag.ENCRYPTED | Flag.COMPRESSED | Flag.FRAGMENTED | Flag.FINAL_FRAGMENT
_U64 = 1 << 64
MAX_REASON = 256

# Plain ints on the hot path: IntFlag arithmetic costs a microsecond per operation.
_CALLER_FLAGS = 0xFFFF & ~int(TRANSPORT_FLAGS)
_NOT_CALLER = 0xFFFF & ~int(Flag.IDEMPOTENT | Flag.REQUIRES_ACK)
_COMPRESSED = int(Flag.COMPRESSED)
_ENCRYPTED = int(Flag.ENCRYPTED)
_FRAGMENTED = int(Flag.FRAGMENTED)
_FINAL = int(Flag.FINAL_FRAGMENT)
# The flags the fast path accepts (caller bits only), as plain ints: one dict lookup tells
# them apart from everything else and converts them, where int(Flag) is a type call.
_PLAIN_CALLER_FLAGS: dict[int, int] = {
    f: f for f in (0, int(Flag.IDEMPOTENT), int(Flag.REQUIRES_ACK), _NOT_CALLER ^ 0xFFFF)
}

_pack_prefix = HEADER_PREFIX.pack
_pack_crc = CHECKSUM.pack
_packb = msgpack.packb
_checksum = frame_checksum
_crc_value = google_crc32c.value
_local = threading.local()


@dataclass(frozen=True, slots=True)
class Encoded:
    """The wire bytes of one logical message and how many SEQUENCE_NUMBERs it used.

    Fragments take ``first_seq, first_seq + 1, …``; the sender's next frame is ``next_seq``.
    """

    data: bytes
    first_seq: int
    frames: int

    @property
    def next_seq(self) -> int:
        return self.first_seq + self.frames


def check_max_payload(max_payload: int) -> None:
    if not MIN_MAX_PAYLOAD <= max_payload <= MAX_PAYLOAD:
        raise ValueError(f"max_payload must be in [{MIN_MAX_PAYLOAD}, {MAX_PAYLOAD}]")


def _packer() -> Any:
    # msgpack.packb builds a Packer per call, a third of the encode cost at small sizes. A
    # Packer has an internal buffer, so each thread gets its own.
    packer = _local.__dict__.get("packer")
    if packer is None:
        packer = _local.packer = msgpack.Packer(use_bin_type=True)
    return packer


def pack_payload(payload: Mapping[str, Any]) -> bytes:
    """MessagePack bytes of a payload map; the empty map travels as zero bytes."""
    if not payload:
        return b""
    try:
        packed: bytes = _packer().pack(payload if type(payload) is dict else dict(payload))
    except (TypeError, ValueError, OverflowError) as exc:
        raise LocalProtocolError(f"payload cannot be encoded as MessagePack: {exc}") from None
    return packed


def fragments_needed(
    payload_size: int, *, encrypted: bool = False, max_payload: int = MAX_PAYLOAD
) -> int:
    """How many wire frames a message whose MessagePack payload has ``payload_size`` bytes takes."""
    room = max_payload - TAG_SIZE if encrypted else max_payload
    return max(1, -(-payload_size // room))


def _wire_frame(
    frame: Frame, flags: int, seq: int, body: bytes, cipher: FrameCipher | None
) -> bytes:
    """One wire frame carrying ``body`` (already compressed if it should be)."""
    if cipher is None:
        prefix = _pack_prefix(
            MAGIC,
            frame.version,
            frame.msg_type,
            flags,
            len(body),
            seq,
            frame.session_id,
            frame.clock,
        )
    else:
        flags |= _ENCRYPTED
        prefix = _pack_prefix(
            MAGIC,
            frame.version,
            frame.msg_type,
            flags,
            len(body) + TAG_SIZE,
            seq,
            frame.session_id,
            frame.clock,
        )
        # The header prefix is the AAD: flipping a flag, the type or the seq breaks the tag.
        body = cipher.encrypt(seq, prefix, body)
    return b"".join((prefix, _pack_crc(_checksum(prefix, body)), body))


def _encode(
    frame: Frame,
    cipher: FrameCipher | None,
    compress: bool,
    max_payload: int,
    *,
    body: bytes | None = None,
) -> tuple[bytes, int]:
    """Wire bytes and frame count; shared by encode_frame and encode_message."""
    if max_payload != MAX_PAYLOAD:
        check_max_payload(max_payload)
    flags = int(frame.flags)
    if flags & RESERVED_FLAG_MASK:
        raise LocalProtocolError(f"reserved flag bits set: {flags:#06x}")
    if frame.version >> 8 != SUPPORTED_MAJOR:
        raise LocalProtocolError(f"cannot send major version {frame.version >> 8}")
    flags &= _CALLER_FLAGS
    seq = frame.seq
    if body is None:
        body = pack_payload(frame.payload)
    room = max_payload - TAG_SIZE if cipher is not None else max_payload
    if len(body) <= room:
        if compress and len(body) > COMPRESS_THRESHOLD:
            body, flags = _compressed(body, flags)
        return _wire_frame(frame, flags, seq, body, cipher), 1
    count = -(-len(body) // room)
    if seq + count > _U64:
        raise LocalProtocolError("fragments would overflow SEQUENCE_NUMBER")
    view = memoryview(body)
    parts = []
    for index in range(count):
        chunk = bytes(view[index * room : (index + 1) * room])
        chunk_flags = flags | _FRAGMENTED
        if index == count - 1:
            chunk_flags |= _FINAL
        if compress:
            chunk, chunk_flags = _compressed(chunk, chunk_flags)
        parts.append(_wire_frame(frame, chunk_flags, seq + index, chunk, cipher))
    return b"".join(parts), count


def _compressed(body: bytes, flags: int) -> tuple[bytes, int]:
    packed = maybe_compress(body)
    return (body, flags) if packed is None else (packed, flags | _COMPRESSED)


def encode_message(
    frame: Frame,
    *,
    cipher: FrameCipher | None = None,
    compress: bool = True,
    max_payload: int = MAX_PAYLOAD,
) -> Encoded:
    """Encode one logical message, fragmenting it when its payload exceeds ``max_payload``."""
    data, count = _encode(frame, cipher, compress, max_payload)
    return Encoded(data, frame.seq, count)


def encode_frame(
    frame: Frame,
    *,
    cipher: FrameCipher | None = None,
    compress: bool = True,
    max_payload: int = MAX_PAYLOAD,
) -> bytes:
    """Wire bytes of ``frame``: several concatenated frames when it had to be fragmented.

    A fragmented message uses SEQUENCE_NUMBERs ``frame.seq`` onwards; a sender that can
    produce payloads over ``max_payload`` should call :func:`encode_message` and continue
    from ``Encoded.next_seq``.
    """
    if cipher is None and max_payload == MAX_PAYLOAD:
        # Fast path for the common frame: small, plain, caller-only flags. Same bytes as
        # _encode would produce, minus four Python calls.
        flags = _PLAIN_CALLER_FLAGS.get(frame.flags)  # None: transport or reserved bits
        payload = frame.payload
        version = frame.version
        if flags is not None and version >> 8 == SUPPORTED_MAJOR and type(payload) is dict:
            try:
                body: bytes = _local.packer.pack(payload) if payload else b""
            except AttributeError:  # first use on this thread
                body = pack_payload(payload)
            except (TypeError, ValueError, OverflowError):
                body = pack_payload(payload)  # raises the LocalProtocolError
            if len(body) <= COMPRESS_THRESHOLD:
                prefix = _pack_prefix(
                    MAGIC,
                    version,
                    frame.msg_type,
                    flags,
                    len(body),
                    frame.seq,
                    frame.session_id,
                    frame.clock,
                )
                return prefix + _pack_crc(_crc_value(prefix + body)) + body
            return _encode(frame, cipher, compress, max_payload, body=body)[0]
    return _encode(frame, cipher, compress, max_payload)[0]


def encode_violation(
    reason: str,
    status: Status,
    ref_seq: int | None,
    seq: int,
    *,
    session_id: bytes = ZERO_SESSION,
    clock: int = 0,
    cipher: FrameCipher | None = None,
) -> bytes:
    """The one PROTOCOL_VIOLATION (0x00FF) frame a node sends before closing (PROFILE §2)."""
    # The reason may quote peer bytes; keep the reply small so it cannot amplify anything.
    payload: dict[str, Any] = {"status": int(status), "reason": reason[:MAX_REASON]}
    if ref_seq is not None:
        payload["ref_seq"] = ref_seq
    frame = Frame(
        MsgType.PROTOCOL_VIOLATION, payload, seq, session_id, clock, Flag.NONE, VERSION_1_0
    )
    return encode_frame(frame, cipher=cipher)
