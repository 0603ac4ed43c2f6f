"""The real Codex CLI, Gemini CLI and OpenCode, installed from npm, read what our installers
write: each lists the amcp MCP server (Gemini and OpenCode also start it and report it
connected), Codex's app server lists our four hooks with no errors, Gemini validates the
extension. Skipped only when npm itself is missing. The install is cached in
``.cache/npm/agents`` of the repository, so later sessions reuse it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
from tests.brain.ghkit import NPM_CACHE, npm_install

from amcp.agent.hooks.agents_install import (
    CODEX_EVENTS,
    GEMINI_EVENTS,
    install_codex,
    install_gemini,
    install_opencode,
)
from amcp.memory import Memory

AGENTS = ("@openai/codex@0.171.0", "@google/gemini-cli@0.61.0", "opencode-ai@1.18.33")
PREFIX = NPM_CACHE / "agents"
BIN = PREFIX / "node_modules" / ".bin"


@pytest.fixture(scope="session")
def agents_bin() -> Path:
    wanted = ("codex", "gemini", "opencode")
    if not all((BIN / name).exists() for name in wanted):
        npm_install(AGENTS, PREFIX, BIN / wanted[-1])
    return BIN


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A private HOME (the agents' config), a store, and our agents first on PATH."""
    home = tmp_path / "home"
    amcp_home = tmp_path / "amcp"
    with Memory(amcp_home / "memory.db", embedder="hashing") as mem:
        mem.remember("Deploys happen on Thursday", scope="project:proj")
    # The store's head is witnessed in amcp's per-user state directory, which follows HOME:
    # the agents (and the `amcp mcp` they start) get a private HOME, so name it for them.
    from amcp.paths import state_dir

    return {**{k: v for k, v in os.environ.items() if not k.startswith(("AMCP_", "XDG_"))},
           "HOME": str(home), "AMCP_HOME": str(amcp_home), "AMCP_NODE": "off",
           "AMCP_STATE_DIR": state_dir(),
           "CODEX_HOME": str(home / ".codex"), "PATH": f"{BIN}{os.pathsep}"
           f"{os.environ['PATH']}", "NO_COLOR": "1", "CI": "1"}


def run(cmd: list[str], env: dict[str, str], cwd: Path, stdin: str | None = None,
        timeout: int = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)


def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    return proj


def test_codex_lists_our_mcp_server_and_hooks(agents_bin: Path, env: dict[str, str],
                                              tmp_path: Path) -> None:
    codex_home = Path(env["CODEX_HOME"])
    rep = install_codex(codex_home, amcp_home=env["AMCP_HOME"])
    proj = project(tmp_path)
    listed = run([str(agents_bin / "codex"), "mcp", "list", "--json"], env, proj)
    assert listed.returncode == 0, listed.stderr
    servers = json.loads(listed.stdout)
    ours = next(s for s in servers if s["name"] == "amcp")
    assert ours["enabled"] and ours["transport"]["args"] == ["mcp"]
    assert ours["transport"]["env"] == {"AMCP_HOME": env["AMCP_HOME"]}
    # Codex's own app server (JSON-RPC over stdio) loads hooks.json and lists what it found.
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"clientInfo": {"name": "amcp-test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(proj)]}},
    ]
    answer = None
    with subprocess.Popen([str(agents_bin / "codex"), "app-server"], env=env, cwd=proj,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()
        try:
            for line in proc.stdout:
                msg = json.loads(line)
                if msg.get("id") == 2:
                    answer = msg
                    break
        finally:
            proc.kill()
            proc.stdin.close()
            proc.stdout.close()
    assert answer is not None and "result" in answer, answer
    found = answer["result"]["data"][0]
    assert found["errors"] == [] and found["warnings"] == []
    hooks = {h["eventName"]: h for h in found["hooks"]}
    camel = {"SessionStart": "sessionStart", "UserPromptSubmit": "userPromptSubmit",
             "PostToolUse": "postToolUse", "Stop": "stop"}
    for event, ours_event, matcher in CODEX_EVENTS:
        hook = hooks[camel[event]]
        assert hook["command"].endswith(ours_event) and hook["matcher"] == matcher
        assert hook["sourcePath"] == str(codex_home / "hooks.json")
    assert {p.name for p in rep.files} == {"hooks.json", "config.toml"}


def gemini_events(bin_dir: Path) -> set[str]:
    """Gemini's hook event names, read from the installed package (not copied by hand)."""
    bundle = bin_dir.parent / "@google" / "gemini-cli" / "bundle"
    names: set[str] = set()
    for path in bundle.glob("*.js"):
        names |= set(re.findall(r'HookEventName2\["(\w+)"\] = "\1"',
                                path.read_text(encoding="utf-8", errors="replace")))
    return names


def test_gemini_validates_lists_and_connects(agents_bin: Path, env: dict[str, str],
                                             tmp_path: Path) -> None:
    gemini_home = Path(env["HOME"]) / ".gemini"
    install_gemini(gemini_home, amcp_home=env["AMCP_HOME"])
    root = gemini_home / "extensions" / "amcp"
    proj = project(tmp_path)
    gemini = str(agents_bin / "gemini")
    valid = run([gemini, "extensions", "validate", str(root)], env, proj)
    assert valid.returncode == 0 and "successfully validated" in valid.stdout + valid.stderr
    listed = run([gemini, "extensions", "list"], env, proj)
    text = listed.stdout + listed.stderr
    assert "amcp (0.1.0)" in text and "AMCP.md" in text
    (gemini_home / "trustedFolders.json").write_text(json.dumps({str(proj): "TRUST_FOLDER"}))
    mcp = run([gemini, "mcp", "list"], env, proj)
    assert re.search(r"amcp \(from amcp\).*mcp \(stdio\) - Connected", mcp.stdout + mcp.stderr)
    events = gemini_events(agents_bin)
    assert {"SessionStart", "BeforeAgent", "AfterTool", "AfterAgent"} <= events
    schema = {  # the shape Gemini's loader accepts (processHooksConfiguration/Definition)
        "type": "object", "required": ["hooks"],
        "properties": {"hooks": {
            "type": "object", "propertyNames": {"enum": sorted(events)},
            "additionalProperties": {"type": "array", "items": {
                "type": "object", "required": ["hooks"],
                "properties": {"matcher": {"type": "string"}, "hooks": {
                    "type": "array", "minItems": 1, "items": {
                        "type": "object", "required": ["type", "command"],
                        "properties": {"type": {"const": "command"},
                                       "command": {"type": "string", "minLength": 1},
                                       "timeout": {"type": "integer", "minimum": 1}}}}}}}}},
    }
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())
    jsonschema.validate(hooks, schema)
    assert set(hooks["hooks"]) == {e for e, _, _ in GEMINI_EVENTS}


def test_opencode_connects_to_amcp(agents_bin: Path, env: dict[str, str],
                                   tmp_path: Path) -> None:
    proj = project(tmp_path)
    install_opencode(proj, amcp_home=env["AMCP_HOME"])
    listed = run([str(agents_bin / "opencode"), "mcp", "list"], env, proj)
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    assert re.search(r"amcp\s+connected", text), text
