"""QEF signals (upstream L7 qef_standard) stored as KT-SIGNAL records.

A signal is a quantified direction for evolution: ``metric`` holds numbers, ratios or trends
(lists of numbers) — never text logs (a text metric is refused, 400). Its record:

- ``core.subject`` = ``qef.<signal_id>``, ``core.predicate`` = EQUALS, ``core.object`` =
  the signal body as compact, key-sorted JSON (status, priority, metric, action_hint,
  knowledge_ids, outcome, emitted_at). The body lives in ``core`` because only core and meta are
  covered by the id and checksum: a status change must be a *different* record, and a
  tampered status must fail verification.
- ``core.evidence`` = the evidence strings; ``causal.caused_by`` = the referenced records.
- ``signal_id`` = ``QEF-{TYPE}-{YYYYMMDD}-{6 hex}`` (the upstream example ``QEF-001-20260313``
  uses the basic ISO date form; the hex part is random).

Records are immutable, so a status change writes a new record that supersedes the current
one (``Memory.supersede``); the lifecycle of the *status* is the table below, a missing
entry is an illegal transition (409). Re-sending the current status with nothing else
changed is an idempotent no-op.

A signal that names ``knowledge_ids`` (formerly ``references``) and an ``outcome`` (success
/ failure / neutral) applies that outcome to the referenced records' weights
(``amcp.evolution.outcomes``) in the same transaction as the signal record.

Emitted signals older than ``URGENT_AFTER`` (7 days, upstream signal_lifecycle_enforcement)
are URGENT: ``urgent_signals`` is what the cold-boot pack and the node report.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amcp.amf.record import DecayModel
from amcp.amf.timefmt import normalise_timestamp, parse_ts
from amcp.amf.types import DecayType, KnowledgeType
from amcp.errors import ConflictError, GoneError, NotFoundError, ValidationError
from amcp.evolution.outcomes import WeightUpdate, apply_to, check_ids, parse_result
from amcp.evolution.signals import (
    PENDING,
    SUBJECT_PREFIX,
    TERMINAL,
    TRANSITIONS,
    Priority,
    SignalStatus,
    body_of,
    signal_status,
)
from amcp.store.base import RecordFilter, StoredRecord

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter

URGENT_AFTER = 7 * 86_400.0  # seconds an emitted signal may wait before it is URGENT
MAX_METRICS = 64
MAX_TREND = 1024
_TYPE_CODE = re.compile(r"[A-Z0-9][A-Z0-9_]{0,15}")
_SIGNAL_ID = re.compile(r"QEF-([A-Z0-9][A-Z0-9_]{0,15})-(\d{8})-([0-9a-f]{6})")
_FIELDS = frozenset(
    {"signal_id", "type", "status", "priority", "metric", "action_hint", "evidence",
     "knowledge_ids", "references", "outcome", "scope", "summary", "emitted_at"}
)




@dataclass(frozen=True, slots=True)
class Signal:
    """A signal as read back from its current record."""

    signal_id: str
    knowledge_id: str
    status: SignalStatus
    priority: Priority
    metric: Mapping[str, Any]
    emitted_at: str
    action_hint: str | None = None
    knowledge_ids: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()

    def age_seconds(self, now: float) -> float:
        return now - parse_ts(self.emitted_at).timestamp()

    def is_urgent(self, now: float) -> bool:
        return self.status is SignalStatus.EMITTED and self.age_seconds(now) > URGENT_AFTER

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal_id": self.signal_id, "knowledge_id": self.knowledge_id,
            "status": self.status.value, "priority": self.priority.value,
            "metric": dict(self.metric), "emitted_at": self.emitted_at,
            "action_hint": self.action_hint, "knowledge_ids": list(self.knowledge_ids),
        }


@dataclass(frozen=True, slots=True)
class SignalResult:
    signal_knowledge_id: str
    signal_id: str
    status: SignalStatus
    updated: tuple[WeightUpdate, ...] = ()
    previous_knowledge_id: str | None = None
    changed: bool = True  # False: the same status was re-sent (idempotent)


# ---------------------------------------------------------------- parsing the stored body


def signal_of(item: StoredRecord) -> Signal | None:
    record = item.record
    body = body_of(record) if record is not None else None
    if record is None or body is None:
        return None
    try:
        return Signal(
            signal_id=str(body["signal_id"]),
            knowledge_id=item.knowledge_id,
            status=SignalStatus(body["status"]),
            priority=Priority(body.get("priority", "medium")),
            metric=body.get("metric") or {},
            emitted_at=str(body.get("emitted_at") or record.meta.created_at),
            action_hint=body.get("action_hint"),
            knowledge_ids=tuple(record.causal.caused_by or ()) if record.causal else (),
            evidence=tuple(record.core.evidence or ()),
        )
    except (KeyError, ValueError, TypeError):
        return None


# ---------------------------------------------------------------- validation


def _metric(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not value:
        raise ValidationError("metric", "must be a non-empty object of numbers")
    if len(value) > MAX_METRICS:
        raise ValidationError("metric", f"at most {MAX_METRICS} entries")
    out: dict[str, Any] = {}
    for name, v in value.items():
        where = f"metric.{name}"
        if not isinstance(name, str) or not name:
            raise ValidationError("metric", "names must be non-empty strings")
        if isinstance(v, list | tuple):
            if not v or len(v) > MAX_TREND:
                raise ValidationError(where, f"a trend holds 1 to {MAX_TREND} numbers")
            out[name] = [_number(x, f"{where}[{i}]") for i, x in enumerate(v)]
        else:
            out[name] = _number(v, where)
    return out


def _number(v: Any, where: str) -> float | int:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValidationError(
            where, f"must be a number, ratio or trend (list of numbers), not {type(v).__name__}"
            " — QEF metrics are quantities, not text logs",
        )
    if isinstance(v, float) and not math.isfinite(v):
        raise ValidationError(where, "must be finite")
    return v


def _strings(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) and x for x in value):
        raise ValidationError(field, "must be a string or a list of non-empty strings")
    return tuple(value)


def _enum(enum: Any, value: Any, field: str) -> Any:
    try:
        return enum(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(m.value for m in enum)
        raise ValidationError(field, f"{value!r} is not one of {allowed}") from None


def new_signal_id(type_code: str, when: float) -> str:
    day = time.strftime("%Y%m%d", time.gmtime(when))
    return f"QEF-{type_code}-{day}-{secrets.token_hex(3)}"


def _type_code(value: Any) -> str:
    code = str(value or "").strip().upper().replace("-", "_")
    if not _TYPE_CODE.fullmatch(code):
        raise ValidationError("type", "a QEF type code is 1-16 of A-Z, 0-9, _ (e.g. PERF, 001)")
    return code


# ---------------------------------------------------------------- reading signals


def find_signal(memory: MemoryWriter, signal_id: str) -> StoredRecord | None:
    """The current (active) record of ``signal_id``, if any."""
    subject = SUBJECT_PREFIX + signal_id
    flt = RecordFilter(types=(KnowledgeType.SIGNAL,), subject_prefix=subject)
    for item in memory.store.query(flt, limit=16):
        if item.record is not None and item.record.core.subject == subject:
            return item
    return None


def iter_signals(memory: MemoryWriter, *, scopes: Sequence[str] | None = None) -> Iterator[Signal]:
    """Every active signal (one record per signal: older statuses are superseded)."""
    flt = RecordFilter(
        types=(KnowledgeType.SIGNAL,), scopes=tuple(scopes) if scopes else None,
        subject_prefix=SUBJECT_PREFIX, include_expired=True,
    )
    after: str | None = None
    while True:
        page = memory.store.query(flt, limit=500, after=after)
        for item in page:
            sig = signal_of(item)
            if sig is not None:
                yield sig
        if len(page) < 500:
            return
        after = page[-1].knowledge_id


def pending_signals(memory: MemoryWriter, *, scopes: Sequence[str] | None = None) -> list[Signal]:
    out = [s for s in iter_signals(memory, scopes=scopes) if s.status in PENDING]
    return sorted(out, key=lambda s: (s.emitted_at, s.signal_id))


def urgent_signals(
    memory: MemoryWriter, *, now: float | None = None, scopes: Sequence[str] | None = None
) -> list[Signal]:
    """Emitted signals older than 7 days, oldest first (upstream: URGENT on cold boot)."""
    when = time.time() if now is None else now
    return [s for s in pending_signals(memory, scopes=scopes) if s.is_urgent(when)]


# ---------------------------------------------------------------- writing signals


def record_signal(memory: MemoryWriter, signal: Mapping[str, Any]) -> SignalResult:
    """Store a new signal, or move an existing one (``signal_id``) to a new status."""
    if not isinstance(signal, Mapping):
        raise ValidationError("", "a QEF signal must be a JSON object")
    extra = set(signal) - _FIELDS
    if extra:
        raise ValidationError(sorted(extra)[0], "unknown QEF signal field")
    sid = signal.get("signal_id")
    current = None
    if sid is not None:
        if not isinstance(sid, str) or not _SIGNAL_ID.fullmatch(sid):
            raise ValidationError("signal_id", "must be QEF-{TYPE}-{YYYYMMDD}-{6 hex}")
        current = find_signal(memory, sid)
    if current is None:
        return _emit(memory, signal, sid)
    return _transition(memory, signal, current)


REFS = "knowledge_ids"  # PROFILE §3's name for the records a signal is about
_OLD_REFS = "references"  # what this module called them before: still read, never written


def names_refs(signal: Mapping[str, Any]) -> bool:
    return REFS in signal or _OLD_REFS in signal


def raw_refs(signal: Mapping[str, Any]) -> Any:
    """The referenced ids as given (not checked), under either name."""
    return signal.get(REFS, signal.get(_OLD_REFS))


def _references(memory: MemoryWriter, signal: Mapping[str, Any]) -> tuple[str, ...]:
    if REFS in signal and _OLD_REFS in signal:
        raise ValidationError(REFS, f"give {REFS} or its old name {_OLD_REFS}, not both")
    refs = _strings(signal.get(REFS, signal.get(_OLD_REFS)), REFS)
    for kid in refs:
        item = memory.store.get(kid)
        if item is None:
            raise NotFoundError(f"{REFS}: no record {kid}; nothing was stored")
        if item.record is None:
            raise GoneError(f"{REFS}: {kid} was purged; nothing was stored")
    return tuple(dict.fromkeys(refs))


def _emit(memory: MemoryWriter, signal: Mapping[str, Any], sid: str | None) -> SignalResult:
    status = _enum(SignalStatus, signal.get("status", "emitted"), "status")
    if (None, status) not in TRANSITIONS:
        raise ConflictError(f"a new signal starts as 'emitted', not {status.value!r}")
    metric = _metric(signal.get("metric"))
    priority = _enum(Priority, signal.get("priority", "medium"), "priority")
    emitted = signal.get("emitted_at")
    emitted_at = normalise_timestamp(emitted, "emitted_at") if emitted is not None else None
    when = parse_ts(emitted_at).timestamp() if emitted_at else time.time()
    if sid is None:
        sid = new_signal_id(_type_code(signal.get("type")), when)
    else:
        code = _SIGNAL_ID.fullmatch(sid)
        assert code is not None
        if signal.get("type") is not None and _type_code(signal["type"]) != code.group(1):
            raise ValidationError("type", f"does not match the type code of {sid}")
    refs = _references(memory, signal)
    outcome = _outcome_items(memory, signal, refs)
    if emitted_at is None:
        emitted_at = normalise_timestamp(when, "emitted_at")
    body = {
        "signal_id": sid, "status": status.value, "priority": priority.value,
        "metric": metric, "action_hint": _hint(signal), "emitted_at": emitted_at,
        "outcome": outcome[0].value if outcome else None,
    }
    evidence = _strings(signal.get("evidence"), "evidence")
    with memory.atomic():
        res = memory.remember(
            _summary(signal, sid, status, metric),
            type=KnowledgeType.SIGNAL,
            scope=_strings(signal.get("scope"), "scope") or ("*",),
            subject=SUBJECT_PREFIX + sid,
            object=_json(body),
            confidence=1.0,
            evidence=evidence or None,
            caused_by=refs or None,
            created_at=emitted_at,
            decay=DecayModel(DecayType.EVENT_TRIGGERED),
        )
        updated = apply_to(memory, outcome[1], outcome[0]) if outcome else []
    return SignalResult(res.knowledge_id, sid, status, tuple(updated))


def _transition(
    memory: MemoryWriter, signal: Mapping[str, Any], current: StoredRecord
) -> SignalResult:
    assert current.record is not None
    old = signal_of(current)
    if old is None:
        raise ConflictError(f"{current.knowledge_id} is not a readable QEF signal")
    status = _enum(SignalStatus, signal.get("status", old.status.value), "status")
    body = body_of(current.record) or {}
    changes = {k for k in signal if k not in ("signal_id", "status", "type")}
    if status is old.status and not changes:
        return SignalResult(current.knowledge_id, old.signal_id, status, changed=False)
    if (old.status, status) not in TRANSITIONS:
        raise ConflictError(
            f"{old.signal_id}: {old.status.value} → {status.value} is not a QEF transition "
            f"(allowed from {old.status.value}: "
            + (", ".join(sorted(t.value for s, t in TRANSITIONS if s is old.status)) or "none")
            + ")"
        )
    metric = _metric(signal["metric"]) if "metric" in signal else body.get("metric", {})
    refs = _references(memory, signal) if names_refs(signal) else old.knowledge_ids
    outcome = _outcome_items(memory, signal, refs)
    priority = (
        _enum(Priority, signal["priority"], "priority") if "priority" in signal else old.priority
    )
    new_body = {
        **body, "status": status.value, "priority": priority.value, "metric": metric,
        "action_hint": _hint(signal) if "action_hint" in signal else body.get("action_hint"),
        "outcome": outcome[0].value if outcome else None,
    }
    evidence = (
        _strings(signal["evidence"], "evidence") if "evidence" in signal else old.evidence
    )
    with memory.atomic():
        res = memory.supersede(
            current.knowledge_id,
            _summary(signal, old.signal_id, status, metric),
            object=_json(new_body),
            confidence=1.0,
            evidence=list(evidence) or None,
            caused_by=list(refs) or None,
            decay=DecayModel(DecayType.EVENT_TRIGGERED),
        )
        updated = apply_to(memory, outcome[1], outcome[0]) if outcome else []
    return SignalResult(
        res.knowledge_id, old.signal_id, status, tuple(updated),
        previous_knowledge_id=current.knowledge_id,
    )


def _outcome_items(
    memory: MemoryWriter, signal: Mapping[str, Any], refs: Sequence[str]
) -> tuple[Any, list[StoredRecord]] | None:
    raw = signal.get("outcome")
    if raw is None:
        return None
    result = parse_result(raw)
    if not refs:
        raise ValidationError("outcome", f"an outcome needs the {REFS} it applies to")
    return result, check_ids(memory, refs)


def _hint(signal: Mapping[str, Any]) -> str | None:
    hint = signal.get("action_hint")
    if hint is not None and not isinstance(hint, str):
        raise ValidationError("action_hint", "must be a string")
    return hint


def _summary(
    signal: Mapping[str, Any], sid: str, status: SignalStatus, metric: Mapping[str, Any]
) -> str:
    given = signal.get("summary")
    if given is not None:
        if not isinstance(given, str) or not given.strip():
            raise ValidationError("summary", "must be non-empty text")
        return given
    shown = ", ".join(f"{k}={v}" for k, v in sorted(metric.items())[:4])
    return f"{sid} [{status.value}] {shown}"


def _json(body: Mapping[str, Any]) -> str:
    clean = {k: v for k, v in body.items() if v is not None}
    return json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


__all__ = [
    "PENDING",
    "REFS",
    "TERMINAL",
    "TRANSITIONS",
    "URGENT_AFTER",
    "Priority",
    "Signal",
    "SignalResult",
    "SignalStatus",
    "body_of",
    "find_signal",
    "iter_signals",
    "names_refs",
    "new_signal_id",
    "pending_signals",
    "raw_refs",
    "record_signal",
    "signal_of",
    "signal_status",
    "urgent_signals",
]
