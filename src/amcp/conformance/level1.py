"""T1-01 … T1-08: the Level-1 procedures of upstream conformance-level-1.md.

Each procedure follows the upstream steps; where PROFILE.md (normative for this project)
is stricter or settles an ambiguity, the extra rule is named in a comment and in
docs/conformance.md. Each test opens its own connection(s), so one failure cannot leave
state behind that decides another test.
"""

from __future__ import annotations

import re
import time

from amcp.conformance.client import (
    NodeFaultError,
    NodeViolationError,
    Peer,
)
from amcp.conformance.records import (
    PATTERN_FIELD,
    REQUIRED_FIELDS,
    expected_knowledge_id,
    fresh_record,
    overwrite_of,
    with_wrong_id,
    without,
)
from amcp.conformance.report import Check
from amcp.conformance.steps import (
    Spec,
    Target,
    Verdict,
)
from amcp.conformance.steps import ack_id as _ack_id
from amcp.conformance.steps import created_by as _created_by
from amcp.conformance.steps import describe as _describe
from amcp.conformance.steps import is_ack as _is_ack
from amcp.conformance.steps import write as _write
from amcp.errors import Status
from amcp.wire import MAGIC, Frame, MsgType, encode_frame, pack_raw_frame

_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
NODE_TYPES = frozenset({"ai", "db", "gateway", "bridge", "relay"})
TRUST_LEVELS = frozenset({"local", "verified", "federated"})


# ----------------------------------------------------------------------------- T1-01


def t1_01_magic(target: Target) -> Verdict:
    """Capture frames the node sends (handshake, cold boot, a HEALTH_CHECK answer) and
    check bytes 0–3 of every one. Upstream asks for "any frame"; checking all of them costs
    nothing and catches a node that gets only its first frame right."""
    with target.connect() as conn:
        peer = Peer(conn, target.me)
        stopped = ""
        try:
            peer.handshake()
            peer.cold_boot(target.config.scope)
            peer.request(MsgType.HEALTH_CHECK, {})
        except NodeFaultError as exc:
            if exc.evidence is not None and exc.evidence[:4] != MAGIC:
                return Verdict(False, str(exc), exc.evidence)
            stopped = f" (the run stopped early: {exc})"
        frames = conn.received
        if not frames:
            return Verdict(False, f"the node sent no frame to capture{stopped}")
        bad = [i for i, item in enumerate(frames) if item.raw[:4] != MAGIC]
        if bad:  # unreachable through RawConnection, kept so the verdict never trusts it
            return Verdict(False, f"frame #{bad[0]} lacks the magic", frames[bad[0]].raw[:50])
        kinds = ", ".join(item.frame.msg_type.name for item in frames)
        return Verdict(
            True, f"{len(frames)} frames, all start with 414D4350: {kinds}{stopped}",
            frames[0].raw[:4],
        )


# ----------------------------------------------------------------------------- T1-02


def t1_02_hello(target: Target) -> Verdict:
    """The first frame received on a new connection is CAPABILITY_HELLO with the four
    required fields. Both sides of AMCP send a hello first, so a node may wait for ours:
    the kit waits ``hello_wait`` for an unprompted one, then sends its own hello."""
    with target.connect() as conn:
        first = conn.recv_frame(target.config.hello_wait)
        prompted = False
        if first is None and not conn.eof:
            Peer(conn, target.me).send_hello()
            prompted = True
            first = conn.recv_frame()
        if first is None:
            what = "closed the connection" if conn.eof else "sent nothing"
            return Verdict(False, f"the node {what}; no frame to check")
        how = "after the kit's hello" if prompted else "unprompted"
        if first.frame.msg_type is not MsgType.CAPABILITY_HELLO:
            return Verdict(
                False, f"first frame ({how}) is {_describe(first)}, not CAPABILITY_HELLO",
                first.raw,
            )
        p = first.frame.payload
        problems = []
        version = p.get("amcp_version")
        if not isinstance(version, str) or not _VERSION_RE.match(version):
            problems.append(f"amcp_version {version!r} does not match ^\\d+\\.\\d+\\.\\d+$")
        if p.get("node_type") not in NODE_TYPES:
            problems.append(f"node_type {p.get('node_type')!r} not in {sorted(NODE_TYPES)}")
        key = p.get("public_key")
        if not isinstance(key, str) or not key:
            problems.append("public_key missing or empty")
        if p.get("trust_level") not in TRUST_LEVELS:
            problems.append(f"trust_level {p.get('trust_level')!r} not in {sorted(TRUST_LEVELS)}")
        if problems:
            return Verdict(False, "CAPABILITY_HELLO: " + "; ".join(problems), first.raw)
        return Verdict(
            True,
            f"CAPABILITY_HELLO first ({how}): amcp_version={version} "
            f"node_type={p['node_type']} trust_level={p['trust_level']}",
            first.raw[:50],
        )


