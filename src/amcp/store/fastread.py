"""A lean, read-only view of the SQLite store for short-lived readers (coding-agent hooks).

A hook is a new process per event, so every import and every O(records) step is paid on
every prompt. ``Memory`` + ``SQLiteStore`` cost more to import than a hook may spend in
total, so the hooks read the file here instead, with stdlib ``sqlite3`` and ``msgpack``:

* the file is opened read-only (``mode=ro``): a read never takes the write lock, never
  migrates, never creates anything;
* every query is narrow and indexed: the pointer tier is ordered and limited in SQL, the
  user scopes come from a loose index scan, prompt relevance is FTS5 BM25 over the pruned
  query terms — the same lexical ranking, fusion and rerank as ``HybridSearcher`` with no
  embedder (a test holds the two to the same answers);
* no O(records) work: no ``quick_check``, no walk of the change log.

What a reader here checks. Once per open, in one read snapshot: the change-log tail against
the witnesses kept outside the store (a store rolled back to an older copy, or replaced, is
refused), and the signed head against the tables — it ends the log, and the record count
and the census (rows by lifecycle, TTL'd rows, scope/tag/lexical/vector index rows) are what
it says. The head is checked by its MAC (``headtext``), not its Ed25519 signature, so no
``cryptography`` is loaded. A head that does not add up (rows deleted or hidden, index rows
removed, a head written before MACs) raises ``Unreconciled``: only the full check can say
which records are damaged, so the caller opens ``Memory`` instead (``hooks.backends``).
Per record it hands out (as ``SQLiteStore`` reads do): the row's seal (``rowseal``: an HMAC
under the node's key over every state column and the body bytes), that the row is its
record's latest logged state (an older copy of the row is left out), and the filter again
against the sealed columns (``admit``), so an edited row, an edited body, a replayed row or
an inserted index row is left out (quarantined, ``quarantined()``) instead of shown.

What it skips: re-hashing the chain and summing every seal against the signed digest (the
full check every ``Memory``/node open runs; ~55 ms of the digest alone at 100k records).
What that leaves is an edit the per-record checks catch anyway when the record is served:
the digest's extra power is to notice a replayed or edited row that no query reached.
docs/hooks.md ("Tamper evidence") has the table.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import quote

import msgpack

from amcp.amf.mapping import redacted_statement, text_of
from amcp.errors import StoreError, StoreIntegrityError
from amcp.store import termstats
from amcp.store.admit import GLOBAL, row_scopes
from amcp.store.headtext import MAC_PURPOSE, mac_verifies, parse_head
from amcp.store.rowseal import EDITED, SEALED, STALE_ROW, UNLOGGED, Sealer
from amcp.store.schema import SCHEMA_VERSION
from amcp.store.sqlite_census import census_of, differences

if TYPE_CHECKING:
    from typing import Any

    StrPath = str | os.PathLike[str]
    # The fast reader's filter: the scopes asked for (plus global; all when empty) and the
    # moment expiry is judged at (active and unexpired is implied).
    Where = tuple[Sequence[str], float]

# The default of FastReader(small_scope=): a scope with at most this many records is read
# row by row and sorted, cheaper than walking the ranked index past the records of other
# scopes (see FastReader.ranked).
SMALL_SCOPE = 256
_GENESIS = "0" * 64  # amcp.store.chain.GENESIS (that module needs dataclasses)


class NeedsMemory(StoreError):
    """This reader cannot answer for the file: open it with ``Memory`` instead."""


class StaleStore(NeedsMemory):
    """The file's schema is not the one this amcp writes: ``Memory`` migrates it."""


class Unreconciled(NeedsMemory):
    """The rows do not add up to the signed head (or the head predates its MAC): only the
    full check on a ``Memory`` open can say which records are damaged, and quarantine them."""


class FastRecord(NamedTuple):
    """What a hook shows of a record. A NamedTuple: ``import dataclasses`` alone costs a
    short-lived reader more than its queries do."""

    knowledge_id: str
    type: str
    scope: str
    weight: float
    text: str
    kind: str | None
    sensitive: bool
    # What the firewall labels it by (amcp.firewall.labels): the provenance claim, and
    # whether this node's key signed the record.
    claim: Any = None
    local: bool = False


def _marks(n: int) -> str:
    return ",".join("?" * n)


