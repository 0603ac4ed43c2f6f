"""Sorting mixed items into preferences, facts, tasks, events and logs.

The rules, first match wins (docs/portability.md, "Classification"):

1. **Log** — the text has the shape of machine output: a level word at the start or right
   after a timestamp (``ERROR``, ``[info]``, ``level=warn``), a JSON log object, a stack
   trace line, an HTTP access-log line, or the source says it is a system/tool message.
   Spacing is collapsed and, except for bare level words, case is ignored.
   Logs are checked first so a log line that happens to say "prefers" is never recalled as
   a preference.
2. **A kind the source states** (a ``type``/``category`` column, mem0 or basic-memory
   categories) when it names one of the five kinds or a known synonym.
3. **Task** — a to-do marker (``TODO``, ``- [ ]``, ``task:``) or a reminder/obligation
   phrase (``remind``, ``need to``, ``don't forget``, ``deadline``).
4. **Preference** — a liking or a standing instruction (``prefers``, ``likes``,
   ``favourite``, ``always use``, ``never``, ``would rather``, ``hates``).
5. **Event** — something that happened at a time: a past-tense happening verb
   (``met``, ``deployed``, ``shipped``, ``attended``) or a dated occurrence
   (``on 2024-03-01``, ``yesterday``, ``last week``).
6. **Fact** — everything else.
"""

from __future__ import annotations

import re

from amcp.portability.model import Kind

_SYNONYMS: dict[str, Kind] = {
    "preference": Kind.PREFERENCE, "preferences": Kind.PREFERENCE, "pref": Kind.PREFERENCE,
    "like": Kind.PREFERENCE, "principle": Kind.PREFERENCE, "skill": Kind.PREFERENCE,
    "fact": Kind.FACT, "facts": Kind.FACT, "note": Kind.FACT, "profile": Kind.FACT,
    "lifefact": Kind.FACT, "identity": Kind.FACT, "knowledge": Kind.FACT,
    "task": Kind.TASK, "tasks": Kind.TASK, "todo": Kind.TASK, "reminder": Kind.TASK,
    "commitment": Kind.TASK, "action": Kind.TASK,
    "event": Kind.EVENT, "events": Kind.EVENT, "interaction": Kind.EVENT,
    "episode": Kind.EVENT, "meeting": Kind.EVENT, "history": Kind.EVENT,
    "log": Kind.LOG, "logs": Kind.LOG, "system": Kind.LOG, "debug": Kind.LOG,
    "trace": Kind.LOG, "telemetry": Kind.LOG, "tool": Kind.LOG,
}
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|CRIT|SEVERE)"
_TS = r"(?:\d{4}-\d{2}-\d{2}[T ][\d:.,]+Z?(?:[+-]\d{2}:?\d{2})?|\w{3} +\d{1,2} [\d:]{8}|\d{10,})"
# Bare level words are matched in their log spellings only (ERROR, error), so prose such
# as "Error handling is hard" stays prose; every other log shape is case-blind.
_LEVEL_PATTERNS = tuple(
    re.compile(p)
    for p in (
        rf"^\[?{_LEVEL}\]?[\s:|\]-]",
        rf"^\[?{_LEVEL.lower()}\]?[\s:|\]]",
        rf"^\[?{_TS}\]?\s*[|\-]?\s*\[?(?:{_LEVEL}|{_LEVEL.lower()})\b",
    )
)
_SHAPE_PATTERNS = tuple(
    re.compile(p, re.I)
    for p in (
        rf"^{_TS}\s+\S+\s+\S+(?:\[\d+\])?:\s",  # syslog: time host prog[pid]:
        r"\blevel=(?:trace|debug|info|warn|warning|error|fatal)\b",
        r'^\{\s*"(?:level|severity|lvl|log_level|timestamp|ts|@timestamp)"\s*:',
        r"^Traceback \(most recent call last\)",
        r"^\s*at [\w.$]+\(.*\)$",
        r'^\S+ - - \[[^\]]+\] "(?:GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) ',
        r"^(?:GET|POST|PUT|DELETE|PATCH) /\S* (?:HTTP/\d\.\d )?\d{3}\b",
    )
)
_LOG_PATTERNS = _LEVEL_PATTERNS + _SHAPE_PATTERNS
_TASK = re.compile(
    r"^\s*(?:TODO|FIXME|task:|action item:|- \[ \]|\[ \])"
    r"|\b(?:remind(?:er)?|need to|needs to|have to|has to|must not forget|don'?t forget|"
    r"should remember to|deadline|due (?:by|on|date)|follow up|to-?do)\b",
    re.I,
)
_PREFERENCE = re.compile(
    r"\b(?:prefers?|preferred|preference|likes?|liked|loves?|enjoys?|dislikes?|hates?|"
    r"favou?rite|would rather|rather than|always (?:use|uses|wants?|write|writes)|"
    r"never (?:use|uses|wants?|write|writes)|wants? (?:to use|responses|answers)|"
    r"is (?:a fan|allergic|vegetarian|vegan)|can'?t stand)\b",
    re.I,
)
_EVENT = re.compile(
    r"\b(?:met|meets? with|attended|visited|deployed|released|shipped|launched|"
    r"happened|occurred|took place|celebrated|moved to|joined|graduated|married|"
    r"was born|traveled|travelled|went to|had a (?:meeting|call)|incident|outage)\b"
    r"|\b(?:yesterday|last (?:week|month|year|night)|this morning|on (?:mon|tues|wednes|"
    r"thurs|fri|satur|sun)day|on \d{4}-\d{2}-\d{2})\b",
    re.I,
)
_LOG_ROLES = frozenset({"system", "tool", "function", "developer"})


def kind_from_hint(hint: str | None) -> Kind | None:
    if not hint:
        return None
    return _SYNONYMS.get(hint.strip().lower())


def looks_like_log(text: str) -> bool:
    head = " ".join(text.split())[:300]
    return any(p.search(head) for p in _LOG_PATTERNS)


def classify(text: str, hint: str | None = None, role: str | None = None) -> tuple[Kind, str]:
    """The item's kind and the rule that decided it (shown in the report's samples)."""
    if (role or "").lower() in _LOG_ROLES:
        return Kind.LOG, f"role {role}"
    text = " ".join(text.split())  # spacing never changes what an item is
    if looks_like_log(text):
        return Kind.LOG, "log shape"
    stated = kind_from_hint(hint)
    if stated is not None:
        return stated, f"source kind {hint!r}"
    if _TASK.search(text):
        return Kind.TASK, "task phrase"
    if _PREFERENCE.search(text):
        return Kind.PREFERENCE, "preference phrase"
    if _EVENT.search(text):
        return Kind.EVENT, "event phrase"
    return Kind.FACT, "default"
