from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.memory import Memory


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    """A fresh store with the dependency-free hashing embedder (fast, deterministic)."""
    m = Memory(tmp_path / "store" / "memory.db", embedder="hashing")
    yield m
    m.close()
