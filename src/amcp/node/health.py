"""Pieces of the node's answers that need no connection state: HEALTH_RESPONSE's facts
(the store, tier 0, the members and sync board) and a read that fetches evicted records
back before it answers (docs/replication.md, "Tiers")."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from amcp.session import Session, SessionState, TrustLevel
from amcp.session.identity import b64url_encode
from amcp.sync.replica import Replica
from amcp.sync.tiers import usage_view

if TYPE_CHECKING:
    from amcp.memory import Memory
    from amcp.node.service import Reply

Fetch = Callable[[Sequence[str], Callable[[int], Awaitable[Any]]], Awaitable[Any]]


def health_reads(memory: Memory, tiers: bool) -> tuple[Any, dict[str, Any] | None]:
    """The store's stats and, when asked, tier 0's size and pointers (``amcp.sync.tiers``):
    a read of every row's size, so not in the members' probes, which do not ask."""
    return memory.stats(), usage_view(memory, None) if tiers else None


def health_payload(session: Session, facts: tuple[Any, dict[str, Any] | None], hlc: int,
                   uptime: float, tier_status: Callable[[], dict[str, Any]] | None,
                   replica: Replica | None, asked: Any) -> dict[str, Any]:
    """HEALTH_RESPONSE: the session's state, the store, tier 0 when asked (``facts`` from
    ``health_reads``), and with replication the members (``health_sync``)."""
    stats, tiers = facts
    state = session.state
    payload: dict[str, Any] = {
        "state": (SessionState.ACTIVE if state is SessionState.SUSPENDED else state).value,
        "hlc": hlc,
        "store": {"records": stats.records, "bytes": stats.bytes},
        "uptime_s": round(uptime, 3),
    }
    if tiers is not None:
        payload["tiers"] = tier_payload(tiers, tier_status)
    if replica is not None:
        payload.update(health_sync(replica, asked, session, hlc))
    return payload


def health_sync(replica: Replica, asked: Any, session: Session, hlc: int) -> dict[str, Any]:
    """PROFILE §10: merge the caller's member list, answer with ours; a local caller (the
    operator's ``amcp peers``) also gets the sync status board."""
    members = asked.get("members") if isinstance(asked, dict) else None
    if isinstance(members, list):
        replica.membership.merge(members, time.monotonic())
        caller = session.peer  # a replicating node probing us: its last contact
        if caller is not None:
            replica.board.contact(b64url_encode(caller.public_key))
    out: dict[str, Any] = {"members": replica.membership.entries(hlc)}
    negotiated = session.negotiated
    if negotiated is not None and negotiated.granted_trust is TrustLevel.LOCAL:
        out["sync"] = replica.board.to_dict()
    return out


Relay = Callable[[str], Awaitable[bool]]


def relayed_answer(relay: Relay | None, asked: Any, payload: dict[str, Any]
                   ) -> Awaitable[dict[str, Any]] | None:
    """A HEALTH_CHECK that asks us (``probe``: a member's key) to probe a member for its
    sender: the HEALTH_RESPONSE with ``probe: {key, alive}``, once our probe is done. None:
    not asked, or this node does not replicate (the plain answer)."""
    key = asked.get("probe") if isinstance(asked, dict) else None
    if relay is None or not isinstance(key, str) or not 0 < len(key) <= 64:
        return None
    return _relayed(relay, key, payload)


async def _relayed(relay: Relay, key: str, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        alive = await relay(key)
    except Exception:  # noqa: BLE001 - a failed relay is an unanswered probe, not an error
        alive = False
    return {**payload, "probe": {"key": key, "alive": alive}}


def relayed_alive(answer: dict[str, Any], key: str) -> bool:
    got = answer.get("probe")
    return isinstance(got, dict) and got.get("key") == key and got.get("alive") is True


def tier_payload(usage: dict[str, Any],
                 status: Callable[[], dict[str, Any]] | None) -> dict[str, Any]:
    """HEALTH_RESPONSE ``tiers``: tier 0's size and pointers, and what the tier rounds
    report; a node that does not replicate has nothing to evict to."""
    return {**usage, **(status() if status is not None else {"holders": [], "limits": {}})}


async def read_fetching_back(
    fetch: Fetch, ids: Sequence[str], first: Reply,
    reread: Callable[[], Awaitable[Reply | BaseException]],
) -> Reply | BaseException:
    """Fetch evicted ``ids`` back, then read again (the answer says ``network_fetches``);
    nothing came back: the first answer, with its ``cache_miss``."""
    async def again(got: int) -> Reply | BaseException:
        if not got:
            return first
        out = await reread()
        if not isinstance(out, BaseException):
            out.payload["network_fetches"] = got
        return out

    try:
        result: Reply | BaseException = await fetch(ids, again)
    except Exception as exc:  # noqa: BLE001 - answered as the read's own error
        result = exc
    return result


__all__ = ["Fetch", "health_reads", "health_sync", "read_fetching_back", "tier_payload"]
