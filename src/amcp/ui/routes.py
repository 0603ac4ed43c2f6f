"""The inspector's router (``/ui``): its route groups, each a few lines over ``data``,
``overview``, ``imports``, ``peers`` and ``actions``.

GET handlers are sync (FastAPI's thread pool, as the API's); form POSTs are async and run
their work in the pool. Errors render as HTML pages with the API's status codes
(``amcp.ui.pages``); a signed-out viewer gets the sign-in form.
"""

from __future__ import annotations

from fastapi import APIRouter

from amcp.ui import routes_forms, routes_records, routes_store
from amcp.ui.context import UiContext
from amcp.ui.pages import Pages


def router(ctx: UiContext) -> APIRouter:
    r = APIRouter(prefix="/ui", include_in_schema=False)
    pages = Pages(ctx)
    routes_records.install(r, pages)
    routes_store.install(r, pages)
    routes_forms.install_corrections(r, pages)
    routes_forms.install_login(r, ctx)
    return r


__all__ = ["router"]
