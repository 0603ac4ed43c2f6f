"""Installers for coding agents besides Claude Code, each through its own mechanism.

* **Codex CLI** — lifecycle hooks in ``$CODEX_HOME/hooks.json`` (Claude Code's shape; our
  entries merged in, foreign ones kept) and the amcp MCP server as ``[mcp_servers.amcp]``
  in ``$CODEX_HOME/config.toml`` (a block between marker comments, replaced in place on
  re-install; a hand-written ``[mcp_servers.amcp]`` is left alone and reported). Codex asks
  the user to trust new hooks once (``/hooks``).
* **Gemini CLI** — an extension, ``~/.gemini/extensions/amcp/``: ``gemini-extension.json``
  (the MCP server and the context file), ``hooks/hooks.json`` (SessionStart, BeforeAgent,
  AfterTool on ``run_shell_command``, AfterAgent; Gemini's timeouts are milliseconds) and
  ``AMCP.md`` (the protocol digest).
* **OpenCode** — ``opencode.json`` in the project: the MCP server (``mcp.amcp``, type
  ``local``) and ``AMCP.md`` in ``instructions``. OpenCode's lifecycle hooks are JavaScript
  plugins; amcp stays at L1 there (the digest is in every session's instructions).
* **Runtimes without hooks** — ``PROTOCOL.md`` and ``.agents/skills/amcp/SKILL.md``.

Every installer is idempotent and refuses (rather than overwrites) a file it cannot parse.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amcp.agent.hooks.install import _atomic_write, merge_settings
from amcp.agent.hooks.protocol_docs import CONTEXT_MD, PROTOCOL_MD, SKILL_MD
from amcp.errors import ValidationError

CODEX_EVENTS: tuple[tuple[str, str, str | None], ...] = (
    ("SessionStart", "codex-session-start", None),
    ("UserPromptSubmit", "codex-prompt", None),
    ("PostToolUse", "codex-post-tool", "Bash"),
    ("Stop", "codex-stop", None),
)
GEMINI_EVENTS: tuple[tuple[str, str, str | None], ...] = (
    ("SessionStart", "gemini-session-start", None),
    ("BeforeAgent", "gemini-prompt", None),
    ("AfterTool", "gemini-post-tool", "run_shell_command"),
    ("AfterAgent", "gemini-stop", None),
)
GEMINI_TIMEOUT_MS = 10_000
# `amcp mcp` opens and verifies the store and loads the MCP stack before it answers: ~1 s
# on a quiet machine, several under load — past Gemini's and OpenCode's 5 s defaults.
MCP_TIMEOUT_MS = 60_000
EXTENSION = "amcp"
TOML_BEGIN = "# >>> amcp (written by `amcp hooks install codex`; re-run to refresh)"
TOML_END = "# <<< amcp"


@dataclass(frozen=True, slots=True)
class AgentInstall:
    runtime: str
    files: tuple[Path, ...]
    notes: tuple[str, ...] = ()


def amcp_command() -> str:
    """The ``amcp`` console script beside this interpreter (absolute: an agent's shell
    may not have the venv on PATH), else ``amcp`` from PATH."""
    here = Path(sys.executable).parent / "amcp"
    return str(here) if here.exists() else "amcp"


def _load_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise ValidationError(str(path), f"is not valid JSON ({exc}); fix it by hand, amcp "
                              "will not overwrite it") from None
    if not isinstance(data, dict):
        raise ValidationError(str(path), "is not a JSON object")
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _server(home: str | None) -> dict[str, Any]:
    return {"command": amcp_command(), "args": ["mcp"],
            **({"env": {"AMCP_HOME": home}} if home else {})}


# ---------------------------------------------------------------------------- Codex


def codex_toml(current: str, home: str | None) -> tuple[str, str | None]:
    """``config.toml`` text with our MCP block (and a note when one was hand-written)."""
    try:
        tomllib.loads(current)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config.toml", f"is not valid TOML ({exc}); fix it by hand, "
                              "amcp will not overwrite it") from None
    ours = re.compile(rf"\n?{re.escape(TOML_BEGIN)}\n.*?{re.escape(TOML_END)}\n?", re.S)
    without = ours.sub("\n", current).rstrip("\n")
    if "amcp" in tomllib.loads(without or "").get("mcp_servers", {}):
        return current, "config.toml already has a hand-written [mcp_servers.amcp]; kept"
    server = _server(home)
    lines = [TOML_BEGIN, "[mcp_servers.amcp]", f"command = {json.dumps(server['command'])}",
             'args = ["mcp"]']
    if "env" in server:
        lines += ["", "[mcp_servers.amcp.env]", f"AMCP_HOME = {json.dumps(home)}"]
    block = "\n".join([*lines, TOML_END]) + "\n"
    text = (without + "\n\n" if without else "") + block
    tomllib.loads(text)  # what we write must parse
    return text, None


def install_codex(codex_home: Path, *, amcp_home: str | None = None,
                  python: str | None = None) -> AgentInstall:
    hooks_path = codex_home / "hooks.json"
    merged, _, _ = merge_settings(_load_json(hooks_path), python, events=CODEX_EVENTS)
    config = codex_home / "config.toml"
    text, note = codex_toml(config.read_text(encoding="utf-8") if config.exists() else "",
                            amcp_home)
    _write_json(hooks_path, merged)
    _atomic_write(config, text)
    notes = ["open /hooks in Codex once and trust the amcp hooks (Codex skips untrusted "
             "hooks)"]
    return AgentInstall("codex", (hooks_path, config), (*notes, *filter(None, [note])))


# ---------------------------------------------------------------------------- Gemini


def gemini_extension(amcp_home: str | None, python: str | None = None
                     ) -> dict[str, str]:
    """The extension's files (relative path → text)."""
    manifest = {"name": EXTENSION, "version": "0.1.0",
                "description": "amcp memory: recall, capture and outcomes for Gemini CLI",
                "contextFileName": "AMCP.md",
                "mcpServers": {"amcp": {**_server(amcp_home), "timeout": MCP_TIMEOUT_MS}}}
    hooks, _, _ = merge_settings({}, python, events=GEMINI_EVENTS, timeout=GEMINI_TIMEOUT_MS)
    return {
        "gemini-extension.json": json.dumps(manifest, indent=2) + "\n",
        "hooks/hooks.json": json.dumps(hooks, indent=2) + "\n",
        "AMCP.md": CONTEXT_MD,
    }


