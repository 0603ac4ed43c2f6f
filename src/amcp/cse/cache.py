"""What the CSE may cache, and how it reads the store.

Records are immutable and content-addressed, so a decoded, verified record never goes stale:
its view (redacted when sensitive), serialized bytes and token cost are cached per store, in
a bounded LRU. What *does* change — lifecycle, weight, last access — is read fresh for every
pack, without decoding bodies, through ``Store.states``; bodies come in bulk through the
store's ``RawBodies`` capability where it has one. Every cached answer is keyed by the
store's change mark, whose ``generation`` moves with every commit by anyone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from weakref import WeakKeyDictionary

from amcp.amf.redact import redact
from amcp.amf.types import Lifecycle
from amcp.cse.entry import Entry
from amcp.store.base import RecordFilter, RecordState, StateRow, Store, StoredRecord

T = TypeVar("T")
MAX_ENTRIES = 50_000  # ~2 KiB each: a bounded cache, not a second copy of the store
RANK_DEPTH = 2  # ranked lists keep limit × this, so writes that demote a few can be absorbed
MAX_CATCH_UP = 256  # changes since the last ranking merged in; more and it is recomputed


class RecordCache:
    """One store's CSE cache: decoded entries (LRU, at most ``limit``), small derived answers
    under the change mark, and the pre-scan's state. ``max_catch_up``: how many changes a
    kept ranking merges in before it is recomputed instead."""

    def __init__(self, limit: int = MAX_ENTRIES, max_catch_up: int = MAX_CATCH_UP) -> None:
        self.limit = limit
        self.max_catch_up = max_catch_up
        self._entries: OrderedDict[tuple[str, bool], Entry] = OrderedDict()
        # Small derived answers (project version, open signals) kept under the store's
        # change mark (``ChangeMark``: its generation moves with every commit by anyone).
        self.memo: dict[Any, tuple[Any, Any]] = {}
        # The pre-scan's state for this store (``amcp.cse.relevance.StoreScan``: its limits,
        # its SQ8 copy, its helper thread); kept here, not in ``memo``, which is cleared
        # when it grows.
        self.scan: Any = None

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
        return self.add(Entry.of_record(view), item.state.sensitive)

    def add(self, entry: Entry, sensitive: bool) -> Entry:
        key = (entry.knowledge_id, sensitive)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return entry

    def __len__(self) -> int:
        return len(self._entries)


class StoreCaches:
    """The owner of every store's ``RecordCache`` in this process, keyed weakly by the store
    object, so a cache lives exactly as long as its store (closing and dropping a store
    drops its cache; nothing is invalidated by hand). There is one, ``CACHES``: the CSE
    is called with a ``Memory``'s store, not with a cache, so the cache is found from the
    store. (Its natural owner is the store itself; it moves there with the narrow store
    port, issue 16.)"""

    def __init__(self) -> None:
        self._caches: WeakKeyDictionary[Any, RecordCache] = WeakKeyDictionary()
        self._lock = threading.Lock()

    def of(self, store: Store) -> RecordCache:
        with self._lock:
            try:
                cache = self._caches.get(store)
                if cache is None:
                    cache = self._caches[store] = RecordCache()
            except TypeError:  # a store that cannot be weakly referenced: no cache, correct
                return RecordCache()
            return cache


CACHES = StoreCaches()


def cache_for(store: Store) -> RecordCache:
    """``store``'s CSE cache (``CACHES.of``)."""
    return CACHES.of(store)


def live_states(store: Store, ids: Sequence[str], now: float) -> dict[str, RecordState]:
    """Fresh state of the active, unexpired records among ``ids`` (no body decoding)."""
    if not ids:
        return {}
    # No lifecycle in the SQL filter: with one, SQLite prefers the lifecycle index and scans
    # every active row instead of looking the ids up; we check the lifecycle here instead.
    flt = RecordFilter(ids=tuple(dict.fromkeys(ids)), lifecycles=None, now=now)
    found = {row.knowledge_id: row.state for row in store.states(flt, limit=len(ids))}
    return {k: st for k, st in found.items() if st.lifecycle is Lifecycle.ACTIVE}


@dataclass(frozen=True, slots=True)
class ChangeMark:
    """Where the store stood when an answer was cached. ``generation`` moves with every
    commit (``Store.generation``): equal marks mean nothing changed. ``hlc`` and ``seq``
    (the newest change's sequence, where the store has a change feed) say which changes
    came after, so a cached answer can be caught up instead of recomputed."""

    generation: int
    hlc: int
    seq: int | None


def change_mark(store: Store) -> ChangeMark:
    feed = store.capabilities.feed
    return ChangeMark(
        store.generation(), store.max_hlc(), feed.change_head()[0] if feed is not None else None
    )


