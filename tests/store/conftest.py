"""The store contract runs against every adapter: add one to ADAPTERS and it is tested."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from amcp.keyring import Keyring
from amcp.store.base import Store
from amcp.store.sqlite import SQLiteStore


def _sqlite(tmp: Path) -> Callable[[], Store]:
    keyring = Keyring(tmp / "keys")
    return lambda: SQLiteStore(tmp / "memory.db", keyring)


ADAPTERS: dict[str, Callable[[Path], Callable[[], Store]]] = {"sqlite": _sqlite}


@pytest.fixture(params=sorted(ADAPTERS))
def open_store(request: Any, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """A factory that (re)opens the same store; everything it opened is closed after."""
    opened: list[Store] = []
    factory = ADAPTERS[request.param](tmp_path)

    def make() -> Store:
        store = factory()
        opened.append(store)
        return store

    yield make
    for store in opened:
        with contextlib.suppress(Exception):  # a test may have closed it already
            store.close()
