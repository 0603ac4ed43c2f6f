"""T3-01 … T3-06: Level-3 procedures against a cluster of nodes (PROFILE §9, §10).

``amcp conformance --level 3 A B C …``: the first address is the run's target, the rest
its peers; the nodes must already be peered with each other (the kit never configures a
node). A procedure that needs replication fails — it never skips — against nodes that do
not replicate, and says so. Procedures and numbers: docs/conformance.md.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from amcp.amf import KnowledgeType
from amcp.conformance.client import NodeFaultError, Peer
from amcp.conformance.cluster import Poller, need, nodes, wait_present
from amcp.conformance.interop import same_bytes
from amcp.conformance.records import make_record
from amcp.conformance.steps import (
    Spec,
    Target,
    Verdict,
    check,
    created_by,
    describe,
    read_by_id,
    read_results,
    verdict_of,
    write,
    write_all,
    x_state,
)
from amcp.conformance.syncsteps import digest, pull
from amcp.conformance.tiersteps import fill_plan, fillers, read_back, tier_health, wait_under
from amcp.errors import Status
from amcp.wire import Frame, MsgType

CONVERGED = 0.95  # T3-01: 95 % of the nodes


def _tok() -> str:
    return os.urandom(6).hex()


def _rec(target: Target, label: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("kind", KnowledgeType.DECISION)  # not push-triggered: gossip carries it
    return make_record(target.config.scope, created_by(target),
                       subject=kw.pop("subject", f"conformance/{label}/{_tok()}"),
                       obj=kw.pop("obj", f"written for {label}"), **kw)


def _write_on(node: Target, records: list[dict[str, Any]]) -> list[int]:
    """Write on ``node``; the acks' packed HLCs."""
    peer = node.active()
    with peer.conn:
        clocks = []
        for r in records:
            reply = write(node, peer, r)
            if reply.frame.msg_type is not MsgType.MEMORY_WRITE_ACK:
                raise NodeFaultError(f"{node.address} refused a write: {describe(reply)}",
                                     reply.raw)
            hlc = reply.frame.payload.get("hlc")
            clocks.append(hlc if isinstance(hlc, int) else 0)
    return clocks


def _digests(cluster: list[Target]) -> list[str]:
    out = []
    for node in cluster:
        peer = node.active()
        with peer.conn:
            out.append(digest(pull(peer, [node.config.scope]).changes))
    return out


# ----------------------------------------------------------------------------- T3-01


def t3_01_gossip(target: Target) -> Verdict:
    """Write one distinct KT-DECISION (not push-triggered) on every node; poll every node
    by id. PASS if 95 % of the (node, record) pairs read back within ``converge_within``
    (60 s) and, once all are in, every node's per-scope digest of its change feed agrees."""
    if (why := need(target, 2)) is not None:
        return Verdict(False, why)
    cluster = nodes(target)
    ids = []
    for node in cluster:
        record = _rec(node, "t3-01")
        _write_on(node, [record])
        ids.append(record["knowledge_id"])
    cfg = target.config
    wanted = {i: set(ids) for i in range(len(cluster))}
    with Poller.open(cluster) as poller:
        took, reached = wait_present(poller, wanted, within=cfg.converge_within,
                                     interval=cfg.poll_interval, fraction=CONVERGED)
        wait_present(poller, wanted, within=5.0 if took is not None else 0.0,
                     interval=cfg.poll_interval)
    digests = _digests(cluster)
    checks = [
        check(f"≥ 95 % of {len(cluster)} nodes hold each change within "
              f"{cfg.converge_within:g} s", took is not None,
              f"{reached:.0%} after {took if took is not None else cfg.converge_within:.1f} s"),
        check("per-scope digests agree", len(set(digests)) == 1,
              f"{len(set(digests))} distinct digests over {len(cluster)} nodes"),
    ]
    return verdict_of(checks, f"{len(cluster)} nodes converged in {took or 0:.2f} s")


# ----------------------------------------------------------------------------- T3-02


def _lifecycle(poller: Poller, i: int, kid: str) -> str | None:
    state = x_state(poller.read(i, [kid]).get(kid, {}))
    value = state.get("lifecycle")
    return value if isinstance(value, str) else None


def _superseded_by(poller: Poller, i: int, kid: str) -> str | None:
    got = poller.read(i, [kid]).get(kid, {})
    value = (got.get("causal") or {}).get("superseded_by")
    return value if isinstance(value, str) else None


