"""Codex CLI hooks: Codex's lifecycle hooks speak Claude Code's wire format.

Codex (``@openai/codex``, feature ``hooks``, stable) reads ``$CODEX_HOME/hooks.json`` —
``{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": …}]}], …}}`` —
runs each command with the event's JSON on stdin and accepts the same answers Claude Code
does (``hookSpecificOutput.additionalContext``, ``decision: block`` + ``reason``,
``systemMessage``; names checked against the JSON schemas in its binary). So the handlers
are the Claude Code ones; what differs is where the agent's last message is when the Stop
input does not carry ``last_assistant_message``: Codex's transcript ("rollout") holds
``{"type": "response_item", "payload": {"type": "message", "role": "assistant",
"content": [{"type": "output_text", "text": …}]}}`` lines.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from amcp.agent.hooks.hookio import read_tail

if TYPE_CHECKING:
    from typing import Any

    from amcp.agent.hooks.hookio import HookConfig

EVENTS: dict[str, str] = {
    "codex-session-start": "session-start",
    "codex-prompt": "prompt",
    "codex-post-tool": "post-tool",
    "codex-stop": "stop",
}
TAIL = 256 * 1024


def rollout_reply(path: str) -> str:
    """The last assistant message in a Codex rollout file ('' when there is none)."""
    tail = read_tail(path, TAIL)
    if tail is None:
        return ""
    for line in reversed(tail.splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        payload = entry.get("payload") if isinstance(entry, dict) else None
        if not isinstance(payload, dict) or payload.get("role") != "assistant":
            continue
        content = payload.get("content")
        if isinstance(content, list):
            texts = [c.get("text") for c in content if isinstance(c, dict)]
            joined = "\n".join(t for t in texts if isinstance(t, str))
            if joined:
                return joined
    return ""


def translate_input(ours: str, raw: dict[str, Any]) -> dict[str, Any]:
    if ours == "stop" and not raw.get("last_assistant_message"):
        path = raw.get("transcript_path")
        reply = rollout_reply(path) if isinstance(path, str) and path else ""
        if reply:
            return {**raw, "last_assistant_message": reply}
    return raw


def run_codex_hook(event: str, stdin_text: str, cfg: HookConfig) -> str:
    from amcp.agent.hooks.claude_code import notice, run_hook

    ours = EVENTS[event]
    try:
        raw = json.loads(stdin_text) if stdin_text.strip() else {}
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        return json.dumps(notice(f"{event} hook skipped: input is not a JSON object")) + "\n"
    return run_hook(ours, json.dumps(translate_input(ours, raw)), cfg)


__all__ = ["EVENTS", "rollout_reply", "run_codex_hook", "translate_input"]
