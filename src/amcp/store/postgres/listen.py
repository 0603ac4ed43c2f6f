"""Commits of other processes, seen at once: LISTEN/NOTIFY and the commit generation.

Every write transaction of a PostgreSQL store NOTIFYs the store's channel before it commits
(PostgreSQL delivers the notification at COMMIT, never for a rolled-back one). Each open
store listens on its own connection, on a small daemon thread, and bumps its generation for
every notification: the one counter every cache keys on (``PostgresStore.generation``), so a
cache filled before a peer's commit is dropped once the notification arrives (on a local
server well under a millisecond after the commit; a notification can only be late, never
lost while the connection lives, and a lost connection bumps the generation too, because
commits may have been missed while it was down). ``wait`` lets a change-feed reader sleep
until something was committed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

_RETRY_S = 1.0  # after the listening connection is lost, reconnect this often
_POLL_S = 0.5  # how often the thread looks at its stop flag


CLOSING = "closing"  # a NOTIFY payload that is no commit (Listener.stop)


def channel_of(store_id: str) -> str:
    return f"amcp_{store_id}"


class Generation:
    """A counter that every commit, this process's or a peer's, moves forward."""

    def __init__(self) -> None:
        self._value = 0
        self._changed = threading.Condition()

    @property
    def value(self) -> int:
        return self._value

    def bump(self) -> None:
        with self._changed:
            self._value += 1
            self._changed.notify_all()

    def wait(self, after: int, timeout_s: float) -> int:
        """Block until the generation is past ``after`` (or the timeout); the value then."""
        with self._changed:
            self._changed.wait_for(lambda: self._value > after, timeout=timeout_s)
            return self._value


class Listener:
    """The thread that LISTENs on one store's channel and bumps its generation."""

    def __init__(self, dsn: str, channel: str, generation: Generation) -> None:
        self._dsn = dsn
        self._channel = channel
        self._generation = generation
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="amcp-pg-listen", daemon=True)

    def start(self, timeout_s: float = 10.0) -> None:
        """Start listening; returns once LISTEN is in place (or the timeout passed), so no
        commit after the open goes unseen."""
        self._thread.start()
        self._ready.wait(timeout_s)

    def stop(self, wake: Callable[[str], None] | None = None) -> None:
        """Stop the thread. ``wake(payload)`` sends a NOTIFY with ``payload`` on the channel
        (through the store's pool), so the thread stops now rather than at its next poll:
        a CLI command's close would otherwise wait up to ``_POLL_S``. Listeners ignore
        ``CLOSING`` payloads: a peer's close is not a commit."""
        self._stop.set()
        if wake is not None and self._thread.is_alive():
            try:
                wake(CLOSING)
            except Exception:  # the server may be gone: the poll ends the thread anyway
                log.debug("could not wake the store listener", exc_info=True)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    self._ready.set()
                    self._generation.bump()  # commits may have happened while not listening
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=_POLL_S, stop_after=64):
                            if note.payload != CLOSING:
                                self._generation.bump()
                            if self._stop.is_set():
                                break
            except psycopg.Error as exc:
                log.debug("store listener lost its connection: %s", exc)
                self._ready.set()  # an open must not wait on a server that went away
                self._stop.wait(_RETRY_S)
