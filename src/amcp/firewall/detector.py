"""Instruction-shaped content: which rules a text trips, and the text with them withheld.

``scan`` is pure and cheap (a dozen compiled patterns; texts are capped at
``MAX_SCANNED`` characters because a memory is read by an agent in full, and a payload past
that point would be cut from any context anyway, not because longer texts are safe: the
cap is the length limit a record can have, ``amcp.amf.ids.check_size``).
"""

from __future__ import annotations

from typing import NamedTuple

from amcp.firewall.rules import RULES, TARGET, Rule

MAX_SCANNED = 64 * 1024
WITHHELD = "[withheld by the memory firewall: instruction-shaped]"


class Finding(NamedTuple):
    rule: str
    start: int
    end: int


def scan(text: str, rules: tuple[Rule, ...] = RULES) -> tuple[Finding, ...]:
    """Every rule match in ``text`` (first match per rule), in text order."""
    body = text[:MAX_SCANNED]
    found: list[Finding] = []
    for rule in rules:
        m = rule.pattern.search(body)
        if m is not None:
            found.append(Finding(rule.name, m.start(), m.end()))
    return tuple(sorted(found, key=lambda f: f.start))


def flags(text: str, rules: tuple[Rule, ...] = RULES) -> tuple[str, ...]:
    """The distinct rule names ``text`` trips, sorted."""
    return tuple(sorted({f.rule for f in scan(text, rules)}))


def neutralise(text: str, rules: tuple[Rule, ...] = RULES) -> str:
    """``text`` with every matching span and every address or URL in it withheld.

    For serving a flagged record the user wrote (it is theirs, so it is kept and shown,
    but an agent is never handed the working instruction): the facts around the
    instruction survive, where the instruction wanted data sent does not."""
    findings = scan(text, rules)
    if not findings:
        return text
    spans = [(f.start, f.end) for f in findings]
    spans += [(m.start(), m.end()) for m in TARGET.finditer(text)]
    out: list[str] = []
    pos = 0
    for begin, end in sorted(spans):
        if end <= pos:
            continue
        out.append(text[pos:max(begin, pos)])
        out.append(WITHHELD)
        pos = end
    out.append(text[pos:])
    return "".join(out)


__all__ = ["MAX_SCANNED", "WITHHELD", "Finding", "flags", "neutralise", "scan"]
