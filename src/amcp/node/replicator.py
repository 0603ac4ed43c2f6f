"""``Replicator``: the asyncio tasks that make a node replicate by itself (PROFILE §10).

Five loops on the node's event loop, each round's Memory work on the node's pools:

- **push trigger** (every ``push_poll``, 50 ms): new entries in our change log that are
  critical (KT-FACT, KT-PITFALL, ``sync_priority = "immediate"``, purges) go to every tier-1
  peer at once — well inside the 500 ms PROFILE §10 allows after the write's ack;
- **gossip** (every ``gossip_interval``, 1 s): with every configured peer and up to
  ``fanout`` members learned through membership, push our log after the pushed watermark
  and pull theirs after the pulled watermark;
- **membership** (every ``probe_interval``): SWIM-style HEALTH_CHECK to one member in turn,
  carrying our member list; a member that does not answer is suspect, then dead after
  ``suspect_timeout``; members learned from answers are dialled;
- **anti-entropy** (every ``anti_entropy_interval``, 300 s): watermark pull, then per-scope
  digests compared with every live peer, and each differing scope re-synced both ways;
- **lag sample** (every ``lag_sample_interval``, 10 s): each peer's lag into the board's
  bounded history (``amcp.sync.lag``), the inspector's lag-over-time chart.

A peer that fails (unreachable, a bad record, a refusal) is logged and retried later; the
others go on. The logic of what to send and how to apply it is ``amcp.sync``'s (sans-IO).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from amcp.node.config import is_local_address
from amcp.node.health import relayed_alive
from amcp.node.peerlink import PeerLink
from amcp.node.syncview import lag_sample, peer_rows, sync_view
from amcp.node.tiering import Tiering
from amcp.session import TrustConfig
from amcp.store.base import Change
from amcp.sync import pull_changes
from amcp.sync.gossip import entry_scopes, immediate_entries
from amcp.sync.members import MemberState
from amcp.sync.peers import PeerSpec, SyncConfig, parse_endpoint
from amcp.sync.replica import Replica
from amcp.sync.view import SyncView

if TYPE_CHECKING:
    from amcp.node.server import NodeServer

log = logging.getLogger("amcp.sync")
MAX_LEARNED = 64  # links opened to members learned through gossip
CLOSE_RETRY = 0.5  # s: close() cancels a loop again if it is still running after this


class Replicator:
    def __init__(self, server: NodeServer, replica: Replica) -> None:
        self.server, self.replica = server, replica
        self.config = replica.config
        self.links: dict[str, PeerLink] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._probe_turn = 0
        self.immediate_watermark = 0
        for spec in self.config.peers:
            self._add_link(spec, learned=False)
        self.tiering = Tiering(server, replica, self.links, self.config.tiers)

    def _add_link(self, spec: PeerSpec, *, learned: bool) -> PeerLink:
        status = self.replica.board.peer(spec.label, spec.endpoint, tier=spec.tier,
                                         configured=not learned)
        trust = TrustConfig(trust_local=is_local_address(spec.host), anchors=self.server.anchors)
        link = PeerLink(self.server, self.replica, spec, status, trust=trust, learned=learned)
        self.links[spec.endpoint] = link
        return link

    async def start(self) -> None:
        self.immediate_watermark = await self.server.run_read(self.server.memory.store.max_hlc)
        loop = asyncio.get_running_loop()
        for body, every in ((self._push_round, self.config.push_poll),
                            (self._gossip_round, self.config.gossip_interval),
                            (self._probe_round, self.config.probe_interval),
                            (self._anti_entropy_round, self.config.anti_entropy_interval),
                            (self.tiering.evict_round, self.config.tiers.interval),
                            (self._sample_round, self.config.lag_sample_interval)):
            self._tasks.append(loop.create_task(self._every(body, every)))

    def poke(self) -> None:
        """A write was acknowledged: look at the change log now, not at the next poll."""
        self._wake.set()

    async def _every(self, body: Callable[[], Awaitable[object]], seconds: float) -> None:
        first = body != self._anti_entropy_round  # anti-entropy waits one interval
        # Not `while True`: on 3.11 a cancel that meets the wake event being set is
        # swallowed by wait_for (it returns instead), and close() would wait forever.
        while not self._closing:
            if first:
                try:
                    await body()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.warning("sync: %s failed", body.__name__, exc_info=True)
            first = True
            if body == self._push_round:
                # A timer sets the event instead of asyncio.wait_for: on Python 3.11 a
                # wait_for whose inner wait finishes as the task is cancelled can swallow
                # the cancellation, and this loop would then outlive close() (a test
                # run's teardown hung on it).
                timer = asyncio.get_running_loop().call_later(seconds, self._wake.set)
                try:
                    await self._wake.wait()
                finally:
                    timer.cancel()
                self._wake.clear()
            else:
                # Jitter, so that peers do not fall into step with each other.
                await asyncio.sleep(seconds * random.uniform(0.9, 1.1))

    async def close(self) -> None:
        """Stop every loop and close every link — the links also when this is cancelled
        while the loops wind down, so no socket outlives the replicator."""
        self._closing = True  # the rounds' stop flag (see _every)
        try:
            pending = set(self._tasks)
            while pending:
                # Cancel again what is still running: a cancellation swallowed by a
                # wait_for inside a round (Python 3.11) must not keep close() waiting.
                for task in pending:
                    task.cancel()
                _, pending = await asyncio.wait(pending, timeout=CLOSE_RETRY)
        finally:
            self._tasks.clear()
            await asyncio.gather(*(link.close() for link in self.links.values()),
                                 return_exceptions=True)
            await asyncio.to_thread(self.replica.close)  # waits for its worker processes

    # ------------------------------------------------------------------ rounds

    async def _push_round(self) -> None:
        memory = self.server.memory
        if memory.clock.last <= self.immediate_watermark:
            return  # nothing was logged since (every change ticks the clock)
        tier1 = [link for link in self.links.values() if link.spec.tier == 1]
        keys = [link.key for link in tier1]

        def nowhere_to_go(change: Change) -> bool:
            # Applied from a peer, and every tier-1 peer is where it came from: no need to
            # read the record (most of a bulk sync's log is such changes).
            src = self.replica.source_of(change.op.value, change.knowledge_id)
            return src is not None and all(k in (src.peer, src.origin) for k in keys)

        while True:
            batch = await self.server.run_read(functools.partial(
                pull_changes, memory, self.immediate_watermark, limit=self.config.batch,
                skip=nowhere_to_go))
            self.immediate_watermark = batch.watermark
            if tier1 and batch.changes:
                now = await self.server.run_read(
                    functools.partial(immediate_entries, memory, batch.changes))
                if now:
                    def scopes(entry: Any) -> Any:
                        return entry_scopes(memory, entry)

                    await asyncio.gather(*(link.push_these(now, scopes) for link in tier1),
                                         return_exceptions=True)
            if not batch.more:
                return

    def _gossip_targets(self) -> list[PeerLink]:
        configured = [link for link in self.links.values() if not link.learned]
        learned = [link for link in self.links.values() if link.learned
                   and self._member_state(link) is not MemberState.DEAD]
        if len(learned) > self.config.fanout:
            learned = random.sample(learned, self.config.fanout)
        return configured + learned

    def _member_state(self, link: PeerLink) -> MemberState | None:
        member = self.replica.membership.get(link.key) if link.key else None
        return member.state if member is not None else None

    async def _gossip_round(self) -> None:
        async def one(link: PeerLink) -> None:
            await link.push_new()
            await link.pull_new()

        await asyncio.gather(*(one(link) for link in self._gossip_targets()),
                             return_exceptions=True)

    async def _anti_entropy_round(self) -> None:
        await asyncio.gather(*(link.anti_entropy() for link in self._gossip_targets()),
                             return_exceptions=True)

    async def _probe_round(self) -> None:
        """One SWIM probe: the next link in turn gets HEALTH_CHECK with our members."""
        loop = asyncio.get_running_loop()
        membership = self.replica.membership
        for dead in membership.tick(loop.time(), self.config.suspect_timeout):
            log.info("sync: member %s declared dead", dead.node_address)
        links = list(self.links.values())
        if not links:
            return
        self._probe_turn = (self._probe_turn + 1) % len(links)
        link = links[self._probe_turn]
        hlc = self.server.memory.clock.last
        answer = await link.probe(membership.entries(hlc), self.config.probe_timeout)
        if answer is None:
            if link.key is not None and not await self._indirect(link.key, hlc):
                membership.suspect(link.key, loop.time())
            return
        link.status.last_probe_at = time.time()
        if link.key is not None:
            membership.heard_from(link.key, link.status.node_address or "", link.spec.endpoint,
                                  loop.time(), int(answer.get("hlc") or 0))
        link.status.remote_hlc = max(link.status.remote_hlc, int(answer.get("hlc") or 0))
        members = answer.get("members")
        if isinstance(members, list):
            for member in membership.merge(members, loop.time()):
                self._learn(member.key, member.endpoint)
        state = self._member_state(link)
        if state is not None and link.connected:
            link.status.state = "connected" if state is MemberState.ALIVE else state.value

    async def _indirect(self, key: str, hlc: int) -> bool:
        """SWIM's indirect ping (PROFILE §10): ask up to ``indirect_probes`` other live
        members to probe ``key`` for us; True if one of them reached it. A lossy path
        between two nodes then does not make either suspect while others reach both."""
        membership = self.replica.membership
        helpers = [link for link in self.links.values()
                   if link.connected and link.key not in (None, key)
                   and self._member_state(link) is MemberState.ALIVE]
        if not helpers:
            return False
        picked = random.sample(helpers, min(self.config.indirect_probes, len(helpers)))
        # The helper probes with probe_timeout itself; allow for that and its own answer.
        wait = 2 * self.config.probe_timeout
        asks = [link.probe(membership.entries(hlc), wait, relay=key) for link in picked]
        for answer in await asyncio.gather(*asks):
            if answer is not None and relayed_alive(answer, key):
                log.info("sync: member %s answered an indirect probe", key[:12])
                return True
        return False

    async def relay_probe(self, key: str) -> bool:
        """Another member asks us to probe ``key`` for it (its direct probe got no answer):
        True if ``key`` answered ours. Our own view of ``key`` is updated as by any probe."""
        link = next((link for link in self.links.values() if link.key == key), None)
        if link is None or self._closing:
            return False
        loop = asyncio.get_running_loop()
        membership = self.replica.membership
        answer = await link.probe(membership.entries(self.server.memory.clock.last),
                                  self.config.probe_timeout)
        if answer is None:
            return False
        membership.heard_from(key, link.status.node_address or "", link.spec.endpoint,
                              loop.time(), int(answer.get("hlc") or 0))
        return True

    def _learn(self, key: str, endpoint: str | None) -> None:
        if endpoint is None or key == self.replica.key or endpoint in self.links:
            return
        if any(link.key == key for link in self.links.values()):
            return
        if sum(1 for link in self.links.values() if link.learned) >= MAX_LEARNED:
            return
        try:
            host, port = parse_endpoint(endpoint)
        except Exception:  # noqa: BLE001 - a bad endpoint in a member list is ignored
            return
        log.info("sync: learned member %s at %s", key[:12], endpoint)
        self._add_link(PeerSpec(host, port, name=f"member {key[:12]}"), learned=True)

    async def _sample_round(self) -> None:
        """One point of every peer's lag history (the inspector's chart)."""
        rows = await self.server.run_read(functools.partial(
            peer_rows, self.replica, list(self.links.values()), self.server.memory.store))
        self.replica.board.history.add(lag_sample(rows))

    def view(self) -> SyncView:
        """Everything about this node's replication now (``amcp.node.syncview``); safe from
        any thread, as ``totals`` is: the inspector's peers page calls it from its pool."""
        c = self.config
        return sync_view(self.replica, list(self.links.values()), self.server.memory.store, {
            "gossip": c.gossip_interval, "probe": c.probe_interval,
            "suspect_timeout": c.suspect_timeout, "anti_entropy": c.anti_entropy_interval,
            "lag_sample": c.lag_sample_interval})

    def status(self) -> dict[str, Any]:
        return {**self.replica.board.to_dict(), "tiers": self.tiering.status()}

    def totals(self) -> dict[str, int]:
        """Counters and how many peers are connected: what ``/v1/health`` shows."""
        out = self.replica.board.totals.to_dict()
        out["peers"] = len(self.links)
        out["peers_connected"] = sum(1 for link in self.links.values() if link.connected)
        return out


__all__ = ["Replicator", "attach"]


def attach(server: NodeServer, config: SyncConfig, endpoint: str | None = None) -> Replicator:
    """Give ``server`` replication: the shared ``Replica`` (its service then counts, applies
    the loop rule and answers members) and the replicator that drives it. Call
    ``await replicator.start()`` once the server listens, ``close()`` before the server's."""
    replica = Replica(config, server.identity.public_key_b64, server.node_uri, endpoint)
    server.replica = replica
    server.service.replica = replica
    replicator = Replicator(server, replica)
    server.after_write = replicator.poke
    server.fetch_back = replicator.tiering.fetch_back
    server.relay_probe = replicator.relay_probe
    server.tier_status = replicator.tiering.status
    return replicator
