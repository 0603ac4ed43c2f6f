"""The decoded frame: what the codec yields and the session consumes (PROFILE §1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from amcp.wire.constants import VERSION_1_0, Flag, MsgType

ZERO_SESSION = bytes(16)


@dataclass(frozen=True, slots=True)
class Frame:
    """One logical message after checksum check, decryption, decompression and reassembly.

    ``payload`` is the decoded MessagePack map; ``flags`` keeps the bits the sender set on
    the (first) wire frame so a receiver can honour REQUIRES_ACK and IDEMPOTENT.
    """

    msg_type: MsgType
    payload: Mapping[str, Any] = field(default_factory=dict)
    seq: int = 0
    session_id: bytes = ZERO_SESSION
    clock: int = 0
    flags: Flag = Flag.NONE
    version: int = VERSION_1_0

    def __post_init__(self) -> None:
        _check(self.session_id, self.seq, self.clock)


_U64 = 1 << 64


def _check(session_id: bytes, seq: int, clock: int) -> None:
    if len(session_id) != 16:
        raise ValueError("session_id must be 16 bytes")
    if not 0 <= seq < _U64:
        raise ValueError("seq must fit in u64")
    if not 0 <= clock < _U64:
        raise ValueError("clock must fit in u64")


# Frames on hot paths (the decoder, the session's stamping) are built without
# Frame.__init__: the frozen-dataclass init (object.__setattr__ per field) plus
# __post_init__ cost more than the rest of the work. The fields are stored on a plain object
# with Frame's exact slot layout and its class is then switched to Frame, which Python
# allows between classes of identical layout: the result is a genuine, immutable Frame.
class FrameShell:
    """Frame's slot layout, so an instance may become a Frame (callers set every field)."""

    __slots__ = Frame.__slots__


# The shell route sets these fields and no others; fail loudly if Frame grows one.
if set(Frame.__slots__) != {
    "msg_type", "payload", "seq", "session_id", "clock", "flags", "version",
}:
    raise ImportError("Frame's fields changed: update FrameShell's users (decoder, stamped_frame)")


def stamped_frame(
    msg_type: MsgType,
    payload: Mapping[str, Any],
    seq: int,
    session_id: bytes,
    clock: int,
    flags: Flag,
) -> Frame:
    """``Frame(...)`` with the same checks, minus the frozen dataclass's ``__init__``.

    The session stamps a frame for every message it sends; built as a ``FrameShell``.
    """
    _check(session_id, seq, clock)
    shell: Any = FrameShell()
    shell.msg_type = msg_type
    shell.payload = payload
    shell.seq = seq
    shell.session_id = session_id
    shell.clock = clock
    shell.flags = flags
    shell.version = VERSION_1_0
    shell.__class__ = Frame
    frame: Frame = shell
    return frame
