"""Pieces of the node's answers that need no connection state: HEALTH_RESPONSE's facts
(the store, tier 0, the members and sync board) and a read that fetches evicted records
back before it answers (docs/replication.md, "Tiers")."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from amcp.session import Session, TrustLevel
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
