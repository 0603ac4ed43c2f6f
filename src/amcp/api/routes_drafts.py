"""HTTP routes for what the memory firewall held: list drafts, confirm, reject.

The same ``Memory.drafts`` / ``confirm`` / ``reject`` the CLI and the inspector use; the
caller needs read access to a draft's scopes to see it and write access to release or
refuse it (docs/firewall.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Path, Query, Request

from amcp.api import schemas as s
from amcp.api.views import item_out, write_out
from amcp.memory import Memory
from amcp.web.access import Caller

KnowledgeId = Annotated[str, Path(min_length=1, max_length=s.MAX_NAME)]


def add_draft_routes(
    app: FastAPI,
    memory: Memory,
    *,
    locked: Callable[..., Any],
    caller: Callable[[Request], Caller],
    visible: Callable[[Caller, str], Any],
    errors: dict[int | str, dict[str, Any]],
) -> None:
    @app.get("/v1/drafts", response_model=s.DraftsOut, responses=errors, tags=["firewall"])
    def drafts(
        request: Request,
        scope: Annotated[list[str] | None, Query(max_length=s.MAX_ITEMS)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> s.DraftsOut:
        """Records held as drafts (instruction-shaped, or contradicting a trusted one)."""
        who = caller(request)
        if scope:
            who.check_read(scope)
        found = locked(memory.drafts, scope or who.exact_read_scopes() or None, limit=limit)
        return s.DraftsOut(items=[
            item_out(it) for it in found
            if it.record is not None and who.readable(it.record.meta.project_scope)
        ])

    @app.post("/v1/drafts/{knowledge_id}/confirm", response_model=s.WriteOut,
              responses=errors, tags=["firewall"])
    def confirm(knowledge_id: KnowledgeId, request: Request) -> s.WriteOut:
        """Release a held draft: it is served from now on (a held update supersedes the
        record it contradicted)."""
        who = caller(request)
        found = visible(who, knowledge_id)
        who.check_write(found.record.meta.project_scope)
        return write_out(locked(memory.confirm, knowledge_id))

    @app.post("/v1/drafts/{knowledge_id}/reject", response_model=s.WriteOut,
              responses=errors, tags=["firewall"])
    def reject(knowledge_id: KnowledgeId, request: Request,
               body: s.RejectIn | None = None) -> s.WriteOut:
        """Refuse a held draft: invalidated with the reason, kept, never served."""
        who = caller(request)
        found = visible(who, knowledge_id)
        who.check_write(found.record.meta.project_scope)
        reason = body.reason if body is not None else None
        return write_out(locked(memory.reject, knowledge_id, reason))


__all__ = ["add_draft_routes"]
