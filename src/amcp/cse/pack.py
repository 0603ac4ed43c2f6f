"""``build_pack``: the deterministic cold-boot context pack (upstream L4 scheduling_algorithm).

Steps, as upstream (step numbers in comments):

1. embed the task;
2. preselect candidates through the store instead of scanning it — the top ``HITS`` records
   by vector similarity (lexical BM25 when the store has no embedder), the top ``CORE_PICK``
   core records of each core type by learned weight, and, after HIGH_ROI is placed, the
   gravity neighbours of what it holds (same cluster, causal predecessors). Candidate sets
   are bounded, so a pack costs the same at 10k and 100k records;
3. rank by ROI (``amcp.cse.roi``), ties broken by knowledge id;
4. CORE_PRINCIPLES: KT-PITFALL, KT-FACT, KT-PRINCIPLE — full AMF where it fits, else a
   one-line pointer (this zone is never evicted, so a line beats nothing);
5. HIGH_ROI: greedy by ROI while records fit;
6. MEDIUM_ROI: the remaining candidates plus gravity neighbours, greedy by ROI; what does
   not fit, and — when WORKING_MEMORY is nearly full — its lower-ROI half, is compressed into
   OVERFLOW_BUFFER as pointers;
7. output: the same store, request and ``now`` give the same ``digest`` (sha256 of the
   canonical MessagePack of ``to_dict()`` without ``digest`` and ``timings``).

No zone is ever over its budget (``ZoneUse`` refuses it). A budget whose RESERVED share
cannot hold the protocol header is refused (400, with the minimum); a CORE_PRINCIPLES share
too small for one core record in full yields a *degraded* pack (``degraded`` says why) that
carries core pointers instead. Expired records (``amcp.evolution.decay``) are not loaded.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgpack

from amcp.amf.record import AMF_VERSION, AMFRecord
from amcp.amf.timefmt import format_ts
from amcp.amf.types import DecayType, KnowledgeType
from amcp.cse import gravity
from amcp.cse.cache import ChangeMark, cache_for, change_mark, load, ranked_ids
from amcp.cse.canon import Raw, packb_parts
from amcp.cse.entry import Entry
from amcp.cse.relevance import top_relevant
from amcp.cse.roi import recency_factor, roi, token_cost
from amcp.cse.zones import CORE_TYPES, NEAR_FULL, Zone, ZoneUse, allocate
from amcp.errors import ValidationError
from amcp.evolution.decay import DAY, DecayStatus, default_model, trust, view, view_of
from amcp.evolution.qef import Signal, pending_signals
from amcp.retrieval.lexical import match_query
from amcp.store.base import RecordFilter, RecordState

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter

HITS = 48  # task-similar candidates: several times what HIGH_ROI holds at common budgets
CORE_PICK = 24  # per core type, by weight: more than CORE_PRINCIPLES holds below ~60k tokens
GRAVITY_SEEDS = 4  # clusters pulled in for the best HIGH_ROI records
GRAVITY_PICK = 8  # neighbours per cluster
GRAVITY = 0.5  # a neighbour inherits this share of the relevance of the record it follows
MAX_BUDGET = 10_000_000
MAX_TASK = 10_000
MAX_VERSIONS = 1000  # version records of one project considered (a release history)


@dataclass(frozen=True, slots=True)
class PackItem:
    knowledge_id: str
    zone: Zone
    roi: float
    tokens: int
    form: str  # "full" (the AMF is included) or "pointer" (one line)
    pointer: str
    relevance: float
    kind: str | None
    # The record behind the item; its AMF (built on first use) is carried when form="full".
    source: Entry | None = field(default=None, compare=False, repr=False)

    @property
    def record(self) -> AMFRecord | None:
        return self.source.record if self.source is not None else None

    @property
    def amf(self) -> dict[str, Any] | None:
        return self.source.amf if self.source is not None and self.form == "full" else None

    @property
    def amf_bytes(self) -> bytes | None:
        return self.source.amf_bytes if self.source is not None and self.form == "full" else None

    def to_dict(self, *, raw: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "knowledge_id": self.knowledge_id, "zone": self.zone.value, "roi": self.roi,
            "tokens": self.tokens, "form": self.form, "pointer": self.pointer,
        }
        if self.form == "full":
            d["amf"] = Raw(self.amf_bytes) if raw and self.amf_bytes else self.amf
        return d

    def packed(self, packer: msgpack.Packer) -> Raw:
        """``to_dict(raw=True)`` as canonical MessagePack, composed directly: a pack digests
        dozens of items, and the generic encoder sorts and walks each one's map."""
        amf = self.amf_bytes if self.form == "full" else None
        if self.form == "full" and not amf:
            return Raw(packb_parts(self.to_dict(raw=True)))
        out = [packer.pack_map_header(7 if amf else 6)]
        if amf:
            out += (_K_AMF, amf)
        out += (
            _K_FORM, packer.pack(self.form), _K_ID, packer.pack(self.knowledge_id),
            _K_POINTER, packer.pack(self.pointer), _K_ROI, packer.pack(self.roi),
            _K_TOKENS, packer.pack(self.tokens), _K_ZONE, packer.pack(self.zone.value),
        )
        return Raw(b"".join(out))


