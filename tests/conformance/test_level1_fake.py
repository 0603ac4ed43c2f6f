"""The kit against a correct fake node (8/8) and against one fault per rule (each T1 can FAIL)."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest
from tests.conformance.kit import FAST, FakeNode, Faults, RawServer, silent

from amcp.conformance import LEVEL_1, run_level


def failed_ids(faults: Faults) -> set[str]:
    with FakeNode.running(faults) as node:
        report = run_level(node.host, node.port, config=FAST)
    return {r.id for r in report.results if not r.passed}


def test_correct_fake_node_passes_all_eight() -> None:
    with FakeNode.running() as node:
        report = run_level(node.host, node.port, config=FAST)
    assert [r.id for r in report.results] == [s.id for s in LEVEL_1]
    assert all(r.passed for r in report.results), [
        (r.id, r.detail) for r in report.results if not r.passed
    ]
    assert report.passed and report.complete and report.exit_code() == 0
    t104 = next(r for r in report.results if r.id == "T1-04")
    assert len(t104.checks) == 12  # 11 upstream fields + core.sample_size for KT-PATTERN


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("hello_not_first", {"T1-02"}),
        ("bad_hello_fields", {"T1-02"}),
        ("magic_answered_normally", {"T1-03"}),
        ("violation_without_close", {"T1-03", "T1-06"}),
        ("accept_malformed", {"T1-04"}),
        ("violation_on_malformed", {"T1-04"}),
        ("allow_overwrite", {"T1-05"}),
        ("read_before_handshake", {"T1-06"}),
        ("answer_bad_checksum", {"T1-07"}),
        ("close_on_bad_checksum", {"T1-07"}),
        ("wrong_ack_id", {"T1-08"}),
        ("accept_wrong_id", {"T1-08"}),
    ],
)
def test_each_fault_fails_exactly_its_test(fault: str, expected: set[str]) -> None:
    assert failed_ids(Faults(**{fault: True})) == expected


def test_bad_magic_out_fails_t1_01_with_evidence() -> None:
    with FakeNode.running(Faults(bad_magic_out=True)) as node:
        report = run_level(node.host, node.port, config=FAST, only=["T1-01"])
    (result,) = report.results
    assert not result.passed
    assert result.evidence is not None and result.evidence.startswith(b"AMCQ".hex())
    assert "414d4350" in result.detail


def test_overwrite_detail_names_the_record() -> None:
    with FakeNode.running(Faults(allow_overwrite=True)) as node:
        report = run_level(node.host, node.port, config=FAST, only=["T1-05"])
    assert "K-" in report.results[0].detail


def test_malformed_violation_lists_each_field() -> None:
    with FakeNode.running(Faults(violation_on_malformed=True)) as node:
        report = run_level(node.host, node.port, config=FAST, only=["T1-04"])
    (result,) = report.results
    assert [c.passed for c in result.checks] == [False] * 12
    assert "PROTOCOL_VIOLATION" in result.checks[0].detail


def test_silent_node_fails_everything() -> None:
    quick = replace(FAST, timeout=0.5)
    with RawServer.running(silent) as server:
        report = run_level(server.host, server.port, config=quick)
    assert not any(r.passed for r in report.results), [r.id for r in report.results if r.passed]
    assert report.exit_code() == 1


def test_nothing_listening_fails_every_test_without_raising() -> None:
    with socket.socket() as s:  # a port that was free a moment ago and nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = run_level("127.0.0.1", port, config=FAST)
    assert not any(r.passed for r in report.results)
    assert all("cannot connect" in r.detail for r in report.results), [
        (r.id, r.detail) for r in report.results
    ]
