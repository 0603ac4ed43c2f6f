"""Which event loop runs the node: uvloop when it is installed (a Linux dependency), else
asyncio's own. Composition roots (``amcp serve``, benches) call :func:`run`; the node and
client code work on either loop.

uvloop roughly halves the loop's own cost per message (callbacks, timers, socket I/O in C),
which matters when a round trip is a few hundred microseconds of CPU on each side.
"""

from __future__ import annotations

import asyncio
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
