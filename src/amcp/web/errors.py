"""AmcpError → HTTP problem and → MCP tool error: the one place each is translated.

AMCP L5 status codes mostly are HTTP codes already (PROFILE §1); the exceptions are the
7xx protocol codes, which an HTTP client can only act on as a bad request, and the
non-error codes (2xx/3xx), which must never arrive here as an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amcp.errors import AmcpError, Status, ValidationError


@dataclass(frozen=True, slots=True)
class Problem:
    """An error as the HTTP API answers it: ``{status, error, field?}``."""

    http_status: int
    status: int  # the AMCP status code, which can be more precise than the HTTP one
    error: str
    field: str | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "error": self.error}
        if self.field:
            out["field"] = self.field
        return out


def http_status_for(status: int) -> int:
    if 400 <= status < 600:
        return status
    if 700 <= status < 800:
        return 400  # protocol violations (bad checksum, bad version): the request is at fault
    return 500  # a 2xx/3xx raised as an error is a bug on our side


def problem_for(exc: AmcpError) -> Problem:
    """Translate any AmcpError for HTTP."""
    status = int(exc.status)
    http = http_status_for(status)
    field = exc.field if isinstance(exc, ValidationError) and exc.field else None
    return Problem(http, status, exc.message, field)


def tool_error_text(exc: AmcpError) -> str:
    """Translate any AmcpError for MCP: the text of an ``isError`` tool result.

    It names the AMCP status and, for a validation error, the field, so a model can
    correct its call instead of retrying it unchanged.
    """
    name = Status(exc.status).name if int(exc.status) in Status._value2member_map_ else "ERROR"
    text = f"{int(exc.status)} {name}: {exc.message}"
    if isinstance(exc, ValidationError) and exc.field:
        text += f" (field: {exc.field})"
    return text


__all__ = ["Problem", "http_status_for", "problem_for", "tool_error_text"]
