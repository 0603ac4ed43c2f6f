"""Codex CLI and Gemini CLI payloads through our handlers; the other agents' installers."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

import pytest
from tests.agent.hooks.kit import config, git_project, hook_env, payload, seed

from amcp.agent.hooks.agents_install import (
    GEMINI_EVENTS,
    codex_toml,
    gemini_extension,
    install_codex,
    install_gemini,
    install_opencode,
    install_protocol,
)
from amcp.agent.hooks.codex import rollout_reply, run_codex_hook
from amcp.agent.hooks.gemini import run_gemini_hook, tool_text
from amcp.agent.hooks.ledger import LedgerStore
from amcp.errors import ValidationError
from amcp.memory import Memory


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return git_project(tmp_path)


def gemini(event: str, data: dict[str, object], home: Path) -> dict[str, object] | None:
    out = run_gemini_hook(event, json.dumps(data), config(home))
    return json.loads(out) if out.strip() else None


def test_gemini_session_prompt_tool_and_stop(home: Path, proj: Path) -> None:
    ids = seed(home)
    start = gemini("gemini-session-start", payload("SessionStart", proj, source="startup"),
                   home)
    assert start is not None
    spec = start["hookSpecificOutput"]
    assert isinstance(spec, dict) and spec["hookEventName"] == "SessionStart"
    assert ids["ruff"][:14] in str(spec["additionalContext"])
    tool = {"tool_name": "run_shell_command",
            "tool_input": {"command": "git commit -m 'fix: lexical fallback'"},
            "tool_response": {"llmContent": "Command: git commit -m 'fix: lexical fallback'\n"
                              "Directory: (root)\nOutput: [main 9f8e7d6] fix: lexical "
                              "fallback\n 1 file changed\nExit Code: 0"}}
    after = gemini("gemini-post-tool", payload("AfterTool", proj, **tool), home)
    assert after is not None
    spec = after["hookSpecificOutput"]
    assert isinstance(spec, dict) and spec["hookEventName"] == "AfterTool"
    assert "commit 9f8e7d6 recorded" in str(spec["additionalContext"])
    block = gemini("gemini-stop", payload("AfterAgent", proj, prompt="fix it",
                                          prompt_response="Done.", stop_hook_active=False),
                   home)
    assert block is not None and block["decision"] == "block"
    reply = (f"AMCP-DECLINE: small fix\n## Recall\n- **Surfaced:** {ids['ruff'][:14]} "
             "(used → success)")
    done = gemini("gemini-stop", payload("AfterAgent", proj, prompt="fix it",
                                         prompt_response=reply, stop_hook_active=True), home)
    assert done is not None and "outcome success recorded" in str(done["systemMessage"])
    assert LedgerStore(home / "ledger").load("s-1").stop_outcome == "declined"
    with Memory(home / "memory.db", embedder="hashing") as mem:
        assert mem.get(ids["ruff"]).state.weight > 0.5


def test_gemini_bad_input_never_breaks(home: Path) -> None:
    out = json.loads(run_gemini_hook("gemini-prompt", "not json", config(home)))
    assert "hook skipped" in out["systemMessage"]
    assert tool_text({"returnDisplay": "Output: x"}) == "x"


def test_codex_stop_reads_the_rollout(home: Path, proj: Path, tmp_path: Path) -> None:
    seed(home)
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("\n".join(json.dumps(e) for e in [
        {"type": "response_item", "payload": {"type": "message", "role": "user",
                                              "content": [{"type": "input_text",
                                                           "text": "fix"}]}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text",
                                                           "text": "AMCP-DECLINE: trivial"}]}},
    ]) + "\n")
    assert rollout_reply(str(rollout)) == "AMCP-DECLINE: trivial"
    out = run_codex_hook("codex-stop", json.dumps(payload("Stop", proj,
                                                          transcript_path=str(rollout))),
                         config(home))
    assert json.loads(out) == {}
    assert LedgerStore(home / "ledger").load("s-1").stop_outcome == "declined"


def test_installed_gemini_command_runs_the_lean_entry(home: Path, proj: Path,
                                                      tmp_path: Path) -> None:
    """The exact command the extension's hooks.json holds, as Gemini would run it."""
    import subprocess

    seed(home)
    hooks = json.loads(gemini_extension(str(home))["hooks/hooks.json"])["hooks"]
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    done = subprocess.run(shlex.split(command), input=json.dumps(payload("SessionStart", proj)),
                          capture_output=True, text=True, env=hook_env(home), timeout=120,
                          check=True)
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert set(hooks) == {e for e, _, _ in GEMINI_EVENTS}
    assert hooks["AfterTool"][0]["matcher"] == "run_shell_command"


