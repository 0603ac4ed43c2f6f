"""The SQLiteStore's index-side reads: counts, filters as rowids, lexical search, vectors,
stats. A mixin so the adapter file stays readable; it shares the store's connection and lock.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from amcp.amf.types import KnowledgeType
from amcp.errors import StoreError
from amcp.store import fts_rank, termpeaks, termstats
from amcp.store import sqlite_rows as col
from amcp.store.admit import admits, needs_body
from amcp.store.base import RecordFilter, RecordState, StateRow, StoredRecord, StoreStats
from amcp.store.schema import SCHEMA_VERSION
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_rows import ROW_COLS
from amcp.store.termstats import TermStats

if TYPE_CHECKING:
    import numpy as np



def _marks(n: int) -> str:
    return ",".join("?" * n)


# Distinct terms whose FTS statistics are kept between recalls (see ``_term_stats``).
_VOCAB_KEEP = 4096
_ABSENT = fts_rank.TermCounts(0, 0)
# Row states ``raw_bodies`` keeps for reuse: a pack reads ~120 rows, most of them every time.
_RAW_STATES_KEEP = 8192
_ROWIDS_KEEP = 65536  # knowledge id -> row id pairs kept for raw_bodies (~150 bytes each)


def _head(k: int) -> int:
    """How much of a lexical page a broad filter's check looks at first (``_passing``)."""
    return k + k // 2 + 8


