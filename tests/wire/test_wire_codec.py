"""Table-driven codec tests, each case fed whole, byte by byte and with trailing bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack
import pytest
from wire_kit import FEED_MODES, cipher_pair, feed, noise, payload_text

from amcp.wire import (
    MAX_PAYLOAD,
    VERSION_1_0,
    Flag,
    Frame,
    FrameDecoder,
    MsgType,
    crc32c,
    encode_frame,
    encode_message,
    pack_raw_frame,
    parse_header,
)
from amcp.wire.header import CHECKSUM_OFFSET

SENDER, RECEIVER = cipher_pair(salt=b"fixed test salt")
SID = bytes(range(16))


@dataclass(frozen=True)
class Case:
    id: str
    wire: bytes
    expected: list[Frame]
    decoder: dict[str, Any] = field(default_factory=dict)
    dropped: int = 0


def plain(msg_type: MsgType, payload: dict[str, Any], seq: int, **kw: Any) -> Frame:
    return Frame(msg_type, payload, seq, SID, kw.pop("clock", 99 << 16), **kw)


def corrupt_crc(wire: bytes) -> bytes:
    bad = bytearray(wire)
    bad[CHECKSUM_OFFSET] ^= 0xFF
    return bytes(bad)


HEALTH = plain(MsgType.HEALTH_CHECK, {}, 1)
WRITE = plain(
    MsgType.MEMORY_WRITE,
    {"amf": {"core": {"subject": "s", "confidence": 0.5}, "blob": b"\x00\x01"}},
    2,
    flags=Flag.REQUIRES_ACK | Flag.IDEMPOTENT,
)
BIG_TEXT = plain(MsgType.MEMORY_READ_RESPONSE, payload_text(3000), 3)
BIG_NOISE = plain(MsgType.SYNC_PUSH, {"blob": noise(3000)}, 4)
MINOR = Frame(MsgType.HEALTH_RESPONSE, {"status": 200}, 5, SID, 0, Flag.NONE, VERSION_1_0 | 0x07)
HUGE = plain(MsgType.SYNC_PUSH, {"changes": [payload_text(500)] * 12, "n": noise(900)}, 10)


def with_flags(frame: Frame, flags: Flag) -> Frame:
    return Frame(
        frame.msg_type,
        frame.payload,
        frame.seq,
        frame.session_id,
        frame.clock,
        flags,
        frame.version,
    )


CASES = [
    Case("empty-payload", encode_frame(HEALTH), [HEALTH]),
    Case("map-payload-with-flags", encode_frame(WRITE), [WRITE]),
    Case("two-frames", encode_frame(HEALTH) + encode_frame(WRITE), [HEALTH, WRITE]),
    Case("minor-version-accepted", encode_frame(MINOR), [MINOR]),
    Case("compressed", encode_frame(BIG_TEXT), [with_flags(BIG_TEXT, Flag.COMPRESSED)]),
    Case("incompressible-sent-plain", encode_frame(BIG_NOISE), [BIG_NOISE]),
    Case("compression-off", encode_frame(BIG_TEXT, compress=False), [BIG_TEXT]),
    Case(
        "encrypted",
        encode_frame(WRITE, cipher=SENDER),
        [with_flags(WRITE, WRITE.flags | Flag.ENCRYPTED)],
        {"cipher": RECEIVER},
    ),
    Case(
        "encrypted-compressed",
        encode_frame(BIG_TEXT, cipher=SENDER),
        [with_flags(BIG_TEXT, Flag.ENCRYPTED | Flag.COMPRESSED)],
        {"cipher": RECEIVER},
    ),
    Case(
        "fragmented",
        encode_frame(HUGE, max_payload=1024) + encode_frame(HEALTH),
        [with_flags(HUGE, Flag.FRAGMENTED), HEALTH],
        {"max_payload": 1024},
    ),
    Case(
        "fragmented-compressed-encrypted",
        encode_frame(HUGE, max_payload=4096, cipher=SENDER),
        [with_flags(HUGE, Flag.FRAGMENTED | Flag.COMPRESSED | Flag.ENCRYPTED)],
        {"max_payload": 4096, "cipher": RECEIVER},
    ),
    Case(
        "single-fragment-message",
        pack_raw_frame(
            msg_type=MsgType.QEF_SIGNAL,
            payload=msgpack.packb({"a": 1}),
            seq=8,
            flags=Flag.FRAGMENTED | Flag.FINAL_FRAGMENT,
        ),
        [Frame(MsgType.QEF_SIGNAL, {"a": 1}, 8, flags=Flag.FRAGMENTED | Flag.FINAL_FRAGMENT)],
    ),
    Case(
        "bad-checksum-dropped-stream-continues",
        corrupt_crc(encode_frame(WRITE)) + encode_frame(HEALTH),
        [HEALTH],
        dropped=1,
    ),
    Case(
        "bad-checksum-in-payload-bytes",
        encode_frame(WRITE)[:-1] + b"\x00" + encode_frame(HEALTH),
        [HEALTH],
        dropped=1,
    ),
]


@pytest.mark.parametrize("mode", FEED_MODES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_codec_table(case: Case, mode: str) -> None:
    decoder = FrameDecoder(**case.decoder)
    assert feed(decoder, case.wire, mode) == case.expected
    assert decoder.dropped_bad_checksum == case.dropped
    assert decoder.reassembly_buffered == 0


def test_crc32c_vector() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_header_layout_is_the_profile_table() -> None:
    frame = Frame(
        MsgType.MEMORY_READ,
        {"ids": ["K-1"]},
        0x0102030405060708,
        SID,
        0x1122334455667788,
        Flag.REQUIRES_ACK,
    )
    wire = encode_frame(frame)
    payload = msgpack.packb({"ids": ["K-1"]}, use_bin_type=True)
    assert len(wire) == 50 + len(payload)
    assert wire[0:4] == b"AMCP"
    assert wire[4:6] == b"\x01\x00"
    assert wire[6:8] == b"\x00\x10"
    assert wire[8:10] == b"\x00\x20"
    assert wire[10:14] == len(payload).to_bytes(4, "big")
    assert wire[14:22] == bytes.fromhex("0102030405060708")
    assert wire[22:38] == SID
    assert wire[38:46] == bytes.fromhex("1122334455667788")
    assert wire[46:50] == crc32c(wire[:46] + payload).to_bytes(4, "big")
    assert wire[50:] == payload
    header = parse_header(wire)
    assert (header.magic, header.msg_type, header.payload_length) == (b"AMCP", 0x10, len(payload))


def test_empty_map_travels_as_zero_bytes() -> None:
    assert len(encode_frame(HEALTH)) == 50
    assert FrameDecoder().feed(pack_raw_frame(msg_type=MsgType.HEALTH_CHECK))[0].payload == {}


def test_transport_flags_on_input_frame_are_recomputed() -> None:
    lying = with_flags(WRITE, Flag.ENCRYPTED | Flag.COMPRESSED | Flag.FRAGMENTED | Flag.IDEMPOTENT)
    [decoded] = FrameDecoder().feed(encode_frame(lying))
    assert decoded.flags == Flag.IDEMPOTENT


def test_compression_threshold_is_strictly_above_1_kib() -> None:
    for size, compressed in ((1024, False), (1025, True)):
        body = msgpack.packb({"t": "a" * size}, use_bin_type=True)
        pad = size - len(body)
        frame = plain(MsgType.MEMORY_WRITE, {"t": "a" * (size + pad)}, 1)
        assert len(msgpack.packb(frame.payload, use_bin_type=True)) == size
        flags = parse_header(encode_frame(frame)).flags
        assert bool(flags & Flag.COMPRESSED) is compressed


def test_cipher_can_be_set_after_the_hello() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(encode_frame(HEALTH)) == [HEALTH]
    decoder.cipher = RECEIVER
    [frame] = decoder.feed(encode_frame(WRITE, cipher=SENDER))
    assert frame.payload == WRITE.payload
    assert frame.flags & Flag.ENCRYPTED


def test_plain_frames_still_decode_with_a_cipher_set() -> None:
    # Whether plaintext is acceptable after the hello is the session's call; flags tell it.
    [frame] = FrameDecoder(cipher=RECEIVER).feed(encode_frame(HEALTH))
    assert not frame.flags & Flag.ENCRYPTED


def test_encode_message_reports_fragments_and_next_seq() -> None:
    single = encode_message(WRITE)
    assert (single.frames, single.next_seq) == (1, WRITE.seq + 1)
    encoded = encode_message(HUGE, max_payload=1024)
    assert encoded.frames > 1
    assert encoded.next_seq == HUGE.seq + encoded.frames
    seqs, offset = [], 0
    while offset < len(encoded.data):
        header = parse_header(encoded.data[offset:])
        seqs.append(header.seq)
        last = header.flags
        assert header.flags & Flag.FRAGMENTED
        assert header.payload_length <= 1024
        offset += 50 + header.payload_length
    assert seqs == list(range(HUGE.seq, encoded.next_seq))
    assert last & Flag.FINAL_FRAGMENT


def test_fragments_needed_matches_the_encoder() -> None:
    from amcp.wire import fragments_needed, pack_payload

    size = len(pack_payload(HUGE.payload))
    for cipher in (None, SENDER):
        got = encode_message(HUGE, max_payload=1024, cipher=cipher, compress=False).frames
        assert got == fragments_needed(size, encrypted=cipher is not None, max_payload=1024)


def test_default_max_payload_is_the_profile_limit() -> None:
    assert MAX_PAYLOAD == 10_485_760
    assert FrameDecoder().max_payload == MAX_PAYLOAD


def test_decoded_frames_are_genuine_frozen_frames() -> None:
    import dataclasses

    [frame] = FrameDecoder().feed(encode_frame(WRITE))
    assert type(frame) is Frame
    assert frame == WRITE
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.seq = 3  # type: ignore[misc]
    assert dataclasses.replace(frame, seq=3).seq == 3
