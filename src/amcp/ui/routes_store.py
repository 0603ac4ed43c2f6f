"""The node-wide pages: store, review queue, import reports, peers and sync lag."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from amcp.ui import imports, overview, peers
from amcp.ui.charts import line_chart
from amcp.ui.pages import DONE, Pages, Q
from amcp.ui.session import Viewer


def install(r: APIRouter, pages: Pages) -> None:
    ctx = pages.ctx

    @r.get("/store", response_class=HTMLResponse)
    def store(request: Request) -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            sp = overview.store_page(ctx.memory, ctx.locked, who.caller, ctx.checks)
            chart = line_chart(list(range(len(sp.growth))), [g.records for g in sp.growth],
                               x_labels=[g.when for g in sp.growth], y_format="{:.0f}")
            return ctx.render(request, who, "store.html", sp=sp, chart=chart)

        return pages.page(request, build)

    @r.get("/queue", response_class=HTMLResponse)
    def queue(request: Request, done: Q = "") -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            qp = overview.queue_page(ctx.memory, ctx.locked, who.caller)
            return ctx.render(request, who, "queue.html", qp=qp, done=DONE.get(done))

        return pages.page(request, build)

    @r.get("/imports", response_class=HTMLResponse)
    def import_reports(request: Request) -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            logs = imports.imports_page(ctx.memory, ctx.locked, who.caller)
            return ctx.render(request, who, "imports.html", logs=logs)

        return pages.page(request, build)

    @r.get("/imports/{report_id}", response_class=HTMLResponse)
    def import_report(request: Request, report_id: str) -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            log = imports.import_page(ctx.memory, ctx.locked, who.caller, report_id)
            return ctx.render(request, who, "import.html", log=log)

        return pages.page(request, build)

    @r.get("/peers", response_class=HTMLResponse)
    def peers_page(request: Request) -> HTMLResponse:
        def build(who: Viewer) -> HTMLResponse:
            pp = peers.peers_page(ctx.sync, who.caller)
            return ctx.render(request, who, "peers.html", pp=pp)

        return pages.page(request, build)


__all__ = ["install"]
