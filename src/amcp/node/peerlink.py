"""``PeerLink``: this node's outbound connection to one peer, and the sync exchanges on it.

A link is a ``Client`` of node type ``db`` holding the node's own key (so the peer's access
policy knows who we are), with a short retry policy. Every exchange runs under the link's
lock (one sync stream per session, PROFILE §8) and its Memory work on the node's pools:
reads on the read pool, applies on the write thread, where every other write runs.

The change log is the offline queue: what a peer has not acknowledged stays after the
link's pushed watermark, persisted in the store's meta, and goes out when the peer is back.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from amcp.errors import AmcpError, IntegrityError, RemoteProtocolError, Status
from amcp.node.client import Client, RetryPolicy
from amcp.node.link import NodeUnavailable
from amcp.session import NodeType, TrustConfig
from amcp.session.identity import b64url_encode
from amcp.store.base import Change
from amcp.sync import apply_changes, pull_changes
from amcp.sync.digest import differing, scope_digests
from amcp.sync.gossip import Outgoing, outgoing
from amcp.sync.peers import PeerSpec
from amcp.sync.replica import Replica, Source
from amcp.sync.status import PeerStatus
from amcp.wire import Frame, MsgType

if TYPE_CHECKING:
    from amcp.node.server import NodeServer

log = logging.getLogger("amcp.sync")
M = MsgType
T = TypeVar("T")
RETRY = RetryPolicy(ack_timeout=1.0, backoff=(1.0, 2.0), request_timeout=30.0,
                    connect_timeout=2.0, heartbeat=30.0)
# A replication session still cold-boots (PROFILE §8); the smallest budget the CSE takes
# keeps that pack cheap: the pack itself is not used.
BOOT_BUDGET = 2100
MAX_BATCHES = 10_000  # per exchange: a peer that always says "more" cannot hold us forever


class PeerLink:
    def __init__(self, server: NodeServer, replica: Replica, spec: PeerSpec,
                 status: PeerStatus, *, trust: TrustConfig, learned: bool = False) -> None:
        self.server, self.replica, self.spec, self.status = server, replica, spec, status
        self.trust = trust
        self.learned = learned  # found through membership, not configured
        self.client: Client | None = None
        self.key: str | None = (b64url_encode(spec.public_key) if spec.public_key is not None
                                else None)
        self.lock = asyncio.Lock()
        self.next_attempt = 0.0
        self.failures = 0
        self._meta_pulled = f"sync.pulled.{spec.endpoint}"
        self._meta_pushed = f"sync.pushed.{spec.endpoint}"

    # ------------------------------------------------------------------ connection

    @property
    def connected(self) -> bool:
        return self.client is not None and self.client.connected

    async def ensure(self) -> Client | None:
        """The live client, connecting when due; None while the peer is unreachable."""
        if self.connected:
            return self.client
        loop = asyncio.get_running_loop()
        if loop.time() < self.next_attempt:
            return None
        try:
            client = await self._connect()
        except (AmcpError, OSError) as exc:
            self._offline(loop, f"connect: {exc}")
            return None
        self.client, self.failures = client, 0
        await self._load_watermarks()
        self.status.state = "connected"
        return client

    async def _connect(self) -> Client:
        server = self.server
        local = server.local
        client = Client(
            self.spec.host, self.spec.port, identity=server.identity, trust=self.trust,
            retry=RETRY, trust_level=local.trust_level, cert_chain=local.cert_chain,
            node_type=NodeType.DB, task="replication", budget_tokens=BOOT_BUDGET,
            encryption=local.encryption, compression=local.compression,
        )
        try:
            await client._ensure()
        except BaseException:
            await client.aclose()
            raise
        hello = client._link.session.peer if client._link is not None else None
        if hello is not None:
            key = b64url_encode(hello.public_key)
            if self.key is not None and key != self.key:
                await client.aclose()
                raise AmcpError(f"{self.spec.label} presented another key than its pinned one",
                                status=Status.FORBIDDEN)
            if key == self.replica.key:
                await client.aclose()
                raise AmcpError("that address is this node itself", status=Status.LOOP_DETECTED)
            self.key = key
            self.status.key, self.status.node_address = key, str(hello.node_address)
        return client

    def _offline(self, loop: asyncio.AbstractEventLoop, why: str) -> None:
        if self.failures == 0:
            log.warning("sync: peer %s unreachable: %s", self.spec.label, why)
        self.failures += 1
        steps = self.replica.config.reconnect_backoff
        self.next_attempt = loop.time() + steps[min(self.failures, len(steps)) - 1]
        self.status.state = "offline"
        self.status.error(why)

    async def drop(self, why: str) -> None:
        client, self.client = self.client, None
        self.status.state = "offline"
        self.status.error(why)
        if client is not None:
            await client.aclose()

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.aclose()

    # ------------------------------------------------------------------ pools

    async def _read(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await self.server.run_read(functools.partial(fn, *args, **kw))

    async def _write(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await self.server.run_write(functools.partial(fn, *args, **kw))

    async def _load_watermarks(self) -> None:
        store = self.server.memory.store
        pulled = await self._read(store.get_meta, self._meta_pulled)
        pushed = await self._read(store.get_meta, self._meta_pushed)
        self.status.pulled_watermark = max(self.status.pulled_watermark, int(pulled or 0))
        self.status.pushed_watermark = max(self.status.pushed_watermark, int(pushed or 0))

    def saved_pushed(self) -> int:
        """Our HLC this peer has acknowledged pushes up to, also before this link first
        connected (then only the store's meta has it). Any thread: one meta read."""
        saved = self.server.memory.store.get_meta(self._meta_pushed)
        return max(self.status.pushed_watermark, int(saved or 0))

    async def _save(self, key: str, value: int) -> None:
        await self._write(self.server.memory.store.set_meta, key, str(value))

    # ------------------------------------------------------------------ exchanges

    async def push_new(self) -> int:
        """Our changes after the pushed watermark that this peer may receive."""
        client = await self.ensure()
        if client is None:
            return 0
        sent = 0
        async with self.lock:
            since = self.status.pushed_watermark
            for _ in range(MAX_BATCHES):
                batch = await self._read(
                    pull_changes, self.server.memory, since, limit=self.replica.config.batch,
                    readable=self.spec.sends, max_bytes=self.server.local.max_payload,
                    skip=self._came_from_it,
                )
                if batch.changes:
                    groups = outgoing(batch.changes, self.key, self.replica)
                    if not await self._send(client, groups):
                        break
                    sent += sum(len(g.changes) for g in groups)
                since = batch.watermark
                if not batch.more:
                    break
            if since != self.status.pushed_watermark:
                self.status.pushed_watermark = since
                await self._save(self._meta_pushed, since)
        return sent

    def _came_from_it(self, change: Change) -> bool:
        src = self.replica.source_of(change.op.value, change.knowledge_id)
        return src is not None and self.key is not None and self.key in (src.peer, src.origin)

    async def push_these(self, entries: Sequence[dict[str, Any]],
                         scopes_of: Callable[[Any], Sequence[str] | None]) -> int:
        """The push trigger: these changes now (they go out again with the next round)."""
        client = await self.ensure()
        if client is None:
            return 0
        groups = outgoing(entries, self.key, self.replica, sends=self.spec.sends,
                          scopes_of=scopes_of)
        if not groups:
            return 0
        async with self.lock:
            await self._send(client, groups)
        return sum(len(g.changes) for g in groups)

    async def _send(self, client: Client, groups: list[Outgoing]) -> bool:
        """SYNC_PUSH each group with REQUIRES_ACK; False when the peer is gone or busy
        (the watermark then stays where it is: nothing is lost)."""
        for group in groups:
            try:
                frame = await client.request(M.SYNC_PUSH, group.payload(), ack=True)
            except NodeUnavailable as exc:
                await self.drop(f"push: {exc}")
                return False
            except RemoteProtocolError as exc:
                await self.drop(f"push: {exc}")
                return False
            except AmcpError as exc:
                if exc.status == Status.LOOP_DETECTED:
                    self.status.counters.add(loops=1)
                    continue  # the peer has them already by another way
                self.status.error(f"push refused: {exc.message} ({int(exc.status)})")
                if exc.status == Status.TOO_MANY_REQUESTS:
                    return False
                continue
            p = frame.payload
            n = len(group.changes)
            self.status.counters.add(pushed=n)
            self.replica.board.totals.add(pushed=n)
            if p.get("conflicts"):
                self.status.error(f"peer refused {p.get('conflicts')} change(s): "
                                  f"{'; '.join([str(x) for x in p.get('problems') or []][:2])}")
        self.status.last_sync_at = time.time()
        return True

    async def pull_new(self, *, since: int | None = None,
                       scopes: Sequence[str] | None = None) -> int:
        """The peer's changes after our pulled watermark (or ``since``), applied here.

        The next batch is asked for before this one is applied, so the peer reads its log
        while we verify and store (a bulk sync is bound by applying, bench/replication.py).
        """
        client = await self.ensure()
        if client is None:
            return 0
        repair = since is not None
        got = 0
        async with self.lock:
            mark = self.status.pulled_watermark if since is None else since
            asked: list[asyncio.Task[Frame]] = []
            try:
                got = await self._pull_batches(client, asked, mark, scopes, repair)
            finally:
                # A request asked ahead must not outlive this exchange (a cancelled round,
                # a refused batch): a pending task would be left holding the link.
                for task in asked:
                    task.cancel()
        return got

    async def _pull_batches(self, client: Client, asked: list[asyncio.Task[Frame]],
                            mark: int, scopes: Sequence[str] | None, repair: bool) -> int:
        """``pull_new``'s loop; the request not answered yet is kept in ``asked``."""
        got = 0
        frame = None
        asked.append(self._ask(client, mark, scopes))
        for _ in range(MAX_BATCHES):
            try:
                frame = await asked[-1]
            except (NodeUnavailable, RemoteProtocolError) as exc:
                await self.drop(f"pull: {exc}")
                return got
            asked.clear()  # answered: only a pending request is kept (a frame is large)
            changes = frame.payload.get("changes") or []
            got += len(changes)
            more = bool(frame.payload.get("more"))
            nxt = int(frame.payload.get("watermark", mark))
            if more:
                asked.append(self._ask(client, nxt, scopes))
            if changes and not await self._apply(changes):
                return got
            mark = nxt
            if not repair and mark > self.status.pulled_watermark:
                self.status.pulled_watermark = mark
                await self._save(self._meta_pulled, mark)
            self.status.remote_hlc = max(self.status.remote_hlc, frame.clock)
            if not repair:
                self.status.behind = more
            if not more:
                break
        if frame is not None:
            self._end_stream(client, frame.seq, mark)
        self.status.last_sync_at = time.time()
        return got

    def _ask(self, client: Client, since: int, scopes: Sequence[str] | None
             ) -> asyncio.Task[Frame]:
        payload: dict[str, Any] = {"since": since, "limit": self.replica.config.batch}
        if scopes is not None:
            payload["scopes"] = list(scopes)
        return asyncio.ensure_future(client.request(M.SYNC_PULL_REQUEST, payload))

    def _end_stream(self, client: Client, ref_seq: int, mark: int) -> None:
        link = client._link
        if link is not None and link.alive and ref_seq:
            link.send_only(M.SYNC_ACK, {"status": 200, "ref_seq": ref_seq, "applied": 0,
                                         "duplicates": 0, "conflicts": 0, "watermark": mark})

    async def _apply(self, changes: list[Any]) -> bool:
        memory = self.server.memory
        who = f"{self.spec.label} key {(self.key or '?')[:12]}…"
        try:
            result = await self._write(apply_changes, memory, changes,
                                       writable=self.spec.accepts,
                                       max_drift_ms=memory.clock.max_drift_ms,
                                       verifier=self.replica.verifier)
        except IntegrityError as exc:
            self.replica.bad_peer(self.key or self.spec.endpoint, who, exc.message)
            self.status.counters.add(refused=1, violations=1)
            await self.drop(f"bad record: {exc.message}")
            return False
        except AmcpError as exc:
            self.replica.refused(self.key, who, exc.message)
            self.status.counters.add(refused=1)
            self.status.error(f"pulled batch refused: {exc.message}")
            return False
        counts = {"pulled": len(changes), "applied": result.applied,
                  "duplicates": result.duplicates, "conflicts": result.conflicts,
                  "resolved_conflicts": result.resolved, "malformed": result.malformed}
        self.status.counters.add(**counts)
        self.replica.board.totals.add(**counts)
        if result.conflicts:
            self.status.error("; ".join(result.problems[:2]))
        key = self.key or self.spec.endpoint
        self.replica.note_applied(result.done, Source(key, key, self.status.node_address or
                                                      self.spec.endpoint, 0))
        return True

    async def anti_entropy(self) -> list[str]:
        """Watermark pull, then per-scope digests compared; every scope that differs is
        re-synced both ways from the start of each log. Returns the scopes repaired."""
        await self.pull_new()
        client = await self.ensure()
        if client is None:
            return []
        memory = self.server.memory
        async with self.lock:
            try:
                frame = await client.request(M.SYNC_PULL_REQUEST, {"since": 0, "digest": True})
            except (NodeUnavailable, RemoteProtocolError) as exc:
                await self.drop(f"digest: {exc}")
                return []
            theirs = frame.payload.get("digests") or {}
            mine = await self._read(scope_digests, memory, readable=self.spec.sends)
        self.replica.board.totals.add(digest_rounds=1)
        scopes = differing(mine, theirs if isinstance(theirs, dict) else {})
        if scopes:
            log.info("sync: %s differs from us in %d scope(s): %s", self.spec.label,
                     len(scopes), ", ".join(scopes[:8]))
            await self.pull_new(since=0, scopes=scopes)
            await self._push_scopes(scopes)
            self.status.counters.add(repairs=len(scopes))
            self.replica.board.totals.add(repairs=len(scopes))
        return scopes

    async def _push_scopes(self, scopes: Sequence[str]) -> None:
        client = await self.ensure()
        if client is None:
            return
        async with self.lock:
            since = 0
            for _ in range(MAX_BATCHES):
                batch = await self._read(
                    pull_changes, self.server.memory, since, limit=self.replica.config.batch,
                    readable=self.spec.sends, scopes=scopes,
                    max_bytes=self.server.local.max_payload,
                )
                # A repair sends everything, as this node's own (the peer may have lost
                # what it once sent us): no echo rule, origin us, hop 0.
                group = Outgoing(self.replica.key, self.replica.node_address, 0, batch.changes)
                if batch.changes and not await self._send(client, [group]):
                    return
                since = batch.watermark
                if not batch.more:
                    return

    async def probe(self, members: list[dict[str, Any]], timeout: float,
                    relay: str | None = None) -> dict[str, Any] | None:
        """HEALTH_CHECK carrying our member list; the answer, or None (no answer in time).
        ``relay``: a member's key this peer is asked to probe for us (SWIM's indirect ping;
        docs/protocol.md)."""
        client = await self.ensure()
        if client is None:
            return None
        asked: dict[str, Any] = {"members": members}
        if relay is not None:
            asked["probe"] = relay
        try:
            frame = await asyncio.wait_for(client.request(M.HEALTH_CHECK, asked), timeout)
        except (TimeoutError, AmcpError) as exc:
            self.status.error(f"probe: {exc or 'no answer in time'}")
            return None
        return dict(frame.payload)


__all__ = ["PeerLink"]
