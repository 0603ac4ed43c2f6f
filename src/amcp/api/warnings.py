"""The store's warnings on every HTTP answer: ``AMCP-Warning`` (one header per warning).

A record that fails verification is quarantined — left out of answers, never the reason a
request fails — so the caller must be told that something was left out. A header reaches
every endpoint (recall, list, export, context) without each one repeating the check.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"amcp-warning"


class IntegrityWarnings:
    """Pure ASGI middleware: adds ``AMCP-Warning`` headers while ``warnings()`` says so."""

    def __init__(self, app: ASGIApp, *, warnings: Callable[[], tuple[str, ...]]) -> None:
        self.app = app
        self.warnings = warnings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_warnings(message: Message) -> None:
            if message["type"] == "http.response.start":
                found = self.warnings()
                if found:
                    headers = list(message.get("headers", []))
                    # Header values must be latin-1; the texts are ASCII by construction.
                    headers += [(HEADER, w.encode("latin-1", "replace")) for w in found]
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_warnings)


__all__ = ["HEADER", "IntegrityWarnings"]
