"""What to send a peer, and with which ``origin`` / ``hops`` (PROFILE §10). Sans-IO.

Changes spread through every node's own change log: a node applies a peer's change, logs it
under its own HLC, and its next gossip round sends it on to its other peers. ``Replica``
remembers where each applied change came from, so the forwarded copy keeps its origin, counts
one hop more, and is never sent back to the peer it came from nor to its origin. A change
with nothing new for a node is a duplicate there and is not logged again, which ends its
spreading; the origin and the hop limit (508) are the guard against a cycle all the same.

Push triggers (upstream push_triggers): a KT-FACT / KT-PITFALL record, or one with
``distribution.sync_priority = "immediate"``, and any purge (erasure should reach every copy
as fast as anything does) go to tier-1 peers at once; the rest wait for the gossip round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amcp.amf.record import AMFRecord
from amcp.amf.types import KnowledgeType, SyncPriority
from amcp.ports import MemoryWriter
from amcp.sync.replica import Replica

CRITICAL = frozenset({KnowledgeType.FACT, KnowledgeType.PITFALL})
ScopeCheck = Callable[[Sequence[str]], bool]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One SYNC_PUSH worth: changes that share an origin and a hop count."""

    origin_key: str
    origin: str
    hops: int
    changes: tuple[dict[str, Any], ...]

    def payload(self) -> dict[str, Any]:
        return {"changes": list(self.changes), "origin": self.origin,
                "origin_key": self.origin_key, "hops": self.hops}


def is_immediate(record: AMFRecord) -> bool:
    if record.type in CRITICAL:
        return True
    dist = record.distribution
    return dist is not None and dist.sync_priority is SyncPriority.IMMEDIATE


def _immediate_amf(amf: Mapping[str, Any]) -> bool:
    if amf.get("type") in CRITICAL:
        return True
    dist = amf.get("distribution")
    return isinstance(dist, Mapping) and dist.get("sync_priority") == SyncPriority.IMMEDIATE


def immediate_entries(memory: MemoryWriter, entries: Sequence[Mapping[str, Any]]
                      ) -> list[dict[str, Any]]:
    """The entries the push trigger sends at once (blocking: reads records by id)."""
    out = []
    for entry in entries:
        op = entry.get("op")
        if op == "purge":
            out.append(dict(entry))
            continue
        amf = entry.get("amf")
        if op == "put" and isinstance(amf, Mapping):
            # Read the two fields off the map: parsing every pulled record again here cost
            # a visible share of a bulk sync's CPU (bench/replication.py).
            if _immediate_amf(amf):
                out.append(dict(entry))
            continue
        found = memory.store.get(str(entry.get("knowledge_id")))
        if found is None or found.record is None:
            continue
        record = found.record
        if is_immediate(record):
            out.append(dict(entry))
    return out


def entry_scopes(memory: MemoryWriter, entry: Mapping[str, Any]) -> Sequence[str] | None:
    """The scopes of the record an entry is about (None: a purge, sent to everyone)."""
    if entry.get("op") == "purge":
        return None
    amf = entry.get("amf")
    if isinstance(amf, Mapping):
        meta = amf.get("meta")
        scopes = meta.get("project_scope") if isinstance(meta, Mapping) else None
        if isinstance(scopes, list):
            return scopes
    found = memory.store.get(str(entry.get("knowledge_id")))
    return found.record.meta.project_scope if found and found.record else ()


def outgoing(
    entries: Sequence[Mapping[str, Any]], peer_key: str | None, replica: Replica,
    *, sends: ScopeCheck | None = None, scopes_of: Callable[[Mapping[str, Any]],
                                                           Sequence[str] | None] | None = None,
) -> list[Outgoing]:
    """Group entries for one peer by (origin, hops); drop what must not go to it."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    limit = replica.config.hop_limit
    for entry in entries:
        src = replica.source_of(str(entry.get("op")), str(entry.get("knowledge_id")))
        if src is not None and peer_key is not None and peer_key in (src.peer, src.origin):
            continue  # it came from there: no echo
        origin_key, origin, hops = (
            (src.origin, src.origin_address, src.hops + 1) if src is not None
            else (replica.key, replica.node_address, 0)
        )
        if hops > limit:
            continue
        if sends is not None and scopes_of is not None:
            scopes = scopes_of(entry)
            if scopes is not None and not sends(scopes):
                continue
        groups.setdefault((origin_key, origin, hops), []).append(dict(entry))
    return [Outgoing(k, o, h, tuple(c)) for (k, o, h), c in groups.items()]


__all__ = ["CRITICAL", "Outgoing", "entry_scopes", "immediate_entries", "is_immediate",
           "outgoing"]