def _settle(poller: Poller, count: int, root: str, winner: str, loser: str, within: float,
            interval: float) -> tuple[list[str | None], list[str | None], list[str | None]]:
    """Poll until every node shows the resolved conflict (eventual consistency: the
    loser may be marked a little after both forks are in); the last observation."""
    deadline = time.monotonic() + within
    while True:
        heads = [_superseded_by(poller, i, root) for i in range(count)]
        won = [_lifecycle(poller, i, winner) for i in range(count)]
        lost = [_lifecycle(poller, i, loser) for i in range(count)]
        done = (all(h == winner for h in heads) and all(s == "active" for s in won)
                and all(s == "superseded" for s in lost))
        if done or time.monotonic() >= deadline:
            return heads, won, lost
        time.sleep(interval)


def _fork(target: Target, cluster: list[Target], longer: bool) -> tuple[str, str, str, str]:
    """Root R (and evidence E1, E2) everywhere; then X on node 0 and Y on node 1 both
    supersede R. With ``longer``, Y also cites E1 and E2: the longer causal chain.
    Returns (root, x, y, expected winner)."""
    a, b = cluster[0], cluster[1]
    root, e1, e2 = (_rec(a, "t3-02-root"), _rec(a, "t3-02-evidence"),
                    _rec(a, "t3-02-evidence"))
    _write_on(a, [root, e1, e2])
    base = [root["knowledge_id"], e1["knowledge_id"], e2["knowledge_id"]]
    with Poller.open(cluster) as poller:
        took, _ = wait_present(poller, {1: set(base)}, within=target.config.converge_within,
                               interval=target.config.poll_interval)
    if took is None:
        raise NodeFaultError(f"the root never reached {b.address} within "
                             f"{target.config.converge_within:g} s: the nodes do not "
                             "replicate (or not in time), so no conflict can form")
    x = _rec(a, "t3-02-x", supersedes=root["knowledge_id"])
    cites = (e1["knowledge_id"], e2["knowledge_id"]) if longer else None
    y = _rec(b, "t3-02-y", supersedes=root["knowledge_id"], caused_by=cites)
    (hx,), (hy,) = _write_on(a, [x]), _write_on(b, [y])
    xid, yid = x["knowledge_id"], y["knowledge_id"]
    # PROFILE §10: equal chains → the greater HLC, then the greater knowledge_id.
    winner = yid if longer else max((hx, xid), (hy, yid))[1]
    return root["knowledge_id"], xid, yid, winner


def t3_02_conflicts(target: Target) -> Verdict:
    """Two forks of one root, written on two nodes at once: once with chains of different
    length (the longer must win), once equal (greater HLC, then knowledge_id). PASS if, once
    synced, every node names the same winner as R's ``superseded_by``, the winner is
    active, and the loser is kept, superseded — not lost."""
    if (why := need(target, 2)) is not None:
        return Verdict(False, why)
    cluster = nodes(target)
    checks = []
    for longer in (True, False):
        label = "longer chain" if longer else "equal chains"
        root, xid, yid, winner = _fork(target, cluster, longer)
        loser = xid if winner == yid else yid
        everywhere = {i: {xid, yid} for i in range(len(cluster))}
        with Poller.open(cluster) as poller:
            took, _ = wait_present(poller, everywhere, within=target.config.converge_within,
                                   interval=target.config.poll_interval)
            heads, won, lost = _settle(poller, len(cluster), root, winner, loser,
                                       target.config.converge_within if took else 0.0,
                                       target.config.poll_interval)
        checks += [
            check(f"{label}: both forks everywhere", took is not None, f"{took}"),
            check(f"{label}: every node picks {winner[:12]}…", all(h == winner for h in heads),
                  repr([h[:12] if h else None for h in heads])),
            check(f"{label}: winner active", all(s == "active" for s in won), repr(won)),
            check(f"{label}: loser kept as superseded", all(s == "superseded" for s in lost),
                  repr(lost)),
        ]
    return verdict_of(checks, "the same winner on every node, by chain length then HLC")


# ----------------------------------------------------------------------------- T3-03


