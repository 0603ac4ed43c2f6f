"""A cold compile's read of the store, split by id over worker processes.

A cold compile reads every record's body, and the store verifies each one as it serves it
(row seal checked, id, checksum and envelope recomputed: ``Store.summaries``). That is
~57 µs a record here and more than half of a 100k-record compile, on one core. The work is
the same for every record and needs nothing from the others, so it is split by id: ids are
content hashes ("K-" + hex), and hex bounds (``RecordFilter.id_from`` / ``id_before``) cut
a store into slices of even size without reading it first.

This process reads the first slice through its own store. Each worker process opens the
store the way any second process does (``open_store`` on the same location, key directory
and witnesses, verified on open), reads its slice through the same verifying
``Store.summaries``, and sends back plain rows. Nothing is read unverified and no worker
writes. A worker that cannot open the store or dies is not an error: its slice is then read
here, so the output is the same whichever way it was read (``tests/brain/test_parts.py``).

The first slice is the larger one: a worker spends about a second (start, imports, opening
and verifying the store) before it reads its first row, and this process, with the store
already open, reads meanwhile. ``HEAD_START_S`` and ``RECORD_S`` only balance the slices
(measured on the 2-core machine of bench/brain_compile.py); a wrong guess costs time, never
a record.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amcp.amf.types import Lifecycle
from amcp.brain.entries import ALL_RECORDS, Entry, StaticRow, entry_from, static_of
from amcp.errors import StoreError
from amcp.store.base import RecordFilter, RecordState, Store
from amcp.store.url import StoreLocation

if TYPE_CHECKING:
    from amcp.memory import Memory

log = logging.getLogger(__name__)

MIN_RECORDS = 20_000  # below this a worker's start costs more than its share of the read
MAX_WORKERS = 8
HEAD_START_S = 1.0  # a worker's start before its first row: spawn, imports, open + verify
RECORD_S = 57e-6  # one record read and verified (bench/brain_compile.py's store)
PAGE = 1000  # rows per summaries page inside a slice
_SPAN = 1 << 32  # slice bounds are the first 8 hex digits after "K-"

IdSlice = tuple[str | None, str | None]  # (id_from, id_before); None: open at that end


@dataclass(frozen=True, slots=True)
class Opener:
    """What a worker needs to open the store this process has open (no key material: the
    worker reads the key directory itself, as every process on this machine does), and
    the store's id, so that a worker can only ever read that very store."""

    location: StoreLocation
    key_dir: Path
    witness_dirs: tuple[Path, ...]
    store_id: str | None

    @classmethod
    def of(cls, mem: Memory) -> Opener:
        return cls(mem.location, mem.keyring.directory, mem.keyring.witness_dirs,
                   mem.store.get_meta("store_id"))

    def open(self) -> Store:
        """The store, opened and verified as any process opens it; StoreError when it is
        not the one this process has open (opening never creates one here: a missing file
        would otherwise become a new, empty store, and its slice would read as empty)."""
        from amcp.keyring import Keyring
        from amcp.store.url import Backend, open_store

        path = self.location.path
        if self.store_id is None or (
                self.location.backend is Backend.SQLITE and (path is None or not path.is_file())):
            raise StoreError(f"no store to read at {self.location}")
        store = open_store(self.location,
                           Keyring(self.key_dir, witness_dirs=self.witness_dirs))
        if store.get_meta("store_id") != self.store_id:
            store.close()
            raise StoreError(f"{self.location} is another store than the one being compiled")
        return store


@dataclass(frozen=True, slots=True)
class SliceRead:
    """One slice as read: (static row, entry) per unpurged record with a summary, and the
    (id, state) of the sensitive ones, which have no summary (the caller reads those
    through ``Memory``, redacted)."""

    rows: list[tuple[StaticRow, Entry]]
    sensitive: list[tuple[str, RecordState]]


def default_workers() -> int:
    """One worker per core beside this process's own, up to ``MAX_WORKERS``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(0, min(MAX_WORKERS, (cores or 1) - 1))


def plan(records: int, workers: int) -> list[IdSlice]:
    """The slices for ``workers`` worker processes and this one (first), or one slice of
    everything when the split would not pay. Worker slices are even; the first is larger
    by what this process reads while the workers start."""
    if workers < 1 or records < MIN_RECORDS:
        return [(None, None)]
    ahead = min(0.5, HEAD_START_S / (RECORD_S * records))  # share read during the start
    first = ahead + (1.0 - ahead) / (workers + 1)
    cuts = [first + i * (1.0 - first) / workers for i in range(workers)]
    bounds = [f"K-{int(c * _SPAN):08x}" for c in cuts]
    return list(zip([None, *bounds], [*bounds, None], strict=True))


def walk(store: Store, part: IdSlice, now: float) -> SliceRead:
    """Read one slice through ``Store.summaries`` (every row verified) into entries."""
    flt = RecordFilter(lifecycles=ALL_RECORDS.lifecycles, include_expired=True,
                       id_from=part[0], id_before=part[1])
    rows: list[tuple[StaticRow, Entry]] = []
    sensitive: list[tuple[str, RecordState]] = []
    after: str | None = None
    while page := store.summaries(flt, limit=PAGE, after=after):
        after = page[-1].knowledge_id
        for row in page:
            if row.state.lifecycle is Lifecycle.PURGED:
                continue
            if row.summary is None:
                sensitive.append((row.knowledge_id, row.state))
                continue
            static = static_of(row.summary)
            rows.append((static, entry_from(row.knowledge_id, static, row.state, now)))
    return SliceRead(rows, sensitive)


def read_in_worker(opener: Opener, part: IdSlice, now: float) -> SliceRead:
    """A worker process's job: open the store, read its slice, close."""
    store = opener.open()
    try:
        return walk(store, part, now)
    finally:
        store.close()


def read(mem: Memory, parts: Sequence[IdSlice], now: float) -> list[SliceRead]:
    """Every slice of ``parts``: the first read here, the others by worker processes
    (started with ``spawn``: a node has threads, and forking a process with threads is
    unsafe), each read here instead if its worker fails."""
    if len(parts) == 1:
        return [walk(mem.store, parts[0], now)]
    opener = Opener.of(mem)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(parts) - 1, mp_context=context) as pool:
        jobs = [pool.submit(read_in_worker, opener, part, now) for part in parts[1:]]
        out = [walk(mem.store, parts[0], now)]
        out += [_result(job, mem, part, now) for job, part in zip(jobs, parts[1:], strict=True)]
    return out


def _result(job: Future[SliceRead], mem: Memory, part: IdSlice, now: float) -> SliceRead:
    try:
        return job.result()
    # A worker only saves time: whatever stopped it (the store would not open there, the
    # process died: BrokenProcessPool, a main module without a __main__ guard under spawn),
    # this process reads the slice, and its own read raises if the store is at fault.
    except Exception as exc:  # noqa: BLE001
        log.warning("brain: a worker could not read ids %s..%s (%s); reading them here",
                    part[0] or "", part[1] or "", exc)
        return walk(mem.store, part, now)


__all__ = ["MIN_RECORDS", "IdSlice", "Opener", "SliceRead", "default_workers", "plan", "read",
           "walk"]
