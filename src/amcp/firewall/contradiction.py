"""Does a new record state a different value for something a stored one already states?

Two sources of "what is this about":

1. **The AMF triple**, when the writer gave a real one: the same ``core.subject`` and
   ``core.predicate`` with another ``core.object``. Subjects ``remember`` derives from the
   scope (``amcp.amf.portable.subject_for``: every note of a scope shares it) say nothing,
   and are skipped.
2. **A text heuristic** otherwise, for attribute statements: after an optional leading
   label ("Correction:", "Update:", "Verified:"), a possessive attribute ("the user's
   manager", "my delivery address", "Alice's badge level") followed by a copula ("is",
   "are", "was", "ends in", optionally with "now"/"still") and a value. Two records
   contradict when their attributes are the same words and their values differ. Anything
   else ("we talked about Priya's manager") is not an attribute statement and never held.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
_WORD = re.compile(r"[\w-]+")


@dataclass(frozen=True, slots=True)
class Claim:
    key: str  # normalised attribute ("user's manager")
    value: str  # normalised value ("priya")


def claim_of(text: str) -> Claim | None:
    """The attribute statement ``text`` makes, or None."""
    if len(text) > MAX_STATEMENT:
        return None
    body = _LABEL.sub("", text, count=1)
    m = _ATTR.match(body)
    if m is None:
        return None
    key = " ".join(_WORD.findall(m["key"].lower()))
    value = " ".join(_WORD.findall(m["value"].lower()))
    if not value:
        return None
    return Claim(key, value)


def contradicts(new: Claim, old: Claim) -> bool:
    """Same attribute, another value (one value containing the other is a refinement:
    "Priya" → "Priya Rao" is not a contradiction)."""
    return new.key == old.key and new.value not in old.value and old.value not in new.value


__all__ = ["Claim", "claim_of", "contradicts"]
