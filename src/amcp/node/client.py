"""The AMCP client: ``await amcp.connect(host, port)`` → ``Client`` (async), or ``SyncClient``.

A Client holds one connection (a ``Link``) and replaces it when it dies: the next request
reconnects, redoes the hello and the cold boot, and replays the offline queue. Writes are
sent with REQUIRES_ACK and retransmitted unchanged (same SEQUENCE_NUMBER, so the node drops
or re-acks a copy it already has) after ``ack_timeout`` and then after each ``backoff``
delay; if that fails too, idempotent writes go to the offline queue (when configured) and
are replayed, in order, on the next successful connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from threading import Thread
from typing import Any, TypeVar, cast

from amcp.clock import HLC, node_tag
from amcp.errors import AmcpError, LocalProtocolError
from amcp.node.config import DEFAULT_PORT, is_local_address, local_node
from amcp.node.link import Link, NodeUnavailable
from amcp.node.queue import QUEUEABLE, OfflineQueue
from amcp.session import (
    NodeIdentity,
    NodeType,
    Role,
    Session,
    SessionState,
    Timeouts,
    TrustConfig,
    TrustLevel,
)
from amcp.wire import Flag, Frame, MsgType

M = MsgType
_MEMORY_READ = M.MEMORY_READ  # a global: EnumType.__getattr__ slows `M.X` (3.11)
T = TypeVar("T")
WORKING = frozenset({SessionState.ACTIVE, SessionState.SUSPENDED, SessionState.SYNCING})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Timings (seconds). The defaults are the protocol's; tests shrink them."""

    ack_timeout: float = 5.0  # REQUIRES_ACK: first wait for the ack
    backoff: tuple[float, ...] = (5.0, 10.0, 20.0)  # then a retransmission before each wait
    request_timeout: float = 60.0  # any other request (reads, cold boot)
    connect_timeout: float = 10.0
    heartbeat: float = 30.0  # HEALTH_CHECK after this long without sending anything


@dataclass(frozen=True, slots=True)
class WriteAck:
    """MEMORY_WRITE_ACK (or, with ``queued``, a write kept in the offline queue)."""

    status: int | None
    knowledge_ids: tuple[str, ...]
    hlc: int | None = None
    queued: bool = False
    payload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def knowledge_id(self) -> str | None:
        return self.knowledge_ids[0] if self.knowledge_ids else None


@dataclass(frozen=True, slots=True)
class ReadResult:
    """MEMORY_READ_RESPONSE: AMF dicts (with ``vendor_extensions["x-state"]``)."""

    records: tuple[dict[str, Any], ...]
    truncated: bool
    missing: tuple[str, ...] = ()
    payload: Mapping[str, Any] = field(default_factory=dict)


def _ack(frame: Frame) -> WriteAck:
    p = frame.payload
    ids = p.get("knowledge_ids") or ([p["knowledge_id"]] if p.get("knowledge_id") else [])
    return WriteAck(p.get("status"), tuple(ids), p.get("hlc"), payload=dict(p))


def _read(frame: Frame) -> ReadResult:
    # The decoder built this payload for this frame alone and nothing else keeps the frame:
    # the result may hold it as it is (a copy was a visible share of a read's client CPU).
    p = frame.payload
    return ReadResult(
        tuple(p.get("results") or ()), bool(p.get("truncated")), tuple(p.get("missing") or ()),
        p,
    )


