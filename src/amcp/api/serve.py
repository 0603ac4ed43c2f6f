"""One process serving the HTTP API and MCP (streamable HTTP at ``/mcp``) over one Memory.

``amcp serve`` and ``amcp http`` call ``serve_http``; tests call ``build_server_app`` and
run it under uvicorn themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from amcp.api.http import create_app
from amcp.api.mcp_server import build_mcp
from amcp.errors import AmcpError, ForbiddenError
from amcp.memory import Memory
from amcp.session.policy import AccessPolicy, Mode
from amcp.sync.view import SyncView
from amcp.web.access import authenticate, build_policy
from amcp.web.errors import problem_for

MCP_PATH = "/mcp"


def build_server_app(
    memory: Memory,
    *,
    host: str = "127.0.0.1",
    policy: AccessPolicy | None = None,
    tokens: Mapping[str, Sequence[str]] | None = None,
    mcp: bool = True,
    hook_token: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> FastAPI:
    """The HTTP API with the MCP streamable-HTTP transport mounted at ``/mcp``.

    ``host`` matters to MCP: on a loopback host the SDK turns on DNS-rebinding protection
    (Host/Origin must be loopback). With auth configured, ``/mcp`` needs a bearer token
    that may read and write every scope ('*'): MCP tools do not carry per-scope checks.
    ``hook_token`` adds the coding-agent hooks' routes (``amcp.agent.hooks.node_routes``).
    ``allowed_hosts``: host names answered besides IP literals and localhost
    (``amcp.api.guard``; the web inspector at ``/ui`` comes with the app).
    """
    if not mcp:
        return create_app(memory, policy=policy, tokens=tokens, hook_token=hook_token,
                          allowed_hosts=allowed_hosts)
    server = build_mcp(memory)
    sub = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # A mounted Starlette app's own lifespan does not run; the session manager does
        # need its task group, so the API's lifespan runs it.
        async with server.session_manager.run():
            yield

    app = create_app(memory, policy=policy, tokens=tokens, lifespan=lifespan,
                     hook_token=hook_token, allowed_hosts=allowed_hosts)
    access = build_policy(policy, tokens)
    app.router.routes.append(
        Route(MCP_PATH, endpoint=_McpGate(sub, access), include_in_schema=False)
    )
    return app


class _McpGate:
    """Bearer check in front of the MCP transport (when auth is configured)."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy | None) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.policy is not None and scope["type"] == "http":
            header = dict(scope.get("headers", ())).get(b"authorization")
            try:
                who = authenticate(self.policy, header.decode("latin-1") if header else None)
                who.check_everything(Mode.READ, "MCP")
                who.check_everything(Mode.WRITE, "MCP")
            except (AmcpError, ForbiddenError) as exc:
                await _problem(send, exc)
                return
        await self.app(scope, receive, send)


async def _problem(send: Send, exc: AmcpError) -> None:
    import json

    p = problem_for(exc)
    data = json.dumps(p.body()).encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    if p.http_status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": p.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def serve_http(
    memory: Memory,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    policy: AccessPolicy | None = None,
    tokens: Mapping[str, Sequence[str]] | None = None,
    mcp: bool = True,
    log_level: str = "warning",
    hook_token: str | None = None,
    on_ready: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
    allowed_hosts: Sequence[str] = (),
    sync_status: Callable[[], dict[str, int]] | None = None,
    sync_view: Callable[[], SyncView] | None = None,
    **uvicorn_options: Any,
) -> None:
    """Serve the HTTP API (and MCP at ``/mcp`` unless ``mcp=False``) until cancelled or
    interrupted. Runs in the caller's event loop, so ``amcp serve`` can run it next to
    the AMCP node with ``asyncio.gather``. ``on_ready(port)`` is called once the socket
    listens (``amcp serve`` then writes the node's runtime file; ``port`` is the bound
    one, which matters for ``port=0``).

    ``stop``: the caller owns the process's signals (``amcp.node.runtime.stop_on_signals``)
    and sets this event to shut down; uvicorn then installs no handlers of its own. Left
    to itself, uvicorn catches SIGINT/SIGTERM, shuts down, and raises the signal again
    with the handler it found — which in a process that ignores SIGINT, or has no SIGTERM
    handler, leaves the rest of the process running or kills it before its cleanup.

    ``sync_status`` (totals, for ``/v1/health``) and ``sync_view`` (everything, for the
    inspector's peers page) come from the node's replicator when this process runs one."""
    import uvicorn

    app = build_server_app(memory, host=host, policy=policy, tokens=tokens, mcp=mcp,
                           hook_token=hook_token, allowed_hosts=allowed_hosts)
    app.state.sync_status = sync_status
    app.state.ui.sync = sync_view  # the inspector's peers page (/ui/peers)
    if stop is not None:
        # Bounded: open keep-alive or streaming (MCP) connections must not hold a stop.
        uvicorn_options.setdefault("timeout_graceful_shutdown", 5)
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, lifespan="on", **uvicorn_options
    )
    server = uvicorn.Server(config) if stop is None else _signal_free_server(config)
    watchers: list[asyncio.Task[None]] = []
    if on_ready is not None:
        watchers.append(asyncio.create_task(_announce(server, port, on_ready)))
    if stop is not None:
        watchers.append(asyncio.create_task(_stop_on(server, stop)))
    try:
        await server.serve()
    finally:
        for task in watchers:
            task.cancel()


async def _announce(server: Any, port: int, on_ready: Callable[[int], None]) -> None:
    """``on_ready(bound port)`` once uvicorn listens (nothing if it exits first)."""
    while not server.started:
        if server.should_exit:
            return
        await asyncio.sleep(0.02)
    bound = port
    for srv in getattr(server, "servers", ()):
        for sock in srv.sockets:
            bound = int(sock.getsockname()[1])
            break
    on_ready(bound)


async def _stop_on(server: Any, event: asyncio.Event) -> None:
    await event.wait()
    server.should_exit = True


def _signal_free_server(config: Any) -> Any:
    """A uvicorn server that leaves the process's signals to its owner (see ``stop``);
    built here so importing this module does not import uvicorn."""
    import uvicorn

    class SignalFreeServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return SignalFreeServer(config)


__all__ = ["MCP_PATH", "build_server_app", "serve_http"]
