"""HTTP routes for single records: remember, list, read, supersede, invalidate, purge."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.api import schemas as s
from amcp.api.context import ERRORS, MAX_PAGE, KnowledgeId, api_of
from amcp.api.views import item_out, write_out
from amcp.errors import NotFoundError
from amcp.session.policy import Mode
from amcp.store.base import RecordFilter

router = APIRouter(tags=["memories"])


@router.post(
    "/v1/memories",
    response_model=s.WriteOut,
    status_code=201,
    responses={200: {"model": s.WriteOut, "description": "Already stored"}, **ERRORS},
)
def remember(body: s.RememberIn, request: Request, response: Response) -> s.WriteOut:
    """Store one memory (201), or name the identical one already stored (200)."""
    api = api_of(request)
    who = api.caller(request)
    fields = body.model_dump(exclude_none=True, mode="json")
    # An API client is the agent unless it says otherwise, and only a signature by a
    # registered writer key makes another claim count (docs/firewall.md).
    fields.setdefault("provenance", {"origin": "agent"})
    fields["scope"] = body.scope or [api.memory.own_scope(fields["provenance"])]
    who.check_write(fields["scope"])
    outcome = api.locked(api.memory.remember, fields.pop("text"), **fields)
    response.status_code = 201 if outcome.created else 200
    return write_out(outcome)


@router.get("/v1/memories", response_model=s.ListOut, responses=ERRORS)
def list_memories(
    request: Request,
    scope: Annotated[list[str] | None, Query(max_length=s.MAX_ITEMS)] = None,
    type: Annotated[list[KnowledgeType] | None, Query(max_length=s.MAX_ITEMS)] = None,
    tag: Annotated[list[str] | None, Query(max_length=s.MAX_ITEMS)] = None,
    lifecycle: Annotated[list[Lifecycle] | None, Query(max_length=8)] = None,
    after: Annotated[str | None, Query(max_length=s.MAX_NAME)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> s.ListOut:
    """List records in the store's stable order; page with ``next_after``."""
    api = api_of(request)
    who = api.caller(request)
    if scope:
        who.check_read(scope)
    exact = who.exact_read_scopes()
    flt = RecordFilter(
        scopes=tuple(scope) if scope else (tuple(exact) if exact else None),
        types=tuple(type) if type else None,
        tags=tuple(tag) if tag else None,
        lifecycles=tuple(lifecycle) if lifecycle else (Lifecycle.ACTIVE,),
    )
    page = api.locked(api.memory.list_records, flt, limit=limit, after=after)
    # The cursor follows the unfiltered page, so filtering by scope never ends paging early.
    nxt = page[-1].knowledge_id if len(page) == limit else None
    shown = [
        it for it in page
        if it.record is None or who.readable(it.record.meta.project_scope)
    ]
    if api.access is not None and who.patterns(Mode.READ) is not None:
        shown = [it for it in shown if it.record is not None]
    return s.ListOut(items=[item_out(it) for it in shown], next_after=nxt)


@router.get("/v1/memories/{knowledge_id}", response_model=s.ItemOut, responses=ERRORS)
def read_memory(knowledge_id: KnowledgeId, request: Request, reveal: bool = False) -> s.ItemOut:
    """One record with its state (sensitive content redacted unless ``reveal``)."""
    api = api_of(request)
    kid = api.visible(api.caller(request), knowledge_id).knowledge_id  # a prefix names it all
    found = api.locked(api.memory.read, [kid], reveal=reveal)
    if not found:
        raise NotFoundError(f"no record {kid}")
    return item_out(found[0])


@router.post(
    "/v1/memories/{knowledge_id}/supersede",
    response_model=s.WriteOut,
    status_code=201,
    responses=ERRORS,
)
def supersede(knowledge_id: KnowledgeId, body: s.SupersedeIn, request: Request) -> s.WriteOut:
    """Replace a record with a new version; the old one stays, superseded."""
    api = api_of(request)
    who = api.caller(request)
    old = api.visible(who, knowledge_id)
    who.check_write(old.record.meta.project_scope)
    if body.scope is not None:
        who.check_write(body.scope)
    fields = body.model_dump(exclude_none=True)
    if body.type is not None:
        fields["type"] = body.type.value
    return write_out(
        api.locked(api.memory.supersede, old.knowledge_id, fields.pop("text"), **fields)
    )


@router.post(
    "/v1/memories/{knowledge_id}/invalidate", response_model=s.WriteOut, responses=ERRORS
)
def invalidate(knowledge_id: KnowledgeId, body: s.InvalidateIn, request: Request) -> s.WriteOut:
    """Mark a record as wrong (kept, with the reason; no longer recalled)."""
    api = api_of(request)
    who = api.caller(request)
    found = api.visible(who, knowledge_id)
    who.check_write(found.record.meta.project_scope)
    return write_out(api.locked(api.memory.invalidate, found.knowledge_id, body.reason))


@router.post("/v1/memories/{knowledge_id}/purge", response_model=s.WriteOut, responses=ERRORS)
def purge(
    knowledge_id: KnowledgeId, request: Request, body: s.PurgeIn | None = None
) -> s.WriteOut:
    """Erase a record's content for privacy; a tombstone stays so it never returns."""
    api = api_of(request)
    who = api.caller(request)
    found = api.visible(who, knowledge_id)
    who.check_write(found.record.meta.project_scope)
    reason = body.reason if body is not None else None
    return write_out(api.locked(api.memory.purge, found.knowledge_id, reason))


__all__ = ["router"]
