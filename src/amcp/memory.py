"""``Memory``: the one facade the CLI, HTTP API, MCP server, node and integrations call.

It owns the write path (validate → dedup → clock → embed → store, one transaction), the
lifecycle operations (supersede, invalidate, purge, TTL expiry) and recall. It never touches
SQL or sockets: the store port and the retrieval layer do.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from amcp.amf.compose import compose_record, enum_value
from amcp.amf.ids import check_size, content_key, parse_record, verify_integrity
from amcp.amf.record import AMFRecord
from amcp.amf.redact import redact
from amcp.amf.timefmt import normalise_timestamp, parse_ts
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.clock import HLC, Timestamp, node_tag
from amcp.errors import (
    ConflictError,
    EmbeddingMismatchError,
    GoneError,
    NotFoundError,
    PreconditionFailed,
    Status,
    ValidationError,
)
from amcp.keyring import Keyring
from amcp.retrieval.indexing import embed_text, index_context, index_text
from amcp.retrieval.lexical import index_terms
from amcp.retrieval.search import Hit, HybridSearcher
from amcp.store.base import (
    ChangeOp,
    PutItem,
    RecordFilter,
    Store,
    StoredRecord,
    StoreStats,
)
from amcp.store.sqlite import SQLiteStore

if TYPE_CHECKING:  # numpy and embedders load on first use: lexical-only readers skip them
    import numpy as np

    from amcp.retrieval.embedders import Embedder

NEAR_DUPLICATE = 0.92  # cosine above which a new memory is reported as a near-duplicate
MAX_K = 1000
DEFAULT_NODE_URI = "amcp://db.amcp.local"


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    knowledge_id: str
    status: Status  # CREATED, OK (already stored) or NO_CONTENT (state change)
    hlc: int
    duplicate_of: str | None = None
    near_duplicates: tuple[tuple[str, float], ...] = ()

    @property
    def created(self) -> bool:
        return self.status is Status.CREATED


@dataclass(frozen=True, slots=True)
class RecallResult:
    query: str
    hits: tuple[Hit, ...]
    took_ms: float

    @property
    def records(self) -> list[AMFRecord]:
        return [h.item.record for h in self.hits if h.item.record is not None]


@dataclass(slots=True)
class _Sweep:
    last: float = 0.0
    interval: float = 30.0  # TTL sweeps are cheap but not free; recall filters expiry anyway


class Memory:
    """Open (or create) a memory store. Use as a context manager or call ``close()``."""

    def __init__(
        self,
        path: str | Path,
        *,
        embedder: str | Embedder | None = "auto",
        key_dir: str | Path | None = None,
        node_uri: str = DEFAULT_NODE_URI,
        verify_on_open: bool = True,
        store: Store | None = None,
        check_embedder: bool = True,
    ) -> None:
        self.path = Path(path)
        self.keyring = Keyring(Path(key_dir) if key_dir else self.path.parent / "keys")
        self.store: Store = store or SQLiteStore(
            self.path, self.keyring, verify_on_open=verify_on_open
        )
        self.node_uri = node_uri
        self.clock = HLC(node_tag(self.store.get_meta("node_key") or node_uri))
        self.clock.observe(self.store.max_hlc())
        self.embedder = (
            self._resolve_embedder(embedder) if check_embedder or embedder is not None else None
        )
        self.searcher = HybridSearcher(self.store, self.embedder, snapshot=self._snapshot_path())
        self._sweep = _Sweep()

    # ------------------------------------------------------------------ setup

    def _resolve_embedder(self, choice: str | Embedder | None) -> Embedder | None:
        recorded = self.store.get_meta("embedding_model")
        if choice is None or choice == "none":
            if recorded:
                raise EmbeddingMismatchError(
                    f"this store's vectors come from {recorded}; open it with that embedder "
                    "or run `amcp reindex --embedder none`"
                )
            return None
        if isinstance(choice, str):
            from amcp.retrieval.embedders import MINILM_NAMES, get_embedder

            if choice == "auto" and recorded and recorded.startswith("hashing-"):
                choice = "hashing"
            elif recorded and recorded.lower() in MINILM_NAMES and _unpinned_minilm(choice):
                # "auto"/"minilm" reopen a MiniLM store in the precision it was indexed
                # with: one made with minilm-int8 stays int8 without naming it each time.
                choice = recorded
            embedder = get_embedder(choice)
        else:
            embedder = choice
        if recorded is None:
            self.store.set_meta("embedding_model", embedder.model_id)
            self.store.set_meta("embedding_dim", str(embedder.dim))
        elif recorded != embedder.model_id or self.store.get_meta("embedding_dim") != str(
            embedder.dim
        ):
            raise EmbeddingMismatchError(
                f"this store was indexed with {recorded} "
                f"(dim {self.store.get_meta('embedding_dim')}) but the embedder is "
                f"{embedder.model_id} (dim {embedder.dim}); run `amcp reindex` to re-embed it"
            )
        return embedder

    def _snapshot_path(self) -> Path | None:
        # Beside the store file, so copying or deleting the store takes it along; a snapshot
        # names its store and model and is checked against the change log before use.
        return self.path.with_name(self.path.name + ".vectors") if self.embedder else None

    def flush_in_background(self) -> None:
        """For long-running servers (node, HTTP, MCP): buffered access statistics are
        written by a background thread instead of by the read that makes a flush due. A
        store that does not buffer them ignores this."""
        start = getattr(self.store, "flush_in_background", None)
        if start is not None:
            start()

    def close(self) -> None:
        self.searcher.close()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writes

    def remember(
        self, text: str | None = None, *, sensitive: bool = False, **fields: Any
    ) -> WriteOutcome:
        """Store one memory. ``text`` alone is enough; the triple is derived from it.

        ``fields`` are ``compose``'s keyword arguments (type, scope, subject, tags, kind,
        context, created_at, ttl, session, ...). ``sensitive`` records are encrypted at rest
        and redacted in recall and exports unless revealed.
        """
        return self.put(self.compose(text, **fields), sensitive=sensitive)

    def compose(self, text: str | None = None, **fields: Any) -> AMFRecord:
        """Validate fields and build a sealed record signed by this node, without storing it.

        See ``amcp.amf.compose.compose_record`` for the fields.
        """
        fields.setdefault("created_by", self.node_uri)
        return compose_record(text, key=self.keyring.signing_key, **fields)

    def put(
        self,
        record: AMFRecord | Mapping[str, Any],
        *,
        sensitive: bool = False,
        lifecycle: Lifecycle = Lifecycle.ACTIVE,
        dedup: bool = True,
    ) -> WriteOutcome:
        """Store a complete AMF record (from the wire, an import or ``remember``).

        Order as PROFILE §6: shape (400) → same id, other content (409) → id/checksum
        (IntegrityError) → causal predecessors exist (412) → store (201, or 200 if stored).
        """
        if not isinstance(record, AMFRecord):
            shaped = AMFRecord.from_dict(record)
            existing = self.store.get(shaped.knowledge_id)
            if existing is not None and existing.record is not None:
                before = existing.record
                # 409 is about content, not the claimed checksum: an edited record that kept
                # its old checksum field is a conflict here, not (yet) a forged checksum.
                if (before.core, before.meta, before.type) != (
                    shaped.core,
                    shaped.meta,
                    shaped.type,
                ):
                    raise ConflictError(
                        f"{shaped.knowledge_id} already exists with different content; write a "
                        "new record with causal.supersedes instead"
                    )
            record = parse_record(record)
        else:
            verify_integrity(record)  # already shaped: only its id/checksum/signature to check
            check_size(record)
        refs = (*(record.causal.caused_by or ()), record.causal.supersedes) if record.causal else ()
        for ref in (r for r in refs if r):
            if self.store.get(ref) is None:
                raise PreconditionFailed(f"causal predecessor {ref} is not stored here")
        if dedup:
            same = self.store.find_same_content(record)
            if same is not None and same.knowledge_id != record.knowledge_id:
                return WriteOutcome(same.knowledge_id, Status.OK, same.state.hlc, same.knowledge_id)
        return self._store_new(record, sensitive=sensitive, lifecycle=lifecycle)

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[WriteOutcome]:
        """Batch ``remember``: each item holds remember's keyword arguments (``text`` …).

        Composes and validates every item first (a bad item fails the batch before anything
        is stored), then embeds all texts in one batch and stores them in one transaction.
        """
        composed: list[tuple[AMFRecord, bool]] = []
        for item in items:
            fields = dict(item)
            sensitive = bool(fields.pop("sensitive", False))
            composed.append((self.compose(fields.pop("text", None), **fields), sensitive))
        return self.put_many(composed)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """A store transaction that also keeps the derived vector index honest: if it rolls
        back, the index (which may have been told about rows that no longer exist, and whose
        rowids SQLite may reuse) is dropped and rebuilt from the store on next use."""
        try:
            with self.store.atomic():
                yield
        except BaseException:
            self.searcher.reset()
            raise

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
            if result.created and vector is not None and item.lifecycle is Lifecycle.ACTIVE:
                rowid = result.rowid
                if rowid is None:  # a store that does not report it
                    rowid = self.store.rowid_of(record.knowledge_id)
                if rowid is not None:
                    self.searcher.added(rowid, vector)
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
    ) -> list[WriteOutcome]:
        """Store many validated records in one transaction, embedding them in one batch.

        The bulk path (imports, batch ingest): same rules as ``put`` — identical re-writes
        answer "already stored", same id with other content is a conflict, purged ids are
        refused, and with ``dedup`` a record saying what a stored one (or an earlier one in
        the batch) says answers "already stored" with that one's id — but near-duplicate
        checks are skipped.
        """
        out: list[WriteOutcome | None] = []
        fresh: list[tuple[int, AMFRecord, bool]] = []
        same_in_batch: dict[str, int] = {}  # content key -> index in `fresh`
        copies: list[tuple[int, int]] = []  # (index in `out`, index in `fresh`)
        for record, sensitive in records:
            existing = self.store.get(record.knowledge_id)
            if existing is not None:
                if existing.record is None:
                    raise GoneError(f"{record.knowledge_id} was purged")
                if existing.record.integrity.checksum != record.integrity.checksum:
                    raise ConflictError(f"{record.knowledge_id} exists with different content")
                out.append(WriteOutcome(record.knowledge_id, Status.OK, existing.state.hlc))
                continue
            if dedup:
                same = self.store.find_same_content(record)
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
            fresh.append((len(out), record, sensitive))
            out.append(None)
        vectors = self._embed_many([(r, s) for _i, r, s in fresh])
        with self.atomic():
            items: list[PutItem] = []
            for n, (_i, record, sensitive) in enumerate(fresh):
                items.append(
                    self._put_item(
                        record,
                        sensitive=sensitive,
                        lifecycle=lifecycle,
                        vector=vectors[n] if vectors is not None else None,
                    )
                )
            results = self.store.put_many(items)
            for (i, _r, _s), item, result in zip(fresh, items, results, strict=True):
                out[i] = WriteOutcome(
                    result.knowledge_id,
                    Status.CREATED if result.created else Status.OK,
                    result.hlc,
                )
                if (
                    result.created
                    and item.vector is not None
                    and item.lifecycle is Lifecycle.ACTIVE
                ):
                    rowid = result.rowid
                    if rowid is None:
                        rowid = self.store.rowid_of(result.knowledge_id)
                    if rowid is not None:
                        self.searcher.added(rowid, item.vector)
        for i, first in copies:
            kid, hlc = results[first].knowledge_id, results[first].hlc
            out[i] = WriteOutcome(kid, Status.OK, hlc, kid)
        return [o for o in out if o is not None]

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

    def supersede(
        self, old_id: str, text: str | None = None, *, sensitive: bool = False, **fields: Any
    ) -> WriteOutcome:
        """Write a new record that replaces ``old_id``; the old one becomes superseded.

        Fields not given are inherited from the old record (type, scope, subject, tags, kind).
        """
        old = self.get(old_id)
        if old.state.lifecycle is not Lifecycle.ACTIVE:
            raise ConflictError(
                f"{old_id} is {old.state.lifecycle.value}"
                + (f" (by {old.state.superseded_by})" if old.state.superseded_by else "")
                + "; only an active record can be superseded"
            )
        assert old.record is not None
        base = old.record
        fields.setdefault("type", base.type)
        fields.setdefault("scope", base.meta.project_scope)
        fields.setdefault("subject", base.core.subject)
        fields.setdefault("tags", base.tags or None)
        fields.setdefault("kind", base.kind)
        record = self.compose(text, supersedes=old_id, **fields)
        if record.integrity.checksum == base.integrity.checksum:
            raise ConflictError("the new content is identical to the record it supersedes")
        with self.atomic():
            outcome = self.put(record, sensitive=sensitive, dedup=False)
            self.store.set_state(
                old_id,
                ChangeOp.SUPERSEDE,
                hlc=self.clock.send(),
                lifecycle=Lifecycle.SUPERSEDED,
                superseded_by=outcome.knowledge_id,
            )
        self.searcher.removed(self.store.rowid_of(old_id))
        return outcome

    def invalidate(self, knowledge_id: str, reason: str) -> WriteOutcome:
        """Mark a record as wrong. Never deletes; the reason is kept and synced."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("reason", "invalidation needs a reason")
        item = self.get(knowledge_id)
        if item.state.lifecycle is Lifecycle.INVALIDATED:
            return WriteOutcome(knowledge_id, Status.NO_CONTENT, item.state.hlc)
        hlc = self.clock.send()
        self.store.set_state(
            knowledge_id,
            ChangeOp.INVALIDATE,
            hlc=hlc,
            lifecycle=Lifecycle.INVALIDATED,
            reason=reason.strip(),
        )
        self.searcher.removed(self.store.rowid_of(knowledge_id))
        return WriteOutcome(knowledge_id, Status.NO_CONTENT, hlc)

    def purge(self, knowledge_id: str, reason: str | None = None) -> WriteOutcome:
        """Privacy erasure: wipe the content, keep a tombstone so it never comes back."""
        found = self.store.get(knowledge_id)
        if found is None:
            raise NotFoundError(f"no record {knowledge_id}")
        if found.state.lifecycle is Lifecycle.PURGED:
            return WriteOutcome(knowledge_id, Status.NO_CONTENT, found.state.hlc)
        rowid = self.store.rowid_of(knowledge_id)
        hlc = self.clock.send()
        self.store.purge(knowledge_id, hlc=hlc, reason=reason)
        self.searcher.removed(rowid)
        return WriteOutcome(knowledge_id, Status.NO_CONTENT, hlc)

    def expire(self, now: float | None = None) -> list[str]:
        """Archive every active record whose TTL has run out. Returns their ids."""
        now = time.time() if now is None else now
        done: list[str] = []
        while batch := self.store.due_for_expiry(now):
            for kid in batch:
                self.store.set_state(
                    kid,
                    ChangeOp.ARCHIVE,
                    hlc=self.clock.send(),
                    lifecycle=Lifecycle.ARCHIVED,
                    reason="ttl expired",
                )
                self.searcher.removed(self.store.rowid_of(kid))
                done.append(kid)
        return done

    # ------------------------------------------------------------------ reads

    def get(self, knowledge_id: str) -> StoredRecord:
        found = self.store.get(knowledge_id)
        if found is None:
            raise NotFoundError(f"no record {knowledge_id}")
        if found.record is None:
            raise GoneError(f"{knowledge_id} was purged")
        return found

    def read(self, ids: Sequence[str], *, reveal: bool = False) -> list[StoredRecord]:
        found = self.store.get_many(list(ids))
        self.store.touch([f.knowledge_id for f in found if f.record is not None], time.time())
        return [self._view(f, reveal) for f in found]

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        scope: str | Sequence[str] | None = None,
        types: Sequence[KnowledgeType | str] | None = None,
        tags: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        created_after: Any = None,
        created_before: Any = None,
        lifecycles: Sequence[Lifecycle | str] | None = (Lifecycle.ACTIVE,),
        reveal: bool = False,
        touch: bool = True,
    ) -> RecallResult:
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query", "must be non-empty text")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ValidationError("k", f"must be an integer from 1 to {MAX_K}")
        started = time.perf_counter()
        now = time.time()
        self._maybe_expire(now)
        flt = RecordFilter(
            scopes=((scope,) if isinstance(scope, str) else tuple(scope)) if scope else None,
            types=tuple(enum_value(KnowledgeType, t, "types") for t in types) if types else None,
            tags=tuple(tags) if tags else None,
            kinds=tuple(kinds) if kinds else None,
            lifecycles=tuple(enum_value(Lifecycle, lc, "lifecycles") for lc in lifecycles)
            if lifecycles
            else None,
            created_after=normalise_timestamp(created_after, "created_after")
            if created_after is not None
            else None,
            created_before=normalise_timestamp(created_before, "created_before")
            if created_before is not None
            else None,
            now=now,
        )
        hits = self.searcher.search(query, flt, k, now=now)
        if touch and hits:
            self.store.touch([h.knowledge_id for h in hits], now)
        shown = tuple(replace(h, item=self._view(h.item, reveal)) for h in hits)
        return RecallResult(query, shown, (time.perf_counter() - started) * 1000)

    def list_records(
        self,
        flt: RecordFilter | None = None,
        *,
        limit: int = 100,
        after: str | None = None,
        reveal: bool = False,
    ) -> list[StoredRecord]:
        rows = self.store.query(flt or RecordFilter(), limit=limit, after=after)
        return [self._view(r, reveal) for r in rows]

    def stats(self) -> StoreStats:
        return self.store.stats()

    def _view(self, item: StoredRecord, reveal: bool) -> StoredRecord:
        if item.record is None:
            return item
        state = item.state
        if not state.superseded_by and not (state.sensitive and not reveal):
            return item  # the stored view is the view: no copy (every read by id passes here)
        record = item.record
        if state.superseded_by:
            record = record.with_causal(superseded_by=state.superseded_by)
        if state.sensitive and not reveal:
            record = redact(record)
        return replace(item, record=record)

    def _maybe_expire(self, now: float) -> None:
        if now - self._sweep.last >= self._sweep.interval:
            self._sweep.last = now
            self.expire(now)

    # ------------------------------------------------------------------ embedding

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

    # ------------------------------------------------------------------ maintenance

    def reindex(self, embedder: str | Embedder | None = "auto") -> int:
        """Re-embed every live record with ``embedder`` and record the new model."""
        from amcp.retrieval.embedders import get_embedder
        from amcp.retrieval.indexing import reindex

        new = get_embedder(embedder) if isinstance(embedder, str) else embedder
        with self.atomic():
            count = reindex(self.store, new)
        self.embedder = new
        self.searcher = HybridSearcher(self.store, new, snapshot=self._snapshot_path())
        return count

    # ------------------------------------------------------------------ portability

    def export(self, out: TextIO, *, include_sensitive: bool = False) -> Any:
        from amcp.portability.ndjson import export_ndjson

        return export_ndjson(self, out, include_sensitive=include_sensitive)

    def import_(
        self, source: Iterable[str | bytes], *, batch: int = 256, progress: Any = None
    ) -> Any:
        from amcp.portability.ndjson import import_ndjson

        return import_ndjson(self, source, batch=batch, progress=progress)

    # ------------------------------------------------------------------ query, context, evolution
    # Thin delegations: the logic lives in amcp.amql, amcp.cse and amcp.evolution.

    def query(self, amql: str, *, scopes: Sequence[str] | None = None) -> Any:
        """Run one AMQL statement (RECALL, REMEMBER, FORGET, DISTILL)."""
        from amcp.amql.planner import run_query

        return run_query(self, amql, scopes=scopes)

    def context(
        self,
        task: str,
        *,
        budget_tokens: int = 8000,
        project: str | None = None,
        scopes: Sequence[str] | None = None,
        working_tokens: int | None = None,
        now: float | None = None,
    ) -> Any:
        """A deterministic cold-boot pack for ``task`` within ``budget_tokens`` (PROFILE §7)."""
        from amcp.cse.pack import build_pack

        return build_pack(
            self,
            task,
            budget_tokens=budget_tokens,
            project=project,
            scopes=scopes,
            working_tokens=working_tokens,
            now=now,
        )

    def outcome(self, knowledge_ids: Sequence[str], result: str) -> Any:
        """Learn from an outcome (success / failure / neutral) of records an agent used."""
        from amcp.evolution.outcomes import apply_outcome

        return apply_outcome(self, knowledge_ids, result)

    def signal(self, signal: Mapping[str, Any]) -> Any:
        """Store a QEF signal as KT-SIGNAL and update the records it references."""
        from amcp.evolution.qef import record_signal

        return record_signal(self, signal)

    def fire_event(self, name: str) -> list[str]:
        """Invalidate every record whose decay model lists event ``name``."""
        from amcp.evolution.events import fire_event

        return fire_event(self, name)

    def distill(
        self, from_amql: str, *, into: str = "KT-PRINCIPLE", confidence_threshold: float = 0.0
    ) -> Any:
        """Group related records and write a principle whose caused_by cites them."""
        from amcp.evolution.distill import distill

        return distill(self, from_amql, into=into, confidence_threshold=confidence_threshold)


def _unpinned_minilm(choice: str) -> bool:
    """``auto`` or a MiniLM name that leaves the precision open (``minilm``)."""
    from amcp.retrieval.embedders import MINILM_NAMES

    key = choice.strip().lower()
    return key in ("auto", "default", "") or (key in MINILM_NAMES and MINILM_NAMES[key] is None)


def _expiry(record: AMFRecord) -> float | None:
    ttl = record.vendor_extensions.get("x-ttl")
    if ttl is None or isinstance(ttl, bool) or not isinstance(ttl, int | float):
        return None
    return parse_ts(record.meta.created_at).timestamp() + float(ttl)


__all__ = ["Memory", "RecallResult", "WriteOutcome"]
