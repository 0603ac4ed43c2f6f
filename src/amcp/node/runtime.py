"""Which event loop runs the node: uvloop when it is installed (a Linux dependency), else
asyncio's own. Composition roots (``amcp serve``, benches) call :func:`run`; the node and
client code work on either loop.

uvloop roughly halves the loop's own cost per message (callbacks, timers, socket I/O in C),
which matters when a round trip is a few hundred microseconds of CPU on each side.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory(prefer_uvloop: bool = True) -> Callable[[], asyncio.AbstractEventLoop]:
    """``uvloop.new_event_loop`` when wanted and importable, else ``asyncio.new_event_loop``."""
    if prefer_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
            return factory
    return asyncio.new_event_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``"uvloop"`` or ``"asyncio"`` — for logs and bench results."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, T], *, prefer_uvloop: bool = True) -> T:
    """``asyncio.run(main)`` on the fastest loop available."""
    with asyncio.Runner(loop_factory=loop_factory(prefer_uvloop)) as runner:
        return runner.run(main)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM, and by SIGINT unless this process ignores it, on the
    running loop; a long-running command awaits it and then shuts down in order.

    SIGTERM is how service managers (systemd, Docker, ``kill``) stop a process; without a
    handler it ends the process on the spot, so nothing in a ``finally`` runs — for ``amcp
    serve`` that left its runtime file naming a dead HTTP port, and lost the buffered
    access counts. A shell that starts a background job without job control sets SIGINT
    to ignored, so Ctrl-C in that terminal does not reach the job; that choice is kept.
    Outside the main thread, or on a loop without signal support, the event is only set
    by the caller."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        if sig == signal.SIGINT and signal.getsignal(sig) is signal.SIG_IGN:
            continue
        # Not the main thread, or a platform without loop signal handlers: caller's job.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    return stop
