"""Our side's frames: the SEQUENCE_NUMBER, SESSION_ID and CAUSAL_CLOCK stamped on each
(PROFILE §1, §5), and the replies kept so a retransmitted request can be re-acked."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from amcp.errors import LocalProtocolError, Status
from amcp.session.support import CausalClock
from amcp.wire.constants import Flag, MsgType
from amcp.wire.frame import ZERO_SESSION, Frame

# Re-acks need the reply we sent; keep the last few hundred. A peer retransmitting older
# frames than that gets no re-ack, which the profile allows (it may simply retry).
DEFAULT_REACK_CACHE = 256
_U64 = 1 << 64


class Outbox:
    """Stamps every frame one session sends."""

    def __init__(self, clock: CausalClock, *, reack_cache: int = DEFAULT_REACK_CACHE) -> None:
        self._clock = clock
        self._reack_limit = reack_cache
        self._replies: OrderedDict[int, tuple[MsgType, dict[str, Any], Flag]] = OrderedDict()
        self.seq = 0  # the last SEQUENCE_NUMBER we used; 0 before the first frame
        self.session_id = ZERO_SESSION  # assigned by the COLD_BOOT_RESPONSE

    def stamp(self, mt: MsgType, payload: dict[str, Any], flags: Flag = Flag.NONE) -> Frame:
        # No copy: every caller hands over a dict built for this message (Session.send and
        # reply copy the caller's mapping once), and nothing mutates a payload after it is
        # stamped; a re-ack re-sends the very dict its first frame carried.
        self.seq += 1
        return Frame(mt, payload, self.seq, self.session_id, self._clock.send(), flags)

    def reply(
        self, ref_seq: int, mt: MsgType, payload: dict[str, Any], flags: Flag = Flag.NONE
    ) -> Frame:
        """A frame answering the peer's ``ref_seq``, remembered for a re-ack."""
        self._replies[ref_seq] = (mt, payload, flags)
        self._replies.move_to_end(ref_seq)
        while len(self._replies) > self._reack_limit:
            self._replies.popitem(last=False)
        return self.stamp(mt, payload, flags)

    def error(self, frame: Frame, status: Status, reason: str) -> Frame:
        """The session's own ERROR answering ``frame`` (412 for a skewed clock, 429...)."""
        payload = {"status": int(status), "reason": reason, "ref_seq": frame.seq}
        return self.reply(frame.seq, MsgType.ERROR, payload)

    def end_ack(self, frame: Frame) -> Frame:
        payload = {"status": int(Status.OK), "ref_seq": frame.seq}
        return self.reply(frame.seq, MsgType.SESSION_END_ACK, payload)

    def reack(self, ref_seq: int) -> Frame | None:
        """Our reply to the peer's ``ref_seq`` again, under a new SEQUENCE_NUMBER (the old
        one would itself be dropped as a duplicate), or None if it is no longer kept."""
        cached = self._replies.get(ref_seq)
        if cached is None:
            return None
        mt, payload, flags = cached
        return self.stamp(mt, payload, flags)

    def skip(self, count: int) -> None:
        """The frame just stamped went out as ``count + 1`` fragments: its extra fragments
        took the next ``count`` SEQUENCE_NUMBERs."""
        if count < 0:
            raise ValueError("count must not be negative")
        if self.seq + count >= _U64:
            raise LocalProtocolError("SEQUENCE_NUMBER would overflow")
        self.seq += count