# ----------------------------------------------------------------------------- T1-03


def t1_03_violation(target: Target) -> Verdict:
    """Send a frame whose magic is 0x00000000; expect exactly one 0x00FF, then a close
    within ``close_within`` (PROFILE §2: 1 s; upstream allows 5 s)."""
    limit = target.config.close_within
    with target.connect() as conn:
        # Let the node's own hello arrive first so it cannot be mistaken for the answer.
        early = conn.recv_frame(target.config.hello_wait)
        bad = pack_raw_frame(magic=b"\x00\x00\x00\x00", msg_type=MsgType.HEALTH_CHECK, seq=1)
        sent_at = time.monotonic()
        try:
            conn.send(bad)
        except NodeFaultError as exc:
            return Verdict(False, f"could not send the bad frame: {exc}")
        reply = conn.recv_frame()
        while reply is not None and reply.frame.msg_type is MsgType.CAPABILITY_HELLO:
            reply = conn.recv_frame()
        if reply is None:
            what = "closed the connection without" if conn.eof else "sent no frame, expected"
            return Verdict(False, f"the node {what} a PROTOCOL_VIOLATION (0x00FF)", bad)
        if reply.frame.msg_type is not MsgType.PROTOCOL_VIOLATION:
            return Verdict(False, f"answered bad magic with {_describe(reply)}", reply.raw)
        closed, extra, closed_at = conn.wait_closed(max(0.0, sent_at + limit - time.monotonic()))
        if extra:
            return Verdict(
                False, f"sent more after the 0x00FF: {_describe(extra[0])}", extra[0].raw
            )
        if not closed or closed_at is None:
            return Verdict(
                False, f"0x00FF received but the connection was still open after {limit:g} s",
                reply.raw,
            )
        note = "" if early is None else " (node hello seen first)"
        return Verdict(
            True,
            f"{_describe(reply)}; closed {1000 * (closed_at - sent_at):.0f} ms after the "
            f"bad frame{note}",
            reply.raw,
        )


# ----------------------------------------------------------------------------- T1-04


CLEANUP_REASON = "amcp conformance kit: a test record, removed after the run"


def cleanup(target: Target) -> str:
    """Invalidate every record the run stored (MEMORY_INVALIDATE, the protocol's way to
    take a record out of service; a node keeps it, marked, as the protocol requires)."""
    if not target.written:
        return "the run stored no records"
    done = 0
    try:
        peer = target.active()
        with peer.conn:
            for kid in dict.fromkeys(target.written):
                reply = peer.request(
                    MsgType.MEMORY_INVALIDATE, {"knowledge_id": kid, "reason": CLEANUP_REASON}
                )
                done += reply.frame.msg_type is MsgType.MEMORY_WRITE_ACK
    except (NodeFaultError, OSError) as exc:
        return f"cleanup stopped after {done} of {len(set(target.written))} records: {exc}"
    return (f"invalidated the {done} of {len(set(target.written))} records the run stored "
            f"(scope {target.config.scope})")


def t1_04_schema(target: Target) -> Verdict:
    """For each required AMF field, MEMORY_WRITE a record without it; each must be answered
    ERROR (0x00FE) status 400 and the session must continue (PROFILE §2: 400 is an ERROR,
    not a violation). The upstream step names core.subject; the upstream list of required
    fields, and PROFILE §6's core.sample_size for KT-PATTERN, are each tried as well."""
    cases = [(name, False) for name in REQUIRED_FIELDS] + [(PATTERN_FIELD, True)]
    checks: list[Check] = []
    evidence: bytes | None = None
    peer: Peer | None = None
    try:
        for path, pattern in cases:
            label = f"missing {path}" + (" (KT-PATTERN)" if pattern else "")
            if peer is None:
                try:
                    peer = target.active()
                except NodeFaultError as exc:
                    # Not this case's fault: without a session no case can run at all.
                    done = ", ".join(c.name for c in checks) or "none"
                    return Verdict(False, f"no ACTIVE session to write in: {exc} "
                                   f"(cases run before: {done})", exc.evidence, tuple(checks))
            record = fresh_record(
                target.config.scope, _created_by(target), label="t1-04", pattern=pattern
            )
            try:
                reply = _write(target, peer, without(record, path))
            except NodeFaultError as exc:
                peer.conn.close()
                peer = None  # the connection is gone: the next case reconnects
                checks.append(Check(label, False, str(exc)))
                evidence = evidence or exc.evidence
                continue
            ok = reply.frame.msg_type is MsgType.ERROR and reply.status == Status.BAD_REQUEST
            checks.append(Check(label, ok, _describe(reply)))
            if not ok:
                evidence = evidence or reply.raw
    finally:
        if peer is not None:
            peer.conn.close()
    failed = [c for c in checks if not c.passed]
    if failed:
        return Verdict(
            False,
            f"{len(failed)}/{len(checks)} malformed writes not answered ERROR 400: "
            + ", ".join(c.name for c in failed),
            evidence,
            tuple(checks),
        )
    return Verdict(True, f"all {len(checks)} malformed writes answered ERROR 400", None,
                   tuple(checks))


