"""``ApplyResult``: what applying a peer's changes did (``amcp.sync.apply``, ``.bulk``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ApplyResult:
    applied: int = 0
    duplicates: int = 0
    conflicts: int = 0
    watermark: int = 0
    resolved: int = 0  # supersede conflicts decided here
    malformed: int = 0  # entries refused for their shape or an op not applied here
    problems: list[str] = field(default_factory=list)
    done: list[tuple[str, str]] = field(default_factory=list)  # (op, id) that changed the store

    def to_payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "applied": self.applied,
            "duplicates": self.duplicates,
            "conflicts": self.conflicts,
            "watermark": self.watermark,
        }
        if self.problems:
            out["problems"] = self.problems[:32]  # a hint, not a log: keep replies small
        return out

    def add(self, other: ApplyResult) -> None:
        self.applied += other.applied
        self.duplicates += other.duplicates
        self.conflicts += other.conflicts
        self.resolved += other.resolved
        self.malformed += other.malformed
        self.watermark = max(self.watermark, other.watermark)
        self.problems += other.problems[: max(0, 64 - len(self.problems))]
        self.done += other.done

    def count(self, entry: Mapping[str, Any], changed: bool) -> None:
        """An entry applied (it changed the store) or already reflected here."""
        if changed:
            self.applied += 1
            self.done.append((entry["op"], entry["knowledge_id"]))
        else:
            self.duplicates += 1

    def refuse(self, kid: str | None, why: str) -> None:
        """An entry refused: counted as a conflict, named in ``problems`` (the first 64)."""
        self.conflicts += 1
        if len(self.problems) < 64:
            self.problems.append(f"{kid}: {why}" if kid else why)


__all__ = ["ApplyResult"]
