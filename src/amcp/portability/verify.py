"""Five-point verification after an import (docs/portability.md, "Verification").

1. counts reconcile: source items (pass one) = items written or accounted for (pass two),
   and every record the writer acknowledged is in the store;
2. every imported record carries its source item's content hash, and (for records that
   store the item's text as is) the stored text hashes to it;
3. a recall spot-check per kind finds sampled items by their own text;
4. timeline order: the stored times of sampled items, taken in source-time order, never
   go backwards and equal the normalised source times;
5. nothing sensitive is readable: no detected secret appears in the store's files or in a
   default export, and recall shows sensitive records redacted.

Points 1, 2 and 5 are checked on every record as its batch is written (streamed, nothing
accumulated but counters and up to ``MAX_SECRETS`` secrets); 3 and 4 on samples.
"""

from __future__ import annotations

import io
import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amcp.agent.capture import find_credentials
from amcp.amf.timefmt import parse_ts
from amcp.portability.model import Kind, content_hash
from amcp.portability.plan import norm
from amcp.portability.write import Written

if TYPE_CHECKING:  # Memory calls into this package: no import cycle at run time
    from amcp.amf.record import AMFRecord
    from amcp.memory import Memory

SPOT_CHECKS = 5  # per kind
TIMELINE_SAMPLE = 2000
MAX_SECRETS = 200


@dataclass(frozen=True, slots=True)
class Check:
    point: int
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Verification:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [{"point": c.point, "name": c.name, "ok": c.ok,
                                           "detail": c.detail} for c in self.checks]}

    def to_markdown(self) -> str:
        rows = [f"| {c.point} | {c.name} | {'ok' if c.ok else '**FAILED**'} | {c.detail} |"
                for c in self.checks]
        return "\n".join(["# Import verification", "", "| # | check | result | detail |",
                          "|---|---|---|---|", *rows]) + "\n"


