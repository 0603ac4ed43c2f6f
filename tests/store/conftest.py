"""The store contract runs against every adapter: add one to ADAPTERS and it is tested.

An adapter's factory takes the test's temporary directory and its pytest request (for
fixtures such as ``postgres_db``: a fresh database per test, so tests stay independent)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from amcp.keyring import Keyring
from amcp.store.base import Store
from amcp.store.sqlite import SQLiteStore


def _sqlite(tmp: Path, _request: Any) -> Callable[[], Store]:
    keyring = Keyring(tmp / "keys")
    return lambda: SQLiteStore(tmp / "memory.db", keyring)


def _postgres(tmp: Path, request: Any) -> Callable[[], Store]:
    from amcp.store.postgres import PostgresStore

    dsn = request.getfixturevalue("postgres_db")
    keyring = Keyring(tmp / "keys")
    return lambda: PostgresStore(dsn, keyring)


ADAPTERS: dict[str, Callable[[Path, Any], Callable[[], Store]]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(ADAPTERS))
def open_store(request: Any, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """A factory that (re)opens the same store; everything it opened is closed after."""
    opened: list[Store] = []
    factory = ADAPTERS[request.param](tmp_path, request)

    def make() -> Store:
        store = factory()
        opened.append(store)
        return store

    yield make
    for store in opened:
        with contextlib.suppress(Exception):  # a test may have closed it already
            store.close()
