"""The AMF record (PROFILE §6) as frozen dataclasses, with lossless dict round trips.

Optional collections are ``None`` when absent and a tuple when present (even empty), because
the knowledge id hashes exactly what the writer sent: ``"evidence": []`` and no evidence at
all are different records on the wire, and we must not turn one into the other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from amcp.amf.mapping import statement
from amcp.amf.timefmt import check_amf_ts
from amcp.amf.types import (
    AccessTier,
    DecayType,
    KnowledgeType,
    Locality,
    Predicate,
    SyncPriority,
)
from amcp.errors import ValidationError

AMF_VERSION = "1.0"
MAX_RECORD_BYTES = 1024 * 1024  # 1 MiB of canonical bytes: larger is a document, not a memory
MAX_TEXT = MAX_RECORD_BYTES  # any single string field (characters)
MAX_LIST = 1024  # tags, evidence, scopes, caused_by

JsonMap = Mapping[str, Any]


_PLAIN = frozenset({str, int, float, bool, bytes, type(None)})  # immutable already


def _freeze(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Frozen containers back to plain dict/list (for msgpack/json)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


# ---------------------------------------------------------------- field checkers


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# The checkers below run for every field of every record a store reads back (~14 per
# record): the field path of an error message is built only when there is an error.
def _str(d: JsonMap, key: str, path: str, *, required: bool = False, empty: bool = False) -> Any:
    value = d.get(key)
    if value is None:
        if required:
            raise ValidationError(_where(path, key), "is required")
        return None
    if not isinstance(value, str):
        raise ValidationError(_where(path, key), f"must be a string, not {type(value).__name__}")
    if not empty and not value.strip():
        raise ValidationError(_where(path, key), "must not be empty")
    if len(value) > MAX_TEXT:
        raise ValidationError(_where(path, key), f"longer than {MAX_TEXT} characters")
    if not value.isascii():  # ASCII text cannot hold a lone surrogate
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(_where(path, key), "is not valid UTF-8 (lone surrogate)") from exc
    return value


def _str_list(d: JsonMap, key: str, path: str, *, required: bool = False) -> Any:
    value = d.get(key)
    if value is None:
        if required:
            raise ValidationError(_where(path, key), "is required")
        return None
    if not isinstance(value, list | tuple):
        raise ValidationError(_where(path, key), "must be an array of strings")
    if len(value) > MAX_LIST:
        raise ValidationError(_where(path, key), f"more than {MAX_LIST} items")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise ValidationError(f"{_where(path, key)}[{i}]", "must be a non-empty string")
        if not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValidationError(f"{_where(path, key)}[{i}]", "is not valid UTF-8") from exc
    return tuple(value)


def _enum(d: JsonMap, key: str, path: str, enum: type[Any], *, required: bool = False) -> Any:
    value = d.get(key)
    if value is None:
        if required:
            raise ValidationError(_where(path, key), "is required")
        return None
    try:
        return enum(value)
    except ValueError as exc:
        allowed = ", ".join(m.value for m in enum)
        raise ValidationError(_where(path, key), f"{value!r} is not one of {allowed}") from exc


def _no_extra(d: JsonMap, allowed: frozenset[str], path: str) -> None:
    if d.keys() <= allowed:
        return
    extra = set(d) - allowed
    if extra:
        raise ValidationError(
            f"{path}.{sorted(extra)[0]}" if path else sorted(extra)[0],
            "unknown field (put vendor data under vendor_extensions)",
        )


def _map(d: JsonMap, key: str, *, required: bool = False) -> JsonMap | None:
    value = d.get(key)
    if value is None:
        if required:
            raise ValidationError(key, "is required")
        return None
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ValidationError(key, "must be an object")
    return value


# ---------------------------------------------------------------- sections


@dataclass(frozen=True, slots=True)
class Core:
    subject: str
    predicate: Predicate
    object: str
    confidence: float
    condition: str | None = None
    evidence: tuple[str, ...] | None = None
    sample_size: int | None = None

    FIELDS = frozenset(
        {"subject", "predicate", "object", "confidence", "condition", "evidence", "sample_size"}
    )

    @classmethod
    def from_dict(cls, d: JsonMap) -> Core:
        _no_extra(d, cls.FIELDS, "core")
        conf = d.get("confidence")
        if conf is None:
            raise ValidationError("core.confidence", "is required")
        if isinstance(conf, bool) or not isinstance(conf, int | float):
            raise ValidationError("core.confidence", "must be a number")
        if not math.isfinite(conf) or not 0.0 <= conf <= 1.0:
            raise ValidationError("core.confidence", f"{conf!r} is outside [0, 1]")
        sample = d.get("sample_size")
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int)):
            raise ValidationError("core.sample_size", "must be an integer")
        if sample is not None and sample < 0:
            raise ValidationError("core.sample_size", "must not be negative")
        return cls(
            subject=_str(d, "subject", "core", required=True),
            predicate=_enum(d, "predicate", "core", Predicate, required=True),
            object=_str(d, "object", "core", required=True),
            confidence=float(conf),
            condition=_str(d, "condition", "core"),
            evidence=_str_list(d, "evidence", "core"),
            sample_size=sample,
        )

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "subject": self.subject,
                "predicate": self.predicate.value,
                "object": self.object,
                "confidence": float(self.confidence),
                "condition": self.condition,
                "evidence": list(self.evidence) if self.evidence is not None else None,
                "sample_size": self.sample_size,
            }
        )


@dataclass(frozen=True, slots=True)
class DecayModel:
    type: DecayType
    half_life_days: float | None = None
    invalidation_events: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: JsonMap) -> DecayModel:
        _no_extra(
            d, frozenset({"type", "half_life_days", "invalidation_events"}), "meta.decay_model"
        )
        hl = d.get("half_life_days")
        if hl is not None:
            if isinstance(hl, bool) or not isinstance(hl, int | float) or not hl > 0:
                raise ValidationError(
                    "meta.decay_model.half_life_days", "must be a positive number"
                )
            hl = float(hl)
        return cls(
            type=_enum(d, "type", "meta.decay_model", DecayType, required=True),
            half_life_days=hl,
            invalidation_events=_str_list(d, "invalidation_events", "meta.decay_model"),
        )

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "type": self.type.value,
                "half_life_days": self.half_life_days,
                "invalidation_events": _list(self.invalidation_events),
            }
        )


@dataclass(frozen=True, slots=True)
class Meta:
    created_at: str
    created_by: str
    project_scope: tuple[str, ...]
    language: str | None = None
    decay_model: DecayModel | None = None

    @classmethod
    def from_dict(cls, d: JsonMap) -> Meta:
        _no_extra(
            d,
            frozenset({"created_at", "created_by", "project_scope", "language", "decay_model"}),
            "meta",
        )
        if d.get("created_at") is None:
            raise ValidationError("meta.created_at", "is required")
        scope = _str_list(d, "project_scope", "meta", required=True)
        if not scope:
            raise ValidationError(
                "meta.project_scope", "must name at least one scope ('*' = global)"
            )
        dm = d.get("decay_model")
        if dm is not None and not isinstance(dm, Mapping):
            raise ValidationError("meta.decay_model", "must be an object")
        return cls(
            created_at=check_amf_ts(d.get("created_at"), "meta.created_at"),
            created_by=_str(d, "created_by", "meta", required=True),
            project_scope=scope,
            language=_str(d, "language", "meta"),
            decay_model=DecayModel.from_dict(dm) if dm is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "created_at": self.created_at,
                "created_by": self.created_by,
                "project_scope": list(self.project_scope),
                "language": self.language,
                "decay_model": self.decay_model.to_dict() if self.decay_model else None,
            }
        )


@dataclass(frozen=True, slots=True)
class Distribution:
    locality: Locality | None = None
    sync_priority: SyncPriority | None = None
    access_tier: AccessTier | None = None

    @classmethod
    def from_dict(cls, d: JsonMap) -> Distribution:
        _no_extra(d, frozenset({"locality", "sync_priority", "access_tier"}), "distribution")
        return cls(
            locality=_enum(d, "locality", "distribution", Locality),
            sync_priority=_enum(d, "sync_priority", "distribution", SyncPriority),
            access_tier=_enum(d, "access_tier", "distribution", AccessTier),
        )

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "locality": _val(self.locality),
                "sync_priority": _val(self.sync_priority),
                "access_tier": _val(self.access_tier),
            }
        )


@dataclass(frozen=True, slots=True)
class Causal:
    caused_by: tuple[str, ...] | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    hlc: str | None = None

    @classmethod
    def from_dict(cls, d: JsonMap) -> Causal:
        _no_extra(d, frozenset({"caused_by", "supersedes", "superseded_by", "hlc"}), "causal")
        out = cls(
            caused_by=_str_list(d, "caused_by", "causal"),
            supersedes=_str(d, "supersedes", "causal"),
            superseded_by=_str(d, "superseded_by", "causal"),
            hlc=_str(d, "hlc", "causal"),
        )
        for name in ("supersedes", "superseded_by"):
            ref = getattr(out, name)
            if ref is not None:
                check_knowledge_id(ref, f"causal.{name}")
        for i, ref in enumerate(out.caused_by or ()):
            check_knowledge_id(ref, f"causal.caused_by[{i}]")
        return out

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "caused_by": _list(self.caused_by),
                "supersedes": self.supersedes,
                "superseded_by": self.superseded_by,
                "hlc": self.hlc,
            }
        )


@dataclass(frozen=True, slots=True)
class Annotation:
    natural_language: str | None = None
    tags: tuple[str, ...] | None = None
    context_hint: str | None = None

    @classmethod
    def from_dict(cls, d: JsonMap) -> Annotation:
        _no_extra(d, frozenset({"natural_language", "tags", "context_hint"}), "annotation")
        return cls(
            natural_language=_str(d, "natural_language", "annotation", empty=True),
            tags=_str_list(d, "tags", "annotation"),
            context_hint=_str(d, "context_hint", "annotation", empty=True),
        )

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "natural_language": self.natural_language,
                "tags": _list(self.tags),
                "context_hint": self.context_hint,
            }
        )


@dataclass(frozen=True, slots=True)
class Integrity:
    checksum: str
    # PROFILE §6: sha256 over the whole record except integrity, causal.hlc,
    # causal.superseded_by and x-state (``amcp.amf.ids.envelope_for``). None: an older writer.
    envelope: str | None = None
    signature: str | None = None
    # Our addition (docs/amf.md): the signer's Ed25519 public key, base64url, so a reader
    # can verify without a directory lookup; trust in that key is a separate decision.
    public_key: str | None = None
    tamper_evident: bool | None = True

    @classmethod
    def from_dict(cls, d: JsonMap) -> Integrity:
        _no_extra(
            d,
            frozenset({"checksum", "envelope", "signature", "public_key", "tamper_evident"}),
            "integrity",
        )
        checksum = _str(d, "checksum", "integrity", required=True)
        if not checksum.startswith("sha256:") or len(checksum) != 71:
            raise ValidationError("integrity.checksum", "must be 'sha256:' + 64 hex digits")
        envelope = _str(d, "envelope", "integrity")
        if envelope is not None and (not envelope.startswith("sha256:") or len(envelope) != 71):
            raise ValidationError("integrity.envelope", "must be 'sha256:' + 64 hex digits")
        te = d.get("tamper_evident")
        if te is not None and not isinstance(te, bool):
            raise ValidationError("integrity.tamper_evident", "must be a boolean")
        return cls(
            checksum=checksum,
            envelope=envelope,
            signature=_str(d, "signature", "integrity"),
            public_key=_str(d, "public_key", "integrity"),
            tamper_evident=te,
        )

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "checksum": self.checksum,
                "envelope": self.envelope,
                "signature": self.signature,
                "public_key": self.public_key,
                "tamper_evident": self.tamper_evident,
            }
        )


_KNOWLEDGE_ID = re.compile(r"K-[0-9a-f]{64}")  # fullmatch: no trailing newline either


def check_knowledge_id(value: str, field: str = "knowledge_id") -> str:
    if not isinstance(value, str) or _KNOWLEDGE_ID.fullmatch(value) is None:
        raise ValidationError(field, "must be 'K-' + 64 lowercase hex digits")
    return value


TOP_FIELDS = frozenset(
    {
        "knowledge_id",
        "amf_version",
        "type",
        "core",
        "meta",
        "distribution",
        "causal",
        "annotation",
        "integrity",
        "vendor_extensions",
    }
)


class Stated:
    """What a record and its verified summary (``amf.summary.RecordSummary``) both show:
    the statement and the tags, from ``core`` and ``annotation``. One definition, so a
    listing built from summaries says exactly what one built from whole records says."""

    __slots__ = ()
    core: Core
    annotation: Annotation | None

    @property
    def text(self) -> str:
        """The human-readable statement: the annotation if any, else the triple."""
        c = self.core
        said = self.annotation.natural_language if self.annotation else None
        return statement(said, c.subject, c.predicate.value, c.object)

    @property
    def tags(self) -> tuple[str, ...]:
        return (self.annotation.tags or ()) if self.annotation else ()


@dataclass(frozen=True, slots=True)
class AMFRecord(Stated):
    knowledge_id: str
    type: KnowledgeType
    core: Core
    meta: Meta
    integrity: Integrity
    amf_version: str = AMF_VERSION
    distribution: Distribution | None = None
    causal: Causal | None = None
    annotation: Annotation | None = None
    vendor_extensions: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_dict(cls, d: JsonMap) -> AMFRecord:
        """Validate shape and types (status 400). Ids and checksums are checked separately."""
        if not isinstance(d, Mapping):
            raise ValidationError("", "an AMF record must be an object")
        _no_extra(d, TOP_FIELDS, "")
        version = d.get("amf_version")
        if version is None:
            raise ValidationError("amf_version", "is required")
        if version != AMF_VERSION:
            raise ValidationError("amf_version", f"{version!r} is not supported (only '1.0')")
        kid = d.get("knowledge_id")
        if kid is None:
            raise ValidationError("knowledge_id", "is required")
        check_knowledge_id(kid)
        ktype = _enum(d, "type", "", KnowledgeType, required=True)
        core_d = _map(d, "core", required=True)
        meta_d = _map(d, "meta", required=True)
        integ_d = _map(d, "integrity", required=True)
        assert core_d is not None
        assert meta_d is not None
        assert integ_d is not None
        core = Core.from_dict(core_d)
        if ktype is KnowledgeType.PATTERN and core.sample_size is None:
            raise ValidationError("core.sample_size", "is required for KT-PATTERN")
        dist_d, causal_d, ann_d = _map(d, "distribution"), _map(d, "causal"), _map(d, "annotation")
        ext = d.get("vendor_extensions")
        if ext is not None and not isinstance(ext, Mapping):
            raise ValidationError("vendor_extensions", "must be an object")
        return cls(
            knowledge_id=kid,
            type=ktype,
            core=core,
            meta=Meta.from_dict(meta_d),
            integrity=Integrity.from_dict(integ_d),
            distribution=Distribution.from_dict(dist_d) if dist_d is not None else None,
            causal=Causal.from_dict(causal_d) if causal_d is not None else None,
            annotation=Annotation.from_dict(ann_d) if ann_d is not None else None,
            vendor_extensions=_freeze(dict(ext or {})),
        )

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "knowledge_id": self.knowledge_id,
                "amf_version": self.amf_version,
                "type": self.type.value,
                "core": self.core.to_dict(),
                "meta": self.meta.to_dict(),
                "distribution": self.distribution.to_dict() if self.distribution else None,
                "causal": self.causal.to_dict() if self.causal else None,
                "annotation": self.annotation.to_dict() if self.annotation else None,
                "integrity": self.integrity.to_dict(),
                "vendor_extensions": thaw(self.vendor_extensions) or None,
            }
        )

    # -- convenience views ------------------------------------------------------------

    @property
    def kind(self) -> str | None:
        kind = self.vendor_extensions.get("x-kind")
        return kind if isinstance(kind, str) else None

    def with_causal(self, **changes: Any) -> AMFRecord:
        return replace(self, causal=replace(self.causal or Causal(), **changes))

    def with_extensions(self, **changes: Any) -> AMFRecord:
        merged = {**thaw(self.vendor_extensions), **changes}
        merged = {k: v for k, v in merged.items() if v is not None}
        return replace(self, vendor_extensions=_freeze(merged))


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _list(value: tuple[str, ...] | None) -> list[str] | None:
    return list(value) if value is not None else None


def _val(value: Any) -> Any:
    return value.value if value is not None else None
