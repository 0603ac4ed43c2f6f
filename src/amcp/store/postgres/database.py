"""The PostgreSQL adapter's connections: one pool, and this process's one write transaction.

Reads take a pool connection in autocommit mode (each statement sees every transaction
committed before it), except in the thread that holds the write transaction, which must
see its own uncommitted writes. Writes nest like sqlite-utils' ``atomic``: the outermost
opens a transaction on a pool connection and takes the store's advisory lock
(``locks``), inner ones are savepoints. One write transaction per process at a time (an
``RLock``); other processes wait on the advisory lock. psycopg errors are translated into
``StoreError`` here, at the boundary, so no caller sees a driver exception.

Round trips are what a write holds the lock for (docs/store-postgres.md, "Many writers"),
so a write scope may ask to be *pipelined* (``transaction(pipelined=True)``): from there
to COMMIT the connection is in pipeline mode, and a statement whose result nobody reads
(an INSERT, a RELEASE SAVEPOINT, the head's upsert, COMMIT itself) is only queued; it goes
out with the next read or with the COMMIT, in one round trip. An error of a queued
statement aborts the whole transaction and surfaces at that read or at COMMIT — never a
half-written transaction, but no savepoint can catch it either, which is why only scopes
whose statements cannot fail on the server (their checks are made client-side, under the
lock) ask for it. A scope that does not ask (it may read a ``rowcount``, which a queued
statement does not have yet) leaves pipeline mode first. The COMMIT always goes out in the
pipeline with whatever is queued before it (``pipeline_to_commit``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool

from amcp.errors import AmcpError, StoreError
from amcp.store.postgres import locks
from amcp.store.postgres.dsn import redacted

Connection = psycopg.Connection[Any]

# Executions of one statement text on one connection after which psycopg prepares it (its
# default): a statement built for one call (a filter, an id list) is not prepared.
PREPARE_AFTER = 5


def _configure(conn: Connection) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    # A prepared statement still gets a plan for its parameters at every execution (its
    # parse and analysis are what preparing saves). A generic plan is chosen from the
    # table's statistics, and a store written fast has none yet: for the same-content
    # lookup the generic plan ANDed the content key's index with the lifecycle index,
    # walking every active record (3.2 ms an execution at 6k rows with 8 writers,
    # against 0.22 ms planned for the key).
    conn.execute("SET plan_cache_mode = force_custom_plan")


class Database:
    """The pool of one store's database, and its write transaction."""

    def __init__(
        self, dsn: str, *, pool_size: int = 4, timeout_s: float = 10.0, prepare: bool = True
    ) -> None:
        """``prepare``: let psycopg prepare server-side the statements a connection runs
        repeatedly (``PREPARE_AFTER``); off for a transaction-pooling proxy that cannot
        keep them (PgBouncer before 1.21, or without ``max_prepared_statements``)."""
        self.where = redacted(dsn)
        self._timeout_s = timeout_s
        self._lock = threading.RLock()
        self._owner: int | None = None  # the thread whose write transaction is open
        self._conn: Connection | None = None
        self._pipeline: contextlib.ExitStack | None = None  # pipeline mode until COMMIT
        self.depth = 0
        # Prepared statements: a write is ~20 short statements, and parsing and planning
        # each was as much of the server's CPU as executing it (pg_stat_statements: plan
        # 0.9 ms, execution 1.1 ms a remember); prepared, each is parsed once (and planned
        # for its parameters every time: ``_configure``). What keeps psycopg's cache of
        # them right in pipeline mode: it forgets every statement (DEALLOCATE ALL) when it
        # reads a DROP, ALTER or ROLLBACK result, and one prepared in the pipeline between
        # that statement and its result is then named but gone ("prepared statement
        # _pg3_38 does not exist"). So a savepoint rolls back and DDL runs outside
        # pipeline mode (``_savepoint``, ``leave_pipeline``); ``executemany``, which once
        # lost one in a pipeline too, is not used (``insert_rows``).
        self.pool = psycopg_pool.ConnectionPool(
            dsn, min_size=1, max_size=max(pool_size, 1), open=False,
            kwargs={"autocommit": True, "prepare_threshold": PREPARE_AFTER if prepare else None},
            configure=_configure, timeout=timeout_s, name="amcp-store",
        )

    def open(self) -> None:
        """Open the pool (after the schema exists: each connection registers pgvector)."""
        try:
            self.pool.open(wait=True, timeout=self._timeout_s)
        except psycopg_pool.PoolTimeout as exc:
            self.pool.close()
            raise StoreError(f"cannot connect to {self.where}: {exc}") from exc

    def close(self) -> None:
        self.pool.close()

    @property
    def in_transaction(self) -> bool:
        """Whether this thread holds the write transaction."""
        return self._owner == threading.get_ident()

    @property
    def conn(self) -> Connection:
        """The write transaction's connection (call inside ``transaction``, in its thread)."""
        if self._conn is None or not self.in_transaction:
            raise RuntimeError("no write transaction is open in this thread")
        return self._conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection to read with (see the module docstring)."""
        if self._owner == threading.get_ident() and self._conn is not None:
            with _translated(self.where):
                yield self._conn
            return
        with _translated(self.where), self.pool.connection() as conn:
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A connection inside one REPEATABLE READ transaction: every statement sees the same
        committed state while other processes commit. Inside the write transaction: that
        one (it holds the store's lock, so nobody else commits)."""
        if self.in_transaction and self._conn is not None:
            with _translated(self.where):
                yield self._conn
            return
        with _translated(self.where), self.pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    @contextmanager
    def transaction(
        self, begin: str = "", *, pipelined: bool = False
    ) -> Iterator[tuple[Connection, bool, Any]]:
        """``(connection, outermost, first)`` inside a write transaction that nests
        (savepoints). The outermost holds the store's advisory lock and commits on leaving;
        ``first()`` returns the first row of ``begin`` (a query without parameters), run
        after BEGIN and the lock, in their round trip, so it sees every commit before the
        lock (None for an inner scope). ``pipelined``: queue this scope's statements (see
        the module docstring); an outermost one queues BEGIN, the lock and ``begin`` too,
        so they go out with the first read."""
        with self._lock:
            if self._conn is not None:
                self.depth += 1
                try:
                    with _translated(self.where):
                        self._pipelined(self._conn, pipelined)
                        with _savepoint(self._conn, f"sp{self.depth}",
                                        self.leave_pipeline) as inner:
                            yield inner
                finally:
                    self.depth -= 1
                return
            with _translated(self.where, "the write was not committed"), \
                    self.pool.connection() as conn:
                self._conn, self._owner, self.depth = conn, threading.get_ident(), 1
                try:
                    if pipelined:
                        self._pipelined(conn, True)
                        first = _begin_queued(conn, begin)
                    else:
                        first = _given(_begin(conn, begin))
                    try:
                        yield conn, True, first
                        self._pipelined(conn, True)
                        conn.execute("COMMIT")
                        self._settle()  # acknowledged only once COMMIT's answer is in
                    except BaseException:
                        with contextlib.suppress(psycopg.Error):
                            self._settle()
                        with contextlib.suppress(psycopg.Error):
                            conn.execute("ROLLBACK")
                        raise
                finally:
                    self._pipeline = None
                    self._conn, self._owner, self.depth = None, None, 0

    def pipeline_to_commit(self) -> None:
        """Queue the rest of this thread's write transaction, COMMIT included (call inside
        it): what is queued goes out with the next read or the COMMIT."""
        self._pipelined(self.conn, True)

    def leave_pipeline(self) -> None:
        """Send what this thread's write transaction queued and run the rest of it
        unpipelined until ``pipeline_to_commit`` (before DDL: see ``__init__``)."""
        self._settle()

    def _pipelined(self, conn: Connection, on: bool) -> None:
        if on and self._pipeline is None:
            stack = contextlib.ExitStack()
            stack.enter_context(conn.pipeline())
            self._pipeline = stack
        elif not on:
            self._settle()

    def _settle(self) -> None:
        """Leave pipeline mode: send what is queued and take every answer (the first
        error among them is raised here)."""
        stack, self._pipeline = self._pipeline, None
        if stack is not None:
            stack.close()

    @contextmanager
    def quiet(self) -> Iterator[bool]:
        """Hold off this process's writers; False if this thread is inside a write."""
        with self._lock:
            yield not self.in_transaction


