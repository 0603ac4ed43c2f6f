"""amcp.node: the asyncio driver — a server and a client binding ``amcp.wire`` +
``amcp.session`` to a ``Memory`` (docs/protocol.md)."""

from __future__ import annotations

from amcp.node.client import Client, ReadResult, RetryPolicy, SyncClient, WriteAck, connect
from amcp.node.config import DEFAULT_PORT, Limits
from amcp.node.link import NodeUnavailable
from amcp.node.server import NodeServer, serve

__all__ = [
    "DEFAULT_PORT",
    "Client",
    "Limits",
    "NodeServer",
    "NodeUnavailable",
    "ReadResult",
    "RetryPolicy",
    "SyncClient",
    "WriteAck",
    "connect",
    "serve",
]
