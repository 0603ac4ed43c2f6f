"""How records leave the node: AMF dicts with the node's view in ``x-state`` (PROFILE §6)."""

from __future__ import annotations

import contextlib
import math
import secrets
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import msgpack

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.evolution.decay import view
from amcp.memory import Memory, WriteOutcome
from amcp.store.base import StoredRecord
from amcp.wire.encoder import pack_payload

WEEK = 7 * 86400
# Room left in a reply frame for its own keys (status, ref_seq, timings...).
ENVELOPE = 4096
# Enum members as globals on the per-request path: EnumType.__getattr__ makes `M.X` a slow
# lookup in Python 3.11 (see amcp.session.session).
_LIFECYCLE_VALUE = {lc: lc.value for lc in Lifecycle}  # .value is a descriptor call


def iso(ts: float | None) -> str | None:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC), exactly as ``datetime.fromtimestamp(ts, UTC)
    .strftime("%Y-%m-%dT%H:%M:%S.%fZ")`` writes it, at a fraction of the cost: every read
    reply carries one, and datetime's strftime was a visible share of a read's CPU.

    Microseconds are rounded half-to-even as datetime does; the seconds part is formatted
    once per distinct second (reads close together share it)."""
    if ts is None:
        return None
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)
    if micros >= 1_000_000:
        whole += 1
        micros -= 1_000_000
    elif micros < 0:
        whole -= 1
        micros += 1_000_000
    second = int(whole)
    cached = _LAST_SECOND[0]
    if cached[0] != second:
        cached = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
        _LAST_SECOND[0] = cached  # one entry; replacing a tuple is atomic across threads
    return f"{cached[1]}.{micros:06d}Z"


_LAST_SECOND: list[tuple[int | None, str]] = [(None, "")]


def _accesses(memory: Memory, knowledge_id: str, since: float) -> int:
    access = memory.access
    return access.access_count_since(knowledge_id, since) if access is not None else 0


def x_state(memory: Memory, item: StoredRecord, now: float) -> dict[str, Any]:
    """``{lifecycle, decay_status, effective_confidence, weight, access_count_7d, last_access,
    tier, envelope}`` (PROFILE §6).

    ``decay_status`` and ``effective_confidence`` are the evolution layer's decay model
    (``amcp.evolution.decay.view``: the record's half-life, its learned weight, a fired
    event), the same numbers context packs and AMQL use. ``tier`` is 0: everything this
    node serves is local (upstream tier_0).
    """
    record = item.record
    assert record is not None
    state = item.state
    decay = view(record, state, now)
    return {
        "lifecycle": _LIFECYCLE_VALUE[state.lifecycle],
        "decay_status": decay.status.value,
        "effective_confidence": float(decay.effective_confidence),
        "weight": float(state.weight),
        "access_count_7d": _accesses(memory, item.knowledge_id, now - WEEK),
        "last_access": iso(state.last_access),
        "tier": 0,
        # PROFILE §6: a record written without an envelope (an older writer) is served
        # marked so; only its core and meta are covered by what was verified.
        "envelope": "verified" if record.integrity.envelope is not None else "unverified",
    }


class AmfCache:
    """``record.to_dict()`` of recently served records, keyed by knowledge_id.

    A record's content never changes under its id (content addressing), and the store hands
    out the same decoded ``AMFRecord`` object while it stays in its own cache; so an entry
    is used only when it was built from *that very object* (``is``): a superseded or
    redacted view, a re-decoded record, anything else is rebuilt. The dicts are shared
    between replies and must not be mutated — :func:`amf_out` copies the top level and
    replaces ``vendor_extensions``, the only part it changes.

    Each entry also keeps the MessagePack size of the dict's fields other than
    ``vendor_extensions``, so a reply's byte and token counts (:func:`bounded`) need only
    pack the part :func:`amf_out` changes instead of the whole record again.
    """

    __slots__ = ("_entries", "size")

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._entries: dict[str, tuple[AMFRecord, dict[str, Any], int]] = {}

    def to_dict(self, record: AMFRecord) -> dict[str, Any]:
        return self.entry(record)[0]

    def entry(self, record: AMFRecord) -> tuple[dict[str, Any], int]:
        """The record's dict and the packed size of its fields but ``vendor_extensions``."""
        entries = self._entries
        hit = entries.get(record.knowledge_id)
        if hit is not None and hit[0] is record:
            return hit[1], hit[2]
        built = record.to_dict()
        rest = _fields_size(built)
        if len(entries) >= self.size:
            # Oldest first; reads may run on several pool threads, so tolerate a race.
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del entries[next(iter(entries))]
        entries[record.knowledge_id] = (record, built, rest)
        return built, rest


