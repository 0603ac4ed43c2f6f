"""The inspector's pages and form actions (``/ui``), each a few lines over ``data``,
``overview`` and ``actions``.

GET handlers are sync (FastAPI's thread pool, as the API's); form POSTs read their
urlencoded body, check the session's CSRF token, then run in the pool. Errors render as
HTML pages with the API's status codes (404 unknown, 410 purged, 409 conflict, 401 signed
out, 403 not allowed); a signed-out viewer gets the sign-in form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from amcp.errors import AmcpError, UnauthorizedError
from amcp.ui import actions, data, imports, overview
from amcp.ui.charts import line_chart
from amcp.ui.context import UiContext
from amcp.ui.session import COOKIE, Viewer, check_csrf
from amcp.web.errors import problem_for

MAX_FORM = 1024 * 1024  # the API's JSON cap; a memory's text is far shorter
DONE = {  # ?done= codes after an action: fixed texts, so a link cannot put words on a page
    "superseded": "Saved as a new version; the old one is kept, superseded.",
    "invalidated": "Invalidated: kept with its reason, no longer recalled.",
    "purged": "Purged: the content is erased, a tombstone stays.",
    "confirmed": "Confirmed: the record is active.",
}
Q = Annotated[str, Query(max_length=2000)]


def router(ctx: UiContext) -> APIRouter:
    r = APIRouter(prefix="/ui", include_in_schema=False)

    def viewer(request: Request) -> Viewer:
        return ctx.sessions.viewer(request.cookies.get(COOKIE))

    def page(request: Request, build: Callable[[Viewer], HTMLResponse]) -> HTMLResponse:
        try:
            who = viewer(request)
        except UnauthorizedError as exc:
            return login_page(request, str(exc.message), status=401)
        try:
            return build(who)
        except AmcpError as exc:
            return error_page(request, who, exc)

    def error_page(request: Request, who: Viewer | None, exc: AmcpError) -> HTMLResponse:
        p = problem_for(exc)
        if isinstance(exc, actions.EditConflict):
            return ctx.render(request, who, "conflict.html", status=409, error=exc)
        return ctx.render(request, who, "error.html", status=p.http_status, problem=p)

    def login_page(request: Request, note: str | None, *, status: int = 200) -> HTMLResponse:
        guest = ctx.sessions.guest(request.cookies.get(COOKIE))
        return ctx.render(request, guest, "login.html", status=status, note=note)

    @r.get("", response_class=HTMLResponse)
    def search_page(request: Request, q: Q = "", scope: Q = "", type: Q = "", origin: Q = "",
                    lifecycle: Q = "active", after: Q = "", before: Q = "") -> HTMLResponse:
        form = data.SearchForm(q, scope, type, origin, lifecycle, after, before)

        def build(who: Viewer) -> HTMLResponse:
            result = data.search(ctx.memory, ctx.locked, who.caller, form)
            return ctx.render(request, who, "search.html", page=result)

        return page(request, build)

    @r.get("/results", response_class=HTMLResponse)
    def results(request: Request, q: Q = "", scope: Q = "", type: Q = "", origin: Q = "",
                lifecycle: Q = "active", after: Q = "", before: Q = "") -> HTMLResponse:
        """The result list alone: what search-as-you-type swaps in (``ui.js``)."""
        form = data.SearchForm(q, scope, type, origin, lifecycle, after, before)

        def build(who: Viewer) -> HTMLResponse:
            try:
                result = data.search(ctx.memory, ctx.locked, who.caller, form)
            except AmcpError as exc:
                result = data.SearchPage(form, (), 0.0, True, problem_for(exc).error)
            return ctx.render(request, who, "_results.html", page=result)

        return page(request, build)

    @r.get("/r/{knowledge_id}", response_class=HTMLResponse)
    def record(request: Request, knowledge_id: str, done: Q = "") -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            rp = data.record_page(ctx.memory, ctx.locked, who.caller, knowledge_id)
            pts = rp.curve
            chart = line_chart([p.day for p in pts], [p.value for p in pts], y_max=1.0,
                               x_labels=[f"day {p.day:.0f}" for p in pts], marker=rp.age_days)
            wts = rp.weights
            weights = line_chart([p.day for p in wts], [p.value for p in wts], y_max=1.0,
                                 x_labels=["written"] + [f"round {i}" for i in range(1, len(wts))])
            return ctx.render(request, who, "record.html", rp=rp, chart=chart, weights=weights,
                              done=DONE.get(done), short_id=actions.short_id(knowledge_id))

        return page(request, build)

    @r.get("/store", response_class=HTMLResponse)
    def store(request: Request) -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            sp = overview.store_page(ctx.memory, ctx.locked, who.caller, ctx.checks)
            chart = line_chart(list(range(len(sp.growth))), [g.records for g in sp.growth],
                               x_labels=[g.when for g in sp.growth], y_format="{:.0f}")
            return ctx.render(request, who, "store.html", sp=sp, chart=chart)

        return page(request, build)

    @r.get("/queue", response_class=HTMLResponse)
    def queue(request: Request, done: Q = "") -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            qp = overview.queue_page(ctx.memory, ctx.locked, who.caller)
            return ctx.render(request, who, "queue.html", qp=qp, done=DONE.get(done))

        return page(request, build)

    @r.get("/imports", response_class=HTMLResponse)
    def import_reports(request: Request) -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            logs = imports.imports_page(ctx.memory, ctx.locked, who.caller)
            return ctx.render(request, who, "imports.html", logs=logs)

        return page(request, build)

    @r.get("/imports/{report_id}", response_class=HTMLResponse)
    def import_report(request: Request, report_id: str) -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            log = imports.import_page(ctx.memory, ctx.locked, who.caller, report_id)
            return ctx.render(request, who, "import.html", log=log)

        return page(request, build)

    _install_forms(r, ctx, viewer, error_page, login_page)
    return r


FormAction = Callable[[Viewer, dict[str, str]], actions.Done]


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM:
        return {}
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items() if v}


def _install_forms(r: APIRouter, ctx: UiContext, viewer: Callable[[Request], Viewer],
                   error_page: Callable[..., HTMLResponse],
                   login_page: Callable[..., HTMLResponse]) -> None:
    async def act(request: Request, run: FormAction, done: str, back: str | None) -> Response:
        fields = await _form(request)
        if fields.get("from") == "queue":  # the review queue's buttons return to it
            back = "/ui/queue"
        try:
            who = viewer(request)
        except UnauthorizedError as exc:
            return login_page(request, exc.message, status=401)
        try:
            check_csrf(who, fields.get("csrf"))
            result = await run_in_threadpool(run, who, fields)
        except AmcpError as exc:
            return await run_in_threadpool(error_page, request, who, exc)
        where = back or f"/ui/r/{quote(result.knowledge_id, safe='')}"
        return RedirectResponse(f"{where}?done={done}", status_code=303)

    m, lk = ctx.memory, ctx.locked

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

    _install_login(r, ctx)


def _install_login(r: APIRouter, ctx: UiContext) -> None:
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


__all__ = ["router"]
