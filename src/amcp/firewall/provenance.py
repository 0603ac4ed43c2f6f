"""Who wrote a record, through which channel, and the writer's signature over it.

Carried in ``vendor_extensions["x-provenance"]``, which the record's envelope covers
(PROFILE §6) and the signed change log names by that envelope, so the claim cannot be
edited after the write without the store quarantining the record. What the claim is
*worth* is decided by the node (``amcp.firewall.verify``), never by the claim itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from amcp.errors import ValidationError

if TYPE_CHECKING:
    from typing import Any

    from amcp.amf.record import AMFRecord

EXTENSION = "x-provenance"
FIELD = "provenance"  # how errors name it (HTTP/MCP field name)
MAX_WRITER = 200  # an identity, not a document
MAX_SIGNATURE = 300  # "ed25519:" + base64 of 64 bytes is 96; room for other schemes


class Origin(StrEnum):
    """The channel a memory arrived on."""

    USER = "user"  # the person the memory is about said it
    AGENT = "agent"  # the agent concluded or summarised it
    TOOL = "tool"  # a tool result
    EXTERNAL = "external"  # something read: a web page, an email, a document
    IMPORT = "import"  # brought in from another tool's export
    PEER = "peer"  # another node sent it


class Provenance(NamedTuple):
    origin: Origin
    writer: str | None = None  # the writer's identity, as its key is registered
    signature: str | None = None  # "ed25519:<b64>", "hmac-sha256:<hex>" or bare hex (HMAC)

    def to_ext(self) -> dict[str, Any]:
        out: dict[str, Any] = {"origin": self.origin.value}
        if self.writer is not None:
            out["writer"] = self.writer
        if self.signature is not None:
            out["signature"] = self.signature
        return out

    @classmethod
    def parse(cls, value: Any) -> Provenance:
        """From a client's value (a mapping, a ``Provenance``, or an origin name), or a 400
        naming the field that is wrong."""
        if isinstance(value, Provenance):
            return value
        if isinstance(value, str):
            value = {"origin": value}
        if not isinstance(value, Mapping):
            raise ValidationError(FIELD, f"must be an object, not {type(value).__name__}")
        unknown = set(value) - {"origin", "writer", "signature"}
        if unknown:
            raise ValidationError(f"{FIELD}.{sorted(unknown)[0]}", "is not a provenance field")
        origin = value.get("origin")
        if not isinstance(origin, str):
            raise ValidationError(f"{FIELD}.origin", "is required: one of "
                                  + ", ".join(o.value for o in Origin))
        try:
            parsed = Origin(origin)
        except ValueError as exc:
            raise ValidationError(f"{FIELD}.origin", f"{origin!r} is not one of "
                                  + ", ".join(o.value for o in Origin)) from exc
        return cls(parsed, _text(value, "writer", MAX_WRITER),
                   _text(value, "signature", MAX_SIGNATURE))


def _text(value: Mapping[str, Any], name: str, limit: int) -> str | None:
    got = value.get(name)
    if got is None:
        return None
    if not isinstance(got, str) or not got.strip():
        raise ValidationError(f"{FIELD}.{name}", "must be a non-empty string")
    if len(got) > limit:
        raise ValidationError(f"{FIELD}.{name}", f"is longer than {limit} characters")
    return got


def of_record(record: AMFRecord) -> Provenance | None:
    """The record's claim, or None for a record that makes none (written before the
    firewall, or by this node's own process). A malformed claim is a 400."""
    raw = record.vendor_extensions.get(EXTENSION)
    return None if raw is None else Provenance.parse(raw)


def signed_text(record: AMFRecord) -> str:
    """What a writer signs: the memory's text as given to ``remember`` (its annotation),
    else the triple's object."""
    if record.annotation and record.annotation.natural_language:
        return record.annotation.natural_language
    return str(record.core.object)


def payload(writer: str, origin: str, text: str) -> bytes:
    """The signed bytes: ``writer US origin US text`` (US = 0x1F, the unit separator).

    The same layout agent-memory-integrity's model signs (``user_id, source, text``), so its
    HMAC writers verify here unchanged. The scope is bound by the key registry instead: a key
    verifies only for the scopes it is registered in."""
    return f"{writer}\x1f{origin}\x1f{text}".encode()


__all__ = ["EXTENSION", "Origin", "Provenance", "of_record", "payload", "signed_text"]
