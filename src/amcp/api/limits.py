"""A request-body cap as pure ASGI middleware.

Checked on ``Content-Length`` before reading, and counted while reading for chunked
bodies, so an oversized upload is refused with 413 without being buffered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    def __init__(
        self, app: ASGIApp, *, default: int, overrides: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.default = default
        self.overrides = dict(overrides or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.overrides.get(scope.get("path", ""), self.default)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > limit:
                    await _refuse(send, limit)
                    return
        seen = 0
        over = False

        async def counted() -> Message:
            # FastAPI turns any exception raised while reading the body into its own 400,
            # so an oversized chunked body is cut short here and the answer replaced below.
            nonlocal seen, over
            if over:
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    over = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded(message: Message) -> None:
            if not over:
                await send(message)
            elif message["type"] == "http.response.start":
                await _refuse(send, limit)

        await self.app(scope, counted, guarded)


async def _refuse(send: Send, limit: int) -> None:
    body: dict[str, Any] = {"status": 413, "error": f"request body larger than {limit} bytes"}
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


__all__ = ["BodyLimit"]
