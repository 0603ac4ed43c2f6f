"""Process-level tuning for long-running servers: keep startup objects out of the cyclic GC.

A serving process (``amcp serve``, ``amcp mcp``, ``amcp api http``) holds ~100k objects
from the moment it is ready: imported modules, pydantic schemas, the MCP SDK, the store's
caches. They live until exit, yet every full (generation 2) collection walks them all:
measured here, ~190-250 ms per collection with the MCP stack loaded on a busy 2-core
machine (~25 ms for numpy alone), a stall that lands on whichever request is running when
the collector decides to run. ``gc.freeze()`` moves them into the permanent generation,
which collections skip; objects made afterwards are collected as before.

Only a process owner should call this (the CLI drivers do): an application embedding the
library decides about its own heap.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect what start-up left behind, then freeze every object still alive."""
    gc.collect()
    gc.freeze()


__all__ = ["freeze_startup_heap"]
