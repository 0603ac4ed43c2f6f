"""Helpers for hook tests: hook payloads, a seeded store, running the lean entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from amcp.agent.hooks.claude_code import HookConfig, hook_argv, run_hook
from amcp.memory import Memory

ROOT = Path(__file__).resolve().parents[3]


def git_project(base: Path, name: str = "proj") -> Path:
    """A directory that looks like a git work tree (a `.git` dir is all hooks look for)."""
    root = base / name
    (root / ".git").mkdir(parents=True, exist_ok=True)
    return root


def seed(home: Path, embedder: str = "hashing", *, project: str = "proj") -> dict[str, str]:
    """A store under ``home`` with a few project facts and a user preference."""
    ids: dict[str, str] = {}
    with Memory(home / "memory.db", embedder=embedder) as mem:
        ids["ruff"] = mem.remember(
            "Always run ruff check before committing in this repo",
            scope=f"project:{project}", type="KT-PRINCIPLE", kind="preference",
        ).knowledge_id
        ids["db"] = mem.remember(
            "The integration tests need a running PostgreSQL on port 5433",
            scope=f"project:{project}", kind="fact",
        ).knowledge_id
        ids["tabs"] = mem.remember(
            "User prefers tabs over spaces", scope="user:alice", kind="preference"
        ).knowledge_id
        ids["other"] = mem.remember(
            "Unrelated project uses Go modules", scope="project:other", kind="fact"
        ).knowledge_id
    return ids


def config(home: Path, **kw: Any) -> HookConfig:
    kw.setdefault("node", None)
    return HookConfig(home=home, store=home / "memory.db", **kw)


def payload(event: str, cwd: Path, session: str = "s-1", **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": event,
        **fields,
    }


def call(event: str, data: Mapping[str, Any] | str, cfg: HookConfig) -> dict[str, Any] | None:
    """Run a hook in-process; returns the parsed stdout (None when it printed nothing)."""
    raw = data if isinstance(data, str) else json.dumps(data)
    out = run_hook(event, raw, cfg)
    return json.loads(out) if out.strip() else None


def hook_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMCP_")}
    env.update({"AMCP_HOME": str(home), "AMCP_NODE": "off", **extra})
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_entry(
    event: str, stdin: str | Mapping[str, Any], env: Mapping[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """The hook as the installed command runs it (``hook_argv``); ``args`` are interpreter
    options placed before the entry."""
    text = stdin if isinstance(stdin, str) else json.dumps(stdin)
    exe, *entry = hook_argv(sys.executable, event)
    return subprocess.run(
        [exe, *args, *entry],
        input=text, capture_output=True, text=True, env=dict(env), timeout=120, check=False,
    )


def transcript(path: Path, turns: list[tuple[str, str]]) -> Path:
    """A Claude Code transcript: one entry per (role, text)."""
    with path.open("w", encoding="utf-8") as fh:
        for role, text in turns:
            entry = {"type": role, "message": {"role": role,
                                               "content": [{"type": "text", "text": text}]}}
            fh.write(json.dumps(entry) + "\n")
    return path


def context_of(out: Mapping[str, Any] | None) -> str:
    assert out is not None
    return str(out["hookSpecificOutput"]["additionalContext"])


class RunningNode:
    """An amcp node on a free port, served from a background event loop."""

    def __init__(self, memory: Memory) -> None:
        import asyncio
        import threading

        from amcp.node import NodeServer

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = NodeServer(memory)
        asyncio.run_coroutine_threadsafe(self.server.start("127.0.0.1", 0), self.loop).result(30)
        self.port = self.server.port

    def close(self) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> RunningNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


COMMIT_LINE_STDOUT = "[main 9f8e7d6] fix: lexical fallback\n 1 file changed"
