"""What recall does with the firewall: trust filters, near-duplicate collapse, trust order,
and a withheld view of instruction-shaped text.

``Memory.recall`` asks the searcher for a few more hits than it returns (``window``) so
that an item moved behind by trust or collapsed as a duplicate is replaced by the next
honest one, then calls ``screen_hits``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from amcp.amf.record import Annotation
from amcp.errors import ValidationError
from amcp.firewall import density, detector
from amcp.firewall.provenance import Origin, signed_text
from amcp.firewall.trust import Trust

if TYPE_CHECKING:
    from amcp.amf.record import AMFRecord
    from amcp.firewall.gate import Firewall
    from amcp.retrieval.search import Hit

TRUST_TAG = "trust:"
EXTRA = 10  # hits fetched beyond k: room for items moved behind or collapsed
TRUST_FILTERS = ("verified", "user", "unflagged")


T = TypeVar("T")


def order(items: Sequence[T], trust: Callable[[T], Trust], subject: Callable[[T], str]) -> list[T]:
    """Reorder ranked ``items`` so that, within each subject, no item of lower trust comes
    before one of higher trust (the relevance order is kept otherwise, and items of other
    subjects keep their slots). A term-density outlier goes behind every honest item of
    its subject too: stuffing buys relevance, never rank over what it imitates."""
    slots: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        slots.setdefault(subject(it), []).append(i)
    out: list[T | None] = [None] * len(items)
    for positions in slots.values():
        ranked = sorted(positions, key=lambda i: (trust(items[i]).stuffed,
                                                  -trust(items[i]).tier, i))
        for slot, i in zip(positions, ranked, strict=True):
            out[slot] = items[i]
    return [it for it in out if it is not None]


def window(k: int, limit: int) -> int:
    return min(limit, k + EXTRA)


def split_tags(tags: Sequence[str] | None) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """Plain tags (the store filters on them) and ``trust:`` filters, which only the
    firewall answers: a writer can put any tag on its record, so a ``trust:verified`` tag
    on a record means nothing, and the filter is decided by verified provenance."""
    if not tags:
        return None, ()
    plain = tuple(t for t in tags if not t.startswith(TRUST_TAG))
    wanted = tuple(t[len(TRUST_TAG):] for t in tags if t.startswith(TRUST_TAG))
    for w in wanted:
        if w not in TRUST_FILTERS:
            raise ValidationError("tags", f"trust:{w} is not a trust filter; use one of "
                                  + ", ".join(TRUST_TAG + f for f in TRUST_FILTERS))
    return plain or None, wanted


def passes(trust: Trust, wanted: Sequence[str]) -> bool:
    for w in wanted:
        if w == "verified" and not trust.verified:
            return False
        if w == "user" and not (trust.origin is Origin.USER and trust.verified):
            return False
        if w == "unflagged" and (trust.instruction or trust.stuffed):
            return False
    return True


def trust_tags(trust: Trust) -> tuple[str, ...]:
    """The ``trust:`` filters ``trust`` satisfies, as tags: what a tag-reading query (AMQL's
    ``tags CONTAINS 'trust:verified'``) sees instead of the record's own ``trust:`` tags."""
    return tuple(TRUST_TAG + w for w in TRUST_FILTERS if passes(trust, (w,)))


def answered_tags(own: Sequence[str], trust: Trust | None) -> list[str]:
    """A record's tags as a trust-aware reader sees them: its own, less any ``trust:`` tag
    the writer set (which means nothing), plus the ones its verified provenance earns."""
    plain = [t for t in own if not t.startswith(TRUST_TAG)]
    return plain + list(trust_tags(trust)) if trust is not None else plain


def refuse_trust_tags(tags: Sequence[str] | None, field: str = "tags") -> None:
    """For a reader that filters on stored tags alone (a plain listing): a ``trust:`` tag
    there would be answered by what the writer claimed, so it is a 400 instead."""
    for t in tags or ():
        if t.startswith(TRUST_TAG):
            raise ValidationError(field, f"{t} is a trust filter, answered only by recall "
                                  "and AMQL from verified provenance, not by a listing")


def screen_hits(hits: Sequence[Hit], firewall: Firewall, k: int,
                wanted: Sequence[str] = ()) -> tuple[list[Hit], dict[str, Trust]]:
    """The k hits to serve, in trust order, each with its trust."""
    trust: dict[str, Trust] = {}
    kept: list[Hit] = []
    seen: list[frozenset[str]] = []
    for hit in hits:
        record = hit.item.record
        if record is None:
            continue
        t = firewall.trust(record)
        if not passes(t, wanted):
            continue
        key = density.near_duplicate_key(signed_text(record))
        if any(density.similar(key, other) for other in seen):
            continue  # a flood of near-copies buys one slot, not many
        seen.append(key)
        trust[hit.knowledge_id] = t
        kept.append(hit)
    ranked = order(kept, lambda h: trust[h.knowledge_id],
                   lambda h: h.item.record.core.subject if h.item.record else "")
    top = ranked[:k]
    return top, {h.knowledge_id: trust[h.knowledge_id] for h in top}


def withheld(record: AMFRecord, trust: Trust) -> AMFRecord:
    """The view of a served record whose text is instruction-shaped (only the user's own,
    verified, is ever served): the instruction and its addresses withheld, the rest kept.
    Like a redacted record, a view: it says so in ``x-withheld``; read it by id for the
    stored text."""
    if not trust.instruction:
        return record
    ann = record.annotation or Annotation()
    text = signed_text(record)
    return replace(
        record,
        core=replace(record.core, object=detector.neutralise(str(record.core.object))),
        annotation=replace(ann, natural_language=detector.neutralise(text)
                           if ann.natural_language else None),
    ).with_extensions(**{"x-withheld": list(trust.instruction)})


__all__ = ["TRUST_FILTERS", "TRUST_TAG", "answered_tags", "order", "passes",
           "refuse_trust_tags", "screen_hits", "split_tags", "trust_tags", "window",
           "withheld"]
