"""What a pack needs of one record, read from its stored bytes without building an AMFRecord.

A pack ranks ~100 candidates and places ~40 of them; building and re-verifying an
``AMFRecord`` costs ~0.2 ms a record (validation, then two canonical re-encodings to check
the id and checksum), which at 100k records — where every task brings new candidates — was
most of a pack. But the store keeps each non-sensitive record as its canonical MessagePack,
and a canonical map is its header followed by its encoded keys and values. So:

- the checksum (sha256 of canonical ``{core, meta}``) and the knowledge id (sha256 of
  canonical ``{core, created_at, created_by}``) are recomputed by hashing *slices of the
  stored bytes* — no re-encoding. The bytes hashed are the bytes decoded, so a match proves
  the fields a pack reads are the ones the writer signed, exactly as ``verify_integrity``
  does (and a non-canonical body, which no writer produces, simply fails the check);
- the serialized AMF a pack carries (and counts tokens of) *is* the stored body (its top
  level is checked to be in canonical key order; the sections outside ``core`` and ``meta``
  are trusted to be canonical as written — no checksum covers them on any read path);
- the ``AMFRecord`` is built only when someone asks for ``record`` (API views, tiers).

Sensitive records are sealed at rest and shown redacted; they take the ordinary verifying
read path (``Entry.of_record``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack

from amcp.amf.canonical import canonical_packb
from amcp.amf.record import AMFRecord
from amcp.amf.timefmt import parse_ts
from amcp.amf.types import KnowledgeType
from amcp.cse.lines import pointer_line
from amcp.cse.roi import token_cost
from amcp.errors import AmcpError, IntegrityError

_CORE, _META = msgpack.packb("core"), msgpack.packb("meta")
_CREATED_AT, _CREATED_BY = msgpack.packb("created_at"), msgpack.packb("created_by")


class Entry:
    """One record as a pack sees it. Immutable by convention (records are)."""

    __slots__ = (
        "_doc",
        "_line",
        "_record",
        "_text",
        "amf_bytes",
        "caused_by",
        "confidence",
        "created_ts",
        "kind",
        "knowledge_id",
        "own_decay",
        "scope",
        "subject",
        "tokens",
        "type",
    )

    def __init__(
        self, doc: dict[str, Any] | None, record: AMFRecord | None, amf_bytes: bytes,
    ) -> None:
        self._doc = doc
        self._line: tuple[float, str] | None = None
        self._record = record
        self.amf_bytes = amf_bytes  # canonical MessagePack of the AMF view: digest input
        self.tokens = token_cost(len(amf_bytes))
        if record is not None:
            self.knowledge_id = record.knowledge_id
            self.type = record.type
            self.confidence = float(record.core.confidence)
            self.subject = record.core.subject
            self.scope = record.meta.project_scope[0]
            self.kind = record.kind
            self.caused_by: tuple[str, ...] = tuple(
                (record.causal.caused_by or ()) if record.causal else ()
            )
            self.own_decay = record.meta.decay_model is not None
            created = record.meta.created_at
            self._text: str | None = record.text
        else:
            assert doc is not None
            core, meta = doc["core"], doc["meta"]
            self.knowledge_id = doc["knowledge_id"]
            self.type = KnowledgeType(doc["type"])
            self.confidence = float(core["confidence"])
            self.subject = core["subject"]
            self.scope = meta["project_scope"][0]
            kind = (doc.get("vendor_extensions") or {}).get("x-kind")
            self.kind = kind if isinstance(kind, str) else None
            self.caused_by = tuple((doc.get("causal") or {}).get("caused_by") or ())
            self.own_decay = meta.get("decay_model") is not None
            created = meta["created_at"]
            self._text = (doc.get("annotation") or {}).get("natural_language") or None
        self.created_ts = parse_ts(created).timestamp()

    @classmethod
    def of_record(cls, view: AMFRecord) -> Entry:
        """From a record already read and verified (and redacted, if sensitive)."""
        return cls(None, view, canonical_packb(view.to_dict()))

    @classmethod
    def of_body(cls, knowledge_id: str, body: bytes, checksum: str | None) -> Entry:
        """From the stored canonical bytes of a non-sensitive record, verified by hashing.

        Raises IntegrityError when the bytes do not match the row's id and checksum.
        """
        try:
            doc, spans = _split(body)
            core, meta = spans["core"], spans["meta"]
            created_at, created_by = doc["meta"]["created_at"], doc["meta"]["created_by"]
            stated = doc["integrity"]["checksum"]
            entry = cls(doc, None, body)
        except (KeyError, TypeError, ValueError, IndexError, AmcpError,
                msgpack.UnpackException) as exc:
            raise IntegrityError(f"stored record {knowledge_id} is unreadable: {exc}") from exc
        if doc.get("knowledge_id") != knowledge_id or stated != checksum:
            raise IntegrityError(f"stored record {knowledge_id} does not match its row")
        body_sum = "sha256:" + hashlib.sha256(
            b"\x82" + _CORE + body[core[0]:core[1]] + _META + body[meta[0]:meta[1]]
        ).hexdigest()
        if body_sum != checksum:
            raise IntegrityError(f"integrity.checksum does not match content of {knowledge_id}")
        body_id = "K-" + hashlib.sha256(
            b"\x83" + _CORE + body[core[0]:core[1]] + _CREATED_AT + msgpack.packb(created_at)
            + _CREATED_BY + msgpack.packb(created_by)
        ).hexdigest()
        if body_id != knowledge_id:
            raise IntegrityError(f"knowledge_id does not match content (expected {body_id})")
        return entry

    @property
    def record(self) -> AMFRecord:
        """The full record, built (and shape-validated) on first use."""
        if self._record is None:
            assert self._doc is not None
            try:
                self._record = AMFRecord.from_dict(self._doc)
            except AmcpError as exc:
                raise IntegrityError(
                    f"stored record {self.knowledge_id} is unreadable: {exc}"
                ) from exc
        return self._record

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.record.text
        return self._text

    def pointer(self, weight: float) -> str:
        """The record's pointer line at ``weight`` (``tiers.pointer_line``), kept for the last
        weight asked: every pack makes a line for each of its ~120 candidates, and the same
        core records recur in every pack with an unchanged weight."""
        line = self._line
        if line is None or line[0] != weight:
            line = self._line = (weight, pointer_line(
                self.knowledge_id, self.type.value, self.scope, weight, self.text))
        return line[1]

    @property
    def amf(self) -> dict[str, Any]:
        return self.record.to_dict()


def _split(body: bytes) -> tuple[dict[str, Any], dict[str, tuple[int, int]]]:
    """The top-level map of ``body`` and the byte span of each of its values."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True)
    unpacker.feed(body)
    doc: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    last = b""
    for _ in range(unpacker.read_map_header()):
        key = unpacker.unpack()
        # Canonical: string keys in strictly increasing UTF-8 order (so no repeats either).
        raw = key.encode() if isinstance(key, str) else b""
        if not raw or raw <= last:
            raise ValueError("top-level keys are not canonical")
        last = raw
        start = unpacker.tell()
        doc[key] = unpacker.unpack()
        spans[key] = (start, unpacker.tell())
    if unpacker.tell() != len(body):
        raise ValueError("trailing bytes after the record")
    return doc, spans


__all__ = ["Entry"]
