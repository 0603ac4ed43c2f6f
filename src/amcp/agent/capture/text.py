"""Text helpers shared by the rules, the topic tracker and the summaries.

Everything here is lexical and dependency-free on purpose: it runs on every turn of a
long transcript, so it must stay in the microseconds.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from amcp.agent.capture.model import Lang

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_EN_WORD = re.compile(r"[a-z][a-z0-9_+#-]{2,}")

# Code and quotations are someone else's words (examples, docs, pasted logs): the
# non-credential rules must not read them as the user's own statements.
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_QUOTED = re.compile(r"\"[^\"\n]{0,400}\"|“[^”\n]{0,400}”|「[^」\n]{0,400}」|『[^』\n]{0,400}』")
_QUOTE_CHARS = ("`", '"', "“", "「", "『", ">")
_BLOCKQUOTE = re.compile(r"^\s*>.*$", re.M)

# Sentence ends: Latin punctuation followed by space, CJK punctuation, or a newline.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；!?])|\n+")
_SPACES = re.compile(r"\s+")
_PUNCT_EDGES = re.compile(r"^[\s,;:.!?，。；：！？、…—-]+|[\s,;:.!?，。；：！？、…—-]+$")

EN_STOP = frozenset(
    [
        "a", "an", "the", "and", "or", "but", "if", "so", "of", "to", "in", "on", "at", "by",
        "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "am",
        "do", "does", "did", "done", "have", "has", "had", "having", "i", "me", "my", "mine",
        "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "they", "them",
        "their", "it", "its", "this", "that", "these", "those", "there", "here", "what",
        "which", "who", "whom", "whose", "when", "where", "why", "how", "all", "any", "both",
        "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not", "only",
        "own", "same", "than", "too", "very", "can", "will", "just", "should", "now", "also",
        "into", "about", "over", "after", "before", "again", "then", "once", "up", "down",
        "out", "off", "under", "above", "below", "between", "through", "during", "while",
        "would", "could", "might", "must", "shall", "may", "let", "lets", "let's", "i'm",
        "i'll", "i've", "i'd", "we're", "we'll", "we've", "you're", "it's", "that's", "don't",
        "doesn't", "didn't", "can't", "won't", "isn't", "aren't", "wasn't", "ok", "okay", "yes",
        "yeah", "thanks", "thank", "please", "sure", "well", "really", "like", "get", "got",
        "make", "made", "know", "think", "want", "need", "one", "two", "going", "go", "see",
        "look", "way", "thing", "things", "something", "anything", "use", "used", "using",
        "still", "yet",
    ]
)
# Function characters: a CJK bigram containing one of these carries little topic signal.
_ZH_STOP_CHARS = frozenset(
    "的了是在我你他她它们这那就也都和与把被吗呢吧啊呀哦嗯个有没不很还要会说去来到给对"
)

_FIRST_PERSON_EN: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.I), r)
    for p, r in (
        (r"\bI am\b|\bI'm\b|\bIm\b", "user is"),
        (r"\bI've\b", "user has"),
        (r"\bI'll\b", "user will"),
        (r"\bI'd\b", "user would"),
        (r"\bwe're\b|\bwe are\b", "the team is"),
        (r"\bwe've\b", "the team has"),
        (r"\bwe'll\b", "the team will"),
        (r"\bours\b", "the team's"),
        (r"\bour\b", "the team's"),
        (r"\bus\b", "the team"),
        (r"\bwe\b", "the team"),
        (r"\bmy\b", "user's"),
        (r"\bmine\b", "user's"),
        (r"\bme\b", "user"),
        (r"\bmyself\b", "user"),
        (r"\bI\b", "user"),
    )
)
_FIRST_PERSON_ZH: tuple[tuple[str, str], ...] = (
    ("我们的", "团队的"),
    ("我们", "团队"),
    ("咱们", "团队"),
    ("我的", "用户的"),
    ("我", "用户"),
)
_CLAUSE_CUT = re.compile(
    r"\s+(?:and|but|because|since|though|although|so that|so|which|unless)\s+"
    r"(?:i|we|my|it|the|this|that|you|they|he|she)\b.*$|\s+(?:because|unless|although)\b.*$",
    re.I,
)
_ZH_CLAUSE_CUT = re.compile(r"[，,；;。！？!?（(].*$|(?:因为|但是|不过|所以|然后|而且).*$")


_ZH_HEAD = re.compile(r"^(?:用|把|在|将|给|对|要|去|做)?([\u3400-\u9fff]{2,})")


def lang_of(text: str) -> Lang:
    """`zh` when CJK characters make up a fair share of the letters, else `en`."""
    cjk = len(_CJK.findall(text))
    if cjk == 0:
        return "en"
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    # A CJK character carries about as much as a short word; weigh accordingly.
    return "zh" if cjk * 3 >= latin else "en"


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def strip_quoted(text: str) -> str:
    """Blank out code, quotations and block quotes, keeping sentence boundaries."""
    if not any(c in text for c in _QUOTE_CHARS):  # the common case costs four `in` scans
        return text
    text = _FENCE.sub("\n", text)
    text = _INLINE_CODE.sub(" ", text)
    text = _BLOCKQUOTE.sub("", text)
    return _QUOTED.sub(" ", text)


def sentences(text: str) -> Iterator[str]:
    for part in _SENTENCE_END.split(text):
        s = part.strip()
        if s:
            yield s


def clean(text: str) -> str:
    return _PUNCT_EDGES.sub("", _SPACES.sub(" ", text))


def clip_object(obj: str) -> str:
    """Cut a captured object at the next clause so it stays one fact."""
    obj = _CLAUSE_CUT.sub("", obj)
    obj = _ZH_CLAUSE_CUT.sub("", obj)
    return clean(obj)


def normalise(text: str) -> str:
    """The dedup key: NFKC, case-folded, punctuation and spacing removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if ch.isalnum() or ch == " ").strip()