class Client:
    """An async AMCP client (ai role). Create with :func:`connect`."""

    def __init__(
        self,
        host: str | None,
        port: int,
        *,
        unix: str | Path | None = None,
        identity: NodeIdentity | None = None,
        trust: TrustConfig | None = None,
        encryption: bool = False,
        compression: bool = True,
        queue_path: str | Path | None = None,
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
        trust_level: TrustLevel = TrustLevel.LOCAL,
        cert_chain: str | None = None,
        bearer: str | None = None,
        task: str = "general agent session",
        project: str | None = None,
        project_scope: str | Sequence[str] | None = None,
        budget_tokens: int = 4000,
        node_type: NodeType = NodeType.AI,
    ) -> None:
        self.host, self.port, self.unix = host, port, unix
        self.identity = identity or NodeIdentity.generate()
        # node_type DB: a node replicating with a peer (amcp.node.replicator) says what it is.
        self.local = local_node(
            self.identity, node_type, encryption=encryption, compression=compression,
            trust_level=trust_level, cert_chain=cert_chain, bearer=bearer,
        )
        self.trust = trust or TrustConfig(trust_local=unix is not None or is_local_address(host))
        self.retry = retry or RetryPolicy()
        self.timeouts = timeouts
        self.clock = HLC(node_tag(self.identity.public_key_b64))
        self.queue = OfflineQueue(queue_path) if queue_path is not None else None
        self.boot_request: dict[str, Any] = {"task": task, "budget_tokens": budget_tokens}
        if project is not None:
            self.boot_request["project"] = project
        if project_scope is not None:
            self.boot_request["project_scope"] = project_scope
        self.boot: dict[str, Any] | None = None  # the last COLD_BOOT_RESPONSE payload
        self.replay_failures: list[tuple[dict[str, Any], AmcpError]] = []
        self.work_session_id: str | None = None
        self._link: Link | None = None
        self._connect_lock = asyncio.Lock()
        self._sync_lock = asyncio.Lock()
        self._heartbeat: asyncio.Task[None] | None = None
        self._closed = False

    # ------------------------------------------------------------------ connection

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.alive and self._link.state in WORKING

    @property
    def node_uri(self) -> str | None:
        link = self._link
        peer = link.session.peer if link is not None else None
        return str(peer.node_address) if peer is not None else None

    async def _ensure(self, *, boot: bool = True) -> Link:
        link = self._link
        if link is not None and link.alive and (not boot or link.state in WORKING):
            return link
        if self._closed:
            raise NodeUnavailable("the client is closed")
        async with self._connect_lock:
            link = self._link
            if link is not None and link.alive and (not boot or link.state in WORKING):
                return link
            link = await self._open()
            self._link = link
            if boot:
                await self._cold_boot(link, self.boot_request)
                await self._replay(link)
            return link

    async def _open(self) -> Link:
        retry = self.retry
        loop = asyncio.get_running_loop()
        session = Session(
            Role.CLIENT, self.local,
            clock=self.clock, monotonic=loop.time, trust=self.trust, timeouts=self.timeouts,
        )
        link = Link(session, write_timeout=retry.request_timeout)
        try:
            if self.unix is not None:
                await asyncio.wait_for(
                    loop.create_unix_connection(lambda: link, str(self.unix)),
                    retry.connect_timeout,
                )
            else:
                await asyncio.wait_for(
                    loop.create_connection(lambda: link, cast(str, self.host), self.port),
                    retry.connect_timeout,
                )
        except (OSError, TimeoutError) as exc:
            raise NodeUnavailable(f"cannot connect to the node: {exc}") from exc
        try:
            await asyncio.wait_for(asyncio.shield(link.handshake), retry.connect_timeout)
        except TimeoutError:
            await link.aclose()
            raise NodeUnavailable("no handshake from the node in time") from None
        except BaseException:
            await link.aclose()
            raise
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = loop.create_task(self._heartbeat_loop())
        return link

    async def _cold_boot(self, link: Link, request: dict[str, Any]) -> dict[str, Any]:
        future, _ = link.submit(
            M.COLD_BOOT_REQUEST, request, timeout=self.retry.request_timeout
        )
        frame = await future
        self.boot = dict(frame.payload)
        return self.boot

    async def _heartbeat_loop(self) -> None:
        """HEALTH_CHECK on an idle connection; a node that does not answer is dropped."""
        interval = self.retry.heartbeat
        while not self._closed:
            await asyncio.sleep(interval / 2)
            link = self._link
            if link is None or not link.alive or link.state not in WORKING:
                continue
            if link.loop.time() - link.last_sent < interval:
                continue
            try:
                future, _ = link.submit(M.HEALTH_CHECK, {})
                await asyncio.wait_for(future, self.retry.ack_timeout)
            except (TimeoutError, AmcpError):
                link.close("heartbeat not answered")

    # ------------------------------------------------------------------ requests

    async def request(
        self, msg_type: MsgType, payload: Mapping[str, Any], *, ack: bool = False
    ) -> Frame:
        """Send one request and return its answer; ERROR raises the matching AmcpError."""
        link = self._link
        if link is None or not link.alive or link.state not in WORKING:
            link = await self._ensure()
        if not ack:
            # The link fails the future with NodeUnavailable after request_timeout.
            future, _ = link.submit(msg_type, payload, timeout=self.retry.request_timeout)
            return await future
        future, data = link.submit(msg_type, payload, Flag.REQUIRES_ACK)
        waits = (self.retry.ack_timeout, *self.retry.backoff)
        for attempt, wait in enumerate(waits):
            if attempt:
                link.write(data)  # the very same frame: same seq, same bytes
            try:
                return await asyncio.wait_for(asyncio.shield(future), wait)
            except TimeoutError:
                continue
            except asyncio.CancelledError:
                # The shield kept the answer's future alive; nobody waits for it now, and
                # failed at the link's close it would be logged as never retrieved.
                future.cancel()
                raise
        future.cancel()
        link.close("no ack after retries")
        raise NodeUnavailable(f"{msg_type.name} not acknowledged after {len(waits)} attempts")

    async def _write(self, msg_type: MsgType, payload: dict[str, Any]) -> WriteAck:
        try:
            return _ack(await self.request(msg_type, payload, ack=True))
        except NodeUnavailable:
            if self.queue is None or msg_type not in QUEUEABLE:
                raise
        self.queue.put(msg_type, payload)
        with contextlib.suppress(NodeUnavailable):
            await self._ensure()  # reconnecting replays the queue, this write included
        return WriteAck(None, _ids_in(payload), queued=True, payload=payload)

    async def _replay(self, link: Link) -> int:
        """Send queued writes in order; drop each once answered (ack or a refusal)."""
        queue = self.queue
        done = 0
        while queue is not None and (batch := queue.peek(100)):
            for entry_id, msg_type, payload in batch:
                future, _ = link.submit(msg_type, payload, Flag.REQUIRES_ACK,
                                        timeout=self.retry.ack_timeout + sum(self.retry.backoff))
                try:
                    await future
                except NodeUnavailable:
                    return done  # still offline: keep it, retry on the next connection
                except AmcpError as exc:  # refused (403, 409...): replaying cannot help
                    self.replay_failures.append((payload, exc))
                queue.remove(entry_id)
                done += 1
        return done

    async def flush_queue(self) -> int:
        """Replay the offline queue now; returns how many entries were delivered."""
        return await self._replay(await self._ensure())

    # ------------------------------------------------------------------ the API

    async def cold_boot(
        self, task: str, *, project: str | None = None,
        project_scope: str | Sequence[str] | None = None, budget_tokens: int = 4000,
        working_tokens: int | None = None,
    ) -> dict[str, Any]:
        """COLD_BOOT_REQUEST on a connection opened with ``boot=False``."""
        request: dict[str, Any] = {"task": task, "budget_tokens": budget_tokens}
        for key, value in (("project", project), ("project_scope", project_scope),
                           ("working_tokens", working_tokens)):
            if value is not None:
                request[key] = value
        link = await self._ensure(boot=False)
        if link.state is not SessionState.HANDSHAKING:
            raise LocalProtocolError("this session is already booted; connect again to re-boot")
        self.boot_request = request
        boot = await self._cold_boot(link, request)
        await self._replay(link)
        return boot

    async def read_ids(self, ids: Sequence[str]) -> ReadResult:
        return _read(await self.request(_MEMORY_READ, {"ids": list(ids)}))

    async def recall(
        self, query: str, *, k: int = 10, filters: Mapping[str, Any] | None = None
    ) -> ReadResult:
        payload: dict[str, Any] = {"query": query, "k": k}
        if filters:
            payload["filters"] = dict(filters)
        return _read(await self.request(M.MEMORY_READ, payload))

    async def query(self, amql: str) -> ReadResult:
        return _read(await self.request(M.MEMORY_READ, {"amql": amql}))

    async def write(
        self, amf: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None, *,
        amql: str | None = None,
    ) -> WriteAck:
        """One AMF record, a batch of them, or ``amql="REMEMBER {…}"``."""
        if (amf is None) == (amql is None):
            raise ValueError("give amf (a record or a list of them) or amql")
        if amql is not None:
            return await self._write(M.MEMORY_WRITE, {"amql": amql})
        if isinstance(amf, Mapping):
            return await self._write(M.MEMORY_WRITE, {"amf": dict(amf)})
        assert amf is not None
        return await self._write(M.MEMORY_WRITE, {"batch": [dict(a) for a in amf]})

    async def invalidate(
        self, knowledge_id: str | None = None, reason: str | None = None, *,
        amql: str | None = None, event: str | None = None,
    ) -> WriteAck:
        if knowledge_id is not None:
            payload: dict[str, Any] = {"knowledge_id": knowledge_id, "reason": reason or ""}
        elif amql is not None:
            payload = {"amql": amql}
        elif event is not None:
            payload = {"event": event}
        else:
            raise ValueError("give knowledge_id (with a reason), amql or event")
        return await self._write(M.MEMORY_INVALIDATE, payload)

    async def health(self, *, tiers: bool = False) -> dict[str, Any]:
        """HEALTH_RESPONSE; ``tiers``: with tier 0's size and evicted counts."""
        payload = {"tiers": True} if tiers else {}
        return dict((await self.request(M.HEALTH_CHECK, payload)).payload)

    async def sync_pull(
        self, since: int = 0, *, scopes: Sequence[str] | None = None, limit: int | None = None,
        apply_to: Any = None, max_batches: int = 1000,
    ) -> dict[str, Any]:
        """Pull changes after ``since`` until ``more`` is false; optionally apply them to a
        local ``Memory`` (``apply_to``). Ends the stream with SYNC_ACK."""
        from amcp.sync import ApplyResult, apply_changes

        async with self._sync_lock:
            link = await self._ensure()
            changes: list[dict[str, Any]] = []
            applied = ApplyResult(watermark=since)
            last: Frame | None = None
            for _ in range(max_batches):
                payload: dict[str, Any] = {"since": since}
                if scopes is not None:
                    payload["scopes"] = list(scopes)
                if limit is not None:
                    payload["limit"] = limit
                future, _ = link.submit(
                    M.SYNC_PULL_REQUEST, payload, timeout=self.retry.request_timeout
                )
                last = await future
                batch = list(last.payload.get("changes") or ())
                changes += batch
                if apply_to is not None and batch:
                    got = await asyncio.to_thread(apply_changes, apply_to, batch)
                    applied.applied += got.applied
                    applied.duplicates += got.duplicates
                    applied.conflicts += got.conflicts
                since = int(last.payload.get("watermark", since))
                if not last.payload.get("more"):
                    break
            assert last is not None
            if link.alive:
                link.send_only(M.SYNC_ACK, {
                    "status": 200, "ref_seq": last.seq, "applied": applied.applied,
                    "duplicates": applied.duplicates, "conflicts": applied.conflicts,
                    "watermark": since,
                })
            return {"changes": changes, "watermark": since, "applied": applied.applied,
                    "duplicates": applied.duplicates, "conflicts": applied.conflicts}

    async def sync_push(
        self, changes: Sequence[Mapping[str, Any]], *, origin: str | None = None, hops: int = 0
    ) -> dict[str, Any]:
        async with self._sync_lock:
            payload = {"changes": [dict(c) for c in changes], "origin": origin or
                       str(self.local.address), "hops": hops}
            return dict((await self.request(M.SYNC_PUSH, payload, ack=True)).payload)

    async def signal(self, signal: Mapping[str, Any]) -> dict[str, Any]:
        return dict((await self.request(M.QEF_SIGNAL, {"signal": dict(signal)})).payload)

    async def distill(
        self, from_amql: str, *, into: str = "KT-PRINCIPLE", confidence_threshold: float = 0.0
    ) -> WriteAck:
        frame = await self.request(M.KNOWLEDGE_DISTILL, {
            "from": from_amql, "into": into, "confidence_threshold": confidence_threshold,
        })
        return _ack(frame)

    async def begin_session(
        self, work_session_id: str | None = None, *, task: str | None = None,
        project: str | None = None,
    ) -> str:
        payload = {k: v for k, v in (("work_session_id", work_session_id), ("task", task),
                                     ("project", project)) if v is not None}
        frame = await self.request(M.SESSION_BEGIN, payload)
        self.work_session_id = str(frame.payload["work_session_id"])
        return self.work_session_id

    async def end(self, reason: str | None = None, summary: str | None = None) -> None:
        """SESSION_END, wait (briefly) for SESSION_END_ACK, then close the client."""
        self._closed = True
        link = self._link
        if link is not None and link.alive:
            frame = link.channel.end(reason, summary)
            if frame is not None:
                future: asyncio.Future[Frame] = link.loop.create_future()
                link.pending[frame.seq] = future
                link.flush()
                with contextlib.suppress(AmcpError, TimeoutError):
                    await asyncio.wait_for(future, self.retry.ack_timeout)
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        if self._link is not None:
            await self._link.aclose()
        if self.queue is not None:
            self.queue.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.end("client closed")


