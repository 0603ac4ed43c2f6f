"""Copy one store into another through the ``Store`` port alone (``amcp store copy``).

No SQL on either side, so any pair of adapters works: SQLite → PostgreSQL, back, or
SQLite → SQLite. The source's change log is replayed onto the destination in the log's
(HLC, seq) order — each record's own order — as the port calls that wrote it: a ``put``
with the record's body, vector and lexical terms (read through the source's vector and
lexical capabilities, when it has them), lifecycle, sensitivity and expiry; each
lifecycle change (``set_state``), learned weight (``set_weight``) and purge (a tombstone).
The destination's node signs its own chain over those entries, and the source's verified
head is recorded in the destination's meta (``copied_from``), so the copy names what it
was made from.

What cannot be replayed: a record purged in the source has no body left, so its earlier
entries are folded into its tombstone (counted as ``folded``); access statistics are not
copied (they are read-path counters, outside the signed log).

Everything is written in one destination transaction: a copy that fails, or is
interrupted, leaves the destination as it was.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from amcp.amf.types import Lifecycle
from amcp.errors import ConflictError, StoreError, StoreIntegrityError
from amcp.store.base import (
    Change,
    ChangeOp,
    PutItem,
    RecordFilter,
    Store,
    StoredRecord,
    VectorSource,
)

if TYPE_CHECKING:
    import numpy as np

EVERYTHING = RecordFilter(lifecycles=None, include_expired=True)
COPIED_FROM = "copied_from"  # the destination's meta key naming the source head
PAGE = 1000  # log entries read per call; also records per put_many and per compare page


@dataclass(frozen=True, slots=True)
class CopyCheck:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class CopyReport:
    source: str  # the redacted names, never a DSN's password
    destination: str
    records: int  # bodies written
    tombstones: int
    weights: int
    vectors: int
    changes_read: int  # source log entries
    changes_written: int  # entries the destination's log gained
    folded: int  # entries of records purged in the source, carried by their tombstone
    seconds: float
    source_head: tuple[int, str]
    destination_head: tuple[int, str]
    checks: tuple[CopyCheck, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


@dataclass(slots=True)
class _Tally:
    records: int = 0
    tombstones: int = 0
    weights: int = 0
    vectors: int = 0
    read: int = 0
    folded: int = 0
    unreadable: list[str] = field(default_factory=list)


def copy_store(
    src: Store, dst: Store, *, source: str, destination: str, allow_nonempty: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> CopyReport:
    """Replay ``src`` onto ``dst`` and verify the result; ``source``/``destination`` are
    the (redacted) names the report uses. Refuses a destination that holds anything unless
    ``allow_nonempty`` (records it already holds are then left as they are)."""
    started = time.perf_counter()
    before = src.verify()
    if not before.ok:
        raise StoreIntegrityError(f"the source {source} does not verify ("
                                  f"{'; '.join(before.problems[:3])}); run amcp verify on it")
    dst_before = dst.stats().changes
    if not allow_nonempty and (dst.max_hlc() or dst.count(EVERYTHING)):
        raise ConflictError(f"the destination {destination} is not empty "
                            f"({dst.count(EVERYTHING)} records); give an empty store, or "
                            "--into-nonempty to add to it")
    _copy_embedding_meta(src, dst, destination)
    total = src.stats().changes
    tally = _Tally()
    with dst.atomic():  # all or nothing
        _Replay(src, dst, tally).run(_log(src), total, progress)
        head = (before.checked_changes, before.head)
        dst.set_meta(COPIED_FROM, json.dumps({
            "source": source, "store_id": src.get_meta("store_id"), "seq": head[0],
            "head": head[1], "at": time.time(),
        }))
    after = dst.verify(full=True)
    checks = _checks(src, dst, tally, before.checked_changes)
    return CopyReport(
        source=source, destination=destination, records=tally.records,
        tombstones=tally.tombstones, weights=tally.weights, vectors=tally.vectors,
        changes_read=tally.read, changes_written=dst.stats().changes - dst_before,
        folded=tally.folded, seconds=round(time.perf_counter() - started, 3),
        source_head=(before.checked_changes, before.head),
        destination_head=(after.checked_changes, after.head),
        checks=(CopyCheck("destination verifies (full audit)", after.ok,
                          "; ".join(after.problems[:3]) or f"{after.checked_changes} entries"),
                *checks),
    )


def _copy_embedding_meta(src: Store, dst: Store, destination: str) -> None:
    """The vectors are copied, so the model that made them goes with them."""
    model, dim = src.get_meta("embedding_model"), src.get_meta("embedding_dim")
    if not model:
        return
    there = dst.get_meta("embedding_model")
    if there and there != model and dst.stats().vectors:
        raise ConflictError(f"{destination} holds vectors of {there}, the source's are {model}")
    dst.set_meta("embedding_model", model)
    if dim:
        dst.set_meta("embedding_dim", dim)


def _log(store: Store) -> Iterator[list[Change]]:
    """The whole log in pages, in (HLC, seq) order. ``changes`` pages by HLC, and entries
    can share one (a weight change carries its record's), so a full page is cut before
    its last HLC and the next page starts there: no entry is skipped or read twice."""
    since, limit = 0, PAGE
    while True:
        page = store.changes(since, limit)
        if len(page) < limit:
            if page:
                yield page
            return
        last = page[-1].hlc
        whole = [c for c in page if c.hlc != last]
        if not whole:  # one HLC fills the page: read more at once
            limit *= 2
            continue
        yield whole
        since, limit = whole[-1].hlc, PAGE


class _Vectors:
    """The source's vectors by row, read once in row order beside the log replay (puts
    come in about row order, so few are held at a time). A source without the vector
    capability has none to give."""

    def __init__(self, source: VectorSource | None) -> None:
        self._source = source
        self._pages = source.iter_vectors() if source is not None else iter(())
        self._held: dict[int, np.ndarray] = {}
        self._top = 0
        self._done = source is None

    def rows(self, kids: Sequence[str]) -> dict[str, int]:
        """The row key of each of ``kids`` that has one."""
        if self._source is None:
            return {}
        found = self._source.rowids(RecordFilter(ids=tuple(kids), lifecycles=None,
                                                 include_expired=True))
        return {kid: row for row, kid in self._source.ids_for_rowids(found.tolist()).items()}

    def take(self, rowid: int) -> np.ndarray | None:
        while not self._done and self._top < rowid:
            try:
                ids, mat = next(self._pages)
            except StopIteration:
                self._done = True
                break
            self._held.update(zip(ids.tolist(), mat, strict=True))
            self._top = int(ids[-1])
        return self._held.pop(rowid, None)


class _Replay:
    def __init__(self, src: Store, dst: Store, tally: _Tally) -> None:
        self.src, self.dst, self.tally = src, dst, tally
        self.vectors = _Vectors(src.capabilities.vectors)
        self.lexical = src.capabilities.lexical
        self.gone: set[str] = set()  # purged in the source: only its tombstone is copied
        self.kept: set[str] = set()  # already in the destination (allow_nonempty)
        self.puts: list[Change] = []

    def run(self, pages: Iterator[list[Change]], total: int,
            progress: Callable[[int, int], None] | None) -> None:
        for page in pages:
            for change in page:
                self.tally.read += 1
                if change.op is ChangeOp.PUT:
                    self.puts.append(change)
                    if len(self.puts) >= PAGE:
                        self._flush()
                    continue
                self._flush()  # a state change applies to the puts before it
                self._apply(change)
            if progress is not None:
                progress(self.tally.read, total)
        self._flush()

    def _apply(self, change: Change) -> None:
        kid, d = change.knowledge_id, change.details
        if change.op is ChangeOp.PURGE:
            if self.dst.put_tombstone(kid, hlc=change.hlc, reason=d.get("reason")):
                self.tally.tombstones += 1
            return
        if kid in self.gone or kid in self.kept:
            self.tally.folded += kid in self.gone
            return
        try:
            if change.op is ChangeOp.WEIGHT:
                self.dst.set_weight(kid, float(d["weight"]))
                self.tally.weights += 1
                return
            self.dst.set_state(
                kid, change.op, hlc=change.hlc, lifecycle=Lifecycle(d["lifecycle"]),
                reason=d.get("reason"), superseded_by=d.get("superseded_by"),
            )
        except StoreError as exc:
            raise StoreError(f"replaying log entry {change.seq} ({change.op.value} {kid}): "
                             f"{exc}") from exc

    def _flush(self) -> None:
        if not self.puts:
            return
        puts, self.puts = self.puts, []
        kids = list(dict.fromkeys(c.knowledge_id for c in puts))
        found = {s.knowledge_id: s for s in self.src.get_many(kids)}
        texts = self.lexical.lexical_texts(kids) if self.lexical is not None else {}
        rows = self.vectors.rows(kids)
        items: list[PutItem] = []
        for change in puts:
            item = self._item(change, found.get(change.knowledge_id), texts, rows)
            if item is not None:
                items.append(item)
        for item, result in zip(items, self.dst.put_many(items), strict=True):
            if result.created:
                self.tally.records += 1
                self.tally.vectors += item.vector is not None
            else:
                self.kept.add(item.record.knowledge_id)

    def _item(self, change: Change, stored: StoredRecord | None,
              texts: dict[str, tuple[str, str]], rows: dict[str, int]) -> PutItem | None:
        kid = change.knowledge_id
        if stored is None:  # quarantined in the source: nothing it can vouch for
            self.tally.unreadable.append(kid)
            self.gone.add(kid)
            return None
        if stored.record is None:  # purged since: its tombstone comes with its purge
            self.gone.add(kid)
            self.tally.folded += 1
            return None
        terms, context = texts.get(kid, ("", ""))
        row = rows.get(kid)
        return PutItem(
            stored.record, change.hlc, self.vectors.take(row) if row is not None else None,
            terms or None, context or None, stored.state.sensitive, stored.state.expires_at,
            Lifecycle(change.details.get("lifecycle", Lifecycle.ACTIVE.value)),
        )


def _checks(src: Store, dst: Store, tally: _Tally, src_seq: int) -> list[CopyCheck]:
    a, b = src.stats(), dst.stats()
    checks = [
        CopyCheck("record counts", (a.records, a.by_lifecycle, a.by_type)
                  == (b.records, b.by_lifecycle, b.by_type),
                  f"{a.records} → {b.records} ({a.by_lifecycle} → {b.by_lifecycle})"),
        CopyCheck("vectors", a.vectors == b.vectors, f"{a.vectors} → {b.vectors}"),
        CopyCheck("source unchanged while copying", src.verify().checked_changes == src_seq,
                  f"log ends at {src_seq}"),
        CopyCheck("every source record readable", not tally.unreadable,
                  f"{len(tally.unreadable)} quarantined in the source, not copied"
                  + (f" (first {tally.unreadable[0]})" if tally.unreadable else "")),
    ]
    checks.append(_compare_records(src, dst))
    return checks


def _compare_records(src: Store, dst: Store) -> CopyCheck:
    """Every source record against its copy: body (id, checksum, envelope, signature —
    the whole AMF dict) and the state the log vouches for."""
    compared, wrong, after = 0, [], None
    while True:
        page = src.query(EVERYTHING, limit=PAGE, after=after)
        if not page:
            break
        after = page[-1].knowledge_id
        there = {s.knowledge_id: s for s in dst.get_many([s.knowledge_id for s in page])}
        for mine in page:
            compared += 1
            if _differs(mine, there.get(mine.knowledge_id)):
                wrong.append(mine.knowledge_id)
    detail = f"{compared} compared" + (f", {len(wrong)} differ (first {wrong[0]})" if wrong
                                       else ", all equal")
    return CopyCheck("per-record envelopes and states", not wrong, detail)


def _differs(mine: StoredRecord, copy: StoredRecord | None) -> bool:
    if copy is None:
        return True
    a, b = mine.state, copy.state
    if (a.lifecycle, a.superseded_by, a.weight, a.sensitive, a.expires_at, a.reason) != (
        b.lifecycle, b.superseded_by, b.weight, b.sensitive, b.expires_at, b.reason
    ):
        return True
    if (mine.record is None) != (copy.record is None):
        return True
    return mine.record is not None and copy.record is not None and (
        mine.record.to_dict() != copy.record.to_dict()
    )


__all__ = ["COPIED_FROM", "CopyCheck", "CopyReport", "copy_store"]
