from __future__ import annotations

import json
from pathlib import Path

import typer
from tests.cse.kit import NOW, add, open_mem
from typer.testing import CliRunner

from amcp.amf.types import KnowledgeType
from amcp.cli.context_cmd import context, outcome, signal

app = typer.Typer()
app.command("context")(context)
app.command("outcome")(outcome)
app.command("signal")(signal)


def test_context_outcome_signal_commands(tmp_path: Path) -> None:
    with open_mem(tmp_path) as mem:
        kid = add(mem, "never retry a non-idempotent POST", KnowledgeType.PITFALL)
    db = str(tmp_path / "m.db")
    run = CliRunner().invoke
    res = run(app, ["context", "--task", "retry a POST", "--budget", "8000", "--store", db,
                    "--now", str(NOW), "--project", "x"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("[AMCP 1.0] Cold boot: x v0.0.0") and kid[:14] in res.output
    assert "digest " in res.output and "CORE_PRINCIPLES" in res.output
    res = run(app, ["context", "-t", "retry a POST", "--store", db, "--now", str(NOW), "--json"])
    data = json.loads(res.output)
    assert data["items"][0]["knowledge_id"] == kid and len(data["digest"]) == 64
    res = run(app, ["outcome", kid, "--result", "success", "--store", db, "--json"])
    assert res.exit_code == 0 and json.loads(res.output)[0]["weight"] > 0.5
    res = run(app, ["outcome", "K-" + "0" * 64, "--result", "success", "--store", db])
    assert res.exit_code == 1
    sig = tmp_path / "s.json"
    sig.write_text(json.dumps({"type": "perf", "metric": {"p95": 12}}))
    res = run(app, ["signal", str(sig), "--store", db])
    assert res.exit_code == 0 and "QEF-PERF-" in res.output
    res = run(app, ["signal", "-", "--store", db], input='{"type":"x","metric":{"m":"text"}}')
    assert res.exit_code == 1
