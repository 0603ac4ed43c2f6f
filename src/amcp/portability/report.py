"""The health report (pass one, before anything is written) and its Markdown/JSON forms.

Per source and kind: how many items will be kept, transformed, merged or dropped and why;
the date range; the scope mapping; secrets found (never shown); samples of each decision
with their redacted text.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from amcp.agent.capture.credentials import redact
from amcp.portability.model import Decision, Planned

SAMPLE_CHARS = 160


@dataclass(frozen=True, slots=True)
class Sample:
    where: str
    decision: str
    kind: str | None
    text: str  # redacted, shortened
    reasons: tuple[str, ...]


@dataclass(slots=True)
class HealthBuilder:
    """Folds planned items into counts; ``build()`` gives the frozen report."""

    samples_per_decision: int = 3
    items: int = 0
    records: int = 0
    by_source_kind: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    scopes: Counter[str] = field(default_factory=Counter)
    secrets: int = 0
    vectors: Counter[str] = field(default_factory=Counter)
    first: str | None = None
    last: str | None = None
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    files: list[tuple[str, str]] = field(default_factory=list)  # (file, source or why skipped)

    def add(self, p: Planned) -> None:
        self.items += 1
        self.records += len(p.records)
        kind = p.kind.value if p.kind else "-"
        self.by_source_kind[(p.item.source, kind, p.decision.value)] += 1
        for r in p.reasons:
            self.reasons[_reason_class(r)] += 1
        for spec in p.records:
            self.scopes[spec.scope] += 1
            self.secrets += spec.sensitive
        if p.item.vector_model and p.decision is not Decision.DROP:
            self.vectors[p.item.vector_model] += 1
        if p.created_at:
            self.first = min(self.first or p.created_at, p.created_at)
            self.last = max(self.last or p.created_at, p.created_at)
        bucket = self.samples.setdefault(p.decision.value, [])
        if len(bucket) < self.samples_per_decision:
            text = redact(p.records[0].text if p.records else p.item.text)
            if p.records and p.records[0].sensitive:
                text = "[secret redacted] " + redact(text)
            bucket.append(Sample(p.item.where, p.decision.value, p.kind.value if p.kind else None,
                                 _short(text), p.reasons))

    def build(self) -> HealthReport:
        decisions: Counter[str] = Counter()
        for (_s, _k, d), n in self.by_source_kind.items():
            decisions[d] += n
        return HealthReport(
            items=self.items, records=self.records,
            decisions={d.value: decisions.get(d.value, 0) for d in Decision},
            by_source_kind=tuple(sorted((s, k, d, n) for (s, k, d), n in
                                        self.by_source_kind.items())),
            reasons=tuple(self.reasons.most_common()), scopes=tuple(self.scopes.most_common()),
            secrets=self.secrets, vectors_discarded=tuple(self.vectors.most_common()),
            first=self.first, last=self.last,
            samples=tuple(s for d in Decision for s in self.samples.get(d.value, [])),
            files=tuple(self.files),
        )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"


def _reason_class(reason: str) -> str:
    """Group reasons that differ only in their details ("supersedes K-1…" etc.)."""
    for cut in (": supersedes", " (", ": classified", ", classified"):
        if cut in reason and not reason.startswith("log"):
            return reason.split(cut, 1)[0]
    return reason


@dataclass(frozen=True, slots=True)
class HealthReport:
    items: int
    records: int
    decisions: dict[str, int]
    by_source_kind: tuple[tuple[str, str, str, int], ...]
    reasons: tuple[tuple[str, int], ...]
    scopes: tuple[tuple[str, int], ...]
    secrets: int
    vectors_discarded: tuple[tuple[str, int], ...]
    first: str | None
    last: str | None
    samples: tuple[Sample, ...]
    files: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items, "records_to_write": self.records, "decisions": self.decisions,
            "by_source_kind": [{"source": s, "kind": k, "decision": d, "count": n}
                               for s, k, d, n in self.by_source_kind],
            "reasons": dict(self.reasons), "scopes": dict(self.scopes),
            "secrets_found": self.secrets, "vectors_discarded": dict(self.vectors_discarded),
            "date_range": {"first": self.first, "last": self.last},
            "samples": [{"where": s.where, "decision": s.decision, "kind": s.kind,
                         "text": s.text, "reasons": list(s.reasons)} for s in self.samples],
            "files": [{"file": f, "read_as": how} for f, how in self.files],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2) + "\n"

    def to_markdown(self) -> str:
        d = self.decisions
        lines = [
            "# Import health report", "",
            f"{self.items} source items → {self.records} records to write: "
            f"{d['keep']} kept, {d['transform']} transformed, {d['merge']} merged, "
            f"{d['drop']} dropped.", "",
            f"Date range: {self.first or '-'} … {self.last or '-'}. "
            f"Secrets found (stored encrypted): {self.secrets}.", "",
            "## Files", "", *[f"- `{f}`: {how}" for f, how in self.files], "",
            "## Per source and kind", "", "| source | kind | decision | items |",
            "|---|---|---|---:|",
            *[f"| {s} | {k} | {dd} | {n} |" for s, k, dd, n in self.by_source_kind], "",
            "## Why", "", "| reason | items |", "|---|---:|",
            *[f"| {r} | {n} |" for r, n in self.reasons], "",
            "## Scope mapping", "", "| scope | records |", "|---|---:|",
            *[f"| `{s}` | {n} |" for s, n in self.scopes], "",
        ]
        if self.vectors_discarded:
            lines += ["## Vectors discarded (re-embedded with this store's model)", "",
                      *[f"- {m}: {n}" for m, n in self.vectors_discarded], ""]
        lines += ["## Samples", ""]
        lines += [f"- **{s.decision}** {s.kind or ''} `{s.where}`: {s.text}"
                  + (f" — {'; '.join(s.reasons)}" if s.reasons else "") for s in self.samples]
        return "\n".join(lines) + "\n"