def install_gemini(gemini_home: Path, *, amcp_home: str | None = None,
                   python: str | None = None) -> AgentInstall:
    root = gemini_home / "extensions" / EXTENSION
    manifest = root / "gemini-extension.json"
    if manifest.exists() and _load_json(manifest).get("name") != EXTENSION:
        raise ValidationError(str(manifest), "is another extension's; amcp will not "
                              "overwrite it")
    written = []
    for rel, text in gemini_extension(amcp_home, python).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, text)
        written.append(path)
    return AgentInstall("gemini", tuple(written), (
        "Gemini runs hooks and MCP servers only in trusted folders (it asks on first run)",))


# ---------------------------------------------------------------------------- OpenCode


def install_opencode(project: Path, *, amcp_home: str | None = None) -> AgentInstall:
    path = project / "opencode.json"
    config = _load_json(path)
    config.setdefault("$schema", "https://opencode.ai/config.json")
    mcp = config.setdefault("mcp", {})
    if not isinstance(mcp, dict):
        raise ValidationError(f"{path}: mcp", "is not an object")
    server = _server(amcp_home)
    mcp["amcp"] = {"type": "local", "command": [server["command"], "mcp"], "enabled": True,
                   "timeout": MCP_TIMEOUT_MS,
                   **({"environment": server["env"]} if "env" in server else {})}
    instructions = config.setdefault("instructions", [])
    if not isinstance(instructions, list):
        raise ValidationError(f"{path}: instructions", "is not a list")
    if "AMCP.md" not in instructions:
        instructions.append("AMCP.md")
    _write_json(path, config)
    digest = project / "AMCP.md"
    _atomic_write(digest, CONTEXT_MD)
    return AgentInstall("opencode", (path, digest), (
        "OpenCode hooks are JS plugins; amcp works there through MCP and AMCP.md (L1)",))


# ---------------------------------------------------------------------------- no hooks


def install_protocol(project: Path) -> AgentInstall:
    """``PROTOCOL.md`` and the skill, for runtimes without hooks (L0/L1)."""
    protocol = project / "PROTOCOL.md"
    skill = project / ".agents" / "skills" / "amcp" / "SKILL.md"
    if protocol.exists() and "amcp memory protocol" not in protocol.read_text(
            encoding="utf-8", errors="replace"):
        raise ValidationError(str(protocol), "is another protocol's; amcp will not "
                              "overwrite it (use --dir for another place)")
    skill.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(protocol, PROTOCOL_MD)
    _atomic_write(skill, SKILL_MD)
    return AgentInstall("protocol", (protocol, skill))


__all__ = [
    "CODEX_EVENTS",
    "GEMINI_EVENTS",
    "AgentInstall",
    "codex_toml",
    "gemini_extension",
    "install_codex",
    "install_gemini",
    "install_opencode",
    "install_protocol",
]
