"""``Memory``'s write path: validate → dedup → clock → embed → store, one transaction.

A mixin, so ``memory.py`` stays a readable
facade; ``Memory`` supplies the store, clock, embedder, searcher and ``atomic``.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from amcp.amf.ids import check_size, content_key, verify_integrity
from amcp.amf.record import AMFRecord
from amcp.amf.timefmt import parse_ts
from amcp.amf.types import Lifecycle
from amcp.clock import HLC, Timestamp
from amcp.errors import ConflictError, GoneError, PreconditionFailed, Status
from amcp.firewall import Firewall, Verdict
from amcp.retrieval.indexing import embed_text, index_context, index_text
from amcp.retrieval.lexical import build_match, index_terms, query_terms
from amcp.retrieval.search import HybridSearcher
from amcp.store.base import ChangeOp, PutItem, PutResult, RecordFilter, Store, StoredRecord

if TYPE_CHECKING:
    import numpy as np

    from amcp.firewall.contradiction import Claim
    from amcp.firewall.gate import Related
    from amcp.retrieval.embedders import Embedder

NEAR_DUPLICATE = 0.92  # cosine above which a new memory is reported as a near-duplicate
RELATED = 20  # records an attribute statement is compared with (its attribute's best matches)


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    knowledge_id: str
    status: Status  # CREATED, OK (already stored) or NO_CONTENT (state change)
    hlc: int
    duplicate_of: str | None = None
    near_duplicates: tuple[tuple[str, float], ...] = ()
    held: str | None = None  # why the firewall stored it as a draft (docs/firewall.md)
    beside: str | None = None  # the trusted record a held contradiction stands beside

    @property
    def created(self) -> bool:
        return self.status is Status.CREATED


class WritePath:
    store: Store
    clock: HLC
    embedder: Embedder | None
    searcher: HybridSearcher
    firewall: Firewall | None

    def atomic(self) -> AbstractContextManager[None]:  # provided by Memory
        raise NotImplementedError

    def put(
        self,
        record: AMFRecord | Mapping[str, Any],
        *,
        sensitive: bool = False,
        lifecycle: Lifecycle = Lifecycle.ACTIVE,
        dedup: bool = True,
    ) -> WriteOutcome:
        """Store a complete AMF record (from the wire, an import or ``remember``).

        The write rules are ``admit_write``'s (PROFILE §6 order), the same for every path.
        """
        shaped, existing, verdict = admit_write(
            self.store, record, firewall=self.firewall, related=self._related
        )
        if existing is not None:
            return WriteOutcome(shaped.knowledge_id, Status.OK, existing.state.hlc)
        if dedup:
            same = self.store.find_same_content(shaped)
            if same is not None and same.knowledge_id != shaped.knowledge_id:
                return WriteOutcome(same.knowledge_id, Status.OK, same.state.hlc, same.knowledge_id)
        if verdict is not None and verdict.lifecycle is Lifecycle.DRAFT:
            return self._hold(shaped, verdict, sensitive=sensitive)
        return self._store_new(shaped, sensitive=sensitive, lifecycle=lifecycle)

    def _hold(self, record: AMFRecord, verdict: Verdict, *, sensitive: bool) -> WriteOutcome:
        """Store a record the firewall holds: a draft (never served into recall or context)
        whose reason is in the signed log (``ChangeOp.HOLD``), in one transaction."""
        with self.atomic():
            outcome = self._store_new(
                record, sensitive=sensitive, lifecycle=Lifecycle.DRAFT, check_near=False
            )
            if outcome.created:
                self.store.set_state(
                    outcome.knowledge_id, ChangeOp.HOLD, hlc=self.clock.send(),
                    lifecycle=Lifecycle.DRAFT, reason=verdict.reason,
                )
        return replace(outcome, held=verdict.reason, beside=verdict.beside)

    def screening(self) -> BatchRelated:
        """Contradiction candidates for a caller writing many ``put_many`` batches in a row
        (``put_many(screening=...)``): the store's looked up once per attribute."""
        return BatchRelated(self._related)

    def _related(self, record: AMFRecord, claim: Claim) -> list[AMFRecord]:
        """Active records of ``record``'s scopes that may state ``claim``'s attribute: those
        with its subject for a triple claim, else the best lexical matches of its words."""
        flt = RecordFilter(scopes=record.meta.project_scope)
        if claim.subject is not None:
            found = self.store.query(replace(flt, subjects=(claim.subject,)), limit=RELATED)
            return [r.record for r in found if r.record is not None]
        terms = query_terms(claim.key)
        lexical = self.store.capabilities.lexical
        if not terms or lexical is None:
            return []
        ids = [kid for kid, _s in lexical.search_lexical(build_match(terms), flt, RELATED)]
        return [r.record for r in self.store.get_many(ids) if r.record is not None
                and r.state.lifecycle is Lifecycle.ACTIVE]

    def put_batch(
        self, records: Sequence[AMFRecord | Mapping[str, Any]], *, dedup: bool = True
    ) -> list[WriteOutcome]:
        """A batch of records from the wire: every one admitted by ``admit_write`` first (a
        predecessor may come earlier in the same batch), then all stored in one transaction
        — a 400/409/412/410 on any record stores none of them."""
        admitted: list[tuple[AMFRecord, bool]] = []
        present: set[str] = set()
        for raw in records:
            # The firewall screens each record once, in put_many (this pass checks the
            # batch before anything is stored, as put_many's own pass does again).
            shaped, _existing, _verdict = admit_write(self.store, raw, also_present=present)
            present.add(shaped.knowledge_id)
            admitted.append((shaped, False))
        return self.put_many(admitted, dedup=dedup)

    def _store_new(
        self,
        record: AMFRecord,
        *,
        sensitive: bool,
        lifecycle: Lifecycle,
        vector: np.ndarray | None = None,
        check_near: bool = True,
    ) -> WriteOutcome:
        if vector is None:
            vector = self._embed_one(record, sensitive)
        near = self._near_duplicates(record, vector) if vector is not None and check_near else []
        item = self._put_item(record, sensitive=sensitive, lifecycle=lifecycle, vector=vector)
        with self.atomic():
            result = self.store.put_many([item])[0]
            self._index_added(item, result)
        return WriteOutcome(
            result.knowledge_id,
            Status.CREATED if result.created else Status.OK,
            result.hlc,
            near_duplicates=tuple(near),
        )

    def put_many(
        self,
        records: Sequence[tuple[AMFRecord, bool]],
        *,
        lifecycle: Lifecycle = Lifecycle.ACTIVE,
        dedup: bool = True,
        sealed_here: bool = False,
        screening: BatchRelated | None = None,
    ) -> list[WriteOutcome]:
        """Store many validated records in one transaction, embedding them in one batch.

        ``sealed_here``: the records were just composed and sealed by this node
        (``remember_many``), so recomputing their ids, checksums, envelopes and signatures
        proves nothing (``admit_write(sealed_here=True)``); every other rule still applies.

        The bulk path (imports, batch ingest): same rules as ``put`` — identical re-writes
        answer "already stored", same id with other content is a conflict, purged ids are
        refused, and with ``dedup`` a record saying what a stored one (or an earlier one in
        the batch) says answers "already stored" with that one's id — but near-duplicate
        checks are skipped.

        ``screening``: the contradiction candidates to screen with, when one caller writes
        many batches in a row (an import; ``BatchRelated``); by default this batch's own.
        """
        out: list[WriteOutcome | None] = []
        fresh: list[tuple[int, AMFRecord, bool]] = []
        same_in_batch: dict[str, int] = {}  # content key -> index in `fresh`
        copies: list[tuple[int, int]] = []  # (index in `out`, index in `fresh`)
        present: set[str] = set()
        held: list[Verdict | None] = []  # per `fresh` entry
        related = screening if screening is not None else BatchRelated(self._related)
        shaped = [r if isinstance(r, AMFRecord) else AMFRecord.from_dict(r) for r, _s in records]
        # One store read for the whole batch's "is this id stored already?" (admit_write's
        # first rule), not one per record.
        stored = {r.knowledge_id: r for r in self.store.get_many([r.knowledge_id for r in shaped])}
        # And one for "does a stored record say the same?" (dedup), not a round trip each.
        alike = (self.store.find_same_content_many(shaped) if dedup
                 else [None] * len(shaped))
        for given, (_raw, sensitive), same in zip(shaped, records, alike, strict=True):
            record, existing, verdict = admit_write(
                self.store, given, also_present=present, sealed_here=sealed_here,
                firewall=self.firewall, related=related, stored=stored,
            )
            present.add(record.knowledge_id)
            if existing is not None:
                out.append(WriteOutcome(record.knowledge_id, Status.OK, existing.state.hlc))
                continue
            if dedup:
                if same is not None:
                    out.append(
                        WriteOutcome(
                            same.knowledge_id, Status.OK, same.state.hlc, same.knowledge_id
                        )
                    )
                    continue
                key = content_key(record)
                if key in same_in_batch:
                    copies.append((len(out), same_in_batch[key]))
                    out.append(None)
                    continue
                same_in_batch[key] = len(fresh)
            # Only a record this batch stores is a candidate for the next ones (a copy of a
            # stored record is found through the store as that record).
            related.admitted(record, verdict)
            fresh.append((len(out), record, sensitive))
            held.append(verdict if verdict and verdict.lifecycle is Lifecycle.DRAFT else None)
            out.append(None)
        results = self._store_fresh(fresh, held, lifecycle, out)
        for i, first in copies:
            kid, hlc = results[first].knowledge_id, results[first].hlc
            out[i] = WriteOutcome(kid, Status.OK, hlc, kid)
        return [o for o in out if o is not None]

    def _store_fresh(
        self,
        fresh: Sequence[tuple[int, AMFRecord, bool]],
        held: Sequence[Verdict | None],
        lifecycle: Lifecycle,
        out: list[WriteOutcome | None],
    ) -> list[PutResult]:
        """``put_many``'s new records, embedded in one batch and stored in one transaction;
        those the firewall holds go in as drafts with their reason logged (``HOLD``)."""
        vectors = self._embed_many([(r, s) for _i, r, s in fresh])
        with self.atomic():
            items = [
                self._put_item(
                    record,
                    sensitive=sensitive,
                    lifecycle=Lifecycle.DRAFT if held[n] else lifecycle,
                    vector=vectors[n] if vectors is not None else None,
                )
                for n, (_i, record, sensitive) in enumerate(fresh)
            ]
            results = self.store.put_many(items)
            for (i, _r, _s), item, result, hold in zip(fresh, items, results, held, strict=True):
                out[i] = WriteOutcome(
                    result.knowledge_id,
                    Status.CREATED if result.created else Status.OK,
                    result.hlc,
                    held=hold.reason if hold else None,
                )
                if hold is not None and result.created:
                    self.store.set_state(
                        result.knowledge_id, ChangeOp.HOLD, hlc=self.clock.send(),
                        lifecycle=Lifecycle.DRAFT, reason=hold.reason,
                    )
                self._index_added(item, result)
        return results

    def _index_added(self, item: PutItem, result: PutResult) -> None:
        """Tell the vector index about a row this transaction created (active, embedded)."""
        if not result.created or item.vector is None or item.lifecycle is not Lifecycle.ACTIVE:
            return
        rowid = result.rowid
        if rowid is None:  # a store that does not report it
            rowid = self.searcher.rowid_of(result.knowledge_id)
        if rowid is not None:
            self.searcher.added(rowid, item.vector)

    def _put_item(
        self,
        record: AMFRecord,
        *,
        sensitive: bool,
        lifecycle: Lifecycle,
        vector: np.ndarray | None,
    ) -> PutItem:
        """Stamp a record with a fresh HLC and work out what the store needs for it."""
        hlc = self.clock.send()
        if record.causal is None or record.causal.hlc is None:
            record = record.with_causal(hlc=str(Timestamp.unpack(hlc, self.clock.node)))
        expires_at = _expiry(record)
        if expires_at is not None and expires_at <= time.time():
            lifecycle = Lifecycle.ARCHIVED
        return PutItem(
            record,
            hlc,
            vector,
            index_terms(index_text(record, sensitive)),
            index_terms(index_context(record, sensitive)),
            sensitive,
            expires_at,
            lifecycle,
        )

    def _embed_one(self, record: AMFRecord, sensitive: bool) -> np.ndarray | None:
        if self.embedder is None:
            return None
        import numpy as np

        return np.asarray(self.embedder.embed([embed_text(record, sensitive)])[0])

    def _embed_many(self, items: Sequence[tuple[AMFRecord, bool]]) -> np.ndarray | None:
        if self.embedder is None or not items:
            return None
        import numpy as np

        return np.asarray(self.embedder.embed([embed_text(r, s) for r, s in items]))

    def _near_duplicates(self, record: AMFRecord, vector: np.ndarray) -> list[tuple[str, float]]:
        flt = RecordFilter(scopes=record.meta.project_scope)
        hits = self.searcher.vector_search(vector, flt, 3)
        return [(kid, round(s, 4)) for kid, s in hits if s >= NEAR_DUPLICATE]


