"""Letta / MemGPT agent files (``.af``).

Current files: ``{"agents": [...], "blocks": [...], "files", "sources", "tools", ...}``;
each agent names its core-memory blocks in ``block_ids`` and carries ``messages``. Older
files are one agent object with ``memory_blocks`` / ``core_memory`` (a list of blocks) or
``memory: {"memory": {label: block}}``, and sometimes ``archival_memory``/``passages``.
Some files in the wild are a JSON string holding the JSON (decoded once more, see
``load_json``).

Mapping: a core-memory block → one item ``<label>: <value>`` (scope ``agent:<name>``,
kind fact for ``human``, fact for ``persona`` too: both are standing statements);
archival passages → facts; user and assistant messages → conversation turns for the
capture engine; system messages (the agent's prompt) are dropped; tool messages are logs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, load_json
from amcp.portability.sources.base import ReadContext, Source, head_text


def _sniff(src: SourceFile, head: bytes) -> bool:
    if Path(src.name).suffix == ".af":
        return True
    text = head_text(head)
    return ('"agents"' in text or '\\"agents\\"' in text) and (
        "agent_type" in text or "block_ids" in text or "memory_blocks" in text
    )


def _agents(doc: Any, name: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    if not isinstance(doc, dict):
        raise ValidationError(name, "not a Letta agent file: expected a JSON object")
    blocks = {b["id"]: b for b in doc.get("blocks") or [] if isinstance(b, dict) and "id" in b}
    if isinstance(doc.get("agents"), list):
        return [a for a in doc["agents"] if isinstance(a, dict)], blocks
    if "agent_type" in doc or "memory_blocks" in doc or "core_memory" in doc:
        return [doc], blocks
    raise ValidationError(name, "not a Letta agent file: no 'agents' list or agent object")


def _agent_blocks(agent: Mapping[str, Any], blocks: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = [blocks[i] for i in agent.get("block_ids") or [] if i in blocks]
    for key in ("memory_blocks", "core_memory"):
        found += [b for b in agent.get(key) or [] if isinstance(b, dict)]
    memory = agent.get("memory")
    if isinstance(memory, dict) and isinstance(memory.get("memory"), dict):
        found += [{"label": k, **v} for k, v in memory["memory"].items() if isinstance(v, dict)]
    return found


def _message_text(msg: Mapping[str, Any]) -> str:
    content = msg.get("content") if "content" in msg else msg.get("text")
    if isinstance(content, str):
        return content
    parts = [c.get("text", "") for c in content or [] if isinstance(c, dict)]
    return "\n".join(p for p in parts if isinstance(p, str))


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    doc = load_json(src, ctx.options)
    agents, blocks = _agents(doc, src.name)
    file_time = doc.get("created_at") or ctx.file_time
    for a_n, agent in enumerate(agents):
        name = str(agent.get("name") or agent.get("id") or f"agent-{a_n}")
        scope = ctx.scope(f"agent:{name}")
        base: dict[str, Any] = {"source": "letta", "file": src.name, "scope": scope, "agent": name}
        for b_n, block in enumerate(_agent_blocks(agent, blocks)):
            value = block.get("value")
            if not isinstance(value, str) or not value.strip():
                continue
            label = str(block.get("label") or "block")
            yield SourceItem(
                locator=f"agents[{a_n}] block {label}", text=f"{label}: {value.strip()}",
                created_at=block.get("created_at") or agent.get("created_at") or file_time,
                source_id=f"{name}/block/{block.get('id') or label}", kind_hint="fact",
                meta={"letta": "block", "label": label, "limit": block.get("limit")},
                fallback_time=not (block.get("created_at") or agent.get("created_at")),
                tags=(f"letta-block:{label}",), **base,
            )
            del b_n
        for p_n, passage in enumerate(agent.get("archival_memory") or agent.get("passages") or []):
            text = passage.get("text") if isinstance(passage, dict) else passage
            if isinstance(text, str) and text.strip():
                yield SourceItem(
                    locator=f"agents[{a_n}] passage {p_n}", text=text.strip(),
                    created_at=(passage.get("created_at") if isinstance(passage, dict) else None)
                    or file_time, source_id=f"{name}/passage/{p_n}", kind_hint=None,
                    meta={"letta": "passage"}, **base,
                )
        for m_n, msg in enumerate(agent.get("messages") or []):
            if not isinstance(msg, dict):
                raise ValidationError(f"{src.name}: agents[{a_n}].messages[{m_n}]", "not an object")
            yield SourceItem(
                locator=f"agents[{a_n}].messages[{m_n}]", text=_message_text(msg),
                created_at=msg.get("created_at") or file_time,
                source_id=f"{name}/message/{msg.get('id') or m_n}", role=str(msg.get("role")),
                conversation=f"letta:{name}", meta={"letta": "message"}, **base,
            )


SOURCE = Source("letta", "a Letta / MemGPT agent file (.af)", _sniff, _read)
