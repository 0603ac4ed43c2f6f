from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.memory import Memory


@pytest.fixture(autouse=True, scope="session")
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Witnesses (amcp.paths) go to a temporary per-user state directory, never the real
    one; child processes (CLI, node, hooks) inherit it through the environment."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
    yield
    mp.undo()


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    """A fresh store with the dependency-free hashing embedder (fast, deterministic)."""
    m = Memory(tmp_path / "store" / "memory.db", embedder="hashing")
    yield m
    m.close()
