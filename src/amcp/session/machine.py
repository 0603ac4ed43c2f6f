"""The session's state and every change of it, shared by its receive and send sides.

Which state follows which input is the tables' business (``amcp.session.state``); this
module only moves along a row the caller looked up: it refuses a forbidden transition,
restarts the timers a transition restarts, and sends the one 0x00FF a connection may carry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amcp.errors import Status
from amcp.session import events as ev
from amcp.session.outbox import Outbox
from amcp.session.state import ABORTED, SessionState, check_transition
from amcp.wire.constants import MsgType

S = SessionState


class Machine:
    """Where one session stands, and since when."""

    def __init__(self, outbox: Outbox, monotonic: Callable[[], float]) -> None:
        self._outbox = outbox
        self._mono = monotonic
        self.state = S.INIT
        self.entered_at = monotonic()  # the state's own timers count from here
        self.active_since = self.entered_at  # the 3.5 h / 4 h clock counts from here
        self.violated = False  # a 0x00FF went out or came in: never send (another) one

    def enter(self, new: SessionState) -> None:
        old = self.state
        if new is old:  # most frames leave the state as it is
            return
        check_transition(old, new)
        self.entered_at = self._mono()
        # The 3.5 h / 4 h clock restarts when a cold boot completes or a suspended
        # session resumes (a sync opened while suspended is a resume); a sync round
        # trip from ACTIVE does not reset it.
        if (new is S.ACTIVE and old is S.COLD_BOOTING) or (
            old is S.SUSPENDED and new in (S.ACTIVE, S.SYNCING)
        ):
            self.active_since = self.entered_at
        self.state = new

    def violation(self, status: Status, reason: str, ref_seq: int | None) -> list[ev.Event]:
        """A violation either side found: our one 0x00FF, then close (PROFILE §2)."""
        if self.violated:  # one 0x00FF per connection; after that only close
            self.enter(ABORTED)
            return [ev.CloseConnection(reason)]
        self.violated = True
        payload: dict[str, Any] = {"status": int(status), "reason": reason}
        if ref_seq is not None:
            payload["ref_seq"] = ref_seq
        frame = self._outbox.stamp(MsgType.PROTOCOL_VIOLATION, payload)
        self.enter(ABORTED)
        return [
            ev.Violation(status, reason, ref_seq),
            ev.SendFrame(frame),
            ev.CloseConnection(reason),
        ]
