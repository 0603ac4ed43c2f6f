"""R2 topic-switch detection and R3 checkpoints, with an extractive summariser.

Switch detection is deliberately cheap: the content terms of a new user turn are compared
with the union of the last few turns of the current topic (the overlap coefficient,
|new ∩ window| / |new|). Jaccard against a growing window would fall with window size
alone; the overlap coefficient asks the question we care about — how much of what the
user says now was already being talked about. Explicit markers ("by the way", "换个话题")
switch regardless.
"""

from __future__ import annotations

import math
import re
from collections import Counter, deque
from dataclasses import dataclass
from typing import Literal

from amcp.agent.capture.model import Checkpoint, Snapshot, Turn
from amcp.agent.capture.text import sentences, strip_quoted, terms

_MARKER = re.compile(
    r"\b(?:by the way|btw|another thing|on another note|on a different note|changing the subject|"
    r"change of topic|unrelated(?: question)?|switching gears|different question|new topic|"
    r"moving on|separate question|totally different)\b|"
    r"换个话题|换一个话题|另外一件事|另一件事|顺便问|顺便说|说点别的|题外话|还有一件事|话说|对了[，,]|聊点别的",
    re.I,
)


_MARKER_HINTS = (
    "by the way", "btw", "another", "note", "subject", "topic", "unrelated", "gears",
    "different", "moving on", "separate", "话题", "另", "顺便", "别的", "题外", "还有一件",
    "话说", "对了",
)


def _has_marker_hint(text: str) -> bool:
    low = text.lower()
    for k in _MARKER_HINTS:  # noqa: SIM110 - any(genexpr) is slower on this hot path
        if k in low:
            return True
    return False


@dataclass(frozen=True, slots=True)
class TopicConfig:
    window_turns: int = 4  # turns of the current topic compared against
    min_terms: int = 3  # a new turn with fewer content terms cannot switch lexically ("ok thanks")
    min_topic_turns: int = 2  # a topic needs this many turns before it can be left lexically
    switch_overlap: float = 0.12  # below this share of known terms, the topic switched
    summary_sentences: int = 3
    max_topic_sentences: int = 400  # bounded memory when a topic never ends
    max_vocabulary: int = 4000  # term counter is pruned to its most common half beyond this


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a turn with its content terms, computed once per turn by the engine."""

    turn: int
    text: str
    terms: tuple[str, ...]


def analyse(turn: Turn) -> list[Sentence]:
    """Sentences of the turn's own prose (code and quotations removed) with their terms."""
    return [Sentence(turn.index, s, tuple(terms(s))) for s in sentences(strip_quoted(turn.content))]


def summarise(items: list[Sentence], tf: Counter[str], k: int) -> tuple[str, ...]:
    """The `k` most informative sentences, in their original order.

    Sentences come from turns the engine has already redacted (`redact_turn`): masking
    here, after the split, would be too late (a URL cut at its "!" no longer matches).

    Score = sum of topic term frequencies of the sentence's distinct terms / sqrt(length):
    sentences that use the topic's central vocabulary win, long rambling ones are damped.
    """
    scored: list[tuple[float, int]] = []
    seen: set[str] = set()
    for i, s in enumerate(items):
        uniq = set(s.terms)
        if len(uniq) < 2 or s.text in seen:
            continue
        seen.add(s.text)
        score = sum(tf[t] for t in uniq) / math.sqrt(len(s.terms) + 1)
        scored.append((score, i))
    best = sorted(i for _, i in sorted(scored, reverse=True)[:k])
    return tuple(items[i].text[:300] for i in best)


def keywords(tf: Counter[str], n: int = 8) -> tuple[str, ...]:
    return tuple(w for w, _ in tf.most_common(n))


_REASONS: dict[str, Literal["marker", "lexical", "flush"]] = {
    "marker": "marker", "lexical": "lexical", "flush": "flush",
}


class TopicTracker:
    """Holds the current topic's recent turns; `observe` returns a Snapshot on a switch."""

    def __init__(self, config: TopicConfig) -> None:
        self._cfg = config
        self._window: deque[frozenset[str]] = deque(maxlen=config.window_turns)
        self._sentences: deque[Sentence] = deque(maxlen=config.max_topic_sentences)
        self._tf: Counter[str] = Counter()
        self._start: int | None = None
        self._last: int = -1
        self._user_turns = 0

    def observe(self, turn: Turn, sents: list[Sentence]) -> Snapshot | None:
        turn_terms = [t for s in sents for t in s.terms]
        snapshot: Snapshot | None = None
        if turn.role == "user":
            reason = self._switch_reason(turn.content, frozenset(turn_terms))
            if reason is not None:
                snapshot = self._snapshot(reason)
                self._reset()
            self._user_turns += 1
        if self._start is None:
            self._start = turn.index
        self._last = turn.index
        self._window.append(frozenset(turn_terms))
        self._tf.update(turn_terms)
        if len(self._tf) > self._cfg.max_vocabulary:
            self._tf = Counter(dict(self._tf.most_common(self._cfg.max_vocabulary // 2)))
        self._sentences.extend(sents)
        return snapshot

    def flush(self) -> Snapshot | None:
        """Snapshot of the topic in progress (end of transcript)."""
        snap = self._snapshot("flush") if self._user_turns >= self._cfg.min_topic_turns else None
        self._reset()
        return snap

    @property
    def keywords(self) -> tuple[str, ...]:
        return keywords(self._tf)

    def _switch_reason(self, text: str, new: frozenset[str]) -> str | None:
        if self._user_turns == 0:
            return None
        if _has_marker_hint(text) and _MARKER.search(text):
            return "marker"
        if self._user_turns < self._cfg.min_topic_turns or len(new) < self._cfg.min_terms:
            return None
        known = frozenset().union(*self._window)
        overlap = len(new & known) / len(new)
        return "lexical" if overlap < self._cfg.switch_overlap else None

    def _snapshot(self, reason: str) -> Snapshot | None:
        if self._start is None or not self._sentences:
            return None
        picked = summarise(list(self._sentences), self._tf, self._cfg.summary_sentences)
        if not picked:
            return None
        return Snapshot(
            start=self._start,
            end=self._last,
            keywords=keywords(self._tf),
            sentences=picked,
            reason=_REASONS[reason],
        )

    def _reset(self) -> None:
        self._window.clear()
        self._sentences.clear()
        self._tf = Counter()
        self._start = None
        self._user_turns = 0


class CheckpointTracker:
    """Every `every` turns, summarise those turns (R3)."""

    def __init__(self, every: int, k: int) -> None:
        self._every = every
        self._k = k
        self._buffer: list[Sentence] = []
        self._tf: Counter[str] = Counter()
        self._count = 0
        self._start = 0
        self._captures = 0

    def observe(self, turn: Turn, sents: list[Sentence], captures: int) -> Checkpoint | None:
        if self._count == 0:
            self._start = turn.index
        self._count += 1
        self._captures += captures
        # Bounded like the topic buffer: one pasted log must not grow it without limit.
        room = max(0, 400 - len(self._buffer))
        self._buffer.extend(sents[:room])
        for s in sents:
            self._tf.update(s.terms)
        if self._count < self._every:
            return None
        cp = Checkpoint(
            start=self._start,
            end=turn.index,
            keywords=keywords(self._tf),
            sentences=summarise(self._buffer, self._tf, self._k),
            captures=self._captures,
        )
        self._buffer, self._tf, self._count, self._captures = [], Counter(), 0, 0
        return cp
