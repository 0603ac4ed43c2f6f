"""HTTP routes about the service itself: liveness and the store's size."""

from __future__ import annotations

from fastapi import APIRouter, Request

from amcp.api import schemas as s
from amcp.api.context import api_of

router = APIRouter(tags=["service"])


@router.get("/v1/health", response_model=s.HealthOut)
def health(request: Request) -> s.HealthOut:
    """Liveness and the store's size; needs no token."""
    api = api_of(request)
    stats = api.locked(api.memory.stats)
    # ``amcp serve`` with replication sets it to the replicator's counters (create_app
    # starts it as None); a bare ``amcp http`` has none.
    sync = request.app.state.sync_status
    return s.HealthOut(
        status="ok", records=stats.records, embedding_model=stats.embedding_model,
        auth=api.access is not None, sync=sync() if sync is not None else None,
    )


__all__ = ["router"]
