"""The PostgreSQL store's record reads. Every row served passes the verifying read path
(``verified.RowVerifier``: its seal, its body's id, checksum and envelope) and, where a
filter applies, the re-check of the whole filter against the sealed columns (``admit``):
the SQL only narrows, so an index row added behind the node's back admits nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from amcp.amf.record import AMFRecord
from amcp.amf.types import KnowledgeType
from amcp.store import samecontent
from amcp.store import sqlite_rows as col
from amcp.store.admit import admits, needs_body, summary_filter
from amcp.store.base import (
    RecordFilter,
    RecordState,
    StateRow,
    StoredRecord,
    StoreStats,
    SummaryRow,
)
from amcp.store.postgres.database import Database, get_meta
from amcp.store.postgres.migrate import SCHEMA_VERSION
from amcp.store.postgres.rows import GET_BY_ID, GET_MANY
from amcp.store.postgres.verified import RowVerifier
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_rows import ROW_COLS

T = TypeVar("T")


def _where(flt: RecordFilter) -> tuple[str, list[Any]]:
    return where_clause(flt, dialect="postgres")


class RecordReads:
    """Every read of records and their states of one store."""

    def __init__(
        self, db: Database, rows: RowVerifier, content_key: Callable[[AMFRecord], str]
    ) -> None:
        self._db = db
        self._rows = rows
        self._content_key = content_key

    def get(self, knowledge_id: str) -> StoredRecord | None:
        with self._db.read() as conn:
            row = conn.execute(GET_BY_ID, (knowledge_id,)).fetchone()
        return self._rows.decode(row) if row else None

    def get_many(self, knowledge_ids: Sequence[str]) -> list[StoredRecord]:
        """The records found among ``knowledge_ids``, in the order asked (duplicates kept);
        unknown and quarantined ones are left out."""
        if not knowledge_ids:
            return []
        with self._db.read() as conn:
            got = conn.execute(GET_MANY, (list(dict.fromkeys(knowledge_ids)),)).fetchall()
        rows = {row[col.KID]: row for row in got}
        decoded = (self._rows.decode(rows[kid]) for kid in knowledge_ids if kid in rows)
        return [d for d in decoded if d is not None]

    def query(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[StoredRecord]:
        """Records passing ``flt`` in row order, each verified and re-checked (``admit``);
        rows left out do not end a page early."""
        def read(row: Sequence[Any]) -> StoredRecord | None:
            got = self._rows.decode(row)
            return got if got is not None and admits(flt, row[col.FACTS], got.record) else None

        return self._page(flt, limit, after, read)

    def summaries(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[SummaryRow]:
        """``query``'s pages as verified summaries; row conditions only."""
        summary_filter(flt)

        def read(row: Sequence[Any]) -> SummaryRow | None:
            return self._rows.summarise(row) if admits(flt, row[col.FACTS]) else None

        return self._page(flt, limit, after, read)

    def _page(
        self, flt: RecordFilter, limit: int, after: str | None,
        read: Callable[[Sequence[Any]], T | None],
    ) -> list[T]:
        where, params = _where(flt)
        sql = (f"SELECT {ROW_COLS} FROM records r WHERE {where} AND r.rowid > %s "
               "ORDER BY r.rowid LIMIT %s")
        out: list[T] = []
        with self._db.read() as conn:
            start = 0
            if after is not None:
                found = conn.execute(
                    "SELECT rowid FROM records WHERE knowledge_id=%s", (after,)
                ).fetchone()
                start = int(found[0]) if found else 0
            while len(out) < limit:
                want = limit - len(out)
                rows = conn.execute(sql, [*params, start, want]).fetchall()
                for row in rows:
                    got = read(row)
                    if got is not None:
                        out.append(got)
                if len(rows) < want:
                    break
                start = int(rows[-1][col.ROWID])
        return out

    def states(
        self, flt: RecordFilter, *, limit: int = 100, ranked: bool = False
    ) -> list[StateRow]:
        """State rows passing ``flt`` without decoding bodies (unless a condition needs
        one); ``ranked``: by weight, newest created_at, knowledge_id — else by rowid."""
        narrow = (
            RecordFilter(ids=flt.ids, lifecycles=flt.lifecycles, include_expired=True)
            if flt.ids is not None else flt
        )
        where, params = _where(narrow)
        order = ("r.weight DESC, r.created_at DESC NULLS LAST, r.knowledge_id" if ranked
                 else "r.rowid")
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {ROW_COLS} FROM records r WHERE {where} ORDER BY {order} LIMIT %s",
                [*params, None if limit < 0 else limit],  # LIMIT NULL: all, as SQLite's -1
            ).fetchall()
        body = needs_body(flt)
        out: list[StateRow] = []
        for row in rows:
            if not self._rows.verified(row):
                continue
            record = None
            if body:
                found = self._rows.decode(row)
                record = found.record if found is not None else None
            if admits(flt, row[col.FACTS], record):
                out.append(StateRow(row[col.KID], KnowledgeType(row[col.TYPE]),
                                    self._rows.row_state(row), row[col.CREATED_AT]))
        return out

    def subjects(self, flt: RecordFilter, *, limit: int | None = None) -> list[str]:
        where, params = _where(flt)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT r.subject FROM records r WHERE {where} AND r.subject IS NOT "
                "NULL ORDER BY r.subject LIMIT %s",
                [*params, limit],
            ).fetchall()
        return [str(r[0]) for r in rows]

    def count(self, flt: RecordFilter) -> int:
        where, params = _where(flt)
        with self._db.read() as conn:
            row = conn.execute(f"SELECT COUNT(*) FROM records r WHERE {where}", params).fetchone()
        return int(row[0]) if row else 0

    def find_same_content(self, record: AMFRecord) -> StoredRecord | None:
        """A live (active) record saying exactly what ``record`` says, if any."""
        return self.find_same_content_many([record])[0]

    def find_same_content_many(
        self, records: Sequence[AMFRecord]
    ) -> list[StoredRecord | None]:
        """``find_same_content`` for each record, one query per ``samecontent.CHUNK``."""
        def rows(keys: list[str]) -> list[Any]:
            with self._db.read() as conn:
                sql = samecontent.select_sql(len(keys), sqlite=False)
                return conn.execute(sql, keys).fetchall()

        return samecontent.find_many(records, self._content_key, rows, self._rows.decode)

    def due_for_expiry(self, now: float, limit: int = 1000) -> list[str]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {ROW_COLS} FROM records r WHERE expires_at IS NOT NULL AND "
                "expires_at <= %s AND lifecycle='active' LIMIT %s",
                (now, limit),
            ).fetchall()
        return [row[col.KID] for row in rows if self._rows.verified(row)]

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT knowledge_id FROM records WHERE knowledge_id >= %s AND "
                "knowledge_id < %s ORDER BY knowledge_id LIMIT %s",
                (prefix, prefix + "~", limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def raw_bodies(
        self, knowledge_ids: Sequence[str], flt: RecordFilter | None = None
    ) -> list[tuple[str, RecordState, bytes | None, str | None]]:
        """``(id, state, stored AMF bytes, row checksum)``, not decoded, of rows whose seal
        verifies and whose sealed columns pass ``flt``'s row conditions; sensitive bodies
        and tombstones come back as None."""
        if not knowledge_ids:
            return []
        with self._db.read() as conn:
            rows = conn.execute(GET_MANY, (list(dict.fromkeys(knowledge_ids)),)).fetchall()
        row_flt = (replace(flt, tags=None, events=None, caused_by=None, sessions=None)
                   if flt is not None else None)
        out = []
        for row in rows:
            if not self._rows.verified(row):
                continue
            if row_flt is not None and not admits(row_flt, row[col.FACTS]):
                continue
            body = None if row[col.SENSITIVE] else row[col.BODY]
            out.append((row[col.KID], self._rows.row_state(row), body, row[col.CHECKSUM]))
        return out

    def stats(self) -> StoreStats:
        with self._db.read() as conn:
            def q(sql: str) -> list[Any]:
                return conn.execute(sql).fetchall()

            by_life = {str(k): int(n) for k, n in
                       q("SELECT lifecycle, COUNT(*) FROM records GROUP BY 1")}
            by_type = {str(k): int(n) for k, n in q(
                "SELECT type, COUNT(*) FROM records WHERE lifecycle != 'purged' GROUP BY 1")}
            scopes = {str(k): int(n) for k, n in
                      q("SELECT scope, COUNT(*) FROM record_scopes GROUP BY 1")}
            vectors = int(q("SELECT COUNT(*) FROM vectors")[0][0])
            changes = int(q("SELECT COUNT(*) FROM changes")[0][0])
            size = int(q("SELECT pg_database_size(current_database())")[0][0])
            model = get_meta(conn, "embedding_model")
            dim = get_meta(conn, "embedding_dim")
        return StoreStats(
            records=sum(by_life.values()), by_lifecycle=by_life, by_type=by_type,
            vectors=vectors, changes=changes, bytes=size, embedding_model=model,
            embedding_dim=int(dim) if dim else None, schema_version=SCHEMA_VERSION,
            scopes=scopes,
        )
