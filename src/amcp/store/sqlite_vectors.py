"""The SQLiteStore's vectors and row keys (the ``VectorSource`` capability): the stored
float32 vectors by rowid, and the rowid lookups the vector index and the lexical search
filter their candidates with."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from amcp.store import sqlite_census as census
from amcp.store import sqlite_rows as col
from amcp.store.base import RecordFilter
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_conn import RowidMemo, SQLiteConn
from amcp.store.sqlite_rows import in_marks
from amcp.store.sqlite_verified import Verifier

if TYPE_CHECKING:
    import numpy as np




def vector_bytes(vector: np.ndarray) -> bytes:
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


class SQLiteVectors:
    """Vectors by row key, and row keys by filter."""

    def __init__(
        self, conn: SQLiteConn, changes: ChangeLog, verifier: Verifier, memo: RowidMemo
    ) -> None:
        self._db = conn.db
        self._lock = conn.lock
        self._changes = changes
        self._verifier = verifier
        self._memo = memo

    def rowid_of(self, knowledge_id: str) -> int | None:
        with self._lock:
            row = self._db.execute(
                "SELECT rowid FROM records WHERE knowledge_id=?", (knowledge_id,)
            ).fetchone()
        return int(row[0]) if row else None

    def rowids(self, flt: RecordFilter) -> np.ndarray:
        where, params = where_clause(flt)
        with self._lock:
            rows = self._db.execute(
                f"SELECT r.rowid FROM records r WHERE {where}", params
            ).fetchall()
        import numpy as np  # lazily: the lexical-only read path (hooks) never needs it

        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def ids_for_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        if not rowids:
            return {}
        marks = in_marks(len(rowids))
        with self._lock:
            rows = self._db.execute(
                f"SELECT rowid, knowledge_id FROM records WHERE rowid IN ({marks})",
                [int(r) for r in rowids],
            ).fetchall()
        return {int(r): kid for r, kid in rows}

    def filter_rowids(self, rowids: Sequence[int], flt: RecordFilter) -> list[int]:
        """Those of ``rowids`` whose records pass ``flt``, in the order given.

        Scope and tag conditions are checked through their tables' (scope, rid) and
        (tag, rid) keys for just these rowids: as ``where_clause``'s ``rowid IN (SELECT
        ...)`` the planner walks every record in the scope (an eighth of the store) instead.
        They are checked first: their keys are small and cached, a record row is a seek
        into the large records table, and a scope keeps an eighth of a page or so (a
        1,600-row page at 100k: 15-24 ms records first, ~5 ms scope first).
        """
        return list(self.named_rowids(rowids, flt))

    def named_rowids(self, rowids: Sequence[int], flt: RecordFilter) -> dict[int, str]:
        """``filter_rowids`` with each passing row's knowledge id (read by the same
        lookup, so naming them costs no second query), in the order given."""
        if not rowids:
            return {}
        ids = [int(r) for r in rowids]
        keep = set(ids)
        names: dict[int, str] = {}
        with self._lock:
            if flt.scopes is not None:
                scopes = [*flt.scopes, "*"]  # '*' is global knowledge, as in where_clause
                keep = {
                    int(r[0])
                    for r in self._db.execute(
                        f"SELECT rid FROM record_scopes WHERE scope IN ({in_marks(len(scopes))})"
                        f" AND rid IN ({in_marks(len(keep))})",
                        [*scopes, *keep],
                    ).fetchall()
                }
            for tag in flt.tags or ():
                if not keep:
                    break
                keep = {
                    int(r[0])
                    for r in self._db.execute(
                        f"SELECT rid FROM record_tags WHERE tag = ? AND rid IN "
                        f"({in_marks(len(keep))})",
                        [tag, *keep],
                    ).fetchall()
                }
            if keep:
                where, params = where_clause(replace(flt, scopes=None, tags=None))
                names = {
                    int(r[0]): r[1]
                    for r in self._db.execute(
                        # NOT INDEXED: look the rowids up; the planner otherwise prefers the
                        # lifecycle index and walks every active record (~20 ms at 100k).
                        f"SELECT r.rowid, r.knowledge_id FROM records r NOT INDEXED WHERE "
                        f"r.rowid IN ({in_marks(len(keep))}) AND {where}",
                        [*keep, *params],
                    ).fetchall()
                }
                self._memo.learn(names.items())
        return {r: names[r] for r in ids if r in names}

    def iter_vectors(self, after_rowid: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        import numpy as np

        batch = 4096
        last = after_rowid
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT rowid, vec FROM vectors WHERE rowid > ? ORDER BY rowid LIMIT ?",
                    (last, batch),
                ).fetchall()
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
            yield ids, mat.reshape(len(rows), -1)
            last = int(ids[-1])

    def iter_index_texts(self) -> Iterator[tuple[str, str]]:
        """(knowledge_id, lexical text) of every live record, for reindexing."""
        with self._lock:
            rows = self._db.execute(
                "SELECT r.knowledge_id, f.terms FROM records r JOIN records_fts f "
                "ON f.rowid = r.rowid WHERE r.lifecycle != 'purged' ORDER BY r.rowid"
            ).fetchall()
        yield from rows

    def set_vector(self, knowledge_id: str, vector: np.ndarray) -> None:
        with self._changes.atomic():
            row = self._verifier.live_row(knowledge_id)
            had = self._db.execute(
                "SELECT 1 FROM vectors WHERE rowid=?", (row[col.ROWID],)
            ).fetchone()
            self._db.execute(
                "INSERT OR REPLACE INTO vectors(rowid, vec) VALUES (?,?)",
                (row[col.ROWID], vector_bytes(vector)),
            )
            if had is None:
                self._changes.count(census.VECTORS)
                self._changes.moved()

    def clear_vectors(self) -> None:
        with self._changes.atomic():
            self._changes.count(census.VECTORS, -self._db.execute("DELETE FROM vectors").rowcount)
            self._changes.moved()  # the census moved: sign it
