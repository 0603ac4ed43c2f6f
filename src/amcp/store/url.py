"""Which store a text names, and opening it: the one selection every entry point uses.

``--store`` / ``AMCP_STORE`` in the CLI, ``Memory(path)``, the node and the HTTP and MCP
servers (which the CLI starts over a ``Memory``) all go through ``parse_store_url`` and
``open_store``. Accepted forms (docs/postgres.md, "URL forms"):

- a path: ``~/.amcp/memory.db``, ``team.db``  → SQLite
- ``sqlite:///abs/path.db``, ``sqlite:relative.db``  → SQLite
- ``postgresql://user:pass@host:5432/db?sslmode=require`` (or ``postgres://``)  → PostgreSQL

Anything else that has a scheme (``mysql://…``, ``sqlite://host/x``, ``postgresql:/x``) is
an error, so no text can become a SQLite file with a DSN for its name — ``amcp init --store
postgresql://u:p@host/db`` used to create ``./postgresql:/u:p@host/db``.

A DSN's password is secret: ``StoreLocation`` keeps it out of ``str``, ``repr`` and every
message (``redacted()``), and ``scrub`` takes it out of a third party's error text.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from amcp.errors import ConfigError, StoreError
from amcp.store.dsn import redact_dsn

if TYPE_CHECKING:
    from amcp.keyring import Keyring
    from amcp.store.base import Store

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # 2+ chars: "C:\x" is a Windows path
_POSTGRES = ("postgresql", "postgres")
# A libpq keyword DSN ("host=db dbname=amcp"): refused with a hint, not made a file name.
_KEYWORDS = re.compile(r"^\s*(host|hostaddr|dbname|user|port|password|service)\s*=")
_HIDDEN = "***"
FORMS = "a path, sqlite:///ABS/PATH, sqlite:REL/PATH or postgresql://USER:PASS@HOST:PORT/DB"


class Backend(StrEnum):
    SQLITE = "sqlite"
    POSTGRES = "postgres"


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A parsed store selection. ``path`` for SQLite; ``dsn`` (password included, never
    shown) for PostgreSQL. ``str``/``repr`` are the redacted form."""

    backend: Backend
    path: Path | None = None
    dsn: str = field(default="", repr=False)
    host: str = ""
    port: int | None = None
    dbname: str = ""
    user: str = ""
    password: str = field(default="", repr=False)

    def redacted(self) -> str:
        """What every message, repr and log line shows: the DSN with its password as ***."""
        if self.backend is Backend.SQLITE:
            return str(self.path)
        return redact_dsn(self.dsn)

    def __str__(self) -> str:
        return self.redacted()

    def __repr__(self) -> str:
        return f"StoreLocation({self.backend.value}, {self.redacted()!r})"

    def scrub(self, text: str) -> str:
        """``text`` (a driver's error, say) with this DSN's password taken out, in clear
        and percent-encoded."""
        for secret in {self.password, quote(self.password, safe="")} - {""}:
            text = text.replace(secret, _HIDDEN)
        return text

    @property
    def anchor(self) -> Path:
        """The local path this store's node files hang from: the key directory
        (``anchor.parent / "keys"``), the running node's runtime file, session ledgers.
        The SQLite file itself; for PostgreSQL, which has no file beside it,
        ``<state dir>/postgres/<host>-<port>-<db>-<hash>/store`` (docs/postgres.md)."""
        if self.path is not None:
            return self.path
        from amcp.paths import state_dir

        return Path(state_dir()) / "postgres" / self.slug / "store"

    @property
    def slug(self) -> str:
        """A file-name-safe name of the database (not the role: every role on one database
        is one store), with a hash so that names cleaned to the same text stay apart."""
        ident = f"{self.host}\0{self.port or ''}\0{self.dbname}"
        clean = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{self.host or 'local'}-{self.port or 'default'}"
                       f"-{self.dbname or 'default'}")[:80]
        return f"{clean}-{hashlib.sha256(ident.encode()).hexdigest()[:8]}"

    def exists(self) -> bool | None:
        """Whether the store is there, when that is known without connecting (SQLite)."""
        return self.path.exists() if self.path is not None else None


