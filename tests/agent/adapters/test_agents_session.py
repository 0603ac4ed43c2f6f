"""AmcpSession through the Agents SDK's documented Session protocol."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.memory import Session

from amcp.agent.adapters.agents_session import AmcpSession, item_text, session_scope
from amcp.memory import Memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    yield m
    m.close()


ITEMS: list[Any] = [
    {"role": "user", "content": "What is the deploy command?"},
    {"role": "assistant", "content": [{"type": "output_text", "text": "make deploy"}]},
    {"role": "user", "content": "ok"},
    {"role": "user", "content": "ok"},  # identical items stay two records
    {"type": "function_call_output", "call_id": "c1", "output": "{\"status\": 0}"},
]


def test_is_an_agents_session(memory: Memory) -> None:
    s = AmcpSession("conv-1", memory)
    assert isinstance(s, Session)  # the SDK's runtime-checkable protocol
    assert s.session_settings is None


def test_protocol_round_trip(memory: Memory) -> None:
    async def run() -> None:
        s = AmcpSession("conv-1", memory)
        assert await s.get_items() == []
        await s.add_items(ITEMS[:3])
        await s.add_items(ITEMS[3:])
        assert await s.get_items() == ITEMS
        assert await s.get_items(limit=2) == ITEMS[-2:]
        assert await s.get_items(limit=0) == []
        assert await s.pop_item() == ITEMS[-1]
        assert await s.get_items() == ITEMS[:-1]
        await s.add_items([{"role": "user", "content": "again"}])
        assert (await s.get_items())[-1] == {"role": "user", "content": "again"}
        other = AmcpSession("conv-2", memory)
        assert await other.get_items() == []
        await s.clear_session()
        assert await s.get_items() == []
        assert await s.pop_item() is None

    asyncio.run(run())


def test_history_is_searchable_memory(memory: Memory) -> None:
    asyncio.run(AmcpSession("conv-9", memory).add_items(ITEMS))
    hits = memory.recall("deploy command", k=3, scope=session_scope("conv-9"))
    assert hits.records and "deploy" in hits.records[0].text


def test_persists_across_instances(memory: Memory) -> None:
    asyncio.run(AmcpSession("c", memory).add_items(ITEMS[:2]))
    assert asyncio.run(AmcpSession("c", memory).get_items()) == ITEMS[:2]


def test_runner_uses_the_session(memory: Memory) -> None:
    """The SDK's Runner reads history from and writes the turn to our session."""
    from agents import Agent, RunConfig, Runner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    seen: list[Any] = []

    class EchoModel(Model):
        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:
            seen.append(input)
            msg = ResponseOutputMessage(
                id="m1", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="pong", annotations=[])],
            )
            return ModelResponse(output=[msg], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    agent = Agent(name="a", model=EchoModel())
    session = AmcpSession("run-1", memory)
    quiet = RunConfig(tracing_disabled=True)  # no exporter here, and no network in tests
    asyncio.run(Runner.run(agent, "ping", session=session, run_config=quiet))
    asyncio.run(Runner.run(agent, "ping again", session=session, run_config=quiet))
    items = asyncio.run(session.get_items())
    texts = [item_text(i) for i in items]
    assert texts[0] == "user: ping" and any("pong" in t for t in texts)
    assert "user: ping again" in texts
    # the second run was given the first run's history from our session
    assert isinstance(seen[1], list) and len(seen[1]) >= 3
