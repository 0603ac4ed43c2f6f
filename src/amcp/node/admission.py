"""``Admission``: what connections that have not completed the handshake may hold.

A stranger costs nothing to be: one TCP connect. Before this module the node let 1,024 of
them take every connection slot until their 30 s handshake timer ran out, and each could
park a 10 MiB partial frame (40 of them took RSS from 97 to ~500 MB). Three bounds now:

* **Slots.** At most ``Limits.max_unauthenticated`` connections wait for a handshake;
  the rest of ``max_connections`` is room only authenticated sessions can use. When a new
  connection finds the waiting room (or the whole node) full, the connection that has
  waited *longest* is evicted, not the newcomer: a flood then has to open connections
  faster than an honest client completes its handshake (milliseconds on a LAN) to keep
  anyone out, instead of just holding its sockets open.
* **Per connection.** The channel accepts frames of at most
  ``Limits.handshake_max_payload`` bytes until the handshake completes (a hello with a
  certificate chain is a few KiB); a larger PAYLOAD_LENGTH is a violation decided from the
  header, before anything is buffered.
* **Aggregate.** Bytes held for incomplete frames by all waiting connections together are
  capped at ``Limits.unauthenticated_buffer_bytes``; the connection whose read pushes the
  total over is aborted.

Nothing is keyed on a peer's address (PROFILE §2): the table holds live connections only,
and a connection leaves it when it authenticates or goes away.
"""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger("amcp.node")


class Waiting(Protocol):
    """A connection as admission sees it: something it can cut off."""

    def abort(self, reason: str) -> None: ...


class Admission:
    """The waiting room: connections in arrival order, with the bytes each holds."""

    def __init__(self, max_waiting: int, max_buffered: int) -> None:
        if max_waiting < 1 or max_buffered < 1:
            raise ValueError("admission limits must be positive")
        self.max_waiting = max_waiting
        self.max_buffered = max_buffered
        # dicts keep insertion order: the first key is the connection waiting longest.
        self._waiting: dict[Waiting, int] = {}
        self.buffered = 0
        #: Counters for stats and logs: evicted to make room, cut off for memory.
        self.evicted = 0
        self.over_memory = 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def __contains__(self, conn: object) -> bool:
        return conn in self._waiting

    def admit(self, conn: Waiting, *, node_full: bool) -> None:
        """Seat ``conn``; evict the longest-waiting stranger if the room (or, with
        ``node_full``, the node) has no free slot."""
        if (node_full or len(self._waiting) >= self.max_waiting) and self._waiting:
            oldest = next(iter(self._waiting))
            self._leave(oldest)
            self.evicted += 1
            log.info("evicted the longest-waiting unauthenticated connection to admit a new one")
            oldest.abort("evicted: too many connections waiting for a handshake")
        self._waiting[conn] = 0

    def holds(self, conn: Waiting, nbytes: int) -> bool:
        """Record that ``conn`` now buffers ``nbytes``; False (and ``conn`` removed) when
        that takes the room over its memory cap — the caller aborts it."""
        before = self._waiting.get(conn)
        if before is None:
            return True
        self.buffered += nbytes - before
        self._waiting[conn] = nbytes
        if self.buffered <= self.max_buffered:
            return True
        self._leave(conn)
        self.over_memory += 1
        log.warning("unauthenticated connections hold over %d bytes; cutting one off",
                    self.max_buffered)
        return False

    def authenticated(self, conn: Waiting) -> None:
        """``conn`` completed its handshake: it now uses the authenticated room."""
        self._leave(conn)

    def gone(self, conn: Waiting) -> None:
        self._leave(conn)

    def _leave(self, conn: Waiting) -> None:
        self.buffered -= self._waiting.pop(conn, 0)
