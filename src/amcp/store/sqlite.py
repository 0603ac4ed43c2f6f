"""The embedded default store: one SQLite file in WAL mode.

Every write is one transaction (``atomic`` nests, like sqlite-utils). The change log is
hash-chained and its signed head is witnessed in the key directory (see ``chain.py``); the
integrity check on open walks the chain (from where the last open left off), so a store
edited behind our back is refused before anything is read from it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import content_key, public_key_text, verify_integrity
from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.errors import (
    AmcpError,
    ConflictError,
    GoneError,
    IntegrityError,
    NotFoundError,
    StoreError,
)
from amcp.keyring import Keyring
from amcp.store import termpeaks, termstats
from amcp.store.base import (
    ChangeOp,
    IntegrityReport,
    PutItem,
    PutResult,
    RecordFilter,
    StoredRecord,
    stored_record,
)
from amcp.store.chain import link_hash
from amcp.store.schema import migrate
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_access import AccessStats
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_derived import EVENTS_SQL, LINKS_SQL, backfill, event_rows, link_rows
from amcp.store.sqlite_index import STATE_COLS, IndexReads
from amcp.store.walwatch import WalWatch

if TYPE_CHECKING:
    import numpy as np

_DECODED_CACHE = 20_000  # decoded records kept; ~2 KB each
_HOT_ROWS = 4096  # rows of records read by id lately (SQLiteStore._row_by_id)
_IN_CHUNK = 500  # ids per "IN (...)" lookup: below SQLite's default 999 bound parameters


def _connect(path: Path, timeout_s: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout_s)
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


# Built once: sqlite3 looks statements up by their text, and an f-string per read would
# build and hash this text again every time.
_GET_BY_ID = f"SELECT {STATE_COLS} FROM records r WHERE r.knowledge_id=?"

class SQLiteStore(ChangeLog, IndexReads, AccessStats):
    """``Store`` over a single SQLite file. Thread-safe through one re-entrant lock."""

    def __init__(
        self,
        path: str | Path,
        keyring: Keyring,
        *,
        verify_on_open: bool = True,
        lock_timeout_s: float = 5.0,
    ) -> None:
        self.path = Path(path)
        self.keyring = keyring
        self._lock = threading.RLock()
        self._depth = 0
        self._dirty_head = False
        self._decoded: OrderedDict[tuple[str, str], AMFRecord] = OrderedDict()
        self._hot_rows: dict[str, Any] = {}
        self._cached_at: tuple[object, int] = (None, -1)  # see _caches_current
        self._wal_watch: WalWatch | None = None
        self._raw_states = {}  # see IndexReads.raw_bodies
        self._rowid_of = {}
        self._init_access()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = _connect(self.path, lock_timeout_s)
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            # NORMAL in WAL mode survives a killed process (only power loss can lose the
            # last transactions), which is the guarantee the import/ack path promises.
            self._db.execute("PRAGMA synchronous=NORMAL")
            # quick_check is O(file size) (~70 ms at 10k records): part of the full check on
            # open; a reader that opted out (a per-prompt hook) still gets "not a database"
            # from the first statement and checksum checks on every record it decodes.
            ok = (
                self._db.execute("PRAGMA quick_check").fetchone()[0]
                if verify_on_open
                else self._db.execute("PRAGMA schema_version").fetchone() and "ok"
            )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a readable amcp store: {exc}") from exc
        if ok != "ok":
            raise StoreError(f"{self.path} failed SQLite's integrity check: {ok}")
        if mode.lower() != "wal":
            raise StoreError(f"{self.path}: could not switch to WAL mode ({mode})")
        self._migrate()
        self.store_id = self._ensure_store_id()
        # After a write of ours: the -shm file and its header exist by now.
        self._wal_watch = WalWatch.open(self.path)
        if verify_on_open:
            report = self.verify(incremental=True)
            if not report.ok:
                raise IntegrityError(
                    f"{self.path} failed its integrity check: " + "; ".join(report.problems[:3])
                )

    # ------------------------------------------------------------------ lifecycle

    def _migrate(self) -> None:
        with self._lock:
            try:
                version = migrate(self._db)
            except ValueError as exc:
                raise StoreError(f"{self.path} {exc}") from exc
            except sqlite3.Error as exc:
                raise StoreError(str(exc)) from exc
            backfill(self, version)

    def _ensure_store_id(self) -> str:
        existing = self.get_meta("store_id")
        if existing:
            return existing
        store_id = uuid.uuid4().hex
        with self.atomic():
            self.set_meta("store_id", store_id)
            self.set_meta("node_key", public_key_text(self.keyring.signing_key.public_key()))
        return store_id

    def close(self) -> None:
        self._stop_flusher()  # first: it takes the lock to write, and the lock closes the db
        with self._lock:
            try:
                self.flush_access()
            except AmcpError:
                pass  # locked by another writer: a second of advisory access counts is lost
            finally:
                if self._wal_watch is not None:
                    self._wal_watch.close()
                self._db.close()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with self._lock:
            outermost = self._depth == 0
            try:
                if outermost:
                    self._db.execute("BEGIN IMMEDIATE")
                else:
                    self._db.execute(f"SAVEPOINT sp{self._depth}")
            except sqlite3.OperationalError as exc:
                raise StoreError(f"store is locked by another writer ({exc})") from exc
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outermost:
                    self._db.execute("ROLLBACK")
                    self._dirty_head = False
                else:
                    self._db.execute(f"ROLLBACK TO sp{self._depth}")
                    self._db.execute(f"RELEASE sp{self._depth}")
                raise
            self._depth -= 1
            if outermost:
                if self._dirty_head:
                    self._sign_head()
                self._db.execute("COMMIT")
                if self._dirty_head:
                    self._dirty_head = False
                    self._write_witness()
            else:
                self._db.execute(f"RELEASE sp{self._depth}")

    # ------------------------------------------------------------------ writes

    def put(
        self,
        record: AMFRecord,
        *,
        hlc: int,
        vector: np.ndarray | None = None,
        index_text: str | None = None,
        index_context: str | None = None,
        sensitive: bool = False,
        expires_at: float | None = None,
        lifecycle: Lifecycle = Lifecycle.ACTIVE,
    ) -> PutResult:
        item = PutItem(
            record, hlc, vector, index_text, index_context, sensitive, expires_at, lifecycle
        )
        return self.put_many([item])[0]

    def put_many(self, items: Sequence[PutItem]) -> list[PutResult]:
        """Store records in one transaction with one statement per table.

        Row ids are assigned here (max + 1, what SQLite would pick) so the scope, tag,
        event, lexical and vector rows can be inserted in bulk too; the change-log hashes
        are chained in order, exactly as one ``put`` after another would chain them.
        """
        results: list[PutResult] = []
        with self.atomic():
            known = self._known(list(dict.fromkeys(i.record.knowledge_id for i in items)))
            seq, prev = self._last_change()
            top = self._db.execute("SELECT COALESCE(MAX(rowid), 0) FROM records").fetchone()
            rowid = int(top[0])
            records: list[tuple[Any, ...]] = []
            changes: list[tuple[Any, ...]] = []
            scopes: list[tuple[int, str]] = []
            tags: list[tuple[int, str]] = []
            events: list[tuple[int, str]] = []
            links: list[tuple[int, str, str]] = []
            lexical: list[tuple[int, str, str]] = []
            vectors: list[tuple[int, bytes]] = []
            counts = termstats.Deltas()  # per-scope term statistics of the active ones
            now = time.time()
            for item in items:
                record = item.record
                kid = record.knowledge_id
                checksum = record.integrity.checksum
                row = known.get(kid)
                if row is not None:
                    if row[1] == Lifecycle.PURGED:
                        raise GoneError(f"{kid} was purged and cannot be stored again")
                    if row[0] == checksum:
                        results.append(PutResult(kid, created=False, hlc=row[2], rowid=row[3]))
                        continue
                    raise ConflictError(
                        f"{kid} already exists with different content; write a new record "
                        "that supersedes it"
                    )
                body = canonical_packb(record.to_dict())
                if item.sensitive:
                    body = self.keyring.seal(body, kid.encode())
                details = {
                    "checksum": checksum,
                    "type": record.type.value,
                    "scopes": list(record.meta.project_scope),
                    "lifecycle": item.lifecycle.value,
                }
                seq += 1
                rowid += 1
                prev = link_hash(prev, seq, item.hlc, ChangeOp.PUT.value, kid, details)
                changes.append(
                    (seq, item.hlc, ChangeOp.PUT.value, kid, canonical_packb(details), prev)
                )
                records.append(
                    (
                        rowid,
                        kid,
                        record.type.value,
                        record.kind,
                        record.core.subject,
                        record.meta.created_at,
                        record.meta.created_by,
                        item.lifecycle.value,
                        item.hlc,
                        item.expires_at,
                        int(item.sensitive),
                        checksum,
                        content_key(record),
                        body,
                        now,
                        seq,
                    )
                )
                scopes.extend((rowid, s) for s in record.meta.project_scope)
                tags.extend((rowid, t) for t in record.tags)
                events.extend(event_rows(rowid, record))
                links.extend(link_rows(rowid, record))
                if item.index_text or item.index_context:
                    lexical.append((rowid, item.index_text or "", item.index_context or ""))
                    if item.lifecycle is Lifecycle.ACTIVE:
                        counts.add(
                            record.meta.project_scope, item.index_text or "",
                            item.index_context or "", +1,
                        )
                if item.vector is not None:
                    vectors.append((rowid, _vector_bytes(item.vector)))
                # A second copy later in the same batch is a re-write of this one.
                known[kid] = (checksum, item.lifecycle.value, item.hlc, rowid)
                results.append(PutResult(kid, created=True, hlc=item.hlc, rowid=rowid))
            if not records:
                return results
            db = self._db
            db.executemany(
                "INSERT INTO changes(seq, hlc, op, knowledge_id, details, hash) "
                "VALUES (?,?,?,?,?,?)",
                changes,
            )
            self._dirty_head = True
            db.executemany(
                "INSERT INTO records(rowid, knowledge_id, type, kind, subject, created_at,"
                " created_by, lifecycle, hlc, expires_at, sensitive, checksum, content_key, body,"
                " stored_at, chain_seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                records,
            )
            db.executemany("INSERT OR IGNORE INTO record_scopes(rid, scope) VALUES (?,?)", scopes)
            db.executemany("INSERT OR IGNORE INTO record_tags(rid, tag) VALUES (?,?)", tags)
            db.executemany(EVENTS_SQL, events)
            db.executemany(LINKS_SQL, links)
            db.executemany("INSERT INTO records_fts(rowid, terms, context) VALUES (?,?,?)", lexical)
            termpeaks.count((t, c) for _r, t, c in lexical).apply(db)
            db.executemany("INSERT INTO vectors(rowid, vec) VALUES (?,?)", vectors)
            counts.apply(db)
        return results

    def _known(self, knowledge_ids: list[str]) -> dict[str, tuple[Any, ...]]:
        """(checksum, lifecycle, hlc, rowid) of those ids already stored."""
        found: dict[str, tuple[Any, ...]] = {}
        for start in range(0, len(knowledge_ids), _IN_CHUNK):
            chunk = knowledge_ids[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for kid, *rest in self._db.execute(
                "SELECT knowledge_id, checksum, lifecycle, hlc, rowid FROM records"
                f" WHERE knowledge_id IN ({marks})",
                chunk,
            ):
                found[kid] = tuple(rest)
        return found

    def set_state(
        self,
        knowledge_id: str,
        op: ChangeOp,
        *,
        hlc: int,
        lifecycle: Lifecycle,
        reason: str | None = None,
        superseded_by: str | None = None,
    ) -> None:
        with self.atomic():
            rowid = self._require_live(knowledge_id)
            active = lifecycle is Lifecycle.ACTIVE
            if self._is_active(rowid) != active:
                # Leaving (or re-entering) the active set leaves (re-enters) its scopes' counts.
                termstats.count_rows(self._db, [rowid], +1 if active else -1)
            details = {
                "lifecycle": lifecycle.value,
                "reason": reason,
                "superseded_by": superseded_by,
            }
            self._append_change(op, knowledge_id, hlc, details)
            self._db.execute(
                "UPDATE records SET lifecycle=?, hlc=?, reason=COALESCE(?, reason),"
                " superseded_by=COALESCE(?, superseded_by) WHERE knowledge_id=?",
                (lifecycle.value, hlc, reason, superseded_by, knowledge_id),
            )

    def due_for_expiry(self, now: float, limit: int = 1000) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                # INDEXED BY: the planner otherwise walks every active record via the
                # lifecycle index, while the partial expiry index holds only TTL'd ones.
                "SELECT knowledge_id FROM records INDEXED BY records_expires"
                " WHERE expires_at IS NOT NULL AND expires_at <= ? AND lifecycle='active' LIMIT ?",
                (now, limit),
            ).fetchall()
        return [r[0] for r in rows]

    def find_same_content(self, record: AMFRecord) -> StoredRecord | None:
        """A live (active) record saying exactly what ``record`` says, if any."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {STATE_COLS} FROM records r WHERE r.content_key=? "
                "AND r.lifecycle='active' ORDER BY r.rowid LIMIT 1",
                (content_key(record),),
            ).fetchone()
        return self._decode(row) if row else None

    def put_tombstone(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> bool:
        """Record that ``knowledge_id`` was purged elsewhere, so it can never arrive later.

        Returns False when the id is already a tombstone here."""
        with self.atomic():
            row = self._db.execute(
                "SELECT lifecycle FROM records WHERE knowledge_id=?", (knowledge_id,)
            ).fetchone()
            if row is not None:
                if row[0] == Lifecycle.PURGED:
                    return False
                self.purge(knowledge_id, hlc=hlc, reason=reason)
                return True
            seq = self._append_change(ChangeOp.PURGE, knowledge_id, hlc, {"reason": reason})
            self._db.execute(
                "INSERT INTO records(knowledge_id, type, lifecycle, hlc, reason, stored_at,"
                " chain_seq) VALUES (?, 'KT-FACT', 'purged', ?, ?, ?, ?)",
                (knowledge_id, hlc, reason, time.time(), seq),
            )
        return True

    def purge(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> None:
        with self.atomic():
            rowid = self._require_live(knowledge_id, allow_purged=True)
            if self._is_active(rowid):
                termstats.count_rows(self._db, [rowid], -1)  # before its FTS row goes
            self._append_change(ChangeOp.PURGE, knowledge_id, hlc, {"reason": reason})
            self._db.execute(
                "UPDATE records SET lifecycle='purged', hlc=?, reason=?, body=NULL, subject=NULL,"
                " created_by=NULL, kind=NULL WHERE rowid=?",
                (hlc, reason, rowid),
            )
            fts = self._db.execute(
                "SELECT terms, context FROM records_fts WHERE rowid=?", (rowid,)
            ).fetchone()
            self._db.execute("DELETE FROM records_fts WHERE rowid=?", (rowid,))
            if fts is not None:
                termpeaks.forget_gone(self._db, *fts)
            self._db.execute("DELETE FROM vectors WHERE rowid=?", (rowid,))
            self._db.execute("DELETE FROM record_tags WHERE rid=?", (rowid,))
            self._db.execute("DELETE FROM record_events WHERE rid=?", (rowid,))
            self._db.execute("DELETE FROM record_links WHERE rid=?", (rowid,))
            self._db.execute("DELETE FROM access_daily WHERE rid=?", (rowid,))
            self._drop_access(knowledge_id)

    def _require_live(self, knowledge_id: str, *, allow_purged: bool = False) -> int:
        row = self._db.execute(
            "SELECT rowid, lifecycle FROM records WHERE knowledge_id=?", (knowledge_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"no record {knowledge_id}")
        if row[1] == Lifecycle.PURGED and not allow_purged:
            raise GoneError(f"{knowledge_id} was purged")
        return int(row[0])

    def _is_active(self, rowid: int) -> bool:
        row = self._db.execute("SELECT lifecycle FROM records WHERE rowid=?", (rowid,)).fetchone()
        return bool(row[0] == Lifecycle.ACTIVE)

    def set_weight(self, knowledge_id: str, weight: float) -> None:
        with self.atomic():
            self._require_live(knowledge_id)
            self._db.execute(
                "UPDATE records SET weight=? WHERE knowledge_id=?", (weight, knowledge_id)
            )

    # ------------------------------------------------------------------ reads

    def _decode(self, row: Sequence[Any], *, full: bool = False) -> StoredRecord:
        """Row → StoredRecord, refusing a body that does not match its id and checksum.

        Reads skip the Ed25519 signature check (signatures are verified when a record enters
        the store, and the signed change log vouches for the checksum); ``full`` re-checks it.
        Decoded non-sensitive records are cached by (id, checksum): content is immutable, so
        the cache can only go stale by tampering, which open-time and uncached reads catch.
        """
        kid, sensitive, body, checksum = row[1], row[7], row[12], row[13]
        state = self._state(*row[1:12])
        if body is None:
            return stored_record(kid, state, None)
        with self._lock:  # the node reads from a thread pool
            cached = None if full else self._decoded.get((kid, checksum))
            if cached is not None:
                self._decoded.move_to_end((kid, checksum))
        if cached is not None:
            return stored_record(kid, state, cached)
        raw = self.keyring.open(body, kid.encode()) if sensitive else body
        try:
            record = AMFRecord.from_dict(msgpack.unpackb(raw, raw=False))
        except (ValueError, AmcpError, msgpack.UnpackException) as exc:
            raise IntegrityError(f"stored record {kid} is unreadable: {exc}") from exc
        if record.knowledge_id != kid or record.integrity.checksum != checksum:
            raise IntegrityError(f"stored record {kid} does not match its row")
        verify_integrity(record, signature=full)
        if not sensitive and not full:
            with self._lock:
                self._decoded[(kid, checksum)] = record
                if len(self._decoded) > _DECODED_CACHE:
                    self._decoded.popitem(last=False)
        return stored_record(kid, state, record)

    def get(self, knowledge_id: str) -> StoredRecord | None:
        row = self._row_by_id(knowledge_id)
        return self._decode(row) if row else None

    def _row_by_id(self, knowledge_id: str) -> Any:
        """The record's row, from ``_hot_rows`` while ``_caches_current``. A read by id is
        the node's hottest request. Buffered access counts are not in the row; ``_decode``
        adds them."""
        with self._lock:
            db = self._db
            if not self._caches_current():
                return db.execute(_GET_BY_ID, (knowledge_id,)).fetchone()
            hot = self._hot_rows
            row = hot.get(knowledge_id)
            if row is None:
                row = db.execute(_GET_BY_ID, (knowledge_id,)).fetchone()
                if row is not None:
                    if len(hot) >= _HOT_ROWS:
                        hot.clear()
                    hot[knowledge_id] = row
            return row

    def _caches_current(self) -> bool:
        """Whether the read caches (rows read by id, stored access-count windows) may be
        used, after emptying them if anything was committed since they were filled; call
        locked. A commit by another connection or process moves the wal-index header
        (``walwatch``; else ``PRAGMA data_version``), a write of this one moves
        ``total_changes``. Inside our own transaction they are not used at all: what it
        reads may still be rolled back."""
        db = self._db
        if db.in_transaction:
            return False
        watch = self._wal_watch
        seen = (
            watch.stamp() if watch is not None
            else db.execute("PRAGMA data_version").fetchone()[0]
        )
        stamp = (seen, db.total_changes)
        if stamp != self._cached_at:
            self._hot_rows.clear()
            self._stored_counts.clear()
            self._cached_at = stamp
        return True

    def get_many(self, knowledge_ids: Sequence[str]) -> list[StoredRecord]:
        """The records found among ``knowledge_ids``, in the order asked (one statement per
        500 ids instead of one per id: a recall reads its k winners here)."""
        if len(knowledge_ids) == 1:  # a read by id (the node's hottest request)
            row = self._row_by_id(knowledge_ids[0])
            return [self._decode(row)] if row else []
        rows: dict[str, Sequence[Any]] = {}
        wanted = list(dict.fromkeys(knowledge_ids))
        for start in range(0, len(wanted), 500):  # below SQLite's bound-parameter limit
            chunk = wanted[start : start + 500]
            with self._lock:
                found = self._db.execute(
                    f"SELECT {STATE_COLS} FROM records r WHERE r.knowledge_id IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
            rows.update((row[1], row) for row in found)
        return [self._decode(rows[kid]) for kid in knowledge_ids if kid in rows]

    def query(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[StoredRecord]:
        where, params = where_clause(flt)
        if after is not None:
            where += " AND r.rowid > COALESCE((SELECT rowid FROM records WHERE knowledge_id=?), 0)"
            params.append(after)
        sql = f"SELECT {STATE_COLS} FROM records r WHERE {where} ORDER BY r.rowid LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, [*params, limit]).fetchall()
        return [self._decode(row) for row in rows]

    # ------------------------------------------------------------------ metadata

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM store_meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.atomic():
            self._upsert_meta(key, value)

    def _upsert_meta(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO store_meta(key, value) VALUES (?,?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def clear_vectors(self) -> None:
        with self.atomic():
            self._db.execute("DELETE FROM vectors")

    def set_vector(self, knowledge_id: str, vector: np.ndarray) -> None:
        with self.atomic():
            rowid = self._require_live(knowledge_id)
            self._db.execute(
                "INSERT OR REPLACE INTO vectors(rowid, vec) VALUES (?,?)",
                (rowid, _vector_bytes(vector)),
            )

    # ------------------------------------------------------------------ integrity

    def verify(self, *, full: bool = False, incremental: bool = False) -> IntegrityReport:
        """Walk the hash chain; check the signed head and the witness; with ``full``,
        recompute every record's checksum and signature against its content and its log
        entry; ``incremental`` (the check on open): resume after the last such check's mark.
        See ``sqlite_verify``."""
        from amcp.store.sqlite_verify import verify_since_mark, verify_store

        if incremental and not full:
            return verify_since_mark(self)
        return verify_store(self, full=full)


def _vector_bytes(vector: np.ndarray) -> bytes:
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()
