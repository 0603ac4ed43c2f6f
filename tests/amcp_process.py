"""Start the real ``amcp`` CLI in a child process with a chosen SIGINT disposition.

A test suite started as a background job (CI scripts, ``cmd &`` without job control) runs
with SIGINT ignored, and children inherit that; ``amcp serve`` deliberately keeps an
ignored SIGINT ignored. So a test about Ctrl-C sets the disposition itself, here, rather
than inherit whatever the runner had (``preexec_fn`` would do it too, but is unsafe in a
process with threads).
"""

from __future__ import annotations

import sys

_ENTRY = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == 'ignore'"
    " else signal.default_int_handler)\n"
    "sys.argv = ['amcp', *sys.argv[2:]]\n"
    "from amcp.cli.entry import main\n"
    "main()\n"
)


def amcp_argv(*args: str, sigint: str = "default") -> list[str]:
    """argv running ``amcp *args`` with SIGINT as in a terminal (``"default"``: Ctrl-C
    interrupts) or ignored (``"ignore"``: a background job)."""
    if sigint not in ("default", "ignore"):
        raise ValueError(sigint)
    return [sys.executable, "-c", _ENTRY, sigint, *args]
