"""Two Session objects (client and node) talking through Frames: handshake to goodbye."""

from __future__ import annotations

import uuid

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
from tests.session.session_kit import (
    CAPS,
    NODE_ID,
    WALL_MS,
    activate,
    frames,
    handshake,
    make_local,
    make_pair,
    of,
    pump,
)

from amcp.errors import LocalProtocolError, Status
from amcp.session import (
    ClockRejected,
    CloseConnection,
    DuplicateDropped,
    ErrorReceived,
    HandshakeComplete,
    HandshakeRejected,
    HelloReceived,
    NodeIdentity,
    NodeType,
    NodeURI,
    Request,
    Response,
    SessionActive,
    SessionEnded,
    SessionState,
    TrustConfig,
    Violation,
)
from amcp.session.hello import possession_message
from amcp.session.identity import b64url_decode, b64url_encode
from amcp.wire.constants import Flag, MsgType
from amcp.wire.frame import ZERO_SESSION, Frame

S = SessionState
M = MsgType


def test_full_handshake_and_cold_boot() -> None:
    pair = make_pair()
    hello = pair.client.start()
    assert hello.msg_type is M.CAPABILITY_HELLO
    assert hello.seq == 1
    assert hello.session_id == ZERO_SESSION
    assert hello.clock >> 16 == WALL_MS
    client_events, node_events = pump(pair.client, pair.node, [hello])

    # The node's first frame is its own hello (T1-02), then its signed response.
    sent_by_node = frames(node_events)
    assert [f.msg_type for f in sent_by_node] == [M.CAPABILITY_HELLO, M.CAPABILITY_RESPONSE]
    assert [f.seq for f in sent_by_node] == [1, 2]
    resp = sent_by_node[1].payload
    assert resp["status"] == 200
    assert resp["ref_seq"] == 1
    assert resp["trust_level"] == "local"
    assert of(node_events, HelloReceived)[0].hello.node_address == pair.client.local.address
    (done_c,) = of(client_events, HandshakeComplete)
    (done_n,) = of(node_events, HandshakeComplete)
    assert done_c.negotiated.peer.public_key == NODE_ID.public_key
    assert done_c.negotiated.compression
    assert done_n.negotiated.compression
    assert not done_c.negotiated.encryption
    assert pair.client.state is S.HANDSHAKING
    assert pair.node.state is S.HANDSHAKING

    request = pair.client.send(M.COLD_BOOT_REQUEST, {"task": "fix", "budget_tokens": 4000})
    assert request.session_id == ZERO_SESSION
    assert pair.client.state is S.COLD_BOOTING
    (req,) = pair.node.receive(request)
    assert isinstance(req, Request)
    assert pair.node.state is S.COLD_BOOTING
    response = pair.node.reply(req.frame, M.COLD_BOOT_RESPONSE, {"pack": {}})
    assert response.session_id != ZERO_SESSION
    assert uuid.UUID(bytes=response.session_id).version == 4
    assert response.payload["session_id"] == str(uuid.UUID(bytes=response.session_id))
    assert response.payload["ref_seq"] == request.seq
    assert response.payload["status"] == 200
    events = pair.client.receive(response)
    assert of(events, SessionActive)[0].session_id == response.session_id
    assert of(events, Response)[0].frame is response
    assert pair.client.state is S.ACTIVE
    assert pair.node.state is S.ACTIVE

    # From now on both sides stamp the assigned id.
    read = pair.client.send(M.MEMORY_READ, {"query": "x"})
    assert read.session_id == response.session_id
    (r,) = pair.node.receive(read)
    answer = pair.node.reply(r.frame, M.MEMORY_READ_RESPONSE, {"results": []})
    assert answer.session_id == response.session_id
    assert answer.payload["ref_seq"] == read.seq


def test_sequence_numbers_count_per_sender() -> None:
    pair = make_pair()
    activate(pair)
    a = pair.client.send(M.HEALTH_CHECK)
    b = pair.client.send(M.HEALTH_CHECK)
    assert b.seq == a.seq + 1
    (req,) = pair.node.receive(a)
    reply = pair.node.reply(req.frame, M.HEALTH_RESPONSE, {"state": "ACTIVE"})
    assert reply.payload == {"state": "ACTIVE", "ref_seq": a.seq, "status": 200}