# PackItem.packed's keys, in canonical (UTF-8 byte) order.
_K_AMF, _K_FORM, _K_ID, _K_POINTER, _K_ROI, _K_TOKENS, _K_ZONE = (
    msgpack.packb(k) for k in ("amf", "form", "knowledge_id", "pointer", "roi", "tokens", "zone")
)


@dataclass(frozen=True, slots=True)
class Pack:
    project: str
    version: str
    task: str
    budget_tokens: int
    working_tokens: int
    now: str
    header: dict[str, Any]
    zones: dict[Zone, ZoneUse]
    items: tuple[PackItem, ...]
    urgent_signals: tuple[dict[str, Any], ...]
    pending_signals: int
    degraded: tuple[str, ...]
    digest: str = ""
    timings: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def tokens(self) -> int:
        """Tokens the CSE loaded: every zone but the caller's WORKING_MEMORY."""
        return sum(u.used for z, u in self.zones.items() if z is not Zone.WORKING_MEMORY)

    @property
    def count(self) -> int:
        return len(self.items)

    @property
    def confirmation(self) -> str:
        return (
            f"[AMCP {AMF_VERSION}] Cold boot: {self.project} v{self.version} | context: "
            f"{self.tokens}t from {self.count}k | QEF: {self.pending_signals} pending | "
            "state: ACTIVE"
        )

    def zone_items(self, zone: Zone) -> list[PackItem]:
        return [it for it in self.items if it.zone is zone]

    def body(self, *, raw: bool = False) -> dict[str, Any]:
        """Everything the digest covers (``to_dict`` without digest and timings)."""
        return self._body([it.to_dict(raw=raw) for it in self.items])

    def _body(self, items: list[Any]) -> dict[str, Any]:
        return {
            "amcp_version": AMF_VERSION, "project": self.project, "version": self.version,
            "task": self.task, "budget_tokens": self.budget_tokens,
            "working_tokens": self.working_tokens, "now": self.now, "header": self.header,
            "zones": {z.value: u.to_dict() for z, u in self.zones.items()},
            "items": items,
            "urgent_signals": list(self.urgent_signals),
            "pending_signals": self.pending_signals, "degraded": list(self.degraded),
            "tokens": self.tokens, "count": self.count, "confirmation": self.confirmation,
        }

    def compute_digest(self) -> str:
        packer = msgpack.Packer(use_bin_type=True, use_single_float=False, autoreset=True)
        body = self._body([it.packed(packer) for it in self.items])
        return hashlib.sha256(packb_parts(body)).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {**self.body(), "digest": self.digest, "timings": dict(self.timings)}


@dataclass(slots=True)
class _Cand:
    kid: str
    entry: Entry
    state: RecordState
    relevance: float
    roi: float = 0.0
    line: str = ""  # the pointer, made when first needed

    def pointer(self) -> str:
        if not self.line:
            self.line = self.entry.pointer(self.state.weight)
        return self.line


@dataclass(slots=True)
class _Zones:
    budgets: dict[Zone, int]
    used: dict[Zone, int] = field(default_factory=dict)
    items: list[PackItem] = field(default_factory=list)
    placed: set[str] = field(default_factory=set)

    def room(self, zone: Zone) -> int:
        return self.budgets[zone] - self.used.get(zone, 0)

    def place(self, c: _Cand, zone: Zone, *, form: str = "full") -> bool:
        if c.kid in self.placed:
            return False
        # The pointer line (every item carries one) is made only once the item fits: most
        # tries of a full AMF fail, and a line costs ~20 µs.
        if form == "full":
            if c.entry.tokens > self.room(zone):
                return False
            cost, line = c.entry.tokens, c.pointer()
        else:
            line = c.pointer()
            cost = token_cost(len(line.encode()))
            if cost > self.room(zone):
                return False
        self.used[zone] = self.used.get(zone, 0) + cost
        self.placed.add(c.kid)
        self.items.append(PackItem(
            c.kid, zone, c.roi, cost, form, line, round(c.relevance, 9), c.entry.kind, c.entry,
        ))
        return True