def test_codex_install_merges_and_is_idempotent(tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "hooks.json").write_text(json.dumps({"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "notify-send done"}]}]}}))
    (codex / "config.toml").write_text('model = "gpt-5"\n\n[mcp_servers.other]\ncommand = "x"\n')
    install_codex(codex, amcp_home="/data/amcp")
    first = {p.name: p.read_text() for p in codex.iterdir()}
    install_codex(codex, amcp_home="/data/amcp")
    assert {p.name: p.read_text() for p in codex.iterdir()} == first
    config = tomllib.loads(first["config.toml"])
    assert config["model"] == "gpt-5" and "other" in config["mcp_servers"]
    assert config["mcp_servers"]["amcp"]["args"] == ["mcp"]
    assert config["mcp_servers"]["amcp"]["env"] == {"AMCP_HOME": "/data/amcp"}
    hooks = json.loads(first["hooks.json"])["hooks"]
    assert next(h["command"] for g in hooks["Stop"] for h in g["hooks"]) == "notify-send done"
    assert any("codex-stop" in h["command"] for g in hooks["Stop"] for h in g["hooks"])
    assert hooks["PostToolUse"][-1]["matcher"] == "Bash"


def test_codex_install_refuses_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not valid TOML"):
        codex_toml("[broken\n", None)
    text, note = codex_toml('[mcp_servers.amcp]\ncommand = "mine"\n', None)
    assert note and "hand-written" in note and text == '[mcp_servers.amcp]\ncommand = "mine"\n'
    (tmp_path / "hooks.json").write_text("{nope")
    with pytest.raises(ValidationError, match="not valid JSON"):
        install_codex(tmp_path)


def test_gemini_opencode_protocol_installers(tmp_path: Path) -> None:
    rep = install_gemini(tmp_path / ".gemini")
    root = tmp_path / ".gemini" / "extensions" / "amcp"
    manifest = json.loads((root / "gemini-extension.json").read_text())
    assert manifest["contextFileName"] == "AMCP.md" and "amcp" in manifest["mcpServers"]
    assert (root / "AMCP.md").read_text().startswith("# amcp memory")
    assert len(rep.files) == 3
    other = tmp_path / "g2" / "extensions" / "amcp"
    other.mkdir(parents=True)
    (other / "gemini-extension.json").write_text('{"name": "someone-else"}')
    with pytest.raises(ValidationError, match="another extension"):
        install_gemini(tmp_path / "g2")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "opencode.json").write_text('{"model": "x", "instructions": ["NOTES.md"]}')
    install_opencode(proj)
    install_opencode(proj)
    cfg = json.loads((proj / "opencode.json").read_text())
    assert cfg["model"] == "x" and cfg["instructions"] == ["NOTES.md", "AMCP.md"]
    assert cfg["mcp"]["amcp"]["type"] == "local" and cfg["mcp"]["amcp"]["command"][-1] == "mcp"
    install_protocol(proj)
    assert "## Recall" in (proj / "PROTOCOL.md").read_text()
    skill = (proj / ".agents" / "skills" / "amcp" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: amcp\ndescription: ")
    (tmp_path / "p2").mkdir()
    (tmp_path / "p2" / "PROTOCOL.md").write_text("# Someone else's protocol\n")
    with pytest.raises(ValidationError, match="another protocol"):
        install_protocol(tmp_path / "p2")
