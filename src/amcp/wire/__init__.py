"""amcp.wire — the sans-IO frame layer (L3): header codec, CRC-32C, MessagePack payloads,
LZ4, AES-256-GCM and fragmentation. No sockets, no asyncio: bytes in, Frames out."""

from __future__ import annotations

from amcp.wire.constants import (
    COMPRESS_THRESHOLD,
    DEFAULT_MAX_REASSEMBLY,
    HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD,
    VERSION_1_0,
    Flag,
    MsgType,
)
from amcp.wire.crypto import FrameCipher, handshake_salt
from amcp.wire.decoder import FrameDecoder, decode_payload
from amcp.wire.encoder import (
    Encoded,
    encode_frame,
    encode_message,
    encode_violation,
    fragments_needed,
    pack_payload,
)
from amcp.wire.errors import FrameViolationError
from amcp.wire.frame import ZERO_SESSION, Frame
from amcp.wire.header import Header, crc32c, pack_raw_frame, parse_header

__all__ = [
    "COMPRESS_THRESHOLD",
    "DEFAULT_MAX_REASSEMBLY",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_PAYLOAD",
    "VERSION_1_0",
    "ZERO_SESSION",
    "Encoded",
    "Flag",
    "Frame",
    "FrameCipher",
    "FrameDecoder",
    "FrameViolationError",
    "Header",
    "MsgType",
    "crc32c",
    "decode_payload",
    "encode_frame",
    "encode_message",
    "encode_violation",
    "fragments_needed",
    "handshake_salt",
    "pack_payload",
    "pack_raw_frame",
    "parse_header",
]
