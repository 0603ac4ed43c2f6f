"""The embedded default store: one SQLite file in WAL mode.

Every write is one transaction (``atomic`` nests, like sqlite-utils). The change log is
hash-chained and its signed head is witnessed in the key directory (see ``chain.py``); the
integrity check on open walks the chain (from where the last open left off), so a store
edited behind our back is refused before anything is read from it.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import content_key, public_key_text
from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.errors import (
    AmcpError,
    StoreError,
    StoreIntegrityError,
)
from amcp.keyring import Keyring, Witness
from amcp.store import sqlite_census as census
from amcp.store import sqlite_rows as col
from amcp.store import termstats
from amcp.store.admit import admits, scopes_text
from amcp.store.base import (
    Capabilities,
    ChangeOp,
    IntegrityReport,
    PutItem,
    PutResult,
    RecordFilter,
    StoredRecord,
)
from amcp.store.chain import EMPTY_HEAD, GENESIS, link_hash
from amcp.store.owner import check_ours
from amcp.store.rowseal import Sealer
from amcp.store.schema import migrate
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_access import AccessStats
from amcp.store.sqlite_batch import Batch, rewrite_result
from amcp.store.sqlite_changes import ChangeLog
from amcp.store.sqlite_derived import backfill, event_rows, link_rows
from amcp.store.sqlite_index import IndexReads
from amcp.store.sqlite_rows import GET_BY_ID, ROW_COLS
from amcp.store.sqlite_seals import backfill_head_mac, backfill_seals
from amcp.store.sqlite_state import StateChanges
from amcp.store.sqlite_verified import VerifiedReads
from amcp.store.walwatch import WalWatch

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

_HOT_ROWS = 4096  # rows of records read by id lately (SQLiteStore._row_by_id)
_IN_CHUNK = 500  # ids per "IN (...)" lookup: below SQLite's default 999 bound parameters


_FILE_MODE = 0o600  # store files hold memories: readable by their owner only
_DIR_MODE = 0o700


def _connect(path: Path, timeout_s: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout_s)
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _restrict(path: Path) -> None:
    """0600 for the store file and its WAL and shared-memory files (those SQLite creates with
    the process umask, 0644 by default), where the file system lets us."""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(OSError):
            if name.exists() and name.stat().st_mode & 0o077:
                name.chmod(_FILE_MODE)


def _wal_mode(db: sqlite3.Connection, timeout_s: float) -> str:
    """Switch to WAL. Switching a brand-new file needs an exclusive lock, and SQLite does
    not wait on its busy handler for that: several processes creating one store at once
    got "database is locked" here. So the switch is retried until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


