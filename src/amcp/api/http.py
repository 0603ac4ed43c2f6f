"""The HTTP API (FastAPI): a thin layer over ``Memory``.

Handlers are sync functions (FastAPI runs them in its thread pool) and call ``Memory``
under the per-memory lock of ``amcp.api.gate``; pydantic models from ``schemas`` validate
input and document output; every ``AmcpError`` becomes a problem body in ``errors``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from amcp.amf.mapping import scopes_of
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.api import imports
from amcp.api import schemas as s
from amcp.api.drafts import add_draft_routes
from amcp.api.gate import lock_for
from amcp.api.guard import HostPolicy, RequestGuard
from amcp.api.limits import BodyLimit
from amcp.api.views import hit_out, item_out, write_out
from amcp.errors import AmcpError, ForbiddenError, GoneError, NotFoundError
from amcp.memory import Memory
from amcp.session.policy import AccessPolicy, Mode
from amcp.store.base import RecordFilter
from amcp.web.access import Caller, authenticate, build_policy
from amcp.web.errors import problem_for

T = TypeVar("T")

MAX_BODY = 1024 * 1024  # JSON requests: a memory is at most 32k characters
MAX_IMPORT = 256 * 1024 * 1024  # an NDJSON import of a large store
MAX_PAGE = 500
EXPORT_CHUNK = 64 * 1024

_ERRORS: dict[int | str, dict[str, Any]] = {
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


def create_app(
    memory: Memory,
    *,
    policy: AccessPolicy | None = None,
    tokens: Mapping[str, Sequence[str]] | None = None,
    max_body: int = MAX_BODY,
    max_import: int = MAX_IMPORT,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    hook_token: str | None = None,
    allowed_hosts: Sequence[str] = (), ui: bool = True,
) -> FastAPI:
    """The HTTP API over ``memory``. ``policy``/``tokens`` turn on bearer auth
    (``tokens``: {token: scope patterns it may read and write}). ``lifespan`` lets
    ``serve_http`` run the MCP session manager alongside. ``hook_token`` adds the
    coding-agent hooks' routes (``POST /v1/hooks/{op}``, docs/http.md), which take that
    token (the node's runtime file holds it) instead of a bearer token. ``allowed_hosts``
    and ``ui``: see ``_wire`` (host check, web inspector)."""
    access = build_policy(policy, tokens)
    lock = lock_for(memory)
    app = FastAPI(
        title="amcp",
        version="1.0",
        summary="A memory node for AI agents (AMCP 1.0): remember, recall, query, context.",
        lifespan=lifespan,
        docs_url=None, redoc_url=None,  # they load Swagger from a CDN: amcp.ui.docs instead
    )
    _wire(app, memory, access, lock, limits=(max_body, max_import), hosts=allowed_hosts, ui=ui)
    # ``amcp serve`` with replication sets this to the replicator's status (its counters).
    app.state.sync_status = None

    def locked(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with lock:
            return fn(*args, **kwargs)

    def caller(request: Request) -> Caller:
        return authenticate(access, request.headers.get("authorization"))

    visible = partial(_visible, memory, access, locked)
    add_draft_routes(app, memory, locked=locked, caller=caller, visible=visible, errors=_ERRORS)

    # ------------------------------------------------------------------ memories

    @app.post(
        "/v1/memories",
        response_model=s.WriteOut,
        status_code=201,
        responses={200: {"model": s.WriteOut, "description": "Already stored"}, **_ERRORS},
        tags=["memories"],
    )
    def remember(body: s.RememberIn, request: Request, response: Response) -> s.WriteOut:
        """Store one memory (201), or name the identical one already stored (200)."""
        who = caller(request)
        fields = body.model_dump(exclude_none=True, mode="json")
        # An API client is the agent unless it says otherwise, and only a signature by a
        # registered writer key makes another claim count (docs/firewall.md).
        fields.setdefault("provenance", {"origin": "agent"})
        fields["scope"] = body.scope or [memory.own_scope(fields["provenance"])]
        who.check_write(fields["scope"])
        outcome = locked(memory.remember, fields.pop("text"), **fields)
        response.status_code = 201 if outcome.created else 200
        return write_out(outcome)

    @app.get("/v1/memories", response_model=s.ListOut, responses=_ERRORS, tags=["memories"])
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
        who = caller(request)
        if scope:
            who.check_read(scope)
        flt = RecordFilter(
            scopes=tuple(scope) if scope else _opt(who.exact_read_scopes()),
            types=tuple(type) if type else None,
            tags=tuple(tag) if tag else None,
            lifecycles=tuple(lifecycle) if lifecycle else (Lifecycle.ACTIVE,),
        )
        page = locked(memory.list_records, flt, limit=limit, after=after)
        # The cursor follows the unfiltered page, so filtering by scope never ends paging early.
        nxt = page[-1].knowledge_id if len(page) == limit else None
        shown = [
            it for it in page
            if it.record is None or who.readable(it.record.meta.project_scope)
        ]
        if access is not None and who.patterns(Mode.READ) is not None:
            shown = [it for it in shown if it.record is not None]
        return s.ListOut(items=[item_out(it) for it in shown], next_after=nxt)

    @app.get(
        "/v1/memories/{knowledge_id}", response_model=s.ItemOut, responses=_ERRORS,
        tags=["memories"],
    )
    def read_memory(
        knowledge_id: KnowledgeId, request: Request, reveal: bool = False
    ) -> s.ItemOut:
        """One record with its state (sensitive content redacted unless ``reveal``)."""
        who = caller(request)
        kid = visible(who, knowledge_id).knowledge_id  # a prefix names the whole id
        found = locked(memory.read, [kid], reveal=reveal)
        if not found:
            raise NotFoundError(f"no record {kid}")
        return item_out(found[0])

    @app.post(
        "/v1/memories/{knowledge_id}/supersede",
        response_model=s.WriteOut,
        status_code=201,
        responses=_ERRORS,
        tags=["memories"],
    )
    def supersede(knowledge_id: KnowledgeId, body: s.SupersedeIn, request: Request) -> s.WriteOut:
        """Replace a record with a new version; the old one stays, superseded."""
        who = caller(request)
        old = visible(who, knowledge_id)
        who.check_write(old.record.meta.project_scope)
        if body.scope is not None:
            who.check_write(body.scope)
        fields = body.model_dump(exclude_none=True)
        if body.type is not None:
            fields["type"] = body.type.value
        return write_out(
            locked(memory.supersede, old.knowledge_id, fields.pop("text"), **fields)
        )

    @app.post(
        "/v1/memories/{knowledge_id}/invalidate",
        response_model=s.WriteOut,
        responses=_ERRORS,
        tags=["memories"],
    )
    def invalidate(knowledge_id: KnowledgeId, body: s.InvalidateIn, request: Request) -> s.WriteOut:
        """Mark a record as wrong (kept, with the reason; no longer recalled)."""
        who = caller(request)
        found = visible(who, knowledge_id)
        who.check_write(found.record.meta.project_scope)
        return write_out(locked(memory.invalidate, found.knowledge_id, body.reason))

    @app.post(
        "/v1/memories/{knowledge_id}/purge",
        response_model=s.WriteOut,
        responses=_ERRORS,
        tags=["memories"],
    )
    def purge(
        knowledge_id: KnowledgeId, request: Request, body: s.PurgeIn | None = None
    ) -> s.WriteOut:
        """Erase a record's content for privacy; a tombstone stays so it never returns."""
        who = caller(request)
        found = visible(who, knowledge_id)
        who.check_write(found.record.meta.project_scope)
        reason = body.reason if body is not None else None
        return write_out(locked(memory.purge, found.knowledge_id, reason))

    # ------------------------------------------------------------------ reads

    @app.post("/v1/recall", response_model=s.RecallOut, responses=_ERRORS, tags=["recall"])
    def recall(body: s.RecallIn, request: Request) -> s.RecallOut:
        """Hybrid (lexical + vector) search."""
        who = caller(request)
        if body.scope:
            who.check_read(body.scope)
        result = locked(
            memory.recall,
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
        return s.RecallOut(
            query=result.query, took_ms=round(result.took_ms, 3),
            results=[hit_out(h, result.trust.get(h.knowledge_id)) for h in hits],
        )

    @app.post("/v1/query", response_model=s.QueryOut, responses=_ERRORS, tags=["recall"])
    def query(body: s.QueryIn, request: Request) -> s.QueryOut:
        """Run one AMQL statement (RECALL, REMEMBER, FORGET, DISTILL)."""
        who = caller(request)
        words = body.amql.split(None, 1)
        reading = bool(words) and words[0].upper() == "RECALL"
        if not reading and access is not None and who.patterns(Mode.WRITE) == []:
            raise ForbiddenError("this token may not write")
        scopes = who.patterns(Mode.READ if reading else Mode.WRITE)
        result = locked(memory.query, body.amql, scopes=scopes)
        response = dict(result.to_response())
        response["results"] = [
            r for r in response.get("results", [])
            if not isinstance(r, Mapping) or who.readable(scopes_of(r))
        ]
        return s.QueryOut.model_validate(response)

    @app.post("/v1/context", response_model=s.ContextOut, responses=_ERRORS, tags=["recall"])
    def context(body: s.ContextIn, request: Request) -> s.ContextOut:
        """A deterministic cold-boot context pack for a task within a token budget."""
        who = caller(request)
        if body.scopes:
            who.check_read(body.scopes)
        pack = locked(
            memory.context,
            body.task,
            budget_tokens=body.budget_tokens,
            project=body.project,
            scopes=body.scopes or who.patterns(Mode.READ),
            working_tokens=body.working_tokens,
        )
        return s.ContextOut(confirmation=pack.confirmation, pack=pack.to_dict())

    @app.post("/v1/outcomes", response_model=s.OutcomeOut, responses=_ERRORS, tags=["recall"])
    def outcomes(body: s.OutcomeIn, request: Request) -> s.OutcomeOut:
        """Report success / failure / neutral for records an agent used; weights learn."""
        who = caller(request)
        for kid in body.knowledge_ids:
            found = visible(who, kid)
            who.check_write(found.record.meta.project_scope)
        updates = locked(memory.outcome, body.knowledge_ids, body.result)
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

    # ------------------------------------------------------------------ portability

    @app.get(
        "/v1/export",
        responses={
            200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                  "description": "amcp NDJSON export, streamed"},
            **_ERRORS,
        },
        response_class=StreamingResponse,
        tags=["portability"],
    )
    def export(request: Request, include_sensitive: bool = False) -> StreamingResponse:
        """The whole store as NDJSON (header, one record per line, digest end marker)."""
        who = caller(request)
        who.check_everything(Mode.READ, "export")
        # Written to a spooled file under the lock, then streamed without it: a slow
        # client never holds the store, and the export is one consistent snapshot.
        spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024, mode="w+b")  # noqa: SIM115 - closed by the stream
        text = _TextSink(spool)
        locked(memory.export, text, include_sensitive=include_sensitive)
        spool.seek(0)
        return StreamingResponse(
            _chunks(spool), media_type="application/x-ndjson",
            headers={"Content-Disposition": 'attachment; filename="amcp-export.ndjson"'},
        )

    @app.post(
        "/v1/import",
        response_model=s.ImportOut,
        responses=_ERRORS,
        tags=["portability"],
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }
        },
    )
    async def import_(
        request: Request,
        from_: Annotated[str | None, Query(alias="from")] = None,
        scope: str | None = None,
        assume_tz: str | None = None,
        dry_run: bool = False,
    ) -> Any:
        """Import an NDJSON export (idempotent; purged records never come back).

        Every line is parsed and scope-checked before anything is stored, so a malformed
        line (400, naming the line) or a record outside the token's scopes (403) leaves the
        store untouched. With ``from`` (mem0, mcp-memory, letta, chatgpt, claude, ...; see
        docs/portability.md) the body is another tool's file: planned, scope-checked,
        imported and verified; the answer is the health and verification report.
        """
        who = caller(request)
        spool = await imports.spool_body(request)  # bounded memory: see amcp.api.imports
        if from_ not in (None, "amcp"):
            try:
                return JSONResponse(await run_in_threadpool(
                    locked, _import_upload, spool, from_, scope, assume_tz, dry_run, who))
            finally:
                spool.close()
        try:
            await run_in_threadpool(imports.precheck, imports.iter_lines(spool), who)
            report = await run_in_threadpool(locked, memory.import_, imports.iter_lines(spool))
        finally:
            spool.close()
        return s.ImportOut(
            created=report.created, already=report.already, tombstones=report.tombstones,
            refused_purged=report.refused_purged, state_changes=report.state_changes,
            complete=report.complete, errors=list(report.errors),
        )

    def _import_upload(
        spool: Any, kind: str, scope: str | None, tz: str | None, dry: bool, who: Caller
    ) -> dict[str, object]:
        from amcp.portability.api import import_upload
        from amcp.portability.model import ImportOptions

        options = ImportOptions(kind=kind, scope=scope, assume_tz=tz)
        return import_upload(memory, spool, options, check_scopes=who.check_write,
                             dry_run=dry).to_dict()

    @app.get("/v1/health", response_model=s.HealthOut, tags=["service"])
    def health() -> s.HealthOut:
        """Liveness and the store's size; needs no token."""
        stats = locked(memory.stats)
        sync = app.state.sync_status
        return s.HealthOut(
            status="ok", records=stats.records, embedding_model=stats.embedding_model,
            auth=access is not None, sync=sync() if sync is not None else None,
        )

    if hook_token is not None:
        from amcp.agent.hooks.node_routes import install_hook_routes

        install_hook_routes(app, memory, hook_token, locked)
    _tidy_openapi(app, auth=access is not None)
    return app


