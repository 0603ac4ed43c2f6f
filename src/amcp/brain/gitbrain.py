"""The git-backed brain: one Markdown file per active memory, synced both ways.

``sync`` in order:

1. **people → store.** Every file changed since the last sync becomes a store operation:
   an edited file a ``supersede`` (the old version stays, superseded), a deleted file an
   ``invalidate`` (with the path as the reason), a new file a ``remember``. A file whose
   front matter cannot be read is reported and left exactly as it is — not applied, not
   overwritten — until someone fixes it. An edit of a version the store has since
   replaced is applied over the current version (the supersede chain; newest wins) and
   reported as a conflict; nothing is dropped.
2. **store → files.** Active, non-sensitive memories are rendered (``mdrecord``); files the
   store no longer has as active are removed — but only files unchanged since amcp wrote
   them (never a silent overwrite of a person's edit).
3. **commit** with real git.
4. **remote** (when the repository has one): fetch, merge; a conflicted file is resolved
   by the store's rules — the remote version is taken into the tree (it becomes an edit,
   applied over ours in step 1 of the repeat), and our side, when it was a person's
   unapplied edit, is kept under ``conflicts/`` — then steps 1–3 again and push.

What amcp last wrote is remembered per file (path → knowledge id and sha-256 of the bytes)
in ``<git dir>/amcp-brain.json``, outside the tracked tree, so it never conflicts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amcp.amf.types import Lifecycle
from amcp.brain.errors import BrainError, FrontMatterError, RemoteError
from amcp.brain.files import sha256, write_atomic
from amcp.brain.gitrepo import Git
from amcp.brain.mdrecord import MEMORIES, MemoryFile, path_for, read, render
from amcp.errors import AmcpError
from amcp.store.base import RecordFilter

if TYPE_CHECKING:
    from amcp.memory import Memory

STATE = "amcp-brain.json"
CONFLICTS = "conflicts"
README = """# amcp brain