def _check(task: str, budget_tokens: int, working_tokens: int | None) -> int:
    if not isinstance(task, str) or not task.strip():
        raise ValidationError("task", "describe the task in a few words")
    if len(task) > MAX_TASK:
        raise ValidationError("task", f"longer than {MAX_TASK} characters")
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
        raise ValidationError("budget_tokens", "must be an integer")
    if not 1 <= budget_tokens <= MAX_BUDGET:
        raise ValidationError("budget_tokens", f"must be from 1 to {MAX_BUDGET}")
    w = 0 if working_tokens is None else working_tokens
    if isinstance(w, bool) or not isinstance(w, int) or w < 0:
        raise ValidationError("working_tokens", "must be a non-negative integer")
    return w


def _version(memory: MemoryWriter, project: str, flt: RecordFilter, mark: ChangeMark) -> str:
    """The newest active ``<project namespace>.version`` record's object, else 0.0.0."""
    return cache_for(memory.store).remember(
        ("version", project, flt.scopes), mark,
        lambda: _find_version(memory, project, flt),
    )


def _find_version(memory: MemoryWriter, project: str, flt: RecordFilter) -> str:
    from amcp.amf.portable import scope_namespace

    subject = scope_namespace(project) + ".version"
    # An exact subject match uses the subject index; a prefix match scanned every record.
    exact = RecordFilter(scopes=flt.scopes, subjects=(subject,), now=flt.now)
    # Rank by the created_at column, decode only the newest.
    rows = memory.store.states(exact, limit=MAX_VERSIONS)
    newest_id = max(((r.created_at or "", r.knowledge_id) for r in rows), default=None)
    ids = [newest_id[1]] if newest_id else []
    found = [s.record for s in memory.store.get_many(ids) if s.record is not None]
    if not found:
        return "0.0.0"
    newest = max(found, key=lambda r: (r.meta.created_at, r.knowledge_id))
    return " ".join(newest.core.object.split())[:40].removeprefix("v")


def _hits(memory: MemoryWriter, task: str, flt: RecordFilter) -> list[tuple[str, float]]:
    if memory.embedder is not None:
        query = memory.embedder.embed_query(task)
        found = top_relevant(memory, query, flt, HITS)
        return [(k, max(0.0, min(1.0, s))) for k, s in found]
    # No vectors: BM25 rank stands in for similarity (1 for the best, falling off).
    lexical = memory.store.capabilities.lexical
    if lexical is None:
        return []
    ranked = lexical.search_lexical(match_query(task), flt, HITS)
    return [(kid, 1.0 / (1.0 + i)) for i, (kid, _s) in enumerate(ranked)]


def _candidates(
    memory: MemoryWriter, rel: dict[str, float], ids: Sequence[str], now: float,
    flt: RecordFilter,
) -> list[_Cand]:
    # ``flt`` (the pack's scopes): the store re-checks every candidate against it from
    # verified state, as recall does, so an index row cannot bring another scope's record
    # (or a causal link to one) into the pack.
    found = load(memory.store, ids, now, flt)
    out: list[_Cand] = []
    for kid in dict.fromkeys(ids):
        hit = found.get(kid)
        if hit is None:
            continue
        state, entry = hit
        if _expired(entry, state, now):
            continue
        out.append(_rescored(_Cand(kid, entry, state, 0.0), rel.get(kid, 0.0), now))
    return out


def _expired(entry: Entry, state: RecordState, now: float) -> bool:
    if entry.own_decay or entry.type is KnowledgeType.SIGNAL:
        # An own decay model or a signal's status needs the full record: rare in a pack.
        return view(entry.record, state, now).status is DecayStatus.EXPIRED
    model = default_model(entry.type)
    if model.type is DecayType.NONE:
        return False  # factor 1: effective = start, never below its floor (see decay.view)
    status = view_of(entry.type, entry.confidence, entry.created_ts, model, False, state, now)
    return status.status is DecayStatus.EXPIRED


