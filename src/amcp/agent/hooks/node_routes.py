"""The node side of the hooks' HTTP channel: ``POST /v1/hooks/<op>`` (docs/http.md).

Installed by ``amcp serve`` (``create_app(..., hook_token=…)``) and answered from the
node's ``Memory``, through the very ``LocalBackend`` code a hook without a node would use
for writes — so a hook's answer does not depend on which side computed it, except that
the node's recall is hybrid (its embedder is loaded) where the file's is lexical.

The routes take the runtime file's token in ``X-AMCP-Hook-Token`` (compared in constant
time) instead of the API's bearer tokens: the token is as strong as read access to the
store directory (docs/hooks.md, Discovery). They are left out of the OpenAPI document.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

# The capture rules cost ~0.3 s to import; the node pays that once, when it installs these
# routes at start, so the first prompt hook does not (and stays inside its read timeout).
from amcp.agent.capture_store import CaptureWriter, default_scopes
from amcp.agent.hooks.claude_code import relevant
from amcp.agent.hooks.fastpath import LocalBackend, MemoryLine, NewMemory
from amcp.agent.hooks.nodehttp import PREFIX, TOKEN_HEADER
from amcp.errors import ValidationError
from amcp.memory import Memory

MAX_LIMIT = 500
MAX_TEXT = 64 * 1024


def _rows(lines: list[MemoryLine]) -> list[list[Any]]:
    return [[ln.knowledge_id, ln.type, ln.scope, ln.weight, ln.text, ln.kind, ln.label]
            for ln in lines]


def _strs(body: dict[str, Any], key: str, *, optional: bool = False) -> list[str] | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, list) or len(value) > 100 or not all(
            isinstance(v, str) and 0 < len(v) <= 256 for v in value):
        raise ValidationError(key, "a list of up to 100 scope/kind names")
    return value


def _str(body: dict[str, Any], key: str, *, optional: bool = False,
         limit: int = MAX_TEXT) -> str | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise ValidationError(key, f"a string of at most {limit} characters")
    return value


def _int(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LIMIT:
        raise ValidationError(key, f"an integer from 1 to {MAX_LIMIT}")
    return value


def _new_memory(body: dict[str, Any]) -> NewMemory:
    tags = _strs(body, "tags", optional=True) or []
    ext = body.get("extensions")
    if ext is not None and not isinstance(ext, dict):
        raise ValidationError("extensions", "an object")
    conf = body.get("confidence", 0.8)
    if not isinstance(conf, int | float) or isinstance(conf, bool) or not 0 <= conf <= 1:
        raise ValidationError("confidence", "a number from 0 to 1")
    sensitive = body.get("sensitive", False)
    if not isinstance(sensitive, bool):
        raise ValidationError("sensitive", "a boolean")
    return NewMemory(
        text=_str(body, "text") or "", type=_str(body, "type", limit=64) or "",
        scope=_str(body, "scope", limit=256) or "", kind=_str(body, "kind", limit=64) or "",
        tags=tuple(tags), session=_str(body, "session", optional=True, limit=256),
        subject=_str(body, "subject", optional=True, limit=512),
        predicate=_str(body, "predicate", limit=64) or "EQUALS",
        object=_str(body, "object", optional=True), confidence=float(conf),
        extensions=ext, sensitive=sensitive,
    )


Op = Callable[[dict[str, Any]], dict[str, Any]]


class HookOps:
    """The hook ops over one ``Memory``, each taking the request's JSON body; ``locked(fn,
    *args)`` runs ``fn`` under the API's per-memory lock (the one every other route takes)."""

    def __init__(self, memory: Memory, locked: Callable[..., Any]) -> None:
        self.backend = LocalBackend(memory)  # never closed here: the node owns the Memory
        self.locked = locked

    def table(self) -> dict[str, Op]:
        return {"session-start": self.session_start, "pointers": self.pointers,
                "recall": self.recall, "user-scopes": self.user_scopes,
                "remember": self.remember, "capture": self.capture}

    def pointers(self, body: dict[str, Any]) -> dict[str, Any]:
        scopes = _strs(body, "scopes") or []
        kinds = _strs(body, "kinds", optional=True)
        return {"lines": _rows(self.locked(self.backend.pointers, scopes, _int(body, "limit"),
                                           kinds))}

    def recall(self, body: dict[str, Any]) -> dict[str, Any]:
        query = _str(body, "query") or ""
        scopes = _strs(body, "scopes") or []
        lines = self.locked(self.backend.recall, query, scopes, _int(body, "k"))
        if body.get("relevant") is True:  # the prompt hook's filter, done here
            lines = [ln for ln in lines if relevant(query, ln.text)]
        return {"lines": _rows(lines)}

    def user_scopes(self, _body: dict[str, Any]) -> dict[str, Any]:
        return {"scopes": list(self.locked(self.backend.user_scopes))}

    def session_start(self, body: dict[str, Any]) -> dict[str, Any]:
        scope = _str(body, "scope", optional=True, limit=256)
        limit = _int(body, "limit")
        kinds = _strs(body, "kinds", optional=True)
        backend = self.backend

        def run() -> dict[str, Any]:
            users = backend.user_scopes()
            return {"user_scopes": list(users),
                    "project": _rows(backend.pointers([scope], limit) if scope else []),
                    "preferences": _rows(backend.pointers(list(users), limit, kinds)
                                         if users else [])}

        return self.locked(run)  # type: ignore[no-any-return]

    def remember(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"knowledge_id": self.locked(self.backend.remember, _new_memory(body))}

    def capture(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = _str(body, "prompt") or ""
        session = _str(body, "session", limit=256) or "unknown-session"
        scopes = default_scopes(project=_str(body, "project_scope", optional=True, limit=256),
                                user=_str(body, "user_scope", optional=True, limit=256))
        backend = self.backend

        def run() -> list[str]:
            writer = CaptureWriter.for_backend(backend, scopes=scopes, session=session)
            stored = writer.feed({"role": "user", "content": prompt})
            return [f"remembered {(s.knowledge_id or '')[:14]} ({s.x_kind})" for s in stored]

        return {"notes": self.locked(run) if prompt.strip() else []}


def install_hook_routes(app: FastAPI, memory: Memory, token: str,
                        locked: Callable[..., Any]) -> None:
    """Add ``POST /v1/hooks/{op}`` over ``HookOps(memory, locked)``, taking ``token``."""
    hooks = HookOps(memory, locked)
    ops = hooks.table()
    want = token.encode("utf-8")

    @app.post(PREFIX + "{op}", include_in_schema=False)
    def hook_op(op: str, body: dict[str, Any], request: Request) -> JSONResponse:
        given = request.headers.get(TOKEN_HEADER, "").encode("utf-8")
        if not hmac.compare_digest(given, want):
            return JSONResponse({"status": 401, "error": "hook token missing or wrong"},
                                status_code=401)
        handler = ops.get(op)
        if handler is None:
            return JSONResponse({"status": 404, "error": f"no hook op {op!r}"},
                                status_code=404)
        # An AmcpError (a bad field, a locked store) becomes the API's problem body.
        answer = handler(body)
        found = locked(hooks.backend.warnings)  # records left out of this answer, if any
        return JSONResponse({**answer, "warnings": list(found)} if found else answer)


__all__ = ["HookOps", "install_hook_routes"]
