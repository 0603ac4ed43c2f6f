"""``Channel``: one connection's Session + FrameDecoder + encoder settings, still sans-IO.

The server and the client both drive a Channel: bytes in (``feed``), bytes out
(``take_output``), events for the application. It exists because three things must happen
in strict order and are easy to get wrong in two drivers:

1. **Encode at the moment the session emits a frame.** A CAPABILITY_RESPONSE emitted before
   the handshake completes must go out in the clear, everything after it encrypted; so each
   ``SendFrame`` is encoded when it is produced, not after a whole batch of input.
2. **Install the cipher between two frames.** The peer's first encrypted frame can arrive in
   the same TCP segment as its CAPABILITY_RESPONSE; until the handshake completes the
   decoder is fed exactly one frame at a time (split on PAYLOAD_LENGTH), so the key is in
   place before the next frame is decrypted.
3. **One 0x00FF, then nothing.** A codec violation becomes ``session.fail``; afterwards
   input is ignored and only the close remains.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from amcp.errors import LocalProtocolError, Status
from amcp.session import (
    CloseConnection,
    Event,
    HandshakeComplete,
    Negotiated,
    SendFrame,
    Session,
)
from amcp.session.identity import b64url_decode
from amcp.wire import (
    HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD,
    Flag,
    Frame,
    FrameCipher,
    FrameDecoder,
    FrameViolationError,
    MsgType,
    encode_frame,
    handshake_salt,
)

_LENGTH = struct.Struct(">I")
_LENGTH_OFFSET = 10
_FLAGS_LOW = 9  # FLAGS is a big-endian u16 at offset 8; the transport bits are in byte 9
_FRAGMENTED = int(Flag.FRAGMENTED)
# Enum members as globals on the per-request path: EnumType.__getattr__ makes `M.X` a slow
# lookup in Python 3.11 (see amcp.session.session).
_PROTOCOL_VIOLATION = MsgType.PROTOCOL_VIOLATION


def _count_frames(data: bytes) -> int:
    """How many wire frames ``data`` (whole frames, back to back) holds."""
    count = pos = 0
    while pos < len(data):
        pos += HEADER_SIZE + _LENGTH.unpack_from(data, pos + _LENGTH_OFFSET)[0]
        count += 1
    return count


class Channel:
    """Protocol state of one connection; the asyncio code around it only moves bytes."""

    __slots__ = (
        "_compress",
        "_input_max",
        "_max_payload",
        "_nonce",
        "_out",
        "_pre",
        "cipher",
        "closing",
        "decoder",
        "negotiated",
        "session",
    )

    def __init__(
        self, session: Session, *, max_payload: int = MAX_PAYLOAD,
        handshake_max_payload: int | None = None,
    ) -> None:
        self.session = session
        # Until the handshake completes the peer is unauthenticated and may only send a
        # hello, a capability response, HEALTH_CHECK or SESSION_END — all small. A lower
        # cap then (``handshake_max_payload``) keeps a stranger from making the node hold
        # 10 MiB per socket before it has proved anything; the full cap returns on
        # HandshakeComplete.
        self._input_max = max_payload
        first = max_payload if handshake_max_payload is None else min(
            max_payload, handshake_max_payload
        )
        self.decoder = FrameDecoder(
            accept_compression=session.local.compression, max_payload=first
        )
        self.cipher: FrameCipher | None = None
        self.negotiated: Negotiated | None = None
        self.closing: str | None = None  # set once the session asked to close
        self._compress = False  # nothing is compressed before the peer agreed to it
        self._max_payload = max_payload
        self._out = bytearray()
        self._pre = bytearray()  # bytes not yet given to the decoder (handshake only)
        self._nonce = b""

    # ------------------------------------------------------------------ output

    def start(self) -> None:
        """Queue our CAPABILITY_HELLO (T1-02: the first frame on the connection)."""
        frame = self.session.start()
        self._nonce = b64url_decode(frame.payload["nonce"])
        self._emit(frame)

    def take_output(self) -> bytes:
        data = bytes(self._out)
        self._out.clear()
        return data

    @property
    def pending_output(self) -> int:
        return len(self._out)

    def _emit(self, frame: Frame) -> None:
        if frame.msg_type is _PROTOCOL_VIOLATION:
            # Always in the clear: the violation may be that the keys do not agree, and the
            # reason is ours (<= 256 chars), never the peer's data.
            self._out += encode_frame(frame, compress=False)
            return
        data = encode_frame(
            frame, cipher=self.cipher, compress=self._compress, max_payload=self._max_payload
        )
        self._out += data
        if data[_FLAGS_LOW] & _FRAGMENTED:
            # A message over max_payload went out as n fragments numbered seq .. seq+n-1:
            # the session must not hand those numbers out again (with encryption a reused
            # number would reuse an AES-GCM nonce). Checking one header byte keeps the
            # common single-frame case free of any extra work.
            self.session.consume_seqs(_count_frames(data) - 1)

    def _handle(self, events: list[Event]) -> list[Event]:
        """Encode SendFrames in order, configure the codec on HandshakeComplete."""
        for event in events:
            if type(event) is SendFrame:
                self._emit(event.frame)
            elif type(event) is HandshakeComplete:
                try:
                    self._configure(event.negotiated)
                except FrameViolationError as exc:  # e.g. the peer reflected our X25519 key
                    return events + self._handle(self.session.fail(exc.status, exc.message, None))
            elif type(event) is CloseConnection and self.closing is None:
                self.closing = event.reason
        return events

    def _configure(self, negotiated: Negotiated) -> None:
        self.negotiated = negotiated
        self._compress = negotiated.compression
        self._max_payload = min(self._max_payload, negotiated.max_payload)
        self.decoder.accept_compression = negotiated.compression
        self.decoder.max_payload = self._input_max
        if negotiated.encryption:
            assert negotiated.x25519_private is not None
            assert negotiated.peer_x25519 is not None
            salt = handshake_salt(self._nonce, negotiated.peer.nonce)
            self.cipher = FrameCipher(negotiated.x25519_private, negotiated.peer_x25519, salt=salt)
            self.decoder.cipher = self.cipher

    # ------------------------------------------------------------------ input

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held (the slowloris timer runs while this is > 0)."""
        return len(self._pre) + self.decoder.buffered + self.decoder.reassembly_buffered

    def feed(self, data: bytes) -> list[Event]:
        """Decode ``data`` and run every complete frame through the session."""
        if self.closing is not None:
            return []  # after a violation or close: nothing more is read into the session
        if self.negotiated is None:
            return self._feed_handshaking(data)
        return self._feed(data)

    def _feed(self, data: bytes) -> list[Event]:
        try:
            frames = self.decoder.feed(data)
        except FrameViolationError as exc:
            return self._handle(self.session.fail(exc.status, exc.message, exc.ref_seq))
        events: list[Event] = []
        receive = self.session.receive
        for frame in frames:
            events += self._handle(receive(frame))
            if self.closing is not None:
                break
        return events

    def _feed_handshaking(self, data: bytes) -> list[Event]:
        pre = self._pre
        pre += data
        events: list[Event] = []
        while self.negotiated is None and self.closing is None:
            if len(pre) < HEADER_SIZE:
                # A wrong magic is refused at its first byte, not after 50 (slowloris).
                if pre[: len(MAGIC)] != MAGIC[: len(pre)]:
                    events += self._feed(bytes(pre))
                    pre.clear()
                return events
            length = _LENGTH.unpack_from(pre, _LENGTH_OFFSET)[0]
            if length > self.decoder.max_payload:
                events += self._feed(bytes(pre))  # the decoder names the violation
                pre.clear()
                return events
            total = HEADER_SIZE + length
            if len(pre) < total:
                return events
            chunk = bytes(pre[:total])
            del pre[:total]
            events += self._feed(chunk)
        if pre and self.closing is None:
            rest = bytes(pre)
            pre.clear()
            events += self._feed(rest)
        return events

    # ------------------------------------------------------------------ application

    def send(self, msg_type: MsgType, payload: Mapping[str, Any], flags: Flag = Flag.NONE) -> Frame:
        frame = self.session.send(msg_type, payload, flags=flags)
        self._emit(frame)
        return frame

    def reply(
        self,
        request: Frame,
        msg_type: MsgType,
        payload: Mapping[str, Any],
        status: Status | int = Status.OK,
    ) -> Frame | None:
        """Answer ``request``; None when the session can no longer answer (it ended)."""
        if self.closing is not None:
            return None
        try:
            frame = self.session.reply(request, msg_type, payload, status=status)
        except LocalProtocolError:
            return None
        self._emit(frame)
        return frame

    def reply_error(self, request: Frame, status: Status | int, reason: str) -> None:
        if self.closing is not None:
            return
        try:
            frame = self.session.reply_error(request, status, reason[:1024])
        except LocalProtocolError:
            return
        self._emit(frame)

    def violation(self, status: Status, reason: str, ref_seq: int | None) -> list[Event]:
        if self.closing is not None:
            return []
        return self._handle(self.session.fail(status, reason, ref_seq))

    def end(self, reason: str | None = None, summary: str | None = None) -> Frame | None:
        try:
            frame = self.session.end(reason, summary)
        except LocalProtocolError:
            return None
        self._emit(frame)
        return frame

    def tick(self, now: float) -> list[Event]:
        return self._handle(self.session.tick(now))
