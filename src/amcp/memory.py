"""``Memory``: the one facade the CLI, HTTP API, MCP server, node and integrations call.

It owns the write path (``memory_writes``: validate → dedup → clock → embed → store, one
transaction), the lifecycle operations (supersede, invalidate, purge, TTL expiry) and
recall. It never touches SQL or sockets: the store port and the retrieval layer do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from amcp.amf.compose import compose_record, enum_value
from amcp.amf.record import AMFRecord
from amcp.amf.redact import redact
from amcp.amf.timefmt import normalise_timestamp
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.clock import HLC, node_tag
from amcp.errors import (
    ConflictError,
    GoneError,
    NotFoundError,
    Status,
    StoreIntegrityError,
    ValidationError,
)
from amcp.evolution import conflicts
from amcp.firewall import Firewall, Provenance, Trust, WriterKeys
from amcp.firewall import serve as firewall_serve
from amcp.keyring import Keyring
from amcp.memory_review import ReviewPath
from amcp.memory_writes import WriteOutcome, WritePath
from amcp.ports import RecallResult
from amcp.refs import resolve_ref
from amcp.retrieval.choice import resolve_embedder
from amcp.retrieval.search import HybridSearcher
from amcp.store.base import (
    ChangeOp,
    RecordFilter,
    Store,
    StoredRecord,
    StoreStats,
    cache_miss,
    pointer_of,
)
from amcp.store.owner import check_file
from amcp.store.rowseal import left_out_warning
from amcp.store.url import Backend, StoreLocation, open_store, parse_store_url

if TYPE_CHECKING:  # embedders load on first use: lexical-only readers skip them
    from amcp.amql.planner import QueryResult
    from amcp.cse.pack import Pack
    from amcp.evolution.outcomes import WeightUpdate
    from amcp.evolution.qef import SignalResult
    from amcp.ndjson import ExportReport, ImportReport
    from amcp.retrieval.embedders import Embedder

MAX_K = 1000
DEFAULT_NODE_URI = "amcp://db.amcp.local"
# Where a write that names no scope goes when its writer is not named either: this node's
# own user, never "*" (a global record shows up in every user's recall).
DEFAULT_SCOPE = "user:local"


def record_filter(
    *,
    scope: str | Sequence[str] | None = None,
    types: Sequence[KnowledgeType | str] | None = None,
    tags: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    lifecycles: Sequence[Lifecycle | str] | None = (Lifecycle.ACTIVE,),
    created_after: Any = None,
    created_before: Any = None,
    now: float | None = None,
) -> RecordFilter:
    """A store filter from the values a caller typed, each checked and named if wrong."""
    return RecordFilter(
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


class Memory(WritePath, ReviewPath):
    """Open (or create) a memory store. Use as a context manager or call ``close()``."""

    def __init__(
        self,
        path: str | Path | StoreLocation,
        *,
        embedder: str | Embedder | None = "auto",
        key_dir: str | Path | None = None,
        node_uri: str = DEFAULT_NODE_URI,
        default_scope: str = DEFAULT_SCOPE,
        verify_on_open: bool = True,
        store: Store | None = None,
        check_embedder: bool = True,
        witness_dirs: Sequence[str | Path] | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        # A path ("~/.amcp/memory.db", as the README writes it), sqlite:… or postgresql://…
        # (amcp.store.url: an unknown scheme is refused, never made a file name).
        self.location = path if isinstance(path, StoreLocation) else parse_store_url(path)
        # The SQLite file, or for PostgreSQL the local anchor its keys hang from.
        self.path = self.location.anchor
        if store is None and self.location.backend is Backend.SQLITE:
            check_file(self.path)  # before the key directory or anything else is made beside it
        if not self.path.parent.is_dir():  # private from the start: it holds memories and keys
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # witness_dirs: where the change-log head is witnessed (default: the per-user state
        # directory, outside the store's own; see amcp.paths). A throwaway store (the demo)
        # keeps its witness beside it, so removing the directory removes everything.
        self.keyring = Keyring(
            Path(key_dir) if key_dir else self.path.parent / "keys",
            witness_dirs=[Path(d) for d in witness_dirs] if witness_dirs is not None else None,
        )
        self.store: Store = store or open_store(
            self.location, self.keyring, verify_on_open=verify_on_open
        )
        self.node_uri = node_uri
        self.default_scope = default_scope
        self._writes = threading.RLock()  # see atomic(): the one place writes take turns
        # wall_clock (seconds): what a new record's created_at and the HLC's physical part
        # read; tests pass a clock they move instead of sleeping.
        self.wall_clock = wall_clock
        self.clock = HLC(node_tag(self.store.get_meta("node_key") or node_uri),
                         wall=lambda: int(wall_clock() * 1000))
        self.clock.observe(self.store.max_hlc())
        self.embedder: Embedder | None = (
            resolve_embedder(self.store, embedder)
            if check_embedder or embedder is not None
            else None
        )
        # The store's optional parts, wired here once (docs/store.md): access statistics
        # for touch/flush; the searcher takes the lexical index, vectors and change feed.
        self.access = self.store.capabilities.access
        self.searcher = HybridSearcher(self.store, self.embedder, snapshot=self._snapshot_path())
        self.firewall: Firewall | None = Firewall(
            WriterKeys(self.keyring.directory), self._local_public_key()
        )

    def _local_public_key(self) -> str:
        from amcp.amf.ids import public_key_text

        return public_key_text(self.keyring.signing_key.public_key())

    # ------------------------------------------------------------------ setup

    def _snapshot_path(self) -> Path | None:
        # Beside the store file, so copying or deleting the store takes it along; a snapshot
        # names its store and model and is checked against the change log before use.
        if self.embedder is None or self.location.backend is not Backend.SQLITE:
            return None  # a shared database's vectors change under other processes
        return self.path.with_name(self.path.name + ".vectors")

    def flush_in_background(self) -> None:
        """For long-running servers (node, HTTP, MCP): buffered access statistics are
        written by a background thread instead of by the read that makes a flush due. A
        store that does not buffer them ignores this."""
        if self.access is not None:
            self.access.flush_in_background()

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
        context, created_at, ttl, session, ...) and ``provenance`` (origin, writer,
        signature: docs/firewall.md; without it the record is this node's own). ``sensitive``
        records are encrypted at rest and redacted in recall and exports unless revealed.
        The outcome's ``held`` says why the firewall stored it as a draft, if it did.
        """
        if sensitive:
            fields = self._salted(fields)
        return self.put(self.compose(text, **fields), sensitive=sensitive)

    def _salted(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A sensitive record's creator gets a random fragment (``#salt=…``, 128 bits).

        Its knowledge id, checksum and envelope are unkeyed hashes of its content, stored in
        clear (they are how records are named and checked everywhere): without unknown
        input in what they hash, anyone holding the file could confirm a guessed secret —
        a 4-digit PIN is 10,000 guesses. The creator is hashed into all three and is still
        this node's URI to anyone reading it."""
        import secrets

        creator = fields.get("created_by") or self.node_uri
        return {**fields, "created_by": f"{creator}#salt={secrets.token_urlsafe(16)}"}

    def compose(self, text: str | None = None, **fields: Any) -> AMFRecord:
        """Validate fields and build a sealed record signed by this node, without storing it.

        See ``amcp.amf.compose.compose_record`` for the fields.
        """
        fields.setdefault("created_by", self.node_uri)
        if fields.get("created_at") is None:
            fields["created_at"] = self.wall_clock()
        claim = fields.pop("provenance", None)
        if fields.get("scope") is None:
            fields["scope"] = self.own_scope(claim)
        if claim is not None:
            # In the extensions, so the envelope and the signed log cover the claim.
            ext = dict(fields.get("extensions") or {})
            ext["x-provenance"] = Provenance.parse(claim).to_ext()
            fields["extensions"] = ext
        return compose_record(text, key=self.keyring.signing_key, **fields)

    def own_scope(self, claim: Any = None) -> str:
        """The scope of a write that names none: its writer's (``user:<writer>``), else
        this node's ``default_scope``. ``*`` is only ever written when asked for."""
        writer = Provenance.parse(claim).writer if claim is not None else None
        return f"user:{writer}" if writer else self.default_scope

    def remember_many(self, items: Iterable[Mapping[str, Any]]) -> list[WriteOutcome]:
        """Batch ``remember``: each item holds remember's keyword arguments (``text`` …).

        Composes and validates every item first (a bad item fails the batch before anything
        is stored), then embeds all texts in one batch and stores them in one transaction.
        """
        composed: list[tuple[AMFRecord, bool]] = []
        for item in items:
            fields = dict(item)
            sensitive = bool(fields.pop("sensitive", False))
            if sensitive:
                fields = self._salted(fields)
            composed.append((self.compose(fields.pop("text", None), **fields), sensitive))
        return self.put_many(composed, sealed_here=True)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """The one place writes are serialised (docs/architecture.md, "Concurrency"): this
        process's writers take turns here, and each turn is one store transaction, so a
        write's checks (is the record still active? a draft?) and its changes are one
        atomic step even with other threads writing. Nested calls join the outer turn. If
        the transaction rolls back, the derived vector index (which may have been told about
        rows that no longer exist, and whose rowids SQLite may reuse) is dropped and rebuilt
        from the store on next use."""
        try:
            with self._writes, self.store.atomic():
                yield
        except BaseException:
            self.searcher.reset()
            raise

    def supersede(
        self, old_id: str, text: str | None = None, *, sensitive: bool = False, **fields: Any
    ) -> WriteOutcome:
        """Write a new record that replaces ``old_id``; the old one becomes superseded.

        Fields not given are inherited from the old record (type, scope, subject, tags, kind).
        The check that the old record is active is part of the write's transaction: of two
        concurrent supersedes of one record, the second gets 409.
        """
        with self.atomic():
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
            outcome = self.put(record, sensitive=sensitive, dedup=False)
            self.store.set_state(
                old_id,
                ChangeOp.SUPERSEDE,
                hlc=self.clock.send(),
                lifecycle=Lifecycle.SUPERSEDED,
                superseded_by=outcome.knowledge_id,
            )
        self.searcher.drop(old_id)
        return outcome

    def invalidate(self, knowledge_id: str, reason: str) -> WriteOutcome:
        """Mark a record as wrong. Never deletes; the reason is kept and synced."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("reason", "invalidation needs a reason")
        with self.atomic():
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
        self.searcher.drop(knowledge_id)
        return WriteOutcome(knowledge_id, Status.NO_CONTENT, hlc)

    def purge(self, knowledge_id: str, reason: str | None = None) -> WriteOutcome:
        """Privacy erasure: wipe the content, keep a tombstone so it never comes back. A
        purged record claims nothing: what it superseded is decided again, as on every node
        the purge reaches by sync (PROFILE §10, ``evolution.conflicts``)."""
        with self.atomic():
            found = self.store.get(knowledge_id)
            pred = conflicts.superseded_by_purge(self, knowledge_id)
            if found is None and pointer_of(self.store, knowledge_id):  # evicted: purge beats
                hlc = self.clock.send()  # it; the tombstone goes to the holder through sync
                self.store.put_tombstone(knowledge_id, hlc=hlc, reason=reason)
                if pred:
                    conflicts.resolve(self, pred)
                return WriteOutcome(knowledge_id, Status.NO_CONTENT, hlc)
            if found is None:
                raise NotFoundError(f"no record {knowledge_id}")
            if found.state.lifecycle is Lifecycle.PURGED:
                return WriteOutcome(knowledge_id, Status.NO_CONTENT, found.state.hlc)
            rowid = self.searcher.rowid_of(knowledge_id)
            hlc = self.clock.send()
            self.store.purge(knowledge_id, hlc=hlc, reason=reason)
            if pred:
                conflicts.resolve(self, pred)
        self.searcher.removed(rowid)
        return WriteOutcome(knowledge_id, Status.NO_CONTENT, hlc)

    def maintain(self, now: float | None = None) -> list[str]:
        """What a long-running server runs as its own periodic task, never inside a read
        (issue 15: a recall used to run the TTL sweep, a write, on whatever thread called
        it): archive every record whose TTL has run out. Reads already leave expired records
        out by their expiry, so a process that never maintains serves the same answers; the
        archive makes it lasting and logged. Returns the ids archived."""
        return self.expire(now)

    def expire(self, now: float | None = None) -> list[str]:
        """Archive every active record whose TTL has run out. Returns their ids."""
        now = time.time() if now is None else now
        done: list[str] = []
        while True:
            with self.atomic():  # the batch is found and archived in one turn
                batch = self.store.due_for_expiry(now)
                for kid in batch:
                    self.store.set_state(
                        kid,
                        ChangeOp.ARCHIVE,
                        hlc=self.clock.send(),
                        lifecycle=Lifecycle.ARCHIVED,
                        reason="ttl expired",
                    )
            if not batch:
                return done
            for kid in batch:
                self.searcher.drop(kid)
            done.extend(batch)

    # ------------------------------------------------------------------ reads

    def resolve_id(self, ref: str, *, visible: Callable[[str], bool] | None = None) -> str:
        """The knowledge id ``ref`` names: a whole id, or a unique prefix of one as people
        type it (``K-3f2a``, ``3f2a``, a copied ``K-3f2a…``). Every interface that takes an
        id from a person resolves it here (``amcp.refs``); NotFoundError when none matches,
        AmbiguousIdError listing the candidates when several do."""
        return resolve_ref(self.store, ref, visible=visible)

    def get(self, knowledge_id: str) -> StoredRecord:
        found = self.store.get(knowledge_id)
        if found is None:
            why = self.store.quarantined().get(knowledge_id)
            if why is not None:  # a problem of this store, not of the caller (500)
                raise StoreIntegrityError(
                    f"{knowledge_id} is quarantined: {why}; run `amcp verify` for the report"
                )
            if (pointer := pointer_of(self.store, knowledge_id)) is not None:
                raise cache_miss(pointer)  # evicted: it exists at a higher tier (sync.tiers)
            raise NotFoundError(f"no record {knowledge_id}")
        if found.record is None:
            raise GoneError(f"{knowledge_id} was purged")
        return found

    def read(self, ids: Sequence[str], *, reveal: bool = False) -> list[StoredRecord]:
        found = self.store.get_many(list(ids))
        self.touch([f.knowledge_id for f in found if f.record is not None], time.time())
        return [self._view(f, reveal) for f in found]

    def touch(self, knowledge_ids: Sequence[str], when: float) -> None:
        if self.access is not None and knowledge_ids:
            self.access.touch(knowledge_ids, when)

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
        now = time.time()  # an expired record is left out by its expiry; maintain() archives it
        tags, wanted = firewall_serve.split_tags(tags)
        flt = record_filter(
            scope=scope, types=types, tags=tags, kinds=kinds, lifecycles=lifecycles,
            created_after=created_after, created_before=created_before, now=now,
        )
        hits = self.searcher.search(query, flt, firewall_serve.window(k, MAX_K), now=now)
        trust: dict[str, Trust] = {}
        if self.firewall is not None:
            hits, trust = firewall_serve.screen_hits(hits, self.firewall, k, wanted)
        hits = hits[:k]
        if touch and hits:
            self.touch([h.knowledge_id for h in hits], now)
        shown = tuple(replace(h, item=self._served(h.item, reveal, trust)) for h in hits)
        return RecallResult(query, shown, (time.perf_counter() - started) * 1000, trust)

    def _served(self, item: StoredRecord, reveal: bool, trust: Mapping[str, Trust]) -> StoredRecord:
        """Recall's view: ``_view``, and instruction-shaped text withheld (firewall)."""
        item = self._view(item, reveal)
        t = trust.get(item.knowledge_id)
        if t is None or not t.instruction or item.record is None:
            return item
        return replace(item, record=firewall_serve.withheld(item.record, t))

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

    def list_filtered(
        self,
        *,
        scopes: str | Sequence[str] | None = None,
        types: Sequence[KnowledgeType | str] | None = None,
        kinds: Sequence[str] | None = None,
        lifecycles: Sequence[Lifecycle | str] | None = (Lifecycle.ACTIVE,),
        created_after: Any = None,
        created_before: Any = None,
        limit: int = 100,
        reveal: bool = False,
    ) -> list[StoredRecord]:
        """``list_records`` with the filters people name (``amcp list``, MCP memory_list),
        validated the way recall validates them; in the order the records were stored."""
        flt = record_filter(
            scope=scopes, types=types, kinds=kinds, lifecycles=lifecycles,
            created_after=created_after, created_before=created_before, now=time.time(),
        )
        return self.list_records(flt, limit=limit, reveal=reveal)

    def stats(self) -> StoreStats:
        return self.store.stats()

    def warnings(self) -> tuple[str, ...]:
        """What every answer should carry: records that failed verification are left out
        of it (quarantined). Empty when the store is whole."""
        bad = self.store.quarantined()
        found = self.store.integrity_warnings()
        if bad:
            found = (left_out_warning(len(bad)), *found)
        return found

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

    def export(self, out: TextIO, *, include_sensitive: bool = False) -> ExportReport:
        from amcp.ndjson import export_ndjson

        return export_ndjson(self, out, include_sensitive=include_sensitive)

    def import_(
        self, source: Iterable[str | bytes], *, batch: int = 256, progress: Any = None
    ) -> ImportReport:
        from amcp.ndjson import import_ndjson

        return import_ndjson(self, source, batch=batch, progress=progress)

    # ------------------------------------------------------------------ query, context, evolution
    # Thin delegations: the logic lives in amcp.amql, amcp.cse and amcp.evolution.

    def query(
        self, amql: str, *, scopes: Sequence[str] | None = None, project: str | None = None
    ) -> QueryResult:
        """Run one AMQL statement (RECALL, REMEMBER, FORGET, DISTILL); ``project`` is what
        ``current_project()`` means (default: the first scope given)."""
        from amcp.amql.run import run_query

        return run_query(self, amql, scopes=scopes, project=project)

    def context(
        self,
        task: str,
        *,
        budget_tokens: int = 8000,
        project: str | None = None,
        scopes: Sequence[str] | None = None,
        working_tokens: int | None = None,
        now: float | None = None,
    ) -> Pack:
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

    def outcome(self, knowledge_ids: Sequence[str], result: str) -> list[WeightUpdate]:
        """Learn from an outcome (success / failure / neutral) of records an agent used."""
        from amcp.evolution.outcomes import apply_outcome

        return apply_outcome(self, knowledge_ids, result)

    def signal(self, signal: Mapping[str, Any]) -> SignalResult:
        """Store a QEF signal as KT-SIGNAL and update the records it references."""
        from amcp.evolution.qef import record_signal

        return record_signal(self, signal)

    def fire_event(self, name: str) -> list[str]:
        """Invalidate every record whose decay model lists event ``name``."""
        from amcp.evolution.events import fire_event

        return fire_event(self, name)

    def distill(
        self, from_amql: str, *, into: str = "KT-PRINCIPLE", confidence_threshold: float = 0.0
    ) -> WriteOutcome:
        """Group related records and write a principle whose caused_by cites them."""
        from amcp.amql.distill import distill

        return distill(self, from_amql, into=into, confidence_threshold=confidence_threshold)


__all__ = ["Memory", "RecallResult", "WriteOutcome"]
