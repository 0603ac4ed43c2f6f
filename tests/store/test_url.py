"""``amcp.store.url``: which store a text names, and that a DSN's password never shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from amcp.errors import ConfigError
from amcp.memory import Memory
from amcp.store.url import Backend, StoreLocation, parse_store_url

SECRET = "s3cr:et@/%?#"  # every character that needs encoding in a URL's userinfo
ENCODED = "s3cr%3Aet%40%2F%25%3F%23"


@pytest.mark.parametrize(("text", "path"), [
    ("memory.db", Path("memory.db")),
    ("/abs/dir/memory.db", Path("/abs/dir/memory.db")),
    ("sqlite:///abs/dir/memory.db", Path("/abs/dir/memory.db")),
    ("sqlite:rel/memory.db", Path("rel/memory.db")),
    ("sqlite:/abs/memory.db", Path("/abs/memory.db")),
    ("sqlite:///a%20b.db", Path("/a b.db")),
    ("SQLite:///x.db", Path("/x.db")),
    ("./odd:name.db", Path("odd:name.db")),  # a file name with a colon: say ./ first
    ("C:\\data\\memory.db", Path("C:\\data\\memory.db")),
])
def test_sqlite_forms(text: str, path: Path) -> None:
    loc = parse_store_url(text)
    assert loc.backend is Backend.SQLITE
    assert loc.path == path
    assert loc.anchor == path


def test_home_is_expanded() -> None:
    assert parse_store_url("~/x.db").path == Path.home() / "x.db"
    assert parse_store_url("sqlite:~/x.db").path == Path.home() / "x.db"


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "POSTGRESQL"])
def test_postgres_forms(scheme: str) -> None:
    loc = parse_store_url(f"{scheme}://amcp:{ENCODED}@db.example:6543/team?sslmode=require")
    assert loc.backend is Backend.POSTGRES
    assert (loc.host, loc.port, loc.dbname, loc.user) == ("db.example", 6543, "team", "amcp")
    assert loc.password == SECRET
    assert loc.path is None
    shown = f"{loc} {loc!r} {loc.redacted()}"
    assert SECRET not in shown and ENCODED not in shown
    assert loc.redacted() == f"{scheme.lower()}://amcp:***@db.example:6543/team?sslmode=require"


def test_password_in_query_is_redacted() -> None:
    loc = parse_store_url("postgresql:///team?host=/run/pg&password=hunter2&user=amcp")
    assert loc.password == "hunter2"
    assert loc.host == "/run/pg"
    assert "hunter2" not in loc.redacted()
    assert "password=***" in loc.redacted()


def test_scrub_takes_the_password_out_of_driver_text() -> None:
    loc = parse_store_url(f"postgresql://u:{ENCODED}@h/db")
    said = f'connection to "postgresql://u:{ENCODED}@h/db" failed ({SECRET})'
    assert SECRET not in loc.scrub(said) and ENCODED not in loc.scrub(said)


def test_anchor_of_a_database_is_in_the_state_dir(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("AMCP_STATE_DIR", str(tmp_path))
    a = parse_store_url("postgresql://alice:x@h:5432/team")
    b = parse_store_url("postgresql://bob:y@h:5432/team")  # another role, the same store
    c = parse_store_url("postgresql://alice:x@h:5432/other")
    assert a.anchor == b.anchor
    assert a.anchor != c.anchor
    assert a.anchor.parent.parent == tmp_path / "postgres"
    assert "x" not in a.slug.split("-")[0]  # no secret in a file name
    assert a.exists() is None


@pytest.mark.parametrize(("text", "says"), [
    ("mysql://u:p@h/db", "unknown store scheme 'mysql'"),
    ("file:///x.db", "unknown store scheme 'file'"),
    ("odd:name.db", r"unknown store scheme 'odd'.*\./NAME"),
    ("sqlite://host/x.db", "not a host"),
    ("sqlite:", "needs a file"),
    ("sqlite:///", "needs a file"),
    ("postgresql:/u:p@h/db", "starts postgresql://"),
    ("postgresql://u:p@h:port/db", "not a number"),
    ("postgresql://u:pa/ss@h/db", "percent-encoded"),
    ("postgresql://u:pa?ss@h/db", "percent-encoded"),
    ("postgresql://u:pa#ss@h/db", "percent-encoded"),
    ("host=db dbname=amcp password=pw", "keyword DSN"),
    ("", "empty store location"),
])
def test_refused(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        parse_store_url(text)
    for secret in ("pa/ss", "pa?ss", "pa#ss", "=pw"):
        assert secret not in str(caught.value)


def test_memory_refuses_a_dsn_shaped_path_instead_of_making_a_file(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch
                                                                    ) -> None:
    """The old failure: a Path built from a DSN collapses '//' and became a file name."""
    monkeypatch.chdir(tmp_path)
    for given in (Path("postgresql://u:p@127.0.0.1:5432/amcp"), "mysql://x/y"):
        with pytest.raises(ConfigError):
            Memory(given, embedder=None)
    assert list(tmp_path.iterdir()) == []


def test_memory_takes_a_sqlite_url(tmp_path: Path) -> None:
    with Memory(f"sqlite://{tmp_path}/m.db", embedder="hashing") as mem:
        mem.remember("the kiln runs at 1240 degrees")
    assert (tmp_path / "m.db").exists()
    with Memory(StoreLocation(Backend.SQLITE, path=tmp_path / "m.db"), embedder="hashing") as mem:
        assert mem.stats().records == 1
    assert mem.location.redacted() == str(tmp_path / "m.db")


@pytest.mark.parametrize(("dsn", "shown"), [
    ("postgresql://u:pw@h:5/d", "postgresql://u:***@h:5/d"),
    ("postgresql://u@h/d", "postgresql://u@h/d"),
    ("postgresql://h/d?password=pw&sslmode=require", "postgresql://h/d?password=***&sslmode=require"),
    ("host=h password=pw dbname=d", "host=h password=*** dbname=d"),
    ("host=h password='p w' dbname=d", "host=h password=*** dbname=d"),
    ("postgresql://u:pw@[::1", "postgresql://***"),
])
def test_redact_dsn(dsn: str, shown: str) -> None:
    from amcp.store.dsn import redact_dsn

    assert redact_dsn(dsn) == shown
