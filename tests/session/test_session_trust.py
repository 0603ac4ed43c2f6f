"""X.509 Ed25519 chains, trust claims in the hello, identity keys on disk, URIs."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from tests.session.session_kit import (
    CAPS,
    CLIENT_ID,
    NODE_ID,
    frames,
    handshake,
    make_local,
    make_pair,
    of,
)

from amcp.errors import ConfigError, ForbiddenError, UnauthorizedError, ValidationError
from amcp.session import (
    HandshakeComplete,
    HandshakeRejected,
    NodeIdentity,
    NodeType,
    NodeURI,
    SessionState,
    TrustConfig,
    TrustLevel,
)
from amcp.session.identity import fingerprint_hex
from amcp.session.trust import (
    certs_to_pem,
    create_anchor,
    evaluate_claim,
    issue_certificate,
    load_pem_chain,
    verify_chain,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=10)
ADDRESS = NodeURI.for_capabilities(NodeType.AI, "acme", CAPS, product="agent_1", region="eu-1")


@pytest.fixture(scope="module")
def pki() -> dict[str, object]:
    anchor, anchor_key = create_anchor("amcp test root", not_before=T0)
    inter_id = NodeIdentity.generate()
    inter = issue_certificate(
        anchor, anchor_key, inter_id.public_key, common_name="vendor", ca=True, not_before=T0
    )
    leaf = issue_certificate(
        inter, inter_id.private_key, CLIENT_ID.public_key, node_address=ADDRESS, not_before=T0
    )
    node_leaf = issue_certificate(anchor, anchor_key, NODE_ID.public_key, not_before=T0)
    return {
        "anchor": anchor,
        "anchor_key": anchor_key,
        "inter": inter,
        "inter_key": inter_id.private_key,
        "leaf": leaf,
        "node_leaf": node_leaf,
    }


def test_valid_chain_via_intermediate(pki: dict) -> None:
    got = verify_chain(
        [pki["leaf"], pki["inter"]],
        [pki["anchor"]],
        public_key=CLIENT_ID.public_key,
        at=NOW,
        node_address=ADDRESS,
    )
    assert got == pki["anchor"]
    # The chain may also carry the anchor itself.
    chain = [pki["leaf"], pki["inter"], pki["anchor"]]
    verify_chain(chain, [pki["anchor"]], public_key=CLIENT_ID.public_key, at=NOW)


def test_expired_and_not_yet_valid(pki: dict) -> None:
    chain = [pki["leaf"], pki["inter"]]
    with pytest.raises(UnauthorizedError, match="not valid"):
        verify_chain(
            chain, [pki["anchor"]], public_key=CLIENT_ID.public_key, at=T0 + timedelta(days=400)
        )
    with pytest.raises(UnauthorizedError, match="not valid"):
        verify_chain(
            chain, [pki["anchor"]], public_key=CLIENT_ID.public_key, at=T0 - timedelta(days=1)
        )


def test_wrong_anchor(pki: dict) -> None:
    other, _ = create_anchor("amcp test root", not_before=T0)  # same name, other key
    with pytest.raises(UnauthorizedError, match="anchor"):
        verify_chain([pki["leaf"], pki["inter"]], [other], public_key=CLIENT_ID.public_key, at=NOW)
    with pytest.raises(UnauthorizedError, match="anchor"):
        verify_chain([pki["leaf"], pki["inter"]], [], public_key=CLIENT_ID.public_key, at=NOW)


def test_key_mismatch(pki: dict) -> None:
    with pytest.raises(UnauthorizedError, match="public_key"):
        verify_chain(
            [pki["leaf"], pki["inter"]], [pki["anchor"]], public_key=NODE_ID.public_key, at=NOW
        )


def test_uri_in_certificate_must_name_the_node(pki: dict) -> None:
    other = NodeURI.for_capabilities(NodeType.AI, "evil", CAPS, region="eu-1")
    with pytest.raises(UnauthorizedError, match="not"):
        verify_chain(
            [pki["leaf"], pki["inter"]],
            [pki["anchor"]],
            public_key=CLIENT_ID.public_key,
            at=NOW,
            node_address=other,
        )
    # A capability upgrade changes the fingerprint but not who the node is.
    upgraded = NodeURI.for_capabilities(
        NodeType.AI, "acme", dict(CAPS, streaming=True), product="agent_1", region="eu-1"
    )
    verify_chain(
        [pki["leaf"], pki["inter"]],
        [pki["anchor"]],
        public_key=CLIENT_ID.public_key,
        at=NOW,
        node_address=upgraded,
    )


def test_basic_constraints(pki: dict) -> None:
    # A leaf (not a CA) cannot issue certificates.
    rogue_id = NodeIdentity.generate()
    rogue = issue_certificate(
        pki["leaf"], CLIENT_ID.private_key, rogue_id.public_key, not_before=T0
    )
    with pytest.raises(UnauthorizedError, match="not a CA"):
        verify_chain(
            [rogue, pki["leaf"], pki["inter"]],
            [pki["anchor"]],
            public_key=rogue_id.public_key,
            at=NOW,
        )
    # A CA certificate is no leaf.
    with pytest.raises(UnauthorizedError, match="CA"):
        verify_chain(
            [pki["inter"]],
            [pki["anchor"]],
            public_key=pki["inter"].public_key().public_bytes_raw(),
            at=NOW,
        )


def test_bad_signature_in_chain(pki: dict) -> None:
    forged = issue_certificate(
        pki["inter"], NodeIdentity.generate().private_key, CLIENT_ID.public_key, not_before=T0
    )
    with pytest.raises(UnauthorizedError, match="signed"):
        verify_chain(
            [forged, pki["inter"]], [pki["anchor"]], public_key=CLIENT_ID.public_key, at=NOW
        )


def test_pem_round_trip(pki: dict) -> None:
    pem = certs_to_pem([pki["leaf"], pki["inter"]])
    assert load_pem_chain(pem) == [pki["leaf"], pki["inter"]]
    with pytest.raises(UnauthorizedError):
        load_pem_chain("not pem")


def _verified_pair(
    pki: dict,
    *,
    client_level: TrustLevel,
    node_chain: bool,
    node_anchors: tuple[x509.Certificate, ...] | None = None,
) -> object:
    client_local = make_local(
        NodeType.AI,
        trust_level=client_level,
        cert_chain=certs_to_pem([pki["leaf"], pki["inter"]]),
    )
    node_kw = (
        {"trust_level": client_level, "cert_chain": certs_to_pem([pki["node_leaf"]])}
        if node_chain
        else {}
    )
    node_local = make_local(NodeType.DB, product="store", **node_kw)
    trust = TrustConfig(trust_local=False, anchors=(pki["anchor"],), wall=lambda: NOW)
    node_trust = trust
    if node_anchors is not None:
        node_trust = TrustConfig(anchors=node_anchors, wall=lambda: NOW)
    return make_pair(
        client_local=client_local, node_local=node_local, node_trust=node_trust, client_trust=trust
    )


def test_verified_handshake(pki: dict) -> None:
    pair = _verified_pair(pki, client_level=TrustLevel.VERIFIED, node_chain=True)
    client_events, node_events = handshake(pair)
    (done,) = of(node_events, HandshakeComplete)
    assert done.negotiated.granted_trust is TrustLevel.VERIFIED
    assert (
        of(client_events, HandshakeComplete)[0].negotiated.trust_granted_to_us
        is TrustLevel.VERIFIED
    )


def test_federated_needs_both_directions(pki: dict) -> None:
    pair = _verified_pair(pki, client_level=TrustLevel.FEDERATED, node_chain=True)
    _, node_events = handshake(pair)
    assert of(node_events, HandshakeComplete)[0].negotiated.granted_trust is TrustLevel.FEDERATED
    # The node holds no certificate of its own: it cannot federate.
    pair = _verified_pair(pki, client_level=TrustLevel.FEDERATED, node_chain=False)
    client_events, node_events = handshake(pair)
    assert frames(node_events)[-1].payload["status"] == 403
    assert of(client_events, HandshakeRejected)[0].status == 403
    assert pair.node.state is SessionState.TERMINATED


def test_unbacked_verified_claim_is_401(pki: dict) -> None:
    other_anchor, _ = create_anchor("elsewhere", not_before=T0)
    pair = _verified_pair(
        pki, client_level=TrustLevel.VERIFIED, node_chain=False, node_anchors=(other_anchor,)
    )
    _, node_events = handshake(pair)
    assert frames(node_events)[-1].payload["status"] == 401
    assert of(node_events, HandshakeRejected)[0].status == 401


def test_evaluate_claim_directly(pki: dict) -> None:
    pair = make_pair()
    hello = pair.client.local.hello(b"\0" * 16)
    with pytest.raises(ForbiddenError):
        evaluate_claim(hello, pair.node.local, TrustConfig(trust_local=False))
    assert evaluate_claim(hello, pair.node.local, TrustConfig(trust_local=True)) is TrustLevel.LOCAL


# ----------------------------------------------------------------------- identity & URI


def test_identity_save_load_with_0600(tmp_path: Path) -> None:
    identity = NodeIdentity.generate()
    path = identity.save(tmp_path / "keys")
    assert path.stat().st_mode & 0o777 == 0o600
    assert NodeIdentity.load(tmp_path / "keys").public_key == identity.public_key
    assert NodeIdentity.load_or_create(tmp_path / "keys").public_key == identity.public_key
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod"):
        NodeIdentity.load(tmp_path / "keys")
    with pytest.raises(ConfigError):
        NodeIdentity.load(tmp_path / "missing")


@pytest.mark.parametrize(
    "uri",
    [
        "amcp://ai.anthropic.claude-sonnet-4-6.fp-a3c9f2.us-east-1",
        "amcp://db.stepmind.sqlite-wal-v3.fp-7d2e11.local",
        "amcp://gateway.openclaw.fp-abcdef0123456789.global",
        "amcp://relay.acme.my_product.fp-abcdef.eu",
    ],
)
def test_uri_round_trip(uri: str) -> None:
    assert str(NodeURI.parse(uri)) == uri


@pytest.mark.parametrize(
    "uri",
    [
        "amcp://robot.acme.fp-abcdef.eu",  # unknown node_type
        "http://ai.acme.fp-abcdef.eu",
        "amcp://ai.Acme.fp-abcdef.eu",  # upper case
        "amcp://ai.acme.fp-abcde.eu",  # 5 hex digits
        "amcp://ai.acme.fp-abcdef0123456789a.eu",  # 17
        "amcp://ai.acme.fp-ABCDEF.eu",
        "amcp://ai.acme.abcdef.eu",
        "amcp://ai.ac_me.fp-abcdef.eu",  # _ only in product
        "amcp://ai.acme.x.y.fp-abcdef.eu",
        "amcp://ai.acme.fp-abcdef.eu.",
    ],
)
def test_bad_uris(uri: str) -> None:
    with pytest.raises(ValidationError):
        NodeURI.parse(uri)


def test_fingerprint_is_sha256_of_canonical_capabilities() -> None:
    import hashlib

    from amcp.amf.canonical import canonical_packb

    expected = hashlib.sha256(canonical_packb(CAPS)).hexdigest()[:16]
    assert fingerprint_hex(CAPS) == expected
    reordered = dict(reversed(list(CAPS.items())))
    assert fingerprint_hex(reordered) == expected
    assert ADDRESS.matches(CAPS)
    assert not ADDRESS.matches(dict(CAPS, streaming=True))
