"""The transition tables (table-driven) and the PROFILE §8 rules they encode."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.session.session_kit import activate, frames, handshake, make_pair, of, session_in

from amcp.errors import LocalProtocolError, Status
from amcp.session import (
    CloseConnection,
    ErrorReceived,
    Ignored,
    PeerViolation,
    Request,
    Role,
    SessionResumed,
    SessionState,
    SyncEnded,
    SyncStarted,
    Violation,
)
from amcp.session.state import (
    FORBIDDEN,
    RECEIVE,
    SEND,
    TIMER,
    Action,
    Cue,
    check_transition,
    render_markdown,
)
from amcp.wire.constants import MsgType
from amcp.wire.frame import Frame

S = SessionState
M = MsgType
A = Action

ROWS = [
    (S.INIT, M.CAPABILITY_HELLO, A.HELLO, S.HANDSHAKING),
    (S.INIT, M.PROTOCOL_VIOLATION, A.PEER_VIOLATION, S.TERMINATED),
    (S.HANDSHAKING, M.CAPABILITY_HELLO, A.HELLO, S.HANDSHAKING),
    (S.HANDSHAKING, M.CAPABILITY_RESPONSE, A.CAP_RESPONSE, S.HANDSHAKING),
    (S.HANDSHAKING, M.COLD_BOOT_REQUEST, A.COLD_BOOT, S.COLD_BOOTING),
    (S.HANDSHAKING, M.HEALTH_CHECK, A.REQUEST, S.HANDSHAKING),
    (S.HANDSHAKING, M.SESSION_END, A.END, S.TERMINATED),
    (S.COLD_BOOTING, M.COLD_BOOT_RESPONSE, A.COLD_BOOT_DONE, S.ACTIVE),
    (S.COLD_BOOTING, M.HEALTH_CHECK, A.REQUEST, S.COLD_BOOTING),
    (S.COLD_BOOTING, M.SESSION_END, A.END, S.TERMINATED),
    (S.ACTIVE, M.MEMORY_READ, A.REQUEST, S.ACTIVE),
    (S.ACTIVE, M.MEMORY_WRITE, A.REQUEST, S.ACTIVE),
    (S.ACTIVE, M.KNOWLEDGE_DISTILL, A.REQUEST, S.ACTIVE),
    (S.ACTIVE, M.SYNC_PUSH, A.SYNC_OPEN, S.SYNCING),
    (S.ACTIVE, M.SYNC_PULL_REQUEST, A.SYNC_OPEN, S.SYNCING),
    (S.ACTIVE, M.SESSION_END, A.END, S.TERMINATED),
    (S.ACTIVE, M.ERROR, A.PEER_ERROR, S.ACTIVE),
    (S.SUSPENDED, M.MEMORY_READ, A.REQUEST, S.ACTIVE),
    (S.SUSPENDED, M.HEALTH_CHECK, A.REQUEST, S.ACTIVE),
    (S.SUSPENDED, M.SYNC_PUSH, A.SYNC_OPEN, S.SYNCING),
    (S.SUSPENDED, M.MEMORY_READ_RESPONSE, A.ANSWER, S.SUSPENDED),
    (S.SYNCING, M.MEMORY_WRITE, A.REQUEST, S.SYNCING),
    (S.SYNCING, M.SYNC_PUSH, A.SYNC_BATCH, S.SYNCING),
    (S.SYNCING, M.SYNC_ACK, A.SYNC_CLOSE, S.ACTIVE),
    (S.TERMINATING, M.SESSION_END_ACK, A.END_ACK, S.TERMINATED),
    (S.TERMINATING, M.SESSION_END, A.END_CROSSED, S.TERMINATING),
    (S.TERMINATING, M.MEMORY_READ, A.IGNORE, S.TERMINATING),
    (S.TERMINATED, M.PROTOCOL_VIOLATION, A.PEER_VIOLATION, S.TERMINATED),
    (S.COLD_BOOTING, Cue.EXCHANGE_ERROR, A.COLD_BOOT_FAILED, S.HANDSHAKING),
    (S.SYNCING, Cue.EXCHANGE_ERROR, A.SYNC_FAILED, S.ACTIVE),
    (S.SYNCING, Cue.RIVAL_OPENER, A.SYNC_REFUSE, S.SYNCING),
    (S.TERMINATING, Cue.EXCHANGE_ERROR, A.IGNORE, S.TERMINATING),
]

ABSENT = [
    *[(S.INIT, mt) for mt in M if mt not in (M.CAPABILITY_HELLO, M.PROTOCOL_VIOLATION)],
    *[(S.HANDSHAKING, mt) for mt in (M.MEMORY_READ, M.MEMORY_WRITE, M.MEMORY_INVALIDATE)],
    *[(S.COLD_BOOTING, mt) for mt in M if mt.name.startswith("SYNC_")],
    *[(S.COLD_BOOTING, mt) for mt in (M.MEMORY_READ, M.MEMORY_WRITE, M.CAPABILITY_HELLO)],
    (S.ACTIVE, M.CAPABILITY_HELLO),
    (S.ACTIVE, M.COLD_BOOT_REQUEST),
    (S.ACTIVE, M.SESSION_END_ACK),
    *[(S.TERMINATED, mt) for mt in M if mt is not M.PROTOCOL_VIOLATION],
]


@pytest.mark.parametrize(("state", "mt", "action", "nxt"), ROWS)
def test_receive_rows(state: S, mt: M, action: A, nxt: S) -> None:
    assert RECEIVE[(state, mt)] == (action, nxt)


@pytest.mark.parametrize(("state", "mt"), ABSENT)
def test_missing_rows_are_violations(state: S, mt: M) -> None:
    assert (state, mt) not in RECEIVE


def test_no_row_leads_along_a_forbidden_transition() -> None:
    for table in (RECEIVE, SEND):
        for (state, _), (_, nxt) in table.items():
            assert (state, nxt) not in FORBIDDEN
    for state, (_, nxt) in TIMER.items():
        assert (state, nxt) not in FORBIDDEN
    assert (S.INIT, S.ACTIVE) in FORBIDDEN
    assert (S.COLD_BOOTING, S.SYNCING) in FORBIDDEN
    assert all((S.TERMINATED, s) in FORBIDDEN for s in S if s is not S.TERMINATED)


def test_forbidden_transition_is_refused_at_runtime() -> None:
    # Every change of state goes through check_transition (amcp.session.machine.Machine).
    for old, new in FORBIDDEN:
        with pytest.raises(LocalProtocolError, match="forbidden transition"):
            check_transition(old, new)
    check_transition(S.HANDSHAKING, S.COLD_BOOTING)


def test_terminating_has_a_row_for_every_type() -> None:
    assert all((S.TERMINATING, inp) in RECEIVE for inp in (*M, *Cue))


def test_an_error_answering_the_cold_boot_returns_both_sides_to_handshaking() -> None:
    pair = make_pair()
    handshake(pair)
    request = pair.client.send(M.COLD_BOOT_REQUEST, {"task": "t", "budget_tokens": 1})
    (req,) = of(pair.node.receive(request), Request)
    error = pair.node.reply_error(req.frame, Status.FORBIDDEN, "scope")
    assert pair.node.state is S.HANDSHAKING
    (got,) = of(pair.client.receive(error), ErrorReceived)
    assert (got.status, got.ref_seq) == (403, request.seq)
    assert pair.client.state is S.HANDSHAKING
    # ...so the client may cold-boot again on the same connection.
    again = pair.client.send(M.COLD_BOOT_REQUEST, {"task": "t", "budget_tokens": 1})
    (req,) = of(pair.node.receive(again), Request)
    pair.client.receive(pair.node.reply(req.frame, M.COLD_BOOT_RESPONSE, {"pack": {}}))
    assert pair.client.state is pair.node.state is S.ACTIVE


def test_only_an_error_answering_the_cold_boot_request_ends_it() -> None:
    pair = make_pair()
    handshake(pair)
    request = pair.client.send(M.COLD_BOOT_REQUEST, {"task": "t", "budget_tokens": 1})
    pair.node.receive(request)
    # The client's ERROR names one of the node's frames: the client's own request seq in
    # it is a coincidence of two sequence spaces, not an answer to the cold boot.
    from_client = Frame(M.ERROR, {"status": 400, "ref_seq": request.seq}, request.seq + 1)
    assert of(pair.node.receive(from_client), ErrorReceived)
    assert pair.node.state is S.COLD_BOOTING
    # Nor does the node's ERROR to some other frame of the client's.
    other = Frame(M.ERROR, {"status": 400, "ref_seq": request.seq + 7}, 90)
    assert of(pair.client.receive(other), ErrorReceived)
    assert pair.client.state is S.COLD_BOOTING


def test_docs_table_matches_the_code() -> None:
    docs = Path(__file__).parents[2] / "docs" / "session.md"
    assert render_markdown() in docs.read_text(encoding="utf-8")


@pytest.mark.parametrize("mt", [M.MEMORY_READ, M.MEMORY_WRITE, M.MEMORY_INVALIDATE])
@pytest.mark.parametrize("state", [S.INIT, S.HANDSHAKING])
def test_memory_before_cold_boot_is_violation_702(state: S, mt: M) -> None:
    node, _ = session_in(state, Role.NODE)
    events = node.receive(Frame(mt, {"query": "x"}, seq=7))
    (violation,) = of(events, Violation)
    assert violation.status == Status.STATE_VIOLATION
    assert violation.ref_seq == 7
    (pv,) = frames(events)
    assert pv.msg_type is M.PROTOCOL_VIOLATION
    assert pv.payload["status"] == 702
    assert pv.payload["ref_seq"] == 7
    assert isinstance(events[-1], CloseConnection)
    assert node.state is S.TERMINATED


@pytest.mark.parametrize("mt", [M.SYNC_PUSH, M.SYNC_PULL_REQUEST, M.SYNC_ACK])
def test_cold_booting_forbids_sync(mt: M) -> None:
    node, _ = session_in(S.COLD_BOOTING, Role.NODE)
    assert of(node.receive(Frame(mt, {}, seq=50)), Violation)
    assert node.state is S.TERMINATED


def test_cold_booting_accepts_health_check() -> None:
    node, _ = session_in(S.COLD_BOOTING, Role.NODE)
    assert of(node.receive(Frame(M.HEALTH_CHECK, {}, seq=50)), Request)
    assert node.state is S.COLD_BOOTING


def test_suspended_returns_to_active_on_any_request() -> None:
    node, pair = session_in(S.SUSPENDED, Role.NODE)
    frame = Frame(M.HEALTH_CHECK, {}, seq=50, session_id=node.session_id)
    events = node.receive(frame)
    assert of(events, SessionResumed)
    assert of(events, Request)
    assert node.state is S.ACTIVE
    # ...and the warning clock starts again.
    deadline = node.next_deadline()
    assert deadline is not None
    assert deadline >= pair.time.now


def test_suspended_client_resumes_by_sending() -> None:
    client, _ = session_in(S.SUSPENDED, Role.CLIENT)
    client.send(M.MEMORY_READ, {"query": "x"})
    assert client.state is S.ACTIVE


def test_sync_stream_and_second_concurrent_stream_gets_429() -> None:
    pair = make_pair()
    activate(pair)
    push = pair.client.send(M.SYNC_PUSH, {"changes": [], "origin": "c", "hops": 0})
    assert pair.client.state is S.SYNCING
    events = pair.node.receive(push)
    assert of(events, SyncStarted)[0].by_peer
    assert pair.node.state is S.SYNCING
    # The node tries to open its own stream while the client's is open: refused locally...
    with pytest.raises(LocalProtocolError) as exc:
        pair.node.send(M.SYNC_PULL_REQUEST, {"since": 0})
    assert exc.value.status == Status.TOO_MANY_REQUESTS
    # More batches of the same stream are fine; SYNC_ACK ends it on both sides.
    more = pair.client.send(M.SYNC_PUSH, {"changes": [], "origin": "c", "hops": 0})
    (req,) = pair.node.receive(more)
    ack = pair.node.reply(req.frame, M.SYNC_ACK, {"applied": 0})
    assert pair.node.state is S.ACTIVE
    assert of(pair.client.receive(ack), SyncEnded)
    assert pair.client.state is S.ACTIVE


def test_peer_opening_a_second_sync_stream_gets_429() -> None:
    pair = make_pair()
    activate(pair)
    pair.client.send(M.SYNC_PUSH, {"changes": [], "origin": "c", "hops": 0})
    rogue = Frame(M.SYNC_PULL_REQUEST, {"since": 0}, 99, pair.client.session_id)
    events = pair.client.receive(rogue)
    (error,) = frames(events)
    assert error.msg_type is M.ERROR
    assert error.payload["status"] == 429
    assert error.payload["ref_seq"] == 99
    assert not of(events, Request)
    assert pair.client.state is S.SYNCING


def test_error_answering_our_sync_batch_ends_the_stream() -> None:
    pair = make_pair()
    activate(pair)
    pull = pair.client.send(M.SYNC_PULL_REQUEST, {"since": 0})
    (req,) = of(pair.node.receive(pull), Request)
    error = pair.node.reply_error(req.frame, Status.LOOP_DETECTED, "loop")
    assert pair.node.state is S.ACTIVE
    assert of(pair.client.receive(error), SyncEnded)
    assert pair.client.state is S.ACTIVE


def test_terminating_ignores_everything_but_the_ack() -> None:
    client, _ = session_in(S.TERMINATING, Role.CLIENT)
    sid = client.session_id
    events = client.receive(Frame(M.MEMORY_READ_RESPONSE, {"status": 200}, 90, sid))
    assert of(events, Ignored)
    assert not frames(events)
    assert client.state is S.TERMINATING
    events = client.receive(Frame(M.SESSION_END_ACK, {"status": 200}, 91, sid))
    assert isinstance(events[-1], CloseConnection)
    assert client.state is S.TERMINATED


def test_received_violation_terminates_without_an_answer() -> None:
    node, _ = session_in(S.ACTIVE, Role.NODE)
    events = node.receive(Frame(M.PROTOCOL_VIOLATION, {"status": 700, "reason": "x"}, 90))
    assert of(events, PeerViolation)[0].status == 700
    assert not frames(events)
    assert node.state is S.TERMINATED


def test_terminated_cannot_be_revived() -> None:
    node, _ = session_in(S.TERMINATED, Role.NODE)
    events = node.receive(Frame(M.CAPABILITY_HELLO, {}, 90))
    assert of(events, Violation)
    assert node.state is S.TERMINATED
    # Only one 0x00FF per connection; afterwards just close.
    events = node.receive(Frame(M.HEALTH_CHECK, {}, 91))
    assert events == [CloseConnection(events[0].reason)]
    with pytest.raises(LocalProtocolError):
        node.send(M.HEALTH_CHECK)


def test_send_table_refuses_out_of_state_sends() -> None:
    pair = make_pair()
    with pytest.raises(LocalProtocolError):
        pair.client.send(M.MEMORY_READ, {"query": "x"})
    pair.client.start()
    with pytest.raises(LocalProtocolError):
        pair.client.start()


def test_codec_failures_reported_by_the_driver() -> None:
    pair = make_pair()
    pair.node.start()
    events = pair.node.fail(Status.PROTOCOL_ERROR, "bad magic")
    (pv,) = frames(events)
    assert pv.payload == {"status": 700, "reason": "bad magic"}
    assert pair.node.state is S.TERMINATED
