"""What every HTTP route works through: the ``Memory``, its access policy and its lock.

``create_app`` builds one ``ApiContext`` and keeps it on ``app.state.api``; the routers of
``amcp.api.routes_*`` are module-level ``APIRouter`` objects whose handlers find it with
``api_of(request)``, so one router serves every app built in a process without a global.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, cast

from fastapi import Path, Request

from amcp.amf.record import AMFRecord
from amcp.api import schemas as s
from amcp.errors import GoneError, NotFoundError
from amcp.memory import Memory
from amcp.session.policy import AccessPolicy, Mode
from amcp.web.access import Caller, authenticate

T = TypeVar("T")

MAX_PAGE = 500  # records per list page: one answer a client holds whole

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ProblemOut, "description": text}
    for code, text in (
        (400, "Invalid request (the field is named)"),
        (401, "Bearer token missing or unknown"),
        (403, "Token not allowed this scope"),
        (404, "No such record"),
        (409, "Conflicting state"),
        (410, "Record purged or invalidated"),
        (412, "Precondition failed"),
        (413, "Body too large"),
        (503, "Unavailable"),
    )
}

KnowledgeId = Annotated[str, Path(min_length=1, max_length=s.MAX_NAME)]


@dataclass(frozen=True, slots=True)
class Visible:
    """A stored record the caller may see (never a tombstone): its whole id and body."""

    knowledge_id: str
    record: AMFRecord


@dataclass(frozen=True, slots=True)
class ApiContext:
    """``memory`` served under ``lock`` (shared with the MCP server and the inspector over
    the same ``Memory``: ``amcp.api.gate``); ``access`` is None when auth is off."""

    memory: Memory
    access: AccessPolicy | None
    lock: threading.RLock

    def locked(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self.lock:
            return fn(*args, **kwargs)

    def caller(self, request: Request) -> Caller:
        return authenticate(self.access, request.headers.get("authorization"))

    def visible(self, who: Caller, knowledge_id: str) -> Visible:
        """The stored record ``knowledge_id`` (a whole id or a unique prefix) names if the
        caller may see it; 404 otherwise (scopes do not leak, nor do prefixes: records the
        caller may not read are neither matched nor listed as candidates)."""
        store = self.memory.store

        def readable(kid: str) -> bool:
            row = store.get(kid)
            return row is None or row.record is None or who.readable(row.record.meta.project_scope)

        tiers = store.capabilities.tiers
        pointer = self.locked(tiers.pointer, knowledge_id) if tiers is not None else None
        if pointer is not None and (self.access is None or who.readable(pointer.scopes)):
            self.locked(self.memory.get, knowledge_id)  # evicted: CacheMissError, 503
        knowledge_id = self.locked(
            self.memory.resolve_id, knowledge_id,
            visible=readable if self.access is not None else None,
        )
        found = self.locked(store.get, knowledge_id)
        if found is None:
            raise NotFoundError(f"no record {knowledge_id}")
        if found.record is None:
            if self.access is not None and who.patterns(Mode.READ) is not None:
                raise NotFoundError(f"no record {knowledge_id}")
            raise GoneError(f"{knowledge_id} was purged")
        if not who.readable(found.record.meta.project_scope):
            raise NotFoundError(f"no record {knowledge_id}")
        return Visible(found.knowledge_id, found.record)


def api_of(request: Request) -> ApiContext:
    """The context of the app serving ``request`` (set by ``create_app``)."""
    return cast(ApiContext, request.app.state.api)


__all__ = ["ERRORS", "MAX_PAGE", "ApiContext", "KnowledgeId", "Visible", "api_of"]