# ----------------------------------------------------------------------------- T1-05


def t1_05_immutability(target: Target) -> Verdict:
    """Write a record, then MEMORY_WRITE the same knowledge_id with a different core.object.
    PASS on ERROR 409, or on 201 for a *new* id (a supersede). PROFILE §6 orders the 409
    before the id recomputation, so a violation here fails. Afterwards the original is read
    back, when the node answers MEMORY_READ, to check it was not changed anyway."""
    original = fresh_record(target.config.scope, _created_by(target), label="t1-05")
    kid = original["knowledge_id"]
    peer = target.active()
    with peer.conn:
        first = _write(target, peer, original)
        if not _is_ack(first, Status.CREATED, Status.OK):
            return Verdict(False, f"could not store the original: {_describe(first)}", first.raw)
        try:
            reply = _write(target, peer, overwrite_of(original))
        except NodeViolationError as exc:
            return Verdict(
                False,
                "overwrite answered with PROTOCOL_VIOLATION; PROFILE §6 requires the 409 "
                f"check before the id check ({exc})",
                exc.evidence,
            )
        if reply.frame.msg_type is MsgType.ERROR and reply.status == Status.CONFLICT:
            verdict = Verdict(True, f"overwrite refused: {_describe(reply)}", reply.raw)
        elif _is_ack(reply, Status.CREATED) and _ack_id(reply) not in (None, kid):
            verdict = Verdict(
                True, f"stored as a new version {_ack_id(reply)} (original {kid} kept)", reply.raw
            )
        else:
            return Verdict(
                False, f"overwrite of {kid} answered {_describe(reply)} "
                f"knowledge_id={_ack_id(reply)}", reply.raw,
            )
        changed = _read_back_object(peer, kid)
        if changed is not None and changed != original["core"]["object"]:
            return Verdict(
                False, f"{kid} now reads core.object={changed!r} after the refused overwrite",
                reply.raw,
            )
        seen = "original read back unchanged" if changed else "read-back not available"
        return Verdict(True, f"{verdict.detail}; {seen}", verdict.evidence)


def _read_back_object(peer: Peer, kid: str) -> str | None:
    """core.object of ``kid`` as the node returns it, or None if it will not say."""
    try:
        reply = peer.request(MsgType.MEMORY_READ, {"ids": [kid]})
    except NodeFaultError:
        return None
    results = reply.frame.payload.get("results")
    if reply.frame.msg_type is not MsgType.MEMORY_READ_RESPONSE or not isinstance(results, list):
        return None
    for item in results:
        if isinstance(item, dict) and item.get("knowledge_id") == kid:
            core = item.get("core")
            obj = core.get("object") if isinstance(core, dict) else None
            return obj if isinstance(obj, str) else None
    return None


# ----------------------------------------------------------------------------- T1-06


def t1_06_state(target: Target) -> Verdict:
    """Without any handshake, send MEMORY_READ as the first frame. PASS on 0x00FF, or on
    ERROR status 702; PROFILE §8 adds that the connection then closes."""
    with target.connect() as conn:
        read = encode_frame(Frame(MsgType.MEMORY_READ, {"query": "conformance"}, seq=1))
        try:
            conn.send(read)
        except NodeFaultError as exc:
            return Verdict(False, f"could not send MEMORY_READ: {exc}")
        reply = conn.recv_frame()
        # The node's own hello is not an answer, nor is a frame naming another ref_seq.
        while reply is not None and (
            reply.frame.msg_type is MsgType.CAPABILITY_HELLO
            or reply.frame.payload.get("ref_seq", 1) != 1
        ):
            reply = conn.recv_frame()
        if reply is None:
            what = "closed the connection without answering" if conn.eof else "did not answer"
            return Verdict(False, f"the node {what} MEMORY_READ before the handshake", read)
        mt = reply.frame.msg_type
        if mt is MsgType.PROTOCOL_VIOLATION:
            limit = target.config.close_within
        elif mt is MsgType.ERROR and reply.status == Status.COLD_BOOT_REQUIRED:
            limit = target.config.timeout
        else:
            return Verdict(False, f"MEMORY_READ before the handshake answered {_describe(reply)}",
                           reply.raw)
        closed, extra, _ = conn.wait_closed(max(0.0, reply.at + limit - time.monotonic()))
        if extra:
            return Verdict(False, f"refused, then sent {_describe(extra[0])}", extra[0].raw)
        if not closed:
            return Verdict(False, f"{_describe(reply)} but the connection stayed open "
                           f"{limit:g} s (PROFILE §2/§8)", reply.raw)
        return Verdict(True, f"refused with {_describe(reply)}, then closed", reply.raw)