class BatchRelated:
    """``put_many``'s contradiction candidates: the store's, and the records admitted
    earlier in the same batch that will stand (two records of one import or one sync batch
    can contradict each other, and neither is stored yet when the other is screened).

    One may span several batches (an import: ``put_many(screening=...)``). Then the
    store's candidates for one attribute in one scope are looked up once, not once per
    record stating it (an import states "Alice's manager is ..." many times over; each
    lookup is a lexical search plus a read of its matches), and the records the batches
    admit are added by their claim, exactly. The remembered lookups stand for the store
    as the last batch left it: ``begin`` drops them when anything else committed since
    (the store's generation moved), and ``superseded`` drops records a batch retired.
    """

    MEMO = 4096  # remembered lookups at most (each up to RELATED records); then start over

    def __init__(self, stored: Related) -> None:
        self._stored = stored
        self._by_key: dict[str, list[AMFRecord]] = {}
        self._memo: dict[tuple[tuple[str, ...], str, str | None], list[AMFRecord]] = {}
        self._left_at: int | None = None  # store generation after our last commit

    def __call__(self, record: AMFRecord, claim: Claim) -> list[AMFRecord]:
        scopes = set(record.meta.project_scope)
        mine = [r for r in self._by_key.get(claim.key, ()) if scopes & set(r.meta.project_scope)]
        lookup = (record.meta.project_scope, claim.key, claim.subject)
        stored = self._memo.get(lookup)
        if stored is None:
            if len(self._memo) >= self.MEMO:
                self._memo.clear()
            stored = self._memo[lookup] = list(self._stored(record, claim))
        # A record this import admitted may also be among the store's matches (an earlier
        # batch, committed): listed once.
        seen = {r.knowledge_id for r in mine}
        return [*(r for r in stored if r.knowledge_id not in seen), *mine]

    def admitted(self, record: AMFRecord, verdict: Verdict | None) -> None:
        """Note a record the batch stores active, by the claim its screen found (a held one
        stands beside nothing)."""
        if verdict is not None and verdict.claim is not None:
            self._by_key.setdefault(verdict.claim.key, []).append(record)

    def begin(self, generation: int) -> None:
        """Before a batch: forget the store's candidates if another writer committed since
        ours (what they wrote may state the same attributes)."""
        if generation != self._left_at:
            self._memo.clear()

    def committed(self, generation: int) -> None:
        """After a batch committed: the store now is what the remembered lookups, plus the
        admitted records, describe."""
        self._left_at = generation

    def superseded(self, knowledge_ids: Collection[str]) -> None:
        """Records a batch retired are no longer candidates."""
        gone = set(knowledge_ids)
        if not gone:
            return
        for lookup, found in self._memo.items():
            self._memo[lookup] = [r for r in found if r.knowledge_id not in gone]
        for key, found in self._by_key.items():
            self._by_key[key] = [r for r in found if r.knowledge_id not in gone]


