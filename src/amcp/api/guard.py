"""Browser-facing request checks for the whole HTTP app (API, UI, MCP), as ASGI middleware.

A node on 127.0.0.1 is still reachable from any web page the user opens: the page cannot
read a cross-origin answer, but it can *send* requests, and with DNS rebinding (a hostname
the attacker controls re-pointed at 127.0.0.1) it can read them too. Three checks close
that, none of which needs a token:

- **Host**: the ``Host`` header must name this node: an IP literal (rebinding needs a
  hostname the attacker controls, so an IP is never one), ``localhost`` (browsers resolve
  it to loopback themselves), or a name the operator allowed (``allowed_hosts``).
  Anything else is 421 (Misdirected Request), before any route runs.
- **Cross-site writes**: an unsafe method (POST, PUT, PATCH, DELETE) whose ``Origin`` is
  not this node's own, or whose ``Sec-Fetch-Site`` says ``cross-site``/``same-site``, is
  403. Browsers send both on every cross-origin write; curl and agents send neither.
- **Headers**: every answer carries a strict Content-Security-Policy and its companions
  (``SECURITY_HEADERS``).
- **Simple bodies**: outside the UI's own form routes (which carry CSRF tokens,
  ``amcp.ui.session``), an unsafe request with a ``text/plain``, form or multipart body is
  415: those are the content types a page may send cross-site without a CORS preflight,
  and no API route takes them.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The CORS-safelisted request content types (Fetch standard): sent without a preflight.
SIMPLE_TYPES = frozenset(
    {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}
)
LOCAL_NAMES = frozenset({"localhost"})
# On every answer. Pages (``amcp.ui``) load only their own files: no inline script or
# style, no other origin, no framing; JSON answers are covered by the same header at no cost.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
     b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def host_name(header: str) -> str:
    """The host part of a ``Host`` header value, lower-case, without port or brackets."""
    value = header.strip().lower()
    if value.startswith("["):  # [::1]:8765
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostPolicy:
    """Which ``Host`` header values this node answers (see the module docstring)."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.names = LOCAL_NAMES | {host_name(a) for a in allowed if a}

    def allows(self, header: str | None) -> bool:
        if not header:
            return False  # HTTP/1.1 requires Host; uvicorn always passes one through
        name = host_name(header)
        return is_ip(name) or name in self.names or name.endswith(".localhost")


def _header(scope: Scope, key: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == key:
            return bytes(value).decode("latin-1")
    return None


def cross_site(scope: Scope, host: str) -> str | None:
    """Why an unsafe request looks like it came from another site, or None."""
    fetch_site = _header(scope, b"sec-fetch-site")
    if fetch_site in ("cross-site", "same-site"):
        return f"cross-site request refused (Sec-Fetch-Site: {fetch_site})"
    origin = _header(scope, b"origin")
    if origin is None:
        return None
    _scheme, sep, rest = origin.partition("://")
    if not sep or rest.rstrip("/").lower() != host.strip().lower():
        return f"cross-site request refused (Origin {origin!r} is not this node)"
    return None


def simple_body(scope: Scope) -> str | None:
    ctype = _header(scope, b"content-type")
    if ctype is None:
        return None
    base = ctype.partition(";")[0].strip().lower()
    return base if base in SIMPLE_TYPES else None


class RequestGuard:
    """The checks above as pure ASGI middleware. ``form_prefixes``: paths whose forms are
    protected by CSRF tokens instead (the UI), so form bodies are allowed there."""

    def __init__(
        self, app: ASGIApp, *, hosts: HostPolicy, form_prefixes: Sequence[str] = ()
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.form_prefixes = tuple(form_prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan; the app has no websocket routes
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if not self.hosts.allows(host):
            await _refuse(send, 421, f"Host {host!r} is not one this node answers "
                                     "(amcp http --allow-host NAME)")
            return
        if scope.get("method", "GET") in UNSAFE:
            assert host is not None
            why = cross_site(scope, host)
            if why is not None:
                await _refuse(send, 403, why)
                return
            path = str(scope.get("path", ""))
            ctype = simple_body(scope)
            if ctype is not None and not path.startswith(self.form_prefixes):
                await _refuse(send, 415, f"content type {ctype} is not accepted here "
                                         "(send application/json or application/x-ndjson)")
                return

        async def headed(message: Message) -> None:
            if message["type"] == "http.response.start":
                have = {bytes(k).lower() for k, _v in message.get("headers", ())}
                extra = [h for h in SECURITY_HEADERS if h[0] not in have]
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app(scope, receive, headed)


async def _refuse(send: Send, status: int, error: str) -> None:
    data = json.dumps({"status": status, "error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


__all__ = [
    "SECURITY_HEADERS", "HostPolicy", "RequestGuard", "cross_site", "host_name", "simple_body",
]
