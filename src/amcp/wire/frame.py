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
        if len(self.session_id) != 16:
            raise ValueError("session_id must be 16 bytes")
        if not 0 <= self.seq < 2**64:
            raise ValueError("seq must fit in u64")
        if not 0 <= self.clock < 2**64:
            raise ValueError("clock must fit in u64")


class _Shell:
    """Frame's exact slot layout, so an instance may become a Frame (see stamped_frame)."""

    __slots__ = Frame.__slots__


_U64 = 1 << 64


def stamped_frame(
    msg_type: MsgType,
    payload: Mapping[str, Any],
    seq: int,
    session_id: bytes,
    clock: int,
    flags: Flag,
) -> Frame:
    """``Frame(...)`` with the same checks, minus the frozen dataclass's ``__init__``.

    A frozen dataclass sets each field through ``object.__setattr__``; the session stamps
    a frame for every message it sends, and that init was several times the cost of the
    rest. The fields go onto an object with Frame's slot layout whose class is then
    switched to Frame (the decoder builds its frames the same way): the result is a
    genuine, immutable Frame.
    """
    if len(session_id) != 16:
        raise ValueError("session_id must be 16 bytes")
    if not 0 <= seq < _U64:
        raise ValueError("seq must fit in u64")
    if not 0 <= clock < _U64:
        raise ValueError("clock must fit in u64")
    shell: Any = _Shell()
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
