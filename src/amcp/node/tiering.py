"""``Tiering``: tier 0's eviction round and fetch-back, over the replicator's peer links.

The rules are ``amcp.sync.tiers`` (sans-IO, blocking); this runs them on the node's pools
and asks the peers (docs/replication.md, "Tiers"):

- **eviction round** (every ``[tiers] interval``, a maintenance task — never inside a
  read): plan on the read pool; ask a peer of a higher tier (``tier >= 1``) for each batch
  of candidates with MEMORY_READ ``ids``; evict on the write thread, in one transaction,
  only the ones it returned with our checksum — it holds them now, so eviction never
  drops the last copy. No such peer reachable: nothing is evicted.
- **fetch-back** (a MEMORY_READ met evicted ids): ask the holder named in each pointer
  first, then the other higher-tier peers; each copy is checked against its pointer and
  stored through the write path (``restore``). A copy that is not the pointed record is a
  bad record from that peer (counted, marked suspect). Nobody reachable: the read answers
  CACHE_MISS for those ids.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from amcp.errors import AmcpError, IntegrityError
from amcp.node.link import NodeUnavailable
from amcp.store.base import Pointer
from amcp.sync.tierconfig import TierConfig
from amcp.sync.tiers import Candidate, evict_held, held_copies, plan, restore, tiers_of

if TYPE_CHECKING:
    from amcp.node.peerlink import PeerLink
    from amcp.node.server import NodeServer
    from amcp.sync.replica import Replica

log = logging.getLogger("amcp.sync")
T = TypeVar("T")
ROUND_LIMIT = 2000  # candidates planned per round: a big backlog goes over several rounds


class Tiering:
    def __init__(self, server: NodeServer, replica: Replica, links: dict[str, PeerLink],
                 config: TierConfig) -> None:
        self.server, self.replica, self.links, self.config = server, replica, links, config
        self.evicted = 0  # since start: what `amcp peers` shows beside the store's counts
        self.fetched = 0
        self.cache_misses = 0
        # Ids a read is fetching back and about to serve: no round evicts them meanwhile
        # (id → how many reads hold it).
        self._held: dict[str, int] = {}

    @property
    def enabled(self) -> bool:
        return tiers_of(self.server.memory) is not None

    def holders(self, first: str | None = None) -> list[PeerLink]:
        """Configured peers of a higher tier; the one named ``first`` (an endpoint) first."""
        found = [link for link in self.links.values() if link.spec.tier >= 1 and not link.learned]
        found.sort(key=lambda link: link.spec.endpoint != first)
        return found

    async def _read(self, fn: Callable[[], T]) -> T:
        return await self.server.run_read(fn)

    async def _ask(self, link: PeerLink, ids: Sequence[str]) -> list[dict[str, Any]] | None:
        """The records ``link``'s peer returns for ``ids``; None when it cannot be asked."""
        client = await link.ensure()
        if client is None:
            return None
        try:
            async with link.lock:
                result = await client.read_ids(list(ids))
        except (AmcpError, OSError, NodeUnavailable) as exc:
            await link.drop(f"tiers: {exc}")
            return None
        return [dict(r) for r in result.records]

    # ------------------------------------------------------------------ eviction

    async def evict_round(self) -> int:
        """One round: plan, confirm with a holder, evict. Returns how many were evicted."""
        memory = self.server.memory
        if not self.enabled or not self.holders():
            return 0
        cands = await self._read(functools.partial(plan, memory, self.config, limit=ROUND_LIMIT))
        done = 0
        for start in range(0, len(cands), self.config.batch):
            chunk = cands[start:start + self.config.batch]
            gone = await self._evict_chunk(chunk)
            if gone is None:
                break  # no holder reachable: try again next round
            done += gone
        if done:
            self.evicted += done
            log.info("tiers: evicted %d records from tier 0", done)
        return done

    async def _evict_chunk(self, chunk: Sequence[Candidate]) -> int | None:
        memory = self.server.memory
        for link in self.holders():
            results = await self._ask(link, [c.knowledge_id for c in chunk])
            if results is None:
                continue
            held = held_copies(results)
            # Filtered here, with no await before the write is queued: a read that is
            # fetching an id back holds it from before its restore is queued.
            for kid in self._held:
                held.pop(kid, None)
            pointers = await self.server.run_write(functools.partial(
                evict_held, memory, chunk, held, holder=link.spec.endpoint, tier=link.spec.tier))
            return len(pointers)
        return None

    # ------------------------------------------------------------------ fetch-back

    async def fetch_back(self, ids: Sequence[str], then: Callable[[int], Awaitable[T]]) -> T:
        """Bring the evicted ones of ``ids`` (a read's ids) back from a holder, then ``await
        then(how many came back)`` — the read that serves them — while no eviction round
        may take any of ``ids``: the restores can put tier 0 over its limit, and a round
        then would evict ids of the same read that its first look had found."""
        for kid in ids:
            self._held[kid] = self._held.get(kid, 0) + 1
        try:
            return await then(await self._fetch(ids))
        finally:
            for kid in ids:
                left = self._held.pop(kid, 1) - 1
                if left:
                    self._held[kid] = left

    async def _fetch(self, ids: Sequence[str]) -> int:
        memory = self.server.memory
        tiers = tiers_of(memory)
        if tiers is None or not ids:
            return 0
        pointers = await self._read(functools.partial(tiers.pointers, list(ids)))
        wanted = dict(pointers)
        first = next(iter(wanted.values())).holder if wanted else None
        got = 0
        for link in self.holders(first):
            if not wanted:
                break
            results = await self._ask(link, sorted(wanted))
            if results is None:
                continue
            got += await self._restore_all(link, results, wanted)
        self.fetched += got
        self.cache_misses += len(wanted)
        return got

    async def _restore_all(self, link: PeerLink, results: list[dict[str, Any]],
                           wanted: dict[str, Pointer]) -> int:
        got = 0
        for amf in results:
            pointer = wanted.get(str(amf.get("knowledge_id")))
            if pointer is None:
                continue
            try:
                stored = await self.server.run_write(
                    functools.partial(restore, self.server.memory, amf, pointer,
                                      link.spec.accepts))
            except IntegrityError as exc:
                self.replica.bad_peer(link.key or link.spec.endpoint, link.spec.label, str(exc))
                continue
            except AmcpError as exc:
                log.warning("tiers: %s from %s not restored: %s", pointer.knowledge_id,
                            link.spec.label, exc)
                continue
            wanted.pop(pointer.knowledge_id)
            got += int(stored)
        return got

    def status(self) -> dict[str, Any]:
        return {"evicted_since_start": self.evicted, "fetched_back": self.fetched,
                "cache_misses": self.cache_misses,
                "holders": [link.spec.endpoint for link in self.holders()],
                "limits": self.config.to_dict()}


__all__ = ["Tiering"]
