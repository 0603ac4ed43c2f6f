"""``amcp brain …``: compile, track, export, validate, the git brain, GitHub, audit.

The app registers it with ``app.add_typer(brain_app, name="brain")``. Each command is a
few lines over ``amcp.brain``; the composition root (here) reads the environment
(``GITHUB_TOKEN``) and nothing below it does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from amcp.cli.common import emit_json, friendly, out, require_store, store_location, store_path
from amcp.cli.options import JsonOpt, StoreOpt, group

if TYPE_CHECKING:
    from amcp.brain.ghrest import GitHub
    from amcp.memory import Memory

brain_app = group("The Markdown brain: compile, export, git and GitHub backends.")
github_app = group("The GitHub-issues backend (RxAi AMP).")
brain_app.add_typer(github_app, name="github")

NowOpt = Annotated[
    str | None,
    typer.Option("--now", help="The compile's clock: ISO 8601 with a zone, or epoch seconds. "
                 "The same store and --now give byte-identical output."),
]


@contextmanager
def open_memory(store: str | None, embedder: str | None = None) -> Iterator[Memory]:
    """The store for brain work: no embedder unless one is asked for (compiles, exports
    and syncs read and write text; a model load would be most of their time). A record
    written without an embedder gets its vector at the next ``amcp reindex``."""
    from amcp.memory import Memory

    path = store_location(store)
    require_store(path)
    mem = Memory(path, embedder=embedder, check_embedder=embedder is not None)
    try:
        yield mem
    finally:
        mem.close()


def _now(value: str | None) -> float | None:
    from amcp.brain.entries import parse_now

    return parse_now(value)


@brain_app.command("compile")
@friendly
def compile_cmd(
    directory: Annotated[Path, typer.Argument(help="Brain directory (created if missing).")],
    store: StoreOpt = None,
    now: NowOpt = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=0,
        help="Processes sharing the first read of a large store (default: one per spare "
             "core, at most 8; 0: none). The output is the same either way.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Compile INDEX.md, REGION-*.md, weights.json and not_indexed.md (deterministic)."""
    from amcp.brain.compile import compile_brain
    from amcp.brain.parts import default_workers

    when = _now(now)
    with open_memory(store) as mem:
        rep = compile_brain(mem, directory, now=when,
                            workers=default_workers() if workers is None else workers)
    if json_:
        emit_json({"directory": str(rep.directory), "records": rep.records,
                   "regions": rep.regions, "index_bytes": rep.index_bytes,
                   "watermark": rep.watermark, "compiled_at": rep.compiled_at,
                   "files": list(rep.files), "removed": list(rep.removed),
                   "took_ms": round(rep.took_ms, 1)})
        return
    out.print(f"compiled {rep.records} memories in {rep.regions} regions into {directory} "
              f"(INDEX.md {rep.index_bytes} bytes, {rep.took_ms:.0f} ms)")
    for name in rep.removed:
        out.print(f"  removed stale {name}")


@brain_app.command("track")
@friendly
def track_cmd(
    directory: Annotated[Path, typer.Argument(help="Brain directory.")],
    store: StoreOpt = None,
    now: NowOpt = None,
) -> None:
    """Rebuild not_indexed.md: what arrived since the last compile."""
    from amcp.brain.compile import track

    with open_memory(store) as mem:
        rep = track(mem, directory, now=_now(now))
    out.print(f"{rep.unindexed} memories not yet indexed (since {rep.since})")


@brain_app.command("export")
@friendly
def export_cmd(
    directory: Annotated[Path, typer.Argument(help="Output directory: okf/ and rows.ndjson.")],
    store: StoreOpt = None,
    now: NowOpt = None,
) -> None:
    """Export the OKF v0.1 bundle and rows.ndjson (derived, read-only), validated."""
    from amcp.brain.errors import BrainError
    from amcp.brain.okf import export_okf, validate_bundle

    with open_memory(store) as mem:
        rep = export_okf(mem, directory, now=_now(now))
    check = validate_bundle(rep.bundle)
    if not check.ok:
        raise BrainError("the exported bundle is not OKF v0.1 conformant: "
                         + "; ".join(check.problems[:5]))
    out.print(f"exported {rep.concepts} concepts to {rep.bundle} and {rep.rows} "
              f"(OKF v0.1 conformant"
              + (f"; {rep.skipped_sensitive} sensitive left out" if rep.skipped_sensitive
                 else "") + ")")


@brain_app.command("validate")
@friendly
def validate_cmd(
    bundle: Annotated[Path, typer.Argument(help="An OKF bundle directory.")],
) -> None:
    """Check an OKF bundle against OKF v0.1 §9 (and the inferred front matter schema)."""
    from amcp.brain.okf import validate_bundle

    rep = validate_bundle(bundle)
    for problem in rep.problems:
        out.print(f"  {problem}", markup=False)
    out.print(f"{rep.concepts} concepts: " + ("conformant" if rep.ok else
                                              f"{len(rep.problems)} problems"))
    if not rep.ok:
        raise typer.Exit(1)


@brain_app.command("git-init")
@friendly
def git_init_cmd(
    repo: Annotated[Path, typer.Argument(help="Repository directory (git init if needed).")],
    remote: Annotated[str | None, typer.Option(help="URL of the remote to sync with "
                                               "(added as origin).")] = None,
    store: StoreOpt = None,
) -> None:
    """Make a git-backed brain and write every active memory into it (one file each)."""
    from amcp.brain.gitbrain import init, sync

    init(repo, remote=remote)
    with open_memory(store) as mem:
        rep = sync(mem, repo)
    _print_sync(rep)