def t3_03_gravity(target: Target) -> Verdict:
    """Plant a cluster — a head and three records that cite it (``caused_by``) on the same
    subject — and six unrelated decoys of the same type, then cold-boot with a task naming
    the head. PASS if every cluster member is in the pack whenever the head is, and each
    ranks ahead of every decoy (pack order, then ROI)."""
    scope = f"{target.config.scope}-t303"
    me, tok = created_by(target), _tok()
    head = make_record(scope, me, subject=f"hydrofoil ballast {tok}", obj="trim forward first",
                       kind=KnowledgeType.DECISION)
    members = [make_record(scope, me, subject=f"hydrofoil ballast {tok} step {i}",
                           obj=f"follows from trimming forward ({i})",
                           kind=KnowledgeType.DECISION, caused_by=(head["knowledge_id"],))
               for i in range(3)]
    decoys = [make_record(scope, me, subject=f"unrelated ledger {_tok()}", obj=f"decoy {i}",
                          kind=KnowledgeType.DECISION) for i in range(6)]
    peer = target.active()
    with peer.conn:
        write_all(target, peer, [head, *members, *decoys])
    cluster_ids = {head["knowledge_id"], *(m["knowledge_id"] for m in members)}
    decoy_ids = {d["knowledge_id"] for d in decoys}
    with target.connect() as conn:
        p = Peer(conn, target.me)
        p.handshake()
        reply = p.request(MsgType.COLD_BOOT_REQUEST, {
            "task": f"hydrofoil ballast {tok}", "project": scope, "project_scope": scope,
            "budget_tokens": 8000})
    pack = reply.frame.payload.get("pack") or {}
    items = [i for i in pack.get("items") or [] if isinstance(i, dict)]
    order = [i.get("knowledge_id") for i in items]
    ranks = {kid: n for n, kid in enumerate(order)}
    in_pack = cluster_ids & set(order)
    last_member = max((ranks[k] for k in in_pack), default=-1)
    first_decoy = min((ranks[k] for k in decoy_ids & set(order)), default=len(order))
    checks = [
        check("the head is loaded", head["knowledge_id"] in ranks, f"{len(order)} items"),
        check("the whole cluster is loaded with it", in_pack == cluster_ids,
              f"{len(in_pack)}/{len(cluster_ids)} members"),
        check("cluster members rank ahead of decoys", last_member < first_decoy,
              f"last member #{last_member}, first decoy #{first_decoy}"),
    ]
    return verdict_of(checks, f"cluster of {len(cluster_ids)} loaded together, ahead of decoys")


# ----------------------------------------------------------------------------- T3-04


def t3_04_pinning(target: Target) -> Verdict:
    """The target (an edge) declares tier 0's ``max_records`` and a higher-tier holder.
    Write a KT-FACT and a KT-PITFALL first (the least recently used), then KT-DECISION
    fillers past the limit; wait for the target's own eviction round to bring tier 0 back
    under it. PASS if it evicted, the fact and pitfall still read back active from tier 0
    with no network fetch and are in CORE_PRINCIPLES, and every filler still reads back
    with its checksum — the evicted ones through the local index (fetched back)."""
    if (why := need(target, 2)) is not None:
        return Verdict(False, why)
    scope, me, tok = f"{target.config.scope}-t304", created_by(target), _tok()
    pinned = [make_record(scope, me, subject=f"pinned fact {tok}", obj="never evicted"),
              make_record(scope, me, kind=KnowledgeType.PITFALL, subject=f"pinned pitfall {tok}",
                          obj="never evicted either")]
    peer = target.active()
    with peer.conn:
        tiers = tier_health(peer)
        count, why = fill_plan(tiers)
        if why is not None or tiers is None:
            return Verdict(False, why or "no tier report")
        fill = fillers(scope, me, tok, count)
        write_all(target, peer, pinned)
        for start in range(0, len(fill), 50):
            batch = peer.request(MsgType.MEMORY_WRITE, {"batch": fill[start:start + 50]})
            target.written.extend(r["knowledge_id"] for r in fill[start:start + 50])
            if batch.frame.msg_type is not MsgType.MEMORY_WRITE_ACK:
                return Verdict(False, f"filler batch refused: {describe(batch)}", batch.raw)
    limits = tiers.get("limits") or {}
    within = 2 * float(limits.get("interval") or 60) + target.config.converge_within
    after = wait_under(target, int(limits["max_records"]), int(tiers.get("evicted") or 0),
                       within)
    evicted = (after or {}).get("evicted", 0) - int(tiers.get("evicted") or 0)
    ids = [r["knowledge_id"] for r in pinned]
    peer = target.active()
    with peer.conn:
        reply, results = read_results(peer, {"ids": ids})
        got, fetched, missed = read_back(peer, [r["knowledge_id"] for r in fill])
    with target.connect() as conn:  # a cold boot opens a session of its own
        p = Peer(conn, target.me)
        p.handshake()
        boot = p.request(MsgType.COLD_BOOT_REQUEST, {
            "task": f"pinned {tok}", "project": scope, "project_scope": scope,
            "budget_tokens": 8000})
    states = [x_state(r) for r in results]
    items = (boot.frame.payload.get("pack") or {}).get("items") or []
    core = {i.get("knowledge_id") for i in items if isinstance(i, dict)
            and i.get("zone") == "CORE_PRINCIPLES"}
    same = all(got.get(r["knowledge_id"], {}).get("integrity", {}).get("checksum")
               == r["integrity"]["checksum"] for r in fill)
    checks = [
        check("tier 0 evicted back under its limit", evicted > 0 and after is not None
              and after.get("tier0_records", 0) <= limits["max_records"],
              f"{evicted} evicted, tier 0 now {(after or {}).get('tier0_records')} records "
              f"(limit {limits['max_records']})"),
        check("fact and pitfall still active in tier 0", len(states) == 2 and all(
            s.get("lifecycle") == "active" and str(s.get("tier")) in ("0", "tier_0")
            for s in states), repr([(s.get("lifecycle"), s.get("tier")) for s in states])),
        check("no network fetch for them", reply.frame.payload.get("network_fetches") == 0,
              repr(reply.frame.payload.get("network_fetches"))),
        check("both in CORE_PRINCIPLES", set(ids) <= core, f"{len(core)} in the zone"),
        check("every evicted filler still there (fetched back, same checksum)",
              len(got) == len(fill) and same and fetched > 0 and missed == 0,
              f"{len(got)}/{len(fill)} read, {fetched} fetched back, {missed} cache misses"),
    ]
    return verdict_of(checks, f"{evicted} of {len(fill)} fillers evicted; fact and pitfall "
                              "pinned; the evicted ones fetched back")


