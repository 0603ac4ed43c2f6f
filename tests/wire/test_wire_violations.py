"""Every PROFILE §2 trigger the frame layer owns raises RemoteProtocolError with its status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lz4.frame
import msgpack
import pytest
from wire_kit import FEED_MODES, cipher_pair, feed, payload_text

from amcp.errors import LocalProtocolError, RemoteProtocolError, Status
from amcp.wire import (
    HEADER_SIZE,
    MAX_PAYLOAD,
    Flag,
    Frame,
    FrameDecoder,
    FrameViolationError,
    MsgType,
    encode_frame,
    encode_violation,
    pack_raw_frame,
)
from amcp.wire.header import CHECKSUM, CHECKSUM_OFFSET, frame_checksum

SENDER, RECEIVER = cipher_pair(salt=b"violations")
_, STRANGER = cipher_pair(salt=b"violations")
PACK = msgpack.Packer(use_bin_type=True).pack
C = Flag.COMPRESSED
F = Flag.FRAGMENTED
FF = Flag.FRAGMENTED | Flag.FINAL_FRAGMENT


def raw(seq: int = 5, **kw: Any) -> bytes:
    kw.setdefault("msg_type", MsgType.MEMORY_READ)
    return pack_raw_frame(seq=seq, **kw)


def refix_crc(wire: bytes) -> bytes:
    """Recompute the CRC after tampering, as an attacker who knows CRC-32C would."""
    head = wire[:CHECKSUM_OFFSET]
    payload = wire[HEADER_SIZE:]
    return head + CHECKSUM.pack(frame_checksum(head, payload)) + payload


def flip_header_flag(wire: bytes, flag: Flag) -> bytes:
    flags = int.from_bytes(wire[8:10], "big") ^ int(flag)
    return refix_crc(wire[:8] + flags.to_bytes(2, "big") + wire[10:])


@dataclass(frozen=True)
class Bad:
    id: str
    wire: bytes
    ref_seq: int | None = 5
    status: Status = Status.PROTOCOL_ERROR
    decoder: dict[str, Any] = field(default_factory=dict)


BOMB = lz4.frame.compress(bytes(MAX_PAYLOAD + 1))
BAD = [
    Bad("bad-magic-zeros", raw(magic=b"\x00\x00\x00\x00"), None),
    Bad("bad-magic-lowercase", raw(magic=b"amcp"), None),
    Bad("major-version-2", raw(version=0x0200), status=Status.VERSION_NOT_SUPPORTED),
    Bad("major-version-0", raw(version=0x0001), status=Status.VERSION_NOT_SUPPORTED),
    Bad("reserved-flag-bit-6", raw(flags=1 << 6)),
    Bad("reserved-flag-bit-15", raw(flags=1 << 15)),
    Bad("oversize-length", raw(payload_length=MAX_PAYLOAD + 1)),
    Bad(
        "oversize-for-this-decoder",
        raw(payload=PACK({"x": "y" * 300})),
        decoder={"max_payload": 256},
    ),
    Bad("unknown-msg-type", raw(msg_type=0x0099, payload=PACK({}))),
    Bad("unknown-msg-type-0", raw(msg_type=0)),
    Bad("undecodable-payload", raw(payload=b"\xc1")),
    Bad("truncated-msgpack", raw(payload=PACK({"a": "bcdef"})[:-2])),
    Bad("payload-not-a-map", raw(payload=PACK([1, 2, 3]))),
    Bad("payload-a-string", raw(payload=PACK("hello"))),
    Bad("payload-map-int-key", raw(payload=PACK({1: 2}))),
    Bad("payload-map-bytes-key", raw(payload=PACK({b"k": 2}))),
    Bad("payload-extra-data", raw(payload=PACK({"a": 1}) + b"\x00")),
    Bad("payload-bad-utf8", raw(payload=b"\x81\xa1a\xa2\xff\xfe")),
    Bad(
        "encrypted-not-negotiated", encode_frame(Frame(MsgType.HEALTH_CHECK, {}, 5), cipher=SENDER)
    ),
    Bad(
        "compressed-not-negotiated",
        encode_frame(Frame(MsgType.MEMORY_WRITE, payload_text(4000), 5)),
        decoder={"accept_compression": False},
    ),
    Bad("compressed-garbage", raw(flags=C, payload=b"not lz4 at all")),
    Bad("compressed-truncated", raw(flags=C, payload=lz4.frame.compress(b"a" * 5000)[:-6])),
    Bad("compressed-trailing-bytes", raw(flags=C, payload=lz4.frame.compress(b"a" * 5000) + b"x")),
    Bad("decompression-bomb", raw(flags=C, payload=BOMB)),
    Bad(
        "decompression-past-decoder-max",
        raw(flags=C, payload=lz4.frame.compress(PACK({"t": "a" * 5000}))),
        decoder={"max_payload": 4096},
    ),
    Bad(
        "decryption-wrong-key",
        encode_frame(Frame(MsgType.HEALTH_CHECK, {}, 5), cipher=SENDER),
        decoder={"cipher": STRANGER},
    ),
    Bad(
        "ciphertext-tampered-crc-fixed",
        refix_crc(
            encode_frame(Frame(MsgType.HEALTH_CHECK, {"a": 1}, 5), cipher=SENDER)[:-1] + b"!"
        ),
        decoder={"cipher": RECEIVER},
    ),
    Bad(
        "header-flag-flipped-crc-fixed",
        flip_header_flag(
            encode_frame(Frame(MsgType.HEALTH_CHECK, {}, 5), cipher=SENDER), Flag.REQUIRES_ACK
        ),
        decoder={"cipher": RECEIVER},
    ),
    Bad("final-without-fragmented", raw(flags=Flag.FINAL_FRAGMENT, payload=PACK({}))),
    Bad(
        "plain-frame-inside-fragmented-message",
        raw(seq=4, flags=F, payload=b"\x81") + raw(seq=5, payload=PACK({})),
    ),
    Bad(
        "fragment-seq-gap",
        raw(seq=3, flags=F, payload=b"\x81") + raw(seq=5, flags=FF, payload=b"\xa1a\x01"),
    ),
    Bad(
        "fragment-type-changes",
        raw(seq=4, flags=F, payload=b"\x81")
        + raw(seq=5, msg_type=MsgType.MEMORY_WRITE, flags=FF, payload=b"\xa1a\x01"),
    ),
    Bad(
        "reassembly-cap",
        b"".join(raw(seq=5 + i, flags=F, payload=bytes(200)) for i in range(6)),
        decoder={"max_payload": 256, "max_reassembly": 1000},
    ),
    Bad(
        "reassembled-payload-not-a-map",
        raw(seq=4, flags=F, payload=b"\x92") + raw(seq=5, flags=FF, payload=b"\x01\x02"),
        ref_seq=4,
    ),
]


@pytest.mark.parametrize("mode", FEED_MODES)
@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.id)
def test_violation(bad: Bad, mode: str) -> None:
    decoder = FrameDecoder(**bad.decoder)
    with pytest.raises(RemoteProtocolError) as info:
        feed(decoder, bad.wire, mode)
    assert isinstance(info.value, FrameViolationError)
    assert info.value.status == bad.status
    assert info.value.ref_seq == bad.ref_seq
    assert decoder.failed


def test_four_gib_header_is_refused_from_the_header_alone() -> None:
    decoder = FrameDecoder()
    header = raw(payload_length=0xFFFFFFFF)
    assert len(header) == HEADER_SIZE
    for byte in header[:-1]:
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(RemoteProtocolError) as info:
        decoder.feed(header[-1:])
    assert info.value.status == Status.PROTOCOL_ERROR
    assert decoder.buffered == 0


def test_bad_magic_is_refused_at_the_first_wrong_byte() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"AM") == []
    with pytest.raises(RemoteProtocolError):
        decoder.feed(b"X")


def test_decoder_stays_failed_after_a_violation() -> None:
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError):
        decoder.feed(raw(version=0x0300))
    with pytest.raises(RemoteProtocolError) as again:
        decoder.feed(encode_frame(Frame(MsgType.HEALTH_CHECK)))
    assert again.value.status == Status.VERSION_NOT_SUPPORTED
    assert again.value.ref_seq == 5


def test_buffering_is_bounded_by_one_frame() -> None:
    decoder = FrameDecoder(max_payload=4096)
    header = raw(payload_length=4096)[:HEADER_SIZE]
    decoder.feed(header)
    for _ in range(4095):
        assert decoder.feed(b"\x00") == []
    assert decoder.buffered == HEADER_SIZE + 4095
    # The last byte completes the frame; its CRC is wrong, so it is dropped and nothing stays.
    assert decoder.feed(b"\x00") == []
    assert decoder.buffered == 0
    assert decoder.dropped_bad_checksum == 1


def test_bad_checksum_is_silent_in_every_position() -> None:
    good = encode_frame(Frame(MsgType.HEALTH_CHECK, {"a": 1}, 9))
    for offset in range(len(good)):
        if offset < 14 and offset not in (6, 7, 9):
            # Magic, version, reserved flag bits and length decide framing: a flip there is
            # a violation (or another length). MSG_TYPE and the low flag byte are covered.
            continue
        bad = bytearray(good)
        bad[offset] ^= 0x01
        decoder = FrameDecoder()
        assert decoder.feed(bytes(bad) + good) == [Frame(MsgType.HEALTH_CHECK, {"a": 1}, 9)]
        assert decoder.dropped_bad_checksum == 1


def test_lost_fragment_drops_the_message_silently_never_misassembles() -> None:
    big = Frame(MsgType.SYNC_PUSH, {"blob": bytes(range(256)) * 12}, 20)
    fragments = encode_frame(big, max_payload=1024, compress=False)
    after = encode_frame(Frame(MsgType.HEALTH_CHECK, {}, 30))
    # Corrupt the second fragment's CRC: the whole message goes, the next frame comes through.
    second = 50 + 1024
    bad = bytearray(fragments)
    bad[second + CHECKSUM_OFFSET] ^= 0xFF
    decoder = FrameDecoder(max_payload=1024)
    assert decoder.feed(bytes(bad) + after) == [Frame(MsgType.HEALTH_CHECK, {}, 30)]
    assert decoder.dropped_bad_checksum == 1
    assert decoder.dropped_fragments >= 2
    # Corrupt the first fragment: the rest of the message is skipped, not taken as a message.
    bad = bytearray(fragments)
    bad[CHECKSUM_OFFSET] ^= 0xFF
    decoder = FrameDecoder(max_payload=1024)
    assert decoder.feed(bytes(bad) + after) == [Frame(MsgType.HEALTH_CHECK, {}, 30)]


@pytest.mark.parametrize(
    ("frame", "kwargs"),
    [
        (Frame(MsgType.HEALTH_CHECK, flags=Flag(1 << 6)), {}),
        (Frame(MsgType.HEALTH_CHECK, version=0x0200), {}),
        (Frame(MsgType.HEALTH_CHECK, {"x": object()}), {}),
        (Frame(MsgType.HEALTH_CHECK, {"x": 2**64}), {}),
        (Frame(MsgType.SYNC_PUSH, {"b": bytes(600)}, seq=2**64 - 1), {"max_payload": 256}),
    ],
    ids=["reserved-flag", "major-version", "unencodable", "int-too-big", "seq-overflow"],
)
def test_encoder_refuses_what_it_must_not_send(frame: Frame, kwargs: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(frame, compress=False, **kwargs)


@pytest.mark.parametrize("max_payload", [0, 63, MAX_PAYLOAD + 1])
def test_max_payload_out_of_range(max_payload: int) -> None:
    with pytest.raises(ValueError, match="max_payload"):
        FrameDecoder(max_payload=max_payload)
    with pytest.raises(ValueError, match="max_payload"):
        encode_frame(Frame(MsgType.HEALTH_CHECK), max_payload=max_payload)


def test_violation_frame_round_trips() -> None:
    wire = encode_violation("bad magic", Status.PROTOCOL_ERROR, None, 3)
    [frame] = FrameDecoder().feed(wire)
    assert frame.msg_type is MsgType.PROTOCOL_VIOLATION
    assert frame.payload == {"status": 700, "reason": "bad magic"}
    wire = encode_violation("x" * 10_000, Status.VERSION_NOT_SUPPORTED, 17, 4)
    [frame] = FrameDecoder().feed(wire)
    assert frame.payload["status"] == 701
    assert frame.payload["ref_seq"] == 17
    assert len(frame.payload["reason"]) <= 256
    assert frame.seq == 4


def test_violation_from_exception_fields() -> None:
    with pytest.raises(FrameViolationError) as info:
        FrameDecoder().feed(raw(seq=77, flags=1 << 9))
    exc = info.value
    wire = encode_violation(exc.message, exc.status, exc.ref_seq, 1)
    assert FrameDecoder().feed(wire)[0].payload["ref_seq"] == 77