def _by_roi(cands: Sequence[_Cand]) -> list[_Cand]:
    return sorted(cands, key=lambda c: (-c.roi, -c.state.weight, c.kid))


def _signals(
    memory: MemoryWriter, scopes: Sequence[str] | None, now: float, mark: ChangeMark
) -> tuple[list[Signal], int]:
    pending = cache_for(memory.store).remember(
        ("signals", scopes), mark,
        lambda: pending_signals(memory, scopes=scopes),
    )
    return [s for s in pending if s.is_urgent(now)], len(pending)


def build_pack(
    memory: MemoryWriter,
    task: str,
    *,
    budget_tokens: int = 8000,
    project: str | None = None,
    scopes: Sequence[str] | None = None,
    working_tokens: int | None = None,
    now: float | None = None,
) -> Pack:
    started = time.perf_counter()
    working = _check(task, budget_tokens, working_tokens)
    when = time.time() if now is None else float(now)
    scope_t = (scopes,) if isinstance(scopes, str) else tuple(scopes) if scopes else None
    proj = project or (scope_t[0] if scope_t else "default")
    flt = RecordFilter(scopes=scope_t, now=when)
    z = _Zones(allocate(budget_tokens))
    header = _header(memory, task, proj, z, budget_tokens)
    timings: dict[str, float] = {}

    # 1-2: preselect (bounded), then resolve states and cached views. Derived answers
    # (core ranking, version, signals) are kept per store under the change-log mark.
    mark = change_mark(memory.store)
    hits = _hits(memory, task, flt)
    core_ids: list[str] = []
    for ktype in CORE_TYPES:
        core_flt = RecordFilter(scopes=scope_t, types=(ktype,), now=when)
        core_ids.extend(ranked_ids(memory.store, core_flt, CORE_PICK, mark))
    cands = _candidates(memory, dict(hits), [*core_ids, *(k for k, _ in hits)], when, flt)
    timings["candidates_ms"] = (time.perf_counter() - started) * 1000
    degraded = _place_core(z, cands)
    _place_by_roi(memory, z, cands, working, when, flt)

    urgent, pending = _signals(memory, scope_t, when, mark)
    zones = {zone: ZoneUse(z.budgets[zone], z.used.get(zone, 0)) for zone in Zone}
    order = list(Zone)
    items = tuple(sorted(z.items, key=lambda it: (order.index(it.zone), -it.roi, it.knowledge_id)))
    pack = Pack(
        project=proj, version=_version(memory, proj, flt, mark), task=task,
        budget_tokens=budget_tokens, working_tokens=working,
        now=format_ts(datetime.fromtimestamp(when, tz=UTC)), header=header, zones=zones,
        items=items, urgent_signals=tuple(s.to_dict() for s in urgent),
        pending_signals=pending, degraded=tuple(degraded),
    )
    digest = pack.compute_digest()
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    return Pack(**{**{f: getattr(pack, f) for f in Pack.__dataclass_fields__},
                   "digest": digest, "timings": timings})


def _header(memory: MemoryWriter, task: str, proj: str, z: _Zones,
            budget_tokens: int) -> dict[str, Any]:
    """The pack's protocol header, charged to RESERVED (which must hold it)."""
    header = {
        "amcp": AMF_VERSION, "node": memory.node_uri, "project": proj,
        "task_sha256": hashlib.sha256(task.encode()).hexdigest()[:16],
    }
    header_tokens = token_cost(len(packb_parts(header)))
    if header_tokens > z.budgets[Zone.RESERVED]:
        need = header_tokens * 100
        raise ValidationError(
            "budget_tokens",
            f"{budget_tokens} is too small: RESERVED (1%) must hold the {header_tokens}-token "
            f"protocol header, so the budget must be at least {need}",
        )
    z.used[Zone.RESERVED] = header_tokens
    return header


def _place_core(z: _Zones, cands: Sequence[_Cand]) -> list[str]:
    """3-4: CORE_PRINCIPLES, full where it fits, else a pointer; never evicted. Returns
    what degraded."""
    core = _by_roi([c for c in cands if c.entry.type in CORE_TYPES])
    for c in core:
        if not z.place(c, Zone.CORE_PRINCIPLES):
            z.place(c, Zone.CORE_PRINCIPLES, form="pointer")
    core_full = [it for it in z.items if it.zone is Zone.CORE_PRINCIPLES and it.form == "full"]
    if core and not core_full:
        return [
            f"CORE_PRINCIPLES ({z.budgets[Zone.CORE_PRINCIPLES]} tokens) cannot hold one core "
            "record in full: " + ("pointers only" if z.used.get(Zone.CORE_PRINCIPLES) else "empty")
        ]
    return []


