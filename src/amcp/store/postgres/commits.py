"""The PostgreSQL store's commits: every write transaction, signed and announced.

``Commits.writing()`` is the store's ``atomic`` yielding the transaction's connection: the
outermost one reads the log's tip in the round trip of BEGIN and the advisory lock
(``changes.TIP_SQL``), signs the head it moved and NOTIFYs the store's channel in the
round trip of COMMIT (pipelined with whatever the transaction queued before it:
``Database.pipeline_to_commit``), then bumps the generation and writes the witness. A
rolled-back savepoint gives back what it moved of the head (``HeadDelta.mark``).
``generation()`` moves with every commit, this process's or (through ``listen``) a peer's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from amcp.store.postgres.changes import TIP_SQL, ChangeLog
from amcp.store.postgres.database import Connection, Database
from amcp.store.postgres.listen import Generation, channel_of


class Commits:
    """Write transactions, the generation, and the store's channel."""

    def __init__(self, db: Database, log: ChangeLog) -> None:
        self._db = db
        self._log = log
        self.generation = Generation()

    @contextmanager
    def writing(self, *, pipelined: bool = False) -> Iterator[Connection]:
        """A write transaction that nests; yields its connection. ``pipelined``: queue the
        statements whose results are not read (``Database.transaction``)."""
        delta = self._log.delta
        outer = False
        signed: tuple[int, str, list[Path]] | None = None
        try:
            with self._db.transaction(TIP_SQL, pipelined=pipelined) as (conn, outer, tip):
                if outer:
                    delta.begin(tip)
                mark = delta.mark()
                try:
                    yield conn
                except BaseException:
                    if not outer:
                        delta.restore(mark)
                    raise
                if outer:
                    signed = self._before_commit(conn)
        except BaseException:
            if outer:
                delta.reset()
            raise
        if outer:
            delta.reset()
            self.generation.bump()
            if signed is not None:
                self._log.write_witness(*signed)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """The port's ``atomic``: ``writing`` without the connection, pipelined (what runs
        inside is the store's own writes: those that read a row count leave pipeline mode
        themselves)."""
        with self.writing(pipelined=True):
            yield

    def _before_commit(self, conn: Connection) -> tuple[int, str, list[Path]] | None:
        """Sign the head if this transaction moved it, and NOTIFY (delivered at COMMIT),
        both queued for COMMIT's round trip. Returns what to witness after the commit."""
        store_id = self._log.store_id
        if not store_id:
            return None
        self._db.pipeline_to_commit()
        signed = self._log.sign(conn) if self._log.delta.dirty else None
        conn.execute("SELECT pg_notify(%s, '')", (channel_of(store_id),))
        return signed

    def current(self) -> int:
        """The generation; inside this thread's own write transaction it moves on every
        call (what is read there may still be rolled back: nothing read there may be
        cached), as the SQLite adapter's does."""
        if self._db.in_transaction:
            self.generation.bump()
        return self.generation.value

    def wait(self, after: int, timeout_s: float) -> int:
        """Sleep until the generation passes ``after`` (a change-feed waiter)."""
        return self.generation.wait(after, timeout_s)

    def notify(self, payload: str) -> None:
        """A NOTIFY on the store's channel outside any write (``Listener.stop``)."""
        with self._db.read() as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (channel_of(self._log.store_id), payload))
