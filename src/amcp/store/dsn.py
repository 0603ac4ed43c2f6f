"""A DSN as every message, repr and log line shows it: never with its password.

The one redaction of a DSN, used by the store selection (``amcp.store.url``), the
PostgreSQL adapter and the PostgreSQL importer (``amcp.portability.pgsource``).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

HIDDEN = "***"
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
_KEYWORD_SECRET = re.compile(r"\b((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password (userinfo, ``password=``/``sslpassword=`` in the query, or
    a libpq keyword string's ``password=``) shown as ``***``: the one redaction of a DSN."""
    if "://" not in dsn:
        return _KEYWORD_SECRET.sub(rf"\1{HIDDEN}", dsn)
    try:
        parts = urlsplit(dsn)
    except ValueError:  # an unparsable URL shows nothing of itself
        return dsn.split(":", 1)[0] + f"://{HIDDEN}"
    netloc = parts.netloc
    user, at, hostport = netloc.rpartition("@")
    if at and ":" in user:
        netloc = f"{user.split(':', 1)[0]}:{HIDDEN}@{hostport}"
    # The query as written, only a secret parameter's value replaced.
    query = "&".join(
        f"{key}={HIDDEN}" if unquote(key).lower() in _SECRET_PARAMS else pair
        for pair in parts.query.split("&") if pair
        for key in (pair.partition("=")[0],)
    )
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


__all__ = ["HIDDEN", "redact_dsn"]
