"""Gemini CLI hooks: Gemini's events and payloads, translated to the Claude Code handlers.

Gemini CLI (``@google/gemini-cli``) runs command hooks with JSON on stdin and reads JSON on
stdout, like Claude Code, but names events and fields its own way (read from its bundled
source, ``HookEventName`` and ``fire*Event``):

* ``SessionStart`` → ``session-start``; the answer's ``additionalContext`` is kept;
* ``BeforeAgent`` (``prompt``) → ``prompt``; same answer shape;
* ``AfterTool`` on ``run_shell_command`` → ``post-tool``, with ``tool_name`` → ``Bash``
  and the shell tool's ``llmContent`` (``Output: …`` lines) → ``tool_response.stdout``;
* ``AfterAgent`` → ``stop``, with ``prompt_response`` → ``last_assistant_message``;
  ``decision: block`` + ``reason`` makes Gemini retry with the reason as the prompt.

``hookEventName`` in the answer is rewritten to Gemini's name. Lean like the other hook
modules: ``json`` and ``re`` only.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from amcp.agent.hooks.hookio import HookConfig

# our event for the installed command → (the handler's event, Gemini's event name)
EVENTS: dict[str, tuple[str, str]] = {
    "gemini-session-start": ("session-start", "SessionStart"),
    "gemini-prompt": ("prompt", "BeforeAgent"),
    "gemini-post-tool": ("post-tool", "AfterTool"),
    "gemini-stop": ("stop", "AfterAgent"),
}
SHELL_TOOL = "run_shell_command"


def tool_text(response: Any) -> str:
    """The text of a Gemini tool result (``llmContent``, else ``returnDisplay``), with the
    shell tool's ``Output:`` label removed so git's summary line starts its line again."""
    if isinstance(response, str):
        text = response
    elif isinstance(response, dict):
        value = response.get("llmContent", response.get("returnDisplay", ""))
        text = value if isinstance(value, str) else json.dumps(value)
    else:
        return ""
    return re.sub(r"(?m)^(?:Output|Stdout):\s?", "", text)


def translate_input(ours: str, raw: dict[str, Any]) -> dict[str, Any]:
    data = dict(raw)
    if ours == "post-tool":
        if data.get("tool_name") == SHELL_TOOL:
            data["tool_name"] = "Bash"
        response = data.get("tool_response")
        failed = isinstance(response, dict) and bool(response.get("error"))
        data["tool_response"] = {"stdout": tool_text(response), "is_error": failed}
    elif ours == "stop":
        reply = data.get("prompt_response")
        if isinstance(reply, str):
            data["last_assistant_message"] = reply
    return data


def translate_output(answer: dict[str, Any], gemini_event: str) -> dict[str, Any]:
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict):
        answer = {**answer, "hookSpecificOutput": {**specific,
                                                   "hookEventName": gemini_event}}
    return answer


def run_gemini_hook(event: str, stdin_text: str, cfg: HookConfig) -> str:
    """The whole Gemini hook: never raises; what to print (possibly empty)."""
    from amcp.agent.hooks.claude_code import notice, run_hook

    ours, gemini_event = EVENTS[event]
    try:
        raw = json.loads(stdin_text) if stdin_text.strip() else {}
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        return json.dumps(notice(f"{event} hook skipped: input is not a JSON object")) + "\n"
    out = run_hook(ours, json.dumps(translate_input(ours, raw)), cfg)
    if not out.strip():
        return ""
    return json.dumps(translate_output(json.loads(out), gemini_event),
                      ensure_ascii=False) + "\n"


__all__ = ["EVENTS", "SHELL_TOOL", "run_gemini_hook", "tool_text", "translate_input",
           "translate_output"]
