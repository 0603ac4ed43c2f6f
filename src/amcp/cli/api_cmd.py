"""``amcp mcp`` (MCP over stdio) and ``amcp http`` (HTTP API + MCP over streamable HTTP).

Listed in ``amcp.cli.commands`` (``mcp``, ``http``).

``python -m amcp.cli.api_cmd mcp --store ...`` runs the same commands standalone.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from amcp.cli.common import err, friendly, open_memory, store_location, warm_up
from amcp.cli.options import EmbedOpt, StoreOpt, group


@friendly
def mcp(store: StoreOpt = None, embedder: EmbedOpt = "auto") -> None:
    """Serve the memory tools over MCP stdio (for Claude Desktop, Claude Code, ...)."""
    from amcp.api.mcp_server import run_stdio

    # stdout is the MCP channel: nothing else may be printed there.
    with open_memory(store, embedder, create=True) as mem:
        warm_up(mem)  # stderr only: stdout is the MCP channel
        mem.flush_in_background()
        run_stdio(mem)


def _tokens(values: list[str] | None) -> dict[str, list[str]] | None:
    if not values:
        return None
    out: dict[str, list[str]] = {}
    for value in values:
        token, sep, scopes = value.partition("=")
        if not sep or not token or not scopes:
            raise typer.BadParameter(f"--token {value!r}: expected TOKEN=scope[,scope...]")
        out[token] = [s for s in scopes.split(",") if s]
    return out


@friendly
def http(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    store: StoreOpt = None,
    embedder: EmbedOpt = "auto",
    policy: Annotated[
        Path | None, typer.Option(help="Access policy (TOML/JSON) with bearer entries.")
    ] = None,
    token: Annotated[
        list[str] | None,
        typer.Option(help="TOKEN=scope[,scope]: a bearer token and its scopes (repeatable)."),
    ] = None,
    no_mcp: Annotated[bool, typer.Option("--no-mcp", help="Do not mount MCP at /mcp.")] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(help="A host name to answer besides IP addresses and localhost "
                          "(repeatable; other Host headers get 421, against DNS rebinding)."),
    ] = None,
) -> None:
    """Run the HTTP API (with MCP over streamable HTTP at /mcp) until interrupted."""
    import asyncio  # here, not at import: `amcp --help` loads every command module

    from amcp.api.serve import serve_http
    from amcp.heap import freeze_startup_heap
    from amcp.node.runtime import stop_on_signals
    from amcp.session.policy import AccessPolicy

    access = AccessPolicy.load(policy) if policy is not None else None
    tokens = _tokens(token)
    with open_memory(store, embedder, create=True) as mem:
        warm_up(mem)
        mem.flush_in_background()
        err.print(f"amcp HTTP API on http://{host}:{port}/v1 (store {store_location(store)})"
                  + ("" if no_mcp else f"; MCP at http://{host}:{port}/mcp")
                  + f"; inspector at http://{host}:{port}/ui")
        if access is None and tokens is None and host not in ("127.0.0.1", "::1", "localhost"):
            err.print("[yellow]warning[/yellow]: no --policy/--token: anyone may read and write")

        async def main() -> None:
            # SIGTERM/SIGINT end uvicorn gracefully and return here, so the Memory is
            # closed (buffered access counts written) instead of the process being killed.
            await serve_http(mem, host, port, policy=access, tokens=tokens, mcp=not no_mcp,
                             on_ready=lambda _port: freeze_startup_heap(),
                             stop=stop_on_signals(), allowed_hosts=allow_host or ())

        with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
            asyncio.run(main())


def _standalone() -> None:
    app = group()
    app.command("mcp")(mcp)
    app.command("http")(http)
    app()


if __name__ == "__main__":
    _standalone()
