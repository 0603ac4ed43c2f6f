"""RxAi AMP's issue format (PROTOCOL §6–7): the strict title template, the body's Metadata
and Message sections, and the Outcome marker of a comment.

AMP's indexer reads titles with a regex, so a title is built from the template and checked
against that same regex before anything is sent (``title_for`` raises rather than send a
title the indexer would bucket as "Untagged"). Parsing is the inverse: ``parse_title``
says exactly what is wrong with a malformed one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from amcp.brain.entries import one_line
from amcp.errors import ValidationError

KINDS = ("intent", "facts", "events", "discovery", "pattern", "invalidation", "lifefact")
OUTCOMES = ("success", "failure", "neutral")
_NAME = r"[A-Za-z0-9._-]+"
TITLE = re.compile(
    rf"^\[FROM:(?P<sender>{_NAME})→(?P<recipient>{_NAME})\]"
    rf"\[REGION:(?P<region>{_NAME})\]\[PLACE:(?P<place>{_NAME})\]"
    rf"\[TYPE:(?P<kind>{'|'.join(KINDS)})\] (?P<short>[^\[\]\n]{{1,59}})$"
)
SHORT_CHARS = 59  # AMP: "Short intent: plain English, under 60 characters, no tags"
_META = re.compile(r"(?m)^- \*\*(?P<key>[A-Za-z][A-Za-z-]*):\*\* ?(?P<value>.*?)\s*$")
_OUTCOME = re.compile(r"(?im)^[\s>*-]*(?:\*\*)?outcome:?(?:\*\*)?:?\s*(?:\*\*)?\s*(\S+)")
_SUPERSEDES = re.compile(r"#(\d+)")


@dataclass(frozen=True, slots=True)
class Title:
    sender: str
    recipient: str
    region: str
    place: str
    kind: str
    short: str

    def render(self) -> str:
        return (f"[FROM:{self.sender}→{self.recipient}][REGION:{self.region}]"
                f"[PLACE:{self.place}][TYPE:{self.kind}] {self.short}")


def short_of(text: str) -> str:
    """The title's short intent from a memory's text: one line, no brackets, < 60 chars."""
    flat = one_line(text.replace("[", "(").replace("]", ")"), SHORT_CHARS).strip()
    return flat or "memory"


def title_for(sender: str, region: str, place: str, kind: str, text: str,
              recipient: str = "all") -> str:
    """A title copied from the template and validated against the indexer's regex."""
    title = Title(sender, recipient, region, place, kind, short_of(text)).render()
    parse_title(title)  # never send what the indexer cannot read
    return title


def parse_title(title: str) -> Title:
    """The parts of a template title; ValidationError naming the first thing wrong."""
    m = TITLE.match(title)
    if m is not None:
        return Title(**m.groupdict())
    for tag in ("FROM", "REGION", "PLACE", "TYPE"):
        if f"[{tag}:" not in title:
            raise ValidationError("title", f"{title!r} has no [{tag}:…] tag (AMP §6 template "
                                  "[FROM:a→b][REGION:r][PLACE:p][TYPE:kind] Short intent)")
    kind = re.search(r"\[TYPE:([^\]]*)\]", title)
    if kind and kind.group(1) not in KINDS:
        raise ValidationError("title", f"[TYPE:{kind.group(1)}] is not one of "
                              f"{', '.join(KINDS)}")
    if not re.match(rf"^\[FROM:{_NAME}→{_NAME}\]", title):
        raise ValidationError("title", f"{title!r}: [FROM:sender→recipient] must come first, "
                              "names without spaces")
    raise ValidationError("title", f"{title!r} does not follow the template (tags in order, no "
                          "spaces inside them, then a space and a short intent under 60 "
                          "characters without brackets)")


def body_for(meta: dict[str, str | None], text: str) -> str:
    """AMP §6 body: Metadata lines (None values left out), the Message, Expected Action."""
    lines = ["## Metadata"]
    lines += [f"- **{k}:** {v}" for k, v in meta.items() if v]
    lines += ["", "## Message", text.strip(), "", "## Expected Action",
              "- [x] No action required", ""]
    return "\n".join(lines)


def metadata(body: str) -> dict[str, str]:
    """The ``- **Key:** value`` lines of the body's Metadata section (first wins)."""
    section = _section(body, "Metadata")
    out: dict[str, str] = {}
    for m in _META.finditer(section):
        out.setdefault(m.group("key"), m.group("value"))
    return out


def message(body: str) -> str:
    """The body's ``## Message`` text, or the whole body when it has no such section."""
    text = _section(body, "Message")
    return (text or body).strip()


def _section(body: str, name: str) -> str:
    m = re.search(rf"(?im)^##\s*{name}\s*$", body)
    if m is None:
        return ""
    rest = body[m.end():]
    nxt = re.search(r"(?m)^##\s", rest)
    return rest[: nxt.start()] if nxt else rest


def supersedes(meta: dict[str, str]) -> list[int]:
    """The leading ``#N`` refs of a Supersedes line (AMP Rule 8: prose after them is not a
    ref — ``#12 — replaced by #45`` supersedes #12 only)."""
    value = meta.get("Supersedes", "")
    refs: list[int] = []
    for part in re.split(r"\s*,\s*", value.strip()):
        m = re.match(r"^#(\d+)\b", part)
        if m is None:
            break
        refs.append(int(m.group(1)))
    return refs


def outcome_of(comment: str) -> tuple[str | None, str | None]:
    """(result, problem) of a comment: a known Outcome marker → its result; an unknown
    marker → a problem; no marker → neutral by AMP's rule, reported as None."""
    m = _OUTCOME.search(comment)
    if m is None:
        return None, None
    word = m.group(1).strip("*|.,").lower()
    if word in OUTCOMES:
        return word, None
    return None, (f"unknown marker 'Outcome: {m.group(1)}' (use success, failure or "
                  "neutral); not applied")


def comment_for(sender: str, posted: str, result: str, text: str) -> str:
    if result not in OUTCOMES:
        raise ValidationError("outcome", f"{result!r} is not one of {', '.join(OUTCOMES)}")
    return (f"## Reply Metadata\n- **From:** {sender}\n- **Posted:** {posted}\n"
            f"- **Outcome:** {result}\n\n## Response\n{text.strip()}\n")


__all__ = [
    "KINDS",
    "OUTCOMES",
    "TITLE",
    "Title",
    "body_for",
    "comment_for",
    "message",
    "metadata",
    "outcome_of",
    "parse_title",
    "short_of",
    "supersedes",
    "title_for",
]