def test_encryption_negotiation_exposes_x25519_for_the_codec() -> None:
    pair = make_pair(
        client_local=make_local(NodeType.AI, encryption=True),
        node_local=make_local(NodeType.DB, product="store", encryption=True),
    )
    client_events, node_events = handshake(pair)
    nc = of(client_events, HandshakeComplete)[0].negotiated
    nn = of(node_events, HandshakeComplete)[0].negotiated
    assert nc.encryption
    assert nn.encryption
    assert nc.x25519_private is not None
    assert nn.x25519_private is not None
    assert nc.peer_x25519 is not None
    assert nn.peer_x25519 is not None
    shared_c = nc.x25519_private.exchange(X25519PublicKey.from_public_bytes(nc.peer_x25519))
    shared_n = nn.x25519_private.exchange(X25519PublicKey.from_public_bytes(nn.peer_x25519))
    assert shared_c == shared_n


def test_encryption_needs_both_sides() -> None:
    pair = make_pair(client_local=make_local(NodeType.AI, encryption=True))
    client_events, _ = handshake(pair)
    negotiated = of(client_events, HandshakeComplete)[0].negotiated
    assert not negotiated.encryption
    assert negotiated.peer_x25519 is None


def test_forged_hello_is_caught_by_the_response_signature() -> None:
    """An attacker replays the node's public key in its own hello but cannot sign."""
    pair = make_pair()
    hello = pair.client.start()
    node_hello = pair.node.receive(hello)
    # The node's hello now claims a victim's key; its response is signed by its own key.
    real_hello, real_resp = frames(node_hello)
    victim = NodeIdentity.generate()
    forged = dict(real_hello.payload, public_key=victim.public_key_b64)
    pair.client.receive(Frame(M.CAPABILITY_HELLO, forged, seq=1))
    assert pair.client.state is S.HANDSHAKING
    events = pair.client.receive(real_resp)
    (violation,) = of(events, Violation)
    assert violation.status == Status.PROTOCOL_ERROR
    assert "signature" in violation.reason
    assert frames(events)[-1].msg_type is M.PROTOCOL_VIOLATION
    assert isinstance(events[-1], CloseConnection)
    assert pair.client.state is S.TERMINATED


def test_tampered_signature_is_a_violation() -> None:
    pair = make_pair()
    node_events = pair.node.receive(pair.client.start())
    hello, resp = frames(node_events)
    pair.client.receive(hello)
    sig = bytearray(b64url_decode(resp.payload["signature"]))
    sig[0] ^= 1
    bad = Frame(M.CAPABILITY_RESPONSE, dict(resp.payload, signature=b64url_encode(bytes(sig))), 2)
    events = pair.client.receive(bad)
    assert of(events, Violation)
    assert pair.client.state is S.TERMINATED


def test_signature_covers_nonce_and_address() -> None:
    pair = make_pair()
    node_events = pair.node.receive(pair.client.start())
    _, resp = frames(node_events)
    client_nonce = pair.node.peer.nonce if pair.node.peer else b""
    from amcp.session.identity import verify_signature

    msg = possession_message(client_nonce, pair.node.local.address)
    assert verify_signature(NODE_ID.public_key, b64url_decode(resp.payload["signature"]), msg)


def _hello_payload(**changes: object) -> dict[str, object]:
    pair = make_pair()
    payload = dict(pair.client.start().payload)
    payload.update(changes)
    return payload


def test_fingerprint_mismatch_is_a_violation() -> None:
    pair = make_pair()
    caps = dict(CAPS, vector_search=False)  # declared capabilities differ from the URI
    events = pair.node.receive(Frame(M.CAPABILITY_HELLO, _hello_payload(capabilities=caps), 1))
    (violation,) = of(events, Violation)
    assert "fingerprint" in violation.reason
    assert pair.node.state is S.TERMINATED


def test_six_digit_fingerprint_prefix_is_accepted() -> None:
    pair = make_pair()
    address = str(make_local(NodeType.AI).address)
    short = address.replace(address.split(".")[-2], address.split(".")[-2][:9])  # fp- + 6
    events = pair.node.receive(Frame(M.CAPABILITY_HELLO, _hello_payload(node_address=short), 1))
    assert not of(events, Violation)
    assert of(events, HelloReceived)


def test_unknown_node_type_is_a_violation() -> None:
    pair = make_pair()
    address = str(make_local(NodeType.AI).address).replace("amcp://ai.", "amcp://robot.")
    payload = _hello_payload(node_address=address, node_type="robot")
    events = pair.node.receive(Frame(M.CAPABILITY_HELLO, payload, 1))
    assert of(events, Violation)