def ranked_ids(
    store: Store, flt: RecordFilter, limit: int, mark: ChangeMark | None = None
) -> list[str]:
    """Up to ``limit`` ids by learned weight, then newest, then id (deterministic).

    Ranking a type by weight sorts every row of that type — the one pack step that grows
    with the store — so the answer is kept per store, ``RANK_DEPTH`` times deeper than
    asked, under the change mark: every commit moves it, learned weights included (a
    weight change is a logged, signed change like any other). After writes, the change log
    says which records changed; only those are re-read and merged (a node serves many packs
    between writes, and the first pack after a write must not re-sort 100k rows). A weight
    change keeps its record's HLC, so it falls before the kept mark's HLC and the catch-up
    sees a gap in the sequence: a full re-rank. ``flt.now`` is left out: only TTL expiry
    depends on it, and an expired record is dropped later by ``live_states``.
    """
    key = ("ranked", flt.scopes, flt.types, flt.kinds, flt.subject_prefix, limit)
    cache = cache_for(store)
    mark = mark or change_mark(store)
    hit = cache.memo.get(key)
    rows: _Ranked | None = None
    if hit is not None:
        old_mark, old = hit
        if old_mark == mark:
            return [r.knowledge_id for r in old.rows[:limit]]
        rows = _catch_up(store, flt, old, old_mark, mark, limit, cache.max_catch_up)
    if rows is None:
        rows = _ranked(store, flt, limit * RANK_DEPTH)
    cache.remember(key, mark, lambda: rows)
    return [r.knowledge_id for r in rows.rows[:limit]]


class _Ranked:
    __slots__ = ("complete", "rows")

    def __init__(self, rows: list[StateRow], complete: bool) -> None:
        self.rows = rows  # best first
        self.complete = complete  # every qualifying row is here (fewer than asked exist)


def _ranking_filter(flt: RecordFilter, ids: tuple[str, ...] | None = None) -> RecordFilter:
    return RecordFilter(
        scopes=flt.scopes, types=flt.types, kinds=flt.kinds, lifecycles=flt.lifecycles,
        subject_prefix=flt.subject_prefix, include_expired=True, ids=ids,
    )


def _sort(rows: list[StateRow]) -> list[StateRow]:
    """SQL's ``weight DESC, created_at DESC, knowledge_id`` (NULL created_at last)."""
    rows = sorted(rows, key=lambda r: r.knowledge_id)
    rows.sort(key=lambda r: r.created_at or "", reverse=True)  # stable: ties keep id order
    rows.sort(key=lambda r: r.state.weight, reverse=True)
    return rows


def _catch_up(
    store: Store, flt: RecordFilter, old: _Ranked, old_mark: ChangeMark,
    mark: ChangeMark, limit: int, max_catch_up: int = MAX_CATCH_UP,
) -> _Ranked | None:
    """``old`` updated with the changes since ``old_mark``, or None to recompute."""
    old_seq, new_seq = old_mark.seq, mark.seq
    if old_seq is None or new_seq is None or new_seq < old_seq:
        return None
    if new_seq - old_seq > max_catch_up:
        return None
    changes = store.changes(since_hlc=old_mark.hlc, limit=max_catch_up + 1)
    seqs = {c.seq for c in changes if c.seq > old_seq}
    if len(seqs) != new_seq - old_seq:  # some change is not after the old HLC: start over
        return None
    changed = {c.knowledge_id for c in changes if c.seq > old_seq}
    kept = [r for r in old.rows if r.knowledge_id not in changed]
    fresh = store.states(_ranking_filter(flt, tuple(sorted(changed))), limit=len(changed))
    merged = _sort([*kept, *fresh])
    if not old.complete:
        # Unchanged rows below the old list's end are unknown: keep only what ranks at or
        # above its last unchanged row, and give up if that is too short.
        if not kept:
            return None
        merged = merged[: merged.index(kept[-1]) + 1]
        if len(merged) < limit:
            return None
    depth = limit * RANK_DEPTH
    return _Ranked(merged[:depth], old.complete and len(merged) <= depth)


def _ranked(store: Store, flt: RecordFilter, depth: int) -> _Ranked:
    rows = store.states(_ranking_filter(flt), limit=depth, ranked=True)
    return _Ranked(rows, len(rows) < depth)


def load(
    store: Store, ids: Sequence[str], now: float, flt: RecordFilter | None = None
) -> dict[str, tuple[RecordState, Entry]]:
    """Fresh state and cached view of the active, unexpired records among ``ids``.

    One query where the store has the ``RawBodies`` capability: the state columns come
    with the stored bytes, and a cache miss is verified by hashing those bytes
    (``Entry.of_body``). Sensitive records, and stores without it, take the verifying read
    path.
    ``flt``: the store re-checks each record against it (its scopes, types) from verified
    state, never trusting the index that proposed the id.
    """
    ids = list(dict.fromkeys(ids))
    bodies = store.capabilities.bodies
    if bodies is None or not ids:
        states = live_states(store, ids, now)
        found = entries(store, ids, states)
        return {k: (states[k], e) for k, e in found.items()}
    cache = cache_for(store)
    out: dict[str, tuple[RecordState, Entry]] = {}
    slow: dict[str, RecordState] = {}
    for kid, state, body, checksum in bodies.raw_bodies(ids, flt):
        if state.lifecycle is not Lifecycle.ACTIVE or (
            state.expires_at is not None and state.expires_at <= now
        ):
            continue
        hit = cache.get(kid, state.sensitive)
        if hit is not None:
            out[kid] = (state, hit)
        elif body is None or state.sensitive:
            slow[kid] = state
        else:
            out[kid] = (state, cache.add(Entry.of_body(kid, body, checksum), False))
    for kid, entry in entries(store, list(slow), slow).items():
        out[kid] = (slow[kid], entry)
    return out


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


__all__ = [
    "ChangeMark", "Entry", "RecordCache", "cache_for", "change_mark", "entries", "live_states",
    "load", "ranked_ids",
]
