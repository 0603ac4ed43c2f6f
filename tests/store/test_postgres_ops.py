"""Bad input against a real PostgreSQL (issue 16): each gets one clear line and exit 1 from
the CLI, a DSN's password never shows (output or log record), acknowledged writes survive
the server going away, and nothing is half-written. Also ``amcp init`` and ``amcp store
copy`` with PostgreSQL on either side.

A private embedded server (``pg_server``) is used: these tests need password logins and a
server they may stop; the session's shared one (``postgres_dsn``) trusts every login.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

pytest.importorskip("amcp.store.postgres")

from tests.store.copy_kit import EVERYTHING, populate, snapshot
from tests.store.pg_server import PrivateServer, private_server

from amcp.cli.app import app
from amcp.errors import StoreError
from amcp.memory import Memory

pytestmark = pytest.mark.postgres
runner = CliRunner()
PASSWORD = "Pa55-d0nt-sh0w"
ODD = "p@ss:w/o%rd?#&=+ x"  # every character a URL's userinfo must encode


@pytest.fixture(scope="module")
def pg() -> Iterator[PrivateServer]:
    with private_server() as server:
        yield server


@pytest.fixture
def team(pg: PrivateServer) -> str:
    """A database its own role owns, with pgvector installed by the superuser (as a
    database owner would ask a DBA to): that role's DSN."""
    import uuid

    db = "t_" + uuid.uuid4().hex[:10]
    role = pg.role(PASSWORD, owns=db)
    pg.sql("CREATE EXTENSION vector", database=db)
    return pg.dsn(role, PASSWORD, db)


def cli(*args: str, caplog: pytest.LogCaptureFixture | None = None) -> tuple[int, str]:
    if caplog is not None:
        caplog.set_level(logging.DEBUG)
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


def assert_one_line_error(code: int, output: str, *secrets: str,
                          caplog: pytest.LogCaptureFixture) -> None:
    assert code == 1, output
    assert output.startswith("error: ") and output.count("\n") == 1, output
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in secrets:
        assert secret not in output, output
        assert secret not in logged, logged


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------- init and URL forms


def test_init_creates_the_schema_and_says_where(team: str,
                                                caplog: pytest.LogCaptureFixture) -> None:
    code, out = cli("init", "--store", team, "--embedder", "hashing", caplog=caplog)
    assert code == 0, out
    assert "store ready at postgresql://" in out and ":***@" in out
    code, out = cli("remember", "the team hub runs on PostgreSQL", "--store", team,
                    "--scope", "team:core", caplog=caplog)
    assert code == 0, out
    code, out = cli("stats", "--store", team, "--json", caplog=caplog)
    assert code == 0 and json.loads(out)["records"] == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert PASSWORD not in out + logged


def test_odd_characters_in_the_password(pg: PrivateServer,
                                        caplog: pytest.LogCaptureFixture) -> None:
    role = pg.role(ODD, owns="odd_chars")
    pg.sql("CREATE EXTENSION vector", database="odd_chars")
    dsn = pg.dsn(role, ODD, "odd_chars")
    assert "%40" in dsn and "%2F" in dsn and "%25" in dsn
    code, out = cli("init", "--store", dsn, "--embedder", "hashing", caplog=caplog)
    assert code == 0, out
    code, out = cli("remember", "odd passwords work", "--store", dsn, caplog=caplog)
    assert code == 0, out
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for shown in (ODD, dsn.split("@")[0].split(":")[-1]):  # in clear and percent-encoded
        assert shown not in out + logged


def test_an_unencoded_password_is_refused_before_connecting(
        pg: PrivateServer, caplog: pytest.LogCaptureFixture) -> None:
    raw = f"postgresql://someone:pa/ss@/x?host={pg.socket}"
    code, out = cli("init", "--store", raw, "--embedder", "hashing", caplog=caplog)
    assert_one_line_error(code, out, "pa/ss", caplog=caplog)
    assert "percent-encoded" in out


# ---------------------------------------------------------------------- bad input


def test_wrong_password(team: str, caplog: pytest.LogCaptureFixture) -> None:
    wrong = team.replace(PASSWORD, "Wr0ng-Pa55")
    code, out = cli("init", "--store", wrong, "--embedder", "hashing", caplog=caplog)
    assert_one_line_error(code, out, "Wr0ng-Pa55", caplog=caplog)
    assert "password authentication failed" in out


def test_unreachable_host(caplog: pytest.LogCaptureFixture) -> None:
    dsn = f"postgresql://amcp:{PASSWORD}@127.0.0.1:{free_port()}/amcp?connect_timeout=3"
    started = time.perf_counter()
    for command in (["init", "--embedder", "hashing"], ["recall", "x"], ["stats"]):
        code, out = cli(*command, "--store", dsn, caplog=caplog)
        assert_one_line_error(code, out, PASSWORD, caplog=caplog)
        assert "127.0.0.1" in out
    assert time.perf_counter() - started < 120  # refused, not hung


