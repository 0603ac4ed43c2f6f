"""The verifying read path, shared with the SQLite adapter.

``sqlite_verified.VerifiedReads`` checks a row's seal and a body's id, checksum and envelope
from the row tuple alone (``sqlite_rows`` positions, which this adapter's rows share), and
quarantines what fails. ``RowVerifier`` gives it what it reads — the sealer, the keyring,
the quarantine, the decoded-record cache and the state builder — as one composed object, so
both adapters serve exactly the same records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from amcp.amf.types import Lifecycle
from amcp.errors import GoneError, NotFoundError, StoreIntegrityError
from amcp.keyring import Keyring
from amcp.store import sqlite_rows as col
from amcp.store.base import RecordState
from amcp.store.postgres.database import Connection
from amcp.store.postgres.rows import GET_BY_ID
from amcp.store.rowseal import Sealer
from amcp.store.sqlite_verified import Verifier


class RowVerifier(Verifier):
    """Seals, bodies and the quarantine of one store: the SQLite adapter's ``Verifier``,
    with this adapter's row lookup for state changes."""

    def __init__(
        self, keyring: Keyring, sealer: Sealer, state: Callable[..., RecordState]
    ) -> None:
        super().__init__(threading.RLock(), sealer, keyring, state)
        self.keyring = keyring

    def set_sealer(self, sealer: Sealer) -> None:
        """The store's sealer, once its id is known (a row seal covers the id)."""
        self.sealer = sealer

    def refused(self, kid: str) -> StoreIntegrityError:
        """The error of a write asked of a record that fails verification."""
        return StoreIntegrityError(
            f"stored record {kid} failed verification and is quarantined: "
            f"{self.quarantined().get(kid, '')}; run `amcp verify`"
        )

    def live(self, conn: Connection, knowledge_id: str, *, allow_purged: bool = False) -> Any:
        """The verified row of ``knowledge_id`` for a state change (in a transaction)."""
        row = conn.execute(GET_BY_ID, (knowledge_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no record {knowledge_id}")
        if not self.verified(row):
            raise self.refused(knowledge_id)
        if row[col.LIFECYCLE] == Lifecycle.PURGED and not allow_purged:
            raise GoneError(f"{knowledge_id} was purged")
        return row

    # The names this adapter's parts call them by.
    remember = Verifier.remember_decoded
    quarantine = Verifier.quarantine_add
