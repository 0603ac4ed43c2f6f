"""amcp.node: the asyncio driver — a server and a client binding ``amcp.wire`` +
``amcp.session`` to a ``Memory`` (docs/protocol.md).

The names below load on first use (PEP 562): a client-only process (a coding-agent hook
talking to a running node) must not import the server, and with it ``Memory``, the store
and the retrieval stack.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amcp.node.client import Client, ReadResult, RetryPolicy, SyncClient, WriteAck, connect
    from amcp.node.config import DEFAULT_PORT, Limits
    from amcp.node.link import NodeUnavailable
    from amcp.node.runtime import run
    from amcp.node.server import NodeServer, serve

_WHERE = {
    **dict.fromkeys(("Client", "ReadResult", "RetryPolicy", "SyncClient", "WriteAck",
                     "connect"), "client"),
    "DEFAULT_PORT": "config",
    "Limits": "config",
    "NodeUnavailable": "link",
    "run": "runtime",
    "NodeServer": "server",
    "serve": "server",
}

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
    "run",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'amcp.node' has no attribute {name!r}")
    return getattr(import_module(f"amcp.node.{module}"), name)
