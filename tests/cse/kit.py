"""Helpers for CSE and evolution tests: small stores with known content."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from amcp.amf.types import KnowledgeType
from amcp.memory import Memory

T0 = 1_760_000_000.0  # 2025-10-09: record times are offsets from here
NOW = T0 + 3600.0


def open_mem(tmp: Path) -> Memory:
    return Memory(tmp / "m.db", embedder="hashing")


def add(
    mem: Memory, text: str, ktype: KnowledgeType | str = KnowledgeType.FACT, *,
    at: float = T0, subject: str | None = None, kind: str | None = None,
    scope: str = "project:x", confidence: float = 0.9, caused_by: Sequence[str] | None = None,
) -> str:
    kt = KnowledgeType(ktype)
    return mem.remember(
        text, type=kt, scope=scope, subject=subject, kind=kind, confidence=confidence,
        created_at=at, caused_by=caused_by,
        sample_size=20 if kt is KnowledgeType.PATTERN else None,
    ).knowledge_id


def seed(mem: Memory, n: int = 30, *, seed_words: int = 0) -> list[str]:
    """``n`` records of every type, spread over a few subjects and an hour."""
    words = ["retry", "timeout", "cache", "index", "budget", "token", "deploy", "schema", "vector", "python", "sqlite", "network", "socket", "frame", "order", "price", "risk", "agent"]
    types = list(KnowledgeType)
    types.remove(KnowledgeType.SIGNAL)
    ids = []
    for i in range(n):
        text = " ".join(words[(i * 7 + j + seed_words) % len(words)] for j in range(8)) + f" {i}"
        ids.append(add(mem, text, types[i % len(types)], at=T0 + i,
                       subject=f"area{i % 4}.topic.item{i % 3}"))
    return ids