# ----------------------------------------------------------------------------- T3-05

THEME = ("retry", "backoff", "overload")  # the principle the planted history implies
CONSISTENCY = 2 / 3  # share of THEME words the distilled statement must carry


def t3_05_distill(target: Target) -> Verdict:
    """Plant four KT-PITFALL records that all say "retrying without backoff overloads the
    API", and two unrelated ones; KNOWLEDGE_DISTILL them into KT-PRINCIPLE with threshold
    0.5. PASS if the ack names new KT-PRINCIPLE records whose ``caused_by`` cites only
    source records, whose confidence is ≥ the threshold, and whose statement carries ≥ ⅔
    of the theme's words (retry, backoff, overload) — the kit's semantic-consistency test,
    lexical so that it needs no model."""
    scope = f"{target.config.scope}-t305"
    me, tok = created_by(target), _tok()
    theme = [make_record(scope, me, kind=KnowledgeType.PITFALL,
                         subject=f"api client retry without backoff {tok} case {i}",
                         obj="causes overload of the upstream api", confidence=0.8)
             for i in range(4)]
    peer = target.active()
    with peer.conn:
        write_all(target, peer, theme)
        ack = peer.request(MsgType.KNOWLEDGE_DISTILL, {
            "from": f"RECALL * WHERE type = KT-PITFALL AND project_scope CONTAINS '{scope}'",
            "into": "KT-PRINCIPLE", "confidence_threshold": 0.5})
        made = ack.frame.payload.get("knowledge_ids") or (
            [ack.frame.payload["knowledge_id"]] if ack.frame.payload.get("knowledge_id")
            else [])
        target.written.extend(k for k in made if isinstance(k, str))
        got = read_by_id(peer, [k for k in made if isinstance(k, str)])
    sources = {r["knowledge_id"] for r in theme}
    principles = [r for r in got.values() if r.get("type") == "KT-PRINCIPLE"]

    def consistent(r: dict[str, Any]) -> bool:
        text = f"{r['core'].get('subject')} {r['core'].get('object')} " \
               f"{(r.get('annotation') or {}).get('natural_language', '')}".lower()
        words = set(re.findall(r"[a-z]+", text))
        return sum(any(w.startswith(t) for w in words) for t in THEME) / len(THEME) \
            >= CONSISTENCY

    checks = [
        check("ack names new records", ack.frame.msg_type is MsgType.MEMORY_WRITE_ACK
              and ack.status == Status.CREATED and bool(made), describe(ack)),
        check("they are KT-PRINCIPLE", bool(principles) and len(principles) == len(got),
              f"{len(principles)}/{len(got)}"),
        check("evidence cites only sources", all(
            set((r.get("causal") or {}).get("caused_by") or []) <= sources
            and (r.get("causal") or {}).get("caused_by") for r in principles), "caused_by"),
        check("confidence ≥ threshold", all(r["core"]["confidence"] >= 0.5 for r in principles),
              repr([r["core"]["confidence"] for r in principles])),
        check("statement consistent with the sources", bool(principles)
              and all(consistent(r) for r in principles),
              repr([r["core"].get("subject") for r in principles])),
    ]
    return verdict_of(checks, f"{len(principles)} principle(s) distilled from 4 pitfalls")


