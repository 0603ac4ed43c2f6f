"""The ``amcp`` console script: ``amcp hook <event>`` is answered before Typer loads.

Claude Code runs a hook as a new process per event, and importing Typer and rich costs
more than a hook may spend in total. So the script's entry looks at its arguments first:
``amcp hook <event>`` goes straight to the lean hook entry (``amcp.agent.hooks``); every
other command (and ``amcp hook --help``) goes to the Typer tree, which builds only the
command invoked (``amcp.cli.lazy``).
"""

from __future__ import annotations

import sys

# The events the lean path answers; anything else (options, help) is Typer's.
HOOK_EVENTS = frozenset({"session-start", "prompt", "post-tool", "stop"})


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "hook" and args[1] in HOOK_EVENTS:
        from amcp.agent.hooks.__main__ import main as hook_main

        sys.exit(hook_main(args[1:]))
    from amcp.cli.lazy import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
