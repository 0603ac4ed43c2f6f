"""The lean hook entry (the composition root): ``run()``, as the installed command calls it
(``python -P -c "from amcp.agent.hooks.__main__ import run; run()" <event>``, see
``hookio.hook_argv``), or ``python -m amcp.agent.hooks <event>``.

It imports neither Typer nor rich nor any model runtime (nor ``typing``), reads its
configuration from the environment here and nowhere else, and always exits 0: a hook never
breaks the agent.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from amcp.agent.hooks.claude_code import run_hook
from amcp.agent.hooks.fastpath import NODE_PORT
from amcp.agent.hooks.hookio import HookConfig

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def config_from_env(env: Mapping[str, str]) -> HookConfig:
    """``AMCP_HOME`` (store dir), ``AMCP_NODE`` (``host:port``, or ``off``),
    ``AMCP_HOOK_CAPTURE`` (``0``: do not capture prompts; ``inline``: capture inside the
    prompt hook instead of a detached process), ``AMCP_HOOK_WRITE`` (``inline``: write a
    commit's record before answering instead of in a detached process)."""
    home = (os.path.expanduser(env["AMCP_HOME"]) if env.get("AMCP_HOME")
            else os.path.join(os.path.expanduser("~"), ".amcp"))
    node: tuple[str, int] | None = ("127.0.0.1", NODE_PORT)
    raw = env.get("AMCP_NODE", "").strip()
    if raw.lower() in {"off", "none", "0", "no"}:
        node = None
    elif raw:
        host, _, port = raw.rpartition(":")
        try:
            node = (host or "127.0.0.1", int(port))
        except ValueError:
            node = ("127.0.0.1", NODE_PORT)
    return HookConfig(
        home=home,
        store=os.path.join(home, "memory.db"),
        node=node,
        capture_prompts=env.get("AMCP_HOOK_CAPTURE", "1") != "0",
        capture_mode="inline" if env.get("AMCP_HOOK_CAPTURE") == "inline" else "background",
        write_mode="inline" if env.get("AMCP_HOOK_WRITE") == "inline" else "background",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    event = args[0] if args else ""
    try:
        data = sys.stdin.buffer.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        data = ""
    cfg = config_from_env(os.environ)
    if event.startswith("gemini-"):  # other runtimes: their payloads, our handlers
        from amcp.agent.hooks.gemini import EVENTS as GEMINI
        from amcp.agent.hooks.gemini import run_gemini_hook

        out = run_gemini_hook(event, data, cfg) if event in GEMINI else run_hook(event, "", cfg)
    elif event.startswith("codex-"):
        from amcp.agent.hooks.codex import EVENTS as CODEX
        from amcp.agent.hooks.codex import run_codex_hook

        out = run_codex_hook(event, data, cfg) if event in CODEX else run_hook(event, "", cfg)
    else:
        out = run_hook(event, data, cfg)
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


def run() -> None:
    """``main()`` on ``sys.argv`` and exit with its status (the installed command)."""
    sys.exit(main())


if __name__ == "__main__":
    run()
