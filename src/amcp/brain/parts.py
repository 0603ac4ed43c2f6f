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
``Store.summaries``, and sends back plain rows: nothing is read unverified, and a worker
writes nothing to the store (its open moves the verification mark in the witness directory,
as every open does). Quarantine is kept per process, so a record this process has
quarantined is dropped from what the workers send, and what a worker quarantined is logged
here. A worker that cannot open the store, dies or hangs is not an error: its slice is then
read here, so the output is the same whichever way it was read
(``tests/brain/test_parts.py``).

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
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amcp.amf.types import Lifecycle
from amcp.brain.entries import ALL_RECORDS, Entry, StaticRow, entry_from, static_of
from amcp.errors import StoreError
from amcp.store.base import RecordState, Store
from amcp.store.url import StoreLocation

if TYPE_CHECKING:
    from amcp.memory import Memory

log = logging.getLogger(__name__)

MIN_RECORDS = 20_000  # below this a worker's start costs more than its share of the read
MAX_WORKERS = 8
HEAD_START_S = 1.0  # a worker's start before its first row: spawn, imports, open + verify
RECORD_S = 57e-6  # one record read and verified (bench/brain_compile.py's store)
PAGE = 2000  # rows per summaries page (also the in-process walk's)
WAIT_S = 120.0  # after its own slice, this process waits this long for a worker's, plus
WAIT_FACTOR = 20  # this many times the slice's whole expected read: a hung worker is ended
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
        from amcp.store.url import open_store

        if self.store_id is None or self.location.exists() is False:
            raise StoreError(f"no store to read at {self.location}")
        store = open_store(self.location,
                           Keyring(self.key_dir, witness_dirs=self.witness_dirs))
        try:
            if store.get_meta("store_id") != self.store_id:
                raise StoreError(f"{self.location} is another store than the one being "
                                 "compiled")
        except BaseException:
            store.close()
            raise
        return store


@dataclass(frozen=True, slots=True)
class SliceRead:
    """One slice as read: (static row, entry) per unpurged record with a summary, and the
    (id, state) of the sensitive ones, which have no summary (the caller reads those
    through ``Memory``, redacted)."""

    rows: list[tuple[StaticRow, Entry]]
    sensitive: list[tuple[str, RecordState]]
    quarantined: tuple[str, ...] = ()  # what the reading store left out as failing checks


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
    flt = replace(ALL_RECORDS, id_from=part[0], id_before=part[1])
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
    """A worker process's job: open the store, read its slice, close. What its store
    quarantined goes back with the rows (quarantine is kept per process)."""
    store = opener.open()
    try:
        got = walk(store, part, now)
        return replace(got, quarantined=tuple(sorted(store.quarantined())))
    finally:
        store.close()


def _serve(conn: Connection, opener: Opener, part: IdSlice, now: float) -> None:
    """A worker process's main: the slice, or why not, sent back through ``conn``."""
    try:
        conn.send(("ok", read_in_worker(opener, part, now)))
    except Exception as exc:  # noqa: BLE001 - reported to the compiling process, not raised
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class _Worker:
    """One worker process and the pipe its slice comes back through."""

    def __init__(self, context: Any, opener: Opener, part: IdSlice, now: float) -> None:
        self.part = part
        self._conn, theirs = context.Pipe(duplex=False)
        # daemon: it dies with this process, whatever happens to this one
        self._proc = context.Process(target=_serve, args=(theirs, opener, part, now),
                                     daemon=True)
        self._proc.start()
        theirs.close()

    def result(self, timeout_s: float) -> SliceRead:
        """The worker's slice; raises when it failed, died (EOFError) or is still busy
        after ``timeout_s``."""
        if not self._conn.poll(timeout_s):
            raise TimeoutError(f"no answer within {timeout_s:.0f} s")
        kind, value = self._conn.recv()
        if kind != "ok":
            raise StoreError(str(value))
        assert isinstance(value, SliceRead)
        return value

    def close(self) -> None:
        """End the process (a stuck one is terminated) and reap it, so its CPU counts as
        this process's children's."""
        if self._proc.is_alive():
            self._proc.join(1.0)
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        self._conn.close()


def read(mem: Memory, parts: Sequence[IdSlice], now: float,
         records: int = 0) -> list[SliceRead]:
    """Every slice of ``parts``: the first read here, the others by worker processes
    (started with ``spawn``: a node has threads, and forking a process with threads is
    unsafe), each read here instead if its worker fails or takes far longer than the slice
    should (``records``: the store's size, for that bound). A record this process has
    quarantined is never taken from a worker; what a worker quarantined is logged."""
    if len(parts) == 1:
        return [walk(mem.store, parts[0], now)]
    context = multiprocessing.get_context("spawn")
    opener = Opener.of(mem)
    workers: list[_Worker] = []
    try:
        workers = [_Worker(context, opener, part, now) for part in parts[1:]]
        out = [walk(mem.store, parts[0], now)]
        wait_s = WAIT_S + WAIT_FACTOR * RECORD_S * records
        out += [_result(w, mem, now, wait_s) for w in workers]
    finally:
        for w in workers:
            w.close()
    return _without_quarantined(out, set(mem.store.quarantined()))


def _result(worker: _Worker, mem: Memory, now: float, wait_s: float) -> SliceRead:
    try:
        got = worker.result(wait_s)
    # A worker only saves time: whatever stopped it (the store would not open there, the
    # process died or hangs, a main module without a __main__ guard under spawn), this
    # process reads the slice, and its own read raises if the store is at fault.
    except Exception as exc:
        log.warning("brain: a worker could not read ids %s..%s (%s); reading them here",
                    worker.part[0] or "", worker.part[1] or "", exc)
        log.debug("brain: the worker's failure", exc_info=True)
        return walk(mem.store, worker.part, now)
    if got.quarantined:
        log.warning("brain: a worker left out %d record(s) that fail verification: %s; "
                    "run `amcp verify` for the report", len(got.quarantined),
                    ", ".join(got.quarantined[:5]))
    return got


def _without_quarantined(reads: list[SliceRead], bad: set[str]) -> list[SliceRead]:
    """The reads without what this process's store has quarantined (a worker's store
    checks what it reads, but cannot know what this one found before)."""
    if not bad:
        return reads
    return [replace(r, rows=[(s, e) for s, e in r.rows if e.knowledge_id not in bad],
                    sensitive=[(k, st) for k, st in r.sensitive if k not in bad])
            for r in reads]


__all__ = ["MIN_RECORDS", "IdSlice", "Opener", "SliceRead", "default_workers", "plan", "read",
           "walk"]
