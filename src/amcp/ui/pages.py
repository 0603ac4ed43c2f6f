"""What every route group of the inspector shares: who is asking, and how a page, an error
and the sign-in form are answered.

A handler hands ``Pages.page`` a ``build(viewer)``; a signed-out viewer gets the sign-in
form (401) and an ``AmcpError`` an HTML page with the API's status code (404 unknown, 410
purged, 409 conflict, 403 not allowed), so no route repeats that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse

from amcp.errors import AmcpError, UnauthorizedError
from amcp.ui import actions
from amcp.ui.context import UiContext
from amcp.ui.session import COOKIE, Viewer
from amcp.web.errors import problem_for

Q = Annotated[str, Query(max_length=2000)]
DONE = {  # ?done= codes after an action: fixed texts, so a link cannot put words on a page
    "superseded": "Saved as a new version; the old one is kept, superseded.",
    "invalidated": "Invalidated: kept with its reason, no longer recalled.",
    "purged": "Purged: the content is erased, a tombstone stays.",
    "confirmed": "Confirmed: the record is active.",
}


class Pages:
    def __init__(self, ctx: UiContext) -> None:
        self.ctx = ctx

    def viewer(self, request: Request) -> Viewer:
        return self.ctx.sessions.viewer(request.cookies.get(COOKIE))

    def page(self, request: Request, build: Callable[[Viewer], HTMLResponse]) -> HTMLResponse:
        try:
            who = self.viewer(request)
        except UnauthorizedError as exc:
            return self.login_page(request, str(exc.message), status=401)
        try:
            return build(who)
        except AmcpError as exc:
            return self.error_page(request, who, exc)

    def error_page(self, request: Request, who: Viewer | None, exc: AmcpError) -> HTMLResponse:
        if isinstance(exc, actions.EditConflict):
            return self.ctx.render(request, who, "conflict.html", status=409, error=exc)
        p = problem_for(exc)
        return self.ctx.render(request, who, "error.html", status=p.http_status, problem=p)

    def login_page(self, request: Request, note: str | None, *, status: int = 200
                   ) -> HTMLResponse:
        guest = self.ctx.sessions.guest(request.cookies.get(COOKIE))
        return self.ctx.render(request, guest, "login.html", status=status, note=note)


__all__ = ["DONE", "Pages", "Q"]