def _none() -> None:
    return None


def _given(row: Any) -> Callable[[], Any]:
    def first() -> Any:
        return row

    return first


def _begin(conn: Connection, begin: str) -> Any:
    """BEGIN, the store's lock and ``begin`` in one round trip; ``begin``'s first row."""
    cur = conn.cursor()
    # Several statements in one string cannot be prepared.
    cur.execute(f"BEGIN; {locks.TAKE}; {begin or 'SELECT 1'}", prepare=False)
    first = None
    while True:
        if cur.description is not None:
            first = cur.fetchone()
        if not cur.nextset():
            return first


def _begin_queued(conn: Connection, begin: str) -> Callable[[], Any]:
    """BEGIN, the store's lock and ``begin`` queued in the pipeline; a function returning
    ``begin``'s first row (its fetch sends what is queued, if nothing sent it before)."""
    conn.execute("BEGIN")
    conn.execute(locks.TAKE)
    return conn.execute(begin or "SELECT 1").fetchone


@contextmanager
def _savepoint(
    conn: Connection, name: str, unpipelined: Callable[[], None]
) -> Iterator[tuple[Connection, bool, Any]]:
    """A savepoint; rolled back outside pipeline mode (``unpipelined`` leaves it), where
    psycopg's forgetting its prepared statements at the ROLLBACK cannot race a statement
    it is preparing (``Database.__init__``)."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield conn, False, _none
    except BaseException:
        with contextlib.suppress(psycopg.Error):  # a dead connection: the outer one reports
            unpipelined()
            conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
            conn.execute(f"RELEASE SAVEPOINT {name}")
        raise
    conn.execute(f"RELEASE SAVEPOINT {name}")


@contextmanager
def _translated(where: str, doing: str = "") -> Iterator[None]:
    """psycopg's errors as ``StoreError`` (ours pass through unchanged)."""
    try:
        yield
    except AmcpError:
        raise
    except psycopg_pool.PoolTimeout as exc:
        raise StoreError(f"{where}: no database connection within the timeout ({exc})") from exc
    except psycopg.Error as exc:
        what = f"{doing}: " if doing else ""
        raise StoreError(f"{where}: {what}{_message(exc)}") from exc


