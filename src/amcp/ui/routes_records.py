"""The search page, its live result list, and a record's page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from amcp.errors import AmcpError
from amcp.ui import actions, data
from amcp.ui.charts import line_chart
from amcp.ui.pages import DONE, Pages, Q
from amcp.ui.session import Viewer
from amcp.web.errors import problem_for


def install(r: APIRouter, pages: Pages) -> None:
    ctx = pages.ctx

    @r.get("", response_class=HTMLResponse)
    def search_page(request: Request, q: Q = "", scope: Q = "", type: Q = "", origin: Q = "",
                    lifecycle: Q = "active", after: Q = "", before: Q = "") -> HTMLResponse:
        form = data.SearchForm(q, scope, type, origin, lifecycle, after, before)

        def build(who: Viewer) -> HTMLResponse:
            result = data.search(ctx.memory, ctx.locked, who.caller, form)
            return ctx.render(request, who, "search.html", page=result)

        return pages.page(request, build)

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

        return pages.page(request, build)

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

        return pages.page(request, build)


__all__ = ["install"]
