"""Run a conformance level against ``host:port`` and collect a :class:`Report`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from amcp.conformance.client import KitIdentity, NodeFaultError, parse_target
from amcp.conformance.level1 import LEVEL_1, cleanup
from amcp.conformance.level2 import LEVEL_2
from amcp.conformance.level3 import LEVEL_3
from amcp.conformance.report import NotImplementedTest, Report, TestResult, evidence_hex
from amcp.conformance.steps import KitConfig, Spec, Target
from amcp.conformance.upstream import UPSTREAM_TESTS, split

LEVELS = (1, 2, 3)
BY_LEVEL: dict[int, tuple[Spec, ...]] = {1: LEVEL_1, 2: LEVEL_2, 3: LEVEL_3}
IMPLEMENTED: dict[str, Spec] = {s.id: s for specs in BY_LEVEL.values() for s in specs}


def _kit_version() -> str:
    from amcp import __version__

    return f"amcp {__version__}"


def run_test(spec: Spec, target: Target) -> TestResult:
    """One procedure, timed; every failure mode becomes a failed result, never an exception."""
    started = time.perf_counter()
    try:
        verdict = spec.run(target)
        passed, detail, evidence, checks = (
            verdict.passed, verdict.detail, verdict.evidence, verdict.checks
        )
    except NodeFaultError as exc:
        passed, detail, evidence, checks = False, str(exc), exc.evidence, ()
    except Exception as exc:  # noqa: BLE001 - a kit bug must not hide the other tests' results
        passed, detail, evidence, checks = (
            False, f"kit error {type(exc).__name__}: {exc}", None, ()
        )
    return TestResult(
        id=spec.id,
        name=spec.name,
        passed=passed,
        detail=detail,
        duration_ms=(time.perf_counter() - started) * 1000,
        evidence=evidence_hex(evidence),
        checks=checks,
    )


def _cleanup_all(target: Target) -> str:
    """Invalidate what the run stored, on each node that acknowledged it."""
    notes = [cleanup(target)]
    for address, written in target.extra_written.items():
        if written:
            host, port = parse_target(address)
            other = Target(host, port, target.config, target.me, written)
            notes.append(f"{address}: {cleanup(other)}")
    return "; ".join(notes)


def not_implemented(level: int) -> tuple[NotImplementedTest, ...]:
    """Upstream tests up to ``level`` that have no procedure in this kit, in upstream order."""
    missing = []
    for lv in range(1, level + 1):
        for line in UPSTREAM_TESTS[lv]:
            test_id, text = split(line)
            if test_id not in IMPLEMENTED:
                missing.append(NotImplementedTest(test_id, text))
    return tuple(missing)


def run_level(
    host: str,
    port: int,
    level: int = 1,
    timeout: float = 5.0,
    *,
    config: KitConfig | None = None,
    only: Sequence[str] | None = None,
    on_result: Callable[[TestResult], None] | None = None,
    peers: Sequence[tuple[str, int]] = (),
) -> Report:
    """Run every implemented test of ``level`` (levels are supersets: Level 2 includes
    Level 1). Tests the kit cannot run yet are listed in ``Report.not_implemented`` and
    make the report incomplete — never silently passed.

    ``config`` overrides ``timeout``; ``only`` restricts the run to some test ids;
    ``peers`` are the other nodes of a Level-3 cluster (``host:port`` is the first).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level}")
    cfg = config or KitConfig(timeout=timeout)
    target = Target(host, port, cfg, KitIdentity.fresh(cfg.bearer), peers=tuple(peers))
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = time.perf_counter()
    results = []
    specs = [s for lv in LEVELS if lv <= level for s in BY_LEVEL[lv]]
    for spec in specs:
        if only is not None and spec.id not in only:
            continue
        result = run_test(spec, target)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return Report(
        cleanup=_cleanup_all(target),
        target=" ".join([f"{host}:{port}", *(f"{h}:{p}" for h, p in peers)]),
        level=level,
        started_at=started_at,
        duration_ms=(time.perf_counter() - started) * 1000,
        results=tuple(results),
        not_implemented=not_implemented(level),
        kit_version=_kit_version(),
    )
