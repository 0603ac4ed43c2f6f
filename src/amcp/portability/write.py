"""Pass two: records into the store, one atomic batch at a time.

Each batch (``ImportOptions.batch`` records) is composed, embedded and stored in one
transaction with its supersessions: it commits whole or not at all. A killed import keeps
the batches it committed; running it again finds them by source key (``Known``) and
writes only the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.memory import Memory
from amcp.portability.model import KIND_TYPE, RecordSpec
from amcp.portability.plan import Known, dedup_key
from amcp.store.base import ChangeOp, RecordFilter

IMPORTED_TAG = "imported"


@dataclass(frozen=True, slots=True)
class Written:
    source_key: str
    knowledge_id: str
    created: bool
    merged_into: str | None  # the store already held the same content (put_many dedup)
    spec: RecordSpec


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int
    started: float

    @property
    def rate(self) -> float:
        return self.done / max(time.perf_counter() - self.started, 1e-9)


def known_imports(memory: Memory) -> Known:
    """Every active imported record, by source key and by dedup key (one store scan)."""
    known = Known()
    after: str | None = None
    flt = RecordFilter(tags=(IMPORTED_TAG,))
    while page := memory.list_records(flt, limit=500, after=after, reveal=True):
        for row in page:
            after = row.knowledge_id
            rec = row.record
            if rec is None:
                continue
            ext = rec.vendor_extensions
            key, digest = ext.get("x-source-key"), ext.get("x-source-hash")
            if isinstance(key, str) and isinstance(digest, str):
                known.by_key[key] = (row.knowledge_id, digest)
            known.by_text[dedup_key(rec.meta.project_scope[0], rec.text)] = row.knowledge_id
    return known


def compose(memory: Memory, spec: RecordSpec) -> AMFRecord:
    amf_type, confidence = KIND_TYPE[spec.kind]
    fields: dict[str, object] = {
        "type": spec.amf_type or amf_type, "scope": spec.scope, "created_at": spec.created_at,
        "created_by": spec.agent, "kind": spec.x_kind or spec.kind.value,
        "confidence": spec.confidence if spec.confidence is not None else confidence,
        "tags": _tags(spec), "extensions": dict(spec.extensions),
        "supersedes": spec.supersedes,
    }
    if spec.subject:
        fields["subject"] = _subject(spec)
    if spec.predicate:
        fields["predicate"] = spec.predicate
    if spec.object is not None:
        fields["object"] = spec.object
    return memory.compose(spec.text, **fields)


def _subject(spec: RecordSpec) -> str:
    subject = spec.subject or ""
    if "." in subject and " " not in subject:
        return subject  # already a dotted subject (capture engine)
    from amcp.amf.portable import scope_namespace

    return f"{scope_namespace(spec.scope)}.{scope_namespace(subject)}"


def _tags(spec: RecordSpec) -> list[str]:
    source = str(spec.extensions.get("x-source", "import"))
    tags = [IMPORTED_TAG, f"from:{source}", spec.kind.value, *spec.tags]
    return list(dict.fromkeys(t for t in tags if t))[:64]


def write_batches(
    memory: Memory,
    specs: Iterable[RecordSpec],
    *,
    batch: int,
    total: int,
    progress: Callable[[Progress], None] | None = None,
) -> Iterator[Written]:
    started = time.perf_counter()
    done = 0
    pending: list[RecordSpec] = []
    for spec in specs:
        pending.append(spec)
        if len(pending) >= batch:
            yield from _commit(memory, pending)
            done += len(pending)
            pending = []
            if progress is not None:
                progress(Progress(done, total, started))
    if pending:
        yield from _commit(memory, pending)
        done += len(pending)
        if progress is not None:
            progress(Progress(done, total, started))


def _commit(memory: Memory, specs: list[RecordSpec]) -> list[Written]:
    records = [(compose(memory, s), s.sensitive) for s in specs]
    out: list[Written] = []
    with memory.atomic():
        outcomes = memory.put_many(records, dedup=True)
        for spec, outcome in zip(specs, outcomes, strict=True):
            if spec.supersedes and outcome.created:
                current = memory.store.get(spec.supersedes)
                if current is not None and current.state.lifecycle is Lifecycle.ACTIVE:
                    memory.store.set_state(
                        spec.supersedes, ChangeOp.SUPERSEDE, hlc=memory.clock.send(),
                        lifecycle=Lifecycle.SUPERSEDED, superseded_by=outcome.knowledge_id,
                    )
            out.append(Written(spec.source_key, outcome.knowledge_id, outcome.created,
                               outcome.duplicate_of, spec))
    for spec in specs:
        if spec.supersedes:
            memory.searcher.removed(memory.store.rowid_of(spec.supersedes))
    return out
