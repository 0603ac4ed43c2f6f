"""Round trips through the real tools: mem0 → amcp → mem0, MCP memory → amcp → MCP memory.

The tools are installed from this repository's pins on first use (``realtools``); each
test is marked slow because that first install takes a minute.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.portability import realtools
from tests.portability.kit import FIXTURES, run

from amcp.memory import Memory
from amcp.portability.export import export_to

MEM0_KEPT = ("memory", "hash", "metadata", "user_id", "agent_id", "run_id", "role")


def _by_text(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["memory"]: i for i in items}


def test_mem0_export_gives_the_items_back_exactly(mem: Memory, tmp_path: Path) -> None:
    original = json.loads((FIXTURES / "mem0_get_all.json").read_text())["results"]
    assert run(mem, FIXTURES / "mem0_get_all.json").ok
    export_to(mem, tmp_path / "back.json", "mem0")
    back = json.loads((tmp_path / "back.json").read_text())["results"]
    assert _by_text(back) == _by_text(original)  # ids, hashes, metadata, times: all of it


@pytest.mark.slow
def test_mem0_round_trip_through_real_mem0(mem: Memory, tmp_path: Path) -> None:
    original = json.loads((FIXTURES / "mem0_get_all.json").read_text())["results"]
    assert run(mem, FIXTURES / "mem0_get_all.json").ok
    export_to(mem, tmp_path / "back.json", "mem0")
    reloaded = realtools.mem0_load(tmp_path / "back.json")["results"]
    # mem0 gives every added memory a new id and time; everything the user wrote survives
    want = {t: {k: i.get(k) for k in MEM0_KEPT} for t, i in _by_text(original).items()}
    got = {t: {k: i.get(k) for k in MEM0_KEPT} for t, i in _by_text(reloaded).items()}
    assert got == want


@pytest.mark.slow
def test_mcp_memory_round_trip_through_real_server(mem: Memory, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    graph = realtools.mcp_make(memory_file)  # the server writes its own file
    assert run(mem, memory_file).ok
    export_to(mem, tmp_path / "back.jsonl", "mcp-memory")
    assert realtools.mcp_load(tmp_path / "back.jsonl") == graph
