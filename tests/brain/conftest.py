from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.memory import Memory

NOW = 1_796_083_200.0  # 2026-12-01T00:00:00Z: every compile in these tests uses this clock


@pytest.fixture
def brain_mem(tmp_path: Path) -> Iterator[Memory]:
    """A small store with every case the brain must show: superseded, invalidated, a
    lifefact, outcomes, two regions, a sensitive record."""
    m = Memory(tmp_path / "store" / "memory.db", embedder="hashing")
    a = m.remember("Deploys happen on Thursday", scope="project:amcp", kind="learning",
                   created_at="2026-11-01T00:00:00Z")
    m.supersede(a.knowledge_id, "Deploys happen on Friday", created_at="2026-11-02T00:00:00Z")
    b = m.remember("Use rebase, not merge, on feature branches", scope="project:amcp",
                   type="KT-PATTERN", sample_size=3, kind="pattern",
                   created_at="2026-11-03T00:00:00Z")
    m.outcome([b.knowledge_id], "success")
    c = m.remember("The CI cache key includes the lock file", scope="project:amcp",
                   created_at="2026-11-04T00:00:00Z")
    m.invalidate(c.knowledge_id, "no longer true")
    life = m.remember("Alice's birthday is 1 May", scope="user:alice", kind="lifefact",
                      created_at="2026-10-01T00:00:00Z")
    m.outcome([life.knowledge_id], "failure")
    m.remember("Alice prefers tabs | not spaces", scope="user:alice", kind="preference",
               created_at="2026-10-02T00:00:00Z")
    m.remember("the staging password is hunter2", scope="user:alice", sensitive=True,
               created_at="2026-10-03T00:00:00Z")
    yield m
    m.close()