# ---------------------------------------------------------------------------- helpers


def _wire(
    app: FastAPI, memory: Memory, access: AccessPolicy | None, lock: Any, *,
    limits: tuple[int, int], hosts: Sequence[str], ui: bool,
) -> None:
    """Body caps (``limits``: JSON, import), the browser checks of ``amcp.api.guard``
    (``hosts``: names answered besides IP literals and localhost), error handlers, and the
    local ``/docs`` plus, with ``ui``, the web inspector at ``/ui`` (``amcp.ui``)."""
    from amcp.api.warnings import IntegrityWarnings
    from amcp.ui.app import install_ui

    app.add_middleware(BodyLimit, default=limits[0], overrides={"/v1/import": limits[1]})
    app.add_middleware(IntegrityWarnings, warnings=memory.warnings)
    # Added last, so it runs first: a forged Host or cross-site write never reaches a route.
    app.add_middleware(RequestGuard, hosts=HostPolicy(hosts), form_prefixes=("/ui/",))
    _install_error_handlers(app)
    install_ui(app, memory, access, lock, pages=ui)


def _visible(
    memory: Memory, access: AccessPolicy | None, locked: Callable[..., Any], who: Caller,
    knowledge_id: str,
) -> Any:
    """The stored record ``knowledge_id`` (a whole id or a unique prefix) names if the
    caller may see it; 404 otherwise (scopes do not leak, nor do prefixes: records the
    caller may not read are neither matched nor listed as candidates)."""

    def readable(kid: str) -> bool:
        row = memory.store.get(kid)
        return row is None or row.record is None or who.readable(row.record.meta.project_scope)

    knowledge_id = locked(
        memory.resolve_id, knowledge_id, visible=readable if access is not None else None
    )
    found = locked(memory.store.get, knowledge_id)
    if found is None:
        raise NotFoundError(f"no record {knowledge_id}")
    if found.record is None:
        if access is not None and who.patterns(Mode.READ) is not None:
            raise NotFoundError(f"no record {knowledge_id}")
        raise GoneError(f"{knowledge_id} was purged")
    if not who.readable(found.record.meta.project_scope):
        raise NotFoundError(f"no record {knowledge_id}")
    return found


