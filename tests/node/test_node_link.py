"""Link (the client's connection driver) on its own: a node that stops reading is given up
on after write_timeout; request deadlines fail only the requests that ran out of time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from amcp.clock import HLC, node_tag
from amcp.node.config import local_node
from amcp.node.link import Link, NodeUnavailable
from amcp.session import NodeIdentity, NodeType, Role, Session, TrustConfig
from amcp.wire import MsgType


class FakeTransport:
    """Swallows writes; records close/abort."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing


def _link(write_timeout: float = 0.05) -> tuple[Link, FakeTransport]:
    identity = NodeIdentity.generate()
    session = Session(Role.CLIENT, local_node(identity, NodeType.AI),
                      clock=HLC(node_tag(identity.public_key_b64)), monotonic=time.monotonic,
                      trust=TrustConfig(trust_local=True))
    link = Link(session, write_timeout=write_timeout)
    transport = FakeTransport()
    fake: Any = transport
    link.connection_made(fake)
    return link, transport


def test_a_node_that_never_reads_is_given_up_on() -> None:
    async def main() -> None:
        link, transport = _link()
        assert transport.written  # our hello went out at once
        link.pause_writing()
        reason = await asyncio.wait_for(link.closed, 2.0)
        assert reason == "the node does not read"
        assert transport.closing

    asyncio.run(main())


def test_a_node_that_catches_up_is_kept() -> None:
    async def main() -> None:
        link, _ = _link()
        link.pause_writing()
        link.resume_writing()
        await asyncio.sleep(0.15)
        assert link.alive
        link.close("done")

    asyncio.run(main())


def test_request_deadlines_fail_only_late_requests() -> None:
    async def main() -> None:
        link, _ = _link(write_timeout=60.0)
        # HEALTH_CHECK is allowed during the handshake, so no node is needed to send it.
        quick, _ = link.submit(MsgType.HEALTH_CHECK, {}, timeout=0.05)
        slow, _ = link.submit(MsgType.HEALTH_CHECK, {}, timeout=30.0)
        untimed, _ = link.submit(MsgType.HEALTH_CHECK, {})
        await asyncio.wait([quick], timeout=2.0)
        assert "no answer from the node in 0.05 s" in str(quick.exception())
        assert not slow.done()
        assert not untimed.done()
        assert len(link.pending) == 2
        link.close("done")
        assert "connection closed" in str(slow.exception())
        assert isinstance(slow.exception(), NodeUnavailable)

    asyncio.run(main())
