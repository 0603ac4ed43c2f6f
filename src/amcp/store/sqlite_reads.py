"""The SQLiteStore's record reads: by id, by filter, states without bodies, counts and
stats. Every row served passes the ``Verifier`` (its seal) and every filter is re-checked
on the verified row (``admit``): the SQL only narrows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from amcp.amf.record import AMFRecord
from amcp.amf.types import KnowledgeType
from amcp.store import samecontent
from amcp.store import sqlite_rows as col
from amcp.store.admit import admits, needs_body, summary_filter
from amcp.store.base import RecordFilter, StateRow, StoredRecord, StoreStats, SummaryRow
from amcp.store.schema import SCHEMA_VERSION
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_conn import SQLiteConn
from amcp.store.sqlite_rows import GET_BY_ID, ROW_COLS
from amcp.store.sqlite_verified import Verifier

_HOT_ROWS = 4096  # rows of records read by id lately (``_row_by_id``)
T = TypeVar("T")
IN_CHUNK = 500  # ids per "IN (...)" lookup: below SQLite's default 999 bound parameters


class RecordReads:
    """The core port's reads."""

    def __init__(
        self, conn: SQLiteConn, verifier: Verifier, content_key: Callable[[AMFRecord], str]
    ) -> None:
        self._conn = conn
        self._db = conn.db
        self._lock = conn.lock
        self._verifier = verifier
        self._content_key = content_key
        self._hot_rows: dict[str, Any] = {}  # rows read by id, valid at ``_hot_at``
        self._hot_at = 0

    def get(self, knowledge_id: str) -> StoredRecord | None:
        row = self._row_by_id(knowledge_id)
        return self._verifier.decode(row) if row else None

    def _row_by_id(self, knowledge_id: str) -> Any:
        """The record's row, from ``_hot_rows`` while nothing was committed since it was
        read (``SQLiteConn.fresh``). A read by id is the node's hottest request. Buffered
        access counts are not in the row; ``Verifier.decode`` adds them."""
        with self._lock:
            db = self._db
            epoch = self._conn.fresh()
            if epoch is None:
                return db.execute(GET_BY_ID, (knowledge_id,)).fetchone()
            hot = self._hot_rows
            if epoch != self._hot_at:
                hot.clear()
                self._hot_at = epoch
            row = hot.get(knowledge_id)
            if row is None:
                row = db.execute(GET_BY_ID, (knowledge_id,)).fetchone()
                if row is not None:
                    if len(hot) >= _HOT_ROWS:
                        hot.clear()
                    hot[knowledge_id] = row
            return row

    def get_many(self, knowledge_ids: Sequence[str]) -> list[StoredRecord]:
        """The records found among ``knowledge_ids``, in the order asked (one statement per
        500 ids instead of one per id: a recall reads its k winners here); quarantined ones
        are left out."""
        if len(knowledge_ids) == 1:  # a read by id (the node's hottest request)
            row = self._row_by_id(knowledge_ids[0])
            found = self._verifier.decode(row) if row else None
            return [found] if found is not None else []
        rows: dict[str, Sequence[Any]] = {}
        wanted = list(dict.fromkeys(knowledge_ids))
        for start in range(0, len(wanted), IN_CHUNK):
            chunk = wanted[start : start + IN_CHUNK]
            with self._lock:
                got = self._db.execute(
                    f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
            rows.update((row[col.KID], row) for row in got)
        decoded = (self._verifier.decode(rows[kid]) for kid in knowledge_ids if kid in rows)
        return [d for d in decoded if d is not None]

    def query(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[StoredRecord]:
        """Records passing ``flt`` in row order. The SQL filter narrows; each row is then
        verified and re-checked against ``flt`` (``admit``), so an index row added behind
        the node's back cannot admit a record."""
        def read(row: Sequence[Any]) -> StoredRecord | None:
            found = self._verifier.decode(row)
            ok = found is not None and admits(flt, row[col.FACTS], found.record)
            return found if ok else None

        return self._page(flt, limit, after, read)

    def summaries(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[SummaryRow]:
        """``query``'s pages as verified summaries (``Verifier.summarise``); row
        conditions only (``summary_filter``)."""
        summary_filter(flt)

        def read(row: Sequence[Any]) -> SummaryRow | None:
            # The row conditions first: a row they leave out is not worth a body's hashing.
            return self._verifier.summarise(row) if admits(flt, row[col.FACTS]) else None

        return self._page(flt, limit, after, read)

    def _page(
        self, flt: RecordFilter, limit: int, after: str | None,
        read: Callable[[Sequence[Any]], T | None],
    ) -> list[T]:
        """Up to ``limit`` rows after the row of ``after`` that pass ``flt``'s SQL and that
        ``read`` turns into something (None: left out)."""
        where, params = where_clause(flt)
        sql = (
            f"SELECT {ROW_COLS} FROM records r WHERE {where} AND r.rowid > ? "
            "ORDER BY r.rowid LIMIT ?"
        )
        with self._lock:
            start = 0
            if after is not None:
                found_row = self._db.execute(
                    "SELECT rowid FROM records WHERE knowledge_id=?", (after,)
                ).fetchone()
                start = int(found_row[0]) if found_row else 0
            out: list[T] = []
            # Rows left out (quarantined, or an index row's false admission) must not end a
            # page early: a caller paging with ``after`` would stop, an export would be cut.
            while len(out) < limit:
                want = limit - len(out)
                rows = self._db.execute(sql, [*params, start, want]).fetchall()
                for row in rows:
                    got = read(row)
                    if got is not None:
                        out.append(got)
                if len(rows) < want:
                    break  # no more rows pass the SQL filter
                start = int(rows[-1][col.ROWID])
        return out

    def find_same_content(self, record: AMFRecord) -> StoredRecord | None:
        """A live (active) record saying exactly what ``record`` says, if any."""
        return self.find_same_content_many([record])[0]

    def find_same_content_many(
        self, records: Sequence[AMFRecord]
    ) -> list[StoredRecord | None]:
        """``find_same_content`` for each record, one query per ``samecontent.CHUNK``."""
        def rows(keys: list[str]) -> list[Any]:
            with self._lock:
                sql = samecontent.select_sql(len(keys), sqlite=True)
                return self._db.execute(sql, keys).fetchall()

        return samecontent.find_many(records, self._content_key, rows, self._verifier.decode)

    def due_for_expiry(self, now: float, limit: int = 1000) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                # INDEXED BY: the planner otherwise walks every active record via the
                # lifecycle index, while the partial expiry index holds only TTL'd ones.
                f"SELECT {ROW_COLS} FROM records r INDEXED BY records_expires"
                " WHERE expires_at IS NOT NULL AND expires_at <= ? AND lifecycle='active' LIMIT ?",
                (now, limit),
            ).fetchall()
            return [row[col.KID] for row in rows if self._verifier.verified(row)]

    def states(
        self, flt: RecordFilter, *, limit: int = 100, ranked: bool = False
    ) -> list[StateRow]:
        """State rows passing ``flt``, each verified (its seal) and re-checked against the
        whole filter (``admit``): the SQL only narrows. When ``flt`` names ids (a recall's
        rerank), the SQL narrows by them alone and the re-check answers the rest."""
        narrow = (
            RecordFilter(ids=flt.ids, lifecycles=flt.lifecycles, include_expired=True)
            if flt.ids is not None else flt
        )
        where, params = where_clause(narrow)
        order = "r.weight DESC, r.created_at DESC, r.knowledge_id" if ranked else "r.rowid"
        sql = f"SELECT {ROW_COLS} FROM records r WHERE {where} ORDER BY {order} LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, [*params, limit]).fetchall()
        body = needs_body(flt)
        out: list[StateRow] = []
        for row in rows:
            if not self._verifier.verified(row):
                continue
            record = None
            if body:
                found = self._verifier.decode(row)
                record = found.record if found is not None else None
            if admits(flt, row[col.FACTS], record):
                out.append(StateRow(
                    row[col.KID], KnowledgeType(row[col.TYPE]), self._verifier.row_state(row),
                    row[col.CREATED_AT],
                ))
        return out

    def subjects(self, flt: RecordFilter, *, limit: int | None = None) -> list[str]:
        """The distinct ``core.subject`` values of the records passing ``flt``, sorted (all
        of them unless ``limit``): an index read, no bodies (AMQL lists clusters, which are
        subject namespaces)."""
        where, params = where_clause(flt)
        sql = (
            f"SELECT DISTINCT r.subject FROM records r WHERE {where} AND r.subject IS NOT NULL "
            "ORDER BY r.subject LIMIT ?"
        )
        with self._lock:
            rows = self._db.execute(sql, [*params, -1 if limit is None else limit]).fetchall()
        return [str(row[0]) for row in rows]

    def count(self, flt: RecordFilter) -> int:
        where, params = where_clause(flt)
        with self._lock:
            row = self._db.execute(
                f"SELECT COUNT(*) FROM records r WHERE {where}", params
            ).fetchone()
        return int(row[0])

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        # A range on the UNIQUE index, not LIKE (which the index serves only under
        # case_sensitive_like): ids are "K-" + lowercase hex, so prefix + "~" bounds it.
        with self._lock:
            rows = self._db.execute(
                "SELECT knowledge_id FROM records WHERE knowledge_id >= ? AND knowledge_id < ?"
                " ORDER BY knowledge_id LIMIT ?",
                (prefix, prefix + "~", limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def stats(self) -> StoreStats:
        with self._lock:
            q = self._db.execute
            by_life = dict(q("SELECT lifecycle, COUNT(*) FROM records GROUP BY 1").fetchall())
            by_type = dict(
                q(
                    "SELECT type, COUNT(*) FROM records WHERE lifecycle!='purged' GROUP BY 1"
                ).fetchall()
            )
            scopes = dict(q("SELECT scope, COUNT(*) FROM record_scopes GROUP BY 1").fetchall())
            vectors = q("SELECT COUNT(*) FROM vectors").fetchone()[0]
            changes = q("SELECT COUNT(*) FROM changes").fetchone()[0]
            pages = q("PRAGMA page_count").fetchone()[0] * q("PRAGMA page_size").fetchone()[0]
        dim = self._conn.get_meta("embedding_dim")
        return StoreStats(
            records=sum(by_life.values()),
            by_lifecycle=by_life,
            by_type=by_type,
            vectors=vectors,
            changes=changes,
            bytes=pages,
            embedding_model=self._conn.get_meta("embedding_model"),
            embedding_dim=int(dim) if dim else None,
            schema_version=SCHEMA_VERSION,
            scopes=scopes,
        )
