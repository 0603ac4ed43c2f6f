"""Timeouts through an injected clock: no sleeping, no real time."""

from __future__ import annotations

import pytest
from tests.session.session_kit import activate, frames, make_pair, of, session_in

from amcp.session import (
    CloseConnection,
    Role,
    SessionState,
    SessionSuspended,
    SessionTimedOut,
    SyncEnded,
    Timeouts,
)
from amcp.wire.constants import MsgType

S = SessionState
M = MsgType


def test_handshake_timeout_sends_408_and_closes() -> None:
    pair = make_pair()
    pair.client.start()
    start = pair.time.now
    assert pair.client.next_deadline() == start + 30
    assert pair.client.tick(start + 29.9) == []
    events = pair.client.tick(start + 30)
    assert of(events, SessionTimedOut)[0].state is S.HANDSHAKING
    (error,) = frames(events)
    assert error.msg_type is M.ERROR
    assert error.payload["status"] == 408
    assert error.payload["ref_seq"] == 0
    assert isinstance(events[-1], CloseConnection)
    assert pair.client.state is S.TERMINATED
    assert pair.client.next_deadline() is None


def test_init_timeout_closes_without_a_frame() -> None:
    pair = make_pair()
    events = pair.node.tick(pair.time.now + 30)
    assert not frames(events)  # nothing may precede our hello (T1-02)
    assert pair.node.state is S.TERMINATED


def test_cold_boot_timeout() -> None:
    node, pair = session_in(S.COLD_BOOTING, Role.NODE)
    assert node.next_deadline() == pair.time.now + 60
    assert node.tick(pair.time.now + 59) == []
    node.tick(pair.time.now + 60)
    assert node.state is S.TERMINATED


def test_active_warning_then_suspended_then_terminated() -> None:
    pair = make_pair()
    activate(pair)
    t0 = pair.time.now
    assert pair.node.next_deadline() == t0 + 3.5 * 3600
    events = pair.node.tick(t0 + 3.5 * 3600)
    assert of(events, SessionSuspended)
    assert pair.node.state is S.SUSPENDED
    assert pair.node.next_deadline() == t0 + 4 * 3600
    pair.node.tick(t0 + 4 * 3600)
    assert pair.node.state is S.TERMINATED


def test_late_tick_fires_every_passed_deadline() -> None:
    pair = make_pair()
    activate(pair)
    events = pair.node.tick(pair.time.now + 5 * 3600)
    assert of(events, SessionSuspended)
    assert of(events, SessionTimedOut)
    assert pair.node.state is S.TERMINATED


def test_resume_restarts_the_active_clock() -> None:
    pair = make_pair()
    activate(pair)
    pair.time.now += 3.5 * 3600
    pair.node.tick(pair.time.now)
    pair.time.now += 600
    pair.client.tick(pair.time.now)
    pair.node.receive(pair.client.send(M.HEALTH_CHECK))
    assert pair.node.state is S.ACTIVE
    assert pair.node.next_deadline() == pair.time.now + 3.5 * 3600


def test_sync_batch_timeout_returns_to_active() -> None:
    pair = make_pair()
    activate(pair)
    pair.client.send(M.SYNC_PUSH, {"changes": [], "origin": "c", "hops": 0})
    t0 = pair.time.now
    assert pair.client.next_deadline() == t0 + 120
    pair.time.now += 100
    pair.client.send(M.SYNC_PUSH, {"changes": [], "origin": "c", "hops": 0})  # next batch
    assert pair.client.next_deadline() == pair.time.now + 120
    events = pair.client.tick(pair.time.now + 120)
    assert of(events, SyncEnded)[0].timed_out
    assert pair.client.state is S.ACTIVE


def test_terminating_gives_up_waiting_for_the_ack() -> None:
    client, pair = session_in(S.TERMINATING, Role.CLIENT)
    events = client.tick(pair.time.now + 10)
    assert isinstance(events[-1], CloseConnection)
    assert client.state is S.TERMINATED


def test_timeouts_are_configurable() -> None:
    pair = make_pair(timeouts=Timeouts(handshaking=1, cold_booting=2, active_warning=3))
    pair.client.start()
    assert pair.client.next_deadline() == pair.time.now + 1
    with pytest.raises(ValueError, match="active_warning"):
        Timeouts(active_warning=5 * 3600)
