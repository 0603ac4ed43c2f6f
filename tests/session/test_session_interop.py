"""T2-08 interoperability: every handshake form PROFILE §3–§4 allows is accepted.

A client written from the profile or from upstream may spell the CAPABILITY_RESPONSE
features as booleans (upstream's form for capability flags) and send short versions and
fingerprints; each is taken here through a real pair of sessions. The response's
signature covers only ``peer_nonce ‖ address``, so rewriting the feature fields of a
genuine response keeps it valid — exactly what another implementation would send.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.session.session_kit import frames, make_local, make_pair, of

from amcp.session import HandshakeComplete, NodeType, SessionState, Violation
from amcp.session.hello import CapabilityResponse
from amcp.wire.constants import MsgType
from amcp.wire.frame import Frame

M = MsgType


def _client_sees(response_changes: dict[str, Any], *, encryption: bool = False) -> list[Any]:
    """Handshake in which the node's CAPABILITY_RESPONSE is rewritten before the client
    reads it; returns the client's events for that response."""
    pair = make_pair(
        client_local=make_local(NodeType.AI, encryption=encryption),
        node_local=make_local(NodeType.DB, product="store", encryption=encryption),
    )
    node_hello, node_resp = frames(pair.node.receive(pair.client.start()))
    client_events = pair.client.receive(node_hello)
    payload = dict(node_resp.payload, **response_changes)
    for key, value in response_changes.items():
        if value is None:
            del payload[key]
    events = pair.client.receive(Frame(M.CAPABILITY_RESPONSE, payload, node_resp.seq))
    # The client's own response went to the node with its hello; the node completes too.
    for frame in frames(client_events):
        pair.node.receive(frame)
    return events


@pytest.mark.parametrize(
    ("value", "agreed"),
    [(True, True), (False, False), ("lz4", True), ("none", False), ("LZ4", True),
     ("zstd", False)],
)
def test_compression_in_every_allowed_form(value: object, agreed: bool) -> None:
    events = _client_sees({"compression": value})
    assert not of(events, Violation)
    (done,) = of(events, HandshakeComplete)
    assert done.negotiated.compression is agreed


@pytest.mark.parametrize(
    ("value", "agreed"),
    [(True, True), (False, False), ("aes-256-gcm", True), ("none", False),
     ("chacha20", False)],
)
def test_encryption_in_every_allowed_form(value: object, agreed: bool) -> None:
    events = _client_sees({"encryption": value}, encryption=True)
    assert not of(events, Violation)
    (done,) = of(events, HandshakeComplete)
    assert done.negotiated.encryption is agreed


def test_boolean_true_without_a_key_does_not_turn_encryption_on() -> None:
    # encryption: true but no X25519 key: nothing to derive a key from, so it stays off.
    events = _client_sees({"encryption": True, "x25519": None}, encryption=True)
    (done,) = of(events, HandshakeComplete)
    assert not done.negotiated.encryption


@pytest.mark.parametrize("value", [None, 1, 0, {"algo": "lz4"}, ["lz4"]])
def test_compression_missing_or_of_another_type_is_a_violation(value: object) -> None:
    events = _client_sees({"compression": value})
    (violation,) = of(events, Violation)
    assert "compression" in violation.reason


def test_parsing_normalises_to_the_profile_form() -> None:
    base = {"status": 200, "accepted_version": "1.0", "signature": "A" * 86,
            "trust_level": "local", "max_payload": 1024}
    resp = CapabilityResponse.from_payload({**base, "compression": True, "encryption": False})
    assert (resp.compression, resp.encryption) == ("lz4", "none")
    assert resp.to_payload(1)["compression"] == "lz4"


@pytest.mark.parametrize("version", ["1.0", "1.0.0", "1.3", "1.3.7"])
def test_any_1_x_version_is_accepted_in_hello_and_response(version: str) -> None:
    events = _client_sees({"accepted_version": version})
    assert of(events, HandshakeComplete)
    pair = make_pair()
    hello = dict(pair.client.start().payload, amcp_version=version)
    node_events = pair.node.receive(Frame(M.CAPABILITY_HELLO, hello, 1))
    assert not of(node_events, Violation)
    assert pair.node.state is SessionState.HANDSHAKING


@pytest.mark.parametrize("digits", [6, 8, 12, 16])
def test_fingerprints_of_6_to_16_digits_are_accepted(digits: int) -> None:
    pair = make_pair()
    address = str(make_local(NodeType.AI).address)
    fp = address.split(".")[-2]
    short = address.replace(fp, fp[: 3 + digits])  # "fp-" + digits
    hello = dict(pair.client.start().payload, node_address=short)
    assert not of(pair.node.receive(Frame(M.CAPABILITY_HELLO, hello, 1)), Violation)