def test_unsupported_major_version_is_701() -> None:
    pair = make_pair()
    events = pair.node.receive(Frame(M.CAPABILITY_HELLO, _hello_payload(amcp_version="2.0.0"), 1))
    assert of(events, Violation)[0].status == Status.VERSION_NOT_SUPPORTED


@pytest.mark.parametrize(
    "changes",
    [
        {"nonce": b64url_encode(b"short")},
        {"public_key": "not base64!"},
        {"trust_level": "root"},
        {"capabilities": ["not", "a", "map"]},
        {"node_type": "db"},  # disagrees with the URI
        {"amcp_version": 1},
    ],
)
def test_malformed_hello_is_a_violation(changes: dict[str, object]) -> None:
    pair = make_pair()
    events = pair.node.receive(Frame(M.CAPABILITY_HELLO, _hello_payload(**changes), 1))
    assert of(events, Violation)
    assert pair.node.state is S.TERMINATED


def test_local_trust_refused_when_not_configured() -> None:
    pair = make_pair(node_trust=TrustConfig(trust_local=False))
    client_events, node_events = handshake(pair)
    resp = frames(node_events)[-1]
    assert resp.msg_type is M.CAPABILITY_RESPONSE
    assert resp.payload["status"] == 403
    assert of(node_events, HandshakeRejected)[0].by_peer is False
    assert isinstance(node_events[-1], CloseConnection)
    assert pair.node.state is S.TERMINATED
    rejected = of(client_events, HandshakeRejected)
    assert rejected
    assert rejected[0].by_peer
    assert rejected[0].status == 403
    assert pair.client.state is S.TERMINATED


def test_cold_boot_before_handshake_is_refused_both_ways() -> None:
    pair = make_pair()
    pair.client.start()
    with pytest.raises(LocalProtocolError):
        pair.client.send(M.COLD_BOOT_REQUEST, {"task": "x", "budget_tokens": 1})
    node_events = pair.node.receive(Frame(M.CAPABILITY_HELLO, _hello_payload(), 1))
    assert not of(node_events, Violation)
    events = pair.node.receive(Frame(M.COLD_BOOT_REQUEST, {"task": "x"}, 2))
    assert of(events, Violation)[0].status == Status.STATE_VIOLATION


def test_cold_boot_error_allows_a_retry() -> None:
    pair = make_pair()
    handshake(pair)
    first = pair.client.send(M.COLD_BOOT_REQUEST, {"task": "x", "budget_tokens": 1})
    (req,) = pair.node.receive(first)
    refusal = pair.node.reply_error(req.frame, Status.FORBIDDEN, "scope not allowed")
    assert pair.node.state is S.HANDSHAKING
    events = pair.client.receive(refusal)
    assert of(events, ErrorReceived)[0].status == 403
    assert pair.client.state is S.HANDSHAKING
    again = pair.client.send(M.COLD_BOOT_REQUEST, {"task": "x", "budget_tokens": 1})
    (req,) = pair.node.receive(again)
    pair.client.receive(pair.node.reply(req.frame, M.COLD_BOOT_RESPONSE, {}))
    assert pair.client.state is S.ACTIVE


def test_request_with_clock_too_far_ahead_gets_412_and_is_not_merged() -> None:
    pair = make_pair()
    activate(pair)
    ahead = (WALL_MS + 61_000) << 16
    read = pair.client.send(M.MEMORY_READ, {"query": "x"})
    skewed = Frame(M.MEMORY_READ, read.payload, read.seq, read.session_id, ahead)
    merged_before = list(pair.node_clock.received)
    events = pair.node.receive(skewed)
    assert of(events, ClockRejected)
    assert not of(events, Request)
    (error,) = frames(events)
    assert error.msg_type is M.ERROR
    assert error.payload == {"status": 412, "reason": error.payload["reason"], "ref_seq": read.seq}
    assert pair.node_clock.received == merged_before
    assert pair.node.state is S.ACTIVE
    # 59 s ahead is within the drift budget.
    ok = Frame(M.MEMORY_READ, read.payload, read.seq + 1, read.session_id, (WALL_MS + 59_000) << 16)
    assert of(pair.node.receive(ok), Request)


def test_hello_with_clock_too_far_ahead_is_refused_412() -> None:
    pair = make_pair()
    hello = pair.client.start()
    skewed = Frame(M.CAPABILITY_HELLO, hello.payload, hello.seq, clock=(WALL_MS + 120_000) << 16)
    events = pair.node.receive(skewed)
    resp = frames(events)[-1]
    assert resp.msg_type is M.CAPABILITY_RESPONSE
    assert resp.payload["status"] == 412
    assert pair.node.state is S.TERMINATED


