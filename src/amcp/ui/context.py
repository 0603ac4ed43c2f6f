"""What every page handler gets: ``UiContext`` (the memory, its lock, sessions, templates,
the node's replication view).

Its own module so that the page routers and ``app`` (which builds it and mounts them) do not
import each other."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment

from amcp.memory import Memory
from amcp.ui.overview import IntegrityCache
from amcp.ui.peers import SyncSource
from amcp.ui.session import COOKIE, SessionStore, Viewer

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
    # The node's replication, when this process runs one (``amcp serve`` sets it through
    # ``serve_http(sync_view=...)``); None: the peers page says replication is not set up.
    sync: SyncSource | None = None

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


__all__ = ["STATIC_PREFIX", "UiContext"]
