"""What the brain shows of one record: its region, place, AMP kind, title and weight.

One definition shared by the compile, the OKF export and the backends, so the three cannot
disagree about which region a memory is in or what weight it carries.

* **region** — the record's first scope, made file-name safe (``project:amcp`` →
  ``project-amcp``, ``*`` → ``global``): a scope is the store's own notion of "where a
  memory belongs", which is what AMP's Region is.
* **place** — the record's ``x-kind`` (``learning``, ``work_boundary``, ``preference``…),
  else ``general``: AMP's Place groups memories of one sort inside a Region.
* **kind** — the AMP kind (``amcp.evolution.outcomes.amp_kind``: intent, facts, pattern,
  invalidation, discovery, events, lifefact).
* **weight** — see ``brain_weight``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import get_args

from amcp.amf.record import AMFRecord, DecayModel
from amcp.amf.summary import RecordSummary
from amcp.amf.timefmt import normalise_timestamp, parse_ts
from amcp.amf.types import DecayType, Lifecycle
from amcp.evolution.decay import DAY, decay_model_of, event_fired, time_factor, trust
from amcp.evolution.outcomes import PINNED, amp_kind
from amcp.store.base import RecordFilter, RecordState, StoredRecord

# AMP's reading order (PROTOCOL §4.3): intent → facts → pattern → invalidation → discovery →
# events; lifefacts last, they have their own region in AMP and no reading priority.
KIND_ORDER: tuple[str, ...] = (
    "intent", "facts", "pattern", "invalidation", "discovery", "events", "lifefact",
)
ARCHIVE_BELOW = 0.10  # AMP §4.4: below this an entry leaves the active pointer table
TITLE_CHARS = 72  # AMP v2.10 truncates titles to 72 characters in INDEX.md
MAX_NAME = 64  # characters of a region or place name (file names)
ID_CHARS = 14  # "K-" + 12 hex, as the pointer tier prints ids
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
ALL_RECORDS = RecordFilter(lifecycles=None, include_expired=True)


# What the brain derives from a record's immutable content, so it can be cached by
# knowledge id (the id is the content's hash: an entry never goes stale). A plain tuple,
# not a dataclass: the compile cache holds one per record, and CPython's cyclic GC stops
# tracking a tuple of strings, numbers and tuples of strings, where a dataclass instance
# stays tracked for life. A cold 100k-record compile kept 100k of them beside its 100k
# entries, and the full collections the growing heap set off walked them all: 1.71M
# objects walked, 1.15M as rows (bench/brain_compile.py's store). The row is also what
# the cache file stores, as it is.
StaticRow = tuple[
    str,  # region
    str,  # place
    str,  # kind (AMP)
    str,  # title
    str,  # text
    str,  # type
    tuple[str, ...],  # scopes
    tuple[str, ...],  # tags
    str,  # created_at
    str,  # created_by
    str | None,  # supersedes
    float,  # confidence
    str,  # decay (model type)
    float | None,  # half_life (days)
    bool,  # fired (an event-triggered decay's event happened)
    float,  # created_ts: created_at as epoch seconds (parsed once, for decay and ordering)
]
STATIC_WIDTH = len(get_args(StaticRow))  # its fields (16)


@dataclass(frozen=True, slots=True)
class Entry:
    """One record as the brain shows it: its ``StaticRow`` plus its state at ``now``."""

    knowledge_id: str
    region: str
    place: str
    kind: str
    title: str
    text: str
    type: str
    scopes: tuple[str, ...]
    tags: tuple[str, ...]
    created_at: str
    created_by: str
    supersedes: str | None
    lifecycle: str
    weight: float
    outcome_weight: float
    archived: bool
    hlc: int
    superseded_by: str | None = None
    sensitive: bool = False
    created_ts: float = 0.0

    @property
    def short_id(self) -> str:
        return self.knowledge_id[:ID_CHARS]

    @property
    def day(self) -> str:
        return self.created_at[:10]


@lru_cache(maxsize=4096)  # a pure function of few distinct values (scopes, kinds)
def safe_name(text: str, default: str = "global") -> str:
    """A file-name-safe, case-preserving form of ``text`` (``*`` → ``global``)."""
    if text == "*":
        return default
    name = _UNSAFE.sub("-", text).strip("-.") or default
    if len(name) > MAX_NAME:  # a scope may be long; a file name may not
        import hashlib

        name = name[: MAX_NAME - 9] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return name


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def static_of(record: AMFRecord | RecordSummary) -> StaticRow:
    model = decay_model_of(record)
    scopes = tuple(record.meta.project_scope)
    text = record.text
    return (
        safe_name(scopes[0]),
        safe_name(record.kind or "general", "general"),
        amp_kind(record),
        one_line(text, TITLE_CHARS),
        text,
        record.type.value,
        scopes,
        tuple(record.tags),
        record.meta.created_at,
        record.meta.created_by,
        record.causal.supersedes if record.causal else None,
        record.core.confidence,
        model.type.value,
        model.half_life_days,
        event_fired(record),
        parse_ts(record.meta.created_at).timestamp(),
    )


def brain_weight(static: StaticRow, state: RecordState, now: float) -> tuple[float, bool]:
    """(weight, archived) of a record at ``now``: the AMP compiler's rule on our state.

    * a lifefact is pinned at 1.0 and never archived (AMP Rule 12);
    * a superseded record is 0 and archived (AMP Rule 8), as are invalidated and archived
      ones, whatever their learned weight;
    * otherwise the effective confidence (``amcp.evolution.decay``): the writer's confidence,
      decayed by age under the record's decay model and moved by the trust weight learned
      from outcomes (+0.30 / −0.20 per round) — archived below 0.10.
    """
    kind, confidence, decay, half_life, fired, created_ts = static[2], *static[11:]
    if kind == PINNED:
        return 1.0, False
    if state.lifecycle is not Lifecycle.ACTIVE or state.superseded_by:
        return 0.0, True
    # decay.view_of's effective confidence, from the same two functions it uses (the full
    # view also builds floors and a status the brain does not show: a third of the cost).
    model = _model(decay, half_life)
    factor = time_factor(model, max(0.0, (now - created_ts) / DAY), fired=fired)
    weight = round(trust(confidence * factor, state.weight), 6)
    return weight, weight < ARCHIVE_BELOW


@lru_cache(maxsize=64)
def _model(decay: str, half_life: float | None) -> DecayModel:
    return DecayModel(DecayType(decay), half_life)


def entry_from(kid: str, static: StaticRow, state: RecordState, now: float) -> Entry:
    weight, archived = brain_weight(static, state, now)
    (region, place, kind, title, text, type_, scopes, tags, created_at, created_by,
     supersedes, _, _, _, _, created_ts) = static
    return Entry(kid, region, place, kind, title, text, type_, scopes, tags, created_at,
                 created_by, supersedes, state.lifecycle.value, weight, round(state.weight, 6),
                 archived, state.hlc, state.superseded_by, state.sensitive, created_ts)


def entry_of(item: StoredRecord, now: float) -> Entry | None:
    """The brain's view of ``item``; None for a purged tombstone."""
    if item.record is None:
        return None
    return entry_from(item.knowledge_id, static_of(item.record), item.state, now)


