"""The capture adapter: capture-engine results → AMF records in a ``Memory`` (or a node).

One mapping for every result kind (``RecordHint`` is flat on purpose):

* type, subject, predicate, object, confidence from the hint; ``x-kind`` = the hint's kind;
* importance (★2–5) in ``vendor_extensions["x-importance"]`` and as an ``importance:N`` tag;
  the source turns in ``x-source-turns``;
* credentials are written with ``reveal=True`` **and** ``sensitive=True``: the raw value is
  encrypted at rest and every recall/export shows the redacted form unless revealed;
* scope: user statements (credential, preference, identity, commitment) go to the user's
  scope, project statements (decisions, project state, snapshots, checkpoints) to the
  project's; ``--scope`` puts everything in one place;
* before each write the store is asked whether it already holds the same text (lexical
  recall, exact normalised match), and ``Memory``'s content dedup catches identical
  records (a repeated credential is the same encrypted record, not a second copy).

Writes to a ``Memory`` are batched (one transaction and one embedding batch per
``batch`` captures) so a 100k-turn transcript streams in bounded memory.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from amcp.agent.capture import CaptureConfig, CaptureEngine, Output, RecordHint, Turn
from amcp.agent.hooks.fastpath import NewMemory, has_same_text, write_fields

if TYPE_CHECKING:
    from amcp.agent.hooks.fastpath import Backend
    from amcp.memory import Memory

USER_KINDS = frozenset({"credential", "preference", "lifefact", "task"})
DEFAULT_BATCH = 128
_CREDENTIAL_PROBE = re.compile(r".* #[0-9a-f]{24}", re.DOTALL)  # engine's dedup_key shape


@dataclass(frozen=True, slots=True)
class CaptureScopes:
    user: str = "*"
    project: str = "*"

    def for_kind(self, x_kind: str) -> str:
        return self.user if x_kind in USER_KINDS else self.project


def default_scopes(*, project: str | None = None, user: str | None = None) -> CaptureScopes:
    """``user:<login>`` for the user's statements; the project's scope (else ``*``)."""
    if user is None:
        try:
            login = getpass.getuser()
        except (OSError, KeyError):
            login = ""
        user = f"user:{login}" if login else "*"
    return CaptureScopes(user=user, project=project or "*")


@dataclass(frozen=True, slots=True)
class Stored:
    """One capture as written (``knowledge_id`` is None on a dry run)."""

    knowledge_id: str | None
    created: bool
    x_kind: str
    importance: int
    sensitive: bool
    scope: str
    text: str  # the redacted text: safe to print

    def to_dict(self) -> dict[str, Any]:
        return {
            "knowledge_id": self.knowledge_id, "created": self.created, "x_kind": self.x_kind,
            "importance": self.importance, "sensitive": self.sensitive, "scope": self.scope,
            "text": self.text,
        }


def to_memory(hint: RecordHint, *, scope: str, session: str | None = None) -> NewMemory:
    """The adapter's one mapping from a hint to a write."""
    return NewMemory(
        text=hint.text,
        type=hint.amf_type.value,
        scope=scope,
        kind=hint.x_kind,
        tags=(*hint.tags, f"importance:{int(hint.importance)}"),
        session=session,
        subject=hint.subject,
        predicate=hint.predicate.value,
        object=hint.object,
        confidence=hint.confidence,
        extensions={
            "x-importance": int(hint.importance),
            "x-source-turns": list(hint.source_turns[:64]),  # a snapshot's span, capped
            # A capture quotes what the user typed, read by this node's own hook process:
            # no claim (the node's own, like ``amcp remember``). A snapshot summarises the
            # whole exchange, the agent's turns included: the agent's, unverified.
            **({} if "capture" in hint.tags else {"x-provenance": {"origin": "agent"}}),
        },
        sensitive=hint.sensitive,
    )


class Sink(Protocol):
    def write(self, items: Sequence[NewMemory]) -> list[tuple[str, bool]]: ...
    def has_text(self, text: str, scopes: Sequence[str]) -> bool: ...
    def find_secret(self, item: NewMemory) -> str | None: ...


def find_secret(memory: Memory, item: NewMemory) -> str | None:
    """An active credential record in ``item``'s scope holding the same secret.

    Session evidence makes two writes of one key differ in content, so content dedup
    alone misses a key pasted again in a later session; comparing the decrypted values of
    the few records under the same subject does not (and reveals nothing outside here).
    """
    from amcp.store.base import RecordFilter

    if not item.subject or item.object is None:
        return None
    rows = memory.list_records(
        RecordFilter(scopes=(item.scope,), subjects=(item.subject,), kinds=(item.kind,)),
        limit=50, reveal=True,
    )
    for row in rows:
        if row.record is not None and row.record.core.object == item.object:
            return row.knowledge_id
    return None