def _ids_in(payload: Mapping[str, Any]) -> tuple[str, ...]:
    amf = payload.get("amf")
    if isinstance(amf, Mapping) and isinstance(amf.get("knowledge_id"), str):
        return (amf["knowledge_id"],)
    batch = payload.get("batch")
    if isinstance(batch, list):
        return tuple(a["knowledge_id"] for a in batch if isinstance(a, Mapping)
                     and isinstance(a.get("knowledge_id"), str))
    kid = payload.get("knowledge_id")
    return (kid,) if isinstance(kid, str) else ()


async def connect(
    host: str | None = "127.0.0.1", port: int = DEFAULT_PORT, *, boot: bool = True,
    **options: Any,
) -> Client:
    """Connect, handshake and (unless ``boot=False``) cold-boot. See :class:`Client`."""
    client = Client(host, port, **options)
    try:
        await client._ensure(boot=boot)
    except BaseException:
        await client.aclose()
        raise
    return client


class SyncClient:
    """A blocking wrapper: a private event loop in a thread runs an async :class:`Client`."""

    def __init__(self, client_factory: Coroutine[Any, Any, Client]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = Thread(target=self._loop.run_forever, name="amcp-client", daemon=True)
        self._thread.start()
        try:
            self.client: Client = self._call(client_factory)
        except BaseException:
            self._stop()
            raise

    @classmethod
    def connect(cls, host: str | None = "127.0.0.1", port: int = DEFAULT_PORT,
                **options: Any) -> SyncClient:
        return cls(connect(host, port, **options))

    def _call(self, coro: Awaitable[T]) -> T:
        async def run() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def read_ids(self, ids: Sequence[str]) -> ReadResult:
        return self._call(self.client.read_ids(ids))

    def recall(self, query: str, **kw: Any) -> ReadResult:
        return self._call(self.client.recall(query, **kw))

    def query(self, amql: str) -> ReadResult:
        return self._call(self.client.query(amql))

    def write(self, amf: Any = None, **kw: Any) -> WriteAck:
        return self._call(self.client.write(amf, **kw))

    def invalidate(self, knowledge_id: str | None = None, reason: str | None = None,
                   **kw: Any) -> WriteAck:
        return self._call(self.client.invalidate(knowledge_id, reason, **kw))

    def cold_boot(self, task: str, **kw: Any) -> dict[str, Any]:
        return self._call(self.client.cold_boot(task, **kw))

    def health(self, *, tiers: bool = False) -> dict[str, Any]:
        return self._call(self.client.health(tiers=tiers))

    def sync_pull(self, since: int = 0, **kw: Any) -> dict[str, Any]:
        return self._call(self.client.sync_pull(since, **kw))

    def sync_push(self, changes: Sequence[Mapping[str, Any]], **kw: Any) -> dict[str, Any]:
        return self._call(self.client.sync_push(changes, **kw))

    def signal(self, signal: Mapping[str, Any]) -> dict[str, Any]:
        return self._call(self.client.signal(signal))

    def distill(self, from_amql: str, **kw: Any) -> WriteAck:
        return self._call(self.client.distill(from_amql, **kw))

    def begin_session(self, work_session_id: str | None = None, **kw: Any) -> str:
        return self._call(self.client.begin_session(work_session_id, **kw))

    def end(self, reason: str | None = None, summary: str | None = None) -> None:
        try:
            self._call(self.client.end(reason, summary))
        finally:
            self._stop()

    close = end

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end("client closed")
