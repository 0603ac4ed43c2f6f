"""The one exception the frame layer raises for a peer's mistake (PROFILE §2).

``FrameViolationError`` *is a* ``RemoteProtocolError`` so callers that catch the root class keep
working; it only adds ``ref_seq`` so the 0x00FF reply can name the frame it answers.
"""

from __future__ import annotations

from amcp.errors import RemoteProtocolError, Status


class FrameViolationError(RemoteProtocolError):
    """The peer sent bytes the frame layer must answer with PROTOCOL_VIOLATION and close.

    ``ref_seq`` is the SEQUENCE_NUMBER of the offending frame when its header could be read
    (it cannot be after bad magic: the bytes are not a header at all), else ``None``.
    """

    def __init__(
        self, message: str, *, status: Status = Status.PROTOCOL_ERROR, ref_seq: int | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.ref_seq = ref_seq
