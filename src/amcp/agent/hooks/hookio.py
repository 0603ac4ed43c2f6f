"""What a coding-agent hook receives and how it runs: the events, the command line that
starts a hook process, its configuration (``HookConfig``, filled from the environment by the
entry point) and its parsed stdin (``HookInput``).

Kept apart from the handlers (``claude_code``) so the entry point, the installer and the
node's hook routes share one definition. Lean like the rest of the hook path: no
``typing``, ``pathlib`` or dataclasses at import.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, NamedTuple

from amcp.agent.hooks.fastpath import NODE_PORT
from amcp.agent.hooks.ledger import LedgerStore

if TYPE_CHECKING:  # names for annotations only: ``typing`` stays off the hook path
    from collections.abc import Mapping
    from typing import Any

    StrPath = str | os.PathLike[str]

EVENTS = ("session-start", "prompt", "post-tool", "stop")
# How a hook process is started: the command ``amcp hooks install claude-code`` writes and
# the detached workers' argv. ``-c`` rather than ``-m amcp.agent.hooks``: ``runpy`` and the
# ``importlib.util`` it loads cost every hook ~5 ms. ``-P``: the agent's working directory
# is not put first on ``sys.path`` (``-m`` puts it there), so a project's own ``json.py``
# or ``typing.py`` cannot shadow the stdlib inside our process.
ENTRY_CODE = "from amcp.agent.hooks.__main__ import run; run()"


def hook_argv(python: str, event: str) -> list[str]:
    """The argv that runs hook ``event`` (or an internal worker) with ``python``."""
    return [python, "-P", "-c", ENTRY_CODE, event]


MAX_STDIN = 4 * 1024 * 1024  # hook input beyond this is not a hook payload


class HookConfig(NamedTuple):
    """Read from the environment by the entry point (the composition root), not here.

    NamedTuples, not frozen dataclasses, on the hook path: see ``fastpath.MemoryLine``.
    Paths are ``os.path`` strings (a ``Path`` is accepted): ``import pathlib`` and the
    ``urllib.parse`` it loads cost a hook process ~5-10 ms."""

    home: StrPath
    store: StrPath
    node: tuple[str, int] | None = ("127.0.0.1", NODE_PORT)  # None: never try a node
    probe_timeout: float = 0.05
    connect_timeout: float = 0.5
    # The node's HTTP hook routes (found through its runtime file): a local connect is
    # sub-millisecond, so 50 ms means "not there"; the read allows the node's recall
    # under load. Past either, the hook reads the file instead.
    http_connect_timeout: float = 0.05
    http_read_timeout: float = 1.0
    lock_timeout: float = 0.25
    pointer_limit: int = 40
    prompt_k: int = 5
    capture_prompts: bool = True
    # "background": the prompt's capture runs in a detached process, off the agent's
    # critical path (the capture rules alone take ~0.3 s to import); "inline" for tests.
    capture_mode: str = "inline"
    # "background": a commit's work-boundary record is written by a detached process (the
    # write path imports Memory, record classes and cryptography: more than a hook may
    # spend); "inline" writes it before answering (and reports a locked store). The entry
    # point uses "background"; in-process callers and tests get "inline".
    write_mode: str = "inline"
    python: str = sys.executable

    @property
    def ledgers(self) -> LedgerStore:
        return LedgerStore(os.path.join(self.home, "ledger"))


class HookInputError(ValueError):
    """The hook's stdin is not the JSON object Claude Code sends."""


class HookInput(NamedTuple):
    event: str
    session_id: str
    cwd: str
    raw: Mapping[str, Any]

    @classmethod
    def parse(cls, event: str, text: str) -> HookInput:
        if len(text) > MAX_STDIN:
            raise HookInputError("hook input too large")
        try:
            data = json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise HookInputError(f"hook input is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise HookInputError("hook input is not a JSON object")
        sid = data.get("session_id")
        cwd = data.get("cwd")
        return cls(
            event=event,
            session_id=sid if isinstance(sid, str) and sid else "unknown-session",
            cwd=cwd if isinstance(cwd, str) and cwd else os.getcwd(),
            raw=data,
        )

    def text(self, key: str) -> str:
        value = self.raw.get(key)
        return value if isinstance(value, str) else ""


TRANSCRIPT_TAIL = 256 * 1024  # bytes of a transcript read to find the last reply


def read_tail(path: str, limit: int = TRANSCRIPT_TAIL) -> str | None:
    """The last ``limit`` bytes of a transcript file as text (None if it cannot be read):
    a session's transcript grows without bound, its last reply is at the end."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


__all__ = ["ENTRY_CODE", "EVENTS", "MAX_STDIN", "TRANSCRIPT_TAIL", "HookConfig", "HookInput",
           "HookInputError", "hook_argv", "read_tail"]
