"""Hypothesis: round trips over random Frames, and the fuzz invariant
"decode, drop silently, or raise RemoteProtocolError — nothing else"."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_kit import cipher_pair, feed_chunks

from amcp.errors import LocalProtocolError, RemoteProtocolError
from amcp.wire import (
    HEADER_SIZE,
    MAX_PAYLOAD,
    Flag,
    Frame,
    FrameDecoder,
    MsgType,
    encode_message,
)
from amcp.wire.encoder import TRANSPORT_FLAGS

SENDER, RECEIVER = cipher_pair(salt=b"hypothesis")
# No deadline: the suite makes no timing assertions, and shared CI machines stall.
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=40)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    payload = draw(st.dictionaries(st.text(max_size=12), values, max_size=6))
    if draw(st.booleans()):
        # Something big enough to compress and to fragment at small max_payloads.
        payload["bulk"] = draw(st.sampled_from(["memory " * 300, "x" * 5000])) + draw(
            st.text(max_size=20)
        )
    return payload


frames = st.builds(
    Frame,
    msg_type=st.sampled_from(list(MsgType)),
    payload=payloads(),
    seq=st.integers(min_value=0, max_value=2**64 - 64),
    session_id=st.binary(min_size=16, max_size=16),
    clock=st.integers(min_value=0, max_value=2**64 - 1),
    flags=st.sampled_from([Flag.NONE, Flag.IDEMPOTENT, Flag.REQUIRES_ACK, Flag(0b110000)]),
    version=st.integers(min_value=0x0100, max_value=0x01FF),
)
options = st.fixed_dictionaries(
    {
        "encrypt": st.booleans(),
        "compress": st.booleans(),
        "max_payload": st.sampled_from([64, 300, 2048, MAX_PAYLOAD]),
    }
)
cuts = st.lists(st.integers(min_value=0, max_value=20_000), max_size=8)


@FAST
@given(frame=frames, opts=options, cut_at=cuts)
def test_round_trip(frame: Frame, opts: dict[str, Any], cut_at: list[int]) -> None:
    cipher = SENDER if opts["encrypt"] else None
    try:
        encoded = encode_message(
            frame, cipher=cipher, compress=opts["compress"], max_payload=opts["max_payload"]
        )
    except LocalProtocolError as exc:
        # A fragmented message starting near 2**64 has no room for its fragments' sequence
        # numbers; refusing to encode it is the specified behaviour. Nothing else may fail.
        assert "overflow SEQUENCE_NUMBER" in str(exc)  # noqa: PT017 - hypothesis, not pytest.raises
        assert frame.seq > 2**63
        return
    decoder = FrameDecoder(cipher=RECEIVER, max_payload=opts["max_payload"])
    [decoded] = feed_chunks(decoder, encoded.data, cut_at)
    assert decoded.payload == frame.payload
    assert (decoded.msg_type, decoded.seq, decoded.session_id, decoded.clock, decoded.version) == (
        frame.msg_type,
        frame.seq,
        frame.session_id,
        frame.clock,
        frame.version,
    )
    assert decoded.flags & ~TRANSPORT_FLAGS == frame.flags
    assert bool(decoded.flags & Flag.FRAGMENTED) == (encoded.frames > 1)
    assert bool(decoded.flags & Flag.ENCRYPTED) == opts["encrypt"]
    assert decoder.buffered == 0
    assert decoder.reassembly_buffered == 0


# --- fuzz -----------------------------------------------------------------------------

SEED_FRAMES = [
    Frame(MsgType.HEALTH_CHECK, {}, 1),
    Frame(
        MsgType.MEMORY_WRITE, {"amf": {"core": {"s": "x", "c": 0.5}}}, 2, flags=Flag.REQUIRES_ACK
    ),
    Frame(MsgType.SYNC_PUSH, {"changes": ["memory " * 40] * 10}, 3),
    Frame(MsgType.MEMORY_READ_RESPONSE, {"results": [b"\x00" * 100] * 5, "n": 5}, 4),
]


@st.composite
def fuzzed_streams(draw: st.DrawFn) -> tuple[bytes, bool, int]:
    encrypt = draw(st.booleans())
    max_payload = draw(st.sampled_from([256, 1024, MAX_PAYLOAD]))
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300)), encrypt, max_payload
    seq = 1
    stream = bytearray()
    for seed in draw(st.lists(st.sampled_from(SEED_FRAMES), min_size=1, max_size=4)):
        frame = Frame(seed.msg_type, seed.payload, seq, flags=seed.flags)
        encoded = encode_message(frame, cipher=SENDER if encrypt else None, max_payload=max_payload)
        stream += encoded.data
        seq = encoded.next_seq
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "splice"]))
        if not stream:
            break
        at = draw(st.integers(0, len(stream) - 1))
        if kind == "flip":
            stream[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            stream[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            stream[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del stream[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del stream[at:]
        else:
            stream[at:at] = draw(st.binary(min_size=1, max_size=60))
    return bytes(stream), encrypt, max_payload


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=fuzzed_streams(), cut_at=cuts)
def test_fuzz_decode_drop_or_remote_protocol_error(
    case: tuple[bytes, bool, int], cut_at: list[int]
) -> None:
    stream, encrypt, max_payload = case
    decoder = FrameDecoder(cipher=RECEIVER if encrypt else None, max_payload=max_payload)
    start = 0
    try:
        for cut in [*sorted(set(cut_at)), len(stream)]:
            if start <= cut <= len(stream):
                for frame in decoder.feed(stream[start:cut]):
                    assert isinstance(frame, Frame)
                    assert isinstance(frame.payload, dict)
                start = cut
                assert decoder.buffered <= HEADER_SIZE + max_payload
    except RemoteProtocolError:
        assert decoder.failed
