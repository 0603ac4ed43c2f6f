"""The session state machine as data (PROFILE §8, upstream L5 state_machine).

Three tables of the same shape ``{(state, input): (action, next_state)}``:

- ``RECEIVE``: a frame of a given MSG_TYPE arrives. A missing key is a violation (0x00FF).
- ``SEND``: the application asks to send a MSG_TYPE. A missing key is our bug
  (LocalProtocolError). Frames the session sends by itself (hello, capability response,
  automatic ERRORs, SESSION_END_ACK, 0x00FF) are part of a RECEIVE or TIMER row instead.
- ``TIMER``: the state's deadline passed.

An input is a MSG_TYPE or, where one message means two things, a :class:`Cue`: an ERROR
that answers the request a cold boot or sync stream waits on ends that exchange, and a sync
opener while the other side's stream is open is refused. The session computes the input
once per frame (``amcp.session.exchange``, the same rule for both directions); the row
then says everything. The action names the handler; a handler may only refuse — raise a
violation, or abort (``ABORTED``: a handshake one side refused) — never pick a state, so
the tables stay the single place to read the machine from.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from amcp.errors import LocalProtocolError, Status
from amcp.wire.constants import MsgType


class SessionState(Enum):
    # Enum.__hash__ is a Python function (hash of the name); states key the transition
    # tables on every frame, so use the C identity hash (members are singletons and Enum
    # equality is identity, so this is consistent).
    __hash__ = object.__hash__

    INIT = "INIT"
    HANDSHAKING = "HANDSHAKING"
    COLD_BOOTING = "COLD_BOOTING"
    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"
    SYNCING = "SYNCING"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"


class Role(Enum):
    """CLIENT opens the connection and cold-boots (the ai side); NODE answers (the db side)."""

    __hash__ = object.__hash__  # see SessionState

    CLIENT = "client"
    NODE = "node"


class Action(Enum):
    __hash__ = object.__hash__  # see SessionState

    HELLO = "hello"  # validate hello, back the trust claim, answer CAPABILITY_RESPONSE
    CAP_RESPONSE = "cap_response"  # verify the possession signature; maybe complete
    COLD_BOOT = "cold_boot"  # a COLD_BOOT_REQUEST (needs both capability responses)
    COLD_BOOT_DONE = "cold_boot_done"  # COLD_BOOT_RESPONSE: the session id is assigned
    REQUEST = "request"  # hand to the application (Request event) / send a request
    ANSWER = "answer"  # a reply to one of ours (Response event) / send a reply
    SYNC_OPEN = "sync_open"  # SYNC_PUSH / SYNC_PULL_REQUEST opens a sync stream
    SYNC_BATCH = "sync_batch"  # more of the open stream, or a second stream: 429
    SYNC_CLOSE = "sync_close"  # SYNC_ACK ends the stream
    END = "end"  # SESSION_END: the receiver acks and closes; the sender waits
    END_CROSSED = "end_crossed"  # both ended at once: ack theirs, keep waiting for ours
    END_ACK = "end_ack"  # SESSION_END_ACK: close
    PEER_ERROR = "peer_error"  # ERROR received / sent: the session continues
    COLD_BOOT_FAILED = "cold_boot_failed"  # ERROR answering the COLD_BOOT_REQUEST
    SYNC_FAILED = "sync_failed"  # ERROR answering the open stream's latest batch
    SYNC_REFUSE = "sync_refuse"  # a second stream while ours is open: ERROR 429
    PEER_VIOLATION = "peer_violation"  # 0x00FF received: close, never answer it
    IGNORE = "ignore"  # TERMINATING drops everything else
    SUSPEND = "suspend"  # timer: ACTIVE for 3.5 h
    EXPIRE = "expire"  # timer: ERROR 408 (when a hello was sent) and close
    SYNC_EXPIRE = "sync_expire"  # timer: a sync batch got no answer in time
    CLOSE = "close"  # timer in TERMINATING: stop waiting for the ack


class Cue(Enum):
    """Inputs finer than a MSG_TYPE, for the rows where one message means two things."""

    __hash__ = object.__hash__  # see SessionState

    # An ERROR whose ref_seq names the request the open exchange waits on (the
    # COLD_BOOT_REQUEST, or the sync stream's latest SYNC_PUSH / SYNC_PULL_REQUEST), sent
    # by the other side: it ends that exchange instead of stranding it until its timer.
    EXCHANGE_ERROR = "exchange_error"
    # SYNC_PUSH / SYNC_PULL_REQUEST while the other side's stream is open: PROFILE §8
    # allows one sync stream per connection.
    RIVAL_OPENER = "rival_opener"


Input = MsgType | Cue
Transition = tuple[Action, SessionState]
S = SessionState
M = MsgType

# Only a NODE receives these (and only a CLIENT sends them): they flow ai→db.
TO_NODE: frozenset[MsgType] = frozenset(
    {
        M.COLD_BOOT_REQUEST,
        M.MEMORY_READ,
        M.MEMORY_WRITE,
        M.MEMORY_INVALIDATE,
        M.QEF_SIGNAL,
        M.KNOWLEDGE_DISTILL,
    }
)
# Only a CLIENT receives these: the answers to the above.
TO_CLIENT: frozenset[MsgType] = frozenset(
    {M.COLD_BOOT_RESPONSE, M.MEMORY_READ_RESPONSE, M.MEMORY_WRITE_ACK, M.QEF_ACK}
)
MEMORY_TYPES: frozenset[MsgType] = frozenset({M.MEMORY_READ, M.MEMORY_WRITE, M.MEMORY_INVALIDATE})
# SESSION_BEGIN is both the request and, with ref_seq/status, its own answer.
REQUESTS: frozenset[MsgType] = frozenset(
    {
        M.MEMORY_READ,
        M.MEMORY_WRITE,
        M.MEMORY_INVALIDATE,
        M.QEF_SIGNAL,
        M.KNOWLEDGE_DISTILL,
        M.HEALTH_CHECK,
        M.SESSION_BEGIN,
    }
)
ANSWERS: frozenset[MsgType] = frozenset(
    {M.MEMORY_READ_RESPONSE, M.MEMORY_WRITE_ACK, M.QEF_ACK, M.HEALTH_RESPONSE}
)
SYNC_OPENERS: frozenset[MsgType] = frozenset({M.SYNC_PUSH, M.SYNC_PULL_REQUEST})


def _working(state: SessionState, *, resumes: bool) -> dict[tuple[S, Input], Transition]:
    """Rows shared by ACTIVE, SUSPENDED and SYNCING (PROFILE §8: 'all request types')."""
    back = S.ACTIVE if resumes else state  # SUSPENDED returns to ACTIVE on any request
    rows: dict[tuple[S, Input], Transition] = {}
    for mt in REQUESTS:
        rows[(state, mt)] = (Action.REQUEST, back)
    for mt in ANSWERS:
        rows[(state, mt)] = (Action.ANSWER, state)
    if state is S.SYNCING:
        for mt in SYNC_OPENERS:
            rows[(state, mt)] = (Action.SYNC_BATCH, S.SYNCING)
        rows[(state, M.SYNC_PULL_RESPONSE)] = (Action.SYNC_BATCH, S.SYNCING)
        rows[(state, M.SYNC_ACK)] = (Action.SYNC_CLOSE, S.ACTIVE)
        rows[(state, Cue.EXCHANGE_ERROR)] = (Action.SYNC_FAILED, S.ACTIVE)
    else:
        for mt in SYNC_OPENERS:
            rows[(state, mt)] = (Action.SYNC_OPEN, S.SYNCING)
        # A late answer to a stream that already ended (e.g. after its timer) is harmless.
        rows[(state, M.SYNC_PULL_RESPONSE)] = (Action.ANSWER, state)
        rows[(state, M.SYNC_ACK)] = (Action.ANSWER, state)
    rows[(state, M.ERROR)] = (Action.PEER_ERROR, state)
    return rows


def _receive_table() -> dict[tuple[S, Input], Transition]:
    t: dict[tuple[S, Input], Transition] = {}
    # Receiving 0x00FF ends the session from every state (upstream: ANY → TERMINATED).
    for state in S:
        t[(state, M.PROTOCOL_VIOLATION)] = (Action.PEER_VIOLATION, S.TERMINATED)
    # INIT: only the hello. MEMORY_* and everything else fall through to a violation
    # (status 702 COLD_BOOT_REQUIRED), see docs/session.md.
    t[(S.INIT, M.CAPABILITY_HELLO)] = (Action.HELLO, S.HANDSHAKING)
    # HANDSHAKING: the peer's hello may arrive after we sent ours.
    t[(S.HANDSHAKING, M.CAPABILITY_HELLO)] = (Action.HELLO, S.HANDSHAKING)
    t[(S.HANDSHAKING, M.CAPABILITY_RESPONSE)] = (Action.CAP_RESPONSE, S.HANDSHAKING)
    t[(S.HANDSHAKING, M.COLD_BOOT_REQUEST)] = (Action.COLD_BOOT, S.COLD_BOOTING)
    t[(S.HANDSHAKING, M.HEALTH_CHECK)] = (Action.REQUEST, S.HANDSHAKING)
    t[(S.HANDSHAKING, M.HEALTH_RESPONSE)] = (Action.ANSWER, S.HANDSHAKING)
    t[(S.HANDSHAKING, M.ERROR)] = (Action.PEER_ERROR, S.HANDSHAKING)
    t[(S.HANDSHAKING, M.SESSION_END)] = (Action.END, S.TERMINATED)
    # COLD_BOOTING: SYNC_* is absent on purpose (forbidden COLD_BOOTING → SYNCING).
    t[(S.COLD_BOOTING, M.COLD_BOOT_RESPONSE)] = (Action.COLD_BOOT_DONE, S.ACTIVE)
    t[(S.COLD_BOOTING, M.HEALTH_CHECK)] = (Action.REQUEST, S.COLD_BOOTING)
    t[(S.COLD_BOOTING, M.HEALTH_RESPONSE)] = (Action.ANSWER, S.COLD_BOOTING)
    t[(S.COLD_BOOTING, M.ERROR)] = (Action.PEER_ERROR, S.COLD_BOOTING)
    # An ERROR answering the COLD_BOOT_REQUEST (e.g. 403 for the scope) reopens the way
    # to a new cold boot instead of stranding the session until its timer fires.
    t[(S.COLD_BOOTING, Cue.EXCHANGE_ERROR)] = (Action.COLD_BOOT_FAILED, S.HANDSHAKING)
    t[(S.COLD_BOOTING, M.SESSION_END)] = (Action.END, S.TERMINATED)
    for state, resumes in ((S.ACTIVE, False), (S.SUSPENDED, True), (S.SYNCING, False)):
        t.update(_working(state, resumes=resumes))
        t[(state, M.SESSION_END)] = (Action.END, S.TERMINATED)
    # Our own stream is open: the peer's opener is answered 429 and the stream goes on.
    t[(S.SYNCING, Cue.RIVAL_OPENER)] = (Action.SYNC_REFUSE, S.SYNCING)
    # TERMINATING: only the ack counts; everything else is dropped (PROFILE §8), except a
    # crossed SESSION_END, which must be acked or two closing peers would wait forever.
    # Cues too: a cold boot or stream may still be open when SESSION_END went out.
    for inp in (*M, *Cue):
        t.setdefault((S.TERMINATING, inp), (Action.IGNORE, S.TERMINATING))
    t[(S.TERMINATING, M.SESSION_END_ACK)] = (Action.END_ACK, S.TERMINATED)
    t[(S.TERMINATING, M.SESSION_END)] = (Action.END_CROSSED, S.TERMINATING)
    # TERMINATED: nothing but a received 0x00FF (which is never answered) has a row.
    return t


def _send_table() -> dict[tuple[S, Input], Transition]:
    t: dict[tuple[S, Input], Transition] = {}
    t[(S.INIT, M.CAPABILITY_HELLO)] = (Action.HELLO, S.HANDSHAKING)
    t[(S.HANDSHAKING, M.COLD_BOOT_REQUEST)] = (Action.COLD_BOOT, S.COLD_BOOTING)
    for state in (S.HANDSHAKING, S.COLD_BOOTING):
        t[(state, M.HEALTH_CHECK)] = (Action.REQUEST, state)
        t[(state, M.HEALTH_RESPONSE)] = (Action.ANSWER, state)
        t[(state, M.ERROR)] = (Action.PEER_ERROR, state)
    t[(S.COLD_BOOTING, M.COLD_BOOT_RESPONSE)] = (Action.COLD_BOOT_DONE, S.ACTIVE)
    # Our ERROR answering the peer's COLD_BOOT_REQUEST (see RECEIVE).
    t[(S.COLD_BOOTING, Cue.EXCHANGE_ERROR)] = (Action.COLD_BOOT_FAILED, S.HANDSHAKING)
    for state, resumes in ((S.ACTIVE, False), (S.SUSPENDED, True), (S.SYNCING, False)):
        t.update(_working(state, resumes=resumes))
    for state in (S.HANDSHAKING, S.COLD_BOOTING, S.ACTIVE, S.SUSPENDED, S.SYNCING):
        t[(state, M.SESSION_END)] = (Action.END, S.TERMINATING)
    # No (SYNCING, RIVAL_OPENER) row: opening a stream while the peer's is open is refused
    # (with 429, see SEND_REFUSALS).
    return t


TIMER: dict[SessionState, Transition] = {
    # INIT has no upstream timeout; a silent connection must not live forever, so it
    # shares the handshake deadline (counted from the session's creation).
    S.INIT: (Action.EXPIRE, S.TERMINATED),
    S.HANDSHAKING: (Action.EXPIRE, S.TERMINATED),
    S.COLD_BOOTING: (Action.EXPIRE, S.TERMINATED),
    S.ACTIVE: (Action.SUSPEND, S.SUSPENDED),
    S.SUSPENDED: (Action.EXPIRE, S.TERMINATED),
    S.SYNCING: (Action.SYNC_EXPIRE, S.ACTIVE),
    S.TERMINATING: (Action.CLOSE, S.TERMINATED),
}

RECEIVE: dict[tuple[SessionState, Input], Transition] = _receive_table()
SEND: dict[tuple[SessionState, Input], Transition] = _send_table()

# The status a send without a SEND row is refused with, when it is not 702 (not allowed in
# this state): a second sync stream is "too many requests" on either side (PROFILE §8).
SEND_REFUSALS: dict[Input, Status] = {Cue.RIVAL_OPENER: Status.TOO_MANY_REQUESTS}

# Where a session goes when it is cut short from any state (upstream "ANY → TERMINATED"): a
# violation found by either side, or a handshake one side refused.
ABORTED = S.TERMINATED

# Upstream L5 forbidden_transitions. No row above leads along one; check_transition holds
# every change of state to it, so a future edit cannot introduce one silently.
FORBIDDEN: frozenset[tuple[SessionState, SessionState]] = frozenset(
    {(S.INIT, S.ACTIVE), (S.COLD_BOOTING, S.SYNCING)}
    | {(S.TERMINATED, s) for s in S if s is not S.TERMINATED}
)


def check_transition(old: SessionState, new: SessionState) -> None:
    """Refuse a move along a forbidden transition (our bug, never the peer's input)."""
    if (old, new) in FORBIDDEN:
        raise LocalProtocolError(f"forbidden transition {old.name} -> {new.name}")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds (PROFILE §8 defaults). ``terminating`` is ours: how long to wait for an ack."""

    handshaking: float = 30.0
    cold_booting: float = 60.0
    active_warning: float = 3.5 * 3600
    active_max: float = 4 * 3600
    syncing: float = 120.0
    terminating: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.active_warning <= self.active_max:
            raise ValueError("active_warning must be positive and not above active_max")


def render_markdown() -> str:
    """The RECEIVE table as Markdown, for docs/session.md (a test keeps the two equal)."""
    lines = ["| state | received | action | next state |", "|---|---|---|---|"]
    for state in S:
        for inp in (*M, *Cue):
            row = RECEIVE.get((state, inp))
            if row is None or row[0] is Action.IGNORE:
                continue
            lines.append(f"| {state.name} | {inp.name} | {row[0].value} | {row[1].name} |")
    return "\n".join(lines) + "\n"
