"""HTTP routes for what the memory firewall held: list drafts, confirm, reject.

The same ``Memory.drafts`` / ``confirm`` / ``reject`` the CLI and the inspector use; the
caller needs read access to a draft's scopes to see it and write access to release or
refuse it (docs/firewall.md).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from amcp.api import schemas as s
from amcp.api.context import ERRORS, KnowledgeId, api_of
from amcp.api.views import item_out, write_out

router = APIRouter(tags=["firewall"])


@router.get("/v1/drafts", response_model=s.DraftsOut, responses=ERRORS)
def drafts(
    request: Request,
    scope: Annotated[list[str] | None, Query(max_length=s.MAX_ITEMS)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> s.DraftsOut:
    """Records held as drafts (instruction-shaped, or contradicting a trusted one)."""
    api = api_of(request)
    who = api.caller(request)
    if scope:
        who.check_read(scope)
    found = api.locked(api.memory.drafts, scope or who.exact_read_scopes() or None, limit=limit)
    return s.DraftsOut(items=[
        item_out(it) for it in found
        if it.record is not None and who.readable(it.record.meta.project_scope)
    ])


@router.post("/v1/drafts/{knowledge_id}/confirm", response_model=s.WriteOut, responses=ERRORS)
def confirm(knowledge_id: KnowledgeId, request: Request) -> s.WriteOut:
    """Release a held draft: it is served from now on (a held update supersedes the
    record it contradicted)."""
    api = api_of(request)
    who = api.caller(request)
    found = api.visible(who, knowledge_id)
    who.check_write(found.record.meta.project_scope)
    return write_out(api.locked(api.memory.confirm, knowledge_id))


@router.post("/v1/drafts/{knowledge_id}/reject", response_model=s.WriteOut, responses=ERRORS)
def reject(knowledge_id: KnowledgeId, request: Request,
           body: s.RejectIn | None = None) -> s.WriteOut:
    """Refuse a held draft: invalidated with the reason, kept, never served."""
    api = api_of(request)
    who = api.caller(request)
    found = api.visible(who, knowledge_id)
    who.check_write(found.record.meta.project_scope)
    reason = body.reason if body is not None else None
    return write_out(api.locked(api.memory.reject, knowledge_id, reason))


__all__ = ["router"]
