"""MCP tools for working with single records and scopes, beside the six core ones:
read by id, list, supersede, purge (with confirmation) and export of a scope.

Every id argument is resolved by ``Memory.resolve_id`` (a whole id or a unique prefix), the
same rule as the CLI and the HTTP API. Registered by ``amcp.api.mcp_server.build_mcp``.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, StrictBool

from amcp.amf.types import KnowledgeType
from amcp.api.mcp_args import Name, Names, ScopeArg, Text, scopes_of
from amcp.errors import ValidationError
from amcp.memory import Memory

T = TypeVar("T")
Call = Callable[..., Any]

MAX_LIST = 200  # one tool result a model reads whole
MAX_EXPORT_CHARS = 2_000_000  # beyond this a scope is for `amcp export`, not a tool result
LifecycleName = Literal["active", "superseded", "invalidated", "archived", "purged", "draft"]
IdArg = Annotated[Name, Field(description="The memory's knowledge_id, or a unique start of it")]


class StoredMemory(BaseModel):
    knowledge_id: str
    lifecycle: str
    type: str | None = None
    scope: list[str] = []
    tags: list[str] = []
    created_at: str | None = None
    superseded_by: str | None = None
    reason: str | None = None
    text: str | None = Field(default=None, description="Untrusted stored content")


class ListResult(BaseModel):
    untrusted_content: bool = True
    items: list[StoredMemory]


class SupersedeResult(BaseModel):
    knowledge_id: str
    supersedes: str


class PurgeResult(BaseModel):
    knowledge_id: str
    purged: bool


class ExportResult(BaseModel):
    untrusted_content: bool = True
    format: str
    records: int
    ndjson: str


def _stored(item: Any) -> StoredMemory:
    rec, st = item.record, item.state
    return StoredMemory(
        knowledge_id=item.knowledge_id, lifecycle=st.lifecycle.value,
        type=rec.type.value if rec else None,
        scope=list(rec.meta.project_scope) if rec else [],
        tags=list(rec.tags or ()) if rec else [],
        created_at=rec.meta.created_at if rec else None,
        superseded_by=st.superseded_by, reason=st.reason, text=rec.text if rec else None,
    )


def _ro(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=True, destructive_hint=False,
                           idempotent_hint=True, open_world_hint=False)


def _rw(title: str, *, destructive: bool) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=False, destructive_hint=destructive,
                           idempotent_hint=destructive, open_world_hint=False)


def register(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    """Add memory_read, memory_list, memory_supersede, memory_purge, memory_export."""
    _register_reads(server, memory, call)
    _register_changes(server, memory, call)


def _register_reads(server: MCPServer[Any], memory: Memory, call: Call) -> None:

    @server.tool(name="memory_read", title="Read", annotations=_ro("Read"))
    def memory_read(knowledge_id: IdArg) -> StoredMemory:
        """One memory by id (a unique start of the id is enough), with its lifecycle."""
        kid = call(memory.resolve_id, knowledge_id)
        found = call(memory.read, [kid])
        if not found:
            return StoredMemory(knowledge_id=kid, lifecycle="unknown")
        return _stored(found[0])

    @server.tool(name="memory_list", title="List", annotations=_ro("List"))
    def memory_list(
        scope: ScopeArg | None = None,
        types: Annotated[list[KnowledgeType], Field(max_length=8)] | None = None,
        kinds: Names | None = None,
        lifecycle: list[LifecycleName] | None = None,
        created_after: Annotated[Name | None, Field(description="ISO 8601 time")] = None,
        created_before: Annotated[Name | None, Field(description="ISO 8601 time")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST)] = 50,
    ) -> ListResult:
        """Memories in the order they were stored, filtered by scope, type, kind,
        lifecycle (default active) and creation time."""
        items = call(
            memory.list_filtered, scopes=scopes_of(scope),
            types=[t.value for t in types] if types else None, kinds=kinds or None,
            lifecycles=lifecycle or ["active"], created_after=created_after,
            created_before=created_before, limit=limit,
        )
        return ListResult(items=[_stored(it) for it in items])

    @server.tool(name="memory_export", title="Export", annotations=_ro("Export"))
    def memory_export(
        scope: ScopeArg,
        include_sensitive: Annotated[
            StrictBool, Field(description="Also export sensitive memories, decrypted")
        ] = False,
    ) -> ExportResult:
        """The memories of a scope as portable NDJSON (one record a line), to hand to
        another tool or keep as a copy."""
        from amcp.portability.export import export_to

        buffer = io.StringIO()
        rep = call(export_to, memory, buffer, "portable", scopes=scopes_of(scope),
                   include_sensitive=include_sensitive)
        text = buffer.getvalue()
        if len(text) > MAX_EXPORT_CHARS:
            call(_refuse, "scope", f"the export is {len(text):,} characters, more than a tool "
                 "result should carry; run `amcp export --to portable --scope ...` instead")
        return ExportResult(format="portable", records=rep.records, ndjson=text)


def _register_changes(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    @server.tool(name="memory_supersede", title="Supersede",
                 annotations=_rw("Supersede", destructive=False))
    def memory_supersede(
        knowledge_id: IdArg,
        text: Annotated[Text, Field(description="The new version of the memory")],
    ) -> SupersedeResult:
        """Replace a memory with a new version; the old one is kept, marked superseded."""
        kid = call(memory.resolve_id, knowledge_id)
        out = call(memory.supersede, kid, text)
        return SupersedeResult(knowledge_id=out.knowledge_id, supersedes=kid)

    @server.tool(name="memory_purge", title="Purge", annotations=_rw("Purge", destructive=True))
    def memory_purge(
        knowledge_id: IdArg,
        reason: Annotated[Text, Field(description="Why it must be erased")],
        confirm: Annotated[
            Name | None,
            Field(description="The whole knowledge_id again, to confirm the erasure; call "
                  "once without it to be told the id"),
        ] = None,
    ) -> PurgeResult:
        """Erase a memory's content for good (privacy); a tombstone stays so it never comes
        back. Irreversible, so it needs ``confirm`` = the whole id of the memory."""
        kid = call(memory.resolve_id, knowledge_id)
        if confirm != kid:
            call(_refuse, "confirm", f"purging is irreversible: to erase {kid}, call "
                 f"memory_purge again with confirm set to {kid}")
        call(memory.purge, kid, reason)
        return PurgeResult(knowledge_id=kid, purged=True)


def _refuse(field: str, message: str) -> None:
    raise ValidationError(field, message)