_EXT = "vendor_extensions"
_EXT_KEY_SIZE = len(msgpack.packb(_EXT))


def _map_header_size(n: int) -> int:
    """Bytes of a MessagePack map header for ``n`` entries (fixmap, map16, map32)."""
    return 1 if n < 16 else 3 if n < 0x10000 else 5


def _fields_size(amf: Mapping[str, Any]) -> int:
    """Packed bytes of ``amf``'s key/value pairs other than ``vendor_extensions``, without
    the map header: a map's encoding is its header followed by each key and value, so
    sizes of disjoint parts add up."""
    rest = {k: v for k, v in amf.items() if k != _EXT}
    if not rest:
        return 0
    return len(pack_payload(rest)) - _map_header_size(len(rest))


def amf_out(
    memory: Memory, item: StoredRecord, now: float, cache: AmfCache | None = None
) -> dict[str, Any]:
    return amf_out_sized(memory, item, now, cache)[0]


def amf_out_sized(
    memory: Memory, item: StoredRecord, now: float, cache: AmfCache | None = None
) -> tuple[dict[str, Any], int]:
    """:func:`amf_out` and the MessagePack size of the dict it returns."""
    record = item.record
    assert record is not None
    if cache is not None:
        cached, rest = cache.entry(record)
        amf = dict(cached)
    else:
        amf = record.to_dict()
        rest = _fields_size(amf)
    ext = dict(amf.get(_EXT) or {})
    ext["x-state"] = x_state(memory, item, now)
    amf[_EXT] = ext
    fields = len(amf) - 1  # those counted in rest
    return amf, _map_header_size(fields + 1) + rest + _EXT_KEY_SIZE + len(pack_payload(ext))


def tokens_of(amf: Mapping[str, Any]) -> int:
    """PROFILE §7: ceil(bytes of the serialized AMF / 4)."""
    return math.ceil(len(pack_payload(amf)) / 4)


def bounded(
    amfs: Sequence[dict[str, Any]], max_bytes: int, sizes: Sequence[int] | None = None
) -> tuple[list[dict[str, Any]], int, bool]:
    """As many results as fit one reply frame: (results, total_tokens, truncated).

    The node never fragments its replies; a reply that would not fit is truncated and says
    so (``truncated``/``more``), and the client asks again for the rest. ``sizes``, when
    given, are the MessagePack sizes of ``amfs`` (from :func:`amf_out_sized`); otherwise
    each result is packed to measure it.
    """
    budget = max(max_bytes - ENVELOPE, 1)
    out: list[dict[str, Any]] = []
    size = tokens = 0
    for i, amf in enumerate(amfs):
        cost = sizes[i] if sizes is not None else len(pack_payload(amf))
        if out and size + cost > budget:
            return out, tokens, True
        size += cost
        tokens += math.ceil(cost / 4)
        out.append(amf)
    return out, tokens, False


def ack_payload(outcome: WriteOutcome) -> dict[str, Any]:
    payload: dict[str, Any] = {"knowledge_id": outcome.knowledge_id, "hlc": outcome.hlc}
    if outcome.duplicate_of:
        payload["duplicate_of"] = outcome.duplicate_of
    if outcome.near_duplicates:
        payload["near_duplicates"] = [[k, s] for k, s in outcome.near_duplicates]
    return payload


def new_work_session_id(now: float | None = None) -> str:
    """``S-YYYYMMDD-HHMMSS-6hex`` (UTC): sortable by time, unique by its random suffix."""
    ts = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return f"S-{ts:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
