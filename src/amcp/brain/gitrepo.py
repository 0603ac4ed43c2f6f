"""The real ``git`` binary, driven by subprocess for the git brain.

Every call passes ``-c user.name/-c user.email`` (a machine with no global git identity can
still commit) and turns git's failures into ``RemoteError`` / ``BrainError`` with git's own
message, so a refused push or a merge conflict reads as what it is.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from amcp.brain.errors import BrainError, RemoteError

IDENTITY = ("-c", "user.name=amcp brain", "-c", "user.email=brain@amcp.invalid",
            "-c", "commit.gpgsign=false", "-c", "core.quotepath=false")
TIMEOUT_S = 300  # a push or fetch over a slow link; local operations take milliseconds


@dataclass(frozen=True, slots=True)
class Git:
    root: Path

    def run(self, *args: str, check: bool = True, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        try:
            done = subprocess.run(  # noqa: S603 - fixed argv, no shell
                ["git", *IDENTITY, *args],  # noqa: S607 - git from PATH, as a user runs it
                cwd=self.root, capture_output=True, text=True, timeout=TIMEOUT_S,
                env=env, input=stdin, check=False,
            )
        except FileNotFoundError:
            raise BrainError("git is not installed (the git brain needs the git binary)"
                             ) from None
        except subprocess.TimeoutExpired:
            raise RemoteError(f"git {args[0]} took longer than {TIMEOUT_S} s") from None
        if check and done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise BrainError(f"git {' '.join(args[:2])} failed: "
                             f"{why[-1] if why else f'exit {done.returncode}'}")
        return done

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def is_repo(self) -> bool:
        return (self.root / ".git").exists()

    def git_dir(self) -> Path:
        path = Path(self.out("rev-parse", "--git-dir").strip())
        return path if path.is_absolute() else self.root / path

    def branch(self) -> str:
        done = self.run("symbolic-ref", "--short", "HEAD", check=False)
        return done.stdout.strip() or "main"

    def has_commits(self) -> bool:
        return self.run("rev-parse", "--verify", "-q", "HEAD", check=False).returncode == 0

    def remote_url(self, remote: str) -> str | None:
        done = self.run("remote", "get-url", remote, check=False)
        return done.stdout.strip() or None if done.returncode == 0 else None

    def commit_all(self, paths: list[str], message: str) -> str | None:
        """Stage ``paths`` (additions, edits, deletions) and commit; None if nothing changed."""
        present = [p for p in paths if (self.root / p).exists() or self.tracked(p)]
        if present:
            self.run("add", "-A", "--", *present)
        if self.run("diff", "--cached", "--quiet", check=False).returncode == 0:
            return None
        self.run("commit", "-q", "-m", message)
        return self.out("rev-parse", "--short", "HEAD").strip()

    def tracked(self, path: str) -> bool:
        return bool(self.out("ls-files", "--", path).strip())

    def merging(self) -> bool:
        return (self.git_dir() / "MERGE_HEAD").exists()

    def conflicted(self) -> list[str]:
        return [p for p in self.out("diff", "--name-only", "--diff-filter=U").splitlines() if p]

    def stage_text(self, stage: int, path: str) -> str | None:
        """A conflicted file's text at merge stage 1 (base), 2 (ours) or 3 (theirs)."""
        done = self.run("show", f":{stage}:{path}", check=False)
        return done.stdout if done.returncode == 0 else None


__all__ = ["IDENTITY", "Git"]
