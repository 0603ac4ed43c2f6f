"""Wire bytes → Frames, sans-IO: ``FrameDecoder.feed(bytes) -> list[Frame]``.

Order of judgement for each frame, and why:

1. Header alone (magic, major version, reserved flags, PAYLOAD_LENGTH): these decide the
   framing itself, so they are judged as soon as 50 bytes are in — an announced 4 GiB
   payload is refused before a byte of it is read or allocated.
2. CHECKSUM: a frame that fails it is dropped silently (T1-07) and the stream continues.
3. Everything else (MSG_TYPE, negotiated flags, AES-GCM, LZ4, fragments, MessagePack) only
   for frames whose CRC holds, so line noise is dropped rather than turned into a violation.

Any violation raises :class:`FrameViolationError` (a ``RemoteProtocolError``); the decoder is
dead afterwards — the connection must close (PROFILE §2) — and every later ``feed`` raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from amcp.wire.compress import decompress_bounded
from amcp.wire.constants import (
    DEFAULT_MAX_REASSEMBLY,
    HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD,
    Flag,
    MsgType,
)
from amcp.wire.crypto import FrameCipher
from amcp.wire.encoder import check_max_payload
from amcp.wire.errors import FrameViolationError
from amcp.wire.frame import Frame
from amcp.wire.header import CHECKSUM_OFFSET, HEADER, frame_checksum, header_violation

_MSG_TYPES: dict[int, MsgType] = {m.value: m for m in MsgType}
# Building IntFlag values is slow; after the reserved-bit check only 64 values can occur.
_FLAGS: tuple[Flag, ...] = tuple(Flag(i) for i in range(64))
_SPECIAL = int(Flag.ENCRYPTED | Flag.COMPRESSED | Flag.FRAGMENTED | Flag.FINAL_FRAGMENT)
_ENCRYPTED = int(Flag.ENCRYPTED)
_COMPRESSED = int(Flag.COMPRESSED)
_FRAGMENTED = int(Flag.FRAGMENTED)
_FINAL = int(Flag.FINAL_FRAGMENT)
_MAGIC_LEN = len(MAGIC)

# (msg_type, flags, seq, session_id, clock, version) of one wire frame.
_Head = tuple[MsgType, int, int, bytes, int, int]


def _frame(head: _Head, payload: dict[str, Any]) -> Frame:
    msg_type, flags, seq, session_id, clock, version = head
    return Frame(msg_type, payload, seq, session_id, clock, _FLAGS[flags], version)


def decode_payload(data: bytes, seq: int) -> dict[str, Any]:
    """The payload map: zero bytes are {}; anything but a str-keyed map is a violation."""
    if not data:
        return {}
    try:
        obj = msgpack.unpackb(data, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        # ValueError covers ExtraData, FormatError, StackError and bad UTF-8.
        raise FrameViolationError(f"undecodable payload: {exc}", ref_seq=seq) from None
    if type(obj) is not dict:
        raise FrameViolationError(f"payload is a {type(obj).__name__}, not a map", ref_seq=seq)
    for key in obj:
        if type(key) is not str:
            raise FrameViolationError("payload map has a non-string key", ref_seq=seq)
    return obj


@dataclass(slots=True)
class _Partial:
    """A fragmented message being put back together; the first fragment names it."""

    head: _Head
    next_seq: int
    size: int = 0
    chunks: list[bytes] = field(default_factory=list)


class FrameDecoder:
    """Incremental frame decoder for one direction of one connection.

    Feed it whatever the transport delivers — whole frames, single bytes, several frames
    at once. Stream bytes buffered never exceed one header plus one ``max_payload``;
    reassembly never exceeds ``max_reassembly``. Set ``cipher`` once the hello has agreed
    a key; until then an ENCRYPTED frame is a violation, as is COMPRESSED when
    ``accept_compression`` is false.
    """

    __slots__ = (
        "_buf",
        "_error",
        "_need",
        "_partial",
        "_skipping",
        "accept_compression",
        "cipher",
        "dropped_bad_checksum",
        "dropped_fragments",
        "max_payload",
        "max_reassembly",
    )

    def __init__(
        self,
        *,
        cipher: FrameCipher | None = None,
        accept_compression: bool = True,
        max_payload: int = MAX_PAYLOAD,
        max_reassembly: int = DEFAULT_MAX_REASSEMBLY,
    ) -> None:
        check_max_payload(max_payload)
        if max_reassembly < max_payload:
            raise ValueError("max_reassembly must be at least max_payload")
        self.cipher = cipher
        self.accept_compression = accept_compression
        self.max_payload = max_payload
        self.max_reassembly = max_reassembly
        #: Frames dropped silently because their CRC-32C did not match (T1-07).
        self.dropped_bad_checksum = 0
        #: Valid fragments discarded because a sibling fragment was lost to a bad CRC.
        self.dropped_fragments = 0
        self._buf = bytearray()
        # Bytes the buffer must hold before parsing can progress: a header, then the frame.
        self._need = HEADER_SIZE
        self._partial: _Partial | None = None
        # After a CRC drop we cannot tell which message the lost frame belonged to; any
        # fragmented message seen next is discarded whole rather than mis-assembled.
        self._skipping = False
        self._error: FrameViolationError | None = None

    @property
    def buffered(self) -> int:
        """Stream bytes held for an incomplete frame (≤ HEADER_SIZE + max_payload)."""
        return len(self._buf)

    @property
    def reassembly_buffered(self) -> int:
        """Payload bytes held for an incomplete fragmented message (≤ max_reassembly)."""
        return 0 if self._partial is None else self._partial.size

    @property
    def failed(self) -> bool:
        return self._error is not None

    def feed(self, data: bytes) -> list[Frame]:
        """Consume ``data``; return the complete logical messages it finished, in order."""
        if self._error is not None:
            raise FrameViolationError(
                f"decoder already failed: {self._error}",
                status=self._error.status,
                ref_seq=self._error.ref_seq,
            )
        try:
            if self._buf:
                view = self._take(data)
                if view is None:
                    return []
            else:
                # Nothing pending (the common case): parse the caller's bytes in place.
                view = data if type(data) is bytes else bytes(data)
            out: list[Frame] = []
            pos = self._parse(view, out)
            if pos < len(view):
                self._stash(view, pos)
        except FrameViolationError as exc:
            self._error = exc
            self._buf = bytearray()
            self._partial = None
            raise
        return out

    def _parse(self, view: bytes, out: list[Frame]) -> int:
        """Append the messages ``view`` completes to ``out``; return where parsing stopped
        (the start of an incomplete frame, or ``len(view)``)."""
        pos, end = 0, len(view)
        while end - pos >= HEADER_SIZE:
            magic, version, mtype, flags, length, seq, sid, clock, checksum = HEADER.unpack_from(
                view, pos
            )
            violation = header_violation(
                magic, version, flags, length, seq=seq, max_payload=self.max_payload
            )
            if violation is not None:
                raise violation
            start = pos + HEADER_SIZE
            stop = start + length
            if stop > end:
                break
            prefix, payload = view[pos : pos + CHECKSUM_OFFSET], view[start:stop]
            pos = stop
            if frame_checksum(prefix, payload) != checksum:
                self._drop_bad_checksum()
                continue
            msg_type = _MSG_TYPES.get(mtype)
            if msg_type is None:
                raise FrameViolationError(f"unknown MSG_TYPE {mtype:#06x}", ref_seq=seq)
            head = (msg_type, flags, seq, sid, clock, version)
            if flags & _SPECIAL or self._partial is not None or self._skipping:
                frame = self._special(prefix, head, payload)
                if frame is not None:
                    out.append(frame)
            else:
                out.append(_frame(head, decode_payload(payload, seq)))
        return pos

    def _take(self, data: bytes) -> bytes | None:
        """Buffered bytes plus ``data`` if a frame may now be complete, else ``None``."""
        buf = self._buf
        buf += data
        if len(buf) < self._need:
            # Append only, so byte-by-byte feeding of a large frame stays linear instead
            # of re-copying the buffer on every call.
            if len(buf) <= _MAGIC_LEN:
                self._check_magic_prefix(buf)
            return None
        self._buf = bytearray()
        return bytes(buf)

    def _stash(self, view: bytes, pos: int) -> None:
        """Keep the incomplete tail of ``view`` and note how much it needs to progress."""
        rest = view[pos:]
        self._buf = bytearray(rest)
        if len(rest) < HEADER_SIZE:
            self._need = HEADER_SIZE
            self._check_magic_prefix(rest)
        else:
            # feed() validated this header, so the need is bounded by max_payload.
            self._need = HEADER_SIZE + HEADER.unpack_from(rest, 0)[4]

    @staticmethod
    def _check_magic_prefix(head: bytes | bytearray) -> None:
        # Refuse a wrong magic as soon as it shows, not only once 50 bytes are in.
        n = min(len(head), _MAGIC_LEN)
        if head[:n] != MAGIC[:n]:
            raise FrameViolationError(f"bad magic {bytes(head[:n])!r}")

    def _drop_bad_checksum(self) -> None:
        self.dropped_bad_checksum += 1
        if self._partial is not None:
            self.dropped_fragments += len(self._partial.chunks)
            self._partial = None
        self._skipping = True

    def _special(self, prefix: bytes, head: _Head, payload: bytes) -> Frame | None:
        """Everything but the plain fast path: crypto, compression, fragments, resync."""
        flags, seq = head[1], head[2]
        fragmented = flags & _FRAGMENTED
        if flags & _FINAL and not fragmented:
            raise FrameViolationError("FINAL_FRAGMENT without FRAGMENTED", ref_seq=seq)
        if flags & _ENCRYPTED and self.cipher is None:
            raise FrameViolationError("ENCRYPTED but encryption was not negotiated", ref_seq=seq)
        if flags & _COMPRESSED and not self.accept_compression:
            raise FrameViolationError("COMPRESSED but compression was not negotiated", ref_seq=seq)
        if self._skipping:
            if fragmented:
                self.dropped_fragments += 1
                if flags & _FINAL:
                    self._skipping = False
                return None
            self._skipping = False
        if self._partial is not None and not fragmented:
            raise FrameViolationError("frame interleaved with a fragmented message", ref_seq=seq)
        if flags & _ENCRYPTED:
            assert self.cipher is not None
            payload = self.cipher.decrypt(seq, prefix, payload)
        if flags & _COMPRESSED:
            payload = decompress_bounded(payload, self.max_payload, seq)
        if fragmented:
            return self._reassemble(head, payload)
        return _frame(head, decode_payload(payload, seq))

    def _reassemble(self, head: _Head, chunk: bytes) -> Frame | None:
        msg_type, flags, seq = head[0], head[1], head[2]
        partial = self._partial
        if partial is None:
            # The first fragment's header speaks for the whole message (seq, flags, ...).
            partial = self._partial = _Partial(head, seq)
        elif msg_type is not partial.head[0] or seq != partial.next_seq:
            raise FrameViolationError(
                f"fragment {msg_type.name} seq {seq} does not continue "
                f"{partial.head[0].name} expected at seq {partial.next_seq}",
                ref_seq=seq,
            )
        partial.size += len(chunk)
        if partial.size > self.max_reassembly:
            raise FrameViolationError(
                f"fragmented message exceeds the reassembly cap of {self.max_reassembly} bytes",
                ref_seq=partial.head[2],
            )
        partial.chunks.append(chunk)
        partial.next_seq = seq + 1
        if not flags & _FINAL:
            return None
        self._partial = None
        return _frame(partial.head, decode_payload(b"".join(partial.chunks), partial.head[2]))