def _message(exc: psycopg.Error) -> str:
    primary = exc.diag.message_primary if exc.diag is not None else None
    return primary or str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# Bind parameters one statement may carry: the protocol counts them in 16 bits.
_MAX_PARAMS = 65_535
# Rows of a multi-row insert up to which it may be prepared: a batch this size recurs (a
# remember_many), and the plan of a bulk load's 2,000-row statement (44,000 parameters)
# would sit in each connection's cache, one per batch size seen.
_PREPARED_ROWS = 32


def insert_rows(conn: Connection, head: str, rows: Sequence[Sequence[Any]]) -> None:
    """``head`` (``INSERT INTO t(a, b) VALUES``) with one ``($1, ...)`` tuple per row: one
    statement for a batch instead of ``executemany``'s one per row, each parsed, planned
    and answered by the server and built by psycopg (most of a batched write's cost). The
    rows' values are bound as they are (no arrays to cast); split only where a statement
    would exceed the protocol's parameter count. Sent through a ``RawCursor`` with the
    server's own ``$n`` placeholders: psycopg parses ``%s`` placeholders with a regular
    expression and caches the result only for statements of up to 50 parameters, so a
    batch's statement would be re-parsed on every call."""
    if not rows:
        return
    width = len(rows[0])
    per = _MAX_PARAMS // width
    with psycopg.RawCursor(conn) as cur:
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            cur.execute(_values_sql(head, width, len(chunk)),
                        [value for row in chunk for value in row],
                        prepare=None if len(chunk) <= _PREPARED_ROWS else False)


@functools.lru_cache(maxsize=256)
def _values_sql(head: str, width: int, count: int) -> str:
    """``head`` and ``count`` tuples of ``width`` numbered placeholders (a few heads and
    batch sizes recur: built once each)."""
    return head + ", ".join(
        "(" + ", ".join(f"${row * width + col + 1}" for col in range(width)) + ")"
        for row in range(count)
    )


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM store_meta WHERE key=%s", (key,)).fetchone()
    return str(row[0]) if row else None


def put_meta(conn: Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO store_meta(key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )
