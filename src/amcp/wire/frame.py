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
        if not 0 <= self.seq < _U64:
            raise ValueError("seq must fit in u64")
        if not 0 <= self.clock < _U64:
            raise ValueError("clock must fit in u64")


_U64 = 1 << 64