def parse_store_url(text: str | os.PathLike[str]) -> StoreLocation:
    """The store ``text`` names; ConfigError (saying the accepted forms) for anything else."""
    raw = os.fspath(text)
    if not raw.strip():
        raise ConfigError(f"empty store location; give {FORMS}")
    match = _SCHEME.match(raw)
    if match is None:
        if _KEYWORDS.match(raw):
            raise ConfigError("a libpq keyword DSN is not accepted as a store; give it as "
                              "postgresql://USER:PASS@HOST:PORT/DB")
        return StoreLocation(Backend.SQLITE, path=Path(raw).expanduser())
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        return _sqlite(raw)
    if scheme in _POSTGRES:
        return _postgres(raw)
    raise ConfigError(f"unknown store scheme {scheme!r}; give {FORMS} (a file name with a "
                      "colon: ./NAME)")


def _sqlite(raw: str) -> StoreLocation:
    rest = raw[len("sqlite:"):]
    if rest.startswith("//"):
        host, _, path = rest[2:].partition("/")
        if host:
            raise ConfigError(f"a sqlite URL names a local file, not a host ({host!r}): "
                              "sqlite:///ABS/PATH or sqlite:REL/PATH")
        rest = "/" + path
    if rest.strip("/") == "":
        raise ConfigError("a sqlite URL needs a file: sqlite:///ABS/PATH or sqlite:REL/PATH")
    return StoreLocation(Backend.SQLITE, path=Path(unquote(rest)).expanduser())


def _postgres(raw: str) -> StoreLocation:
    scheme = raw.split(":", 1)[0]
    if not raw[len(scheme) + 1:].startswith("//"):
        raise ConfigError(f"a {scheme} URL starts {scheme}://: {scheme}://USER:PASS@HOST:PORT/DB")
    parts = urlsplit(raw)
    # An unencoded '/', '?' or '#' in the password ends the authority early, so the rest of
    # the password lands in the path, query or fragment: refuse, without echoing any of it.
    tail = raw[len(scheme) + 3 + len(parts.netloc):]
    if "@" in tail and "@" not in parts.netloc:
        raise ConfigError(f"the user or password in this {scheme} URL holds a character that "
                          "must be percent-encoded (/ as %2F, ? as %3F, # as %23, @ as %40, "
                          "% as %25)")
    if parts.fragment:
        raise ConfigError(f"a {scheme} URL has no #fragment")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"the port in {redact_dsn(raw)} is not a number from 1 to 65535"
                          ) from None
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    host = unquote(parts.hostname or "") or params.get("host", "")
    return StoreLocation(
        Backend.POSTGRES, dsn=raw, host=host, port=port,
        dbname=unquote(parts.path.lstrip("/")) or params.get("dbname", ""),
        user=unquote(parts.username or "") or params.get("user", ""),
        password=unquote(parts.password or "") or params.get("password", ""),
    )


def open_store(location: StoreLocation, keyring: Keyring, *,
               verify_on_open: bool = True) -> Store:
    """The adapter for ``location``, opened (created if new) and verified per its flag."""
    if location.backend is Backend.SQLITE:
        from amcp.store.owner import check_file
        from amcp.store.sqlite import SQLiteStore

        assert location.path is not None
        check_file(location.path)  # another program's database is refused unchanged
        return SQLiteStore(location.path, keyring, verify_on_open=verify_on_open)
    return _open_postgres(location, keyring, verify_on_open=verify_on_open)


def _open_postgres(location: StoreLocation, keyring: Keyring, *,
                   verify_on_open: bool) -> Store:
    try:
        from amcp.store.postgres import PostgresStore
    except ImportError as exc:
        raise StoreError(f"{location} needs the postgres extra (pip install 'pyamcp[postgres]'):"
                         f" {exc}") from None
    try:
        return PostgresStore(location.dsn, keyring, verify_on_open=verify_on_open)
    except StoreError as exc:
        # The adapter's errors may quote the driver's, which may quote the DSN.
        raise type(exc)(location.scrub(str(exc))) from None
    except Exception as exc:  # noqa: BLE001 - an untranslated driver error, made one line
        raise StoreError(f"cannot open {location}: {location.scrub(str(exc))}") from None


__all__ = ["FORMS", "Backend", "StoreLocation", "open_store", "parse_store_url", "redact_dsn"]
