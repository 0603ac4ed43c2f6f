"""Hypothesis over every (role, state, message type): the session accepts, answers ERROR or
yields a Violation — it never raises and never ends in an undefined state."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.session.session_kit import WALL_MS, make_local, session_in

from amcp.session import (
    CloseConnection,
    Event,
    Role,
    SendFrame,
    SessionState,
    Violation,
)
from amcp.wire.constants import Flag, MsgType
from amcp.wire.frame import ZERO_SESSION, Frame

KEYS = [
    "status", "ref_seq", "reason", "session_id", "amcp_version", "node_type", "node_address",
    "public_key", "trust_level", "capabilities", "nonce", "signature", "accepted_version",
    "max_payload", "compression", "encryption", "x25519", "auth", "cert_chain", "more",
]  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=40),
    st.binary(max_size=40),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
HELLO = dict(
    make_local().hello(b"n" * 16).to_payload(),
)
payloads = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), values, max_size=8),
    # A valid hello with one field replaced: reaches deeper than random maps do.
    st.tuples(st.sampled_from(list(HELLO)), values).map(lambda kv: {**HELLO, kv[0]: kv[1]}),
    st.just(HELLO),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    role=st.sampled_from(list(Role)),
    state=st.sampled_from(list(SessionState)),
    mt=st.sampled_from(list(MsgType)),
    payload=payloads,
    seq=st.one_of(st.just(None), st.integers(min_value=0, max_value=2**64 - 1)),
    flags=st.sampled_from([Flag.NONE, Flag.REQUIRES_ACK, Flag.IDEMPOTENT]),
    clock_ahead_ms=st.sampled_from([0, 59_000, 61_000]),
    own_session=st.booleans(),
)
def test_every_state_and_message(
    role: Role,
    state: SessionState,
    mt: MsgType,
    payload: dict[str, Any],
    seq: int | None,
    flags: Flag,
    clock_ahead_ms: int,
    own_session: bool,
) -> None:
    session, _ = session_in(state, role)
    sent_before = session.last_seq
    frame = Frame(
        mt,
        payload,
        seq=10_000 if seq is None else seq,
        session_id=session.session_id if own_session else ZERO_SESSION,
        clock=(WALL_MS + clock_ahead_ms) << 16,
        flags=flags,
    )
    events = session.receive(frame)

    assert isinstance(session.state, SessionState)
    assert all(isinstance(e, Event) for e in events)
    sent = [e.frame for e in events if isinstance(e, SendFrame)]
    # Our sequence numbers keep counting up by one.
    assert [f.seq for f in sent] == list(range(sent_before + 1, sent_before + 1 + len(sent)))
    for f in sent:
        if f.msg_type in (MsgType.ERROR, MsgType.CAPABILITY_RESPONSE, MsgType.SESSION_END_ACK):
            assert "status" in f.payload
            assert "ref_seq" in f.payload
    violations = [e for e in events if isinstance(e, Violation)]
    if violations:
        assert session.state is SessionState.TERMINATED
        assert sent[-1].msg_type is MsgType.PROTOCOL_VIOLATION
        assert isinstance(events[-1], CloseConnection)
    if session.state is SessionState.TERMINATED and state is not SessionState.TERMINATED:
        assert any(isinstance(e, CloseConnection) for e in events)
    # Whatever happened, the session stays drivable: ticking never raises either.
    session.tick(10**9)
    assert session.state is SessionState.TERMINATED
