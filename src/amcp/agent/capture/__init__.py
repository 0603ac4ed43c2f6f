"""Anti-Amnesia capture: mechanical memory capture from conversation turns (EN + ZH).

    engine = CaptureEngine(CaptureConfig(), is_duplicate=store_has)
    for item in engine.process({"role": "user", "content": "I prefer tabs over spaces"}):
        hint = item.record_hint(reveal=item.sensitive)  # -> one AMF record

See docs/capture.md for the rules, the importance table and the limits.
"""

from __future__ import annotations

from amcp.agent.capture.credentials import find_credentials, redact
from amcp.agent.capture.engine import CaptureConfig, CaptureEngine
from amcp.agent.capture.model import (
    DEFAULTS,
    Capture,
    Category,
    Checkpoint,
    Importance,
    Output,
    OutputKind,
    RecordHint,
    Secret,
    Snapshot,
    Turn,
)
from amcp.agent.capture.recovery import (
    Found,
    NotFound,
    RecallQuery,
    RecoveryPlan,
    recovery_plan,
    resolve_recall,
)
from amcp.agent.capture.topic import TopicConfig
from amcp.agent.capture.transcript import TranscriptError, parse_lines, read_transcript
from amcp.amf.types import KnowledgeType, Predicate

__all__ = [
    "DEFAULTS",
    "Capture",
    "CaptureConfig",
    "CaptureEngine",
    "Category",
    "Checkpoint",
    "Found",
    "Importance",
    "KnowledgeType",
    "NotFound",
    "Output",
    "OutputKind",
    "Predicate",
    "RecallQuery",
    "RecordHint",
    "RecoveryPlan",
    "Secret",
    "Snapshot",
    "TopicConfig",
    "TranscriptError",
    "Turn",
    "find_credentials",
    "parse_lines",
    "read_transcript",
    "recovery_plan",
    "redact",
    "resolve_recall",
]
