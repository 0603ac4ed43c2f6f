"""The JSON report schema, the CLI command, and the upstream test list copy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer
from tests.conformance.kit import FAST, FakeNode
from typer.testing import CliRunner

from amcp.cli.conformance_cmd import conformance
from amcp.conformance import REPORT_SCHEMA, not_implemented, run_level
from amcp.conformance.upstream import UPSTREAM_TESTS

UPSTREAM_JSON = Path(__file__).resolve().parents[1] / "spec" / "upstream" / "AMCP_v1.0.json"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"

app = typer.Typer()
app.command()(conformance)
runner = CliRunner()


def test_json_report_has_the_documented_keys(tmp_path: Path) -> None:
    with FakeNode.running() as node:
        report = run_level(node.host, node.port, config=FAST, only=["T1-02", "T1-08"])
    path = tmp_path / "r.json"
    report.write_json(path)
    doc = json.loads(path.read_text("utf-8"))
    assert doc["schema"] == REPORT_SCHEMA
    assert set(doc) == {"schema", "kit_version", "target", "level", "started_at", "duration_ms",
                        "passed", "complete", "summary", "tests", "not_implemented", "cleanup"}
    assert doc["summary"] == {"total": 2, "passed": 2, "failed": 0, "not_implemented": 0}
    test = doc["tests"][1]
    assert set(test) == {"id", "name", "passed", "detail", "duration_ms", "evidence", "checks"}
    assert test["checks"][0].keys() == {"name", "passed", "detail"}
    # Every top-level key is documented in docs/conformance.md's schema section.
    text = DOCS.read_text("utf-8")
    for key in doc:
        assert f'"{key}"' in text, key


def test_cli_level_1_passes_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    with FakeNode.running() as node:
        res = runner.invoke(app, [f"{node.host}:{node.port}", "--json-out", str(out),
                                  "--timeout", "3", "--silence-window", "0.3"])
    assert res.exit_code == 0, res.output
    assert "8/8 tests passed" in res.output
    assert json.loads(out.read_text("utf-8"))["passed"] is True


def test_every_upstream_test_has_a_procedure() -> None:
    assert not_implemented(3) == ()


def test_cli_level_2_against_a_node_without_level_2_features_fails_them() -> None:
    with FakeNode.running() as node:  # the fake answers Level-1 messages only
        res = runner.invoke(app, [f"{node.host}:{node.port}", "--level", "2",
                                  "--timeout", "2", "--silence-window", "0.3"])
    assert res.exit_code == 1, res.output
    assert "9/16 tests passed" in res.output  # Level 1, and T2-04: the fake is idempotent
    assert "NOT IMPLEMENTED" not in res.output


def test_level_3_with_one_address_says_what_it_needs() -> None:
    with FakeNode.running() as node:
        report = run_level(node.host, node.port, level=3, config=FAST,
                           only=["T3-01", "T3-02", "T3-06"])
    assert [r.passed for r in report.results] == [False] * 3
    assert all("needs 2 node addresses, got 1" in r.detail for r in report.results)


def test_cli_bad_target_exits_1() -> None:
    res = runner.invoke(app, ["no-port-here"])
    assert res.exit_code == 1


def test_cli_failures_exit_1() -> None:
    with FakeNode.running() as node:
        port = node.port
    res = runner.invoke(app, [f"127.0.0.1:{port}", "--timeout", "0.5"])
    assert res.exit_code == 1
    assert "0/8 tests passed" in res.output


def test_upstream_list_is_a_verbatim_copy() -> None:
    conf = json.loads(UPSTREAM_JSON.read_text("utf-8"))["conformance"]
    keys = {1: "level_1_basic", 2: "level_2_standard", 3: "level_3_advanced"}
    for level, key in keys.items():
        assert tuple(conf[key]["tests"]) == UPSTREAM_TESTS[level]


def test_docs_describe_every_procedure() -> None:
    text = DOCS.read_text("utf-8")
    for level in (1, 2, 3):
        for line in UPSTREAM_TESTS[level]:
            test_id = line.split(":")[0]
            assert re.search(rf"^#+ {test_id}\b", text, re.MULTILINE), test_id


def test_cli_level_3_takes_every_node_of_the_cluster(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with FakeNode.running() as a, FakeNode.running() as b:
        res = runner.invoke(app, [f"{a.host}:{a.port}", f"{b.host}:{b.port}", "--level", "3",
                                  "--timeout", "2", "--silence-window", "0.3",
                                  "--converge-within", "0.5", "--json-out", str(out)])
    assert res.exit_code == 1, res.output  # the fakes do not replicate
    doc = json.loads(out.read_text("utf-8"))
    assert doc["target"] == f"{a.host}:{a.port} {b.host}:{b.port}"
    assert doc["summary"]["total"] == 22 and doc["complete"] is True
