"""amcp.conformance — the AMCP conformance kit, run against any node at ``host:port``.

Level 1 (T1-01 … T1-08) is implemented exactly as upstream conformance-level-1.md with the
stricter rules of PROFILE.md; Level 2 (T2-01 … T2-08) and Level 3 (T3-01 … T3-06, against
several nodes) turn each upstream line into a procedure (docs/conformance.md). The kit
depends on the sans-IO codecs and AMF helpers only, never on ``amcp.node``, so it judges
our node and other implementations alike.
"""

from __future__ import annotations

from amcp.conformance.client import (
    KitIdentity,
    NodeFaultError,
    NodeViolationError,
    Peer,
    RawConnection,
    Received,
    open_active,
    parse_target,
)
from amcp.conformance.level1 import LEVEL_1
from amcp.conformance.report import (
    REPORT_SCHEMA,
    Check,
    NotImplementedTest,
    Report,
    TestResult,
    print_report,
)
from amcp.conformance.runner import not_implemented, run_level, run_test
from amcp.conformance.steps import KitConfig, Spec, Target, Verdict

__all__ = [
    "LEVEL_1",
    "REPORT_SCHEMA",
    "Check",
    "KitConfig",
    "KitIdentity",
    "NodeFaultError",
    "NodeViolationError",
    "NotImplementedTest",
    "Peer",
    "RawConnection",
    "Received",
    "Report",
    "Spec",
    "Target",
    "TestResult",
    "Verdict",
    "not_implemented",
    "open_active",
    "parse_target",
    "print_report",
    "run_level",
    "run_test",
]
