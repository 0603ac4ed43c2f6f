"""The rule type, the guards every rule shares, and the per-sentence matcher.

A rule is a compiled pattern plus a builder that turns the match into an `Extract` (or
vetoes it). Guards run first, per sentence: questions, hypotheticals and reported speech
never produce a capture, whatever a pattern would say.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from amcp.agent.capture.model import Category, Importance, KnowledgeType, Lang, Predicate


@dataclass(frozen=True, slots=True)
class Extract:
    """What a rule builder returns; unset fields fall back to the category defaults."""

    text: str
    subject: str
    object: str
    predicate: Predicate | None = None
    importance: Importance | None = None
    amf_type: KnowledgeType | None = None


Builder = Callable[[re.Match[str]], Extract | None]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    category: Category
    pattern: re.Pattern[str]
    build: Builder
    # Lower-case substrings, one of which must occur before `pattern` is tried: `in` on a
    # str is a C-speed scan, while Python's regex engine tries every alternative at every
    # position (a 25-way alternation costs ~50 µs on a 120-character sentence).
    hint: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Hit:
    rule: Rule
    extract: Extract
    sentence: str


# --- English guards ------------------------------------------------------------------
# A polite request ("could you always…?", "can you remind me…?") is an instruction, not a
# question: strip the wrapper and read the rest as an imperative.
_EN_POLITE = re.compile(r"^(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?", re.I)
_EN_QUESTION_START = re.compile(
    r"^(?:what|what's|whats|which|who|whom|whose|when|where|why|how|do|does|did|is|are|am|"
    r"was|were|can|could|would|should|will|shall|have|has|may|might|isn't|aren't)\b",
    re.I,
)
_EN_SOFT_IF = re.compile(
    r"\bif (?:possible|you can|you could|needed|necessary|you don't mind|that's ok(?:ay)?)\b|"
    r"\beven if\b|\bas if\b",
    re.I,
)
_EN_HYPOTHETICAL = re.compile(
    r"\b(?:if|suppose|supposing|imagine|hypothetically|what if|let's say|lets say|pretend|"
    r"assuming|in case|wish|were i|for example|for instance|e\.g\.)\b",
    re.I,
)
_EN_REPORTED = re.compile(
    r"\b(?:he|she|they|someone|somebody|people|my (?:friend|wife|husband|boss|colleague|"
    r"coworker|mom|dad|mother|father|sister|brother|partner|manager|son|daughter|teammate|"
    r"girlfriend|boyfriend|roommate))\s+(?:said|says|told|thinks|mentioned|claims|wrote)\b|"
    r"\b(?:in the (?:movie|book|show|story|novel|game))\b",
    re.I,
)

# --- Chinese guards ------------------------------------------------------------------
_ZH_TAG = re.compile(r"(?:好吗|好不好|可以吗|行吗|行不行|好嘛)[？?。！!\s]*$")
_ZH_POLITE = re.compile(r"^(?:你)?(?:能不能|可不可以|能否|可以|能|麻烦你?|请你?)(?:帮我)?")
_ZH_QMARK_END = re.compile(r"[吗呢][？?。！!\s]*$|[？?]+$")
_ZH_QUESTION = re.compile(
    r"[吗呢么嘛][？?。！!\s]*$|[？?]|是不是|要不要|能不能|有没有|会不会|可不可以|用不用|"
    r"对不对|该不该|什么|哪里|哪个|哪儿|哪些|谁|怎么|为什么|多少|是否|如何"
)
_ZH_HYPOTHETICAL = re.compile(
    r"如果|假如|假设|要是|万一|倘若|假若|设想|想象一下|比如|例如|举个例子|就算|即使|比方说"
)
_ZH_THIRD = re.compile(
    r"^(?:他|她|它|他们|她们|别人|人家|有人|朋友|同事|老板|小[\u4e00-\u9fff]|"
    r"我(?:的)?(?:朋友|同事|老板|妈妈|妈|爸爸|爸|老婆|老公|女朋友|男朋友|哥哥|姐姐|弟弟|妹妹|"
    r"儿子|女儿|室友|同学|领导|邻居))|(?:他|她|他们|她们)(?:说|觉得|认为|告诉我)"
)


def prepare(sentence: str, lang: Lang) -> str | None:
    """The sentence to run rules on, or None when a guard says it states nothing."""
    s = sentence.strip()
    if lang == "en":
        polite = _EN_POLITE.match(s)
        if polite:
            s = s[polite.end() :].rstrip(" ?")
        elif s.endswith("?") or _EN_QUESTION_START.match(s):
            return None
        if _EN_HYPOTHETICAL.search(_EN_SOFT_IF.sub(" ", s)) or _EN_REPORTED.search(s):
            return None
        return s
    s = _ZH_TAG.sub("", s)
    polite = _ZH_POLITE.match(s)
    if polite:
        s = _ZH_QMARK_END.sub("", s[polite.end() :])
    if _ZH_QUESTION.search(s) or _ZH_HYPOTHETICAL.search(s) or _ZH_THIRD.search(s):
        return None
    return s


def _hinted(hint: tuple[str, ...], low: str) -> bool:
    # A plain loop: `any(genexpr)` costs more in generator setup than the scans themselves.
    if not hint:
        return True
    for k in hint:  # noqa: SIM110 - any(genexpr) is slower on this hot path
        if k in low:
            return True
    return False


def match(sentence: str, lang: Lang, rules: Sequence[Rule]) -> list[Hit]:
    """At most one hit per category per sentence (the first rule in table order wins)."""
    low = sentence.lower()
    candidates = [r for r in rules if _hinted(r.hint, low)]
    if not candidates:
        return []
    s = prepare(sentence, lang)
    if not s:
        return []
    hits: list[Hit] = []
    seen: set[Category] = set()
    for rule in candidates:
        if rule.category in seen:
            continue
        m = rule.pattern.search(s)
        if m is None:
            continue
        ex = rule.build(m)
        if ex is not None and ex.object:
            hits.append(Hit(rule, ex, s))
            seen.add(rule.category)
    return hits
