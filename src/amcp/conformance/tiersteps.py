"""T2-03 and T3-04's tier steps: what a node says of its tier 0, and the eviction run.

A node reports tier 0 in HEALTH_RESPONSE when HEALTH_CHECK asks ``{"tiers": true}``:
``tiers = {tier0_records, tier0_bytes, evicted, evicted_bytes, limits: {max_records,
max_bytes, high_water, interval, ...}, holders: [endpoints]}`` (docs/conformance.md). T3-04
fills the target's tier 0 past the ``max_records`` it declares, waits for its own eviction
round to bring it back under, and then checks that the pinned types stayed and that the
evicted records are still there through the local index (fetched back from the holder).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from amcp.amf import KnowledgeType
from amcp.conformance.client import Peer
from amcp.conformance.records import make_record
from amcp.conformance.report import Check
from amcp.conformance.steps import Target, check, read_results
from amcp.wire import MsgType

MAX_FILL = 2000  # records a run may write to fill a declared tier 0
MARGIN = 20  # written beyond the limit, so a round has something to evict
READ_CHUNK = 100  # ids per MEMORY_READ while reading the fillers back


def tier_health(peer: Peer) -> dict[str, Any] | None:
    """HEALTH_RESPONSE ``tiers``, or None when the node reports none."""
    reply = peer.request(MsgType.HEALTH_CHECK, {"tiers": True})
    tiers = reply.frame.payload.get("tiers")
    return tiers if isinstance(tiers, dict) else None


def declared_index(tiers: dict[str, Any] | None, at_least: int) -> Check:
    """T2-03: the node reports its tier-0 store and local index with sizes and limits."""
    ok = (isinstance(tiers, dict)
          and isinstance(tiers.get("tier0_records"), int) and tiers["tier0_records"] >= at_least
          and isinstance(tiers.get("evicted"), int)
          and isinstance(tiers.get("limits"), dict))
    return check("HEALTH_RESPONSE reports tier 0 and its local index", ok, repr(tiers))


def fill_plan(tiers: dict[str, Any] | None) -> tuple[int, str | None]:
    """How many fillers push the target's tier 0 past its declared limit, or why the run
    cannot: no tier report, no holder of a higher tier, no record limit a run can fill."""
    if tiers is None:
        return 0, "the target reports no tier 0 (HEALTH_CHECK {tiers: true})"
    if not tiers.get("holders"):
        return 0, "the target names no higher-tier peer to evict to (tiers.holders)"
    limit = (tiers.get("limits") or {}).get("max_records")
    if not isinstance(limit, int) or not 0 < limit <= MAX_FILL:
        return 0, (f"the target's tier 0 declares no max_records a run can fill "
                   f"(got {limit!r}, at most {MAX_FILL})")
    # The fillers alone exceed the limit. Topping tier 0 up to it (limit - tier0_records)
    # is not enough: eviction walks LRU first, so records older than the run (an earlier
    # procedure's) can absorb the whole round and leave every filler in tier 0, with
    # nothing to fetch back. With limit + MARGIN fillers, at least MARGIN of them go.
    return limit + MARGIN, None


def fillers(scope: str, me: str, tok: str, n: int) -> list[dict[str, Any]]:
    # KT-DECISION: not pinned, not a young KT-CONTEXT (L6 keeps those a week in tier 0).
    return [make_record(scope, me, kind=KnowledgeType.DECISION, subject=f"filler {tok} {i}",
                        obj=f"decision number {i} of the t3-04 fill") for i in range(n)]


def wait_under(target: Target, limit: int, evicted_before: int,
               within: float) -> dict[str, Any] | None:
    """Poll the target's tier report until it evicted and is back under ``limit``."""
    deadline = time.monotonic() + within
    last = None
    while True:
        peer = target.active()
        with peer.conn:
            last = tier_health(peer)
        if last is not None and last.get("evicted", 0) > evicted_before and \
                last.get("tier0_records", limit + 1) <= limit:
            return last
        if time.monotonic() >= deadline:
            return last
        time.sleep(target.config.poll_interval)


def read_back(peer: Peer, ids: Sequence[str]) -> tuple[dict[str, dict[str, Any]], int, int]:
    """Every record of ``ids`` the node returns; network fetches and cache misses seen."""
    got: dict[str, dict[str, Any]] = {}
    fetched = missed = 0
    for start in range(0, len(ids), READ_CHUNK):
        reply, results = read_results(peer, {"ids": list(ids[start:start + READ_CHUNK])})
        payload = reply.frame.payload
        fetched += int(payload.get("network_fetches") or 0)
        missed += len(payload.get("cache_miss") or ())
        got.update({r["knowledge_id"]: r for r in results if "knowledge_id" in r})
    return got, fetched, missed


__all__ = ["declared_index", "fill_plan", "fillers", "read_back", "tier_health", "wait_under"]
