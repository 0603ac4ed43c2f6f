"""``PostgresStore``: the Store port over PostgreSQL + pgvector, for a team sharing one store.

Composed of small parts, each its own module: the connections and write transaction
(``database``), the change log and signed head (``changes``), record writes and reads
(``writes``, ``reads``), the verifying read path (``verified``), the lexical index
(``lexical`` + ``bm25``), vectors (``vectors``), access statistics (``access``), the
integrity check (``verify``) and the commit listener (``listen``). The integrity guarantees
are the SQLite adapter's (docs/store.md): the same seals, chain, signed head, census,
witnesses and quarantine, through the same shared modules.

Many processes may open one store: writers are serialised by a transaction-scoped advisory
lock (``locks``), every commit NOTIFYs, and every open store LISTENs, so a peer's commit
moves ``generation()`` at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import psycopg

from amcp.amf.ids import content_key, public_key_text
from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.errors import StoreError, StoreIntegrityError
from amcp.keyring import Keyring, Witness
from amcp.store.base import (
    Capabilities,
    Change,
    ChangeOp,
    IntegrityReport,
    PutItem,
    PutResult,
    RecordFilter,
    StateRow,
    StoredRecord,
    StoreStats,
    SummaryRow,
)
from amcp.store.chain import EMPTY_HEAD, GENESIS
from amcp.store.postgres.access import AccessLog
from amcp.store.postgres.changes import ChangeLog
from amcp.store.postgres.commits import Commits
from amcp.store.postgres.database import Database, get_meta, put_meta
from amcp.store.postgres.lexical import LexicalIndex
from amcp.store.postgres.listen import Listener, channel_of
from amcp.store.postgres.migrate import migrate
from amcp.store.postgres.reads import RecordReads
from amcp.store.postgres.vectors import VectorSource
from amcp.store.postgres.verified import RowVerifier
from amcp.store.postgres.verify import Verifier
from amcp.store.postgres.writes import RecordWrites
from amcp.store.rowseal import Sealer

if TYPE_CHECKING:
    import numpy as np


def _bootstrap(dsn: str, where: str, timeout_s: float) -> None:
    """Reach the server, create pgvector if needed, run migrations: one plain connection,
    before the pool (whose connections register the ``vector`` type)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=max(int(timeout_s), 1)) as c:
            migrate(c, where)
    except psycopg.OperationalError as exc:
        raise StoreError(f"cannot connect to {where}: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"{where}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class PostgresStore:
    """``Store`` over one PostgreSQL database (or schema, through the DSN's search_path)."""

    def __init__(
        self,
        dsn: str,
        keyring: Keyring,
        *,
        verify_on_open: bool = True,
        pool_size: int = 4,
        timeout_s: float = 10.0,
        listen: bool = True,
        prune_from: int = 2_000,
        hnsw: bool = False,
        prepare: bool = True,
    ) -> None:
        """``prune_from``: the matches in all (the query terms' document counts summed)
        from which lexical ranking skips the rows that cannot make the page (length
        steps, ``bm25.length_needed``); below it every match is ranked. ``hnsw``: keep pgvector's
        HNSW index, and recall asks it (``Capabilities.vector_search``) instead of building
        its in-process index from every vector (``vectors``). ``prepare``: server-side
        prepared statements (``Database``); False behind a transaction-pooling proxy that
        cannot keep them."""
        self.keyring = keyring
        self._db = Database(dsn, pool_size=pool_size, timeout_s=timeout_s, prepare=prepare)
        self.where = self._db.where
        _bootstrap(dsn, self.where, timeout_s)
        self._db.open()
        self._log = ChangeLog(self._db, keyring)
        self.commits = Commits(self._db, self._log)
        writing = self.commits.writing
        delta = self._log.delta
        self.access = AccessLog(self._db, writing)
        self._rows = RowVerifier(keyring, Sealer(b"", ""), self.access.state)
        self.lexical = LexicalIndex(self._db, delta, min_matches=prune_from,
                                    generation=self.commits.current)
        self.vectors = VectorSource(self._db, delta, self._rows, writing, hnsw=hnsw)
        secret = keyring.derive("content-key")

        def keyed(record: AMFRecord) -> str:  # the dedup key, keyed (amf.ids.content_key)
            return content_key(record, secret)

        self._reads = RecordReads(self._db, self._rows, keyed)
        self._writes = RecordWrites(
            keyring=keyring, log=self._log, rows=self._rows, lexical=self.lexical,
            vectors=self.vectors, access=self.access, atomic=writing, content_key=keyed,
        )
        self._listener: Listener | None = None
        self._capabilities = Capabilities(
            lexical=self.lexical, vectors=self.vectors, feed=self._log, access=self.access,
            bodies=self._reads, vector_search=self.vectors if hnsw else None,
        )
        try:
            self.store_id = self._ensure_store_id()
            self._log.store_id = self.store_id
            sealer = Sealer(keyring.derive("row-seal"), self.store_id)
            self._rows.set_sealer(sealer)
            self._writes.sealer = sealer
            self._verifier = Verifier(self._db, self._log, keyring, self._rows)
            if listen:
                self._listener = Listener(dsn, channel_of(self.store_id), self.commits.generation)
                self._listener.start(timeout_s)
            if verify_on_open:
                report = self._verifier.since_mark()
                if not report.ok:
                    raise StoreIntegrityError(
                        f"{self.where} failed its integrity check: "
                        + "; ".join(report.problems[:3])
                        + " — run `amcp verify` for the whole report"
                    )
        except BaseException:
            self._shutdown()
            raise

    # ------------------------------------------------------------------ lifecycle

    def _ensure_store_id(self) -> str:
        """The store's id, created with its first signed head and witness under the lock:
        of several processes creating one store, the first makes them, the others read."""
        with self._db.read() as conn:
            existing = get_meta(conn, "store_id")
        if existing:
            return existing
        with self.commits.writing() as conn:
            existing = get_meta(conn, "store_id")
            if existing:
                return existing
            store_id = uuid.uuid4().hex
            self._log.store_id = store_id
            put_meta(conn, "store_id", store_id)
            put_meta(conn, "node_key", public_key_text(self.keyring.signing_key.public_key()))
            self._log.store_head(conn, EMPTY_HEAD)
            # Witnessed before the commit that says it is (as the SQLite adapter does).
            self.keyring.write_witness(store_id, Witness(0, GENESIS))
            self._log.remember_places(conn)
            put_meta(conn, "witnessed", "1")
        return store_id

    def close(self) -> None:
        self.access.stop()
        try:
            self.access.flush()
        except StoreError:
            pass  # the server went away: a second of advisory access counts is lost
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._listener is not None:
            self._listener.stop(self.commits.notify)
            self._listener = None
        self._db.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def capabilities(self) -> Capabilities:
        """All of them, each its own part: the postings index, pgvector, the change feed,
        the access statistics, raw bodies."""
        return self._capabilities

    def generation(self) -> int:
        """Moves with every commit, this process's or (once its NOTIFY arrives) a peer's
        (``commits``)."""
        return self.commits.current()

    def atomic(self) -> AbstractContextManager[None]:
        """A transaction that nests: the outermost commits, an exception rolls all back."""
        return self.commits.atomic()

    # ------------------------------------------------------------------ writes

    def put(
        self, record: AMFRecord, *, hlc: int, vector: np.ndarray | None = None,
        index_text: str | None = None, index_context: str | None = None,
        sensitive: bool = False, expires_at: float | None = None,
        lifecycle: Lifecycle = Lifecycle.ACTIVE,
    ) -> PutResult:
        item = PutItem(record, hlc, vector, index_text, index_context, sensitive, expires_at,
                       lifecycle)
        return self._writes.put_many([item])[0]

    def put_many(self, items: Sequence[PutItem]) -> list[PutResult]:
        return self._writes.put_many(items)

    def set_state(
        self, knowledge_id: str, op: ChangeOp, *, hlc: int, lifecycle: Lifecycle,
        reason: str | None = None, superseded_by: str | None = None,
    ) -> None:
        self._writes.set_state(knowledge_id, op, hlc=hlc, lifecycle=lifecycle, reason=reason,
                               superseded_by=superseded_by)

    def purge(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> None:
        self._writes.purge(knowledge_id, hlc=hlc, reason=reason)

    def put_tombstone(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> bool:
        return self._writes.put_tombstone(knowledge_id, hlc=hlc, reason=reason)

    def set_weight(self, knowledge_id: str, weight: float) -> None:
        self._writes.set_weight(knowledge_id, weight)

    def set_meta(self, key: str, value: str) -> None:
        with self.commits.writing() as conn:
            put_meta(conn, key, value)

    def get_meta(self, key: str) -> str | None:
        with self._db.read() as conn:
            return get_meta(conn, key)

    # ------------------------------------------------------------------ reads

    def get(self, knowledge_id: str) -> StoredRecord | None:
        return self._reads.get(knowledge_id)

    def get_many(self, knowledge_ids: Sequence[str]) -> list[StoredRecord]:
        return self._reads.get_many(knowledge_ids)

    def query(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[StoredRecord]:
        return self._reads.query(flt, limit=limit, after=after)

    def states(
        self, flt: RecordFilter, *, limit: int = 100, ranked: bool = False
    ) -> list[StateRow]:
        return self._reads.states(flt, limit=limit, ranked=ranked)

    def summaries(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[SummaryRow]:
        return self._reads.summaries(flt, limit=limit, after=after)

    def count(self, flt: RecordFilter) -> int:
        return self._reads.count(flt)

    def subjects(self, flt: RecordFilter, *, limit: int | None = None) -> list[str]:
        return self._reads.subjects(flt, limit=limit)

    def find_same_content(self, record: AMFRecord) -> StoredRecord | None:
        return self._reads.find_same_content(record)

    def find_same_content_many(self, records: Sequence[AMFRecord]) -> list[StoredRecord | None]:
        return self._reads.find_same_content_many(records)

    def due_for_expiry(self, now: float, limit: int = 1000) -> list[str]:
        return self._reads.due_for_expiry(now, limit)

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        return self._reads.ids_with_prefix(prefix, limit)

    def stats(self) -> StoreStats:
        return self._reads.stats()

    def changes(self, since_hlc: int = 0, limit: int = 1000) -> list[Change]:
        return self._log.changes(since_hlc, limit)

    def max_hlc(self) -> int:
        return self._log.max_hlc()

    # ------------------------------------------------------------------ integrity

    def verify(self, *, full: bool = False, incremental: bool = False) -> IntegrityReport:
        if incremental and not full:
            return self._verifier.since_mark()
        return self._verifier.verify(full=full)

    def integrity_warnings(self) -> tuple[str, ...]:
        return self._rows.integrity_warnings()

    def quarantined(self) -> dict[str, str]:
        return self._rows.quarantined()

    def witness_places(self) -> list[Any]:
        return self._log.witness_places()

    def rewitness(self) -> None:
        """Witness the current head in this keyring's places (``amcp verify --rewitness``)."""
        with self.commits.writing() as conn:
            self._log.remember_places(conn)
        seq, head = self._log.change_head()
        self.keyring.write_witness(self.store_id, Witness(seq, head or GENESIS),
                                   self._log.witness_places())