def test_database_without_pgvector(pg: PrivateServer, caplog: pytest.LogCaptureFixture) -> None:
    """The role owns its database but may not create the (untrusted) vector extension."""
    role = pg.role(PASSWORD, owns="no_vector")
    dsn = pg.dsn(role, PASSWORD, "no_vector")
    code, out = cli("init", "--store", dsn, "--embedder", "hashing", caplog=caplog)
    assert_one_line_error(code, out, PASSWORD, caplog=caplog)
    assert "CREATE EXTENSION vector" in out
    made = pg.sql("SELECT tablename FROM pg_tables WHERE schemaname='public'",
                  database="no_vector")
    assert ("records",) not in made and ("changes",) not in made  # nothing half-made
    pg.sql("CREATE EXTENSION vector", database="no_vector")  # the DBA does as asked
    code, out = cli("init", "--store", dsn, "--embedder", "hashing", caplog=caplog)
    assert code == 0, out


def test_schema_from_a_newer_version(pg: PrivateServer, team: str,
                                     caplog: pytest.LogCaptureFixture) -> None:
    code, out = cli("init", "--store", team, "--embedder", "hashing")
    assert code == 0, out
    db = urlsplit(team).path.lstrip("/")
    pg.sql("UPDATE store_meta SET value = '999' WHERE key = 'schema_version'", database=db)
    for command in (["stats"], ["remember", "x"], ["init", "--embedder", "hashing"]):
        code, out = cli(*command, "--store", team, caplog=caplog)
        assert_one_line_error(code, out, PASSWORD, caplog=caplog)
        assert "v999" in out and "upgrade amcp" in out
    assert pg.sql("SELECT value FROM store_meta WHERE key='schema_version'",
                  database=db) == [("999",)]  # left as found


def test_the_server_going_away_mid_write(pg: PrivateServer, team: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """A crash (immediate stop) while a writer writes: the writer gets one StoreError, the
    CLI one line; after a restart every acknowledged write is there, the chain verifies,
    and the store holds nothing but acknowledged writes and at most the one in flight."""
    acked: list[str] = []
    failed: list[BaseException] = []
    mem = Memory(team, embedder="hashing")
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            try:
                acked.append(mem.remember(f"note {n} before the crash",
                                          scope="team:core").knowledge_id)
            except Exception as exc:
                failed.append(exc)
                return
            n += 1

    thread = threading.Thread(target=write)
    thread.start()
    while len(acked) < 20:
        time.sleep(0.01)
    pg.stop()
    thread.join(60)
    stop.set()
    assert failed and isinstance(failed[0], StoreError), failed
    assert "\n" not in str(failed[0]) and PASSWORD not in str(failed[0])
    code, out = cli("remember", "while it is down", "--store", team, caplog=caplog)
    assert_one_line_error(code, out, PASSWORD, caplog=caplog)
    mem.close()
    pg.start()
    with Memory(team, embedder="hashing") as again:
        assert again.store.verify(full=True).ok
        stored = {s.knowledge_id for s in again.store.query(EVERYTHING, limit=10_000)}
        assert set(acked) <= stored
        assert len(stored - set(acked)) <= 1  # the write in flight, whole or not at all
        again.remember("after the restart", scope="team:core")


# ---------------------------------------------------------------------- store copy


@pytest.fixture
def sqlite_source(tmp_path: Path) -> Path:
    path = tmp_path / "a" / "memory.db"
    with Memory(path, embedder="hashing") as mem:
        populate(mem)
    return path


def test_copy_sqlite_to_postgres_and_back(sqlite_source: Path, team: str, tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    code, out = cli("store", "copy", str(sqlite_source), team, "--json", caplog=caplog)
    assert code == 0, out
    rep = json.loads(out)
    assert rep["ok"], rep["checks"]
    assert ":***@" in rep["destination"] and PASSWORD not in out
    back = tmp_path / "back" / "memory.db"
    code, out = cli("store", "copy", team, f"sqlite://{back}", "--json", caplog=caplog)
    assert code == 0, out
    assert json.loads(out)["ok"]
    with Memory(sqlite_source, embedder="hashing") as a, Memory(team, embedder="hashing") as b, \
            Memory(back, embedder="hashing") as c:
        assert snapshot(a.store) == snapshot(b.store) == snapshot(c.store)
        assert b.recall("which bay fires at 1007 degrees", k=1).records[0].text.startswith(
            "batch fact 7")
    code, out = cli("store", "copy", str(sqlite_source), team, caplog=caplog)
    assert_one_line_error(code, out, PASSWORD, caplog=caplog)
    assert "not empty" in out


def test_amcp_store_and_where_the_keys_live(team: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``AMCP_STORE`` names the database; its node keys live in the per-user state
    directory under the database's slug (no file beside a database), never its password."""
    from amcp.store.url import parse_store_url

    monkeypatch.setenv("AMCP_STATE_DIR", str(tmp_path / "state"))
    res = runner.invoke(app, ["init", "--embedder", "hashing"], env={"AMCP_STORE": team})
    assert res.exit_code == 0, res.output
    anchor = parse_store_url(team).anchor
    assert (anchor.parent / "keys" / "node.ed25519.pem").exists()
    assert anchor.parent.parent == tmp_path / "state" / "postgres"
    assert PASSWORD not in str(anchor)
    with Memory(team, embedder="hashing") as mem:
        assert mem.keyring.directory == anchor.parent / "keys"
        assert mem.stats().records == 0
