"""QEF signal states and how a stored signal is read: the leaf ``decay`` and ``qef`` share
(``decay`` asks whether a signal is terminal; ``qef`` builds on ``decay`` through outcome
weights, so ``decay`` may not import ``qef``)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from amcp.amf.record import AMFRecord
from amcp.amf.summary import RecordSummary
from amcp.amf.types import KnowledgeType

SUBJECT_PREFIX = "qef."


class SignalStatus(StrEnum):
    EMITTED = "emitted"
    ACKNOWLEDGED = "acknowledged"
    ADDRESSED = "addressed"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


class Priority(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


E, A, D = SignalStatus.EMITTED, SignalStatus.ACKNOWLEDGED, SignalStatus.ADDRESSED
R, X = SignalStatus.RESOLVED, SignalStatus.DISMISSED
# (current status or None for a new signal, requested status) → allowed. Anything else: 409.
TRANSITIONS: frozenset[tuple[SignalStatus | None, SignalStatus]] = frozenset(
    {
        (None, E),
        (E, A), (E, X),
        (A, D), (A, X),
        (D, R), (D, X),
    }
)
TERMINAL = frozenset({R, X})
PENDING = frozenset({E, A, D})


def body_of(record: AMFRecord | RecordSummary) -> dict[str, Any] | None:
    if record.type is not KnowledgeType.SIGNAL or not record.core.subject.startswith(
        SUBJECT_PREFIX
    ):
        return None
    try:
        body = json.loads(record.core.object)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def signal_status(record: AMFRecord | RecordSummary) -> SignalStatus | None:
    body = body_of(record)
    try:
        return SignalStatus(body["status"]) if body else None
    except (KeyError, ValueError):
        return None


__all__ = ["PENDING", "SUBJECT_PREFIX", "TERMINAL", "TRANSITIONS", "Priority", "SignalStatus",
           "body_of", "signal_status"]
