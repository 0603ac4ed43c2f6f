"""Small parts of the session kept out of ``session.py``: the clock port, a handler's
abort, a payload helper, and the timer table's arithmetic (which deadline applies when)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from amcp.session import events as ev
from amcp.session.state import SessionState, Timeouts

S = SessionState


class CausalClock(Protocol):
    """What the session needs from the HLC (``amcp.clock.HLC`` fits).

    ``receive`` MUST raise :class:`amcp.errors.PreconditionFailed` without merging when the
    remote clock is more than the allowed drift ahead of local time (PROFILE §5).
    """

    def send(self) -> int: ...

    def receive(self, remote: int) -> int: ...


@dataclass(frozen=True, slots=True)
class Aborted:
    """A handler's answer when it refuses its input and the session must end (a hello
    whose claim cannot be backed, a refused capability response): ``events`` go out and
    the session enters ``state.ABORTED``."""

    events: list[ev.Event]


# What a receive handler returns: the events, the row's next state implied.
Outcome = list[ev.Event] | Aborted


def payload_int(payload: Mapping[str, Any], key: str) -> int | None:
    value = payload.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# Which start time and which limit each timed state uses (True: time entered the state;
# False: the start of the active period). A module table: this runs after every frame.
_TIMED: dict[SessionState, tuple[bool, str]] = {
    S.INIT: (True, "handshaking"),
    S.HANDSHAKING: (True, "handshaking"),
    S.COLD_BOOTING: (True, "cold_booting"),
    S.ACTIVE: (False, "active_warning"),
    S.SUSPENDED: (False, "active_max"),
    S.TERMINATING: (True, "terminating"),
}


def deadline(
    state: SessionState,
    t: Timeouts,
    *,
    entered_at: float,
    active_since: float,
    sync_started: float | None,
) -> float | None:
    """The monotonic time at which ``state``'s timer fires, or None for untimed states."""
    if state is S.SYNCING:
        assert sync_started is not None  # SYNCING is only entered with a stream
        return sync_started + t.syncing
    timed = _TIMED.get(state)
    if timed is None:
        return None
    from_entry, limit = timed
    start = entered_at if from_entry else active_since
    value: float = getattr(t, limit)
    return start + value
