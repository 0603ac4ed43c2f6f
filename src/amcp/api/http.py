"""The HTTP API (FastAPI): a thin layer over ``Memory``.

Handlers are sync functions (FastAPI runs them in its thread pool) and call ``Memory``
under the per-memory lock of ``amcp.api.gate``; pydantic models from ``schemas`` validate
input and document output; every ``AmcpError`` becomes a problem body in ``errors``.
The routes live in routers by concern — ``routes_drafts``, ``routes_records``,
``routes_recall``, ``routes_portability``, ``routes_service`` and the hooks' routes of
``amcp.agent.hooks.node_routes`` — which reach the app's ``ApiContext``
(``amcp.api.context``); ``create_app`` composes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from amcp.api import (
    routes_drafts,
    routes_portability,
    routes_recall,
    routes_records,
    routes_service,
)
from amcp.api.context import ApiContext
from amcp.api.gate import lock_for
from amcp.api.guard import HostPolicy, RequestGuard
from amcp.api.limits import BodyLimit
from amcp.errors import AmcpError
from amcp.memory import Memory
from amcp.session.policy import AccessPolicy
from amcp.web.access import build_policy
from amcp.web.errors import problem_for

MAX_BODY = 1024 * 1024  # JSON requests: a memory is at most 32k characters
MAX_IMPORT = 256 * 1024 * 1024  # an NDJSON import of a large store

# In the order their routes appear in the OpenAPI document.
ROUTERS = (routes_drafts.router, routes_records.router, routes_recall.router,
           routes_portability.router, routes_service.router)


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
    api = ApiContext(memory, build_policy(policy, tokens), lock_for(memory))
    app = FastAPI(
        title="amcp",
        version="1.0",
        summary="A memory node for AI agents (AMCP 1.0): remember, recall, query, context.",
        lifespan=lifespan,
        docs_url=None, redoc_url=None,  # they load Swagger from a CDN: amcp.ui.docs instead
    )
    app.state.api = api  # what the routers' handlers work through (amcp.api.context)
    app.state.sync_status = None  # ``amcp serve`` with replication: its counters
    _wire(app, api, limits=(max_body, max_import), hosts=allowed_hosts, ui=ui)
    for router in ROUTERS:
        app.include_router(router)
    if hook_token is not None:
        from amcp.agent.hooks.node_routes import install_hook_routes

        install_hook_routes(app, memory, hook_token, api.locked)
    _tidy_openapi(app, auth=api.access is not None)
    return app


# ---------------------------------------------------------------------------- helpers


def _wire(
    app: FastAPI, api: ApiContext, *, limits: tuple[int, int], hosts: Sequence[str], ui: bool,
) -> None:
    """Body caps (``limits``: JSON, import), the browser checks of ``amcp.api.guard``
    (``hosts``: names answered besides IP literals and localhost), error handlers, and the
    local ``/docs`` plus, with ``ui``, the web inspector at ``/ui`` (``amcp.ui``)."""
    from amcp.api.warnings import IntegrityWarnings
    from amcp.ui.app import install_ui

    app.add_middleware(BodyLimit, default=limits[0], overrides={"/v1/import": limits[1]})
    app.add_middleware(IntegrityWarnings, warnings=api.memory.warnings)
    # Added last, so it runs first: a forged Host or cross-site write never reaches a route.
    app.add_middleware(RequestGuard, hosts=HostPolicy(hosts), form_prefixes=("/ui/",))
    _install_error_handlers(app)
    install_ui(app, api.memory, api.access, api.lock, pages=ui)


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