def sort_key(entry: Entry) -> tuple[int, float, float, str]:
    """AMP's reading order inside a place: kind order, then weight high first, then the
    newest, then the id (a total order, so output never depends on store order)."""
    rank = _RANK.get(entry.kind, len(KIND_ORDER))
    return rank, -entry.weight, -entry.created_ts, entry.knowledge_id


_RANK = {kind: n for n, kind in enumerate(KIND_ORDER)}


def iso_utc(epoch: float) -> str:
    """``epoch`` as ``YYYY-MM-DDTHH:MM:SSZ`` in UTC, whatever the machine's TZ."""
    import datetime as dt

    return dt.datetime.fromtimestamp(int(epoch), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_now(value: str | None) -> float | None:
    """``--now`` as epoch seconds: ISO 8601 (``2026-12-01T00:00:00Z``) or a number."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    # normalise_timestamp refuses a naive time: its zone would be this machine's, and two
    # machines given the same --now must compile the same bytes.
    return parse_ts(normalise_timestamp(value, "now"), "now").timestamp()


__all__ = [
    "ALL_RECORDS",
    "ARCHIVE_BELOW",
    "KIND_ORDER",
    "STATIC_WIDTH",
    "Entry",
    "StaticRow",
    "brain_weight",
    "entry_from",
    "entry_of",
    "iso_utc",
    "one_line",
    "parse_now",
    "safe_name",
    "sort_key",
    "static_of",
]
