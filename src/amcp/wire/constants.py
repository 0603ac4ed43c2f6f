"""Everything on the wire that is a number: message types, flags, header layout (PROFILE §1, §3)."""

from __future__ import annotations

from enum import IntEnum, IntFlag

MAGIC = b"AMCP"
VERSION_1_0 = 0x0100
HEADER_SIZE = 50
# PROFILE §1: a larger PAYLOAD_LENGTH is a violation decided from the header alone.
MAX_PAYLOAD = 10 * 1024 * 1024
# Reassembled fragmented messages are capped so a peer cannot make us buffer without bound.
DEFAULT_MAX_REASSEMBLY = 64 * 1024 * 1024
# Compression only pays for itself above this size (PROFILE §1).
COMPRESS_THRESHOLD = 1024


class MsgType(IntEnum):
    COLD_BOOT_REQUEST = 0x0001
    COLD_BOOT_RESPONSE = 0x0002
    MEMORY_READ = 0x0010
    MEMORY_READ_RESPONSE = 0x0011
    MEMORY_WRITE = 0x0012
    MEMORY_WRITE_ACK = 0x0013
    MEMORY_INVALIDATE = 0x0014
    SYNC_PUSH = 0x0020
    SYNC_PULL_REQUEST = 0x0021
    SYNC_PULL_RESPONSE = 0x0022
    SYNC_ACK = 0x0023
    QEF_SIGNAL = 0x0030
    QEF_ACK = 0x0031
    CAPABILITY_HELLO = 0x0040
    CAPABILITY_RESPONSE = 0x0041
    HEALTH_CHECK = 0x0050
    HEALTH_RESPONSE = 0x0051
    SESSION_BEGIN = 0x0060
    SESSION_END = 0x0061
    SESSION_END_ACK = 0x0062
    KNOWLEDGE_DISTILL = 0x0070
    ERROR = 0x00FE
    PROTOCOL_VIOLATION = 0x00FF


class Flag(IntFlag):
    NONE = 0
    ENCRYPTED = 1 << 0
    COMPRESSED = 1 << 1
    FRAGMENTED = 1 << 2
    FINAL_FRAGMENT = 1 << 3
    IDEMPOTENT = 1 << 4
    REQUIRES_ACK = 1 << 5


KNOWN_FLAGS = 0b0011_1111
RESERVED_FLAG_MASK = 0xFFFF & ~KNOWN_FLAGS