class MemorySink:
    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def write(self, items: Sequence[NewMemory]) -> list[tuple[str, bool]]:
        batch = [{"text": i.text, "sensitive": i.sensitive, **write_fields(i)} for i in items]
        return [(o.knowledge_id, o.created) for o in self.memory.remember_many(batch)]

    def has_text(self, text: str, scopes: Sequence[str]) -> bool:
        return has_same_text(self.memory, text, scopes)

    def find_secret(self, item: NewMemory) -> str | None:
        return find_secret(self.memory, item)


class BackendSink:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def write(self, items: Sequence[NewMemory]) -> list[tuple[str, bool]]:
        return [(self.backend.remember(i), True) for i in items]

    def has_text(self, text: str, scopes: Sequence[str]) -> bool:
        return self.backend.has_text(text, scopes)

    def find_secret(self, item: NewMemory) -> str | None:
        memory = getattr(self.backend, "memory", None)  # a node cannot reveal to us: None
        return find_secret(memory, item) if memory is not None else None


class CaptureWriter:
    """Feed turns (or a whole transcript); captures are checked, mapped and stored."""

    def __init__(
        self,
        sink: Sink | None,
        *,
        scopes: CaptureScopes | None = None,
        session: str | None = None,
        config: CaptureConfig | None = None,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        self.sink = sink  # None: dry run, nothing is written
        self.scopes = scopes or CaptureScopes()
        self.session = session
        self.batch = max(1, batch)
        self.engine = CaptureEngine(config, is_duplicate=self._is_duplicate)

    @classmethod
    def for_memory(cls, memory: Memory, **kw: Any) -> CaptureWriter:
        return cls(MemorySink(memory), **kw)

    @classmethod
    def for_backend(cls, backend: Backend, **kw: Any) -> CaptureWriter:
        # One hook process sees one prompt: topic snapshots and checkpoints need the turns
        # before it, which only `amcp capture <transcript>` has.
        kw.setdefault("config", CaptureConfig(snapshots=False, checkpoint_every=0))
        return cls(BackendSink(backend), batch=1, **kw)

    def _is_duplicate(self, probe: str) -> bool:
        if self.sink is None or _CREDENTIAL_PROBE.fullmatch(probe):
            # Credentials arrive as "<redacted text> #<hmac>": the store holds them
            # encrypted, so text search cannot see them; Memory's content dedup on the
            # (encrypted) record catches a repeat instead.
            return False
        scopes = {self.scopes.user, self.scopes.project}
        return self.sink.has_text(probe, sorted(scopes))

    def feed(self, turn: Turn | Mapping[str, Any]) -> list[Stored]:
        return self._store(self.engine.process(turn))

    def run(self, turns: Iterable[Turn | Mapping[str, Any]]) -> Iterator[Stored]:
        """Stream a transcript; at most ``batch`` captures are held at any time."""
        pending: list[Output] = []
        for item in self.engine.process_transcript(turns):
            pending.append(item)
            if len(pending) >= self.batch:
                yield from self._store(pending)
                pending = []
        if pending:
            yield from self._store(pending)

    def _store(self, outputs: Sequence[Output]) -> list[Stored]:
        hints = [o.record_hint(reveal=o.sensitive) for o in outputs]
        writes = [to_memory(h, scope=self.scopes.for_kind(h.x_kind), session=self.session)
                  for h in hints]
        known: dict[int, str] = {}
        if self.sink is not None:
            for n, w in enumerate(writes):
                if w.sensitive and (kid := self.sink.find_secret(w)) is not None:
                    known[n] = kid
        todo = [w for n, w in enumerate(writes) if n not in known]
        done = iter(self.sink.write(todo) if self.sink is not None and todo else [])
        out = []
        for n, (hint, w) in enumerate(zip(hints, writes, strict=True)):
            if n in known:
                kid, created = known[n], False
            elif self.sink is not None:
                kid, created = next(done)
            else:
                kid, created = None, False
            out.append(Stored(kid, created, hint.x_kind, int(hint.importance), hint.sensitive,
                              w.scope, hint.text))
        return out


__all__ = [
    "BackendSink",
    "CaptureScopes",
    "CaptureWriter",
    "MemorySink",
    "Sink",
    "Stored",
    "default_scopes",
    "find_secret",
    "to_memory",
]
