"""`CaptureEngine`: turns in, typed capture decisions out (R1 + dedup, R2, R3).

Pure and streaming: no storage, no I/O, bounded state. A store adapter consumes the
outputs (`item.record_hint()`), and backs `is_duplicate` with the store's own dedup.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from amcp.agent.capture.credentials import CredentialHit, Redaction, redact_turn, secret_parts
from amcp.agent.capture.model import (
    DEFAULTS,
    Capture,
    Category,
    Lang,
    Output,
    Secret,
    Turn,
)
from amcp.agent.capture.rules import Hit, match
from amcp.agent.capture.rules_en import RULES_EN
from amcp.agent.capture.rules_zh import RULES_ZH
from amcp.agent.capture.text import has_cjk, lang_of, normalise, sentences, slug, strip_quoted
from amcp.agent.capture.topic import CheckpointTracker, TopicConfig, TopicTracker, analyse
from amcp.agent.capture.transcript import coerce_turn
from amcp.errors import ConfigError

DuplicateCheck = Callable[[str], bool]
_KNOWN_SECRETS = 64  # secrets remembered per engine for masking later repeats


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    capture_roles: frozenset[str] = frozenset({"user", "human"})
    # Assistant turns are off by default: coding agents say "I'll run the tests" every
    # turn, and a model's promise is not the user's fact. When on, only an assistant's
    # reminder confirmations ("I'll remind you…") are kept.
    capture_assistant_reminders: bool = False
    categories: frozenset[Category] = frozenset(Category)
    checkpoint_every: int = 5  # R3; 0 disables
    checkpoint_sentences: int = 3
    topic: TopicConfig = field(default_factory=TopicConfig)
    snapshots: bool = True  # R2
    dedup_capacity: int = 10_000  # session dedup keys kept (LRU): bounded on long streams
    # Key for credential dedup fingerprints. None: a random per-engine key, so the
    # fingerprint of a weak password cannot be brute-forced offline from a stored hash;
    # an adapter that wants cross-session dedup passes a stable node-held key.
    fingerprint_key: bytes | None = None
    max_turn_chars: int = 200_000  # longer turns are truncated: pasted logs, not statements

    def __post_init__(self) -> None:
        if self.checkpoint_every < 0:
            raise ConfigError("checkpoint_every must be >= 0")
        if self.dedup_capacity < 1:
            raise ConfigError("dedup_capacity must be >= 1")


class CaptureEngine:
    """Feed turns in order with `process`; each call returns the decisions for that turn."""

    def __init__(
        self,
        config: CaptureConfig | None = None,
        *,
        is_duplicate: DuplicateCheck | None = None,
    ) -> None:
        self.config = config or CaptureConfig()
        self._is_duplicate = is_duplicate
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._fp_key = self.config.fingerprint_key or os.urandom(32)
        self._topic = TopicTracker(self.config.topic)
        self._checkpoints = (
            CheckpointTracker(self.config.checkpoint_every, self.config.checkpoint_sentences)
            if self.config.checkpoint_every
            else None
        )
        self._index = 0
        self._known: list[str] = []  # secrets seen this session (never printed: see __repr__)

    def __repr__(self) -> str:
        return f"CaptureEngine(turns={self._index}, seen={len(self._seen)})"

    @property
    def topic_keywords(self) -> tuple[str, ...]:
        return self._topic.keywords

    def process(self, turn: Turn | Mapping[str, Any]) -> list[Output]:
        t = coerce_turn(turn, index=self._index)
        if len(t.content) > self.config.max_turn_chars:
            t = Turn(t.role, t.content[: self.config.max_turn_chars], t.index)
        self._index = t.index + 1
        # The one redaction step, before anything splits, summarises or copies the turn:
        # sentence splitting cuts `postgres://admin:S3cr!t-pass@…` at the "!", and topic
        # keywords are lower-cased words, so a secret redacted any later leaks in pieces.
        # Only the credential captures see the raw turn, and they carry it in a `Secret`.
        red = redact_turn(t.content, self._known)
        safe = Turn(t.role, red.text, t.index)
        out: list[Output] = []
        sents = analyse(safe)
        if self.config.snapshots:
            snap = self._topic.observe(safe, sents)
            if snap is not None:
                out.append(snap)
        captures = self._captures(t, red, [s.text for s in sents])
        out.extend(captures)
        if self._checkpoints is not None:
            cp = self._checkpoints.observe(safe, sents, len(captures))
            if cp is not None:
                out.append(cp)
        return out

    def process_transcript(self, turns: Iterable[Turn | Mapping[str, Any]]) -> Iterator[Output]:
        """Stream outputs; memory stays bounded whatever the transcript length."""
        for turn in turns:
            yield from self.process(turn)
        yield from self.finish()

    def finish(self) -> list[Output]:
        """Snapshot the topic in progress (call at session end)."""
        snap = self._topic.flush() if self.config.snapshots else None
        return [snap] if snap is not None else []

    # --- R1 --------------------------------------------------------------------------
    def _captures(self, turn: Turn, red: Redaction, prose: list[str]) -> list[Capture]:
        """R1 over `prose` (sentences of the redacted turn); credentials from `red.hits`."""
        role = turn.role.lower()
        if role not in self.config.capture_roles:
            if role == "assistant" and self.config.capture_assistant_reminders:
                return self._assistant_reminders(Turn(turn.role, red.text, turn.index))
            return []
        found: list[Capture] = []
        if Category.CREDENTIAL in self.config.categories:
            found.extend(self._credential(turn, red, h) for h in red.hits)
            self._remember_secrets(red.hits)
        for sentence in prose:
            lang = lang_of(sentence)
            for hit in match(sentence, lang, RULES_ZH if lang == "zh" else RULES_EN):
                if hit.rule.category in self.config.categories:
                    found.append(self._capture(turn, hit, lang))
        return [c for c in found if self._fresh(c)]

    def _assistant_reminders(self, turn: Turn) -> list[Capture]:
        out = []
        for sentence in sentences(strip_quoted(turn.content)):
            low = sentence.lower()
            if "i'll remind you" in low or "i will remind you" in low or "我会提醒你" in sentence:
                lang = lang_of(sentence)
                # Reuse the user rule on the user-side phrasing of the same reminder.
                text = sentence.replace("I'll remind you", "remind me").replace(
                    "I will remind you", "remind me").replace("我会提醒你", "提醒我")
                for hit in match(text, lang, RULES_ZH if lang == "zh" else RULES_EN):
                    if hit.rule.category is Category.COMMITMENT:
                        out.append(self._capture(turn, hit, lang, confidence=0.6))
        return [c for c in out if self._fresh(c)]

    def _capture(self, turn: Turn, hit: Hit, lang: Lang, *, confidence: float = 0.8) -> Capture:
        d = DEFAULTS[hit.rule.category]
        ex = hit.extract
        return Capture(  # the sentence comes from the redacted turn: nothing to redact here
            category=hit.rule.category,
            importance=ex.importance or d.importance,
            text=ex.text,
            quote=hit.sentence,
            subject=ex.subject,
            predicate=ex.predicate or d.predicate,
            object=ex.object,
            amf_type=ex.amf_type or d.amf_type,
            x_kind=d.x_kind,
            lang=lang,
            turn_index=turn.index,
            rule=f"{lang}.{hit.rule.id}",
            confidence=confidence,
            dedup_key=normalise(ex.text),
        )

    def _credential(self, turn: Turn, red: Redaction, h: CredentialHit) -> Capture:
        d = DEFAULTS[Category.CREDENTIAL]
        zh = has_cjk(turn.content[max(0, h.start - 40) : h.start])
        what = f"{h.service} {_ZH_KIND.get(h.kind, h.kind)}".strip()
        text = f"用户的{what}：{h.redacted}" if zh else f"User's {what}: {h.redacted}"
        fp = hmac.new(self._fp_key, h.value.encode(), hashlib.sha256).hexdigest()[:24]
        return Capture(
            category=Category.CREDENTIAL,
            importance=d.importance,
            text=text,
            quote=_line_at(red.text, red.position(h.start))[:300],
            subject=f"User.Credential.{slug(what)}",
            predicate=d.predicate,
            object=h.redacted,
            amf_type=d.amf_type,
            x_kind=d.x_kind,
            lang="zh" if zh else "en",
            turn_index=turn.index,
            rule=f"credential.{h.rule}",
            confidence=0.95 if h.strong else 0.85,
            sensitive=True,
            secret=Secret(h.value, h.redacted),
            dedup_key=f"{normalise(text)} #{fp}",
        )

    def _remember_secrets(self, hits: Iterable[CredentialHit]) -> None:
        """Keep the session's secrets so a later turn that repeats one without its context
        ("log in with S3cr!t-pass") is masked too. Bounded; short values would mask common
        words, so only values of 8+ characters are kept."""
        for value in (v for h in hits for v in secret_parts(h)):
            if len(value) >= 8 and value not in self._known:
                self._known.append(value)
                if len(self._known) > _KNOWN_SECRETS:
                    self._known.pop(0)

    def _fresh(self, c: Capture) -> bool:
        """Session dedup on the normalised text, then the caller's store dedup."""
        key = c.dedup_key
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self.config.dedup_capacity:
            self._seen.popitem(last=False)
        # The store sees the fingerprinted key for credentials, never the raw secret.
        probe = key if c.sensitive else c.text
        return not (self._is_duplicate is not None and self._is_duplicate(probe))


_ZH_KIND = {"密码": "password", "口令": "passphrase", "密钥": "key", "秘钥": "key", "令牌": "token"}


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)]
