"""DSNs as the PostgreSQL adapter shows them: never with their password."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redacted(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***`` (URL or keyword form)."""
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
        except ValueError:
            return "postgresql://***"
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            if ":" in user:
                user = user.split(":", 1)[0] + ":***"
            netloc = f"{user}@{host}"
        query = _KEYWORD_PASSWORD.sub(r"\1***", parts.query.replace("&", " ")).replace(" ", "&")
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