@dataclass(slots=True)
class Verifier:
    memory: Memory
    rng: random.Random = field(default_factory=lambda: random.Random(19))
    written: int = 0
    missing: list[str] = field(default_factory=list)
    bad_hash: list[str] = field(default_factory=list)
    per_kind: dict[str, list[Written]] = field(default_factory=dict)
    kind_seen: dict[str, int] = field(default_factory=dict)
    timeline: list[tuple[float, str, str]] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)

    def observe(self, batch: Sequence[Written]) -> None:
        """Checks 1 and 2 for one written batch; samples for 3, 4 and 5. The batch's records
        are read back in one store read."""
        stored = {r.knowledge_id: r for r in
                  self.memory.store.get_many([w.knowledge_id for w in batch])}
        for w in batch:
            found = stored.get(w.knowledge_id)
            self._observe(w, found.record if found is not None else None)

    def _observe(self, w: Written, rec: AMFRecord | None) -> None:
        self.written += 1
        if rec is None:
            self.missing.append(w.knowledge_id)
            return
        ext = rec.vendor_extensions
        if w.merged_into is None:
            same_text = w.spec.object is None and not w.spec.predicate  # not a capture
            if ext.get("x-source-hash") != w.spec.source_hash or (
                same_text and content_hash(rec.text) != w.spec.source_hash
            ):
                self.bad_hash.append(w.knowledge_id)
        elif norm(rec.text) != norm(w.spec.text):
            self.bad_hash.append(w.knowledge_id)
        self._sample(w, rec.meta.created_at)
        if w.spec.sensitive and len(self.secrets) < MAX_SECRETS:
            # A capture's text is already redacted and its object is the raw secret; an
            # item stored as is holds the secret inside its text.
            if w.spec.object is not None:
                self.secrets.append(w.spec.object)
            else:
                self.secrets.extend(h.value for h in find_credentials(w.spec.text))

    def _sample(self, w: Written, stored_at: str) -> None:
        kind = w.spec.kind.value
        n = self.kind_seen.get(kind, 0) + 1
        self.kind_seen[kind] = n
        bucket = self.per_kind.setdefault(kind, [])
        if not w.spec.sensitive:
            _reservoir(bucket, w, n, SPOT_CHECKS, self.rng)
        source_t = parse_ts(w.spec.created_at).timestamp()
        _reservoir(self.timeline, (source_t, stored_at, w.knowledge_id), self.written,
                   TIMELINE_SAMPLE, self.rng)

    def finish(self, planned_items: int, accounted: int, planned_records: int) -> Verification:
        return Verification((
            self._counts(planned_items, accounted, planned_records),
            Check(2, "content hashes match the source", not self.bad_hash,
                  f"{self.written - len(self.bad_hash)}/{self.written} match"
                  + (f"; first mismatch {self.bad_hash[0]}" if self.bad_hash else "")),
            self._recall(),
            self._timeline(),
            self._sensitive(),
        ))

    def _counts(self, items: int, accounted: int, records: int) -> Check:
        ok = items == accounted and records == self.written and not self.missing
        detail = (f"source items {items}, accounted for {accounted}; records planned "
                  f"{records}, written {self.written}, missing from store {len(self.missing)}")
        return Check(1, "counts reconcile source → report → store", ok, detail)

    def _recall(self) -> Check:
        tried = found = 0
        misses: list[str] = []
        for kind, bucket in sorted(self.per_kind.items()):
            for w in bucket:
                tried += 1
                want = w.merged_into or w.knowledge_id
                res = self.memory.recall(w.spec.text[:500], k=10, scope=w.spec.scope,
                                         touch=False, lifecycles=None)
                if any(h.knowledge_id == want for h in res.hits):
                    found += 1
                else:
                    misses.append(f"{kind}:{want[:14]}")
        kinds = ", ".join(f"{k} {len(v)}" for k, v in sorted(self.per_kind.items()))
        return Check(3, "recall finds sampled items by their text", found == tried,
                     f"{found}/{tried} found ({kinds})" + (f"; missed {misses[:3]}" if misses
                                                           else ""))

    def _timeline(self) -> Check:
        order = sorted(self.timeline)
        stored = [parse_ts(s).timestamp() for _t, s, _k in order]
        backwards = sum(1 for a, b in itertools.pairwise(stored) if b < a)
        unequal = sum(1 for (t, _s, _k), st in zip(order, stored, strict=True)
                      if abs(t - st) > 1e-3)
        return Check(4, "timeline order preserved", backwards == 0 and unequal == 0,
                     f"{len(order)} sampled: {backwards} out of order, {unequal} times changed")

    def _sensitive(self) -> Check:
        if not self.secrets:
            return Check(5, "nothing sensitive readable", True, "no secrets in this import")
        leaks = _leaks_in_files(self.memory.path, self.secrets)
        buf = io.StringIO()
        self.memory.export(buf)
        exported = buf.getvalue()
        leaks += [f"export:{s[:4]}…" for s in self.secrets if s in exported]
        return Check(5, "nothing sensitive readable", not leaks,
                     f"{len(self.secrets)} secrets checked in the store files and a default "
                     f"export: {len(leaks)} readable")


def _reservoir(bucket: list[Any], value: Any, n: int, size: int, rng: random.Random) -> None:
    if len(bucket) < size:
        bucket.append(value)
    elif (j := rng.randrange(n)) < size:
        bucket[j] = value


def _leaks_in_files(db: Path, secrets: list[str]) -> list[str]:
    needles = [s.encode() for s in secrets]
    leaks = []
    for path in (db, db.with_name(db.name + "-wal")):
        if not path.exists():
            continue
        for chunk in _chunks(path, max(len(n) for n in needles)):
            leaks += [f"{path.name}:{n[:4].decode()}…" for n in needles if n in chunk]
    return leaks


def _chunks(path: Path, overlap: int) -> Iterator[bytes]:
    tail = b""
    with path.open("rb") as fh:
        while block := fh.read(4 * 1024 * 1024):
            yield tail + block
            tail = block[-overlap:]


__all__ = ["Check", "Kind", "Verification", "Verifier"]