One Markdown file per memory under `memories/<region>/`, written by `amcp brain sync`.
Edit a file's text (or its `type`, `scope`, `kind`, `tags`, `confidence`) to correct a
memory: the next sync stores the edit as a new version and keeps the old one, superseded.
Delete a file to forget a memory (it is invalidated, never erased). Add a file (front
matter optional) to teach a new one. Sensitive memories are never written here.
"""


@dataclass(slots=True)
class SyncReport:
    superseded: list[tuple[str, str]] = field(default_factory=list)  # (old, new)
    invalidated: list[str] = field(default_factory=list)
    remembered: list[str] = field(default_factory=list)
    written: int = 0
    removed: int = 0
    problems: list[str] = field(default_factory=list)  # files left as they are, and why
    conflicts: list[str] = field(default_factory=list)  # resolved by the store's rules
    commits: list[str] = field(default_factory=list)
    pushed: bool = False
    pulled: bool = False


@dataclass(slots=True)
class Tracked:
    files: dict[str, dict[str, str]]  # path → {"id": knowledge id, "sha": sha-256}

    @classmethod
    def load(cls, git: Git) -> Tracked:
        try:
            data = json.loads((git.git_dir() / STATE).read_text(encoding="utf-8"))
            files = data.get("files") if isinstance(data, dict) else None
        except (OSError, ValueError):
            files = None
        return cls(files if isinstance(files, dict) else {})

    def save(self, git: Git) -> None:
        write_atomic(git.git_dir() / STATE,
                     json.dumps({"format": 1, "files": self.files}, sort_keys=True,
                                indent=1).encode())


def init(repo: Path, *, remote: str | None = None) -> Git:
    """Make ``repo`` a git brain (``git init`` if needed, a README, a remote if given)."""
    repo.mkdir(parents=True, exist_ok=True)
    git = Git(repo)
    if not git.is_repo():
        git.run("init", "-q", "-b", "main")
    readme = repo / "README.md"
    if not readme.exists():
        readme.write_text(README, encoding="utf-8")
    if remote and git.remote_url("origin") is None:
        git.run("remote", "add", "origin", remote)
    return git


def _memory_files(repo: Path) -> Iterator[str]:
    base = repo / MEMORIES
    if base.exists():
        for path in sorted(base.rglob("*.md")):
            yield path.relative_to(repo).as_posix()


def _active_head(mem: Memory, kid: str) -> str | None:
    """Follow ``superseded_by`` from ``kid`` to the active version (None: there is none)."""
    seen: set[str] = set()
    while kid not in seen:
        seen.add(kid)
        item = mem.store.get(kid)
        if item is None or item.record is None:
            return None
        if item.state.lifecycle is Lifecycle.ACTIVE:
            return kid
        if item.state.lifecycle is not Lifecycle.SUPERSEDED or not item.state.superseded_by:
            return None
        kid = item.state.superseded_by
    return None


def _apply_edit(mem: Memory, path: str, kid: str, doc: MemoryFile, rep: SyncReport) -> None:
    head = _active_head(mem, kid)
    if head is None:
        # The memory was invalidated (or purged) meanwhile: the edit is kept as a new one.
        out = mem.remember(doc.text, **_fields(doc))
        rep.remembered.append(out.knowledge_id)
        rep.conflicts.append(f"{path}: {kid[:14]} is no longer active; the edit was stored "
                             f"as a new memory {out.knowledge_id[:14]}")
        return
    current = mem.get(head).record
    assert current is not None
    changes = doc.changes_from(current)
    if doc.text == current.text.strip() and not changes:
        return  # layout-only edit (whitespace): nothing to store
    new = mem.supersede(head, doc.text, **_fields(doc, changes))
    rep.superseded.append((head, new.knowledge_id))
    if head != kid:
        rep.conflicts.append(f"{path}: edited {kid[:14]}, which was replaced by "
                             f"{head[:14]} meanwhile; the edit was applied over it "
                             f"({new.knowledge_id[:14]})")


def _fields(doc: MemoryFile, only: dict[str, Any] | None = None) -> dict[str, Any]:
    src = doc.fields if only is None else only
    return {k: v for k, v in src.items() if v is not None}


def apply_local(mem: Memory, git: Git, tracked: Tracked, rep: SyncReport) -> None:
    """Step 1: files changed since the last sync → store operations."""
    present = set(_memory_files(git.root))
    scopes = _dir_scopes(mem, tracked)
    for path, info in sorted(tracked.files.items()):
        if path not in present:
            if _active_head(mem, info["id"]) == info["id"]:
                mem.invalidate(info["id"], f"deleted from the git brain ({path})")
                rep.invalidated.append(info["id"])
            del tracked.files[path]
    for path in sorted(present):
        data = (git.root / path).read_bytes()
        known = tracked.files.get(path)
        if known is not None and known["sha"] == sha256(data):
            continue
        try:
            doc = read(data.decode("utf-8"), path, plain=known is None)
            if known is not None:
                _apply_edit(mem, path, known["id"], doc, rep)
            else:
                scope = scopes.get(path.rsplit("/", 1)[0], "*")
                _apply_new(mem, path, doc, rep, scope)
        except (FrontMatterError, UnicodeDecodeError) as exc:
            _problem(rep, f"{exc} (file left as it is; fix it and sync again)", path)
            continue
        except AmcpError as exc:  # a value the store refuses (type, scope…): say which
            _problem(rep, f"{path}: not stored: {exc} (file left as it is)", path)
            continue
        # Applied: the memory's current version is rendered in step 2 under its own id's
        # path (an edit becomes a rename in git), so this copy goes.
        (git.root / path).unlink()
        tracked.files.pop(path, None)


def _problem(rep: SyncReport, text: str, path: str) -> None:
    line = text if text.startswith(path) else f"{path}: {text}"
    if line not in rep.problems:  # the pass after a pull sees the same file again
        rep.problems.append(line)


def _dir_scopes(mem: Memory, tracked: Tracked) -> dict[str, str]:
    """Directory → the scope of a memory amcp wrote there: where a new file without a
    ``scope`` in its front matter belongs."""
    out: dict[str, str] = {}
    for path, info in sorted(tracked.files.items()):
        folder = path.rsplit("/", 1)[0]
        if folder not in out and (item := mem.store.get(info["id"])) is not None \
                and item.record is not None:
            out[folder] = item.record.meta.project_scope[0]
    return out


def _apply_new(mem: Memory, path: str, doc: MemoryFile, rep: SyncReport, scope: str) -> None:
    if doc.knowledge_id and mem.store.get(doc.knowledge_id) is not None:
        _apply_edit(mem, path, doc.knowledge_id, doc, rep)  # a file for a known memory
        return
    out = mem.remember(doc.text, **{"scope": scope, **_fields(doc)})
    rep.remembered.append(out.knowledge_id)


def render_store(mem: Memory, git: Git, tracked: Tracked, rep: SyncReport) -> None:
    """Step 2: active memories → files, without overwriting an unapplied edit."""
    wanted: dict[str, tuple[str, bytes]] = {}
    after: str | None = None
    flt = RecordFilter()  # active, unexpired
    while page := mem.list_records(flt, limit=1000, after=after):
        for item in page:
            after = item.knowledge_id
            if item.record is None or item.state.sensitive:
                continue
            wanted[path_for(item.record)] = (item.knowledge_id,
                                             render(item.record).encode("utf-8"))
    blocked = {p.split(":", 1)[0] for p in rep.problems}  # unapplied edits: never overwrite
    for path, (kid, data) in wanted.items():
        target = git.root / path
        if path in blocked:
            continue
        if not target.exists() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data)
            rep.written += 1
        tracked.files[path] = {"id": kid, "sha": sha256(data)}
    for path in sorted(set(tracked.files) - set(wanted)):
        target = git.root / path
        if target.exists() and sha256(target.read_bytes()) == tracked.files[path]["sha"]:
            target.unlink()
            rep.removed += 1
        del tracked.files[path]


def _commit(git: Git, rep: SyncReport, what: str) -> None:
    msg = (f"amcp brain sync ({what}): {len(rep.superseded)} superseded, "
           f"{len(rep.invalidated)} invalidated, {len(rep.remembered)} new, "
           f"{rep.written} written, {rep.removed} removed")
    sha = git.commit_all([MEMORIES, "README.md", CONFLICTS], msg)
    if sha:
        rep.commits.append(sha)


def one_pass(mem: Memory, git: Git, rep: SyncReport, what: str) -> None:
    tracked = Tracked.load(git)
    apply_local(mem, git, tracked, rep)
    render_store(mem, git, tracked, rep)
    tracked.save(git)
    _commit(git, rep, what)


def sync(mem: Memory, repo: Path, *, remote: str | None = "origin", push: bool = True
         ) -> SyncReport:
    """The whole two-way sync (module docstring). Raises BrainError only for what stops it
    (not a repository, a merge someone left half done); file problems are in the report."""
    git = Git(repo)
    if not git.is_repo():
        raise BrainError(f"{repo} is not a git repository; run `amcp brain git-init {repo}`")
    if git.merging():
        raise BrainError(f"{repo} has a merge in progress; finish it (git commit) or undo it "
                         "(git merge --abort), then sync again — nothing was changed")
    rep = SyncReport()
    one_pass(mem, git, rep, "local")
    if remote and git.remote_url(remote):
        _pull(mem, git, remote, rep)
        if push:
            _push(mem, git, remote, rep)
    return rep


def _pull(mem: Memory, git: Git, remote: str, rep: SyncReport) -> None:
    branch = git.branch()
    fetched = git.run("fetch", "-q", remote, check=False)
    if fetched.returncode != 0:
        raise RemoteError(f"git fetch {remote} failed: {fetched.stderr.strip()}; the local "
                          "sync is committed, nothing was lost")
    if git.run("rev-parse", "--verify", "-q", f"{remote}/{branch}", check=False).returncode:
        return  # the remote has no such branch yet: the push creates it
    merged = git.run("merge", "--no-edit", "-q", f"{remote}/{branch}", check=False)
    rep.pulled = True
    if merged.returncode != 0:
        if not git.merging():
            raise BrainError(f"git merge failed: {merged.stderr.strip()}")
        _resolve(git, rep)
    one_pass(mem, git, rep, "after pull")


def _resolve(git: Git, rep: SyncReport) -> None:
    """Resolve a conflicted merge by the store's rules (module docstring, step 4)."""
    for path in git.conflicted():
        base, ours, theirs = (git.stage_text(n, path) for n in (1, 2, 3))
        target = git.root / path
        if theirs is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(theirs, encoding="utf-8")
            if ours is not None and ours not in (base, theirs):
                kept = git.root / CONFLICTS / path
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(ours, encoding="utf-8")
                rep.conflicts.append(f"{path}: both sides changed it; the remote version "
                                     f"is applied, ours is kept in {CONFLICTS}/{path}")
            else:
                rep.conflicts.append(f"{path}: changed remotely and removed here; the "
                                     "remote version is applied over the current memory")
        elif ours is not None:
            target.write_text(ours, encoding="utf-8")
            rep.conflicts.append(f"{path}: removed remotely and changed here; ours is kept")
        git.run("add", "-A", "--", path)
    if (git.root / CONFLICTS).exists():
        git.run("add", "-A", "--", CONFLICTS)
    git.run("commit", "-q", "--no-edit")


def _push(mem: Memory, git: Git, remote: str, rep: SyncReport) -> None:
    for _attempt in range(3):  # the remote moved between our fetch and push: merge again
        done = git.run("push", "-q", remote, f"HEAD:{git.branch()}", check=False)
        if done.returncode == 0:
            rep.pushed = True
            return
        _pull(mem, git, remote, rep)
    raise RemoteError(f"git push {remote} was refused three times: "
                      f"{done.stderr.strip()}; the local brain is committed, nothing lost")


__all__ = ["SyncReport", "init", "sync"]
