"""Shared paths and helpers for the portability tests."""

from __future__ import annotations

from pathlib import Path

from amcp.memory import Memory
from amcp.portability.api import ImportResult, import_path
from amcp.portability.model import ImportOptions

FIXTURES = Path(__file__).parent / "fixtures"
# The real Letta agent files live beside the clone (read-only in CI), as bench data does.
LETTA = Path(__file__).resolve().parents[3] / "shared" / "bench-data" / "portability" / "letta"


def run(mem: Memory, path: Path, **options: object) -> ImportResult:
    return import_path(mem, path, ImportOptions(**options))  # type: ignore[arg-type]


def texts(mem: Memory) -> list[str]:
    out: list[str] = []
    after = None
    while page := mem.list_records(limit=500, after=after, reveal=True):
        out += [r.record.text for r in page if r.record is not None]
        after = page[-1].knowledge_id
    return out
