"""stamped_frame: the session's fast Frame constructor builds the same immutable Frame and
refuses the same bad values as ``Frame(...)``."""

from __future__ import annotations

import dataclasses

import pytest

from amcp.wire import Flag, Frame, MsgType, encode_frame
from amcp.wire.frame import stamped_frame

SID = bytes(range(16))


def test_same_frame_as_the_dataclass() -> None:
    fast = stamped_frame(MsgType.MEMORY_READ, {"ids": []}, 7, SID, 99, Flag.REQUIRES_ACK)
    slow = Frame(MsgType.MEMORY_READ, {"ids": []}, 7, SID, 99, Flag.REQUIRES_ACK)
    assert type(fast) is Frame
    assert fast == slow
    assert encode_frame(fast) == encode_frame(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.seq = 8  # type: ignore[misc]


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
def test_bad_values_are_refused_like_frame(seq: int, sid: bytes, clock: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Frame(MsgType.ERROR, {}, seq, sid, clock)
    with pytest.raises(ValueError, match=message):
        stamped_frame(MsgType.ERROR, {}, seq, sid, clock, Flag.NONE)
