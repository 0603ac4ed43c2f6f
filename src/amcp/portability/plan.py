"""Pass one: every source item gets a decision, before anything is written.

Streams: items are decided one at a time; only the dedup keys of the items kept so far
are held (16 bytes each, plus the key), and conversation turns are buffered one
conversation at a time for the capture engine.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from amcp.agent.capture import CaptureConfig, CaptureEngine, find_credentials
from amcp.agent.capture.model import Capture, Output
from amcp.amf.timefmt import format_ts
from amcp.portability.classify import classify, kind_from_hint
from amcp.portability.model import (
    Decision,
    ImportOptions,
    Kind,
    Planned,
    RecordSpec,
    SourceItem,
    content_hash,
)
from amcp.portability.timestamps import parse_when

_CAPTURE_KIND = {
    "credential": Kind.FACT, "preference": Kind.PREFERENCE, "decision": Kind.FACT,
    "lifefact": Kind.FACT, "task": Kind.TASK, "event": Kind.EVENT,
    "topic_snapshot": Kind.EVENT, "checkpoint": Kind.EVENT,
}
_DROPPED_ROLES = frozenset({"system", "developer"})  # an agent's prompt, not a memory


# Everything but letters, digits and whitespace: re's Unicode \w is str.isalnum() plus "_".
_NOT_WORD = re.compile(r"[^\w\s]|_")


def norm(text: str) -> str:
    """Duplicate test: case, punctuation and spacing do not make a new memory. (One regex
    pass, not a Python generator over every character.)"""
    return " ".join(_NOT_WORD.sub("", text.casefold()).split())


def dedup_key(scope: str, text: str) -> bytes:
    return hashlib.blake2b(f"{scope}\x00{norm(text)}".encode(), digest_size=16).digest()


@dataclass(slots=True)
class Known:
    """What earlier imports left in the store: for resume, upserts and cross-run dedup."""

    by_key: dict[str, tuple[str, str]] = field(default_factory=dict)  # key → (kid, hash)
    by_text: dict[bytes, str] = field(default_factory=dict)  # dedup key → kid


class Planner:
    def __init__(self, options: ImportOptions, known: Known | None = None) -> None:
        self.options = options
        self.known = known or Known()
        self.seen: dict[bytes, str] = {}  # dedup key → source key of the first item

    def plan(self, items: Iterable[SourceItem]) -> Iterator[Planned]:
        turns: list[SourceItem] = []
        for item in items:
            if item.role is not None and self.options.capture_conversations:
                if turns and turns[-1].conversation != item.conversation:
                    yield from self._conversation(turns)
                    turns = []
                turns.append(item)
                continue
            yield self._item(item)
        if turns:
            yield from self._conversation(turns)

    # ------------------------------------------------------------------ one item

    def _when(self, item: SourceItem) -> tuple[str, list[str]]:
        dt = parse_when(item.created_at, f"{item.where}: created_at",
                        assume_tz=self.options.assume_tz, day_first=self.options.day_first)
        when = format_ts(dt)
        reasons = []
        if item.fallback_time:
            reasons.append("no time in the source: the file's time is used")
        elif str(item.created_at) != when:
            reasons.append("timestamp normalised")
        return when, reasons

    def _item(self, item: SourceItem) -> Planned:
        if not item.text.strip():
            return Planned(item, Decision.DROP, ("empty text",))
        when, reasons = self._when(item)
        kind, rule = classify(item.text, item.kind_hint, item.role)
        stated = kind_from_hint(item.kind_hint)
        if kind is Kind.LOG and self.options.drop_logs:
            return Planned(item, Decision.DROP, (f"log ({rule}), --drop-logs",), kind, when)
        if stated is not None and stated is not kind:
            reasons.append(f"source said {item.kind_hint!r}, classified {kind} ({rule})")
        elif item.kind_hint and stated is None:
            reasons.append(f"source kind {item.kind_hint!r} unknown: classified {kind} ({rule})")
        if kind is Kind.LOG:
            reasons.append(f"log ({rule}): kept as low-weight context")
        if item.vector_model:
            reasons.append(f"vector from {item.vector_model} discarded, re-embedded")
        secrets = find_credentials(item.text)
        if secrets:
            reasons.append(f"secret detected ({secrets[0].service} {secrets[0].kind}): encrypted")
        merged = self._merge(item)
        if merged is not None:
            return Planned(item, Decision.MERGE, (merged[1],), kind, when, merged_into=merged[0])
        supersedes = None
        prior = self.known.by_key.get(item.key)
        if prior is not None:
            supersedes = prior[0]
            reasons.append(f"changed since the last import: supersedes {prior[0][:14]}…")
        spec = RecordSpec(
            text=item.text.strip(), kind=kind, scope=item.scope or "*", created_at=when,
            agent=item.agent or item.source, source_key=item.key, source_hash=item.text_hash,
            sensitive=bool(secrets), tags=item.tags, subject=item.subject,
            supersedes=supersedes, extensions=_extensions(item, when),
        )
        decision = Decision.TRANSFORM if reasons else Decision.KEEP
        return Planned(item, decision, tuple(reasons), kind, when, (spec,))

    def _merge(self, item: SourceItem) -> tuple[str, str] | None:
        """(what it merged into, why) for a duplicate; else remember it as the first."""
        prior = self.known.by_key.get(item.key)
        if prior is not None and prior[1] == item.text_hash:
            return prior[0], "already imported (same source id and content)"
        key = dedup_key(item.scope or "*", item.text)
        if key in self.seen:
            return self.seen[key], "duplicate of an earlier item in this import"
        if key in self.known.by_text and prior is None:
            return self.known.by_text[key], "duplicate of a record already in the store"
        self.seen[key] = item.key
        return None

    # ------------------------------------------------------------------ conversations

    def _conversation(self, turns: list[SourceItem]) -> Iterator[Planned]:
        engine = CaptureEngine(CaptureConfig(checkpoint_every=0))
        for n, turn in enumerate(turns):
            role = (turn.role or "").lower()
            if role in _DROPPED_ROLES:
                yield Planned(turn, Decision.DROP, (f"{role} prompt, not a memory",))
                continue
            if not turn.text.strip():
                yield Planned(turn, Decision.DROP, ("empty text",))
                continue
            if role not in {"user", "human", "assistant", "ai", "model"}:
                yield self._item(turn)  # tool calls and results: logs
                continue
            outputs = engine.process({"role": role, "content": turn.text})
            if n == len(turns) - 1:
                outputs += engine.finish()
            yield self._turn(turn, outputs)

    def _turn(self, turn: SourceItem, outputs: list[Output]) -> Planned:
        when, _ = self._when(turn)
        specs = []
        skipped: list[str] = []
        for out in outputs:
            hint = out.record_hint(reveal=True)
            kind = _CAPTURE_KIND.get(hint.x_kind, Kind.FACT)
            spec_key = f"{turn.key}#{hint.x_kind}:{norm(hint.text)[:64]}"
            seen = self._seen_capture(turn.scope or "*", hint.text, spec_key)
            if seen is not None:
                skipped.append(seen)
                continue
            specs.append(RecordSpec(
                text=hint.text, kind=kind, scope=turn.scope or "*", created_at=when,
                agent=turn.agent or turn.source, source_key=spec_key,
                source_hash=turn.text_hash, sensitive=hint.sensitive,
                tags=("captured", *hint.tags), subject=hint.subject,
                predicate=hint.predicate.value, object=hint.object, x_kind=hint.x_kind,
                confidence=hint.confidence, amf_type=hint.amf_type,
                extensions={**_extensions(turn, when), "x-importance": int(hint.importance),
                            "x-capture-rule": out.rule if isinstance(out, Capture) else "R2"},
            ))
        if not specs and skipped:
            return Planned(turn, Decision.MERGE, (skipped[0],), None, when, merged_into=skipped[0])
        if not specs:
            return Planned(turn, Decision.DROP, ("no memorable statement (capture engine)",),
                           None, when)
        kinds = ", ".join(sorted({s.x_kind or s.kind for s in specs}))
        return Planned(turn, Decision.TRANSFORM, (f"captured: {kinds}",), specs[0].kind, when,
                       tuple(specs))

    def _seen_capture(self, scope: str, text: str, key: str) -> str | None:
        """Why this capture is not new (the reason), or None after remembering it."""
        if key in self.known.by_key:
            return "already imported (same capture of the same turn)"
        dk = dedup_key(scope, text)
        if dk in self.seen:
            return "duplicate of an earlier capture in this import"
        if dk in self.known.by_text:
            return "duplicate of a record already in the store"
        self.seen[dk] = key
        return None


def _extensions(item: SourceItem, when: str) -> dict[str, object]:
    ext: dict[str, object] = {"x-source": item.source, "x-source-key": item.key,
                              "x-source-hash": item.text_hash}
    if item.source_id is not None:
        ext["x-source-id"] = item.source_id
    if item.created_at is not None and str(item.created_at) != when:
        ext["x-created-at"] = item.created_at if isinstance(item.created_at, str | int | float) \
            else str(item.created_at)
    if item.meta:
        ext["x-meta"] = dict(item.meta)
    if item.relation:
        ext["x-relation"] = {"from": item.subject, "type": item.relation, "to": item.target}
    return ext


__all__ = ["Known", "Planner", "content_hash", "dedup_key", "norm"]
