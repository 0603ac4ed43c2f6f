"""The six core MCP tools: remember, forget, outcome (they change the store) and recall,
context, query (they read it). Registered by ``amcp.api.mcp_server.build_mcp`` beside the
record tools of ``amcp.api.mcp_records``; ``call`` runs a ``Memory`` method under the
API's lock and turns an ``AmcpError`` into a tool error."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, StrictBool

from amcp.amf.types import KnowledgeType
from amcp.api.mcp_args import Kt, Name, Names, ScopeArg, Text, scopes_of
from amcp.api.mcp_render import amf_item, memory_block, trust_fields
from amcp.api.schemas import MAX_AMQL, MAX_BUDGET, utf8_text
from amcp.cse.pack import Pack
from amcp.firewall import Origin
from amcp.memory import Memory
from amcp.ports import RecallResult as MemoryRecall

Call = Callable[..., Any]

MAX_MCP_K = 50  # a model reads every result; 50 memories is already a long context

ResultKind = Literal["success", "failure", "neutral"]


# ---------------------------------------------------------------------------- outputs


class RememberResult(BaseModel):
    knowledge_id: str
    created: bool = Field(description="False: an identical memory was already stored")
    duplicate_of: str | None = None
    near_duplicates: list[str] = []
    held: str | None = Field(None, description="Why the memory firewall holds it as a draft")


class ProvenanceArg(BaseModel):
    """Where the memory came from (docs/firewall.md). Only a signature by a writer key the
    node has registered makes a claim count; without this, the memory is the agent's."""

    model_config = ConfigDict(extra="forbid")
    origin: Origin
    writer: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    signature: Annotated[str, Field(min_length=1, max_length=300)] | None = None


class RecalledMemory(BaseModel):
    knowledge_id: str
    type: str
    score: float
    scope: list[str]
    tags: list[str] = []
    text: str = Field(description="Untrusted stored content")
    origin: str = Field("", description="user, agent, tool, external, import or peer")
    verification: str = Field("", description="verified, local or unverified")
    trust: str = Field("", description='Where it came from, e.g. "from a web page, unverified"')


class RecallResult(BaseModel):
    untrusted_content: bool = True
    query: str
    results: list[RecalledMemory]
    # Records that failed verification are left out of every answer; this says so.
    warnings: list[str] = []


class ForgetResult(BaseModel):
    knowledge_id: str
    action: Literal["invalidated", "purged"]
    changed: bool


class WeightChange(BaseModel):
    knowledge_id: str
    previous: float
    weight: float


class OutcomeResult(BaseModel):
    result: ResultKind
    updates: list[WeightChange]


class ContextResult(BaseModel):
    untrusted_content: bool = True
    confirmation: str
    pack: dict[str, Any]


class QueryResult(BaseModel):
    untrusted_content: bool = True
    response: dict[str, Any]


def _annotations(title: str, *, read_only: bool, destructive: bool = False,
                 idempotent: bool = True) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=read_only, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


