"""DSNs as the PostgreSQL adapter shows them: never with their password."""

from __future__ import annotations

from amcp.store.dsn import redact_dsn as redacted  # the one DSN redaction

__all__ = ["redacted"]