def _opt(scopes: list[str] | None) -> tuple[str, ...] | None:
    return tuple(scopes) if scopes else None


class _TextSink:
    """The text-file face ``Memory.export`` writes to, over a binary spool."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        self._raw.write(text.encode("utf-8"))
        return len(text)


def _chunks(spool: Any) -> Iterator[bytes]:
    try:
        while chunk := spool.read(EXPORT_CHUNK):
            yield chunk
    finally:
        spool.close()


def _install_error_handlers(app: FastAPI) -> None:
    def respond(status: int, body: dict[str, Any]) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(body, status_code=status, headers=headers)

    async def amcp_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AmcpError)
        p = problem_for(exc)
        return respond(p.http_status, p.body())

    async def invalid(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = [str(x) for x in first.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path", "header"):
            loc = loc[1:]  # where the value came from, not its name
        msg = str(first.get("msg", "invalid request"))
        field = ".".join(loc) or None
        body: dict[str, Any] = {"status": 400, "error": f"{field}: {msg}" if field else msg}
        if field:
            body["field"] = field
        return respond(400, body)

    async def http_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return respond(exc.status_code, {"status": exc.status_code, "error": str(exc.detail)})

    app.add_exception_handler(AmcpError, amcp_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)


def _tidy_openapi(app: FastAPI, *, auth: bool) -> None:
    """Validation failures answer 400 with a problem body, never FastAPI's 422, so the
    422 entries FastAPI adds are dropped; with auth on, the bearer scheme is declared."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = base()
        for path in doc.get("paths", {}).values():
            for op in path.values():
                if isinstance(op, dict):
                    op.get("responses", {}).pop("422", None)
                    if auth and op.get("operationId", "").startswith("health") is False:
                        op["security"] = [{"bearer": []}]
        schemas = doc.get("components", {}).get("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        if auth:
            doc.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer"}
            }
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override hook


__all__ = ["create_app"]
