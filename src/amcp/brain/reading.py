"""Reading every record of a store as brain entries, once per compile or export.

The states come from one body-less read; bodies are read (and verified by the store) only for
records the caller's cache does not hold yet, and what they give is added to it. Why a
cache: reading a body means decoding and re-hashing it, most of a cold 100k-record compile,
and a record's content never changes under its id. A cold read (a cache mostly empty) walks
the store once instead, split over worker processes when the store is large
(``amcp.brain.parts``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from amcp.amf.types import Lifecycle
from amcp.brain import parts
from amcp.brain.entries import ALL_RECORDS, Entry, StaticRow, entry_from, static_of
from amcp.errors import ValidationError
from amcp.store.base import RecordFilter, RecordState

if TYPE_CHECKING:
    from amcp.memory import Memory

PAGE = parts.PAGE  # records read per store page


def iter_entries(mem: Memory, now: float, cache: dict[str, StaticRow] | None = None, *,
                 workers: int = 0) -> Iterator[Entry]:
    """Every unpurged record of the store as an entry (sensitive records come redacted, as
    every read without ``reveal`` does), in no particular order (callers sort).

    ``workers``: worker processes for a cold read of a large store (``parts.plan``); 0
    reads everything in this process."""
    if not 0 <= workers <= parts.MAX_WORKERS:
        raise ValidationError("workers", f"0 to {parts.MAX_WORKERS}, not {workers}")
    cache = {} if cache is None else cache
    if not cache:  # cold: one walk gives the states and the bodies at once
        yield from _read_all(mem, cache, now, workers)
        return
    # One pass: entries for what the cache holds, the rest kept (id, state) to read after.
    entries: list[Entry] = []
    missing: list[tuple[str, RecordState]] = []
    for row in mem.store.states(ALL_RECORDS, limit=-1):
        if row.state.lifecycle is Lifecycle.PURGED:
            continue
        kept = cache.get(row.knowledge_id)
        if kept is None:
            missing.append((row.knowledge_id, row.state))
        else:
            entries.append(entry_from(row.knowledge_id, kept, row.state, now))
    if len(missing) > (len(entries) + len(missing)) // 4:  # mostly cold: a walk beats lookups
        yield from _read_all(mem, cache, now, workers)
        return
    _fill(mem, [kid for kid, _ in missing], cache)
    entries += [entry_from(kid, cache[kid], state, now) for kid, state in missing
                if kid in cache]
    yield from entries


def _read_all(mem: Memory, cache: dict[str, StaticRow], now: float,
              workers: int) -> Iterator[Entry]:
    """Every unpurged record read as a verified summary (``Store.summaries``: each row's
    seal checked and body re-hashed, only what a ``StaticRow`` takes parsed), slice by slice
    (``parts``), added to ``cache``, and its entry. Sensitive records have no summary: they
    are read through ``Memory`` (which redacts them, as every read without ``reveal`` does)
    at the end."""
    records = mem.store.count(ALL_RECORDS) if workers else 0
    sensitive: list[tuple[str, RecordState]] = []
    for read in parts.read(mem, parts.plan(records, workers), now, records):
        for static, entry in read.rows:
            cache.setdefault(entry.knowledge_id, static)
            yield entry
        sensitive += read.sensitive
    _fill(mem, [kid for kid, _ in sensitive], cache)
    for kid, state in sensitive:
        if (kept := cache.get(kid)) is not None:
            yield entry_from(kid, kept, state, now)


def _fill(mem: Memory, ids: list[str], cache: dict[str, StaticRow]) -> None:
    """Add the records ``ids`` to ``cache``, read through ``Memory.list_records`` (verified,
    and redacted when sensitive)."""
    for start in range(0, len(ids), PAGE):
        chunk = tuple(ids[start:start + PAGE])
        flt = RecordFilter(ids=chunk, lifecycles=None, include_expired=True)
        for item in mem.list_records(flt, limit=len(chunk)):
            if item.record is not None:
                cache[item.knowledge_id] = static_of(item.record)


__all__ = ["PAGE", "iter_entries"]
