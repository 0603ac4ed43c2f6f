"""R5 recovery before a reply, and R6 an explicit "not found" instead of a guess.

`recovery_plan` does not read memory: it lists the recalls the caller should run (so the
engine stays pure and the caller picks the store, the embedder and the budget).
`resolve_recall` turns what came back into `Found` or `NotFound`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from amcp.agent.capture.model import Category, Importance, KnowledgeType, Lang
from amcp.agent.capture.text import lang_of, terms
from amcp.errors import ValidationError

# Which category a question is about: a targeted recall beats hoping the generic one
# surfaces it. Credentials are only recalled when asked for explicitly.
_ASKS: tuple[tuple[Category, re.Pattern[str]], ...] = (
    (Category.CREDENTIAL, re.compile(r"\b(?:password|passcode|token|api key|secret|credential|"
                                     r"private key)s?\b|密码|口令|密钥|秘钥|令牌", re.I)),
    (Category.COMMITMENT, re.compile(r"\b(?:remind|deadline|due|todo|to-do|promised|tasks?)\b|"
                                     r"提醒|截止|待办|答应|任务", re.I)),
    (Category.CONFIG_DECISION, re.compile(r"\b(?:decid\w*|decision|config\w*|setting|chose|"
                                          r"timeout|use for)\b|决定|配置|设置|选了", re.I)),
    (Category.PREFERENCE, re.compile(r"\b(?:prefer\w*|like|rules?|always|never|style)\b|"
                                     r"喜欢|偏好|习惯|规则", re.I)),
    (Category.IDENTITY, re.compile(r"\b(?:my name|who am i|where do i live|my job|my role)\b|"
                                   r"我叫|我是谁|我住|我的工作", re.I)),
    (Category.PROJECT_STATE, re.compile(r"\b(?:status|blocked|done|released|progress|state)\b|"
                                        r"进度|状态|卡在|完成|上线", re.I)),
)
_ACK = (
    r"(?:ok(?:ay)?|thanks?(?: you)?|thx|cool|great|nice|yes|no|sure|got it|"
    r"好的?|谢谢|嗯|行|可以)"
)
_TRIVIAL = re.compile(rf"^{_ACK}(?:[\s,，.!。！]+{_ACK})*[\s.!。！]*$", re.I)


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """One recall for the caller to run; empty filters mean "any"."""

    purpose: str  # topic_snapshot | high_importance | profile | category:<name>
    text: str
    types: tuple[KnowledgeType, ...] = ()
    x_kinds: tuple[str, ...] = ()
    subject_prefix: str = ""
    min_importance: Importance | None = None
    include_sensitive: bool = False
    limit: int = 5


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    queries: tuple[RecallQuery, ...]
    keywords: tuple[str, ...]
    lang: Lang
    trivial: bool  # "ok thanks": the profile is enough, skip the topical recalls


def recovery_plan(user_turn: str, *, topic_keywords: Sequence[str] = ()) -> RecoveryPlan:
    """What to recall before replying to `user_turn` (R5)."""
    lang = lang_of(user_turn)
    kws = tuple(dict.fromkeys(terms(user_turn)))[:12]
    text = " ".join(kws) or user_turn.strip()
    trivial = bool(_TRIVIAL.match(user_turn.strip())) or not user_turn.strip()
    queries = [
        RecallQuery("profile", "user profile identity preferences rules",
                    x_kinds=("lifefact", "preference"), subject_prefix="User.", limit=10),
    ]
    if not trivial:
        topic = " ".join(dict.fromkeys((*kws, *topic_keywords[:6])))
        queries.append(RecallQuery("topic_snapshot", topic, types=(KnowledgeType.CONTEXT,),
                                   x_kinds=("topic_snapshot", "checkpoint"), limit=3))
        queries.append(RecallQuery("high_importance", text,
                                   min_importance=Importance.HIGH, limit=8))
        for cat, pat in _ASKS:
            if pat.search(user_turn):
                queries.append(RecallQuery(
                    f"category:{cat.value}", text, x_kinds=(_X_KIND[cat],),
                    include_sensitive=cat is Category.CREDENTIAL, limit=5,
                ))
    return RecoveryPlan(tuple(queries), kws, lang, trivial)


_X_KIND = {
    Category.CREDENTIAL: "credential",
    Category.COMMITMENT: "task",
    Category.CONFIG_DECISION: "decision",
    Category.PREFERENCE: "preference",
    Category.IDENTITY: "lifefact",
    Category.PROJECT_STATE: "event",
}


class Scored(Protocol):
    """Anything a recall returns with a relevance in [0, 1]: how much the hit is about the
    query (``amcp.retrieval.search.Hit.relevance``: the query cosine), or None when nothing
    measured it (a lexical-only store). Not the fused rank score: that says which hit is
    first, not whether the first is any good."""

    @property
    def relevance(self) -> float | None: ...


# Calibrated on the packaged MiniLM's query cosines (bench/calibrate_thresholds.py,
# bench/data/threshold_calibration.json): answered questions scored 0.45-0.84 against their
# fact, unanswerable ones at most 0.26 against any fact (one outlier at 0.56).
RELEVANCE_THRESHOLD = 0.35


@dataclass(frozen=True, slots=True)
class Found:
    hits: tuple[Scored, ...]  # relevant hits, best first

    @property
    def best(self) -> Scored:
        return self.hits[0]


_NOT_FOUND_TEXT = {
    "en": "I don't have that in memory, so I won't guess. Could you tell me?",
    "zh": "我的记忆里没有这条信息，我不会乱猜。能告诉我吗？",
}


@dataclass(frozen=True, slots=True)
class NotFound:
    query: str
    best_score: float | None  # None when the recall returned nothing at all
    threshold: float
    lang: Lang

    @property
    def answer(self) -> str:
        """What the agent says instead of guessing."""
        return _NOT_FOUND_TEXT[self.lang]


def resolve_recall(
    query: str, hits: Sequence[Scored], *, threshold: float = RELEVANCE_THRESHOLD
) -> Found | NotFound:
    """`Found` with the hits whose relevance is >= `threshold` (or unmeasured: a lexical
    match is all a store without vectors can say), else `NotFound` (R6)."""
    if not 0.0 <= threshold <= 1.0:
        raise ValidationError("threshold", "must be in [0, 1]")

    def rel(h: Scored) -> float:
        return 1.0 if h.relevance is None else h.relevance

    relevant = sorted((h for h in hits if rel(h) >= threshold), key=lambda h: -rel(h))
    if relevant:
        return Found(tuple(relevant))
    best = max((rel(h) for h in hits), default=None)
    return NotFound(query, best, threshold, lang_of(query))
