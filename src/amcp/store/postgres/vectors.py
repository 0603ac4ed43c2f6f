"""The PostgreSQL store's vectors (pgvector) and its row-id reads: what the derived vector
index of ``amcp.retrieval`` is built from and filtered by.

Vectors are stored in a ``vector`` column without a fixed dimension (the embedder decides
it). By default recall does not query them here: it builds its in-process index from
``iter_vectors`` and follows the change feed, as with SQLite. With
``PostgresStore(hnsw=True)`` the store keeps pgvector's HNSW cosine index (an expression
index over ``vec::vector(dim)``, ``ensure_hnsw``) and offers ``nearest_ids`` as the
``vector_search`` capability, which recall then asks instead: at a million vectors the
in-process index is minutes of CPU to build and ~1.5 GB in every process. Kept up to date,
the index costs every write ~8.5 ms inside the store's write lock (docs/store-postgres.md,
"Many writers"), so a bulk load builds it once afterwards (``build_index``). Without the
index ``nearest`` and ``nearest_ids`` are exact scans.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from amcp.store import sqlite_census as census
from amcp.store.base import RecordFilter
from amcp.store.postgres.changes import HeadDelta
from amcp.store.postgres.database import Connection, Database, get_meta, insert_rows, put_meta
from amcp.store.postgres.verified import RowVerifier
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_rows import ROWID

if TYPE_CHECKING:
    import numpy as np

_BATCH = 4096  # vectors per iter_vectors batch
_HNSW_DIM = "vectors.hnsw_dim"  # store_meta: the dimension the HNSW index is built for
# The HNSW walk's candidate list per asked row (pgvector's hnsw.ef_search, default 40, caps
# what one walk returns): twice the rows asked, at least 40.
_EF_PER_ROW = 2
_EF_MIN = 40


def as_vector(vector: np.ndarray) -> Any:
    import numpy as np
    from pgvector import Vector

    return Vector(np.ascontiguousarray(vector, dtype=np.float32))


def ensure_hnsw(conn: Connection, dim: int, *, m: int = 16, ef_construction: int = 64) -> None:
    """The HNSW cosine index for ``dim`` (inside the write transaction: DDL is
    transactional in PostgreSQL, and the store's lock is held). ``m`` and
    ``ef_construction`` are pgvector's (its defaults here): smaller ones build faster and
    find a little less."""
    if get_meta(conn, _HNSW_DIM) == str(dim):
        return
    conn.execute("DROP INDEX IF EXISTS vectors_hnsw")
    conn.execute(
        f"CREATE INDEX vectors_hnsw ON vectors USING hnsw ((vec::vector({int(dim)})) "
        f"vector_cosine_ops) WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
    )
    put_meta(conn, _HNSW_DIM, str(dim))


class VectorSource:
    """Vectors and row ids of one store."""

    def __init__(
        self, db: Database, delta: HeadDelta, rows: RowVerifier,
        write: Callable[[], AbstractContextManager[Connection]], *, hnsw: bool = False,
    ) -> None:
        self._db = db
        self._hnsw = hnsw
        self._delta = delta
        self._rows = rows
        self._write = write  # the store's atomic(), yielding the transaction's connection
        self._hnsw_dim = 0

    def set_vector(self, knowledge_id: str, vector: np.ndarray) -> None:
        with self._write() as conn:
            row = self._rows.live(conn, knowledge_id)
            self.set(conn, int(row[ROWID]), vector)

    def clear_vectors(self) -> None:
        with self._write() as conn:
            self.clear(conn)

    def build_index(
        self, dim: int, *, memory_mb: int | None = None, m: int = 16, ef_construction: int = 64
    ) -> None:
        """Build the HNSW index for ``dim`` now if it is not there (after a bulk load:
        one build is far cheaper than an insert into the graph per write). Holds the
        store's write lock for the build: writers wait. ``memory_mb``: the build's
        ``maintenance_work_mem`` (a graph larger than it is built much more slowly; a
        million 384-dimensional vectors want about 2 GB); ``m``, ``ef_construction``: as
        ``ensure_hnsw``."""
        with self._write() as conn:
            if memory_mb is not None:
                conn.execute("SELECT set_config('maintenance_work_mem', %s, true)",
                             (f"{int(memory_mb)}MB",))
            self._db.leave_pipeline()  # DDL: see ``Database.__init__``
            ensure_hnsw(conn, dim, m=m, ef_construction=ef_construction)
        self._hnsw_dim = dim

    # -- writes ---------------------------------------------------------------------------

    def _index_for(self, conn: Connection, dim: int) -> None:
        """``ensure_hnsw`` once per dimension seen by this process (a query per put
        otherwise); a dimension changed by a peer is seen at the next new dimension here."""
        if self._hnsw and self._hnsw_dim != dim:
            self._db.leave_pipeline()  # DDL: see ``Database.__init__``
            ensure_hnsw(conn, dim)
            self._hnsw_dim = dim

    def add(self, conn: Connection, rows: Sequence[tuple[int, np.ndarray]]) -> None:
        """Vectors of new records (inside the write transaction)."""
        if not rows:
            return
        self._index_for(conn, len(rows[0][1]))
        insert_rows(conn, "INSERT INTO vectors(rowid, vec) VALUES ",
                    [(rowid, as_vector(v)) for rowid, v in rows])
        self._delta.count(census.VECTORS, len(rows))

    def set(self, conn: Connection, rowid: int, vector: np.ndarray) -> None:
        self._index_for(conn, len(vector))
        had = conn.execute(
            "INSERT INTO vectors(rowid, vec) VALUES (%s, %s) ON CONFLICT (rowid) "
            "DO UPDATE SET vec = excluded.vec RETURNING (xmax <> 0)",
            (rowid, as_vector(vector)),
        ).fetchone()
        if had is not None and not had[0]:
            self._delta.count(census.VECTORS)

    def clear(self, conn: Connection) -> None:
        self._hnsw_dim = 0
        gone = conn.execute("DELETE FROM vectors").rowcount
        self._delta.count(census.VECTORS, -gone)
        self._delta.dirty = True

    def drop(self, conn: Connection, rowid: int) -> None:
        gone = conn.execute("DELETE FROM vectors WHERE rowid = %s", (rowid,)).rowcount
        self._delta.count(census.VECTORS, -gone)

    # -- reads ----------------------------------------------------------------------------

    def iter_vectors(self, after_rowid: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        import numpy as np

        last = after_rowid
        while True:
            # Binary results: pgvector's text form would be parsed float by float.
            with self._db.read() as conn, conn.cursor(binary=True) as cur:
                rows = cur.execute(
                    "SELECT rowid, vec FROM vectors WHERE rowid > %s ORDER BY rowid LIMIT %s",
                    (last, _BATCH),
                ).fetchall()
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            yield ids, np.vstack([r[1].to_numpy() for r in rows])
            last = int(ids[-1])

    def nearest(
        self, vector: np.ndarray, k: int, flt: RecordFilter | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest rows by cosine distance, as (rowid, similarity): an HNSW walk
        (approximate) with the index, an exact scan without."""
        clause, params = where_clause(flt or RecordFilter(), dialect="postgres")
        dim = len(vector)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT v.rowid, 1 - (v.vec::vector({dim}) <=> %s::vector({dim})) "
                f"FROM vectors v JOIN records r ON r.rowid = v.rowid WHERE {clause} "
                f"ORDER BY v.vec::vector({dim}) <=> %s::vector({dim}) LIMIT %s",
                [as_vector(vector), *params, as_vector(vector), k],
            ).fetchall()
        return [(int(r), float(s)) for r, s in rows]

    def nearest_ids(
        self, vector: np.ndarray, k: int, flt: RecordFilter
    ) -> list[tuple[str, float]]:
        """``Capabilities.vector_search``: the ``k`` nearest records passing ``flt`` as
        (knowledge id, cosine similarity), best first. The HNSW walk widens until ``k``
        rows pass the filter (pgvector 0.8's iterative scan, relaxed order: re-sorted
        here), so a scoped recall is not cut short by the filter."""
        if k < 1:
            return []
        clause, params = where_clause(flt, dialect="postgres")
        dim = len(vector)
        q = as_vector(vector)
        sql = (f"SELECT r.knowledge_id, 1 - (v.vec::vector({dim}) <=> %s::vector({dim})) "
               f"FROM vectors v JOIN records r ON r.rowid = v.rowid WHERE {clause} "
               f"ORDER BY v.vec::vector({dim}) <=> %s::vector({dim}) LIMIT %s")
        ef = str(max(_EF_MIN, _EF_PER_ROW * k))
        with self._db.read() as conn, conn.transaction(), conn.pipeline():
            # Transaction-local settings, sent with the query in one round trip.
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                         "set_config('hnsw.iterative_scan', 'relaxed_order', true)", (ef,))
            rows = conn.execute(sql, [q, *params, q, k]).fetchall()
        hits = [(str(kid), float(sim)) for kid, sim in rows]
        hits.sort(key=lambda h: -h[1])  # stable: ties keep the walk's order
        return hits

    def rowids(self, flt: RecordFilter) -> np.ndarray:
        import numpy as np

        clause, params = where_clause(flt, dialect="postgres")
        with self._db.read() as conn:
            rows = conn.execute(f"SELECT r.rowid FROM records r WHERE {clause}", params).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def rowid_of(self, knowledge_id: str) -> int | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT rowid FROM records WHERE knowledge_id=%s", (knowledge_id,)
            ).fetchone()
        return int(row[0]) if row else None

    def ids_for_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        if not len(rowids):
            return {}
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT rowid, knowledge_id FROM records WHERE rowid = ANY(%s)",
                ([int(r) for r in rowids],),
            ).fetchall()
        return {int(r): str(kid) for r, kid in rows}

    def filter_rowids(self, rowids: Sequence[int], flt: RecordFilter) -> list[int]:
        """Those of ``rowids`` whose records pass ``flt``, in the order given."""
        return list(self.named_rowids(rowids, flt))

    def named_rowids(self, rowids: Sequence[int], flt: RecordFilter) -> dict[int, str]:
        """``filter_rowids`` with each passing row's knowledge id, in the order given."""
        if not len(rowids):
            return {}
        ids = [int(r) for r in rowids]
        clause, params = where_clause(flt, dialect="postgres")
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT r.rowid, r.knowledge_id FROM records r WHERE r.rowid = ANY(%s) "
                f"AND {clause}",
                [ids, *params],
            ).fetchall()
        names = {int(r): str(kid) for r, kid in rows}
        return {r: names[r] for r in ids if r in names}


    def iter_index_texts(self) -> Iterator[tuple[str, str]]:
        """(knowledge_id, lexical text) of every live record: what re-embedding reads."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT r.knowledge_id, f.terms FROM records r JOIN lexical f "
                "ON f.rowid = r.rowid WHERE r.lifecycle != 'purged' ORDER BY r.rowid"
            ).fetchall()
        yield from ((str(k), str(t)) for k, t in rows)