# ----------------------------------------------------------------------------- T3-06


def _claim_federated(frame: Frame) -> Frame:
    if frame.msg_type is not MsgType.CAPABILITY_HELLO:
        return frame
    return Frame(frame.msg_type, {**frame.payload, "trust_level": "federated"}, frame.seq,
                 frame.session_id, frame.clock, frame.flags)


def _refuses_bare_federated(node: Target) -> tuple[bool, str]:
    """A ``federated`` claim without certificates must be answered 401/403 and closed."""
    with node.connect() as conn:
        peer = Peer(conn, node.me, rewrite=_claim_federated)
        try:
            peer.handshake()
        except NodeFaultError as exc:
            refused = "401" in str(exc) or "403" in str(exc)
            return refused, str(exc)
    return False, "handshake completed: a federated claim was granted without certificates"


def t3_06_federated(target: Target) -> Verdict:
    """Two nodes: a federated claim without certificates is refused on each (401/403);
    a supersede chain written on the first reaches the second byte-identical (physical),
    with the same HLC order and ``superseded_by`` (logical), and the same AMQL query
    returns the same ids on both (semantic)."""
    if (why := need(target, 2)) is not None:
        return Verdict(False, why)
    a, b = nodes(target)[:2]
    checks = []
    for node in (a, b):
        ok, detail = _refuses_bare_federated(node)
        checks.append(check(f"{node.address} refuses federated without certificates", ok,
                            detail))
    tok = _tok()
    root = _rec(a, "t3-06", kind=KnowledgeType.FACT, subject=f"conformance/t3-06/{tok} v1")
    newer = _rec(a, "t3-06", kind=KnowledgeType.FACT, subject=f"conformance/t3-06/{tok} v2",
                 supersedes=root["knowledge_id"])
    ids = [root["knowledge_id"], newer["knowledge_id"]]
    h_root, h_new = _write_on(a, [root]) + _write_on(a, [newer])
    with Poller.open([a, b]) as poller:
        took, _ = wait_present(poller, {1: set(ids)}, within=target.config.converge_within,
                               interval=target.config.poll_interval)
        there = poller.read(1, ids)
    query = f"RECALL * WHERE subject CONTAINS '{tok}' LIMIT rows(10)"
    answers = []
    for node in (a, b):
        peer = node.active()
        with peer.conn:
            answers.append(sorted(r.get("knowledge_id", "") for r in
                                  read_results(peer, {"amql": query})[1]))
    sup = (there.get(ids[0], {}).get("causal") or {}).get("superseded_by")
    checks += [
        check("the chain reached the second node", took is not None, f"{took}"),
        check("physical: byte-identical", took is not None and all(
            same_bytes(r, there.get(r["knowledge_id"], {})) for r in (root, newer)), "core/meta"),
        check("logical: HLC order and superseded_by agree", h_root < h_new
              and sup == ids[1], f"superseded_by={sup}"),
        check("semantic: the same query, the same ids", answers[0] == answers[1] != [],
              f"{len(answers[0])} vs {len(answers[1])}"),
    ]
    return verdict_of(checks, "federated refusal, physical, logical and semantic consistency")


LEVEL_3: tuple[Spec, ...] = (
    Spec("T3-01", "Gossip convergence", t3_01_gossip),
    Spec("T3-02", "Conflict resolution", t3_02_conflicts),
    Spec("T3-03", "Knowledge gravity", t3_03_gravity),
    Spec("T3-04", "Edge solidification and eviction", t3_04_pinning),
    Spec("T3-05", "Knowledge distillation", t3_05_distill),
    Spec("T3-06", "Federated sync", t3_06_federated),
)
