"""The brain's errors, inside the package's one exception tree (``amcp.errors``)."""

from __future__ import annotations

from amcp.errors import AmcpError, ConfigError, Status, ValidationError


class BrainError(AmcpError):
    """A brain operation could not complete; nothing was lost (the message says where)."""

    status = Status.CONFLICT


class FrontMatterError(ValidationError):
    """A Markdown file's front matter cannot be read; the file is left as it is."""


class RemoteError(BrainError):
    """A remote (GitHub, a git remote) refused or failed; what was done so far is kept."""

    status = Status.UNAVAILABLE


class MissingToken(ConfigError):
    """No GitHub token was given."""


__all__ = ["BrainError", "FrontMatterError", "MissingToken", "RemoteError"]