def register(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    """Add memory_remember, memory_forget, memory_outcome, memory_recall, memory_context
    and memory_query."""
    # In this order in tools/list.
    for add in (_register_remember, _register_recall, _register_forget, _register_context,
                _register_outcome, _register_query):
        add(server, memory, call)


def _register_remember(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    @server.tool(name="memory_remember", title="Remember",
                 annotations=_annotations("Remember", read_only=False))
    def memory_remember(
        text: Annotated[Text, Field(description="The memory, one self-contained statement")],
        type: Kt = KnowledgeType.FACT,
        scope: ScopeArg | None = None,  # None: the writer's own scope, never "*"
        tags: Names | None = None,
        kind: Annotated[Name | None, Field(description="preference, task, skill, ...")] = None,
        confidence: Annotated[float, Strict(), Field(ge=0.0, le=1.0)] = 0.9,
        sensitive: Annotated[StrictBool, Field(description="Encrypt at rest, redact")] = False,
        provenance: ProvenanceArg | None = None,
    ) -> RememberResult:
        """Store one memory (a fact, decision, pattern, pitfall ...). Storing the same text
        again is harmless: the existing memory is named instead."""
        claim = provenance.model_dump(exclude_none=True, mode="json") if provenance else None
        out = call(
            memory.remember, text, type=type.value, scope=scopes_of(scope), tags=tags, kind=kind,
            confidence=confidence, sensitive=sensitive,
            provenance=claim or {"origin": "agent"},
        )
        return RememberResult(
            knowledge_id=out.knowledge_id, created=out.created, duplicate_of=out.duplicate_of,
            near_duplicates=[k for k, _ in out.near_duplicates], held=out.held,
        )


def _register_outcome(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    @server.tool(name="memory_outcome", title="Report outcome",
                 annotations=_annotations("Report outcome", read_only=False, idempotent=False))
    def memory_outcome(
        knowledge_ids: Annotated[
            list[Name], Field(min_length=1, max_length=256, description="Memories used")
        ],
        result: Annotated[ResultKind, Field(description="How the work that used them went")],
    ) -> OutcomeResult:
        """Report whether memories you used helped (success), misled (failure) or neither;
        their weights learn from it and rank them next time."""
        updates = call(memory.outcome, [call(memory.resolve_id, k) for k in knowledge_ids], result)
        return OutcomeResult(
            result=result,
            updates=[
                WeightChange(knowledge_id=u.knowledge_id, previous=u.previous, weight=u.weight)
                for u in updates
            ],
        )


def _register_forget(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    @server.tool(name="memory_forget", title="Forget",
                 annotations=_annotations("Forget", read_only=False, destructive=True))
    def memory_forget(
        knowledge_id: Annotated[Name, Field(description="The memory's knowledge_id (K-...)")],
        reason: Annotated[Text, Field(description="Why it is wrong or must go")],
        purge: Annotated[
            StrictBool,
            Field(description="Erase the content for privacy (irreversible) instead of "
                  "invalidating it"),
        ] = False,
    ) -> ForgetResult:
        """Invalidate a wrong memory (kept with the reason, no longer recalled), or purge it
        (content erased; a tombstone stays so it never comes back)."""
        knowledge_id = call(memory.resolve_id, knowledge_id)
        if purge:
            out = call(memory.purge, knowledge_id, reason)
            return ForgetResult(knowledge_id=out.knowledge_id, action="purged", changed=True)
        before = call(memory.get, knowledge_id).state.lifecycle
        out = call(memory.invalidate, knowledge_id, reason)
        return ForgetResult(knowledge_id=out.knowledge_id, action="invalidated",
                            changed=before.value != "invalidated")


def _register_recall(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    @server.tool(name="memory_recall", title="Recall",
                 annotations=_annotations("Recall", read_only=True))
    def memory_recall(
        query: Annotated[Text, Field(description="What to look for, in natural language")],
        k: Annotated[int, Strict(), Field(ge=1, le=MAX_MCP_K, description="How many")] = 8,
        scope: ScopeArg | None = None,
        types: Annotated[list[Kt], Field(max_length=8)] | None = None,
        tags: Names | None = None,
    ) -> Annotated[CallToolResult, RecallResult]:
        """Search memories (hybrid lexical + vector). Results are untrusted stored text."""
        result = call(
            memory.recall, query, k=k, scope=scopes_of(scope),
            types=[t.value for t in types] if types else None, tags=tags or None,
        )
        return _recalled(query, result, list(memory.warnings()))


def _register_query(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    @server.tool(name="memory_query", title="AMQL query",
                 annotations=_annotations("AMQL query", read_only=False, destructive=True,
                                          idempotent=False))
    def memory_query(
        amql: Annotated[
            str, Strict(), AfterValidator(utf8_text),
            Field(min_length=1, max_length=MAX_AMQL,
                  description="One AMQL statement: RECALL, REMEMBER, FORGET or DISTILL"),
        ],
    ) -> Annotated[CallToolResult, QueryResult]:
        """Run one AMQL statement, e.g. RECALL WHERE type = "KT-PITFALL" LIMIT 5.
        FORGET and REMEMBER change the store."""
        response = call(memory.query, amql).to_response()
        rows: Sequence[Any] = response.get("results", [])
        items = [amf_item(r) for r in rows if isinstance(r, Mapping)]
        text = memory_block(
            items,
            heading=f"AMQL returned {len(items)} records in {response.get('query_time_ms')} ms.",
        )
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=QueryResult(response=response).model_dump(mode="json"),
        )


def _register_context(server: MCPServer[Any], memory: Memory, call: Call) -> None:
    @server.tool(name="memory_context", title="Context pack",
                 annotations=_annotations("Context pack", read_only=True))
    def memory_context(
        task: Annotated[Text, Field(description="The task about to start")],
        budget_tokens: Annotated[
            int, Strict(), Field(ge=1000, le=MAX_BUDGET, description="Token budget of the pack")
        ] = 8000,
        project: Name | None = None,
        scopes: ScopeArg | None = None,
    ) -> Annotated[CallToolResult, ContextResult]:
        """A cold-boot context pack: the memories most worth loading for a task, within a
        token budget (deterministic for the same store, task and budget)."""
        pack = call(
            memory.context, task, budget_tokens=budget_tokens, project=project,
            scopes=scopes_of(scopes),
        )
        return _packed(pack)


def _recalled(query: str, result: MemoryRecall, warnings: list[str]) -> CallToolResult:
    found = [
        RecalledMemory(
            knowledge_id=h.knowledge_id, type=rec.type.value, score=round(float(h.score), 6),
            scope=list(rec.meta.project_scope), tags=list(rec.tags or ()), text=rec.text,
            **trust_fields(result.trust.get(h.knowledge_id)),
        )
        for h in result.hits
        if (rec := h.item.record) is not None
    ]
    text = memory_block(
        (m.model_dump() for m in found),
        heading=f"Recalled {len(found)} memories for the query."
        + "".join(f" Warning: {w}" for w in warnings),
    )
    structured = RecallResult(query=query, results=found, warnings=warnings)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured.model_dump(mode="json"),
    )


def _packed(pack: Pack) -> CallToolResult:
    data = pack.to_dict()
    items = [
        amf_item(it["amf"], score=it.get("roi")) if isinstance(it.get("amf"), Mapping)
        else {"knowledge_id": it.get("knowledge_id", "?"), "text": it.get("pointer", "")}
        for it in data.get("items", [])
    ]
    return CallToolResult(
        content=[TextContent(type="text", text=memory_block(items, heading=pack.confirmation))],
        structured_content=ContextResult(
            confirmation=pack.confirmation, pack=data
        ).model_dump(mode="json"),
    )


__all__ = ["MAX_MCP_K", "register"]
