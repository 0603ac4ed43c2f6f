"""Does a new record state a different value for something a stored one already states?

Three sources of "what is this about", tried in this order (``claim_for``):

1. **The AMF triple**, when the writer gave a real one: the same ``core.subject`` with the
   functional predicate ``EQUALS`` and another ``core.object``. Only ``EQUALS`` says "the
   value of": a subject ``REQUIRES`` or ``CAUSES`` many things at once. A triple is real
   when the writer chose both ends: subjects ``remember`` derives from the scope
   (``amcp.amf.portable.subject_for``: every note of a scope shares one) say nothing, and
   an object that is just the record's text (what ``compose_record`` puts there when no
   object is given: an importer's "Alice EQUALS <one of her observations>") is a note
   about the subject, not its value. Those fall through to the text.
2. **An English text heuristic** for attribute statements: after an optional leading label
   ("Correction:", "Update:", "Verified:"), a possessive attribute ("the user's manager",
   "my delivery address", "Alice's badge level") followed by a copula ("is", "are", "was",
   "ends in", optionally with "now"/"still") and a value.
3. **A Chinese text heuristic** of the same shape: an optional label ("更正：", "更新:"), a
   possessive attribute with 的 ("我的地址", "用户的经理", "Alice的工号"), an optional
   "现在/目前/仍然", a copula (是, 改为, 变成, 换成, 更新为; not a bare 为, which ends too many
   attribute words) and a value.

Two records contradict when their attributes are the same words and neither value contains
the other. Anything else ("we talked about Priya's manager", "我们聊过经理的事") is not
an attribute statement and is never held.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from amcp.amf.portable import KIND_TO_TYPE, scope_namespace
from amcp.amf.types import Predicate

if TYPE_CHECKING:
    from amcp.amf.record import AMFRecord

# Words separated by required whitespace: "(?:[A-Za-z]+\s*){1,3}" would try every split of
# one long word (cubic backtracking on a 3,000-letter token).
_LABEL = re.compile(r"^\s*[A-Za-z]+(?:\s+[A-Za-z]+){0,2}\s*:\s*")
MAX_STATEMENT = 300  # characters: an attribute statement is one short sentence
_ATTR = re.compile(
    r"^\s*(?:the\s+)?(?P<key>(?:[\w-]+'s|my|our|his|her|their)(?:\s+[\w-]+){1,5}?)\s+"
    r"(?:now\s+|still\s+|currently\s+)?(?P<verb>is|are|was|were|(?:ends?|ending)\s+in|"
    r"lives?\s+(?:at|in))\s+(?:now\s+|still\s+|currently\s+)?(?P<value>[^.;\n]{1,120})",
    re.IGNORECASE,
)
_HAN = "\u4e00-\u9fff"
_ZH_LABEL = re.compile(rf"^\s*[{_HAN}]{{1,4}}\s*[:：]\s*")
# The owner is a pronoun, 用户, or one name (Han or Latin), never a phrase: "关于经理的会议"
# ("the meeting about the manager") has no owner before its 的 and is not a statement.
_ZH_ATTR = re.compile(
    rf"^\s*(?P<key>(?:我们|我|你|他们|她们|他|她|用户|[{_HAN}]{{2,4}}|[A-Za-z][\w-]{{0,30}})"
    rf"\s*的\s*[{_HAN}A-Za-z]{{1,8}}?)"
    rf"(?:现在|目前|仍然|还是|已经)?(?P<verb>改为|变成|换成|更新为|是)"
    rf"(?P<value>[^。；;，,\n]{{1,60}})"
)
_WORD = re.compile(r"[\w-]+")
_DERIVED_KINDS = frozenset({*KIND_TO_TYPE, "note"})


@dataclass(frozen=True, slots=True)
class Claim:
    key: str  # normalised attribute ("user's manager", "我的地址", "subject EQUALS")
    value: str  # normalised value ("priya")
    subject: str | None = None  # set for a triple claim: found by subject, not by words


def _words(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def claim_of(text: str) -> Claim | None:
    """The attribute statement ``text`` makes (English or Chinese), or None."""
    if len(text) > MAX_STATEMENT:
        return None
    m = _ATTR.match(_LABEL.sub("", text, count=1))
    if m is not None:
        key, value = _words(m["key"]), _words(m["value"])
        return Claim(key, value) if value else None
    z = _ZH_ATTR.match(_ZH_LABEL.sub("", text, count=1))
    if z is not None:
        key, value = re.sub(r"\s+", "", z["key"]).lower(), _words(z["value"])
        return Claim(key, value) if value else None
    return None


def _derived(record: AMFRecord) -> bool:
    """Is ``core.subject`` the one ``remember`` derives from a scope and a kind?"""
    subject = record.core.subject
    for scope in record.meta.project_scope:
        head = scope_namespace(scope) + "."
        if subject.startswith(head) and subject[len(head):] in _DERIVED_KINDS:
            return True
    return False


def triple_claim(record: AMFRecord) -> Claim | None:
    """The value the triple states, when it is a real ``subject EQUALS object``."""
    core = record.core
    if core.predicate is not Predicate.EQUALS or _derived(record):
        return None
    text = record.annotation.natural_language if record.annotation else None
    if text is not None and str(core.object) == text:
        return None  # the text standing in for an object nobody gave
    value = _words(str(core.object))
    if not value:
        return None
    return Claim(f"{core.subject} {Predicate.EQUALS.value}", value, core.subject)


def claim_for(record: AMFRecord, text: str) -> Claim | None:
    """The claim a record makes: its triple where it has a real one, else its ``text``."""
    return triple_claim(record) or claim_of(text)


def contradicts(new: Claim, old: Claim) -> bool:
    """Same attribute, another value (one value containing the other is a refinement:
    "Priya" → "Priya Rao" is not a contradiction)."""
    return new.key == old.key and new.value not in old.value and old.value not in new.value


__all__ = ["Claim", "claim_for", "claim_of", "contradicts", "triple_claim"]
