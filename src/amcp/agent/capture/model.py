"""Typed results of the capture engine: what was captured, and how it maps onto AMF.

Every result (`Capture`, `Snapshot`, `Checkpoint`) offers `record_hint()`, one flat value
carrying exactly what a store adapter needs to build an AMF record, so the adapter is a
single function with no per-category branching.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum, StrEnum
from typing import Literal

from amcp.amf.types import KnowledgeType, Predicate  # capture speaks AMF's vocabulary
from amcp.errors import ValidationError

Lang = Literal["en", "zh"]


class Category(StrEnum):
    """R1 capture categories."""

    CREDENTIAL = "credential"
    CONFIG_DECISION = "config_decision"
    PREFERENCE = "preference"
    COMMITMENT = "commitment"
    IDENTITY = "identity"
    PROJECT_STATE = "project_state"


class Importance(IntEnum):
    """Stars. R1 produces 3..5; checkpoints use 2 because the next one supersedes them."""

    LOW = 2
    NORMAL = 3
    HIGH = 4
    CRITICAL = 5


class OutputKind(Enum):
    CAPTURE = "capture"
    SNAPSHOT = "snapshot"
    CHECKPOINT = "checkpoint"


@dataclass(frozen=True, slots=True)
class CategoryDefaults:
    importance: Importance
    amf_type: KnowledgeType
    x_kind: str
    predicate: Predicate


# The importance table (docs/capture.md mirrors it). Rules may raise or lower one step:
# an always/never rule is CRITICAL while a soft "I prefer" is HIGH; a commitment with a
# deadline is HIGH, without one NORMAL; "blocked on" is HIGH, "done" NORMAL.
DEFAULTS: dict[Category, CategoryDefaults] = {
    Category.CREDENTIAL: CategoryDefaults(
        Importance.CRITICAL, KnowledgeType.FACT, "credential", Predicate.EQUALS
    ),
    Category.PREFERENCE: CategoryDefaults(
        Importance.HIGH, KnowledgeType.FACT, "preference", Predicate.EQUALS
    ),
    Category.CONFIG_DECISION: CategoryDefaults(
        Importance.HIGH, KnowledgeType.DECISION, "decision", Predicate.EQUALS
    ),
    Category.IDENTITY: CategoryDefaults(
        Importance.HIGH, KnowledgeType.FACT, "lifefact", Predicate.EQUALS
    ),
    Category.COMMITMENT: CategoryDefaults(
        Importance.NORMAL, KnowledgeType.CONTEXT, "task", Predicate.REQUIRES
    ),
    Category.PROJECT_STATE: CategoryDefaults(
        Importance.NORMAL, KnowledgeType.CONTEXT, "event", Predicate.EQUALS
    ),
}


class Secret:
    """A secret value whose `repr`/`str` never show it; `reveal()` is the one way out.

    Not a dataclass on purpose: `dataclasses.asdict` would otherwise copy the raw value
    into a plain dict that prints it.
    """

    __slots__ = ("_redacted", "_value")

    def __init__(self, value: str, redacted: str) -> None:
        if not value:
            raise ValidationError("secret", "empty secret")
        if value in redacted:
            raise ValidationError("secret", "redacted form contains the secret")
        self._value = value
        self._redacted = redacted

    def reveal(self) -> str:
        return self._value

    @property
    def redacted(self) -> str:
        return self._redacted

    def __repr__(self) -> str:
        return f"Secret({self._redacted!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __copy__(self) -> Secret:
        return self  # immutable; also lets dataclasses.asdict/deepcopy keep the wrapper

    def __deepcopy__(self, memo: dict[int, object]) -> Secret:
        return self

    def __reduce__(self) -> str | tuple[object, ...]:
        # Pickling would be another way to spill the value into logs or caches.
        raise TypeError("Secret cannot be pickled")


@dataclass(frozen=True, slots=True)
class Turn:
    """One conversation turn; `content` is already flattened to text."""

    role: str
    content: str
    index: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not self.role:
            raise ValidationError("role", "must be a non-empty string")
        if not isinstance(self.content, str):
            raise ValidationError("content", "must be a string")


@dataclass(frozen=True, slots=True)
class RecordHint:
    """Everything an adapter needs for one AMF record (core + x-kind + flags)."""

    amf_type: KnowledgeType
    subject: str
    predicate: Predicate
    object: str
    confidence: float
    x_kind: str
    importance: Importance
    sensitive: bool
    text: str
    tags: tuple[str, ...]
    source_turns: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Capture:
    """One R1 capture. For credentials `text`, `quote` and `object` are redacted; the raw
    value lives only in `secret` (see `record_hint(reveal=True)`)."""

    category: Category
    importance: Importance
    text: str
    quote: str
    subject: str
    predicate: Predicate
    object: str
    amf_type: KnowledgeType
    x_kind: str
    lang: Lang
    turn_index: int
    rule: str
    confidence: float = 0.8
    sensitive: bool = False
    secret: Secret | None = field(default=None, repr=False)
    dedup_key: str = ""

    kind = OutputKind.CAPTURE

    def __post_init__(self) -> None:
        if self.sensitive and self.secret is None:
            raise ValidationError("secret", "a sensitive capture carries its Secret")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValidationError("confidence", "must be in [0, 1]")

    @property
    def redacted(self) -> str:
        """Display form; equal to `text` (already redacted for credentials)."""
        return self.text

    def record_hint(self, *, reveal: bool = False) -> RecordHint:
        """`reveal=True` puts the raw secret into `object`; only a writer that encrypts
        sensitive records at rest should ask for it."""
        obj = self.object
        if reveal and self.secret is not None:
            obj = self.secret.reveal()
        return RecordHint(
            amf_type=self.amf_type,
            subject=self.subject,
            predicate=self.predicate,
            object=obj,
            confidence=self.confidence,
            x_kind=self.x_kind,
            importance=self.importance,
            sensitive=self.sensitive,
            text=self.text,
            tags=("capture", self.category.value, self.lang),
            source_turns=(self.turn_index,),
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """R2: an extractive summary of the topic that just ended (turns `start`..`end`)."""

    start: int
    end: int
    keywords: tuple[str, ...]
    sentences: tuple[str, ...]
    reason: Literal["marker", "lexical", "flush"]
    importance: Importance = Importance.NORMAL
    amf_type: KnowledgeType = KnowledgeType.CONTEXT
    x_kind: str = "topic_snapshot"
    sensitive: bool = False

    kind = OutputKind.SNAPSHOT

    @property
    def text(self) -> str:
        head = ", ".join(self.keywords[:5])
        return f"Topic [{head}] (turns {self.start}-{self.end}): " + " / ".join(self.sentences)

    def record_hint(self, *, reveal: bool = False) -> RecordHint:
        del reveal  # summaries are redacted when built; nothing to reveal
        topic = _slug(self.keywords[0]) if self.keywords else "general"
        return RecordHint(
            amf_type=self.amf_type,
            subject=f"Session.Topic.{topic}",
            predicate=Predicate.EQUALS,
            object=self.text,
            confidence=0.6,
            x_kind=self.x_kind,
            importance=self.importance,
            sensitive=False,
            text=self.text,
            tags=("snapshot", *self.keywords[:5]),
            source_turns=tuple(range(self.start, self.end + 1)),
        )


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """R3: a rolling summary of the last `every` turns (turns `start`..`end`)."""

    start: int
    end: int
    keywords: tuple[str, ...]
    sentences: tuple[str, ...]
    captures: int
    importance: Importance = Importance.LOW
    amf_type: KnowledgeType = KnowledgeType.CONTEXT
    x_kind: str = "checkpoint"
    sensitive: bool = False

    kind = OutputKind.CHECKPOINT

    @property
    def text(self) -> str:
        return (
            f"Checkpoint turns {self.start}-{self.end} ({self.captures} captures): "
            + " / ".join(self.sentences)
        )

    def record_hint(self, *, reveal: bool = False) -> RecordHint:
        del reveal
        return RecordHint(
            amf_type=self.amf_type,
            subject=f"Session.Checkpoint.t{self.end}",
            predicate=Predicate.EQUALS,
            object=self.text,
            confidence=0.5,
            x_kind=self.x_kind,
            importance=self.importance,
            sensitive=False,
            text=self.text,
            tags=("checkpoint", *self.keywords[:5]),
            source_turns=tuple(range(self.start, self.end + 1)),
        )


Output = Capture | Snapshot | Checkpoint


def _slug(word: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in word)[:32] or "general"

__all__ = [
    "DEFAULTS",
    "Capture",
    "Category",
    "CategoryDefaults",
    "Checkpoint",
    "Importance",
    "KnowledgeType",
    "OutputKind",
    "Predicate",
    "RecordHint",
    "Secret",
    "Snapshot",
    "Turn",
]
