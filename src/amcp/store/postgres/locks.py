"""The store's advisory lock: how writers on one PostgreSQL store are serialised.

Every write transaction (``Database.write``) takes ``pg_advisory_xact_lock`` first, so of
several processes writing one store (``amcp serve`` behind a load balancer, CLI writers) one
at a time appends to the change log. Why a lock and not a sequence or per-scope chains: the
log is one hash chain, each link covering the one before it, and the signed head carries the
row count, set digest and census moved by each transaction (``chain.Head.moved``), so each
append must see the previous one committed. A sequence would hand out numbers but not order
the hashes; per-scope chains would need one signed head per scope. The lock is
transaction-scoped: PostgreSQL releases it at COMMIT or ROLLBACK, also when the connection
dies, so a crashed writer never leaves the store locked. Under READ COMMITTED every statement
after the lock is granted sees every transaction committed before it, which is what makes
"read the last change, append the next" safe.

The key is (a constant, the hash of the current schema): one store per database schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

STORE = 0x616D6370  # "amcp": the first half of every key of ours


# The statement, with the key inlined (no parameters), so it can share a round trip with
# BEGIN (``database._begin``).
TAKE = f"SELECT pg_advisory_xact_lock({STORE}, hashtext(current_schema()))"


def take(conn: psycopg.Connection, space: int) -> None:
    """Wait for the store's lock; held until the transaction ends. Call inside one."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (space,))


@contextmanager
def holding(conn: psycopg.Connection, space: int) -> Iterator[None]:
    """The lock for one transaction opened here (for DDL outside the store's writes)."""
    with conn.transaction():
        take(conn, space)
        yield
