"""``amcp hooks install …``, ``amcp hook <event>`` and ``amcp capture <transcript>``.

The app registers them::

    app.add_typer(hooks_app, name="hooks")
    app.add_typer(hook_app, name="hook")
    app.command("capture")(capture)

``amcp hook <event>`` is the same handler as the lean ``python -m amcp.agent.hooks <event>``
that the installer writes into Claude Code's settings (that one skips Typer's import).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from amcp.cli.common import emit_json, friendly, open_memory, out
from amcp.cli.options import StoreOpt, group

hooks_app = group("Install amcp into coding agents and git.")
install_app = group("Install hooks.")
hooks_app.add_typer(install_app, name="install")
hook_app = group(
    "Run one Claude Code hook: hook JSON on stdin, answer JSON on stdout (exit 0 always)."
)



@install_app.command("claude-code")
@friendly
def install_claude_code_cmd(
    project: Annotated[bool, typer.Option("--project", help="This project's .claude/ "
                                          "(the default).")] = False,
    user: Annotated[bool, typer.Option("--user", help="~/.claude/ for every project.")] = False,
    directory: Annotated[Path | None, typer.Option("--dir", help="Project root (default: the "
                                                    "git root of the current directory).")]
    = None,
) -> None:
    """Write Claude Code hooks (SessionStart, UserPromptSubmit, PostToolUse, Stop) and /amcp."""
    from amcp.agent.hooks.claude_code import project_of, project_scope
    from amcp.agent.hooks.install import install_claude_code

    if project and user:
        raise typer.BadParameter("give --project or --user, not both")
    if user:
        base, scope = Path.home(), "project:<name>"
    else:
        base = directory or _git_root(Path.cwd())
        scope = project_scope(project_of(base)) or "*"
    rep = install_claude_code(base, scope=scope)
    out.print(f"hooks in {rep.settings}: added {', '.join(rep.added) or 'none'}"
              + (f"; refreshed {', '.join(rep.updated)}" if rep.updated else ""))
    out.print(f"slash command /amcp in {rep.command}")


@install_app.command("git")
@friendly
def install_git_cmd(
    repo: Annotated[Path, typer.Option("--repo", help="Repository (default: here).")]
    = Path(),
) -> None:
    """Add a post-commit hook that prints an [AMCP] reminder (an existing hook is chained)."""
    from amcp.agent.hooks.install import install_git

    rep = install_git(repo.resolve())
    state = "refreshed" if rep.already else "installed"
    out.print(f"{state} {rep.hook}" + (f" (runs {rep.chained} first)" if rep.chained else ""))


def _run(event: str) -> None:
    from amcp.agent.hooks.__main__ import config_from_env
    from amcp.agent.hooks.claude_code import run_hook

    data = sys.stdin.buffer.read().decode("utf-8", "replace")
    sys.stdout.write(run_hook(event, data, config_from_env(os.environ)))


@hook_app.command("session-start")
def hook_session_start() -> None:
    """SessionStart: inject the project's pointer tier and the user's preferences."""
    _run("session-start")


@hook_app.command("prompt")
def hook_prompt() -> None:
    """UserPromptSubmit: expand relevant memories once per session; capture the prompt."""
    _run("prompt")


@hook_app.command("post-tool")
def hook_post_tool() -> None:
    """PostToolUse: record a successful git commit as a work boundary."""
    _run("post-tool")


@hook_app.command("stop")
def hook_stop() -> None:
    """Stop: ask once for a learning or a one-line decline."""
    _run("stop")


@friendly
def capture(
    transcript: Annotated[Path, typer.Argument(help="JSONL transcript (plain turns or "
                                                "Claude Code entries).")],
    scope: Annotated[str | None, typer.Option("--scope", help="Put every capture in this "
                                              "scope (default: user:<login> for the user's "
                                              "statements, the project's scope for the "
                                              "rest).")] = None,
    session: Annotated[str | None, typer.Option(help="Work session id for provenance.")]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show, do not store.")] = False,
    store: StoreOpt = None,
    embedder: Annotated[
        str,
        typer.Option(
            "--embedder", "-e", help="auto | minilm | minilm-int8 | hashing | openai | none"
        ),
    ] = "auto",
    json_: Annotated[bool, typer.Option("--json", help="One JSON object per capture.")]
    = False,
) -> None:
    """Stream a transcript through the capture engine and store what it captures."""
    from amcp.agent.capture import read_transcript
    from amcp.agent.capture_store import CaptureScopes, CaptureWriter, default_scopes
    from amcp.agent.hooks.claude_code import project_of, project_scope

    scopes = (CaptureScopes(scope, scope) if scope
              else default_scopes(project=project_scope(project_of(Path.cwd()))))
    counts = {"captured": 0, "stored": 0, "duplicates": 0}

    def report(writer: CaptureWriter) -> None:
        for s in writer.run(read_transcript(transcript)):
            counts["captured"] += 1
            counts["stored" if s.created else "duplicates"] += 0 if dry_run else 1
            if json_:
                sys.stdout.write(_json_line(s.to_dict()))
            else:
                verb = "would store" if dry_run else ("stored" if s.created else "duplicate")
                kid = f" {s.knowledge_id[:14]}" if s.knowledge_id else ""
                out.print(f"{verb}{kid} [{s.x_kind} ★{s.importance} {s.scope}] {s.text}",
                          markup=False)

    if dry_run:
        report(CaptureWriter(None, scopes=scopes, session=session))
    else:
        with open_memory(store, embedder, create=True) as mem:
            report(CaptureWriter.for_memory(mem, scopes=scopes, session=session))
    if json_:
        emit_json({"summary": counts})
    else:
        out.print(f"{counts['captured']} captured, {counts['stored']} stored, "
                  f"{counts['duplicates']} already known")


def _json_line(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) + "\n"


def _git_root(cwd: Path) -> Path:
    for d in (cwd.resolve(), *cwd.resolve().parents):
        if (d / ".git").exists():
            return d
    return cwd


__all__ = ["capture", "hook_app", "hooks_app"]
