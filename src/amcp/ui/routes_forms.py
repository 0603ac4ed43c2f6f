"""The inspector's form actions: corrections, the queue's confirm, sign-in and sign-out.

Each POST reads its urlencoded body, checks the session's CSRF token, then runs in the
pool; success is a 303 back to the page with a ``?done=`` code.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from amcp.errors import AmcpError, UnauthorizedError
from amcp.ui import actions, overview
from amcp.ui.context import UiContext
from amcp.ui.pages import Pages, Q
from amcp.ui.session import COOKIE, Viewer, check_csrf

MAX_FORM = 1024 * 1024  # the API's JSON cap; a memory's text is far shorter
FormAction = Callable[[Viewer, dict[str, str]], actions.Done]


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM:
        return {}
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items() if v}


def install_corrections(r: APIRouter, pages: Pages) -> None:
    async def act(request: Request, run: FormAction, done: str, back: str | None) -> Response:
        fields = await _form(request)
        if fields.get("from") == "queue":  # the review queue's buttons return to it
            back = "/ui/queue"
        try:
            who = pages.viewer(request)
        except UnauthorizedError as exc:
            return pages.login_page(request, exc.message, status=401)
        try:
            check_csrf(who, fields.get("csrf"))
            result = await run_in_threadpool(run, who, fields)
        except AmcpError as exc:
            return await run_in_threadpool(pages.error_page, request, who, exc)
        where = back or f"/ui/r/{quote(result.knowledge_id, safe='')}"
        return RedirectResponse(f"{where}?done={done}", status_code=303)

    m, lk = pages.ctx.memory, pages.ctx.locked

    @r.post("/r/{knowledge_id}/supersede")
    async def supersede(request: Request, knowledge_id: str) -> Response:
        return await act(request, lambda w, f: actions.supersede(
            m, lk, w.caller, knowledge_id, text=f.get("text", ""), base=f.get("base", "")),
            "superseded", None)

    @r.post("/r/{knowledge_id}/forget")
    async def forget(request: Request, knowledge_id: str) -> Response:
        return await act(request, lambda w, f: actions.forget(
            m, lk, w.caller, knowledge_id, reason=f.get("reason", ""), base=f.get("base", "")),
            "invalidated", None)

    @r.post("/r/{knowledge_id}/purge")
    async def purge(request: Request, knowledge_id: str) -> Response:
        return await act(request, lambda w, f: actions.purge(
            m, lk, w.caller, knowledge_id, confirm=f.get("confirm", ""),
            reason=f.get("reason", "")), "purged", None)

    @r.post("/queue/{knowledge_id}/confirm")
    async def confirm(request: Request, knowledge_id: str) -> Response:
        return await act(request, lambda w, f: overview.confirm(
            m, lk, w.caller, knowledge_id, base=f.get("base", "")), "confirmed", "/ui/queue")


def install_login(r: APIRouter, ctx: UiContext) -> None:
    @r.post("/login")
    async def login(request: Request) -> Response:
        fields = await _form(request)
        anon = ctx.sessions.get(request.cookies.get(COOKIE))
        if anon is None or not fields.get("csrf") or fields.get("csrf") != anon.csrf:
            return RedirectResponse("/ui/login?stale=1", status_code=303)
        try:
            made = ctx.sessions.sign_in(fields.get("token", ""))
        except UnauthorizedError:
            return RedirectResponse("/ui/login?refused=1", status_code=303)
        ctx.sessions.drop(anon.sid)
        response = RedirectResponse("/ui", status_code=303)
        ctx.set_cookie(response, made.sid)
        return response

    @r.get("/login", response_class=HTMLResponse)
    def login_form(request: Request, refused: Q = "", stale: Q = "") -> HTMLResponse:
        note = ("That token is not known to this node." if refused else
                "The form had expired; try again." if stale else None)
        guest = ctx.sessions.guest(request.cookies.get(COOKIE))
        return ctx.render(request, guest, "login.html", status=401 if refused else 200,
                          note=note)

    @r.post("/logout")
    async def logout(request: Request) -> Response:
        fields = await _form(request)
        found = ctx.sessions.get(request.cookies.get(COOKIE))
        if found is not None and fields.get("csrf") == found.csrf:
            ctx.sessions.drop(found.sid)
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response


__all__ = ["MAX_FORM", "install_corrections", "install_login"]
