"""``amcp setup``: store, hooks for the runtimes on this machine, brain, and a self-check.

1. **store** — opened if it exists (never reset, never migrated by hand), created if not;
2. **hooks** — for each runtime found (its command on PATH or its config directory in the
   home directory; ``--runtime`` names them instead): Claude Code (``~/.claude``), Codex
   (``$CODEX_HOME``), Gemini CLI (the extension); with ``--project``, also OpenCode's
   ``opencode.json`` (when OpenCode is found) and PROTOCOL.md + the skill in that project.
   Every installer merges and refreshes in place, so a second run changes nothing;
3. **brain** — ``amcp brain compile`` into ``$AMCP_HOME/brain`` (or ``--brain``): only the
   compile's own files are (re)written;
4. **self-check** — a test memory is written, recalled by the real prompt hook (the lean
   entry, as an agent runs it, in a throw-away git project), compiled into a throw-away
   brain, then purged (a tombstone is what the store keeps of a purged id) — and the check's
   ledger and directories are removed. Only then is the real brain compiled, so it never
   shows the test memory.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from amcp.cli.common import default_home, friendly, out, sqlite_only
from amcp.cli.options import StoreOpt

RUNTIMES = ("claude-code", "codex", "gemini", "opencode")
_FOUND_BY = {"claude-code": ("claude", ".claude"), "codex": ("codex", ".codex"),
             "gemini": ("gemini", ".gemini"), "opencode": ("opencode", ".config/opencode")}


@dataclass(slots=True)
class SelfCheck:
    knowledge_id: str = ""
    recalled: bool = False
    compiled: bool = False
    removed: bool = False
    took_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.recalled and self.compiled and self.removed


@dataclass(slots=True)
class SetupReport:
    store: Path
    created: bool
    installed: dict[str, list[str]] = field(default_factory=dict)
    brain: Path | None = None
    check: SelfCheck = field(default_factory=SelfCheck)


def found_runtimes(home: Path) -> list[str]:
    return [name for name in RUNTIMES
            if shutil.which(_FOUND_BY[name][0]) or (home / _FOUND_BY[name][1]).exists()]


def install_runtimes(runtimes: list[str], home: Path, project: Path | None,
                     amcp_home: str) -> dict[str, list[str]]:
    from amcp.agent.hooks import agents_install as agents
    from amcp.agent.hooks.install import install_claude_code
    from amcp.cli.agents_cmd import codex_home

    done: dict[str, list[str]] = {}
    for name in runtimes:
        if name == "claude-code":
            rep = install_claude_code(home, scope="project:<name>")
            done[name] = [str(rep.settings), str(rep.command)]
        elif name == "codex":
            done[name] = [str(p) for p in agents.install_codex(
                codex_home(None) if home == Path.home() else home / ".codex",
                amcp_home=amcp_home).files]
        elif name == "gemini":
            done[name] = [str(p) for p in agents.install_gemini(
                home / ".gemini", amcp_home=amcp_home).files]
        elif name == "opencode" and project is not None:
            done[name] = [str(p) for p in agents.install_opencode(
                project, amcp_home=amcp_home).files]
    if project is not None:
        done["protocol"] = [str(p) for p in agents.install_protocol(project).files]
    return done


def self_check(store: Path) -> SelfCheck:
    """The end-to-end check of the module docstring; cleans up after itself."""
    from amcp.agent.hooks.hookio import hook_argv
    from amcp.brain.compile import compile_brain
    from amcp.memory import Memory

    started = time.perf_counter()
    check = SelfCheck()
    token = secrets.token_hex(4)
    work = Path(tempfile.mkdtemp(prefix="amcp-setup-check-"))
    project = work / f"amcp-selfcheck-{token}"
    (project / ".git").mkdir(parents=True)
    session = f"amcp-setup-check-{token}"
    text = f"amcp setup self-check {token}: the marigold deployment uses blue lanterns"
    try:
        with Memory(store, embedder=None, check_embedder=False) as mem:
            check.knowledge_id = mem.remember(
                text, scope=f"project:amcp-selfcheck-{token}", kind="self-check").knowledge_id
        # The file path, no node: a node on the default port may serve another store, and
        # the check is about this one; no capture, so the check's prompt is not stored.
        env = {**os.environ, "AMCP_HOME": str(store.parent), "AMCP_HOOK_CAPTURE": "0",
               "AMCP_NODE": "off"}
        prompt = {"session_id": session, "cwd": str(project), "hook_event_name":
                  "UserPromptSubmit", "prompt": "which lanterns does the marigold "
                  f"deployment use? ({token})"}
        done = subprocess.run(  # noqa: S603 - our own interpreter and entry, no shell
            hook_argv(sys.executable, "prompt"), input=json.dumps(prompt),
            capture_output=True, text=True, env=env, timeout=60, check=False)
        check.recalled = check.knowledge_id[:14] in done.stdout
        with Memory(store, embedder=None, check_embedder=False) as mem:
            compile_brain(mem, work / "brain")
            region = work / "brain" / f"REGION-project-amcp-selfcheck-{token}.md"
            check.compiled = region.exists() and check.knowledge_id[:14] in region.read_text()
    finally:
        if check.knowledge_id:
            with Memory(store, embedder=None, check_embedder=False) as mem:
                mem.purge(check.knowledge_id, "amcp setup self-check")
                left = mem.store.get(check.knowledge_id)
                check.removed = left is not None and left.record is None  # a tombstone
        ledger = store.parent / "ledger" / f"{session}.json"
        ledger.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    check.took_ms = (time.perf_counter() - started) * 1000
    return check


def setup(store: Path, *, embedder: str, runtimes: list[str], home: Path,
          project: Path | None, brain: Path, check: bool = True) -> SetupReport:
    from amcp.brain.compile import compile_brain
    from amcp.memory import Memory

    created = not store.exists()
    with Memory(store, embedder=None if embedder == "none" else embedder):
        pass  # created (or opened and verified) — an existing store is never reset
    rep = SetupReport(store, created)
    rep.installed = install_runtimes(runtimes, home, project, str(store.parent))
    if check:
        rep.check = self_check(store)
    with Memory(store, embedder=None, check_embedder=False) as mem:
        compile_brain(mem, brain)
    rep.brain = brain
    return rep


@friendly
def setup_cmd(
    store: StoreOpt = None,
    embedder: Annotated[str, typer.Option("--embedder", "-e", help="For a new store: auto | "
                                          "minilm | hashing | none")] = "auto",
    runtime: Annotated[list[str] | None, typer.Option("--runtime", help="Install for this "
                                                      "runtime (repeat; default: those "
                                                      "found).")] = None,
    project: Annotated[Path | None, typer.Option("--project", help="Also write PROTOCOL.md,"
                                                 " the skill and opencode.json here.")]
    = None,
    brain: Annotated[Path | None, typer.Option("--brain", help="Brain directory (default "
                                               "$AMCP_HOME/brain).")] = None,
    check: Annotated[bool, typer.Option(help="Run the end-to-end self-check.")] = True,
) -> None:
    """One-command setup: store, hooks, brain and an end-to-end self-check (idempotent)."""
    # The coding agents' hooks read a store file directly (docs/hooks.md).
    path = sqlite_only(store, "amcp setup")
    home = Path.home()
    wanted = runtime if runtime is not None else found_runtimes(home)
    unknown = sorted(set(wanted) - set(RUNTIMES))
    if unknown:
        raise typer.BadParameter(f"unknown runtime {unknown[0]!r}; one of {', '.join(RUNTIMES)}")
    rep = setup(path, embedder=embedder, runtimes=wanted, home=home, project=project,
                brain=brain or (path.parent if store else default_home()) / "brain",
                check=check)
    out.print(f"store {'created' if rep.created else 'kept'} at {rep.store}")
    for name, files in rep.installed.items():
        out.print(f"{name}: {', '.join(files)}")
    if not rep.installed:
        out.print("no coding agent found (use --runtime to name one)")
    if check:
        c = rep.check
        out.print(f"self-check {'passed' if c.ok else '[red]FAILED[/red]'}: written, "
                  f"recalled by the prompt hook {'yes' if c.recalled else 'NO'}, compiled "
                  f"{'yes' if c.compiled else 'NO'}, removed {'yes' if c.removed else 'NO'} "
                  f"({c.took_ms:.0f} ms)")
    out.print(f"brain compiled in {rep.brain}")
    if check and not rep.check.ok:
        raise typer.Exit(1)


__all__ = ["SetupReport", "found_runtimes", "self_check", "setup", "setup_cmd"]
