"""Wiring the inspector into the HTTP app: templates, static files, the routers.

``install_ui`` is called by ``amcp.api.http.create_app``, so ``amcp serve`` and ``amcp
http`` both serve it at ``/ui`` (``/`` redirects there) and the local API reference at
``/docs``. It shares the API's access policy and store lock; it never opens its own.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TypeVar

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape

from amcp.memory import Memory
from amcp.session.policy import AccessPolicy
from amcp.ui.context import STATIC_PREFIX, UiContext
from amcp.ui.session import SessionStore

T = TypeVar("T")
HERE = Path(__file__).resolve().parent


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
