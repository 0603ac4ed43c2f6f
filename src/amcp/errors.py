"""One exception tree for the whole package.

Every error carries the AMCP status code it maps to on the wire (upstream L5 status codes,
PROFILE §1), so the node, the HTTP API, the MCP server and the CLI translate it in one place
each instead of guessing from the exception class.
"""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    """AMCP L5 status codes (PROFILE §1)."""

    OK = 200
    CREATED = 201
    NO_CONTENT = 204
    PARTIAL = 206
    MOVED = 301  # upstream: KNOWLEDGE_SUPERSEDED
    NOT_MODIFIED = 304
    BAD_REQUEST = 400
    UNAUTHORIZED = 401
    FORBIDDEN = 403
    NOT_FOUND = 404
    TIMEOUT = 408
    CONFLICT = 409
    GONE = 410  # upstream: INVALIDATED; we also answer it for purged records
    PRECONDITION_FAILED = 412
    TOO_MANY_REQUESTS = 429
    INTERNAL = 500
    UNAVAILABLE = 503
    INSUFFICIENT_STORAGE = 507
    LOOP_DETECTED = 508
    # 7xx as upstream L5 status_codes names them; the aliases say how this code base uses
    # each one (700 is also the status of a generic PROTOCOL_VIOLATION payload).
    CAPABILITY_MISMATCH = 700
    VERSION_INCOMPATIBLE = 701
    COLD_BOOT_REQUIRED = 702
    KNOWLEDGE_TYPE_UNSUPPORTED = 703
    PROTOCOL_ERROR = 700
    VERSION_NOT_SUPPORTED = 701
    STATE_VIOLATION = 702


class AmcpError(Exception):
    """Root of every error amcp raises on purpose."""

    status: Status = Status.INTERNAL

    def __init__(self, message: str, *, status: Status | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return self.message


class ValidationError(AmcpError):
    """A record or request is malformed; ``field`` names the path (``core.confidence``)."""

    status = Status.BAD_REQUEST

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


class NotFoundError(AmcpError):
    status = Status.NOT_FOUND


class CacheMissError(AmcpError):
    """Upstream CACHE_MISS: the record is evicted from tier 0 (its pointer is in the local
    index) and no peer holding it can be reached now. Not "not found": it exists, and a
    read once a higher-tier peer is back fetches it. 503 on the wire and over HTTP, with
    ``code = "CACHE_MISS"``; ``pointer`` is what the local index knows of it."""

    status = Status.UNAVAILABLE
    code = "CACHE_MISS"

    def __init__(self, message: str, *, pointer: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.pointer = pointer or {}


class AmbiguousIdError(AmcpError):
    """An id prefix a person typed names more than one record; ``candidates`` lists them."""

    status = Status.BAD_REQUEST

    def __init__(self, message: str, candidates: tuple[str, ...]) -> None:
        super().__init__(message)
        self.candidates = candidates


class ConflictError(AmcpError):
    """An existing knowledge_id with different content (PROFILE §6 write order)."""

    status = Status.CONFLICT


class GoneError(AmcpError):
    """The record was purged: its id exists only as a tombstone."""

    status = Status.GONE


class PreconditionFailed(AmcpError):
    """A causal predecessor is missing, or a clock is too far ahead."""

    status = Status.PRECONDITION_FAILED


class ForbiddenError(AmcpError):
    status = Status.FORBIDDEN


class UnauthorizedError(AmcpError):
    status = Status.UNAUTHORIZED


class IntegrityError(AmcpError):
    """Stored or received bytes do not match their checksum, id, signature or hash chain."""

    status = Status.PROTOCOL_ERROR


class StoreError(AmcpError):
    """The store cannot be opened or written (corrupt file, locked, wrong schema)."""

    status = Status.UNAVAILABLE


class StoreIntegrityError(StoreError):
    """The node's *own* store failed verification (a tampered row, a broken change log).

    A store problem, not the peer's fault: answered as ERROR 500, never as a protocol
    violation that would blame and disconnect an innocent client (``IntegrityError`` is for
    bytes a peer sent)."""

    status = Status.INTERNAL


class EmbeddingMismatchError(StoreError):
    """The store's vectors were made by another embedding model or dimension."""

    status = Status.PRECONDITION_FAILED


class ConfigError(AmcpError):
    status = Status.BAD_REQUEST


class ProtocolError(AmcpError):
    """Base of wire/session violations. Carries the status for the 0x00FF payload."""

    status = Status.PROTOCOL_ERROR


class LocalProtocolError(ProtocolError):
    """We were about to send something the protocol forbids."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids: answer 0x00FF and close."""
