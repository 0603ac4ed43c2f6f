"""The PostgreSQL + pgvector adapter of the Store port (see ``store.PostgresStore``)."""

from __future__ import annotations

from amcp.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
