"""``amcp hooks install codex | gemini | opencode | protocol``: the other coding agents.

Registered on ``hooks install`` (``amcp.cli.hooks_cmd.install_app``) when this module is
imported: ``amcp.cli.commands`` lists it as ``also`` of the ``hooks`` group. The
composition root: reads ``CODEX_HOME`` and ``AMCP_HOME`` here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from amcp.cli.common import friendly, out
from amcp.cli.hooks_cmd import _git_root, install_app

HomeOpt = Annotated[Path | None, typer.Option("--home", help="The agent's config directory "
                                               "(default: its own default).")]
DirOpt = Annotated[Path | None, typer.Option("--dir", help="Project root (default: the git "
                                              "root of the current directory).")]


def _amcp_home() -> str | None:
    return os.environ.get("AMCP_HOME") or None


def _report(rep: object) -> None:
    from amcp.agent.hooks.agents_install import AgentInstall

    assert isinstance(rep, AgentInstall)
    for path in rep.files:
        out.print(f"{rep.runtime}: wrote {path}")
    for note in rep.notes:
        out.print(f"  note: {note}")


def codex_home(home: Path | None) -> Path:
    env = os.environ.get("CODEX_HOME")
    return home or (Path(env) if env else Path.home() / ".codex")


def gemini_home(home: Path | None) -> Path:
    return home or Path.home() / ".gemini"


@install_app.command("codex")
@friendly
def install_codex_cmd(home: HomeOpt = None) -> None:
    """Codex CLI: lifecycle hooks ($CODEX_HOME/hooks.json) and the amcp MCP server."""
    from amcp.agent.hooks.agents_install import install_codex

    _report(install_codex(codex_home(home), amcp_home=_amcp_home()))


@install_app.command("gemini")
@friendly
def install_gemini_cmd(home: HomeOpt = None) -> None:
    """Gemini CLI: the amcp extension (hooks, MCP server, AMCP.md context)."""
    from amcp.agent.hooks.agents_install import install_gemini

    _report(install_gemini(gemini_home(home), amcp_home=_amcp_home()))


@install_app.command("opencode")
@friendly
def install_opencode_cmd(directory: DirOpt = None) -> None:
    """OpenCode: the amcp MCP server and AMCP.md instructions in opencode.json."""
    from amcp.agent.hooks.agents_install import install_opencode

    _report(install_opencode(directory or _git_root(Path.cwd()), amcp_home=_amcp_home()))


@install_app.command("protocol")
@friendly
def install_protocol_cmd(directory: DirOpt = None) -> None:
    """Runtimes without hooks: PROTOCOL.md and .agents/skills/amcp/SKILL.md."""
    from amcp.agent.hooks.agents_install import install_protocol

    _report(install_protocol(directory or _git_root(Path.cwd())))


__all__ = ["codex_home", "gemini_home"]