def admit_write(
    store: Store,
    record: AMFRecord | Mapping[str, Any],
    *,
    also_present: Collection[str] = (),
    sealed_here: bool = False,
    firewall: Firewall | None = None,
    related: Related | None = None,
    stored: Mapping[str, StoredRecord] | None = None,
) -> tuple[AMFRecord, StoredRecord | None, Verdict | None]:
    """The write rules, once, for every path (remember, put, batch, node, sync, import).

    PROFILE §6 order: shape (400) → a purged id (410) → the id stored with other content
    (409: core, meta, type, or — when both carry one — the envelope) → id, checksum,
    envelope and signature recomputed (IntegrityError: a violation on the wire) → causal
    predecessors stored here or earlier in the same batch (``also_present``; 412). Returns
    the shaped record and, for an identical re-write (200, idempotent), the stored copy.
    ``sealed_here``: a record this node composed and sealed a moment ago (its integrity and
    size were established by ``seal``), so that step is skipped.

    Then, for a new record, the memory firewall (``Firewall.screen``): its provenance claim
    checked against the writer keys (400 malformed, 403 unverifiable), its text against the
    instruction rules, and — given ``related`` (the single-record path) — against what the
    scope already states. The verdict says whether it is stored active or held as a draft.

    ``stored``: what the store holds under the ids of a batch, read by the caller in one
    read (``put_many``); without it the id is looked up here.
    """
    shaped = record if isinstance(record, AMFRecord) else AMFRecord.from_dict(record)
    existing = stored.get(shaped.knowledge_id) if stored is not None else store.get(
        shaped.knowledge_id)
    if existing is not None:
        before = existing.record
        if before is None:
            raise GoneError(f"{shaped.knowledge_id} was purged and cannot be stored again")
        envelopes = (before.integrity.envelope, shaped.integrity.envelope)
        # 409 is about content, not the claimed checksum: an edited record that kept its old
        # checksum field is a conflict here, not (yet) a forged checksum.
        if (before.core, before.meta, before.type) != (shaped.core, shaped.meta, shaped.type) or (
            None not in envelopes and envelopes[0] != envelopes[1]
        ):
            raise ConflictError(
                f"{shaped.knowledge_id} already exists with different content; write a new "
                "record with causal.supersedes instead"
            )
    if not sealed_here:
        verify_integrity(shaped)
        check_size(shaped)
    if existing is not None:
        return shaped, existing, None
    tiers = store.capabilities.tiers  # evicted records exist: their pointers say so
    pointer = tiers.pointer(shaped.knowledge_id) if tiers is not None else None
    if pointer is not None and pointer.checksum != shaped.integrity.checksum:
        raise ConflictError(f"{shaped.knowledge_id} already exists (evicted from tier 0) with "
                            "different content; write a new record with causal.supersedes")
    refs = (*(shaped.causal.caused_by or ()), shaped.causal.supersedes) if shaped.causal else ()
    for ref in (r for r in refs if r and r not in also_present):
        if store.get(ref) is None and (tiers is None or tiers.pointer(ref) is None):
            raise PreconditionFailed(f"causal predecessor {ref} is not stored here")
    verdict = firewall.screen(shaped, related) if firewall is not None else None
    return shaped, None, verdict


def _expiry(record: AMFRecord) -> float | None:
    ttl = record.vendor_extensions.get("x-ttl")
    if ttl is None or isinstance(ttl, bool) or not isinstance(ttl, int | float):
        return None
    return parse_ts(record.meta.created_at).timestamp() + float(ttl)


__all__ = ["NEAR_DUPLICATE", "BatchRelated", "WriteOutcome", "WritePath", "admit_write"]
