"""A run of received puts applied as one batch (a bootstrap page, a large pull). Sans-IO.

``apply_changes`` hands every run of consecutive puts here. The rules are the same as for
one record (``amcp.sync.apply``, ``Memory.put_many``); what the batch shape changes is how
often the store is asked and who does the arithmetic:

- **one look-up per run, not two per record**: the ids already held here (a record, a
  tombstone) come from one ``get_many``, the evicted ones from one ``pointers`` call. A new
  edge learns from the store itself that it holds none of them, and then no record of the
  run costs a lookup of its own here (``put_many`` still checks each against the store
  under its transaction, as for every write);
- **each record verified once**: id, checksum, envelope, Ed25519 signature and size are
  recomputed here (``verify_integrity``, ``check_size``) and ``put_many`` is told so
  (``sealed_here``: it skips exactly that step, and no other rule). Nothing received is
  stored unverified;
- **verification beside storing**: given a ``Verifier`` (a worker process) and a run of at
  least ``Verifier.min_run`` puts, the worker verifies chunk k+1 while this thread embeds
  and stores chunk k. The chunks are stored in one transaction: a forged record in the last
  chunk still stores nothing of the run (the batch stops with IntegrityError, as before).
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Mapping, Sequence
from concurrent.futures import BrokenExecutor, Future, ProcessPoolExecutor
from typing import Any

from amcp.amf.ids import check_size, verify_integrity
from amcp.amf.record import AMFRecord
from amcp.errors import AmcpError, IntegrityError
from amcp.ports import MemoryWriter
from amcp.sync.conflicts import settle
from amcp.sync.result import ApplyResult
from amcp.sync.tiers import note_state_change, tiers_of

log = logging.getLogger("amcp.sync")
CHUNK = 500  # records per verification job and per put_many call inside the run's transaction
Run = list[tuple[dict[str, Any], AMFRecord]]
# (index in the chunk, "integrity" | "refuse", message): what verification found wrong
Finding = tuple[int, str, str]


def verify_amfs(amfs: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Verify received AMF maps; the problems found. What the worker process runs: it
    takes and returns plain data."""
    found: list[Finding] = []
    for i, amf in enumerate(amfs):
        try:
            _verify(AMFRecord.from_dict(amf))
        except AmcpError as exc:
            found.append(_finding(i, exc))
    return found


def verify_records(records: Sequence[AMFRecord]) -> list[Finding]:
    """``verify_amfs`` on records already shaped here (no worker)."""
    found: list[Finding] = []
    for i, record in enumerate(records):
        try:
            _verify(record)
        except AmcpError as exc:
            found.append(_finding(i, exc))
    return found


def _verify(record: AMFRecord) -> None:
    verify_integrity(record)
    check_size(record)


def _finding(index: int, exc: AmcpError) -> Finding:
    # A record that is not what it claims is a violation; a shape or size problem refuses
    # that entry only, and the rest of the batch applies.
    return (index, "integrity" if isinstance(exc, IntegrityError) else "refuse", exc.message)


