"""HTTP routes that move a whole store: NDJSON export (streamed) and import (amcp's own
bundle, or another tool's file through ``amcp.portability``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import IO, Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from amcp.api import imports
from amcp.api import schemas as s
from amcp.api.context import ERRORS, ApiContext, api_of
from amcp.session.policy import Mode
from amcp.web.access import Caller

EXPORT_CHUNK = 64 * 1024
EXPORT_SPOOL = 8 * 1024 * 1024  # an export larger than this spills to a temporary file

router = APIRouter(tags=["portability"])


@router.get(
    "/v1/export",
    responses={
        200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
              "description": "amcp NDJSON export, streamed"},
        **ERRORS,
    },
    response_class=StreamingResponse,
)
def export(request: Request, include_sensitive: bool = False) -> StreamingResponse:
    """The whole store as NDJSON (header, one record per line, digest end marker)."""
    api = api_of(request)
    api.caller(request).check_everything(Mode.READ, "export")
    # Written to a spooled file under the lock, then streamed without it: a slow
    # client never holds the store, and the export is one consistent snapshot.
    spool = tempfile.SpooledTemporaryFile(max_size=EXPORT_SPOOL, mode="w+b")  # noqa: SIM115 - closed by the stream
    api.locked(api.memory.export, _TextSink(spool), include_sensitive=include_sensitive)
    spool.seek(0)
    return StreamingResponse(
        _chunks(spool), media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="amcp-export.ndjson"'},
    )


@router.post(
    "/v1/import",
    response_model=s.ImportOut,
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
        }
    },
)
async def import_(
    request: Request,
    from_: Annotated[str | None, Query(alias="from")] = None,
    scope: str | None = None,
    assume_tz: str | None = None,
    dry_run: bool = False,
) -> Any:
    """Import an NDJSON export (idempotent; purged records never come back).

    Every line is parsed and scope-checked before anything is stored, so a malformed
    line (400, naming the line) or a record outside the token's scopes (403) leaves the
    store untouched. With ``from`` (mem0, mcp-memory, letta, chatgpt, claude, ...; see
    docs/portability.md) the body is another tool's file: planned, scope-checked,
    imported and verified; the answer is the health and verification report.
    """
    api = api_of(request)
    who = api.caller(request)
    spool = await imports.spool_body(request)  # bounded memory: see amcp.api.imports
    try:
        if from_ not in (None, "amcp"):
            return JSONResponse(await run_in_threadpool(
                api.locked, _import_upload, api, spool, from_, scope, assume_tz, dry_run, who))
        await run_in_threadpool(imports.precheck, imports.iter_lines(spool), who)
        report = await run_in_threadpool(
            api.locked, api.memory.import_, imports.iter_lines(spool))
    finally:
        spool.close()
    return s.ImportOut(
        created=report.created, already=report.already, tombstones=report.tombstones,
        refused_purged=report.refused_purged, state_changes=report.state_changes,
        complete=report.complete, errors=list(report.errors),
    )


def _import_upload(
    api: ApiContext, spool: Any, kind: str, scope: str | None, tz: str | None, dry: bool,
    who: Caller,
) -> dict[str, object]:
    from amcp.portability.api import import_upload
    from amcp.portability.model import ImportOptions

    options = ImportOptions(kind=kind, scope=scope, assume_tz=tz)
    return import_upload(api.memory, spool, options, check_scopes=who.check_write,
                         dry_run=dry).to_dict()


class _TextSink:
    """The text-file face ``Memory.export`` writes to, over a binary spool."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        self._raw.write(text.encode("utf-8"))
        return len(text)


def _chunks(spool: IO[bytes]) -> Iterator[bytes]:
    try:
        while chunk := spool.read(EXPORT_CHUNK):
            yield chunk
    finally:
        spool.close()


__all__ = ["router"]
