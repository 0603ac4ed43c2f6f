"""A tiny AMCP node built from raw sockets, correct by default and wrong on request.

It exists to prove each T1 procedure can FAIL: every ``Faults`` flag breaks exactly one
rule. It is deliberately not ``amcp.node`` — it runs the sans-IO ``Session`` in node role
over a thread per connection, with a dict for a store — so the kit's own tests do not
depend on the real server being finished (or correct).
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from amcp.amf import parse_record, verify_integrity
from amcp.clock import HLC
from amcp.conformance import KitConfig
from amcp.errors import IntegrityError, Status, ValidationError
from amcp.session import (
    CloseConnection,
    Event,
    LocalNode,
    NodeIdentity,
    NodeType,
    NodeURI,
    Request,
    Role,
    SendFrame,
    Session,
    SessionState,
    TrustConfig,
)
from amcp.wire import Frame, FrameDecoder, FrameViolationError, MsgType, encode_frame

# Small waits so the whole fault matrix runs in seconds; the defaults are the spec's.
FAST = KitConfig(timeout=3.0, silence_window=0.3, close_within=1.0, hello_wait=0.3)

NODE_CAPS: dict[str, Any] = {
    "memory_read": True,
    "memory_write": True,
    "memory_invalidate": False,
    "vector_search": False,
    "amql_query": False,
    "distributed_sync": False,
    "causal_clock": True,
    "streaming": False,
    "compression": False,
    "max_context_tokens": 8000,
    "supported_amf_versions": ["1.0"],
    "supported_knowledge_types": ["KT-FACT", "KT-PATTERN"],
}
NODE_ID = NodeIdentity.generate()


@dataclass(frozen=True, slots=True)
class Faults:
    """Each flag breaks one Level-1 rule (the test id it must make fail is in the comment)."""

    bad_magic_out: bool = False  # T1-01: every frame sent starts with "AMCQ"
    hello_not_first: bool = False  # T1-02: an ERROR frame goes out before the hello
    bad_hello_fields: bool = False  # T1-02: the hello's amcp_version is "1.0" (needs x.y.z)
    magic_answered_normally: bool = False  # T1-03: bad magic gets an ERROR frame, stays open
    violation_without_close: bool = False  # T1-03/T1-06: 0x00FF sent, connection kept open
    accept_malformed: bool = False  # T1-04: schema errors acked 201
    violation_on_malformed: bool = False  # T1-04: schema errors answered 0x00FF, not ERROR
    allow_overwrite: bool = False  # T1-05: same id, new content: stored, acked 201
    read_before_handshake: bool = False  # T1-06: MEMORY_READ in INIT/HANDSHAKING answered
    answer_bad_checksum: bool = False  # T1-07: a dropped frame is answered with ERROR
    close_on_bad_checksum: bool = False  # T1-07: a dropped frame closes the connection
    wrong_ack_id: bool = False  # T1-08: ack carries an id hashed the wrong way
    accept_wrong_id: bool = False  # T1-08: a record whose id mismatches is stored and acked


def _local_node() -> LocalNode:
    address = NodeURI.for_capabilities(NodeType.DB, "fake", NODE_CAPS, region="test")
    return LocalNode(NODE_ID, address, NODE_CAPS, compression=False)


@dataclass
class FakeNode:
    """``with FakeNode.running(Faults(...)) as node:`` → ``node.host``, ``node.port``."""

    faults: Faults = field(default_factory=Faults)
    host: str = "127.0.0.1"
    port: int = 0
    store: dict[str, dict[str, Any]] = field(default_factory=dict)
    _listener: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    @contextmanager
    def running(cls, faults: Faults | None = None) -> Iterator[FakeNode]:
        node = cls(faults or Faults())
        node.start()
        try:
            yield node
        finally:
            node.stop()

    def start(self) -> None:
        self._listener = socket.create_server((self.host, 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._spawn(self._accept_loop)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        if self._listener is not None:
            self._listener.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._spawn(self._serve, sock)

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            sock.settimeout(0.05)
            _Conn(self, sock).run()


class _Conn:
    """One connection's driver loop: decoder → session → application → socket."""

    def __init__(self, node: FakeNode, sock: socket.socket) -> None:
        self.node, self.sock, self.f = node, sock, node.faults
        self.session = Session(
            Role.NODE, _local_node(), clock=HLC("fake"), monotonic=time.monotonic,
            trust=TrustConfig(trust_local=True),
        )
        self.decoder = FrameDecoder()
        self.dead = False  # after a violation: the decoder is spent, only close remains

    def write(self, frame: Frame) -> None:
        data = encode_frame(frame)
        if self.f.bad_magic_out:
            data = b"AMCQ" + data[4:]
        try:
            self.sock.sendall(data)
        except OSError:
            self.dead = True

    def extra(self, mt: MsgType, payload: dict[str, Any]) -> Frame:
        # A frame the session never stamped. Seq 0 (never a real one) makes a client session
        # drop it as a duplicate, so the fault is seen only by the test that looks for it.
        return Frame(mt, payload, seq=0)

    def run(self) -> None:
        if self.f.hello_not_first:
            self.write(self.extra(MsgType.ERROR, {"status": 500, "reason": "hi", "ref_seq": 0}))
        hello = self.session.start()
        if self.f.bad_hello_fields:
            hello = Frame(hello.msg_type, {**hello.payload, "amcp_version": "1.0"}, hello.seq,
                          hello.session_id, hello.clock)
        self.write(hello)
        while not self.node._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            if self.dead:
                continue  # violation_without_close: keep the socket, read nothing more
            if not self.feed(data):
                return

    def feed(self, data: bytes) -> bool:
        before = self.decoder.dropped_bad_checksum
        try:
            frames = self.decoder.feed(data)
        except FrameViolationError as exc:
            if self.f.magic_answered_normally:
                self.write(self.extra(MsgType.ERROR, {"status": 400, "reason": "bad frame"}))
                self.decoder = FrameDecoder()
                return True
            return self.handle(self.session.fail(exc.status, exc.message, exc.ref_seq))
        if self.decoder.dropped_bad_checksum > before:
            if self.f.close_on_bad_checksum:
                return False
            if self.f.answer_bad_checksum:
                self.write(self.extra(MsgType.ERROR, {"status": 400, "reason": "bad checksum"}))
        for frame in frames:
            if (
                self.f.read_before_handshake
                and frame.msg_type is MsgType.MEMORY_READ
                and self.session.state in (SessionState.INIT, SessionState.HANDSHAKING)
            ):
                self.write(self.extra(MsgType.MEMORY_READ_RESPONSE,
                                      {"status": 200, "ref_seq": frame.seq, "results": []}))
                continue
            if not self.handle(self.session.receive(frame)):
                return False
        return True

    def handle(self, events: list[Event]) -> bool:
        """Act on session events; False when the connection must close now."""
        for event in events:
            if isinstance(event, SendFrame):
                self.write(event.frame)
            elif isinstance(event, Request):
                reply = self.answer(event.frame)
                if isinstance(reply, list):
                    return self.handle(reply)
                self.write(reply)
            elif isinstance(event, CloseConnection):
                if self.f.violation_without_close:
                    self.dead = True
                    return True
                return False
        return True

    # ------------------------------------------------------------------ application

    def answer(self, req: Frame) -> Frame | list[Event]:
        s, mt = self.session, req.msg_type
        if mt is MsgType.COLD_BOOT_REQUEST:
            return s.reply(req, MsgType.COLD_BOOT_RESPONSE, {
                "pack": {"items": [], "zones": {}}, "confirmation": "[AMCP 1.0] fake",
                "urgent_signals": [], "cse_ms": 0,
            })
        if mt is MsgType.HEALTH_CHECK:
            return s.reply(req, MsgType.HEALTH_RESPONSE, {
                "state": s.state.value, "hlc": 0,
                "store": {"records": len(self.node.store), "bytes": 0}, "uptime_s": 0,
            })
        if mt is MsgType.MEMORY_WRITE:
            return self.write_amf(req, req.payload.get("amf"))
        if mt is MsgType.MEMORY_READ:
            ids = req.payload.get("ids") or []
            with self.node._lock:
                found = [self.node.store[i] for i in ids if i in self.node.store]
            return s.reply(req, MsgType.MEMORY_READ_RESPONSE, {"results": found})
        return s.reply_error(req, Status.BAD_REQUEST, f"{mt.name} not supported by the fake")

    def write_amf(self, req: Frame, amf: Any) -> Frame | list[Event]:
        s, f = self.session, self.f
        try:
            record = parse_record(amf, verify=False)
        except ValidationError as exc:
            if f.violation_on_malformed:
                return s.fail(Status.BAD_REQUEST, str(exc), req.seq)
            if not f.accept_malformed:
                return s.reply_error(req, Status.BAD_REQUEST, f"MALFORMED_AMF: {exc}")
            return self.ack(req, amf.get("knowledge_id") if isinstance(amf, dict) else None)
        kid = record.knowledge_id
        with self.node._lock:
            existing = self.node.store.get(kid)
        if existing is not None and existing != amf and not f.allow_overwrite:
            return s.reply_error(req, Status.CONFLICT, f"{kid} exists with other content")
        try:
            verify_integrity(record)
        except IntegrityError as exc:
            if not f.accept_wrong_id:
                return s.fail(Status.PROTOCOL_ERROR, str(exc), req.seq)
        with self.node._lock:
            self.node.store[kid] = dict(amf)
        if f.wrong_ack_id:  # hashes the JSON-ish repr instead of canonical MessagePack
            kid = "K-" + hashlib.sha256(repr(amf["core"]).encode()).hexdigest()
        return self.ack(req, kid, Status.OK if existing == amf else Status.CREATED)

    def ack(self, req: Frame, kid: Any, status: Status = Status.CREATED) -> Frame:
        return self.session.reply(
            req, MsgType.MEMORY_WRITE_ACK, {"knowledge_id": kid, "hlc": 0}, status=status
        )


@dataclass
class RawServer:
    """A listener whose every connection is handed to ``handler(sock, stop)`` in a thread:
    for nodes too broken to build from a Session (silent, garbage-spewing)."""

    handler: Any
    host: str = "127.0.0.1"
    port: int = 0
    _node: FakeNode = field(default_factory=FakeNode)

    @classmethod
    @contextmanager
    def running(cls, handler: Any) -> Iterator[RawServer]:
        server = cls(handler)
        node = server._node
        node._serve = server._serve  # type: ignore[method-assign]
        node.start()
        server.port = node.port
        try:
            yield server
        finally:
            node.stop()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            sock.settimeout(0.05)
            self.handler(sock, self._node._stop)


def silent(sock: socket.socket, stop: threading.Event) -> None:
    """Accept, read, never answer, never close (until the kit does)."""
    while not stop.is_set():
        try:
            if not sock.recv(65536):
                return
        except TimeoutError:
            continue
        except OSError:
            return
