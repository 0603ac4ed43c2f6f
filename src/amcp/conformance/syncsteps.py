"""Replication as the kit sees it from outside: pull a node's change feed, push changes,
and reduce a feed to one digest per scope so several nodes can be compared.

The protocol has no "give me your digest" message (PROFILE §10 leaves anti-entropy's
digest to each implementation), so the kit computes its own from what every node serves
through SYNC_PULL: the same records in the same final state give the same digest, whatever
order they arrived in on each node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amcp.amf.canonical import canonical_packb
from amcp.conformance.client import NodeFaultError, Peer
from amcp.conformance.steps import describe
from amcp.wire import MsgType

MAX_BATCHES = 200  # a feed longer than this many batches is not a conformance run's


@dataclass(frozen=True, slots=True)
class Feed:
    changes: tuple[dict[str, Any], ...]
    watermark: int


def pull(peer: Peer, scopes: Sequence[str] | None, since: int = 0) -> Feed:
    """SYNC_PULL_REQUEST from ``since`` until ``more`` is false, then SYNC_ACK (the puller
    closes the stream, PROFILE §8)."""
    changes: list[dict[str, Any]] = []
    watermark, last = since, None
    for _ in range(MAX_BATCHES):
        payload: dict[str, Any] = {"since": watermark}
        if scopes is not None:
            payload["scopes"] = list(scopes)
        last = peer.request(MsgType.SYNC_PULL_REQUEST, payload)
        p = last.frame.payload
        if last.frame.msg_type is not MsgType.SYNC_PULL_RESPONSE:
            raise NodeFaultError(f"SYNC_PULL_REQUEST answered {describe(last)}", last.raw)
        changes += [c for c in p.get("changes") or () if isinstance(c, dict)]
        mark = p.get("watermark")
        watermark = mark if isinstance(mark, int) and not isinstance(mark, bool) else watermark
        if not p.get("more"):
            break
    assert last is not None
    ack = peer.session.send(MsgType.SYNC_ACK, {
        "status": 200, "ref_seq": last.frame.seq, "applied": 0, "duplicates": 0,
        "conflicts": 0, "watermark": watermark,
    })
    peer.send(ack)
    return Feed(tuple(changes), watermark)


def push(peer: Peer, changes: Sequence[Mapping[str, Any]], origin: str,
         hops: int = 1) -> dict[str, Any]:
    """SYNC_PUSH; the SYNC_ACK payload (NodeFaultError on any other answer)."""
    reply = peer.request(MsgType.SYNC_PUSH,
                         {"changes": [dict(c) for c in changes], "origin": origin, "hops": hops})
    if reply.frame.msg_type is not MsgType.SYNC_ACK:
        raise NodeFaultError(f"SYNC_PUSH answered {describe(reply)}", reply.raw)
    return dict(reply.frame.payload)


SYNC_OPS = ("put", "supersede", "invalidate", "purge")  # what sync makes equal (PROFILE §10)
_FINAL = {"purge": "purged", "invalidate": "invalidated"}  # outranks whatever else it saw


def final_states(changes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """knowledge_id → (final state, checksum of its record): ``purged``, ``invalidated`` or
    ``present``.

    The final state is PROFILE §10's outcome, not the order a node saw things in: a purge
    beats everything and an invalidation beats a put or a supersede, wherever they are in
    the feed. Whether a present record is superseded, and by which, is left to reading it
    (T3-02 does): a feed is a history, and a supersede can be undone where no change says
    so — a claimant marked a loser may win once more claimants arrive, a predecessor whose
    successor was purged is active again — each node working that out for itself. Ops
    outside the four sync ops (a node's own ``weight`` or ``archive``) are not compared."""
    out: dict[str, tuple[str, str]] = {}
    for c in changes:
        kid, op = c.get("knowledge_id"), c.get("op")
        if not isinstance(kid, str) or op not in SYNC_OPS:
            continue
        amf = c.get("amf")
        checksum = ""
        if isinstance(amf, Mapping) and isinstance(amf.get("integrity"), Mapping):
            checksum = str(amf["integrity"].get("checksum", ""))
        state, had = out.get(kid, ("present", ""))
        if state != "purged":
            state = _FINAL.get(str(op), state)
        out[kid] = (state, checksum or had)
    return out


def digest(changes: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 over the sorted final states: equal on two nodes iff they agree."""
    states = sorted(final_states(changes).items())
    return hashlib.sha256(canonical_packb([[k, op, cs] for k, (op, cs) in states])).hexdigest()
