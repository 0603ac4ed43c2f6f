"""Typed results and the report: a rich pass/fail table and a JSON document.

The JSON schema (``amcp-conformance-report/1``) is documented in docs/conformance.md; a
test in tests/conformance keeps the two in step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPORT_SCHEMA = "amcp-conformance-report/1"
# Evidence is for a human reading a failure; a frame header and a little payload is enough.
MAX_EVIDENCE_BYTES = 256


def evidence_hex(data: bytes | None) -> str | None:
    if data is None:
        return None
    return data[:MAX_EVIDENCE_BYTES].hex()


@dataclass(frozen=True, slots=True)
class Check:
    """One sub-case of a test (T1-04 has one per required field)."""

    name: str
    passed: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class TestResult:
    """The outcome of one conformance test against one node."""

    id: str
    name: str
    passed: bool
    detail: str
    duration_ms: float
    evidence: str | None = None  # hex of the wire bytes that decided the verdict
    checks: tuple[Check, ...] = ()

    # pytest would otherwise try to collect this class because its name starts with "Test".
    __test__ = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
            "duration_ms": round(self.duration_ms, 1),
            "evidence": self.evidence,
            "checks": [c.to_json() for c in self.checks],
        }


@dataclass(frozen=True, slots=True)
class NotImplementedTest:
    """An upstream test of the requested level the kit has no procedure for yet."""

    id: str
    description: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "description": self.description}


@dataclass(frozen=True, slots=True)
class Report:
    target: str
    level: int
    started_at: str
    duration_ms: float
    results: tuple[TestResult, ...]
    not_implemented: tuple[NotImplementedTest, ...] = ()
    kit_version: str = field(default="")
    cleanup: str = ""  # what became of the records the run stored (level1.cleanup)

    @property
    def passed(self) -> bool:
        """True only when every test of the level ran and passed."""
        return not self.not_implemented and all(r.passed for r in self.results)

    @property
    def complete(self) -> bool:
        return not self.not_implemented

    def exit_code(self) -> int:
        """0 all passed, 1 a test failed, 2 the level is not fully implemented by the kit."""
        if any(not r.passed for r in self.results):
            return 1
        return 0 if self.complete else 2

    def to_json(self) -> dict[str, Any]:
        failed = sum(not r.passed for r in self.results)
        return {
            "schema": REPORT_SCHEMA,
            "kit_version": self.kit_version,
            "cleanup": self.cleanup,
            "target": self.target,
            "level": self.level,
            "started_at": self.started_at,
            "duration_ms": round(self.duration_ms, 1),
            "passed": self.passed,
            "complete": self.complete,
            "summary": {
                "total": len(self.results),
                "passed": len(self.results) - failed,
                "failed": failed,
                "not_implemented": len(self.not_implemented),
            },
            "tests": [r.to_json() for r in self.results],
            "not_implemented": [t.to_json() for t in self.not_implemented],
        }

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n", "utf-8")


def results_table(results: Sequence[TestResult], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("test", no_wrap=True)
    table.add_column("name")
    table.add_column("result", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column("detail")
    for r in results:
        verdict = "[green]PASS[/green]" if r.passed else "[red]FAIL[/red]"
        table.add_row(r.id, r.name, verdict, f"{r.duration_ms:.0f}", r.detail)
    return table


def print_report(report: Report, console: Console) -> None:
    title = f"AMCP Level-{report.level} conformance — {report.target}"
    console.print(results_table(report.results, title))
    for r in report.results:
        failed_checks = [c for c in r.checks if not c.passed]
        for c in failed_checks:
            console.print(f"  [red]{r.id} {c.name}[/red]: {c.detail}")
    passed = sum(r.passed for r in report.results)
    console.print(f"{passed}/{len(report.results)} tests passed")
    if report.cleanup:
        console.print(f"[dim]cleanup: {report.cleanup}[/dim]")
    if report.not_implemented:
        console.print(
            f"[yellow]Level {report.level} is not fully implemented by this kit; "
            f"{len(report.not_implemented)} upstream tests have no procedure yet "
            "(see docs/conformance.md for the plan):[/yellow]"
        )
        for t in report.not_implemented:
            console.print(f"  [yellow]NOT IMPLEMENTED[/yellow] {t.id}: {t.description}")
        console.print(
            f"[yellow]No Level-{report.level} conformance can be claimed from this run.[/yellow]"
        )
