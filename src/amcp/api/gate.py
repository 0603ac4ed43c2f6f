"""One lock per ``Memory`` shared by every API front end in the process.

``Memory`` is not written for concurrent callers: the HLC, the SQLite connection's
transaction depth and the vector index assume one caller at a time. FastAPI runs sync
endpoints in a thread pool and the MCP SDK runs sync tools on worker threads, so both
front ends serialise their calls through the same lock. It is looked up by ``Memory``
identity, so an HTTP app and an MCP server built separately over one ``Memory`` still share
it. Throughput is bounded by SQLite's single writer anyway.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amcp.memory import Memory

_locks: weakref.WeakKeyDictionary[Memory, threading.RLock] = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def lock_for(memory: Memory) -> threading.RLock:
    with _guard:
        lock = _locks.get(memory)
        if lock is None:
            lock = _locks[memory] = threading.RLock()
        return lock


__all__ = ["lock_for"]