class IndexReads:
    _db: sqlite3.Connection
    _lock: threading.RLock

    def get_meta(self, key: str) -> str | None:  # provided by SQLiteStore
        raise NotImplementedError

    # Provided by AccessStats and SQLiteStore (declared, not defined, so the mixin order
    # cannot hide them).
    _state: Callable[..., RecordState]
    _row_state: Callable[[Sequence[Any]], RecordState]
    _verified: Callable[[Sequence[Any]], bool]
    _decode: Callable[..., StoredRecord | None]
    _pending_access: dict[str, Any]
    # ``raw_bodies``' states by their row's state columns (knowledge id first), bounded.
    _raw_states: dict[tuple[object, ...], RecordState]
    # Row ids of knowledge ids read lately (``named_rowids``, ``raw_bodies``), bounded.
    _rowid_of: dict[str, int]

    # (largest FTS rowid scanned, fewest tokens in a row up to it): FTS rows are only ever
    # added with rowids above every existing one, or deleted, so the scan is incremental.
    _fts_floor: tuple[int, int] = (0, 1 << 30)
    # The last term statistics looked up, and the index state they were taken at.
    _vocab_kept: tuple[object, dict[str, fts_rank.TermCounts]] = (None, {})

    # -- states without decoding a body ------------------------------------------------

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
            if not self._verified(row):
                continue
            record = None
            if body:
                found = self._decode(row)
                record = found.record if found is not None else None
            if admits(flt, row[col.FACTS], record):
                out.append(StateRow(
                    row[col.KID], KnowledgeType(row[col.TYPE]), self._row_state(row),
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

    def _learn_rowids(self, pairs: Iterable[tuple[int, str]]) -> None:
        """Remember the row ids of knowledge ids just read, for ``raw_bodies`` (bounded)."""
        known = self._rowid_of
        if len(known) >= _ROWIDS_KEEP:
            known.clear()
        for rowid, kid in pairs:
            known[kid] = int(rowid)

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
        # By row id where it is known (a rowid lookup walks one B-tree; a knowledge-id one
        # walks the id index and then the table — ~0.5 ms of a pack's ~120 rows). A row is
        # only taken if it still holds that id; any other id is looked up by knowledge id.
        known = self._rowid_of
        want = list(dict.fromkeys(knowledge_ids))
        wanted = set(want)
        with self._lock:
            by_rowid = [known[k] for k in want if k in known]
            rows = self._db.execute(
                f"SELECT {ROW_COLS} FROM records r WHERE r.rowid IN ({_marks(len(by_rowid))})",
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
                    f"({_marks(len(rest))})", rest,
                ).fetchall()
                self._learn_rowids((r[col.ROWID], r[col.KID]) for r in more)
                rows += more
        # A RecordState per row costs ~5 µs to build (frozen dataclass), and the same rows
        # come back pack after pack (the core records); one built from identical columns is
        # identical, so it is reused while no access is buffered for the record (buffered
        # counts are added to the stored ones by ``_state``).
        memo, pending = self._raw_states, self._pending_access
        # Conditions only a body answers are the caller's to check on what it decodes.
        row_flt = (
            replace(flt, tags=None, events=None, caused_by=None, sessions=None)
            if flt is not None else None
        )
        out = []
        for row in rows:
            if not self._verified(row):  # the bytes handed out are the ones the seal covers
                continue
            if row_flt is not None and not admits(row_flt, row[col.FACTS]):
                continue
            kid = row[col.KID]
            cols = (*row[col.FACTS], row[col.ACCESS_COUNT], row[col.LAST_ACCESS])
            state = memo.get(cols)
            if state is None or kid in pending:
                state = self._row_state(row)
                if kid not in pending:
                    if len(memo) >= _RAW_STATES_KEEP:
                        memo.clear()
                    memo[cols] = state
            body = None if row[col.SENSITIVE] else row[col.BODY]
            out.append((kid, state, body, row[col.CHECKSUM]))
        return out

    # -- counts, filters, lexical search ---------------------------------------------

    def count(self, flt: RecordFilter) -> int:
        where, params = where_clause(flt)
        with self._lock:
            row = self._db.execute(
                f"SELECT COUNT(*) FROM records r WHERE {where}", params
            ).fetchone()
        return int(row[0])

    def rowids(self, flt: RecordFilter) -> np.ndarray:
        where, params = where_clause(flt)
        with self._lock:
            rows = self._db.execute(
                f"SELECT r.rowid FROM records r WHERE {where}", params
            ).fetchall()
        import numpy as np  # lazily: the lexical-only read path (hooks) never needs it

        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def search_lexical(
        self, terms: str, flt: RecordFilter, k: int, *, context_weight: float = 1.0
    ) -> list[tuple[str, float]]:
        """The ``k`` best BM25 matches passing ``flt``, best first (ties by rowid).

        The matches are ranked by FTS5 alone and only the top page is checked against the
        filter (``filter_rowids``): joining every match costs twice the ranking itself (a
        row lookup and the WHERE clause per match, and a scope's whole rowid list). If too
        few of the page pass, the joined query answers instead; the result is identical.
        """
        if not terms.strip():
            return []
        where, params = where_clause(flt)
        try:
            with self._lock:
                scopes = self._narrow_scopes(flt)
                # A selective filter (a scope is often an eighth of the store) needs a
                # deeper page, unless the page itself is drawn from the scopes' rows only.
                only_scopes = scopes is not None and not replace(flt, scopes=None).selective
                probe = max(4 * k, 200) if not flt.selective or only_scopes else max(16 * k, 800)
                ranked: list[tuple[int, float]] | None = None
                if scopes is not None:
                    ranked = self._db.execute(
                        fts_rank.scoped_sql(len(scopes)), [context_weight, terms, *scopes, probe]
                    ).fetchall()
                elif not flt.selective:
                    # A broad filter passes nearly every match: the first page is only as
                    # deep as the head ``_passing`` checks first, and the full probe runs
                    # only if too few of it pass. The pruned ranking stops sooner the fewer
                    # rows it must place (at 100k: 200 -> 83 rows took a paired-word query's
                    # 19 ms to 7); a page that is a prefix of the deeper one gives the same hits.
                    head = _head(k)
                    ranked = self._ranked(terms, head, context_weight)
                    hits = self._passing(ranked, flt, k)
                    if len(hits) >= k or len(ranked) < head:
                        names = self.ids_for_rowids([r for r, _s in hits])
                        return [(names[r], s) for r, s in hits]
                    ranked = self._ranked(terms, probe, context_weight)
                else:
                    # A selective filter's deep page (800) is out of the pruning's reach:
                    # most of it comes from rows holding a single term, which it cannot skip.
                    ranked = self._db.execute(
                        fts_rank.PLAIN_SQL, [context_weight, terms, probe]
                    ).fetchall()
                hits = self._passing(ranked, flt, k, broad=only_scopes)
                if len(hits) >= k or len(ranked) < probe:
                    names = self.ids_for_rowids([r for r, _s in hits])
                    return [(names[r], s) for r, s in hits]
            sql = (
                "SELECT r.knowledge_id, bm25(records_fts, 1.0, ?) AS score FROM records_fts "
                "JOIN records r ON r.rowid = records_fts.rowid "
                f"WHERE records_fts MATCH ? AND {where} ORDER BY score, r.rowid LIMIT ?"
            )
            with self._lock:
                rows = self._db.execute(sql, [context_weight, terms, *params, k]).fetchall()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"lexical search failed: {exc}") from exc
        # bm25() is lower-is-better; flip the sign so every scorer is higher-is-better.
        return [(kid, -score) for kid, score in rows]

    def _passing(
        self, ranked: list[tuple[int, float]], flt: RecordFilter, k: int, *, broad: bool = False
    ) -> list[tuple[int, float]]:
        """The first ``k`` of ``ranked`` (rowid, bm25) whose records pass ``flt``, as
        (rowid, higher-is-better score); call locked. A broad filter (active, unexpired)
        passes nearly every match, so the head of the page is checked first and the rest
        only if too few of it pass: the check is a row lookup per rowid, over a third of a
        10k-record recall's lexical time when the whole 200-row page was checked. ``broad``:
        the page was drawn from the filter's scopes already, and the rest of it is broad."""
        head = len(ranked) if flt.selective and not broad else _head(k)
        passed = set(self.filter_rowids([r for r, _s in ranked[:head]], flt))
        hits = [(r, -s) for r, s in ranked[:head] if r in passed][:k]
        if len(hits) < k and head < len(ranked):
            passed.update(self.filter_rowids([r for r, _s in ranked[head:]], flt))
            hits = [(r, -s) for r, s in ranked if r in passed][:k]
        return hits

    def _ranked(self, terms: str, n: int, context_weight: float) -> list[tuple[int, float]]:
        """The best ``n`` (rowid, bm25) of ``terms``, pruned where that pays; call locked."""
        ranked = fts_rank.ranked(
            self._db, terms, n, (1.0, context_weight), self._shortest_fts_row, self._term_stats
        )
        if ranked is None:
            ranked = self._db.execute(fts_rank.PLAIN_SQL, [context_weight, terms, n]).fetchall()
        return ranked

    def _narrow_scopes(self, flt: RecordFilter) -> list[str] | None:
        """The scopes (with '*') to draw a lexical page from, when they hold a small share of
        the store; call locked.

        Ranking every match and filtering the page scores ~11k rows for a common query at
        100k; ranking only the matches in the scope (one (scope, rid) probe per match, see
        ``fts_rank.scoped_sql``) scores an eighth of them: 27-35 -> 16-25 ms CPU for an
        eighth of the store. The probe costs about half a bm25 per match, so for a scope
        that is most of the store it is a loss; the share comes from the per-scope counts
        (active records) over the largest FTS rowid (every row), one small read each.
        """
        if flt.scopes is None:
            return None
        scopes = [*dict.fromkeys([*flt.scopes, termstats.GLOBAL_SCOPE])]
        if len(scopes) > termstats.MAX_SCOPES + 1:
            return None
        rows = self._db.execute("SELECT MAX(rowid) FROM records_fts").fetchone()[0] or 0
        if rows < fts_rank.MIN_ROWS:
            return None  # a small table: ranking every match costs a few milliseconds
        docs = self._db.execute(
            "SELECT COALESCE(SUM(docs), 0) FROM scope_sizes "
            f"WHERE scope IN ({_marks(len(scopes))})",
            scopes,
        ).fetchone()[0]
        return scopes if docs <= rows * fts_rank.MAX_SCOPE_SHARE else None

    def _shortest_fts_row(self, columns: int) -> int:
        """A lower bound on every FTS row's token count (for ``fts_rank``); call locked."""
        upto, least = self._fts_floor
        top = self._db.execute("SELECT MAX(id) FROM records_fts_docsize").fetchone()[0] or 0
        if top > upto:
            least = min(least, fts_rank.shortest_row(self._db, upto, columns))
            if not self._db.in_transaction:  # rows a rollback may take back are not cached
                self._fts_floor = (top, least)
        return least

    def term_doc_freq(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Documents containing each term, and (approximately) how many documents there are.

        The total is the largest FTS rowid: O(1), and only purges (rare) make it overcount.
        """
        if not terms:
            return {}, 0
        with self._lock:
            stats = self._term_stats(terms)
            total = self._db.execute("SELECT MAX(rowid) FROM records_fts").fetchone()[0]
        return {t: c.docs for t, c in stats.items()}, int(total or 0)

    def _term_stats(self, terms: Sequence[str]) -> dict[str, fts_rank.TermCounts]:
        """Documents, instances and per-row ceilings of each known term; call locked.

        FTS5 counts them by walking each term's doclist (a millisecond for a common term at
        100k), and a recall asks twice (``term_doc_freq``, then ``fts_rank``). The words
        that make a term common ("need", "service") are also the ones most queries share,
        so every term looked up is kept (up to ``_VOCAB_KEEP``) while the index is
        unchanged: its row totals and largest rowid say so, and both move with every
        committed insert or delete. In a transaction nothing is kept or reused."""
        stamp = None
        kept: dict[str, fts_rank.TermCounts] = {}
        if not self._db.in_transaction:
            stamp = (
                self._db.execute("SELECT block FROM records_fts_data WHERE id = 1").fetchone(),
                self._db.execute("SELECT MAX(id) FROM records_fts_docsize").fetchone(),
            )
            kept_stamp, kept = self._vocab_kept
            if stamp != kept_stamp:
                kept = {}
        missing = [t for t in dict.fromkeys(terms) if t not in kept]
        found: dict[str, fts_rank.TermCounts] = {}
        if missing:
            peaks = termpeaks.read(self._db, missing)
            found = {
                t: fts_rank.TermCounts(int(d), int(c), *peaks.get(t, (-1, -1)))
                for t, d, c in self._db.execute(
                    f"SELECT term, doc, cnt FROM records_fts_vocab WHERE term IN "
                    f"({_marks(len(missing))})",
                    missing,
                ).fetchall()
            }
        if stamp is None:
            return found
        if len(kept) + len(missing) > _VOCAB_KEEP:
            kept = {}
        for t in missing:  # absent terms kept with no documents: known absent
            kept[t] = found.get(t, _ABSENT)
        self._vocab_kept = (stamp, kept)
        return {t: kept[t] for t in terms if kept[t].docs}

    def scope_term_stats(self, scopes: Sequence[str], terms: Sequence[str]) -> TermStats:
        """Active records of ``scopes`` (plus '*'): how many contain each of ``terms``, how
        many there are and their total length — see ``amcp.store.termstats``."""
        with self._lock:
            return termstats.read(lambda sql, p: self._db.execute(sql, p).fetchall(), scopes, terms)

    def lexical_texts(self, knowledge_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Both FTS columns (own terms, context) of each given record that has them."""
        rows = self._fts_columns(knowledge_ids, "f.terms, f.context")
        return {kid: (terms or "", context or "") for kid, terms, context in rows}

    def own_terms(self, knowledge_ids: Sequence[str]) -> dict[str, str]:
        return dict(self._fts_columns(knowledge_ids, "f.terms"))

    def _fts_columns(self, knowledge_ids: Sequence[str], columns: str) -> list[Any]:
        """``(knowledge_id, *columns)`` rows of the given records' FTS entries; ``columns``
        is one of this module's literals, never caller text."""
        if not knowledge_ids:
            return []
        marks = _marks(len(knowledge_ids))
        with self._lock:
            return self._db.execute(
                f"SELECT r.knowledge_id, {columns} FROM records r JOIN records_fts f "
                f"ON f.rowid = r.rowid WHERE r.knowledge_id IN ({marks})",
                list(knowledge_ids),
            ).fetchall()

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

    # -- the change feed, as the derived vector index follows it -------------------------

    def change_head(self) -> tuple[int, str]:
        """Sequence number and chain hash of the newest change ((0, "") for none)."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq, hash FROM changes ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, "")

    def change_hash(self, seq: int) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT hash FROM changes WHERE seq=?", (seq,)).fetchone()
        return str(row[0]) if row else None

    def changed_vectors(
        self, after_seq: int, upto_seq: int
    ) -> list[tuple[int, bool, bytes | None]]:
        """``(rowid, active, vector)`` of every record changed in ``(after_seq, upto_seq]``,
        as it stands now: what a vector index must upsert (active with a vector) or drop."""
        with self._lock:
            rows = self._db.execute(
                "SELECT r.rowid, r.lifecycle = 'active', v.vec FROM "
                "(SELECT DISTINCT knowledge_id FROM changes WHERE seq > ? AND seq <= ?) c "
                "JOIN records r ON r.knowledge_id = c.knowledge_id "
                "LEFT JOIN vectors v ON v.rowid = r.rowid",
                (after_seq, upto_seq),
            ).fetchall()
        return [(int(r), bool(a), v) for r, a, v in rows]

    @contextmanager
    def quiescent(self) -> Iterator[bool]:
        """Hold off this store's writers; yields False if a transaction is open in this
        thread (its changes are not committed, so nothing may be derived from them)."""
        with self._lock:
            yield not self._db.in_transaction

    def ids_for_rowids(self, rowids: Sequence[int]) -> dict[int, str]:
        if not rowids:
            return {}
        marks = _marks(len(rowids))
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
                        f"SELECT rid FROM record_scopes WHERE scope IN ({_marks(len(scopes))})"
                        f" AND rid IN ({_marks(len(keep))})",
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
                        f"({_marks(len(keep))})",
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
                        f"r.rowid IN ({_marks(len(keep))}) AND {where}",
                        [*keep, *params],
                    ).fetchall()
                }
                self._learn_rowids(names.items())
        return {r: names[r] for r in ids if r in names}

    def rowid_of(self, knowledge_id: str) -> int | None:
        with self._lock:
            row = self._db.execute(
                "SELECT rowid FROM records WHERE knowledge_id=?", (knowledge_id,)
            ).fetchone()
        return int(row[0]) if row else None

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

    def iter_index_texts(self) -> Iterator[tuple[str, str]]:
        """(knowledge_id, lexical text) of every live record, for reindexing."""
        with self._lock:
            rows = self._db.execute(
                "SELECT r.knowledge_id, f.terms FROM records r JOIN records_fts f "
                "ON f.rowid = r.rowid WHERE r.lifecycle != 'purged' ORDER BY r.rowid"
            ).fetchall()
        yield from rows

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
        dim = self.get_meta("embedding_dim")
        return StoreStats(
            records=sum(by_life.values()),
            by_lifecycle=by_life,
            by_type=by_type,
            vectors=vectors,
            changes=changes,
            bytes=pages,
            embedding_model=self.get_meta("embedding_model"),
            embedding_dim=int(dim) if dim else None,
            schema_version=SCHEMA_VERSION,
            scopes=scopes,
        )
