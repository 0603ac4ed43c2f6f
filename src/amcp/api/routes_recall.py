"""HTTP routes that read across records, and the outcome reports that follow them:
recall, AMQL query, context pack, outcomes."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter, Request

from amcp.amf.mapping import scopes_of
from amcp.api import schemas as s
from amcp.api.context import ERRORS, api_of
from amcp.api.views import hit_out
from amcp.errors import ForbiddenError
from amcp.session.policy import Mode
from amcp.sync.tiers import matching_pointers

router = APIRouter(tags=["recall"])


@router.post("/v1/recall", response_model=s.RecallOut, responses=ERRORS)
def recall(body: s.RecallIn, request: Request) -> s.RecallOut:
    """Hybrid (lexical + vector) search."""
    api = api_of(request)
    who = api.caller(request)
    if body.scope:
        who.check_read(body.scope)
    result = api.locked(
        api.memory.recall,
        body.query,
        k=body.k,
        scope=body.scope or who.exact_read_scopes(),
        types=body.types,
        tags=body.tags,
        kinds=body.kinds,
        created_after=body.created_after,
        created_before=body.created_before,
        lifecycles=body.lifecycles,
        reveal=body.reveal,
    )
    hits = [
        h for h in result.hits
        if h.item.record is not None and who.readable(h.item.record.meta.project_scope)
    ]
    evicted = api.locked(matching_pointers, api.memory, body.query, who.readable)
    return s.RecallOut(
        query=result.query, took_ms=round(result.took_ms, 3),
        results=[hit_out(h, result.trust.get(h.knowledge_id)) for h in hits],
        evicted=[s.EvictedOut(**e) for e in evicted],
    )


@router.post("/v1/query", response_model=s.QueryOut, responses=ERRORS)
def query(body: s.QueryIn, request: Request) -> s.QueryOut:
    """Run one AMQL statement (RECALL, REMEMBER, FORGET, DISTILL)."""
    api = api_of(request)
    who = api.caller(request)
    words = body.amql.split(None, 1)
    reading = bool(words) and words[0].upper() == "RECALL"
    if not reading and api.access is not None and who.patterns(Mode.WRITE) == []:
        raise ForbiddenError("this token may not write")
    scopes = who.patterns(Mode.READ if reading else Mode.WRITE)
    result = api.locked(api.memory.query, body.amql, scopes=scopes)
    response = dict(result.to_response())
    response["results"] = [
        r for r in response.get("results", [])
        if not isinstance(r, Mapping) or who.readable(scopes_of(r))
    ]
    return s.QueryOut.model_validate(response)


@router.post("/v1/context", response_model=s.ContextOut, responses=ERRORS)
def context(body: s.ContextIn, request: Request) -> s.ContextOut:
    """A deterministic cold-boot context pack for a task within a token budget."""
    api = api_of(request)
    who = api.caller(request)
    if body.scopes:
        who.check_read(body.scopes)
    pack = api.locked(
        api.memory.context,
        body.task,
        budget_tokens=body.budget_tokens,
        project=body.project,
        scopes=body.scopes or who.patterns(Mode.READ),
        working_tokens=body.working_tokens,
    )
    return s.ContextOut(confirmation=pack.confirmation, pack=pack.to_dict())


@router.post("/v1/outcomes", response_model=s.OutcomeOut, responses=ERRORS)
def outcomes(body: s.OutcomeIn, request: Request) -> s.OutcomeOut:
    """Report success / failure / neutral for records an agent used; weights learn."""
    api = api_of(request)
    who = api.caller(request)
    for kid in body.knowledge_ids:
        found = api.visible(who, kid)
        who.check_write(found.record.meta.project_scope)
    updates = api.locked(api.memory.outcome, body.knowledge_ids, body.result)
    return s.OutcomeOut(
        result=body.result,
        updates=[
            s.WeightOut(
                knowledge_id=u.knowledge_id, weight=u.weight, confidence=u.confidence,
                previous=u.previous,
            )
            for u in updates
        ],
    )


__all__ = ["router"]