class Verifier:
    """A pool of worker processes that verify received records beside the write thread.

    Started on first use (a node that never receives a large batch never starts one) with
    ``spawn``: the node has threads running, and forking a process with threads is unsafe.
    ``close`` ends the workers; the replicator closes it with the node."""

    def __init__(self, workers: int = 1, *, min_run: int = 2 * CHUNK,
                 chunk: int = CHUNK) -> None:
        if workers < 1 or chunk < 1:
            raise ValueError("a Verifier needs at least one worker and a chunk size")
        self.workers, self.min_run, self.chunk = workers, min_run, chunk
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    @property
    def started(self) -> bool:
        """Whether the worker processes are running (they start on first use)."""
        return self._pool is not None

    def wants(self, run_length: int) -> bool:
        return not self._closed and run_length >= self.min_run

    def submit(self, amfs: Sequence[Mapping[str, Any]]) -> Future[list[Finding]] | None:
        """The job verifying ``amfs``; None once closed (the caller verifies them)."""
        try:
            if self._pool is None:
                if self._closed:
                    return None
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=multiprocessing.get_context("spawn"))
            return self._pool.submit(verify_amfs, list(amfs))
        except (RuntimeError, BrokenExecutor):  # closed (or broken) meanwhile
            return None

    def close(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def held_here(memory: MemoryWriter, run: Run, result: ApplyResult) -> Run:
    """The puts of ``run`` not held here yet: the others are counted (a duplicate) or
    refused (a purged id never comes back) with one store look-up for the whole run."""
    ids = [r.knowledge_id for _e, r in run]
    found = {s.knowledge_id: s for s in memory.store.get_many(ids)}
    tiers = tiers_of(memory)
    pointers = tiers.pointers([k for k in ids if k not in found]) if tiers is not None else {}
    fresh: Run = []
    for entry, record in run:
        kid, checksum = record.knowledge_id, record.integrity.checksum
        held = found.get(kid)
        if held is not None:
            if held.record is None:
                result.refuse(kid, "purged here; a purged id never comes back")
                continue
            if held.record.integrity.checksum == checksum:
                result.duplicates += 1
                continue
        else:
            pointer = pointers.get(kid)
            if pointer is not None and not pointer.stale and pointer.checksum == checksum:
                result.duplicates += 1  # evicted here: a copy is no news
                continue
        fresh.append((entry, record))  # new, or other content (put_many answers 409)
    return fresh


def store_run(memory: MemoryWriter, run: Run, result: ApplyResult,
              verifier: Verifier | None = None) -> None:
    """Verify and store a run of puts in one transaction (module docstring). The conflicts
    the run settles are in the same transaction: a crash in between would leave them
    undecided for good (the records, sent again, are duplicates)."""
    run = held_here(memory, run, result)
    if not run:
        return
    size = verifier.chunk if verifier is not None else CHUNK
    chunks = [run[i:i + size] for i in range(0, len(run), size)]
    jobs: list[Future[list[Finding]] | None] = [None] * len(chunks)
    if verifier is not None and verifier.wants(len(run)):
        # The first chunk is verified here while the worker starts on the second.
        jobs[1:] = [verifier.submit([e["amf"] for e, _r in c]) for c in chunks[1:]]
    try:
        with memory.atomic():
            for chunk, job in zip(chunks, jobs, strict=True):
                findings = _findings(job, chunk, verifier)
                _store_verified(memory, _drop_refused(chunk, findings, result), result)
            for _entry, record in run:
                pred = record.causal.supersedes if record.causal is not None else None
                if pred:  # an evicted predecessor's pointer goes stale (docs/replication.md)
                    note_state_change(memory, pred, f"superseded by {record.knowledge_id}")
            result.resolved += settle(memory, (record for _entry, record in run))
    finally:
        for job in jobs:
            if job is not None:
                job.cancel()  # the run stopped early: what was not started is not needed


def _findings(job: Future[list[Finding]] | None, chunk: Run,
              verifier: Verifier | None) -> list[Finding]:
    """The worker's findings on ``chunk``; verified here when there is no worker, or when
    it died (then the verifier is not used again: every record is still verified)."""
    if job is not None:
        try:
            return job.result()
        except BrokenExecutor:
            log.warning("sync: the verifier process died; verifying on the write thread")
            if verifier is not None:
                verifier.close()
    return verify_records([r for _e, r in chunk])


def _drop_refused(chunk: Run, findings: list[Finding], result: ApplyResult) -> Run:
    """The chunk without its refused records; a forged one stops the whole run."""
    if not findings:
        return chunk
    refused: set[int] = set()
    for index, kind, message in findings:
        if kind == "integrity":
            raise IntegrityError(message)
        result.refuse(chunk[index][1].knowledge_id, message)
        refused.add(index)
    return [item for i, item in enumerate(chunk) if i not in refused]


def _store_verified(memory: MemoryWriter, chunk: Run, result: ApplyResult) -> None:
    """``put_many`` on verified records (``sealed_here``: the step just done is not done
    again); on a refusal, one by one to find it (``put`` checks everything again)."""
    if not chunk:
        return
    try:
        outcomes = memory.put_many([(r, False) for _e, r in chunk], dedup=False,
                                   sealed_here=True)
    except IntegrityError:
        raise
    except AmcpError:
        outcomes = None
    if outcomes is not None:
        for (entry, _r), outcome in zip(chunk, outcomes, strict=True):
            result.count(entry, outcome.created)
        return
    for entry, record in chunk:
        try:
            one = memory.put(record, dedup=False)
        except IntegrityError:
            raise
        except AmcpError as exc:
            result.refuse(entry["knowledge_id"], exc.message)
            continue
        result.count(entry, one.created)


__all__ = ["CHUNK", "Verifier", "held_here", "store_run", "verify_amfs", "verify_records"]