def test_real_hlc_plugs_in() -> None:
    clock_mod = pytest.importorskip("amcp.clock")
    from tests.session.session_kit import FakeTime

    from amcp.session import Role, Session

    hlc = clock_mod.HLC("n1", wall=lambda: WALL_MS)
    node = Session(Role.NODE, make_local(NodeType.DB), clock=hlc, monotonic=FakeTime())
    hello = Frame(M.CAPABILITY_HELLO, _hello_payload(), 1, clock=(WALL_MS + 120_000) << 16)
    events = node.receive(hello)
    assert frames(events)[-1].payload["status"] == 412
    assert hlc.last >> 16 == WALL_MS


def test_duplicate_sequence_numbers_are_dropped_and_reacked() -> None:
    pair = make_pair()
    activate(pair)
    write = pair.client.send(M.MEMORY_WRITE, {"amf": {}}, flags=Flag.REQUIRES_ACK)
    (req,) = pair.node.receive(write)
    ack = pair.node.reply(req.frame, M.MEMORY_WRITE_ACK, {"knowledge_id": "K-1"}, status=201)
    # The same frame again: not handed to the application, the ack is re-sent.
    events = pair.node.receive(write)
    assert not of(events, Request)
    assert of(events, DuplicateDropped)[0].reacked
    (again,) = frames(events)
    assert again.payload == ack.payload
    assert again.seq > ack.seq
    # Lower seq without REQUIRES_ACK: dropped silently.
    old = Frame(M.MEMORY_READ, {"query": "x"}, 1, write.session_id)
    events = pair.node.receive(old)
    assert events == [DuplicateDropped(1, reacked=False)]
    # Gaps are fine.
    gap = Frame(M.HEALTH_CHECK, {}, write.seq + 10, write.session_id)
    assert of(pair.node.receive(gap), Request)


def test_session_end_and_ack() -> None:
    pair = make_pair()
    activate(pair)
    end = pair.client.end("done", "summary")
    assert pair.client.state is S.TERMINATING
    events = pair.node.receive(end)
    assert of(events, SessionEnded)
    (ack,) = frames(events)
    assert ack.msg_type is M.SESSION_END_ACK
    assert ack.payload == {"status": 200, "ref_seq": end.seq}
    assert isinstance(events[-1], CloseConnection)
    assert pair.node.state is S.TERMINATED
    events = pair.client.receive(ack)
    assert isinstance(events[-1], CloseConnection)
    assert pair.client.state is S.TERMINATED
    with pytest.raises(LocalProtocolError):
        pair.client.send(M.HEALTH_CHECK)


def test_crossed_session_end_does_not_deadlock() -> None:
    pair = make_pair()
    activate(pair)
    end_c, end_n = pair.client.end(), pair.node.end()
    ack_to_c = frames(pair.client.receive(end_n))
    ack_to_n = frames(pair.node.receive(end_c))
    assert pair.client.state is S.TERMINATING
    assert pair.node.state is S.TERMINATING
    pair.client.receive(ack_to_n[0])
    pair.node.receive(ack_to_c[0])
    assert pair.client.state is S.TERMINATED
    assert pair.node.state is S.TERMINATED


def test_wrong_session_id_is_a_violation() -> None:
    pair = make_pair()
    activate(pair)
    read = pair.client.send(M.MEMORY_READ, {"query": "x"})
    forged = Frame(M.MEMORY_READ, read.payload, read.seq, b"\x01" * 16, read.clock)
    assert of(pair.node.receive(forged), Violation)


def test_role_direction_is_enforced() -> None:
    pair = make_pair()
    activate(pair)
    with pytest.raises(LocalProtocolError):
        pair.node.send(M.MEMORY_READ, {"query": "x"})
    sid = pair.node.session_id
    events = pair.node.receive(Frame(M.MEMORY_READ_RESPONSE, {"status": 200}, 99, sid))
    assert of(events, Violation)


def test_peer_address_is_exposed_for_policy() -> None:
    pair = make_pair()
    assert pair.node.principal is None
    handshake(pair)
    principal = pair.node.principal
    assert principal is not None
    assert principal.public_key == pair.client.local.identity.public_key
    assert NodeURI.parse(str(pair.client.local.address)) == pair.client.local.address
