"""Numbered schema migrations of the PostgreSQL adapter: ``migrations/NNNN_*.sql``.

``store_meta.schema_version`` says how many have run. Each runs in its own transaction under
the store's advisory lock (``locks.STORE``), so several processes opening a new database at
once apply each migration exactly once: the version is read again after the lock is held.
A database at a version above the files' is refused (an older amcp must not write a schema
it does not know). Append only: a released migration file never changes.
"""

from __future__ import annotations

from importlib import resources

import psycopg

from amcp.errors import StoreError
from amcp.store.postgres import locks

_PACKAGE = "amcp.store.postgres.migrations"


def migration_files() -> list[tuple[int, str]]:
    """``(number, sql)`` of every migration file, in order; numbers must run 1, 2, 3 ..."""
    found = []
    for entry in resources.files(_PACKAGE).iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), entry.read_text(encoding="utf-8")))
    found.sort()
    if [n for n, _sql in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration files of {_PACKAGE} are not numbered 1..n")
    return found


SCHEMA_VERSION = len(migration_files())


def _version(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def ensure_vector_extension(conn: psycopg.Connection, where: str) -> None:
    """The ``vector`` type (pgvector), created when missing and this role may; else one
    clear StoreError saying what to ask for."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone():
        return
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name='vector'"
    ).fetchone()
    if not available:
        raise StoreError(
            f"{where} has no pgvector: the server has no 'vector' extension installed "
            "(install pgvector on the PostgreSQL server, then run amcp again)"
        )
    try:
        with locks.holding(conn, locks.STORE):
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        raise StoreError(
            f"{where} has no pgvector, and this role may not create it "
            f"({exc.diag.message_primary or exc}): ask the database owner to run "
            "CREATE EXTENSION vector"
        ) from exc


def migrate(conn: psycopg.Connection, where: str) -> int:
    """Apply the migrations the database lacks; the version it had. ``conn`` is an
    autocommit connection of the store's database (and schema)."""
    ensure_vector_extension(conn, where)  # first: the one thing a plain role may lack
    found = conn.execute("SELECT to_regclass('store_meta')").fetchone()
    if found is None or found[0] is None:  # a role that may not create tables may still use one
        conn.execute(
            'CREATE TABLE IF NOT EXISTS store_meta (key text COLLATE "C" PRIMARY KEY, '
            "value text NOT NULL)"
        )
    first = _version(conn)
    if first > SCHEMA_VERSION:
        raise StoreError(_newer(where, first))
    if first == SCHEMA_VERSION:
        return first
    files = migration_files()
    while True:
        with conn.transaction():
            locks.take(conn, locks.STORE)
            number = _version(conn)
            if number > SCHEMA_VERSION:
                raise StoreError(_newer(where, number))
            if number == SCHEMA_VERSION:
                return first
            try:
                conn.execute(files[number][1])
            except psycopg.Error as exc:
                raise StoreError(f"{where}: migration {number + 1} failed: {exc}") from exc
            conn.execute(
                "INSERT INTO store_meta(key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(number + 1),),
            )


def _newer(where: str, number: int) -> str:
    return (f"{where} has schema v{number}; this amcp knows up to v{SCHEMA_VERSION} of the "
            "PostgreSQL store — upgrade amcp")