class FastReader:
    """Read-only queries over one store file. Not thread-safe; one per hook process."""

    def __init__(self, path: StrPath, *, timeout_s: float = 0.25,
                 key_dir: StrPath | None = None,
                 witness_dirs: Sequence[StrPath] | None = None,
                 small_scope: int = SMALL_SCOPE) -> None:
        self.path = os.fspath(path)
        self.small_scope = small_scope
        self.key_dir = (os.fspath(key_dir) if key_dir is not None
                        else os.path.join(os.path.dirname(self.path), "keys"))
        if witness_dirs is None:
            from amcp.paths import default_witness_dir

            witness_dirs = [default_witness_dir()]
        self.witness_dirs = [os.fspath(d) for d in witness_dirs]
        if not os.path.exists(self.path):
            raise StoreError(f"no store at {self.path}")
        uri = f"file:{quote(os.path.realpath(self.path))}?mode=ro"
        try:
            self._db = sqlite3.connect(uri, uri=True, timeout=timeout_s,
                                       isolation_level=None, check_same_thread=False)
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a readable amcp store: {exc}") from exc
        if version != SCHEMA_VERSION:
            self._db.close()
            raise StaleStore(f"{self.path} has schema v{version}, not v{SCHEMA_VERSION}")
        self._raw_key: bytes | None = None
        try:
            self.store_id = self.meta("store_id") or ""
            self._check_open()
            self._node_key: str | None = None
            self._sealer = Sealer(self._derive("row-seal"), self.store_id)
        except BaseException:
            self._db.close()
            raise
        self._data_key: Any = None
        # Records this reader left out because they failed verification (id -> why).
        self._left_out: dict[str, str] = {}
        # (type, weight, created_at) of each lexical candidate seen, for the rerank.
        self._cand_state: dict[str, tuple[str, float, str | None]] = {}

    def close(self) -> None:
        self._db.close()

    def quarantined(self) -> dict[str, str]:
        """Records this reader left out of its answers because they failed verification
        (id -> why). Deleted or hidden rows are not here: they stop the open (``Unreconciled``)."""
        return dict(self._left_out)

    def __enter__(self) -> FastReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"reading {self.path} failed: {exc}") from exc

    def meta(self, key: str) -> str | None:
        rows = self._q("SELECT value FROM store_meta WHERE key=?", (key,))
        return str(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ integrity

    def _derive(self, purpose: str) -> bytes:
        """``Keyring.derive`` from the raw data key, without loading ``cryptography``; the
        key file is read once per reader (the head's MAC and the row seals both need it)."""
        from amcp.subkeys import derive_key

        if self._raw_key is None:
            path = os.path.join(self.key_dir, "data.key")
            try:
                with open(path, "rb") as fh:
                    self._raw_key = fh.read()
            except OSError as exc:
                raise StoreError(f"cannot read the store's data key {path}: {exc}") from exc
        return derive_key(self._raw_key, purpose)

    def _check_open(self) -> None:
        """The witnesses, then the log tail and the signed head in one read snapshot.

        The witness files are read first: a witness is written after its commit, so one read
        before the snapshot never names a head the snapshot lacks (no false rollback alarm
        while another process writes)."""
        if not self.store_id:
            return
        witnessed = self._read_witnesses()
        self._db.execute("BEGIN")
        try:
            row = self._q("SELECT seq, hash FROM changes ORDER BY seq DESC LIMIT 1")
            last, tail = (int(row[0][0]), str(row[0][1])) if row else (0, _GENESIS)
            self._check_witnesses(witnessed, last)
            self._check_head(last, tail)
        finally:
            self._db.execute("COMMIT")

    def _read_witnesses(self) -> list[tuple[str, str]]:
        """(path, text) of each witness of this store that exists."""
        found = []
        for where in self.witness_dirs:
            path = os.path.join(where, f"{self.store_id}.head")
            try:
                with open(path, encoding="ascii") as fh:
                    found.append((path, fh.read()))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreIntegrityError(f"witness file {path} is unreadable: {exc}") from exc
        return found

    def _check_witnesses(self, witnessed: Sequence[tuple[str, str]], last: int) -> None:
        """The log against each witness outside the store: O(1), not a chain walk."""
        for path, text in witnessed:
            try:
                seq_text, head = text.split()
                seq = int(seq_text)
            except ValueError as exc:
                raise StoreIntegrityError(f"witness file {path} is malformed") from exc
            if seq > last:
                raise StoreIntegrityError(f"{self.path} was rolled back: the witness has seen "
                                          f"change {seq}, the log ends at {last}")
            row = self._q("SELECT hash FROM changes WHERE seq=?", (seq,))
            if seq and (not row or row[0][0] != head):
                raise StoreIntegrityError(f"{self.path}: the change log differs from the "
                                          "witnessed history")
        if not witnessed and self.meta("witnessed"):
            raise StoreIntegrityError(f"{self.path}: the witness of this store is missing from "
                                      f"{', '.join(self.witness_dirs)}; run `amcp verify`")

    def _check_head(self, last: int, tail: str) -> None:
        """The signed head by its MAC: it ends the log, and the rows add up to its counts."""
        stored = self.meta("chain_head")
        try:
            head = parse_head(stored) if stored is not None else None
        except ValueError:
            head = None
        if head is None or not mac_verifies(self._derive(MAC_PURPOSE), head, self.store_id):
            raise Unreconciled(f"{self.path}: the signed head has no MAC this reader can check "
                               "(missing: written before MACs; or wrong)")
        if (head.seq, head.hash) != (last, tail):
            raise Unreconciled(f"{self.path}: the change log does not end at its signed head")
        rows = int(self._q("SELECT COUNT(*) FROM records")[0][0])
        off = differences(dict(head.census), census_of(self._db))
        if rows != head.rows or off:
            raise Unreconciled(f"{self.path}: the rows differ from the signed head "
                               f"(records: signed {head.rows}, found {rows}; {'; '.join(off)})")

    def _decode(self, body: bytes, kid: str, sensitive: bool) -> dict[str, Any] | None:
        """Body bytes (their seal already checked) → the record as a dict; None if they do
        not decode to this record."""
        raw = self._open_sealed(body, kid) if sensitive else body
        try:
            rec = msgpack.unpackb(raw, raw=False)
        except (ValueError, msgpack.UnpackException):
            return None
        return rec if isinstance(rec, dict) and rec.get("knowledge_id") == kid else None

    def _open_sealed(self, body: bytes, kid: str) -> bytes:
        """Decrypt a sensitive body (AES-GCM): imported only when one is actually shown."""
        if self._data_key is None:
            from pathlib import Path

            from amcp.keyring import Keyring

            self._data_key = Keyring(Path(self.key_dir))
        opened: bytes = self._data_key.open(body, kid.encode())
        return opened

    def _record(self, values: Sequence[Any], body: bytes) -> FastRecord | None:
        weight, sensitive = values[_WEIGHT], bool(values[_SENSITIVE])
        rec = self._decode(body, values[0], sensitive)
        if rec is None:
            return None
        ext = rec.get("vendor_extensions") or {}
        kind = ext.get("x-kind")
        if self._node_key is None:
            self._node_key = self.meta("node_key") or ""
        signer = (rec.get("integrity") or {}).get("public_key")
        return FastRecord(
            values[0], str(rec["type"]), str((rec["meta"].get("project_scope") or ["*"])[0]),
            float(weight),
            redacted_statement(rec["core"].get("subject"), ext) if sensitive else text_of(rec),
            kind if isinstance(kind, str) else None, sensitive,
            ext.get("x-provenance"), bool(self._node_key) and signer == self._node_key,
        )

    def records(self, kids: Sequence[str], scopes: Sequence[str], now: float, *,
                 kinds: Sequence[str] | None = None, sensitive: bool = True,
                 ) -> list[FastRecord]:
        """Bodies of ``kids`` in that order: only rows whose seal verifies, that are their
        record's latest logged state, and whose sealed columns pass the query's filter again
        (active, unexpired, in ``scopes`` or global, of ``kinds``): the SQL that found them
        read index rows nothing signs. One statement, so the row and the log it is checked
        against are one snapshot even while another process writes."""
        if not kids:
            return []
        stored = self._q(
            f"SELECT r.rowid, {_SEALED_COLS}, r.body, r.seal, (SELECT MAX(c.seq) FROM changes"
            " c WHERE c.knowledge_id = r.knowledge_id) FROM records r"
            f" WHERE r.knowledge_id IN ({_marks(len(kids))}) AND r.body IS NOT NULL", list(kids))
        wanted = {*scopes, GLOBAL} if scopes else None
        by_id: dict[str, FastRecord] = {}
        for rowid, *values, body, seal, latest in stored:
            kid = values[0]
            if not self._sealer.check(rowid, values, body, seal):
                self._left_out[kid] = EDITED
            elif latest is None:
                self._left_out[kid] = UNLOGGED
            elif latest != values[_CHAIN_SEQ]:
                self._left_out[kid] = STALE_ROW
            elif _passes(values, wanted, now, kinds, sensitive):
                found = self._record(values, body)
                if found is None:
                    self._left_out[kid] = "its body does not decode to this record"
                else:
                    by_id[kid] = found
        return [by_id[k] for k in kids if k in by_id]

    # ------------------------------------------------------------------ queries

    def scopes_with_prefix(self, prefix: str) -> tuple[str, ...]:
        """Distinct scopes starting with ``prefix``, by a loose index scan over the
        (scope, rid) primary key: one seek per distinct scope, not a row per record."""
        found: list[str] = []
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        last = prefix
        while True:
            rows = self._q("SELECT scope FROM record_scopes WHERE scope >= ? AND scope < ? "
                           "ORDER BY scope LIMIT 1", (last, upper))
            if not rows:
                return tuple(found)
            scope = rows[0][0]
            if scope.startswith(prefix):
                found.append(scope)
            last = scope + "\x00"

    def ranked(self, scopes: Sequence[str], limit: int, *, kinds: Sequence[str] | None = None,
               now: float | None = None) -> list[FastRecord]:
        """Active, unexpired, non-sensitive records in ``scopes`` (plus global ``*``), by
        learned weight then recency — the pointer tier. Ordered and limited in SQL; the
        bodies of the winners only are read and verified.

        Two plans, chosen by the scope's size (counted on the covering key): a large scope
        walks the pointer-tier index (migration 5) in order and stops at the limit; a small
        one (where that walk would pass most of the index before finding enough) reads its
        few rows and sorts them. Either way the work is bounded by about
        ``max(small_scope, limit / share of the scope)`` entries, not the store's size."""
        if not scopes or limit <= 0:
            return []
        wanted = (*scopes, "*")
        size = self._q(f"SELECT COUNT(*) FROM record_scopes WHERE scope IN "
                       f"({_marks(len(wanted))})", wanted)[0][0]
        if size <= self.small_scope:
            index = "NOT INDEXED"  # the rowid list from record_scopes drives the query
        elif kinds is not None and len(kinds) == 1:
            index = "INDEXED BY records_ranked_kind"
        else:
            index = "INDEXED BY records_ranked"
        params: list[Any] = [*wanted]
        kind_sql = ""
        if kinds:
            kind_sql = f" AND r.kind IN ({_marks(len(kinds))})"
            params.extend(kinds)
        moment = time.time() if now is None else now
        params.extend([moment, limit])
        rows = self._q(
            f"SELECT r.knowledge_id FROM records r {index}"
            " WHERE r.lifecycle='active' AND r.sensitive=0"
            " AND r.rowid IN (SELECT s.rid FROM record_scopes s"
            f" WHERE s.scope IN ({_marks(len(wanted))})){kind_sql}"
            " AND (r.expires_at IS NULL OR r.expires_at > ?)"
            " ORDER BY r.weight DESC, r.created_at DESC, r.knowledge_id LIMIT ?", params)
        return self.records([r[0] for r in rows], scopes, moment, kinds=kinds,
                             sensitive=False)

    def term_doc_freq(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        if not terms:
            return {}, 0
        rows = self._q(f"SELECT term, doc FROM records_fts_vocab WHERE term IN "
                       f"({_marks(len(terms))})", list(terms))
        total = self._q("SELECT MAX(rowid) FROM records_fts")[0][0]
        return {t: int(d) for t, d in rows}, int(total or 0)

    def lexical_texts(self, kids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Both FTS columns (own terms, context) of each record."""
        if not kids:
            return {}
        rows = self._q("SELECT r.knowledge_id, f.terms, f.context FROM records r JOIN"
                       " records_fts f ON f.rowid = r.rowid WHERE r.knowledge_id IN"
                       f" ({_marks(len(kids))})", list(kids))
        return {kid: (terms or "", context or "") for kid, terms, context in rows}

    def own_terms(self, kids: Sequence[str]) -> dict[str, str]:
        return {kid: own for kid, (own, _context) in self.lexical_texts(kids).items()}

    def search_lexical(self, terms: str, flt: Where, k: int, *, context_weight: float = 1.0
                       ) -> list[tuple[str, float]]:
        """The ``k`` best BM25 matches that pass ``flt`` (``LexicalReads`` for the shared
        pipeline); the state of each is kept for the rerank (``_cand_state``)."""
        rows = self._lexical_candidates(terms, flt, k, context_weight)
        self._cand_state.update({kid: (ktype, weight, created)
                                 for kid, ktype, weight, created, _s in rows})
        return [(kid, score) for kid, _t, _w, _c, score in rows]

    def _lexical_candidates(self, match: str, flt: Where, pool: int, context_weight: float
                            ) -> list[tuple[str, str, float, str | None, float]]:
        """The ``pool`` best BM25 matches that pass the filters: (id, type, weight, created,
        score).

        ``SQLiteStore.search_lexical`` joins every match to its row before sorting; at 10k
        records a common term matches thousands, and each join reads a row that carries its
        body. Here FTS5 ranks the matches alone, and rows are read in rank order, a batch
        at a time, only until ``pool`` pass. Same answer: both orders are by score with ties
        in rowid order (SQLite's sorter is stable and FTS5 yields rowids ascending)."""
        scopes, now = flt
        scope_sql, scope_params = "", []
        if scopes:
            wanted = (*scopes, "*")
            # EXISTS probes the (scope, rid) key per row; an IN (subquery) would list the
            # whole scope again for every batch.
            scope_sql = (" AND EXISTS (SELECT 1 FROM record_scopes s WHERE s.rid = r.rowid"
                         f" AND s.scope IN ({_marks(len(wanted))}))")
            scope_params = list(wanted)
        out: list[tuple[str, str, float, str | None, float]] = []
        offset, page = 0, 2 * pool  # most matches pass the filters: one page usually does
        while True:
            # A LIMIT lets SQLite keep a top-N heap instead of sorting every match.
            ranked = self._q(
                "SELECT rowid, -bm25(records_fts, 1.0, ?) AS score FROM records_fts"
                " WHERE records_fts MATCH ? ORDER BY score DESC, rowid LIMIT ? OFFSET ?",
                (context_weight, match, page, offset))
            if not ranked:
                return out
            ids = [r[0] for r in ranked]
            # NOT INDEXED: look the ids up by rowid. Left to itself SQLite walks the
            # records_ranked index over every active record (lifecycle=?) and tests each
            # against the IN list: ~8 ms at 10k records instead of ~1.
            rows = self._q(
                "SELECT r.rowid, r.knowledge_id, r.type, r.weight, r.created_at"
                " FROM records r NOT INDEXED"
                f" WHERE r.rowid IN ({_marks(len(ids))}) AND r.lifecycle='active'{scope_sql}"
                " AND (r.expires_at IS NULL OR r.expires_at > ?)",
                [*ids, *scope_params, now])
            passed = {rid: (kid, ktype, weight, created)
                      for rid, kid, ktype, weight, created in rows}
            for rid, score in ranked:
                if rid in passed:
                    out.append((*passed[rid], float(score)))
                    if len(out) == pool:
                        return out
            if len(ids) < page:
                return out
            offset, page = offset + page, page * 4

    def candidate(self, knowledge_id: str) -> tuple[str, float, str | None]:
        """(type, weight, created_at) of a record ``search_lexical`` returned: what the
        rerank scores by (``retrieval.fastsearch``)."""
        return self._cand_state[knowledge_id]

    def scope_stats(self, scopes: Sequence[str], terms: Sequence[str]) -> Any:
        """Scope-local statistics as ``HybridSearcher._scope_stats`` reads them (a
        ``termstats.TermStats``), or None when the scopes are too many or none."""
        if 0 < len(scopes) <= termstats.MAX_SCOPES:
            return termstats.read(self._q, scopes, terms)
        return None


_SEALED_COLS = ", ".join(f"r.{c}" for c in SEALED)
_LIFECYCLE, _EXPIRES, _SENSITIVE, _WEIGHT, _KIND, _CHAIN_SEQ = (
    SEALED.index(c)
    for c in ("lifecycle", "expires_at", "sensitive", "weight", "kind", "chain_seq"))


def _passes(values: Sequence[Any], scopes: set[str] | None, now: float,
            kinds: Sequence[str] | None, sensitive: bool) -> bool:
    """The fast reader's filter (active, unexpired, scopes, kinds, sensitivity) over a
    row's sealed columns: ``admit.admits`` for the conditions this reader uses."""
    expires = values[_EXPIRES]
    return (
        values[_LIFECYCLE] == "active"
        and (expires is None or expires > now)
        and (sensitive or not values[_SENSITIVE])
        and (kinds is None or values[_KIND] in kinds)
        and (scopes is None or any(s in scopes for s in row_scopes(values)))
    )


__all__ = ["FastReader", "FastRecord", "NeedsMemory", "StaleStore", "Unreconciled"]