class SQLiteStore(StateChanges, VerifiedReads, ChangeLog, IndexReads, AccessStats):
    """``Store`` over a single SQLite file. Thread-safe through one re-entrant lock.

    Reads serve only rows whose seal verifies (``rowseal``) and records whose body matches
    its id, checksum and envelope; anything else is quarantined — left out of every answer
    and listed by ``quarantined()`` — while the rest of the store is served as usual."""

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
        self._head_delta = (0, 0)
        self._census_delta: dict[str, int] = {}
        self._index_warnings: tuple[str, ...] = ()
        self._quarantine: dict[str, str] = {}
        self._decoded: OrderedDict[tuple[str, bytes], AMFRecord] = OrderedDict()
        self._hot_rows: dict[str, Any] = {}
        self._cached_at: tuple[object, int] = (None, -1)  # see _caches_current
        self._generation = 0  # moves when _caches_current sees a commit: see generation()
        self._capabilities = Capabilities(
            lexical=self, vectors=self, feed=self, access=self, bodies=self
        )
        self._wal_watch: WalWatch | None = None
        self._raw_states = {}  # see IndexReads.raw_bodies
        self._rowid_of = {}
        self._init_access()
        try:
            if not self.path.parent.is_dir():
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
            self._db = _connect(self.path, lock_timeout_s)
            check_ours(self._db, self.path)  # before the first write: WAL, migrations
            mode = _wal_mode(self._db, lock_timeout_s)
            # NORMAL in WAL mode survives a killed process (only power loss can lose the
            # last transactions), which is the guarantee the import/ack path promises.
            self._db.execute("PRAGMA synchronous=NORMAL")
            # quick_check is O(file size) (~70 ms at 10k records): part of the full check on
            # open; a reader that opted out (a per-prompt hook) still gets "not a database"
            # from the first statement and every row's seal checked when it is read.
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
        version = self._migrate()
        self.store_id = self._ensure_store_id()
        self._sealer = Sealer(keyring.derive("row-seal"), self.store_id)
        self._content_secret = keyring.derive("content-key")
        with self._lock:
            backfill_seals(self)
            backfill_head_mac(self)
            backfill(self, version)
        # After a write of ours: the -shm file and its header exist by now.
        self._wal_watch = WalWatch.open(self.path)
        _restrict(self.path)
        if verify_on_open:
            report = self.verify(incremental=True)
            if not report.ok:
                raise StoreIntegrityError(
                    f"{self.path} failed its integrity check: " + "; ".join(report.problems[:3])
                    + " — run `amcp verify` for the whole report"
                )

    # ------------------------------------------------------------------ lifecycle

    def _migrate(self) -> int:
        with self._lock:
            try:
                return migrate(self._db)
            except ValueError as exc:
                raise StoreError(f"{self.path} {exc}") from exc
            except sqlite3.Error as exc:
                raise StoreError(str(exc)) from exc

    def _ensure_store_id(self) -> str:
        """The store's id, created with its first signed head and witness under the write
        lock: of several processes creating one store, the first makes them, the others
        read them (a check before the lock is only a shortcut)."""
        existing = self.get_meta("store_id")
        if existing:
            return existing
        with self.atomic():
            existing = self.get_meta("store_id")
            if existing:
                return existing
            self.store_id = uuid.uuid4().hex
            self._upsert_meta("store_id", self.store_id)
            self._upsert_meta("node_key", public_key_text(self.keyring.signing_key.public_key()))
            self._store_head(EMPTY_HEAD)
            # The empty head is witnessed before the commit that says it is, so no reader
            # ever finds a store that claims a witness which does not exist yet.
            self.keyring.write_witness(self.store_id, Witness(0, GENESIS))
            self._remember_places()
            self._upsert_meta("witnessed", "1")
        return self.store_id

    @property
    def capabilities(self) -> Capabilities:
        """Everything: one SQLite file holds the FTS5 index, the vectors, the change log,
        the access statistics and the raw bodies beside the records."""
        return self._capabilities

    def generation(self) -> int:
        """Moves with every commit, ours or another process's (``_caches_current``).
        Inside our own transaction it moves on every call: what is read there may still
        be rolled back, so nothing read there can be cached for later."""
        with self._lock:
            if not self._caches_current():
                self._generation += 1
            return self._generation

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
            # What a rolled-back savepoint must give back.
            delta, census = self._head_delta, dict(self._census_delta)
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outermost:
                    self._rollback()
                else:
                    self._db.execute(f"ROLLBACK TO sp{self._depth}")
                    self._db.execute(f"RELEASE sp{self._depth}")
                    self._head_delta, self._census_delta = delta, census
                raise
            self._depth -= 1
            if not outermost:
                self._db.execute(f"RELEASE sp{self._depth}")
                return
            self._commit()

    def _commit(self) -> None:
        """Sign the head and COMMIT; on any failure roll back, so the connection is never
        left inside BEGIN IMMEDIATE (where the next write would report "locked")."""
        dirty = self._dirty_head
        try:
            if dirty:
                self._sign_head()
            self._db.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"the write was not committed: {exc}") from exc
            raise
        if dirty:
            self._dirty_head = False
            self._write_witness()

    def _rollback(self) -> None:
        self._dirty_head = False
        self._head_delta = (0, 0)
        self._census_delta = {}
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

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

    def content_key(self, record: AMFRecord) -> str:
        """The dedup key of ``record`` in this store: keyed, so the stored column cannot be
        used to confirm a guessed statement (``amcp.amf.ids.content_key``)."""
        return content_key(record, self._content_secret)

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
            batch = Batch()
            counts = termstats.Deltas()  # per-scope term statistics of the active ones
            now = time.time()
            for item in items:
                record = item.record
                kid = record.knowledge_id
                checksum = record.integrity.checksum
                found = known.get(kid)
                if found is not None:
                    results.append(rewrite_result(kid, checksum, found))
                    continue
                seq += 1
                rowid += 1
                prev = self._stage_put(batch, item, rowid, seq, prev, now)
                if (item.index_text or item.index_context) and (
                    item.lifecycle is Lifecycle.ACTIVE
                ):
                    counts.add(
                            record.meta.project_scope, item.index_text or "",
                            item.index_context or "", +1,
                        )
                # A second copy later in the same batch is a re-write of this one.
                known[kid] = (checksum, item.lifecycle.value, item.hlc, rowid)
                results.append(PutResult(kid, created=True, hlc=item.hlc, rowid=rowid))
            if batch.records:
                for key, n in batch.write(self._db).items():
                    self._count(key, n)
                self._dirty_head = True
                counts.apply(self._db)
        return results

    def _stage_put(
        self, batch: Batch, item: PutItem, rowid: int, seq: int, prev: str, now: float
    ) -> str:
        """Add one new record's rows to ``batch``; returns its change's chain hash."""
        record = item.record
        kid = record.knowledge_id
        body = canonical_packb(record.to_dict())
        if item.sensitive:
            body = self.keyring.seal(body, kid.encode())
        details: dict[str, Any] = {
            "checksum": record.integrity.checksum,
            "type": record.type.value,
            "scopes": list(record.meta.project_scope),
            "lifecycle": item.lifecycle.value,
        }
        if record.integrity.envelope is not None:
            details["envelope"] = record.integrity.envelope
        digest = link_hash(prev, seq, item.hlc, ChangeOp.PUT.value, kid, details)
        batch.changes.append(
            (seq, item.hlc, ChangeOp.PUT.value, kid, canonical_packb(details), digest)
        )
        creator = record.meta.created_by
        if item.sensitive:  # its salt (Memory._salted) lives only in the encrypted body
            creator = creator.partition("#salt=")[0]
        values = (
            kid, record.type.value, record.kind, record.core.subject, record.meta.created_at,
            creator, scopes_text(record.meta.project_scope),
            item.lifecycle.value, item.hlc, None, None, item.expires_at, int(item.sensitive),
            0.5, record.integrity.checksum, record.integrity.envelope,
            self.content_key(record), now, seq,
        )
        seal = self._sealer.seal(rowid, values, body)
        if not item.sensitive:
            self._remember_decoded(kid, seal, record)
        self._resealed(None, seal, rows=1)
        self._count(census.LIFECYCLE + item.lifecycle.value)
        self._count(census.EXPIRING, item.expires_at is not None)
        batch.records.append((rowid, *values, body, seal))
        batch.scopes.extend((rowid, s) for s in record.meta.project_scope)
        batch.tags.extend((rowid, t) for t in record.tags)
        batch.events.extend(event_rows(rowid, record))
        batch.links.extend(link_rows(rowid, record))
        if item.index_text or item.index_context:
            batch.lexical.append((rowid, item.index_text or "", item.index_context or ""))
        if item.vector is not None:
            batch.vectors.append((rowid, _vector_bytes(item.vector)))
        return digest

    def _known(self, knowledge_ids: list[str]) -> dict[str, tuple[Any, ...]]:
        """(checksum, lifecycle, hlc, rowid) of those ids already stored, from rows whose
        seal verifies: a write decision is never taken on a column nothing checks."""
        found: dict[str, tuple[Any, ...]] = {}
        for start in range(0, len(knowledge_ids), _IN_CHUNK):
            chunk = knowledge_ids[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(
                f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id IN ({marks})", chunk
            ):
                kid = row[col.KID]
                if not self._verified(row):
                    raise StoreIntegrityError(
                        f"stored record {kid} failed verification and is quarantined: "
                        f"{self._quarantine.get(kid, '')}; run `amcp verify`"
                    )
                found[kid] = (row[col.CHECKSUM], row[col.LIFECYCLE], row[col.HLC], row[col.ROWID])
        return found

    def due_for_expiry(self, now: float, limit: int = 1000) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                # INDEXED BY: the planner otherwise walks every active record via the
                # lifecycle index, while the partial expiry index holds only TTL'd ones.
                f"SELECT {ROW_COLS} FROM records r INDEXED BY records_expires"
                " WHERE expires_at IS NOT NULL AND expires_at <= ? AND lifecycle='active' LIMIT ?",
                (now, limit),
            ).fetchall()
            return [row[col.KID] for row in rows if self._verified(row)]

    def find_same_content(self, record: AMFRecord) -> StoredRecord | None:
        """A live (active) record saying exactly what ``record`` says, if any."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {ROW_COLS} FROM records r WHERE r.content_key=? "
                "AND r.lifecycle='active' ORDER BY r.rowid LIMIT 4",
                (self.content_key(record),),
            ).fetchall()
        for row in rows:
            found = self._decode(row)
            if found is not None and found.state.lifecycle is Lifecycle.ACTIVE:
                return found
        return None

    # ------------------------------------------------------------------ reads

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
                return db.execute(GET_BY_ID, (knowledge_id,)).fetchone()
            hot = self._hot_rows
            row = hot.get(knowledge_id)
            if row is None:
                row = db.execute(GET_BY_ID, (knowledge_id,)).fetchone()
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
            self._generation += 1
        return True

    def get_many(self, knowledge_ids: Sequence[str]) -> list[StoredRecord]:
        """The records found among ``knowledge_ids``, in the order asked (one statement per
        500 ids instead of one per id: a recall reads its k winners here); quarantined ones
        are left out."""
        if len(knowledge_ids) == 1:  # a read by id (the node's hottest request)
            row = self._row_by_id(knowledge_ids[0])
            found = self._decode(row) if row else None
            return [found] if found is not None else []
        rows: dict[str, Sequence[Any]] = {}
        wanted = list(dict.fromkeys(knowledge_ids))
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start : start + _IN_CHUNK]
            with self._lock:
                got = self._db.execute(
                    f"SELECT {ROW_COLS} FROM records r WHERE r.knowledge_id IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
            rows.update((row[col.KID], row) for row in got)
        decoded = (self._decode(rows[kid]) for kid in knowledge_ids if kid in rows)
        return [d for d in decoded if d is not None]

    def query(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[StoredRecord]:
        """Records passing ``flt`` in row order. The SQL filter narrows; each row is then
        verified and re-checked against ``flt`` (``admit``), so an index row added behind
        the node's back cannot admit a record."""
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
            out: list[StoredRecord] = []
            # Rows left out (quarantined, or an index row's false admission) must not end a
            # page early: a caller paging with ``after`` would stop, an export would be cut.
            while len(out) < limit:
                want = limit - len(out)
                rows = self._db.execute(sql, [*params, start, want]).fetchall()
                for row in rows:
                    found = self._decode(row)
                    if found is not None and admits(flt, row[col.FACTS], found.record):
                        out.append(found)
                if len(rows) < want:
                    break  # no more rows pass the SQL filter
                start = int(rows[-1][col.ROWID])
        return out

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
            self._count(census.VECTORS, -self._db.execute("DELETE FROM vectors").rowcount)
            self._dirty_head = True  # the census moved: sign it

    def set_vector(self, knowledge_id: str, vector: np.ndarray) -> None:
        with self.atomic():
            row = self._live_row(knowledge_id)
            had = self._db.execute(
                "SELECT 1 FROM vectors WHERE rowid=?", (row[col.ROWID],)
            ).fetchone()
            self._db.execute(
                "INSERT OR REPLACE INTO vectors(rowid, vec) VALUES (?,?)",
                (row[col.ROWID], _vector_bytes(vector)),
            )
            if had is None:
                self._count(census.VECTORS)
                self._dirty_head = True

    # ------------------------------------------------------------------ integrity

    def rewitness(self) -> None:
        """Witness the current head in this keyring's places (``amcp verify --rewitness``,
        after a deliberate move to another machine or user)."""
        with self.atomic():
            self._remember_places()
        seq, head = self._last_change()
        self.keyring.write_witness(self.store_id, Witness(seq, head), self.witness_places())

    def verify(self, *, full: bool = False, incremental: bool = False) -> IntegrityReport:
        """Walk the hash chain; check the signed head (row count and digest included) and
        the witnesses; with ``full``, also every row against its seal and the log and every
        body against its id, checksum, envelope and signature; ``incremental`` (the check on
        open): resume the walk after the last such check's mark. See ``sqlite_verify``."""
        from amcp.store.sqlite_verify import verify_since_mark, verify_store

        if incremental and not full:
            return verify_since_mark(self)
        return verify_store(self, full=full)


def _vector_bytes(vector: np.ndarray) -> bytes:
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()
