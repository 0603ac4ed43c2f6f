"""Frame: an immutable value that refuses what cannot go in a header (a 16-byte session id,
u64 seq and clock) — for frames the session stamps and frames the decoder builds alike."""

from __future__ import annotations

import dataclasses

import pytest

from amcp.wire import Flag, Frame, FrameDecoder, MsgType, encode_frame

SID = bytes(range(16))


def test_a_decoded_frame_equals_the_one_encoded() -> None:
    sent = Frame(MsgType.MEMORY_READ, {"ids": []}, 7, SID, 99, Flag.REQUIRES_ACK)
    (got,) = FrameDecoder().feed(encode_frame(sent))
    assert type(got) is Frame
    assert got == sent
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.seq = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    ("seq", "sid", "clock", "message"),
    [
        (-1, SID, 0, "seq"),
        (1 << 64, SID, 0, "seq"),
        (1, SID, 1 << 64, "clock"),
        (1, SID, -1, "clock"),
        (1, b"short", 0, "session_id"),
    ],
)
def test_bad_values_are_refused(seq: int, sid: bytes, clock: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Frame(MsgType.ERROR, {}, seq, sid, clock)