# ----------------------------------------------------------------------------- T1-07


def t1_07_checksum(target: Target) -> Verdict:
    """In an ACTIVE session, send a HEALTH_CHECK whose CHECKSUM is wrong and require
    silence for ``silence_window`` (upstream: 5 s). Then send the same frame with the right
    CHECKSUM — the same SEQUENCE_NUMBER, as a sender retransmitting would — and require a
    HEALTH_RESPONSE: the bad frame was dropped, not processed, and the stream still works."""
    window = target.config.silence_window
    peer = target.active()
    with peer.conn as conn:
        frame = peer.session.send(MsgType.HEALTH_CHECK, {})
        good = encode_frame(frame, compress=False)
        crc = int.from_bytes(good[46:50], "big") ^ 0xFFFFFFFF
        corrupt = good[:46] + crc.to_bytes(4, "big") + good[50:]
        conn.send(corrupt)
        noise = conn.recv_frame(window)
        if noise is not None:
            return Verdict(False, f"answered a bad-checksum frame with {_describe(noise)}",
                           noise.raw)
        if conn.eof:
            return Verdict(False, "closed the connection after a bad-checksum frame; it must "
                           "be dropped silently and the stream kept", corrupt)
        conn.send(good)
        reply = peer.await_reply(frame.seq, "HEALTH_CHECK after the corrupted copy")
        if reply.frame.msg_type is not MsgType.HEALTH_RESPONSE:
            return Verdict(False, f"the retransmitted HEALTH_CHECK got {_describe(reply)}",
                           reply.raw)
        return Verdict(True, f"silent for {window:g} s; the retransmission was answered "
                       f"{_describe(reply)}", corrupt[:50])


# ----------------------------------------------------------------------------- T1-08


def t1_08_content_id(target: Target) -> Verdict:
    """Write a record, take the knowledge_id from MEMORY_WRITE_ACK and compare it with the
    one computed locally from the same core/created_at/created_by.

    The client must send a knowledge_id (T1-04 makes it required), so a node that merely
    echoed it would pass step 1. Step 2 (PROFILE §2, §6) therefore sends a record whose id
    is off by one hex digit and requires that it is not acknowledged under that id."""
    record = fresh_record(target.config.scope, _created_by(target), label="t1-08")
    expected = expected_knowledge_id(record)
    peer = target.active()
    with peer.conn:
        reply = _write(target, peer, record)
        if not _is_ack(reply, Status.CREATED, Status.OK):
            return Verdict(False, f"write answered {_describe(reply)}", reply.raw)
        got = _ack_id(reply)
        if got != expected:
            return Verdict(False, f"ack knowledge_id {got} != locally computed {expected}",
                           reply.raw)
    checks = [Check("ack id equals local SHA-256", True, expected)]
    wrong = with_wrong_id(
        fresh_record(target.config.scope, _created_by(target), label="t1-08-wrong")
    )
    peer = target.active()
    with peer.conn:
        try:
            probe = _write(target, peer, wrong)
        except NodeViolationError as exc:
            checks.append(Check("mismatched id refused", True, str(exc)))
            return Verdict(True, f"ack id = local id {expected}; a mismatched id was refused "
                           "with 0x00FF", reply.raw, tuple(checks))
        except NodeFaultError as exc:
            checks.append(Check("mismatched id refused", False, str(exc)))
            return Verdict(False, f"mismatched id probe: {exc}", exc.evidence, tuple(checks))
    if probe.frame.msg_type is MsgType.ERROR and (probe.status or 0) >= 400:
        checks.append(Check("mismatched id refused", True, _describe(probe)))
        return Verdict(True, f"ack id = local id {expected}; a mismatched id was refused "
                       f"({_describe(probe)})", reply.raw, tuple(checks))
    checks.append(Check("mismatched id refused", False, _describe(probe)))
    return Verdict(False, f"a record whose knowledge_id does not match its content was "
                   f"answered {_describe(probe)} id={_ack_id(probe)}", probe.raw, tuple(checks))


LEVEL_1: tuple[Spec, ...] = (
    Spec("T1-01", "Frame magic bytes", t1_01_magic),
    Spec("T1-02", "Capability hello", t1_02_hello),
    Spec("T1-03", "Protocol violation response", t1_03_violation),
    Spec("T1-04", "AMF schema validation", t1_04_schema),
    Spec("T1-05", "Knowledge immutability", t1_05_immutability),
    Spec("T1-06", "State machine enforcement", t1_06_state),
    Spec("T1-07", "Checksum silent discard", t1_07_checksum),
    Spec("T1-08", "Content-addressed knowledge id", t1_08_content_id),
)
