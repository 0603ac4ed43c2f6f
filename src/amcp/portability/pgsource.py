"""Reading another tool's memories out of PostgreSQL: LangGraph's ``PostgresStore``.

``PostgresStore`` keeps the same ``store`` table as ``SqliteStore`` (``prefix``, ``key``,
``value`` as JSONB, ``created_at``/``updated_at`` as timestamptz, ``expires_at``,
``ttl_minutes``). Rather than a second reader, the rows are streamed (a server-side cursor:
bounded memory however large the table) into a temporary SQLite file of the same shape,
which the LangGraph reader (``sources.langgraph``) then reads like any other: one reader,
one set of rules for text, kinds, scopes and times.

The DSN's password is never shown: every name in reports and errors is ``redacted(dsn)``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from amcp.errors import ConfigError, ValidationError
from amcp.store.dsn import redact_dsn

SCHEMES = ("postgresql", "postgres")
_BATCH = 2000  # rows fetched per round trip, and written per SQLite transaction


redacted = redact_dsn  # the one DSN redaction (amcp.store.dsn)


def is_dsn(text: str) -> bool:
    return urlsplit(text).scheme in SCHEMES


def _utc_text(value: Any) -> Any:
    """timestamptz → SQLite ``CURRENT_TIMESTAMP`` text (UTC), as ``SqliteStore`` writes."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return value


def _psycopg() -> Any:
    """psycopg, or a clear error when the postgres extra is not installed."""
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError("reading PostgreSQL needs psycopg: pip install 'pyamcp[postgres]'"
                          ) from exc
    return psycopg


@contextlib.contextmanager
def _connect(dsn: str) -> Iterator[Any]:
    psycopg = _psycopg()
    try:
        conn = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.Error as exc:
        # psycopg's message names host and database, never the password; say which DSN.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValidationError(redacted(dsn), f"cannot connect: {reason}") from None
    try:
        yield conn
    finally:
        conn.close()


def snapshot_langgraph(dsn: str, dst: Path) -> int:
    """Copy the ``store`` table at ``dsn`` into a new SQLite file ``dst``; rows copied."""
    psycopg = _psycopg()  # before anything else: without it, one clear line

    name = redacted(dsn)
    with _connect(dsn) as conn, contextlib.closing(sqlite3.connect(dst)) as out:
        out.execute("CREATE TABLE store (prefix TEXT, key TEXT, value TEXT, created_at TEXT,"
                    " updated_at TEXT)")
        copied = 0
        try:
            with conn.transaction(), conn.cursor(name="amcp_import") as cur:
                cur.itersize = _BATCH
                cur.execute("SELECT prefix, key, value::text, created_at, updated_at FROM store"
                            " ORDER BY created_at, prefix, key")
                while rows := cur.fetchmany(_BATCH):
                    out.executemany("INSERT INTO store VALUES (?, ?, ?, ?, ?)",
                                    [(p, k, v, _utc_text(c), _utc_text(u))
                                     for p, k, v, c, u in rows])
                    out.commit()
                    copied += len(rows)
        except psycopg.errors.UndefinedTable:
            raise ValidationError(name, "no LangGraph store table here (LangGraph's "
                                        "PostgresStore.setup() creates one named store)"
                                  ) from None
        except psycopg.Error as exc:
            raise ValidationError(name, f"reading the store table failed: {exc}") from None
    return copied


__all__ = ["SCHEMES", "is_dsn", "redacted", "snapshot_langgraph"]