def terms(text: str) -> list[str]:
    """Content terms: English words minus stop words (plural -s folded), CJK bigrams."""
    low = text.lower()
    out = [_fold(w) for w in _EN_WORD.findall(low)]
    out = [w for w in out if w not in EN_STOP]
    for run in _CJK_RUN.findall(text):
        if len(run) == 1:
            continue
        for i in range(len(run) - 1):
            bigram = run[i : i + 2]
            if bigram[0] not in _ZH_STOP_CHARS and bigram[1] not in _ZH_STOP_CHARS:
                out.append(bigram)
    return out


def _fold(word: str) -> str:
    """Fold a plain plural ("tests" → "test") but not "redis", "class", "status"."""
    if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "is", "us", "os")):
        return word[:-1]
    return word


def third_person(text: str, lang: Lang) -> str:
    """Rewrite first person into a standalone statement about "user" / "the team"."""
    if lang == "zh":
        for src, dst in _FIRST_PERSON_ZH:
            text = text.replace(src, dst)
        return text
    for pat, rep in _FIRST_PERSON_EN:
        text = pat.sub(rep, text)
    return clean(text)


def sentence_case(text: str) -> str:
    """Capitalise a statement that starts with our own rewritten subject."""
    if text.startswith(("user", "the ")):
        return text[:1].upper() + text[1:]
    return text


def slug(text: str, *, max_len: int = 32) -> str:
    """A subject path segment: the first content term(s), alphanumerics and underscores."""
    head = _ZH_HEAD.match(text.strip())
    if head:  # "用深色主题" → "深色主题": a CJK phrase reads better than a bigram
        return head.group(1)[:8]
    words = terms(text)
    if not words:
        words = [w for w in re.split(r"\W+", text.lower()) if w]
    if not words:
        return "general"
    s = "_".join(words[:2]) if words[0].isascii() else words[0]
    s = "".join(ch if ch.isalnum() else "_" for ch in s).strip("_")
    return s[:max_len] or "general"