def _place_by_roi(memory: MemoryWriter, z: _Zones, cands: Sequence[_Cand], working: int,
                  when: float, flt: RecordFilter) -> None:
    """5-7: HIGH_ROI by ROI; MEDIUM_ROI the rest plus the gravity neighbours of the best
    HIGH_ROI records; what does not fit (or a working memory near full) as pointers in the
    OVERFLOW_BUFFER."""
    rest = _by_roi([c for c in cands if c.kid not in z.placed and c.relevance > 0.0])
    spill: list[_Cand] = []
    for c in rest:
        if not z.place(c, Zone.HIGH_ROI):
            spill.append(c)
    high = [it for it in z.items if it.zone is Zone.HIGH_ROI]
    pulled = {c.kid: c for c in _gravity(memory, high, cands, z.placed, when, flt)}
    medium = _by_roi([*(c for c in spill if c.kid not in pulled), *pulled.values()])
    overflow: list[_Cand] = []
    for c in medium:
        if not z.place(c, Zone.MEDIUM_ROI):
            overflow.append(c)
    w_budget = z.budgets[Zone.WORKING_MEMORY]
    z.used[Zone.WORKING_MEMORY] = min(working, w_budget)
    if w_budget and working >= NEAR_FULL * w_budget:
        overflow = _compress_medium(z, medium) + overflow
    for c in overflow:
        z.place(c, Zone.OVERFLOW_BUFFER, form="pointer")


def _gravity(
    memory: MemoryWriter, high: Sequence[PackItem], pool: Sequence[_Cand], placed: set[str],
    now: float, flt: RecordFilter,
) -> list[_Cand]:
    """Neighbours of the best HIGH_ROI records: unplaced candidates of the same cluster, and
    causal predecessors. A neighbour's relevance is at least ``GRAVITY`` × its seed's.

    Cluster members come from the preselected pool, not a namespace scan, so gravity adds
    no store scan to a pack (a namespace can hold most of a store).
    """
    seeds = [(it, it.source) for it in high if it.source is not None][:GRAVITY_SEEDS]
    pull: dict[str, float] = {}
    for it, e in seeds:
        pull.setdefault(gravity.namespace(e.subject), GRAVITY * it.relevance)
    causal: dict[str, float] = {}
    for it, e in seeds:
        for kid in e.caused_by:
            causal.setdefault(kid, GRAVITY * it.relevance)
    out: list[_Cand] = []
    for c in pool:
        boost = max(pull.get(gravity.namespace(c.entry.subject), 0.0),
                    causal.pop(c.kid, 0.0))
        if c.kid not in placed and boost > c.relevance:
            out.append(_rescored(c, boost, now))
    fetch = {k: v for k, v in causal.items() if k not in placed}
    out.extend(_candidates(memory, fetch, list(fetch), now, flt))
    return out


def _rescored(c: _Cand, relevance: float, now: float) -> _Cand:
    e = c.entry
    last = c.state.last_access
    if last is None:
        last = e.created_ts
    fresh = _Cand(c.kid, e, c.state, relevance, line=c.line)
    fresh.roi = roi(
        relevance, trust(e.confidence, c.state.weight),
        recency_factor(e.type, (now - last) / DAY), e.tokens,
    )
    return fresh


def _compress_medium(z: _Zones, medium: Sequence[_Cand]) -> list[_Cand]:
    """WORKING_MEMORY nearly full: keep MEDIUM_ROI's better half, compress the rest."""
    placed = [it for it in z.items if it.zone is Zone.MEDIUM_ROI]
    keep_budget = z.budgets[Zone.MEDIUM_ROI] // 2
    kept, used = set(), 0
    for it in sorted(placed, key=lambda i: (-i.roi, i.knowledge_id)):
        if used + it.tokens <= keep_budget:
            kept.add(it.knowledge_id)
            used += it.tokens
    moved = {it.knowledge_id for it in placed} - kept
    z.items = [it for it in z.items if it.knowledge_id not in moved]
    z.placed -= moved
    z.used[Zone.MEDIUM_ROI] = used
    return [c for c in medium if c.kid in moved]


__all__ = ["Pack", "PackItem", "build_pack"]
