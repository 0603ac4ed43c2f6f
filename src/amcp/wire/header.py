"""The 50-byte frame header (PROFILE §1) and its CRC-32C.

The codec judges headers with :func:`header_violation` and checks frames with
:func:`frame_checksum`; :func:`parse_header` and :func:`pack_raw_frame` are the readable,
unvalidated forms for tools and tests (the conformance kit needs to build frames that are
wrong on purpose).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c

from amcp.errors import Status
from amcp.wire.constants import HEADER_SIZE, MAGIC, RESERVED_FLAG_MASK, VERSION_1_0
from amcp.wire.errors import FrameViolationError

# MAGIC, VERSION, MSG_TYPE, FLAGS, PAYLOAD_LENGTH, SEQUENCE_NUMBER, SESSION_ID, CAUSAL_CLOCK,
# CHECKSUM — big-endian, no padding.
HEADER = struct.Struct(">4sHHHIQ16sQI")
# Bytes 0..45: what the CRC covers before the payload, and the AES-GCM associated data.
HEADER_PREFIX = struct.Struct(">4sHHHIQ16sQ")
CHECKSUM = struct.Struct(">I")
CHECKSUM_OFFSET = HEADER_PREFIX.size
SUPPORTED_MAJOR = VERSION_1_0 >> 8

assert HEADER.size == HEADER_SIZE
assert CHECKSUM_OFFSET == 46

_crc_value = google_crc32c.value
_crc_extend = google_crc32c.extend


# Below this, one CRC call over a concatenated copy beats two calls (measured); above it
# the copy costs more than the second call.
CONCAT_BELOW = 16 * 1024


def frame_checksum(prefix: bytes, payload: bytes) -> int:
    """CRC-32C over header bytes 0..45 followed by the on-wire payload."""
    crc: int = (
        _crc_value(prefix + payload)
        if len(payload) < CONCAT_BELOW
        else _crc_extend(_crc_value(prefix), payload)
    )
    return crc


def crc32c(data: bytes) -> int:
    """Plain CRC-32C (Castagnoli); ``crc32c(b"123456789") == 0xE3069283``."""
    return int(_crc_value(data))


@dataclass(frozen=True, slots=True)
class Header:
    """A header exactly as it sits on the wire, not yet validated."""

    magic: bytes
    version: int
    msg_type: int
    flags: int
    payload_length: int
    seq: int
    session_id: bytes
    clock: int
    checksum: int


def parse_header(data: bytes) -> Header:
    """Unpack the first 50 bytes of ``data`` without judging them."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"a header is {HEADER_SIZE} bytes, got {len(data)}")
    return Header(*HEADER.unpack_from(data, 0))


def header_violation(
    magic: bytes, version: int, flags: int, length: int, *, seq: int, max_payload: int
) -> FrameViolationError | None:
    """The violation a header commits on its own, before any payload byte is read.

    These are the checks that decide framing itself: without the right magic and major
    version the length field means nothing, reserved bits may change the layout, and an
    oversize length must be refused before anything is allocated for it.
    """
    if magic != MAGIC:
        # The bytes are not a header, so its "seq" is noise: no ref_seq.
        return FrameViolationError(f"bad magic {magic!r}")
    if version >> 8 != SUPPORTED_MAJOR:
        return FrameViolationError(
            f"unsupported major version {version >> 8}",
            status=Status.VERSION_NOT_SUPPORTED,
            ref_seq=seq,
        )
    if flags & RESERVED_FLAG_MASK:
        return FrameViolationError(f"reserved flag bits set: {flags:#06x}", ref_seq=seq)
    if length > max_payload:
        return FrameViolationError(
            f"PAYLOAD_LENGTH {length} exceeds the maximum {max_payload}", ref_seq=seq
        )
    return None


def pack_raw_frame(
    *,
    msg_type: int,
    payload: bytes = b"",
    seq: int = 1,
    flags: int = 0,
    session_id: bytes = bytes(16),
    clock: int = 0,
    version: int = VERSION_1_0,
    magic: bytes = MAGIC,
    payload_length: int | None = None,
    checksum: int | None = None,
) -> bytes:
    """One wire frame with every field under the caller's control, right or wrong.

    ``payload`` goes on the wire as given (no MessagePack, compression or encryption);
    ``payload_length`` and ``checksum`` default to the correct values.
    """
    prefix = HEADER_PREFIX.pack(
        magic,
        version,
        msg_type,
        flags,
        len(payload) if payload_length is None else payload_length,
        seq,
        session_id,
        clock,
    )
    crc = frame_checksum(prefix, payload) if checksum is None else checksum
    return prefix + CHECKSUM.pack(crc) + payload
