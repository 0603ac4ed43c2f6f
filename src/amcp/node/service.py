"""``NodeService``: each request message bound to ``Memory`` (PROFILE §3), blocking, sans-IO.

The server runs :meth:`NodeService.handle` in its thread pool and sends what it returns.
An ``AmcpError`` raised here becomes ERROR ``{status, reason, ref_seq}`` (the session goes
on); an ``IntegrityError`` (a knowledge_id or checksum that does not match its content)
becomes the PROTOCOL_VIOLATION PROFILE §2 asks for. Access is checked before anything is
stored: a write outside the peer's scopes is 403 and leaves the store untouched.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amcp.amf.mapping import scopes_of
from amcp.amf.record import AMFRecord
from amcp.errors import (
    AmcpError,
    ForbiddenError,
    IntegrityError,
    NotFoundError,
    Status,
    ValidationError,
)
from amcp.evolution.qef import raw_refs
from amcp.memory import MAX_K, Memory, WriteOutcome
from amcp.node import amql_ops
from amcp.node.views import (
    AmfCache,
    ack_payload,
    amf_out_sized,
    bounded,
    new_work_session_id,
)
from amcp.session import AccessPolicy, Mode, Principal
from amcp.session.identity import b64url_encode
from amcp.store.links import is_work_session_id
from amcp.sync import apply_changes, pull_changes
from amcp.sync.conflicts import settle
from amcp.sync.digest import scope_digests, to_wire
from amcp.sync.replica import Replica, Source
from amcp.sync.tiers import matching_pointers, pointer_view
from amcp.wire import Frame, MsgType

MAX_IDS = MAX_K  # ids per MEMORY_READ: the same bound as k
MAX_BATCH = 256  # records per MEMORY_WRITE batch: one reply, one transaction's worth
MAX_HOPS = 8  # SYNC_PUSH relayed further than this is taken for a loop (508)
MAX_PUSH = 5000  # changes per SYNC_PUSH: the pull limit's bound, one write-thread turn

M = MsgType
_READ_RESPONSE = M.MEMORY_READ_RESPONSE  # a global: EnumType.__getattr__ slows `M.X`
# Requests that change the store: run one at a time on the write thread.
WRITES = frozenset({M.MEMORY_WRITE, M.MEMORY_INVALIDATE, M.SYNC_PUSH, M.QEF_SIGNAL,
                    M.KNOWLEDGE_DISTILL})


@dataclass(slots=True)
class Peer:
    """Per-connection application state (mutable: SESSION_BEGIN sets the work session)."""

    principal: Principal
    address: str
    work_session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    msg_type: MsgType
    payload: dict[str, Any]
    status: Status = Status.OK


class NodeService:
    """Binds requests to a Memory under an access policy (None: a single-user local node)."""

    def __init__(
        self,
        memory: Memory,
        policy: AccessPolicy | None = None,
        *,
        node_uri: str = "",
        max_payload: int = 10 * 1024 * 1024,
        replica: Replica | None = None,
    ) -> None:
        self.memory = memory
        self.policy = policy
        self.replica = replica  # None: no replication state (counters, loop rule, sources)
        self.node_uri = node_uri
        self.max_payload = max_payload
        self.amf_cache = AmfCache()

    # ------------------------------------------------------------------ access

    def readable(self, peer: Peer, scopes: Sequence[str]) -> bool:
        return self.policy is None or self.policy.reads_any(peer.principal, scopes)

    def check_write(self, peer: Peer, scopes: Sequence[str]) -> None:
        """Every scope of a record written must be writable by the peer."""
        if self.policy is not None:
            self.policy.check_all(peer.principal, scopes, Mode.WRITE)

    def _patterns(self, peer: Peer, mode: Mode) -> list[str] | None:
        """Scope patterns to hand to planners; None when the peer may see everything."""
        if self.policy is None:
            return None
        patterns = list(self.policy.patterns(peer.principal, mode))
        return None if "*" in patterns else patterns

    def _check_everything(self, peer: Peer, what: str) -> None:
        # Operations whose records cannot be known in advance (events, distillation)
        # need write access to every scope.
        if self.policy is not None and not self.policy.allowed(peer.principal, "*", Mode.WRITE):
            raise ForbiddenError(f"{what} needs write access to every scope ('*')")

    # ------------------------------------------------------------------ dispatch

    def handle(self, frame: Frame, peer: Peer) -> Reply:
        handler = _HANDLERS.get(frame.msg_type)
        if handler is None:  # pragma: no cover - the server only routes requests here
            raise AmcpError(f"{frame.msg_type.name} is not a request", status=Status.BAD_REQUEST)
        return handler(self, frame.payload, peer)

    # ------------------------------------------------------------------ cold boot

    def cold_boot(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        task = p.get("task")
        if not isinstance(task, str):
            raise ValidationError("task", "must be a string")
        budget = p.get("budget_tokens", 8000)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise ValidationError("budget_tokens", "must be a non-negative integer")
        working = p.get("working_tokens")
        if working is not None and (isinstance(working, bool) or not isinstance(working, int)):
            raise ValidationError("working_tokens", "must be an integer")
        project = p.get("project")
        if project is not None and not isinstance(project, str):
            raise ValidationError("project", "must be a string")
        raw_scope = p.get("project_scope")
        scopes = [raw_scope] if isinstance(raw_scope, str) else raw_scope
        if scopes is not None:
            if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
                raise ValidationError("project_scope", "must be a scope or a list of scopes")
            for scope in scopes:
                if not self.readable(peer, [scope]):
                    raise ForbiddenError(f"read access to scope {scope!r} is not allowed")
        else:
            scopes = self._patterns(peer, Mode.READ)
        started = time.perf_counter()
        pack = self.memory.context(
            task, budget_tokens=budget, project=project, scopes=scopes, working_tokens=working
        )
        return Reply(M.COLD_BOOT_RESPONSE, {
            "pack": pack.to_dict(),
            "confirmation": pack.confirmation,
            "urgent_signals": list(pack.urgent_signals),
            "cse_ms": round((time.perf_counter() - started) * 1000, 3),
        })

    # ------------------------------------------------------------------ reads

    def _warnings(self) -> dict[str, Any]:
        """``{"warnings": [...]}`` while records are quarantined (left out of answers), else
        nothing: the read payload says so, as HTTP, MCP and the CLI do."""
        found = self.memory.warnings()
        return {"warnings": list(found)} if found else {}

    def read(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        ids, amql, query = p.get("ids"), p.get("amql"), p.get("query")
        if (ids is not None) + (amql is not None) + (query is not None) != 1:
            raise ValidationError("", "MEMORY_READ takes exactly one of ids, amql, query")
        started = time.perf_counter_ns()
        now = time.time()
        # Packed sizes of the results, known without packing them again (amf_out_sized).
        sizes: list[int] = []
        if ids is not None:
            amfs, extra = self._read_ids(ids, peer, now, sizes)
        elif query is not None:
            amfs, extra = self._recall(p, peer, now, sizes)
        else:
            amfs, extra = self._read_amql(amql, peer)
        results, tokens, truncated = bounded(
            amfs, self.max_payload, sizes if amql is None else None
        )
        return Reply(_READ_RESPONSE, {
            "results": results,
            "total_tokens": tokens,
            "cache_hits": len(results),  # served from this node (tier 0); see _evicted
            "network_fetches": 0,  # the server sets it when it fetched evicted ones back
            # Whole microseconds, in ms: round(x, 3) formats a string, every read.
            "query_time_ms": (time.perf_counter_ns() - started) // 1000 / 1000,
            "truncated": truncated or bool(extra.pop("truncated", False)),
            **extra,
            **self._warnings(),
        })

    def _read_ids(
        self, ids: Any, peer: Peer, now: float, sizes: list[int]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValidationError("ids", "must be a list of knowledge ids")
        if len(ids) > MAX_IDS:
            raise ValidationError("ids", f"at most {MAX_IDS} per request")
        found = {f.knowledge_id: f for f in self.memory.read(ids)}
        amfs, missing = [], []
        for kid in ids:
            item = found.get(kid)
            # Unreadable and absent look the same, so a scope's contents do not leak.
            if item is None or item.record is None or not self.readable(
                peer, item.record.meta.project_scope
            ):
                missing.append(kid)
            else:
                amf, size = amf_out_sized(self.memory, item, now, self.amf_cache)
                amfs.append(amf)
                sizes.append(size)
        return amfs, self._evicted(missing, peer)

    def _evicted(self, missing: list[str], peer: Peer) -> dict[str, Any]:
        """Ids not here: the evicted ones (pointers in tier 0's local index) are named
        apart, as ``cache_miss`` with their pointers — upstream CACHE_MISS; a node with a
        higher-tier peer fetches them back before answering (``NodeServer.fetch_back``)."""
        if not missing:
            return {}
        tiers = self.memory.store.capabilities.tiers
        found = tiers.pointers(missing) if tiers is not None else {}
        shown = {k: p for k, p in found.items() if self.readable(peer, p.scopes)}
        out: dict[str, Any] = {}
        rest = [k for k in missing if k not in shown]
        if rest:
            out["missing"] = rest
        if shown:
            out["cache_miss"] = list(shown)
            out["evicted"] = [pointer_view(p) for p in shown.values()]
        return out

    def _evicted_hits(self, query: str, peer: Peer) -> dict[str, Any]:
        """Recall: evicted records whose pointer matches the query, so the caller knows
        they exist (reading their ids fetches them back)."""
        hits = matching_pointers(self.memory, query, lambda scopes: self.readable(peer, scopes))
        return {"evicted": hits} if hits else {}

    def _recall(
        self, p: Mapping[str, Any], peer: Peer, now: float, sizes: list[int]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        query, k, filters = p["query"], p.get("k", 10), p.get("filters") or {}
        if not isinstance(filters, Mapping):
            raise ValidationError("filters", "must be a map")
        known = {"scope", "scopes", "types", "tags", "kinds", "created_after", "created_before"}
        unknown = set(filters) - known
        if unknown:
            raise ValidationError("filters", f"unknown keys {sorted(unknown)}")
        scope = filters.get("scopes", filters.get("scope"))
        scopes = [scope] if isinstance(scope, str) else scope
        for s in scopes or ():
            if not isinstance(s, str) or not self.readable(peer, [s]):
                raise ForbiddenError(f"read access to scope {s!r} is not allowed")
        result = self.memory.recall(
            query, k=k, scope=scopes, types=filters.get("types"), tags=filters.get("tags"),
            kinds=filters.get("kinds"), created_after=filters.get("created_after"),
            created_before=filters.get("created_before"),
        )
        amfs, scores, trusts = [], [], []
        for hit in result.hits:
            item = hit.item
            if item.record is None or not self.readable(peer, item.record.meta.project_scope):
                continue
            amf, size = amf_out_sized(self.memory, item, now, self.amf_cache)
            amfs.append(amf)
            sizes.append(size)
            scores.append(round(float(hit.score), 6))
            # The firewall's verdict on each hit, so a reader (the hooks) labels it by the
            # provenance this node verified rather than by the claim the record carries.
            verdict = result.trust.get(hit.knowledge_id)
            trusts.append(verdict.to_dict() if verdict is not None else None)
        return amfs, {"scores": scores, "trust": trusts, **self._evicted_hits(query, peer)}

    def _read_amql(self, text: Any, peer: Peer) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        amql_ops.expect(text, "RECALL", "MEMORY_READ amql")
        response = amql_ops.run_query(self.memory, text, self._patterns(peer, Mode.READ))
        results = [
            r for r in response.pop("results", [])
            if not isinstance(r, Mapping) or self.readable(peer, scopes_of(r))
        ]
        return results, {k: v for k, v in response.items() if k not in ("status", "ref_seq")}

    # ------------------------------------------------------------------ writes

    def write(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        given = [k for k in ("amf", "batch", "amql") if p.get(k) is not None]
        if len(given) != 1:
            raise ValidationError("", "MEMORY_WRITE takes exactly one of amf, batch, amql")
        if given[0] == "amf":
            return self._ack(self._put(p["amf"], peer))
        if given[0] == "batch":
            batch = p["batch"]
            if not isinstance(batch, list) or not batch:
                raise ValidationError("batch", "must be a non-empty list of AMF records")
            if len(batch) > MAX_BATCH:
                raise ValidationError("batch", f"at most {MAX_BATCH} records per write")
            # Shape and scope of every record first, so a 400/403 stores nothing; then the
            # write rules for all and one transaction (Memory.put_batch).
            shaped = [self._check_amf(amf, peer) for amf in batch]
            with self.memory.atomic():
                outcomes = self.memory.put_batch(shaped)
                settle(self.memory, shaped)
            created = any(o.created for o in outcomes)
            return Reply(M.MEMORY_WRITE_ACK, {
                "knowledge_ids": [o.knowledge_id for o in outcomes],
                "statuses": [int(o.status) for o in outcomes],
                "hlc": max(o.hlc for o in outcomes),
            }, Status.CREATED if created else Status.OK)
        record = amql_ops.compose_remember(
            self.memory, p["amql"], created_by=peer.address, work_session=peer.work_session_id
        )
        if isinstance(record, AMFRecord):
            self.check_write(peer, record.meta.project_scope)
            return self._ack(self._store(record))
        return self._ack(self._put(record, peer))

    def _check_amf(self, amf: Any, peer: Peer) -> AMFRecord:
        """Shape (400) and the caller's right to write its scopes (403); the rest of the
        write rules are ``memory_writes.admit_write``'s, as for every other path."""
        shaped = AMFRecord.from_dict(amf)
        self.check_write(peer, shaped.meta.project_scope)
        return shaped

    def _put(self, amf: Any, peer: Peer) -> WriteOutcome:
        return self._store(self._check_amf(amf, peer))

    def _store(self, record: AMFRecord) -> WriteOutcome:
        """Store, and if the record supersedes one, resolve that predecessor as sync does on
        every other node (PROFILE §10), in the same transaction: the writer must not be the
        one node where the predecessor, or a losing fork, stays active."""
        with self.memory.atomic():
            outcome = self.memory.put(record)
            settle(self.memory, [record])
        return outcome

    @staticmethod
    def _ack(outcome: WriteOutcome) -> Reply:
        return Reply(M.MEMORY_WRITE_ACK, ack_payload(outcome), outcome.status)

    def invalidate(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        given = [k for k in ("knowledge_id", "amql", "event") if p.get(k) is not None]
        if len(given) != 1:
            raise ValidationError("", "MEMORY_INVALIDATE takes one of knowledge_id, amql, event")
        if given[0] == "event":
            name = p["event"]
            if not isinstance(name, str) or not name:
                raise ValidationError("event", "must be an event name")
            self._check_everything(peer, "firing an event")
            ids = self.memory.fire_event(name)
            return Reply(M.MEMORY_WRITE_ACK, {"knowledge_ids": list(ids), "event": name},
                         Status.NO_CONTENT)
        if given[0] == "amql":
            forget = amql_ops.parse_forget(p["amql"])
            if forget.knowledge_id is None:
                response = amql_ops.run_query(
                    self.memory, p["amql"], self._patterns(peer, Mode.WRITE)
                )
                return Reply(M.MEMORY_WRITE_ACK, response, Status.NO_CONTENT)
            kid, reason = forget.knowledge_id, forget.reason or "forgotten (AMQL FORGET)"
        else:
            kid, why = p["knowledge_id"], p.get("reason")
            if not isinstance(kid, str):
                raise ValidationError("knowledge_id", "must be a knowledge id")
            if not isinstance(why, str) or not why.strip():
                raise ValidationError("reason", "invalidation needs a reason")
            reason = why
        item = self.memory.get(kid)  # 404 / 410
        assert item.record is not None
        if not self.readable(peer, item.record.meta.project_scope):
            raise NotFoundError(f"no record {kid}")  # as if absent: scopes do not leak
        self.check_write(peer, item.record.meta.project_scope)
        return self._ack(self.memory.invalidate(kid, reason))

    # ------------------------------------------------------------------ sync

    def sync_pull(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        scopes = p.get("scopes")
        if scopes is not None and (
            not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes)
        ):
            raise ValidationError("scopes", "must be a list of scopes")
        if p.get("digest") is True:
            # Anti-entropy (docs/protocol.md, "Digests"): per-scope digests instead of changes.
            digests = scope_digests(self.memory, readable=lambda s: self.readable(peer, s),
                                    scopes=scopes)
            return Reply(M.SYNC_PULL_RESPONSE, {"changes": [], "watermark": p.get("since", 0),
                                                "more": False, "digests": to_wire(digests)})
        batch = pull_changes(
            self.memory, p.get("since", 0), limit=p.get("limit", 500),
            readable=lambda s: self.readable(peer, s), scopes=scopes,
            max_bytes=self.max_payload,
        )
        payload = batch.to_payload()
        key = _peer_key(peer)
        if self.replica is not None and key is not None and not scopes:
            # How far this peer has read our log: its lag, for the operator's view.
            self.replica.board.pulled_by(key, batch.watermark, more=batch.more)
        if self.replica is not None and key is not None and not p.get("scopes"):
            # No echo: what this peer pushed to us is not sent back to it (a repair, which
            # names scopes, gets everything). The watermark still moves past those entries.
            source = self.replica.source_of
            payload["changes"] = [
                c for c in payload["changes"]
                if (src := source(c["op"], c["knowledge_id"])) is None or src.peer != key
            ]
        return Reply(M.SYNC_PULL_RESPONSE, payload)

    def sync_push(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        changes, hops, origin = p.get("changes"), p.get("hops", 0), p.get("origin")
        origin_key = p.get("origin_key")
        if not isinstance(changes, list):
            raise ValidationError("changes", "must be a list")
        if len(changes) > MAX_PUSH:
            raise ValidationError("changes", f"at most {MAX_PUSH} per SYNC_PUSH")
        if isinstance(hops, bool) or not isinstance(hops, int) or hops < 0:
            raise ValidationError("hops", "must be a non-negative integer")
        if origin_key is not None and not isinstance(origin_key, str):
            raise ValidationError("origin_key", "must be a public key (base64url)")
        replica, who = self.replica, _who(peer)
        key = _peer_key(peer)
        if replica is not None:
            self._check_push(replica, key, who, origin_key, hops, len(changes))
        elif hops > MAX_HOPS or (origin_key is None and origin is not None
                                 and origin == self.node_uri):
            # Without origin_key only the URI can say, and it names a build, not a node: a
            # peer that sends the key is judged by it (by the replica, when there is one).
            raise AmcpError("sync loop: the changes came back to their origin",
                            status=Status.LOOP_DETECTED)

        def writable(scopes: Sequence[str]) -> bool:
            try:
                self.check_write(peer, scopes)
            except ForbiddenError:
                return False
            return True

        try:
            result = apply_changes(self.memory, changes, writable=writable,
                                   max_drift_ms=self.memory.clock.max_drift_ms)
        except IntegrityError as exc:
            if replica is not None:
                replica.bad_peer(key or who, who, exc.message)
            raise
        if replica is not None:
            replica.board.count(key, applied=result.applied, duplicates=result.duplicates,
                                conflicts=result.conflicts,
                                resolved_conflicts=result.resolved, malformed=result.malformed)
            if result.conflicts:
                replica.refused(key, who, "; ".join(result.problems[:3]), refused=0)
            replica.note_applied(result.done, Source(
                key or who, origin_key if isinstance(origin_key, str) else key or who,
                origin if isinstance(origin, str) else peer.address, hops))
        return Reply(M.SYNC_ACK, result.to_payload())

    @staticmethod
    def _check_push(replica: Replica, key: str | None, who: str, origin_key: Any, hops: int,
                    n: int) -> None:
        if replica.is_loop(origin_key, None, hops):
            replica.refused(key, who, f"sync loop (hops {hops})", loops=1)
            raise AmcpError("sync loop: the changes came back to their origin or went past "
                            "the hop limit", status=Status.LOOP_DETECTED)
        if not replica.admit_push(key or who, n):
            replica.refused(key, who, f"push flood ({n} changes over the rate)",
                            rate_limited=1)
            raise AmcpError("too many sync changes from this peer; slow down",
                            status=Status.TOO_MANY_REQUESTS)

    # ------------------------------------------------------------------ evolution

    def signal(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        signal = p.get("signal")
        if not isinstance(signal, Mapping):
            raise ValidationError("signal", "must be a map")
        body = dict(signal)
        ids = raw_refs(body) or []
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValidationError("signal.knowledge_ids", "must be a list of knowledge ids")
        scope = body.get("scope") or ["*"]
        self.check_write(peer, [scope] if isinstance(scope, str) else scope)
        for item in self.memory.store.get_many(ids):
            if item.record is not None:  # outcomes change these records' weights
                self.check_write(peer, item.record.meta.project_scope)
        result = self.memory.signal(body)
        return Reply(M.QEF_ACK, {
            "signal_knowledge_id": result.signal_knowledge_id,
            "updated": [_weight(u) for u in result.updated],
        })

    def distill(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        source, into = p.get("from"), p.get("into", "KT-PRINCIPLE")
        threshold = p.get("confidence_threshold", 0.0)
        amql_ops.expect(source, "RECALL", "KNOWLEDGE_DISTILL from")
        assert isinstance(source, str)
        if not isinstance(into, str):
            raise ValidationError("into", "must be a knowledge type")
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise ValidationError("confidence_threshold", "must be a number")
        self._check_everything(peer, "distillation")
        outcome = self.memory.distill(source, into=into, confidence_threshold=float(threshold))
        return self._ack(outcome)

    # ------------------------------------------------------------------ sessions

    def session_begin(self, p: Mapping[str, Any], peer: Peer) -> Reply:
        wsid = p.get("work_session_id")
        if wsid is None:
            wsid = new_work_session_id()
        elif not isinstance(wsid, str) or not is_work_session_id(wsid):
            raise ValidationError("work_session_id", "must look like S-YYYYMMDD-HHMMSS-6hex")
        peer.work_session_id = wsid
        return Reply(M.SESSION_BEGIN, {"work_session_id": wsid})


def _peer_key(peer: Peer) -> str | None:
    pk = peer.principal.public_key
    return b64url_encode(pk) if pk is not None else None


def _who(peer: Peer) -> str:
    """The peer's identity for logs: its URI and key."""
    key = _peer_key(peer)
    return f"{peer.address} key {key[:12]}…" if key else peer.address


def _weight(update: Any) -> dict[str, Any]:
    if isinstance(update, tuple):
        kid, weight, confidence = update[:3]
    else:
        kid, weight, confidence = update.knowledge_id, update.weight, update.confidence
    return {"knowledge_id": kid, "weight": float(weight), "confidence": float(confidence)}


_HANDLERS = {
    M.COLD_BOOT_REQUEST: NodeService.cold_boot,
    M.MEMORY_READ: NodeService.read,
    M.MEMORY_WRITE: NodeService.write,
    M.MEMORY_INVALIDATE: NodeService.invalidate,
    M.SYNC_PULL_REQUEST: NodeService.sync_pull,
    M.SYNC_PUSH: NodeService.sync_push,
    M.QEF_SIGNAL: NodeService.signal,
    M.KNOWLEDGE_DISTILL: NodeService.distill,
    M.SESSION_BEGIN: NodeService.session_begin,
}


# Reads by id this small are answered on the loop itself: a thread-pool hop costs more than
# the lookup (bench/node_rtt.py). Anything larger, and every write, goes to a thread.
INLINE_READ_IDS = 8


def small_id_read(payload: Any) -> bool:
    """A MEMORY_READ of a few ids and nothing else: the server answers it on its loop."""
    ids = payload.get("ids")
    return isinstance(ids, list) and len(ids) <= INLINE_READ_IDS and len(payload) == 1
