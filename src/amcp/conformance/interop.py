"""T2-08 cross-vendor interoperability: the handshake forms PROFILE allows, records that
survive the trip byte for byte, and (with ``--reference``) an exchange with a second node.

Upstream says only "interoperability test with the reference implementation". The kit is
itself built on this project's reference codecs (``amcp.wire``, ``amcp.session``,
``amcp.amf``), so against any target it checks what an independent peer would rely on;
given a reference node it also relays records between the two through SYNC_PULL /
SYNC_PUSH, both ways.
"""

from __future__ import annotations

import os
from typing import Any

from amcp.amf import parse_record
from amcp.amf.canonical import canonical_packb
from amcp.conformance.client import NodeFaultError, Peer, parse_target
from amcp.conformance.records import make_record
from amcp.conformance.report import Check
from amcp.conformance.steps import (
    Target,
    Verdict,
    check,
    created_by,
    read_by_id,
    verdict_of,
    write_all,
)
from amcp.conformance.syncsteps import pull, push
from amcp.errors import AmcpError
from amcp.wire import Frame, MsgType

# What a peer may put in its CAPABILITY_RESPONSE / hello besides our own spelling.
FORMS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("response compression/encryption false (booleans)",
     {"compression": False, "encryption": False}, {}),
    ("response compression true (boolean)", {"compression": True, "encryption": False}, {}),
    ("response accepted_version 1.0, names in upper case",
     {"accepted_version": "1.0", "compression": "NONE", "encryption": "None"}, {}),
    ("hello amcp_version 1.0 (two parts)", {}, {"amcp_version": "1.0"}),
)


def check_record(data: dict[str, Any]) -> str | None:
    """None when ``data`` is valid AMF whose id, checksum and envelope recompute."""
    try:
        parse_record(data, verify=True)
    except AmcpError as exc:
        return str(exc)
    return None


def same_bytes(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Id, type, core, meta canonically identical, and the same checksum and envelope
    (node-written ``causal.hlc`` and ``x-state`` aside, PROFILE §6)."""
    keys = ("knowledge_id", "type", "core", "meta")
    seals = ("checksum", "envelope")
    return all(canonical_packb(a.get(k)) == canonical_packb(b.get(k)) for k in keys) and all(
        (a.get("integrity") or {}).get(k) == (b.get("integrity") or {}).get(k) for k in seals)


def _rewriter(resp: dict[str, Any], hello: dict[str, Any]) -> Any:
    def rewrite(frame: Frame) -> Frame:
        changes = resp if frame.msg_type is MsgType.CAPABILITY_RESPONSE else (
            hello if frame.msg_type is MsgType.CAPABILITY_HELLO else {})
        if not changes:
            return frame
        return Frame(frame.msg_type, {**frame.payload, **changes}, frame.seq,
                     frame.session_id, frame.clock, frame.flags)
    return rewrite


def _form_checks(target: Target) -> list[Check]:
    checks = []
    for name, resp, hello in FORMS:
        try:
            with target.connect() as conn:
                peer = Peer(conn, target.me, rewrite=_rewriter(resp, hello))
                peer.handshake()
                peer.cold_boot(target.config.scope)
                reply = peer.request(MsgType.HEALTH_CHECK, {})
            ok = reply.frame.msg_type is MsgType.HEALTH_RESPONSE
            checks.append(check(name, ok, reply.frame.msg_type.name))
        except NodeFaultError as exc:
            checks.append(check(name, False, str(exc)))
    return checks


def _round_trip(target: Target, peer: Peer, record: dict[str, Any]) -> list[Check]:
    kid = record["knowledge_id"]
    back = read_by_id(peer, [kid]).get(kid)
    feed = pull(peer, [target.config.scope])
    mine = [c for c in feed.changes if c.get("knowledge_id") == kid]
    amf = mine[-1].get("amf") if mine else None
    bad_read = check_record(back) if back else "not returned"
    bad_feed = check_record(amf) if isinstance(amf, dict) else "not in the feed"
    return [
        check("read back byte-identical", back is not None and same_bytes(record, back),
              "same id, core, meta, checksum, envelope" if back else "not returned"),
        check("served record verifies (id, checksum, envelope)", bad_read is None,
              bad_read or "ok"),
        check("SYNC_PULL serves it as op put", bool(mine) and mine[-1].get("op") == "put",
              f"{len(feed.changes)} changes, watermark {feed.watermark}"),
        check("pulled record verifies and is identical", bad_feed is None
              and isinstance(amf, dict) and same_bytes(record, amf), bad_feed or "ok"),
    ]


def _relay(target: Target, src: Target, dst: Target, label: str) -> Check:
    """Write on ``src``, pull it from ``src``, push it to ``dst``, read it on ``dst``."""
    record = make_record(src.config.scope, created_by(src),
                         subject=f"conformance/t2-08/{label}/{os.urandom(6).hex()}",
                         obj="crossed between implementations")
    kid = record["knowledge_id"]
    try:
        a = src.active()
        with a.conn:
            write_all(src, a, [record])
            feed = pull(a, [src.config.scope])
        # The kit relays, so it names itself as the origin: two nodes of one implementation
        # with the same capabilities share a node URI, and the destination would take its
        # own-looking origin for a loop (508).
        origin = str(src.me.address)
        changes = [c for c in feed.changes if c.get("knowledge_id") == kid]
        b = dst.active()
        with b.conn:
            ack = push(b, changes, origin)
            got = read_by_id(b, [kid]).get(kid)
    except NodeFaultError as exc:
        return check(f"{label}: relayed record", False, str(exc))
    target.written.append(kid)
    ok = got is not None and same_bytes(record, got)
    return check(f"{label}: relayed record reads back identical", ok,
                 f"SYNC_ACK applied={ack.get('applied')} duplicates={ack.get('duplicates')}")


def t2_08_interop(target: Target) -> Verdict:
    """Handshakes in every form PROFILE §3–§4 allows; a record written by the kit's
    reference codecs reads back and pulls back byte-identical and verifiable; with
    ``--reference HOST:PORT``, records relayed target → reference and back arrive intact."""
    checks = _form_checks(target)
    record = make_record(target.config.scope, created_by(target),
                         subject=f"conformance/t2-08/{os.urandom(6).hex()}", obj="interop")
    peer = target.active()
    with peer.conn:
        write_all(target, peer, [record])
        checks += _round_trip(target, peer, record)
    ref = target.config.reference
    if ref is not None:
        host, port = parse_target(ref)
        other = Target(host, port, target.config, target.me, target.written)
        checks.append(_relay(target, target, other, "target → reference"))
        checks.append(_relay(target, other, target, "reference → target"))
    note = f"; exchanged with reference {ref}" if ref else " (no --reference given)"
    return verdict_of(checks, f"{len(FORMS)} handshake forms accepted, records intact{note}")
