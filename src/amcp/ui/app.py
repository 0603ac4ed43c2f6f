"""Wiring the inspector into the HTTP app: templates, static files, the routers.

``install_ui`` is called by ``amcp.api.http.create_app``, so ``amcp serve`` and ``amcp
http`` both serve it at ``/ui`` (``/`` redirects there) and the local API reference at
``/docs``. It shares the API's access policy and store lock; it never opens its own.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape

from amcp.memory import Memory
from amcp.session.policy import AccessPolicy
from amcp.ui.overview import IntegrityCache
from amcp.ui.session import COOKIE, SessionStore, Viewer

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
STATIC_PREFIX = "/ui/static"


@dataclass
class UiContext:
    """What every page handler needs: the memory, its lock, sessions and templates."""

    memory: Memory
    lock: threading.RLock
    sessions: SessionStore
    env: Environment
    checks: IntegrityCache = field(default_factory=IntegrityCache)
    secure_cookie: bool = False  # set when served behind TLS (amcp http --tls ...)

    def locked(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return fn(*args, **kwargs)

    def render(self, request: Request, viewer: Viewer | None, template: str, *,
               status: int = 200, **data: Any) -> HTMLResponse:
        page = self.env.get_template(template).render(
            request=request, viewer=viewer, static=STATIC_PREFIX,
            needs_login=self.sessions.needs_login, **data,
        )
        response = HTMLResponse(page, status_code=status)
        if viewer is not None and viewer.fresh:
            self.set_cookie(response, viewer.session.sid)
        # Pages show records as they stand now: never keep them in a shared cache.
        response.headers["Cache-Control"] = "no-store"
        return response

    def set_cookie(self, response: Response, sid: str) -> None:
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/",
                            secure=self.secure_cookie)


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    from amcp.ui import filters

    env.filters.update(filters.FILTERS)
    return env


def install_ui(
    app: FastAPI, memory: Memory, policy: AccessPolicy | None, lock: threading.RLock, *,
    pages: bool = True,
) -> UiContext:
    """Add ``/docs`` (always) and, with ``pages``, ``/ui`` and its assets to ``app``."""
    from amcp.ui import docs, routes

    ctx = UiContext(memory, lock, SessionStore(policy), environment())
    app.state.ui = ctx  # for operators' code and tests (e.g. replacing the policy)
    app.mount(STATIC_PREFIX, StaticFiles(directory=HERE / "static"), name="ui-static")
    app.include_router(docs.router(ctx, app))
    if pages:
        app.include_router(routes.router(ctx))

        @app.get("/", include_in_schema=False)
        def root() -> RedirectResponse:
            return RedirectResponse("/ui", status_code=303)

    return ctx


__all__ = ["STATIC_PREFIX", "UiContext", "environment", "install_ui"]
