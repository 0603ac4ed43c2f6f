"""Channel (sans-IO): a message over max_payload goes out as fragments, and the session's
SEQUENCE_NUMBER counter moves past every fragment — no number (hence no AES-GCM nonce) is
ever used twice on one connection."""

from __future__ import annotations

import time

import pytest

from amcp.clock import HLC, node_tag
from amcp.errors import LocalProtocolError
from amcp.node.channel import Channel
from amcp.node.config import local_node
from amcp.session import (
    NodeIdentity,
    NodeType,
    Request,
    Response,
    Role,
    Session,
    SessionState,
    TrustConfig,
)
from amcp.wire import HEADER_SIZE, Flag, MsgType, parse_header

M = MsgType
SMALL = 1024  # both sides' max_payload: a 5 KB payload needs several fragments


def _pair(*, encryption: bool, max_payload: int = SMALL) -> tuple[Channel, Channel]:
    def channel(role: Role, kind: NodeType) -> Channel:
        identity = NodeIdentity.generate()
        local = local_node(identity, kind, encryption=encryption, max_payload=max_payload)
        session = Session(role, local, clock=HLC(node_tag(identity.public_key_b64)),
                          monotonic=time.monotonic, trust=TrustConfig(trust_local=True))
        return Channel(session, max_payload=max_payload)

    return channel(Role.CLIENT, NodeType.AI), channel(Role.NODE, NodeType.DB)


def _headers(data: bytes) -> list[tuple[int, int]]:
    """(seq, flags) of every wire frame in ``data``."""
    out, pos = [], 0
    while pos < len(data):
        head = parse_header(data[pos:pos + HEADER_SIZE])
        out.append((head.seq, head.flags))
        pos += HEADER_SIZE + head.payload_length
    return out


def _pump(client: Channel, node: Channel) -> list[Request]:
    """Move bytes both ways until quiet; the node answers cold boots, returns other requests."""
    requests: list[Request] = []
    for _ in range(8):
        up, down = client.take_output(), node.take_output()
        if not up and not down:
            break
        for event in node.feed(up):
            if isinstance(event, Request):
                if event.frame.msg_type is M.COLD_BOOT_REQUEST:
                    node.reply(event.frame, M.COLD_BOOT_RESPONSE, {"pack": {}})
                else:
                    requests.append(event)
        client.feed(down)
    return requests


def _booted(*, encryption: bool) -> tuple[Channel, Channel]:
    client, node = _pair(encryption=encryption)
    client.start()
    node.start()
    _pump(client, node)
    client.send(M.COLD_BOOT_REQUEST, {"task": "t"})
    _pump(client, node)
    assert client.session.state is SessionState.ACTIVE
    return client, node


@pytest.mark.parametrize("encryption", [False, True])
def test_fragmented_write_advances_the_sequence_counter(encryption: bool) -> None:
    client, node = _booted(encryption=encryption)
    big = client.send(M.MEMORY_WRITE, {"amf": {"text": "x" * 5000}}, Flag.REQUIRES_ACK)
    wire = client.take_output()
    fragments = _headers(wire)
    assert len(fragments) > 1
    assert all(flags & Flag.FRAGMENTED for _, flags in fragments)
    assert [seq for seq, _ in fragments] == list(range(big.seq, big.seq + len(fragments)))
    # The next frame continues after the last fragment, exactly as after a single frame.
    after = client.send(M.MEMORY_READ, {"ids": []})
    assert after.seq == big.seq + len(fragments)
    wire += client.take_output()
    seqs = [seq for seq, _ in _headers(wire)]
    assert seqs == sorted(set(seqs))  # strictly increasing: no number used twice
    # The node gets both messages, the write whole, and answers each under its own seq.
    got = [r.frame for r in node.feed(wire) if isinstance(r, Request)]
    assert [(f.msg_type, f.seq) for f in got] == [(M.MEMORY_WRITE, big.seq),
                                                  (M.MEMORY_READ, after.seq)]
    assert got[0].payload["amf"]["text"] == "x" * 5000
    for frame in got:
        node.reply(frame, M.MEMORY_WRITE_ACK if frame is got[0] else M.MEMORY_READ_RESPONSE, {})
    answers = [e.frame for e in client.feed(node.take_output()) if isinstance(e, Response)]
    assert [a.payload["ref_seq"] for a in answers] == [big.seq, after.seq]


def test_single_frames_use_one_number_each() -> None:
    client, _ = _booted(encryption=False)
    first = client.send(M.MEMORY_READ, {"ids": []})
    second = client.send(M.MEMORY_READ, {"ids": []})
    assert second.seq == first.seq + 1
    assert len(_headers(client.take_output())) == 2


def test_consume_seqs_refuses_bad_counts() -> None:
    client, _ = _booted(encryption=False)
    session = client.session
    with pytest.raises(ValueError, match="negative"):
        session.consume_seqs(-1)
    with pytest.raises(LocalProtocolError, match="overflow"):
        session.consume_seqs(1 << 64)
    before = client.send(M.MEMORY_READ, {"ids": []}).seq
    session.consume_seqs(0)
    assert client.send(M.MEMORY_READ, {"ids": []}).seq == before + 1