@brain_app.command("sync")
@friendly
def sync_cmd(
    repo: Annotated[Path, typer.Argument(help="The git brain's directory.")],
    remote: Annotated[str, typer.Option(help="Remote to pull from and push to ('' for "
                                        "none).")] = "origin",
    push: Annotated[bool, typer.Option(help="Push after pulling.")] = True,
    store: StoreOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Two-way sync: edits → supersede, deletions → invalidate, new files → remember."""
    from amcp.brain.gitbrain import sync

    with open_memory(store) as mem:
        rep = sync(mem, repo, remote=remote or None, push=push)
    if json_:
        from dataclasses import asdict

        emit_json(asdict(rep))
        return
    _print_sync(rep)
    if rep.problems:
        raise typer.Exit(2)


def _print_sync(rep: object) -> None:
    from amcp.brain.gitbrain import SyncReport

    assert isinstance(rep, SyncReport)
    out.print(f"{len(rep.superseded)} superseded, {len(rep.invalidated)} invalidated, "
              f"{len(rep.remembered)} new; {rep.written} files written, {rep.removed} removed"
              + (f"; commits {', '.join(rep.commits)}" if rep.commits else "")
              + ("; pulled" if rep.pulled else "") + ("; pushed" if rep.pushed else ""))
    for line in rep.conflicts:
        out.print(f"  conflict resolved: {line}", markup=False)
    for line in rep.problems:
        out.print(f"  [yellow]not applied[/yellow]: {line}")


@brain_app.command("audit")
@friendly
def audit_cmd(
    days: Annotated[float, typer.Option(help="Look at sessions of the last DAYS days.")] = 1.0,
    output: Annotated[Path | None, typer.Option("--out", help="Also write the report as "
                                                "Markdown here.")] = None,
    store: StoreOpt = None,
    json_: JsonOpt = False,
) -> None:
    """The librarian pass: memories recalled but never credited with an outcome."""
    from dataclasses import asdict

    from amcp.brain.audit import audit, render

    with open_memory(store) as mem:
        rep = audit(mem, store_path(store).parent, days=days)
    if output is not None:
        output.write_text(render(rep), encoding="utf-8")
    if json_:
        emit_json(asdict(rep))
        return
    out.print(render(rep), markup=False)


def github_token(explicit: str | None) -> str | None:
    return explicit or os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")


RepoOpt = Annotated[str, typer.Option("--repo", "-r", help="owner/name of the memory "
                                      "repository (private, yours).")]
TokenOpt = Annotated[str | None, typer.Option("--token", help="GitHub token (default "
                                              "$GITHUB_TOKEN or $GH_TOKEN).")]
ApiOpt = Annotated[str, typer.Option("--api", help="REST API base URL (GitHub Enterprise: "
                                     "https://HOST/api/v3).")]
AgentOpt = Annotated[str, typer.Option("--agent", help="This agent's name in [FROM:…] and "
                                       "from: labels.")]


def _github(repo: str, token: str | None, api: str) -> GitHub:
    from amcp.brain.ghrest import GitHub

    return GitHub(repo, github_token(token), base_url=api)


def _print_github(rep: object) -> None:
    from amcp.brain.github import GitHubReport

    assert isinstance(rep, GitHubReport)
    out.print(f"{len(rep.created)} issues created, {len(rep.deduplicated)} already there, "
              f"{len(rep.remembered)} memories pulled, {len(rep.superseded)} superseded, "
              f"{len(rep.outcomes)} outcomes applied"
              + (f" ({rep.retries} retries after rate limits or errors)" if rep.retries else ""))
    for line in rep.problems:
        out.print(f"  [yellow]skipped[/yellow]: {line}")


@github_app.command("push")
@friendly
def github_push_cmd(
    repo: RepoOpt, token: TokenOpt = None, api: ApiOpt = "https://api.github.com",
    agent: AgentOpt = "amcp",
    scope: Annotated[str | None, typer.Option(help="Only this scope.")] = None,
    store: StoreOpt = None,
) -> None:
    """Post memories GitHub does not have yet as AMP issues (deduplicated live)."""
    from amcp.brain.github import push

    gh = _github(repo, token, api)
    try:
        with open_memory(store) as mem:
            _print_github(push(mem, gh, agent=agent, scope=scope))
    finally:
        gh.close()


@github_app.command("pull")
@friendly
def github_pull_cmd(
    repo: RepoOpt, token: TokenOpt = None, api: ApiOpt = "https://api.github.com",
    store: StoreOpt = None,
) -> None:
    """Bring other agents' issues, Supersedes: lines and Outcome comments into the store."""
    from amcp.brain.github import pull

    gh = _github(repo, token, api)
    try:
        with open_memory(store) as mem:
            _print_github(pull(mem, gh))
    finally:
        gh.close()


@github_app.command("outcome")
@friendly
def github_outcome_cmd(
    knowledge_id: str,
    result: Annotated[str, typer.Argument(help="success | failure | neutral")],
    repo: RepoOpt, text: Annotated[str, typer.Option(help="The reply's text.")] = "",
    token: TokenOpt = None, api: ApiOpt = "https://api.github.com", agent: AgentOpt = "amcp",
    store: StoreOpt = None,
) -> None:
    """Comment an Outcome on a memory's issue and apply it (+0.30 / −0.20)."""
    from amcp.brain.github import post_outcome

    gh = _github(repo, token, api)
    try:
        with open_memory(store) as mem:
            cid = post_outcome(mem, gh, knowledge_id, result, text or f"Outcome: {result}",
                               agent=agent)
    finally:
        gh.close()
    out.print(f"commented outcome {result} (comment {cid})")


__all__ = ["brain_app", "github_token"]
