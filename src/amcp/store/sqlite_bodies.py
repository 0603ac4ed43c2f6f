"""The SQLiteStore's raw bodies (the ``RawBodies`` capability): sealed rows read in bulk
and handed out undecoded, for the context packer's cache, which parses them itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from amcp.store import sqlite_rows as col
from amcp.store.admit import admits
from amcp.store.base import RecordFilter, RecordState
from amcp.store.sqlite_access import SQLiteAccess
from amcp.store.sqlite_conn import RowidMemo, SQLiteConn
from amcp.store.sqlite_rows import ROW_COLS, in_marks
from amcp.store.sqlite_verified import Verifier

# Row states ``raw_bodies`` keeps for reuse: a pack reads ~120 rows, most of them every time.
_RAW_STATES_KEEP = 8192


class SQLiteBodies:
    """``raw_bodies`` and the row states it reuses."""

    def __init__(
        self, conn: SQLiteConn, verifier: Verifier, access: SQLiteAccess, memo: RowidMemo
    ) -> None:
        self._db = conn.db
        self._lock = conn.lock
        self._verifier = verifier
        self._access = access
        self._memo = memo
        # States by their row's state columns (knowledge id first), bounded.
        self._raw_states: dict[tuple[object, ...], RecordState] = {}

    def raw_bodies(
        self, knowledge_ids: Sequence[str], flt: RecordFilter | None = None
    ) -> list[tuple[str, RecordState, bytes | None, str | None]]:
        """``(id, state, stored AMF bytes, row checksum)`` in one query, not decoded: for
        readers that parse the bytes themselves (``amcp.cse.cache``). Every row's seal is
        checked (it covers these bytes); quarantined rows are left out, and so are rows whose
        sealed columns do not pass ``flt`` (its row conditions: ``admit``). Encrypted
        (sensitive) bodies and tombstones come back as None; read those through ``get``."""
        if not knowledge_ids:
            return []
        rows = self._rows(list(dict.fromkeys(knowledge_ids)))
        # A RecordState per row costs ~5 µs to build (frozen dataclass), and the same rows
        # come back pack after pack (the core records); one built from identical columns is
        # identical, so it is reused while no access is buffered for the record (buffered
        # counts are added to the stored ones by ``SQLiteAccess.state``).
        memo, pending = self._raw_states, self._access.pending()
        # Conditions only a body answers are the caller's to check on what it decodes.
        row_flt = (
            replace(flt, tags=None, events=None, caused_by=None, sessions=None)
            if flt is not None else None
        )
        out = []
        for row in rows:
            # The bytes handed out are the ones the seal covers.
            if not self._verifier.verified(row):
                continue
            if row_flt is not None and not admits(row_flt, row[col.FACTS]):
                continue
            kid = row[col.KID]
            cols = (*row[col.FACTS], row[col.ACCESS_COUNT], row[col.LAST_ACCESS])
            state = memo.get(cols)
            if state is None or kid in pending:
                state = self._verifier.row_state(row)
                if kid not in pending:
                    if len(memo) >= _RAW_STATES_KEEP:
                        memo.clear()
                    memo[cols] = state
            body = None if row[col.SENSITIVE] else row[col.BODY]
            out.append((kid, state, body, row[col.CHECKSUM]))
        return out

    def _rows(self, want: list[str]) -> list[Any]:
        """The rows of the (distinct) ids ``want``, in no particular order."""
        # By row id where it is known (a rowid lookup walks one B-tree; a knowledge-id one
        # walks the id index and then the table — ~0.5 ms of a pack's ~120 rows). A row is
        # only taken if it still holds that id; any other id is looked up by knowledge id.
        known = self._memo
        wanted = set(want)
        with self._lock:
            by_rowid = [known[k] for k in want if k in known]
            rows = self._db.execute(
                f"SELECT {ROW_COLS} FROM records r WHERE r.rowid IN "
                f"({in_marks(len(by_rowid))})",
                by_rowid,
            ).fetchall() if by_rowid else []
            rows = [
                r for r in rows if r[col.KID] in wanted and known.get(r[col.KID]) == r[col.ROWID]
            ]
            if len(rows) < len(want):
                got = {r[col.KID] for r in rows}
                rest = [k for k in want if k not in got]
                more = self._db.execute(
                    f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id IN "
                    f"({in_marks(len(rest))})", rest,
                ).fetchall()
                self._memo.learn((r[col.ROWID], r[col.KID]) for r in more)
                rows += more
        return rows
