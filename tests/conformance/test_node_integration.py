"""Level 1 against our own asyncio node (amcp.node) on a free loopback port: 8/8 must pass."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from amcp.conformance import KitConfig, run_level

node = pytest.importorskip(
    "amcp.node.server", reason="amcp.node.server (the asyncio node) is not available yet"
)

# Real waits except the 5 s silence window, which only makes the run slower.
CONFIG = KitConfig(timeout=5.0, silence_window=1.0)


@contextmanager
def running_node(store: Path) -> Iterator[tuple[str, int]]:
    """Our node in a thread with its own event loop, since the kit is synchronous."""
    from amcp.memory import Memory

    memory = Memory(store, embedder="hashing")
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        box["server"] = loop.run_until_complete(node.serve(memory, "127.0.0.1", 0))
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert started.wait(30), "node did not start"
        yield "127.0.0.1", box["server"].port
    finally:
        if "server" in box:
            asyncio.run_coroutine_threadsafe(box["server"].close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
        memory.close()


def test_our_node_passes_level_1(tmp_path: Path) -> None:
    with running_node(tmp_path / "store" / "memory.db") as (host, port):
        report = run_level(host, port, config=CONFIG)
    failures = [(r.id, r.detail, [c for c in r.checks if not c.passed]) for r in report.results
                if not r.passed]
    assert not failures, failures
    assert len(report.results) == 8 and report.passed


@pytest.mark.slow
def test_our_node_passes_level_1_with_upstream_waits(tmp_path: Path) -> None:
    with running_node(tmp_path / "store" / "memory.db") as (host, port):
        report = run_level(host, port, config=replace(CONFIG, silence_window=5.0))
    assert report.passed, [(r.id, r.detail) for r in report.results if not r.passed]


def test_a_run_writes_into_its_own_scope_and_takes_out_what_it_wrote(tmp_path: Path) -> None:
    from amcp.memory import Memory

    store = tmp_path / "store" / "memory.db"
    with Memory(store, embedder="hashing") as mem:
        mine = mem.remember("the user's own memory", scope="user:alice").knowledge_id
    with running_node(store) as (host, port):
        first = run_level(host, port, config=CONFIG)
        second = run_level(host, port, config=KitConfig(timeout=5.0, silence_window=1.0))
    assert first.passed and second.passed
    assert "invalidated the" in first.cleanup and "records the run stored" in first.cleanup
    with Memory(store, embedder="hashing") as mem:
        active = mem.list_filtered(lifecycles=["active"], limit=1000)
        scopes = {s for it in mem.list_filtered(lifecycles=None, limit=1000)
                  for s in it.record.meta.project_scope} if active else set()
    assert [it.knowledge_id for it in active] == [mine]  # nothing of the kit's left in service
    kit_scopes = {s for s in scopes if s.startswith("amcp-conformance-")}
    assert len(kit_scopes) == 2  # one disposable scope per run
