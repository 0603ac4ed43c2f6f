"""Pass two: records into the store, one atomic batch at a time.

Each batch (``ImportOptions.batch`` records) is composed, embedded and stored in one
transaction with its supersessions: it commits whole or not at all (with
``ImportOptions.prefetch`` the next batch is embedded in a worker thread meanwhile). A
killed import keeps the batches it committed; running it again finds them by source key
(``Known``) and writes only the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.portability.model import KIND_TYPE, RecordSpec
from amcp.portability.plan import Known, dedup_key
from amcp.retrieval.indexing import embed_text
from amcp.store.base import ChangeOp, RecordFilter

if TYPE_CHECKING:
    from amcp.memory import Memory
    from amcp.memory_writes import BatchRelated
    from amcp.retrieval.embedders import Embedder
    from amcp.retrieval.unit import F32

IMPORTED_TAG = "imported"


@dataclass(frozen=True, slots=True)
class Written:
    source_key: str
    knowledge_id: str
    created: bool
    merged_into: str | None  # the store already held the same content (put_many dedup)
    spec: RecordSpec
    held: bool = False  # the firewall stored it as a draft (instruction-shaped, contradicting)


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
        # Another tool's export is not this node's own word: the firewall screens and labels
        # it as imported (unverified), so instruction-shaped items are held as drafts and
        # a careless import cannot outrank or overwrite what the user said (docs/firewall.md).
        "provenance": {"origin": "import"},
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


class Prefetch:
    """An embedder that serves vectors computed ahead, in a worker thread.

    While batch *k* is composed, stored and checked on the calling thread, batch *k+1* is
    already being embedded (ONNX Runtime and numpy release the GIL), so an import with a
    real model runs at close to the model's own speed instead of model + everything else.
    Texts it was not given ahead (recall queries, anything unexpected) are embedded on the
    spot by the wrapped model, so the vectors are always that model's.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amcp-embed")
        self._ahead: dict[str, tuple[Future[Any], int]] = {}

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def submit(self, texts: list[str]) -> None:
        if texts:
            fut = self._pool.submit(self.inner.embed, texts)
            for i, text in enumerate(texts):
                self._ahead[text] = (fut, i)

    def forget(self, texts: list[str]) -> None:
        for text in texts:
            self._ahead.pop(text, None)

    def embed(self, texts: Sequence[str]) -> F32:
        import numpy as np

        missing = [t for t in texts if t not in self._ahead]
        extra = dict(zip(missing, self.inner.embed(missing), strict=True)) if missing else {}
        rows = []
        for text in texts:
            if text in extra:
                rows.append(extra[text])
            else:
                fut, i = self._ahead[text]
                rows.append(fut.result()[i])
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)

    def embed_query(self, text: str) -> F32:
        return self.inner.embed_query(text)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def prefetching(memory: Memory, enabled: bool) -> Iterator[Prefetch | None]:
    """Serve ``memory``'s writes from a ``Prefetch`` for the duration of an import."""
    inner = memory.embedder
    if inner is None or not enabled:
        yield None
        return
    ahead = Prefetch(inner)
    memory.embedder = ahead
    try:
        yield ahead
    finally:
        memory.embedder = inner
        ahead.close()


def _batches(specs: Iterable[RecordSpec], size: int) -> Iterator[list[RecordSpec]]:
    pending: list[RecordSpec] = []
    for spec in specs:
        pending.append(spec)
        if len(pending) >= size:
            yield pending
            pending = []
    if pending:
        yield pending


def write_batches(
    memory: Memory,
    specs: Iterable[RecordSpec],
    *,
    batch: int,
    total: int,
    progress: Callable[[Progress], None] | None = None,
    prefetch: bool = False,
) -> Iterator[list[Written]]:
    """Write ``specs`` in atomic batches; yields each batch's outcomes once committed."""
    started = time.perf_counter()
    done = 0
    # One screening context for the whole import: the store's contradiction candidates
    # for an attribute are looked up once, not once per record stating it (BatchRelated).
    screening = memory.screening()
    with prefetching(memory, prefetch) as ahead:
        prev: tuple[list[RecordSpec], list[tuple[AMFRecord, bool]], list[str]] | None = None
        for specs_k in _batches(specs, batch):
            records = [(compose(memory, s), s.sensitive) for s in specs_k]
            texts = [embed_text(r, sens) for r, sens in records]
            if ahead is not None:
                ahead.submit(texts)
            if prev is not None:
                yield _commit(memory, prev[0], prev[1], screening)
                done += len(prev[0])
                if ahead is not None:
                    ahead.forget(prev[2])
                if progress is not None:
                    progress(Progress(done, total, started))
            prev = (specs_k, records, texts)
        if prev is not None:
            yield _commit(memory, prev[0], prev[1], screening)
            done += len(prev[0])
            if progress is not None:
                progress(Progress(done, total, started))


def _commit(
    memory: Memory,
    specs: list[RecordSpec],
    records: list[tuple[AMFRecord, bool]],
    screening: BatchRelated,
) -> list[Written]:
    out: list[Written] = []
    retired: list[str] = []
    screening.begin(memory.store.generation())
    with memory.atomic():
        # Every record here was composed and sealed by ``compose`` a moment ago.
        outcomes = memory.put_many(records, dedup=True, sealed_here=True, screening=screening)
        for spec, outcome in zip(specs, outcomes, strict=True):
            if spec.supersedes and outcome.created:
                current = memory.store.get(spec.supersedes)
                if current is not None and current.state.lifecycle is Lifecycle.ACTIVE:
                    memory.store.set_state(
                        spec.supersedes, ChangeOp.SUPERSEDE, hlc=memory.clock.send(),
                        lifecycle=Lifecycle.SUPERSEDED, superseded_by=outcome.knowledge_id,
                    )
                    retired.append(spec.supersedes)
            out.append(Written(spec.source_key, outcome.knowledge_id, outcome.created,
                               outcome.duplicate_of, spec, outcome.held is not None))
    screening.superseded(retired)
    screening.committed(memory.store.generation())
    for spec in specs:
        if spec.supersedes:
            memory.searcher.drop(spec.supersedes)
    return out
