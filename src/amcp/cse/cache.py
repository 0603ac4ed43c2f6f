"""What the CSE may cache, and how it reads the store.

Records are immutable and content-addressed, so a decoded, verified record never goes stale:
its view (redacted when sensitive), serialized bytes and token cost are cached per store, in
a bounded LRU. What *does* change — lifecycle, weight, last access — is read fresh for every
pack, without decoding bodies, through ``Store.states`` when the store offers it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from weakref import WeakKeyDictionary

from amcp.amf.canonical import canonical_packb
from amcp.amf.record import AMFRecord
from amcp.amf.redact import redact
from amcp.amf.types import Lifecycle
from amcp.cse.roi import token_cost
from amcp.store.base import RecordFilter, RecordState, Store, StoredRecord

T = TypeVar("T")
MAX_ENTRIES = 50_000  # ~2 KiB each: a bounded cache, not a second copy of the store


@dataclass(frozen=True, slots=True)
class Entry:
    record: AMFRecord  # the view a pack hands out (redacted when sensitive)
    amf: dict[str, Any]
    amf_bytes: bytes  # canonical MessagePack of ``amf``: the token cost and digest input
    tokens: int


class RecordCache:
    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self.limit = limit
        self._entries: OrderedDict[tuple[str, bool], Entry] = OrderedDict()
        # Small derived answers (project version, open signals) keyed by the store's change
        # watermark: any put or lifecycle change moves max_hlc, and neither answer depends
        # on weights or access statistics, which do not.
        self.memo: dict[Any, tuple[Any, Any]] = {}

    def remember(self, key: Any, watermark: Any, compute: Callable[[], T]) -> T:
        hit = self.memo.get(key)
        if hit is not None and hit[0] == watermark:
            return cast(T, hit[1])
        value = compute()
        if len(self.memo) > 256:  # bounded: distinct (project, scopes) requests
            self.memo.clear()
        self.memo[key] = (watermark, value)
        return value

    def get(self, kid: str, sensitive: bool) -> Entry | None:
        entry = self._entries.get((kid, sensitive))
        if entry is not None:
            self._entries.move_to_end((kid, sensitive))
        return entry

    def put(self, item: StoredRecord) -> Entry | None:
        if item.record is None:
            return None
        view = redact(item.record) if item.state.sensitive else item.record
        amf = view.to_dict()
        data = canonical_packb(amf)
        entry = Entry(view, amf, data, token_cost(len(data)))
        key = (item.knowledge_id, item.state.sensitive)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return entry

    def __len__(self) -> int:
        return len(self._entries)


_CACHES: WeakKeyDictionary[Any, RecordCache] = WeakKeyDictionary()


def cache_for(store: Store) -> RecordCache:
    try:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = RecordCache()
    except TypeError:  # a store that cannot be weakly referenced: no cache, still correct
        return RecordCache()
    return cache


def live_states(store: Store, ids: Sequence[str], now: float) -> dict[str, RecordState]:
    """Fresh state of the active, unexpired records among ``ids`` (no body decoding)."""
    if not ids:
        return {}
    # No lifecycle in the SQL filter: with one, SQLite prefers the lifecycle index and scans
    # every active row instead of looking the ids up; we check the lifecycle here instead.
    flt = RecordFilter(ids=tuple(dict.fromkeys(ids)), lifecycles=None, now=now)
    states = getattr(store, "states", None)
    if states is not None:
        found = {row.knowledge_id: row.state for row in states(flt, limit=len(ids))}
    else:
        found = {s.knowledge_id: s.state for s in store.query(flt, limit=len(ids))}
    return {k: st for k, st in found.items() if st.lifecycle is Lifecycle.ACTIVE}


from amcp.evolution.outcomes import WEIGHTS_GEN  # noqa: E402 - bumped by outcome rounds


def ranked_ids(store: Store, flt: RecordFilter, limit: int) -> list[str]:
    """Up to ``limit`` ids by learned weight, then newest, then id (deterministic).

    Memoised per store on (change watermark, weights generation): ranking a type by weight
    sorts every row of that type, which is the one pack step that grows with the store.
    Puts and lifecycle changes move ``max_hlc``; outcome rounds bump ``WEIGHTS_GEN`` in the
    same transaction as their ``set_weight`` calls, so another process's writes are seen too.
    ``flt.now`` is left out of the key: only TTL expiry depends on it, and an expired record
    is dropped later by ``live_states``.
    """
    key = ("ranked", flt.scopes, flt.types, flt.kinds, flt.subject_prefix, limit)
    mark = (store.max_hlc(), store.get_meta(WEIGHTS_GEN))
    return cache_for(store).remember(key, mark, lambda: _ranked(store, flt, limit))


def _ranked(store: Store, flt: RecordFilter, limit: int) -> list[str]:
    flt = RecordFilter(
        scopes=flt.scopes, types=flt.types, kinds=flt.kinds, lifecycles=flt.lifecycles,
        subject_prefix=flt.subject_prefix, include_expired=True,
    )
    states = getattr(store, "states", None)
    if states is not None:
        return [row.knowledge_id for row in states(flt, limit=limit, ranked=True)]
    # Fallback for stores without ``states``: decode a bounded page and rank it here.
    page = store.query(flt, limit=limit * 4)
    page.sort(key=lambda s: (-s.state.weight, _neg_created(s), s.knowledge_id))
    return [s.knowledge_id for s in page[:limit]]


def _neg_created(item: StoredRecord) -> tuple[int, ...]:
    created = item.record.meta.created_at if item.record else ""
    return tuple(-b for b in created.encode())


def entries(store: Store, ids: Sequence[str], states: dict[str, RecordState]) -> dict[str, Entry]:
    """Cached views of ``ids`` (those in ``states``); misses are read through the store's
    verifying read path once and cached."""
    cache = cache_for(store)
    out: dict[str, Entry] = {}
    missing: list[str] = []
    for kid in ids:
        st = states.get(kid)
        if st is None:
            continue
        hit = cache.get(kid, st.sensitive)
        if hit is not None:
            out[kid] = hit
        else:
            missing.append(kid)
    for item in store.get_many(missing):
        entry = cache.put(item)
        if entry is not None:
            out[item.knowledge_id] = entry
    return out


__all__ = ["Entry", "RecordCache", "cache_for", "entries", "live_states", "ranked_ids"]
